"""The one place where a kernel's backend is chosen: :func:`resolve_backend`.

Every model and every kernel with a numba twin takes ``backend="auto" | "xla" | "numba"`` and
passes it through :func:`resolve_backend` before anything is traced, so that a bad name, or numba
asked for where it cannot run, is a ``ValueError`` naming ``backend`` at once, never an error from
inside a jitted fit.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["BACKENDS", "resolve_backend", "available_backends", "numba_available", "numba_threads", "host_cpu_name"]

#: The values every ``backend=`` argument accepts.
BACKENDS = ("auto", "xla", "numba")


@lru_cache(maxsize=1)
def numba_available() -> bool:
    """Whether numba imports and is not switched off by ``LATENTZOO_DISABLE_NUMBA`` (any non-empty value)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return os.environ.get("LATENTZOO_DISABLE_NUMBA", "") == ""


def resolve_backend(backend: str) -> str:
    """The backend a kernel runs: ``"xla"`` or ``"numba"``.

    ``"auto"`` is ``"numba"`` when JAX runs on the CPU and numba is available, else ``"xla"``.
    ``"numba"`` off the CPU (the kernels are CPU custom calls) or without numba, and any name
    other than ``"auto"``, ``"xla"`` or ``"numba"``, raise ``ValueError`` starting with
    ``backend:``.
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: must be 'auto', 'xla' or 'numba', got {backend!r}")
    if backend == "auto":
        return "numba" if (jax.default_backend() == "cpu" and numba_available()) else "xla"
    if backend == "numba" and jax.default_backend() != "cpu":
        raise ValueError(f"backend: the numba kernels are CPU custom calls, but JAX runs on "
                         f"{jax.default_backend()!r}; use backend='auto' or 'xla'")
    if backend == "numba" and not numba_available():
        switched_off = os.environ.get("LATENTZOO_DISABLE_NUMBA")
        why = "switched off by LATENTZOO_DISABLE_NUMBA" if switched_off else "not installed"
        raise ValueError(f"backend: 'numba' requested but numba is {why}")
    return backend


def available_backends() -> tuple[str, ...]:
    """The backends a kernel can run here: ``("xla", "numba")`` when JAX runs on the CPU and numba
    is available, else ``("xla",)`` (what a test that compares the two, or a user who times
    them, can loop over on any device)."""
    return ("xla", "numba") if resolve_backend("auto") == "numba" else ("xla",)


def numba_threads() -> Any:
    """numba's thread count now, as an int32 JAX scalar the custom calls take (fixed at trace time:
    call ``numba.set_num_threads`` before the first call of a jitted fit)."""
    import numba

    return jnp.asarray(numba.get_num_threads(), jnp.int32)


@lru_cache(maxsize=1)
def host_cpu_name() -> str:
    """The CPU that XLA's and numba's compilers target on this machine, in LLVM's name for it
    (``"skylake-avx512"``, ``"znver3"``, ...), or ``platform.machine()`` where llvmlite (numba's
    compiler) is missing. Both compilers vectorise for it, so float sums can round differently on
    another CPU and a chain then take another path from the same key (README, "What holds
    where")."""
    try:
        from llvmlite import binding
    except ImportError:
        return platform.machine()
    return str(binding.get_host_cpu_name())
