"""The Gibbs visits of an infinite-relational-model sweep (IRM; Kemp et al. 2006, collapsed Gibbs in
the style of Neal's 2000 Algorithm 3) on the CPU, compiled by numba (the ``"numba"`` backend of
``zoo.relational.infinite``).

XLA twin: :func:`numba_gibbs_sweep` — ``zoo.relational._infinite_kernel._gibbs_domain`` (a
``lax.scan`` per domain): the same conditionals over every individual in global order, scoring only
the blocks an individual's cells fall in, with the same uniform per individual for an inverse-CDF
draw (``zoo.relational._infinite_kernel._inverse_cdf``), so both give the same chain.
``zoo.relational._infinite_kernel._numba_sweep`` packs the chain's state into the arrays this
module takes; this module is pure array code and imports nothing of ``zoo``. The pieces of a visit
(:func:`collect_cells`, :func:`shift_cells`, :func:`add_predictive`) also serve the split–merge
moves' restricted scans (:mod:`inference.native.relational_moves`).

Equality test: tests/test_infinite.py::test_numba_and_xla_sweeps_give_the_same_chain (same key,
same chain, α and γ resampled; and each backend against the exact posterior in
tests/test_infinite.py::test_gibbs_matches_the_exact_posterior_over_joint_partitions).

The loop runs as an XLA custom call on XLA's own buffers (:mod:`inference.native.ffi`),
registered and called by :func:`numba_gibbs_sweep`, at the end of this file.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

from inference.native.ffi import (I32, batch_element, batch_layout, buffer_flat, prologue, register_handler,
                                  ret_buffer, write_element)

__all__ = ["numba_gibbs_sweep"]


# ----------------------------------------------------------------------------- the same sweep, compiled by numba
@njit(cache=True, nogil=True)
def _block_log_beta(table, counts, n_values):
    """L(n) = Σ_u log Γ(γ_u + n_u) - log Γ(Σγ + Σn) from the relation's log Γ table."""
    total = 0
    value = 0.0
    for u in range(n_values):
        value += table[u, counts[u]]
        total += counts[u]
    return value - table[n_values, total]


@njit(cache=True, nogil=True)
def collect_cells(individual, z, first, second, values, relation, seen, item_start, item_cell, item_position,
                  relation_n_values, same_domain, added, touched, partners, n_partners):
    """The individual's observed cells by relation r, argument position and the slot l of the other
    argument: ``added[r, position, l, u]`` counts value u, for the ``n_partners[r, position]`` slots
    in ``partners[r, position]`` (``touched[r, position]``: the individual has such cells). A
    symmetric relation (``same_domain[r] == 2``) brings each pair once, from the individual's row
    (position 0): the column's cells are their mirrors."""
    touched[:] = False
    n_partners[:] = 0
    for item in range(item_start[individual], item_start[individual + 1]):
        cell = item_cell[item]
        position = item_position[item]
        r = relation[cell]
        if position == 1 and same_domain[r] == 2:
            continue
        if not touched[r, position]:
            touched[r, position] = True
            added[r, position] = 0
        if seen[cell] == 0:
            continue
        other = z[second[cell]] if position == 0 else z[first[cell]]
        fresh = True
        for u in range(relation_n_values[r]):
            if added[r, position, other, u] != 0:
                fresh = False
        if fresh:
            partners[r, position, n_partners[r, position]] = other
            n_partners[r, position] += 1
        added[r, position, other, values[cell]] += 1


@njit(cache=True, nogil=True)
def shift_cells(counts, slot, sign, relation_n_values, same_domain, added, touched, partners, n_partners):
    """Add (``sign`` 1) or remove (-1) the collected cells (:func:`collect_cells`) in ``slot``'s blocks;
    a symmetric relation's pairs go to both (slot, l) and (l, slot), to the block within ``slot`` once."""
    for r in range(counts.shape[0]):
        for position in range(2):
            if touched[r, position]:
                for index in range(n_partners[r, position]):
                    l = partners[r, position, index]
                    for u in range(relation_n_values[r]):
                        if position == 0:
                            counts[r, slot, l, u] += sign * added[r, position, l, u]
                            if same_domain[r] == 2 and l != slot:
                                counts[r, l, slot, u] += sign * added[r, position, l, u]
                        else:
                            counts[r, l, slot, u] += sign * added[r, position, l, u]


@njit(cache=True, nogil=True)
def add_predictive(score, k, counts, tables, relation_n_values, same_domain, added, touched, partners, n_partners,
                   work, work2):
    """``score`` plus log P(y_a | slot k): Σ_blocks L(n + c) - L(n) over the blocks the collected
    cells of a fall in, taken out of ``counts`` already (the terms added in a fixed order).
    ``same_domain[r]``: 0 for a relation over two domains or one, 1 over D × D, 2 symmetric
    (whose row k of ``counts`` holds every unordered block {k, l})."""
    for r in range(counts.shape[0]):
        n_values = relation_n_values[r]
        for position in range(2):
            if not touched[r, position]:
                continue
            for index in range(n_partners[r, position]):
                l = partners[r, position, index]
                for u in range(n_values):
                    work[u] = counts[r, k, l, u] if position == 0 else counts[r, l, k, u]
                    work2[u] = work[u] + added[r, position, l, u]
                score += _block_log_beta(tables[r], work2, n_values) - _block_log_beta(tables[r], work, n_values)
        if same_domain[r] and touched[r, 0] and touched[r, 1]:
            # Block (k, k) gets the row and column cells together: L(n+a+b) - L(n+a) - L(n+b) + L(n).
            for u in range(n_values):
                work[u] = counts[r, k, k, u] + added[r, 0, k, u] + added[r, 1, k, u]
            score += _block_log_beta(tables[r], work, n_values)
            for u in range(n_values):
                work[u] = counts[r, k, k, u] + added[r, 0, k, u]
            score -= _block_log_beta(tables[r], work, n_values)
            for u in range(n_values):
                work[u] = counts[r, k, k, u] + added[r, 1, k, u]
            score -= _block_log_beta(tables[r], work, n_values)
            for u in range(n_values):
                work[u] = counts[r, k, k, u]
            score += _block_log_beta(tables[r], work, n_values)
    return score


@njit(cache=True, nogil=True)
def _gibbs_sweep(z, sizes, counts, tables, log_alpha, uniforms, first, second, values, relation, seen, item_start,
                 item_cell, item_position, domain_of, capacities, relation_n_values, same_domain):
    """Neal (2000) Algorithm 3 over all individuals in global order (see :func:`_gibbs_domain`).

    z: (n_individuals + 1,) slots (the last is the virtual second argument of unary relations,
    always slot 0); sizes: (D, K); counts: (R, K, K, V) (unary relations use [:, :, 0, :]);
    tables: (R, V + 1, M) log Γ look-ups; same_domain (R,) as :func:`add_predictive` takes it;
    returns whether some individual found no free slot.
    """
    n_relations, n_max, _, n_values_max = counts.shape
    added = np.zeros((n_relations, 2, n_max, n_values_max), np.int64)
    touched = np.zeros((n_relations, 2), np.bool_)
    partners = np.zeros((n_relations, 2, n_max), np.int64)
    n_partners = np.zeros((n_relations, 2), np.int64)
    scores = np.zeros(n_max)
    work = np.zeros(n_values_max, np.int64)
    work2 = np.zeros(n_values_max, np.int64)
    overflow = False
    for individual in range(item_start.shape[0] - 1):
        domain = domain_of[individual]
        capacity = capacities[domain]
        old = z[individual]
        collect_cells(individual, z, first, second, values, relation, seen, item_start, item_cell, item_position,
                      relation_n_values, same_domain, added, touched, partners, n_partners)
        # Remove the individual's cells from its blocks.
        shift_cells(counts, old, -1, relation_n_values, same_domain, added, touched, partners, n_partners)
        sizes[domain, old] -= 1
        first_free = -1
        for k in range(capacity):
            if sizes[domain, k] == 0:
                first_free = k
                break
        if first_free < 0:
            overflow = True
        largest = -np.inf
        for k in range(capacity):
            if sizes[domain, k] > 0:
                score = np.log(sizes[domain, k])
            elif k == first_free:
                score = log_alpha[domain]
            else:
                scores[k] = -np.inf
                continue
            scores[k] = add_predictive(score, k, counts, tables, relation_n_values, same_domain, added, touched,
                                       partners, n_partners, work, work2)
            largest = max(largest, scores[k])
        total = 0.0
        for k in range(capacity):
            scores[k] = np.exp(scores[k] - largest)
            total += scores[k]
        target = uniforms[individual] * total
        new = -1
        running = 0.0
        for k in range(capacity):
            if scores[k] > 0:
                new = k
                running += scores[k]
                if running >= target:
                    break
        shift_cells(counts, new, 1, relation_n_values, same_domain, added, touched, partners, n_partners)
        sizes[domain, new] += 1
        z[individual] = new
    return overflow


# The sweep runs as an XLA custom call (inference.native.ffi): no Python between XLA and the numba
# loop. Under vmap (chains) every argument gets the same leading axes, of size 1 where it is shared;
# the chains run one after the other. Arguments: z, sizes, counts (int32); table, log_alpha,
# uniforms (the model's float dtype); seen, first, second, values, relation, item_start, item_cell,
# item_position, domain_of, capacities, relation_n_values, same_domain (int32). Results: z,
# sizes, counts (int32) and overflow (bool), each with the batch axes.
_SWEEP_ARGS, _SWEEP_RETS = 18, 4


@njit(inline="always")
def chain_state(frame, z_shape, n_lead, chain, real):
    """Chain ``chain``'s packed state, arguments 0–3 of an IRM custom call (z, sizes, counts int32;
    the log Γ tables in ``real``'s dtype), as int64 / float64 working copies of their shapes."""
    z, _ = batch_element(frame, 0, z_shape, n_lead, chain, I32)
    sizes, size_dims = batch_element(frame, 1, z_shape, n_lead, chain, I32)
    counts, count_dims = batch_element(frame, 2, z_shape, n_lead, chain, I32)
    table, table_dims = batch_element(frame, 3, z_shape, n_lead, chain, real)
    return (z.astype(np.int64), sizes.astype(np.int64).reshape((size_dims[0], size_dims[1])),
            counts.astype(np.int64).reshape((count_dims[0], count_dims[1], count_dims[2], count_dims[3])),
            table.astype(np.float64).reshape((table_dims[0], table_dims[1], table_dims[2])))


@njit(inline="always")
def write_chain_state(frame, chain, z, sizes, counts, overflow):
    """Write chain ``chain``'s z, sizes, counts (int32) and overflow (XLA's PRED, one byte) into
    results 0–3 of an IRM custom call."""
    write_element(buffer_flat(ret_buffer(frame, 0), I32), chain, z)
    write_element(buffer_flat(ret_buffer(frame, 1), I32), chain, sizes.reshape(-1))
    write_element(buffer_flat(ret_buffer(frame, 2), I32), chain, counts.reshape(-1))
    buffer_flat(ret_buffer(frame, 3), np.uint8(0))[chain] = np.uint8(1) if overflow else np.uint8(0)


@njit(inline="always")
def _sweep_call(frame, real):
    done, code = prologue(frame, _SWEEP_ARGS, _SWEEP_RETS)
    if done:
        return code
    z_shape, n_lead, n_chains = batch_layout(frame, 1)
    for chain in range(n_chains):
        z, sizes, counts, table = chain_state(frame, z_shape, n_lead, chain, real)
        log_alpha, _ = batch_element(frame, 4, z_shape, n_lead, chain, real)
        uniforms, _ = batch_element(frame, 5, z_shape, n_lead, chain, real)
        integers = [batch_element(frame, index, z_shape, n_lead, chain, I32)[0] for index in range(6, 17)]
        same_domain, _ = batch_element(frame, 17, z_shape, n_lead, chain, I32)
        overflow = _gibbs_sweep(
            z, sizes, counts, table, log_alpha.astype(np.float64), uniforms.astype(np.float64), integers[1],
            integers[2], integers[3], integers[4], integers[0], integers[5], integers[6], integers[7], integers[8],
            integers[9], integers[10], same_domain.astype(np.int64))
        write_chain_state(frame, chain, z, sizes, counts, overflow)
    return 0


def _sweep_f32(frame):
    return _sweep_call(frame, np.float32(0))


def _sweep_f64(frame):
    return _sweep_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_irm_sweep_float32": _sweep_f32, "latentzoo_irm_sweep_float64": _sweep_f64}


def numba_gibbs_sweep(z, sizes, counts, table, log_alpha, uniforms, seen, flat, domain_of, capacities,
                      n_values, same_domain):
    """All Gibbs updates of one sweep in a numba loop, run by XLA as a custom call.

    ``z`` (n_individuals + 1,) every domain's assignments in global order, the virtual individual
    last; ``sizes`` (D, K) and ``counts`` (R, K, K, V) the padded cluster sizes and block value
    counts; ``table`` (R, V + 1, L) the log Γ tables (row |r| the totals); ``log_alpha`` (D,);
    ``uniforms`` (n_individuals + 1,) one per individual for its inverse-CDF draw; ``seen``
    (n_cells,) 1 for observed cells; ``flat`` the cells in one list; ``domain_of``,
    ``capacities``, ``n_values`` and ``same_domain`` host arrays (``same_domain`` 0, 1 for a
    relation over D × D, 2 for a symmetric one). Returns the new ``(z, sizes,
    counts, overflow)``.
    """
    shapes = (jax.ShapeDtypeStruct(z.shape, jnp.int32), jax.ShapeDtypeStruct(sizes.shape, jnp.int32),
              jax.ShapeDtypeStruct(counts.shape, jnp.int32), jax.ShapeDtypeStruct((), jnp.bool_))
    real = jnp.dtype(table.dtype).name
    name = f"latentzoo_irm_sweep_{real}"
    register_handler(name, HANDLERS[name])
    return jax.ffi.ffi_call(name, shapes, vmap_method="expand_dims")(
        z.astype(jnp.int32), sizes.astype(jnp.int32), counts.astype(jnp.int32), table, log_alpha.astype(table.dtype),
        uniforms.astype(table.dtype), seen.astype(jnp.int32),
        flat.first, flat.second, flat.values, flat.relation, flat.item_start, flat.item_cell, flat.item_position,
        *(jnp.asarray(constant, jnp.int32) for constant in (domain_of, capacities, n_values, same_domain)))
