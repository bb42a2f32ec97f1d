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
  publications ordered by size), a non-conjugate model: indicator updates by Neal's Algorithm 8
  with M = 8 auxiliary draws from the base measures and parameters refreshed by an independence
  sampler with base-measure proposals (DM05 §4.2).

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
    overflow : bool scalar
        Sticky: a sweep needed more slots than the capacity (the chain must be re-run larger).
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
    overflow : bool
        Whether this sweep ran out of capacity.
    """

    n_clusters: jax.Array
    n_types: jax.Array
    log_joint: jax.Array
    alpha: jax.Array
    alpha_types: jax.Array
    overflow: jax.Array


class _Config(NamedTuple):
    model: int
    share_clusters: bool
    prior_variance: float
    precision_shape: float
    precision_rate: float
    alpha_prior: GammaPrior | None
    alpha_types_prior: GammaPrior | None
    n_auxiliary: int
    n_proposals: int


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


def _draw(logits: jax.Array, uniform: jax.Array) -> jax.Array:
    """Inverse-CDF draw of a categorical index from unnormalised log weights and one uniform."""
    weights = jnp.exp(logits - jnp.max(logits))
    cumulative = jnp.cumsum(weights)
    return jnp.minimum(jnp.sum(cumulative < uniform * cumulative[-1]), logits.shape[0] - 1).astype(jnp.int32)


def _first_free(counts: jax.Array) -> tuple[jax.Array, jax.Array]:
    free = counts == 0
    return jnp.argmax(free).astype(jnp.int32), jnp.any(free)


# ----------------------------------------------------------------------------------------------
# Parameter updates
# ----------------------------------------------------------------------------------------------
def _sample_means(rng_key, features, clusters, point_precisions, n_slots, prior_variance):
    """p_k | rest ~ Normal, precision 1/σ² + Σ_{n∈k} t_{d_n} (DM05 Fig. 2, first line)."""
    posterior_precision = 1.0 / prior_variance + jax.ops.segment_sum(point_precisions, clusters, n_slots)
    weighted = jax.ops.segment_sum(point_precisions * features, clusters, n_slots)
    noise = jax.random.normal(rng_key, posterior_precision.shape, features.dtype)
    return weighted / posterior_precision + noise / jnp.sqrt(posterior_precision)


def _sample_precisions(rng_key, residuals, types, n_slots, shape, rate, n_points):
    """t_l | rest ~ Gamma(a + n_l / 2, b + ½ Σ_{n∈l} (r_n - p_{c_n})²) (DM05 Fig. 2, second line).

    Also returns ``n_points`` rows of log Gamma(a + ½, 1) draws for the new-type proposals of the
    sweep (one rejection sampler compiled instead of two).
    """
    counts = jax.ops.segment_sum(jnp.ones(types.shape, residuals.dtype), types, n_slots)
    squares = jax.ops.segment_sum(residuals * residuals, types, n_slots)
    posterior_shape = shape + 0.5 * counts[:, None]
    posterior_rate = rate + 0.5 * squares
    all_shapes = jnp.concatenate([posterior_shape, jnp.broadcast_to(shape + 0.5, (n_points, shape.shape[-1]))])
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
    and λ = 1 (so log λ = 0): -t · S for the pair spread S of :func:`_pair_spread`."""
    return -jnp.sum(precision * spread, axis=-1)


# ----------------------------------------------------------------------------------------------
# Indicator updates (conjugate, DM05 Fig. 2, eq. 2)
# ----------------------------------------------------------------------------------------------
class _Carry(NamedTuple):
    clusters: jax.Array
    cluster_counts: jax.Array
    means: jax.Array
    types: jax.Array
    type_counts: jax.Array
    precisions: jax.Array
    overflow: jax.Array


def _cluster_move_conjugate(config, carry, index, x, uniform, normal, alpha, n_train_clusters):
    """Algorithm 2 for c_n (DM05 eq. 2): join k ∝ n_{-n,k} F(r_n | p_k, t_{d_n}), new
    ∝ α^p ∫ G0^p(p) F(r_n | p, t_{d_n}) dp; a new publication's mean is drawn from its posterior."""
    old = carry.clusters[index]
    counts = carry.cluster_counts.at[old].add(-1)
    precision = carry.precisions[carry.types[index]]
    slots = jnp.arange(counts.shape[0])
    allowed = (counts > 0) & (config.share_clusters | (slots >= n_train_clusters))
    log_existing = jnp.where(
        allowed, jnp.log(jnp.maximum(counts, 1)) + _log_normal_diag(x, carry.means, precision), -jnp.inf
    )
    marginal_variance = config.prior_variance + 1.0 / precision
    log_new = jnp.log(alpha) + _log_normal_diag(x, 0.0, 1.0 / marginal_variance)
    choice = _draw(jnp.concatenate([log_existing, log_new[None]]), uniform)
    free_slot, has_free = _first_free(counts)
    wants_new = choice == counts.shape[0]
    overflow = carry.overflow | (wants_new & ~has_free)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    posterior_precision = 1.0 / config.prior_variance + precision
    fresh_mean = precision * x / posterior_precision + normal / jnp.sqrt(posterior_precision)
    opened = wants_new & has_free
    means = carry.means.at[new].set(jnp.where(opened, fresh_mean, carry.means[new]))
    return carry._replace(
        clusters=carry.clusters.at[index].set(new),
        cluster_counts=counts.at[new].add(1),
        means=means,
        overflow=overflow,
    )


def _type_move_conjugate(config, carry, index, x, uniform, log_gamma_unit, alpha_types, shape, rate):
    """Algorithm 2 for d_n (DM05 Fig. 2): join l ∝ m_{-n,l} F(r_n | p_{c_n}, t_l), new
    ∝ α^t ∫ G0^t(t) F(r_n | p_{c_n}, t) dt (Student-t); a new type's precision is drawn from its
    posterior Gamma(a + ½, b + ½ (r_n - p_{c_n})²)."""
    old = carry.types[index]
    counts = carry.type_counts.at[old].add(-1)
    residual = x - carry.means[carry.clusters[index]]
    log_existing = jnp.where(
        counts > 0,
        jnp.log(jnp.maximum(counts, 1)) + _log_normal_diag(residual, 0.0, carry.precisions),
        -jnp.inf,
    )
    log_new = jnp.log(alpha_types) + _log_student_marginal(residual, shape, rate)
    choice = _draw(jnp.concatenate([log_existing, log_new[None]]), uniform)
    free_slot, has_free = _first_free(counts)
    wants_new = choice == counts.shape[0]
    overflow = carry.overflow | (wants_new & ~has_free)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    fresh = jnp.exp(log_gamma_unit - jnp.log(rate + 0.5 * residual * residual))
    opened = wants_new & has_free
    precisions = carry.precisions.at[new].set(jnp.where(opened, fresh, carry.precisions[new]))
    return carry._replace(
        types=carry.types.at[index].set(new),
        type_counts=counts.at[new].add(1),
        precisions=precisions,
        overflow=overflow,
    )


# ----------------------------------------------------------------------------------------------
# Indicator updates (non-conjugate SCDP-3, Neal's Algorithm 8, DM05 §4.2)
# ----------------------------------------------------------------------------------------------
def _cluster_move_auxiliary(config, carry, index, x, uniform, auxiliary_means, alpha, n_train_clusters):
    """Algorithm 8 for c_n: existing publications ∝ n_{-n,k} F, M auxiliary means from G0^p
    ∝ (α^p / M) F; when n was alone its own mean is the first auxiliary (M̃ = M + 1 in DM05 §4.2)."""
    old = carry.clusters[index]
    counts = carry.cluster_counts.at[old].add(-1)
    was_alone = counts[old] == 0
    precision = carry.precisions[carry.types[index]]
    auxiliary_means = auxiliary_means.at[0].set(jnp.where(was_alone, carry.means[old], auxiliary_means[0]))
    slots = jnp.arange(counts.shape[0])
    allowed = (counts > 0) & (config.share_clusters | (slots >= n_train_clusters))
    log_existing = jnp.where(
        allowed, jnp.log(jnp.maximum(counts, 1)) + _log_normal_diag(x, carry.means, precision), -jnp.inf
    )
    n_auxiliary = auxiliary_means.shape[0]
    log_auxiliary = jnp.log(alpha / n_auxiliary) + _log_normal_diag(x, auxiliary_means, precision)
    choice = _draw(jnp.concatenate([log_existing, log_auxiliary]), uniform)
    free_slot, has_free = _first_free(counts)
    n_slots = counts.shape[0]
    wants_new = choice >= n_slots
    overflow = carry.overflow | (wants_new & ~has_free)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    opened = wants_new & has_free
    picked = auxiliary_means[jnp.clip(choice - n_slots, 0, n_auxiliary - 1)]
    means = carry.means.at[new].set(jnp.where(opened, picked, carry.means[new]))
    return carry._replace(
        clusters=carry.clusters.at[index].set(new), cluster_counts=counts.at[new].add(1), means=means, overflow=overflow
    )


def _type_move_auxiliary(config, carry, index, x, uniform, auxiliary_precisions, alpha_types, shape, rate):
    """Algorithm 8 for d_n with M auxiliary precisions; the SCDP-3 conditioning of each candidate
    precision on the means (DM05 eq. 3) multiplies its weight, so the auxiliary draws from G0^t
    are weighted by their unnormalised posterior (DM05 §5.2, last paragraph)."""
    old = carry.types[index]
    counts = carry.type_counts.at[old].add(-1)
    was_alone = counts[old] == 0
    residual = x - carry.means[carry.clusters[index]]
    auxiliary_precisions = auxiliary_precisions.at[0].set(
        jnp.where(was_alone, carry.precisions[old], auxiliary_precisions[0])
    )
    log_existing = jnp.where(
        counts > 0,
        jnp.log(jnp.maximum(counts, 1)) + _log_normal_diag(residual, 0.0, carry.precisions),
        -jnp.inf,
    )
    n_auxiliary = auxiliary_precisions.shape[0]
    conditioning = _log_conditioning(auxiliary_precisions, _pair_spread(carry.means, carry.cluster_counts))
    log_auxiliary = (
        jnp.log(alpha_types / n_auxiliary) + _log_normal_diag(residual, 0.0, auxiliary_precisions) + conditioning
    )
    choice = _draw(jnp.concatenate([log_existing, log_auxiliary]), uniform)
    free_slot, has_free = _first_free(counts)
    n_slots = counts.shape[0]
    wants_new = choice >= n_slots
    overflow = carry.overflow | (wants_new & ~has_free)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    opened = wants_new & has_free
    picked = auxiliary_precisions[jnp.clip(choice - n_slots, 0, n_auxiliary - 1)]
    precisions = carry.precisions.at[new].set(jnp.where(opened, picked, carry.precisions[new]))
    return carry._replace(
        types=carry.types.at[index].set(new),
        type_counts=counts.at[new].add(1),
        precisions=precisions,
        overflow=overflow,
    )


def _independence_refresh_means(config, rng_key, carry, features):
    """SCDP-3 means: independence Metropolis–Hastings with G0^p proposals (DM05 §4.2), one
    proposal per publication per round, target G0^p(p_k) Π_{n∈k} F(r_n | p_k, t_{d_n}) × the
    conditioning term of eq. 3."""
    n_slots, n_features = carry.means.shape
    point_precisions = carry.precisions[carry.types]

    def log_target(means):
        log_lik = jax.ops.segment_sum(
            _log_normal_diag(features, means[carry.clusters], point_precisions), carry.clusters, n_slots
        )
        return log_lik

    precision_total = jnp.sum(jnp.where((carry.type_counts > 0)[:, None], carry.precisions, 0.0), axis=0)

    def conditioning_of(means):
        return _log_conditioning(precision_total, _pair_spread(means, carry.cluster_counts))

    def one_round(means, round_key):
        key_proposal, key_accept = jax.random.split(round_key)
        proposal = math.sqrt(config.prior_variance) * jax.random.normal(key_proposal, means.shape, means.dtype)
        current_lik, proposal_lik = log_target(means), log_target(proposal)
        log_uniform = jnp.log(jax.random.uniform(key_accept, (n_slots,), means.dtype, minval=1e-30))

        def visit(means, slot):
            candidate = means.at[slot].set(proposal[slot])
            # Likelihood terms are per publication; the conditioning term couples them.
            log_ratio = proposal_lik[slot] - current_lik[slot] + conditioning_of(candidate) - conditioning_of(means)
            accept = (carry.cluster_counts[slot] > 0) & (log_uniform[slot] < log_ratio)
            return jnp.where(accept, candidate, means), None

        means, _ = jax.lax.scan(visit, means, jnp.arange(n_slots))
        return means, None

    means, _ = jax.lax.scan(one_round, carry.means, jax.random.split(rng_key, config.n_proposals))
    return carry._replace(means=means)


def _independence_refresh_precisions(config, rng_key, carry, features, shape, rate):
    """SCDP-3 precisions: independence Metropolis–Hastings with G0^t proposals (DM05 §4.2) on
    G0^t(t_l) Π_{n∈l} F(r_n | p_{c_n}, t_l) × Π_j Π_{k<j} p(p_j | p_k, t_l) (DM05 eq. 3)."""
    n_slots, n_features = carry.precisions.shape
    residuals = features - carry.means[carry.clusters]
    spread = _pair_spread(carry.means, carry.cluster_counts)

    def log_target(precisions):
        log_lik = jax.ops.segment_sum(_log_normal_diag(residuals, 0.0, precisions[carry.types]), carry.types, n_slots)
        return log_lik + _log_conditioning(precisions, spread)

    def one_round(precisions, round_key):
        key_proposal, key_accept = jax.random.split(round_key)
        proposal = jnp.exp(sample_log_gamma(key_proposal, shape, (n_slots, n_features)) - jnp.log(rate))
        log_ratio = log_target(proposal) - log_target(precisions)
        log_uniform = jnp.log(jax.random.uniform(key_accept, (n_slots,), precisions.dtype, minval=1e-30))
        accept = (carry.type_counts > 0) & (log_uniform < log_ratio)
        return jnp.where(accept[:, None], proposal, precisions), None

    precisions, _ = jax.lax.scan(one_round, carry.precisions, jax.random.split(rng_key, config.n_proposals))
    return carry._replace(precisions=precisions)


# ----------------------------------------------------------------------------------------------
# Log joint
# ----------------------------------------------------------------------------------------------
def _log_joint(config, carry, features, n_train, alpha, alpha_types, shape, rate, n_train_clusters):
    n_points = features.shape[0]
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
    log_lik = jnp.sum(_log_normal_diag(features, carry.means[carry.clusters], carry.precisions[carry.types]))
    active_clusters = carry.cluster_counts > 0
    active_types = carry.type_counts > 0
    log_means = jnp.sum(
        jnp.where(active_clusters, _log_normal_diag(carry.means, 0.0, 1.0 / config.prior_variance), 0.0)
    )
    log_precisions = jnp.sum(jnp.where(active_types, _log_gamma_density(carry.precisions, shape, rate), 0.0))
    if config.model == 3:
        per_type = _log_conditioning(carry.precisions, _pair_spread(carry.means, carry.cluster_counts))
        log_precisions = log_precisions + jnp.sum(jnp.where(active_types, per_type, 0.0))
    return log_clusters + log_types + log_lik + log_means + log_precisions


# ----------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------
def _step(config: _Config, rng_key: jax.Array, state: SupervisedState, data: SupervisedData):
    features = data.features
    dtype = features.dtype
    n_train = data.n_train
    n_points, n_features = features.shape
    n_test = n_points - n_train
    n_train_clusters = jnp.max(data.train_labels) + 1
    (key_means, key_precisions, key_uniform, key_normal, key_aux_means, key_aux_precisions,
     key_alpha, key_alpha_types) = jax.random.split(rng_key, 8)

    carry = _Carry(
        state.clusters, state.cluster_counts, state.means, state.types, state.type_counts, state.precisions,
        state.overflow,
    )
    shape, rate = state.precision_shape, state.precision_rate
    if config.model == 2:
        shape, rate = _separation_prior(
            carry.means, carry.cluster_counts, jnp.full((n_features,), config.precision_shape, dtype),
            jnp.full((n_features,), config.precision_rate, dtype),
        )
    n_clusters_slots, n_type_slots = carry.means.shape[0], carry.precisions.shape[0]

    # 1. Parameters given the indicators (DM05 Fig. 2 first two lines; §4.2 for SCDP-3).
    if config.model == 3:
        carry = _independence_refresh_means(config, key_means, carry, features)
        carry = _independence_refresh_precisions(config, key_precisions, carry, features, shape, rate)
    else:
        means = _sample_means(
            key_means, features, carry.clusters, carry.precisions[carry.types], n_clusters_slots, config.prior_variance
        )
        residuals = features - means[carry.clusters]
        # One bulk Gamma draw serves the precision posteriors and the new-type proposals below.
        precisions, log_gamma_unit = _sample_precisions(
            key_precisions, residuals, carry.types, n_type_slots, shape, rate, n_points
        )
        carry = carry._replace(means=means, precisions=precisions)

    # 2. Indicators, one reference at a time: c_n for test references, d_n for all.
    uniforms = jax.random.uniform(key_uniform, (2, n_points), dtype)
    if config.model == 3:
        aux_means = math.sqrt(config.prior_variance) * jax.random.normal(
            key_aux_means, (n_points, config.n_auxiliary, n_features), dtype
        )
        aux_precisions = jnp.exp(
            sample_log_gamma(key_aux_precisions, shape, (n_points, config.n_auxiliary, n_features)) - jnp.log(rate)
        )
        cluster_move = partial(_cluster_move_auxiliary, config)
        type_move = partial(_type_move_auxiliary, config)
        cluster_extra, type_extra = aux_means, aux_precisions
    else:
        normals = jax.random.normal(key_normal, (n_points, n_features), dtype)
        cluster_move = partial(_cluster_move_conjugate, config)
        type_move = partial(_type_move_conjugate, config)
        cluster_extra, type_extra = normals, log_gamma_unit

    def visit_test(carry, inputs):
        index, x, uniform_cluster, uniform_type, extra_cluster, extra_type = inputs
        carry = cluster_move(carry, index, x, uniform_cluster, extra_cluster, state.alpha, n_train_clusters)
        carry = type_move(carry, index, x, uniform_type, extra_type, state.alpha_types, shape, rate)
        return carry, None

    def visit_train(carry, inputs):
        index, x, uniform_type, extra_type = inputs
        return type_move(carry, index, x, uniform_type, extra_type, state.alpha_types, shape, rate), None

    test_index = jnp.arange(n_train, n_points)
    carry, _ = jax.lax.scan(
        visit_test,
        carry,
        (test_index, features[n_train:], uniforms[0, n_train:], uniforms[1, n_train:],
         cluster_extra[n_train:], type_extra[n_train:]),
    )
    carry, _ = jax.lax.scan(
        visit_train, carry, (jnp.arange(n_train), features[:n_train], uniforms[1, :n_train], type_extra[:n_train])
    )

    # 3. Concentrations (DM05 §4.3, App. B multi-group form).
    n_test_clusters = jnp.sum(jnp.zeros(n_clusters_slots, jnp.int32).at[carry.clusters[n_train:]].add(1) > 0)
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
    n_proposals: int = 4,
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
    n_proposals : int
        Independence-sampler proposals per parameter per sweep (SCDP-3).

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
        n_proposals=check_int("n_proposals", n_proposals, minimum=1),
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
        overflow=jnp.zeros((), bool),
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
        Initial capacities; doubled and the chains re-run when exceeded.
    n_auxiliary, n_proposals : int
        Algorithm 8's M and the independence-sampler proposals (SCDP-3).

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
        max_types: int = 16,
        n_auxiliary: int = 8,
        n_proposals: int = 4,
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
            n_proposals=n_proposals,
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

        Returns
        -------
        SupervisedDPFit
        """
        train, labels, test = _check_problem(train_features, train_labels, test_features)
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
        max_test_clusters, max_types = min(self.max_test_clusters, test.shape[0]), self.max_types
        n_points = train.shape[0] + test.shape[0]
        while True:
            init_keys = jax.random.split(key_init, n_chains)
            states = stack_states(
                [
                    init(
                        init_keys[chain], train, labels, test,
                        max_test_clusters=max_test_clusters, max_types=max_types,
                        alpha=self.alpha, alpha_types=self.alpha_types,
                        precision_shape=self.precision_shape, precision_rate=self.precision_rate,
                    )
                    for chain in range(n_chains)
                ]
            )
            try:
                result = sample_chains(
                    key_chains, self.step, states, data,
                    n_warmup=n_warmup, n_draws=n_draws, thin=thin, draws_per_call=draws_per_call,
                    time_budget=time_budget, progress=progress, record=record_supervised(train.shape[0]),
                )
                return SupervisedDPFit(result)
            except CapacityError:
                if max_test_clusters >= test.shape[0] and max_types >= n_points:
                    raise
                max_test_clusters = min(2 * max_test_clusters, test.shape[0])
                max_types = min(2 * max_types, n_points)
