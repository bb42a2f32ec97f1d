"""Split–merge moves of an IRM domain's partition (Jain & Neal 2004, restricted Gibbs launch states).

The Gibbs visits move one individual at a time, so a cluster that should be two, or two that
should be one, changes only through a chain of unlikely intermediate states. A move here splits
one cluster of a domain in two, or merges two, and is accepted by Metropolis–Hastings against

    P(y, z | α, γ) = Π_D CRP(z_D | α_D) · Π_r Π_blocks B(γ_r + n_block) / B(γ_r)

(:func:`zoo.relational._infinite_state.log_joint`, with α and γ fixed during the move).

One move (:func:`split_merge_move`, Jain & Neal 2004, §3): two distinct individuals i and j of
the domain are drawn uniformly. The points in play are the other members of their clusters.
A launch state puts i in side A, j in side B and every point in play on a side by a fair coin,
then moves it by t restricted Gibbs scans (each point in play, in a uniformly random order,
drawn from P(side | everything else), the IRM conditional of
:func:`~zoo.relational._infinite_conditional.slot_log_weights` restricted to the two sides).

* If i and j share a cluster C, one more scan from the launch state draws the split (A, B) with
  probability q(A, B | launch), the product of that scan's conditionals, and the split is
  accepted with probability min(1, P(y, z_split) / [P(y, z) q(A, B | launch)]). B takes the
  first free slot; without one the move is rejected and the chain reports ``overflow`` (the
  model then runs again with more capacity).
* If they do not, the merge of their clusters is accepted with probability
  min(1, P(y, z_merged) q(A, B | launch) / P(y, z)), q being that of the same scan forced to the
  current division: the reverse split, seen from the merged state, draws the same pair, the
  same launch and reaches the current state with probability q.

The random launch is an auxiliary draw made alike for a move and its reverse, so the move is
exact for any t ≥ 0 (t = 0: the coins alone). The moves leave the partition posterior invariant;
with them alone (no Gibbs visits) the chain still reaches every partition.

Every random number of a move is drawn first (:func:`move_draws`), so the numba twin of these
moves (:mod:`inference.native.relational_moves`, the ``"numba"`` backend, called by
:func:`zoo.relational._infinite_kernel._numba_sweep`) makes the same moves from the same numbers.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from zoo.relational._infinite_conditional import put_in, slot_log_weights, take_out
from zoo.relational._infinite_state import IRMState, block_counts, log_joint
from zoo.relational.data import RelationalArrays, RelationalSchema

__all__ = ["MOVE_STATISTICS", "MoveDraws", "move_draws", "all_move_draws", "split_merge_move", "split_merge_moves"]

#: What :func:`split_merge_moves` counts, in this order: splits proposed and accepted, merges
#: proposed and accepted.
MOVE_STATISTICS = ("splits_proposed", "splits_accepted", "merges_proposed", "merges_accepted")


def _with_assignments(state: IRMState, domain: int, assignments: Any, arrays: RelationalArrays, *,
                      schema: RelationalSchema, capacities: tuple) -> IRMState:
    """``state`` with ``domain``'s assignments replaced, its sizes and every block count recomputed."""
    all_assignments = list(state.assignments)
    all_assignments[domain] = assignments
    sizes = list(state.sizes)
    sizes[domain] = jnp.zeros(capacities[domain], jnp.int32).at[assignments].add(1)
    return state._replace(assignments=tuple(all_assignments), sizes=tuple(sizes),
                          counts=block_counts(tuple(all_assignments), arrays, schema, capacities))


def _restricted_scan(state: IRMState, order: Any, n_play: Any, uniforms: Any, slot_a: Any, slot_b: Any,
                     forced_b: Any, force: Any, arrays: RelationalArrays, tables: tuple, *, domain: int,
                     schema: RelationalSchema, capacities: tuple) -> tuple[IRMState, Any]:
    """One restricted Gibbs scan over the first ``n_play`` individuals of ``order``.

    Each goes to ``slot_b`` with probability P(B | the rest) against ``slot_a``, drawn with its
    uniform, or, where ``force``, to the side ``forced_b`` gives it. Returns the state and the
    log probability of the sides taken.
    """

    def visit(position, carry):
        state, log_q = carry
        individual = order[position]
        out = take_out(state, domain, individual, arrays, schema=schema, capacities=capacities)
        logits, _ = slot_log_weights(out, domain, state.concentrations[domain], tables, schema=schema,
                                     capacities=capacities, candidates=jnp.stack([slot_a, slot_b]))
        log_total = jnp.logaddexp(logits[0], logits[1])
        log_a, log_b = logits[0] - log_total, logits[1] - log_total
        to_b = jnp.where(force, forced_b[individual], uniforms[position] < jnp.exp(log_b))
        state = put_in(state, out, domain, individual, jnp.where(to_b, slot_b, slot_a), schema=schema)
        return state, log_q + jnp.where(to_b, log_b, log_a)

    return jax.lax.fori_loop(0, n_play, visit, (state, jnp.zeros((), uniforms.dtype)))


class MoveDraws(NamedTuple):
    """The random numbers of one move (of several, with a leading axis the move).

    Attributes
    ----------
    i, j : int32 — the two distinct individuals, within the domain
    order : (n,) — the points in play are visited in the order of these keys
    coins : bool (n,) — the launch's side of each point in play (True: j's side)
    uniforms : (t + 1, n) — one per restricted scan and position in the visiting order
    accept : scalar — the Metropolis–Hastings uniform
    """

    i: Any
    j: Any
    order: Any
    coins: Any
    uniforms: Any
    accept: Any


def move_draws(rng_key: Any, n_individuals: int, n_scans: int, dtype: Any) -> MoveDraws:
    """Everything random in one move, drawn from ``rng_key`` (the XLA and numba moves use the same)."""
    key_i, key_j, key_order, key_launch, key_scans, key_accept = jax.random.split(rng_key, 6)
    i = jax.random.randint(key_i, (), 0, n_individuals)
    j = jax.random.randint(key_j, (), 0, n_individuals - 1)
    return MoveDraws(i, j + (j >= i), jax.random.uniform(key_order, (n_individuals,)),
                     jax.random.bernoulli(key_launch, 0.5, (n_individuals,)),
                     jax.random.uniform(key_scans, (n_scans + 1, n_individuals), dtype),
                     jax.random.uniform(key_accept, (), dtype))


def split_merge_move(draws: MoveDraws, state: IRMState, arrays: RelationalArrays, tables: tuple, *, domain: int,
                     schema: RelationalSchema, capacities: tuple) -> tuple[IRMState, Any]:
    """One split or merge of ``domain``'s clusters (see the module), accepted by Metropolis–Hastings.

    ``draws`` from :func:`move_draws` (their ``uniforms`` give the launch's t + 1 restricted
    scans); ``tables`` are :func:`~zoo.relational._infinite_conditional.log_gamma_tables` of the
    state's γ. Needs a domain of two or more individuals. Returns the state and int32 (4,)
    counts in the order of :data:`MOVE_STATISTICS`.
    """
    n_individuals = schema.domain_sizes[domain]
    n_scans = draws.uniforms.shape[0] - 1
    i, j = draws.i, draws.j
    assignments = state.assignments[domain]
    slot_i, slot_j = assignments[i], assignments[j]
    is_split = slot_i == slot_j
    free = state.sizes[domain] == 0
    has_free = jnp.any(free)
    slot_a = slot_i
    slot_b = jnp.where(is_split, jnp.argmax(free), slot_j).astype(slot_i.dtype)
    individuals = jnp.arange(n_individuals)
    touched = (assignments == slot_i) | (assignments == slot_j)
    in_play = touched & (individuals != i) & (individuals != j)
    n_play = jnp.sum(in_play)
    # The points in play first, in a uniformly random order (the same order for every scan).
    order = jnp.argsort(jnp.where(in_play, draws.order, 2.0))
    launch_assignments = jnp.where(in_play, jnp.where(draws.coins, slot_b, slot_a), assignments)
    launch_assignments = launch_assignments.at[i].set(slot_a).at[j].set(slot_b)
    proposal = _with_assignments(state, domain, launch_assignments, arrays, schema=schema, capacities=capacities)
    uniforms = draws.uniforms
    scan = dict(arrays=arrays, tables=tables, domain=domain, schema=schema, capacities=capacities)
    for index in range(n_scans):
        proposal, _ = _restricted_scan(proposal, order, n_play, uniforms[index], slot_a, slot_b, in_play,
                                       jnp.asarray(False), **scan)
    # The last scan draws the split, or (for a merge) is forced to the current division.
    proposal, log_q = _restricted_scan(proposal, order, n_play, uniforms[n_scans], slot_a, slot_b,
                                       assignments == slot_j, ~is_split, **scan)
    merged = _with_assignments(state, domain, jnp.where(touched, slot_a, assignments), arrays, schema=schema,
                               capacities=capacities)  # the state itself when i and j share a cluster
    divided = jax.tree_util.tree_map(lambda new, old: jnp.where(is_split, new, old), proposal, state)
    log_split_ratio = log_joint(divided, schema) - log_joint(merged, schema) - log_q
    log_ratio = jnp.where(is_split, log_split_ratio, -log_split_ratio)
    accept = (jnp.log(draws.accept) < log_ratio) & (has_free | ~is_split)
    new_state = jax.tree_util.tree_map(lambda split, merge, old: jnp.where(accept, jnp.where(is_split, split, merge),
                                                                           old), proposal, merged, state)
    new_state = new_state._replace(overflow=state.overflow | (is_split & ~has_free))
    counts = jnp.stack([is_split, is_split & accept, ~is_split, ~is_split & accept]).astype(jnp.int32)
    return new_state, counts


def all_move_draws(rng_key: Any, n_moves: int, n_individuals: int, n_scans: int, dtype: Any) -> MoveDraws:
    """:func:`move_draws` of ``n_moves`` moves (leading axis the move; move m from the m-th split key)."""
    return jax.vmap(lambda key: move_draws(key, n_individuals, n_scans, dtype))(jax.random.split(rng_key, n_moves))


def split_merge_moves(rng_key: Any, state: IRMState, arrays: RelationalArrays, tables: tuple, *, domain: int,
                      n_moves: int, n_scans: int, schema: RelationalSchema,
                      capacities: tuple) -> tuple[IRMState, Any]:
    """``n_moves`` :func:`split_merge_move` s of ``domain`` in a row; their counts summed (int32 (4,))."""

    def one(state, draws):
        return split_merge_move(draws, state, arrays, tables, domain=domain, schema=schema, capacities=capacities)

    draws = all_move_draws(rng_key, n_moves, schema.domain_sizes[domain], n_scans, tables[0].dtype)
    state, counts = jax.lax.scan(one, state, draws)
    return state, jnp.sum(counts, axis=0, dtype=jnp.int32)
