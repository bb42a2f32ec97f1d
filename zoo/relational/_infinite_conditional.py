"""The conditional of one individual's cluster given everything else in an IRM chain.

Taking individual a out of its cluster subtracts its cells from the block counts
(:func:`take_out`); the log weight of every slot k (:func:`slot_log_weights`) is then the CRP
prior, n_k for an occupied slot and α_D for the first free one (Neal 2000, Algorithm 3), plus
the collapsed predictive of a's cells in k,

    log P(y_a | k) = Σ_blocks log B(γ_r + n_block + c_block) - log B(γ_r + n_block),

over the blocks a's cells fall in (Kemp et al. 2006; B as in :mod:`zoo.relational.infinite`);
:func:`put_in` adds a back in the slot drawn. The Gibbs visits
(:func:`zoo.relational._infinite_kernel._gibbs_domain`) and the restricted scans of the
split–merge moves (:mod:`zoo.relational._infinite_moves`) both use these. Block counts are
integers, so every log Γ is a look-up in a table of log Γ(γ_u + m) (:func:`log_gamma_tables`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
from jax.scipy.special import gammaln

from zoo.relational._infinite_state import IRMState
from zoo.relational.data import RelationalArrays, RelationalSchema


def log_gamma_tables(hyper: tuple, arrays: RelationalArrays) -> tuple:
    """Per relation, T[u, m] = log Γ(γ_u + m) and T[|r|, m] = log Γ(Σ_u γ_u + m) for m = 0..n_observed.

    Block counts are integers, so while γ is fixed every log Γ is a table look-up.
    """
    tables = []
    for concentration, weights in zip(hyper, arrays.weights):
        counts = jnp.arange(weights.shape[0], dtype=concentration.dtype)
        shifts = jnp.concatenate([concentration, jnp.sum(concentration)[None]])
        tables.append(gammaln(shifts[:, None] + counts[None, :]))
    return tuple(tables)


def _cell_counts(relation: int, position: int, individual: Any, state_assignments: tuple,
                 arrays: RelationalArrays, schema: RelationalSchema, capacities: tuple) -> Any:
    """C[l, u]: weight of the individual's cells with value u whose other argument sits in slot l."""
    cells = arrays.blankets[relation][position][individual]
    seen = (arrays.weights[relation][cells] > 0).astype(jnp.int32)
    values = arrays.values[relation][cells]
    domains = schema.relation_domains[relation]
    n_values = schema.n_values[relation]
    if len(domains) == 1:
        return jnp.zeros(n_values, jnp.int32).at[values].add(seen)
    other = 1 - position
    slots = state_assignments[domains[other]][arrays.entries[relation][cells, other]]
    return jnp.zeros((capacities[domains[other]], n_values), jnp.int32).at[slots, values].add(seen)


def _move(counts: Any, slot: Any, added: Any, position: int, arity: int) -> Any:
    if arity == 1 or position == 0:
        return counts.at[slot].add(added)
    return counts.at[:, slot].add(added)


def _move_symmetric(counts: Any, slot: Any, pairs: Any, sign: int) -> Any:
    """A symmetric relation's counts with an individual's ``pairs`` (A[l, u], its pairs of value u with
    an individual in slot l: the cells of its row, :func:`_cell_counts` at position 0) added to
    (``sign`` 1) or taken from (-1) ``slot``: the blocks {slot, l} at (slot, l) and (l, slot), the block
    within ``slot`` once. (The IRM refuses observed self-pairs, so a row holds no pair of a with itself.)"""
    counts = counts.at[slot].add(sign * pairs).at[:, slot].add(sign * pairs)
    return counts.at[slot, slot].add(-sign * pairs[slot])


def _sum_log_beta(table: Any, terms: list) -> Any:
    """Σ_t sign_t Σ_{reduced axes} log B(γ + n_t), with log Γ looked up in ``table``.

    ``terms`` holds (n, sign, n_reduce): integer counts ``n`` of shape (K, ..., |r|); the log B
    values are summed over the ``n_reduce`` axes after the first, one (K,) vector per term.
    """
    n_values = table.shape[0] - 1
    total = 0.0
    for counts, sign, n_reduce in terms:
        per_value = sum(table[value][counts[..., value]] for value in range(n_values))
        per_block = per_value - table[n_values][jnp.sum(counts, axis=-1)]
        reduced = jnp.sum(per_block, axis=tuple(range(1, 1 + n_reduce))) if n_reduce else per_block
        total = total + sign * reduced
    return total


class TakenOut(NamedTuple):
    """An individual taken out of its cluster: the state's counts and ``domain``'s sizes without it,
    and its cells per incidence (:func:`_cell_counts`), to put it back with."""

    counts: tuple
    sizes: Any
    cell_counts: tuple


def take_out(state: IRMState, domain: int, individual: Any, arrays: RelationalArrays, *,
             schema: RelationalSchema, capacities: tuple) -> TakenOut:
    """The block counts and sizes with ``individual``'s cells and membership removed."""
    old = state.assignments[domain][individual]
    # A symmetric relation's pairs come once, from the cells of the individual's row (position 0);
    # the column's are their mirrors, left out.
    cell_counts = tuple(_cell_counts(relation, position, individual, state.assignments, arrays, schema, capacities)
                        if not (schema.is_symmetric(relation) and position == 1) else None
                        for relation, position in schema.incidences(domain))
    counts = list(state.counts)
    for (relation, position), added in zip(schema.incidences(domain), cell_counts):
        arity = len(schema.relation_domains[relation])
        if not schema.is_symmetric(relation):
            counts[relation] = _move(counts[relation], old, -added, position, arity)
        elif position == 0:
            counts[relation] = _move_symmetric(counts[relation], old, added, -1)
    return TakenOut(tuple(counts), state.sizes[domain].at[old].add(-1), cell_counts)


def slot_log_weights(out: TakenOut, domain: int, concentration: Any, tables: tuple, *,
                     schema: RelationalSchema, capacities: tuple, candidates: Any = None) -> tuple[Any, Any]:
    """Log weight of every slot for the individual taken out, and whether a slot was free.

    log n_k + log P(y_a | k) for an occupied slot k, log α_D + log P(y_a | new) for the first
    free slot, -inf for the other free slots. With ``candidates`` (int array of slots) only
    those slots are scored, in that order (the split–merge moves' restricted scans score two).
    """
    capacity = capacities[domain]
    slots = jnp.arange(capacity)
    counts, sizes = out.counts, out.sizes
    occupied = sizes > 0
    free = ~occupied
    first_free = jnp.argmax(free)
    has_free = jnp.any(free)
    dtype = concentration.dtype
    log_prior = jnp.where(occupied, jnp.log(jnp.maximum(sizes, 1).astype(dtype)), -jnp.inf)
    log_prior = jnp.where(has_free & (slots == first_free), jnp.log(concentration), log_prior)
    pick = (lambda array: array) if candidates is None else (lambda array: array[candidates])
    # Collapsed predictive of a's cells in each candidate slot k:
    # Σ_blocks log B(γ + n + c) - log B(γ + n) over the blocks a's cells fall in.
    log_like = jnp.zeros(capacity if candidates is None else candidates.shape[0], dtype)
    pair_parts = {}
    for (relation, position), added in zip(schema.incidences(domain), out.cell_counts):
        base = counts[relation]
        if schema.is_symmetric(relation):
            # Each unordered block {k, l} once: row k of the symmetric counts, with a's pairs added.
            if position == 0:
                rows = pick(base)
                log_like = log_like + _sum_log_beta(tables[relation], [(rows + added[None, :, :], 1.0, 1),
                                                                       (rows, -1.0, 1)])
            continue
        if len(schema.relation_domains[relation]) == 1:
            base = pick(base)
            terms = [(base + added[None, :], 1.0, 0), (base, -1.0, 0)]
        else:
            rows = pick(base if position == 0 else jnp.swapaxes(base, 0, 1))
            terms = [(rows + added[None, :, :], 1.0, 1), (rows, -1.0, 1)]
            pair_parts.setdefault(relation, {})[position] = added
        log_like = log_like + _sum_log_beta(tables[relation], terms)
    for relation, parts in pair_parts.items():
        if len(parts) == 2:
            # Relation over D × D: block (k, k) receives a's row and column cells together, so
            # its term is L(n + r + c) - L(n) instead of [L(n + r) - L(n)] + [L(n + c) - L(n)].
            if candidates is None:
                diagonal = jnp.diagonal(counts[relation], axis1=0, axis2=1).T
            else:
                diagonal = counts[relation][candidates, candidates]
            as_row, as_column = pick(parts[0]), pick(parts[1])
            terms = [(diagonal + as_row + as_column, 1.0, 0), (diagonal + as_row, -1.0, 0),
                     (diagonal + as_column, -1.0, 0), (diagonal, 1.0, 0)]
            log_like = log_like + _sum_log_beta(tables[relation], terms)
    return pick(log_prior) + log_like, has_free


def put_in(state: IRMState, out: TakenOut, domain: int, individual: Any, slot: Any, *,
           schema: RelationalSchema) -> IRMState:
    """``state`` with ``individual`` (taken out as ``out``) placed in ``slot``."""
    counts = list(out.counts)
    for (relation, position), added in zip(schema.incidences(domain), out.cell_counts):
        arity = len(schema.relation_domains[relation])
        if not schema.is_symmetric(relation):
            counts[relation] = _move(counts[relation], slot, added, position, arity)
        elif position == 0:
            counts[relation] = _move_symmetric(counts[relation], slot, added, 1)
    all_sizes = list(state.sizes)
    all_sizes[domain] = out.sizes.at[slot].add(1)
    assignments = list(state.assignments)
    assignments[domain] = assignments[domain].at[individual].set(slot)
    return state._replace(assignments=tuple(assignments), sizes=tuple(all_sizes), counts=tuple(counts))
