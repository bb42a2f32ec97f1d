"""Several processes (``jax.distributed``): each holds its own blocks of the data.

A data-parallel fit whose devices span several processes can be fed in two ways. Every process
may pass the whole data set (each keeps only the blocks of its own devices), or — the way that
scales — every process passes only its own part, and the blocks of all processes together make
the global arrays. This module holds the few pieces the second way needs, independent of any
model:

* :func:`local_block_count` — how many blocks of a one-axis mesh this process holds;
* :func:`process_sum` and :func:`process_max` — a host pytree (or an int) added up / maxed over
  processes, for the few numbers every block must agree on (margins, padded lengths, totals);
* :func:`broadcast_from_first` — process 0's pytree on every process (a random start drawn from
  process 0's part of the data);
* :func:`global_blocks` — this process's blocks (leading axis ``local_block_count``) turned into
  global ``jax.Array`` s laid out block per device, without any process seeing another's data;
* :func:`replicate` — a pytree every process holds whole (starting states) on every device;
* :func:`distribute` — a pytree every process holds whole, each process placing only the slices
  of its own devices (the chains of a chain-parallel run);
* :func:`local_rows` — this process's rows of a pytree (its chains) as global arrays whose
  leading axis is split over the mesh, every process holding the same number of rows;
* :func:`gather` — global arrays back as whole host arrays on every process (the draws);
* :func:`lost_peers_named` — a collective broken by a process that died raises an error that
  says so (gloo's own is "Connection reset by peer"), instead of XLA's bare runtime error.

A process that dies makes the next collective of the others fail at once; a process that stops
without closing its connections is declared dead by ``jax.distributed`` after
``heartbeat_timeout_seconds`` (an argument of ``jax.distributed.initialize``, 100 s by default),
and the others are then terminated with "another task died". No process waits forever.

With one process every function is the identity (or the local count), so the same code runs
unchanged in a single process. Every process must call them in the same order: each is a
collective.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import wraps
from typing import Any, Iterator

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

__all__ = ["local_block_count", "process_sum", "process_max", "broadcast_from_first", "global_blocks", "replicate",
           "distribute", "local_rows", "gather", "lost_peers_named"]


@contextmanager
def lost_peers_named(n_processes: int | None = None) -> Iterator[None]:
    """Inside it, a failed XLA collective across ``n_processes`` (default: all) processes raises
    ``RuntimeError`` saying that another process may have died, with XLA's message appended."""
    n_processes = jax.process_count() if n_processes is None else n_processes
    try:
        yield
    except jax.errors.JaxRuntimeError as error:
        if n_processes == 1:
            raise
        raise RuntimeError(f"devices: a step across {n_processes} processes failed; a lost connection means "
                           f"another process died or was stopped (see its log): {error}") from error


def _collective(function):
    @wraps(function)
    def named(*args, **kwargs):
        with lost_peers_named():
            return function(*args, **kwargs)

    return named


def local_block_count(mesh: Mesh) -> int:
    """Number of the mesh's devices that belong to this process (its blocks of data).

    Raises ``ValueError`` naming ``devices`` if this process holds none of them, or if its
    devices are not contiguous along the mesh's axis (each process then gives one contiguous
    range of blocks, the layout of ``jax.devices()``).
    """
    owned = np.array([device.process_index == jax.process_index() for device in mesh.devices.flat])
    if not owned.any():
        raise ValueError(f"devices: none of the {owned.size} devices belongs to process {jax.process_index()}")
    first, last = np.flatnonzero(owned)[[0, -1]]
    if not owned[first:last + 1].all():
        raise ValueError("devices: this process's devices are not contiguous in the list; pass them grouped by "
                         "process, as jax.devices() lists them")
    return int(owned.sum())


@_collective
def process_sum(tree: Any) -> Any:
    """A pytree of host arrays (equal shapes on every process) summed over processes, in float64."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    widened = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf, np.float64), tree)
    gathered = multihost_utils.process_allgather(widened)
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf).sum(axis=0), gathered)


@_collective
def process_max(value: int) -> int:
    """The largest of the processes' ``value`` s (e.g. a block length every process must pad to)."""
    if jax.process_count() == 1:
        return int(value)
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.asarray(value, np.int64))))


@_collective
def broadcast_from_first(tree: Any) -> Any:
    """Process 0's pytree of arrays (equal shapes on every process), returned on every process."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    return multihost_utils.broadcast_one_to_all(tree)


@_collective
def global_blocks(tree: Any, mesh: Mesh, axis_name: str) -> Any:
    """This process's blocks → global arrays split along ``axis_name``, one block per device.

    Every leaf of ``tree`` has a leading axis of :func:`local_block_count` blocks, and every
    process's leaves have the same trailing shape; the global leaf has one block per device of
    the mesh. No data moves between processes.
    """
    sharding = NamedSharding(mesh, P(axis_name))
    n_blocks = mesh.devices.size

    def make(leaf):
        leaf = np.asarray(leaf)
        return jax.make_array_from_process_local_data(sharding, leaf, (n_blocks,) + leaf.shape[1:])

    return jax.tree_util.tree_map(make, tree)


@_collective
def replicate(tree: Any, mesh: Mesh) -> Any:
    """A pytree that every process holds whole, copied to every device of the mesh.

    ``jax.device_put`` does this too, but across processes it first checks that the processes'
    values are equal, and NaN (the empty slots of an EM history) never equals itself; here each
    process supplies its own copy, which the caller guarantees equal (same key, same start).
    """
    sharding = NamedSharding(mesh, P())
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def make(leaf):
        leaf = np.asarray(leaf)
        return jax.make_array_from_callback(leaf.shape, sharding, lambda index: leaf[index])

    return jax.tree_util.tree_map(make, tree)


def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _by_key_data(make):
    """``make(host_leaf)`` for every leaf, typed PRNG keys laid out as their key data and wrapped back."""

    def apply(leaf):
        if _is_key(leaf):
            return jax.random.wrap_key_data(make(np.asarray(jax.random.key_data(leaf))), impl=jax.random.key_impl(leaf))
        return make(np.asarray(leaf))

    return apply


@_collective
def distribute(tree: Any, sharding: NamedSharding) -> Any:
    """A pytree that every process holds whole, laid out by ``sharding`` (typed PRNG keys too).

    Each process places only the slices that belong to its own devices: no data moves between
    processes and, unlike ``jax.device_put``, the processes' copies are not compared (the caller
    guarantees them equal). With one process it is ``jax.device_put``.
    """
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    make = lambda leaf: jax.make_array_from_callback(leaf.shape, sharding, lambda index: leaf[index])  # noqa: E731
    return jax.tree_util.tree_map(_by_key_data(make), tree)


@_collective
def local_rows(tree: Any, mesh: Mesh, axis_name: str) -> Any:
    """This process's rows (leading axis) of a pytree → global arrays split along ``axis_name``.

    Every process passes the rows of its own devices, in the mesh's order, and the same number
    of them; the global leading axis is that number times the number of processes in the mesh.
    Raises ``ValueError`` naming ``init_states`` if the processes hold different numbers of rows
    or this process's rows do not split evenly over its devices.
    """
    n_local = local_block_count(mesh)
    n_rows = {np.shape(leaf)[0] for leaf in jax.tree_util.tree_leaves(tree)}.pop()
    if process_max(n_rows) != -process_max(-n_rows):
        raise ValueError(f"init_states: process {jax.process_index()} holds {n_rows} chains, another process a "
                         "different number; every process passes the chains of its own devices, as many")
    if n_rows % n_local:
        raise ValueError(f"init_states: {n_rows} chains of process {jax.process_index()} do not split evenly over "
                         f"its {n_local} devices")
    global_rows = n_rows * mesh.devices.size // n_local
    sharding = NamedSharding(mesh, P(axis_name))
    make = lambda leaf: jax.make_array_from_process_local_data(  # noqa: E731
        sharding, leaf, (global_rows,) + leaf.shape[1:])
    return jax.tree_util.tree_map(_by_key_data(make), tree)


@_collective
def gather(tree: Any) -> Any:
    """Global arrays (split over the devices of several processes) → whole host arrays on every process.

    Typed PRNG keys come back as keys; arrays already whole on this process are only copied to
    the host. Every process must call it (it is an all-gather across processes).
    """
    from jax.experimental import multihost_utils

    def fetch(leaf):
        if _is_key(leaf):
            return jax.random.wrap_key_data(fetch(jax.random.key_data(leaf)), impl=jax.random.key_impl(leaf))
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
        return np.asarray(leaf)

    return jax.tree_util.tree_map(fetch, tree)
