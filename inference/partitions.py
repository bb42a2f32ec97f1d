"""Summaries of posterior draws of a partition: co-clustering probabilities and point estimates.

Cluster labels are exchangeable, so a sampler's draws are summarised by label-invariant
quantities. :func:`co_clustering` estimates p_ij = P(c_i = c_j | data); :func:`point_partition`
returns the partition ĉ minimising a posterior expected loss (Wade & Ghahramani 2018, "Bayesian
cluster analysis: point estimation and credible balls", Bayesian Analysis 13(2); cited as WG18):

* ``loss="binder"`` — Binder's loss with equal costs, the number of pairs on which two partitions
  disagree. Its posterior expectation is exact from the co-clustering matrix:
  E[B(c, ĉ)] = Σ_{i<j} [1(ĉ_i = ĉ_j)(1 - p_ij) + 1(ĉ_i ≠ ĉ_j) p_ij].
* ``loss="vi"`` — the variation of information. Its exact expectation needs every draw; WG18
  propose minimising instead the lower bound that Jensen's inequality gives from the
  co-clustering matrix alone, and so does this module:
  E[VI(c, ĉ)] >= (1/N) Σ_i [log Σ_j 1(ĉ_j = ĉ_i) + log Σ_j p_ij - 2 log Σ_j 1(ĉ_j = ĉ_i) p_ij]
  (natural logarithms here; WG18 use log base 2, which rescales it and leaves the minimiser
  unchanged). :func:`expected_variation_of_information` evaluates the exact expectation over the
  draws for any candidate, to report it next to the bound.

The search runs from several starts — the three best sampled partitions under the chosen
objective, everything in one cluster, every point alone — and from each alternates sweeps of
single-point moves (to any existing cluster or a new one) with the best merge of two clusters,
accepting only strict improvements, until neither improves; the best end point is returned. It
is a local minimum under those moves; on small problems it is the global minimum (the tests
compare with every partition of 5 and 6 points).
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from inference.segments import segment_sum
from inference._validation import as_float_array, check_choice
from inference.jit import jit

__all__ = [
    "co_clustering",
    "point_partition",
    "expected_binder_loss",
    "expected_vi_lower_bound",
    "expected_variation_of_information",
]

_ONE_HOT_ELEMENTS_PER_CHUNK = 1 << 22
_MAX_SEARCH_ITERATIONS = 1000
_N_SAMPLED_STARTS = 3
_MAX_LABELS_FOR_ONE_HOT = 64
_INT32_MAX = np.iinfo(np.int32).max


# ----------------------------------------------------------------------------- draws


def _as_label_array(name: str, value: Any, *, min_ndim: int, max_ndim: int | None) -> np.ndarray:
    """Integer labels as an ``int64`` array, validated before any JAX code."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: expected an integer array, got {type(value).__name__}")
    array = np.asarray(value)
    if array.ndim < min_ndim or (max_ndim is not None and array.ndim > max_ndim):
        expected = f"{min_ndim}" if max_ndim == min_ndim else f"at least {min_ndim}"
        raise ValueError(f"{name}: expected {expected} dimension(s), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name}: is empty (shape {array.shape})")
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise ValueError(f"{name}: contains NaN or infinite values")
        if (array != np.round(array)).any():
            raise ValueError(f"{name}: labels must be whole numbers")
    elif not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name}: expected integer labels, got dtype {array.dtype}")
    return array.astype(np.int64)


def _relabel_rows(labels: np.ndarray) -> np.ndarray:
    """Relabel every row of a (D, N) array to 0..K_d-1 in order of first appearance."""
    n_rows, n_points = labels.shape
    rows = np.arange(n_rows)[:, None]
    order = np.argsort(labels, axis=1, kind="stable")
    sorted_labels = np.take_along_axis(labels, order, axis=1)
    starts = np.ones((n_rows, n_points), dtype=bool)
    starts[:, 1:] = sorted_labels[:, 1:] != sorted_labels[:, :-1]
    group_in_sorted = np.cumsum(starts, axis=1) - 1  # group index in label-value order
    # With a stable sort, a group's first sorted position holds its first appearance.
    first_index = np.full((n_rows, n_points), n_points, dtype=np.int64)
    start_rows, start_columns = np.nonzero(starts)
    first_index[start_rows, group_in_sorted[start_rows, start_columns]] = order[
        start_rows, start_columns
    ]
    rank_of_group = np.argsort(np.argsort(first_index, axis=1, kind="stable"), axis=1)
    relabelled = np.empty_like(labels)
    relabelled[rows, order] = np.take_along_axis(rank_of_group, group_in_sorted, axis=1)
    return relabelled


def _unique_draws(assignments: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate draws (..., N); return distinct partitions (U, N), their counts (U,), and D."""
    labels = _as_label_array("assignments", assignments, min_ndim=1, max_ndim=None)
    draws = _relabel_rows(labels.reshape(-1, labels.shape[-1]))
    unique, counts = np.unique(draws, axis=0, return_counts=True)
    return unique, counts, draws.shape[0]


def _bucket(size: int) -> int:
    """Round up to a power of two, so that varying numbers of draws reuse few compilations."""
    return 1 << max(0, size - 1).bit_length()


def _chunk_draws(partitions: np.ndarray, weights: np.ndarray, elements_per_row: int):
    """Pad (U, N) partitions with label -1 rows into (n_chunks, chunk, N) chunks.

    A chunk's working array holds about ``_ONE_HOT_ELEMENTS_PER_CHUNK`` elements, given
    ``elements_per_row`` per partition; the number of chunks is rounded up to a power of two.
    Returns the chunks and their weights (n_chunks, chunk).
    """
    n_partitions, n_points = partitions.shape
    chunk = int(max(1, min(n_partitions, _ONE_HOT_ELEMENTS_PER_CHUNK // elements_per_row)))
    n_chunks = _bucket(-(-n_partitions // chunk))
    padded = np.full((n_chunks * chunk, n_points), -1, dtype=np.int32)
    padded[:n_partitions] = partitions
    padded_weights = np.zeros(n_chunks * chunk, dtype=np.float32)
    padded_weights[:n_partitions] = weights
    return (
        jnp.asarray(padded.reshape(n_chunks, chunk, n_points)),
        jnp.asarray(padded_weights.reshape(n_chunks, chunk)),
    )


@partial(jit, static_argnames=("n_labels",))
def _co_clustering_counts_chunked(draws, weights, n_labels):
    """Σ_d w_d 1(c_di = c_dj) over chunks of draws (n_chunks, chunk, N); label -1 pads."""
    n_points = draws.shape[-1]

    def add_chunk(total, chunk):
        chunk_draws, chunk_weights = chunk
        one_hot = jax.nn.one_hot(chunk_draws, n_labels, dtype=jnp.float32)  # (chunk, N, K)
        weighted = one_hot * chunk_weights[:, None, None]
        return total + jnp.einsum("cnk,cmk->nm", weighted, one_hot, precision="highest"), None

    total = jnp.zeros((n_points, n_points), jnp.float32)
    return jax.lax.scan(add_chunk, total, (draws, weights))[0]


def _co_clustering_counts(unique: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Integer co-clustering counts C_ij = #draws with c_i = c_j, shape (N, N), int64."""
    n_labels = int(unique.max()) + 1
    chunks, weights = _chunk_draws(unique, counts, unique.shape[1] * n_labels)
    total = _co_clustering_counts_chunked(chunks, weights, n_labels)
    # Float32 sums of whole numbers below 2^24 draws are exact.
    return np.rint(np.asarray(total)).astype(np.int64)


def co_clustering(assignments: Any) -> np.ndarray:
    """Posterior co-clustering probabilities p_ij = P(c_i = c_j) estimated from draws.

    Parameters
    ----------
    assignments : array_like of int, shape (..., N)
        Cluster labels of N points in each draw; all leading axes (draws, or chain × draw) are
        flattened. Labels are arbitrary integers, compared only within a draw.

    Returns
    -------
    np.ndarray of float64, shape (N, N)
        Fraction of draws placing points i and j together; symmetric with unit diagonal.

    Notes
    -----
    Identical draws are counted once with a weight, and the sum Σ_d 1(c_di = c_dj) is a one-hot
    matrix product over chunks of draws (``einsum('cnk,cmk->nm')`` in JAX), never a loop over
    pairs.

    Examples
    --------
    >>> co_clustering([[0, 0, 1], [0, 1, 1]])
    array([[1. , 0.5, 0. ],
           [0.5, 1. , 0.5],
           [0. , 0.5, 1. ]])
    """
    unique, counts, n_draws = _unique_draws(assignments)
    return _co_clustering_counts(unique, counts) / n_draws


# ----------------------------------------------------------------------------- objectives


def _integer_dtype():
    return jnp.int64 if jax.config.jax_enable_x64 else jnp.int32


@partial(jit, static_argnames=("n_labels",))
def _size_and_mass_chunked(draws, co_counts, n_labels):
    """For each partition and point: cluster size m_i and mass s_i = Σ_{j in its cluster} C_ij.

    Over chunks of partitions (n_chunks, chunk, N), in floating point: by one-hot matrix
    products (O(N² K) per partition) when there are few labels, else by comparing all pairs
    (O(N²)); ``n_labels = None`` selects the latter.
    """
    co_counts = co_counts.astype(jnp.result_type(float))

    def chunk_sizes_and_masses(carry, chunk_draws):
        if n_labels is None:
            same = chunk_draws[:, :, None] == chunk_draws[:, None, :]  # (chunk, N, N)
            return carry, (same.sum(axis=2), jnp.where(same, co_counts, 0.0).sum(axis=2))
        one_hot = jax.nn.one_hot(chunk_draws, n_labels, dtype=co_counts.dtype)  # (chunk, N, K)
        per_label = jnp.einsum("nm,cmk->cnk", co_counts, one_hot, precision="highest")  # Σ_{j labelled k} C_nj
        own = jnp.maximum(chunk_draws, 0)
        masses = jnp.take_along_axis(per_label, own[..., None], axis=2)[..., 0]
        sizes = jnp.take_along_axis(one_hot.sum(axis=1), own, axis=1)
        return carry, (sizes, masses)

    return jax.lax.scan(chunk_sizes_and_masses, None, draws)[1]


def _objective(sizes: np.ndarray, masses: np.ndarray, n_draws: int, loss: str) -> np.ndarray:
    """The search objective from per-point sizes m_i and masses s_i, shape (U, N) -> (U,).

    In units of co-clustering counts C = D p: Binder's ``B = Σ_{i<j} 1(ĉ_i = ĉ_j)(D - 2 C_ij)``
    and the VI bound's ``V = Σ_i [log m_i - 2 log s_i]``. Then E[Binder] = (Σ_{i<j} C_ij + B) / D
    and the VI bound is (V + Σ_i log Σ_j C_ij) / N + log D.
    """
    if loss == "binder":
        # Σ_{i<j} = ½ Σ_i Σ_{j≠i}; each point adds D(m_i - 1) - 2(s_i - C_ii) with C_ii = D.
        return (n_draws * (sizes - 1) - 2 * (masses - n_draws)).sum(axis=1) / 2
    return (np.log(sizes) - 2.0 * np.log(masses)).sum(axis=1)


def _rank_objective(partitions: np.ndarray, co_counts: np.ndarray, n_draws: int, loss: str):
    """The objective of many partitions (U, N) in JAX float32, to rank the sampled partitions."""
    n_partitions, n_points = partitions.shape
    n_labels = int(partitions.max()) + 1
    by_one_hot = n_labels <= _MAX_LABELS_FOR_ONE_HOT
    chunks, _ = _chunk_draws(
        partitions, np.ones(n_partitions), n_points * (n_labels if by_one_hot else n_points)
    )
    sizes, masses = _size_and_mass_chunked(
        chunks, jnp.asarray(co_counts, jnp.float32), n_labels if by_one_hot else None
    )
    sizes = np.asarray(sizes, np.float64).reshape(-1, n_points)[:n_partitions]
    masses = np.asarray(masses, np.float64).reshape(-1, n_points)[:n_partitions]
    return _objective(sizes, masses, n_draws, loss)


def _exact_objective(partitions: np.ndarray, co_counts: np.ndarray, n_draws: int, loss: str):
    """The objective of a few partitions (S, N) in NumPy integers (exact for Binder)."""
    same = partitions[:, :, None] == partitions[:, None, :]
    sizes = same.sum(axis=2)
    masses = np.where(same, co_counts[None], 0).sum(axis=2)
    return _objective(sizes, masses, n_draws, loss)


# ----------------------------------------------------------------------------- search


class _SearchState(NamedTuple):
    labels: jax.Array  # (N,) cluster slot of every point, slots 0..N-1
    sizes: jax.Array  # (N,) points per slot
    within: jax.Array  # (N, N) within[j, k] = Σ_{l in slot k} C_jl
    improved: jax.Array  # bool: the last iteration changed the partition
    n_iterations: jax.Array  # int


def _largest(dtype):
    return jnp.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).max


def _x_log_x_step_up(size):
    """f(m + 1) - f(m) for f(m) = m log m, computed without cancellation; 0 at m = 0."""
    safe = jnp.maximum(size, 1)
    return jnp.where(size > 0, jnp.log1p(safe) + size * jnp.log1p(1.0 / safe), 0.0)


def _merge_gain(size_a, size_b):
    """f(a + b) - f(a) - f(b) = a log(1 + b/a) + b log(1 + a/b); 0 if either is empty."""
    safe_a, safe_b = jnp.maximum(size_a, 1), jnp.maximum(size_b, 1)
    value = size_a * jnp.log1p(safe_b / safe_a) + size_b * jnp.log1p(safe_a / safe_b)
    return jnp.where((size_a > 0) & (size_b > 0), value, 0.0)


def _move_deltas(state, point, co_counts, n_draws, loss):
    """Change of the objective when ``point`` moves to each slot (N,), for slots != its own."""
    n_points = co_counts.shape[0]
    slots = jnp.arange(n_points)
    source = state.labels[point]
    to_point = co_counts[:, point]  # C_j,point
    row = state.within[point]  # S[point, k]
    if loss == "binder":
        leave = n_draws * (state.sizes[source] - 1) - 2 * (row[source] - n_draws)
        return n_draws * state.sizes - 2 * row - leave
    dtype = jnp.result_type(float)
    own_mass = state.within[slots, state.labels].astype(dtype)  # S[j, ĉ_j]
    to_point = to_point.astype(dtype)
    others = slots != point
    in_source = others & (state.labels == source)
    # Leaving: the source's size term, its members' masses drop by C_j,point, the point's term goes.
    leave = (
        -_x_log_x_step_up(state.sizes[source] - 1)
        - 2.0 * jnp.sum(jnp.where(in_source, jnp.log1p(-to_point / own_mass), 0.0))
        + 2.0 * jnp.log(row[source].astype(dtype))
    )
    # Joining slot k: its size term, its members' masses grow by C_j,point, the point's new term.
    growth = segment_sum(
        jnp.where(others, jnp.log1p(to_point / own_mass), 0.0), state.labels, n_points
    )
    join = (
        _x_log_x_step_up(state.sizes).astype(dtype)
        - 2.0 * growth
        - 2.0 * jnp.log((row + n_draws).astype(dtype))
    )
    return leave + join


def _sweep_points(state, co_counts, n_draws, loss, tolerance):
    """One pass of single-point moves in point order, each to its best slot if that improves."""
    n_points = co_counts.shape[0]
    slots = jnp.arange(n_points)

    def visit(point, carry):
        state, moved = carry
        deltas = _move_deltas(state, point, co_counts, n_draws, loss)
        source = state.labels[point]
        first_empty = jnp.argmin(state.sizes > 0)
        allowed = (slots != source) & ((state.sizes > 0) | (slots == first_empty))
        deltas = jnp.where(allowed, deltas, _largest(deltas.dtype))
        target = jnp.argmin(deltas)
        accept = deltas[target] < -tolerance
        target = jnp.where(accept, target, source)
        column = co_counts[:, point]
        within = state.within.at[:, source].add(-column).at[:, target].add(column)
        sizes = state.sizes.at[source].add(-1).at[target].add(1)
        labels = state.labels.at[point].set(target)
        state = state._replace(labels=labels, sizes=sizes, within=within)
        return state, moved | accept

    return jax.lax.fori_loop(0, n_points, visit, (state, jnp.asarray(False)))


def _best_merge(state, co_counts, n_draws, loss, tolerance):
    """Merge the pair of clusters that lowers the objective most, if any does."""
    n_points = co_counts.shape[0]
    slots = jnp.arange(n_points)
    active = state.sizes > 0
    dtype = jnp.result_type(float)
    mass = state.within.astype(dtype)
    size = state.sizes.astype(dtype)
    if loss == "binder":
        # Q[a, b] = Σ_{i in a, j in b} C_ij; merging a and b adds m_a m_b pairs. The change is a
        # whole number but may exceed the int32 range, so it is summed in floating point and a
        # merge needs a gain above ½ (exact in float64, and in float32 below 2^24).
        between = segment_sum(mass, state.labels, n_points)
        deltas = n_draws * size[:, None] * size[None, :] - 2.0 * between
        tolerance = 0.5
    else:
        own_mass = mass[slots, state.labels]
        # G[a, b] = Σ_{j in a} log(1 + S[j, b] / S[j, a]): the growth of a's masses on merging b.
        growth = segment_sum(jnp.log1p(mass / own_mass[:, None]), state.labels, n_points)
        deltas = _merge_gain(size[:, None], size[None, :]) - 2.0 * (growth + growth.T)
    allowed = active[:, None] & active[None, :] & (slots[:, None] < slots[None, :])
    deltas = jnp.where(allowed, deltas, jnp.inf)
    flat = jnp.argmin(deltas)
    keep, absorb = flat // n_points, flat % n_points
    accept = deltas[keep, absorb] < -tolerance
    absorb = jnp.where(accept, absorb, keep)
    labels = jnp.where(state.labels == absorb, keep, state.labels)
    moved_sizes = jnp.where(accept, state.sizes[absorb], 0)
    moved_mass = jnp.where(accept, state.within[:, absorb], 0)
    sizes = state.sizes.at[absorb].add(-moved_sizes).at[keep].add(moved_sizes)
    within = state.within.at[:, absorb].add(-moved_mass).at[:, keep].add(moved_mass)
    return state._replace(labels=labels, sizes=sizes, within=within), accept


def _greedy_search(initial_labels, co_counts, n_draws, tolerance, loss):
    """Moves and merges from one starting partition until neither improves."""
    n_points = co_counts.shape[0]
    sizes = jnp.zeros(n_points, co_counts.dtype).at[initial_labels].add(1)
    within = segment_sum(co_counts, initial_labels, n_points).T
    state = _SearchState(initial_labels, sizes, within, jnp.asarray(True), jnp.asarray(0))

    def keep_going(state):
        return state.improved & (state.n_iterations < _MAX_SEARCH_ITERATIONS)

    def iterate(state):
        state, moved = _sweep_points(state, co_counts, n_draws, loss, tolerance)
        state, merged = _best_merge(state, co_counts, n_draws, loss, tolerance)
        return state._replace(improved=moved | merged, n_iterations=state.n_iterations + 1)

    state = jax.lax.while_loop(keep_going, iterate, state)
    return state.labels, state.improved


@partial(jit, static_argnames=("loss",))
def _greedy_search_from_starts(starts, co_counts, n_draws, tolerance, loss):
    """Run :func:`_greedy_search` from each start (S, N) in turn (O(N²) memory, not O(S N²))."""
    return jax.lax.map(
        lambda start: _greedy_search(start, co_counts, n_draws, tolerance, loss), starts
    )


def point_partition(assignments: Any, loss: str = "vi") -> np.ndarray:
    """Point estimate of a partition minimising a posterior expected loss (WG18).

    Parameters
    ----------
    assignments : array_like of int, shape (..., N)
        Posterior draws of the cluster labels of N points; leading axes (draws, or chain × draw)
        are flattened. Labels are compared only within a draw.
    loss : {"vi", "binder"}
        ``"binder"``: minimise the exact posterior expected Binder loss (pairs in disagreement,
        equal costs), computed from the co-clustering matrix. ``"vi"``: minimise WG18's lower
        bound of the posterior expected variation of information (see the module docstring);
        :func:`expected_variation_of_information` gives the exact expectation of the result.

    Returns
    -------
    np.ndarray of int64, shape (N,)
        Cluster labels 0..K-1 in order of first appearance.

    Notes
    -----
    The search starts from the three sampled partitions with the lowest objective and from the
    two trivial partitions, alternates sweeps of single-point moves with the best merge of two
    clusters until neither improves, and keeps the best end point. Each iteration costs O(N²)
    time, memory is O(N²), and ranking the U distinct draws costs O(U N²). Binder's objective is
    evaluated in exact integer arithmetic (merges in floating point, see ``_best_merge``); the
    VI bound in floating point, ignoring improvements below 1e-4 (float32) or 1e-10 (float64,
    with ``jax_enable_x64``).

    Examples
    --------
    >>> draws = [[5, 5, 2, 2], [1, 1, 0, 0], [3, 3, 3, 4]]
    >>> point_partition(draws, loss="binder")
    array([0, 0, 1, 1])
    """
    unique, counts, n_draws = _unique_draws(assignments)
    loss = check_choice("loss", loss, ("vi", "binder"))
    n_points = unique.shape[1]
    integer_dtype = _integer_dtype()
    if integer_dtype == jnp.int32 and 2 * n_draws * n_points > _INT32_MAX:
        raise ValueError(
            f"assignments: {n_draws} draws x {n_points} points overflow the int32 search; thin "
            "the draws or enable jax_enable_x64"
        )
    co_counts = _co_clustering_counts(unique, counts)
    objectives = _rank_objective(unique, co_counts, n_draws, loss)
    ranked = unique[np.argsort(objectives, kind="stable")[:_N_SAMPLED_STARTS]]
    ranked = ranked[np.arange(_N_SAMPLED_STARTS) % ranked.shape[0]]  # fixed number of starts
    starts = np.concatenate([ranked, np.zeros((1, n_points)), np.arange(n_points)[None, :]])
    if loss == "binder":
        tolerance = 0
    else:
        tolerance = 1e-10 if jax.config.jax_enable_x64 else 1e-4
    results, still_improving = _greedy_search_from_starts(
        jnp.asarray(starts, integer_dtype),
        jnp.asarray(co_counts, integer_dtype),
        jnp.asarray(n_draws, integer_dtype),
        tolerance,
        loss,
    )
    candidates = _relabel_rows(np.asarray(results, np.int64))
    best = int(np.argmin(_exact_objective(candidates, co_counts, n_draws, loss)))
    if bool(np.asarray(still_improving)[best]):
        warnings.warn(
            f"point_partition: stopped after {_MAX_SEARCH_ITERATIONS} iterations while still "
            "improving; the result is not a local minimum",
            RuntimeWarning,
            stacklevel=2,
        )
    return candidates[best]


# ----------------------------------------------------------------------------- losses


def _check_labels_and_matrix(
    labels: Any, co_clustering_matrix: Any
) -> tuple[np.ndarray, np.ndarray]:
    labels = _as_label_array("labels", labels, min_ndim=1, max_ndim=1)
    matrix = as_float_array("co_clustering_matrix", co_clustering_matrix, ndim=2, nonnegative=True)
    if matrix.shape != (labels.shape[0], labels.shape[0]):
        raise ValueError(
            f"co_clustering_matrix: expected shape {(labels.shape[0], labels.shape[0])}, "
            f"got {matrix.shape}"
        )
    if (matrix > 1.0 + 1e-12).any():
        raise ValueError("co_clustering_matrix: probabilities must be <= 1")
    if not np.allclose(matrix, matrix.T, rtol=0.0, atol=1e-6):  # p_ij = p_ji for a co-clustering matrix
        raise ValueError("co_clustering_matrix: must be symmetric (p_ij, the probability that points i and j "
                         "share a cluster, equals p_ji)")
    return labels, matrix


def expected_binder_loss(labels: Any, co_clustering_matrix: Any) -> float:
    """Posterior expected Binder loss (equal costs) of a partition from co-clustering probabilities.

    E[B(c, ĉ)] = Σ_{i<j} [1(ĉ_i = ĉ_j)(1 - p_ij) + 1(ĉ_i ≠ ĉ_j) p_ij] (WG18): the expected
    number of pairs on which ĉ and the true partition disagree.

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        The candidate partition ĉ.
    co_clustering_matrix : array_like of float, shape (N, N)
        p_ij, e.g. from :func:`co_clustering`.

    Returns
    -------
    float
    """
    labels, matrix = _check_labels_and_matrix(labels, co_clustering_matrix)
    same = labels[:, None] == labels[None, :]
    disagreement = np.where(same, 1.0 - matrix, matrix)
    return float(np.triu(disagreement, k=1).sum())


def expected_vi_lower_bound(labels: Any, co_clustering_matrix: Any) -> float:
    """WG18's lower bound of the posterior expected variation of information (nats).

    (1/N) Σ_i [log Σ_j 1(ĉ_j = ĉ_i) + log Σ_j p_ij - 2 log Σ_j 1(ĉ_j = ĉ_i) p_ij], from
    Jensen's inequality applied to E[VI(c, ĉ)] (WG18), with unit diagonal p_ii = 1.

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        The candidate partition ĉ.
    co_clustering_matrix : array_like of float, shape (N, N)
        p_ij, e.g. from :func:`co_clustering`.

    Returns
    -------
    float
    """
    labels, matrix = _check_labels_and_matrix(labels, co_clustering_matrix)
    same = labels[:, None] == labels[None, :]
    sizes = same.sum(axis=1)
    masses = np.where(same, matrix, 0.0).sum(axis=1)
    return float(np.mean(np.log(sizes) + np.log(matrix.sum(axis=1)) - 2.0 * np.log(masses)))


def expected_variation_of_information(labels: Any, assignments: Any) -> float:
    """Exact posterior expected VI of a partition: the mean of VI(c_d, ĉ) over the draws (nats).

    Parameters
    ----------
    labels : array_like of int, shape (N,)
        The candidate partition ĉ.
    assignments : array_like of int, shape (..., N)
        Posterior draws, leading axes flattened.

    Returns
    -------
    float
    """
    labels = _as_label_array("labels", labels, min_ndim=1, max_ndim=1)
    unique, counts, n_draws = _unique_draws(assignments)
    n_unique, n_points = unique.shape
    if labels.shape[0] != n_points:
        raise ValueError(f"labels: has {labels.shape[0]} points but the draws have {n_points}")
    candidate = _relabel_rows(labels[None, :])[0]

    def sum_x_log_x(codes, n_codes):
        # Σ over the (row, code) cells of n log n, n the count of a code within a row (U,).
        row_codes = np.arange(codes.shape[0])[:, None] * n_codes + codes
        cells, cell_counts = np.unique(row_codes, return_counts=True)
        terms = cell_counts * np.log(cell_counts)
        return np.bincount(cells // n_codes, weights=terms, minlength=codes.shape[0])

    n_candidate = int(candidate.max()) + 1
    joint = unique * n_candidate + candidate[None, :]
    # N VI = Σ n_k log n_k + Σ n_l log n_l - 2 Σ n_kl log n_kl (the log N terms cancel).
    candidate_term = sum_x_log_x(candidate[None, :], n_candidate)[0]
    draw_term = sum_x_log_x(unique, n_points)
    joint_term = sum_x_log_x(joint, n_points * n_candidate)
    per_draw = np.maximum(candidate_term + draw_term - 2.0 * joint_term, 0.0) / n_points
    return float((per_draw * counts).sum() / n_draws)
