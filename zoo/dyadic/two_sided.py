"""Two-sided clustering: the symmetric clustering model (SCM) for dyadic data.

H99 §2.3, eqs. 8–10; HP98 §4, eq. 3. Every row object x_i belongs to one of K_x row clusters and
every column object y_k to one of K_y column clusters; the clusters are coupled by association
parameters c_νμ:

    P(S, c) = ∏_i P(c(x_i)) ∏_k P(c(y_k)) ∏_ik [P(x_i) P(y_k) c_{c(x_i), c(y_k)}]^{n(x_i, y_k)}   (H99 eq. 8)

The normalisation Σ_ik P(x_i) P(y_k) c_{c(x_i) c(y_k)} = 1 gives c_νμ = π_νμ / (π^x_ν π^y_μ) with
π_νμ = Σ_ik n(x_i, y_k) P{c(x_i) = ν} P{c(y_k) = μ} / L and its marginals π^x, π^y
(H99 eq. 9, HP98 §4). The joint posterior of all assignments does not factorise, so the E-step is a
mean-field approximation q(c) = ∏_i q(c(x_i)) ∏_k q(c(y_k)) with

    P{c(x_i) = ν} ∝ P(ν) exp[β Σ_k n(x_i, y_k) Σ_μ P{c(y_k) = μ} log c_νμ]      (H99 eq. 10, HP98 eq. 3)

and the symmetric update for the columns; one EM iteration performs the sequence
(c^x-posteriors, π, c^y-posteriors, π) of H99 §2.3.

Monotone quantity. The updates are exact coordinate ascent on the mean-field free energy

    F = E_q[log P(S, c)] + H(q) + L − L Σ_νμ π^x_ν π^y_μ c_νμ,

whose last two terms (a Lagrange term for the normalisation) vanish whenever c is the
π/(π^x π^y) of the current posteriors, which is how every parameter set here is stored. F is
therefore a lower bound on the exact log-likelihood log Σ_c P(S, c) of eq. 8 and never decreases
at β = 1; :meth:`TwoSided.em_step` returns it. Σ_νμ π_νμ log c_νμ is the mutual information
between the row and the column clusters (HP98 §4).

The NumPyro program is the normalised generative form of the same model: a token picks a pair of
clusters (ν, μ) with probability π_νμ, then x from P(x|ν) ∝ P(x) [c(x) = ν] and y likewise, so
P(x_i, y_k | c) = P(x_i) P(y_k) π_{c(x_i) c(y_k)} / (P^x_{c(x_i)} P^y_{c(y_k)}), with P^x_ν the
P(x)-mass of row cluster ν — eq. 8 with c_νμ = π_νμ / (P^x_ν P^y_μ).

MAP-EM. With ``prior_count`` c > 0 every multinomial of the model gets c pseudo-counts in the
M-step: π_νμ ∝ L π_νμ + c (eq. 9's pair counts), P(ν) ∝ Σ_i P{c(x_i) = ν} + c and likewise
P(μ), P(x_i) ∝ n(x_i) + c and P(y_k) ∝ n(y_k) + c — the MAP estimate under symmetric
Dirichlet(1 + c) priors, as the LRM's ``prior_count``. Every prediction P(y|x) is then positive.
With c = 0 (the default) it is H99's EM and the objective F above never decreases at β = 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from inference.native.backend import resolve_backend
from inference.sparse import count_matmul
from inference._validation import check_choice, check_fitted_params, check_int, check_real
from inference.seeding import (LLOYD_ITERATIONS, SKETCH_COLUMNS, best_kmeans_labels, sketched_profiles,
                               smoothed_start)
from zoo.data import CoOccurrence, DyadicArrays, not_co_occurrence
from zoo.dyadic.predictive import (HeldOut, conditional_log_lik, heldout_evaluation, prediction_spread,
                                   split_zero_cells)

__all__ = ["TwoSided", "TwoSidedParams", "two_sided_program", "exact_log_likelihood"]


# ----------------------------------------------------------------------------- the program
def _members(marginal: Any, classes: Any, n_classes: int) -> Any:
    """P(object | cluster) ∝ P(object) [c(object) = cluster], shape (n_objects, n_classes).

    A cluster without members falls back to the marginal (it is never drawn when its π is 0).
    """
    joint = marginal[:, None] * jax.nn.one_hot(classes, n_classes, dtype=marginal.dtype)
    totals = joint.sum(axis=0, keepdims=True)
    return jnp.where(totals > 0, joint / jnp.where(totals > 0, totals, 1.0), marginal[:, None])


def two_sided_program(
    rows=None,
    cols=None,
    *,
    n_rows: int,
    n_cols: int,
    n_row_classes: int,
    n_col_classes: int,
    n_tokens: int | None = None,
):
    """NumPyro program of the two-sided clustering model (normalised generative form).

    Parameters
    ----------
    rows, cols : int arrays, shape (n_tokens,), optional
        Observed tokens (x, y); omit both to simulate ``n_tokens`` tokens.
    n_rows, n_cols : int
        Sizes of X and Y.
    n_row_classes, n_col_classes : int
        K_x and K_y.

    Sites
    -----
    ``row_class_prior`` (K_x,), ``col_class_prior`` (K_y,), ``row_marginal`` P(x) (n_rows,),
    ``col_marginal`` P(y) (n_cols,) and ``association`` π (K_x·K_y,), row-major: params on the
    simplex. ``row_class`` in plate ``rows`` and ``col_class`` in plate ``cols``: the cluster of
    every object. In plate ``tokens``: ``pair`` (enumerated) — the cluster pair ν·K_y + μ of a
    token, ``x`` and ``y`` — the token's row and column.
    """
    if n_tokens is None:
        n_tokens = rows.shape[0]
    row_class_prior = numpyro.param("row_class_prior", jnp.full((n_row_classes,), 1.0 / n_row_classes),
                                    constraint=dist.constraints.simplex)
    col_class_prior = numpyro.param("col_class_prior", jnp.full((n_col_classes,), 1.0 / n_col_classes),
                                    constraint=dist.constraints.simplex)
    row_marginal = numpyro.param("row_marginal", jnp.full((n_rows,), 1.0 / n_rows), constraint=dist.constraints.simplex)
    col_marginal = numpyro.param("col_marginal", jnp.full((n_cols,), 1.0 / n_cols), constraint=dist.constraints.simplex)
    n_pairs = n_row_classes * n_col_classes
    association = numpyro.param("association", jnp.full((n_pairs,), 1.0 / n_pairs), constraint=dist.constraints.simplex)
    with numpyro.plate("rows", n_rows):
        row_class = numpyro.sample("row_class", dist.Categorical(row_class_prior))
    with numpyro.plate("cols", n_cols):
        col_class = numpyro.sample("col_class", dist.Categorical(col_class_prior))
    row_given_class = _members(row_marginal, row_class, n_row_classes).T  # (K_x, n_rows)
    col_given_class = _members(col_marginal, col_class, n_col_classes).T  # (K_y, n_cols)
    with numpyro.plate("tokens", n_tokens):
        pair = numpyro.sample("pair", dist.Categorical(association), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Categorical(row_given_class[pair // n_col_classes]), obs=rows)
        numpyro.sample("y", dist.Categorical(col_given_class[pair % n_col_classes]), obs=cols)


# ----------------------------------------------------------------------------- parameters
class TwoSidedParams(NamedTuple):
    """State of the two-sided clustering model (H99 eqs. 8–10).

    Attributes
    ----------
    row_class_prior : (K_x,) — P(c^x_ν)
    col_class_prior : (K_y,) — P(c^y_μ)
    association : (K_x, K_y) — π_νμ, the joint distribution of (row cluster, column cluster) over
        tokens under the current posteriors (H99 eq. 9); c_νμ = π_νμ / (π^x_ν π^y_μ)
    row_posterior : (n_rows, K_x) — mean-field P{c(x_i) = ν}
    col_posterior : (n_cols, K_y) — mean-field P{c(y_k) = μ}
    row_marginal : (n_rows,) — P(x_i) ∝ n(x_i), fixed by the training counts
    col_marginal : (n_cols,) — P(y_k) ∝ n(y_k)
    """

    row_class_prior: Any
    col_class_prior: Any
    association: Any
    row_posterior: Any
    col_posterior: Any
    row_marginal: Any
    col_marginal: Any

    def association_ratio(self) -> Any:
        """c_νμ = π_νμ / (π^x_ν π^y_μ) (HP98 §4), with 1 where a cluster has no mass."""
        return _association_ratio(self.association)

    def row_assignments(self) -> Any:
        """Most probable cluster of every row, shape (n_rows,)."""
        return jnp.argmax(self.row_posterior, axis=1)

    def col_assignments(self) -> Any:
        """Most probable cluster of every column, shape (n_cols,)."""
        return jnp.argmax(self.col_posterior, axis=1)

    def program_params(self) -> dict:
        """Parameters under the site names of :func:`two_sided_program`."""
        return {
            "row_class_prior": self.row_class_prior,
            "col_class_prior": self.col_class_prior,
            "row_marginal": self.row_marginal,
            "col_marginal": self.col_marginal,
            "association": self.association.reshape(-1),
        }


def _association_ratio(association: Any) -> Any:
    outer = association.sum(axis=1, keepdims=True) * association.sum(axis=0, keepdims=True)
    return jnp.where(outer > 0, association / jnp.where(outer > 0, outer, 1.0), 1.0)


def _safe_log(values: Any) -> Any:
    """log v with v = 0 mapped to log(smallest normal): finite, so 0 · log 0 terms stay 0."""
    return jnp.log(jnp.maximum(values, jnp.finfo(values.dtype).tiny))


def _log_prior(prior: Any) -> Any:
    return jnp.where(prior > 0, jnp.log(jnp.where(prior > 0, prior, 1.0)), -jnp.inf)


def _prior_plus_entropy(posterior: Any, prior: Any) -> Any:
    """Σ_i Σ_ν q_iν (log P(ν) − log q_iν), with 0 · log 0 = 0."""
    positive = posterior > 0
    safe = jnp.where(positive, posterior, 1.0)
    return jnp.sum(jnp.where(positive, posterior * (_log_prior(prior)[None, :] - jnp.log(safe)), 0.0))


def _reduce(reduce: Any, value: Any) -> Any:
    """Apply the cross-block reduction (identity when fitting on one device)."""
    return value if reduce is None else reduce(value)


def _marginal_log_lik(sums: Any, marginal: Any) -> Any:
    return jnp.sum(jnp.where(sums > 0, sums * _safe_log(marginal), 0.0))


def _with_pseudo_counts(counts: Any, prior_count: float, axis: Any = 0) -> Any:
    """(counts + c) / Σ (counts + c): a distribution from expected counts, MAP with c > 0."""
    mass = counts + prior_count
    return mass / mass.sum(axis=axis, keepdims=True)


def _random_partition(rng_key: Any, n_objects: int, n_classes: int) -> Any:
    """Cluster labels of a random permutation dealt round-robin: every cluster is non-empty."""
    return jax.random.permutation(rng_key, n_objects) % n_classes


#: k-means runs from as many k-means++ seedings, the one of least within-cluster sum of squares kept.
SEED_KMEANS_RUNS = 8


def _seeded_posterior(rng_key: Any, objects: Any, partners: Any, counts: Any, n_objects: int, n_partners: int,
                      n_classes: int) -> Any:
    """(n_objects, n_classes) start: k-means of the objects' sketched profiles, smoothed."""
    key_profiles, key_seeds = jax.random.split(rng_key)
    profiles = sketched_profiles(key_profiles, objects, partners, counts, n_objects, n_partners, SKETCH_COLUMNS)
    labels = best_kmeans_labels(key_seeds, profiles, n_classes, LLOYD_ITERATIONS, SEED_KMEANS_RUNS)
    return smoothed_start(labels, n_classes, counts.dtype)


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class TwoSided:
    """Two-sided (symmetric) clustering model with K_x row and K_y column clusters.

    Parameters
    ----------
    n_row_classes : int
        K_x ≥ 1, at most the number of rows.
    n_col_classes : int, optional
        K_y ≥ 1, at most the number of columns; defaults to K_x.
    backend : {"auto", "xla", "numba"}
        Implementation of the sparse products (see :mod:`inference.sparse`).
    prior_count : float ≥ 0
        Pseudo-counts added to every expected count in the M-step (MAP-EM under symmetric
        Dirichlet(1 + c) priors; module docstring). 0 is maximum-likelihood EM; any c > 0 keeps
        every prediction P(y|x) > 0, so held-out perplexity needs no floor.
    starts : {"random", "seeded"}
        How a restart begins (:meth:`init_params`). ``"random"`` (the default): a random hard
        partition of each side. ``"seeded"``: the rows clustered by k-means on sketches of their
        distributions over the columns, the columns likewise (:mod:`inference.seeding`), each
        object's posterior put mostly (90%) on its cluster. Measured 2026-12-05: on planted blocks
        (240 × 160 counts, four row and four column clusters, a row cluster's own column cluster
        16 times likelier than another) every seeded restart of keys 0–2 found them (ARI 1,
        log-likelihood -153,090), where random ones ended at ARI 0.67–0.73 (-156,038 to -156,471)
        with 1 and with 4 restarts. On text they did worse: on 20 Newsgroups (the
        ``two_sided_clusters`` notebook, 20 × 20 classes, 4 restarts) the best objective was
        -3,524,606 seeded against -3,521,010 random (ARI to the newsgroups 0.303 against 0.325),
        and on the Reuters sample the test perplexities of keys 0 and 1 were 2,014 and 1,952
        seeded against 1,985 and 1,941 random with 8 classes, 1,781 and 1,780 against 1,765 and
        1,731 with 16. Random starts can also collapse: on 300 sentences of 8–20 words (four
        topics, 80/10/10 token split, 4 × 4 classes, key 0; 2026-12-07) EM from a random partition
        converged in 7 iterations to classes that tell no sentence apart (every P(y|x) within 4e-4
        of the others in total variation; test perplexity 57.17, the unigram's), with
        ``TemperedEM()`` and with ``FixedBeta(1.0)``, where seeded starts reached 35.97. So a fit
        from random starts whose kept classes are alike is run again from seeded ones
        (:meth:`fallback_model`), and :func:`inference.em.tempered_em` keeps the better on
        validation (on training log-likelihood without validation data): 35.97 there. Fits whose
        classes differ are not rerun (the figures above do not change).

    Examples
    --------
    >>> import jax
    >>> from zoo.data import CoOccurrence
    >>> from inference.em import tempered_em
    >>> data = CoOccurrence.from_dense([[5, 4, 0], [4, 6, 1], [0, 1, 7]])
    >>> result = tempered_em(TwoSided(2), data, key=jax.random.key(0), max_iter=50)
    >>> result.params.association.shape
    (2, 2)
    """

    n_row_classes: int
    n_col_classes: int | None = None
    backend: str = "auto"
    prior_count: float = 0.0
    starts: str = "random"

    #: What a fit's summary points to beyond the parameters: each cluster's members and words, and
    #: each row's and column's cluster.
    see_also: ClassVar[tuple] = ("zoo.report.class_profiles(result, col_names=data.col_names)",
                                 "result.params.row_assignments()", "result.params.col_assignments()")

    #: The fields of :class:`TwoSidedParams` that are distributions, and the axis each sums to 1
    #: along (None: the whole array, as π over pairs of clusters; ``init=`` of
    #: :func:`inference.em.tempered_em` is checked against it).
    probability_axes: ClassVar[dict] = {"row_class_prior": -1, "col_class_prior": -1, "association": None,
                                        "row_posterior": -1, "col_posterior": -1, "row_marginal": None,
                                        "col_marginal": None}

    def __post_init__(self) -> None:
        check_int("n_row_classes", self.n_row_classes, minimum=1)
        if self.n_col_classes is None:
            object.__setattr__(self, "n_col_classes", self.n_row_classes)
        check_int("n_col_classes", self.n_col_classes, minimum=1)
        resolve_backend(self.backend)  # a bad name, or numba off the CPU, refused here
        object.__setattr__(self, "prior_count", check_real("prior_count", self.prior_count, low=0.0))
        check_choice("starts", self.starts, ("random", "seeded"))

    program = staticmethod(two_sided_program)

    # ---------------------------------------------------------------- data and initialisation
    def prepare(self, data: CoOccurrence) -> DyadicArrays:
        """Validate ``data`` and return its device arrays."""
        if not isinstance(data, CoOccurrence):
            raise not_co_occurrence("data", data)
        if self.n_row_classes > data.n_rows:
            raise ValueError(f"n_row_classes: {self.n_row_classes} clusters for only {data.n_rows} rows")
        if self.n_col_classes > data.n_cols:
            raise ValueError(f"n_col_classes: {self.n_col_classes} clusters for only {data.n_cols} columns")
        return data.to_arrays()

    def prepare_sharded(self, data: CoOccurrence, n_shards: int, *, process_local: bool = False) -> DyadicArrays:
        """Like :meth:`prepare`, split into ``n_shards`` blocks of cells (leading axis).

        The E-step couples rows and columns only through the two sums over cells n γ^y and
        nᵀ γ^x; those are computed block by block and added up (``reduce``), everything else is
        the same on every device.
        ``process_local``: ``data`` is this process's part of the cells (any part) and the blocks
        are this process's (:meth:`CoOccurrence.to_sharded_arrays`).
        """
        self.prepare(data)
        return data.to_sharded_arrays(n_shards, process_local=process_local)

    def init_params(self, rng_key: Any, arrays: DyadicArrays) -> TwoSidedParams:
        """A start: each side's posteriors from a partition, uniform priors and π from the posteriors.

        ``starts="random"``: a random hard partition of each side (soft random posteriors collapse
        to the uniform fixed point). ``"seeded"``: each side clustered by k-means (the best of
        :data:`SEED_KMEANS_RUNS` runs of k-means++ seeds and
        :data:`inference.seeding.LLOYD_ITERATIONS` Lloyd iterations) on
        :data:`inference.seeding.SKETCH_COLUMNS`-column sketches of its objects' distributions over
        the other side, and the posteriors of :func:`inference.seeding.smoothed_start`.
        """
        n_rows, n_cols = arrays.shape
        dtype = arrays.counts.dtype
        key_rows, key_cols = jax.random.split(rng_key)
        if self.starts == "seeded":
            row_posterior = _seeded_posterior(key_rows, arrays.rows, arrays.cols, arrays.counts, n_rows, n_cols,
                                              self.n_row_classes)
            col_posterior = _seeded_posterior(key_cols, arrays.cols, arrays.rows, arrays.counts, n_cols, n_rows,
                                              self.n_col_classes)
        else:
            row_classes = _random_partition(key_rows, n_rows, self.n_row_classes)
            col_classes = _random_partition(key_cols, n_cols, self.n_col_classes)
            row_posterior = jax.nn.one_hot(row_classes, self.n_row_classes, dtype=dtype)
            col_posterior = jax.nn.one_hot(col_classes, self.n_col_classes, dtype=dtype)
        association = self._association(jnp.matmul(row_posterior.T, count_matmul(col_posterior, arrays, backend=self.backend),
                                                    precision="highest"))
        return TwoSidedParams(
            row_class_prior=jnp.full((self.n_row_classes,), 1.0 / self.n_row_classes, dtype),
            col_class_prior=jnp.full((self.n_col_classes,), 1.0 / self.n_col_classes, dtype),
            association=association,
            row_posterior=row_posterior,
            col_posterior=col_posterior,
            row_marginal=_with_pseudo_counts(arrays.row_sums, self.prior_count),
            col_marginal=_with_pseudo_counts(arrays.col_sums, self.prior_count),
        )

    def fallback_model(self) -> "TwoSided | None":
        """The model :func:`inference.em.tempered_em` fits as well when the kept fit's classes are alike
        (:meth:`prediction_spread` below :data:`inference.em.ALIKE_TOLERANCE`): this one with seeded
        starts for random ones (the fixed point random partitions fall into on short rows; see
        ``starts``), None for seeded starts."""
        return replace(self, starts="seeded") if self.starts == "random" else None

    def _association(self, pair_counts: Any) -> Any:
        """π from the expected pair counts L π = γ^xᵀ n γ^y (H99 eq. 9), plus ``prior_count``."""
        return _with_pseudo_counts(pair_counts, self.prior_count, axis=(0, 1))

    # ---------------------------------------------------------------- the objective
    def _objective(self, params: TwoSidedParams, row_col_counts: Any, arrays: DyadicArrays) -> Any:
        # row_col_counts = n γ^y, (n_rows, K_y); the pair counts L π = γ^xᵀ n γ^y (H99 eq. 9).
        pair_counts = jnp.matmul(params.row_posterior.T, row_col_counts, precision="highest")
        log_ratio = _safe_log(_association_ratio(self._association(pair_counts)))
        return (
            jnp.sum(jnp.where(pair_counts > 0, pair_counts * log_ratio, 0.0))
            + _prior_plus_entropy(params.row_posterior, params.row_class_prior)
            + _prior_plus_entropy(params.col_posterior, params.col_class_prior)
            + _marginal_log_lik(arrays.row_sums, params.row_marginal)
            + _marginal_log_lik(arrays.col_sums, params.col_marginal)
        )

    def objective(self, params: TwoSidedParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """Mean-field free energy F at β = 1, a lower bound on log P(S) (module docstring).

        c is taken as π/(π^x π^y) of the posteriors in ``params``, as every stored state has it.
        ``reduce`` (e.g. a ``psum`` over devices) adds up the sums over cells of each block.
        """
        row_col_counts = _reduce(reduce, count_matmul(params.col_posterior, arrays, backend=self.backend))
        return self._objective(params, row_col_counts, arrays)

    def log_likelihood(self, params: TwoSidedParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """The mean-field lower bound :meth:`objective` (the exact log-likelihood of eq. 8 sums
        over K_x^N K_y^M joint assignments and is intractable beyond toy sizes)."""
        return self.objective(params, arrays, reduce)

    # ---------------------------------------------------------------- E-step + M-step
    def em_step(self, params: TwoSidedParams, arrays: DyadicArrays, beta: Any,
                reduce: Any = None) -> tuple[TwoSidedParams, Any]:
        """One sweep (c^x-posteriors, π, c^y-posteriors, π) of H99 §2.3 at inverse temperature β.

        Returns (new params, mean-field objective F of ``params`` at β = 1). The posteriors are
        H99 eq. 10 with the counts multiplied by β; priors are the mean posteriors; π is eq. 9.
        With ``reduce`` (a ``psum`` over devices holding blocks of cells) the sums over cells
        Σ_k n_ik γ^y_kμ and Σ_i n_ik γ^x_iν are added up across blocks before they are used.
        """
        # Σ_k n_ik γ^y_kμ
        row_col_counts = _reduce(reduce, count_matmul(params.col_posterior, arrays, backend=self.backend))
        objective = self._objective(params, row_col_counts, arrays)
        log_ratio = _safe_log(_association_ratio(self._association(jnp.matmul(params.row_posterior.T, row_col_counts, precision="highest"))))
        # Row posteriors (H99 eq. 10): log P(ν) + β Σ_k n_ik Σ_μ γ^y_kμ log c_νμ.
        row_posterior = jax.nn.softmax(
            _log_prior(params.row_class_prior) + beta * jnp.matmul(row_col_counts, log_ratio.T, precision="highest"), axis=1
        )
        row_class_prior = _with_pseudo_counts(row_posterior.sum(axis=0), self.prior_count)
        # π from the new row posteriors (eq. 9), then the column posteriors with it.
        log_ratio = _safe_log(_association_ratio(self._association(jnp.matmul(row_posterior.T, row_col_counts, precision="highest"))))
        col_row_counts = _reduce(reduce, count_matmul(row_posterior, arrays, transpose=True,
                                                      backend=self.backend))  # Σ_i n_ik γ^x_iν
        col_posterior = jax.nn.softmax(
            _log_prior(params.col_class_prior) + beta * jnp.matmul(col_row_counts, log_ratio, precision="highest"), axis=1
        )
        col_class_prior = _with_pseudo_counts(col_posterior.sum(axis=0), self.prior_count)
        association = self._association(jnp.matmul(col_row_counts.T, col_posterior, precision="highest"))
        return TwoSidedParams(
            row_class_prior=row_class_prior,
            col_class_prior=col_class_prior,
            association=association,
            row_posterior=row_posterior,
            col_posterior=col_posterior,
            row_marginal=params.row_marginal,
            col_marginal=params.col_marginal,
        ), objective

    # ---------------------------------------------------------------- prediction
    def check_params(self, params: Any, name: str = "params") -> TwoSidedParams:
        """``params`` as a fit of this model's (``TypeError``/``ValueError`` naming ``name`` otherwise)."""
        sizes = {"row_class_prior": self.n_row_classes, "col_class_prior": self.n_col_classes,
                 "association": self.n_col_classes, "row_posterior": self.n_row_classes,
                 "col_posterior": self.n_col_classes}
        return check_fitted_params(name, params, TwoSidedParams, sizes, self)

    def predictive_factors(self, params: TwoSidedParams) -> tuple[Any, Any]:
        """(R, C) with P(y_k|x_i) = Σ_μ R_iμ C_kμ (H99 §2.4):

        R_iμ = Σ_ν P{c(x_i) = ν} π_νμ / π^x_ν and C_kμ = P(y_k|μ) ∝ P(y_k) P{c(y_k) = μ}.
        """
        association = params.association
        row_mass = association.sum(axis=1, keepdims=True)
        col_mass = association.sum(axis=0)
        col_given_row_class = jnp.where(row_mass > 0, association / jnp.where(row_mass > 0, row_mass, 1.0),
                                        col_mass[None, :])
        joint = params.col_marginal[:, None] * params.col_posterior
        totals = joint.sum(axis=0, keepdims=True)
        col_given_class = jnp.where(totals > 0, joint / jnp.where(totals > 0, totals, 1.0), 0.0)
        return jnp.matmul(params.row_posterior, col_given_row_class, precision="highest"), col_given_class

    def prediction_spread(self, params: TwoSidedParams) -> float | None:
        """How far any row's P(y|x) lies from the rows' mean, at most (total variation;
        :func:`zoo.dyadic.predictive.prediction_spread`); None with one row or one column cluster
        (every row is then predicted alike by design). :func:`inference.em.tempered_em` warns when a
        fit's is below :data:`inference.em.ALIKE_TOLERANCE`: the classes are alike."""
        if self.n_row_classes == 1 or self.n_col_classes == 1:
            return None
        return prediction_spread(*self.predictive_factors(params))

    def heldout_log_lik(self, params: TwoSidedParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """Σ n(x_i, y_k) log P(y_k|x_i) of held-out counts (``reduce`` adds up blocks of cells)."""
        row_factors, col_factors = self.predictive_factors(params)
        return _reduce(reduce, conditional_log_lik(row_factors, col_factors, arrays, backend=self.backend))

    def heldout_log_lik_and_zeros(self, params: TwoSidedParams, arrays: DyadicArrays, reduce: Any = None,
                                  floor: float | None = None) -> tuple[Any, Any]:
        """(Σ n log P(y|x) over held-out tokens of positive probability, tokens of probability 0):
        the validation score of the EM driver (:func:`zoo.dyadic.predictive.split_zero_cells`).
        With ``prior_count > 0`` no prediction is 0 and the count pass is skipped. With ``floor``
        every token is scored at max(P(y|x), floor) (:func:`~zoo.dyadic.predictive.split_zero_cells`),
        as the evaluation does."""
        row_factors, col_factors = self.predictive_factors(params)
        log_lik = _reduce(reduce, conditional_log_lik(row_factors, col_factors, arrays, backend=self.backend))
        if self.prior_count > 0 and floor is None:
            return log_lik, jnp.zeros((), log_lik.dtype)
        return split_zero_cells(log_lik, row_factors, col_factors, arrays, reduce=reduce, floor=floor)

    def heldout_evaluation(self, params: TwoSidedParams, data: CoOccurrence, *,
                           floor: float | None = None) -> HeldOut:
        """Σ n log P(y|x) of held-out ``data`` in float64, tokens of probability 0 counted
        (:func:`zoo.dyadic.predictive.heldout_evaluation`: no hidden floor)."""
        return heldout_evaluation(self, params, data, floor=floor)


def exact_log_likelihood(params: TwoSidedParams, data: CoOccurrence, *, max_assignments: int = 1_000_000) -> float:
    """log Σ_c P(S, c) of H99 eq. 8 by enumerating every joint assignment (tiny data only).

    The association c_νμ = π_νμ / (π^x_ν π^y_μ) and the priors and marginals are those of
    ``params``; computed in float64 NumPy. This is the quantity the mean-field objective bounds.

    Parameters
    ----------
    params : TwoSidedParams
    data : CoOccurrence
    max_assignments : int
        Refuse when K_x^N · K_y^M exceeds this.
    """
    import itertools

    if not isinstance(data, CoOccurrence):
        raise not_co_occurrence("data", data)
    n_row_classes, n_col_classes = params.association.shape
    if (data.n_rows, data.n_cols) != (params.row_posterior.shape[0], params.col_posterior.shape[0]):
        raise ValueError(f"data: shape {data.shape} differs from the parameters' "
                         f"{(params.row_posterior.shape[0], params.col_posterior.shape[0])}")
    max_assignments = check_int("max_assignments", max_assignments, minimum=1)
    n_assignments = float(n_row_classes) ** data.n_rows * float(n_col_classes) ** data.n_cols
    if n_assignments > max_assignments:
        raise ValueError(f"data: {n_assignments:.3g} joint assignments exceed max_assignments={max_assignments}")
    with np.errstate(divide="ignore"):
        log_ratio = np.log(np.asarray(params.association_ratio(), np.float64))
        log_row_prior = np.log(np.asarray(params.row_class_prior, np.float64))
        log_col_prior = np.log(np.asarray(params.col_class_prior, np.float64))
        log_marginals = (np.log(np.asarray(params.row_marginal, np.float64))[data.rows]
                         + np.log(np.asarray(params.col_marginal, np.float64))[data.cols])
    row_assignments = np.array(list(itertools.product(range(n_row_classes), repeat=data.n_rows)))
    col_assignments = np.array(list(itertools.product(range(n_col_classes), repeat=data.n_cols)))
    # (row assignment, column assignment, cell) log-probabilities of H99 eq. 8.
    cell_terms = log_ratio[row_assignments[:, None, data.rows], col_assignments[None, :, data.cols]]
    log_joint = (
        log_row_prior[row_assignments].sum(axis=1)[:, None]
        + log_col_prior[col_assignments].sum(axis=1)[None, :]
        + np.sum(data.counts * (log_marginals + cell_terms), axis=-1)
    )
    peak = log_joint.max()
    return float(peak + np.log(np.exp(log_joint - peak).sum()))
