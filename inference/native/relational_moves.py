"""The split–merge moves of an infinite-relational-model domain (Jain & Neal 2004, restricted Gibbs
launch states) on the CPU, compiled by numba (the moves of the ``"numba"`` backend of
``zoo.relational.infinite``).

XLA twin: :func:`numba_split_merge_moves` — ``zoo.relational._infinite_moves.split_merge_moves``:
the same pair, launch, restricted scans and Metropolis–Hastings test, from the same random
numbers drawn in XLA (``zoo.relational._infinite_moves.move_draws``), so both give the same chain.
The individual's conditional is that of the Gibbs visits (:mod:`inference.native.relational_gibbs`:
cells collected, taken out of their blocks, scored in a slot, put back), restricted to the two
sides; a move works on the chain's state in place and restores it when rejected. This module is
pure array code and imports nothing of ``zoo``.

Equality test: tests/test_infinite.py::test_numba_and_xla_moves_give_the_same_chain (and the
moves against the exact posterior,
tests/test_infinite.py::test_gibbs_with_split_merge_moves_matches_the_exact_posterior).

The moves run through ``jax.pure_callback``, one host call per domain and sweep for all chains.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit, prange

from inference.native.relational_gibbs import _block_log_beta, add_predictive, collect_cells, shift_cells
from inference.native.supervised_sweep import batch_row, flatten_batch

__all__ = ["numba_split_merge_moves"]


@njit(cache=True, nogil=True)
def _local_log_joint(sizes, counts, tables, alpha, domain, slot_a, slot_b, relation_n_values, first_domain,
                     second_domain):
    """The terms of log P(y, z | α, γ) a move of ``domain`` between ``slot_a`` and ``slot_b`` can change:
    the domain's CRP prior without its constant (K log α + Σ_k log Γ(n_k)) and L(γ + n) - L(γ) of
    every non-empty block with one of the two slots as an argument of that domain. Differences of
    it between two states that differ only there are differences of the log joint."""
    total = 0.0
    n_clusters = 0
    for k in range(sizes.shape[1]):
        if sizes[domain, k] > 0:
            n_clusters += 1
            total += math.lgamma(sizes[domain, k])
    total += n_clusters * math.log(alpha[domain])
    for r in range(counts.shape[0]):
        as_first, as_second = first_domain[r] == domain, second_domain[r] == domain
        if not (as_first or as_second):
            continue
        n_values = relation_n_values[r]
        table = tables[r]
        prior = -table[n_values, 0]
        for u in range(n_values):
            prior += table[u, 0]
        for k in range(counts.shape[1]):
            row = as_first and (k == slot_a or k == slot_b)
            for l in range(counts.shape[2]):
                if (row or (as_second and (l == slot_a or l == slot_b))) and counts[r, k, l, :n_values].sum() > 0:
                    total += _block_log_beta(table, counts[r, k, l], n_values) - prior
    return total


@njit(cache=True, nogil=True)
def _relocate(individual, slot, domain, z, sizes, counts, cells, scratch):
    """Move ``individual`` (global index) of ``domain`` to ``slot``, its cells with it."""
    old = z[individual]
    if old == slot:
        return
    first, second, values, relation, seen, item_start, item_cell, item_position, relation_n_values = cells
    added, touched, partners, n_partners = scratch
    collect_cells(individual, z, first, second, values, relation, seen, item_start, item_cell, item_position,
                  relation_n_values, added, touched, partners, n_partners)
    shift_cells(counts, old, -1, relation_n_values, added, touched, partners, n_partners)
    shift_cells(counts, slot, 1, relation_n_values, added, touched, partners, n_partners)
    sizes[domain, old] -= 1
    sizes[domain, slot] += 1
    z[individual] = slot


@njit(cache=True, nogil=True)
def _moves_chain(z, sizes, counts, tables, alpha, draw_i, draw_j, order_uniforms, coins, scan_uniforms,
                 accept_uniforms, domain, offset, first, second, values, relation, seen, item_start, item_cell,
                 item_position, domain_sizes, relation_n_values, same_domain, first_domain, second_domain, stats):
    """Every move of one chain's ``domain`` in turn (see ``zoo.relational._infinite_moves``), in place.

    ``draw_i``, ``draw_j`` (n_moves,) the pair within the domain; ``order_uniforms`` and ``coins``
    (n_moves, n) the visiting order's keys and the launch's sides; ``scan_uniforms`` (n_moves,
    t + 1, n) one per scan and position in the order; ``accept_uniforms`` (n_moves,).
    ``stats`` (4,) is incremented. Returns whether a split found no free slot.
    """
    n_relations, n_max, _, n_values_max = counts.shape
    n = domain_sizes[domain]
    n_scans = scan_uniforms.shape[1] - 1
    added = np.zeros((n_relations, 2, n_max, n_values_max), np.int64)
    touched = np.zeros((n_relations, 2), np.bool_)
    partners = np.zeros((n_relations, 2, n_max), np.int64)
    n_partners = np.zeros((n_relations, 2), np.int64)
    work = np.zeros(n_values_max, np.int64)
    work2 = np.zeros(n_values_max, np.int64)
    priority = np.empty(n)
    overflow = False
    cells = (first, second, values, relation, seen, item_start, item_cell, item_position, relation_n_values)
    scratch = (added, touched, partners, n_partners)

    for move in range(draw_i.shape[0]):
        i, j = offset + draw_i[move], offset + draw_j[move]
        slot_i, slot_j = z[i], z[j]
        is_split = slot_i == slot_j
        stats[0 if is_split else 2] += 1
        first_free = -1
        for k in range(n_max):
            if sizes[domain, k] == 0:
                first_free = k
                break
        if is_split and first_free < 0:
            overflow = True  # rejected; the model runs again with more capacity
            continue
        slot_a, slot_b = slot_i, (first_free if is_split else slot_j)
        n_play = 0
        for k in range(n):
            member = offset + k
            if member != i and member != j and (z[member] == slot_i or z[member] == slot_j):
                priority[k] = order_uniforms[move, k]
                n_play += 1
            else:
                priority[k] = 2.0
        order = np.argsort(priority, kind="mergesort")  # stable, as jnp.argsort
        saved_z = z[offset: offset + n].copy()
        saved_sizes = sizes[domain].copy()
        saved_counts = counts.copy()
        local = (tables, alpha, domain, slot_a, slot_b, relation_n_values, first_domain, second_domain)
        log_current = _local_log_joint(sizes, counts, *local)
        # Launch: i on side A, j on side B, the points in play by their coins.
        _relocate(j, slot_b, domain, z, sizes, counts, cells, scratch)
        for position in range(n_play):
            k = order[position]
            _relocate(offset + k, slot_b if coins[move, k] else slot_a, domain, z, sizes, counts, cells, scratch)
        log_q = 0.0
        for scan in range(n_scans + 1):
            last = scan == n_scans
            for position in range(n_play):
                member = offset + order[position]
                collect_cells(member, z, first, second, values, relation, seen, item_start, item_cell,
                              item_position, relation_n_values, added, touched, partners, n_partners)
                shift_cells(counts, z[member], -1, relation_n_values, added, touched, partners, n_partners)
                sizes[domain, z[member]] -= 1
                score_a = add_predictive(np.log(sizes[domain, slot_a]), slot_a, counts, tables, relation_n_values,
                                         same_domain, added, touched, partners, n_partners, work, work2)
                score_b = add_predictive(np.log(sizes[domain, slot_b]), slot_b, counts, tables, relation_n_values,
                                         same_domain, added, touched, partners, n_partners, work, work2)
                largest = max(score_a, score_b)
                log_total = largest + np.log1p(np.exp(-abs(score_a - score_b)))
                log_a, log_b = score_a - log_total, score_b - log_total
                if last and not is_split:
                    to_b = saved_z[member - offset] == slot_j  # forced to the current division
                else:
                    to_b = scan_uniforms[move, scan, position] < np.exp(log_b)
                if last:
                    log_q += log_b if to_b else log_a
                slot = slot_b if to_b else slot_a
                shift_cells(counts, slot, 1, relation_n_values, added, touched, partners, n_partners)
                sizes[domain, slot] += 1
                z[member] = slot
        if is_split:
            log_ratio = _local_log_joint(sizes, counts, *local) - log_current - log_q
        else:  # the forced scan left the current division; merge B into A
            for k in range(n):
                if z[offset + k] == slot_b:
                    _relocate(offset + k, slot_a, domain, z, sizes, counts, cells, scratch)
            log_ratio = _local_log_joint(sizes, counts, *local) - log_current + log_q
        if np.log(accept_uniforms[move]) < log_ratio:
            stats[1 if is_split else 3] += 1
        else:
            z[offset: offset + n] = saved_z
            sizes[domain] = saved_sizes
            counts[:] = saved_counts
    return overflow


@njit(parallel=True, cache=True, nogil=True)
def _moves_batch(n_batch, domain, offset, z, sizes, counts, tables, alpha, draw_i, draw_j, order_uniforms, coins,
                 scan_uniforms, accept_uniforms, first, second, values, relation, seen, item_start, item_cell,
                 item_position, domain_sizes, relation_n_values, same_domain, first_domain, second_domain):
    # Every input has a leading batch axis of size n_batch or 1 (shared by all chains).
    out_z = np.empty((n_batch,) + z.shape[1:], np.int64)
    out_sizes = np.empty((n_batch,) + sizes.shape[1:], np.int64)
    out_counts = np.empty((n_batch,) + counts.shape[1:], np.int64)
    out_overflow = np.zeros(n_batch, np.bool_)
    out_stats = np.zeros((n_batch, 4), np.int64)
    for b in prange(n_batch):
        out_z[b] = z[batch_row(b, z)]
        out_sizes[b] = sizes[batch_row(b, sizes)]
        out_counts[b] = counts[batch_row(b, counts)]
        out_overflow[b] = _moves_chain(
            out_z[b], out_sizes[b], out_counts[b], tables[batch_row(b, tables)], alpha[batch_row(b, alpha)],
            draw_i[batch_row(b, draw_i)], draw_j[batch_row(b, draw_j)], order_uniforms[batch_row(b, order_uniforms)],
            coins[batch_row(b, coins)], scan_uniforms[batch_row(b, scan_uniforms)],
            accept_uniforms[batch_row(b, accept_uniforms)], domain, offset, first[0], second[0], values[0],
            relation[0], seen[0], item_start[0], item_cell[0], item_position[0], domain_sizes[0],
            relation_n_values[0], same_domain[0], first_domain[0], second_domain[0], out_stats[b])
    return out_z, out_sizes, out_counts, out_overflow, out_stats


# Per-chain number of dimensions of each array input of the moves, in call order (the cell
# lists and the schema's constants are shared by all chains: their batch axis has size 1).
_MOVES_INPUT_NDIMS = (1, 2, 4, 3, 1, 1, 1, 2, 2, 3, 1) + (1,) * 13


def _moves_host(domain, offset, *arrays):
    """Host side: flatten any vmapped leading axes into one batch axis, run the batch, restore the
    batch shape. Counts go in as int64, the tables and uniforms as float64."""
    kinds = (np.int64, np.int64, np.int64, np.float64, np.float64, np.int64, np.int64, np.float64, np.bool_,
             np.float64, np.float64) + (np.int64,) * 10 + (np.bool_, np.int64, np.int64)
    arrays = [np.asarray(array, kind) for array, kind in zip(arrays, kinds)]
    batch_shape, n_batch, flat = flatten_batch(arrays, _MOVES_INPUT_NDIMS)
    outputs = _moves_batch(n_batch, domain, offset, *flat)
    return tuple(output.reshape(batch_shape + output.shape[1:]).astype(kind)
                 for output, kind in zip(outputs, (np.int32, np.int32, np.int32, np.bool_, np.int32)))


def numba_split_merge_moves(z, sizes, counts, tables, alpha, draws, seen, flat, *, domain, offset, domain_sizes,
                            n_values, relation_domains):
    """The moves of ``zoo.relational._infinite_moves.split_merge_moves`` for one domain, on the host.

    ``z`` (n_individuals + 1,), ``sizes`` (D, K), ``counts`` (R, K, K, V) and ``tables`` (R, V + 1, L)
    packed as for :func:`inference.native.relational_gibbs.numba_gibbs_sweep`; ``alpha`` (D,);
    ``draws`` the moves' random numbers (leading axis the move); ``seen`` and ``flat`` the cells;
    ``domain`` and ``offset`` (its first individual in global order) static, and the schema's
    ``domain_sizes``, ``n_values`` and ``relation_domains``. Returns the new
    ``(z, sizes, counts, overflow, moves)``, moves int32 (4,): splits proposed, accepted, merges
    proposed, accepted.
    """
    shapes = (jax.ShapeDtypeStruct(z.shape, jnp.int32), jax.ShapeDtypeStruct(sizes.shape, jnp.int32),
              jax.ShapeDtypeStruct(counts.shape, jnp.int32), jax.ShapeDtypeStruct((), jnp.bool_),
              jax.ShapeDtypeStruct((4,), jnp.int32))
    first_domain = np.asarray([domains[0] for domains in relation_domains], np.int64)
    second_domain = np.asarray([domains[1] if len(domains) == 2 else -1 for domains in relation_domains], np.int64)
    constants = (np.asarray(domain_sizes, np.int64), np.asarray(n_values, np.int64), first_domain == second_domain,
                 first_domain, second_domain)
    return jax.pure_callback(
        partial(_moves_host, int(domain), int(offset)), shapes, z, sizes, counts, tables, alpha,
        draws.i, draws.j, draws.order, draws.coins, draws.uniforms, draws.accept, flat.first, flat.second,
        flat.values, flat.relation, seen, flat.item_start, flat.item_cell, flat.item_position, *constants,
        vmap_method="expand_dims")
