"""The user-facing model: :class:`SupervisedDP` runs many chains of the kernel with
:func:`inference.chains.sample_chains`, and :class:`SupervisedDPFit` holds the draws.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from inference import diagnostics
from inference.chains import ChainResult, continue_chains, sample_chains, stack_states
from inference.concentration import GammaPrior
from inference.display import Card, Described, call_text, chains_card, init_defaults
from inference.partitions import point_partition
from inference.provenance import check_same_float_width
from inference._validation import (arrays_digest, as_index_array, as_label_codes, check_bool, check_choice, check_int,
                                   check_key, check_memory, check_one_length, check_real, feature_names,
                                   in_fitted_order, key_as_data, key_from_data, row_names, tree_nbytes,
                                   user_stacklevel)
from zoo.dirichlet._starts import check_start_memory, one_start, start_kinds, start_labels
from zoo.dirichlet.scale import warn_off_scale, warn_precision_prior
from zoo.dirichlet.ties import warn_tied_features
from zoo.dirichlet.supervised.distances import _check_distances, embed_distances
from zoo.dirichlet.supervised.kernel import build_kernel, DEFAULT_SPLIT_MERGE, partition_moves_per_sweep
from zoo.dirichlet.supervised.state import (_check_problem, init, nearest_partners, record_supervised, SupervisedData,
                                            SupervisedState)
from zoo.metrics import clustering_scores

__all__ = ["SupervisedDPFit", "INITS", "SupervisedDP", "auto_split_merge"]

MAX_AUTO_SPLIT_MERGE = 100
"""Most that ``n_split_merge=None`` gives."""

ONE_HEIGHT_MEASURED = (
    "Where this was measured (SCDP-1 on FEBRL's records, notebooks/record_linkage.ipynb: one chain of four "
    "one publication short of the others), four times the sweeps or four times the split-merge moves did not "
    "join such chains (R-hat of the test publications 1.145 after 2,000 sweeps, 1.104 after 8,000, 1.131 with "
    "220 moves per sweep)."
)
"""What :attr:`SupervisedDPFit.mixing`'s advice says was tried on chains at one height in
different partitions (:func:`inference.diagnostics.equal_height_advice`)."""


def auto_split_merge(n_train: int, n_train_publications: int, n_test: int) -> int:
    """Split–merge moves of the test partition per sweep for ``SupervisedDP(n_split_merge=None)``.

    One move per two test publications expected from the training data, M · (training
    publications / training references) / 2, rounded up, between
    :data:`zoo.dirichlet.supervised.kernel.DEFAULT_SPLIT_MERGE` and
    :data:`zoo.dirichlet.supervised.fit.MAX_AUTO_SPLIT_MERGE`. A move splits one publication or
    merges two, so the moves a sweep needs to reach every publication grow with their number,
    and the training partition is what the model knows of publication sizes before it sees the
    test references.

    >>> auto_split_merge(505, 150, 367), auto_split_merge(644, 5, 626)  # FEBRL, digits
    (55, 10)
    """
    expected = n_test * n_train_publications / max(n_train, 1)
    return int(min(max(DEFAULT_SPLIT_MERGE, math.ceil(expected / 2)), MAX_AUTO_SPLIT_MERGE))


DEFAULT_SWEEPS = 1_000
"""Sweeps per chain of :meth:`SupervisedDP.fit` with ``until_mixed=False`` and no ``n_sweeps``, half
of them warm-up."""

UNTIL_MIXED_DRAWS = 4_000
"""The most draws per chain of :meth:`SupervisedDP.fit` when it runs until its chains mix (its
default) and is given no ``n_sweeps``: fewer than :data:`zoo.dirichlet.mixture.UNTIL_MIXED_DRAWS`
(10,000), as an SCDP sweep costs several of a DP mixture's (4,000 draws: 36 s for SCDP-1 on the wine
data, 111 s on the breast-cancer data, 2026-12-04, 2 cores)."""

#: The call that continues a fit's chains until they mix (``n_draws`` the most to add), as its
#: messages name it (``zoo.sklearn`` names its own).
RESUME_CALL = "fit.resume(train_features, train_labels, test_features, n_draws=..., until_mixed=True)"
#: What a fit's card shows of its draws: (label, sample name, format).
SCDP_QUANTITIES = (("test publications (K)", "n_clusters", ".3g"), ("reference types", "n_types", ".3g"),
                   ("alpha (publications)", "alpha", ".3g"), ("alpha (types)", "alpha_types", ".3g"),
                   ("log joint", "log_joint", ",.1f"), ("split-merges accepted", "split_merge_accepted", ".3g"),
                   ("type split-merges accepted", "type_split_merge_accepted", ".3g"))
#: How the messages say to restart each chain from its last partition.
RESTART_CALL = "init=fit.assignments[:, -1]"
#: How the advice names more split-merge moves of the test partition per sweep, and the moves of
#: the reference types (the command line names its options).
MORE_MOVES = "more split-merge moves of the test publications per sweep (n_split_merge)"
TYPE_MOVES_ON = "SupervisedDP(..., n_type_split_merge=5)"


@dataclass(frozen=True)
class _Continuation:
    """What :meth:`SupervisedDPFit.resume` needs: the model, the chains' key, a digest of the data and
    the test-partition moves per sweep the chains ran with."""

    model: Any
    key_data: np.ndarray
    key_impl: str | None  # inference._validation.key_as_data
    data_digest: str
    n_split_merge: int
    point_names: tuple | None = None  # the test rows' labels of a DataFrame (the draws' coords)
    feature_names: tuple | None = None  # the string column names of a DataFrame of training features
    train_labels: tuple | None = None  # the training publications' labels, in the order of their codes
    one_start: bool = False  # every chain started from one test partition (the mixing table's attrs["one_start"])


def _warn_unlabelled_marks(train_labels: Any) -> None:
    """A ``UserWarning`` when numeric ``train_labels`` (already checked) hold -1, scikit-learn's mark of an
    unlabelled row, which SupervisedDP takes as one more training publication."""
    labels = np.asarray(train_labels)
    if labels.dtype.kind not in "iuf" or not np.any(labels == -1):
        return
    warnings.warn(
        f"train_labels: {int(np.sum(labels == -1))} of {labels.size} training labels are -1, which SupervisedDP takes "
        "as one more publication of training references, not as references to cluster (those are test_features). "
        "zoo.sklearn.SupervisedDPEstimator is the interface where -1 marks the unlabelled rows to cluster, as in "
        "scikit-learn's semi-supervised estimators: SupervisedDPEstimator().fit(X, y) clusters the rows of X "
        "where y == -1.", UserWarning, stacklevel=user_stacklevel())


def _supervised_data(train: np.ndarray, labels: np.ndarray, test: np.ndarray) -> SupervisedData:
    features = np.concatenate([train, test])
    return SupervisedData(jnp.asarray(features, jnp.result_type(float)), jnp.asarray(labels, jnp.int32),
                          jnp.asarray(nearest_partners(features, train.shape[0])))


class SupervisedDPFit(Described):
    """Draws of the test partition from a fitted :class:`SupervisedDP`.

    Parameters
    ----------
    result : ChainResult
        From :func:`inference.chains.sample_chains` with :func:`.state.record_supervised`.
    model, n_type_split_merge, n_split_merge : int, optional
        The SCDP model and the type and test-partition moves per sweep the chains ran with
        (``n_split_merge`` counts SCDP-3's moves with precisions too)
        (:meth:`SupervisedDP.fit` gives them), so that the advice of :attr:`mixing` names what was
        not tried, and does not ask for more of a move that was never accepted.
    pair_moves : bool, optional
        Whether the chains made pair moves (:meth:`SupervisedDP.fit` gives it): when SCDP-1's or
        -2's chains ran without them and their number of test publications does not mix, the
        advice names them.

    Attributes
    ----------
    result : ChainResult
        Raw draws (chain, draw, ...) and final states.
    feature_names : tuple of str or None
        The column names of the training features when :meth:`SupervisedDP.fit` was given a
        DataFrame whose column names are all strings (as scikit-learn's ``feature_names_in_``),
        else None.
    idata : arviz.InferenceData
        ``posterior``: ``assignments`` (chain, draw, points), ``alpha``, ``alpha_types``;
        ``sample_stats``: ``n_clusters`` (test publications), ``n_types``, ``log_joint``,
        ``partition_entropy`` (of the test publications' sizes,
        :func:`inference.diagnostics.partition_entropy`).

    A fit returned by :meth:`SupervisedDP.fit` can be continued with :meth:`resume`. Its ``repr``
    (and its HTML in Jupyter) says what the chains hold and whether they mix.
    """

    def __init__(self, result: ChainResult, *, model: int | None = None, n_type_split_merge: int | None = None,
                 n_split_merge: int | None = None, pair_moves: bool | None = None, point_names: Any = None):
        self.result = result
        # The settings the chains ran with (None: unknown), for the advice of :attr:`mixing`.
        self._model, self._n_type_split_merge, self._n_split_merge = model, n_type_split_merge, n_split_merge
        self._pair_moves = pair_moves
        self._warned = False  # whether the fit that made this object issued its MixingWarning
        self._continuation: _Continuation | None = None  # set by SupervisedDP.fit: what resume() needs
        samples = result.samples
        if not samples:  # stopped during warm-up: the states are kept in result.final_state
            self._idata = None
            return
        n_test = samples["assignments"].shape[-1]
        self._idata = diagnostics.from_dict_in_order(
            posterior={
                "assignments": samples["assignments"],
                "alpha": samples["alpha"],
                "alpha_types": samples["alpha_types"],
            },
            sample_stats={
                "n_clusters": samples["n_clusters"],
                "n_types": samples["n_types"],
                "log_joint": samples["log_joint"],
                "partition_entropy": diagnostics.partition_entropy(samples["assignments"]),
            },
            coords={"points": np.arange(n_test) if point_names is None else list(point_names)},
            dims={"assignments": ["points"]},
        )
        # On the posterior group, as DPMixture's (inference.diagnostics.to_inference_data) and where
        # zoo.report reads them; from_dict's attrs= would set the InferenceData's own.
        self._idata.posterior.attrs.update(
            n_warmup=result.n_warmup, thin=result.thin, completed=int(result.completed),
            sampling_seconds=result.seconds, **({} if result.stopped_by is None else {"stopped_by": result.stopped_by}),
            **(result.provenance or diagnostics.provenance()))

    def __getstate__(self) -> dict:
        """The fit's attributes for pickling, with ``_warned`` reset: the warning was issued to the
        session that made the fit, and a fit that does not mix, loaded in another, warns again in
        :meth:`summary`."""
        return {**self.__dict__, "_warned": False}

    @property
    def idata(self) -> az.InferenceData:
        """The draws as ``arviz.InferenceData`` (a ``ValueError`` if the chains stopped before their
        first draw: their warm-up is then in ``result.final_state``)."""
        if self._idata is None:
            raise ValueError(f"result: {diagnostics.no_draws_message(self.result, self._continue_with)}")
        return self._idata

    def _card(self) -> Card:
        continuation = getattr(self, "_continuation", None)
        card = Card(f"SupervisedDPFit of {continuation.model!r}" if continuation is not None else
                    f"SupervisedDPFit of SCDP-{self._model}" if getattr(self, "_model", None) else "SupervisedDPFit")
        if self.result.samples:
            card.add("test points", f"{self.result.samples['assignments'].shape[-1]:,}")
        unused = {name for name, count in (("split_merge_accepted", getattr(self, "_n_split_merge", None)),
                                           ("type_split_merge_accepted", getattr(self, "_n_type_split_merge", None)))
                  if count == 0}  # moves the chains did not make (None: unknown)
        chains_card(card, self.result, self,
                    quantities=[quantity for quantity in SCDP_QUANTITIES if quantity[1] not in unused])
        card.add("see", ["fit.summary()", "fit.point_estimate()", "fit.scores(labels)", "fit.co_clustering()",
                         "fit.assignments", "fit.idata"] + ([RESUME_CALL] if continuation is not None else []))
        return card

    def resume(self, train_features: Any, train_labels: Any, test_features: Any, *, n_draws: int,
               draws_per_call: int = 10, time_budget: float | None = None, progress: bool = True,
               until_mixed: bool = False) -> SupervisedDPFit:
        """Continue these chains for ``n_draws`` more draws each, as one longer run would have.

        The chains go on from their last state with the fit's key (the rest of a warm-up that
        Ctrl-C or a time budget cut short first), thinned as the fit was, and the new draws are
        appended to these (:func:`inference.chains.continue_chains`): on the same machine, bit for
        bit what one longer run gives when ``draws_per_call`` is the same in both. The data must
        be the fit's (checked against a digest). This fit is unchanged.

        Parameters
        ----------
        train_features, train_labels, test_features
            The data of the fit. DataFrames of features are matched to the fit's
            :attr:`feature_names` by name: their columns are reordered to the fit's, and other
            names are a ``ValueError``.
        n_draws : int
            Draws to add per chain (``thin`` sweeps each); with ``until_mixed``, the most to add.
        draws_per_call, time_budget, progress
            See :func:`inference.chains.sample_chains`.
        until_mixed : bool
            Stop as soon as the draws of both runs mix, as :meth:`SupervisedDP.fit`'s ``until_mixed``.

        Returns
        -------
        SupervisedDPFit
        """
        continuation = getattr(self, "_continuation", None)  # objects restored without __init__ have none
        if continuation is None:
            raise ValueError("fit: only a fit returned by SupervisedDP.fit or resume() can be resumed (this one was "
                             "built from a ChainResult)")
        check_int("n_draws", n_draws, minimum=1)
        until_mixed = check_bool("until_mixed", until_mixed)
        check_same_float_width(self.result.provenance, "fit: these chains")
        fitted = getattr(continuation, "feature_names", None)
        train_features = in_fitted_order("train_features", train_features, fitted)
        test_features = in_fitted_order("test_features", test_features, fitted)
        train, labels, test = _check_problem(train_features, train_labels, test_features)
        if arrays_digest(train, labels, test) != continuation.data_digest:
            raise ValueError("train_features, train_labels and test_features: not the data these chains were fitted "
                             "to")
        model = continuation.model
        step = model._step(continuation.n_split_merge)
        key_chains = key_from_data(continuation.key_data, continuation.key_impl)
        result = continue_chains(key_chains, step, self.result, _supervised_data(train, labels, test), n_draws=n_draws,
                                 draws_per_call=draws_per_call, time_budget=time_budget, progress=progress,
                                 record=record_supervised(train.shape[0]), on_overflow="grow",
                                 stop_when=model._when_mixed(step, getattr(continuation, "one_start", False))
                                 if until_mixed else None)
        return model._finish(result, continuation, step, "SupervisedDPFit.resume")

    @property
    def _continue_with(self) -> str | None:
        """The call that continues these chains, for messages (None: the low-level one)."""
        if getattr(self, "_continuation", None) is None:
            return None
        return RESUME_CALL

    @property
    def feature_names(self) -> tuple[str, ...] | None:
        """The column names of the training features the fit was given as a DataFrame with string
        column names, in order; None for an array (or a fit built from a ChainResult). Test
        features, and the data given to :meth:`resume`, are matched to these by name."""
        return getattr(getattr(self, "_continuation", None), "feature_names", None)

    @property
    def assignments(self) -> np.ndarray:
        """Test partitions, shape (chain, draw, M)."""
        self.idata  # a ValueError if the chains stopped before their first draw
        return np.asarray(self.result.samples["assignments"])

    def label_invariant(self) -> az.InferenceData:
        """The quantities of :attr:`mixing` (K, the number of reference types, the log joint, the
        entropy of the test publications' sizes, α^p and α^t) as a ``posterior`` group with the
        fit's attributes: what to give ``az.plot_trace``, ``az.plot_rank`` or ``az.summary``
        (``idata``'s posterior holds the assignments too, whose labels are exchangeable). A
        concentration held fixed (``alpha_prior=None`` or ``alpha_types_prior=None``) is left out,
        as by :func:`inference.diagnostics.label_invariant`: it was not sampled."""
        return self._label_invariant(keep_fixed=False)

    def _label_invariant(self, *, keep_fixed: bool) -> az.InferenceData:
        variables = ({name: self.idata.sample_stats[name]
                      for name in ("n_clusters", "n_types", "log_joint", "partition_entropy")}
                     | {name: self.idata.posterior[name] for name in ("alpha", "alpha_types")})
        if not keep_fixed:
            variables = diagnostics.without_fixed_concentrations(variables)
        return az.InferenceData(posterior=xr.Dataset(variables, attrs=dict(self.idata.posterior.attrs)))

    @property
    def mixing(self) -> pd.DataFrame:
        """Mean, sd, bulk and tail ESS, R-hat and mixing status of the label-invariant quantities
        (test publications, reference types, log joint, entropy of the test publications' sizes,
        α^p, α^t), without a warning; see
        :func:`inference.diagnostics.mixing_table`. Quantities constant within each chain but
        different between chains are reported as "chains disagree" (R-hat inf).

        ``table.attrs["advice"]``, the closing sentence of the warnings, names what this sampler
        offers: when the chains of SCDP-1 or -2, run without type moves, hold different reference
        types (R-hat of ``n_types`` above 1.1), it suggests ``n_type_split_merge``; run without
        pair moves, with a number of test publications that does not mix, ``pair_moves``. When no
        split–merge move of the test publications was accepted in any kept draw, it says so instead
        of asking for more of them, and suggests restarting each chain from its last partition
        (on the dequantised digits of ``notebooks/supervised_digits.ipynb``, before SCDP-3 had its
        moves with precisions, a chain held 559 nats below the others by its precisions reached
        their level within 100 sweeps that way); when the chains already agree on the log joint
        and on the number of test publications, it asks for more sweeps instead. When the chains
        reach one height but hold different numbers or sizes of test publications (R-hat above
        1.1), it says that longer runs and more moves did not join such chains where measured
        (:data:`ONE_HEIGHT_MEASURED`) and asks for the spread to be reported
        (:func:`inference.diagnostics.equal_height_advice`)."""
        table = getattr(self, "_mixing", None)
        if table is None:
            table = self._mixing = diagnostics.mixing_table(self._label_invariant(keep_fixed=True))
            table.attrs["advice"] = self._advice(table)
            if getattr(getattr(self, "_continuation", None), "one_start", False):
                table.attrs["one_start"] = True
        return table.copy()

    def _advice(self, table: pd.DataFrame) -> str:
        """What to try when the chains do not mix (SupervisedDP has no sub-cluster sampler)."""
        continue_with = self._continue_with
        advice = (diagnostics.equal_height_advice(table, measured=ONE_HEIGHT_MEASURED)
                  or f"{diagnostics.run_longer(continue_with)} with {MORE_MOVES}, or more chains from dispersed "
                     "starts.")
        r_hat = table["r_hat"].astype(float)
        r_hat_max = table.attrs.get("rhat_max", diagnostics.RHAT_MAX)
        accepted = self.result.samples.get("split_merge_accepted")
        n_moves = getattr(self, "_n_split_merge", None)  # None in fits pickled before it was kept
        if n_moves and accepted is not None and np.size(accepted) and not np.any(accepted):
            # More of a move that never succeeded will not help; a chain can be held by its means
            # and precisions as much as by its partition, and a restart draws those afresh. When
            # the chains agree on the log joint and the number of test publications they share one
            # mode, and only sweeps help.
            none_accepted = (f"No split-merge move of the test publications was accepted ({n_moves} per sweep, "
                             f"0 of {n_moves * np.size(accepted):,} in the kept draws), so more of them will not "
                             "help")
            log_joint_r_hat = r_hat.get("log_joint", np.inf)
            # (NaN: constant in every chain, as K can be.)
            if log_joint_r_hat <= r_hat_max and not r_hat.get("n_clusters", np.inf) > r_hat_max:
                advice = (f"{none_accepted}; the chains agree on the log joint (R-hat {log_joint_r_hat:.3f}) and on "
                          "the number of test publications, so they share one mode and what does not mix moves slowly "
                          "within it: run more sweeps"
                          + (f" ({continue_with} continues these chains)." if continue_with else "."))
            else:
                advice = (f"{none_accepted}: run more chains from dispersed starts, or restart each chain from its "
                          f"last partition ({RESTART_CALL}), which draws its means and precisions afresh.")
        # Only when the chains clearly hold different types (R-hat above 1.1, or inf when each chain
        # keeps its own; NaN, for constant types, is not): on FEBRL's records, where the types'
        # only fault was a bulk ESS of 359, the type moves made things worse.
        types_apart = r_hat.get("n_types", np.nan) > 1.1
        k_apart = r_hat.get("n_clusters", np.nan) > r_hat_max  # NaN (constant K) is not
        if k_apart and self._model in (1, 2) and getattr(self, "_pair_moves", None) is False:
            advice = ("The pair moves are off: SupervisedDP(..., pair_moves=True) (the default) redraws close pairs "
                      "of test references together, which moved the number of test publications where one-reference "
                      "updates did not (build_kernel's docstring gives the data). " + advice)
        if types_apart and self._model in (1, 2) and self._n_type_split_merge == 0:
            advice = (f"The reference types do not mix: {TYPE_MOVES_ON} moves them in blocks (off by default for "
                      "SCDP-1; build_kernel's docstring says where it helped and where it did not). " + advice)
        return advice

    def summary(self) -> pd.DataFrame:
        """:attr:`mixing`, with an :class:`inference.diagnostics.MixingWarning` naming the
        quantities that do not mix (R-hat > 1.01 or bulk ESS < 400, Vehtari et al. 2021), unless
        :meth:`SupervisedDP.fit` issued it already when it returned this fit (the table's ``status``
        column says the same)."""
        table = self.mixing
        if not getattr(self, "_warned", False):  # objects restored without __init__ have none
            diagnostics.warn_if_not_mixing(table, stacklevel=user_stacklevel())
        return table

    def co_clustering(self) -> xr.DataArray:
        """Posterior co-clustering matrix of the test references."""
        return diagnostics.co_clustering_matrix(self.idata)

    def point_estimate(self, loss: str = "vi") -> np.ndarray:
        """Test partition minimising the posterior expected ``loss`` ("vi" or "binder")."""
        loss = check_choice("loss", loss, ("vi", "binder"))
        return point_partition(self.assignments, loss=loss)

    def training_shares(self) -> pd.DataFrame:
        """Of a model with ``share_clusters=True`` (DM05 §4.1: test references may join training
        publications): for each test reference (rows, named as the draws' points), the share of the
        kept draws of all chains in which it sits in each training publication (columns: their
        labels, as given to :meth:`SupervisedDP.fit`), and in a publication of test references
        only (column ``"new"``); each row sums to 1. The point estimate numbers publications
        afresh and does not say which are the training ones; this does.
        """
        continuation = getattr(self, "_continuation", None)
        if continuation is None or getattr(continuation, "train_labels", None) is None:
            raise ValueError("fit: only a fit returned by SupervisedDP.fit knows its training publications (not one "
                             "built from a ChainResult)")
        if not continuation.model.share_clusters:
            raise ValueError("share_clusters: this model keeps test references out of the training publications "
                             "(share_clusters=False), so every test reference is in a new publication; fit "
                             "SupervisedDP(..., share_clusters=True) to let them join")
        draws = self.assignments.reshape(-1, self.assignments.shape[-1])
        n_train = len(continuation.train_labels)
        shares = np.stack([(draws == publication).mean(axis=0) for publication in range(n_train)]
                          + [(draws >= n_train).mean(axis=0)], axis=1)
        return pd.DataFrame(shares, index=self.idata.posterior["points"].values,
                            columns=[*continuation.train_labels, "new"])

    def scores(self, labels: Any, loss: str = "vi") -> dict[str, float]:
        """DM05 §6 metrics of the point estimate against gold test labels (M,)."""
        labels = np.asarray(labels)
        n_test = self.assignments.shape[-1]
        if labels.ndim != 1 or labels.shape[0] != n_test:
            raise ValueError(f"labels: expected {n_test} labels (one per test point), got shape {labels.shape}")
        return clustering_scores(labels, self.point_estimate(loss))


INITS = ("dispersed", "single", "singletons", "kmeans", "random")


def _initial_states(model: SupervisedDP, starts: Any, n_chains: int, train: np.ndarray, labels: np.ndarray,
                    test: np.ndarray, rng_key: jax.Array) -> tuple[SupervisedState, bool]:
    """Batched starting states of :meth:`SupervisedDP.fit` (chains first), and whether every chain starts
    from one and the same test partition (:func:`zoo.dirichlet._starts.one_start`)."""
    test_labels = _initial_test_partitions(starts, n_chains, test, rng_key)
    capacity = max(min(model.max_test_clusters, test.shape[0]), int(test_labels.max()) + 1)
    keys = jax.random.split(rng_key, n_chains)

    def make(chain, key):
        return init(key, train, labels, test, max_test_clusters=capacity, max_types=model.max_types,
                    alpha=model.alpha, alpha_types=model.alpha_types, precision_shape=model.precision_shape,
                    precision_rate=model.precision_rate, test_clusters=test_labels[chain])

    # Shapes first: the states are built one by one, stacked, and stepped into new states (about 3
    # copies). The test capacity is at most the number of test references; max_types is not bounded.
    chain_state = jax.eval_shape(lambda key: make(0, key), keys[0])
    check_memory("max_types", 3 * n_chains * tree_nbytes(chain_state),
                 f"{n_chains} chain(s) with max_test_clusters={capacity} and max_types={model.max_types}")
    return stack_states([make(chain, keys[chain]) for chain in range(n_chains)]), one_start(test_labels)


def _initial_test_partitions(init: Any, n_chains: int, test: np.ndarray, rng_key: jax.Array) -> np.ndarray:
    """Starting test labels of every chain, shape (n_chains, M) (see :meth:`SupervisedDP.fit`)."""
    n_test = test.shape[0]
    check_start_memory(n_chains, n_test)
    if not isinstance(init, str):
        starts = np.asarray(init)
        if starts.ndim == 1:
            starts = np.broadcast_to(starts, (n_chains,) + starts.shape)
        if starts.shape != (n_chains, n_test):
            raise ValueError(f"init: expected one of {INITS} or labels of shape ({n_test},) or "
                             f"({n_chains}, {n_test}), got shape {starts.shape}")
        return np.stack([np.unique(as_index_array("init", row), return_inverse=True)[1] for row in starts])
    kinds = start_kinds(check_choice("init", init, INITS), n_chains)
    seed = int(jax.random.randint(jax.random.fold_in(rng_key, 1), (), 0, np.iinfo(np.int32).max))
    rng = np.random.default_rng(seed)
    starts = [start_labels(kind, test, rng, n_random=min(n_test, 8), n_kmeans=min(n_test, 16)) for kind in kinds]
    return np.stack([np.unique(row, return_inverse=True)[1] for row in starts])


class SupervisedDP:
    """Supervised clustering with the Dirichlet process: SCDP-1, -2 or -3 (DM05).

    Parameters
    ----------
    model : {1, 2, 3}
        SCDP-1 (conjugate), SCDP-2 (prior of precisions from the spread of the means) or SCDP-3
        (precisions conditioned on the means, Algorithm 8).
    share_clusters : bool
        Whether test references may belong to training publications (DM05 §4.1); which ones they
        join, :meth:`SupervisedDPFit.training_shares`.
    alpha, alpha_types : float
        Initial concentrations α^p and α^t.
    alpha_prior, alpha_types_prior : GammaPrior or None
        Gamma priors under which α^p and α^t are resampled each sweep (None: fixed). The
        default Gamma(1, 1) for both.
    prior_variance : float
        σ² of G0^p (DM05: about 1 for centred, scaled data).
    precision_shape, precision_rate : float
        Gamma(a, rate b) of G0^t (DM05: about 1).
    max_test_clusters, max_types : int
        Initial capacities. When a call of sweeps runs out of one, that capacity is doubled
        (re-jit) and the call re-run from the states it started with.
    n_auxiliary : int
        Algorithm 8's M (SCDP-3).
    n_split_merge : int, optional
        Split–merge moves of the test partition per sweep (see :func:`build_kernel`). ``None``
        (default): one per two test publications that the training data lead one to expect, at
        least 10 and at most 100 (:func:`zoo.dirichlet.supervised.fit.auto_split_merge`). Each
        move splits one publication or merges two, so a test set of many small publications
        needs more of them per sweep than one of a few large ones: on the FEBRL records of
        ``notebooks/record_linkage.ipynb`` (367 test references, training publications of 3.4
        references, so 55 moves; 4 chains, 2,000 sweeps) SCDP-1's chains agreed on the log joint
        (R-hat 1.02, means 27 nats apart) where 10 moves left them 230 nats apart (R-hat 1.8),
        and the point estimate's F rose from 0.879 to 0.910, in 64 s against 41 s (before the
        pair moves of 2026-11-29); on the digits of ``notebooks/supervised_digits.ipynb``
        (training publications of 129 digits) it stays 10.
    n_precision_steps : int
        SCDP-3's Metropolis steps on the precisions per sweep (see :func:`build_kernel`).
    n_type_split_merge : int, optional
        SCDP-1 and -2: split–merge moves of the reference types per sweep (default None: 5 for
        SCDP-2, 0 for SCDP-1; see :func:`build_kernel` for when they help and when they did not;
        SCDP-3 has none).
    n_precision_split_merge : int, optional
        SCDP-3: split–merge moves of the test partition per sweep that propose the precisions with
        it, each followed by a singleton move (default None: 2 for SCDP-3, 0 for the others; see
        :func:`build_kernel`).
    pair_moves : bool, optional
        SCDP-1 and -2: joint moves of each test reference and its nearest test reference, their
        publications and common type (default None: on for SCDP-1 and -2, off for SCDP-3; see
        :func:`build_kernel` for where they helped).
    backend : {"auto", "xla", "numba"}
        Where the assignment sweeps run (see :func:`build_kernel`).

    Examples
    --------
    >>> import jax, numpy as np
    >>> rng = np.random.default_rng(0)
    >>> train = np.concatenate([rng.normal(-2, 0.3, (5, 2)), rng.normal(2, 0.3, (5, 2))])
    >>> test = np.concatenate([rng.normal(-2, 0.3, (3, 2)), rng.normal(2, 0.3, (3, 2))])
    >>> fit = SupervisedDP().fit(train, [0] * 5 + [1] * 5, test, key=jax.random.key(0),
    ...                          n_chains=2, progress=False)  # until the chains mix
    >>> fit.point_estimate("vi").tolist()  # the test points' publications
    [0, 0, 0, 1, 1, 1]
    """

    def __init__(
        self,
        model: int = 1,
        *,
        share_clusters: bool = False,
        alpha: float = 1.0,
        alpha_types: float = 1.0,
        alpha_prior: GammaPrior | None = GammaPrior(1.0, 1.0),
        alpha_types_prior: GammaPrior | None = GammaPrior(1.0, 1.0),
        prior_variance: float = 1.0,
        precision_shape: float = 1.0,
        precision_rate: float = 1.0,
        max_test_clusters: int = 32,
        max_types: int = 32,
        n_auxiliary: int = 8,
        n_split_merge: int | None = None,
        n_precision_steps: int = 8,
        backend: str = "auto",
        n_type_split_merge: int | None = None,
        n_precision_split_merge: int | None = None,
        pair_moves: bool | None = None,
    ):
        # The arguments as given, for repr (every parameter but self and model, before any is resolved).
        self._arguments = {name: value for name, value in locals().items() if name not in ("self", "model")}
        self._kernel_options = dict(
            model=model,
            share_clusters=share_clusters,
            prior_variance=prior_variance,
            precision_shape=precision_shape,
            precision_rate=precision_rate,
            alpha_prior=alpha_prior,
            alpha_types_prior=alpha_types_prior,
            n_auxiliary=n_auxiliary,
            n_precision_steps=n_precision_steps,
            backend=backend,
            n_type_split_merge=n_type_split_merge,
            n_precision_split_merge=n_precision_split_merge,
            pair_moves=pair_moves,
        )
        self.n_split_merge = None if n_split_merge is None else check_int("n_split_merge", n_split_merge, minimum=0)
        # One kernel per count of moves, built (and its settings checked) once per model; models of
        # equal settings share its compilation through build_kernel (inference.step_cache).
        self._steps: dict[int, Any] = {}
        # Every option is checked here, before any data: build the kernel once.
        step = self._step(DEFAULT_SPLIT_MERGE if self.n_split_merge is None else self.n_split_merge)
        self.model = int(model)
        # The moves per sweep that the step runs (None resolved by build_kernel).
        self.n_precision_split_merge = step.args[0].n_precision_split_merge
        self.pair_moves = step.args[0].pair_moves
        self.n_type_split_merge = step.args[0].n_type_split_merge
        self.share_clusters = bool(share_clusters)
        self.alpha = check_real("alpha", alpha, low=0.0, low_open=True)
        self.alpha_types = check_real("alpha_types", alpha_types, low=0.0, low_open=True)
        self.precision_shape = float(precision_shape)
        self.precision_rate = float(precision_rate)
        self.max_test_clusters = check_int("max_test_clusters", max_test_clusters, minimum=1)
        self.max_types = check_int("max_types", max_types, minimum=1)

    def __repr__(self) -> str:
        """The constructor call with the arguments that differ from the defaults."""
        return call_text(type(self).__name__, [self.model], getattr(self, "_arguments", {}),
                         init_defaults(SupervisedDP))

    def _step(self, n_split_merge: int):
        """The kernel with ``n_split_merge`` moves of the test partition per sweep."""
        if n_split_merge not in self._steps:
            self._steps[n_split_merge] = build_kernel(n_split_merge=n_split_merge, **self._kernel_options)
        return self._steps[n_split_merge]

    def fit_distances(
        self, distances: Any, train_labels: Any, *, key: jax.Array, max_dims_per_feature: int = 1, **options: Any
    ) -> SupervisedDPFit:
        """Fit from pairwise distances only (DM05 §7.2, footnote 5).

        Parameters
        ----------
        distances : array_like (F, N + M, N + M) or (N + M, N + M)
            One distance matrix per feature over all references, training references first.
        train_labels : array_like (N,)
            Publications of the first N references; the remaining M are the test references.
        key : jax.Array
            PRNG key.
        max_dims_per_feature : int
            See :func:`embed_distances`.
        **options
            Passed to :meth:`fit` (``n_chains``, ``n_sweeps``, ...).

        Returns
        -------
        SupervisedDPFit
        """
        array = _check_distances("distances", distances)
        labels = as_label_codes("train_labels", train_labels)
        _warn_unlabelled_marks(train_labels)
        n_points = array.shape[1]
        if not 1 <= labels.shape[0] < n_points:
            raise ValueError(
                f"train_labels: expected between 1 and {n_points - 1} labels (the first rows of distances), "
                f"got shape {labels.shape}"
            )
        coordinates = embed_distances(array, max_dims_per_feature=max_dims_per_feature)
        n_train = labels.shape[0]
        return self.fit(coordinates[:n_train], labels, coordinates[n_train:], key=key, **options)

    def fit(
        self,
        train_features: Any,
        train_labels: Any,
        test_features: Any,
        key: jax.Array,
        *,
        n_chains: int = 4,
        n_draws: int | None = None,
        n_warmup: int | None = None,
        n_sweeps: int | None = None,
        thin: int = 1,
        draws_per_call: int = 10,
        time_budget: float | None = None,
        progress: bool = True,
        init: Any = "dispersed",
        until_mixed: bool | None = None,
    ) -> SupervisedDPFit:
        """Sample the posterior of the test partition with ``n_chains`` vmapped chains.

        Parameters
        ----------
        train_features : array_like (N, D)
            Training references (centre and scale them, DM05 §5). A DataFrame whose column names
            are all strings gives the fit its :attr:`SupervisedDPFit.feature_names`.
        train_labels : array_like (N,)
            Their publications (any labels; -1 too is a publication here, with a warning: to mark
            rows to cluster with -1, use :class:`zoo.sklearn.SupervisedDPEstimator`).
        test_features : array_like (M, D)
            Test references. As a DataFrame after a DataFrame of ``train_features`` with string
            column names, matched to those by name: the same names in another order are reordered
            to the training order, and missing or other names are a ``ValueError`` naming them.
        key : jax.Array
            PRNG key; the same key gives identical chains. Positional or ``key=``, as in
            :meth:`zoo.dirichlet.DPMixture.fit`.
        n_chains : int
            Chains run in parallel.
        n_draws : int, optional
            Draws kept per chain after the warm-up (each ``thin`` sweeps apart), as in
            :meth:`zoo.dirichlet.DPMixture.fit` and the command line's ``--draws``; with
            ``until_mixed``, the most to draw. Give this or ``n_sweeps``, not both.
        n_warmup : int, optional
            Warm-up sweeps (default half of ``n_sweeps`` when that is given, else half of
            :data:`DEFAULT_SWEEPS`: 500).
        n_sweeps : int, optional
            Sweeps per chain, warm-up included (the length's older form; ``n_draws`` counts the
            kept draws alone); with ``until_mixed``, the most to run. Neither given: the warm-up
            and :data:`UNTIL_MIXED_DRAWS` (4,000) draws when the run is until the chains mix, as
            by default, else :data:`DEFAULT_SWEEPS` (1,000) sweeps.
        thin, draws_per_call, time_budget, progress
            See :func:`inference.chains.sample_chains`.
        init : str or array_like of int
            Starting test partitions: ``"dispersed"`` (default: chain c starts from the c-th of
            one publication, K-means with min(M, 16) clusters, and random labels among
            min(M, 8), in turn, so that R-hat compares chains started far apart), ``"single"``,
            ``"singletons"`` (one publication per test reference), ``"kmeans"``, ``"random"``, or
            labels of shape (M,) or (n_chains, M). Each chain's precisions start at the spread of
            the references within its starting publications (see
            :func:`zoo.dirichlet.supervised.init`), so a start such as a chain's last partition or
            the truth survives the first sweeps on data of any scale.
        until_mixed : bool, optional
            Stop as soon as every label-invariant quantity of :attr:`SupervisedDPFit.mixing`
            mixes (R-hat ≤ 1.01, bulk and tail ESS ≥ 400), asked each time the draws have grown
            by a tenth (``stop_when`` of :func:`inference.chains.sample_chains`); a quantity
            constant in every draw passes only once the chains hold 400 draws in all
            (:func:`inference.diagnostics.mixes_to_stop`). ``n_sweeps`` is then the most to run
            and ``time_budget`` still applies: give generous ones. Chains
            that do not mix by then end with the usual :class:`~inference.diagnostics.MixingWarning`.
            Not given: True when neither ``n_draws`` nor ``n_sweeps`` is given (since 2026-12-04,
            as :meth:`zoo.dirichlet.DPMixture.fit`), and False when one is, for exactly that
            length. Where the run ends then depends on the draws: the same key gives the same end.

        Returns
        -------
        SupervisedDPFit

        Warns
        -----
        inference.diagnostics.MixingWarning
            When a label-invariant quantity does not mix (see :attr:`SupervisedDPFit.mixing`;
            split R-hat for one chain).
        zoo.dirichlet.ties.TiedValuesWarning
            When features hold one value in half of the references or more (see
            :func:`zoo.dirichlet.ties.tied_features`).
        zoo.dirichlet.scale.ScaleWarning
            When features lie far from the scale G0 expects (see
            :func:`zoo.dirichlet.scale.off_scale_features`): centre and scale them (DM05 §5).
        zoo.dirichlet.scale.PrecisionPriorWarning
            SCDP-1 and -3: when the prior of the precisions holds them below half of what the
            training publications show (:func:`zoo.dirichlet.scale.precision_prior_shrinkage`:
            tight publications, as entities of a few records, against a prior that expects them
            as wide as the data), with the ``precision_rate`` that fits them.
        UserWarning
            When numeric ``train_labels`` hold -1 (see ``train_labels``).
        """
        train, labels, test = _check_problem(train_features, train_labels, test_features)
        _warn_unlabelled_marks(train_labels)
        columns = feature_names(train_features)
        key = check_key("key", key)
        check_one_length(n_draws, n_sweeps)
        if until_mixed is None:
            until_mixed = n_sweeps is None and n_draws is None
        until_mixed = check_bool("until_mixed", until_mixed)
        references = np.concatenate([train, test])
        warn_tied_features("train_features and test_features", references, stacklevel=user_stacklevel(),
                           columns=columns)
        options = self._kernel_options  # G0: means N(0, prior_variance), precisions Gamma(shape, rate)
        warn_off_scale("train_features and test_features", references, 0.0,
                       np.sqrt(float(options["precision_rate"]) / float(options["precision_shape"])
                               + float(options["prior_variance"])), stacklevel=user_stacklevel(), columns=columns)
        if self.model != 2:  # SCDP-2 sets its prior of the precisions from the data each sweep (DM05 §5.1)
            warn_precision_prior(f"SupervisedDP({self.model})", train, labels, float(options["precision_shape"]),
                                 float(options["precision_rate"]), stacklevel=user_stacklevel())
        n_chains = check_int("n_chains", n_chains, minimum=1)
        thin = check_int("thin", thin, minimum=1)
        if n_draws is not None:
            n_draws = check_int("n_draws", n_draws, minimum=1)
            n_warmup = check_int("n_warmup", DEFAULT_SWEEPS // 2 if n_warmup is None else n_warmup, minimum=0)
        else:
            if n_sweeps is None:
                if n_warmup is None:
                    n_warmup = DEFAULT_SWEEPS // 2
                n_warmup = check_int("n_warmup", n_warmup, minimum=0)
                n_sweeps = n_warmup + UNTIL_MIXED_DRAWS * thin if until_mixed else DEFAULT_SWEEPS
            n_sweeps = check_int("n_sweeps", n_sweeps, minimum=2)
            if n_warmup is None:
                n_warmup = n_sweeps // 2
            n_warmup = check_int("n_warmup", n_warmup, minimum=0, maximum=n_sweeps - 1)
            n_draws = max((n_sweeps - n_warmup) // thin, 1)
        data = _supervised_data(train, labels, test)
        key_init, key_chains = jax.random.split(key)
        states, shared_start = _initial_states(self, init, n_chains, train, labels, test, key_init)
        # A call whose sweeps run out of publication or type slots is re-run from its starting
        # states with that capacity doubled (SupervisedState.grow_after_overflow): only the
        # capacity that ran out grows, and the sweeps before that call are kept.
        n_split_merge = self.n_split_merge
        if n_split_merge is None:
            n_split_merge = auto_split_merge(train.shape[0], len(np.unique(labels)), test.shape[0])
        step = self._step(n_split_merge)
        result = sample_chains(
            key_chains, step, states, data,
            n_warmup=n_warmup, n_draws=n_draws, thin=thin, draws_per_call=draws_per_call,
            time_budget=time_budget, progress=progress, record=record_supervised(train.shape[0]),
            on_overflow="grow", stop_when=self._when_mixed(step, shared_start) if until_mixed else None,
        )
        names = row_names(test_features)
        # Each training publication's label, by its code (as_label_codes numbers them in sorted order).
        given = np.empty(labels.shape[0], dtype=object)
        given[:] = list(train_labels)
        publications = np.empty(int(labels.max()) + 1, dtype=object)
        publications[labels] = given
        continuation = _Continuation(self, *key_as_data(key_chains), arrays_digest(train, labels, test),
                                     n_split_merge, None if names is None else tuple(names), columns,
                                     tuple(publications.tolist()), shared_start)
        return self._finish(result, continuation, step, "SupervisedDP.fit")

    def _fit_object(self, result: ChainResult, step: Any, point_names: Any = None) -> SupervisedDPFit:
        return SupervisedDPFit(result, model=self.model, n_type_split_merge=self.n_type_split_merge,
                               n_split_merge=partition_moves_per_sweep(step), pair_moves=self.pair_moves,
                               point_names=point_names)

    def _when_mixed(self, step: Any, one_start: bool = False) -> Callable[[ChainResult], bool]:
        """``stop_when`` of ``until_mixed``: every label-invariant quantity of the draws so far mixes, a
        constant only once the draws could have shown a move (:func:`inference.diagnostics.mixes_to_stop`,
        as :class:`zoo.dirichlet.DPMixture`'s), and never where chains from ``one_start`` stayed there."""

        def mixed(so_far: ChainResult) -> bool:
            table = self._fit_object(so_far, step).mixing
            table.attrs["one_start"] = bool(one_start)
            return diagnostics.mixes_to_stop(table)

        return mixed

    def _finish(self, result: ChainResult, continuation: _Continuation, step: Any, caller: str) -> SupervisedDPFit:
        fit = self._fit_object(result, step, getattr(continuation, "point_names", None))
        fit._continuation = continuation
        if not result.samples:
            warnings.warn(f"{caller}: {diagnostics.no_draws_message(result, fit._continue_with)}", RuntimeWarning,
                          stacklevel=user_stacklevel())
        else:  # one chain too (split R-hat), as its card shows
            fit._warned = diagnostics.warn_if_not_mixing(fit.mixing, stacklevel=user_stacklevel())
        return fit
