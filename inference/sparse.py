"""Sparse E-step primitives for co-occurrence models: sampled dense products and their adjoints.

Every dyadic EM kernel of the zoo reduces to one primitive over the non-zero cells (i, j) of a
count matrix n:

    z_ij       = Σ_c A_ic B_jc                      (a "sampled dense-dense product")
    row_stats  = A ⊙ (R B)      with R_ij = n_ij / z_ij
    col_stats  = B ⊙ (Rᵀ A)
    log_norm   = Σ_ij n_ij log z_ij

For the aspect model (H99 eqs. 3–4), with A_ic = P(c) P(x_i|c)^β and B_jc = P(y_j|c)^β, z_ij is
the normaliser of the tempered class posterior, ``row_stats[i, c] = Σ_j n_ij P{c_ij = c}`` and
``col_stats[j, c] = Σ_i n_ij P{c_ij = c}``: the expected counts that the M-step normalises.

Two implementations compute the same numbers:

* ``"xla"``: gathers and segment sums in plain JAX; runs on any backend (GPU, TPU, CPU). Memory is
  bounded by working in chunks of cells, so no (nnz × K) temporary exceeds ``chunk_cells × K``.
* ``"numba"``: a fused, multi-threaded loop over the CSR rows, called from inside the jitted fit
  through :func:`jax.pure_callback`. XLA's CPU gathers and scatters run at a few GB/s, so on CPU
  this path is an order of magnitude faster; it never materialises an (nnz × K) array.

``backend="auto"`` picks numba on the CPU backend when numba is importable, and XLA otherwise.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoo.data import DyadicArrays

__all__ = [
    "CellStats", "cell_stats", "cell_log_norm", "resolve_backend", "DEFAULT_CHUNK_CELLS",
    "count_matmul", "RowCellStats", "row_cell_stats", "PathMixtureStats", "path_mixture_stats",
]

#: Cells processed at once by the XLA path (bounds temporaries to chunk × K floats).
DEFAULT_CHUNK_CELLS = 1 << 18


class CellStats(NamedTuple):
    """Result of :func:`cell_stats`.

    Attributes
    ----------
    row_stats : (n_rows, K) array or None
    col_stats : (n_cols, K) array or None
    log_norm : scalar, Σ n_ij log z_ij
    eval_log_norm : scalar, Σ n_ij log(A'_i·B'_j) for the evaluation factors (equal to
        ``log_norm`` when none were given or ``eval_needed`` was false)
    """

    row_stats: Any
    col_stats: Any
    log_norm: Any
    eval_log_norm: Any


def _floor(dtype: Any) -> float:
    # z below this is treated as this: keeps n / z finite without touching realistic values.
    return 1e-30 if jnp.dtype(dtype) == jnp.float32 else 1e-300


@lru_cache(maxsize=1)
def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return os.environ.get("LATENTZOO_DISABLE_NUMBA", "") == ""


def resolve_backend(backend: str) -> str:
    """Map ``"auto"`` to ``"numba"`` (CPU backend with numba) or ``"xla"``."""
    if backend not in ("auto", "xla", "numba"):
        raise ValueError(f"backend: must be 'auto', 'xla' or 'numba', got {backend!r}")
    if backend == "auto":
        return "numba" if (jax.default_backend() == "cpu" and _numba_available()) else "xla"
    if backend == "numba" and not _numba_available():
        raise ValueError("backend: 'numba' requested but numba is not installed")
    return backend


# ---------------------------------------------------------------------------- XLA path
def _xla_cell_stats(A, B, data: DyadicArrays, want_rows, want_cols, chunk_cells, eval_factors, eval_needed):
    n_rows, n_classes = A.shape
    n_cols = B.shape[0]
    floor = _floor(A.dtype)
    nnz = data.rows.shape[0]
    n_chunks = max(1, -(-nnz // chunk_cells))
    size = -(-nnz // n_chunks)
    pad = n_chunks * size - nnz
    # Padding cells have count 0 and point at row/col 0: they contribute nothing.
    rows = jnp.pad(data.rows, (0, pad)).reshape(n_chunks, size)
    cols = jnp.pad(data.cols, (0, pad)).reshape(n_chunks, size)
    counts = jnp.pad(data.counts, (0, pad)).reshape(n_chunks, size)

    def body(carry, chunk):
        row_acc, col_acc, log_norm, eval_log_norm = carry
        chunk_rows, chunk_cols, chunk_counts = chunk
        a_cells = A[chunk_rows]
        b_cells = B[chunk_cols]
        z = jnp.maximum(jnp.einsum("nk,nk->n", a_cells, b_cells), floor)
        ratio = chunk_counts / z
        chunk_log_norm = jnp.sum(jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z), 0.0))
        log_norm = log_norm + chunk_log_norm
        if eval_factors is not None:
            A_eval, B_eval = eval_factors
            z_eval = jnp.maximum(jnp.einsum("nk,nk->n", A_eval[chunk_rows], B_eval[chunk_cols]), floor)
            chunk_eval = jnp.sum(jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z_eval), 0.0))
            eval_log_norm = eval_log_norm + jnp.where(eval_needed, chunk_eval, chunk_log_norm)
        if want_rows:
            row_acc = row_acc + jax.ops.segment_sum(
                ratio[:, None] * b_cells, chunk_rows, n_rows, indices_are_sorted=True
            )
        if want_cols:
            col_acc = col_acc + jax.ops.segment_sum(ratio[:, None] * a_cells, chunk_cols, n_cols)
        return (row_acc, col_acc, log_norm, eval_log_norm), None

    init = (
        jnp.zeros((n_rows, n_classes), A.dtype) if want_rows else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_cols, n_classes), A.dtype) if want_cols else jnp.zeros((0,), A.dtype),
        jnp.zeros((), A.dtype),
        jnp.zeros((), A.dtype),
    )
    (row_acc, col_acc, log_norm, eval_log_norm), _ = jax.lax.scan(body, init, (rows, cols, counts))
    return CellStats(
        row_stats=A * row_acc if want_rows else None,
        col_stats=B * col_acc if want_cols else None,
        log_norm=log_norm,
        eval_log_norm=eval_log_norm if eval_factors is not None else log_norm,
    )


# ---------------------------------------------------------------------------- numba path
def _num_threads() -> int:
    import numba

    return numba.get_num_threads()  # per calling thread; numba.set_num_threads changes it


def _row_bounds(indptr: np.ndarray, n_threads: int) -> np.ndarray:
    """Split rows into ``n_threads`` contiguous ranges holding about equal numbers of cells."""
    targets = np.linspace(0, indptr[-1], n_threads + 1)
    bounds = np.searchsorted(indptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, indptr.shape[0] - 1
    return np.maximum.accumulate(bounds)


def _numba_host(A, B, A_eval, B_eval, eval_needed, indptr, cols, counts, col_indptr, col_rows, col_counts,
                *, want_rows, want_cols):
    from inference._numba_cells import cell_stats_kernel

    A = np.ascontiguousarray(A)
    B = np.ascontiguousarray(B)
    indptr, col_indptr = np.asarray(indptr), np.asarray(col_indptr)
    n_threads = max(1, _num_threads())
    row_stats, col_stats, log_norm, eval_log_norm = cell_stats_kernel(
        indptr, np.asarray(cols), np.asarray(counts, dtype=A.dtype),
        col_indptr, np.asarray(col_rows), np.asarray(col_counts, dtype=A.dtype),
        A, B, np.ascontiguousarray(A_eval, dtype=A.dtype), np.ascontiguousarray(B_eval, dtype=A.dtype),
        bool(eval_needed), want_rows, want_cols,
        _row_bounds(indptr, n_threads), _row_bounds(col_indptr, n_threads), A.dtype.type(_floor(A.dtype)),
    )
    return row_stats, col_stats, np.asarray(log_norm, A.dtype), np.asarray(eval_log_norm, A.dtype)


def _numba_cell_stats(A, B, data: DyadicArrays, want_rows, want_cols, eval_factors, eval_needed):
    n_classes = A.shape[1]
    shapes = (
        jax.ShapeDtypeStruct((A.shape[0] if want_rows else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((B.shape[0] if want_cols else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((), A.dtype),
        jax.ShapeDtypeStruct((), A.dtype),
    )
    if eval_factors is None:
        A_eval, B_eval, eval_needed = A[:1], B[:1], False
    else:
        A_eval, B_eval = eval_factors

    def host(*args):
        return _numba_host(*args, want_rows=want_rows, want_cols=want_cols)

    row_stats, col_stats, log_norm, eval_log_norm = jax.pure_callback(
        host, shapes, A, B, A_eval, B_eval, jnp.asarray(eval_needed), data.indptr, data.cols, data.counts,
        data.col_indptr, data.col_rows, data.col_counts, vmap_method="sequential",
    )
    return CellStats(
        row_stats=row_stats if want_rows else None,
        col_stats=col_stats if want_cols else None,
        log_norm=log_norm,
        eval_log_norm=eval_log_norm,
    )


# ---------------------------------------------------------------------------- public
def cell_stats(
    A: Any,
    B: Any,
    data: DyadicArrays,
    *,
    want_rows: bool = True,
    want_cols: bool = True,
    backend: str = "auto",
    chunk_cells: int = DEFAULT_CHUNK_CELLS,
    eval_factors: tuple[Any, Any] | None = None,
    eval_needed: Any = True,
) -> CellStats:
    """Sampled product z_ij = A_i·B_j on the non-zero cells and the expected-count statistics.

    Parameters
    ----------
    A : (n_rows, K) array, non-negative
    B : (n_cols, K) array, non-negative
    data : DyadicArrays
        Cells in CSR order (``CoOccurrence.to_arrays``).
    want_rows, want_cols : bool
        Which statistics to compute (static).
    backend : {"auto", "xla", "numba"}
    chunk_cells : int
        Cells per chunk of the XLA path.
    eval_factors : (A', B'), optional
        Second pair of factors (same shapes) whose Σ n log(A'_i·B'_j) is accumulated in the
        same pass, e.g. the β = 1 log-likelihood while the statistics use tempered factors.
    eval_needed : bool or traced bool
        When false, ``eval_log_norm`` is ``log_norm`` (the caller knows A' = A, B' = B): the
        numba path then skips the second product; the XLA path computes and discards it.

    Returns
    -------
    CellStats
        ``row_stats = A ⊙ (R B)``, ``col_stats = B ⊙ (Rᵀ A)``, ``log_norm = Σ n log z`` with
        ``R_ij = n_ij / z_ij``. Scaling a row of A (or B) by s leaves both statistics unchanged
        and adds ``n_i log s`` to ``log_norm``.
    """
    if data.counts.dtype != A.dtype:
        # The factors set the working precision (float32 parameters on float64 counts stay float32).
        data = data._replace(counts=data.counts.astype(A.dtype), col_counts=data.col_counts.astype(A.dtype))
    if resolve_backend(backend) == "numba":
        return _numba_cell_stats(A, B, data, want_rows, want_cols, eval_factors, eval_needed)
    return _xla_cell_stats(A, B, data, want_rows, want_cols, chunk_cells, eval_factors, eval_needed)


def cell_log_norm(A: Any, B: Any, data: DyadicArrays, *, backend: str = "auto",
                  chunk_cells: int = DEFAULT_CHUNK_CELLS) -> Any:
    """Σ_ij n_ij log(A_i·B_j) over the non-zero cells (no statistics)."""
    return cell_stats(A, B, data, want_rows=False, want_cols=False, backend=backend,
                      chunk_cells=chunk_cells).log_norm



# ---------------------------------------------------------------------------- count products
# Clustering models (one-sided and two-sided clustering, H99 eqs. 7 and 10) need the sparse count
# matrix times a dense matrix, in both directions:
#
#     count_matmul(F, n)                  = n F,   out_ic = Σ_j n_ij F_jc     (F: n_cols × K)
#     count_matmul(G, n, transpose=True)  = nᵀ G,  out_jc = Σ_i n_ij G_ic     (G: n_rows × K)
#
# and mixture models with one mixture per (row, cluster) (the cluster-abstraction model, H99
# eq. 12) need the per-row sums Σ_j n_ij log z_ij of :func:`cell_stats` with row-weighted column
# statistics; :func:`row_cell_stats` provides them. Both have the same two implementations.


def _padded_chunks(data: DyadicArrays, chunk_cells: int):
    """Cells as (n_chunks, size) arrays; padding cells have count 0 and indices 0."""
    nnz = data.rows.shape[0]
    n_chunks = max(1, -(-nnz // chunk_cells))
    size = -(-nnz // n_chunks)
    pad = n_chunks * size - nnz
    return tuple(jnp.pad(array, (0, pad)).reshape(n_chunks, size) for array in (data.rows, data.cols, data.counts))


def _xla_count_matmul(dense, data: DyadicArrays, transpose: bool, chunk_cells: int):
    n_rows, n_cols = data.shape
    n_out = n_cols if transpose else n_rows

    def body(out, chunk):
        chunk_rows, chunk_cols, chunk_counts = chunk
        source, target = (chunk_rows, chunk_cols) if transpose else (chunk_cols, chunk_rows)
        # where(): padding cells (count 0) must not turn an infinite entry of ``dense`` into NaN.
        weighted = jnp.where(chunk_counts[:, None] > 0, chunk_counts[:, None] * dense[source], 0.0)
        return out + jax.ops.segment_sum(weighted, target, n_out, indices_are_sorted=not transpose), None

    out, _ = jax.lax.scan(body, jnp.zeros((n_out, dense.shape[1]), dense.dtype), _padded_chunks(data, chunk_cells))
    return out


@lru_cache(maxsize=None)
def _numba_count_kernels():
    from numba import njit, prange

    @njit(parallel=True, cache=True, nogil=True)
    def count_matmul_kernel(indptr, cols, counts, dense, transpose, n_cols, bounds):
        n_threads = bounds.shape[0] - 1
        n_rows = indptr.shape[0] - 1
        n_classes = dense.shape[1]
        if not transpose:
            out = np.zeros((n_rows, n_classes), dense.dtype)
            for t in prange(n_threads):
                for i in range(bounds[t], bounds[t + 1]):
                    for cell in range(indptr[i], indptr[i + 1]):
                        count = counts[cell]
                        source = dense[cols[cell]]
                        for c in range(n_classes):
                            out[i, c] += count * source[c]
            return out
        # One private accumulator per thread: no write conflicts, summed at the end.
        parts = np.zeros((n_threads, n_cols, n_classes), dense.dtype)
        for t in prange(n_threads):
            part = parts[t]
            for i in range(bounds[t], bounds[t + 1]):
                source = dense[i]
                for cell in range(indptr[i], indptr[i + 1]):
                    count = counts[cell]
                    j = cols[cell]
                    for c in range(n_classes):
                        part[j, c] += count * source[c]
        out = parts[0].copy()
        for t in range(1, n_threads):
            out += parts[t]
        return out

    # The row loop is written out inside the parallel kernel: numba cannot reuse its on-disk cache
    # for a kernel that calls another locally defined jitted function, and would recompile it in
    # every new process.
    @njit(parallel=True, cache=True, nogil=True)
    def row_cell_stats_kernel(indptr, cols, counts, A, B, row_weights, want_rows, want_cols, bounds, floor):
        n_threads = bounds.shape[0] - 1
        n_rows, n_classes = A.shape
        n_cols = B.shape[0]
        row_stats = np.zeros((n_rows if want_rows else 0, n_classes), A.dtype)
        col_parts = np.zeros((n_threads, n_cols if want_cols else 0, n_classes), A.dtype)
        row_log_norm = np.zeros(n_rows, A.dtype)
        for t in prange(n_threads):
            col_stats = col_parts[t]
            for i in range(bounds[t], bounds[t + 1]):
                a_row = A[i]
                weight = row_weights[i]
                log_norm = 0.0
                for cell in range(indptr[i], indptr[i + 1]):
                    j = cols[cell]
                    b_row = B[j]
                    z = a_row[0] * b_row[0]
                    for c in range(1, n_classes):
                        z += a_row[c] * b_row[c]
                    if z < floor:
                        z = floor
                    count = counts[cell]
                    log_norm += count * np.log(z)
                    ratio = count / z
                    if want_rows:
                        for c in range(n_classes):
                            row_stats[i, c] += ratio * b_row[c]
                    if want_cols:
                        weighted_ratio = weight * ratio
                        for c in range(n_classes):
                            col_stats[j, c] += weighted_ratio * a_row[c]
                row_log_norm[i] = log_norm
        col_stats = col_parts[0].copy()
        for t in range(1, n_threads):
            col_stats += col_parts[t]
        if want_rows:
            row_stats *= A
        if want_cols:
            col_stats *= B
        return row_stats, col_stats, row_log_norm

    return count_matmul_kernel, row_cell_stats_kernel


def _thread_bounds(indptr: np.ndarray) -> np.ndarray:
    n_threads = max(1, min(_num_threads(), indptr.shape[0] - 1))
    return _row_bounds(indptr, n_threads)


def _numba_count_matmul(dense, data: DyadicArrays, transpose: bool):
    n_rows, n_cols = data.shape
    shape = jax.ShapeDtypeStruct((n_cols if transpose else n_rows, dense.shape[1]), dense.dtype)

    def host(dense, indptr, cols, counts):
        kernel, _ = _numba_count_kernels()
        dense = np.ascontiguousarray(dense)
        indptr = np.asarray(indptr)
        return kernel(indptr, np.asarray(cols), np.asarray(counts, dtype=dense.dtype), dense,
                      transpose, n_cols, _thread_bounds(indptr))

    return jax.pure_callback(host, shape, dense, data.indptr, data.cols, data.counts, vmap_method="sequential")


def count_matmul(
    dense: Any,
    data: DyadicArrays,
    *,
    transpose: bool = False,
    backend: str = "auto",
    chunk_cells: int = DEFAULT_CHUNK_CELLS,
) -> Any:
    """Sparse counts times a dense matrix: ``n @ dense`` or ``nᵀ @ dense``.

    Parameters
    ----------
    dense : (n_cols, K) array, or (n_rows, K) with ``transpose=True``
        May hold ``-inf`` (e.g. log-probabilities of zero): only cells with a positive count
        touch it.
    data : DyadicArrays
        Counts n in CSR order.
    transpose : bool
        Static. False: ``out[i] = Σ_j n_ij dense[j]``, shape (n_rows, K). True:
        ``out[j] = Σ_i n_ij dense[i]``, shape (n_cols, K).
    backend : {"auto", "xla", "numba"}
    chunk_cells : int
        Cells per chunk of the XLA path.

    Returns
    -------
    array of the dtype of ``dense``.
    """
    if data.counts.dtype != dense.dtype:
        # ``dense`` sets the working precision, as in :func:`cell_stats`.
        data = data._replace(counts=data.counts.astype(dense.dtype))
    if resolve_backend(backend) == "numba":
        return _numba_count_matmul(dense, data, transpose)
    return _xla_count_matmul(dense, data, transpose, chunk_cells)


class RowCellStats(NamedTuple):
    """Result of :func:`row_cell_stats`.

    Attributes
    ----------
    row_stats : (n_rows, K) array or None — ``A ⊙ (R B)``
    col_stats : (n_cols, K) array or None — ``B ⊙ ((w ⊙ R)ᵀ A)``, rows of R weighted by w
    row_log_norm : (n_rows,) array — Σ_j n_ij log z_ij of each row
    """

    row_stats: Any
    col_stats: Any
    row_log_norm: Any


def _xla_row_cell_stats(A, B, data: DyadicArrays, row_weights, want_rows, want_cols, chunk_cells):
    n_rows, n_classes = A.shape
    n_cols = B.shape[0]
    floor = _floor(A.dtype)

    def body(carry, chunk):
        row_acc, col_acc, log_acc = carry
        chunk_rows, chunk_cols, chunk_counts = chunk
        a_cells = A[chunk_rows]
        b_cells = B[chunk_cols]
        z = jnp.maximum(jnp.einsum("nk,nk->n", a_cells, b_cells), floor)
        ratio = chunk_counts / z
        log_acc = log_acc + jax.ops.segment_sum(
            jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z), 0.0), chunk_rows, n_rows, indices_are_sorted=True
        )
        if want_rows:
            row_acc = row_acc + jax.ops.segment_sum(ratio[:, None] * b_cells, chunk_rows, n_rows,
                                                    indices_are_sorted=True)
        if want_cols:
            weighted = (row_weights[chunk_rows] * ratio)[:, None] * a_cells
            col_acc = col_acc + jax.ops.segment_sum(weighted, chunk_cols, n_cols)
        return (row_acc, col_acc, log_acc), None

    init = (
        jnp.zeros((n_rows, n_classes), A.dtype) if want_rows else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_cols, n_classes), A.dtype) if want_cols else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_rows,), A.dtype),
    )
    (row_acc, col_acc, log_acc), _ = jax.lax.scan(body, init, _padded_chunks(data, chunk_cells))
    return RowCellStats(
        row_stats=A * row_acc if want_rows else None,
        col_stats=B * col_acc if want_cols else None,
        row_log_norm=log_acc,
    )


def _numba_row_cell_stats(A, B, data: DyadicArrays, row_weights, want_rows, want_cols):
    n_classes = A.shape[1]
    shapes = (
        jax.ShapeDtypeStruct((A.shape[0] if want_rows else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((B.shape[0] if want_cols else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((A.shape[0],), A.dtype),
    )

    def host(A, B, row_weights, indptr, cols, counts):
        _, kernel = _numba_count_kernels()
        A = np.ascontiguousarray(A)
        indptr = np.asarray(indptr)
        return kernel(
            indptr, np.asarray(cols), np.asarray(counts, dtype=A.dtype), A, np.ascontiguousarray(B),
            np.asarray(row_weights, dtype=A.dtype), want_rows, want_cols, _thread_bounds(indptr), _floor(A.dtype),
        )

    row_stats, col_stats, row_log_norm = jax.pure_callback(
        host, shapes, A, B, row_weights, data.indptr, data.cols, data.counts, vmap_method="sequential"
    )
    return RowCellStats(
        row_stats=row_stats if want_rows else None,
        col_stats=col_stats if want_cols else None,
        row_log_norm=row_log_norm,
    )


def row_cell_stats(
    A: Any,
    B: Any,
    data: DyadicArrays,
    *,
    row_weights: Any = None,
    want_rows: bool = True,
    want_cols: bool = True,
    backend: str = "auto",
    chunk_cells: int = DEFAULT_CHUNK_CELLS,
) -> RowCellStats:
    """:func:`cell_stats` with the log-normaliser kept per row and row-weighted column statistics.

    With z_ij = A_i·B_j and R_ij = n_ij / z_ij over the non-zero cells:
    ``row_log_norm[i] = Σ_j n_ij log z_ij``, ``row_stats = A ⊙ (R B)`` and
    ``col_stats = B ⊙ ((w ⊙ R)ᵀ A)`` where row i of R is multiplied by ``row_weights[i]``.
    For a mixture whose weights depend on the row and on a latent cluster of the row (H99 eq. 12),
    one call per cluster gives the cluster's log-likelihood of every row, the expected counts of
    the row's mixture weights, and (weighted by the cluster posteriors) the expected counts of the
    column distributions.

    Parameters
    ----------
    A : (n_rows, K) array, non-negative
    B : (n_cols, K) array, non-negative
    data : DyadicArrays
    row_weights : (n_rows,) array, optional
        Weights of the rows in ``col_stats`` (default 1).
    want_rows, want_cols : bool
        Which statistics to compute (static).
    backend : {"auto", "xla", "numba"}
    chunk_cells : int

    Returns
    -------
    RowCellStats
    """
    if row_weights is None:
        row_weights = jnp.ones((A.shape[0],), A.dtype)
    row_weights = jnp.asarray(row_weights, A.dtype)
    if resolve_backend(backend) == "numba":
        return _numba_row_cell_stats(A, B, data, row_weights, want_rows, want_cols)
    return _xla_row_cell_stats(A, B, data, row_weights, want_rows, want_cols, chunk_cells)



# ---------------------------------------------------------------------------- path mixtures
# The cluster-abstraction model (H99 §3) gives every row i and every cluster α its own mixture
# over the aspects on the path to α: z_ikα = Σ_ℓ W_iαℓ P_k,path[α,ℓ]. One E-step needs, per row,
# the scores Σ_k n_ik log z_ikα of all clusters, the tempered cluster posterior, and the expected
# counts of the weights and of the aspects. Tempering raises the likelihood P to the power β
# (H99 §4), so the posterior and the statistics use z^β_ikα = Σ_ℓ W_iαℓ P^β_k,path[α,ℓ], while the
# scores (the β = 1 log-likelihood) use z. Everything a row needs lives in the row's own cells, so
# the numba kernel does it in one pass per row, for all clusters at once.


class PathMixtureStats(NamedTuple):
    """Result of :func:`path_mixture_stats`.

    Attributes
    ----------
    scores : (n_rows, K) — Σ_k n_ik log z_ikα (untempered)
    posterior : (n_rows, K) — softmax_α(log_prior_α + Σ_k n_ik log z^β_ikα)
    level_stats : (n_rows, K, L) or None — W_iαℓ Σ_k (n_ik / z^β_ikα) P^β_k,path[α,ℓ]
    node_stats : (n_cols, n_nodes) or None —
        P^β_kν Σ_{i,α,ℓ: path[α,ℓ]=ν} posterior_iα (n_ik / z^β_ikα) W_iαℓ
    """

    scores: Any
    posterior: Any
    level_stats: Any
    node_stats: Any


def _xla_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior, data, want_stats, chunk_cells):
    n_leaves = weights.shape[1]
    ones = jnp.ones((weights.shape[0],), weights.dtype)

    def on_path(leaf, nodes):
        return jnp.where(path_mask[leaf][None, :], nodes[:, paths[leaf]], 0.0)

    def leaf_scores(leaf):
        A = weights[:, leaf, :]
        plain = _xla_row_cell_stats(A, on_path(leaf, aspects), data, ones, False, False, chunk_cells).row_log_norm
        hot = _xla_row_cell_stats(A, on_path(leaf, tempered), data, ones, False, False, chunk_cells).row_log_norm
        return plain, hot

    scores, tempered_scores = jax.lax.map(leaf_scores, jnp.arange(n_leaves))
    posterior = jax.nn.softmax(log_prior[None, :] + tempered_scores.T, axis=1)
    if not want_stats:
        return PathMixtureStats(scores.T, posterior, None, None)

    def leaf_statistics(node_stats, leaf):
        stats = _xla_row_cell_stats(weights[:, leaf, :], on_path(leaf, tempered), data, posterior[:, leaf],
                                    True, True, chunk_cells)
        # Padding levels have zero aspects, so their column statistics are zero.
        return node_stats.at[:, paths[leaf]].add(stats.col_stats), stats.row_stats

    node_stats, level_stats = jax.lax.scan(
        leaf_statistics, jnp.zeros(aspects.shape, aspects.dtype), jnp.arange(n_leaves)
    )
    return PathMixtureStats(scores.T, posterior, jnp.transpose(level_stats, (1, 0, 2)), node_stats)


@lru_cache(maxsize=None)
def _numba_path_kernel():
    from numba import njit, prange

    # Written as one function: see the note on caching in ``_numba_count_kernels``.
    @njit(parallel=True, cache=True, nogil=True)
    def path_mixture_kernel(indptr, cols, counts, weights, aspects, tempered, paths, lengths, log_prior,
                            want_stats, bounds, floor):
        n_threads = bounds.shape[0] - 1
        n_rows, n_leaves, n_levels = weights.shape
        n_cols, n_nodes = aspects.shape
        scores = np.zeros((n_rows, n_leaves), weights.dtype)
        posterior = np.zeros((n_rows, n_leaves), weights.dtype)
        level_stats = np.zeros((n_rows if want_stats else 0, n_leaves, n_levels), weights.dtype)
        node_parts = np.zeros((n_threads, n_cols if want_stats else 0, n_nodes), weights.dtype)
        for t in prange(n_threads):
            node_stats = node_parts[t]
            max_cells = 0
            for i in range(bounds[t], bounds[t + 1]):
                max_cells = max(max_cells, indptr[i + 1] - indptr[i])
            # z^β of every cell of the current row and every cluster, reused by the statistics pass.
            mixture = np.empty((max_cells, n_leaves))
            tempered_scores = np.empty(n_leaves)
            for i in range(bounds[t], bounds[t + 1]):
                start = indptr[i]
                tempered_scores[:] = 0.0
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
                        if z < floor:
                            z = floor
                        if z_hot < floor:
                            z_hot = floor
                        mixture[cell - start, leaf] = z_hot
                        scores[i, leaf] += count * np.log(z)
                        tempered_scores[leaf] += count * np.log(z_hot)
                peak = -np.inf
                for leaf in range(n_leaves):
                    value = log_prior[leaf] + tempered_scores[leaf]
                    posterior[i, leaf] = value
                    if value > peak:
                        peak = value
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
                            weighted = posterior[i, leaf] * ratio
                            for level in range(lengths[leaf]):
                                node = paths[leaf, level]
                                level_stats[i, leaf, level] += ratio * tempered[k, node]
                                node_stats[k, node] += weighted * weights[i, leaf, level]
        node_stats = node_parts[0].copy()
        for t in range(1, n_threads):
            node_stats += node_parts[t]
        if want_stats:
            level_stats *= weights
            node_stats *= tempered
        return scores, posterior, level_stats, node_stats

    return path_mixture_kernel


def _numba_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior, data, want_stats):
    n_rows, n_leaves, n_levels = weights.shape
    dtype = weights.dtype
    shapes = (
        jax.ShapeDtypeStruct((n_rows, n_leaves), dtype),
        jax.ShapeDtypeStruct((n_rows, n_leaves), dtype),
        jax.ShapeDtypeStruct((n_rows if want_stats else 0, n_leaves, n_levels), dtype),
        jax.ShapeDtypeStruct((aspects.shape[0] if want_stats else 0, aspects.shape[1]), dtype),
    )

    def host(weights, aspects, tempered, paths, lengths, log_prior, indptr, cols, counts):
        kernel = _numba_path_kernel()
        weights = np.ascontiguousarray(weights)
        indptr = np.asarray(indptr)
        return kernel(
            indptr, np.asarray(cols), np.asarray(counts, dtype=weights.dtype), weights, np.ascontiguousarray(aspects),
            np.ascontiguousarray(tempered), np.asarray(paths, np.int64), np.asarray(lengths, np.int64),
            np.asarray(log_prior, weights.dtype), want_stats, _thread_bounds(indptr), _floor(weights.dtype),
        )

    lengths = path_mask.sum(axis=1).astype(jnp.int32)
    scores, posterior, level_stats, node_stats = jax.pure_callback(
        host, shapes, weights, aspects, tempered, paths, lengths, log_prior, data.indptr, data.cols, data.counts,
        vmap_method="sequential",
    )
    if not want_stats:
        return PathMixtureStats(scores, posterior, None, None)
    return PathMixtureStats(scores, posterior, level_stats, node_stats)


def path_mixture_stats(
    weights: Any,
    aspects: Any,
    paths: Any,
    path_mask: Any,
    log_prior: Any,
    data: DyadicArrays,
    *,
    tempered_aspects: Any = None,
    want_stats: bool = True,
    backend: str = "auto",
    chunk_cells: int = DEFAULT_CHUNK_CELLS,
) -> PathMixtureStats:
    """Per-row, per-cluster path mixtures: scores, tempered posteriors and expected counts.

    With z_ikα = Σ_ℓ W_iαℓ P_k,path[α,ℓ] over the valid levels of α (``path_mask``) and z^β the
    same sum over the tempered aspects P^β: ``scores[i, α] = Σ_k n_ik log z_ikα``,
    ``posterior = softmax(log_prior + Σ_k n_ik log z^β_ikα)`` and, with ``want_stats``,
    ``level_stats`` and ``node_stats`` as in :class:`PathMixtureStats` (the E-step of H99
    eqs. 11–12 for the cluster-abstraction model).

    Parameters
    ----------
    weights : (n_rows, K, L) array, non-negative; W
    aspects : (n_cols, n_nodes) array, non-negative; P
    paths : (K, L) int array — node of every level of every cluster's path
    path_mask : (K, L) bool array — valid levels, a prefix of each row
    log_prior : (K,) array (may hold -inf)
    data : DyadicArrays
    tempered_aspects : (n_cols, n_nodes) array, optional
        P^β; defaults to ``aspects`` (β = 1).
    want_stats : bool
        Static; False computes only scores and posterior.
    backend : {"auto", "xla", "numba"}
    chunk_cells : int
    """
    tempered = aspects if tempered_aspects is None else tempered_aspects
    if resolve_backend(backend) == "numba":
        return _numba_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior, data, want_stats)
    return _xla_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior, data, want_stats,
                                   chunk_cells)
