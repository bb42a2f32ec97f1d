"""Sparse E-step kernels on the CPU: the ``"numba"`` backend of :mod:`inference.sparse`.

XLA twins (they must give the same numbers, up to float rounding):

* :func:`numba_cell_stats` — ``inference.sparse._xla_cell_stats`` and ``inference.sparse._xla_row_cell_stats``;
* :func:`numba_count_matmul` — ``inference.sparse._xla_count_matmul``;
* :func:`numba_path_mixture_stats` — ``inference.sparse._xla_path_mixture_stats``.

Equality tests: tests/test_sparse.py::test_numba_path_equals_xla_path_with_evaluation_factors,
tests/test_one_sided.py::test_count_matmul_matches_dense_products,
tests/test_cluster_abstraction.py::test_path_mixture_stats_match_dense_formulas and
tests/test_cluster_abstraction.py::test_row_cell_stats_match_dense_formulas (each backend against
the same dense formulas), and the models' ``test_backends_agree_on_a_tempered_step``.

The kernels run as XLA custom calls (:mod:`inference.native.ffi`): XLA calls them with its own
buffers, so no Python runs and nothing is copied. Everything is defined at module level so that
numba's on-disk cache (``cache=True``) is reused by every new process. Their thread count is
numba's at trace time (``numba.set_num_threads`` before the first call of a jitted fit); the
CSR/CSC pointers are int32, so one block holds fewer than 2^31 cells.

The sampled-product kernel (:func:`cell_stats_kernel`) makes two passes over the same cells,
each one parallel over threads that own contiguous ranges holding about equal numbers of cells:

* the **row pass** walks the CSR copy row by row: z_ij = A_i·B_j, the log-normaliser
  Σ n_ij log z_ij and the row statistic A_i ⊙ Σ_j (n_ij / z_ij) B_j, kept in a local
  accumulator and written once per row;
* the **column pass** walks the CSC copy column by column and computes B_j ⊙ Σ_i (n_ij / z_ij) A_i
  the same way, recomputing z_ij (64 multiply-adds are cheaper than storing and re-reading
  n/z for every cell).

No thread ever writes another thread's rows or columns, so there are no private copies of the
column statistics to zero and add up. The loads that miss the cache are the gathered rows of
B (row pass) and A (column pass): the row a few cells ahead is prefetched so those misses overlap.
:func:`count_matmul_kernel` (n F and, over the CSC copy, nᵀ G) works the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

import jax
import jax.numpy as jnp

from inference.cells import DyadicArrays
from inference.native.backend import numba_threads
from inference.native.ffi import (I32, arg_buffer, buffer_1d, buffer_2d, buffer_3d, buffer_scalar, prologue,
                                  register_handler, ret_buffer)

__all__ = [
    "numba_cell_stats", "numba_count_matmul", "numba_path_mixture_stats",
    "cell_stats_kernel", "count_matmul_kernel", "path_mixture_kernel", "target", "PREFETCH_CELLS",
]

#: How many cells ahead the kernels prefetch the gathered factor row (measured on 20 Newsgroups,
#: K = 64: 8–32 are equally good, no prefetch is 30% slower).
PREFETCH_CELLS = 16

# reassoc + contract: the class loops become SIMD reductions and FMAs. arcp lets n / z be computed
# once per cell as a reciprocal: without it LLVM rewrites (n / z) * b_c into (n * b_c) / z, one
# division per class. No flag changes NaN/inf handling or the accuracy of log.
_FASTMATH = {"reassoc", "contract", "nsz", "arcp"}


@intrinsic
def _prefetch(typingctx, array, index):
    """Hint the CPU to load the cache line holding ``array[index]`` (1-D array; no bounds check)."""
    if not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_struct = context.make_array(signature.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(array_struct.data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        prefetch = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32]))
        # read access, maximal temporal locality, data cache
        builder.call(prefetch, [address, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


@njit(inline="always")
def _prefetch_row(flat, row, n_classes, line):
    start = row * n_classes
    for offset in range(0, n_classes, line):
        _prefetch(flat, start + offset)


@njit(cache=True)
def _thread_bounds(pointer, n_threads):
    """Split the rows (or columns) of a CSR (CSC) pointer into ``n_threads`` contiguous ranges
    holding about equal numbers of cells."""
    n_lines = pointer.shape[0] - 1
    bounds = np.empty(n_threads + 1, np.int64)
    for t in range(n_threads + 1):
        bounds[t] = np.searchsorted(pointer, pointer[n_lines] * t // n_threads)
    bounds[0], bounds[n_threads] = 0, n_lines
    for t in range(1, n_threads + 1):
        bounds[t] = min(max(bounds[t], bounds[t - 1]), n_lines)
    return bounds


@njit(cache=True, nogil=True)
def _add_in_order(parts, out):
    """``out[k] = Σ_i parts[i, k]``, added one row after another (no fastmath: the order is
    what makes the sum the same on any number of threads)."""
    for k in range(parts.shape[1]):
        total = 0.0
        for i in range(parts.shape[0]):
            total += parts[i, k]
        out[k] = total


@njit(parallel=True, cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def cell_stats_kernel(indptr, cols, counts, col_indptr, col_rows, col_counts, A, B, A_eval, B_eval,
                      eval_needed, row_weights, floor, n_threads, row_stats, col_stats, row_log_norms, log_norms):
    """Row statistics, column statistics and log-normalisers of z = A Bᵀ on the observed cells.

    Writes ``row_stats = A ⊙ (R B)`` (n_rows × K, or 0 rows: not wanted), ``col_stats =
    B ⊙ ((w ⊙ R)ᵀ A)`` (n_cols × K, or 0 rows) with R_ij = n_ij / z_ij and row i of R weighted
    by ``row_weights[i]`` (an empty ``row_weights`` means 1), ``row_log_norms[i] = Σ_j n_ij log
    z_ij`` (or nothing if empty) and ``log_norms = [Σ n log z, Σ n log z_eval]``;
    ``z_eval = A_eval_i·B_eval_j`` is only computed when ``eval_needed`` (otherwise
    ``log_norms[1] = log_norms[0]``). ``floor`` (in A's dtype) bounds z from below. Each pass is
    cut into ``n_threads`` ranges of rows (columns) with about equal numbers of cells; the
    log-normalisers add up the rows' in row order, so no output depends on ``n_threads``.
    """
    n_classes = A.shape[1]
    want_rows = row_stats.shape[0] > 0
    want_cols = col_stats.shape[0] > 0
    want_row_log_norms = row_log_norms.shape[0] > 0
    weighted = row_weights.shape[0] > 0
    line = max(1, 64 // A.itemsize)
    zero = floor - floor  # 0 in A's dtype, so the products below stay in that precision
    A_flat = A.reshape(-1)
    B_flat = B.reshape(-1)
    B_eval_flat = B_eval.reshape(-1)
    row_bounds = _thread_bounds(indptr, n_threads)
    # Each row's Σ_j n_ij log z_ij (and its z_eval twin), added up in row order after the threads
    # finish, so that log_norms has the same bits whatever the number of threads.
    n_rows = indptr.shape[0] - 1
    row_parts = np.empty((n_rows, 2))
    for t in prange(n_threads):
        row_acc = np.empty(n_classes, A.dtype)
        last = indptr[row_bounds[t + 1]]
        for i in range(row_bounds[t], row_bounds[t + 1]):
            a_row = A[i]
            row_acc[:] = 0.0
            row_log_norm = 0.0
            row_eval_log_norm = 0.0
            for cell in range(indptr[i], indptr[i + 1]):
                if cell + PREFETCH_CELLS < last:
                    _prefetch_row(B_flat, cols[cell + PREFETCH_CELLS], n_classes, line)
                    if eval_needed:
                        _prefetch_row(B_eval_flat, cols[cell + PREFETCH_CELLS], n_classes, line)
                j = cols[cell]
                b_row = B[j]
                z = zero
                for c in range(n_classes):
                    z += a_row[c] * b_row[c]
                z = max(z, floor)
                count = counts[cell]
                row_log_norm += count * np.log(z)
                if eval_needed:
                    a_eval = A_eval[i]
                    b_eval = B_eval[j]
                    z_eval = zero
                    for c in range(n_classes):
                        z_eval += a_eval[c] * b_eval[c]
                    row_eval_log_norm += count * np.log(max(z_eval, floor))
                if want_rows:
                    ratio = count / z
                    for c in range(n_classes):
                        row_acc[c] += ratio * b_row[c]
            if want_rows:
                for c in range(n_classes):
                    row_stats[i, c] = row_acc[c] * a_row[c]
            if want_row_log_norms:
                row_log_norms[i] = row_log_norm
            row_parts[i, 0] = row_log_norm
            row_parts[i, 1] = row_eval_log_norm if eval_needed else row_log_norm

    if want_cols:
        col_bounds = _thread_bounds(col_indptr, n_threads)
        for t in prange(n_threads):
            col_acc = np.empty(n_classes, A.dtype)
            last = col_indptr[col_bounds[t + 1]]
            for j in range(col_bounds[t], col_bounds[t + 1]):
                b_row = B[j]
                col_acc[:] = 0.0
                for cell in range(col_indptr[j], col_indptr[j + 1]):
                    if cell + PREFETCH_CELLS < last:
                        _prefetch_row(A_flat, col_rows[cell + PREFETCH_CELLS], n_classes, line)
                    i = col_rows[cell]
                    a_row = A[i]
                    z = zero
                    for c in range(n_classes):
                        z += a_row[c] * b_row[c]
                    ratio = col_counts[cell] / max(z, floor)
                    if weighted:
                        ratio *= row_weights[i]
                    for c in range(n_classes):
                        col_acc[c] += ratio * a_row[c]
                for c in range(n_classes):
                    col_stats[j, c] = col_acc[c] * b_row[c]
    _add_in_order(row_parts, log_norms)


@njit(parallel=True, cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def count_matmul_kernel(indptr, cols, counts, dense, n_threads, out):
    """``out[i] = Σ_j n_ij dense[j]`` over the cells of each row of a CSR matrix.

    Given the CSC arrays (col_indptr, col_rows, col_counts) instead, the same loop computes
    ``nᵀ dense``. Cells with a zero count are skipped, so ``-inf`` entries of ``dense`` (log
    probabilities of zero) reach only cells that observe them.
    """
    n_classes = dense.shape[1]
    line = max(1, 64 // dense.itemsize)
    dense_flat = dense.reshape(-1)
    bounds = _thread_bounds(indptr, n_threads)
    for t in prange(n_threads):
        acc = np.empty(n_classes, dense.dtype)
        last = indptr[bounds[t + 1]]
        for i in range(bounds[t], bounds[t + 1]):
            acc[:] = 0.0
            for cell in range(indptr[i], indptr[i + 1]):
                if cell + PREFETCH_CELLS < last:
                    _prefetch_row(dense_flat, cols[cell + PREFETCH_CELLS], n_classes, line)
                count = counts[cell]
                if count != 0:
                    source = dense[cols[cell]]
                    for c in range(n_classes):
                        acc[c] += count * source[c]
            for c in range(n_classes):
                out[i, c] = acc[c]


@njit(parallel=True, cache=True, nogil=True)
def path_mixture_kernel(indptr, cols, counts, col_indptr, col_rows, col_counts, weights, aspects, tempered, paths,
                        lengths, log_prior, floor, n_threads, scores, posterior, level_stats, node_stats):
    """Scores, tempered posteriors and expected counts of per-row path mixtures (see
    ``inference.sparse.path_mixture_stats``); writes ``scores``, ``posterior`` and, when they
    have rows, ``level_stats`` and ``node_stats``.

    Everything a row needs lives in its own cells, so each row is done in one pass for all
    clusters. The node statistics of a column (word) k sum over its cells, which the rows' pass
    would scatter from every thread; they are added in a second pass over the CSC copy of the
    cells (``col_indptr``, ``col_rows``, ``col_counts``), one column at a time in row order, with
    z^β computed again, so that they have the same bits on any number of threads.
    """
    n_rows, n_leaves, n_levels = weights.shape
    n_nodes = aspects.shape[1]
    want_stats = level_stats.shape[0] > 0
    bounds = _thread_bounds(indptr, n_threads)
    if want_stats:
        level_stats[:] = 0.0
    for t in prange(n_threads):
        max_cells = 0
        for i in range(bounds[t], bounds[t + 1]):
            max_cells = max(max_cells, indptr[i + 1] - indptr[i])
        # z^β of every cell of the current row and every cluster, reused by the statistics pass.
        mixture = np.empty((max_cells, n_leaves))
        tempered_scores = np.empty(n_leaves)
        for i in range(bounds[t], bounds[t + 1]):
            start = indptr[i]
            tempered_scores[:] = 0.0
            scores[i, :] = 0.0
            for cell in range(start, indptr[i + 1]):
                k = cols[cell]
                count = counts[cell]
                for leaf in range(n_leaves):
                    z = 0.0
                    z_hot = 0.0
                    for level in range(lengths[leaf]):
                        node = paths[leaf, level]
                        z += weights[i, leaf, level] * aspects[k, node]
                        z_hot += weights[i, leaf, level] * tempered[k, node]
                    z = max(z, floor)
                    z_hot = max(z_hot, floor)
                    mixture[cell - start, leaf] = z_hot
                    scores[i, leaf] += count * np.log(z)
                    tempered_scores[leaf] += count * np.log(z_hot)
            peak = -np.inf
            for leaf in range(n_leaves):
                posterior[i, leaf] = log_prior[leaf] + tempered_scores[leaf]
                peak = max(peak, posterior[i, leaf])
            total = 0.0
            for leaf in range(n_leaves):
                posterior[i, leaf] = np.exp(posterior[i, leaf] - peak)
                total += posterior[i, leaf]
            for leaf in range(n_leaves):
                posterior[i, leaf] /= total
            if want_stats:
                for cell in range(start, indptr[i + 1]):
                    k = cols[cell]
                    count = counts[cell]
                    for leaf in range(n_leaves):
                        ratio = count / mixture[cell - start, leaf]
                        for level in range(lengths[leaf]):
                            level_stats[i, leaf, level] += ratio * tempered[k, paths[leaf, level]]
                for leaf in range(n_leaves):
                    for level in range(n_levels):
                        level_stats[i, leaf, level] *= weights[i, leaf, level]
    if want_stats:
        col_bounds = _thread_bounds(col_indptr, n_threads)
        for t in prange(n_threads):
            node_acc = np.empty(n_nodes, weights.dtype)
            column = np.empty((n_leaves, n_levels), tempered.dtype)  # P^β of the column along each path
            for k in range(col_bounds[t], col_bounds[t + 1]):
                if col_indptr[k] == col_indptr[k + 1]:
                    node_stats[k, :] = 0.0
                    continue
                node_acc[:] = 0.0
                for leaf in range(n_leaves):
                    for level in range(lengths[leaf]):
                        column[leaf, level] = tempered[k, paths[leaf, level]]
                for cell in range(col_indptr[k], col_indptr[k + 1]):
                    i = col_rows[cell]
                    count = col_counts[cell]
                    for leaf in range(n_leaves):
                        z_hot = 0.0
                        for level in range(lengths[leaf]):  # as in the rows' pass, level by level
                            z_hot += weights[i, leaf, level] * column[leaf, level]
                        weighted = posterior[i, leaf] * (count / max(z_hot, floor))
                        for level in range(lengths[leaf]):
                            node_acc[paths[leaf, level]] += weighted * weights[i, leaf, level]
                for node in range(n_nodes):
                    node_stats[k, node] = node_acc[node] * tempered[k, node]


# ---------------------------------------------------------------------------- XLA custom calls
# Every handler checks the call frame, then calls its kernel on XLA's buffers. One handler per
# kernel and float dtype, each compiled only when its dtype is first used (CSR/CSC pointers are
# int32); module-level so numba's disk cache finds them.
#
# cell stats   args: A, B, A_eval, B_eval, eval_needed (bool), row_weights, indptr, cols, counts,
#                    col_indptr, col_rows, col_counts, floor (0-d), n_threads (0-d int32)
#              rets: row_stats, col_stats, row_log_norms, log_norms (2,)
# count matmul args: pointer, indices, counts, dense, n_threads; rets: out
# path mixture args: indptr, cols, counts, col_indptr, col_rows, col_counts, weights, aspects, tempered,
#                    paths (int32), lengths (int32), log_prior, floor, n_threads;
#                    rets: scores, posterior, level_stats, node_stats


@njit(inline="always")
def _cell_stats_call(frame, real):
    done, code = prologue(frame, 14, 4)
    if done:
        return code
    arg = lambda index: arg_buffer(frame, index)  # noqa: E731
    ret = lambda index: ret_buffer(frame, index)  # noqa: E731
    cell_stats_kernel(
        buffer_1d(arg(6), I32), buffer_1d(arg(7), I32), buffer_1d(arg(8), real),
        buffer_1d(arg(9), I32), buffer_1d(arg(10), I32), buffer_1d(arg(11), real),
        buffer_2d(arg(0), real), buffer_2d(arg(1), real), buffer_2d(arg(2), real), buffer_2d(arg(3), real),
        buffer_scalar(arg(4), np.uint8(0)) != 0, buffer_1d(arg(5), real), buffer_scalar(arg(12), real),
        max(1, buffer_scalar(arg(13), I32)),
        buffer_2d(ret(0), real), buffer_2d(ret(1), real), buffer_1d(ret(2), real), buffer_1d(ret(3), real),
    )
    return 0


@njit(inline="always")
def _count_matmul_call(frame, real):
    done, code = prologue(frame, 5, 1)
    if done:
        return code
    arg = lambda index: arg_buffer(frame, index)  # noqa: E731
    count_matmul_kernel(buffer_1d(arg(0), I32), buffer_1d(arg(1), I32), buffer_1d(arg(2), real),
                        buffer_2d(arg(3), real), max(1, buffer_scalar(arg(4), I32)),
                        buffer_2d(ret_buffer(frame, 0), real))
    return 0


@njit(inline="always")
def _path_mixture_call(frame, real):
    done, code = prologue(frame, 14, 4)
    if done:
        return code
    arg = lambda index: arg_buffer(frame, index)  # noqa: E731
    ret = lambda index: ret_buffer(frame, index)  # noqa: E731
    path_mixture_kernel(
        buffer_1d(arg(0), I32), buffer_1d(arg(1), I32), buffer_1d(arg(2), real),
        buffer_1d(arg(3), I32), buffer_1d(arg(4), I32), buffer_1d(arg(5), real), buffer_3d(arg(6), real),
        buffer_2d(arg(7), real), buffer_2d(arg(8), real), buffer_2d(arg(9), I32), buffer_1d(arg(10), I32),
        buffer_1d(arg(11), real), buffer_scalar(arg(12), real), max(1, buffer_scalar(arg(13), I32)),
        buffer_2d(ret(0), real), buffer_2d(ret(1), real), buffer_3d(ret(2), real), buffer_2d(ret(3), real),
    )
    return 0


def _cell_stats_f32(frame):
    return _cell_stats_call(frame, np.float32(0))


def _cell_stats_f64(frame):
    return _cell_stats_call(frame, np.float64(0))


def _count_matmul_f32(frame):
    return _count_matmul_call(frame, np.float32(0))


def _count_matmul_f64(frame):
    return _count_matmul_call(frame, np.float64(0))


def _path_mixture_f32(frame):
    return _path_mixture_call(frame, np.float32(0))


def _path_mixture_f64(frame):
    return _path_mixture_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {
    "latentzoo_cell_stats_float32": _cell_stats_f32, "latentzoo_cell_stats_float64": _cell_stats_f64,
    "latentzoo_count_matmul_float32": _count_matmul_f32, "latentzoo_count_matmul_float64": _count_matmul_f64,
    "latentzoo_path_mixture_float32": _path_mixture_f32, "latentzoo_path_mixture_float64": _path_mixture_f64,
}


def target(kernel: str, real_dtype: Any) -> str:
    """Name of the XLA custom call running ``kernel`` in ``real_dtype`` (compiled and registered once)."""
    name = f"latentzoo_{kernel}_{np.dtype(real_dtype).name}"
    return register_handler(name, HANDLERS[name])



# ---------------------------------------------------------------------------- the calls from XLA
# What :mod:`inference.sparse` calls when its backend resolves to "numba": each builds the
# custom call of its kernel on the arrays of the XLA path and returns the same results.
def _call(kernel: str, dtype: Any, results: Any):
    return jax.ffi.ffi_call(target(kernel, dtype), results, vmap_method="sequential")


def _check_int32_pointers(data: DyadicArrays) -> None:
    if data.indptr.dtype != jnp.int32 or data.col_indptr.dtype != jnp.int32:
        raise ValueError("data: the numba backend takes fewer than 2^31 cells per block; split the cells over "
                         "devices (devices=) or use backend='xla'")


def numba_cell_stats(A, B, data: DyadicArrays, want_rows, want_cols, eval_factors, eval_needed, floor,
                     row_weights=None, want_row_log_norms=False):
    """``(row_stats, col_stats, row_log_norms, log_norm, eval_log_norm)`` of z = A Bᵀ on the cells
    (``row_stats`` / ``col_stats`` None when not wanted), as :func:`inference.sparse.cell_stats`
    and, with ``row_weights`` and ``want_row_log_norms``, :func:`inference.sparse.row_cell_stats`."""
    _check_int32_pointers(data)
    n_rows, n_classes = A.shape
    results = (
        jax.ShapeDtypeStruct((n_rows if want_rows else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((B.shape[0] if want_cols else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((n_rows if want_row_log_norms else 0,), A.dtype),
        jax.ShapeDtypeStruct((2,), A.dtype),
    )
    if eval_factors is None:
        A_eval, B_eval, eval_needed = A[:1], B[:1], False
    else:
        A_eval, B_eval = (factor.astype(A.dtype) for factor in eval_factors)
    row_weights = jnp.zeros((0,), A.dtype) if row_weights is None else row_weights.astype(A.dtype)
    # The kernel reads every float buffer in A's dtype.
    row_stats, col_stats, row_log_norms, log_norms = _call("cell_stats", A.dtype, results)(
        A, B.astype(A.dtype), A_eval, B_eval, jnp.asarray(eval_needed, bool), row_weights, data.indptr, data.cols,
        data.counts.astype(A.dtype), data.col_indptr, data.col_rows, data.col_counts.astype(A.dtype),
        jnp.asarray(floor, A.dtype), numba_threads(),
    )
    return (row_stats if want_rows else None, col_stats if want_cols else None, row_log_norms,
            log_norms[0], log_norms[1])


def numba_count_matmul(dense, data: DyadicArrays, transpose: bool):
    """``n @ dense`` (or ``nᵀ @ dense``), as :func:`inference.sparse.count_matmul`."""
    _check_int32_pointers(data)
    n_rows, n_cols = data.shape
    result = jax.ShapeDtypeStruct((n_cols if transpose else n_rows, dense.shape[1]), dense.dtype)
    # nᵀ G is n G over the CSC copy of the cells: the columns play the part of the rows.
    pointer, indices, counts = ((data.col_indptr, data.col_rows, data.col_counts) if transpose
                                else (data.indptr, data.cols, data.counts))
    return _call("count_matmul", dense.dtype, result)(pointer, indices, counts.astype(dense.dtype), dense,
                                                      numba_threads())


def numba_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior, data: DyadicArrays,
                             want_stats, floor):
    """``(scores, posterior, level_stats, node_stats)`` of per-row path mixtures (the statistics
    None without ``want_stats``), as :func:`inference.sparse.path_mixture_stats`."""
    _check_int32_pointers(data)
    n_rows, n_leaves, n_levels = weights.shape
    dtype = weights.dtype
    results = (
        jax.ShapeDtypeStruct((n_rows, n_leaves), dtype),
        jax.ShapeDtypeStruct((n_rows, n_leaves), dtype),
        jax.ShapeDtypeStruct((n_rows if want_stats else 0, n_leaves, n_levels), dtype),
        jax.ShapeDtypeStruct((aspects.shape[0] if want_stats else 0, aspects.shape[1]), dtype),
    )
    lengths = path_mask.sum(axis=1).astype(jnp.int32)
    scores, posterior, level_stats, node_stats = _call("path_mixture", dtype, results)(
        data.indptr, data.cols, data.counts.astype(dtype), data.col_indptr, data.col_rows,
        data.col_counts.astype(dtype), weights, aspects.astype(dtype), tempered.astype(dtype),
        paths.astype(jnp.int32), lengths, log_prior.astype(dtype), jnp.asarray(floor, dtype), numba_threads(),
    )
    if not want_stats:
        return scores, posterior, None, None
    return scores, posterior, level_stats, node_stats
