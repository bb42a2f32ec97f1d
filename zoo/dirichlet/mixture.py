"""The Dirichlet-process mixture ("CDP" in DM05 §7.1): a NumPyro program and a fitted model.

Generative story (DM05 §3.2 with a single reference type, Appendix A; Neal 2000 §2):

    α ~ Gamma(a, b)                       (or fixed)
    G ~ DP(α, G0),  φ_k ~ G0              cluster parameters
    c_i | G ~ G,    x_i | c_i ~ F(φ_{c_i})

Two layers (DESIGN.md, "Two layers, one truth"):

1. :func:`dp_mixture_program` — the NumPyro program, with the DP truncated at ``max_clusters``
   sticks (stick-breaking, Sethuraman 1994) and an enumerated assignment per point. Plates:
   ``components`` (parameters), ``sticks`` (K - 1 stick fractions), ``points`` and, for
   per-feature families, ``features``. It simulates data with ``numpyro.infer.Predictive`` and gives
   the enumerated marginal likelihood through ``numpyro.contrib.funsor``.
2. :class:`DPMixture` — fits the same model with the Gibbs kernels of :mod:`inference.neal`
   (Neal 2000 Algorithms 2, 3 and 8) on many chains at once (:mod:`inference.chains`), and
   returns draws with ArviZ diagnostics (:mod:`inference.diagnostics`).
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Any

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
import xarray as xr
from scipy import special

from inference import diagnostics, subcluster
from inference.chains import ChainResult, continue_chains, sample_chains, stack_states
from inference.concentration import GammaPrior
from inference.display import Card, Described, call_text, chains_card, init_defaults
from inference.native.backend import resolve_backend
from inference.neal import ALGORITHMS, build_kernel
from inference.neal import init as init_state
from inference.provenance import check_same_float_width
from inference._validation import (arrays_digest, as_float_array, as_index_array, check_bool, check_choice, check_int,
                                   check_key, check_memory, check_real, feature_names, in_fitted_order, key_as_data,
                                   key_from_data, row_names, tree_nbytes, user_stacklevel)
from zoo.dirichlet.families import ComponentFamily
from zoo.dirichlet._starts import check_start_memory, one_start, start_kinds, start_labels
from zoo.metrics import clustering_scores

__all__ = ["DEFAULT_SPLIT_MERGE", "INITS", "stick_breaking_weights", "dp_mixture_program", "DPMixture", "DPMixtureFit"]

#: The starting partitions :meth:`DPMixture.fit` names (its ``init``).
INITS = ("dispersed", "random", "single", "kmeans")

DEFAULT_SPLIT_MERGE = 10
"""Split–merge moves per sweep of :class:`DPMixture` by default (Algorithms 2, 3 and 8)."""

DEFAULT_DRAWS = 500
"""Draws per chain of :meth:`DPMixture.fit` with ``until_mixed=False`` and no ``n_draws``."""

UNTIL_MIXED_DRAWS = 10_000
"""The most draws per chain of :meth:`DPMixture.fit` when it runs until its chains mix (its default)
and is given no ``n_draws`` (4,000 until 2026-12-05; the IRM's limit too since). On the standardised
iris and wine data (four keys each, 2026-12-03) the chains mixed after 400–750 and 750–2,250 draws
with Algorithm 8, the default sampler then; 500, the fixed number before, warned on both. With
Algorithm 3, the default since 2026-12-05, they mixed after 230–500 and 260–500. The 138 wines of
``notebooks/dp_heldout_wine.ipynb`` need more: 8,690 and 7,180 draws (keys 0 and 1, 16.2 and
10.7 s on 2 cores), so 4,000 warned (R-hat of K 1.014). Chains that do not mix take longer to say
so: on the breast-cancer data (569 × 30) 12,000 draws took 70 s (R-hat of K 4.7 and 1.11, keys 0
and 1), against 24.5 s for 4,000; give ``time_budget`` to bound a run."""

#: The call that continues a fit's chains until they mix (``n_draws`` the most to add), as its
#: messages name it (``zoo.sklearn`` names its own).
RESUME_CALL = "fit.resume(data, n_draws=..., until_mixed=True)"
#: :meth:`DPMixtureFit.loo` takes a point's importance ratios for bounded, and its k̂ for 0, when
#: the largest of S is at most S to this power times their mean (4.6 for 2,000 draws).
LOO_RATIO_EXPONENT = 0.2
#: What a fit's card shows of its draws: (label, sample name, format).
DP_QUANTITIES = (("clusters (K)", "n_clusters", ".3g"), ("alpha", "alpha", ".3g"), ("log joint", "log_joint", ",.1f"),
                 ("split-merges accepted", "split_merge_accepted", ".3g"))  # per sweep; last: with moves only


# ----------------------------------------------------------------------------------------------
# The program
# ----------------------------------------------------------------------------------------------
def stick_breaking_weights(fractions: jax.Array) -> jax.Array:
    """Mixture weights of a stick-breaking process truncated after len(fractions) + 1 sticks.

    w_k = v_k Π_{l<k} (1 - v_l) for k < K and the last weight takes the remaining mass, so the
    weights sum to one (Ishwaran & James 2001, the truncation used by DM05's cited samplers).

    Parameters
    ----------
    fractions : jax.Array (..., K - 1)
        Stick fractions v_k in (0, 1).

    Returns
    -------
    jax.Array (..., K)
    """
    if fractions is None or isinstance(fractions, (str, bytes)):
        raise TypeError(f"fractions: expected an array of stick fractions, got {type(fractions).__name__}")
    if not isinstance(fractions, jax.core.Tracer):  # inside a program the values are traced: not checked
        values = as_float_array("fractions", fractions, allow_empty=True)
        if values.ndim == 0 or ((values < 0) | (values > 1)).any():
            raise ValueError(f"fractions: expected stick fractions in [0, 1] of shape (..., K - 1), got {values!r}")
    fractions = jnp.asarray(fractions)
    remaining = jnp.cumprod(1.0 - fractions, axis=-1)
    ones = jnp.ones(fractions.shape[:-1] + (1,), fractions.dtype)
    before = jnp.concatenate([ones, remaining], axis=-1)
    return before * jnp.concatenate([fractions, ones], axis=-1)


def dp_mixture_program(
    data: jax.Array | None = None,
    *,
    family: ComponentFamily,
    n_points: int | None = None,
    max_clusters: int = 20,
    alpha: float = 1.0,
    alpha_prior: GammaPrior | None = None,
) -> None:
    """NumPyro program of a DP mixture truncated at ``max_clusters`` components.

    Parameters
    ----------
    data : jax.Array (N, D), optional
        Observations; omit to simulate.
    family : ComponentFamily
        A family with NumPyro sites (the built-in ones have them).
    n_points : int, optional
        Number of points when simulating (ignored when ``data`` is given).
    max_clusters : int
        Truncation level K of the stick-breaking representation.
    alpha : float
        Concentration α, used when ``alpha_prior`` is None.
    alpha_prior : GammaPrior, optional
        Gamma(shape, rate) prior on α (site ``"alpha"``).

    Notes
    -----
    Sites: ``alpha`` (optional), ``fractions`` (plate ``sticks``), ``weights`` (deterministic),
    the family's parameter sites (plate ``components``), ``assignments`` (plate ``points``,
    enumerated in parallel) and ``x``.

    Examples
    --------
    >>> import jax
    >>> from numpyro.infer import Predictive
    >>> from zoo.dirichlet.families import normal_gamma
    >>> draws = Predictive(dp_mixture_program, num_samples=3)(
    ...     jax.random.key(0), family=normal_gamma(2), n_points=5)
    >>> draws["x"].shape
    (3, 5, 2)
    """
    if family.program_params is None or family.program_observe is None:
        raise ValueError(f"family: {family.name!r} has no NumPyro sites; build it with a built-in constructor")
    max_clusters = check_int("max_clusters", max_clusters, minimum=1)
    if data is not None:
        if not isinstance(data, jax.core.Tracer):  # concrete data is checked as a fit checks it
            checked = family.check_data("data", data) if family.check_data is not None else np.asarray(data)
            data = data if hasattr(data, "shape") else jnp.asarray(checked, dtype=jnp.result_type(float))
        n_points = data.shape[0]
    elif n_points is None:
        raise ValueError("n_points: give the number of points to simulate, or data")
    else:
        n_points = check_int("n_points", n_points, minimum=1)
    if alpha_prior is not None:
        alpha = numpyro.sample("alpha", dist.Gamma(alpha_prior.shape, alpha_prior.rate))
    if max_clusters > 1:
        with numpyro.plate("sticks", max_clusters - 1):
            fractions = numpyro.sample("fractions", dist.Beta(1.0, alpha))
        weights = numpyro.deterministic("weights", stick_breaking_weights(fractions))
    else:
        weights = numpyro.deterministic("weights", jnp.ones((1,)))
    params = family.program_params(max_clusters)
    with numpyro.plate("points", n_points, dim=-2):
        assignment = numpyro.sample("assignments", dist.Categorical(weights), infer={"enumerate": "parallel"})
        family.program_observe(params, assignment, data, n_points)


# ----------------------------------------------------------------------------------------------
# The fitted model
# ----------------------------------------------------------------------------------------------
class DPMixtureFit(Described):
    """Draws of a fitted :class:`DPMixture`, with ArviZ diagnostics and clustering scores.

    Attributes
    ----------
    result : ChainResult
        Raw draws (chain, draw, ...) and the final states.
    idata : arviz.InferenceData
        ``posterior`` (assignments, alpha) and ``sample_stats`` (n_clusters, log_joint,
        partition_entropy).
    feature_names : tuple of str or None
        The column names of the data when :meth:`DPMixture.fit` was given a DataFrame whose
        column names are all strings (as scikit-learn's ``feature_names_in_``), else None.

    A fit returned by :meth:`DPMixture.fit` can be continued with :meth:`resume`. Its ``repr`` (and
    its HTML in Jupyter) says what the chains hold and whether they mix.
    """

    def __init__(self, result: ChainResult, *, point_names: Any = None):
        self.result = result
        self._idata = diagnostics.to_inference_data(result, point_names=point_names) if result.samples else None
        self._warned = False  # whether the fit that made this object issued its MixingWarning
        self._continuation: _Continuation | None = None  # set by DPMixture.fit: what resume() needs

    def __getstate__(self) -> dict:
        """The fit's attributes for pickling, with ``_warned`` reset: the warning was issued to the
        session that made the fit, and a fit that does not mix, loaded in another, warns again in
        :meth:`summary`."""
        return {**self.__dict__, "_warned": False}

    @property
    def _continue_with(self) -> str | None:
        """The call that continues these chains, for messages (None: the low-level one)."""
        return RESUME_CALL if getattr(self, "_continuation", None) is not None else None

    @property
    def feature_names(self) -> tuple[str, ...] | None:
        """The column names of the data the fit was given as a DataFrame with string column names, in
        order; None for an array (or a fit built from a ChainResult). Features given to the fit's
        methods later as a DataFrame are matched to these by name (see :meth:`log_predictive_density`)."""
        return getattr(getattr(self, "_continuation", None), "feature_names", None)

    def resume(self, data: Any, *, n_draws: int, draws_per_call: int = 10, time_budget: float | None = None,
               progress: bool = True, until_mixed: bool = False) -> DPMixtureFit:
        """Continue these chains for ``n_draws`` more draws each, as one longer run would have.

        For chains that do not mix yet (the fit's :class:`~inference.diagnostics.MixingWarning`
        says "Run longer"), or that Ctrl-C or a ``time_budget`` stopped: the chains go on from
        their last state with the key of the fit, finishing the warm-up first if it was cut short,
        and the new draws are appended to these. With the same versions, backend, float width and
        CPU (:mod:`inference.provenance`) the result is bit for bit the fit an uninterrupted run of
        all the draws gives when ``draws_per_call`` is the same in both (it sets how the warm-up
        is rounded); elsewhere the continuation is valid but not those bits, and a
        :class:`~inference.provenance.ProvenanceWarning` says so.

        Parameters
        ----------
        data : array_like (N, D)
            The data of the fit (checked against a digest kept by the fit). A DataFrame is matched
            to the fit's :attr:`feature_names` by name: its columns are reordered to theirs, and
            other names are a ``ValueError``.
        n_draws : int
            Draws to add per chain (thinned as the fit was); with ``until_mixed``, the most to add.
        draws_per_call, time_budget, progress
            See :func:`inference.chains.sample_chains`.
        until_mixed : bool
            Stop as soon as the draws of both runs mix, as :meth:`DPMixture.fit`'s ``until_mixed``.

        Returns
        -------
        DPMixtureFit
            Every draw of both runs; ``result.seconds`` adds their times. This fit is unchanged.
        """
        if getattr(self, "_continuation", None) is None:  # objects restored without __init__ have none
            raise ValueError("fit: only a fit returned by DPMixture.fit or resume() can be resumed (this one was "
                             "built from a ChainResult, or restored without what it needs)")
        return self._continuation.model._resume(self, data, n_draws=n_draws, draws_per_call=draws_per_call,
                                                time_budget=time_budget, progress=progress, until_mixed=until_mixed)

    @property
    def idata(self) -> az.InferenceData:
        """The draws as ``arviz.InferenceData`` (a ``ValueError`` if the chains stopped before their
        first draw: their warm-up is then in ``result.final_state``)."""
        if self._idata is None:
            raise ValueError(f"result: {diagnostics.no_draws_message(self.result, self._continue_with)}")
        return self._idata

    def _card(self) -> Card:
        model = getattr(getattr(self, "_continuation", None), "model", None)  # None: no resume() either
        card = Card(f"DPMixtureFit of {model!r}" if model is not None else "DPMixtureFit")
        if self.result.samples:
            card.add("points", f"{self.result.samples['assignments'].shape[-1]:,}")
        moves = model is None or model.n_split_merge > 0 or model.algorithm == "subcluster"
        chains_card(card, self.result, self, quantities=DP_QUANTITIES if moves else DP_QUANTITIES[:-1])
        card.add("see", ["fit.summary()", "fit.point_estimate()", "fit.co_clustering()",
                         "fit.log_predictive_density(data, new_points)", "fit.loo(data)", "fit.idata"]
                 + ([RESUME_CALL] if model is not None else []))
        return card

    @property
    def n_points(self) -> int:
        """Number of points N."""
        return self.idata.posterior.sizes["points"]

    @property
    def mixing(self) -> pd.DataFrame:
        """Mean, sd, ESS, R-hat and mixing status of K, α, the log joint and the entropy of the
        cluster sizes (:func:`inference.diagnostics.partition_entropy`), without a warning.

        The table of :func:`inference.diagnostics.summary` (computed once, a copy each time). For a
        family without the parts that give the samplers their better moves (a ``custom_family`` of
        a log-likelihood and a G0 sampler alone), ``attrs["advice"]``, the closing sentence of the
        warnings, names those parts (:func:`_missing_parts_advice`) in place of the moves the
        model cannot make.
        """
        table = getattr(self, "_mixing", None)
        if table is None:
            table = self._mixing = diagnostics.summary(self.idata, warn=False)
            if self._continue_with:  # the advice to run longer names the call
                table.attrs["continue_with"] = self._continue_with
            if getattr(getattr(self, "_continuation", None), "one_start", False):
                table.attrs["one_start"] = True
            model = getattr(getattr(self, "_continuation", None), "model", None)
            advice = _missing_parts_advice(model, self._continue_with) if model is not None else ""
            if advice:
                table.attrs["advice"] = advice
        return table.copy()

    def summary(self) -> pd.DataFrame:
        """Mean, sd, ESS, R-hat and mixing status of the number of clusters, α, the log joint and the
        entropy of the cluster sizes.

        See :func:`inference.diagnostics.summary`; issues an
        :class:`inference.diagnostics.MixingWarning` naming the quantities that do not mix, unless
        :meth:`DPMixture.fit` issued it already when it returned this fit (the table's ``status``
        column says the same).
        """
        table = self.mixing
        if not getattr(self, "_warned", False):  # objects restored without __init__ have none
            diagnostics.warn_if_not_mixing(table, stacklevel=user_stacklevel())
        return table

    def label_invariant(self) -> az.InferenceData:
        """K, α, log joint and partition entropy as a ``posterior`` group with the fit's attributes,
        for ``az.plot_trace``, ``az.plot_rank`` or ``az.summary`` (``idata``'s posterior holds the
        assignments too, whose labels are exchangeable: their R-hat says nothing of mixing)."""
        return diagnostics.label_invariant(self.idata)

    def co_clustering(self) -> xr.DataArray:
        """Posterior co-clustering matrix (points × points)."""
        return diagnostics.co_clustering_matrix(self.idata)

    def point_estimate(self, loss: str = "vi") -> np.ndarray:
        """Partition minimising the posterior expected ``loss`` ("vi" or "binder")."""
        return diagnostics.point_estimate(self.idata, loss=loss)

    def log_predictive_density(self, data: Any, new_points: Any, *, by_chain: bool = False) -> np.ndarray:
        """Posterior predictive log density log p(x | data) of each new point.

        Averages the Chinese-restaurant predictive of every kept draw of every chain,
        p(x | z, α, data) = [Σ_k n_k p(x | points of k) + α p(x)] / (N + α)
        (:mod:`zoo.dirichlet.predictive`), so the uncertainty in the partition and in α is
        integrated, not plugged in. Its sum over held-out points compares models (families,
        priors of α) on data they were not fitted to; so does its mean against that of
        scikit-learn's ``GaussianMixture.score_samples``. Needs a family with a marginal
        likelihood (every built-in one).

        Parameters
        ----------
        data : array_like (N, D)
            The data of the fit (checked against a digest kept by the fit, as :meth:`resume`).
        new_points : array_like (M, D)
            Points to score, validated as the data are. When the fit was given a DataFrame with
            string column names (:attr:`feature_names`), a DataFrame here (and as ``data``) is
            matched to them by name: the same names in another order are reordered to the fit's,
            and missing or other names are a ``ValueError`` naming them. Arrays, and DataFrames
            with numbered columns, are taken by position.
        by_chain : bool
            Return each chain's own estimate, shape (n_chains, M), instead of the average of all
            chains (chains with equal draws, so the mean of their densities): chains that sit in
            different modes give different predictions, and this shows by how much.

        Returns
        -------
        numpy.ndarray (M,) or (n_chains, M), float64
            Natural logarithms (densities for continuous families, probabilities for discrete ones).

        Examples
        --------
        >>> import jax, numpy as np
        >>> from zoo.dirichlet import DPMixture
        >>> from zoo.dirichlet.families import normal_gamma
        >>> rng = np.random.default_rng(0)
        >>> points = np.concatenate([rng.normal(-3, 1, (40, 1)), rng.normal(3, 1, (40, 1))])
        >>> fit = DPMixture(normal_gamma(1)).fit(points, jax.random.key(0), n_draws=200, progress=False)
        >>> density = np.exp(fit.log_predictive_density(points, [[-3.0], [0.0], [3.0]]))
        >>> bool(density[0] > 5 * density[1] and density[2] > 5 * density[1])  # two modes, a trough between
        True
        """
        from zoo.dirichlet.predictive import posterior_predictive_log_density

        by_chain = check_bool("by_chain", by_chain)
        family, array, samples = self._predictive_inputs(data, "the predictive density")
        new_points = in_fitted_order("new_points", new_points, self.feature_names)
        checker = family.check_data
        points = checker("new_points", new_points) if checker is not None else np.asarray(new_points, dtype=float)
        if points.ndim != 2 or points.shape[1] != array.shape[1]:
            raise ValueError(f"new_points: expected shape (M, {array.shape[1]}) like the data, got {points.shape}")
        if points.shape[0] == 0:
            raise ValueError("new_points: is empty")
        points = self._continuation.model._about_origin(points)
        by_chains = posterior_predictive_log_density(family, array, samples["assignments"], samples["alpha"], points)
        if by_chain:
            return by_chains
        return special.logsumexp(by_chains, axis=0) - np.log(by_chains.shape[0])

    def _predictive_inputs(self, data: Any, needed_by: str) -> tuple[Any, np.ndarray, dict]:
        """The family the kernels sampled with, the fitted data as they took it (checked against the
        fit's digest) and the kept draws, or a ``ValueError`` saying what is missing."""
        if getattr(self, "_continuation", None) is None:
            raise ValueError("fit: only a fit returned by DPMixture.fit or resume() knows its model and data (this one "
                             "was built from a ChainResult, or restored without what it needs)")
        model = self._continuation.model
        family = model.family
        if not family.has_marginal:
            raise ValueError(f"fit: the family {family.name!r} has no marginal likelihood (point_stats, log_marginal "
                             f"and log_predictive), which {needed_by} needs")
        array = model._fitted_data(data, self._continuation)
        samples = self.result.samples
        if not samples:
            raise ValueError(f"result: {diagnostics.no_draws_message(self.result, self._continue_with)}")
        return model._kernel_family, array, samples

    def loo(self, data: Any, *, refit: bool = False, key: Any = None, **fit_options: Any) -> az.ELPDData:
        """Leave-one-out predictive fit of the fitted points, by PSIS (:func:`arviz.loo`).

        The expected log predictive density Σ_i log p(x_i | x₋ᵢ) of the points themselves, each
        left out in turn, without fitting again: every draw is reweighted per point by
        1 / p(x_i | z₋ᵢ, α, x₋ᵢ), the Chinese-restaurant predictive of x_i given the others'
        partition (:func:`zoo.dirichlet.predictive.leave_one_out_log_likelihood`), and the weights
        Pareto-smoothed (Vehtari, Gelman & Gabry 2017). What :meth:`log_predictive_density`
        gives for held-out points, for the fitted ones: it compares models (families, priors of
        α) on one data set (``arviz.compare({"a": fit_a.loo(x), "b": fit_b.loo(x)})``), and its
        Pareto k̂ per point (``.pareto_k``; ``arviz.plot_khat``) names the points whose leaving
        out the draws cannot represent (ArviZ warns when some exceed min(1 - 1/log10 S, 0.7)).
        A point whose S importance ratios stay bounded, the largest at most S^(1/5) times their
        mean (4.6 for 2,000 draws), gets k̂ = 0: bounded ratios give the estimate a relative
        variance of at most (bound − 1) / S, and the tail ArviZ fits is no tail there — its weights
        take few distinct values (a point's predictive changes only with its neighbours'
        clusters), and the fit of their ties gave k̂ of 1 to ∞ (on the standardised iris data, 12
        of 150 points, 7 of them ∞, whose exact refits moved elpd_loo by 0.002 nats).
        The relative efficiency of the draws is that of the label-invariant quantities (their
        mean bulk ESS over the number of draws). Needs a family with a marginal likelihood.

        Parameters
        ----------
        data : array_like (N, D)
            The data of the fit (checked against a digest kept by the fit; a DataFrame is matched to
            the fit's :attr:`feature_names` by name, as in :meth:`log_predictive_density`).
        refit : bool
            Fit the model again without each point whose k̂ exceeds ArviZ's limit and score the
            point by that fit's :meth:`log_predictive_density`, as ArviZ's ``reloo`` does (its k̂
            is then 0): exact leave-one-out for those points, at the price of one fit each.
        key : jax PRNG key — for the fits again (point i uses ``jax.random.fold_in(key, i)``);
            required with ``refit``
        **fit_options : passed to :meth:`DPMixture.fit` for the fits again (``n_chains``,
            ``n_draws``, ...; by default each runs until its chains mix)

        Returns
        -------
        arviz.ELPDData
            ``elpd_loo`` and its standard error ``se``, and per point ``loo_i`` and ``pareto_k``
            (natural logarithms). ``p_loo`` is NaN: ArviZ computes it from the in-sample fit, which
            a model with its cluster parameters integrated out does not have per point.

        Examples
        --------
        One wide cluster: components that learn their precision predict it better than components
        of unit precision, which must cut it into pieces.

        Each fit runs until its chains mix (the default); ``refit=True`` fits the unit-precision
        model again without the one point whose k̂ is above ArviZ's limit (0.74), so that no
        estimate in the comparison rests on weights that cannot be trusted.

        >>> import arviz as az, jax, numpy as np
        >>> from zoo.dirichlet import DPMixture, normal_gamma, normal_known_precision
        >>> points = np.random.default_rng(1).normal(0.0, 3.0, (60, 1))
        >>> fits = {name: DPMixture(family).fit(points, jax.random.key(0), progress=False)
        ...         for name, family in [("learned", normal_gamma(1)), ("unit", normal_known_precision(1))]}
        >>> loos = {name: fit.loo(points, refit=True, key=jax.random.key(1)) for name, fit in fits.items()}
        >>> comparison = az.compare(loos)
        >>> list(comparison.index), round(float(comparison.loc["unit", "elpd_diff"]))
        (['learned', 'unit'], 16)
        """
        from zoo.dirichlet.predictive import leave_one_out_log_likelihood

        refit = check_bool("refit", refit)
        if key is not None:
            key = check_key("key", key)
        elif refit:
            raise ValueError("key: refit=True fits the model again for some points, which needs a PRNG key")
        data = in_fitted_order("data", data, self.feature_names)  # the refits see the fit's columns
        family, array, samples = self._predictive_inputs(data, "leave-one-out")
        log_likelihood = leave_one_out_log_likelihood(family, array, samples["assignments"], samples["alpha"])
        posterior = self.label_invariant().posterior
        n_chains, n_draws = log_likelihood.shape[:2]
        reff = 1.0
        if n_chains > 1:
            ess = [float(value) for value in az.ess(posterior, method="mean").to_array().values.ravel()]
            ess = [value for value in ess if np.isfinite(value)]  # a constant quantity (α fixed) has none
            reff = float(np.clip(np.mean(ess) / (n_chains * n_draws), 1e-3, None)) if ess else 1.0
        idata = az.InferenceData(posterior=posterior, log_likelihood=xr.Dataset(
            {"x": (("chain", "draw", "points"), log_likelihood)},  # the posterior's points and their names
            coords={"chain": posterior.chain, "draw": posterior.draw, "points": self.idata.posterior.points}))
        # A point whose importance ratios stay bounded (uniform ones, where the chains never changed
        # what it depends on, among them) has an estimate as sure as plain Monte Carlo, but ArviZ's
        # tail fit of their ties gives k̂ up to inf (and its warning; with refit=True, a refit).
        values = log_likelihood.reshape(n_chains * n_draws, -1)
        log_ratios = -values - special.logsumexp(-values, axis=0) + np.log(values.shape[0])  # log(w_s / mean w)
        bounded = log_ratios.max(axis=0) <= LOO_RATIO_EXPONENT * np.log(values.shape[0])
        with np.errstate(over="ignore"), warnings.catch_warnings(record=True) as caught:  # overflow: the
            warnings.simplefilter("always")  # tail fit's weights of negligible candidates, harmlessly
            result = az.loo(idata, pointwise=True, reff=reff)
        result.pareto_k[bounded] = 0.0
        flagged = bool(np.any(np.asarray(result.pareto_k) > result.good_k))
        result["warning"] = flagged
        for warning in caught:  # ArviZ's k̂ warning only where a point's k̂ is still high and is not refitted
            if not (str(warning.message).startswith("Estimated shape parameter of Pareto") and (refit or not flagged)):
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        # ArviZ's p_loo is the in-sample lppd less elpd_loo; these log-likelihoods already leave each
        # point out, so that difference is not an effective number of parameters: not reported.
        result["p_loo"] = np.nan
        if refit:
            self._refit_unreliable(result, data, key, fit_options)
        return result

    def _refit_unreliable(self, result: az.ELPDData, data: Any, key: Any, fit_options: dict) -> None:
        """Replace in ``result`` the LOO of each point above the k̂ limit by that of a fit without it."""
        points = np.asarray(data)
        unreliable = np.flatnonzero(~(np.asarray(result.pareto_k) <= result.good_k))
        model = self._continuation.model
        options = {"progress": False, **fit_options}
        for index in unreliable:
            rest = np.delete(points, index, axis=0)
            without = model.fit(rest, jax.random.fold_in(key, int(index)), **options)
            result.loo_i[index] = without.log_predictive_density(rest, points[index:index + 1])[0]
            result.pareto_k[index] = 0.0
        if unreliable.size:
            values = np.asarray(result.loo_i)
            result["elpd_loo"] = float(values.sum())
            result["se"] = float(np.sqrt(values.size * np.var(values)))
            result["warning"] = bool(np.any(np.asarray(result.pareto_k) > result.good_k))

    def scores(self, labels: Any, loss: str = "vi") -> dict[str, float]:
        """DM05 §6 metrics (RI, P, R, F, CED, NES, VI, NVI, ...) of the point estimate.

        Parameters
        ----------
        labels : array_like (N,)
            Gold-standard cluster labels of the points.
        loss : {"vi", "binder"}
            Loss defining the point estimate.

        Returns
        -------
        dict of str to float
        """
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.shape[0] != self.n_points:
            raise ValueError(f"labels: expected {self.n_points} labels (one per point), got shape {labels.shape}")
        return clustering_scores(labels, self.point_estimate(loss))


@dataclass(frozen=True)
class _Continuation:
    """What :meth:`DPMixtureFit.resume` needs: the model, the chains' key and a digest of the data."""

    model: Any
    key_data: np.ndarray
    key_impl: str | None  # inference._validation.key_as_data
    data_digest: str
    data_shape: tuple
    point_names: tuple | None = None  # the rows' labels of a DataFrame given as data (the draws' coords)
    feature_names: tuple | None = None  # the string column names of a DataFrame given as data (feature_names())
    one_start: bool = False  # every chain started from one partition (the mixing table's attrs["one_start"])


class DPMixture:
    """Dirichlet-process mixture of a component family, fitted by Gibbs sampling.

    Parameters
    ----------
    family : ComponentFamily
        Component distribution and base measure (see :mod:`zoo.dirichlet.families`).
    alpha : float
        Concentration α > 0 (the initial value when ``alpha_prior`` is given).
    alpha_prior : GammaPrior, optional
        Gamma prior on α; α is then resampled each sweep (Escobar–West, DM05 App. B).
    algorithm : {"collapsed", "auxiliary", "conjugate", "subcluster"}, optional
        Neal (2000) Algorithm 3, 8 or 2 (see :mod:`inference.neal`), or the parallel sub-cluster
        split/merge sampler of Chang & Fisher (2013) in its exact form (see
        :mod:`inference.subcluster`; families with marginal likelihoods and a posterior sampler).
        Default: Algorithm 3 (``"collapsed"``, the cluster parameters integrated out) for families
        with a marginal likelihood, every built-in one; Algorithm 8 for the others. Until
        2026-12-05 the default was Algorithm 8 for every family. With the collapsed default and
        its split–merge moves, default fits (4 chains until mixed, 2 cores, keys 0 and 1) gave
        these bulk ESS of K per second of the whole call, compilation included: wine (138
        standardised wines, ``normal_gamma(13)``) 59 and 77 against 15 and 11 with Algorithm 8,
        with R-hat(K) 1.014 and 1.011 after the 4,000-draw limit against 1.018 and 1.035; iris
        574 and 1,012 against 137 and 552 (both mixed).
    n_auxiliary : int
        m >= 1 auxiliary components for Algorithm 8.
    reuse_auxiliary : bool
        Algorithm 8 with persistent auxiliary components (Favaro & Teh 2013); much faster for
        components with many parameters.
    n_split_merge : int, optional
        Split–merge moves per sweep (0: none), for families with marginal likelihoods (see
        :mod:`inference.split_merge`): they move whole groups of points between clusters, which
        one-point Gibbs updates do slowly, and merge the pairs of clusters whose merge would
        raise the posterior most. Default: :data:`DEFAULT_SPLIT_MERGE` for Algorithms 2, 3 and
        8 when the family allows them (without them a chain keeps the number of clusters it
        started with on data such as scikit-learn's digits), 0 otherwise; the sub-cluster
        sampler makes its own.
    split_merge_scans : int
        How those moves propose a split: 0 (default), by sequential allocation (Dahl 2003); t > 0,
        by a restricted Gibbs scan from a launch state made with t restricted Gibbs scans (Jain &
        Neal 2004), about t + 1 times the cost per move (see :mod:`inference.split_merge`).
    max_clusters : int
        Initial capacity K_max >= 1 of every chain. ``fit`` refuses a capacity whose states do not
        fit in memory, naming ``max_clusters``; a growth during the run is checked again, and one
        that would not fit stops the chains with a ``RuntimeWarning``, returning the draws so far.
    on_overflow : {"grow", "raise"}
        Grow the capacity when a chain runs out of it, or raise
        :class:`inference.chains.CapacityError`.
    backend : {"auto", "xla", "numba"}
        Where the point loops of Algorithms 2, 3 and 8 and the split–merge moves run
        (:func:`inference.neal.build_kernel`): ``"auto"`` is numba on the CPU when it is
        installed, XLA elsewhere; both give the same chain. Numba runs Algorithms 2 and 8 for the
        families of the dot-product form, and Algorithm 3 and the moves (sequential allocation,
        ``split_merge_scans=0``) for those with a ``native_predictive`` (the Gaussian ones);
        the rest, and the sub-cluster sampler, run in XLA.

    Examples
    --------
    >>> import jax, numpy as np
    >>> from zoo.dirichlet.families import normal_gamma
    >>> rng = np.random.default_rng(0)
    >>> data = np.concatenate([rng.normal(-3, 0.5, (10, 2)), rng.normal(3, 0.5, (10, 2))])
    >>> model = DPMixture(normal_gamma(2), algorithm="collapsed", max_clusters=8)
    >>> fit = model.fit(data, jax.random.key(0), n_chains=2, progress=False)  # until the chains mix
    >>> from inference.diagnostics import mixes
    >>> mixes(fit.mixing), np.bincount(fit.point_estimate()).tolist()
    (True, [10, 10])
    """

    def __init__(
        self,
        family: ComponentFamily,
        *,
        alpha: float = 1.0,
        alpha_prior: GammaPrior | None = None,
        algorithm: str | None = None,
        n_auxiliary: int = 3,
        reuse_auxiliary: bool = False,
        n_split_merge: int | None = None,
        split_merge_scans: int = 0,
        max_clusters: int = 32,
        on_overflow: str = "grow",
        backend: str = "auto",
    ):
        # The arguments as given, for repr (every parameter but self and family, before any is resolved).
        arguments = {name: value for name, value in locals().items() if name not in ("self", "family")}
        if not isinstance(family, ComponentFamily):
            raise TypeError(f"family: expected a ComponentFamily, got {type(family).__name__}")
        self._arguments = arguments
        self.family = family
        # The kernels work about the family's origin (its prior mean; see ComponentFamily.origin).
        self._origin = None if family.origin is None else np.asarray(family.origin, np.float64)
        kernel_family = self._kernel_family
        self.alpha = check_real("alpha", alpha, low=0.0, low_open=True)
        if alpha_prior is not None and not isinstance(alpha_prior, GammaPrior):
            raise TypeError(f"alpha_prior: expected a GammaPrior or None, got {type(alpha_prior).__name__}")
        self.alpha_prior = alpha_prior
        if algorithm is None:  # Algorithm 3 where the marginal likelihood allows it (see the docstring)
            algorithm = "collapsed" if family.has_marginal else "auxiliary"
        self.algorithm = check_choice("algorithm", algorithm, ALGORITHMS + ("subcluster",))
        self.n_auxiliary = check_int("n_auxiliary", n_auxiliary, minimum=1)
        self.max_clusters = check_int("max_clusters", max_clusters, minimum=1,
                                      maximum=np.iinfo(np.int32).max)  # cluster labels are int32
        self.on_overflow = check_choice("on_overflow", on_overflow, ("grow", "raise"))
        self.backend = resolve_backend(backend)  # a ValueError naming backend for a bad one
        self.reuse_auxiliary = reuse_auxiliary
        if n_split_merge is None:
            allowed = family.has_marginal and (self.algorithm == "collapsed" or family.has_posterior)
            n_split_merge = DEFAULT_SPLIT_MERGE if allowed and self.algorithm != "subcluster" else 0
        self.n_split_merge = check_int("n_split_merge", n_split_merge, minimum=0)
        self.split_merge_scans = check_int("split_merge_scans", split_merge_scans, minimum=0)
        if self.algorithm == "subcluster":
            if self.n_split_merge or self.split_merge_scans or reuse_auxiliary:
                raise ValueError("algorithm: 'subcluster' makes its own splits and merges; leave n_split_merge, "
                                 "split_merge_scans and reuse_auxiliary at their defaults")
            self.step = subcluster.build_kernel(kernel_family, alpha_prior=alpha_prior)
        else:
            self.step = build_kernel(
                kernel_family,
                self.algorithm,
                n_auxiliary=self.n_auxiliary,
                reuse_auxiliary=reuse_auxiliary,
                alpha_prior=alpha_prior,
                n_split_merge=self.n_split_merge,
                split_merge_scans=self.split_merge_scans,
                backend=self.backend,
            )

    def __repr__(self) -> str:
        """The constructor call with the arguments that differ from the defaults."""
        return call_text(type(self).__name__, [repr(self.family)], getattr(self, "_arguments", {}),
                         init_defaults(DPMixture))

    def program(self, data: Any = None, *, n_points: int | None = None) -> None:
        """The NumPyro program of this model (truncated at ``max_clusters``)."""
        dp_mixture_program(
            data,
            family=self.family,
            n_points=n_points,
            max_clusters=self.max_clusters,
            alpha=self.alpha,
            alpha_prior=self.alpha_prior,
        )

    @property
    def _kernel_family(self) -> ComponentFamily:
        """The family the kernels sample with: :attr:`family` about its origin (its prior mean)."""
        return self.family if getattr(self, "_origin", None) is None else self.family.centred()

    def _about_origin(self, array: np.ndarray) -> np.ndarray:
        """Checked points less the family's origin, in float64 (exact for a user's float32 or float64
        points near it); unchanged without one. A model pickled before 2026-12-08 has none, as its
        chains' states hold statistics of the points as given."""
        origin = getattr(self, "_origin", None)
        return array if origin is None else np.asarray(array, np.float64) - origin

    def _kernel_array(self, array: np.ndarray) -> np.ndarray:
        """Checked points as the kernels take them: about the origin, in the chains' working float."""
        return self._about_origin(array).astype(jnp.result_type(float))  # float16 data too

    def _initial_labels(self, init_labels: Any, n_chains: int, points: np.ndarray, rng: np.random.Generator
                        ) -> np.ndarray:
        n_points = points.shape[0]
        check_start_memory(n_chains, n_points)
        if isinstance(init_labels, str):
            kinds = start_kinds(check_choice("init", init_labels, INITS), n_chains)
            points = np.asarray(points, np.float64)  # K-means in float64, whatever the chains' float width
            return np.stack([start_labels(kind, points, rng, n_random=min(self.max_clusters, 10, n_points),
                                          n_kmeans=min(self.max_clusters, 16, n_points)) for kind in kinds])
        labels = np.asarray(init_labels)
        if labels.ndim == 1:
            labels = np.broadcast_to(labels, (n_chains,) + labels.shape)
        if labels.ndim != 2 or labels.shape != (n_chains, n_points):
            raise ValueError(
                f"init: expected one of {', '.join(map(repr, INITS))} or labels of shape ({n_points},) or "
                f"({n_chains}, {n_points}), got shape {labels.shape}"
            )
        for row in labels:
            as_index_array("init", row)
        return labels

    def fit(
        self,
        data: Any,
        key: jax.Array,
        *,
        n_chains: int = 4,
        n_warmup: int = 200,
        n_draws: int | None = None,
        thin: int = 1,
        init: Any = "dispersed",
        draws_per_call: int = 10,
        time_budget: float | None = None,
        progress: bool = True,
        until_mixed: bool | None = None,
    ) -> DPMixtureFit:
        """Sample the posterior partition with ``n_chains`` chains run in parallel (``vmap``).

        Parameters
        ----------
        data : array_like (N, D)
            Points; validated by the family (no NaN, right number of features, ...). A DataFrame
            whose column names are all strings gives the fit its :attr:`DPMixtureFit.feature_names`,
            by which later DataFrames are matched to it.
        key : jax.Array
            PRNG key; the same key gives identical chains. Positional or ``key=``, as in
            :meth:`zoo.dirichlet.SupervisedDP.fit` and :func:`inference.tempered_em`.
        n_chains, n_warmup, thin, draws_per_call, time_budget, progress
            See :func:`inference.chains.sample_chains`.
        n_draws : int, optional
            Draws per chain after the warm-up; with ``until_mixed``, the most to draw. Not given:
            :data:`UNTIL_MIXED_DRAWS` (10,000) when the run is until the chains mix, as by default,
            else :data:`DEFAULT_DRAWS` (500).
        init : {"random", "dispersed", "single", "kmeans"} or array_like of int
            Initial partition of every chain: ``"dispersed"`` (default since 2026-12-02: chain c
            starts from the c-th of one cluster, K-means with min(16, K_max) clusters and random
            labels, in turn, so that R-hat compares chains started far apart), ``"random"`` (each
            chain draws labels uniformly among min(10, K_max) clusters, from ``key``; the default
            before), ``"single"`` (one cluster), ``"kmeans"``, or labels of shape (N,) or
            (n_chains, N). Labels with more clusters than
            ``max_clusters`` start the chains at twice their number of clusters (with
            ``on_overflow="raise"``, a ValueError naming ``init``).
        until_mixed : bool, optional
            Stop as soon as every label-invariant quantity mixes (K, α, the log joint and the
            partition entropy: R-hat ≤ 1.01 and bulk and tail ESS ≥ 400, the table of
            :attr:`DPMixtureFit.mixing`), asked each time the draws have grown by a tenth
            (``stop_when`` of :func:`inference.chains.sample_chains`). A quantity constant in every
            draw (as K can be in the first draws of easy data) passes only once the chains hold
            400 draws in all (:func:`inference.diagnostics.mixes_to_stop`). ``n_draws`` is then the
            most to draw and ``time_budget`` still applies: give generous ones for hard data, e.g.
            ``n_draws=100_000, time_budget=300``. Chains that do not mix by then end with the
            usual :class:`~inference.diagnostics.MixingWarning`. Not given: True when ``n_draws``
            is not given either (since 2026-12-03), so that a fit with the defaults returns chains
            that mix where 10,000 draws suffice (iris and wine needed 230–8,690), and False when it
            is, for exactly ``n_draws`` draws per chain. Where the run ends then depends on the
            draws: the same key gives the same draws and the same end.

        Returns
        -------
        DPMixtureFit

        Warns
        -----
        inference.diagnostics.MixingWarning
            If K, α or the log joint do not mix (R-hat and ESS of Vehtari et al. 2021, see
            :func:`inference.diagnostics.mixing_table`; split R-hat for one chain).
        zoo.dirichlet.ties.TiedValuesWarning
            With Gaussian components, when features hold one value in half of the points or
            more (see :func:`zoo.dirichlet.ties.tied_features`).
        zoo.dirichlet.scale.ScaleWarning
            With Gaussian components, when features lie far from the scale their prior expects
            (see :func:`zoo.dirichlet.scale.off_scale_features`): centre and scale them.
        """
        if until_mixed is None:
            until_mixed = n_draws is None
        until_mixed = check_bool("until_mixed", until_mixed)
        if n_draws is None:
            n_draws = UNTIL_MIXED_DRAWS if until_mixed else DEFAULT_DRAWS
        checker = self.family.check_data
        array = checker("data", data) if checker is not None else np.asarray(data, dtype=float)
        columns = feature_names(data)
        if self.family.warn_data is not None:
            # The column names, to a warn_data that takes them (normal_gamma's does).
            named = {"columns": columns} if columns is not None and _takes_columns(self.family.warn_data) else {}
            self.family.warn_data("data", array, stacklevel=user_stacklevel(), **named)
        array = self._kernel_array(array)
        n_chains = check_int("n_chains", n_chains, minimum=1)
        key = check_key("key", key)
        key_init, key_labels, key_chains = jax.random.split(key, 3)
        seed = int(jax.random.randint(key_labels, (), 0, np.iinfo(np.int32).max))
        labels = self._initial_labels(init, n_chains, array, np.random.default_rng(seed))
        shared_start = one_start(labels)  # the chains' agreement then says nothing (the mixing table)
        n_used = max(int(np.unique(row).size) for row in labels)
        capacity = self.max_clusters
        if n_used > capacity:
            if self.on_overflow == "raise":
                raise ValueError(f"init: uses {n_used} clusters, more than max_clusters={self.max_clusters} "
                                 "(on_overflow='raise' keeps the capacity fixed)")
            capacity = 2 * n_used  # the start fits, with room to open clusters (as a growth would double)
        init_keys = jax.random.split(key_init, n_chains)
        if self.algorithm == "subcluster":
            make_state = subcluster.init
        else:
            make_state = partial(init_state, algorithm=self.algorithm)
        family = self._kernel_family
        chain_state = jax.eval_shape(lambda key: make_state(key, array, family, max_clusters=capacity,
                                                            alpha=self.alpha, assignments=labels[0]), key_init)
        # The chains' states are built one by one, stacked, and stepped into new states: about 3 copies.
        check_memory("max_clusters", 3 * n_chains * tree_nbytes(chain_state),
                     f"{n_chains} chain(s) with max_clusters={capacity}")
        states = stack_states(
            [
                make_state(
                    init_keys[chain],
                    array,
                    family,
                    max_clusters=capacity,
                    alpha=self.alpha,
                    assignments=labels[chain],
                )
                for chain in range(n_chains)
            ]
        )
        result = sample_chains(
            key_chains,
            self.step,
            states,
            jnp.asarray(array, dtype=jnp.result_type(float)),
            n_warmup=n_warmup,
            n_draws=n_draws,
            thin=thin,
            draws_per_call=draws_per_call,
            time_budget=time_budget,
            progress=progress,
            on_overflow=self.on_overflow,
            stop_when=partial(_when_mixed, one_start=shared_start) if until_mixed else None,
        )
        names = row_names(data)
        continuation = _Continuation(self, *key_as_data(key_chains), arrays_digest(array), array.shape,
                                     None if names is None else tuple(names), columns, shared_start)
        return self._finish(result, continuation, "DPMixture.fit")

    def _finish(self, result: ChainResult, continuation: _Continuation, caller: str) -> DPMixtureFit:
        fitted = DPMixtureFit(result, point_names=getattr(continuation, "point_names", None))
        fitted._continuation = continuation
        if not result.samples:  # stopped during warm-up: the states are kept, nothing to summarise
            warnings.warn(f"{caller}: {diagnostics.no_draws_message(result, fitted._continue_with)}", RuntimeWarning,
                          stacklevel=user_stacklevel())
        else:  # cheap: R-hat and ESS of three scalars per draw (split R-hat for one chain, as its card shows)
            fitted._warned = diagnostics.warn_if_not_mixing(fitted.mixing, stacklevel=user_stacklevel())
        return fitted

    def _fitted_data(self, data: Any, continuation: _Continuation) -> np.ndarray:
        """``data`` validated, as the kernels take it (:meth:`_kernel_array`), and checked to be the
        fit's own (a DataFrame's columns matched to the fit's feature names first)."""
        data = in_fitted_order("data", data, getattr(continuation, "feature_names", None))
        checker = self.family.check_data
        array = self._kernel_array(checker("data", data) if checker is not None else np.asarray(data, dtype=float))
        if array.shape != continuation.data_shape or arrays_digest(array) != continuation.data_digest:
            raise ValueError(f"data: not the data these chains were fitted to (shape {array.shape}, fitted "
                             f"{continuation.data_shape}{', same shape, other values' if array.shape == continuation.data_shape else ''})")
        return array

    def _resume(self, fit: DPMixtureFit, data: Any, *, n_draws: int, draws_per_call: int,
                time_budget: float | None, progress: bool, until_mixed: bool) -> DPMixtureFit:
        """:meth:`DPMixtureFit.resume`."""
        continuation, previous = fit._continuation, fit.result
        check_int("n_draws", n_draws, minimum=1)
        check_same_float_width(previous.provenance, "fit: these chains")
        until_mixed = check_bool("until_mixed", until_mixed)
        array = self._fitted_data(data, continuation)
        key_chains = key_from_data(continuation.key_data, continuation.key_impl)
        result = continue_chains(key_chains, self.step, previous, jnp.asarray(array), n_draws=n_draws,
                                 draws_per_call=draws_per_call, time_budget=time_budget, progress=progress,
                                 on_overflow=self.on_overflow,
                                 stop_when=partial(_when_mixed, one_start=getattr(continuation, "one_start", False))
                                 if until_mixed else None)
        return self._finish(result, continuation, "DPMixtureFit.resume")


def _missing_parts_advice(model: DPMixture, continue_with: str | None) -> str:
    """The advice for chains that do not mix when the model's family lacks what split–merge moves
    or exact parameter draws need, or '' when it does not.

    A ``custom_family`` of ``log_likelihood`` and ``sample_base`` alone runs Algorithm 8 without
    split–merge moves (they need the marginal likelihood), redrawing each cluster's parameters by
    an independence Metropolis–Hastings sampler with G0 proposals (DM05 §4.2), which is seldom
    accepted in many dimensions; the usual advice (more split–merge moves, the sub-cluster sampler)
    names moves such a model cannot make, and the equal-height advice (that such moves did not
    join chains where measured) speaks of samplers it does not run. What helps is giving the family
    the parts: ``point_stats`` with ``sample_posterior`` (exact draws of a cluster's parameters) or
    with ``log_marginal`` (collapsed sampling, Algorithm 3, and split–merge moves; ``log_predictive``
    is derived from it).
    """
    family = model.family
    if family.has_marginal or model.n_split_merge or model.algorithm == "subcluster":
        return ""  # it has the moves (or the model was asked to do without them): the usual advice
    meanwhile = (f"meanwhile, {diagnostics.run_longer(continue_with, 'run longer')} with more chains from dispersed "
                 "starts.")
    marginal = ("log_marginal (the marginal likelihood of a cluster's point_stats: the collapsed sampler, "
                "Algorithm 3, and split-merge moves")
    if family.has_posterior:
        return (f"The family {family.name!r} gives the sampler no split-merge moves, which need its marginal "
                f"likelihood. Give the family, among custom_family's arguments, {marginal}; with its "
                f"sample_posterior, Algorithm 2 and the sub-cluster sampler too); {meanwhile}")
    return (f"The family {family.name!r} gives the sampler no split-merge moves, and Algorithm 8 redraws each "
            "cluster's parameters by Metropolis-Hastings with proposals from G0, which are seldom accepted in many "
            "dimensions. Give the family, among custom_family's arguments, point_stats with sample_posterior (exact "
            f"draws of a cluster's parameters given its points) or with {marginal}), or all three (Algorithm 2 and "
            f"the sub-cluster sampler too); {meanwhile}")


def _takes_columns(warn_data: Any) -> bool:
    """Whether a family's ``warn_data`` takes the data's column names (a ``columns`` keyword)."""
    try:
        return "columns" in inspect.signature(warn_data).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


def _when_mixed(so_far: ChainResult, *, one_start: bool = False) -> bool:
    """``stop_when`` of ``until_mixed``: every label-invariant quantity of the draws so far mixes, a
    constant only once the draws could have shown a move (:func:`inference.diagnostics.mixes_to_stop`),
    and never where chains from ``one_start`` stayed there."""
    table = DPMixtureFit(so_far).mixing
    table.attrs["one_start"] = bool(one_start)
    return diagnostics.mixes_to_stop(table)

