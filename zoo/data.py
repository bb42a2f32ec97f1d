"""Dyadic co-occurrence data: sparse counts n(x_i, y_k) with validation and held-out splits.

A :class:`CoOccurrence` holds the observed dyads of two finite sets X (rows) and Y (columns) as
sparse counts ``n(x_i, y_k) >= 0`` (H99 §1: real-valued weights are allowed, e.g. strengths of
association). Everything is validated on the host, in NumPy, before any JAX code runs.

Splits follow the papers' protocol for held-out perplexity (H99 §5, HP98 §5): every
co-occurrence *event* (one unit of count) goes to exactly one part, so the parts add back up to the
original counts; a row-level split holds out whole rows for fold-in.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from inference._validation import as_float_array, as_index_array, check_fractions, check_int, user_stacklevel
from inference.cells import DyadicArrays
from inference.processes import process_max, process_sum

__all__ = ["CoOccurrence", "DyadicArrays", "as_numpy_rng"]


def as_numpy_rng(rng: Any, name: str = "rng") -> np.random.Generator:
    """Turn an ``int`` seed, a ``np.random.Generator`` or a JAX PRNG key into a NumPy generator.

    Data preparation (splits, subsampling) runs in NumPy on the host; a JAX key is accepted so a
    whole experiment can be driven from one key.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (bool, np.bool_)) or rng is None:
        raise TypeError(f"{name}: expected an int seed, a numpy Generator or a JAX key, got {rng!r}")
    if isinstance(rng, (int, np.integer)):
        if rng < 0:
            raise ValueError(f"{name}: seed must be non-negative, got {rng}")
        return np.random.default_rng(int(rng))
    module = type(rng).__module__
    if module.startswith(("jax", "jaxlib")):
        import jax

        key_data = jax.random.key_data(rng) if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key) else rng
        return np.random.default_rng(np.asarray(key_data, dtype=np.uint32).ravel().tolist())
    raise TypeError(f"{name}: expected an int seed, a numpy Generator or a JAX key, got {type(rng).__name__}")


def not_co_occurrence(name: str, value: Any) -> TypeError:
    """The error for ``value`` given where a :class:`CoOccurrence` is needed, naming ``name`` and the
    constructor that makes one from what was given."""
    return TypeError(f"{name}: expected a zoo.data.CoOccurrence, got {type(value).__name__} "
                     f"({_constructor_hint(name, value)})")


def _constructor_hint(name: str, value: Any) -> str:
    """Which :class:`CoOccurrence` constructor makes one from ``value`` (given as ``name``)."""
    if type(value).__module__.startswith("scipy.sparse"):
        hint = f"CoOccurrence.from_sparse({name}) makes one from it"
    elif hasattr(value, "columns") and hasattr(value, "to_numpy"):
        hint = (f"CoOccurrence.from_dense({name}) makes one from a table of counts, "
                f"CoOccurrence.from_dataframe({name}, row=..., col=...) from one record per row")
    elif isinstance(value, (np.ndarray, list)) or hasattr(value, "__array__"):
        hint = f"CoOccurrence.from_dense({name}) makes one from a matrix of counts"
    else:
        hint = "make one with CoOccurrence.from_dense, from_sparse, from_pairs or from_dataframe"
    return hint


def _float_dtype(dtype: Any) -> Any:
    """JAX's float dtype for ``dtype`` (None: JAX's default float), or a ``TypeError`` naming ``dtype``."""
    import jax.numpy as jnp

    try:
        float_dtype = jnp.zeros((), dtype=dtype if dtype is not None else float).dtype
    except TypeError:
        float_dtype = None
    if float_dtype is None or not jnp.issubdtype(float_dtype, jnp.floating):
        raise TypeError(f"dtype: expected a float dtype such as 'float32' or 'float64', got {dtype!r}")
    return float_dtype


def _index_dtype(pointer: np.ndarray) -> Any:
    """int32 for a CSR/CSC pointer whose entries fit, int64 otherwise."""
    return np.int32 if pointer[-1] < 2**31 - 1 else np.int64


def _column_major(rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, n_cols: int):
    """(col_indptr, col_rows, col_counts): the cells re-sorted by column, stably."""
    order = np.argsort(cols, kind="stable")
    col_indptr = np.searchsorted(cols[order], np.arange(n_cols + 1)).astype(np.int64)
    col_indptr[-1] = cols.shape[0]
    return col_indptr.astype(_index_dtype(col_indptr)), rows[order], counts[order]


def _bucket(size: int) -> int:
    """Smallest allowed padded size ≥ ``size``: 64, then multiples of 2^(⌊log2 size⌋ - 3)."""
    if size <= 64:
        return 64
    step = 1 << (int(np.log2(size)) - 3)
    return -(-size // step) * step


def _check_total(total: float, float_dtype: Any, smallest: float | None = None) -> None:
    """Refuse a total count that (times the few hundred a log-likelihood adds) would overflow
    ``float_dtype``, or a positive count (``smallest``) so near its smallest normal number that
    the sums of the E-step would lose it (they then give NaN or probabilities of 0)."""
    info = np.finfo(float_dtype)
    wider = "" if info.bits >= 64 else " or enable float64 (jax_enable_x64)"
    limit = float(info.max) / 1e4
    if total > limit:
        raise ValueError(f"counts: total {total:.3g} overflows {np.dtype(float_dtype).name} arithmetic "
                         f"(limit {limit:.3g}); rescale the counts{wider}")
    low = _smallest_kept(float_dtype)
    if smallest is not None and 0 < smallest < low:
        raise ValueError(f"counts: the smallest count {smallest:.3g} is too near the smallest "
                         f"{np.dtype(float_dtype).name} number (counts below {low:.3g} are lost in its sums); multiply the counts by a constant "
                         f"(the models' fits do not change){wider}")


def _smallest_kept(float_dtype: Any) -> float:
    """The smallest count that the E-step's sums in ``float_dtype`` keep: a thousand times its
    smallest normal number. In float32 an aspect model fitted to counts scaled by 1e-36 scored a
    perplexity of 1.871 where the unscaled counts give 1.870, by 1e-37 1.891, by 1e-38 inf, and
    below that its parameters were NaN."""
    return float(np.finfo(float_dtype).tiny) * 1e3


def _names(name: str, names: Sequence[Any] | None, size: int) -> tuple | None:
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of {size} names, got {type(names).__name__} {names!r:.40}")
    names = tuple(names)
    if len(names) != size:
        raise ValueError(f"{name}: expected {size} names, got {len(names)}")
    return names


@dataclass(frozen=True, eq=False)
class CoOccurrence:
    """Sparse co-occurrence counts n(x_i, y_k) between N row objects and M column objects.

    Build one with :meth:`from_sparse`, :meth:`from_dense`, :meth:`from_dataframe`,
    :meth:`from_pairs` or :meth:`from_tokens` (documents as token lists); the constructor itself
    takes canonical COO arrays. Cells are stored
    sorted by (row, column), duplicates summed and zeros dropped.

    Parameters
    ----------
    rows, cols : array_like of int, shape (nnz,)
        Indices of the observed cells.
    counts : array_like of float, shape (nnz,)
        Non-negative, finite counts or weights.
    shape : (int, int)
        ``(n_rows, n_cols)``.
    row_names, col_names : sequence, optional
        Labels of the row and column objects (e.g. document titles and vocabulary).

    Examples
    --------
    >>> data = CoOccurrence.from_dense([[2, 0, 1], [0, 3, 0]], col_names=["a", "b", "c"])
    >>> data.shape, data.nnz, data.total
    ((2, 3), 3, 6.0)
    """

    rows: np.ndarray
    cols: np.ndarray = field(default=None)
    counts: np.ndarray = field(default=None)
    shape: tuple[int, int] = field(default=None)
    row_names: tuple | None = field(default=None)
    col_names: tuple | None = field(default=None)

    def __post_init__(self) -> None:
        missing = [name for name in ("cols", "counts", "shape") if getattr(self, name) is None]
        if missing:  # CoOccurrence(matrix): the constructor takes the canonical arrays
            given = "" if len(missing) < 3 else f"; for the {type(self.rows).__name__} given, " + _constructor_hint(
                "matrix", self.rows)
            raise TypeError(f"{', '.join(missing)}: missing (the CoOccurrence constructor takes the COO arrays rows, "
                            f"cols, counts and shape{given})")
        if not isinstance(self.shape, (tuple, list)) or len(self.shape) != 2:
            raise ValueError(f"shape: expected (n_rows, n_cols), got {self.shape!r}")
        n_rows = check_int("shape[0]", self.shape[0], minimum=1)
        n_cols = check_int("shape[1]", self.shape[1], minimum=1)
        rows = as_index_array("rows", self.rows, upper=n_rows, allow_empty=True)
        cols = as_index_array("cols", self.cols, upper=n_cols, allow_empty=True)
        counts = as_float_array("counts", self.counts, ndim=1, nonnegative=True, allow_empty=True)
        if not (rows.shape == cols.shape == counts.shape):
            raise ValueError(
                f"counts: rows, cols and counts must have equal lengths, got "
                f"{rows.shape[0]}, {cols.shape[0]} and {counts.shape[0]}"
            )
        # Canonical form: sum duplicates, drop zeros, sort by (row, col).
        matrix = sp.coo_matrix((counts.astype(np.float64), (rows, cols)), shape=(n_rows, n_cols)).tocsr()
        matrix.sum_duplicates()
        matrix.eliminate_zeros()
        matrix.sort_indices()
        if matrix.nnz == 0:
            raise ValueError("counts: the co-occurrence matrix is empty (no positive counts)")
        coo = matrix.tocoo()
        object.__setattr__(self, "rows", coo.row.astype(np.int32))
        object.__setattr__(self, "cols", coo.col.astype(np.int32))
        object.__setattr__(self, "counts", coo.data.astype(np.float64))
        object.__setattr__(self, "shape", (n_rows, n_cols))
        object.__setattr__(self, "row_names", _names("row_names", self.row_names, n_rows))
        object.__setattr__(self, "col_names", _names("col_names", self.col_names, n_cols))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_sparse(cls, matrix: Any, *, row_names=None, col_names=None) -> "CoOccurrence":
        """Build from any ``scipy.sparse`` matrix or array of counts."""
        if not sp.issparse(matrix):
            raise TypeError(f"matrix: expected a scipy.sparse matrix, got {type(matrix).__name__}")
        if matrix.ndim != 2:
            raise ValueError(f"matrix: expected 2 dimensions, got {matrix.ndim}")
        coo = sp.coo_matrix(matrix)
        as_float_array("matrix", coo.data, ndim=1, nonnegative=True, allow_empty=True)
        return cls(coo.row, coo.col, coo.data, tuple(coo.shape), row_names, col_names)

    @classmethod
    def from_dense(cls, matrix: Any, *, row_names=None, col_names=None) -> "CoOccurrence":
        """Build from a dense 2-D array of counts (zeros are unobserved dyads).

        A pandas DataFrame gives its index and columns (unless pandas' default 0, 1, ...) as
        ``row_names`` and ``col_names`` when they are not given; a scipy.sparse matrix is refused
        with a pointer to :meth:`from_sparse`.
        """
        import scipy.sparse as sp

        if sp.issparse(matrix):
            raise TypeError(f"matrix: a scipy.sparse {type(matrix).__name__}; use CoOccurrence.from_sparse for it")
        if hasattr(matrix, "index") and hasattr(matrix, "columns") and hasattr(matrix, "to_numpy"):  # a DataFrame
            import pandas as pd

            def labels(axis: Any) -> list | None:  # pandas' default 0, 1, ... names nothing
                return None if isinstance(axis, pd.RangeIndex) else list(axis)

            row_names = labels(matrix.index) if row_names is None else row_names
            col_names = labels(matrix.columns) if col_names is None else col_names
        dense = as_float_array("matrix", matrix, ndim=2, nonnegative=True)
        rows, cols = np.nonzero(dense)
        return cls(rows, cols, dense[rows, cols], dense.shape, row_names, col_names)

    @classmethod
    def from_dataframe(
        cls, frame: Any, *, row: str, col: str, count: str | None = None
    ) -> "CoOccurrence":
        """Build from a pandas DataFrame of (row, column[, count]) records.

        Row and column values may be any hashable labels; they become ``row_names`` /
        ``col_names`` in sorted order. Without ``count`` every record counts once.
        """
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}")
        for argument, column in (("row", row), ("col", col), ("count", count)):
            if column is not None and column not in frame.columns:
                raise ValueError(f"{argument}: column {column!r} not in frame (columns: {list(frame.columns)})")
        if len(frame) == 0:
            raise ValueError("frame: is empty")
        if frame[row].isna().any() or frame[col].isna().any():
            raise ValueError("frame: row or column labels contain missing values")
        row_codes, row_labels = pd.factorize(frame[row], sort=True)
        col_codes, col_labels = pd.factorize(frame[col], sort=True)
        weights = np.ones(len(frame)) if count is None else as_float_array(
            "count", frame[count].to_numpy(), ndim=1, nonnegative=True
        )
        return cls(
            row_codes, col_codes, weights, (len(row_labels), len(col_labels)),
            list(row_labels), list(col_labels),
        )

    @classmethod
    def from_pairs(
        cls,
        pairs: Any,
        *,
        weights: Any = None,
        shape: tuple[int, int] | None = None,
        row_names=None,
        col_names=None,
    ) -> "CoOccurrence":
        """Build from observed pairs ``(i, k)`` of integer indices, one row per observation.

        Parameters
        ----------
        pairs : array_like of int, shape (n_observations, 2)
        weights : array_like of float, shape (n_observations,), optional
            Weight of each observation (default 1).
        shape : (int, int), optional
            ``(n_rows, n_cols)``; inferred from the largest indices when omitted.
        """
        tokens_hint = ("; for documents as lists of tokens, CoOccurrence.from_tokens(documents) counts each "
                       "document's tokens, and CoOccurrence.from_dataframe(frame, row=..., col=...) reads one "
                       "(document, token) record per row of a table")
        if isinstance(pairs, (str, bytes)):
            raise TypeError(f"pairs: expected (row, column) index pairs, got {type(pairs).__name__}{tokens_hint}")
        try:
            pairs_array = np.asarray(pairs)
        except ValueError:  # NumPy's "inhomogeneous shape": rows of different lengths
            raise ValueError("pairs: expected (row, column) index pairs of shape (n_observations, 2), got rows "
                             f"of different lengths{tokens_hint}") from None
        if pairs_array.ndim != 2 or pairs_array.shape[1] != 2:
            hint = tokens_hint if pairs_array.dtype.kind in "OUS" else ""
            raise ValueError(f"pairs: expected shape (n_observations, 2), got {pairs_array.shape}{hint}")
        if pairs_array.dtype.kind in "OUS":
            raise ValueError(f"pairs: expected integer indices, got {pairs_array.dtype.name} values such as "
                             f"{str(pairs_array.flat[0])!r:.40}{tokens_hint}")
        if pairs_array.shape[0] == 0:
            raise ValueError("pairs: is empty")
        rows = as_index_array("pairs", pairs_array[:, 0])
        cols = as_index_array("pairs", pairs_array[:, 1])
        if shape is None:
            shape = (int(rows.max()) + 1, int(cols.max()) + 1)
        elif not isinstance(shape, (tuple, list)) or len(shape) != 2:
            raise ValueError(f"shape: expected (n_rows, n_cols), got {shape!r}")
        else:
            n_rows = check_int("shape[0]", shape[0], minimum=1)
            n_cols = check_int("shape[1]", shape[1], minimum=1)
            if rows.max() >= n_rows or cols.max() >= n_cols:
                raise ValueError(f"pairs: index out of range for shape {tuple(shape)}")
        if weights is None:
            weight_array = np.ones(rows.shape[0])
        else:
            weight_array = as_float_array("weights", weights, ndim=1, nonnegative=True)
            if weight_array.shape[0] != rows.shape[0]:
                raise ValueError(
                    f"weights: expected {rows.shape[0]} weights (one per pair), got {weight_array.shape[0]}"
                )
        return cls(rows, cols, weight_array, tuple(shape), row_names, col_names)

    @classmethod
    def from_tokens(cls, documents: Any, *, row_names=None) -> "CoOccurrence":
        """Build documents × tokens counts from documents given as token lists.

        Row i counts the tokens of ``documents[i]``; the columns are the distinct tokens, in sorted
        order, and become ``col_names``::

            CoOccurrence.from_tokens([doc.split() for doc in docs])

        Parameters
        ----------
        documents : sequence of sequences of hashable tokens
            One token list (or tuple) a document; a document may be empty (a row without counts).
            A document given as one string is refused (its characters would be the tokens): split
            it first.
        row_names : sequence, optional
            One name a document.
        """
        import pandas as pd

        if isinstance(documents, (str, bytes)) or not hasattr(documents, "__iter__") or hasattr(documents, "shape"):
            raise TypeError(f"documents: expected a sequence of token lists, got {type(documents).__name__}")
        documents = list(documents)
        if not documents:
            raise ValueError("documents: is empty")
        for index, document in enumerate(documents):
            if isinstance(document, (str, bytes)):
                raise TypeError(f"documents[{index}]: is a string, not a list of tokens; split it first "
                                "(e.g. [doc.split() for doc in docs])")
            if not isinstance(document, (list, tuple)):
                raise TypeError(f"documents[{index}]: expected a list of tokens, got {type(document).__name__}")
        lengths = np.fromiter((len(document) for document in documents), np.int64, len(documents))
        if lengths.sum() == 0:
            raise ValueError("documents: hold no tokens")
        tokens = pd.Series([token for document in documents for token in document], dtype=object)
        if tokens.isna().any():
            raise ValueError("documents: contain missing tokens (None or NaN)")
        try:
            codes, vocabulary = pd.factorize(tokens, sort=True)
        except TypeError as error:  # tokens that cannot be sorted together (strings and numbers)
            raise TypeError(f"documents: tokens must be of one sortable kind ({error})") from None
        rows = np.repeat(np.arange(len(documents)), lengths)
        return cls(rows, codes, np.ones(rows.shape[0]), (len(documents), len(vocabulary)), row_names,
                   list(vocabulary))

    # ------------------------------------------------------------------ views
    @property
    def n_rows(self) -> int:
        return self.shape[0]

    @property
    def n_cols(self) -> int:
        return self.shape[1]

    @property
    def nnz(self) -> int:
        """Number of non-zero cells."""
        return int(self.counts.shape[0])

    @property
    def total(self) -> float:
        """Total count Σ n(x_i, y_k) (the number of observations for integer counts)."""
        return float(self.counts.sum())

    @property
    def row_sums(self) -> np.ndarray:
        """n(x_i) = Σ_k n(x_i, y_k), shape (n_rows,)."""
        return np.bincount(self.rows, weights=self.counts, minlength=self.n_rows)

    @property
    def col_sums(self) -> np.ndarray:
        """n(y_k) = Σ_i n(x_i, y_k), shape (n_cols,)."""
        return np.bincount(self.cols, weights=self.counts, minlength=self.n_cols)

    @property
    def is_integer(self) -> bool:
        """Whether every count is a whole number (events can be split one by one)."""
        return bool(np.all(self.counts == np.round(self.counts)))

    def to_sparse(self) -> sp.csr_matrix:
        """The counts as a ``scipy.sparse.csr_matrix`` of shape ``(n_rows, n_cols)``."""
        return sp.csr_matrix((self.counts, (self.rows, self.cols)), shape=self.shape)

    def to_dense(self) -> np.ndarray:
        """The counts as a dense array (only sensible for small data)."""
        return self.to_sparse().toarray()

    def _check_range(self, float_dtype: Any) -> None:
        """Counts whose total (times the few hundred a log-likelihood adds) would overflow ``float_dtype``."""
        _check_total(self.total, float_dtype, float(self.counts.min()) if self.nnz else None)

    def to_arrays(self, dtype: Any = None, *, pad: bool = True) -> DyadicArrays:
        """Device arrays for the kernels, in CSR (row-sorted) order.

        Parameters
        ----------
        dtype : dtype, optional
            Float dtype of the counts; defaults to JAX's default float (float32 unless x64).
        pad : bool
            Pad the cells with zero counts up to a bucketed size (at least 64, then steps of
            at most 1/8 of the size), so that data sets of nearly equal size — train and
            validation splits, resampled data — share one compiled fit. Padding cells sit at
            the end of the last row with count 0 and change no result.
        """
        import jax.numpy as jnp

        float_dtype = _float_dtype(dtype)
        self._check_range(float_dtype)
        n_cells = _bucket(self.nnz) if pad else self.nnz
        extra = n_cells - self.nnz
        rows = np.concatenate([self.rows, np.full(extra, self.n_rows - 1, np.int32)])
        cols = np.concatenate([self.cols, np.zeros(extra, np.int32)])
        counts = np.concatenate([self.counts, np.zeros(extra)])
        indptr = np.searchsorted(rows, np.arange(self.n_rows + 1)).astype(np.int64)
        indptr[-1] = n_cells
        col_indptr, col_rows, col_counts = _column_major(rows, cols, counts, self.n_cols)
        return DyadicArrays(
            rows=jnp.asarray(rows, dtype=jnp.int32),
            cols=jnp.asarray(cols, dtype=jnp.int32),
            counts=jnp.asarray(counts, dtype=float_dtype),
            indptr=jnp.asarray(indptr.astype(_index_dtype(indptr))),
            row_sums=jnp.asarray(self.row_sums, dtype=float_dtype),
            col_sums=jnp.asarray(self.col_sums, dtype=float_dtype),
            col_indptr=jnp.asarray(col_indptr),
            col_rows=jnp.asarray(col_rows, dtype=jnp.int32),
            col_counts=jnp.asarray(col_counts, dtype=float_dtype),
        )

    def to_sharded_arrays(self, n_shards: int, dtype: Any = None, *, process_local: bool = False) -> DyadicArrays:
        """Device arrays split into ``n_shards`` blocks of cells for data-parallel EM.

        Rows are cut into contiguous ranges holding about equal numbers of cells; each block
        keeps a CSR pointer over *all* rows (rows of other blocks are empty in it) and is padded
        with zero counts to a common length, so every leaf gets a leading axis of size
        ``n_shards``. ``row_sums`` and ``col_sums`` are the global sums, repeated per block.
        Sums over cells computed block by block and added up equal those of :meth:`to_arrays`.

        With ``process_local=True`` (a fit whose devices span several ``jax.distributed``
        processes) these counts are this process's part of the data, with the global shape, and
        the ``n_shards`` blocks are this process's: the margins are summed over processes and
        the blocks padded to the longest of any process (:mod:`inference.processes`), so the
        blocks of all processes together are those of one data set. Every process must call it.
        """
        import jax.numpy as jnp

        n_shards = check_int("n_shards", n_shards, minimum=1)
        float_dtype = _float_dtype(dtype)
        full_indptr = np.searchsorted(self.rows, np.arange(self.n_rows + 1)).astype(np.int64)
        targets = np.linspace(0, self.nnz, n_shards + 1)
        cuts = np.searchsorted(full_indptr, targets).astype(np.int64)
        cuts[0], cuts[-1] = 0, self.n_rows
        cuts = np.maximum.accumulate(cuts)
        starts, stops = full_indptr[cuts[:-1]], full_indptr[cuts[1:]]
        longest = int((stops - starts).max())
        row_sums, col_sums, total = self.row_sums, self.col_sums, self.total
        smallest = float(self.counts.min()) if self.nnz else np.inf
        if process_local:  # every process refuses when one holds counts too small: none is left waiting
            lost = np.float64(smallest < _smallest_kept(float_dtype))
            row_sums, col_sums, total, lost = process_sum((row_sums, col_sums, total, lost))
            longest = process_max(longest)
            smallest = min(smallest, float(np.finfo(float_dtype).tiny)) if lost else smallest
        _check_total(float(total), float_dtype, smallest)
        length = _bucket(longest)
        blocks = {name: [] for name in ("rows", "cols", "counts", "indptr", "col_indptr", "col_rows", "col_counts")}
        for start, stop in zip(starts, stops):
            extra = length - (stop - start)
            rows = np.concatenate([self.rows[start:stop], np.full(extra, self.n_rows - 1, np.int32)])
            cols = np.concatenate([self.cols[start:stop], np.zeros(extra, np.int32)])
            counts = np.concatenate([self.counts[start:stop], np.zeros(extra)])
            indptr = np.searchsorted(rows[: stop - start], np.arange(self.n_rows + 1)).astype(np.int64)
            indptr[-1] = length
            col_indptr, col_rows, col_counts = _column_major(rows, cols, counts, self.n_cols)
            for name, value in zip(blocks, (rows, cols, counts, indptr, col_indptr, col_rows, col_counts)):
                blocks[name].append(value)
        repeat = lambda values: np.broadcast_to(values, (n_shards,) + values.shape)  # noqa: E731
        return DyadicArrays(
            rows=jnp.asarray(np.stack(blocks["rows"]), jnp.int32),
            cols=jnp.asarray(np.stack(blocks["cols"]), jnp.int32),
            counts=jnp.asarray(np.stack(blocks["counts"]), float_dtype),
            indptr=jnp.asarray(np.stack(blocks["indptr"]), jnp.int32),
            row_sums=jnp.asarray(repeat(row_sums), float_dtype),
            col_sums=jnp.asarray(repeat(col_sums), float_dtype),
            col_indptr=jnp.asarray(np.stack(blocks["col_indptr"]), jnp.int32),
            col_rows=jnp.asarray(np.stack(blocks["col_rows"]), jnp.int32),
            col_counts=jnp.asarray(np.stack(blocks["col_counts"]), float_dtype),
        )

    def transpose(self) -> "CoOccurrence":
        """The same counts with the roles of X and Y exchanged."""
        return CoOccurrence(
            self.cols, self.rows, self.counts, (self.n_cols, self.n_rows), self.col_names, self.row_names
        )

    @property
    def T(self) -> "CoOccurrence":
        return self.transpose()

    def with_counts(self, counts: np.ndarray) -> "CoOccurrence":
        """Same cells and names with new counts (cells whose count becomes 0 are dropped)."""
        return CoOccurrence(self.rows, self.cols, counts, self.shape, self.row_names, self.col_names)

    def select_rows(self, row_indices: Any) -> "CoOccurrence":
        """The sub-matrix of the given rows (in the given order), renumbered 0..len-1."""
        indices = as_index_array("row_indices", row_indices, upper=self.n_rows)
        matrix = self.to_sparse()[indices]
        names = None if self.row_names is None else [self.row_names[i] for i in indices]
        return CoOccurrence.from_sparse(matrix, row_names=names, col_names=self.col_names)

    def __repr__(self) -> str:
        return (
            f"CoOccurrence(shape={self.shape}, nnz={self.nnz}, total={self.total:g}, "
            f"density={self.nnz / (self.n_rows * self.n_cols):.3g})"
        )

    # ------------------------------------------------------------------ splits
    def split_tokens(
        self, fractions: Sequence[float], *, rng: Any
    ) -> tuple["CoOccurrence | None", ...]:
        """Split co-occurrence events at random into parts, e.g. train / validation / test.

        Each event (one unit of count) goes to exactly one part, independently with the given
        probabilities (H99 §5: perplexity on held-out *observations*). Integer counts are split
        multinomially cell by cell; for real weights the whole part goes multinomially and the
        fractional remainder goes whole to one part. Parts keep the full shape and names, so a
        held-out part is scored with the parameters of the rows and columns it shares with the
        training part. A part that receives no events is returned as ``None``.

        Parameters
        ----------
        fractions : sequence of float
            Probabilities of the parts, non-negative and summing to 1.
        rng : int, numpy Generator or JAX key
            Source of randomness.
        """
        probabilities = check_fractions("fractions", fractions)
        if probabilities.shape[0] < 2:
            raise ValueError("fractions: need at least two parts")
        generator = as_numpy_rng(rng)
        whole = np.floor(self.counts)
        remainder = self.counts - whole
        parts = generator.multinomial(whole.astype(np.int64), probabilities).astype(np.float64)
        if np.any(remainder > 0):
            chosen = generator.choice(probabilities.shape[0], size=self.nnz, p=probabilities)
            parts[np.arange(self.nnz), chosen] += remainder
        result = []
        for index in range(probabilities.shape[0]):
            part_counts = parts[:, index]
            result.append(self.with_counts(part_counts) if part_counts.sum() > 0 else None)
        starved = [index for index, part in enumerate(result) if part is None and probabilities[index] > 0]
        if starved:  # a None passed on as valid= or a test set means no data there, without a word
            warnings.warn(f"fractions: part {starved[0]} (probability {probabilities[starved[0]]:.3g}) received none "
                          f"of the {self.total:,.0f} events and is returned as None; a fit given it as valid= "
                          "runs without validation", UserWarning, stacklevel=user_stacklevel())
        return tuple(result)

    def split_rows(
        self, fractions: Sequence[float], *, rng: Any
    ) -> tuple[tuple["CoOccurrence", np.ndarray], ...]:
        """Split whole rows at random into parts, for fold-in of unseen rows.

        Returns one ``(part, row_indices)`` pair per fraction, where ``row_indices`` are the
        original indices of the rows in ``part``. Every part gets at least one row.
        """
        probabilities = check_fractions("fractions", fractions)
        if probabilities.shape[0] < 2:
            raise ValueError("fractions: need at least two parts")
        if self.n_rows < probabilities.shape[0]:
            raise ValueError(
                f"fractions: cannot split {self.n_rows} rows into {probabilities.shape[0]} non-empty parts"
            )
        generator = as_numpy_rng(rng)
        permutation = generator.permutation(self.n_rows)
        sizes = np.floor(probabilities * self.n_rows).astype(int)
        sizes = np.maximum(sizes, 1)
        sizes[0] = self.n_rows - sizes[1:].sum()
        if sizes[0] < 1:
            raise ValueError("fractions: the first part would be empty")
        boundaries = np.concatenate([[0], np.cumsum(sizes)])
        parts = []
        for start, stop in zip(boundaries[:-1], boundaries[1:]):
            indices = np.sort(permutation[start:stop])
            if self.to_sparse()[indices].nnz == 0:
                raise ValueError("fractions: a part has rows but no counts; use larger fractions")
            parts.append((self.select_rows(indices), indices))
        return tuple(parts)
