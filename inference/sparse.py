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

__all__ = ["CellStats", "cell_stats", "cell_log_norm", "resolve_backend", "DEFAULT_CHUNK_CELLS"]

#: Cells processed at once by the XLA path (bounds temporaries to chunk × K floats).
DEFAULT_CHUNK_CELLS = 1 << 18


class CellStats(NamedTuple):
    """Result of :func:`cell_stats`.

    Attributes
    ----------
    row_stats : (n_rows, K) array or None
    col_stats : (n_cols, K) array or None
    log_norm : scalar, Σ n_ij log z_ij
    """

    row_stats: Any
    col_stats: Any
    log_norm: Any


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
def _xla_cell_stats(A, B, data: DyadicArrays, want_rows, want_cols, chunk_cells):
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
        row_acc, col_acc, log_norm = carry
        chunk_rows, chunk_cols, chunk_counts = chunk
        a_cells = A[chunk_rows]
        b_cells = B[chunk_cols]
        z = jnp.maximum(jnp.einsum("nk,nk->n", a_cells, b_cells), floor)
        ratio = chunk_counts / z
        log_norm = log_norm + jnp.sum(jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z), 0.0))
        if want_rows:
            row_acc = row_acc + jax.ops.segment_sum(
                ratio[:, None] * b_cells, chunk_rows, n_rows, indices_are_sorted=True
            )
        if want_cols:
            col_acc = col_acc + jax.ops.segment_sum(ratio[:, None] * a_cells, chunk_cols, n_cols)
        return (row_acc, col_acc, log_norm), None

    init = (
        jnp.zeros((n_rows, n_classes), A.dtype) if want_rows else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_cols, n_classes), A.dtype) if want_cols else jnp.zeros((0,), A.dtype),
        jnp.zeros((), A.dtype),
    )
    (row_acc, col_acc, log_norm), _ = jax.lax.scan(body, init, (rows, cols, counts))
    return CellStats(
        row_stats=A * row_acc if want_rows else None,
        col_stats=B * col_acc if want_cols else None,
        log_norm=log_norm,
    )


# ---------------------------------------------------------------------------- numba path
@lru_cache(maxsize=None)
def _numba_kernels():
    import numba
    from numba import njit, prange

    @njit(cache=True, nogil=True)
    def _row_range_stats(lo, hi, indptr, cols, counts, A, B, row_stats, col_stats, want_rows, want_cols, floor):
        n_classes = A.shape[1]
        log_norm = 0.0
        for i in range(lo, hi):
            a_row = A[i]
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
                    for c in range(n_classes):
                        col_stats[j, c] += ratio * a_row[c]
        return log_norm

    @njit(parallel=True, cache=True, nogil=True)
    def cell_stats_kernel(indptr, cols, counts, A, B, want_rows, want_cols, bounds, floor):
        n_threads = bounds.shape[0] - 1
        n_rows, n_classes = A.shape
        n_cols = B.shape[0]
        row_stats = np.zeros((n_rows if want_rows else 0, n_classes), A.dtype)
        # One private column accumulator per thread: no write conflicts, summed at the end.
        col_parts = np.zeros((n_threads, n_cols if want_cols else 0, n_classes), A.dtype)
        log_parts = np.zeros(n_threads)
        for t in prange(n_threads):
            log_parts[t] = _row_range_stats(
                bounds[t], bounds[t + 1], indptr, cols, counts, A, B,
                row_stats, col_parts[t], want_rows, want_cols, floor,
            )
        col_stats = col_parts[0].copy()
        for t in range(1, n_threads):
            col_stats += col_parts[t]
        if want_rows:
            row_stats *= A
        if want_cols:
            col_stats *= B
        return row_stats, col_stats, log_parts.sum()

    return cell_stats_kernel, numba.get_num_threads


def _row_bounds(indptr: np.ndarray, n_threads: int) -> np.ndarray:
    """Split rows into ``n_threads`` contiguous ranges holding about equal numbers of cells."""
    targets = np.linspace(0, indptr[-1], n_threads + 1)
    bounds = np.searchsorted(indptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, indptr.shape[0] - 1
    return np.maximum.accumulate(bounds)


def _numba_host(A, B, indptr, cols, counts, *, want_rows, want_cols):
    kernel, get_num_threads = _numba_kernels()
    A = np.ascontiguousarray(A)
    B = np.ascontiguousarray(B)
    indptr = np.asarray(indptr)
    counts = np.asarray(counts, dtype=A.dtype)
    n_threads = max(1, min(get_num_threads(), indptr.shape[0] - 1))
    bounds = _row_bounds(indptr, n_threads)
    row_stats, col_stats, log_norm = kernel(
        indptr, np.asarray(cols), counts, A, B, want_rows, want_cols, bounds, _floor(A.dtype)
    )
    return row_stats, col_stats, np.asarray(log_norm, dtype=A.dtype)


def _numba_cell_stats(A, B, data: DyadicArrays, want_rows, want_cols):
    n_classes = A.shape[1]
    shapes = (
        jax.ShapeDtypeStruct((A.shape[0] if want_rows else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((B.shape[0] if want_cols else 0, n_classes), A.dtype),
        jax.ShapeDtypeStruct((), A.dtype),
    )

    def host(A, B, indptr, cols, counts):
        return _numba_host(A, B, indptr, cols, counts, want_rows=want_rows, want_cols=want_cols)

    row_stats, col_stats, log_norm = jax.pure_callback(
        host, shapes, A, B, data.indptr, data.cols, data.counts, vmap_method="sequential"
    )
    return CellStats(
        row_stats=row_stats if want_rows else None,
        col_stats=col_stats if want_cols else None,
        log_norm=log_norm,
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

    Returns
    -------
    CellStats
        ``row_stats = A ⊙ (R B)``, ``col_stats = B ⊙ (Rᵀ A)``, ``log_norm = Σ n log z`` with
        ``R_ij = n_ij / z_ij``. Scaling a row of A (or B) by s leaves both statistics unchanged
        and adds ``n_i log s`` to ``log_norm``.
    """
    if resolve_backend(backend) == "numba":
        return _numba_cell_stats(A, B, data, want_rows, want_cols)
    return _xla_cell_stats(A, B, data, want_rows, want_cols, chunk_cells)


def cell_log_norm(A: Any, B: Any, data: DyadicArrays, *, backend: str = "auto",
                  chunk_cells: int = DEFAULT_CHUNK_CELLS) -> Any:
    """Σ_ij n_ij log(A_i·B_j) over the non-zero cells (no statistics)."""
    return cell_stats(A, B, data, want_rows=False, want_cols=False, backend=backend,
                      chunk_cells=chunk_cells).log_norm
