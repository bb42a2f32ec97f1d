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
from inference._validation import as_float_array, check_choice, check_int, check_memory, memory_shortfall
from inference.jit import jit

__all__ = [
    "co_clustering",
    "most_probable_draw",
    "point_partition",
    "point_partition_shortfall",
    "expected_binder_loss",
    "expected_vi_lower_bound",
    "expected_variation_of_information",
]

_ELEMENTS_PER_CHUNK = 1 << 22
_MAX_SEARCH_ITERATIONS = 1000
_N_SAMPLED_STARTS = 3
_INT32_MAX = np.iinfo(np.int32).max


# ----------------------------------------------------------------------------- draws


def most_probable_draw(log_joint: Any) -> tuple[int, int]:
    """(chain, draw) of the highest log joint (n_chains, n_draws) among every chain's draws, NaN
    ignored: the draw a maximum a posteriori partition is read from (one draw, where
    :func:`point_partition` summarises them all). ``ValueError`` if there is no finite value."""
    values = np.asarray(log_joint, dtype=np.float64)
    if values.ndim != 2 or not np.isfinite(values).any():
        raise ValueError(f"log_joint: expected (n_chains, n_draws) values, some finite, got shape {values.shape}"
                         + ("" if values.ndim != 2 or values.size == 0 else " without a finite value"))
    chain, draw = np.unravel_index(int(np.nanargmax(np.where(np.isfinite(values), values, -np.inf))), values.shape)
    return int(chain), int(draw)



def _as_label_array(name: str, value: Any, *, min_ndim: int, max_ndim: int | None) -> np.ndarray:
    """Integer labels as an ``int64`` array, validated before any JAX code."""
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: expected an integer array, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged lists
        raise ValueError(f"{name}: cannot be read as an array ({error})") from None
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
        if (np.abs(array) >= 2.0**62).any():  # beyond int64 after the cast
            raise ValueError(f"{name}: labels must lie between -2**62 and 2**62")
    elif not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name}: expected integer labels, got dtype {array.dtype}")
    return array.astype(np.int64)


def _relabel_rows(labels: np.ndarray) -> np.ndarray:
    """Relabel every row of a (D, N) array to 0..K_d-1 in order of first appearance."""
    n_rows, n_points = labels.shape
    low = int(labels.min())
    span = int(labels.max()) - low + 1
    if span > n_points:  # labels spread wide: sort each row
        return _relabel_rows_by_sorting(labels)
    # Few distinct values (a sampler's cluster slots): the first position of each value in each
    # row, by a minimum over positions, in blocks of rows; then the values ranked by it.
    relabelled = np.empty_like(labels)
    rows = _rows_per_block(max(n_points, span))
    positions = np.arange(n_points)
    for first_row in range(0, n_rows, rows):
        codes = labels[first_row:first_row + rows] - low
        n_block = codes.shape[0]
        first = np.full(n_block * span, n_points, dtype=np.int64)
        np.minimum.at(first, (codes + span * np.arange(n_block)[:, None]).ravel(), np.tile(positions, n_block))
        # Absent values (first position N) rank after every present one.
        rank = np.argsort(np.argsort(first.reshape(n_block, span), axis=1, kind="stable"), axis=1)
        relabelled[first_row:first_row + n_block] = np.take_along_axis(rank, codes, axis=1)
    return relabelled


def _relabel_rows_by_sorting(labels: np.ndarray) -> np.ndarray:
    """:func:`_relabel_rows` for labels of any range: a stable sort of each row."""
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


#: Bytes per pair of points that :func:`point_partition` holds at once, about: the co-clustering
#: counts on the host and in JAX, and the search's masses, merge gains and temporaries.
_POINT_PARTITION_BYTES = 40
#: The same for :func:`co_clustering`: the float32 sums (old and new), int64 counts, float64 result.
_CO_CLUSTERING_BYTES = 24


def _matrix_memory(n_points: int, bytes_per_entry: int, what: str) -> tuple[int, str]:
    return bytes_per_entry * n_points**2, f"{what} of {n_points:,} points ({n_points:,} x {n_points:,} matrices)"


def point_partition_shortfall(n_points: int) -> str | None:
    """None if :func:`point_partition` of ``n_points`` points fits in memory, else the sentence
    saying it does not (its O(N²) matrices; ``$LATENTZOO_MEMORY_LIMIT`` sets another limit).

    For a caller that decides before sampling what to do instead (the command line keeps the draw
    of highest log joint).

    >>> point_partition_shortfall(100) is None
    True
    """
    n_points = check_int("n_points", n_points, minimum=1)
    return memory_shortfall(*_matrix_memory(n_points, _POINT_PARTITION_BYTES, "a point estimate"))


def _bucket(size: int) -> int:
    """Round up to a power of two, so that varying sizes reuse few compilations."""
    return 1 << max(0, size - 1).bit_length()


class _Clusters(NamedTuple):
    """The distinct clusters (blocks) of U distinct partitions (U, N) labelled 0..L-1 per row.

    A cluster is a set of points; it is counted once however many draws hold it (a chain that
    moves a few points per sweep keeps most of its clusters from one draw to the next).
    """

    draw: np.ndarray  # (M,) a partition that holds each cluster
    label: np.ndarray  # (M,) its label there
    size: np.ndarray  # (M,) its number of points
    weight: np.ndarray  # (M,) how many draws hold it (sum of the partitions' counts)
    of: np.ndarray  # (U, L) the cluster of each partition's label, -1 where the label is empty


def _rows_per_block(n_points: int) -> int:
    return max(1, _ELEMENTS_PER_CHUNK // n_points)


def _distinct_clusters(partitions: np.ndarray, counts: np.ndarray) -> _Clusters:
    """Find the distinct clusters of ``partitions`` (U, N), labels 0..L-1 in each row.

    Each cluster is identified by its size and two sums of random keys over its points, summed
    in point order (so that one set always gives the same floating-point sums), then checked
    point by point against the cluster taken to represent it: the result is exact, and a
    collision of the sums (never seen; about 2^-100 per pair) only makes it draw new keys.
    Costs O(U N) time and memory in blocks of about ``_ELEMENTS_PER_CHUNK`` labels.
    """
    n_partitions, n_points = partitions.shape
    n_labels = int(partitions.max()) + 1
    rows = _rows_per_block(n_points)
    for seed in range(4):
        keys = np.random.default_rng(seed).random((2, n_points))
        table = np.zeros((n_partitions * n_labels, 3))
        for first in range(0, n_partitions, rows):
            block = partitions[first:first + rows]
            flat = (block + n_labels * np.arange(block.shape[0])[:, None]).ravel()
            cells = slice(first * n_labels, (first + block.shape[0]) * n_labels)
            for column, key in enumerate(keys):
                table[cells, column] = np.bincount(flat, weights=np.tile(key, block.shape[0]),
                                                   minlength=block.shape[0] * n_labels)
            table[cells, 2] = np.bincount(flat, minlength=block.shape[0] * n_labels)
        occupied = np.flatnonzero(table[:, 2])
        _, representative, inverse = np.unique(table[occupied], axis=0, return_index=True, return_inverse=True)
        of = np.full(n_partitions * n_labels, -1, dtype=np.int64)
        of[occupied] = inverse.ravel()
        of = of.reshape(n_partitions, n_labels)
        draw, label = np.divmod(occupied[representative], n_labels)
        if _members_match(partitions, draw, label, of):
            weight = np.bincount(of[of >= 0], weights=np.broadcast_to(counts[:, None], of.shape)[of >= 0],
                                 minlength=len(draw))
            return _Clusters(draw, label, table[occupied[representative], 2].astype(np.int64), weight, of)
    raise RuntimeError("partitions: the distinct clusters could not be told apart by random keys")


def _members_match(partitions, draw, label, of) -> bool:
    """Whether every point of every partition lies in its cluster's representative: with the
    sizes equal, each (partition, label) then holds exactly its representative's points."""
    n_partitions, n_points = partitions.shape
    rows = _rows_per_block(n_points)
    for first in range(0, n_partitions, rows):
        block = partitions[first:first + rows]
        cluster = of[first + np.arange(block.shape[0])[:, None], block]
        if not (partitions[draw[cluster], np.arange(n_points)] == label[cluster]).all():
            return False
    return True


def _cluster_chunks(partitions: np.ndarray, clusters: _Clusters):
    """Chunks of the clusters' membership rows: yields (rows (chunk, N) int32, labels (chunk,), slice).

    The chunk length is a power of two holding about ``_ELEMENTS_PER_CHUNK`` labels (fewer when
    there are fewer clusters), the last chunk padded with label -1, which matches no point.
    """
    n_clusters = len(clusters.draw)
    n_points = partitions.shape[1]
    chunk = min(_bucket(n_clusters), 1 << (_rows_per_block(n_points).bit_length() - 1))
    for first in range(0, n_clusters, chunk):
        part = slice(first, min(first + chunk, n_clusters))
        rows = np.zeros((chunk, n_points), dtype=np.int32)
        labels = np.full(chunk, -1, dtype=np.int32)
        rows[:part.stop - first] = partitions[clusters.draw[part]]
        labels[:part.stop - first] = clusters.label[part]
        yield jnp.asarray(rows), jnp.asarray(labels), part


@jit
def _add_co_clustering(total, rows, labels, weights):
    """total + Σ_c w_c 1_c 1_c^T over a chunk of clusters (membership: rows == labels)."""
    member = (rows == labels[:, None]).astype(total.dtype)  # (chunk, N)
    return total + jnp.einsum("cn,cm->nm", member * weights[:, None], member, precision="highest")


def _co_clustering_counts(unique: np.ndarray, counts: np.ndarray, clusters: _Clusters | None = None) -> np.ndarray:
    """Integer co-clustering counts C_ij = #draws with c_i = c_j, shape (N, N), int64.

    C = Σ_S w_S 1_S 1_S^T over the distinct clusters S of the draws, w_S the number of draws
    that hold S: a matrix product over chunks of clusters, O(N² M) for M distinct clusters,
    against O(N² K U) over the U distinct draws' K labels each.
    """
    clusters = _distinct_clusters(unique, counts) if clusters is None else clusters
    n_points = unique.shape[1]
    total = jnp.zeros((n_points, n_points), jnp.float32)
    for rows, labels, part in _cluster_chunks(unique, clusters):
        weights = np.zeros(rows.shape[0], np.float32)
        weights[:part.stop - part.start] = clusters.weight[part]
        total = _add_co_clustering(total, rows, labels, jnp.asarray(weights))
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
    The sum Σ_d 1(c_di = c_dj) is Σ_S w_S 1(i ∈ S) 1(j ∈ S) over the distinct clusters S of the
    draws, w_S the number of draws holding S: a matrix product over chunks of clusters in JAX,
    O(N² M) for M distinct clusters, never a loop over pairs. A chain that moves a few points per
    sweep keeps most of its clusters from one draw to the next (8,000 draws of DM05's CDP on the
    1,797 digits hold 330,332 clusters, 139,068 of them distinct). Memory is O(N²); N points whose
    matrices would not fit are refused with a ``ValueError`` before any work.

    Examples
    --------
    >>> co_clustering([[0, 0, 1], [0, 1, 1]])
    array([[1. , 0.5, 0. ],
           [0.5, 1. , 0.5],
           [0. , 0.5, 1. ]])
    """
    unique, counts, n_draws = _unique_draws(assignments)
    check_memory("assignments", *_matrix_memory(unique.shape[1], _CO_CLUSTERING_BYTES, "the co-clustering matrix"))
    return _co_clustering_counts(unique, counts) / n_draws


# ----------------------------------------------------------------------------- objectives


def _integer_dtype():
    return jnp.int64 if jax.config.jax_enable_x64 else jnp.int32


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


@jit
def _cluster_masses(co_counts, rows, labels):
    """For a chunk of clusters S: Σ_{i in S} log s_i and Σ_{i in S} s_i, s_i = Σ_{j in S} C_ij."""
    member = rows == labels[:, None]  # (chunk, N)
    within = jnp.einsum("cn,nm->cm", member.astype(co_counts.dtype), co_counts, precision="highest")
    log_mass = jnp.where(member, jnp.log(jnp.where(member, within, 1.0)), 0.0).sum(axis=1)
    return log_mass, jnp.where(member, within, 0.0).sum(axis=1)


def _rank_objective(partitions: np.ndarray, co_counts: np.ndarray, n_draws: int, loss: str,
                    clusters: _Clusters | None = None) -> np.ndarray:
    """The objective of many partitions (U, N), to rank the sampled partitions, shape (U,).

    By cluster: the objective is a sum over a partition's clusters S of a term that depends on S
    alone (VI bound: n_S log n_S - 2 Σ_{i in S} log s_i; Binder: D n_S (n_S - 1) / 2 - Σ_{i,j in S}
    C_ij + D n_S), so each distinct cluster is scored once (in JAX's default float, O(N² M)) and
    the partitions sum their clusters' scores in float64.
    """
    clusters = _distinct_clusters(partitions, np.ones(len(partitions))) if clusters is None else clusters
    matrix = jnp.asarray(co_counts, jnp.result_type(float))
    log_mass = np.zeros(len(clusters.draw))
    quadratic = np.zeros(len(clusters.draw))
    for rows, labels, part in _cluster_chunks(partitions, clusters):
        chunk_log_mass, chunk_quadratic = _cluster_masses(matrix, rows, labels)
        log_mass[part] = np.asarray(chunk_log_mass, np.float64)[:part.stop - part.start]
        quadratic[part] = np.asarray(chunk_quadratic, np.float64)[:part.stop - part.start]
    size = clusters.size.astype(np.float64)
    if loss == "binder":
        score = n_draws * size * (size - 1) / 2 - quadratic + n_draws * size
    else:
        score = size * np.log(size) - 2.0 * log_mass
    return np.where(clusters.of >= 0, score[clusters.of], 0.0).sum(axis=1)


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
    own_mass: jax.Array  # (N,) s_j = Σ_{l in j's slot} C_jl
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


def _move_deltas(state, point, row, co_counts, n_draws, loss):
    """Change of the objective when ``point`` moves to each slot (N,), for slots != its own.

    ``row[k]`` is the point's mass in slot k, S[point, k] = Σ_{l in slot k} C_point,l.
    """
    n_points = co_counts.shape[0]
    slots = jnp.arange(n_points)
    source = state.labels[point]
    to_point = co_counts[:, point]  # C_j,point
    if loss == "binder":
        leave = n_draws * (state.sizes[source] - 1) - 2 * (row[source] - n_draws)
        return n_draws * state.sizes - 2 * row - leave
    dtype = jnp.result_type(float)
    own_mass = state.own_mass.astype(dtype)  # S[j, ĉ_j]
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
        column = co_counts[:, point]
        # The point's mass in every slot, from its column of C: O(N), where reading it from an
        # (N, N) matrix of masses carried through the loop made XLA copy that matrix at every
        # visit (the scatter that updates it in place must follow every read of it; measured
        # 2026-12-06 on 1,797 points: 6.2 s a sweep, now 0.07 s).
        row = segment_sum(column, state.labels, n_points)
        deltas = _move_deltas(state, point, row, co_counts, n_draws, loss)
        source = state.labels[point]
        first_empty = jnp.argmin(state.sizes > 0)
        allowed = (slots != source) & ((state.sizes > 0) | (slots == first_empty))
        deltas = jnp.where(allowed, deltas, _largest(deltas.dtype))
        target = jnp.argmin(deltas)
        accept = deltas[target] < -tolerance
        target = jnp.where(accept, target, source)
        # Masses of the other points: those in the source lose C_j,point, those in the target gain
        # it (nothing changes when the point stays); the point's own is its mass in the target.
        others = slots != point
        change = (jnp.where(others & (state.labels == target), column, 0)
                  - jnp.where(others & (state.labels == source), column, 0))
        own_mass = (state.own_mass + change).at[point].set(row[target] + jnp.where(accept, n_draws, 0))
        sizes = state.sizes.at[source].add(-1).at[target].add(1)
        labels = state.labels.at[point].set(target)
        state = state._replace(labels=labels, sizes=sizes, own_mass=own_mass)
        return state, moved | accept

    return jax.lax.fori_loop(0, n_points, visit, (state, jnp.asarray(False)))


def _best_merge(state, co_counts, n_draws, loss, tolerance):
    """Merge the pair of clusters that lowers the objective most, if any does."""
    n_points = co_counts.shape[0]
    slots = jnp.arange(n_points)
    active = state.sizes > 0
    dtype = jnp.result_type(float)
    within = segment_sum(co_counts, state.labels, n_points).T  # S[j, k] = Σ_{l in slot k} C_jl
    mass = within.astype(dtype)
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
    sizes = state.sizes.at[absorb].add(-moved_sizes).at[keep].add(moved_sizes)
    merged = accept & (labels == keep)
    own_mass = jnp.where(merged, within[:, keep] + within[:, absorb], state.own_mass)
    return state._replace(labels=labels, sizes=sizes, own_mass=own_mass), accept


def _greedy_search(initial_labels, co_counts, n_draws, tolerance, loss):
    """Moves and merges from one starting partition until neither improves."""
    n_points = co_counts.shape[0]
    sizes = jnp.zeros(n_points, co_counts.dtype).at[initial_labels].add(1)
    within = segment_sum(co_counts, initial_labels, n_points).T
    own_mass = within[jnp.arange(n_points), initial_labels]
    state = _SearchState(initial_labels, sizes, own_mass, jnp.asarray(True), jnp.asarray(0))

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
    time, memory is O(N²), and ranking the distinct draws costs O(N² M) for their M distinct
    clusters, as :func:`co_clustering` does (8,000 draws of 1,797 digits: about 20 s on 2 CPU
    cores, 107-141 s before 2026-12-06, which ranked each draw's labels by one-hot products and
    searched with a matrix that XLA copied at every point visited). Binder's objective is
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
    check_memory("assignments", *_matrix_memory(n_points, _POINT_PARTITION_BYTES, "a point estimate"))
    integer_dtype = _integer_dtype()
    if integer_dtype == jnp.int32 and 2 * n_draws * n_points > _INT32_MAX:
        raise ValueError(
            f"assignments: {n_draws} draws x {n_points} points overflow the int32 search; thin "
            "the draws or enable jax_enable_x64"
        )
    clusters = _distinct_clusters(unique, counts)
    co_counts = _co_clustering_counts(unique, counts, clusters)
    objectives = _rank_objective(unique, co_counts, n_draws, loss, clusters)
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
