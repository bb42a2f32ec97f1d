"""Split–merge Metropolis–Hastings moves (:mod:`inference.split_merge`: merges picked by how much
they would raise the posterior, sequentially allocated splits, Dahl 2003; Jain & Neal 2004) of the
test partition, the publication means integrated given the reference types, and of the
reference-type partition (SCDP-1 and -2), the precisions integrated given the means.
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace
from typing import NamedTuple

import jax
import jax.numpy as jnp

from inference.components import NativePredictive
from inference.segments import segment_sum
from inference.split_merge import (MoveUniforms, SideModel, SplitMergeMoves, count_move, merge_gains, move_uniforms,
                                   no_moves, split_merge_move, split_merge_moves)
from zoo.dirichlet.families import (_ng_log_marginal, _ng_log_predictive, _ng_point_stats, _NormalGammaPrior,
                                    normal_gamma)
from zoo.dirichlet.supervised.conditionals import _active_variance_total, _LOG_2PI
from zoo.dirichlet.supervised.state import _CLUSTER_OVERFLOW, _TYPE_OVERFLOW

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


def _redraw_moved_means(config, key_means, means, coupling, n_rest, rest_total, weights, weighteds, separate, slot_i,
                        slot_j):
    """``means`` with those of the publications holding a move's anchors (slots ``slot_i`` and
    ``slot_j`` after it) drawn from their conditional given the other publications (``n_rest``,
    ``rest_total``, of the state before the move): both jointly where ``separate`` (an accepted
    split or a rejected merge; ``weights``, ``weighteds`` (2, D) are the two sides' (A, B)), else
    the one of the merged publication."""
    mean_a, mean_b = _draw_coupled_means(config, key_means, coupling, n_rest, rest_total, weights, weighteds)
    merged_precision, merged_linear = _coupled_means(
        config, coupling, n_rest, rest_total, jnp.sum(weights, 0, keepdims=True), jnp.sum(weighteds, 0, keepdims=True))
    noise = jax.random.normal(jax.random.fold_in(key_means, 1), mean_a.shape, means.dtype)
    merged_mean = merged_linear[0] / merged_precision[0] + noise / jnp.sqrt(merged_precision[0])
    new_means = means.at[slot_j].set(jnp.where(separate, mean_b, merged_mean))
    return new_means.at[slot_i].set(jnp.where(separate, mean_a, merged_mean))


def _side_model(config, features, context, means, counts) -> SideModel:
    """The moves' view of the test partition: a side is summarised by (A, B) = (Σ t_n, Σ t_n r_n)
    per feature; the predictive is :func:`_log_side_predictive`; merges are ranked by the
    marginal likelihood without eq. 3's coupling (a proposal: it must not depend on the means
    the move integrates), and the acceptance uses the exact one, coupled for SCDP-3 to the
    other publications' means."""
    precisions, weighted = context.point_precisions, context.point_weighted
    slots = jnp.arange(counts.shape[0])
    active = counts > 0
    zeros = jnp.zeros_like(features[0])

    def log_predictive(stats, k):
        return _log_side_predictive(config, stats[0], stats[1], features[k], precisions[k])

    def log_marginal(stats):
        return _log_integrated(config, zeros, 0.0, zeros, zeros, stats[0][None], stats[1][None])

    def log_split_ratio(stats_i, stats_j, slot_i, slot_j):
        rest = _rest(means, active, slots, slot_i, slot_j)
        integrated = partial(_log_integrated, config, context.coupling, *rest)
        weights, weighteds = jnp.stack([stats_i[0], stats_j[0]]), jnp.stack([stats_i[1], stats_j[1]])
        return (integrated(weights, weighteds)
                - integrated(jnp.sum(weights, 0, keepdims=True), jnp.sum(weighteds, 0, keepdims=True)))

    return SideModel(point_stats=(precisions, weighted), log_predictive=log_predictive, log_marginal=log_marginal,
                     log_split_ratio=log_split_ratio)


def _rest(means, active, slots, slot_i, slot_j):
    """Number, sum and sum of squares of the means of the active publications other than
    ``slot_i`` and ``slot_j`` (DM05 eq. 3's pairs with the moving ones)."""
    rest = active & (slots != slot_i) & (slots != slot_j)
    dtype = means.dtype
    return (jnp.sum(rest).astype(dtype), jnp.sum(jnp.where(rest[:, None], means, 0.0), axis=0),
            jnp.sum(jnp.where(rest[:, None], means * means, 0.0), axis=0))


def _split_merge_move(config, rng_key, carry, features, n_train_clusters, log_alpha, context, gains, stats):
    """One split or merge of test publications (:func:`inference.split_merge.split_merge_move`:
    informed merges, sequentially allocated splits), then the block's means.

    Target: p(c_test | d, t, r) with the means of the publications the move touches integrated
    (conditionally on the other means for SCDP-3, whose eq. 3 couples them). Only test
    publications (slots >= the training publications) are split or merged. Whatever the
    outcome, the means of the publications then holding the two anchors are drawn from their
    conditional (jointly when there are two), so the move is a block update of the test
    partition and those means. ``gains`` and ``stats`` are the merge gains and the statistics
    per slot of the partition (see :func:`inference.split_merge.split_merge_move`). Returns
    (carry, MoveResult).
    """
    key_move, key_means = jax.random.split(rng_key)
    clusters, counts, means = carry.clusters, carry.cluster_counts, carry.means
    slots = jnp.arange(counts.shape[0])
    model = _side_model(config, features, context, means, counts)
    result = split_merge_move(model, key_move, clusters, counts, log_alpha, movable=slots >= n_train_clusters,
                              gains=gains, stats=stats)
    proposed = result.split_proposed | result.merge_proposed
    # The means of the publications now holding i and j, drawn from their conditional given the
    # other publications (those of the state before the move; one mean or two).
    rest = _rest(means, counts > 0, slots, clusters[result.anchor_i], clusters[result.anchor_j])
    n_rest, rest_total, _ = rest
    sides_weight = jnp.stack([result.stats_i[0], result.stats_j[0]])
    sides_weighted = jnp.stack([result.stats_i[1], result.stats_j[1]])
    separate = result.split_proposed == result.accepted  # an accepted split or a rejected merge
    slot_i, slot_j = result.assignments[result.anchor_i], result.assignments[result.anchor_j]
    new_means = _redraw_moved_means(config, key_means, means, context.coupling, n_rest, rest_total, sides_weight,
                                    sides_weighted, separate, slot_i, slot_j)
    carry = carry._replace(clusters=result.assignments, cluster_counts=result.counts,
                           means=jnp.where(proposed, new_means, means),
                           overflow=carry.overflow | jnp.where(result.overflow, _CLUSTER_OVERFLOW, 0))
    return carry, result


class MoveDraws(NamedTuple):
    """The random numbers of ``n_moves`` moves on N points with D features (leading axis: move),
    as :func:`_split_merge_move` draws them, for the numba moves: those of the move itself
    (:class:`inference.split_merge.MoveUniforms`) and standard normals for the two sides' means
    (2, D) and the merged mean (D)."""

    move: MoveUniforms
    noise: jax.Array
    noise_merged: jax.Array


def _move_draws(rng_key, n_moves: int, n_points: int, n_features: int, dtype) -> MoveDraws:
    """The random numbers of ``n_moves`` moves as :func:`_split_merge_move` draws them (move m from
    ``fold_in(rng_key, m)``), for the numba moves."""
    def one(move_index):
        key_move, key_means = jax.random.split(jax.random.fold_in(rng_key, move_index))
        return MoveDraws(
            move=move_uniforms(key_move, n_points, dtype)[0],
            noise=jax.random.normal(key_means, (2, n_features), dtype),
            noise_merged=jax.random.normal(jax.random.fold_in(key_means, 1), (n_features,), dtype),
        )

    return jax.vmap(one)(jnp.arange(n_moves))


def _split_merge_moves(config, rng_key, carry, features, n_train, n_train_clusters, alpha):
    """``config.n_split_merge`` moves in a row; returns (carry, SplitMergeMoves counts). With
    ``config.backend == "numba"`` they run on the CPU
    (:func:`inference.native.supervised_moves.numba_split_merge_moves`, same random numbers)."""
    coupling = _active_variance_total(carry.precisions, carry.type_counts)
    coupling = coupling if config.model == 3 else jnp.zeros_like(coupling)
    log_alpha = jnp.log(alpha).astype(features.dtype)
    if config.backend == "numba":
        from inference.native.supervised_moves import numba_split_merge_moves  # imports numba

        draws = _move_draws(rng_key, config.n_split_merge, *features.shape, features.dtype)
        clusters, counts, means, overflow, moves = numba_split_merge_moves(
            config.prior_variance, features, carry.types, carry.precisions, coupling, n_train_clusters, log_alpha,
            carry.clusters, carry.cluster_counts, carry.means, (*draws.move, draws.noise, draws.noise_merged))
        carry = carry._replace(clusters=clusters, cluster_counts=counts, means=means,
                               overflow=carry.overflow | jnp.where(overflow, _CLUSTER_OVERFLOW, 0))
        return carry, SplitMergeMoves(*moves)
    point_precisions = carry.precisions[carry.types]
    context = _MoveContext(
        point_precisions=point_precisions,
        point_weighted=point_precisions * features,
        coupling=coupling,
    )
    counts = carry.cluster_counts
    movable = jnp.arange(counts.shape[0]) >= n_train_clusters
    model = _side_model(config, features, context, carry.means, counts)
    stats = jax.tree_util.tree_map(
        lambda leaf: segment_sum(leaf, carry.clusters, num_segments=counts.shape[0]), model.point_stats)

    def move(state, move_index):
        carry, gains, stats, moves = state
        carry, result = _split_merge_move(config, jax.random.fold_in(rng_key, move_index), carry, features,
                                          n_train_clusters, log_alpha, context, gains, stats)
        return (carry, result.gains, result.stats, count_move(moves, result)), None

    start = (carry, merge_gains(model.log_marginal, stats, counts, log_alpha, movable), stats, no_moves())
    (carry, _, _, moves), _ = jax.lax.scan(move, start, jnp.arange(config.n_split_merge))
    return carry, moves


# ----------------------------------------------------------------------------------------------
# Moves of the reference-type partition (SCDP-1 and -2)
# ----------------------------------------------------------------------------------------------
KNOWN_MEAN_KAPPA = 1e18
"""κ0 of the Normal–Gamma components that stand for the reference types in their moves. Given
the publication means, a type's residuals r_n - p_{c_n} are i.i.d. Normal(0, 1/t) with
t ~ Gamma(a, b) per feature: a Normal–Gamma component whose mean is pinned at 0, the limit
κ0 → ∞, whose marginal is

    log m = Σ_f [a log b - log Γ(a) + log Γ(a + n/2) - (a + n/2) log(b + Σ r_f² / 2)] - n D/2 log 2π.

At κ0 = 1e18 (the largest power of ten whose square float32 holds, which the family checks)
the κ terms of the Normal–Gamma formulas (κ0 / κn, ½ (log κ0 - log κn), the posterior mean
Σr / κn) are their limits exactly in float32 and within n · 1e-18 in float64, so both backends'
moves of a Normal–Gamma DP mixture serve the types unchanged."""


def _type_family(config, shape, rate):
    """The component family of the types' moves: :func:`zoo.dirichlet.families.normal_gamma` with
    the mean pinned at 0 (:data:`KNOWN_MEAN_KAPPA`). SCDP-1's prior is fixed, so it is the
    family itself, with its numba twin; SCDP-2 re-sets the prior every sweep (traced values), so
    it gets the family's XLA functions on that prior, and for the numba moves the prior as an
    array."""
    n_features = shape.shape[-1]
    if config.model == 1:
        return normal_gamma(n_features, mean=0.0, kappa=KNOWN_MEAN_KAPPA, shape=config.precision_shape,
                            rate=config.precision_rate)
    prior = _NormalGammaPrior(mean=jnp.zeros_like(shape), kappa=jnp.full_like(shape, KNOWN_MEAN_KAPPA), shape=shape,
                              rate=rate, n_features=n_features)
    # The numba moves take a traced prior as an array (n_hyper, D) in NativePredictive's order.
    native = NativePredictive("normal_gamma", jnp.stack([prior.mean, prior.kappa, prior.shape, prior.rate]))
    return SimpleNamespace(point_stats=_ng_point_stats, log_marginal=partial(_ng_log_marginal, prior),
                           log_predictive=partial(_ng_log_predictive, prior), native_predictive=native)


def _type_split_merge_moves(config, rng_key, carry, residuals, shape, rate, alpha_types):
    """``config.n_type_split_merge`` split–merge moves of the reference-type partition (all
    references, training and test), for SCDP-1 and -2: the moves of a Dirichlet-process mixture
    (:func:`inference.split_merge.split_merge_moves`, numba or XLA as ``config.backend`` says)
    of the residuals r_n - p_{c_n} under the current means, in components of precision t and
    mean 0 (:data:`KNOWN_MEAN_KAPPA`), concentration α^t.

    Target: p(d | c, p, r, α^t) with the precisions integrated. The moves leave the precisions
    as they are, so the caller draws every type's precisions from their conditional right after
    (the step runs the moves between the means and the precisions), which makes the pair a block
    update of (d, t) that leaves the joint posterior invariant. Why: one-reference updates open a
    type only from one reference's residual and close one only when its last reference leaves,
    so in many dimensions a chain keeps the number of types its first sweeps gave it (on the
    digits of ``notebooks/supervised_digits.ipynb`` four SCDP-1 chains held 9, 7, 7 and 8 types
    for 300 sweeps; with five moves per sweep all four held 6 types, at log joints 550 to 1,090
    nats higher and within 110 nats of each other; they are off by default, see
    :func:`.kernel.build_kernel`). SCDP-3's precisions are tied to the means by eq. 3, so its
    types have no such marginal. Returns (carry, SplitMergeMoves counts).
    """
    types, counts, moves, overflow = split_merge_moves(
        _type_family(config, shape, rate), rng_key, residuals, carry.types, carry.type_counts, alpha_types,
        config.n_type_split_merge, backend=config.backend)
    carry = carry._replace(types=types, type_counts=counts,
                           overflow=carry.overflow | jnp.where(overflow, _TYPE_OVERFLOW, 0))
    return carry, moves
