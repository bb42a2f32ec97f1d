"""Segment sums whose order of summation is fixed by the shapes, so that every backend repeats its bits.

``jax.ops.segment_sum`` lowers to a scatter-add. On the CPU backend XLA runs the scatter as one
sequential loop, so two calls give the same bits; on a GPU every update is an atomic add whose
order depends on thread scheduling, so float32 sums differ in their last bits from call to call
(and EM fits, chains and resumed checkpoints drift apart). XLA's global flag
``--xla_gpu_deterministic_ops`` fixes that for every scatter of a program at about 80 times the
cost of the aspect model's E-step (measured on an H100, 2026-11-24), so the kernels fix the order
themselves with the functions here:

* :func:`sorted_segment_sum` — ids sorted (the cells of a CSR or CSC matrix, the points of a
  cluster after a sort): within blocks of ``block`` consecutive values, each value's segment
  prefix sum is one masked reduction over the block; the blocks are chained by an associative
  scan over their last segments; each segment's total is written once, at its last element. Every
  step is elementwise, a fixed-size reduction or a fixed tree, so the result depends on the shapes
  alone. Work is O(n · block), memory traffic O(n), and no (n × num_segments) temporary is made.

  Measured on one H100 (JAX 0.11.2, 2026-11-25), the aspect model's XLA E-step at K = 64 with
  these sums takes 1.46 / 14.9 / 146 ms at 1e6 / 1e7 / 1e8 non-zeros (log-log slope 1.00), against
  1.36 / 11.4 / 108 ms with atomic scatter-adds: 1.07–1.36x for bits that repeat.
* :func:`segment_sum` — any ids: on the CPU backend ``jax.ops.segment_sum`` (already repeatable
  there and fastest), elsewhere a stable sort by id and :func:`sorted_segment_sum`.

Integer sums need none of this (integer addition is associative), so counts keep using scatters.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["sorted_segment_sum", "segment_sum", "scatter_is_ordered", "DEFAULT_BLOCK"]

#: Values scanned together within a block (a power of two).
DEFAULT_BLOCK = 16


def scatter_is_ordered() -> bool:
    """Whether XLA's float scatter-adds repeat their bits on the default backend (the CPU's do)."""
    return jax.default_backend() == "cpu"


def _chain(left, right):
    # Linear recurrence c_b = a_b c_{b-1} + x_b as an associative operator on (a, x) pairs.
    a_left, x_left = left
    a_right, x_right = right
    a_right_b = a_right.reshape(a_right.shape + (1,) * (x_right.ndim - a_right.ndim))
    return a_left * a_right, x_right + jnp.where(a_right_b, x_left, 0.0)


def _prefix_within_blocks(sums, ids):
    # One reduction over u of mask[b, t, u] · values[b, u]: XLA fuses the mask into the reduce, so
    # the values are read once and written once, at ``block`` times the adds. (On an H100 this beat
    # log2(block) shifted adds, Hillis–Steele, by 1.2–1.4x at block 16; block 32 was 7x slower.)
    block = ids.shape[1]
    position = jnp.arange(block)
    mask = (ids[:, :, None] == ids[:, None, :]) & (position[:, None] >= position[None, :])[None]
    mask = mask.reshape(mask.shape + (1,) * (sums.ndim - 2))
    return jnp.sum(jnp.where(mask, sums[:, None], 0.0), axis=2)


def sorted_segment_sum(values: Any, segment_ids: Any, num_segments: int, *, block: int = DEFAULT_BLOCK,
                       out: Any = None) -> Any:
    """``out[s] += Σ_{n: ids[n] = s} values[n]`` for non-decreasing ids, in an order fixed by the shapes.

    Parameters
    ----------
    values : (n, ...) float array
    segment_ids : (n,) int array, non-decreasing; ids outside ``[0, num_segments)`` are dropped
        (padding may use ``num_segments``, but only at the end, to keep the ids sorted)
    num_segments : int, static
    block : int, static
        Values scanned together (a power of two); it changes the order of summation, not the result
        beyond rounding.
    out : (num_segments, ...) array, optional
        Accumulator to add into (its buffer is reused inside a ``scan``); zeros by default.

    Returns
    -------
    (num_segments, ...) array of the dtype of ``values``.
    """
    if block < 1 or block & (block - 1):
        raise ValueError(f"block: must be a power of two, got {block}")
    values = jnp.asarray(values)
    segment_ids = jnp.asarray(segment_ids)
    n = values.shape[0]
    trailing = values.shape[1:]
    if out is None:
        out = jnp.zeros((num_segments,) + trailing, values.dtype)
    if n == 0:
        return out
    block = min(block, 1 << max(0, (n - 1).bit_length()))
    n_blocks = -(-n // block)
    pad = n_blocks * block - n
    # Padding carries the largest id plus one, so the ids stay sorted and padding is its own segment.
    pad_id = jnp.maximum(segment_ids[-1] + 1, num_segments)
    ids = jnp.concatenate([segment_ids, jnp.full((pad,), pad_id, segment_ids.dtype)]).reshape(n_blocks, block)
    sums = jnp.concatenate([values, jnp.zeros((pad,) + trailing, values.dtype)]).reshape((n_blocks, block) + trailing)
    expand = (slice(None), slice(None)) + (None,) * len(trailing)

    # 1. Within each block, inclusive segmented prefix sums:
    #    sums[b, t] = Σ_{u ≤ t, ids[b, u] = ids[b, t]} values[b, u]   (ids sorted: u .. t is one segment)
    sums = _prefix_within_blocks(sums, ids)

    # 2. Across blocks: carry[b] = total of block b's last segment from its start to the end of b.
    #    It continues carry[b - 1] when block b - 1 ends in the same segment.
    tails = sums[:, -1]
    continues = jnp.concatenate([jnp.zeros((1,), bool), ids[:-1, -1] == ids[1:, -1]])
    _, carry = jax.lax.associative_scan(_chain, (continues, tails))
    previous_tail_id = jnp.concatenate([jnp.full((1,), -1, ids.dtype), ids[:-1, -1]])
    previous_carry = jnp.concatenate([jnp.zeros((1,) + trailing, values.dtype), carry[:-1]])
    from_before = (ids == previous_tail_id[:, None])[expand]
    totals = sums + jnp.where(from_before, previous_carry[:, None], 0.0)

    # 3. A segment's total sits at its last element: write it there, once per segment. Every other
    #    element gets an index of its own past the end, dropped, so that the indices are unique as
    #    the scatter is told (with repeated ones its result would be the backend's to define).
    flat_ids = ids.reshape(-1)
    last = jnp.concatenate([flat_ids[:-1] != flat_ids[1:], jnp.ones((1,), bool)])
    past_end = num_segments + jnp.arange(flat_ids.shape[0], dtype=flat_ids.dtype)
    if num_segments + flat_ids.shape[0] > jnp.iinfo(flat_ids.dtype).max:  # would wrap to negative (from the end)
        past_end = jnp.full_like(flat_ids, num_segments)
    targets = jnp.where(last & (flat_ids >= 0) & (flat_ids < num_segments), flat_ids, past_end)
    return out.at[targets].add(totals.reshape((n_blocks * block,) + trailing), mode="drop",
                               unique_indices=True)


def segment_sum(values: Any, segment_ids: Any, num_segments: int, *, indices_are_sorted: bool = False,
                ordered: bool | None = None) -> Any:
    """``jax.ops.segment_sum`` whose bits repeat from call to call on every backend.

    Parameters
    ----------
    values : (n, ...) array
    segment_ids : (n,) int array
    num_segments : int, static
    indices_are_sorted : bool
        Ids known to be non-decreasing (no sort needed).
    ordered : bool, optional
        Force the fixed-order path (True) or XLA's scatter (False); by default the scatter on the
        CPU backend, where it is sequential, and the fixed order elsewhere. Integer values always
        use the scatter (their sums are exact).
    """
    values = jnp.asarray(values)
    if ordered is None:
        ordered = not scatter_is_ordered()
    if not ordered or not jnp.issubdtype(values.dtype, jnp.inexact):
        return jax.ops.segment_sum(values, segment_ids, num_segments, indices_are_sorted=indices_are_sorted)
    if indices_are_sorted:
        return sorted_segment_sum(values, segment_ids, num_segments)
    order = jnp.argsort(segment_ids, stable=True)
    return sorted_segment_sum(values[order], segment_ids[order], num_segments)
