"""The assignment sweep of the supervised Dirichlet-process models (SCDP-1, -2, -3; Daumé & Marcu
2005) on the CPU, compiled by numba (the ``"numba"`` backend of
``zoo.dirichlet.supervised.build_kernel``).

XLA twin: :func:`numba_sweep` — ``zoo.dirichlet.supervised.sweep_xla._xla_sweep`` (the same sweep
with the same random numbers; this module holds pure array code and imports nothing of ``zoo``).

Equality test: tests/test_supervised.py::test_numba_and_xla_sweeps_give_the_same_chain (and
tests/test_supervised.py::test_numba_sweep_runs_vmapped_chains_like_single_ones).

One compiled loop per chain, run by XLA as a custom call (:mod:`inference.native.ffi`). Inside an XLA
while loop each small per-reference operation costs a fixed dispatch overhead; the compiled loop
pays none and skips empty slots. numba is imported with this module, which the model imports
once its backend has resolved to numba; the kernels are module-level functions, so numba's disk
cache keeps them between processes (as closures made by a factory they were compiled again in
every process, 20-30 s each).
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
import numpy as np
from numba import njit, prange

from inference.native.ffi import (I32, batch_layout, batched_matrices, batched_scalars, batched_vectors, float64_arg,
                                  float64_bits, prologue, register_handler, write_result)

__all__ = ["numba_sweep", "batch_row"]


# CPU fast path: the same sweep, with the same random numbers, as one compiled loop per chain on
# the CPU (numba), run by XLA as a custom call. Inside an XLA while loop each small
# per-reference operation costs a fixed dispatch overhead; the compiled loop pays none and skips
# empty slots.
# Reassociation lets the per-feature sums vectorise; no assumption about NaN or infinities.
_FAST = {"nsz", "arcp", "contract", "reassoc"}



@njit(cache=True, nogil=True, fastmath=_FAST)
def _draw(logits, n_candidates, uniform):
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
def _first_free(counts):
    for k in range(counts.shape[0]):
        if counts[k] == 0:
            return k
    return -1


@njit(cache=True, nogil=True, fastmath=_FAST)
def _active_totals(means, counts, total, total_sq):
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


@njit(cache=True, nogil=True, fastmath=_FAST)
def _active_variance_total(precisions, type_counts, variance_total):
    variance_total[:] = 0.0
    for slot in range(type_counts.shape[0]):
        if type_counts[slot] > 0:
            for f in range(precisions.shape[1]):
                variance_total[f] += 1.0 / precisions[slot, f]


@njit(cache=True, nogil=True, fastmath=_FAST)
def _log_sum(values, n_values):
    top = -np.inf
    for k in range(n_values):
        top = max(top, values[k])
    if top == -np.inf:
        return -np.inf
    total = 0.0
    for k in range(n_values):
        total += np.exp(values[k] - top)
    return top + np.log(total)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _pair_moves(n_train, prior_variance, x, first_allowed, clusters, counts, means, types, type_counts, precisions,
                type_log_det, alpha, partners, pair_uniforms, pair_normals):
    """The pair move of each test reference with its partner (SCDP-1, -2): a joint Gibbs update of
    both references' publications and common type, restricted to their sharing a type that
    others hold (``zoo.dirichlet.supervised.sweep_xla._pair_move``, the same terms in the same
    order, over the held types and allowed publications only). Returns the overflow bits."""
    n_points, n_features = x.shape
    n_slots, n_type_slots = counts.shape[0], type_counts.shape[0]
    n_kinds = 6
    log_2pi = np.log(2.0 * np.pi)
    log_alpha = np.log(alpha)
    # Per type: the new-publication marginals' precisions t / (1 + σ² t), log-determinant, and
    # the pair's Σ_f log t - log 2π - ½ log(1 + 2 σ² t) with 1 / (2 (1 + 2 σ² t)).
    marginal = np.zeros((n_type_slots, n_features))
    marginal_log_det = np.zeros(n_type_slots)
    new_constant = np.zeros(n_type_slots)
    shrink = np.zeros((n_type_slots, n_features))
    for slot in range(n_type_slots):
        if type_counts[slot] > 0:
            for f in range(n_features):
                t = precisions[slot, f]
                marginal[slot, f] = t / (1.0 + prior_variance * t)
                marginal_log_det[slot] += np.log(marginal[slot, f])
                spread = 1.0 + 2.0 * prior_variance * t
                new_constant[slot] += np.log(t) - log_2pi - 0.5 * np.log(spread)
                shrink[slot, f] = 0.5 / spread
    slots = np.empty(n_slots, np.int64)
    log_u = np.empty((n_type_slots, n_slots))
    log_v = np.empty((n_type_slots, n_slots))
    log_apart = np.empty((n_type_slots, n_slots))
    log_together = np.empty((n_type_slots, n_slots))
    weights = np.empty(n_slots)
    log_count = np.empty(n_slots)
    log_count_up = np.empty(n_slots)
    logits = np.empty(max(n_type_slots * n_kinds, n_slots))
    codes = np.empty(max(n_type_slots * n_kinds, n_slots), np.int64)
    overflow = 0
    for visit in range(n_points - n_train):
        i, j = n_train + visit, partners[visit]
        type_slot = types[i]
        if i == j or types[j] != type_slot or type_counts[type_slot] <= 2:
            continue
        cluster_i, cluster_j = clusters[i], clusters[j]
        counts[cluster_i] -= 1
        counts[cluster_j] -= 1
        type_counts[type_slot] -= 2
        n_allowed = 0
        for k in range(n_slots):
            if counts[k] > 0 and k >= first_allowed:
                slots[n_allowed] = k
                log_count[n_allowed] = np.log(float(counts[k]))
                log_count_up[n_allowed] = np.log(float(counts[k]) + 1.0)
                n_allowed += 1
        n_candidates = 0
        for slot in range(n_type_slots):
            if type_counts[slot] <= 0:
                continue
            for position in range(n_allowed):
                k = slots[position]
                square_i = 0.0
                square_j = 0.0
                for f in range(n_features):
                    difference_i = x[i, f] - means[k, f]
                    difference_j = x[j, f] - means[k, f]
                    square_i += precisions[slot, f] * difference_i * difference_i
                    square_j += precisions[slot, f] * difference_j * difference_j
                log_n = log_count[position]
                log_f_i = 0.5 * (type_log_det[slot] - n_features * log_2pi - square_i)
                log_f_j = 0.5 * (type_log_det[slot] - n_features * log_2pi - square_j)
                log_u[slot, position] = log_n + log_f_i
                log_v[slot, position] = log_n + log_f_j
                log_together[slot, position] = log_n + log_count_up[position] + log_f_i + log_f_j
            # i in one publication, j in another: Σ_{b ≠ a} v_b as the XLA twin's
            # _exclusive_log_sum has it (the total minus v_a, the largest's others summed apart).
            top = -np.inf
            largest = 0
            for position in range(n_allowed):
                if log_v[slot, position] > top:
                    top, largest = log_v[slot, position], position
            total = 0.0
            without_largest = 0.0
            for position in range(n_allowed):
                weights[position] = np.exp(log_v[slot, position] - top)
                total += weights[position]
                if position != largest:
                    without_largest += weights[position]
            for position in range(n_allowed):
                others = without_largest if position == largest else max(total - weights[position], 0.0)
                log_apart[slot, position] = log_u[slot, position] + top + np.log(others) if others > 0.0 else -np.inf
            log_sum_v = top + np.log(total) if total > 0.0 else -np.inf
            new_i = 0.0
            new_j = 0.0
            pair_square = 0.0
            gap_square = 0.0
            for f in range(n_features):
                new_i += marginal[slot, f] * x[i, f] * x[i, f]
                new_j += marginal[slot, f] * x[j, f] * x[j, f]
                both = x[i, f] + x[j, f]
                gap = x[i, f] - x[j, f]
                pair_square += precisions[slot, f] * both * both * shrink[slot, f]
                gap_square += precisions[slot, f] * gap * gap
            log_new_i = 0.5 * (marginal_log_det[slot] - n_features * log_2pi - new_i)
            log_new_j = 0.5 * (marginal_log_det[slot] - n_features * log_2pi - new_j)
            log_new_pair = new_constant[slot] - 0.5 * (pair_square + 0.5 * gap_square)
            weight = float(type_counts[slot])
            log_type = np.log(weight) + np.log(weight + 1.0)
            kinds = (_log_sum(log_apart[slot], n_allowed), _log_sum(log_together[slot], n_allowed),
                     log_alpha + log_new_pair, log_alpha + log_new_i + log_sum_v,
                     log_alpha + log_new_j + _log_sum(log_u[slot], n_allowed),
                     2.0 * log_alpha + log_new_i + log_new_j)
            for kind in range(n_kinds):
                if kinds[kind] > -np.inf:
                    logits[n_candidates] = log_type + kinds[kind]
                    codes[n_candidates] = slot * n_kinds + kind
                    n_candidates += 1
        choice = codes[_draw(logits, n_candidates, pair_uniforms[3 * visit])]
        new_type, kind = choice // n_kinds, choice % n_kinds
        first = -1
        second = -1
        if kind != 2 and kind != 5:
            n_candidates = 0
            for position in range(n_allowed):
                if kind == 0:
                    value = log_apart[new_type, position]
                elif kind == 1:
                    value = log_together[new_type, position]
                elif kind == 3:
                    value = log_v[new_type, position]
                else:
                    value = log_u[new_type, position]
                if value > -np.inf:
                    logits[n_candidates] = value
                    codes[n_candidates] = slots[position]
                    n_candidates += 1
            first = codes[_draw(logits, n_candidates, pair_uniforms[3 * visit + 1])]
        if kind == 0:
            n_candidates = 0
            for position in range(n_allowed):
                if slots[position] != first and log_v[new_type, position] > -np.inf:
                    logits[n_candidates] = log_v[new_type, position]
                    codes[n_candidates] = slots[position]
                    n_candidates += 1
            second = codes[_draw(logits, n_candidates, pair_uniforms[3 * visit + 2])]
        free_1 = -1
        free_2 = -1
        for k in range(n_slots):
            if counts[k] == 0:
                if free_1 < 0:
                    free_1 = k
                elif free_2 < 0:
                    free_2 = k
                    break
        needed = (0, 0, 1, 1, 1, 2)[kind]
        if (needed >= 1 and free_1 < 0) or (needed == 2 and free_2 < 0):
            overflow |= 1
            new_i, new_j, new_type = cluster_i, cluster_j, type_slot
        else:
            if kind == 0:
                new_i, new_j = first, second
            elif kind == 1:
                new_i, new_j = first, first
            elif kind == 2:
                new_i, new_j = free_1, free_1
            elif kind == 3:
                new_i, new_j = free_1, first
            elif kind == 4:
                new_i, new_j = first, free_1
            else:
                new_i, new_j = free_1, free_2
            opens_i = kind == 2 or kind == 3 or kind == 5
            opens_j = kind == 4 or kind == 5
            for f in range(n_features):
                t = precisions[new_type, f]
                if kind == 2:
                    posterior_precision = 1.0 / prior_variance + 2.0 * t
                    means[new_i, f] = (t * (x[i, f] + x[j, f]) / posterior_precision
                                       + pair_normals[2 * visit, f] / np.sqrt(posterior_precision))
                else:
                    posterior_precision = 1.0 / prior_variance + t
                    if opens_i:
                        means[new_i, f] = (t * x[i, f] / posterior_precision
                                           + pair_normals[2 * visit, f] / np.sqrt(posterior_precision))
                    if opens_j:
                        means[new_j, f] = (t * x[j, f] / posterior_precision
                                           + pair_normals[2 * visit + 1, f] / np.sqrt(posterior_precision))
        clusters[i] = new_i
        clusters[j] = new_j
        types[i] = new_type
        types[j] = new_type
        counts[new_i] += 1
        counts[new_j] += 1
        type_counts[new_type] += 2
    return overflow


@njit(cache=True, nogil=True, fastmath=_FAST)
def _sweep_chain(model, share_clusters, n_train, prior_variance, x, n_train_clusters, clusters, counts, means,
                types, type_counts, precisions, alpha, alpha_types, shape, rate, uniforms, positions,
                cluster_supply, type_supply, cluster_pool, type_pool, pair_moves, partners, pair_uniforms,
                pair_normals):
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
        _active_variance_total(precisions, type_counts, variance_total)
        n_active = _active_totals(means, counts, total, total_sq)
    else:
        for slot in range(n_type_slots):
            if type_counts[slot] > 0:
                for f in range(n_features):
                    marginal[slot, f] = precisions[slot, f] / (1.0 + prior_variance * precisions[slot, f])
                    marginal_log_det[slot] += np.log(marginal[slot, f])
        for f in range(n_features):
            student_constant += (shape[f] * np.log(rate[f]) + math.lgamma(shape[f] + 0.5) - math.lgamma(shape[f])
                                 - 0.5 * np.log(2.0 * np.pi))
    for step in range(n_points + 1):
        if step == n_test:  # between the test and the training references: the pair moves
            if pair_moves:
                overflow |= _pair_moves(n_train, prior_variance, x, first_allowed, clusters, counts, means, types,
                                        type_counts, precisions, type_log_det, alpha, partners, pair_uniforms,
                                        pair_normals)
            continue
        visit = step if step < n_test else step - 1
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
                    n_active = _active_totals(means, counts, total, total_sq)
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
                choice = _draw(logits, n_slots + n_auxiliary, uniforms[0, index])
            else:
                square = 0.0
                for f in range(n_features):
                    square += marginal[type_slot, f] * point[f] * point[f]
                logits[n_slots] = (np.log(alpha) + 0.5 * marginal_log_det[type_slot] - half_log_2pi_d
                                   - 0.5 * square)
                choice = _draw(logits, n_slots + 1, uniforms[0, index])
            new = choice
            if choice >= n_slots:
                free = _first_free(counts)
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
                n_active = _active_totals(means, counts, total, total_sq)
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
            choice = _draw(logits, n_type_slots + n_auxiliary, uniforms[1, index])
        else:
            log_student = student_constant
            for f in range(n_features):
                log_student -= (shape[f] + 0.5) * np.log(rate[f] + 0.5 * residual[f] * residual[f])
            logits[n_type_slots] = np.log(alpha_types) + log_student
            choice = _draw(logits, n_type_slots + 1, uniforms[1, index])
        new = choice
        if choice >= n_type_slots:
            free = _first_free(type_counts)
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
            _active_variance_total(precisions, type_counts, variance_total)
    return overflow


@njit(cache=True, nogil=True)
def batch_row(batch, array):
    """Row of ``array`` for batch element ``batch``: itself, or 0 when shared (one row)."""
    return 0 if array.shape[0] == 1 else np.int64(batch)


@njit(parallel=True, cache=True, nogil=True)
def _sweep_batch(n_batch, model, share_clusters, n_train, prior_variance, features, n_train_clusters, clusters,
                cluster_counts, means, types, type_counts, precisions, overflow, alpha, alpha_types, shape,
                rate, uniforms, positions, cluster_supply, type_supply, cluster_pool, type_pool, pair_moves,
                partners, pair_uniforms, pair_normals):
    # Every input has a leading batch axis of size n_batch or 1 (shared by all chains).
    out_clusters = np.empty((n_batch,) + clusters.shape[1:], clusters.dtype)
    out_counts = np.empty((n_batch,) + cluster_counts.shape[1:], cluster_counts.dtype)
    out_means = np.empty((n_batch,) + means.shape[1:], means.dtype)
    out_types = np.empty((n_batch,) + types.shape[1:], types.dtype)
    out_type_counts = np.empty((n_batch,) + type_counts.shape[1:], type_counts.dtype)
    out_precisions = np.empty((n_batch,) + precisions.shape[1:], precisions.dtype)
    out_overflow = np.empty(n_batch, overflow.dtype)
    for b in prange(n_batch):
        out_clusters[b] = clusters[batch_row(b, clusters)]
        out_counts[b] = cluster_counts[batch_row(b, cluster_counts)]
        out_means[b] = means[batch_row(b, means)]
        out_types[b] = types[batch_row(b, types)]
        out_type_counts[b] = type_counts[batch_row(b, type_counts)]
        out_precisions[b] = precisions[batch_row(b, precisions)]
        flag = _sweep_chain(
            model, share_clusters, n_train, prior_variance, features[batch_row(b, features)],
            n_train_clusters[batch_row(b, n_train_clusters)], out_clusters[b], out_counts[b],
            out_means[b], out_types[b], out_type_counts[b], out_precisions[b],
            alpha[batch_row(b, alpha)], alpha_types[batch_row(b, alpha_types)],
            shape[batch_row(b, shape)], rate[batch_row(b, rate)],
            uniforms[batch_row(b, uniforms)], positions[batch_row(b, positions)],
            cluster_supply[batch_row(b, cluster_supply)], type_supply[batch_row(b, type_supply)],
            cluster_pool[batch_row(b, cluster_pool)], type_pool[batch_row(b, type_pool)],
            pair_moves, partners[batch_row(b, partners)], pair_uniforms[batch_row(b, pair_uniforms)],
            pair_normals[batch_row(b, pair_normals)],
        )
        out_overflow[b] = overflow[batch_row(b, overflow)] | flag
    return out_clusters, out_counts, out_means, out_types, out_type_counts, out_precisions, out_overflow


# The sweep runs as an XLA custom call (inference.native.ffi): no Python between XLA and the numba
# loop, the chains of a vmap in parallel on numba's threads, and a program that calls it can be
# kept in JAX's persistent compilation cache. Arguments: σ² (float64 bits, int32 (2,)), the flags
# (model, share_clusters, n_train, pair moves; int32), then those of :func:`numba_sweep` in its order
# (integers int32, reals in the model's float dtype; without pair moves, partners and their draws
# hold one dummy row). Results: the carry's arrays.
@njit(inline="always")
def _sweep_call(frame, real):
    done, code = prologue(frame, 24, 7)
    if done:
        return code
    batch, n_lead, n_batch = batch_layout(frame, 1)
    prior_variance = float64_arg(frame, 0)[0]
    at = (batch, n_lead, n_batch)
    flags = batched_vectors(frame, 1, *at, I32)[0]
    outputs = _sweep_batch(
        np.int64(n_batch), np.int64(flags[0]), flags[1] != 0, np.int64(flags[2]), prior_variance,
        batched_matrices(frame, 2, *at, real), batched_scalars(frame, 3, *at, I32),
        batched_vectors(frame, 4, *at, I32), batched_vectors(frame, 5, *at, I32),
        batched_matrices(frame, 6, *at, real), batched_vectors(frame, 7, *at, I32),
        batched_vectors(frame, 8, *at, I32), batched_matrices(frame, 9, *at, real),
        batched_scalars(frame, 10, *at, I32), batched_scalars(frame, 11, *at, real),
        batched_scalars(frame, 12, *at, real), batched_vectors(frame, 13, *at, real),
        batched_vectors(frame, 14, *at, real), batched_matrices(frame, 15, *at, real),
        batched_matrices(frame, 16, *at, I32), batched_matrices(frame, 17, *at, real),
        batched_matrices(frame, 18, *at, real), batched_matrices(frame, 19, *at, real),
        batched_matrices(frame, 20, *at, real), flags[3] != 0, batched_vectors(frame, 21, *at, I32),
        batched_vectors(frame, 22, *at, real), batched_matrices(frame, 23, *at, real))
    clusters, counts, means, types, type_counts, precisions, overflow = outputs
    write_result(frame, 0, clusters, I32)
    write_result(frame, 1, counts, I32)
    write_result(frame, 2, means, real)
    write_result(frame, 3, types, I32)
    write_result(frame, 4, type_counts, I32)
    write_result(frame, 5, precisions, real)
    write_result(frame, 6, overflow, I32)
    return 0


def _sweep_f32(frame):
    return _sweep_call(frame, np.float32(0))


def _sweep_f64(frame):
    return _sweep_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_supervised_sweep_float32": _sweep_f32, "latentzoo_supervised_sweep_float64": _sweep_f64}


def numba_sweep(config, carry, features, n_train, n_train_clusters, alpha, alpha_types, shape, rate, draws,
                partners):
    """The assignment sweep on the CPU (numba, as an XLA custom call), with the same random numbers
    as ``_xla_sweep``: the same arguments (``config`` with ``model``, ``share_clusters`` and ``prior_variance``;
    ``carry`` the sweep's NamedTuple of clusters, counts, means, types, type counts, precisions
    and overflow; ``draws`` its random numbers, with pair moves when they hold pair uniforms;
    ``partners`` the pairs' second references) and a carry of the same type."""
    real = jnp.dtype(features.dtype)
    integer = lambda array: jnp.asarray(array, jnp.int32)  # noqa: E731
    floating = lambda array: jnp.asarray(array, real)  # noqa: E731
    fields = (carry.clusters, carry.cluster_counts, carry.means, carry.types, carry.type_counts, carry.precisions,
              carry.overflow)
    kinds = (integer, integer, floating, integer, integer, floating, integer)
    result_shapes = tuple(jax.ShapeDtypeStruct(array.shape, jnp.int32 if kind is integer else real)
                          for array, kind in zip(fields, kinds))
    name = f"latentzoo_supervised_sweep_{real.name}"
    register_handler(name, HANDLERS[name])
    pair_moves = draws.pair_uniforms.shape[-1] > 0
    pair_uniforms, pair_normals = draws.pair_uniforms, draws.pair_normals
    if not pair_moves:  # one dummy row: the custom call's arrays are never empty
        partners = jnp.zeros((1,), jnp.int32)
        pair_uniforms, pair_normals = jnp.zeros((1,), real), jnp.zeros((1, features.shape[-1]), real)
    outputs = jax.ffi.ffi_call(name, result_shapes, vmap_method="expand_dims")(
        float64_bits(config.prior_variance),
        integer([config.model, config.share_clusters, n_train, pair_moves]),
        floating(features), integer(n_train_clusters), *(kind(array) for array, kind in zip(fields, kinds)),
        floating(alpha), floating(alpha_types), floating(shape), floating(rate), floating(draws.uniforms),
        integer(draws.positions), floating(draws.cluster_supply), floating(draws.type_supply),
        floating(draws.cluster_pool), floating(draws.type_pool), integer(partners), floating(pair_uniforms),
        floating(pair_normals),
    )
    return type(carry)(*(output.astype(array.dtype) for output, array in zip(outputs, fields)))
