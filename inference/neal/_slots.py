"""Small pieces every sweep shares: the inverse-CDF draw over slot logits and row operations.

A sweep keeps one row per cluster slot (its count, statistics, parameters or likelihood cache)
in arrays or pytrees with leading axis K_max; these helpers read, write, stack and select such
rows, and draw a slot from its logits with a single uniform (:func:`_draw_index`), the draw the
numba loops of :mod:`inference.native.neal_sweeps` reproduce exactly.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def _max_and_first_free(logits: jax.Array, free: jax.Array) -> tuple[jax.Array, jax.Array]:
    """max(logits) and the first index where ``free`` holds, in one variadic reduction."""
    size = logits.shape[0]
    candidates = jnp.where(free, jnp.arange(size, dtype=jnp.int32), size)

    def combine(left, right):
        return jnp.maximum(left[0], right[0]), jnp.minimum(left[1], right[1])

    initial = (jnp.asarray(-jnp.inf, logits.dtype), jnp.asarray(size, jnp.int32))
    return jax.lax.reduce((logits, candidates), initial, combine, (0,))


def _draw_index(logits: jax.Array, top: jax.Array, uniform: jax.Array, upper: jax.Array) -> jax.Array:
    """Inverse-CDF draw from softmax(logits) with one uniform in (0, 1]; ``top`` = max(logits).

    The cumulative sums come from a product with the upper-triangular matrix of ones ``upper``:
    every column accumulates in the same order, so they never decrease and a zero-probability
    entry repeats its predecessor exactly; it can never be selected. The index is the number of
    cumulative sums below the threshold, counted with a second product (cheaper on CPU than a
    reduction).
    """
    cumulative = jnp.matmul(jnp.exp(logits - top), upper, precision="highest")
    below = (cumulative < uniform * cumulative[-1]).astype(logits.dtype)
    return jnp.matmul(below, jnp.ones_like(below), precision="highest").astype(jnp.int32)


def _upper_ones(size: int, dtype) -> jax.Array:
    index = jnp.arange(size)
    return (index[:, None] <= index[None, :]).astype(dtype)


def _take_row(tree: Any, index: jax.Array) -> Any:
    return jax.tree_util.tree_map(lambda leaf: leaf[index], tree)


def _set_row(tree: Any, index: jax.Array, row: Any) -> Any:
    return jax.tree_util.tree_map(lambda leaf, value: leaf.at[index].set(value), tree, row)


def _concat_rows(*trees: Any) -> Any:
    return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves, axis=0), *trees)


def _select_rows(mask: jax.Array, new: Any, old: Any) -> Any:
    def select(new_leaf, old_leaf):
        return jnp.where(mask.reshape(mask.shape + (1,) * (old_leaf.ndim - 1)), new_leaf, old_leaf)

    return jax.tree_util.tree_map(select, new, old)
