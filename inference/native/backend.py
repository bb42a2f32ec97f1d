"""The one place where a kernel's backend is chosen: :func:`resolve_backend`.

Every model and every kernel with a numba twin takes ``backend="auto" | "xla" | "numba"`` and
passes it through :func:`resolve_backend` before anything is traced, so that a bad name, or numba
asked for where it cannot run, is a ``ValueError`` naming ``backend`` at once, never an error from
inside a jitted fit.
"""

from __future__ import annotations

import os
import platform
import re
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["BACKENDS", "resolve_backend", "available_backends", "numba_available", "numba_threads", "host_cpu_name"]

#: The values every ``backend=`` argument accepts.
BACKENDS = ("auto", "xla", "numba")


#: The oldest jaxlib whose FFI registration the numba kernels survive: with jaxlib 0.5.0 to 0.8.0
#: registering one crashed the interpreter (a segmentation fault, measured 2026-12-04; 0.8.1, 0.8.2,
#: 0.8.3, 0.9.0, 0.10.0 and 0.10.2 run them). pyproject.toml asks for jax 0.8.1 or later; this guards
#: environments that were not installed from it.
MIN_JAXLIB_FOR_NUMBA = (0, 8, 1)


def _jaxlib_version() -> tuple[int, ...]:
    from jaxlib import version

    return tuple(int(part) for part in re.findall(r"\d+", version.__version__)[:3])


def _numba_unavailable_reason() -> str | None:
    """Why the numba kernels cannot run here, or None where they can."""
    if os.environ.get("LATENTZOO_DISABLE_NUMBA", ""):
        return "switched off by LATENTZOO_DISABLE_NUMBA"
    try:
        import numba  # noqa: F401
    except ImportError:
        return "not installed"
    if _jaxlib_version() < MIN_JAXLIB_FOR_NUMBA:
        oldest = ".".join(map(str, MIN_JAXLIB_FOR_NUMBA))
        return (f"unusable with jaxlib {'.'.join(map(str, _jaxlib_version()))}: its kernels need jaxlib {oldest} "
                f"or later (older ones crash when a kernel is registered); pip install 'jax>={oldest}'")
    return None


@lru_cache(maxsize=1)
def numba_available() -> bool:
    """Whether numba imports, is not switched off by ``LATENTZOO_DISABLE_NUMBA`` (any non-empty
    value), and JAX's jaxlib is recent enough to call its kernels (``MIN_JAXLIB_FOR_NUMBA``)."""
    return _numba_unavailable_reason() is None


def resolve_backend(backend: str) -> str:
    """The backend a kernel runs: ``"xla"`` or ``"numba"``.

    ``"auto"`` is ``"numba"`` when JAX runs on the CPU and numba is available (:func:`numba_available`:
    installed, not switched off, and a jaxlib that can call its kernels), else ``"xla"``.
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
        raise ValueError(f"backend: 'numba' requested but numba is {_numba_unavailable_reason()}")
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
    another CPU and a chain then take another path from the same key (docs/backends.md, "What
    holds where")."""
    try:
        from llvmlite import binding
    except ImportError:
        return platform.machine()
    return str(binding.get_host_cpu_name())
