"""Compile every numba kernel ahead of time, into numba's disk cache.

A numba kernel compiles the first time a fit needs it, in that process, and is kept in numba's
disk cache (``__pycache__`` beside the kernel's module, or ``NUMBA_CACHE_DIR``) for every later
process. On a fresh install the first fits therefore wait for numba: tens of seconds per kernel
family (the supervised DP's sweep and moves each about half a minute on 2 cores). Run this once
after installing, or before a batch of processes that would each compile the same kernels::

    python -m inference.native.precompile            # every kernel, float32 and float64
    python -m inference.native.precompile --workers 2 --real float32

In one process (``workers=1``) the compiled kernels are also registered with XLA, so that
process's fits start without waiting. With several workers each kernel compiles in one of
``workers`` child processes, taking the next kernel as it finishes one; the parent then loads
them from the cache when a fit first needs them (well under a second each).
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

from inference.native import KERNEL_MODULES, numba_available

__all__ = ["targets", "precompile"]

REALS = ("float32", "float64")


def targets(real_dtypes: Sequence[str] = REALS) -> list[tuple[str, str]]:
    """(module, target name) of every custom-call handler whose real dtype is in ``real_dtypes``,
    in :data:`inference.native.KERNEL_MODULES` order. Imports every kernel module (and numba)."""
    found = []
    for module_name in KERNEL_MODULES:
        module = importlib.import_module(module_name)
        found += [(module_name, name) for name in module.HANDLERS if name.rsplit("_", 1)[-1] in real_dtypes]
    return found


def _compile(module_name: str, name: str) -> float:
    """Compile (or load from the disk cache) and register one handler; its seconds."""
    from inference.native.ffi import register_handler

    start = time.perf_counter()
    register_handler(name, importlib.import_module(module_name).HANDLERS[name])
    return time.perf_counter() - start


def precompile(real_dtypes: Sequence[str] = REALS, *, workers: int = 1) -> dict[str, float]:
    """Compile every numba kernel into numba's disk cache; the seconds each took, by target name.

    Parameters
    ----------
    real_dtypes : sequence of {"float32", "float64"}
        The kernels' floating-point types to compile (float32 is JAX's default; float64 runs
        under ``jax_enable_x64``).
    workers : int
        Child processes compiling at once (1: in this process, which then has every kernel
        registered). Each compiles one kernel at a time, so on C cores ``workers=C`` takes about
        1/C of the time.

    A kernel already in the cache loads in well under a second. Raises ``RuntimeError`` when
    numba is not installed or is disabled (``LATENTZOO_DISABLE_NUMBA``).
    """
    if isinstance(real_dtypes, str):
        real_dtypes = (real_dtypes,)
    unknown = sorted(set(real_dtypes) - set(REALS))
    if unknown:
        raise ValueError(f"real_dtypes: expected a subset of {REALS}, got {unknown}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected a positive integer, got {workers!r}")
    if not numba_available():
        raise RuntimeError("precompile: numba is not available (not installed, or LATENTZOO_DISABLE_NUMBA is set)")
    todo = targets(real_dtypes)
    if workers == 1:
        return {name: _compile(module_name, name) for module_name, name in todo}
    # Spawned, not forked: the parent may have started JAX's and numba's threads.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {name: pool.submit(_compile, module_name, name) for module_name, name in todo}
        return {name: future.result() for name, future in futures.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inference.native.precompile", description=__doc__.split("\n")[0])
    parser.add_argument("--real", nargs="+", choices=REALS, default=list(REALS),
                        help="floating-point types to compile (default: both)")
    parser.add_argument("--workers", type=int, default=1, help="processes compiling at once (default 1)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    seconds = precompile(args.real, workers=args.workers)
    for name, took in seconds.items():
        print(f"{took:7.1f} s  {name}")
    print(f"{len(seconds)} kernels in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
