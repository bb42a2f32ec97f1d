"""Predictive density of new points under a Dirichlet-process mixture.

Given a partition z of the N fitted points and the concentration α, a new point x joins cluster k
with weight n_k and a new cluster with weight α (the Chinese-restaurant process, DM05 §3; Neal
2000 eq. 3.7), so with conjugate components

    p(x | z, α, data) = [Σ_k n_k p(x | points of k) + α p(x)] / (N + α),

p(x | points of k) being the family's posterior predictive and p(x) its prior predictive. The
posterior predictive averages this over the posterior of (z, α), here over the kept draws of the
chains: p(x | data) ≈ (1/S) Σ_s p(x | z_s, α_s, data). :func:`crp_log_weights` is the summand for
one partition (the scikit-learn estimator's ``predict`` and ``score`` use it with the point
estimate); :func:`posterior_predictive_log_density` the average, by chain.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from scipy import special

from inference.jit import jit
from inference.segments import segment_sum

__all__ = ["crp_log_weights", "posterior_predictive_log_density", "leave_one_out_log_likelihood"]

#: Bytes of (draw, new point, cluster) log weights one call holds at most.
_BLOCK_BYTES = 64 * 2**20


def _partition(point_stats: Any, labels: jax.Array, n_slots: int) -> tuple[Any, jax.Array]:
    """The points' statistics summed per slot of the partition ``labels`` and the slots' sizes, over
    ``n_slots`` slots and one more, empty (its predictive is the prior predictive)."""
    stats = jax.tree_util.tree_map(lambda leaf: segment_sum(leaf, labels, num_segments=n_slots + 1), point_stats)
    return stats, jnp.bincount(labels, length=n_slots + 1)


def _as_terms(family: Any, stats: Any) -> Any:
    """One slot's statistics in the form ``family`` scores points against (its cache, if it has one)."""
    return stats if family.predictive_cache is None else family.predictive_cache(stats)


def _score(family: Any, terms: Any, x: jax.Array) -> jax.Array:
    """log p(x | points of one slot) from that slot's terms (:func:`_as_terms`)."""
    if family.predictive_cache is None:
        return family.log_predictive(terms, x)
    return (family.log_predictive_from_cache or family.log_predictive)(terms, x)


def _log_predictive(family: Any, terms: Any, x: jax.Array) -> jax.Array:
    """log p(x | points of each slot), shape (n_slots + 1,)."""
    return jax.vmap(lambda slot_terms: _score(family, slot_terms, x))(terms)


def _log_weights(family: Any, partition: tuple[Any, jax.Array], log_alpha: jax.Array, points: jax.Array) -> jax.Array:
    """log n_k + log p(x | points of slot k) for the slots of a :func:`_partition` but its last
    (-inf for an empty one) and log α + log p(x) for a new cluster, shape (n_points, n_slots + 1)."""
    stats, sizes = partition
    n_slots = sizes.shape[0] - 1
    terms = jax.vmap(partial(_as_terms, family))(stats)
    log_sizes = jnp.where(sizes > 0, jnp.log(jnp.maximum(sizes, 1).astype(points.dtype)), -jnp.inf)
    log_prior = jnp.where(jnp.arange(n_slots + 1) < n_slots, log_sizes, log_alpha)
    return log_prior[None, :] + jax.vmap(lambda x: _log_predictive(family, terms, x))(points)


@partial(jit, static_argnames=("family", "n_clusters"))
def crp_log_weights(family: Any, train: Any, labels: Any, points: Any, log_alpha: Any, n_clusters: int) -> Any:
    """log n_k + log p(x | points of cluster k) for the K clusters of a partition, and
    log α + log p(x) for a new cluster, shape (n_points, K + 1).

    ``labels`` are 0..K-1; normalised over the last axis these are the probabilities that each
    point joins each cluster or a new one.
    """
    return _log_weights(family, _partition(jax.vmap(family.point_stats)(train), labels, n_clusters), log_alpha, points)


@partial(jit, static_argnums=(0, 5))
def _draws_log_density(family: Any, point_stats: Any, labels: jax.Array, alphas: jax.Array, points: jax.Array,
                       n_slots: int) -> jax.Array:
    """log p(x | z_s, α_s, data) for a block of draws, shape (n_draws, n_points).

    ``labels`` (n_draws, N) are slots below ``n_slots``, not necessarily all used; slot
    ``n_slots`` stands for the new cluster.
    """
    n_fitted = labels.shape[-1]

    def one_draw(draw_labels, alpha):
        weights = _log_weights(family, _partition(point_stats, draw_labels, n_slots), jnp.log(alpha), points)
        return logsumexp(weights, axis=-1) - jnp.log(n_fitted + alpha)

    return jax.vmap(one_draw)(labels, alphas)


@partial(jit, static_argnums=(0, 5))
def _draws_loo(family: Any, point_stats: Any, labels: jax.Array, alphas: jax.Array, points: jax.Array,
               n_slots: int) -> jax.Array:
    """log p(x_i | z₋ᵢ, α, x₋ᵢ) of every fitted point for a block of draws, shape (n_draws, N).

    The Chinese-restaurant predictive of x_i given the others' partition: its own cluster scored
    without it (its statistics less x_i's, its size less one; nothing if x_i was alone in it), the
    other clusters as they are, a new cluster with weight α, all over N - 1 + α.
    """
    n_fitted = labels.shape[-1]

    def one_draw(draw_labels, alpha):
        partition = _partition(point_stats, draw_labels, n_slots)
        weights = _log_weights(family, partition, jnp.log(alpha), points)
        slot_stats, sizes = partition
        without = jax.tree_util.tree_map(lambda slots, own: slots[draw_labels] - own, slot_stats, point_stats)
        own = jax.vmap(lambda stats, x: _score(family, _as_terms(family, stats), x))(without, points)
        others = sizes[draw_labels] - 1
        own = jnp.where(others > 0, jnp.log(jnp.maximum(others, 1).astype(points.dtype)) + own, -jnp.inf)
        weights = weights.at[jnp.arange(n_fitted), draw_labels].set(own)
        return logsumexp(weights, axis=-1) - jnp.log(n_fitted - 1 + alpha)

    return jax.vmap(one_draw)(labels, alphas)


def _by_draws(function: Any, family: Any, data: Any, assignments: Any, alphas: Any, points: Any) -> np.ndarray:
    """``function(family, point_stats, labels, alphas, points, n_slots)`` of every draw, (n_chains, n_draws, M),
    float64, computed in blocks of draws that hold at most :data:`_BLOCK_BYTES`."""
    assignments = np.asarray(assignments)
    n_chains, n_draws, _ = assignments.shape
    dtype = jnp.result_type(float)
    data = jnp.asarray(data, dtype)
    points = jnp.asarray(points, dtype)
    n_slots = int(assignments.max()) + 1
    point_stats = jax.vmap(family.point_stats)(data)
    # What one draw holds: its (new point, slot) log weights, and its statistics, gathered per
    # fitted point and summed (and cached) per slot.
    stat_width = sum(leaf.size // max(data.shape[0], 1) for leaf in jax.tree_util.tree_leaves(point_stats))
    per_draw = jnp.dtype(dtype).itemsize * (points.shape[0] * (n_slots + 1)
                                            + (data.shape[0] + 2 * (n_slots + 1)) * stat_width)
    block = int(max(1, min(n_draws, _BLOCK_BYTES // per_draw)))
    # One block size for every call (the last padded with repeats of its first draw, dropped after),
    # so that the program compiles once.
    values = np.empty((n_chains, n_draws, points.shape[0]), np.float64)
    for chain in range(n_chains):
        for start in range(0, n_draws, block):
            labels = assignments[chain, start:start + block]
            chain_alphas = np.asarray(alphas[chain, start:start + block])
            used = labels.shape[0]
            if used < block:
                labels = np.concatenate([labels, np.repeat(labels[:1], block - used, axis=0)])
                chain_alphas = np.concatenate([chain_alphas, np.repeat(chain_alphas[:1], block - used)])
            computed = function(family, point_stats, jnp.asarray(labels, jnp.int32), jnp.asarray(chain_alphas, dtype),
                                points, n_slots)
            values[chain, start:start + used] = np.asarray(computed, np.float64)[:used]
    return values


def posterior_predictive_log_density(family: Any, data: Any, assignments: Any, alphas: Any, points: Any) -> np.ndarray:
    """log p(x | data) of each new point, estimated from each chain's draws: shape (n_chains, M).

    Parameters
    ----------
    family : ComponentFamily
        With a marginal likelihood (``point_stats`` and ``log_predictive``).
    data : array (N, D)
        The fitted points, in the chains' working precision.
    assignments : int array (n_chains, n_draws, N)
        The partition of each draw (cluster slots, not necessarily contiguous).
    alphas : array (n_chains, n_draws)
        α of each draw.
    points : array (M, D)
        New points.

    Returns
    -------
    numpy.ndarray (n_chains, M), float64
        Chain c's estimate log (1/S) Σ_s p(x | z_cs, α_cs, data), S its draws.
    """
    draws = _by_draws(_draws_log_density, family, data, assignments, alphas, points)
    return special.logsumexp(draws, axis=1) - np.log(draws.shape[1])


def leave_one_out_log_likelihood(family: Any, data: Any, assignments: Any, alphas: Any) -> np.ndarray:
    """log p(x_i | z₋ᵢ, α, x₋ᵢ) of every fitted point under every draw: shape (n_chains, n_draws, N).

    The pointwise log-likelihood that Pareto-smoothed importance sampling turns into leave-one-out
    predictive densities (:func:`arviz.loo`): since p(z₋ᵢ, α | x₋ᵢ) ∝ p(z₋ᵢ, α | x) /
    p(x_i | z₋ᵢ, α, x₋ᵢ), weighting the draws by the inverse of these gives
    p(x_i | x₋ᵢ) = 1 / E[1 / p(x_i | z₋ᵢ, α, x₋ᵢ)], x_i's own cluster integrated out as in a
    Gibbs step (Neal 2000 eq. 3.7).
    """
    return _by_draws(_draws_loo, family, data, assignments, alphas, data)
