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

The moves run as an XLA custom call (JAX's typed FFI, :mod:`inference.native.ffi`), one per domain and sweep
for all chains, on the state the Gibbs sweep's custom call left packed.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

from inference.native.ffi import (I32, batch_element, batch_layout, buffer_flat, prologue, register_handler,
                                 ret_buffer, write_element)
from inference.native.relational_gibbs import (_block_log_beta, add_predictive, chain_state, collect_cells,
                                              shift_cells, write_chain_state)

__all__ = ["numba_split_merge_moves"]


@njit(cache=True, nogil=True)
def _local_log_joint(sizes, counts, tables, alpha, domain, slot_a, slot_b, relation_n_values, first_domain,
                     second_domain, same_domain):
    """The terms of log P(y, z | α, γ) a move of ``domain`` between ``slot_a`` and ``slot_b`` can change:
    the domain's CRP prior without its constant (K log α + Σ_k log Γ(n_k)) and L(γ + n) - L(γ) of
    every non-empty block with one of the two slots as an argument of that domain (a symmetric
    relation's blocks k ≤ l only, ``same_domain[r] == 2``). Differences of it between two states that
    differ only there are differences of the log joint."""
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
            for l in range(k if same_domain[r] == 2 else 0, counts.shape[2]):
                if (row or (as_second and (l == slot_a or l == slot_b))) and counts[r, k, l, :n_values].sum() > 0:
                    total += _block_log_beta(table, counts[r, k, l], n_values) - prior
    return total


@njit(cache=True, nogil=True)
def _relocate(individual, slot, domain, z, sizes, counts, cells, scratch):
    """Move ``individual`` (global index) of ``domain`` to ``slot``, its cells with it."""
    old = z[individual]
    if old == slot:
        return
    first, second, values, relation, seen, item_start, item_cell, item_position, relation_n_values, same_domain = cells
    added, touched, partners, n_partners = scratch
    collect_cells(individual, z, first, second, values, relation, seen, item_start, item_cell, item_position,
                  relation_n_values, same_domain, added, touched, partners, n_partners)
    shift_cells(counts, old, -1, relation_n_values, same_domain, added, touched, partners, n_partners)
    shift_cells(counts, slot, 1, relation_n_values, same_domain, added, touched, partners, n_partners)
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
    cells = (first, second, values, relation, seen, item_start, item_cell, item_position, relation_n_values,
             same_domain)
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
        local = (tables, alpha, domain, slot_a, slot_b, relation_n_values, first_domain, second_domain, same_domain)
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
                              item_position, relation_n_values, same_domain, added, touched, partners, n_partners)
                shift_cells(counts, z[member], -1, relation_n_values, same_domain, added, touched, partners,
                            n_partners)
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
                shift_cells(counts, slot, 1, relation_n_values, same_domain, added, touched, partners, n_partners)
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


# The moves run as an XLA custom call (inference.native.ffi), like the Gibbs sweep: no Python
# between XLA and the numba loop. Under vmap (chains) every argument gets the same leading axes, of
# size 1 where it is shared; the chains run one after the other. Arguments: z, sizes, counts
# (int32); tables, alpha (the model's float dtype); draw_i, draw_j (int32); order (float); coins
# (int32); scan uniforms, accept uniforms (float); first, second, values, relation, seen,
# item_start, item_cell, item_position, domain_sizes, relation_n_values, same_domain,
# first_domain, second_domain and (domain, offset) (int32). Results: z, sizes, counts (int32),
# overflow (bool) and the moves' counts (int32 (4,)), each with the batch axes.
_MOVES_ARGS, _MOVES_RETS = 25, 5


@njit(inline="always")
def _moves_call(frame, real):
    done, code = prologue(frame, _MOVES_ARGS, _MOVES_RETS)
    if done:
        return code
    z_shape, n_lead, n_chains = batch_layout(frame, 1)
    out_stats = buffer_flat(ret_buffer(frame, 4), I32)
    for chain in range(n_chains):
        z, sizes, counts, table = chain_state(frame, z_shape, n_lead, chain, real)
        alpha, _ = batch_element(frame, 4, z_shape, n_lead, chain, real)
        draw_i, _ = batch_element(frame, 5, z_shape, n_lead, chain, I32)
        draw_j, _ = batch_element(frame, 6, z_shape, n_lead, chain, I32)
        order, order_dims = batch_element(frame, 7, z_shape, n_lead, chain, real)
        coins, _ = batch_element(frame, 8, z_shape, n_lead, chain, I32)
        scans, scan_dims = batch_element(frame, 9, z_shape, n_lead, chain, real)
        accept, _ = batch_element(frame, 10, z_shape, n_lead, chain, real)
        cells = [batch_element(frame, index, z_shape, n_lead, chain, I32)[0] for index in range(11, 24)]
        where, _ = batch_element(frame, 24, z_shape, n_lead, chain, I32)
        stats = np.zeros(4, np.int64)
        overflow = _moves_chain(
            z, sizes, counts, table, alpha.astype(np.float64), draw_i.astype(np.int64), draw_j.astype(np.int64),
            order.astype(np.float64).reshape((order_dims[0], order_dims[1])),
            (coins != 0).reshape((order_dims[0], order_dims[1])),
            scans.astype(np.float64).reshape((scan_dims[0], scan_dims[1], scan_dims[2])), accept.astype(np.float64),
            np.int64(where[0]), np.int64(where[1]), cells[0], cells[1], cells[2], cells[3], cells[4], cells[5],
            cells[6], cells[7], cells[8], cells[9], cells[10].astype(np.int64), cells[11], cells[12], stats)
        write_chain_state(frame, chain, z, sizes, counts, overflow)
        write_element(out_stats, chain, stats)
    return 0


def _moves_f32(frame):
    return _moves_call(frame, np.float32(0))


def _moves_f64(frame):
    return _moves_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_irm_moves_float32": _moves_f32, "latentzoo_irm_moves_float64": _moves_f64}


def numba_split_merge_moves(z, sizes, counts, tables, alpha, draws, seen, flat, *, domain, offset, domain_sizes,
                            n_values, relation_domains, same_domain):
    """The moves of ``zoo.relational._infinite_moves.split_merge_moves`` for one domain, run by XLA
    as a custom call.

    ``z`` (n_individuals + 1,), ``sizes`` (D, K), ``counts`` (R, K, K, V) and ``tables`` (R, V + 1, L)
    packed as for :func:`inference.native.relational_gibbs.numba_gibbs_sweep`; ``alpha`` (D,);
    ``draws`` the moves' random numbers (leading axis the move); ``seen`` and ``flat`` the cells;
    ``domain`` and ``offset`` (its first individual in global order) static, and the schema's
    ``domain_sizes``, ``n_values``, ``relation_domains`` and ``same_domain`` (per relation 0, 1 over D × D, 2
    symmetric: the array :func:`inference.native.relational_gibbs.numba_gibbs_sweep` takes). Returns the new
    ``(z, sizes, counts, overflow, moves)``, moves int32 (4,): splits proposed, accepted, merges
    proposed, accepted.
    """
    shapes = (jax.ShapeDtypeStruct(z.shape, jnp.int32), jax.ShapeDtypeStruct(sizes.shape, jnp.int32),
              jax.ShapeDtypeStruct(counts.shape, jnp.int32), jax.ShapeDtypeStruct((), jnp.bool_),
              jax.ShapeDtypeStruct((4,), jnp.int32))
    real = jnp.dtype(tables.dtype).name
    first_domain = np.asarray([domains[0] for domains in relation_domains])
    second_domain = np.asarray([domains[1] if len(domains) == 2 else -1 for domains in relation_domains])
    constants = (domain_sizes, n_values, same_domain, first_domain, second_domain, (domain, offset))
    name = f"latentzoo_irm_moves_{real}"
    register_handler(name, HANDLERS[name])
    return jax.ffi.ffi_call(name, shapes, vmap_method="expand_dims")(
        z.astype(jnp.int32), sizes.astype(jnp.int32), counts.astype(jnp.int32), tables, alpha.astype(tables.dtype),
        draws.i.astype(jnp.int32), draws.j.astype(jnp.int32), draws.order.astype(tables.dtype),
        draws.coins.astype(jnp.int32), draws.uniforms.astype(tables.dtype), draws.accept.astype(tables.dtype),
        flat.first, flat.second, flat.values, flat.relation, seen.astype(jnp.int32), flat.item_start,
        flat.item_cell, flat.item_position, *(jnp.asarray(np.asarray(constant), jnp.int32) for constant in constants))
