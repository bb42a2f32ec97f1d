"""Supervised clustering with the Dirichlet process (DM05: Daumé & Marcu, 2005, §3–§5).

Generative story (DM05 §3.2, eq. 1, Fig. 1), Gaussian parameterisation of §5:

    α^p ~ Gamma, α^t ~ Gamma                 (or fixed)
    c_n ~ CRP(α^p)                            publication (cluster) of reference n
    d_n ~ CRP(α^t)                            reference type of reference n, shared by all clusters
    p_k ~ G0^p = Normal(0, σ² I)              mean of publication k
    t_l ~ G0^t = Π_f Gamma(a_f, b_f)          diagonal precision of reference type l (rate b)
    r_n | c_n, d_n ~ Normal(p_{c_n}, diag(t_{d_n})^{-1})

Training references have observed clusters c_n; test references do not. The reference types
are learned from all references, so the training partition teaches the model which features
matter (high precision) and which do not. DM05 §4.1 offers two options for the test clusters:
``share_clusters=True`` lets a test reference join a training publication (one CRP over all
references); ``share_clusters=False`` gives the test references a CRP of their own (same α^p).

Three variants (DM05 §5, §7.1):

* **SCDP-1** (``model=1``): conjugate updates of DM05 Fig. 2 — Neal (2000) Algorithm 2 on both
  indicator sets, with means and precisions redrawn from their conditional posteriors.
* **SCDP-2** (``model=2``): as SCDP-1, but before each sweep the Gamma prior of the precisions is
  re-set from the spread of the current publication means (DM05 §5.1): per feature f, with
  v_k = (p_kf - p̄_f)² over the active publications, the prior mean a·s is half the mean of v_k
  and its variance a·s² the variance of v_k (s = 1 / b the scale). This is DM05's heuristic,
  not a hierarchical prior: the chain targets a moving prior.
* **SCDP-3** (``model=3``): the precisions are conditioned on the means (DM05 §5.2, eq. 3, λ = 1,
  publications ordered by size; ||p_j - p_k||²_t is measured under the type's covariance t⁻¹, see
  :func:`_log_conditioning`), a non-conjugate model: indicator updates by Neal's Algorithm 8 with
  M = 8 auxiliary draws from the base measures (DM05 §4.2); the means by exact Gibbs (their
  conditional is Gaussian) and the precisions by Metropolis steps on log t, where DM05 use
  independence samplers with base-measure proposals (never accepted in many dimensions).

Every sweep of every variant starts with split–merge moves of the test partition (Dahl 2003;
Jain & Neal 2004; ``n_split_merge``): without them a chain started with the test references in
one publication kept them there, however far apart the groups were.

α^p and α^t are resampled every sweep by the Escobar–West update in the multi-group form of DM05
App. B (groups: the training and the test references when clusters are not shared).

Two layers (DESIGN.md): :func:`supervised_program` is the NumPyro program (stick-breaking
truncation, enumerated indicators) used to simulate data; :func:`build_kernel` / :func:`init`
are the BlackJAX-style Gibbs kernel that :class:`SupervisedDP` runs on many chains with
:func:`inference.chains.sample_chains`.

Distances instead of coordinates (DM05 §7.2, footnote 5): :func:`embed_distances` turns one
matrix of pairwise distances per feature into coordinates using only the distances (the Gram
matrix -½ J D² J, which is how footnote 5 computes distances between means); for Euclidean
distances of centred coordinates it returns the coordinates themselves (up to sign, which the
model ignores), so the partition posterior is the same.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Any, NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
import xarray as xr
from jax.scipy.special import gammaln

from inference import diagnostics
from inference.chains import CapacityError, ChainResult, sample_chains, stack_states
from inference.concentration import GammaPrior, escobar_west_multi_group_update
from inference.partitions import point_partition
from inference.sparse import resolve_backend
from zoo._validation import as_float_array, as_index_array, check_choice, check_int, check_real
from zoo.dirichlet.families import sample_log_gamma
from zoo.dirichlet.mixture import stick_breaking_weights
from zoo.metrics import clustering_scores

__all__ = [
    "MODELS",
    "SupervisedState",
    "SupervisedInfo",
    "SupervisedData",
    "supervised_program",
    "init",
    "build_kernel",
    "record_supervised",
    "embed_distances",
    "SupervisedDP",
    "SupervisedDPFit",
]

MODELS = (1, 2, 3)
_LOG_2PI = math.log(2.0 * math.pi)
# Bits of SupervisedState.overflow: which capacity a sweep ran out of.
_CLUSTER_OVERFLOW = 1
_TYPE_OVERFLOW = 2


# ----------------------------------------------------------------------------------------------
# The program
# ----------------------------------------------------------------------------------------------
def supervised_program(
    features: jax.Array | None = None,
    *,
    n_points: int | None = None,
    n_features: int | None = None,
    max_clusters: int = 20,
    max_types: int = 10,
    alpha: float = 1.0,
    alpha_types: float = 1.0,
    prior_variance: float = 1.0,
    precision_shape: float = 1.0,
    precision_rate: float = 1.0,
) -> None:
    """NumPyro program of DM05 eq. 1 with the Gaussian parameterisation of §5.

    Both Dirichlet processes are truncated by stick-breaking (``max_clusters`` publications,
    ``max_types`` reference types); the indicators are enumerated in parallel.

    Parameters
    ----------
    features : jax.Array (N, D), optional
        Observed references; omit to simulate (then give ``n_points`` and ``n_features``).
    n_points, n_features : int, optional
        Sizes when simulating.
    max_clusters, max_types : int
        Truncation levels K and L.
    alpha, alpha_types : float
        Concentrations α^p and α^t.
    prior_variance : float
        σ², variance of G0^p = Normal(0, σ² I).
    precision_shape, precision_rate : float
        a and b of G0^t = Gamma(a, rate b) per feature.

    Notes
    -----
    Sites: ``cluster_fractions`` / ``type_fractions`` (plates ``cluster_sticks`` /
    ``type_sticks``), ``means`` (plates ``publications`` × ``features``), ``precisions`` (plates
    ``reference_types`` × ``features``), ``clusters`` and ``types`` (plate ``points`` at dim -2,
    so their draws carry a trailing singleton axis; enumerated) and ``x``.

    Examples
    --------
    >>> import jax
    >>> from numpyro.infer import Predictive
    >>> draws = Predictive(supervised_program, num_samples=2)(
    ...     jax.random.key(0), n_points=7, n_features=3)
    >>> draws["x"].shape, draws["clusters"].shape
    ((2, 7, 3), (2, 7, 1))
    """
    if features is not None:
        n_points, n_features = features.shape
    with numpyro.plate("cluster_sticks", max_clusters - 1):
        cluster_fractions = numpyro.sample("cluster_fractions", dist.Beta(1.0, alpha))
    with numpyro.plate("type_sticks", max_types - 1):
        type_fractions = numpyro.sample("type_fractions", dist.Beta(1.0, alpha_types))
    cluster_weights = stick_breaking_weights(cluster_fractions)
    type_weights = stick_breaking_weights(type_fractions)
    with numpyro.plate("features", n_features, dim=-1):
        with numpyro.plate("publications", max_clusters, dim=-2):
            means = numpyro.sample("means", dist.Normal(0.0, math.sqrt(prior_variance)))  # G0^p
        with numpyro.plate("reference_types", max_types, dim=-2):
            precisions = numpyro.sample("precisions", dist.Gamma(precision_shape, precision_rate))  # G0^t
    with numpyro.plate("points", n_points, dim=-2):
        cluster = numpyro.sample("clusters", dist.Categorical(cluster_weights), infer={"enumerate": "parallel"})
        reference_type = numpyro.sample("types", dist.Categorical(type_weights), infer={"enumerate": "parallel"})
        feature_index = jnp.arange(n_features)
        mean = means[cluster, feature_index]
        precision = precisions[reference_type, feature_index]
        with numpyro.plate("features", n_features, dim=-1):
            # DM05 eq. 1: r_n ~ F(p_{c_n}, t_{d_n}), a diagonal Gaussian.
            numpyro.sample("x", dist.Normal(mean, 1.0 / jnp.sqrt(precision)), obs=features)


# ----------------------------------------------------------------------------------------------
# State, data, info
# ----------------------------------------------------------------------------------------------
class SupervisedData(NamedTuple):
    """Data of one supervised-clustering problem (passed to the kernel, never closed over).

    Attributes
    ----------
    features : jax.Array (N + M, D)
        Training references first, then test references.
    train_labels : jax.Array int32 (N,)
        Training clusters, labels 0..K_train - 1 (every label used).
    """

    features: jax.Array
    train_labels: jax.Array

    @property
    def n_train(self) -> int:
        """Number of training references N."""
        return self.train_labels.shape[0]


class SupervisedState(NamedTuple):
    """Gibbs state: two partitions with fixed capacities and their parameters.

    Attributes
    ----------
    clusters : int32 (N + M,)
        Publication slot of every reference; training references keep slots 0..K_train - 1.
    cluster_counts : int32 (K_max,)
        References per publication slot.
    means : (K_max, D)
        Publication means p_k (arbitrary in empty slots).
    types : int32 (N + M,)
        Reference-type slot of every reference.
    type_counts : int32 (L_max,)
        References per type slot.
    precisions : (L_max, D)
        Diagonal precisions t_l (arbitrary in empty slots).
    alpha, alpha_types : scalar
        Concentrations α^p and α^t.
    precision_shape, precision_rate : (D,)
        Current Gamma prior of the precisions (fixed for SCDP-1 and -3, re-set by SCDP-2).
    overflow : int32 scalar
        Sticky bit mask, 0 when all is well: bit 1 (publications) or bit 2 (reference types)
        is set when a sweep needed more slots than the capacity, or opened more publications or
        types than its supply of fresh draws, which grows with the capacity. The chain driver
        then re-runs the sweeps from the last good state with that capacity doubled
        (:meth:`grow_after_overflow`).
    """

    clusters: jax.Array
    cluster_counts: jax.Array
    means: jax.Array
    types: jax.Array
    type_counts: jax.Array
    precisions: jax.Array
    alpha: jax.Array
    alpha_types: jax.Array
    precision_shape: jax.Array
    precision_rate: jax.Array
    overflow: jax.Array

    def grow_after_overflow(self, overflowed: SupervisedState) -> SupervisedState:
        """This state (the last one without overflow) with the capacity that ``overflowed`` ran
        out of doubled, at most one slot per reference; called by
        :func:`inference.chains.sample_chains`, which then re-runs the failed sweeps.

        Empty slots are not part of the chain's state (a new publication or type takes fresh
        parameters), so adding them changes nothing but the room to open new ones. Works on a
        single state or a batch of chains (leading axes).

        Raises
        ------
        CapacityError
            When the capacity that overflowed already has one slot per reference.
        """
        flags = int(np.bitwise_or.reduce(np.asarray(overflowed.overflow).ravel()))
        n_points = self.clusters.shape[-1]
        n_slots, n_type_slots = self.cluster_counts.shape[-1], self.type_counts.shape[-1]
        grow_clusters = bool(flags & _CLUSTER_OVERFLOW)
        grow_types = bool(flags & _TYPE_OVERFLOW)
        if (grow_clusters and n_slots >= n_points) or (grow_types and n_type_slots >= n_points):
            raise CapacityError(
                "a supervised DP chain needed a new publication or reference type with one slot per "
                "reference already; this should not happen, please report it"
            )
        state = self
        if grow_clusters:
            extra = min(2 * n_slots, n_points) - n_slots
            state = state._replace(cluster_counts=_pad_slots(state.cluster_counts, extra, 0),
                                   means=_pad_slots(state.means, extra, 0.0, axis=-2))
        if grow_types:
            extra = min(2 * n_type_slots, n_points) - n_type_slots
            state = state._replace(type_counts=_pad_slots(state.type_counts, extra, 0),
                                   precisions=_pad_slots(state.precisions, extra, 1.0, axis=-2))
        return state


def _pad_slots(array: jax.Array, extra: int, value: float, axis: int = -1) -> jax.Array:
    """``array`` with ``extra`` slots of ``value`` appended along ``axis``."""
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, extra)
    return jnp.pad(array, widths, constant_values=value)


class SupervisedInfo(NamedTuple):
    """Label-invariant per-sweep diagnostics.

    Attributes
    ----------
    n_clusters : int32
        Distinct publications among the test references.
    n_types : int32
        Occupied reference types.
    log_joint : scalar
        log p(c, d, p, t, r | α^p, α^t) after the sweep.
    alpha, alpha_types : scalar
        Concentrations after the sweep.
    overflow : int32
        Overflow bit mask of the state after this sweep (see :class:`SupervisedState`).
    split_merge_accepted : int32
        Split–merge moves of the test partition accepted in this sweep (of ``n_split_merge``).
    """

    n_clusters: jax.Array
    n_types: jax.Array
    log_joint: jax.Array
    alpha: jax.Array
    alpha_types: jax.Array
    overflow: jax.Array
    split_merge_accepted: jax.Array


class _Config(NamedTuple):
    model: int
    share_clusters: bool
    prior_variance: float
    precision_shape: float
    precision_rate: float
    alpha_prior: GammaPrior | None
    alpha_types_prior: GammaPrior | None
    n_auxiliary: int
    n_split_merge: int
    n_precision_steps: int
    backend: str


# ----------------------------------------------------------------------------------------------
# Densities shared by the updates
# ----------------------------------------------------------------------------------------------
def _log_crp(counts: jax.Array, alpha: jax.Array, n_points: Any) -> jax.Array:
    """log p(partition | α) under the CRP: α^K Γ(α) / Γ(α + n) Π_k Γ(n_k) (Antoniak 1974)."""
    active = counts > 0
    sizes = jnp.where(active, counts, 1).astype(alpha.dtype)
    return (
        jnp.sum(active) * jnp.log(alpha) + gammaln(alpha) - gammaln(alpha + n_points)
        + jnp.sum(jnp.where(active, gammaln(sizes), 0.0))
    )


def _log_normal_diag(x: jax.Array, mean: jax.Array, precision: jax.Array) -> jax.Array:
    """Σ_f log Normal(x_f | mean_f, 1 / precision_f) over the last axis."""
    return 0.5 * jnp.sum(jnp.log(precision) - _LOG_2PI - precision * (x - mean) ** 2, axis=-1)


def _log_gamma_density(value: jax.Array, shape: jax.Array, rate: jax.Array) -> jax.Array:
    """Σ_f log Gamma(value_f | shape_f, rate_f) over the last axis."""
    return jnp.sum(
        shape * jnp.log(rate) - gammaln(shape) + (shape - 1.0) * jnp.log(value) - rate * value, axis=-1
    )


def _log_student_marginal(residual: jax.Array, shape: jax.Array, rate: jax.Array) -> jax.Array:
    """log ∫ Normal(residual | 0, 1/t) Gamma(t | a, b) dt, summed over features (DM05 Fig. 2)."""
    return jnp.sum(
        shape * jnp.log(rate) + gammaln(shape + 0.5) - gammaln(shape) - 0.5 * _LOG_2PI
        - (shape + 0.5) * jnp.log(rate + 0.5 * residual * residual),
        axis=-1,
    )


# ----------------------------------------------------------------------------------------------
# Parameter updates
# ----------------------------------------------------------------------------------------------
def _sample_means(rng_key, features, clusters, point_precisions, n_slots, prior_variance):
    """p_k | rest ~ Normal, precision 1/σ² + Σ_{n∈k} t_{d_n} (DM05 Fig. 2, first line)."""
    posterior_precision = 1.0 / prior_variance + _sum_by_slot(point_precisions, clusters, n_slots)
    weighted = _sum_by_slot(point_precisions * features, clusters, n_slots)
    noise = jax.random.normal(rng_key, posterior_precision.shape, features.dtype)
    return weighted / posterior_precision + noise / jnp.sqrt(posterior_precision)


def _sample_precisions(rng_key, residuals, types, type_counts, shape, rate, n_supply):
    """t_l | rest ~ Gamma(a + n_l / 2, b + ½ Σ_{n∈l} (r_n - p_{c_n})²) (DM05 Fig. 2, second line).

    Also returns ``n_supply`` rows of log Gamma(a + ½, 1) draws for the new types of the sweep
    (one rejection sampler compiled instead of two).
    """
    n_slots = type_counts.shape[0]
    squares = _sum_by_slot(residuals * residuals, types, n_slots)
    posterior_shape = shape + 0.5 * type_counts.astype(residuals.dtype)[:, None]
    posterior_rate = rate + 0.5 * squares
    all_shapes = jnp.concatenate([posterior_shape, jnp.broadcast_to(shape + 0.5, (n_supply, shape.shape[-1]))])
    log_draws = sample_log_gamma(rng_key, all_shapes, all_shapes.shape)
    return jnp.exp(log_draws[:n_slots] - jnp.log(posterior_rate)), log_draws[n_slots:]


def _separation_prior(means, counts, base_shape, base_rate):
    """SCDP-2 (DM05 §5.1): Gamma prior of the precisions from the spread of the active means.

    With v_k = (p_kf - p̄_f)² over active publications: mean a·s = ½ mean(v), variance
    a·s² = var(v), i.e. scale s = 2 var(v) / mean(v) and shape a = mean(v)² / (4 var(v)).
    Features without spread (fewer than two publications, or equal v_k) keep the base prior.
    """
    active = (counts > 0)[:, None]
    n_active = jnp.maximum(jnp.sum(active), 1)
    centre = jnp.sum(jnp.where(active, means, 0.0), axis=0) / n_active
    spread = jnp.where(active, (means - centre) ** 2, 0.0)
    mean_spread = jnp.sum(spread, axis=0) / n_active
    var_spread = jnp.sum(jnp.where(active, (spread - mean_spread) ** 2, 0.0), axis=0) / n_active
    tiny = jnp.finfo(means.dtype).tiny
    usable = (jnp.sum(active) >= 2) & (mean_spread > 1e-8) & (var_spread > 1e-12)
    safe_var = jnp.maximum(var_spread, tiny)
    shape = jnp.where(usable, mean_spread**2 / (4.0 * safe_var), base_shape)
    rate = jnp.where(usable, mean_spread / (2.0 * safe_var), base_rate)
    return jnp.maximum(shape, 1e-3), jnp.maximum(rate, 1e-6)


# ----------------------------------------------------------------------------------------------
# SCDP-3 prior on precisions given means (DM05 §5.2, eq. 3)
# ----------------------------------------------------------------------------------------------
def _active_variance_total(precisions: jax.Array, type_counts: jax.Array) -> jax.Array:
    """V_f = Σ_l 1 / t_lf over the active reference types, shape (D,): eq. 3's weight of the pair
    spread S_f in the log joint (-V · S, see :func:`_log_conditioning`)."""
    return jnp.sum(jnp.where((type_counts > 0)[:, None], 1.0 / precisions, 0.0), axis=0)


def _pair_spread(means: jax.Array, counts: jax.Array) -> jax.Array:
    """S_f = Σ over pairs of active publications of (p_jf - p_kf)², shape (D,).

    With λ = 1 each pair (j, k), k before j in DM05's size order, appears once in eq. 3, so the
    order does not change this sum: S_f = K Σ_k p_kf² - (Σ_k p_kf)² over the K active ones.
    """
    active = (counts > 0)[:, None]
    n_active = jnp.sum(active)
    total = jnp.sum(jnp.where(active, means, 0.0), axis=0)
    total_sq = jnp.sum(jnp.where(active, means * means, 0.0), axis=0)
    return jnp.maximum(n_active * total_sq - total * total, 0.0)


def _log_conditioning(precision: jax.Array, spread: jax.Array) -> jax.Array:
    """Σ_j Σ_{k<j} log p(p_j | p_k, t) of DM05 eq. 3 with p(p_j | p_k, t) = λ exp(-λ ||p_j - p_k||²_t)
    and λ = 1 (so log λ = 0): -Σ_f S_f / t_f for the pair spread S of :func:`_pair_spread`.

    ||·||_t is the distance under the covariance t⁻¹ of the reference type, Σ_f (p_jf - p_kf)² / t_f.
    Read this way the term does what DM05 §5.2 build it for: it raises the precision of the
    features along which the publications are far apart ("separation by conditioning"), and it
    makes the precisions non-conjugate, as §5.2 says they are. Read as Σ_f t_f (p_jf - p_kf)² it
    would stay conjugate (a Gamma with rate b + S) and would lower the precision where the means
    differ, penalising every pair of publications by exp(-t ||Δp||²): chains then merge well-
    separated test publications (planted clusters 10 sds apart were merged; on the digits every
    chain sat at one test publication)."""
    return -jnp.sum(spread / precision, axis=-1)


# ----------------------------------------------------------------------------------------------
# Sufficient statistics by slot
# ----------------------------------------------------------------------------------------------
def _sum_by_slot(values: jax.Array, slots: jax.Array, n_slots: int) -> jax.Array:
    """Σ_{n: slots_n = k} values_n for every slot k, shape (n_slots, D).

    A scatter-add: its cost is O(N D) whatever the capacity, where a one-hot product costs
    O(N × n_slots × D) (at 10 chains, N = 1270, D = 64, 261 slots: 0.25 ms against 8 ms on CPU).
    """
    return jax.ops.segment_sum(values, slots, n_slots)


# ----------------------------------------------------------------------------------------------
# The assignment sweep: what it consumes, and its two implementations
# ----------------------------------------------------------------------------------------------
class _SweepDraws(NamedTuple):
    """Random numbers of one assignment sweep, drawn before it so that both backends use them.

    Fresh parameters come from a *supply* consumed in order: the j-th cluster (type) opened in
    the sweep takes row j. The rows are i.i.d. and independent of everything else, so which row
    an opening takes does not change the chain's law. A sweep that opens more clusters (types)
    than the supply holds reports overflow; the supply grows with the capacity and reaches one
    row per reference at full capacity, so the re-run of :meth:`SupervisedDP.fit` always ends.

    Attributes
    ----------
    uniforms : (2, N)
        Uniforms of the cluster (row 0) and type (row 1) draws of each reference.
    positions : int32 (2, N)
        SCDP-3: pool position that a cluster (row 0) or type (row 1) left empty by reference n
        replaces (Favaro & Teh 2013, ReUse); unused by SCDP-1 and -2.
    cluster_supply : (S_c, D)
        SCDP-1/2: standard normals of new publication means; SCDP-3: means drawn from G0^p.
    type_supply : (S_t, D)
        SCDP-1/2: log Gamma(a + ½, 1) draws of new precisions; SCDP-3: precisions from G0^t.
    cluster_pool, type_pool : (M, D)
        SCDP-3: Algorithm 8's M auxiliary means and precisions at the start of the sweep, drawn
        from G0^p and G0^t; (0, D) for SCDP-1 and -2.
    """

    uniforms: jax.Array
    positions: jax.Array
    cluster_supply: jax.Array
    type_supply: jax.Array
    cluster_pool: jax.Array
    type_pool: jax.Array


class _Carry(NamedTuple):
    clusters: jax.Array
    cluster_counts: jax.Array
    means: jax.Array
    types: jax.Array
    type_counts: jax.Array
    precisions: jax.Array
    overflow: jax.Array


class _SweepCarry(NamedTuple):
    """The XLA sweep's loop state: the partition state plus per-type log-determinants Σ_f log t_lf,
    the SCDP-3 auxiliary pools and how many supply rows have been used."""

    state: _Carry
    type_log_det: jax.Array
    cluster_pool: jax.Array
    type_pool: jax.Array
    type_pool_log_det: jax.Array
    n_cluster_supply_used: jax.Array
    n_type_supply_used: jax.Array


def _draw(logits: jax.Array, uniform: jax.Array) -> jax.Array:
    """Inverse-CDF draw of a categorical index from unnormalised log weights and one uniform:
    the first index whose cumulative weight exceeds u × total (never a zero-weight index, even
    for u = 0)."""
    weights = jnp.exp(logits - jnp.max(logits))
    cumulative = jnp.cumsum(weights)
    return jnp.minimum(jnp.sum(cumulative <= uniform * cumulative[-1]), logits.shape[0] - 1).astype(jnp.int32)


def _first_free(counts: jax.Array) -> tuple[jax.Array, jax.Array]:
    free = counts == 0
    return jnp.argmax(free).astype(jnp.int32), jnp.any(free)


def _log_lik_rows(x: jax.Array, rows: jax.Array, precision: jax.Array, log_det: jax.Array) -> jax.Array:
    """log Normal(x | row_k, diag(precision)^-1) for every row k, from the precomputed
    log-determinant Σ_f log precision_f (broadcast over rows)."""
    return 0.5 * (log_det - x.shape[-1] * _LOG_2PI - jnp.sum(precision * (x - rows) ** 2, axis=-1))


def _take_supply(supply: jax.Array, n_used: jax.Array, opened: jax.Array):
    """Next supply row, whether an opening found the supply exhausted, and the new count used."""
    exhausted = opened & (n_used >= supply.shape[0])
    row = supply[jnp.minimum(n_used, supply.shape[0] - 1)]
    return row, exhausted, n_used + opened.astype(n_used.dtype)


def _cluster_move_conjugate(config, sweep, index, x, uniform, position, alpha, n_train_clusters, draws):
    """Algorithm 2 for c_n (DM05 eq. 2): join k ∝ n_{-n,k} F(r_n | p_k, t_{d_n}), new
    ∝ α^p ∫ G0^p(p) F(r_n | p, t_{d_n}) dp; a new publication's mean is drawn from its posterior."""
    carry = sweep.state
    old = carry.clusters[index]
    counts = carry.cluster_counts.at[old].add(-1)
    type_slot = carry.types[index]
    precision = carry.precisions[type_slot]
    slots = jnp.arange(counts.shape[0])
    allowed = (counts > 0) & (config.share_clusters | (slots >= n_train_clusters))
    log_existing = jnp.where(
        allowed,
        jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(x, carry.means, precision, sweep.type_log_det[type_slot]),
        -jnp.inf,
    )
    # ∫ G0^p F dp = Normal(x | 0, σ² + 1/t) per feature.
    marginal_precision = precision / (1.0 + config.prior_variance * precision)
    log_new = jnp.log(alpha) + _log_normal_diag(x, 0.0, marginal_precision)
    choice = _draw(jnp.concatenate([log_existing, log_new[None]]), uniform)
    free_slot, has_free = _first_free(counts)
    wants_new = choice == counts.shape[0]
    opened = wants_new & has_free
    normal, exhausted, n_used = _take_supply(draws.cluster_supply, sweep.n_cluster_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    posterior_precision = 1.0 / config.prior_variance + precision
    fresh_mean = precision * x / posterior_precision + normal / jnp.sqrt(posterior_precision)
    means = carry.means.at[new].set(jnp.where(opened, fresh_mean, carry.means[new]))
    state = carry._replace(
        clusters=carry.clusters.at[index].set(new),
        cluster_counts=counts.at[new].add(1),
        means=means,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _CLUSTER_OVERFLOW, 0),
    )
    return sweep._replace(state=state, n_cluster_supply_used=n_used)


def _type_move_conjugate(config, sweep, index, x, uniform, position, alpha_types, shape, rate, draws):
    """Algorithm 2 for d_n (DM05 Fig. 2): join l ∝ m_{-n,l} F(r_n | p_{c_n}, t_l), new
    ∝ α^t ∫ G0^t(t) F(r_n | p_{c_n}, t) dt (Student-t); a new type's precision is drawn from its
    posterior Gamma(a + ½, b + ½ (r_n - p_{c_n})²)."""
    carry = sweep.state
    old = carry.types[index]
    counts = carry.type_counts.at[old].add(-1)
    residual = x - carry.means[carry.clusters[index]]
    log_existing = jnp.where(
        counts > 0,
        jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(residual, 0.0, carry.precisions, sweep.type_log_det),
        -jnp.inf,
    )
    log_new = jnp.log(alpha_types) + _log_student_marginal(residual, shape, rate)
    choice = _draw(jnp.concatenate([log_existing, log_new[None]]), uniform)
    free_slot, has_free = _first_free(counts)
    wants_new = choice == counts.shape[0]
    opened = wants_new & has_free
    log_gamma_unit, exhausted, n_used = _take_supply(draws.type_supply, sweep.n_type_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    log_fresh = log_gamma_unit - jnp.log(rate + 0.5 * residual * residual)
    precisions = carry.precisions.at[new].set(jnp.where(opened, jnp.exp(log_fresh), carry.precisions[new]))
    state = carry._replace(
        types=carry.types.at[index].set(new),
        type_counts=counts.at[new].add(1),
        precisions=precisions,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _TYPE_OVERFLOW, 0),
    )
    type_log_det = sweep.type_log_det.at[new].set(
        jnp.where(opened, jnp.sum(log_fresh), sweep.type_log_det[new])
    )
    return sweep._replace(state=state, type_log_det=type_log_det, n_type_supply_used=n_used)


# Indicator updates of the non-conjugate SCDP-3: Neal's Algorithm 8 (DM05 §4.2) whose M auxiliary
# parameters persist from point to point (Favaro & Teh 2013, §5, "ReUse"): the pool starts as M
# draws from the base measure; a cluster (type) left empty by reference n replaces the pool member
# at a uniform position; a chosen pool member becomes a cluster (type) and the next supply row
# takes its place. Each update is a Gibbs step on (indicator, pool) that leaves the posterior, with
# the pool i.i.d. from the base measure, invariant, and needs one base draw per opening instead of
# M per reference.
def _cluster_move_auxiliary(config, sweep, index, x, uniform, position, alpha, n_train_clusters, draws):
    """Algorithm 8 for c_n: existing publications ∝ n_{-n,k} F, pool means ∝ (α^p / M) F ×
    exp(-Σ_l t_l · Σ_k ||p̃ - p_k||²), the change of DM05 eq. 3's conditioning term when p̃ joins
    the active means p_k (all types l, all publications k after n has left)."""
    carry = sweep.state
    old = carry.clusters[index]
    counts = carry.cluster_counts.at[old].add(-1)
    was_alone = counts[old] == 0
    pool = sweep.cluster_pool.at[position].set(jnp.where(was_alone, carry.means[old], sweep.cluster_pool[position]))
    type_slot = carry.types[index]
    precision = carry.precisions[type_slot]
    log_det = sweep.type_log_det[type_slot]
    slots = jnp.arange(counts.shape[0])
    active = counts > 0
    allowed = active & (config.share_clusters | (slots >= n_train_clusters))
    log_existing = jnp.where(
        allowed, jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(x, carry.means, precision, log_det), -jnp.inf
    )
    variance_total = _active_variance_total(carry.precisions, carry.type_counts)
    n_active = jnp.sum(active)
    total = jnp.sum(jnp.where(active[:, None], carry.means, 0.0), axis=0)
    total_sq = jnp.sum(jnp.where(active[:, None], carry.means * carry.means, 0.0), axis=0)
    # Σ_k (p̃_f - p_kf)² = K p̃_f² - 2 p̃_f Σ_k p_kf + Σ_k p_kf² (DM05 eq. 3, λ = 1).
    coupling = -jnp.sum(variance_total * (n_active * pool * pool - 2.0 * pool * total + total_sq), axis=-1)
    n_auxiliary = pool.shape[0]
    log_pool = jnp.log(alpha / n_auxiliary) + _log_lik_rows(x, pool, precision, log_det) + coupling
    choice = _draw(jnp.concatenate([log_existing, log_pool]), uniform)
    free_slot, has_free = _first_free(counts)
    n_slots = counts.shape[0]
    wants_new = choice >= n_slots
    opened = wants_new & has_free
    member = jnp.clip(choice - n_slots, 0, n_auxiliary - 1)
    replacement, exhausted, n_used = _take_supply(draws.cluster_supply, sweep.n_cluster_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    means = carry.means.at[new].set(jnp.where(opened, pool[member], carry.means[new]))
    pool = pool.at[member].set(jnp.where(opened, replacement, pool[member]))
    state = carry._replace(
        clusters=carry.clusters.at[index].set(new),
        cluster_counts=counts.at[new].add(1),
        means=means,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _CLUSTER_OVERFLOW, 0),
    )
    return sweep._replace(state=state, cluster_pool=pool, n_cluster_supply_used=n_used)


def _type_move_auxiliary(config, sweep, index, x, uniform, position, alpha_types, shape, rate, draws):
    """Algorithm 8 for d_n: existing types ∝ m_{-n,l} F, pool precisions ∝ (α^t / M) F × the
    conditioning of the candidate precision on the means (DM05 eq. 3), so the draws from G0^t
    are weighted by their unnormalised posterior (DM05 §5.2, last paragraph)."""
    carry = sweep.state
    old = carry.types[index]
    counts = carry.type_counts.at[old].add(-1)
    was_alone = counts[old] == 0
    pool = sweep.type_pool.at[position].set(jnp.where(was_alone, carry.precisions[old], sweep.type_pool[position]))
    pool_log_det = sweep.type_pool_log_det.at[position].set(
        jnp.where(was_alone, sweep.type_log_det[old], sweep.type_pool_log_det[position])
    )
    residual = x - carry.means[carry.clusters[index]]
    log_existing = jnp.where(
        counts > 0,
        jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(residual, 0.0, carry.precisions, sweep.type_log_det),
        -jnp.inf,
    )
    n_auxiliary = pool.shape[0]
    conditioning = _log_conditioning(pool, _pair_spread(carry.means, carry.cluster_counts))
    log_pool = jnp.log(alpha_types / n_auxiliary) + _log_lik_rows(residual, 0.0, pool, pool_log_det) + conditioning
    choice = _draw(jnp.concatenate([log_existing, log_pool]), uniform)
    free_slot, has_free = _first_free(counts)
    n_slots = counts.shape[0]
    wants_new = choice >= n_slots
    opened = wants_new & has_free
    member = jnp.clip(choice - n_slots, 0, n_auxiliary - 1)
    replacement, exhausted, n_used = _take_supply(draws.type_supply, sweep.n_type_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    precisions = carry.precisions.at[new].set(jnp.where(opened, pool[member], carry.precisions[new]))
    type_log_det = sweep.type_log_det.at[new].set(jnp.where(opened, pool_log_det[member], sweep.type_log_det[new]))
    pool_log_det = pool_log_det.at[member].set(jnp.where(opened, jnp.sum(jnp.log(replacement)), pool_log_det[member]))
    pool = pool.at[member].set(jnp.where(opened, replacement, pool[member]))
    state = carry._replace(
        types=carry.types.at[index].set(new),
        type_counts=counts.at[new].add(1),
        precisions=precisions,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _TYPE_OVERFLOW, 0),
    )
    return sweep._replace(
        state=state, type_log_det=type_log_det, type_pool=pool, type_pool_log_det=pool_log_det,
        n_type_supply_used=n_used,
    )


def _xla_sweep(config, carry, features, n_train, n_train_clusters, alpha, alpha_types, shape, rate, draws):
    """The assignment sweep as ``lax.scan`` loops: test references (c_n then d_n), then training
    references (d_n). Runs on every backend."""
    n_points = features.shape[0]
    type_log_det = jnp.sum(jnp.log(jnp.where((carry.type_counts > 0)[:, None], carry.precisions, 1.0)), axis=-1)
    sweep = _SweepCarry(
        state=carry,
        type_log_det=type_log_det,
        cluster_pool=draws.cluster_pool,
        type_pool=draws.type_pool,
        type_pool_log_det=jnp.sum(jnp.log(draws.type_pool), axis=-1),
        n_cluster_supply_used=jnp.zeros((), jnp.int32),
        n_type_supply_used=jnp.zeros((), jnp.int32),
    )
    if config.model == 3:
        cluster_move, type_move = partial(_cluster_move_auxiliary, config), partial(_type_move_auxiliary, config)
    else:
        cluster_move, type_move = partial(_cluster_move_conjugate, config), partial(_type_move_conjugate, config)

    def visit_test(sweep, inputs):
        index, x, uniform_cluster, uniform_type, position_cluster, position_type = inputs
        sweep = cluster_move(sweep, index, x, uniform_cluster, position_cluster, alpha, n_train_clusters, draws)
        return type_move(sweep, index, x, uniform_type, position_type, alpha_types, shape, rate, draws), None

    def visit_train(sweep, inputs):
        index, x, uniform_type, position_type = inputs
        return type_move(sweep, index, x, uniform_type, position_type, alpha_types, shape, rate, draws), None

    uniforms, positions = draws.uniforms, draws.positions
    sweep, _ = jax.lax.scan(
        visit_test,
        sweep,
        (jnp.arange(n_train, n_points), features[n_train:], uniforms[0, n_train:], uniforms[1, n_train:],
         positions[0, n_train:], positions[1, n_train:]),
    )
    sweep, _ = jax.lax.scan(
        visit_train, sweep, (jnp.arange(n_train), features[:n_train], uniforms[1, :n_train], positions[1, :n_train])
    )
    return sweep.state


# CPU fast path: the same sweep, with the same random numbers, as one compiled loop per chain on
# the host (numba), called through ``jax.pure_callback``. Inside an XLA while loop each small
# per-reference operation costs a fixed dispatch overhead; the compiled loop pays none and skips
# empty slots.
@lru_cache(maxsize=None)
def _numba_sweep_kernel():
    from numba import njit, prange

    # Reassociation lets the per-feature sums vectorise; no assumption about NaN or infinities.
    fast = {"nsz", "arcp", "contract", "reassoc"}

    @njit(cache=True, nogil=True, fastmath=fast)
    def draw(logits, n_candidates, uniform):
        top = -np.inf
        for j in range(n_candidates):
            top = max(top, logits[j])
        total = 0.0
        for j in range(n_candidates):
            logits[j] = np.exp(logits[j] - top)
            total += logits[j]
        threshold = uniform * total
        cumulative = 0.0
        for j in range(n_candidates):
            cumulative += logits[j]
            if cumulative > threshold:
                return j
        return n_candidates - 1

    @njit(cache=True, nogil=True)
    def first_free(counts):
        for k in range(counts.shape[0]):
            if counts[k] == 0:
                return k
        return -1

    @njit(cache=True, nogil=True, fastmath=fast)
    def active_totals(means, counts, total, total_sq):
        """Number of active means, their sum and sum of squares per feature."""
        total[:] = 0.0
        total_sq[:] = 0.0
        n_active = 0
        for k in range(counts.shape[0]):
            if counts[k] > 0:
                n_active += 1
                for f in range(means.shape[1]):
                    total[f] += means[k, f]
                    total_sq[f] += means[k, f] * means[k, f]
        return n_active

    @njit(cache=True, nogil=True, fastmath=fast)
    def active_variance_total(precisions, type_counts, variance_total):
        variance_total[:] = 0.0
        for slot in range(type_counts.shape[0]):
            if type_counts[slot] > 0:
                for f in range(precisions.shape[1]):
                    variance_total[f] += 1.0 / precisions[slot, f]

    @njit(cache=True, nogil=True, fastmath=fast)
    def sweep_chain(model, share_clusters, n_train, prior_variance, x, n_train_clusters, clusters, counts, means,
                    types, type_counts, precisions, alpha, alpha_types, shape, rate, uniforms, positions,
                    cluster_supply, type_supply, cluster_pool, type_pool):
        n_points, n_features = x.shape
        n_test = n_points - n_train
        n_slots, n_type_slots, n_auxiliary = counts.shape[0], type_counts.shape[0], cluster_pool.shape[0]
        half_log_2pi_d = 0.5 * n_features * np.log(2.0 * np.pi)
        first_allowed = 0 if share_clusters else n_train_clusters
        logits = np.empty(max(n_slots, n_type_slots) + max(n_auxiliary, 1))
        residual = np.empty(n_features)
        type_log_det = np.zeros(n_type_slots)
        for slot in range(n_type_slots):
            if type_counts[slot] > 0:
                for f in range(n_features):
                    type_log_det[slot] += np.log(precisions[slot, f])
        overflow = 0
        n_cluster_used = 0
        n_type_used = 0
        # SCDP-1/2: per type, precision of the new-publication marginal t / (1 + σ² t) and its
        # log-determinant; the Student-t constant of the new-type marginal.
        marginal = np.empty((n_type_slots, n_features))
        marginal_log_det = np.zeros(n_type_slots)
        student_constant = 0.0
        # SCDP-3: the pools, their log-determinants, Σ_l 1 / t_l and the active-means totals.
        pool_means = cluster_pool.copy()
        pool_precisions = type_pool.copy()
        pool_log_det = np.zeros(n_auxiliary)
        variance_total = np.zeros(n_features)
        total = np.zeros(n_features)
        total_sq = np.zeros(n_features)
        spread = np.zeros(n_features)
        n_active = 0
        if model == 3:
            for member in range(n_auxiliary):
                for f in range(n_features):
                    pool_log_det[member] += np.log(pool_precisions[member, f])
            active_variance_total(precisions, type_counts, variance_total)
            n_active = active_totals(means, counts, total, total_sq)
        else:
            for slot in range(n_type_slots):
                if type_counts[slot] > 0:
                    for f in range(n_features):
                        marginal[slot, f] = precisions[slot, f] / (1.0 + prior_variance * precisions[slot, f])
                        marginal_log_det[slot] += np.log(marginal[slot, f])
            for f in range(n_features):
                student_constant += (shape[f] * np.log(rate[f]) + math.lgamma(shape[f] + 0.5) - math.lgamma(shape[f])
                                     - 0.5 * np.log(2.0 * np.pi))
        for visit in range(n_points):
            index = n_train + visit if visit < n_test else visit - n_test
            point = x[index]
            if index >= n_train:
                # ---- c_n ----
                old = clusters[index]
                counts[old] -= 1
                was_alone = counts[old] == 0
                type_slot = types[index]
                precision = precisions[type_slot]
                log_det = type_log_det[type_slot]
                for k in range(n_slots):
                    if counts[k] > 0 and k >= first_allowed:
                        square = 0.0
                        for f in range(n_features):
                            difference = point[f] - means[k, f]
                            square += precision[f] * difference * difference
                        logits[k] = np.log(counts[k]) + 0.5 * log_det - half_log_2pi_d - 0.5 * square
                    else:
                        logits[k] = -np.inf
                if model == 3:
                    if was_alone:
                        position = positions[0, index]
                        pool_means[position] = means[old]
                        n_active = active_totals(means, counts, total, total_sq)
                    log_weight = np.log(alpha / n_auxiliary)
                    for member in range(n_auxiliary):
                        square = 0.0
                        coupling = 0.0
                        for f in range(n_features):
                            candidate = pool_means[member, f]
                            difference = point[f] - candidate
                            square += precision[f] * difference * difference
                            coupling += variance_total[f] * (
                                n_active * candidate * candidate - 2.0 * candidate * total[f] + total_sq[f]
                            )
                        logits[n_slots + member] = (log_weight + 0.5 * log_det - half_log_2pi_d - 0.5 * square
                                                    - coupling)
                    choice = draw(logits, n_slots + n_auxiliary, uniforms[0, index])
                else:
                    square = 0.0
                    for f in range(n_features):
                        square += marginal[type_slot, f] * point[f] * point[f]
                    logits[n_slots] = (np.log(alpha) + 0.5 * marginal_log_det[type_slot] - half_log_2pi_d
                                       - 0.5 * square)
                    choice = draw(logits, n_slots + 1, uniforms[0, index])
                new = choice
                if choice >= n_slots:
                    free = first_free(counts)
                    if free < 0:
                        overflow |= 1
                        new = old
                    elif n_cluster_used >= cluster_supply.shape[0]:
                        overflow |= 1
                        new = free
                        n_cluster_used += 1
                    else:
                        new = free
                        supply = cluster_supply[n_cluster_used]
                        n_cluster_used += 1
                        if model == 3:
                            member = choice - n_slots
                            means[new] = pool_means[member]
                            pool_means[member] = supply
                        else:
                            for f in range(n_features):
                                posterior_precision = 1.0 / prior_variance + precision[f]
                                means[new, f] = (precision[f] * point[f] / posterior_precision
                                                 + supply[f] / np.sqrt(posterior_precision))
                clusters[index] = new
                counts[new] += 1
                if model == 3 and (was_alone or choice >= n_slots):
                    n_active = active_totals(means, counts, total, total_sq)
            # ---- d_n ----
            old = types[index]
            type_counts[old] -= 1
            was_alone = type_counts[old] == 0
            mean = means[clusters[index]]
            for f in range(n_features):
                residual[f] = point[f] - mean[f]
            for slot in range(n_type_slots):
                if type_counts[slot] > 0:
                    square = 0.0
                    for f in range(n_features):
                        square += precisions[slot, f] * residual[f] * residual[f]
                    logits[slot] = (np.log(type_counts[slot]) + 0.5 * type_log_det[slot] - half_log_2pi_d
                                    - 0.5 * square)
                else:
                    logits[slot] = -np.inf
            if model == 3:
                if was_alone:
                    position = positions[1, index]
                    pool_precisions[position] = precisions[old]
                    pool_log_det[position] = type_log_det[old]
                for f in range(n_features):
                    spread[f] = max(n_active * total_sq[f] - total[f] * total[f], 0.0)
                log_weight = np.log(alpha_types / n_auxiliary)
                for member in range(n_auxiliary):
                    square = 0.0
                    conditioning = 0.0
                    for f in range(n_features):
                        square += pool_precisions[member, f] * residual[f] * residual[f]
                        conditioning += spread[f] / pool_precisions[member, f]
                    logits[n_type_slots + member] = (log_weight + 0.5 * pool_log_det[member] - half_log_2pi_d
                                                     - 0.5 * square - conditioning)
                choice = draw(logits, n_type_slots + n_auxiliary, uniforms[1, index])
            else:
                log_student = student_constant
                for f in range(n_features):
                    log_student -= (shape[f] + 0.5) * np.log(rate[f] + 0.5 * residual[f] * residual[f])
                logits[n_type_slots] = np.log(alpha_types) + log_student
                choice = draw(logits, n_type_slots + 1, uniforms[1, index])
            new = choice
            if choice >= n_type_slots:
                free = first_free(type_counts)
                if free < 0:
                    overflow |= 2
                    new = old
                elif n_type_used >= type_supply.shape[0]:
                    overflow |= 2
                    new = free
                    n_type_used += 1
                else:
                    new = free
                    supply = type_supply[n_type_used]
                    n_type_used += 1
                    if model == 3:
                        member = choice - n_type_slots
                        precisions[new] = pool_precisions[member]
                        type_log_det[new] = pool_log_det[member]
                        pool_precisions[member] = supply
                        pool_log_det[member] = 0.0
                        for f in range(n_features):
                            pool_log_det[member] += np.log(supply[f])
                    else:
                        type_log_det[new] = 0.0
                        marginal_log_det[new] = 0.0
                        for f in range(n_features):
                            log_fresh = supply[f] - np.log(rate[f] + 0.5 * residual[f] * residual[f])
                            precisions[new, f] = np.exp(log_fresh)
                            type_log_det[new] += log_fresh
                            marginal[new, f] = precisions[new, f] / (1.0 + prior_variance * precisions[new, f])
                            marginal_log_det[new] += np.log(marginal[new, f])
            types[index] = new
            type_counts[new] += 1
            if model == 3 and (was_alone or choice >= n_type_slots):
                active_variance_total(precisions, type_counts, variance_total)
        return overflow

    @njit(cache=True, nogil=True)
    def row(batch, array):
        """Row of ``array`` for batch element ``batch``: itself, or 0 when shared (one row)."""
        return 0 if array.shape[0] == 1 else np.int64(batch)

    @njit(parallel=True, cache=True, nogil=True)
    def sweep_batch(n_batch, model, share_clusters, n_train, prior_variance, features, n_train_clusters, clusters,
                    cluster_counts, means, types, type_counts, precisions, overflow, alpha, alpha_types, shape,
                    rate, uniforms, positions, cluster_supply, type_supply, cluster_pool, type_pool):
        # Every input has a leading batch axis of size n_batch or 1 (shared by all chains).
        out_clusters = np.empty((n_batch,) + clusters.shape[1:], clusters.dtype)
        out_counts = np.empty((n_batch,) + cluster_counts.shape[1:], cluster_counts.dtype)
        out_means = np.empty((n_batch,) + means.shape[1:], means.dtype)
        out_types = np.empty((n_batch,) + types.shape[1:], types.dtype)
        out_type_counts = np.empty((n_batch,) + type_counts.shape[1:], type_counts.dtype)
        out_precisions = np.empty((n_batch,) + precisions.shape[1:], precisions.dtype)
        out_overflow = np.empty(n_batch, overflow.dtype)
        for b in prange(n_batch):
            out_clusters[b] = clusters[row(b, clusters)]
            out_counts[b] = cluster_counts[row(b, cluster_counts)]
            out_means[b] = means[row(b, means)]
            out_types[b] = types[row(b, types)]
            out_type_counts[b] = type_counts[row(b, type_counts)]
            out_precisions[b] = precisions[row(b, precisions)]
            flag = sweep_chain(
                model, share_clusters, n_train, prior_variance, features[row(b, features)],
                n_train_clusters[row(b, n_train_clusters)], out_clusters[b], out_counts[b],
                out_means[b], out_types[b], out_type_counts[b], out_precisions[b],
                alpha[row(b, alpha)], alpha_types[row(b, alpha_types)],
                shape[row(b, shape)], rate[row(b, rate)],
                uniforms[row(b, uniforms)], positions[row(b, positions)],
                cluster_supply[row(b, cluster_supply)], type_supply[row(b, type_supply)],
                cluster_pool[row(b, cluster_pool)], type_pool[row(b, type_pool)],
            )
            out_overflow[b] = overflow[row(b, overflow)] | flag
        return out_clusters, out_counts, out_means, out_types, out_type_counts, out_precisions, out_overflow

    return sweep_batch


# Per-chain number of dimensions of each array input of the numba sweep, in call order.
_SWEEP_INPUT_NDIMS = (2, 0, 1, 1, 2, 1, 1, 2, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2)


def _numba_sweep_host(model, share_clusters, n_train, prior_variance, *arrays):
    """Host side of the numba sweep: flatten any vmapped leading axes into one batch axis (size
    1 for inputs shared by all chains), run the batch, restore the batch shape."""
    arrays = [np.asarray(array) for array in arrays]
    leading = [array.shape[: array.ndim - ndim] for array, ndim in zip(arrays, _SWEEP_INPUT_NDIMS)]
    batch_shape = np.broadcast_shapes(*leading)
    n_batch = math.prod(batch_shape)
    flat = []
    for array, lead, ndim in zip(arrays, leading, _SWEEP_INPUT_NDIMS):
        if math.prod(lead) not in (1, n_batch) or (math.prod(lead) == n_batch and lead != batch_shape):
            array = np.broadcast_to(array, batch_shape + array.shape[array.ndim - ndim:])
        tail = array.shape[array.ndim - ndim:]
        flat.append(np.ascontiguousarray(array.reshape((math.prod(array.shape[: array.ndim - ndim]),) + tail)))
    outputs = _numba_sweep_kernel()(n_batch, model, share_clusters, n_train, prior_variance, *flat)
    return tuple(output.reshape(batch_shape + output.shape[1:]) for output in outputs)


def _numba_sweep(config, carry, features, n_train, n_train_clusters, alpha, alpha_types, shape, rate, draws):
    """The assignment sweep on the host (numba), with the same random numbers as :func:`_xla_sweep`."""
    result_shapes = tuple(
        jax.ShapeDtypeStruct(array.shape, array.dtype)
        for array in (carry.clusters, carry.cluster_counts, carry.means, carry.types, carry.type_counts,
                      carry.precisions, carry.overflow)
    )
    host = partial(_numba_sweep_host, config.model, config.share_clusters, n_train, config.prior_variance)
    outputs = jax.pure_callback(
        host, result_shapes,
        features, jnp.asarray(n_train_clusters, jnp.int32), carry.clusters, carry.cluster_counts, carry.means,
        carry.types, carry.type_counts, carry.precisions, carry.overflow, alpha, alpha_types, shape, rate,
        draws.uniforms, draws.positions, draws.cluster_supply, draws.type_supply, draws.cluster_pool,
        draws.type_pool,
        vmap_method="expand_dims",
    )
    return _Carry(*outputs)


def _gibbs_means_conditioned(config, rng_key, carry, features):
    """SCDP-3 means by exact Gibbs: p_k | rest is Gaussian (DM05 §5.2, eq. 3, λ = 1).

    The target of p_k is G0^p(p_k) Π_{n∈k} F(r_n | p_k, t_{d_n}) × exp(-Σ_f V_f S_f(p)), with
    V = Σ_l 1 / t_l over the active types (:func:`_log_conditioning`), and S_f = Σ over pairs of
    active publications of (p_jf - p_kf)² holds p_k through (K - 1) p_kf² - 2 p_kf Σ_{j≠k} p_jf
    + const. With A_k = Σ_{n∈k} t_{d_n} and B_k = Σ_{n∈k} t_{d_n} r_n, p_kf is Normal with
    precision 1/σ² + A_kf + 2 V_f (K - 1) and mean (B_kf + 2 V_f Σ_{j≠k} p_jf) / precision. The
    publications are visited in slot order, each draw using the others' current values (running
    sums, O(D) a visit). DM05 §4.2 refresh the means with an independence sampler whose proposals
    are draws from G0^p; in 16 or 64 dimensions those are essentially never accepted, and the
    means stayed where the chain started."""
    n_slots, n_features = carry.means.shape
    point_precisions = carry.precisions[carry.types]
    weight = _sum_by_slot(point_precisions, carry.clusters, n_slots)
    weighted = _sum_by_slot(point_precisions * features, carry.clusters, n_slots)
    active = carry.cluster_counts > 0
    n_active = jnp.sum(active).astype(features.dtype)
    variance_total = _active_variance_total(carry.precisions, carry.type_counts)
    noise = jax.random.normal(rng_key, carry.means.shape, features.dtype)
    total = jnp.sum(jnp.where(active[:, None], carry.means, 0.0), axis=0)

    def visit(total, inputs):
        current, weight_k, weighted_k, noise_k, is_active = inputs
        others = total - current
        precision = 1.0 / config.prior_variance + weight_k + 2.0 * variance_total * (n_active - 1.0)
        fresh = (weighted_k + 2.0 * variance_total * others) / precision + noise_k / jnp.sqrt(precision)
        kept = jnp.where(is_active, fresh, current)
        return jnp.where(is_active, others + kept, total), kept

    _, means = jax.lax.scan(visit, total, (carry.means, weight, weighted, noise, active))
    return carry._replace(means=means)


def _metropolis_precisions_conditioned(config, rng_key, carry, features, shape, rate):
    """SCDP-3 precisions by Metropolis steps on log t, every type and feature at once.

    The target of t_lf is Gamma(t | a, b) Π_{n∈l} F(r_n | p_{c_n}, t) exp(-S_f / t) (DM05 §5.2,
    eq. 3), ∝ t^{α-1} exp(-β t - S_f / t) with α = a + m_l / 2 and β = b + Q_lf / 2
    (Q_l = Σ_{n∈l} (r_n - p_{c_n})²): a generalised inverse Gaussian, non-conjugate as §5.2 says.
    In u = log t the log density is α u - β e^u - S e^{-u}; each of ``config.n_precision_steps``
    steps proposes u' = u + ε z with z ~ N(0, 1) and ε = 2 / sqrt(α + 2 S β / α) (about twice
    the posterior sd of u at its mode, fixed during the update, so the proposal is symmetric) and
    accepts with the usual ratio. The steps replace DM05 §4.2's independence sampler with G0^t
    proposals, which in many dimensions were almost never accepted."""
    n_slots = carry.precisions.shape[0]
    residuals = features - carry.means[carry.clusters]
    squares = _sum_by_slot(residuals * residuals, carry.types, n_slots)
    spread = _pair_spread(carry.means, carry.cluster_counts)
    alpha = shape + 0.5 * carry.type_counts.astype(features.dtype)[:, None]
    beta = rate + 0.5 * squares
    step_size = 2.0 / jnp.sqrt(alpha + 2.0 * spread * beta / alpha)
    active = (carry.type_counts > 0)[:, None]

    def log_density(log_t):
        return alpha * log_t - beta * jnp.exp(log_t) - spread * jnp.exp(-log_t)

    def one_step(log_t, step_key):
        key_move, key_accept = jax.random.split(step_key)
        proposal = log_t + step_size * jax.random.normal(key_move, log_t.shape, log_t.dtype)
        log_uniform = jnp.log(jax.random.uniform(key_accept, log_t.shape, log_t.dtype, minval=1e-30))
        accept = active & (log_uniform < log_density(proposal) - log_density(log_t))
        return jnp.where(accept, proposal, log_t), None

    log_t, _ = jax.lax.scan(one_step, jnp.log(carry.precisions), jax.random.split(rng_key, config.n_precision_steps))
    return carry._replace(precisions=jnp.where(active, jnp.exp(log_t), carry.precisions))


# ----------------------------------------------------------------------------------------------
# Split–merge moves of the test partition (Dahl 2003; Jain & Neal 2004), publication means
# integrated out given the reference types
# ----------------------------------------------------------------------------------------------
class _MoveContext(NamedTuple):
    """What every split–merge move of a sweep shares: per-reference precisions t_{d_n}, their
    products with the references, and V = Σ_l 1 / t_l over the active types (SCDP-3's coupling
    of the means, eq. 3; zeros for SCDP-1 and -2)."""

    point_precisions: jax.Array
    point_weighted: jax.Array
    coupling: jax.Array


def _log_side_predictive(config, weight, weighted, x, precision):
    """log N(x | B / Λ, 1 / Λ + 1 / t) summed over features: the predictive of a reference with
    precision t under a side whose means are integrated (Λ = 1/σ² + A, statistics A = Σ t_n,
    B = Σ t_n r_n). Only the proposal of the moves uses it, so SCDP-3's coupling is left out."""
    posterior_precision = 1.0 / config.prior_variance + weight
    variance = 1.0 / posterior_precision + 1.0 / precision
    return -0.5 * jnp.sum(jnp.log(variance) + _LOG_2PI + (x - weighted / posterior_precision) ** 2 / variance)


def _coupled_means(config, coupling, n_rest, rest_total, weights, weighteds):
    """Precision matrix (per feature) and linear term of the means of one or two publications
    given the rest, in exp(-½ pᵀ Λ p + hᵀ p).

    Λ_aa = 1/σ² + A_a + 2 V (R + J - 1), Λ_ab = -2 V, h_a = B_a + 2 V P_R for J = 1 or 2 moving
    publications, R others with mean sum P_R: the terms of -V · S (DM05 eq. 3) that hold them."""
    n_moving = weights.shape[0]
    diagonal = 1.0 / config.prior_variance + weights + 2.0 * coupling * (n_rest + n_moving - 1.0)
    linear = weighteds + 2.0 * coupling * rest_total
    return diagonal, linear


def _log_integrated(config, coupling, n_rest, rest_total, rest_total_sq, weights, weighteds):
    """log ∫ Π_a G0^p(p_a) F(points of a | p_a) exp(-V · S(p)) dp over the J = 1 or 2 moving
    means, up to terms that do not depend on how the points are split (DM05 eq. 2 with the
    means integrated; eq. 3's conditioning for SCDP-3)."""
    n_moving = weights.shape[0]
    diagonal, linear = _coupled_means(config, coupling, n_rest, rest_total, weights, weighteds)
    prior = -0.5 * n_moving * jnp.log(config.prior_variance)
    rest = -coupling * n_moving * rest_total_sq
    if n_moving == 1:
        value = prior - 0.5 * jnp.log(diagonal[0]) + 0.5 * linear[0] ** 2 / diagonal[0] + rest
    else:
        off = -2.0 * coupling
        det = diagonal[0] * diagonal[1] - off * off
        quad = (diagonal[1] * linear[0] ** 2 + diagonal[0] * linear[1] ** 2 - 2.0 * off * linear[0] * linear[1]) / det
        value = prior - 0.5 * jnp.log(det) + 0.5 * quad + rest
    return jnp.sum(value)


def _draw_coupled_means(config, rng_key, coupling, n_rest, rest_total, weights, weighteds):
    """Joint draw of the two means (a, b) from their Gaussian given the rest (see
    :func:`_coupled_means`): p_b from its marginal, then p_a given p_b."""
    diagonal, linear = _coupled_means(config, coupling, n_rest, rest_total, weights, weighteds)
    off = -2.0 * coupling
    noise = jax.random.normal(rng_key, weights.shape, weights.dtype)
    # Marginal of p_b: precision Λ_bb - Λ_ab² / Λ_aa, linear h_b - Λ_ab h_a / Λ_aa.
    marginal_precision = diagonal[1] - off * off / diagonal[0]
    marginal_linear = linear[1] - off * linear[0] / diagonal[0]
    mean_b = marginal_linear / marginal_precision + noise[1] / jnp.sqrt(marginal_precision)
    mean_a = (linear[0] - off * mean_b) / diagonal[0] + noise[0] / jnp.sqrt(diagonal[0])
    return mean_a, mean_b


def _split_merge_move(config, rng_key, carry, features, n_train, n_train_clusters, alpha, context):
    """One sequentially allocated split–merge Metropolis–Hastings move of the test partition.

    Target: p(c_test | d, t, r) with the publication means integrated (conditionally on the other
    means for SCDP-3, whose eq. 3 couples them). Two distinct test references i, j are drawn; the
    other test references of their publication(s) are visited in random order and each goes to
    i's side with probability ∝ n_i p(r_k | side i) against j's (the predictive of
    :func:`_log_side_predictive`).

    * i and j together: propose the split; log ratio log α + log Γ(n_i) Γ(n_j) / Γ(n_i + n_j)
      (the test CRP, DM05 eq. 2) + log m(i's side, j's side) - log m(both) - log q(split).
    * apart: propose the merge, the reciprocal ratio with q the probability that the split would
      have produced the current pair.

    Whatever the outcome, the means of the publications holding i and j are then drawn from
    their conditional (jointly when there are two), so the move is a block update of the test
    partition and those means. With ``share_clusters`` a move touching a training publication is
    skipped. Returns (carry, accepted, overflow).
    """
    dtype = features.dtype
    n_points = features.shape[0]
    n_test = n_points - n_train
    key_i, key_j, key_order, key_allocate, key_accept, key_means = jax.random.split(rng_key, 6)
    i = n_train + jax.random.randint(key_i, (), 0, n_test)
    j = jax.random.randint(key_j, (), 0, n_test - 1)
    j = n_train + j + (n_train + j >= i)
    clusters, counts, means = carry.clusters, carry.cluster_counts, carry.means
    label_i, label_j = clusters[i], clusters[j]
    split = label_i == label_j
    movable = (label_i >= n_train_clusters) & (label_j >= n_train_clusters)
    index = jnp.arange(n_points)
    in_play = ((clusters == label_i) | (clusters == label_j)) & (index != i) & (index != j)
    order = jax.random.permutation(key_order, n_points)
    order = order[jnp.argsort(~in_play[order], stable=True)]
    uniforms = jax.random.uniform(key_allocate, (n_points,), dtype)
    precisions, weighted = context.point_precisions, context.point_weighted

    def allocate(position, state):
        weight_i, weighted_i, weight_j, weighted_j, size_i, size_j, log_q, on_side_i = state
        k = order[position]
        x, precision = features[k], precisions[k]
        logit_i = jnp.log(size_i) + _log_side_predictive(config, weight_i, weighted_i, x, precision)
        logit_j = jnp.log(size_j) + _log_side_predictive(config, weight_j, weighted_j, x, precision)
        norm = jnp.logaddexp(logit_i, logit_j)
        to_i = jnp.where(split, uniforms[k] < jnp.exp(logit_i - norm), clusters[k] == label_i)
        log_q = log_q + jnp.where(to_i, logit_i, logit_j) - norm
        return (
            weight_i + jnp.where(to_i, precision, 0.0), weighted_i + jnp.where(to_i, weighted[k], 0.0),
            weight_j + jnp.where(to_i, 0.0, precision), weighted_j + jnp.where(to_i, 0.0, weighted[k]),
            size_i + to_i, size_j + ~to_i, log_q, on_side_i.at[k].set(to_i),
        )

    one = jnp.ones((), dtype)
    start = (precisions[i], weighted[i], precisions[j], weighted[j], one, one, jnp.zeros((), dtype), index == i)
    weight_i, weighted_i, weight_j, weighted_j, size_i, size_j, log_q, on_side_i = jax.lax.fori_loop(
        0, jnp.where(movable, jnp.sum(in_play), 0), allocate, start
    )
    # The other publications: their number and the sums of their means (DM05 eq. 3's pairs).
    active = counts > 0
    rest = active & (jnp.arange(counts.shape[0]) != label_i) & (jnp.arange(counts.shape[0]) != label_j)
    n_rest = jnp.sum(rest).astype(dtype)
    rest_total = jnp.sum(jnp.where(rest[:, None], means, 0.0), axis=0)
    rest_total_sq = jnp.sum(jnp.where(rest[:, None], means * means, 0.0), axis=0)
    sides_weight = jnp.stack([weight_i, weight_j])
    sides_weighted = jnp.stack([weighted_i, weighted_j])
    integrated = partial(_log_integrated, config, context.coupling, n_rest, rest_total, rest_total_sq)
    log_split_over_merged = (
        jnp.log(alpha) + gammaln(size_i) + gammaln(size_j) - gammaln(size_i + size_j)
        + integrated(sides_weight, sides_weighted)
        - integrated(jnp.sum(sides_weight, 0, keepdims=True), jnp.sum(sides_weighted, 0, keepdims=True))
    )
    log_ratio = jnp.where(split, log_split_over_merged - log_q, log_q - log_split_over_merged)
    accepted = movable & (jnp.log(jax.random.uniform(key_accept, (), dtype)) < log_ratio)
    free = counts == 0
    overflow = accepted & split & ~jnp.any(free)
    accepted = accepted & ~overflow
    # A split sends j's side to the first free slot; a merge sends i's publication to j's.
    new_slot = jnp.argmax(free).astype(clusters.dtype)
    moved = jnp.where(split, (in_play | (index == j)) & ~on_side_i, clusters == label_i)
    clusters = jnp.where(accepted & moved, jnp.where(split, new_slot, label_j), clusters)
    counts = jax.ops.segment_sum(jnp.ones((n_points,), counts.dtype), clusters, num_segments=counts.shape[0])
    # Means of the publications now holding i and j, drawn from their conditional (one or two).
    separate = (split & accepted) | (~split & ~accepted)
    slot_i, slot_j = clusters[i], clusters[j]
    mean_a, mean_b = _draw_coupled_means(
        config, key_means, context.coupling, n_rest, rest_total, sides_weight, sides_weighted
    )
    merged_precision, merged_linear = _coupled_means(
        config, context.coupling, n_rest, rest_total, jnp.sum(sides_weight, 0, keepdims=True),
        jnp.sum(sides_weighted, 0, keepdims=True),
    )
    noise = jax.random.normal(jax.random.fold_in(key_means, 1), weight_i.shape, dtype)
    merged_mean = merged_linear[0] / merged_precision[0] + noise / jnp.sqrt(merged_precision[0])
    new_means = means.at[slot_j].set(jnp.where(separate, mean_b, merged_mean))
    new_means = new_means.at[slot_i].set(jnp.where(separate, mean_a, merged_mean))
    means = jnp.where(movable, new_means, means)
    carry = carry._replace(clusters=clusters, cluster_counts=counts, means=means,
                           overflow=carry.overflow | jnp.where(overflow, _CLUSTER_OVERFLOW, 0))
    return carry, accepted


def _split_merge_moves(config, rng_key, carry, features, n_train, n_train_clusters, alpha):
    """``config.n_split_merge`` moves in a row; returns (carry, number accepted)."""
    point_precisions = carry.precisions[carry.types]
    coupling = _active_variance_total(carry.precisions, carry.type_counts)
    context = _MoveContext(
        point_precisions=point_precisions,
        point_weighted=point_precisions * features,
        coupling=coupling if config.model == 3 else jnp.zeros_like(coupling),
    )

    def move(state, move_index):
        carry, n_accepted = state
        carry, accepted = _split_merge_move(config, jax.random.fold_in(rng_key, move_index), carry, features,
                                            n_train, n_train_clusters, alpha, context)
        return (carry, n_accepted + accepted), None

    (carry, n_accepted), _ = jax.lax.scan(move, (carry, jnp.zeros((), jnp.int32)), jnp.arange(config.n_split_merge))
    return carry, n_accepted


# ----------------------------------------------------------------------------------------------
# Log joint
# ----------------------------------------------------------------------------------------------
def _log_joint(config, carry, features, n_train, alpha, alpha_types, shape, rate, n_train_clusters):
    n_points, n_features = features.shape
    n_test = n_points - n_train
    if config.share_clusters:
        log_clusters = _log_crp(carry.cluster_counts, alpha, n_points)
    else:
        slots = jnp.arange(carry.cluster_counts.shape[0])
        train_counts = jnp.where(slots < n_train_clusters, carry.cluster_counts, 0)
        test_counts = jnp.where(slots < n_train_clusters, 0, carry.cluster_counts)
        log_clusters = _log_crp(train_counts, alpha, n_train) + (
            _log_crp(test_counts, alpha, n_test) if n_test else 0.0
        )
    log_types = _log_crp(carry.type_counts, alpha_types, n_points)
    # Σ_n log F(r_n | p_{c_n}, t_{d_n}) by type: ½ Σ_l m_l log|t_l| - ½ Σ_l t_l · Q_l - ½ N D log 2π.
    residuals = features - carry.means[carry.clusters]
    squares = _sum_by_slot(residuals * residuals, carry.types, carry.precisions.shape[0])
    active_types = carry.type_counts > 0
    safe_precisions = jnp.where(active_types[:, None], carry.precisions, 1.0)
    log_lik = 0.5 * (
        jnp.sum(carry.type_counts * jnp.sum(jnp.log(safe_precisions), axis=-1))
        - jnp.sum(safe_precisions * squares) - n_points * n_features * _LOG_2PI
    )
    active_clusters = carry.cluster_counts > 0
    log_means = jnp.sum(
        jnp.where(active_clusters, _log_normal_diag(carry.means, 0.0, 1.0 / config.prior_variance), 0.0)
    )
    log_precisions = jnp.sum(jnp.where(active_types, _log_gamma_density(safe_precisions, shape, rate), 0.0))
    if config.model == 3:
        per_type = _log_conditioning(carry.precisions, _pair_spread(carry.means, carry.cluster_counts))
        log_precisions = log_precisions + jnp.sum(jnp.where(active_types, per_type, 0.0))
    return log_clusters + log_types + log_lik + log_means + log_precisions


# ----------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------
def _supply_sizes(n_test: int, n_points: int, n_cluster_slots: int, n_type_slots: int) -> tuple[int, int]:
    """Rows of fresh draws per sweep: twice the capacity, at most one per reference that can open
    a cluster (type), so full capacity never runs out (see :class:`_SweepDraws`)."""
    return max(1, min(n_test, 2 * n_cluster_slots)), max(1, min(n_points, 2 * n_type_slots))


def _step(config: _Config, rng_key: jax.Array, state: SupervisedState, data: SupervisedData):
    features = data.features
    dtype = features.dtype
    n_train = data.n_train
    n_points, n_features = features.shape
    n_test = n_points - n_train
    n_train_clusters = jnp.max(data.train_labels) + 1
    (key_means, key_precisions, key_uniform, key_positions, key_cluster_supply, key_type_supply,
     key_alpha, key_alpha_types, key_split_merge) = jax.random.split(rng_key, 9)

    carry = _Carry(
        state.clusters, state.cluster_counts, state.means, state.types, state.type_counts, state.precisions,
        state.overflow,
    )
    # 0. Split–merge moves of the test partition, means integrated given the types (they move
    #    whole groups of references, which one-reference updates cannot do).
    n_accepted = jnp.zeros((), jnp.int32)
    if config.n_split_merge and n_test >= 2:
        carry, n_accepted = _split_merge_moves(config, key_split_merge, carry, features, n_train, n_train_clusters,
                                               state.alpha)
    shape, rate = state.precision_shape, state.precision_rate
    if config.model == 2:
        shape, rate = _separation_prior(
            carry.means, carry.cluster_counts, jnp.full((n_features,), config.precision_shape, dtype),
            jnp.full((n_features,), config.precision_rate, dtype),
        )
    n_cluster_slots, n_type_slots = carry.means.shape[0], carry.precisions.shape[0]
    n_cluster_supply, n_type_supply = _supply_sizes(n_test, n_points, n_cluster_slots, n_type_slots)

    # 1. Parameters given the indicators (DM05 Fig. 2 first two lines; §4.2 for SCDP-3), and the
    #    fresh draws of the assignment sweep (see _SweepDraws).
    uniforms = jax.random.uniform(key_uniform, (2, n_points), dtype)
    if config.model == 3:
        carry = _gibbs_means_conditioned(config, key_means, carry, features)
        carry = _metropolis_precisions_conditioned(config, key_precisions, carry, features, shape, rate)
        n_auxiliary = config.n_auxiliary
        cluster_draws = math.sqrt(config.prior_variance) * jax.random.normal(
            key_cluster_supply, (n_auxiliary + n_cluster_supply, n_features), dtype
        )
        type_draws = jnp.exp(
            sample_log_gamma(key_type_supply, shape, (n_auxiliary + n_type_supply, n_features)) - jnp.log(rate)
        )
        draws = _SweepDraws(
            uniforms=uniforms,
            positions=jax.random.randint(key_positions, (2, n_points), 0, n_auxiliary, jnp.int32),
            cluster_supply=cluster_draws[n_auxiliary:],
            type_supply=type_draws[n_auxiliary:],
            cluster_pool=cluster_draws[:n_auxiliary],
            type_pool=type_draws[:n_auxiliary],
        )
    else:
        point_precisions = carry.precisions[carry.types]
        means = _sample_means(
            key_means, features, carry.clusters, point_precisions, n_cluster_slots, config.prior_variance
        )
        residuals = features - means[carry.clusters]
        # One bulk Gamma draw serves the precision posteriors and the new-type supply.
        precisions, log_gamma_unit = _sample_precisions(
            key_precisions, residuals, carry.types, carry.type_counts, shape, rate, n_type_supply
        )
        carry = carry._replace(means=means, precisions=precisions)
        draws = _SweepDraws(
            uniforms=uniforms,
            positions=jnp.zeros((2, n_points), jnp.int32),
            cluster_supply=jax.random.normal(key_cluster_supply, (n_cluster_supply, n_features), dtype),
            type_supply=log_gamma_unit,
            cluster_pool=jnp.zeros((0, n_features), dtype),
            type_pool=jnp.ones((0, n_features), dtype),
        )

    # 2. Indicators, one reference at a time: c_n for test references, d_n for all.
    sweep = _numba_sweep if config.backend == "numba" else _xla_sweep
    carry = sweep(config, carry, features, n_train, n_train_clusters, state.alpha, state.alpha_types, shape, rate,
                  draws)

    # 3. Concentrations (DM05 §4.3, App. B multi-group form).
    n_test_clusters = jnp.sum(jnp.zeros(n_cluster_slots, jnp.int32).at[carry.clusters[n_train:]].add(1) > 0)
    alpha = state.alpha
    if config.alpha_prior is not None:
        total_clusters = jnp.sum(carry.cluster_counts > 0)
        groups = jnp.asarray([n_points]) if config.share_clusters else jnp.asarray([n_train, n_test])
        alpha = escobar_west_multi_group_update(key_alpha, alpha, total_clusters, groups, config.alpha_prior)
    alpha_types = state.alpha_types
    n_types = jnp.sum(carry.type_counts > 0)
    if config.alpha_types_prior is not None:
        alpha_types = escobar_west_multi_group_update(
            key_alpha_types, alpha_types, n_types, jnp.asarray([n_points]), config.alpha_types_prior
        )
    log_joint = _log_joint(config, carry, features, n_train, alpha, alpha_types, shape, rate, n_train_clusters)
    new_state = SupervisedState(
        carry.clusters, carry.cluster_counts, carry.means, carry.types, carry.type_counts, carry.precisions,
        alpha, alpha_types, shape, rate, carry.overflow,
    )
    info = SupervisedInfo(
        n_clusters=n_test_clusters.astype(jnp.int32),
        n_types=n_types.astype(jnp.int32),
        log_joint=log_joint,
        alpha=alpha,
        alpha_types=alpha_types,
        overflow=carry.overflow,
        split_merge_accepted=n_accepted,
    )
    return new_state, info


def build_kernel(
    model: int = 1,
    *,
    share_clusters: bool = False,
    prior_variance: float = 1.0,
    precision_shape: float = 1.0,
    precision_rate: float = 1.0,
    alpha_prior: GammaPrior | None = None,
    alpha_types_prior: GammaPrior | None = None,
    n_auxiliary: int = 8,
    n_split_merge: int = 10,
    n_precision_steps: int = 8,
    backend: str = "auto",
):
    """Build the Gibbs step of SCDP-1, -2 or -3.

    Parameters
    ----------
    model : {1, 2, 3}
        SCDP variant (see the module docstring).
    share_clusters : bool
        Whether test references may join training publications (DM05 §4.1).
    prior_variance : float
        σ² of G0^p = Normal(0, σ² I).
    precision_shape, precision_rate : float
        Gamma(a, rate b) of G0^t (the starting prior for SCDP-2).
    alpha_prior, alpha_types_prior : GammaPrior, optional
        Priors of α^p and α^t; None keeps the concentration fixed.
    n_auxiliary : int
        M, auxiliary draws of Algorithm 8 (SCDP-3; DM05 use 8).
    n_split_merge : int
        Split–merge Metropolis–Hastings moves of the test partition per sweep (Dahl 2003; Jain &
        Neal 2004), with the publication means integrated given the reference types (for
        SCDP-3 conditionally on the other means, eq. 3): they split or merge whole test
        publications, which one-reference Gibbs updates almost never do in many dimensions
        (a chain started with every test reference in one publication stays there). 0 turns
        them off.
    n_precision_steps : int
        SCDP-3: Metropolis steps on the log precisions per sweep (their conditional is not a
        Gamma, see :func:`_metropolis_precisions_conditioned`).
    backend : {"auto", "xla", "numba"}
        Where the assignment sweep runs: "xla" as ``lax.scan`` loops (any device); "numba" as a
        compiled host loop called through ``jax.pure_callback`` (CPU, much faster there); "auto"
        picks numba on the CPU backend when numba is installed. Both use the same random numbers
        and give the same chain.

    Returns
    -------
    callable
        ``step(rng_key, state, data) -> (SupervisedState, SupervisedInfo)``; jit it or pass it
        to :func:`inference.chains.sample_chains`.
    """
    if model not in MODELS or isinstance(model, bool):
        raise ValueError(f"model: must be one of 1, 2, 3, got {model!r}")
    if not isinstance(share_clusters, (bool, np.bool_)):
        raise TypeError(f"share_clusters: expected a bool, got {type(share_clusters).__name__}")
    for name, prior in (("alpha_prior", alpha_prior), ("alpha_types_prior", alpha_types_prior)):
        if prior is not None and not isinstance(prior, GammaPrior):
            raise TypeError(f"{name}: expected a GammaPrior or None, got {type(prior).__name__}")
    config = _Config(
        model=int(model),
        share_clusters=bool(share_clusters),
        prior_variance=check_real("prior_variance", prior_variance, low=0.0, low_open=True),
        precision_shape=check_real("precision_shape", precision_shape, low=0.0, low_open=True),
        precision_rate=check_real("precision_rate", precision_rate, low=0.0, low_open=True),
        alpha_prior=alpha_prior,
        alpha_types_prior=alpha_types_prior,
        n_auxiliary=check_int("n_auxiliary", n_auxiliary, minimum=1),
        n_split_merge=check_int("n_split_merge", n_split_merge, minimum=0),
        n_precision_steps=check_int("n_precision_steps", n_precision_steps, minimum=1),
        backend=resolve_backend(backend),
    )
    return partial(_step, config)


def _check_problem(
    train_features: Any, train_labels: Any, test_features: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    train = as_float_array("train_features", train_features, ndim=2)
    test = as_float_array("test_features", test_features, ndim=2)
    if train.shape[1] != test.shape[1]:
        raise ValueError(
            f"test_features: expected {train.shape[1]} features like train_features, got {test.shape[1]}"
        )
    labels = np.asarray(train_labels)
    if labels.ndim != 1 or labels.shape[0] != train.shape[0]:
        raise ValueError(
            f"train_labels: expected one label per training point ({train.shape[0]}), got shape {labels.shape}"
        )
    _, codes = np.unique(labels, return_inverse=True)
    return train, codes.astype(np.int64), test


def init(
    rng_key: jax.Array,
    train_features: Any,
    train_labels: Any,
    test_features: Any,
    *,
    max_test_clusters: int = 64,
    max_types: int = 16,
    alpha: float = 1.0,
    alpha_types: float = 1.0,
    precision_shape: float = 1.0,
    precision_rate: float = 1.0,
    test_clusters: Any = None,
) -> SupervisedState:
    """Initial state: training publications from the labels, test references in
    ``min(max_test_clusters, M)`` random publications (or ``test_clusters``), one reference
    type with unit precisions, means at the cluster averages.

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key for the random test partition.
    train_features : array_like (N, D)
    train_labels : array_like (N,)
        Any hashable labels; recoded to 0..K_train - 1 in sorted order.
    test_features : array_like (M, D)
    max_test_clusters : int
        Publication slots for the test references (capacity beyond the K_train training slots).
    max_types : int
        Reference-type slots L_max.
    alpha, alpha_types : float
        Initial concentrations.
    precision_shape, precision_rate : float
        Gamma prior of the precisions (a, rate b).
    test_clusters : array_like of int (M,), optional
        Initial test partition (labels < max_test_clusters).

    Returns
    -------
    SupervisedState
    """
    train, labels, test = _check_problem(train_features, train_labels, test_features)
    max_test_clusters = check_int("max_test_clusters", max_test_clusters, minimum=1)
    max_types = check_int("max_types", max_types, minimum=1)
    alpha = check_real("alpha", alpha, low=0.0, low_open=True)
    alpha_types = check_real("alpha_types", alpha_types, low=0.0, low_open=True)
    n_train_clusters = int(labels.max()) + 1
    n_test, n_features = test.shape
    if test_clusters is None:
        test_labels = np.asarray(jax.random.randint(rng_key, (n_test,), 0, min(max_test_clusters, n_test)))
    else:
        test_labels = as_index_array("test_clusters", test_clusters, upper=max_test_clusters)
        if test_labels.shape[0] != n_test:
            raise ValueError(f"test_clusters: expected {n_test} labels, got {test_labels.shape[0]}")
    clusters = np.concatenate([labels, n_train_clusters + test_labels]).astype(np.int32)
    n_slots = n_train_clusters + max_test_clusters
    features = np.concatenate([train, test])
    counts = np.bincount(clusters, minlength=n_slots)
    sums = np.zeros((n_slots, n_features))
    np.add.at(sums, clusters, features)
    means = sums / np.maximum(counts, 1)[:, None]
    dtype = jnp.result_type(float)
    n_points = features.shape[0]
    type_counts = np.zeros(max_types, np.int32)
    type_counts[0] = n_points
    return SupervisedState(
        clusters=jnp.asarray(clusters, jnp.int32),
        cluster_counts=jnp.asarray(counts, jnp.int32),
        means=jnp.asarray(means, dtype),
        types=jnp.zeros(n_points, jnp.int32),
        type_counts=jnp.asarray(type_counts),
        precisions=jnp.ones((max_types, n_features), dtype),
        alpha=jnp.asarray(alpha, dtype),
        alpha_types=jnp.asarray(alpha_types, dtype),
        precision_shape=jnp.full((n_features,), precision_shape, dtype),
        precision_rate=jnp.full((n_features,), precision_rate, dtype),
        overflow=jnp.zeros((), jnp.int32),
    )


@lru_cache(maxsize=None)
def record_supervised(n_train: int):
    """Recorder for :func:`inference.chains.sample_chains`: test partition and diagnostics.

    The same object is returned for the same ``n_train``, so repeated fits reuse the compiled
    sampler (the recorder is a static argument of the jitted driver).
    """
    return partial(_record, n_train)


def _record(n_train: int, state: SupervisedState, info: SupervisedInfo) -> dict[str, jax.Array]:
    return {
        "assignments": state.clusters[n_train:],
        "alpha": info.alpha,
        "alpha_types": info.alpha_types,
        "n_clusters": info.n_clusters,
        "n_types": info.n_types,
        "log_joint": info.log_joint,
        "split_merge_accepted": info.split_merge_accepted,
    }


# ----------------------------------------------------------------------------------------------
# Distances instead of coordinates (DM05 §7.2, footnote 5)
# ----------------------------------------------------------------------------------------------
def _check_distances(name: str, value: Any) -> np.ndarray:
    array = as_float_array(name, value, ndim=(2, 3))
    if array.ndim == 2:
        array = array[None]
    if array.shape[1] != array.shape[2]:
        raise ValueError(f"{name}: each distance matrix must be square, got shape {array.shape[1:]}")
    if (array < 0).any():
        raise ValueError(f"{name}: distances must be >= 0, got minimum {array.min()}")
    if not np.allclose(array, np.swapaxes(array, 1, 2), rtol=1e-10, atol=1e-10):
        raise ValueError(f"{name}: distance matrices must be symmetric")
    if np.abs(np.diagonal(array, axis1=1, axis2=2)).max() > 1e-10:
        raise ValueError(f"{name}: distance matrices must have a zero diagonal")
    return array


def embed_distances(distances: Any, *, max_dims_per_feature: int = 1) -> np.ndarray:
    """Coordinates computed from pairwise distances only, one block per distance feature.

    For each feature f with distances D_f (N × N), the inner products of the centred points
    follow from the distances alone, G = -½ J D_f² J with J = I - 11ᵀ/N (the identity behind
    DM05 footnote 5: ||mean(A) - mean(B)||² is a combination of pairwise distances). The leading
    ``max_dims_per_feature`` eigenvectors of G with positive eigenvalues, scaled by √λ, are the
    coordinates. When D_f holds the distances |x_if - x_jf| of a centred feature this returns x_f
    up to sign, which leaves the SCDP posterior unchanged (G0^p and the precisions are symmetric
    under x_f → -x_f), so coordinates and distances give the same partition posterior.

    Parameters
    ----------
    distances : array_like (F, N, N) or (N, N)
        Non-negative, symmetric distance matrices with zero diagonals (e.g. string edit distances
        between records, one matrix per field).
    max_dims_per_feature : int
        Coordinates kept per distance feature (1 for a scalar feature).

    Returns
    -------
    np.ndarray (N, F * max_dims_per_feature)
        Coordinates; a non-Euclidean distance (negative eigenvalues) keeps only its positive part.

    Raises
    ------
    ValueError
        If a matrix is not square, has a negative entry, is not symmetric or has a non-zero
        diagonal (the message names ``distances``).
    """
    array = _check_distances("distances", distances)
    max_dims = check_int("max_dims_per_feature", max_dims_per_feature, minimum=1)
    n_points = array.shape[1]
    centring = np.eye(n_points) - 1.0 / n_points
    blocks = []
    for matrix in array:
        gram = -0.5 * centring @ (matrix * matrix) @ centring
        eigenvalues, eigenvectors = np.linalg.eigh(gram)
        order = np.argsort(eigenvalues)[::-1][:max_dims]
        values = np.clip(eigenvalues[order], 0.0, None)
        blocks.append(eigenvectors[:, order] * np.sqrt(values))
    return np.concatenate(blocks, axis=1)


# ----------------------------------------------------------------------------------------------
# The fitted model
# ----------------------------------------------------------------------------------------------
class SupervisedDPFit:
    """Draws of the test partition from a fitted :class:`SupervisedDP`.

    Attributes
    ----------
    result : ChainResult
        Raw draws (chain, draw, ...) and final states.
    idata : arviz.InferenceData
        ``posterior``: ``assignments`` (chain, draw, points), ``alpha``, ``alpha_types``;
        ``sample_stats``: ``n_clusters`` (test publications), ``n_types``, ``log_joint``.
    """

    def __init__(self, result: ChainResult):
        self.result = result
        samples = result.samples
        n_test = samples["assignments"].shape[-1]
        self.idata = az.from_dict(
            posterior={
                "assignments": samples["assignments"],
                "alpha": samples["alpha"],
                "alpha_types": samples["alpha_types"],
            },
            sample_stats={
                "n_clusters": samples["n_clusters"],
                "n_types": samples["n_types"],
                "log_joint": samples["log_joint"],
            },
            coords={"points": np.arange(n_test)},
            dims={"assignments": ["points"]},
            attrs={"n_warmup": result.n_warmup, "thin": result.thin, "completed": int(result.completed),
                   "sampling_seconds": result.seconds},
        )

    @property
    def assignments(self) -> np.ndarray:
        """Test partitions, shape (chain, draw, M)."""
        return np.asarray(self.result.samples["assignments"])

    def summary(self) -> pd.DataFrame:
        """ArviZ mean, sd, ESS and R-hat of the label-invariant quantities that vary."""
        view = xr.Dataset(
            {name: self.idata.sample_stats[name] for name in ("n_clusters", "n_types", "log_joint")}
            | {name: self.idata.posterior[name] for name in ("alpha", "alpha_types")}
        )
        names = [name for name in view.data_vars if np.ptp(view[name].values) > 0]
        return az.summary(az.InferenceData(posterior=view), var_names=names)

    def co_clustering(self) -> xr.DataArray:
        """Posterior co-clustering matrix of the test references."""
        return diagnostics.co_clustering_matrix(self.idata)

    def point_estimate(self, loss: str = "vi") -> np.ndarray:
        """Test partition minimising the posterior expected ``loss`` ("vi" or "binder")."""
        loss = check_choice("loss", loss, ("vi", "binder"))
        return point_partition(self.assignments, loss=loss)

    def scores(self, labels: Any, loss: str = "vi") -> dict[str, float]:
        """DM05 §6 metrics of the point estimate against gold test labels (M,)."""
        labels = np.asarray(labels)
        n_test = self.assignments.shape[-1]
        if labels.ndim != 1 or labels.shape[0] != n_test:
            raise ValueError(f"labels: expected {n_test} labels (one per test point), got shape {labels.shape}")
        return clustering_scores(labels, self.point_estimate(loss))


INITS = ("dispersed", "single", "singletons", "kmeans", "random")


def _initial_states(model: SupervisedDP, starts: Any, n_chains: int, train: np.ndarray, labels: np.ndarray,
                    test: np.ndarray, rng_key: jax.Array) -> SupervisedState:
    """Batched starting states of :meth:`SupervisedDP.fit` (chains first)."""
    test_labels = _initial_test_partitions(starts, n_chains, test, rng_key)
    capacity = max(min(model.max_test_clusters, test.shape[0]), int(test_labels.max()) + 1)
    keys = jax.random.split(rng_key, n_chains)
    return stack_states([
        init(keys[chain], train, labels, test, max_test_clusters=capacity, max_types=model.max_types,
             alpha=model.alpha, alpha_types=model.alpha_types, precision_shape=model.precision_shape,
             precision_rate=model.precision_rate, test_clusters=test_labels[chain])
        for chain in range(n_chains)
    ])


def _initial_test_partitions(init: Any, n_chains: int, test: np.ndarray, rng_key: jax.Array) -> np.ndarray:
    """Starting test labels of every chain, shape (n_chains, M) (see :meth:`SupervisedDP.fit`)."""
    n_test = test.shape[0]
    if not isinstance(init, str):
        starts = np.asarray(init)
        if starts.ndim == 1:
            starts = np.broadcast_to(starts, (n_chains,) + starts.shape)
        if starts.shape != (n_chains, n_test):
            raise ValueError(f"init: expected one of {INITS} or labels of shape ({n_test},) or "
                             f"({n_chains}, {n_test}), got shape {starts.shape}")
        return np.stack([np.unique(as_index_array("init", row), return_inverse=True)[1] for row in starts])
    init = check_choice("init", init, INITS)
    kinds = [("single", "kmeans", "random")[chain % 3] if init == "dispersed" else init for chain in range(n_chains)]
    seed = int(jax.random.randint(jax.random.fold_in(rng_key, 1), (), 0, np.iinfo(np.int32).max))
    rng = np.random.default_rng(seed)
    starts = []
    for kind in kinds:
        if kind == "single":
            starts.append(np.zeros(n_test, np.int64))
        elif kind == "singletons":
            starts.append(np.arange(n_test))
        elif kind == "random":
            starts.append(rng.integers(0, min(n_test, 8), n_test))
        else:
            from sklearn.cluster import KMeans

            kmeans = KMeans(n_clusters=min(n_test, 16), n_init=1, random_state=int(rng.integers(2**31)))
            starts.append(kmeans.fit_predict(test))
    return np.stack([np.unique(row, return_inverse=True)[1] for row in starts])


class SupervisedDP:
    """Supervised clustering with the Dirichlet process: SCDP-1, -2 or -3 (DM05).

    Parameters
    ----------
    model : {1, 2, 3}
        SCDP-1 (conjugate), SCDP-2 (prior of precisions from the spread of the means) or SCDP-3
        (precisions conditioned on the means, Algorithm 8).
    share_clusters : bool
        Whether test references may belong to training publications (DM05 §4.1).
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
    n_split_merge, n_precision_steps : int
        Split–merge moves of the test partition per sweep, and SCDP-3's Metropolis steps on the
        precisions (see :func:`build_kernel`).
    backend : {"auto", "xla", "numba"}
        Where the assignment sweeps run (see :func:`build_kernel`).

    Examples
    --------
    >>> import jax, numpy as np
    >>> rng = np.random.default_rng(0)
    >>> train = np.concatenate([rng.normal(-2, 0.3, (5, 2)), rng.normal(2, 0.3, (5, 2))])
    >>> test = np.concatenate([rng.normal(-2, 0.3, (3, 2)), rng.normal(2, 0.3, (3, 2))])
    >>> fit = SupervisedDP().fit(train, [0] * 5 + [1] * 5, test, key=jax.random.key(0),
    ...                          n_chains=2, n_sweeps=40, progress=False)
    >>> fit.assignments.shape
    (2, 20, 6)
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
        n_split_merge: int = 10,
        n_precision_steps: int = 8,
        backend: str = "auto",
    ):
        self.step = build_kernel(
            model,
            share_clusters=share_clusters,
            prior_variance=prior_variance,
            precision_shape=precision_shape,
            precision_rate=precision_rate,
            alpha_prior=alpha_prior,
            alpha_types_prior=alpha_types_prior,
            n_auxiliary=n_auxiliary,
            n_split_merge=n_split_merge,
            n_precision_steps=n_precision_steps,
            backend=backend,
        )
        self.model = int(model)
        self.share_clusters = bool(share_clusters)
        self.alpha = check_real("alpha", alpha, low=0.0, low_open=True)
        self.alpha_types = check_real("alpha_types", alpha_types, low=0.0, low_open=True)
        self.precision_shape = float(precision_shape)
        self.precision_rate = float(precision_rate)
        self.max_test_clusters = check_int("max_test_clusters", max_test_clusters, minimum=1)
        self.max_types = check_int("max_types", max_types, minimum=1)

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
        labels = np.asarray(train_labels)
        n_points = array.shape[1]
        if labels.ndim != 1 or not 1 <= labels.shape[0] < n_points:
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
        *,
        key: jax.Array,
        n_chains: int = 4,
        n_sweeps: int = 1000,
        n_warmup: int | None = None,
        thin: int = 1,
        draws_per_call: int = 10,
        time_budget: float | None = None,
        progress: bool = True,
        init: Any = "dispersed",
    ) -> SupervisedDPFit:
        """Sample the posterior of the test partition with ``n_chains`` vmapped chains.

        Parameters
        ----------
        train_features : array_like (N, D)
            Training references (centre and scale them, DM05 §5).
        train_labels : array_like (N,)
            Their publications (any labels).
        test_features : array_like (M, D)
            Test references.
        key : jax.Array
            PRNG key; the same key gives identical chains.
        n_chains : int
            Chains run in parallel.
        n_sweeps : int
            Sweeps per chain, warm-up included.
        n_warmup : int, optional
            Warm-up sweeps (default half of ``n_sweeps``).
        thin, draws_per_call, time_budget, progress
            See :func:`inference.chains.sample_chains`.
        init : str or array_like of int
            Starting test partitions: ``"dispersed"`` (default: chain c starts from the c-th of
            one publication, K-means with min(M, 16) clusters, and random labels among
            min(M, 8), in turn, so that R-hat compares chains started far apart), ``"single"``,
            ``"singletons"`` (one publication per test reference), ``"kmeans"``, ``"random"``, or
            labels of shape (M,) or (n_chains, M).

        Returns
        -------
        SupervisedDPFit
        """
        train, labels, test = _check_problem(train_features, train_labels, test_features)
        if not isinstance(key, jax.Array):
            raise TypeError(f"key: expected a jax PRNG key, got {type(key).__name__}")
        n_chains = check_int("n_chains", n_chains, minimum=1)
        n_sweeps = check_int("n_sweeps", n_sweeps, minimum=2)
        if n_warmup is None:
            n_warmup = n_sweeps // 2
        n_warmup = check_int("n_warmup", n_warmup, minimum=0, maximum=n_sweeps - 1)
        thin = check_int("thin", thin, minimum=1)
        n_draws = max((n_sweeps - n_warmup) // thin, 1)
        dtype = jnp.result_type(float)
        data = SupervisedData(jnp.asarray(np.concatenate([train, test]), dtype), jnp.asarray(labels, jnp.int32))
        key_init, key_chains = jax.random.split(key)
        states = _initial_states(self, init, n_chains, train, labels, test, key_init)
        # A call whose sweeps run out of publication or type slots is re-run from its starting
        # states with that capacity doubled (SupervisedState.grow_after_overflow): only the
        # capacity that ran out grows, and the sweeps before that call are kept.
        result = sample_chains(
            key_chains, self.step, states, data,
            n_warmup=n_warmup, n_draws=n_draws, thin=thin, draws_per_call=draws_per_call,
            time_budget=time_budget, progress=progress, record=record_supervised(train.shape[0]),
            on_overflow="grow",
        )
        return SupervisedDPFit(result)
