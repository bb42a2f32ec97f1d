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

__all__ = ["crp_log_weights", "posterior_predictive_log_density"]

#: Bytes of (draw, new point, cluster) log weights one call holds at most.
_BLOCK_BYTES = 64 * 2**20


def _cluster_terms(family: Any, point_stats: Any, labels: jax.Array, n_slots: int) -> Any:
    """Per-cluster statistics of the partition ``labels`` in ``n_slots`` slots, the last one empty
    (its predictive is the prior predictive), in the form ``family`` scores points against."""
    stats = jax.tree_util.tree_map(lambda leaf: segment_sum(leaf, labels, num_segments=n_slots + 1), point_stats)
    if family.predictive_cache is None:
        return stats
    return jax.vmap(family.predictive_cache)(stats)


def _log_predictive(family: Any, terms: Any, x: jax.Array) -> jax.Array:
    """log p(x | points of each slot), shape (n_slots + 1,)."""
    if family.predictive_cache is None:
        return jax.vmap(lambda stats: family.log_predictive(stats, x))(terms)
    score = family.log_predictive_from_cache or family.log_predictive
    return jax.vmap(lambda cache: score(cache, x))(terms)


def _log_weights(family: Any, point_stats: Any, labels: jax.Array, log_alpha: jax.Array, n_slots: int,
                 points: jax.Array) -> jax.Array:
    """log n_k + log p(x | points of slot k) for the slots below ``n_slots`` (-inf for an empty
    one) and log α + log p(x) for a new cluster, shape (n_points, n_slots + 1)."""
    terms = _cluster_terms(family, point_stats, labels, n_slots)
    sizes = jnp.bincount(labels, length=n_slots + 1)
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
    return _log_weights(family, jax.vmap(family.point_stats)(train), labels, log_alpha, n_clusters, points)


@partial(jit, static_argnums=(0, 5))
def _draws_log_density(family: Any, point_stats: Any, labels: jax.Array, alphas: jax.Array, points: jax.Array,
                       n_slots: int) -> jax.Array:
    """log p(x | z_s, α_s, data) for a block of draws, shape (n_draws, n_points).

    ``labels`` (n_draws, N) are slots below ``n_slots``, not necessarily all used; slot
    ``n_slots`` stands for the new cluster.
    """
    n_fitted = labels.shape[-1]

    def one_draw(draw_labels, alpha):
        weights = _log_weights(family, point_stats, draw_labels, jnp.log(alpha), n_slots, points)
        return logsumexp(weights, axis=-1) - jnp.log(n_fitted + alpha)

    return jax.vmap(one_draw)(labels, alphas)


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
    totals = np.empty((n_chains, points.shape[0]), np.float64)
    for chain in range(n_chains):
        pieces = []
        for start in range(0, n_draws, block):
            labels = assignments[chain, start:start + block]
            chain_alphas = np.asarray(alphas[chain, start:start + block])
            used = labels.shape[0]
            if used < block:
                labels = np.concatenate([labels, np.repeat(labels[:1], block - used, axis=0)])
                chain_alphas = np.concatenate([chain_alphas, np.repeat(chain_alphas[:1], block - used)])
            values = _draws_log_density(family, point_stats, jnp.asarray(labels, jnp.int32),
                                        jnp.asarray(chain_alphas, dtype), points, n_slots)
            pieces.append(np.asarray(values, np.float64)[:used])
        draws = np.concatenate(pieces)  # (n_draws, M)
        totals[chain] = special.logsumexp(draws, axis=0) - np.log(n_draws)
    return totals
