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
           "lost_peers_named"]


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
