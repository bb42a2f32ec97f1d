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
* ``"numba"``: multi-threaded loops, rows over the CSR cells and columns over their CSC copy
  (:mod:`inference.native.sparse_cells`), that XLA calls as custom calls on its own buffers from
  inside the jitted fit. XLA's CPU gathers and scatters run at a few GB/s, so on CPU this path is
  an order of magnitude faster; it never materialises an (nnz × K) array.

``backend`` is resolved by :func:`inference.native.resolve_backend`: ``"auto"`` picks numba on the
CPU backend when numba is importable, and XLA otherwise.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from inference.cells import DyadicArrays
from inference.native.backend import resolve_backend
from inference.segments import scatter_is_ordered, sorted_segment_sum

__all__ = [
    "CellStats", "cell_stats", "cell_log_norm", "DEFAULT_CHUNK_CELLS",
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


# ---------------------------------------------------------------------------- XLA path
# Sums over cells go into (rows × K) and (columns × K) accumulators carried through a scan over
# chunks of cells, updated in place (an O(chunk × K) step, whatever the number of rows). Where
# XLA's float scatter-adds are atomic (GPU, TPU), their order changes from call to call, so there
# the row statistics are summed over the CSR cells and the column statistics over the CSC copy,
# both with ids sorted, by ``inference.segments.sorted_segment_sum``, whose order is fixed: the
# column pass recomputes z_ij for its cells rather than scattering in an order it cannot fix.


def _cell_chunks(rows, cols, counts, chunk_cells: int, pad_row: int, pad_col: int):
    """Cells as (n_chunks, size) arrays. Padding cells have count 0 and the ids ``pad_row``,
    ``pad_col`` (one past the last row and column: ids stay sorted, and sums drop them)."""
    nnz = rows.shape[0]
    n_chunks = max(1, -(-nnz // chunk_cells))
    size = -(-nnz // n_chunks)
    pad = n_chunks * size - nnz
    return tuple(jnp.pad(array, (0, pad), constant_values=fill).reshape(n_chunks, size)
                 for array, fill in ((rows, pad_row), (cols, pad_col), (counts, 0)))


def _csc_cells(data: DyadicArrays):
    """(rows, cols, counts) of the cells in CSC order (the column of each cell from the pointer)."""
    nnz = data.col_rows.shape[0]
    cells = jnp.arange(nnz, dtype=data.col_indptr.dtype)
    cols = jnp.searchsorted(data.col_indptr, cells, side="right", method="scan_unrolled") - 1
    return data.col_rows, cols.astype(jnp.int32), data.col_counts


def _gather(table, ids):
    # Padding ids point one past the end: clamp them (their count is 0, so the value is unused).
    return table[jnp.minimum(ids, table.shape[0] - 1)]


def _add_by_sorted_ids(acc, values, ids, ordered: bool):
    """``acc[ids] += values`` for non-decreasing ids (ids ≥ len(acc) are dropped)."""
    if ordered:
        return sorted_segment_sum(values, ids, acc.shape[0], out=acc)
    return acc.at[ids].add(values, mode="drop", indices_are_sorted=True)


def _column_pass(col_acc, data: DyadicArrays, chunk_cells: int, cell_values):
    """``col_acc[j] += Σ_i cell_values(rows, cols, counts)`` over the CSC cells, in a fixed order."""
    n_rows, n_cols = data.shape

    def body(acc, chunk):
        rows, cols, counts = chunk
        return sorted_segment_sum(cell_values(rows, cols, counts), cols, n_cols, out=acc), None

    col_acc, _ = jax.lax.scan(body, col_acc, _cell_chunks(*_csc_cells(data), chunk_cells, n_rows, n_cols))
    return col_acc


def _xla_cell_stats(A, B, data: DyadicArrays, want_rows, want_cols, chunk_cells, eval_factors, eval_needed):
    n_rows, n_classes = A.shape
    n_cols = B.shape[0]
    floor = _floor(A.dtype)
    ordered = not scatter_is_ordered()

    def ratios(rows, cols, counts):
        a_cells, b_cells = _gather(A, rows), _gather(B, cols)
        z = jnp.maximum(jnp.einsum("nk,nk->n", a_cells, b_cells, precision="highest"), floor)
        return a_cells, b_cells, z, counts / z

    def body(carry, chunk):
        row_acc, col_acc, log_norm, eval_log_norm = carry
        chunk_rows, chunk_cols, chunk_counts = chunk
        a_cells, b_cells, z, ratio = ratios(chunk_rows, chunk_cols, chunk_counts)
        chunk_log_norm = jnp.sum(jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z), 0.0))
        log_norm = log_norm + chunk_log_norm
        if eval_factors is not None:
            A_eval, B_eval = eval_factors
            z_eval = jnp.maximum(jnp.einsum("nk,nk->n", _gather(A_eval, chunk_rows), _gather(B_eval, chunk_cols),
                                            precision="highest"), floor)
            chunk_eval = jnp.sum(jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z_eval), 0.0))
            eval_log_norm = eval_log_norm + jnp.where(eval_needed, chunk_eval, chunk_log_norm)
        if want_rows:
            row_acc = _add_by_sorted_ids(row_acc, ratio[:, None] * b_cells, chunk_rows, ordered)
        if want_cols and not ordered:
            col_acc = col_acc.at[chunk_cols].add(ratio[:, None] * a_cells, mode="drop")
        return (row_acc, col_acc, log_norm, eval_log_norm), None

    init = (
        jnp.zeros((n_rows, n_classes), A.dtype) if want_rows else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_cols, n_classes), A.dtype) if want_cols else jnp.zeros((0,), A.dtype),
        jnp.zeros((), A.dtype),
        jnp.zeros((), A.dtype),
    )
    chunks = _cell_chunks(data.rows, data.cols, data.counts, chunk_cells, n_rows, n_cols)
    (row_acc, col_acc, log_norm, eval_log_norm), _ = jax.lax.scan(body, init, chunks)
    if want_cols and ordered:
        def column_values(rows, cols, counts):
            a_cells, _, _, ratio = ratios(rows, cols, counts)
            return ratio[:, None] * a_cells

        col_acc = _column_pass(col_acc, data, chunk_cells, column_values)
    return CellStats(
        row_stats=A * row_acc if want_rows else None,
        col_stats=B * col_acc if want_cols else None,
        log_norm=log_norm,
        eval_log_norm=eval_log_norm if eval_factors is not None else log_norm,
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
        from inference.native.sparse_cells import numba_cell_stats

        row_stats, col_stats, _, log_norm, eval_log_norm = numba_cell_stats(
            A, B, data, want_rows, want_cols, eval_factors, eval_needed, _floor(A.dtype))
        return CellStats(row_stats, col_stats, log_norm, eval_log_norm)
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


def _xla_count_matmul(dense, data: DyadicArrays, transpose: bool, chunk_cells: int):
    n_rows, n_cols = data.shape
    n_out = n_cols if transpose else n_rows
    ordered = not scatter_is_ordered()
    # nᵀ G sums over the cells of each column: over the CSC copy, ids sorted, when the order matters.
    cells = _csc_cells(data) if transpose and ordered else (data.rows, data.cols, data.counts)

    def body(out, chunk):
        chunk_rows, chunk_cols, chunk_counts = chunk
        source, target = (chunk_rows, chunk_cols) if transpose else (chunk_cols, chunk_rows)
        # where(): padding cells (count 0) must not turn an infinite entry of ``dense`` into NaN.
        weighted = jnp.where(chunk_counts[:, None] > 0, chunk_counts[:, None] * _gather(dense, source), 0.0)
        if transpose and not ordered:
            return out.at[target].add(weighted, mode="drop"), None
        return _add_by_sorted_ids(out, weighted, target, ordered), None

    out, _ = jax.lax.scan(body, jnp.zeros((n_out, dense.shape[1]), dense.dtype),
                          _cell_chunks(*cells, chunk_cells, n_rows, n_cols))
    return out


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
        data = data._replace(counts=data.counts.astype(dense.dtype), col_counts=data.col_counts.astype(dense.dtype))
    if resolve_backend(backend) == "numba":
        from inference.native.sparse_cells import numba_count_matmul

        return numba_count_matmul(dense, data, transpose)
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
    ordered = not scatter_is_ordered()

    def ratios(rows, cols, counts):
        a_cells, b_cells = _gather(A, rows), _gather(B, cols)
        z = jnp.maximum(jnp.einsum("nk,nk->n", a_cells, b_cells, precision="highest"), floor)
        return a_cells, b_cells, z, counts / z

    def column_values(rows, cols, counts):
        a_cells, _, _, ratio = ratios(rows, cols, counts)
        return (_gather(row_weights, rows) * ratio)[:, None] * a_cells

    def body(carry, chunk):
        row_acc, col_acc, log_acc = carry
        chunk_rows, chunk_cols, chunk_counts = chunk
        a_cells, b_cells, z, ratio = ratios(chunk_rows, chunk_cols, chunk_counts)
        log_acc = _add_by_sorted_ids(log_acc, jnp.where(chunk_counts > 0, chunk_counts * jnp.log(z), 0.0),
                                     chunk_rows, ordered)
        if want_rows:
            row_acc = _add_by_sorted_ids(row_acc, ratio[:, None] * b_cells, chunk_rows, ordered)
        if want_cols and not ordered:
            weighted = (_gather(row_weights, chunk_rows) * ratio)[:, None] * a_cells
            col_acc = col_acc.at[chunk_cols].add(weighted, mode="drop")
        return (row_acc, col_acc, log_acc), None

    init = (
        jnp.zeros((n_rows, n_classes), A.dtype) if want_rows else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_cols, n_classes), A.dtype) if want_cols else jnp.zeros((0,), A.dtype),
        jnp.zeros((n_rows,), A.dtype),
    )
    chunks = _cell_chunks(data.rows, data.cols, data.counts, chunk_cells, n_rows, n_cols)
    (row_acc, col_acc, log_acc), _ = jax.lax.scan(body, init, chunks)
    if want_cols and ordered:
        col_acc = _column_pass(col_acc, data, chunk_cells, column_values)
    return RowCellStats(
        row_stats=A * row_acc if want_rows else None,
        col_stats=B * col_acc if want_cols else None,
        row_log_norm=log_acc,
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
        from inference.native.sparse_cells import numba_cell_stats

        row_stats, col_stats, row_log_norm, _, _ = numba_cell_stats(
            A, B, data, want_rows, want_cols, None, False, _floor(A.dtype), row_weights=row_weights,
            want_row_log_norms=True)
        return RowCellStats(row_stats, col_stats, row_log_norm)
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
        from inference.native.sparse_cells import numba_path_mixture_stats

        return PathMixtureStats(*numba_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior,
                                                          data, want_stats, _floor(weights.dtype)))
    return _xla_path_mixture_stats(weights, aspects, tempered, paths, path_mask, log_prior, data, want_stats,
                                   chunk_cells)
