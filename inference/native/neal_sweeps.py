"""Neal's (2000) Dirichlet-process Gibbs sweeps on the CPU: the sequential point loops of
Algorithms 2 and 8 compiled by numba (the ``"numba"`` backend of :func:`inference.neal.build_kernel`).

XLA twins (the same chain, up to float rounding):

* :func:`numba_fresh_sweep` — ``inference.neal._sweeps._fresh_candidate_sweep`` (Algorithms 2 and 8
  with fresh auxiliaries);
* :func:`numba_reuse_sweep` — ``inference.neal._sweeps._reuse_sweep`` (Algorithm 8 with reused
  auxiliaries).

Equality tests: tests/test_neal.py::test_numba_and_xla_give_the_same_chain (and its ``_unbatched``,
``_conjugate`` and ``_without_dot_form`` variants): same keys, same chain on both backends.

Both use the XLA sweep's uniforms (and ReUse positions), scoring a point only against the
clusters and candidates it may join. Each has three layers: the numba kernel (module-level, so
numba's disk cache keeps it between processes; importing this module imports numba, which
:mod:`inference.neal` does once a backend has resolved to numba) running the chains of a ``vmap``
in parallel on numba's threads, the handler through which XLA calls it as a custom call on its
own buffers (:mod:`inference.native.ffi`), and the function the XLA sweep calls
(``numba_*_sweep``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit, prange

from inference.native.ffi import (I32, batch_layout, batched_arg, batched_matrices, batched_vectors, every_element,
                                  prologue, register_handler, write_result)

__all__ = ["numba_fresh_sweep", "numba_reuse_sweep"]


# fastmath: only reassociation and contraction, so that the feature dot products vectorise;
# infinities keep their meaning (rows of weight zero have logit -inf).
@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _inverse_cdf_draw(logits, n_live, cumulative, uniform):
    """Index drawn from softmax(logits[:n_live]) with one uniform, as _draw_index."""
    top = logits[:n_live].max()
    cumulative[0] = np.exp(logits[0] - top)
    for j in range(1, n_live):
        cumulative[j] = cumulative[j - 1] + np.exp(logits[j] - top)
    threshold = uniform * cumulative[n_live - 1]
    j = 0
    while j < n_live - 1 and cumulative[j] < threshold:
        j += 1
    return j


@njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _reuse_sweep_kernel(rows_cache, features, log_lik_table, row_labels, initial_counts, uniforms, positions,
                       log_new_weight, n_pool, n_supply, use_table):
    n_chains, n_rows, n_features = rows_cache.shape
    n_points = row_labels.shape[1]
    dtype = uniforms.dtype
    first_supply_row = n_rows - n_supply - 1
    # log n for n = 1..N, in the data's precision (the XLA path takes log of float counts).
    log_count = np.log(np.arange(1, n_points + 1).astype(dtype))
    row_assignments = np.empty((n_chains, n_points), np.int32)
    final_counts = np.empty((n_chains, n_rows), dtype)
    overflow = np.zeros(n_chains, np.bool_)
    for chain in prange(n_chains):
        cache = rows_cache[chain]
        chain_features = features[chain % features.shape[0]]  # one shared copy or one per chain
        counts = initial_counts[chain].astype(np.int64)
        pool_position = np.full(n_rows, -1, np.int32)
        for row in range(n_pool):
            pool_position[row] = row
        # Rows of positive weight (clusters and pool members) in increasing order; the others
        # add nothing to the cumulative sums, so the draw only visits (and scores) these. The
        # list is rebuilt when a cluster is born or dies.
        live = np.empty(n_rows, np.int64)
        n_live = 0
        stale = True
        logits = np.empty(n_rows, dtype)
        cumulative = np.empty(n_rows, dtype)
        n_supplied = 0
        for i in range(n_points):
            label = row_labels[chain, i]
            counts[label] -= 1
            if counts[label] == 0:
                # ReUse step 1: the emptied cluster's φ replaces the pool member at a uniform
                # position.
                position = positions[chain, i]
                for row in range(n_rows):
                    if pool_position[row] == position:
                        pool_position[row] = -1
                pool_position[label] = position
                stale = True
            if stale:
                n_live = 0
                for row in range(n_rows):
                    if counts[row] > 0 or pool_position[row] >= 0:
                        live[n_live] = row
                        n_live += 1
                stale = False
            point = chain_features[i]
            for j in range(n_live):
                row = live[j]
                if use_table:
                    log_lik = log_lik_table[chain, i, row]
                else:
                    # log F(x_i | φ_row) = cache_row · features_i (the families' dot form).
                    log_lik = cache[row, 0] * point[0]
                    for feature in range(1, n_features):
                        log_lik += cache[row, feature] * point[feature]
                if counts[row] > 0:
                    logits[j] = log_count[counts[row] - 1] + log_lik
                else:
                    logits[j] = log_new_weight[chain] + log_lik
            choice = live[_inverse_cdf_draw(logits, n_live, cumulative, uniforms[chain, i])]
            # ReUse step 2: a chosen pool member becomes a cluster; the next fresh draw takes
            # its place.
            chosen_position = pool_position[choice]
            pool_position[choice] = -1
            if chosen_position >= 0:
                stale = True
                if n_supplied < n_supply:
                    pool_position[first_supply_row + n_supplied] = chosen_position
                    n_supplied += 1
                else:
                    overflow[chain] = True
            counts[choice] += 1
            row_assignments[chain, i] = choice
        final_counts[chain] = counts.astype(dtype)
    return row_assignments, final_counts, overflow


@njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _fresh_sweep_kernel(features, assignments, initial_counts, slot_cache, log_new_weight, candidate_log_lik,
                       candidate_cache, uniforms, own_component_is_candidate):
    n_chains, n_slots, n_features = slot_cache.shape
    n_points, n_candidates = candidate_log_lik.shape[1:]
    dtype = uniforms.dtype
    log_count = np.log(np.arange(1, n_points + 1).astype(dtype))
    new_assignments = np.empty((n_chains, n_points), np.int32)
    final_counts = np.empty((n_chains, n_slots), np.int32)
    origin = np.empty((n_chains, n_slots), np.int32)
    overflow = np.zeros(n_chains, np.bool_)
    for chain in prange(n_chains):
        cache = slot_cache[chain].copy()
        chain_features = features[chain % features.shape[0]]  # one shared copy or one per chain
        counts = initial_counts[chain].astype(np.int64)
        chain_origin = np.arange(n_slots).astype(np.int32)
        # Entries of positive weight in the order of the XLA path: slots, then candidates.
        live = np.empty(n_slots + n_candidates, np.int64)
        logits = np.empty(n_slots + n_candidates, dtype)
        cumulative = np.empty(n_slots + n_candidates, dtype)
        for i in range(n_points):
            label = assignments[chain, i]
            counts[label] -= 1
            singleton = own_component_is_candidate and counts[label] == 0
            point = chain_features[i]
            n_live = 0
            first_free = n_slots
            for slot in range(n_slots):
                if counts[slot] > 0 or (singleton and slot == label):
                    log_lik = cache[slot, 0] * point[0]
                    for feature in range(1, n_features):
                        log_lik += cache[slot, feature] * point[feature]
                    if counts[slot] > 0:
                        logits[n_live] = log_count[counts[slot] - 1] + log_lik
                    else:
                        # Neal (2000) Alg. 8: if x_i was alone, its φ is the first auxiliary.
                        logits[n_live] = log_new_weight[chain] + log_lik
                    live[n_live] = slot
                    n_live += 1
                if counts[slot] == 0 and first_free == n_slots:
                    first_free = slot
            for candidate in range(1 if singleton else 0, n_candidates):
                logits[n_live] = log_new_weight[chain] + candidate_log_lik[chain, i, candidate]
                live[n_live] = n_slots + candidate
                n_live += 1
            choice = live[_inverse_cdf_draw(logits, n_live, cumulative, uniforms[chain, i])]
            slot = choice
            if choice >= n_slots:
                if first_free == n_slots:
                    overflow[chain] = True
                    slot = label
                else:
                    slot = first_free
                    candidate = choice - n_slots
                    cache[slot] = candidate_cache[chain, i, candidate]
                    chain_origin[slot] = n_slots + i * n_candidates + candidate
            counts[slot] += 1
            new_assignments[chain, i] = slot
        final_counts[chain] = counts
        origin[chain] = chain_origin
    return new_assignments, final_counts, origin, overflow


# The sweeps run as XLA custom calls (inference.native.ffi; see collapsed_sweep): the chains of a
# vmap in parallel on numba's threads, the shared features not copied per chain.
# ReUse  args: flags (n_pool, n_supply, use_table; int32), rows' caches, features, log-likelihood
#              table, row labels (int32), initial counts, uniforms, positions (int32), log weight of
#              a new cluster; rets: row labels (int32), counts, overflow (bool).
# fresh  args: flags (own component is a candidate; int32), features, assignments, counts (int32),
#              slots' caches, log weight of a new cluster, candidates' log-likelihoods, candidates'
#              caches, uniforms; rets: assignments, counts, origin (int32), overflow (bool).
@njit(inline="always")
def _reuse_call(frame, real):
    done, code = prologue(frame, 9, 3)
    if done:
        return code
    batch, n_lead, n_batch = batch_layout(frame, 1)
    at = (batch, n_lead, n_batch)
    flags = batched_vectors(frame, 0, *at, I32)[0]
    rows_cache, rows_tail = batched_arg(frame, 1, *at, real)
    table, table_tail = batched_arg(frame, 3, *at, real)
    if flags[2] != 0:
        table = every_element(table, n_batch)
    row_assignments, final_counts, overflow = _reuse_sweep_kernel(
        every_element(rows_cache, n_batch).reshape((n_batch, rows_tail[0], rows_tail[1])),
        batched_matrices(frame, 2, *at, real),
        table.reshape((table.shape[0], table_tail[0], table_tail[1])),
        every_element(batched_vectors(frame, 4, *at, I32), n_batch),
        every_element(batched_vectors(frame, 5, *at, real), n_batch),
        every_element(batched_vectors(frame, 6, *at, real), n_batch),
        every_element(batched_vectors(frame, 7, *at, I32), n_batch),
        every_element(batched_vectors(frame, 8, *at, real), n_batch)[:, 0],
        np.int64(flags[0]), np.int64(flags[1]), flags[2] != 0)
    write_result(frame, 0, row_assignments, I32)
    write_result(frame, 1, final_counts, real)
    write_result(frame, 2, overflow.astype(np.uint8), np.uint8(0))
    return 0


@njit(inline="always")
def _fresh_call(frame, real):
    done, code = prologue(frame, 9, 4)
    if done:
        return code
    batch, n_lead, n_batch = batch_layout(frame, 1)
    at = (batch, n_lead, n_batch)
    flags = batched_vectors(frame, 0, *at, I32)[0]
    cache, cache_tail = batched_arg(frame, 4, *at, real)
    candidate_log_lik, candidate_tail = batched_arg(frame, 6, *at, real)
    candidate_cache = every_element(batched_vectors(frame, 7, *at, real), n_batch)
    new_assignments, final_counts, origin, overflow = _fresh_sweep_kernel(
        batched_matrices(frame, 1, *at, real),
        every_element(batched_vectors(frame, 2, *at, I32), n_batch),
        every_element(batched_vectors(frame, 3, *at, I32), n_batch),
        every_element(cache, n_batch).reshape((n_batch, cache_tail[0], cache_tail[1])),
        every_element(batched_vectors(frame, 5, *at, real), n_batch)[:, 0],
        every_element(candidate_log_lik, n_batch).reshape((n_batch, candidate_tail[0], candidate_tail[1])),
        candidate_cache.reshape((n_batch, candidate_tail[0], candidate_tail[1], cache_tail[1])),
        every_element(batched_vectors(frame, 8, *at, real), n_batch),
        flags[0] != 0)
    write_result(frame, 0, new_assignments, I32)
    write_result(frame, 1, final_counts, I32)
    write_result(frame, 2, origin, I32)
    write_result(frame, 3, overflow.astype(np.uint8), np.uint8(0))
    return 0


def _reuse_f32(frame):
    return _reuse_call(frame, np.float32(0))


def _reuse_f64(frame):
    return _reuse_call(frame, np.float64(0))


def _fresh_f32(frame):
    return _fresh_call(frame, np.float32(0))


def _fresh_f64(frame):
    return _fresh_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_neal_reuse_sweep_float32": _reuse_f32, "latentzoo_neal_reuse_sweep_float64": _reuse_f64,
            "latentzoo_neal_fresh_sweep_float32": _fresh_f32, "latentzoo_neal_fresh_sweep_float64": _fresh_f64}


def _call(sweep: str, dtype, shapes):
    name = f"latentzoo_neal_{sweep}_sweep_{jnp.dtype(dtype).name}"
    register_handler(name, HANDLERS[name])
    return jax.ffi.ffi_call(name, shapes, vmap_method="expand_dims")


def numba_reuse_sweep(rows_cache, features, log_lik_table, row_labels, initial_counts, uniforms, positions,
                       log_new_weight, n_pool, n_supply):
    """The ReUse sweep in numba. With ``log_lik_table`` None the kernel scores each point against
    the rows it may join (``rows_cache`` · features, the dot form of the built-in families) as it
    goes; otherwise it reads the table."""
    n_points = row_labels.shape[0]
    n_rows = initial_counts.shape[0]
    dtype = uniforms.dtype
    use_table = log_lik_table is not None
    shapes = (
        jax.ShapeDtypeStruct((n_points,), jnp.int32),
        jax.ShapeDtypeStruct((n_rows,), dtype),
        jax.ShapeDtypeStruct((), jnp.bool_),
    )
    if use_table:
        rows_cache, features = jnp.zeros((n_rows, 0), dtype), jnp.zeros((n_points, 0), dtype)
    else:
        log_lik_table = jnp.zeros((0, 0), dtype)
    # "expand_dims": a vmap over chains becomes one call with leading chain axes (size 1 for
    # shared arguments such as the data), which the kernel spreads over numba's threads.
    return _call("reuse", dtype, shapes)(
        jnp.asarray([n_pool, n_supply, use_table], jnp.int32),
        rows_cache.astype(dtype),
        features.astype(dtype),
        log_lik_table.astype(dtype),
        row_labels.astype(jnp.int32),
        initial_counts.astype(dtype),
        uniforms,
        positions.astype(jnp.int32),
        jnp.asarray(log_new_weight, dtype),
    )


def numba_fresh_sweep(features, assignments, counts, cache, log_new_weight, candidate_log_lik, candidate_cache,
                       uniforms, own_component_is_candidate):
    """The fresh-candidate sweep in numba: each point is scored only against the occupied slots
    (``cache`` · features) and its own candidates; an opened slot takes its candidate's cache."""
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    dtype = uniforms.dtype
    shapes = (
        jax.ShapeDtypeStruct((n_points,), jnp.int32),
        jax.ShapeDtypeStruct((n_slots,), jnp.int32),
        jax.ShapeDtypeStruct((n_slots,), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_),
    )
    return _call("fresh", dtype, shapes)(
        jnp.asarray([bool(own_component_is_candidate)], jnp.int32),
        features.astype(dtype),
        assignments.astype(jnp.int32),
        counts.astype(jnp.int32),
        cache.astype(dtype),
        jnp.asarray(log_new_weight, dtype),
        candidate_log_lik.astype(dtype),
        candidate_cache.astype(dtype),
        uniforms,
    )
