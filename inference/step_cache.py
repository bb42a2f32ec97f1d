"""One step object per kernel configuration, so that a sampler compiles once per configuration.

:func:`inference.chains.sample_chains` compiles its sweeps once per step *object*: the step is a
static argument of its ``jit``, and two ``functools.partial`` objects are never equal. A kernel
builder that returns ``partial(_step, config)`` therefore makes every new model object compile
its sampler again, even with the settings of the last one (7 to 10 s for a small fit on 2 CPU
cores, against 0.04 s for a refit of the same object). Builders return
``shared_step(_step, config)`` instead: for a hashable ``config`` of equal value (families
included, see :func:`zoo.dirichlet.families.normal_gamma`) it is the same object, so a re-run
notebook cell, or a loop that builds a model per key or per dataset of one size, reuses the
compilation.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Callable

__all__ = ["shared_step"]


@lru_cache(maxsize=256)
def shared_step(step: Callable, config: Any) -> Callable:
    """``partial(step, config)``, the same object for every equal ``(step, config)``.

    ``config`` must be hashable (a NamedTuple of numbers, strings, functions and such). At most
    256 configurations are kept; the compiled programs themselves live in JAX's caches
    (``jax.clear_caches()`` drops them).
    """
    return partial(step, config)
