"""The cells of a sparse count matrix as the E-step kernels consume them: CSR order and a CSC copy.

:class:`DyadicArrays` is built by :meth:`zoo.data.CoOccurrence.to_arrays` (and its sharded variant)
and read by :mod:`inference.sparse`; it lives here, with the engine, so that the kernels do not
depend on the data containers of the models.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["DyadicArrays"]


class DyadicArrays(NamedTuple):
    """Device-side view of co-occurrence counts: the cells in CSR order, and again in CSC order.

    Attributes
    ----------
    rows, cols : int32 arrays, shape (nnz,)
        Row and column index of each non-zero cell.
    counts : float array, shape (nnz,)
        n(x_i, y_k) of each cell.
    indptr : int array, shape (n_rows + 1,)
        CSR row pointer: cells of row i are ``indptr[i]:indptr[i + 1]``.
    row_sums : float array, shape (n_rows,)
        n(x_i) = Σ_k n(x_i, y_k); its length fixes n_rows statically.
    col_sums : float array, shape (n_cols,)
        n(y_k) = Σ_i n(x_i, y_k); its length fixes n_cols statically.
    col_indptr : int array, shape (n_cols + 1,)
        CSC column pointer: the same cells sorted by column (stably, so by row within a column)
        are ``col_rows[col_indptr[k]:col_indptr[k + 1]]`` with counts ``col_counts[...]``.
    col_rows : int32 array, shape (nnz,)
        Row index of each cell in CSC order.
    col_counts : float array, shape (nnz,)
        n(x_i, y_k) of each cell in CSC order.

    The CSC copy lets a kernel sum over the cells of a column without scattering: the numba
    E-step computes column statistics column by column, as it computes row statistics row by row.
    """

    rows: Any
    cols: Any
    counts: Any
    indptr: Any
    row_sums: Any
    col_sums: Any
    col_indptr: Any
    col_rows: Any
    col_counts: Any

    @property
    def shape(self) -> tuple[int, int]:
        """(n_rows, n_cols), known statically from the array shapes."""
        return (self.row_sums.shape[0], self.col_sums.shape[0])
