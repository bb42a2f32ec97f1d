"""One-sided clustering: the asymmetric clustering model (ACM) for dyadic data.

H99 §2.2, eqs. 5–7; HP98 §3, eq. 2. Every object of ONE side carries a single latent cluster; all
of its co-occurrences are drawn from that cluster's distribution over the other side. Clustering
the rows (X):

    P(S, c) = ∏_i P(c(x_i)) ∏_k [P(x_i) P(y_k|c(x_i))]^{n(x_i, y_k)}                   (H99 eq. 5)
    P(S_i)  = Σ_α P(c_α) ∏_k [P(x_i) P(y_k|c_α)]^{n(x_i, y_k)}                          (H99 eq. 6)

EM alternates the cluster posteriors P{c(x_i) = c_α} ∝ P(c_α) ∏_k P(y_k|c_α)^{n(x_i, y_k)} with
P(y_k|c_α) ∝ Σ_i n(x_i, y_k) P{c(x_i) = c_α}, P(c_α) ∝ Σ_i P{c(x_i) = c_α} and P(x_i) ∝ n(x_i)
(H99 eq. 7, HP98 eq. 2). The product over all tokens of a row is computed in log space, so rows
with thousands of tokens never underflow. Tempered EM replaces n(x_i, y_k) by β·n(x_i, y_k) in the
E-step (HP98 §5), which keeps the posteriors soft. Clustering the columns (Y) is the same model
on the transposed counts; its predictive distribution is then P(y|x) = Σ_c P(c|x) P(y|c) with
P(c|x) ∝ P(c) P(x|c) (H99 §2.4 table).

MAP-EM. Maximum-likelihood posteriors become hard, and P(y|c) is 0 for every feature never
seen with the cluster, so held-out tokens can get P(y|x) = 0 (0.02–0.11% of a bigram test set,
issue 17). With ``prior_count`` c > 0 the M-step adds c pseudo-counts to every expected count,
P(y_k|c_α) ∝ Σ_i n(x_i, y_k) P{c(x_i) = c_α} + c, P(c_α) ∝ Σ_i P{c(x_i) = c_α} + c and
P(x_i) ∝ n(x_i) + c — the MAP estimate under symmetric Dirichlet(1 + c) priors, as the LRM's
``prior_count`` — and every prediction is positive. c = 0 (the default) is H99's EM.

The file reads top to bottom: tokens for the program, the NumPyro program (one enumerated cluster
per object), the parameters, the sufficient statistics and E-step, the M-step, prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from inference.em import fitted_params
from inference.schedules import anneal_up
from inference.native.backend import resolve_backend
from inference.sparse import count_matmul
from inference._validation import check_choice, check_fitted_params, check_int, check_real
from inference.jit import jit
from zoo.data import CoOccurrence, DyadicArrays, not_co_occurrence
from zoo.dyadic.predictive import (HeldOut, conditional_log_lik, heldout_evaluation, prediction_spread,
                                   split_zero_cells)

__all__ = ["OneSided", "OneSidedParams", "one_sided_program", "padded_tokens"]

_SIDES = ("rows", "cols")


# ----------------------------------------------------------------------------- tokens
def padded_tokens(data: CoOccurrence, side: str = "rows") -> tuple[np.ndarray, np.ndarray]:
    """The tokens of every object as a padded matrix, the observation format of the programs.

    Parameters
    ----------
    data : CoOccurrence with integer counts
    side : {"rows", "cols"}
        Which side are the objects: row i of the result lists the column index of every token of
        row object i (``"rows"``), or the row index of every token of column object k (``"cols"``).

    Returns
    -------
    tokens : (n_objects, max_tokens) int32 array, padded with 0
    mask : (n_objects, max_tokens) bool array, False on padding
    """
    if not isinstance(data, CoOccurrence):
        raise not_co_occurrence("data", data)
    check_choice("side", side, _SIDES)
    if not data.is_integer:
        raise ValueError("data: tokens need integer counts")
    oriented = data if side == "rows" else data.transpose()
    repeats = oriented.counts.astype(np.int64)
    objects = np.repeat(oriented.rows, repeats)
    features = np.repeat(oriented.cols, repeats)
    lengths = np.bincount(objects, minlength=oriented.n_rows)
    position = np.arange(objects.shape[0]) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    tokens = np.zeros((oriented.n_rows, max(1, int(lengths.max()))), np.int32)
    mask = np.zeros(tokens.shape, bool)
    tokens[objects, position] = features
    mask[objects, position] = True
    return tokens, mask


# ----------------------------------------------------------------------------- the program
def _side_names(side: str) -> dict[str, str]:
    if side == "rows":
        return {"plate": "rows", "object": "x", "feature": "y",
                "features": "col_given_class", "marginal": "row_marginal"}
    return {"plate": "cols", "object": "y", "feature": "x",
            "features": "row_given_class", "marginal": "col_marginal"}


def one_sided_program(token_mask, tokens=None, *, n_features: int, n_classes: int, side: str = "rows"):
    """NumPyro program of the one-sided clustering model, one enumerated cluster per object.

    Parameters
    ----------
    token_mask : bool array, shape (n_objects, max_tokens)
        Which token slots of each object are used (all True to simulate ``max_tokens`` tokens per
        object).
    tokens : int array, shape (n_objects, max_tokens), optional
        Observed feature index of every token (:func:`padded_tokens`); omit to simulate.
    n_features, n_classes : int
        Size of the other side and the number of clusters K.
    side : {"rows", "cols"}
        Which side is clustered; it names the sites (below).

    Sites
    -----
    ``side="rows"``: plate ``rows`` (objects) around plate ``tokens``; ``c`` — enumerated cluster
    per row (H99 eq. 5); ``x`` — the row of each token, observed, drawn from ``row_marginal``
    P(x); ``y`` — the column of each token from ``col_given_class`` P(y|c) (K, n_cols).
    ``side="cols"``: plate ``cols``, ``y`` observed from ``col_marginal``, ``x`` from
    ``row_given_class``. ``class_prior`` is P(c) (K,).
    """
    check_choice("side", side, _SIDES)
    names = _side_names(side)
    n_objects, max_tokens = token_mask.shape
    simplex = dist.constraints.simplex
    class_prior = numpyro.param("class_prior", jnp.full((n_classes,), 1.0 / n_classes), constraint=simplex)
    feature_given_class = numpyro.param(
        names["features"], jnp.full((n_classes, n_features), 1.0 / n_features), constraint=simplex
    )
    object_marginal = numpyro.param(names["marginal"], jnp.full((n_objects,), 1.0 / n_objects), constraint=simplex)
    object_index = jnp.broadcast_to(jnp.arange(n_objects)[:, None], (n_objects, max_tokens))
    with numpyro.plate(names["plate"], n_objects, dim=-2):
        c = numpyro.sample("c", dist.Categorical(class_prior), infer={"enumerate": "parallel"})
        with numpyro.plate("tokens", max_tokens, dim=-1), handlers.mask(mask=token_mask):
            numpyro.sample(names["object"], dist.Categorical(object_marginal), obs=object_index)
            numpyro.sample(names["feature"], dist.Categorical(feature_given_class[c]), obs=tokens)


# ----------------------------------------------------------------------------- parameters
class OneSidedParams(NamedTuple):
    """Parameters of the one-sided clustering model (H99 eqs. 5–7), for the clustered side.

    "Objects" are the clustered side (rows for ``side="rows"``), "features" the other side.

    Attributes
    ----------
    class_prior : (K,) — P(c_α), the prior of an object's cluster
    feature_given_class : (n_features, K) — P(y_k|c_α); every column sums to 1
    object_marginal : (n_objects,) — P(x_i) ∝ n(x_i), fixed by the training counts
    cluster_posterior : (n_objects, K) — P{c(x_i) = c_α} from the latest (tempered) E-step;
        objects without counts keep the prior
    """

    class_prior: Any
    feature_given_class: Any
    object_marginal: Any
    cluster_posterior: Any

    def program_params(self, side: str = "rows") -> dict:
        """The parameters under the site names and layouts of :func:`one_sided_program`."""
        names = _side_names(side)
        return {
            "class_prior": self.class_prior,
            names["features"]: self.feature_given_class.T,
            names["marginal"]: self.object_marginal,
        }

    def assignments(self) -> Any:
        """Hard clustering: the most probable cluster of every object, shape (n_objects,)."""
        return jnp.argmax(self.cluster_posterior, axis=1)


def _safe_log(probabilities: Any) -> Any:
    """log p with p = 0 mapped to log(smallest normal): keeps Σ n log p finite and NaN-free."""
    return jnp.log(jnp.maximum(probabilities, jnp.finfo(probabilities.dtype).tiny))


def _log_prior(prior: Any) -> Any:
    return jnp.where(prior > 0, jnp.log(jnp.where(prior > 0, prior, 1.0)), -jnp.inf)


def _normalise_columns(stats: Any, fallback: Any, prior_count: float = 0.0) -> Any:
    """Columns of ``stats`` + ``prior_count`` divided by their sums; a column with no mass keeps
    ``fallback`` (only possible without pseudo-counts)."""
    stats = stats + prior_count
    totals = stats.sum(axis=0, keepdims=True)
    return jnp.where(totals > 0, stats / jnp.where(totals > 0, totals, 1.0), fallback)


def _reduce(reduce: Any, value: Any) -> Any:
    """Apply the cross-block reduction (identity when fitting on one device)."""
    return value if reduce is None else reduce(value)


def _marginal(sums: Any, prior_count: float) -> Any:
    """P(x_i) ∝ n(x_i) + c (H99 §2.2, with MAP pseudo-counts c)."""
    mass = sums + prior_count
    return mass / mass.sum()


def _marginal_log_lik(arrays: DyadicArrays, object_marginal: Any) -> Any:
    """Σ_i n(x_i) log P(x_i), with 0 · log 0 = 0 for objects without counts."""
    positive = arrays.row_sums > 0
    return jnp.sum(jnp.where(positive, arrays.row_sums * _safe_log(object_marginal), 0.0))


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class OneSided:
    """One-sided (asymmetric) clustering model with K clusters, fitted by (tempered) EM.

    Parameters
    ----------
    n_classes : int
        Number of clusters K (≥ 1, at most the number of objects clustered).
    side : {"rows", "cols"}
        Cluster the row objects X (H99 "X-clustering") or the column objects Y.
    backend : {"auto", "xla", "numba"}
        Implementation of the sparse products (see :mod:`inference.sparse`).
    prior_count : float ≥ 0
        Pseudo-counts added to every expected count in the M-step (MAP-EM under symmetric
        Dirichlet(1 + c) priors; module docstring). 0 is maximum-likelihood EM; any c > 0 keeps
        every prediction P(y|x) > 0, so held-out perplexity needs no floor.

    Notes
    -----
    The kernel always clusters the rows of the arrays returned by :meth:`prepare`; for
    ``side="cols"`` those are the transposed counts, so ``OneSided(K, side="cols")`` on ``data``
    and ``OneSided(K)`` on ``data.transpose()`` run the same computation. Held-out scores are
    Σ n log P(y|x) in the data's own orientation for both sides.

    Examples
    --------
    >>> import jax
    >>> from zoo.data import CoOccurrence
    >>> from inference.em import tempered_em
    >>> data = CoOccurrence.from_dense([[5, 0, 1], [4, 1, 0], [0, 6, 2], [1, 5, 3]])
    >>> result = tempered_em(OneSided(n_classes=2), data, key=jax.random.key(0), max_iter=50)
    >>> result.params.cluster_posterior.shape
    (4, 2)
    """

    n_classes: int
    side: str = "rows"
    backend: str = "auto"
    prior_count: float = 0.0

    #: What a fit's summary points to beyond the parameters: each cluster's most probable words and
    #: members, and each object's cluster.
    see_also: ClassVar[tuple] = ("zoo.report.class_profiles(result, col_names=data.col_names)",
                                 "result.params.assignments()")

    #: The fields of :class:`OneSidedParams` that are distributions, and the axis each sums to 1
    #: along (None: the whole array; ``init=`` of :func:`inference.em.tempered_em` is checked
    #: against it).
    probability_axes: ClassVar[dict] = {"class_prior": -1, "feature_given_class": 0, "object_marginal": None,
                                        "cluster_posterior": -1}

    def __post_init__(self) -> None:
        check_int("n_classes", self.n_classes, minimum=1)
        check_choice("side", self.side, _SIDES)
        resolve_backend(self.backend)  # a bad name, or numba off the CPU, refused here
        object.__setattr__(self, "prior_count", check_real("prior_count", self.prior_count, low=0.0))

    program = staticmethod(one_sided_program)

    # ---------------------------------------------------------------- data and initialisation
    # With validation data, tempered_em anneals this model up from a low β (see anneal_up), and runs
    # TemperedEM too where the annealed classes are alike (rows of a few tokens), keeping the better.
    default_schedule = staticmethod(anneal_up)

    def _oriented(self, data: Any) -> CoOccurrence:
        if not isinstance(data, CoOccurrence):
            raise not_co_occurrence("data", data)
        return data if self.side == "rows" else data.transpose()

    def prepare(self, data: CoOccurrence) -> DyadicArrays:
        """Validate ``data`` and return the device arrays with the clustered objects as rows."""
        oriented = self._oriented(data)
        if self.n_classes > oriented.n_rows:
            raise ValueError(
                f"n_classes: {self.n_classes} clusters for only {oriented.n_rows} {self.side} to cluster"
            )
        return oriented.to_arrays()

    def prepare_sharded(self, data: CoOccurrence, n_shards: int, *, process_local: bool = False) -> DyadicArrays:
        """Like :meth:`prepare`, split into ``n_shards`` blocks of whole objects (leading axis).

        Every object's cells lie in one block, so the cluster scores of an object are a sum over
        blocks in which all but one term are zero (data-parallel EM, ``reduce``).
        ``process_local``: ``data`` is this process's part, made of whole objects (rows, or
        columns with ``side="cols"``), and the blocks are this process's
        (:meth:`CoOccurrence.to_sharded_arrays`).
        """
        self.prepare(data)
        return self._oriented(data).to_sharded_arrays(n_shards, process_local=process_local)

    def init_params(self, rng_key: Any, arrays: DyadicArrays) -> OneSidedParams:
        """Random start: each cluster's P(y|c) is half the overall column distribution and half
        the distribution of one object drawn at random (distinct objects with counts)."""
        n_objects, n_features = arrays.shape
        dtype = arrays.counts.dtype
        has_counts = (arrays.row_sums > 0).astype(dtype)
        seeds = jax.random.choice(rng_key, n_objects, (self.n_classes,), replace=False, p=has_counts / has_counts.sum())
        seed_counts = count_matmul(jax.nn.one_hot(seeds, n_objects, dtype=dtype).T, arrays, transpose=True,
                                   backend=self.backend)
        overall = arrays.col_sums / arrays.col_sums.sum()
        seed_totals = seed_counts.sum(axis=0, keepdims=True)
        seed_distributions = jnp.where(seed_totals > 0, seed_counts / jnp.where(seed_totals > 0, seed_totals, 1.0),
                                       overall[:, None])
        return OneSidedParams(
            class_prior=jnp.full((self.n_classes,), 1.0 / self.n_classes, dtype),
            feature_given_class=0.5 * overall[:, None] + 0.5 * seed_distributions,
            object_marginal=_marginal(arrays.row_sums, self.prior_count),
            cluster_posterior=jnp.full((n_objects, self.n_classes), 1.0 / self.n_classes, dtype),
        )

    # ---------------------------------------------------------------- sufficient statistics, E-step
    def cluster_scores(self, params: OneSidedParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """log ∏_k P(y_k|c_α)^{n(x_i, y_k)} = Σ_k n(x_i, y_k) log P(y_k|c_α), shape (n_objects, K).

        The log-likelihood of each object's whole histogram under each cluster (HP98 eq. 2, in
        log space); objects without counts score 0. ``reduce`` (e.g. a ``psum`` over devices)
        adds up the sums over cells computed block by block.
        """
        return _reduce(reduce, count_matmul(_safe_log(params.feature_given_class), arrays, backend=self.backend))

    def log_likelihood(self, params: OneSidedParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """log P(S) = Σ_i log Σ_α P(c_α) ∏_k [P(x_i) P(y_k|c_α)]^{n(x_i, y_k)} (H99 eq. 6)."""
        log_joint = _log_prior(params.class_prior) + self.cluster_scores(params, arrays, reduce)
        return jnp.sum(jax.nn.logsumexp(log_joint, axis=1)) + _marginal_log_lik(arrays, params.object_marginal)

    def posterior(self, params: OneSidedParams, arrays: DyadicArrays, beta: Any = 1.0) -> Any:
        """Tempered cluster posteriors P_β{c(x_i) = c_α} ∝ P(c_α) ∏_k P(y_k|c_α)^{β n(x_i, y_k)}.

        HP98 eq. 2 with n replaced by β·n (HP98 §5); shape (n_objects, K).
        """
        scores = self.cluster_scores(params, arrays)
        return jax.nn.softmax(_log_prior(params.class_prior) + beta * scores, axis=1)

    # ---------------------------------------------------------------- E-step + M-step
    def em_step(self, params: OneSidedParams, arrays: DyadicArrays, beta: Any,
                reduce: Any = None) -> tuple[OneSidedParams, Any]:
        """One tempered EM iteration; returns (new params, β = 1 log-likelihood of ``params``).

        E-step (H99 eq. 7 left, HP98 eq. 2 with β·n): the cluster scores are computed once and
        give both the tempered posteriors and the untempered log-likelihood (eq. 6). M-step
        (eq. 7 right): P(y_k|c_α) ∝ Σ_i n(x_i, y_k) P{c(x_i) = c_α}, P(c_α) = mean posterior
        (both plus ``prior_count`` pseudo-counts for MAP-EM).
        With ``reduce`` (a ``psum`` over devices holding blocks of cells) the two sums over
        cells — the cluster scores and the expected feature counts — are added up across blocks.
        """
        log_prior = _log_prior(params.class_prior)
        scores = self.cluster_scores(params, arrays, reduce)
        log_lik = (jnp.sum(jax.nn.logsumexp(log_prior + scores, axis=1))
                   + _marginal_log_lik(arrays, params.object_marginal))
        posterior = jax.nn.softmax(log_prior + beta * scores, axis=1)
        feature_counts = _reduce(reduce, count_matmul(posterior, arrays, transpose=True, backend=self.backend))
        class_mass = posterior.sum(axis=0) + self.prior_count
        return OneSidedParams(
            class_prior=class_mass / class_mass.sum(),
            feature_given_class=_normalise_columns(feature_counts, params.feature_given_class, self.prior_count),
            object_marginal=params.object_marginal,
            cluster_posterior=posterior,
        ), log_lik

    # ---------------------------------------------------------------- prediction
    def check_params(self, params: Any, name: str = "params") -> OneSidedParams:
        """``params`` as a fit of this model's (``TypeError``/``ValueError`` naming ``name`` otherwise)."""
        sizes = {"class_prior": self.n_classes, "feature_given_class": self.n_classes,
                 "cluster_posterior": self.n_classes}
        return check_fitted_params(name, params, OneSidedParams, sizes, self)

    def predictive_factors(self, params: OneSidedParams) -> tuple[Any, Any]:
        """(R, C) with P(y_k|x_i) = Σ_c R_ic C_kc in the data's own orientation (H99 §2.4).

        X-clustering: R = P{c(x_i) = c}, C = P(y|c). Y-clustering: C = P(y_k|c) ∝ P(y_k)
        P{c(y_k) = c} and R = P(c|x_i) ∝ P(c) P(x_i|c) with P(c) = Σ_k P(y_k) P{c(y_k) = c}; rows
        never seen get P(c).
        """
        if self.side == "rows":
            return params.cluster_posterior, params.feature_given_class
        joint = params.object_marginal[:, None] * params.cluster_posterior  # P(y_k, c)
        class_mass = joint.sum(axis=0)
        col_given_class = _normalise_columns(joint, params.cluster_posterior)
        class_and_row = class_mass[None, :] * params.feature_given_class
        totals = class_and_row.sum(axis=1, keepdims=True)
        class_given_row = jnp.where(totals > 0, class_and_row / jnp.where(totals > 0, totals, 1.0), class_mass[None, :])
        return class_given_row, col_given_class

    def prediction_spread(self, params: OneSidedParams) -> float | None:
        """How far any row's P(y|x) lies from the rows' mean, at most (total variation;
        :func:`zoo.dyadic.predictive.prediction_spread`); None for one cluster.
        :func:`inference.em.tempered_em` warns when a fit's is below
        :data:`inference.em.ALIKE_TOLERANCE`: the classes are alike."""
        if self.n_classes == 1:
            return None
        return prediction_spread(*self.predictive_factors(params))

    def heldout_log_lik(self, params: OneSidedParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """Σ n(x_i, y_k) log P(y_k|x_i) of held-out counts (arrays from :meth:`prepare`)."""
        row_factors, col_factors = self.predictive_factors(params)
        if self.side == "cols":  # the prepared arrays are transposed: rows are the Y objects
            row_factors, col_factors = col_factors, row_factors
        return _reduce(reduce, conditional_log_lik(row_factors, col_factors, arrays, backend=self.backend))

    def heldout_log_lik_and_zeros(self, params: OneSidedParams, arrays: DyadicArrays,
                                  reduce: Any = None, floor: float | None = None) -> tuple[Any, Any]:
        """(Σ n log P(y|x) over held-out tokens of positive probability, tokens of probability 0):
        the validation score of the EM driver (:func:`zoo.dyadic.predictive.split_zero_cells`).
        With ``prior_count > 0`` no prediction is 0 and the count pass is skipped. With ``floor``
        every token is scored at max(P(y|x), floor) (:func:`~zoo.dyadic.predictive.split_zero_cells`),
        as the evaluation does."""
        row_factors, col_factors = self.predictive_factors(params)
        if self.side == "cols":  # the prepared arrays are transposed: rows are the Y objects
            row_factors, col_factors = col_factors, row_factors
        log_lik = _reduce(reduce, conditional_log_lik(row_factors, col_factors, arrays, backend=self.backend))
        if self.prior_count > 0 and floor is None:
            return log_lik, jnp.zeros((), log_lik.dtype)
        return split_zero_cells(log_lik, row_factors, col_factors, arrays, reduce=reduce, floor=floor)

    def heldout_evaluation(self, params: OneSidedParams, data: CoOccurrence, *,
                           floor: float | None = None) -> HeldOut:
        """Σ n log P(y|x) of held-out ``data`` (own orientation) in float64, tokens of probability
        0 counted (:func:`zoo.dyadic.predictive.heldout_evaluation`: no hidden floor)."""
        return heldout_evaluation(self, params, data, floor=floor)

    def assign(self, params: Any, data: CoOccurrence, *, beta: float = 1.0) -> Any:
        """Cluster posteriors of the objects of ``data`` (new objects, same features), (n, K).

        One E-step with the fitted P(c) and P(y|c) held fixed. ``params``: the fit's parameters or
        its ``EMResult``; given the result, ``data`` that names its features must name them as the
        fitted data did, in order (a ``ValueError`` naming ``data``: features in another order would
        be read by position, in silence).
        """
        params = fitted_params(params, data, "col_names" if self.side == "rows" else "row_names")
        beta = check_real("beta", beta, low=0.0, high=1.0, low_open=True)
        oriented = self._oriented(data)
        n_features = params.feature_given_class.shape[0]
        if oriented.n_cols != n_features:
            raise ValueError(f"data: has {oriented.n_cols} features ({'columns' if self.side == 'rows' else 'rows'}) "
                             f"but the model was fitted with {n_features}")
        return _assign(self, params, oriented.to_arrays(), jnp.asarray(beta))


@partial(jit, static_argnames=("model",))
def _assign(model: OneSided, params: OneSidedParams, arrays: DyadicArrays, beta: Any) -> Any:
    return model.posterior(params, arrays, beta.astype(arrays.counts.dtype))
