"""Split–merge moves of a Dirichlet-process mixture on the CPU, compiled by numba (the ``"numba"``
backend of :func:`inference.neal.build_kernel` when the moves propose by sequential allocation
and the family declares a ``native_predictive``).

XLA twin: :func:`numba_split_merge_moves` — ``inference.split_merge.split_merge_moves`` (the
moves of :func:`inference.split_merge.split_merge_move` with ``launch_scans=0``: informed
merges, sequential allocation, the same random numbers from
:func:`inference.split_merge.move_uniforms`).

Equality test: tests/test_split_merge.py::test_numba_and_xla_dp_moves_give_the_same_chain.

Why a twin. Under ``vmap`` the XLA moves run every chain's allocation loop as long as the
longest, one small operation at a time, make several passes over all N points per move (the
order keys, the anchors, the counts), and compute the K_max² merge gains at the start of every
sweep. Here each chain runs its own loop over the points in play and over its active clusters,
the chains in parallel on the CPU's threads, in one XLA custom call per sweep (:mod:`inference.native.ffi`).

The families: those of :mod:`inference.native.collapsed_sweep` (``"normal_known"``,
``"normal_gamma"``), whose predictive this module takes from there; their log marginal
likelihoods are here (:func:`_log_marginal`). The generic pieces of a move (the pair
probabilities g, the anchors, the pair's draw) are shared with
:mod:`inference.native.supervised_moves`.
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
import numpy as np
from numba import njit, prange

from inference.components import NativePredictive
from inference.native.collapsed_sweep import (_KIND_INDEX, _LOG_2PI, _cache_row, _log_of_product, _row_size, _score,
                                              native_arguments)
from inference.native.ffi import (I32, batch_layout, batched_matrices, batched_scalars, batched_vectors, float64_bits,
                                  float64_matrix, prologue, register_handler, write_result)
from inference.native.supervised_sweep import batch_row
from inference.split_merge import UNIFORM_SHARE

__all__ = ["numba_split_merge_moves"]


# ----------------------------------------------------------------------------------------------
# Pieces of a move shared with the supervised DP's moves
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _log_add_exp(a, b):
    top = max(a, b)
    if top == -np.inf:
        return -np.inf
    return top + math.log1p(math.exp(-abs(a - b)))


@njit(cache=True, nogil=True)
def _safe_log(value):
    return math.log(value) if value > 0.0 else -np.inf


@njit(cache=True, nogil=True)
def _log_pair_probability(gain, log_total, n_clusters):
    """log g({a, b} | z) (``inference.split_merge._log_pair_probability``)."""
    if gain == -np.inf:
        return -np.inf
    n_pairs = max(n_clusters * (n_clusters - 1) // 2, 1)
    return _log_add_exp(math.log(UNIFORM_SHARE) - math.log(n_pairs),
                        math.log1p(-UNIFORM_SHARE) + gain - log_total)


@njit(cache=True, nogil=True)
def _nth_member(mask, uniform, size):
    """The ⌊uniform · size⌋-th index (0-based) where ``mask`` holds."""
    rank = min(math.floor(uniform * size), size - 1)
    seen = 0
    for index in range(mask.shape[0]):
        if mask[index]:
            if seen == rank:
                return index
            seen += 1
    return 0


@njit(cache=True, nogil=True)
def _set_row(gains, slot, row):
    row[slot] = -np.inf
    gains[slot, :] = row
    gains[:, slot] = row


@njit(cache=True, nogil=True)
def _live_slots(active, live):
    """Write the active slots, in increasing order, into ``live``; return their number."""
    n_live = 0
    for slot in range(active.shape[0]):
        if active[slot]:
            live[n_live] = slot
            n_live += 1
    return n_live


@njit(cache=True, nogil=True)
def _pairs_log_total(gains, live, n_clusters):
    """log Σ exp(Δ_ab) over the pairs a < b of live slots (0 when there is none)."""
    top = -np.inf
    for a in range(n_clusters):
        for b in range(a + 1, n_clusters):
            top = max(top, gains[live[a], live[b]])
    if not np.isfinite(top):
        top = 0.0
    total = 0.0
    for a in range(n_clusters):
        for b in range(a + 1, n_clusters):
            total += math.exp(gains[live[a], live[b]] - top)
    return top + _safe_log(total)


@njit(cache=True, nogil=True)
def _draw_pair(gains, live, n_clusters, log_total, uniform, cumulative):
    """The pair (a, b) of a merge drawn from g by inverse CDF over the pairs in row-major order
    (``inference.split_merge._inverse_cdf``; ``live`` is ascending); ``cumulative`` is scratch."""
    n_slots = gains.shape[0]
    total, n_pairs = 0.0, 0
    for a in range(n_clusters):
        for b in range(a + 1, n_clusters):
            total += math.exp(_log_pair_probability(gains[live[a], live[b]], log_total, n_clusters))
            cumulative[n_pairs] = total
            n_pairs += 1
    threshold = uniform * total
    n_pairs = 0
    for a in range(n_clusters):
        for b in range(a + 1, n_clusters):
            if cumulative[n_pairs] > threshold:
                return live[a], live[b]
            n_pairs += 1
    return n_slots - 1, n_slots - 1


@njit(cache=True, nogil=True)
def _split_state_log_total(gains, live, n_clusters, split_slot, row_a, row_b, pair_ab):
    """log Σ exp over the pairs of the state a split proposes: the current pairs without the split
    slot C, A's and B's rows against the other clusters, and (A, B)."""
    top = pair_ab
    for a in range(n_clusters):
        top = max(top, max(row_a[live[a]], row_b[live[a]]))
        if live[a] != split_slot:
            for b in range(a + 1, n_clusters):
                if live[b] != split_slot:
                    top = max(top, gains[live[a], live[b]])
    if not np.isfinite(top):
        top = 0.0
    total = math.exp(pair_ab - top)
    for a in range(n_clusters):
        total += math.exp(row_a[live[a]] - top) + math.exp(row_b[live[a]] - top)
        if live[a] != split_slot:
            for b in range(a + 1, n_clusters):
                if live[b] != split_slot:
                    total += math.exp(gains[live[a], live[b]] - top)
    return top + _safe_log(total)


@njit(cache=True, nogil=True)
def _propose(move_kind, choice, keys, assignments, counts, active, gains, live, n_clusters, log_total, cumulative,
             in_play):
    """The proposal of one move (``inference.split_merge.split_merge_move``): split (``move_kind``
    < 1/2, or a single cluster) of a uniform cluster at two uniform anchors, or merge of a pair
    drawn from g with an anchor uniform in each cluster; then the points in play in the order
    of their ``keys``. Returns (possible, is_split, split_slot, pair_low, pair_high, i, j, order);
    ``possible`` is False for a split of a one-point cluster (nothing is proposed)."""
    is_split = n_clusters <= 1 or move_kind < 0.5
    split_slot, pair_low, pair_high, i, j = 0, 0, 0, 0, 0
    if is_split:
        split_slot = _nth_member(active, choice[0], n_clusters)
        n_split = counts[split_slot]
        if n_clusters < 1 or n_split < 2:
            return False, is_split, split_slot, pair_low, pair_high, i, j, in_play[:0]
        in_split = assignments == split_slot
        i = _nth_member(in_split, choice[1], n_split)
        in_split[i] = False
        j = _nth_member(in_split, choice[2], n_split - 1)
    else:
        pair_low, pair_high = _draw_pair(gains, live, n_clusters, log_total, choice[0], cumulative)
        first = pair_low if choice[3] < 0.5 else pair_high
        second = pair_low + pair_high - first
        i = _nth_member(assignments == first, choice[1], counts[first])
        j = _nth_member(assignments == second, choice[2], counts[second])
    label_i, label_j = assignments[i], assignments[j]
    n_play = 0
    for n in range(assignments.shape[0]):
        if (assignments[n] == label_i or assignments[n] == label_j) and n != i and n != j:
            in_play[n_play] = n
            n_play += 1
    play = in_play[:n_play]
    order = play[np.argsort(keys[play], kind="mergesort")]  # stable, as jnp.argsort
    return True, is_split, split_slot, pair_low, pair_high, i, j, order


@njit(cache=True, nogil=True)
def _log_acceptance(is_split, log_posterior_ratio, log_g, n_merged_clusters, size_i, size_j, log_q):
    """The log Metropolis–Hastings ratio of a split (or, negated, of a merge) from the posterior
    ratio (split / merged), the merge's pair probability and the allocation's log q."""
    size_both = size_i + size_j
    log_kind = 0.0 if n_merged_clusters == 1 else math.log(0.5)
    log_split_proposal = (log_kind - math.log(n_merged_clusters) - math.log(size_both)
                          - math.log(size_both - 1.0) + log_q)
    log_merge_proposal = math.log(0.25) + log_g - math.log(size_i) - math.log(size_j)
    log_ratio = log_posterior_ratio + log_merge_proposal - log_split_proposal
    return log_ratio if is_split else -log_ratio


@njit(cache=True, nogil=True)
def _decide(is_split, log_posterior_ratio, log_q, size_i, size_j, accept, gains, live, n_clusters, log_total,
            split_slot, pair_low, pair_high, row_a, row_b, pair_ab, counts):
    """Accept or reject a proposed move: g of the pair in the split state (for a split, from the
    current gains without C, A's and B's rows ``row_a``/``row_b`` and the gain ``pair_ab`` of
    merging A and B), the Hastings ratio, the acceptance uniform, and a free slot for an
    accepted split. Returns (accepted, overflow, new slot; -1 when none is free)."""
    if is_split:
        log_total_split = _split_state_log_total(gains, live, n_clusters, split_slot, row_a, row_b, pair_ab)
        log_g = _log_pair_probability(pair_ab, log_total_split, n_clusters + 1)
        n_merged_clusters = n_clusters
    else:
        log_g = _log_pair_probability(gains[pair_low, pair_high], log_total, n_clusters)
        n_merged_clusters = n_clusters - 1
    log_ratio = _log_acceptance(is_split, log_posterior_ratio, log_g, n_merged_clusters, size_i, size_j, log_q)
    accepted = _safe_log(accept) < log_ratio
    new_slot = -1
    for slot in range(counts.shape[0]):
        if counts[slot] == 0:
            new_slot = slot
            break
    overflow = accepted and is_split and new_slot < 0
    return accepted and not overflow, overflow, new_slot


@njit(cache=True, nogil=True)
def _apply_split(assignments, counts, gains, order, on_i, j, split_slot, new_slot, size_i, size_j, row_a, row_b,
                 pair_ab):
    """An accepted split: j's side to ``new_slot``, the counts, and the gains rows of A (in C's
    slot) and B and their pair."""
    for k in order:
        if not on_i[k]:
            assignments[k] = new_slot
    assignments[j] = new_slot
    counts[split_slot], counts[new_slot] = np.int32(size_i), np.int32(size_j)
    _set_row(gains, split_slot, row_a)
    _set_row(gains, new_slot, row_b)
    gains[split_slot, new_slot] = pair_ab
    gains[new_slot, split_slot] = pair_ab


@njit(cache=True, nogil=True)
def _apply_merge(assignments, counts, gains, label_i, label_j, row_merged, scratch_row):
    """An accepted merge: i's cluster into j's slot, the counts, the gains rows (i's emptied,
    j's the merged cluster's ``row_merged``)."""
    for n in range(assignments.shape[0]):
        if assignments[n] == label_i:
            assignments[n] = label_j
    counts[label_j] += counts[label_i]
    counts[label_i] = 0
    scratch_row[:] = -np.inf
    _set_row(gains, label_i, scratch_row)
    _set_row(gains, label_j, row_merged)


# ----------------------------------------------------------------------------------------------
# The families' marginal likelihoods
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _log_marginal(kind, uniform_hyper, hyper, count, total, total_sq, scratch):
    """log m(x_1..n) of a set with statistics (count, Σx, Σx²): ``"normal_known"`` as
    ``zoo.dirichlet.known_precision._log_marginal``, ``"normal_gamma"`` as
    ``zoo.dirichlet.families._ng_log_marginal``. With ``uniform_hyper`` the terms that depend
    on the count only are computed once, and Σ a_n log b_n is one log per eight features."""
    n_features = total.shape[0]
    safe_count = max(count, 1.0)
    result = 0.0
    if kind == 0:
        for d in range(n_features):
            if d == 0 or not uniform_hyper:
                tau, mean0, p0 = hyper[0, d], hyper[1, d], hyper[2, d]
                p_n = p0 + count * tau
                count_terms = 0.5 * count * (math.log(tau) - _LOG_2PI) + 0.5 * (math.log(p0) - math.log(p_n))
                shrink = p0 / p_n
            sample_mean = total[d] / safe_count
            within = max(total_sq[d] - total[d] * sample_mean, 0.0)
            between = count * (sample_mean - mean0) ** 2 * shrink
            result += count_terms - 0.5 * tau * (within + between)
        return result
    for d in range(n_features):
        if d == 0 or not uniform_hyper:
            mean0, kappa0, shape0, rate0 = hyper[0, d], hyper[1, d], hyper[2, d], hyper[3, d]
            kappa_n = kappa0 + count
            shape_n = shape0 + 0.5 * count
            count_terms = (math.lgamma(shape_n) - math.lgamma(shape0) + shape0 * math.log(rate0)
                           + 0.5 * (math.log(kappa0) - math.log(kappa_n)))
            shrink = kappa0 / kappa_n
        sample_mean = total[d] / safe_count
        within = max(total_sq[d] - total[d] * sample_mean, 0.0)
        rate_n = rate0 + 0.5 * (within + count * (sample_mean - mean0) ** 2 * shrink)
        result += count_terms
        if uniform_hyper:
            scratch[d] = rate_n
        else:
            result -= shape_n * math.log(rate_n)
    if uniform_hyper:
        result -= shape_n * _log_of_product(scratch, n_features)
    return result - 0.5 * count * n_features * _LOG_2PI


@njit(cache=True, nogil=True)
def _gains_against(kind, uniform_hyper, hyper, row_count, row_total, row_total_sq, counts, total, total_sq, single,
                   log_alpha, valid, out, merged_total, merged_total_sq, scratch):
    """Δ of merging a set (``row_count`` points, Σx, Σx²) with every slot's cluster; -inf where
    ``valid`` is False (``inference.split_merge._gains_against``)."""
    if row_count <= 0:
        out[:] = -np.inf
        return
    n_features = row_total.shape[0]
    own = _log_marginal(kind, uniform_hyper, hyper, row_count, row_total, row_total_sq, scratch)
    for slot in range(counts.shape[0]):
        if not valid[slot]:
            out[slot] = -np.inf
            continue
        for d in range(n_features):
            merged_total[d] = row_total[d] + total[slot, d]
            merged_total_sq[d] = row_total_sq[d] + total_sq[slot, d]
        size = float(counts[slot])
        out[slot] = (-log_alpha + math.lgamma(row_count + size) - math.lgamma(row_count) - math.lgamma(size)
                     + _log_marginal(kind, uniform_hyper, hyper, row_count + size, merged_total, merged_total_sq,
                                     scratch)
                     - own - single[slot])


# ----------------------------------------------------------------------------------------------
# The moves
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _moves_chain(kind, uniform_power, uniform_hyper, hyper, data, log_alpha, assignments, counts, move_kind, choice,
                 keys, uniforms, accept, moves):
    """``move_kind.shape[0]`` moves of one chain, in place on assignments and counts; adds the
    counts (splits proposed, accepted, merges proposed, accepted) to ``moves``; returns whether
    an accepted split found no free slot."""
    n_points, n_features = data.shape
    n_slots = counts.shape[0]
    row_size = _row_size(kind, n_features)
    scratch = np.empty(n_features)
    merged_total, merged_total_sq = np.empty(n_features), np.empty(n_features)  # _gains_against's scratch
    both_total, both_total_sq = np.empty(n_features), np.empty(n_features)  # the two sides together
    total, total_sq = np.zeros((n_slots, n_features)), np.zeros((n_slots, n_features))
    for n in range(n_points):
        for d in range(n_features):
            total[assignments[n], d] += data[n, d]
            total_sq[assignments[n], d] += data[n, d] * data[n, d]
    single = np.empty(n_slots)
    for slot in range(n_slots):
        single[slot] = _log_marginal(kind, uniform_hyper, hyper, float(counts[slot]), total[slot], total_sq[slot],
                                     scratch)
    active = counts > 0
    row_a, row_b, row_merged = np.empty(n_slots), np.empty(n_slots), np.empty(n_slots)
    # The merge gains of every pair a < b of active slots, from a's row (merge_gains).
    gains = np.full((n_slots, n_slots), -np.inf)
    for a in range(n_slots):
        if active[a]:
            later = active.copy()
            later[:a + 1] = False
            _gains_against(kind, uniform_hyper, hyper, float(counts[a]), total[a], total_sq[a], counts, total,
                           total_sq, single, log_alpha, later, row_a, merged_total, merged_total_sq, scratch)
            for b in range(a + 1, n_slots):
                if later[b]:
                    gains[a, b] = row_a[b]
                    gains[b, a] = row_a[b]
    live = np.empty(n_slots, np.int64)
    cumulative = np.empty(n_slots * n_slots)
    side_total, side_total_sq = np.zeros((2, n_features)), np.zeros((2, n_features))
    side_row = np.empty((2, row_size))
    z = np.empty(2 * n_features)  # (x, x²) of the point visited
    on_i = np.zeros(n_points, np.bool_)
    in_play = np.empty(n_points, np.int64)
    overflow = False
    for move in range(move_kind.shape[0]):
        active = counts > 0
        n_clusters = _live_slots(active, live)
        log_total = _pairs_log_total(gains, live, n_clusters)
        possible, is_split, split_slot, pair_low, pair_high, i, j, order = _propose(
            move_kind[move], choice[move], keys[move], assignments, counts, active, gains, live, n_clusters, log_total,
            cumulative, in_play)
        if not possible:
            continue
        label_i, label_j = assignments[i], assignments[j]
        # Sequential allocation from the anchors (forced to the current division for a merge).
        for side, anchor in ((0, i), (1, j)):
            for d in range(n_features):
                side_total[side, d] = data[anchor, d]
                side_total_sq[side, d] = data[anchor, d] * data[anchor, d]
            _cache_row(kind, uniform_hyper, hyper, 1.0, side_total[side], side_total_sq[side], side_row[side], scratch)
        size_i, size_j, log_q = 1.0, 1.0, 0.0
        on_i[i], on_i[j] = True, False
        for k in order:
            for d in range(n_features):
                z[d] = data[k, d]
                z[n_features + d] = data[k, d] * data[k, d]
            logit_i = math.log(size_i) + _score(kind, uniform_power, side_row[0], z, n_features)
            logit_j = math.log(size_j) + _score(kind, uniform_power, side_row[1], z, n_features)
            norm = _log_add_exp(logit_i, logit_j)
            if is_split:
                to_i = uniforms[move, k] < math.exp(logit_i - norm)
            else:
                to_i = assignments[k] == label_i
            log_q += (logit_i if to_i else logit_j) - norm
            side = 0 if to_i else 1
            for d in range(n_features):
                side_total[side, d] += z[d]
                side_total_sq[side, d] += z[n_features + d]
            if to_i:
                size_i += 1.0
                size = size_i
            else:
                size_j += 1.0
                size = size_j
            _cache_row(kind, uniform_hyper, hyper, size, side_total[side], side_total_sq[side], side_row[side],
                       scratch)
            on_i[k] = to_i
        size_both = size_i + size_j
        log_crp_ratio = log_alpha + math.lgamma(size_i) + math.lgamma(size_j) - math.lgamma(size_both)
        for d in range(n_features):
            both_total[d] = side_total[0, d] + side_total[1, d]
            both_total_sq[d] = side_total_sq[0, d] + side_total_sq[1, d]
        log_marginal_i = _log_marginal(kind, uniform_hyper, hyper, size_i, side_total[0], side_total_sq[0], scratch)
        log_marginal_j = _log_marginal(kind, uniform_hyper, hyper, size_j, side_total[1], side_total_sq[1], scratch)
        log_marginal_both = _log_marginal(kind, uniform_hyper, hyper, size_both, both_total, both_total_sq, scratch)
        log_posterior_ratio = log_crp_ratio + log_marginal_i + log_marginal_j - log_marginal_both
        if is_split:
            others = active.copy()
            others[split_slot] = False
            _gains_against(kind, uniform_hyper, hyper, size_i, side_total[0], side_total_sq[0], counts, total,
                           total_sq, single, log_alpha, others, row_a, merged_total, merged_total_sq, scratch)
            _gains_against(kind, uniform_hyper, hyper, size_j, side_total[1], side_total_sq[1], counts, total,
                           total_sq, single, log_alpha, others, row_b, merged_total, merged_total_sq, scratch)
        pair_ab = -log_posterior_ratio  # Δ of merging A and B, as merge_gains has it
        accepted, overflow_now, new_slot = _decide(
            is_split, log_posterior_ratio, log_q, size_i, size_j, accept[move], gains, live, n_clusters, log_total,
            split_slot, pair_low, pair_high, row_a, row_b, pair_ab, counts)
        overflow = overflow or overflow_now
        if accepted and is_split:
            _apply_split(assignments, counts, gains, order, on_i, j, split_slot, new_slot, size_i, size_j, row_a,
                         row_b, pair_ab)
            total[split_slot], total_sq[split_slot] = side_total[0], side_total_sq[0]
            total[new_slot], total_sq[new_slot] = side_total[1], side_total_sq[1]
            single[split_slot], single[new_slot] = log_marginal_i, log_marginal_j
        elif accepted:
            valid = active.copy()
            valid[label_i], valid[label_j] = False, False
            _gains_against(kind, uniform_hyper, hyper, size_both, both_total, both_total_sq, counts, total, total_sq,
                           single, log_alpha, valid, row_merged, merged_total, merged_total_sq, scratch)
            _apply_merge(assignments, counts, gains, label_i, label_j, row_merged, row_a)
            total[label_i], total_sq[label_i] = 0.0, 0.0
            total[label_j], total_sq[label_j] = both_total, both_total_sq
            single[label_i] = 0.0  # log m of no points
            single[label_j] = log_marginal_both
        counter = 0 if is_split else 2
        moves[counter] += 1
        if accepted:
            moves[counter + 1] += 1
    return overflow


@njit(parallel=True, cache=True, nogil=True)
def _moves_batch(n_batch, kind, uniform_power, uniform_hyper, hyper, data, log_alpha, assignments, counts, move_kind,
                 choice, keys, uniforms, accept):
    # Every input has a leading batch axis of size n_batch or 1 (shared by all chains), the
    # prior ``hyper`` too: one (n_hyper, D) row per chain when it is traced (SCDP-2's types).
    out_assignments = np.empty((n_batch,) + assignments.shape[1:], assignments.dtype)
    out_counts = np.empty((n_batch,) + counts.shape[1:], counts.dtype)
    out_overflow = np.zeros(n_batch, np.bool_)
    out_moves = np.zeros((n_batch, 4), np.int32)
    for b in prange(n_batch):
        out_assignments[b] = assignments[batch_row(b, assignments)]
        out_counts[b] = counts[batch_row(b, counts)]
        out_overflow[b] = _moves_chain(
            kind, uniform_power, uniform_hyper, hyper[batch_row(b, hyper)], data[batch_row(b, data)],
            log_alpha[batch_row(b, log_alpha)],
            out_assignments[b], out_counts[b], move_kind[batch_row(b, move_kind)], choice[batch_row(b, choice)],
            keys[batch_row(b, keys)], uniforms[batch_row(b, uniforms)], accept[batch_row(b, accept)], out_moves[b])
    return out_assignments, out_counts, out_overflow, out_moves


# The moves run as an XLA custom call (inference.native.ffi; see collapsed_sweep). Arguments: the
# fixed prior (float64 bits, n_hyper × D × 2 int32) and the traced one (n_hyper × D, the model's
# float dtype), one of them a placeholder as the flags say; the flags (kind, uniform power,
# uniform prior, traced prior; int32); data; log α; assignments, counts (int32); the draws of the
# moves (kind, choice, keys (uint32), uniforms, accept). Results: assignments, counts (int32),
# overflow (bool), moves (int32 (4,)). The kernel reads the data and the prior in float64, so that
# its squares and sums are those of the float64 values.
@njit(inline="always")
def _moves_call(frame, real):
    done, code = prologue(frame, 12, 4)
    if done:
        return code
    batch, n_lead, n_batch = batch_layout(frame, 1)
    at = (batch, n_lead, n_batch)
    flags = batched_vectors(frame, 2, *at, I32)[0]
    if flags[3] != 0:
        hyper = batched_matrices(frame, 1, *at, real).astype(np.float64)
    else:
        fixed = float64_matrix(frame, 0, n_lead)
        hyper = fixed.reshape((1, fixed.shape[0], fixed.shape[1]))
    out_assignments, out_counts, out_overflow, out_moves = _moves_batch(
        np.int64(n_batch), np.int64(flags[0]), flags[1] != 0, flags[2] != 0, hyper,
        batched_matrices(frame, 3, *at, real).astype(np.float64), batched_scalars(frame, 4, *at, real),
        batched_vectors(frame, 5, *at, I32), batched_vectors(frame, 6, *at, I32), batched_vectors(frame, 7, *at, real),
        batched_matrices(frame, 8, *at, real), batched_matrices(frame, 9, *at, np.uint32(0)),
        batched_matrices(frame, 10, *at, real), batched_vectors(frame, 11, *at, real))
    write_result(frame, 0, out_assignments, I32)
    write_result(frame, 1, out_counts, I32)
    write_result(frame, 2, out_overflow.astype(np.uint8), np.uint8(0))
    write_result(frame, 3, out_moves, I32)
    return 0


def _moves_f32(frame):
    return _moves_call(frame, np.float32(0))


def _moves_f64(frame):
    return _moves_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_dp_moves_float32": _moves_f32, "latentzoo_dp_moves_float64": _moves_f64}


def numba_split_merge_moves(native: NativePredictive, data, assignments, counts, log_alpha, draws):
    """The moves of :func:`inference.split_merge.split_merge_moves` (``launch_scans=0``) on the
    CPU as an XLA custom call, for a family with a :class:`inference.components.NativePredictive`.

    ``draws`` is the :class:`inference.split_merge.MoveUniforms` of every move (leading axis the
    move, move m from ``fold_in(rng_key, m)``). ``native.hyper`` is usually the family's fixed
    prior (tuples of floats); it may also be an array (n_hyper, D) computed in the traced
    program, such as SCDP-2's prior of the precisions, which changes every sweep (then no
    feature is assumed to share another's prior). Returns (assignments, counts, moves (int32
    (4,): splits proposed, accepted, merges proposed, accepted), overflow).
    """
    shapes = (
        jax.ShapeDtypeStruct(assignments.shape, jnp.int32),
        jax.ShapeDtypeStruct(counts.shape, jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_),
        jax.ShapeDtypeStruct((4,), jnp.int32),
    )
    dtype = jnp.dtype(data.dtype)
    if isinstance(native.hyper, tuple):
        kind, uniform_power, uniform_hyper, fixed_hyper = native_arguments(native, data.shape[-1])
        fixed, traced = float64_bits(fixed_hyper), jnp.zeros((1, 1), dtype)
    else:
        kind, uniform_power, uniform_hyper = _KIND_INDEX[native.kind], False, False
        fixed, traced = float64_bits(np.zeros((1, 1))), jnp.asarray(native.hyper, dtype)
    flags = jnp.asarray([kind, uniform_power, uniform_hyper, not isinstance(native.hyper, tuple)], jnp.int32)
    name = f"latentzoo_dp_moves_{dtype.name}"
    register_handler(name, HANDLERS[name])
    new_assignments, new_counts, overflow, moves = jax.ffi.ffi_call(name, shapes, vmap_method="expand_dims")(
        fixed, traced, flags, data, jnp.asarray(log_alpha, dtype), assignments.astype(jnp.int32),
        counts.astype(jnp.int32), draws.kind.astype(dtype), draws.choice.astype(dtype),
        draws.keys.astype(jnp.uint32), draws.uniforms.astype(dtype), draws.accept.astype(dtype))
    return new_assignments.astype(assignments.dtype), new_counts.astype(counts.dtype), moves, overflow
