"""The sweeps: one pass over the points, reassigning each in turn (Neal 2000, Algorithms 2, 3, 8).

Each is a ``lax.scan`` over the points with fixed shapes (K_max slots plus a scratch row), so it
compiles once and ``vmap``-s over chains:

* :func:`_collapsed_sweep` — Algorithm 3, parameters integrated out (statistics move with points);
* :func:`_fresh_candidate_sweep` — Algorithms 2 and 8 with explicit parameters and candidates
  drawn in bulk before the scan (Algorithm 2's posterior draw, Algorithm 8's m auxiliaries);
* :func:`_reuse_sweep` — Algorithm 8 whose auxiliaries persist from point to point (Favaro & Teh
  2013), on a fixed table of rows that :func:`_compact_rows` maps back to slots.

All three hand the loop to numba twins (:mod:`inference.native.neal_sweeps`, and
:mod:`inference.native.collapsed_sweep` for families with a ``native_predictive``) when the
kernel's backend is ``"numba"``; each twin uses the same uniforms and gives the same chain.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from inference.components import ComponentFamily
from inference.neal._slots import (
    _concat_rows,
    _draw_index,
    _max_and_first_free,
    _set_row,
    _take_row,
    _upper_ones,
)


def _fresh_candidate_sweep(
    family: ComponentFamily,
    features: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    cache: Any,
    log_new_weight: jax.Array,
    candidate_log_lik: jax.Array,
    candidate_cache: Any,
    uniforms: jax.Array,
    *,
    own_component_is_candidate: bool,
    backend: str = "xla",
):
    """One pass over the points with explicit parameters and fresh candidates (Algorithms 2, 8).

    ``candidate_*`` hold, for every point, the m components it may open a new cluster with:
    Algorithm 8's auxiliary draws from G0 (weight α/m each) or Algorithm 2's single draw from the
    posterior given the point (weight α times the prior predictive, passed as its log-likelihood).
    Row K of the working arrays is a scratch row: always empty, it absorbs writes that must go
    nowhere and is the "first free slot" only when every slot is taken.

    ``backend`` "numba" (families with the dot-product form only) runs the same updates, with the
    same uniforms, in a compiled loop on the host (:func:`inference.native.neal_sweeps.numba_fresh_sweep`).

    Returns the new assignments (N,), counts (K,), the origin of every slot's parameters
    (its old slot k, or K + i·m + j for candidate j of point i) and the overflow flag.
    """
    if backend == "numba" and family.likelihood_cache is not None:
        from inference.native.neal_sweeps import numba_fresh_sweep  # imports numba

        return numba_fresh_sweep(features, assignments, counts, cache, log_new_weight, candidate_log_lik,
                                  candidate_cache, uniforms, own_component_is_candidate)
    n_slots = counts.shape[0]
    n_candidates = candidate_log_lik.shape[1]
    dtype = features.dtype
    rows = jnp.arange(n_slots + 1)
    scratch = n_slots
    upper = _upper_ones(n_slots + 1 + n_candidates, dtype)
    first_candidate = jnp.arange(n_candidates) == 0
    not_a_slot = jnp.zeros((n_candidates,), bool)
    score_all = jax.vmap(family.cached_log_likelihood, in_axes=(0, None))

    def update_point(carry, inputs):
        counts, cache, origin, overflow = carry
        index, label, point, cand_log_lik, cand_cache, uniform = inputs
        was_here = rows == label
        counts = counts - was_here
        log_lik = score_all(cache, point)
        log_weights = jnp.where(counts > 0, jnp.log(counts) + log_lik, -jnp.inf)
        cand_weights = log_new_weight + cand_log_lik
        if own_component_is_candidate:
            # Neal (2000) Alg. 8: if x_i was alone, its φ is the first auxiliary component.
            singleton = counts[label] == 0
            log_weights = jnp.where(was_here & singleton, log_new_weight + log_lik, log_weights)
            cand_weights = jnp.where(first_candidate & singleton, -jnp.inf, cand_weights)
        logits = jnp.concatenate([log_weights, cand_weights])
        top, first_free = _max_and_first_free(logits, jnp.concatenate([counts == 0, not_a_slot]))
        choice = _draw_index(logits, top, uniform, upper)
        opens = choice > scratch
        overflow_now = opens & (first_free == scratch)
        slot = jnp.where(opens, jnp.where(overflow_now, label, first_free), choice)
        candidate = jnp.clip(choice - scratch - 1, 0, n_candidates - 1)
        target = jnp.where(opens & ~overflow_now, first_free, scratch)
        cache = _set_row(cache, target, _take_row(cand_cache, candidate))
        origin = origin.at[target].set(n_slots + index * n_candidates + candidate)
        counts = counts + (rows == slot)
        return (counts, cache, origin, overflow | overflow_now), slot

    carry = (
        jnp.concatenate([counts.astype(dtype), jnp.zeros((1,), dtype)]),
        _concat_rows(cache, _take_row(cache, jnp.arange(1))),
        jnp.arange(n_slots + 1, dtype=jnp.int32),
        jnp.zeros((), bool),
    )
    inputs = (
        jnp.arange(features.shape[0], dtype=jnp.int32),
        assignments,
        features,
        candidate_log_lik,
        candidate_cache,
        uniforms,
    )
    (counts, _, origin, overflow), new_assignments = jax.lax.scan(update_point, carry, inputs)
    return new_assignments, counts[:-1].astype(jnp.int32), origin[:-1], overflow


def _reuse_sweep(
    family: ComponentFamily,
    rows_cache: Any,
    features: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    n_pool: int,
    n_supply: int,
    log_new_weight: jax.Array,
    uniforms: jax.Array,
    positions: jax.Array,
    backend: str,
):
    """One pass of Algorithm 8 whose auxiliary components persist from point to point.

    The "ReUse" scheme of Favaro & Teh (2013, §5): the m auxiliary components form a pool that
    starts as fresh draws from G0; when x_i leaves a cluster it was alone in, that cluster's φ
    replaces a uniformly chosen pool member; when x_i picks a pool member, that member becomes a
    cluster and the next fresh G0 draw joins the pool in its place. Each point update is a Gibbs
    step on (z_i, pool) that leaves the posterior (with the pool i.i.d. G0) invariant, and only one
    G0 draw per new cluster is needed instead of m per point.

    Rows of ``rows_cache`` (their parameters are fixed during the sweep; only labels move): the m
    initial pool draws, then the K slots, then S supply draws from G0, then one scratch row that
    stays empty. The pool is a position 0..m-1 per row (-1 outside the pool), so no parameters are
    copied and "a uniformly chosen member" is the one at a uniform position. Needing more than S
    supply draws, or ending with more than K occupied rows, sets the overflow flag.

    ``backend`` "xla" computes log F(x_i | φ_r) for every point and row before the sweep (rows are
    fixed, so this is one batched product) and runs the points in a ``lax.scan``; "numba" runs
    the same updates, with the same uniforms and positions, in a compiled loop on the host
    (:func:`inference.native.neal_sweeps.numba_reuse_sweep`) that scores a point only against the rows it may join (the
    clusters and the pool) when the family has the dot-product form, else reads the table.

    Returns the row of every point (N,), the final counts per row (R,) and the overflow flag.
    """
    dtype = features.dtype
    row_labels = assignments + n_pool
    initial_counts = _reuse_initial_counts(counts, n_pool, n_supply, dtype)
    if backend == "numba":
        from inference.native.neal_sweeps import numba_reuse_sweep  # imports numba
    if backend == "numba" and family.likelihood_cache is not None:
        return numba_reuse_sweep(rows_cache, features, None, row_labels, initial_counts, uniforms, positions,
                                  log_new_weight, n_pool, n_supply)
    point_log_lik = jax.vmap(
        jax.vmap(family.cached_log_likelihood, in_axes=(0, None)), in_axes=(None, 0)
    )(rows_cache, features)
    if backend == "numba":
        return numba_reuse_sweep(None, None, point_log_lik, row_labels, initial_counts, uniforms, positions,
                                  log_new_weight, n_pool, n_supply)
    n_rows = point_log_lik.shape[1]
    first_supply_row = n_rows - n_supply - 1
    rows = jnp.arange(n_rows)
    upper = _upper_ones(n_rows, point_log_lik.dtype)

    def update_point(carry, inputs):
        counts, pool_position, n_supplied, overflow = carry
        label, log_lik, uniform, position = inputs
        was_here = rows == label
        counts = counts - was_here
        emptied = was_here & (counts == 0)
        # ReUse step 1: an emptied cluster's φ replaces the pool member at a uniform position.
        singleton = counts[label] == 0
        discarded = (pool_position == position) & singleton
        pool_position = jnp.where(emptied, position, jnp.where(discarded, -1, pool_position))
        is_pool = pool_position >= 0
        logits = jnp.where(counts > 0, jnp.log(counts), jnp.where(is_pool, log_new_weight, -jnp.inf))
        logits = logits + log_lik
        choice = _draw_index(logits, jnp.max(logits), uniform, upper)
        # ReUse step 2: a chosen pool member becomes a cluster; the next fresh draw takes its place.
        chosen_position = pool_position[choice]
        opens = chosen_position >= 0
        refill = opens & (n_supplied < n_supply)
        pool_position = jnp.where(rows == choice, -1, pool_position)
        pool_position = jnp.where(refill & (rows == first_supply_row + n_supplied), chosen_position, pool_position)
        counts = counts + (rows == choice)
        return (counts, pool_position, n_supplied + refill, overflow | (opens & ~refill)), choice

    carry = (
        initial_counts,
        jnp.where(rows < n_pool, rows, -1).astype(jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
    )
    inputs = (row_labels, point_log_lik, uniforms, positions)
    (counts, _, _, overflow), row_assignments = jax.lax.scan(update_point, carry, inputs)
    return row_assignments, counts, overflow


def _reuse_initial_counts(counts: jax.Array, n_pool: int, n_supply: int, dtype) -> jax.Array:
    """Counts per row (pool, slots, supply, scratch) at the start of a ReUse sweep."""
    return jnp.concatenate([jnp.zeros((n_pool,), dtype), counts.astype(dtype), jnp.zeros((n_supply + 1,), dtype)])


def _compact_rows(row_assignments: jax.Array, row_counts: jax.Array, n_slots: int):
    """Map the occupied rows to slots 0..K-1 in row order; overflow if more than K are occupied."""
    occupied = row_counts > 0
    overflow = jnp.sum(occupied) > n_slots
    rank = jnp.cumsum(occupied) - 1
    order = jnp.nonzero(occupied, size=n_slots, fill_value=row_counts.shape[0] - 1)[0]
    assignments = jnp.clip(rank[row_assignments], 0, n_slots - 1).astype(jnp.int32)
    return assignments, row_counts[order].astype(jnp.int32), order, overflow


def _collapsed_sweep(
    family: ComponentFamily,
    data: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    stats: Any,
    log_alpha: jax.Array,
    prior_log_pred: jax.Array,
    uniforms: jax.Array,
    backend: str = "xla",
):
    """One pass of Neal (2000) Algorithm 3 over the points (parameters integrated out).

    ``backend`` "numba" (families with a ``native_predictive``) runs the same updates, with the
    same uniforms, in a compiled loop on the host that scores each point against the occupied
    clusters only (:func:`inference.native.collapsed_sweep.numba_collapsed_sweep`).
    """
    if backend == "numba" and family.native_predictive is not None:
        from inference.native.collapsed_sweep import numba_collapsed_sweep  # imports numba

        return numba_collapsed_sweep(family.native_predictive, data, assignments, counts, stats, log_alpha,
                                     prior_log_pred, uniforms)
    n_slots = counts.shape[0]
    dtype = data.dtype
    rows = jnp.arange(n_slots + 1)
    scratch = n_slots
    upper = _upper_ones(n_slots + 2, dtype)
    point_stats = jax.vmap(family.point_stats)(data)
    score_all = jax.vmap(family.cached_log_predictive, in_axes=(0, None))
    stats = _concat_rows(stats, jax.tree_util.tree_map(lambda leaf: jnp.zeros_like(leaf[:1]), stats))
    terms = jax.vmap(family.predictive_terms)(stats)
    not_a_slot = jnp.zeros((1,), bool)

    def update_point(carry, inputs):
        counts, stats, terms, overflow = carry
        label, point, own_stats, prior_log_pred_i, uniform = inputs
        counts = counts - (rows == label)
        emptied = counts[label] == 0
        # Remove x_i from its cluster; an emptied slot gets exact zeros (no rounding residue).
        removed = jax.tree_util.tree_map(
            lambda total, own: jnp.where(emptied, jnp.zeros_like(own), total - own),
            _take_row(stats, label),
            own_stats,
        )
        stats = _set_row(stats, label, removed)
        terms = _set_row(terms, label, family.predictive_terms(removed))
        log_pred = score_all(terms, point)
        log_weights = jnp.where(counts > 0, jnp.log(counts) + log_pred, -jnp.inf)
        logits = jnp.concatenate([log_weights, (log_alpha + prior_log_pred_i)[None]])
        top, first_free = _max_and_first_free(logits, jnp.concatenate([counts == 0, not_a_slot]))
        choice = _draw_index(logits, top, uniform, upper)
        opens = choice > scratch
        overflow_now = opens & (first_free == scratch)
        slot = jnp.where(opens, jnp.where(overflow_now, label, first_free), choice)
        added = jax.tree_util.tree_map(jnp.add, _take_row(stats, slot), own_stats)
        stats = _set_row(stats, slot, added)
        terms = _set_row(terms, slot, family.predictive_terms(added))
        counts = counts + (rows == slot)
        return (counts, stats, terms, overflow | overflow_now), slot

    carry = (
        jnp.concatenate([counts.astype(dtype), jnp.zeros((1,), dtype)]),
        stats,
        terms,
        jnp.zeros((), bool),
    )
    inputs = (assignments, data, point_stats, prior_log_pred, uniforms)
    (counts, _, _, overflow), new_assignments = jax.lax.scan(update_point, carry, inputs)
    return new_assignments, counts[:-1].astype(jnp.int32), overflow
