"""The split–merge moves of the supervised Dirichlet-process models' test partition (SCDP-1, -2,
-3; Daumé & Marcu 2005) on the CPU, compiled by numba (the ``"numba"`` backend of
``zoo.dirichlet.supervised.build_kernel``).

XLA twin: :func:`numba_split_merge_moves` — ``zoo.dirichlet.supervised.split_merge._split_merge_moves``
(the moves of :func:`inference.split_merge.split_merge_move` with sequential allocation, the
means they touch redrawn, with the same random numbers; this module holds pure array code and
imports nothing of ``zoo``).

Equality test: tests/test_supervised.py::test_numba_and_xla_split_merge_moves_give_the_same_chain.

Why a twin. Under ``vmap`` the XLA moves run every chain's allocation loop as long as the
longest, one small operation at a time, and compute the K_max² merge gains of every slot pair
at the start of each sweep; on the digits protocol (10 SCDP-1 chains, capacity 74) ten moves
cost 45 ms a sweep against 25 ms for the rest of the sweep. Here each chain runs its own loop,
over its active publications only, the chains in parallel on the CPU's threads, in one XLA custom
call per sweep (:mod:`inference.native.ffi`; numba is imported with this module, which the model
imports once its backend has resolved to numba).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit, prange

from inference.native.dp_moves import (_apply_merge, _apply_split, _decide, _live_slots, _log_add_exp,
                                       _pairs_log_total, _propose)
from inference.native.ffi import (I32, batch_layout, batched_arg, batched_matrices, batched_scalars, batched_vectors,
                                  float64_arg, float64_bits, prologue, register_handler, write_result)
from inference.native.supervised_sweep import batch_row

__all__ = ["numba_split_merge_moves"]

_LOG_2PI = math.log(2.0 * math.pi)
_FAST = {"nsz", "arcp", "contract", "reassoc"}  # no assumption about NaN or infinities


@njit(cache=True, nogil=True, fastmath=_FAST)
def _log_marginal(weight, weighted, inv_var, log_var):
    """log ∫ G0^p(p) F(points | p) dp per feature, summed, of a set with statistics
    A = Σ t_n, B = Σ t_n r_n (no coupling: it ranks the merges, a proposal). One log per block
    of 8 features, as in :func:`_log_predictive`."""
    n_features = weight.shape[0]
    quadratic, log_det = 0.0, 0.0
    for start in range(0, n_features, 8):
        product = 1.0
        for f in range(start, min(start + 8, n_features)):
            diagonal = inv_var + weight[f]
            quadratic += weighted[f] * weighted[f] / diagonal
            product *= diagonal
        log_det += math.log(product)
    return -0.5 * n_features * log_var - 0.5 * log_det + 0.5 * quadratic


@njit(cache=True, nogil=True)
def _side_moments(weight, weighted, inv_var, out_variance, out_mean):
    """1 / Λ and B / Λ of a side (Λ = 1/σ² + A), kept while the side does not change."""
    for f in range(weight.shape[0]):
        posterior_precision = inv_var + weight[f]
        out_variance[f] = 1.0 / posterior_precision
        out_mean[f] = weighted[f] / posterior_precision


# The allocation's inner loop: reassociated sums (they vectorise) and one log per block of 8
# features (a product of 8 variances stays inside the float64 range while each lies within
# float32's, 1e-38 to 1e38).
@njit(cache=True, nogil=True, fastmath=_FAST)
def _log_predictive(side_variance, side_mean, x, point_variance):
    """log N(x | B / Λ, 1 / Λ + 1 / t) summed over features, from :func:`_side_moments`
    and the point's 1 / t."""
    n_features = x.shape[0]
    quadratic, log_det = 0.0, 0.0
    for start in range(0, n_features, 8):
        product = 1.0
        for f in range(start, min(start + 8, n_features)):
            variance = side_variance[f] + point_variance[f]
            difference = x[f] - side_mean[f]
            quadratic += difference * difference / variance
            product *= variance
        log_det += math.log(product)
    return -0.5 * (log_det + n_features * _LOG_2PI + quadratic)


@njit(cache=True, nogil=True)
def _log_integrated(weights, weighteds, n_moving, coupling, n_rest, rest_total, rest_total_sq, inv_var, log_var):
    """log ∫ Π_a G0^p(p_a) F(points of a | p_a) exp(-V · S(p)) dp over J = ``n_moving`` (1 or 2)
    means (rows of ``weights`` / ``weighteds``), up to terms that do not depend on the split."""
    total = 0.0
    for f in range(weights.shape[1]):
        v = coupling[f]
        if n_moving == 1:
            diagonal = inv_var + weights[0, f] + 2.0 * v * n_rest
            linear = weighteds[0, f] + 2.0 * v * rest_total[f]
            total += (-0.5 * log_var - 0.5 * math.log(diagonal) + 0.5 * linear ** 2 / diagonal
                      - v * rest_total_sq[f])
        else:
            d0 = inv_var + weights[0, f] + 2.0 * v * (n_rest + 1.0)
            d1 = inv_var + weights[1, f] + 2.0 * v * (n_rest + 1.0)
            l0 = weighteds[0, f] + 2.0 * v * rest_total[f]
            l1 = weighteds[1, f] + 2.0 * v * rest_total[f]
            off = -2.0 * v
            det = d0 * d1 - off * off
            quad = (d1 * l0 ** 2 + d0 * l1 ** 2 - 2.0 * off * l0 * l1) / det
            total += -log_var - 0.5 * math.log(det) + 0.5 * quad - 2.0 * v * rest_total_sq[f]
    return total


@njit(cache=True, nogil=True)
def _gains_against(row_weight, row_weighted, row_count, weight, weighted, counts, single, log_alpha, valid,
                  inv_var, log_var, out):
    """Δ of merging a set (statistics, ``row_count`` points) with every slot's cluster; -inf
    where ``valid`` is False (``inference.split_merge._gains_against``)."""
    if row_count <= 0:
        out[:] = -np.inf
        return
    n_features = row_weight.shape[0]
    merged_weight, merged_weighted = np.empty(n_features), np.empty(n_features)
    own = _log_marginal(row_weight, row_weighted, inv_var, log_var)
    for slot in range(counts.shape[0]):
        if not valid[slot]:
            out[slot] = -np.inf
            continue
        for f in range(n_features):
            merged_weight[f] = row_weight[f] + weight[slot, f]
            merged_weighted[f] = row_weighted[f] + weighted[slot, f]
        size = float(counts[slot])
        out[slot] = (-log_alpha + math.lgamma(row_count + size) - math.lgamma(row_count) - math.lgamma(size)
                     + _log_marginal(merged_weight, merged_weighted, inv_var, log_var) - own - single[slot])


@njit(cache=True, nogil=True)
def _moves_chain(features, types, precisions, coupling, inv_var, log_var, n_train_clusters, log_alpha,
                clusters, counts, means, kind, choice, keys, uniforms, accept, noise, noise_merged, moves):
    """``kind.shape[0]`` moves of one chain, in place on clusters, counts and means; adds the
    counts (splits proposed, accepted, merges proposed, accepted) to ``moves``; returns whether
    an accepted split found no free slot."""
    n_points, n_features = features.shape
    n_slots = counts.shape[0]
    point_precision = np.empty((n_points, n_features))
    point_weighted = np.empty((n_points, n_features))
    point_variance = np.empty((n_points, n_features))
    weight, weighted = np.zeros((n_slots, n_features)), np.zeros((n_slots, n_features))
    for n in range(n_points):
        for f in range(n_features):
            point_precision[n, f] = precisions[types[n], f]
            point_variance[n, f] = 1.0 / point_precision[n, f]
            point_weighted[n, f] = point_precision[n, f] * features[n, f]
            weight[clusters[n], f] += point_precision[n, f]
            weighted[clusters[n], f] += point_weighted[n, f]
    single = np.empty(n_slots)
    for slot in range(n_slots):
        single[slot] = _log_marginal(weight[slot], weighted[slot], inv_var, log_var)
    movable = np.arange(n_slots) >= n_train_clusters
    active = (counts > 0) & movable
    row_a, row_b, row_merged = np.empty(n_slots), np.empty(n_slots), np.empty(n_slots)
    # The merge gains of every pair a < b of active movable slots, from a's row (merge_gains).
    gains = np.full((n_slots, n_slots), -np.inf)
    for a in range(n_slots):
        if active[a]:
            later = active.copy()
            later[:a + 1] = False
            _gains_against(weight[a], weighted[a], float(counts[a]), weight, weighted, counts, single, log_alpha,
                           later, inv_var, log_var, row_a)
            for b in range(a + 1, n_slots):
                if later[b]:
                    gains[a, b] = row_a[b]
                    gains[b, a] = row_a[b]
    live = np.empty(n_slots, np.int64)
    pair_probability = np.empty(n_slots * n_slots)
    side_i, side_j = np.empty(n_features), np.empty(n_features)
    side_i_weighted, side_j_weighted = np.empty(n_features), np.empty(n_features)
    variance_i, variance_j = np.empty(n_features), np.empty(n_features)
    mean_i, mean_j = np.empty(n_features), np.empty(n_features)
    on_i = np.zeros(n_points, np.bool_)
    in_play = np.empty(n_points, np.int64)
    rest_total, rest_total_sq = np.empty(n_features), np.empty(n_features)
    sides_weight, sides_weighted = np.empty((2, n_features)), np.empty((2, n_features))
    overflow = False
    for move in range(kind.shape[0]):
        active = (counts > 0) & movable
        # Only pairs of active movable slots have finite gains: the sums skip exact zeros.
        n_clusters = _live_slots(active, live)
        log_total = _pairs_log_total(gains, live, n_clusters)
        possible, is_split, split_slot, pair_low, pair_high, i, j, order = _propose(
            kind[move], choice[move], keys[move], clusters, counts, active, gains, live, n_clusters, log_total,
            pair_probability, in_play)
        if not possible:
            continue
        label_i, label_j = clusters[i], clusters[j]
        # Sequential allocation from the anchors (forced to the current division for a merge).
        for f in range(n_features):
            side_i[f], side_i_weighted[f] = point_precision[i, f], point_weighted[i, f]
            side_j[f], side_j_weighted[f] = point_precision[j, f], point_weighted[j, f]
        size_i, size_j, log_q = 1.0, 1.0, 0.0
        on_i[i], on_i[j] = True, False
        _side_moments(side_i, side_i_weighted, inv_var, variance_i, mean_i)
        _side_moments(side_j, side_j_weighted, inv_var, variance_j, mean_j)
        for k in order:
            logit_i = math.log(size_i) + _log_predictive(variance_i, mean_i, features[k], point_variance[k])
            logit_j = math.log(size_j) + _log_predictive(variance_j, mean_j, features[k], point_variance[k])
            norm = _log_add_exp(logit_i, logit_j)
            if is_split:
                to_i = uniforms[move, k] < math.exp(logit_i - norm)
            else:
                to_i = clusters[k] == label_i
            log_q += (logit_i if to_i else logit_j) - norm
            if to_i:
                side_i += point_precision[k]
                side_i_weighted += point_weighted[k]
                size_i += 1.0
                _side_moments(side_i, side_i_weighted, inv_var, variance_i, mean_i)
            else:
                side_j += point_precision[k]
                side_j_weighted += point_weighted[k]
                size_j += 1.0
                _side_moments(side_j, side_j_weighted, inv_var, variance_j, mean_j)
            on_i[k] = to_i
        size_both = size_i + size_j
        log_crp_ratio = log_alpha + math.lgamma(size_i) + math.lgamma(size_j) - math.lgamma(size_both)
        # The other publications' means (DM05 eq. 3 couples them to the moving ones for SCDP-3).
        n_rest = 0.0
        rest_total[:] = 0.0
        rest_total_sq[:] = 0.0
        for slot in range(n_slots):
            if counts[slot] > 0 and slot != label_i and slot != label_j:
                n_rest += 1.0
                for f in range(n_features):
                    rest_total[f] += means[slot, f]
                    rest_total_sq[f] += means[slot, f] * means[slot, f]
        sides_weight[0], sides_weight[1] = side_i, side_j
        sides_weighted[0], sides_weighted[1] = side_i_weighted, side_j_weighted
        merged_weight = side_i + side_j
        merged_weighted = side_i_weighted + side_j_weighted
        log_split_ratio = (
            _log_integrated(sides_weight, sides_weighted, 2, coupling, n_rest, rest_total, rest_total_sq, inv_var,
                           log_var)
            - _log_integrated(merged_weight.reshape((1, n_features)), merged_weighted.reshape((1, n_features)), 1,
                             coupling, n_rest, rest_total, rest_total_sq, inv_var, log_var))
        log_posterior_ratio = log_crp_ratio + log_split_ratio
        if is_split:
            others = active.copy()
            others[split_slot] = False
            _gains_against(side_i, side_i_weighted, size_i, weight, weighted, counts, single, log_alpha, others,
                          inv_var, log_var, row_a)
            _gains_against(side_j, side_j_weighted, size_j, weight, weighted, counts, single, log_alpha, others,
                          inv_var, log_var, row_b)
            log_marginal_i = _log_marginal(side_i, side_i_weighted, inv_var, log_var)
            log_marginal_j = _log_marginal(side_j, side_j_weighted, inv_var, log_var)
            pair_ab = -(log_crp_ratio + log_marginal_i + log_marginal_j
                        - _log_marginal(merged_weight, merged_weighted, inv_var, log_var))
        else:
            pair_ab = 0.0  # not used by a merge
        accepted, overflow_now, new_slot = _decide(
            is_split, log_posterior_ratio, log_q, size_i, size_j, accept[move], gains, live, n_clusters, log_total,
            split_slot, pair_low, pair_high, row_a, row_b, pair_ab, counts)
        overflow = overflow or overflow_now
        new_slot = max(new_slot, 0)
        # The moved means' conditional, given the rest (the state before the move).
        off = -2.0 * coupling
        mean_a, mean_b, merged_mean = np.empty(n_features), np.empty(n_features), np.empty(n_features)
        for f in range(n_features):
            v = coupling[f]
            d0 = inv_var + side_i[f] + 2.0 * v * (n_rest + 1.0)
            d1 = inv_var + side_j[f] + 2.0 * v * (n_rest + 1.0)
            l0 = side_i_weighted[f] + 2.0 * v * rest_total[f]
            l1 = side_j_weighted[f] + 2.0 * v * rest_total[f]
            marginal_precision = d1 - off[f] * off[f] / d0
            marginal_linear = l1 - off[f] * l0 / d0
            mean_b[f] = marginal_linear / marginal_precision + noise[move, 1, f] / math.sqrt(marginal_precision)
            mean_a[f] = (l0 - off[f] * mean_b[f]) / d0 + noise[move, 0, f] / math.sqrt(d0)
            diagonal = inv_var + merged_weight[f] + 2.0 * v * n_rest
            linear = merged_weighted[f] + 2.0 * v * rest_total[f]
            merged_mean[f] = linear / diagonal + noise_merged[move, f] / math.sqrt(diagonal)
        if accepted and is_split:
            _apply_split(clusters, counts, gains, order, on_i, j, split_slot, new_slot, size_i, size_j, row_a, row_b,
                         pair_ab)
            weight[split_slot], weighted[split_slot] = side_i, side_i_weighted
            weight[new_slot], weighted[new_slot] = side_j, side_j_weighted
            single[split_slot], single[new_slot] = log_marginal_i, log_marginal_j
        elif accepted:
            valid = active.copy()
            valid[label_i], valid[label_j] = False, False
            _gains_against(merged_weight, merged_weighted, size_both, weight, weighted, counts, single, log_alpha,
                          valid, inv_var, log_var, row_merged)
            _apply_merge(clusters, counts, gains, label_i, label_j, row_merged, row_a)
            weight[label_i], weighted[label_i] = 0.0, 0.0
            weight[label_j], weighted[label_j] = merged_weight, merged_weighted
            single[label_i] = _log_marginal(weight[label_i], weighted[label_i], inv_var, log_var)
            single[label_j] = _log_marginal(merged_weight, merged_weighted, inv_var, log_var)
        # Two publications after an accepted split or a rejected merge, one otherwise.
        separate = accepted == is_split
        slot_i, slot_j = clusters[i], clusters[j]
        means[slot_j] = mean_b if separate else merged_mean
        means[slot_i] = mean_a if separate else merged_mean
        counter = 0 if is_split else 2
        moves[counter] += 1
        if accepted:
            moves[counter + 1] += 1
    return overflow


@njit(parallel=True, cache=True, nogil=True)
def _moves_batch(n_batch, inv_var, log_var, features, types, precisions, coupling, n_train_clusters, log_alpha,
                clusters, counts, means, kind, choice, keys, uniforms, accept, noise, noise_merged):
    out_clusters = np.empty((n_batch,) + clusters.shape[1:], clusters.dtype)
    out_counts = np.empty((n_batch,) + counts.shape[1:], counts.dtype)
    out_means = np.empty((n_batch,) + means.shape[1:], means.dtype)
    out_overflow = np.zeros(n_batch, np.bool_)
    out_moves = np.zeros((n_batch, 4), np.int32)
    for b in prange(n_batch):
        out_clusters[b] = clusters[batch_row(b, clusters)]
        out_counts[b] = counts[batch_row(b, counts)]
        out_means[b] = means[batch_row(b, means)]
        out_overflow[b] = _moves_chain(
            features[batch_row(b, features)], types[batch_row(b, types)], precisions[batch_row(b, precisions)],
            coupling[batch_row(b, coupling)], inv_var, log_var, n_train_clusters[batch_row(b, n_train_clusters)],
            log_alpha[batch_row(b, log_alpha)], out_clusters[b], out_counts[b], out_means[b],
            kind[batch_row(b, kind)], choice[batch_row(b, choice)], keys[batch_row(b, keys)],
            uniforms[batch_row(b, uniforms)], accept[batch_row(b, accept)], noise[batch_row(b, noise)],
            noise_merged[batch_row(b, noise_merged)], out_moves[b],
        )
    return out_clusters, out_counts, out_means, out_overflow, out_moves


# The moves run as an XLA custom call (inference.native.ffi; see supervised_sweep). Arguments:
# (1/σ², log σ²) as float64 bits (int32 (2, 2)), then those of :func:`numba_split_merge_moves` in
# its order, the draws spread out (integers int32, the keys uint32, reals in the model's float
# dtype). Results: clusters, counts (int32), means, overflow (bool), moves (int32 (4,)).
@njit(inline="always")
def _moves_call(frame, real):
    done, code = prologue(frame, 17, 5)
    if done:
        return code
    batch, n_lead, n_batch = batch_layout(frame, 1)
    variance_terms = float64_arg(frame, 0)
    at = (batch, n_lead, n_batch)
    noise, noise_tail = batched_arg(frame, 15, *at, real)
    out_clusters, out_counts, out_means, out_overflow, out_moves = _moves_batch(
        np.int64(n_batch), variance_terms[0], variance_terms[1],
        batched_matrices(frame, 1, *at, real), batched_vectors(frame, 2, *at, I32),
        batched_matrices(frame, 3, *at, real), batched_vectors(frame, 4, *at, real),
        batched_scalars(frame, 5, *at, I32), batched_scalars(frame, 6, *at, real),
        batched_vectors(frame, 7, *at, I32), batched_vectors(frame, 8, *at, I32),
        batched_matrices(frame, 9, *at, real), batched_vectors(frame, 10, *at, real),
        batched_matrices(frame, 11, *at, real), batched_matrices(frame, 12, *at, np.uint32(0)),
        batched_matrices(frame, 13, *at, real), batched_vectors(frame, 14, *at, real),
        noise.reshape((noise.shape[0], noise_tail[0], noise_tail[1], noise_tail[2])),
        batched_matrices(frame, 16, *at, real))
    write_result(frame, 0, out_clusters, I32)
    write_result(frame, 1, out_counts, I32)
    write_result(frame, 2, out_means, real)
    write_result(frame, 3, out_overflow.astype(np.uint8), np.uint8(0))
    write_result(frame, 4, out_moves, I32)
    return 0


def _moves_f32(frame):
    return _moves_call(frame, np.float32(0))


def _moves_f64(frame):
    return _moves_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_supervised_moves_float32": _moves_f32, "latentzoo_supervised_moves_float64": _moves_f64}


def numba_split_merge_moves(prior_variance, features, types, precisions, coupling, n_train_clusters, log_alpha,
                            clusters, counts, means, draws):
    """``n_moves`` split–merge moves of the test partition on the CPU (numba, as an XLA custom call),
    with the same random numbers as the XLA moves.

    ``features`` (N, D); ``types`` (N,) and ``precisions`` (L, D): the reference types; ``coupling``
    (D,) V of DM05 eq. 3 (zeros for SCDP-1 and -2); slots below ``n_train_clusters`` are the
    training publications, never moved; ``clusters`` (N,), ``counts`` (K,), ``means`` (K, D) the
    state. ``draws``: the moves' random numbers, leading axis the move, in this order: the kind
    (< 1/2: split), four uniforms choosing the cluster or pair and the anchors (4,), 31-bit keys
    ordering the points in play (N,), the allocation's uniforms (N,), the acceptance uniform,
    standard normals for the two sides' means (2, D) and for the merged mean (D,). Returns
    (clusters, counts, means, overflow (bool), moves (int32 (4,): splits proposed, accepted,
    merges proposed, accepted)).
    """
    real = jnp.dtype(features.dtype)
    integer = lambda array: jnp.asarray(array, jnp.int32)  # noqa: E731
    floating = lambda array: jnp.asarray(array, real)  # noqa: E731
    result_shapes = (
        jax.ShapeDtypeStruct(clusters.shape, jnp.int32), jax.ShapeDtypeStruct(counts.shape, jnp.int32),
        jax.ShapeDtypeStruct(means.shape, real), jax.ShapeDtypeStruct((), jnp.bool_),
        jax.ShapeDtypeStruct((4,), jnp.int32),
    )
    kind, choice, keys, uniforms, accept, noise, noise_merged = draws
    name = f"latentzoo_supervised_moves_{real.name}"
    register_handler(name, HANDLERS[name])
    new_clusters, new_counts, new_means, overflow, moves = jax.ffi.ffi_call(name, result_shapes,
                                                                            vmap_method="expand_dims")(
        float64_bits([1.0 / prior_variance, math.log(prior_variance)]),
        floating(features), integer(types), floating(precisions), floating(coupling), integer(n_train_clusters),
        floating(log_alpha), integer(clusters), integer(counts), floating(means), floating(kind), floating(choice),
        jnp.asarray(keys, jnp.uint32), floating(uniforms), floating(accept), floating(noise), floating(noise_merged),
    )
    return (new_clusters.astype(clusters.dtype), new_counts.astype(counts.dtype), new_means.astype(means.dtype),
            overflow, moves)
