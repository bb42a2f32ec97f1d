"""EM for any NumPyro program whose discrete latents are enumerated and whose parameters are params.

Every zoo model is written once as a NumPyro program whose discrete latents carry
``infer={"enumerate": "parallel"}`` and whose continuous unknowns are ``numpyro.param`` sites
(with constraints). This module makes that program alone enough to fit a variant:

* :func:`enumerated_log_likelihood` sums the latents out exactly with funsor
  (``numpyro.contrib.funsor``); the tests use it as the ground truth for the fast kernels.
* :class:`EnumeratedEM` is a model for :func:`inference.em.tempered_em`. Its E-step is exact
  enumeration at the current parameters θ_t with the observation sites' log-likelihood raised to
  β (H99 §4); its M-step maximises the expected complete-data log-likelihood

      Q(θ; θ_t) = Σ_z q_β(z | x, θ_t) log p(x, z | θ)

  with an optax optimiser in NumPyro's unconstrained space (``biject_to(constraint)``).

How Q is computed without materialising q: every sample site's log-probability is replaced by
``c_s · log p_s(θ_t) + λ · log p_s(θ)`` (c_s = β for observed sites, 1 for latent ones) and the
enumerated log-normaliser G(λ) is differentiated at λ = 0: G'(0) = E_q[log p(x, z | θ)] = Q(θ; θ_t).
The M-step keeps the optimiser iterate with the highest Q, never one below Q(θ_t; θ_t), so the
log-likelihood never decreases at β = 1 (generalised EM).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import optax
from numpyro import handlers
from numpyro.contrib.funsor import config_enumerate, enum, log_density
from numpyro.distributions.transforms import biject_to
from numpyro.primitives import Messenger

from zoo._validation import check_int, check_real

__all__ = ["enumerated_log_likelihood", "EnumeratedEM", "ProgramData", "inspect_program"]


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
    enumerated = enum(config_enumerate(program), first_available_dim=-max_plate_nesting - 1)
    value, _ = log_density(enumerated, args, kwargs, params)
    return value


# ----------------------------------------------------------------------------- inspection
class ParamSite(NamedTuple):
    """A ``numpyro.param`` site: its initial (constrained) value and its constraint."""

    init: Any
    constraint: Any


def inspect_program(program: Callable, args: tuple, kwargs: dict) -> dict[str, ParamSite]:
    """Check that ``program`` can be fitted by enumerated EM and return its param sites.

    Raises
    ------
    ValueError
        For a discrete latent sample site not marked ``infer={"enumerate": "parallel"}`` (it
        cannot be summed out), a continuous latent sample site (EM estimates point values: make
        it a ``numpyro.param``), or a program without param sites.
    """
    seeded = handlers.seed(program, rng_seed=0)
    trace = handlers.trace(seeded).get_trace(*args, **kwargs)
    params: dict[str, ParamSite] = {}
    for name, site in trace.items():
        if site["type"] == "param":
            constraint = site["kwargs"].get("constraint", dist.constraints.real)
            params[name] = ParamSite(jnp.asarray(site["value"]), constraint)
        elif site["type"] == "sample" and not site["is_observed"]:
            fn = site["fn"]
            discrete = getattr(fn, "has_enumerate_support", False) or fn.support.is_discrete
            if not discrete:
                raise ValueError(
                    f"program: sample site {name!r} is a continuous latent variable; enumerated EM "
                    "estimates point values of continuous unknowns, so declare it with "
                    "numpyro.param(name, init_value, constraint=...) instead"
                )
            if site["infer"].get("enumerate") != "parallel":
                raise ValueError(
                    f"program: discrete latent site {name!r} is not marked for enumeration; add "
                    "infer={'enumerate': 'parallel'} so the E-step can sum it out exactly"
                )
            if not getattr(fn, "has_enumerate_support", False):
                raise ValueError(
                    f"program: discrete latent site {name!r} has a distribution without finite "
                    "support (enumerate_support), so it cannot be summed out"
                )
    if not params:
        raise ValueError("program: has no numpyro.param sites, so there is nothing for EM to fit")
    return params


# ----------------------------------------------------------------------------- Q(θ; θ_t)
class _Tilted(dist.Distribution):
    """log_prob(v) = weight_previous · previous.log_prob(v) + weight_current · current.log_prob(v)."""

    def __init__(self, current, previous, weight_current, weight_previous):
        self.current, self.previous = current, previous
        self.weight_current, self.weight_previous = weight_current, weight_previous
        batch_shape = jnp.broadcast_shapes(current.batch_shape, previous.batch_shape)
        super().__init__(batch_shape=batch_shape, event_shape=current.event_shape)

    @property
    def support(self):
        return self.current.support

    @property
    def has_enumerate_support(self):
        return self.current.has_enumerate_support

    def enumerate_support(self, expand=True):
        return self.current.enumerate_support(expand=expand)

    def sample(self, key, sample_shape=()):
        return self.current.sample(key, sample_shape)

    def log_prob(self, value):
        return self.weight_previous * self.previous.log_prob(value) + self.weight_current * self.current.log_prob(value)


class _Tilt(Messenger):
    """Replace each sample site's distribution by a :class:`_Tilted` one (see module docstring)."""

    def __init__(self, fn, previous_fns, beta, lam):
        self.previous_fns, self.beta, self.lam = previous_fns, beta, lam
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample":
            weight_previous = self.beta if msg["is_observed"] else 1.0
            msg["fn"] = _Tilted(msg["fn"], self.previous_fns[msg["name"]], self.lam, weight_previous)


class _ScaleObserved(Messenger):
    """Multiply the log-likelihood of observed sample sites by β (the tempered E-step)."""

    def __init__(self, fn, beta):
        self.beta = beta
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["is_observed"]:
            msg["scale"] = self.beta if msg["scale"] is None else msg["scale"] * self.beta


class ProgramData(NamedTuple):
    """Data for a program: positional array arguments and the number of observations.

    Attributes
    ----------
    args : tuple of arrays — passed positionally to the program (traced, so equal shapes never
        recompile)
    total : float — number of observations, the denominator of the perplexity exp(-l)
    """

    args: tuple
    total: float

    @property
    def shape(self):
        return tuple(np.shape(arg) for arg in self.args)


@dataclass(frozen=True)
class EnumeratedEM:
    """Tempered EM for a NumPyro program with enumerated discrete latents and param sites.

    Parameters
    ----------
    program : callable
        ``program(*data.args, **static_kwargs)``: discrete latents marked
        ``infer={"enumerate": "parallel"}``, unknowns declared with ``numpyro.param``.
    static_kwargs : tuple of (name, value) pairs
        Keyword arguments that fix shapes (e.g. ``(("n_classes", 4),)``); hashable so the fit
        compiles once per setting.
    max_plate_nesting : int
        Nested plates in the program.
    learning_rate : float
        Adam step size of the M-step in unconstrained space.
    m_step_iters : int
        Optimiser steps per M-step.
    init_scale : float
        Random restarts perturb the program's initial param values by Normal(0, init_scale) in
        unconstrained space.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
    >>> from inference.em import tempered_em
    >>> def mixture(x, n_classes):
    ...     weights = numpyro.param("weights", jnp.ones(n_classes) / n_classes, constraint=dist.constraints.simplex)
    ...     locs = numpyro.param("locs", jnp.linspace(-1.0, 1.0, n_classes))
    ...     with numpyro.plate("points", x.shape[0]):
    ...         c = numpyro.sample("c", dist.Categorical(weights), infer={"enumerate": "parallel"})
    ...         numpyro.sample("x", dist.Normal(locs[c], 1.0), obs=x)
    >>> x = jnp.concatenate([jnp.full(20, -3.0), jnp.full(20, 3.0)])
    >>> model = EnumeratedEM(mixture, static_kwargs=(("n_classes", 2),), max_plate_nesting=1)
    >>> result = tempered_em(model, ProgramData((x,), 40.0), key=jax.random.key(0), max_iter=30)
    >>> [round(float(v), 1) for v in sorted(result.params["locs"])]
    [-3.0, 3.0]
    """

    program: Callable
    static_kwargs: tuple = ()
    max_plate_nesting: int = 1
    learning_rate: float = 0.05
    m_step_iters: int = 50
    init_scale: float = 0.1

    def __post_init__(self) -> None:
        if not callable(self.program):
            raise TypeError(f"program: expected a callable NumPyro program, got {type(self.program).__name__}")
        check_int("max_plate_nesting", self.max_plate_nesting, minimum=0)
        check_real("learning_rate", self.learning_rate, low=0.0, low_open=True)
        check_int("m_step_iters", self.m_step_iters, minimum=1)
        check_real("init_scale", self.init_scale, low=0.0)
        try:
            dict(self.static_kwargs)
        except (TypeError, ValueError):
            raise ValueError("static_kwargs: expected a tuple of (name, value) pairs") from None

    # ---------------------------------------------------------------- helpers
    @property
    def _kwargs(self) -> dict:
        return dict(self.static_kwargs)

    def _enumerated(self, fn: Callable) -> Callable:
        return enum(fn, first_available_dim=-self.max_plate_nesting - 1)

    def _param_sites(self, args: tuple) -> dict[str, ParamSite]:
        return inspect_program(self.program, args, self._kwargs)

    def _constrain(self, unconstrained: dict, sites: dict[str, ParamSite]) -> dict:
        return {name: biject_to(sites[name].constraint)(value) for name, value in unconstrained.items()}

    def _unconstrain(self, params: dict, sites: dict[str, ParamSite]) -> dict:
        return {name: biject_to(sites[name].constraint).inv(value) for name, value in params.items()}

    # ---------------------------------------------------------------- EMModel protocol
    def prepare(self, data: ProgramData) -> tuple:
        """Check the program against ``data`` (host side) and return the argument arrays."""
        if not isinstance(data, ProgramData):
            raise TypeError(f"data: expected inference.enumerated.ProgramData, got {type(data).__name__}")
        check_real("data.total", data.total, low=0.0, low_open=True)
        args = tuple(jnp.asarray(arg) if isinstance(arg, (np.ndarray, list)) else arg for arg in data.args)
        self._param_sites(args)
        return args

    def init_params(self, rng_key: Any, args: tuple) -> dict:
        sites = self._param_sites(args)
        unconstrained = self._unconstrain({name: site.init for name, site in sites.items()}, sites)
        keys = jax.random.split(rng_key, len(unconstrained))
        noisy = {
            name: value + self.init_scale * jax.random.normal(key, jnp.shape(value), jnp.result_type(value))
            for key, (name, value) in zip(keys, sorted(unconstrained.items()))
        }
        return self._constrain(noisy, sites)

    def log_likelihood(self, params: dict, args: tuple) -> Any:
        """Exact marginal log-likelihood log p(x | θ) (latents enumerated)."""
        value, _ = log_density(self._enumerated(self.program), args, self._kwargs, params)
        return value

    heldout_log_lik = log_likelihood

    def expected_complete_log_lik(self, params: dict, previous: dict, args: tuple, beta: Any = 1.0) -> Any:
        """Q(θ; θ_t) = E_{q_β(z | x, θ_t)} log p(x, z | θ) (see the module docstring)."""
        _, trace = log_density(self._enumerated(self.program), args, self._kwargs, previous)
        return self._q_value(params, trace, args, beta)

    def _q_value(self, params: dict, previous_trace: Any, args: tuple, beta: Any) -> Any:
        previous_fns = {name: site["fn"] for name, site in previous_trace.items() if site["type"] == "sample"}

        def normaliser(lam):
            tilted = _Tilt(self.program, previous_fns, beta, lam)
            value, _ = log_density(self._enumerated(tilted), args, self._kwargs, params)
            return value

        _, derivative = jax.jvp(normaliser, (jnp.zeros(()),), (jnp.ones(()),))
        return derivative

    def em_step(self, params: dict, args: tuple, beta: Any) -> tuple[dict, Any]:
        """Exact tempered E-step, then an optax M-step on Q; returns (params, log p(x|params))."""
        sites = self._param_sites(args)
        log_lik, previous_trace = log_density(self._enumerated(self.program), args, self._kwargs, params)
        dtype = jnp.result_type(log_lik)
        beta = jnp.asarray(beta, dtype)

        def negative_q(unconstrained):
            return -self._q_value(self._constrain(unconstrained, sites), previous_trace, args, beta)

        optimizer = optax.adam(self.learning_rate)
        start = self._unconstrain(params, sites)
        start_value = negative_q(start)

        def step(carry, _):
            unconstrained, opt_state, best, best_value = carry
            value, grads = jax.value_and_grad(negative_q)(unconstrained)
            updates, opt_state = optimizer.update(grads, opt_state, unconstrained)
            unconstrained = optax.apply_updates(unconstrained, updates)
            # ``value`` belongs to the iterate before this update: keep the best seen so far.
            better = value < best_value
            best = jax.tree_util.tree_map(lambda new, old: jnp.where(better, new, old), carry[0], best)
            return (unconstrained, opt_state, best, jnp.minimum(value, best_value)), None

        carry = (start, optimizer.init(start), start, start_value)
        (last, _, best, best_value), _ = jax.lax.scan(step, carry, None, length=self.m_step_iters)
        last_value = negative_q(last)
        final = jax.tree_util.tree_map(lambda new, old: jnp.where(last_value < best_value, new, old), last, best)
        return self._constrain(final, sites), log_lik
