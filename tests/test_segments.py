"""Fixed-order segment sums: equal to a float64 reference, ids dropped as jax.ops.segment_sum drops
them, and the XLA E-step with the fixed order equal to the scatter path (both run here on any
backend: the order is forced)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import inference.sparse as sparse
from inference.em import tempered_em
from inference.schedules import FixedBeta
from inference.segments import segment_sum, sorted_segment_sum
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect


def _reference(values, ids, num_segments):
    out = np.zeros((num_segments,) + values.shape[1:])
    keep = (ids >= 0) & (ids < num_segments)
    np.add.at(out, ids[keep], values[keep].astype(float))
    return out


@pytest.mark.parametrize("n, num_segments, trailing, block", [
    (1, 3, (2,), 32), (5, 3, (), 32), (1000, 50, (4,), 32), (1000, 5, (4,), 8), (777, 400, (3,), 32),
    (4096, 1, (2,), 32), (3000, 20, (2, 3), 4), (64, 64, (), 1)])
def test_sorted_segment_sum_equals_the_reference(n, num_segments, trailing, block):
    rng = np.random.default_rng(n + num_segments)
    # ids from -1 (dropped) to num_segments (dropped), with long runs and gaps
    ids = np.sort(rng.integers(-1, num_segments + 1, n))
    values = rng.normal(size=(n,) + trailing).astype(np.float32)
    got = sorted_segment_sum(jnp.asarray(values), jnp.asarray(ids), num_segments, block=block)
    np.testing.assert_allclose(np.asarray(got), _reference(values, ids, num_segments), atol=2e-5 * np.sqrt(n))


def test_runs_longer_than_many_blocks_and_an_accumulator():
    ids = np.repeat(np.arange(4), [1, 5000, 3, 70])
    values = np.ones((ids.size, 2), np.float32)
    out = jnp.full((5, 2), 10.0)
    got = jax.jit(lambda v, i, o: sorted_segment_sum(v, i, 5, out=o))(jnp.asarray(values), jnp.asarray(ids), out)
    np.testing.assert_array_equal(np.asarray(got)[:, 0], [11, 5010, 13, 80, 10])


def test_unsorted_ids_vmapped_and_integers():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 30, (4, 500))
    values = rng.normal(size=(4, 500, 3)).astype(np.float32)
    got = jax.vmap(lambda v, i: segment_sum(v, i, 30, ordered=True))(jnp.asarray(values), jnp.asarray(ids))
    for chain in range(4):
        np.testing.assert_allclose(np.asarray(got[chain]), _reference(values[chain], ids[chain], 30), atol=1e-5)
    counts = segment_sum(jnp.ones(500, jnp.int32), jnp.asarray(ids[0]), 30, ordered=True)
    assert counts.dtype == jnp.int32 and int(counts.sum()) == 500


def test_block_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="^block"):
        sorted_segment_sum(jnp.ones(4), jnp.zeros(4, jnp.int32), 1, block=3)


@pytest.fixture
def ordered_sums(monkeypatch):
    """The E-step takes the fixed-order path it takes on a GPU."""
    monkeypatch.setattr(sparse, "scatter_is_ordered", lambda: False)


def _data():
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.3, size=(60, 45)) * (rng.random((60, 45)) < 0.4)
    counts[:, :3] += rng.poisson(4.0, size=(60, 3))  # heavy columns, as with Zipf words
    counts[5] = 0
    counts[:, 7] = 0
    return CoOccurrence.from_dense(counts)


def _primitives(data, seed=1):
    rng = np.random.default_rng(seed)
    A = jnp.asarray(rng.random((data.n_rows, 6)), jnp.float32)
    B = jnp.asarray(rng.random((data.n_cols, 6)), jnp.float32)
    arrays = data.to_arrays()
    weights = jnp.asarray(rng.random(data.n_rows), jnp.float32)
    stats = sparse.cell_stats(A, B, arrays, backend="xla", chunk_cells=97, eval_factors=(A**0.5, B**0.5))
    row_stats = sparse.row_cell_stats(A, B, arrays, row_weights=weights, backend="xla", chunk_cells=61)
    return [*stats, sparse.count_matmul(B, arrays, backend="xla", chunk_cells=50),
            sparse.count_matmul(A, arrays, transpose=True, backend="xla", chunk_cells=50), *row_stats]


def test_fixed_order_e_step_equals_the_scatter_e_step(monkeypatch):
    data = _data()
    scattered = _primitives(data)
    monkeypatch.setattr(sparse, "scatter_is_ordered", lambda: False)
    ordered = _primitives(data)
    for fixed, plain in zip(ordered, scattered):
        np.testing.assert_allclose(np.asarray(fixed), np.asarray(plain), rtol=2e-6, atol=1e-6)


def test_fixed_order_fit_repeats_its_bits(ordered_sums):
    data = _data()
    fits = [tempered_em(Aspect(4, backend="xla"), data, key=jax.random.key(5), schedule=FixedBeta(1.0),
                        max_iter=15, tol=0.0) for _ in range(2)]
    for first, second in zip(jax.tree_util.tree_leaves(fits[0].params), jax.tree_util.tree_leaves(fits[1].params)):
        np.testing.assert_array_equal(np.asarray(first), np.asarray(second))
    history = np.asarray(fits[0].history["log_lik"])[:15]
    assert np.all(np.diff(history) >= -1e-3 * np.abs(history[1:]))
