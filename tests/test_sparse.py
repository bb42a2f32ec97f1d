"""The sparse E-step primitive: chunked = unchunked, numba = XLA = dense NumPy, padding inert."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.native import available_backends, resolve_backend
from inference.sparse import cell_stats
from zoo.data import CoOccurrence


def _problem(seed=0, shape=(23, 31), n_classes=5):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.6, size=shape) * (rng.random(shape) < 0.5)
    counts[0, 0] += 1
    counts[3] = 0  # an empty row
    A = rng.random((shape[0], n_classes))
    B = rng.random((shape[1], n_classes))
    return counts, A, B


def _dense_reference(counts, A, B):
    z = A @ B.T
    ratio = np.where(counts > 0, counts / np.where(counts > 0, z, 1.0), 0.0)
    log_norm = np.sum(np.where(counts > 0, counts * np.log(np.where(counts > 0, z, 1.0)), 0.0))
    return A * (ratio @ B), B * (ratio.T @ A), log_norm


@pytest.mark.parametrize("chunk_cells", [7, 64, 1 << 20])
def test_chunked_xla_path_equals_dense_reference(x64, chunk_cells):
    counts, A, B = _problem()
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    stats = cell_stats(jnp.asarray(A), jnp.asarray(B), arrays, backend="xla", chunk_cells=chunk_cells)
    rows, cols, log_norm = _dense_reference(counts, A, B)
    np.testing.assert_allclose(np.asarray(stats.row_stats), rows, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.col_stats), cols, rtol=1e-12)
    np.testing.assert_allclose(float(stats.log_norm), log_norm, rtol=1e-12)


@pytest.mark.numba
def test_numba_path_equals_xla_path_with_evaluation_factors(x64):
    counts, A, B = _problem(seed=1)
    A_eval, B_eval = A**0.5, B**1.5
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    results = [
        cell_stats(jnp.asarray(A), jnp.asarray(B), arrays, backend=backend,
                   eval_factors=(jnp.asarray(A_eval), jnp.asarray(B_eval)), eval_needed=True)
        for backend in ("xla", "numba")
    ]
    for xla, fast in zip(*results):
        np.testing.assert_allclose(np.asarray(xla), np.asarray(fast), rtol=1e-12)
    np.testing.assert_allclose(float(results[1].eval_log_norm), _dense_reference(counts, A_eval, B_eval)[2], rtol=1e-12)


@pytest.mark.parametrize("want_rows, want_cols", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.numba
def test_numba_path_equals_dense_reference_for_each_statistic(x64, want_rows, want_cols):
    counts, A, B = _problem(seed=4, shape=(37, 29), n_classes=7)
    counts[:, 2] = 0  # an empty column
    stats = cell_stats(jnp.asarray(A), jnp.asarray(B), CoOccurrence.from_dense(counts).to_arrays(),
                       want_rows=want_rows, want_cols=want_cols, backend="numba")
    rows, cols, log_norm = _dense_reference(counts, A, B)
    assert (stats.row_stats is None) != want_rows and (stats.col_stats is None) != want_cols
    if want_rows:
        np.testing.assert_allclose(np.asarray(stats.row_stats), rows, rtol=1e-12)
    if want_cols:
        np.testing.assert_allclose(np.asarray(stats.col_stats), cols, rtol=1e-12)
    np.testing.assert_allclose(float(stats.log_norm), log_norm, rtol=1e-12)


@pytest.mark.numba
def test_float32_numba_path_on_many_cells_and_classes():
    # Long rows and columns (the prefetch runs ahead of the cell being scored) and K = 64.
    rng = np.random.default_rng(6)
    counts = rng.poisson(1.5, (300, 200)) * (rng.random((300, 200)) < 0.4)
    A, B = rng.random((300, 64)), rng.random((200, 64))
    stats = cell_stats(jnp.asarray(A, jnp.float32), jnp.asarray(B, jnp.float32),
                       CoOccurrence.from_dense(counts).to_arrays(jnp.float32), backend="numba")
    assert stats.row_stats.dtype == jnp.float32
    rows, cols, log_norm = _dense_reference(counts, A, B)
    np.testing.assert_allclose(np.asarray(stats.row_stats), rows, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(stats.col_stats), cols, rtol=2e-5)
    np.testing.assert_allclose(float(stats.log_norm), log_norm, rtol=1e-6)


@pytest.mark.numba
def test_numba_path_gives_the_same_bits_on_any_number_of_threads(x64, monkeypatch):
    """Every output, the log-normalisers included, is the same whatever the number of thread ranges
    the kernel cuts the rows into (numba's thread count on the machine): a fit's bits must not
    depend on how many cores it ran on."""
    from inference.native import sparse_cells

    counts, A, B = _problem(seed=7, shape=(301, 53), n_classes=6)
    A_eval, B_eval = A**0.5, B**1.5
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    outputs = []
    for n_threads in (1, 2, 3, 8):
        monkeypatch.setattr(sparse_cells, "numba_threads", lambda n=n_threads: jnp.asarray(n, jnp.int32))
        stats = cell_stats(jnp.asarray(A), jnp.asarray(B), arrays, backend="numba",
                           eval_factors=(jnp.asarray(A_eval), jnp.asarray(B_eval)), eval_needed=True)
        outputs.append([np.asarray(value).tobytes() for value in stats])
    assert all(output == outputs[0] for output in outputs[1:])


def test_padding_changes_nothing(x64):
    counts, A, B = _problem(seed=2)
    data = CoOccurrence.from_dense(counts)
    padded, exact = data.to_arrays(), data.to_arrays(pad=False)
    assert padded.counts.shape[0] > exact.counts.shape[0]
    for backend in available_backends():
        one = cell_stats(jnp.asarray(A), jnp.asarray(B), padded, backend=backend)
        two = cell_stats(jnp.asarray(A), jnp.asarray(B), exact, backend=backend)
        for a, b in zip(one, two):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)


@pytest.mark.numba
def test_vmapped_numba_path_matches_each_call():
    counts, A, B = _problem(seed=3)
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    A = jnp.asarray(np.stack([A, 2 * A]), jnp.float32)
    batched = jax.vmap(lambda a: cell_stats(a, jnp.asarray(B, jnp.float32), arrays, backend="numba").log_norm)(A)
    single = [cell_stats(a, jnp.asarray(B, jnp.float32), arrays, backend="numba").log_norm for a in A]
    np.testing.assert_allclose(np.asarray(batched), np.asarray(single), rtol=1e-6)


@pytest.mark.numba
def test_numba_path_refuses_64_bit_cell_pointers(x64):
    counts, A, B = _problem(seed=7)
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    wide = arrays._replace(indptr=arrays.indptr.astype(jnp.int64), col_indptr=arrays.col_indptr.astype(jnp.int64))
    with pytest.raises(ValueError, match="^data: the numba backend takes fewer than 2\\^31 cells"):
        cell_stats(jnp.asarray(A), jnp.asarray(B), wide, backend="numba")
    xla = cell_stats(jnp.asarray(A), jnp.asarray(B), wide, backend="xla")
    np.testing.assert_allclose(float(xla.log_norm), _dense_reference(counts, A, B)[2], rtol=1e-12)


@pytest.mark.numba
def test_custom_call_with_the_wrong_arguments_is_an_xla_error_not_a_crash():
    from inference.native.sparse_cells import target

    call = jax.ffi.ffi_call(target("count_matmul", jnp.float32), jax.ShapeDtypeStruct((3, 2), jnp.float32))
    pointer = jnp.asarray([0, 1, 2, 3], jnp.int32)
    with pytest.raises(Exception, match="latentzoo: the XLA FFI call frame does not have the layout"):
        # four arguments where the handler takes five: refused before any buffer is read
        jax.block_until_ready(call(pointer, jnp.zeros(3, jnp.int32), jnp.ones(3, jnp.float32), jnp.ones((3, 2))))


def test_numba_path_is_refused_off_the_cpu(monkeypatch):
    counts, A, B = _problem(seed=8)
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert resolve_backend("auto") == "xla"
    with pytest.raises(ValueError, match="^backend: the numba kernels are CPU custom calls"):
        cell_stats(jnp.asarray(A), jnp.asarray(B), arrays, backend="numba")


def test_backend_names_are_checked():
    with pytest.raises(ValueError, match="^backend"):
        resolve_backend("gpu")
    assert resolve_backend("auto") in ("numba", "xla")
