"""Exact marginal log-likelihood of NumPyro programs with enumerated discrete latents.

Every zoo model is written once as a NumPyro program whose discrete latents carry
``infer={"enumerate": "parallel"}``. :func:`enumerated_log_likelihood` sums those latents out
exactly with funsor (``numpyro.contrib.funsor``) at given parameter values; the tests use it as the
ground truth that the fast kernels must reproduce.
"""

from __future__ import annotations

from typing import Any, Callable

from numpyro import handlers
from numpyro.contrib.funsor import config_enumerate, enum, log_density

__all__ = ["enumerated_log_likelihood"]


def enumerated_log_likelihood(
    program: Callable, params: dict[str, Any], *args: Any, max_plate_nesting: int = 2, **kwargs: Any
) -> Any:
    """log p(observations) of ``program(*args, **kwargs)`` with discrete latents summed out.

    Parameters
    ----------
    program : callable
        A NumPyro program; its ``numpyro.param`` sites are fixed to ``params`` (constrained
        values) and its enumerable discrete sample sites are marginalised.
    params : dict
        Values of the program's param sites, by site name.
    max_plate_nesting : int
        Number of nested plates in the program (enumeration dims are allocated to the left).

    Returns
    -------
    scalar array, the exact marginal log-likelihood.
    """
    fixed = handlers.substitute(config_enumerate(program), data=params)
    enumerated = enum(fixed, first_available_dim=-max_plate_nesting - 1)
    value, _ = log_density(enumerated, args, kwargs, {})
    return value
