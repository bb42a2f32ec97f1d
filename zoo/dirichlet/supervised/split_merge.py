"""Split–merge Metropolis–Hastings moves of the test partition (Dahl 2003; Jain & Neal 2004), the
publication means integrated given the reference types.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from zoo.dirichlet.supervised.conditionals import _active_variance_total, _LOG_2PI
from zoo.dirichlet.supervised.state import _CLUSTER_OVERFLOW

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
