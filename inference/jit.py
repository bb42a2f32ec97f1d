"""``jax.jit`` for the library's drivers: on the CPU their programs are compiled at LLVM
optimisation level 1.

Why. Most of a small fit's time on the CPU is XLA compiling its sampler or EM loop, and most of
that is LLVM optimising the generated code at its default level, for little gain in these
programs: their loops are scans over small arrays, and their heavy work runs in the numba kernels
(XLA custom calls, compiled apart) or in a few large operations. Measured on 2 CPU cores
(2026-11-29, JAX 0.10.2; new processes run one after the other, before and after this module):

- First fit in a new process, 40 points (2 chains, 30 sweeps; XLA's compile time of the whole
  fit in brackets): ``DPMixture(normal_gamma(3))`` 7.9 → 4.6 s (6.6 → 3.4 s), its sub-cluster
  sampler 16.7 → 12.3 s (14.6 → 10.3 s), ``SupervisedDP(1)`` on 40 + 40 points 17.2 → 12.6 s
  (15.0 → 10.3 s); with the level set for every program in ``XLA_FLAGS``, ``SupervisedDP(3)``
  30.6 → 22.8 s and the README's aspect-model fit 4.7 → 3.9 s.
- Run time and draws: the same. ``DPMixture(normal_gamma(4))`` on the iris data (4 chains, 5,000
  draws) 8.7–9.3 s either way; the sub-cluster sampler on the wine data 23.1–23.2 s before and
  23.2–24.9 s after for 3,000 draws (first fit 25.8–27.4 → 17.7–19.9 s); the same draws to the
  last bit in both. ``SupervisedDP(1, n_type_split_merge=5)`` on the digits of
  ``notebooks/supervised_digits.ipynb``: 1,000 sweeps 23.1 and 22.4 s, the same chains (log joints
  that differ in the last bits of their float32 sums).

Level 0 compiles faster still but ran the iris fit about 65% slower.

Only the CPU: on other backends the programs are compiled as ``jax.jit`` compiles them (their
kernels are where the time goes, and their backends' compilers differ). The backend is read at
each call (``jax.default_backend()``), so a process that changes its default platform still gets
the right program. A level set in ``XLA_FLAGS`` (``--xla_backend_optimization_level``) wins: the
programs are then compiled as ``jax.jit`` compiles them (the test suite sets level 0, which
compiles faster still, ``tests/conftest.py``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import jax

__all__ = ["CPU_COMPILER_OPTIONS", "jit"]

CPU_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}
"""XLA options of every program :func:`jit` compiles for the CPU (see the module docstring)."""


def jit(fun: Callable, /, **jit_kwargs: Any) -> Callable:
    """``jax.jit(fun, **jit_kwargs)``, with :data:`CPU_COMPILER_OPTIONS` when the default
    backend is the CPU and ``XLA_FLAGS`` sets no optimisation level of its own.

    Use it as ``jax.jit`` (``functools.partial(jit, static_argnames=...)`` as a decorator). The
    returned function keeps the two compiled versions as ``.on_cpu`` and ``.elsewhere`` (for
    ``.lower`` and the like), and ``.cache_size()`` counts the programs they hold (a test that a
    second call compiles nothing new reads it).

    >>> import jax.numpy as jnp
    >>> double = jit(lambda x: 2 * x)
    >>> double(jnp.arange(3)).tolist()
    [0, 2, 4]
    """
    if "compiler_options" in jit_kwargs:
        raise TypeError("jit: compiler_options are set by inference.jit; use jax.jit for options of your own")
    on_cpu = jax.jit(fun, compiler_options=CPU_COMPILER_OPTIONS, **jit_kwargs)
    elsewhere = jax.jit(fun, **jit_kwargs)

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        # Inside another trace (jit, eval_shape, vmap, grad) JAX refuses options on the inner jit:
        # it is compiled as jax.jit compiles it (inside a jit, as part of the caller's program).
        nested = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves((args, kwargs)))
        chosen = (jax.default_backend() == "cpu" and not nested
                  and "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""))
        return (on_cpu if chosen else elsewhere)(*args, **kwargs)

    call.on_cpu, call.elsewhere = on_cpu, elsewhere
    call.cache_size = lambda: on_cpu._cache_size() + elsewhere._cache_size()
    return call
