"""Numba's disk cache made safe for processes that compile the same kernels at once.

Numba keeps one index file per cached function, mapping each compiled signature to a numbered
data file. Saving a new signature reads the index, takes the first free number, and writes the
index and the data file back, with no lock between processes. Two processes that compile two
signatures of one function at the same time can therefore both take number 1: the index they
leave maps one signature to the data file of the other. A later process then loads, say, a
float32 kernel for a float64 call, and numba stops with a ``TypingError`` ("Invalid use of
type(CPUDispatcher(...))") that only a fresh cache cures.

This happened on 2026-11-29 in the test suite: ``inference.native.precompile`` with two worker
processes (as ``tests/conftest.py`` runs it under ``pytest -n 2``) compiled ``batch_row`` of
:mod:`inference.native.supervised_sweep`, which several kernels share, from both workers, and
five supervised-DP tests then failed on every run with that cache. It can happen to users too:
``python -m inference.native.precompile --workers 2``, or several processes of
:mod:`inference.processes` starting on a fresh install.

:func:`lock_cache_saves` makes each save hold an exclusive ``fcntl`` lock on one lock file per
cache directory (``.latentzoo-numba-cache.lock``), so that reading the index, taking a number
and writing both files happen as one step; saves are rare (one per compiled signature) and
short. Loads need no lock: the index and data files are each replaced in one ``os.replace``,
and under the lock a number is never reused for another signature. Where ``fcntl`` is missing
(Windows) nothing changes.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

__all__ = ["lock_cache_saves", "LOCK_NAME"]

#: Name of the lock file put in each numba cache directory that a save writes to.
LOCK_NAME = ".latentzoo-numba-cache.lock"

_installing = threading.Lock()


def lock_cache_saves() -> bool:
    """Make numba's cache saves exclusive across processes (idempotent).

    Returns
    -------
    bool
        Whether saves are locked: False where ``fcntl`` is missing or numba's cache class does
        not have the ``save`` method this wraps (another numba version), True otherwise.
    """
    try:
        import fcntl
    except ImportError:  # Windows
        return False
    from numba.core import caching

    cache_file = getattr(caching, "IndexDataCacheFile", None)
    save = getattr(cache_file, "save", None)
    if save is None:
        return False
    with _installing:
        if getattr(save, "_latentzoo_locked", False):
            return True

        @functools.wraps(save)
        def locked_save(self: Any, key: Any, data: Any) -> Any:
            directory = getattr(self, "_cache_path", None)
            if directory is None:  # not the class this was written for: save as numba does
                return save(self, key, data)
            with open(os.path.join(directory, LOCK_NAME), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    return save(self, key, data)
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)

        locked_save._latentzoo_locked = True
        cache_file.save = locked_save
    return True
