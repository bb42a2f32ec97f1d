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

Data-parallel fits (``tempered_em(..., devices=n)``). When every sample site lies inside one
plate of independent observations (``data_plate``), log p(x | θ) and Q(θ; θ_t) are sums over
that plate. :meth:`EnumeratedEM.prepare_sharded` cuts the data arguments into one block of
observations per device (the last block padded); every device evaluates its block's log p, Q and
∇Q and the sums are added with ``psum`` before the optimiser step, so each device takes the same
M-step as a single-device fit. Padding observations are masked out: their observed sites
contribute nothing, their latent sites keep log p(z | θ_t) (which sums to 1 over z) and drop the
λ log p(z | θ) term, so they add exactly zero to log p and to Q.

Across processes (``tempered_em(..., devices=jax.devices(), process_local=True)`` after
``jax.distributed.initialize()``) each process passes only its own observations (the data
arguments' rows it holds; the other arguments equal everywhere) and cuts them into the blocks
of its own devices, every block padded to the longest of any process
(:func:`inference.processes.process_max`). The blocks of all processes are those of one data
set with padding in between, which the mask removes, so the fit is that of the whole data.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import optax
from numpyro import handlers
from numpyro.contrib.funsor import config_enumerate, enum, log_density
from numpyro.distributions.distribution import validation_enabled
from numpyro.distributions.transforms import biject_to
from numpyro.primitives import Messenger

from inference.processes import process_max
from inference._validation import check_int, check_real

__all__ = ["enumerated_log_likelihood", "EnumeratedEM", "ProgramData", "ShardedProgramArgs", "inspect_program"]


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

    Raises
    ------
    TypeError, ValueError
        Naming ``program``, ``params`` or ``max_plate_nesting``: a ``params`` that misses one of
        the program's param sites (it would be taken at the program's own starting value,
        silently) or names a site the program does not have (a value for a latent sample site is
        allowed: it conditions on it), or a param value of another shape than the site's.
    """
    if not callable(program):
        raise TypeError(f"program: expected a NumPyro program (a callable), got {type(program).__name__}")
    max_plate_nesting = check_int("max_plate_nesting", max_plate_nesting, minimum=0)
    _check_params_of(program, params, args, kwargs)
    enumerated = enum(config_enumerate(program), first_available_dim=-max_plate_nesting - 1)
    value, _ = log_density(enumerated, args, kwargs, params)
    return value


def _check_params_of(program: Callable, params: Any, args: tuple, kwargs: dict) -> None:
    """``params`` holds a value of each param site of ``program(*args, **kwargs)``, of its shape."""
    if not isinstance(params, dict):
        raise TypeError(f"params: expected a dict of the program's param values by site name, got "
                        f"{type(params).__name__}")
    trace = handlers.trace(handlers.seed(config_enumerate(program), rng_seed=0)).get_trace(*args, **kwargs)
    sites = {name: site["value"] for name, site in trace.items() if site["type"] == "param"}
    # A value for a latent sample site is allowed: it conditions on that site (substitution).
    latent = {name for name, site in trace.items() if site["type"] == "sample" and not site["is_observed"]}
    missing = [name for name in sites if name not in params]
    unknown = [name for name in params if name not in sites and name not in latent]
    if missing or unknown:
        said = [f"missing {', '.join(map(repr, missing))}" if missing else "",
                f"{', '.join(map(repr, unknown))} not a param site (nor a latent one)" if unknown else ""]
        raise ValueError(f"params: {'; '.join(part for part in said if part)} (the program's param sites: "
                         f"{', '.join(map(repr, sites)) or 'none'})")
    for name, value in sites.items():
        if np.shape(params[name]) != np.shape(value):
            raise ValueError(f"params[{name!r}]: shape {np.shape(params[name])}, where the program's param site has "
                             f"shape {np.shape(value)}")


# ----------------------------------------------------------------------------- inspection
class ParamSite(NamedTuple):
    """A ``numpyro.param`` site: its initial (constrained) value and its constraint."""

    init: Any
    constraint: Any


def _base_constraint(constraint: Any) -> Any:
    """The constraint of one value: ``independent(c, n)`` (c on every entry of a batch) is ``c``."""
    while isinstance(constraint, dist.constraints._IndependentConstraint):
        constraint = constraint.base_constraint
    return constraint


def _is_simplex(constraint: Any) -> bool:
    """Whether a param site with this constraint holds distributions along its last axis."""
    return isinstance(_base_constraint(constraint), dist.constraints._Simplex)


def _is_positive(constraint: Any) -> bool:
    """Whether a param site with this constraint holds positive values only (> 0, zero excluded).

    ``positive``, ``softplus_positive``, ``greater_than(0)`` and ``positive_ordered_vector`` (its
    order is not checked); ``nonnegative`` admits 0 and ``greater_than(a)`` with a > 0 needs more
    than positivity, so neither counts.
    """
    constraint = _base_constraint(constraint)
    if isinstance(constraint, dist.constraints._PositiveOrderedVector):
        return True
    if not isinstance(constraint, dist.constraints._GreaterThan) or isinstance(
            constraint, dist.constraints._GreaterThanEq):
        return False
    try:
        return bool(np.all(np.asarray(constraint.lower_bound) == 0))
    except (TypeError, jax.errors.TracerArrayConversionError):  # a bound that is not a concrete number
        return False


def _check_observed(name: str, site: dict) -> None:
    """Refuse, naming ``data`` and the site, observed values outside the site's support (NaN, a
    negative or fractional count for a Poisson, ...): the fit would run to the end with a
    log-likelihood of -inf or NaN. Values the site's mask leaves out are not checked."""
    fn = site["fn"]
    if isinstance(site["value"], jax.core.Tracer):  # traced (inside a jitted start): checked by prepare
        return
    values = np.asarray(site["value"])
    try:
        inside = np.asarray(fn.support(jnp.asarray(values)), bool)
    except (TypeError, ValueError):  # a support that cannot judge these values: left to the fit
        return
    mask = site.get("mask")
    if mask is not None:
        try:
            shape = np.broadcast_shapes(inside.shape, np.shape(mask))
        except ValueError:
            return
        inside = np.broadcast_to(inside, shape) | ~np.broadcast_to(np.asarray(mask, bool), shape)
    if inside.all():
        return
    event_dims = len(fn.event_shape)
    shown = ""
    if inside.shape == values.shape[:values.ndim - event_dims]:  # one judgement per event: show one
        shown = f", e.g. {values[~inside][0].tolist()!r}"
    kind = type(getattr(fn, "base_dist", fn)).__name__  # an Independent's own distribution
    raise ValueError(f"data: site {name!r} observes values outside the support of its {kind} ({fn.support})"
                     f"{shown} ({int((~inside).sum())} of {inside.size})")


def _plates_text(frames: Any) -> str:
    """``'points' of size 30 at dim -1, ...`` for a site's plates (its ``cond_indep_stack``)."""
    return ", ".join(f"{frame.name!r} of size {frame.size} at dim {frame.dim}" for frame in frames)


def _check_observed_shape(name: str, site: dict) -> None:
    """Refuse, naming the site, observed values whose shape is not the distribution's (its batch
    shape, i.e. its plates, then its event shape): numpy broadcasting would raise deep inside the
    enumeration, or count the values wrongly."""
    fn = site["fn"]
    shape = tuple(np.shape(site["value"]))
    batch, event = tuple(fn.batch_shape), tuple(fn.event_shape)
    expected = batch + event
    try:
        fits = np.broadcast_shapes(shape, expected) == expected
    except ValueError:
        fits = False
    if fits:
        return
    kind = type(getattr(fn, "base_dist", fn)).__name__
    plates = _plates_text(site["cond_indep_stack"])
    hint = (f" Declare the last {len(shape) - len(expected)} dimension(s) of each value as one event "
            f"(e.g. dist.{kind}(...).to_event({len(shape) - len(expected) + len(event)})) or put them in a plate."
            if len(shape) > len(expected) and shape[:len(batch)] == batch else
            " A plate's size differs from the data's: size the plates from the data arguments' shapes.")
    raise ValueError(f"program: observed site {name!r} holds values of shape {shape}, but its {kind} has batch shape "
                     f"{batch} (its plates: {plates or 'none'}) and event shape {event}.{hint}")


def _raise_naming_the_site(error: ValueError) -> None:
    """Re-raise a shape error of NumPyro's plates or JAX's broadcasting raised while a sample site
    was being traced, naming the site, its distribution's shapes and its plates."""
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    sample = next((frame.f_locals for frame in reversed(frames) if frame.f_code.co_name == "sample"
                   and frame.f_code.co_filename.endswith(f"numpyro{os.sep}primitives.py")), None)
    if sample is None:
        return
    name, fn, msg = sample.get("name"), sample.get("fn"), sample.get("msg")
    if not isinstance(name, str) or not isinstance(fn, dist.Distribution):
        return
    kind = type(getattr(fn, "base_dist", fn)).__name__
    stack = msg.get("cond_indep_stack", ()) if isinstance(msg, dict) else ()
    plates = _plates_text(stack)
    raise ValueError(
        f"program: sample site {name!r} does not fit its plates: {error} (its {kind} has batch shape "
        f"{tuple(fn.batch_shape)} and event shape {tuple(fn.event_shape)}). Every batch dimension of a "
        "distribution must belong to a plate of the same size at the same dim; dimensions of one value "
        f"(e.g. the features of a point) belong in its event: dist.{kind}(...).to_event(k)"
        + (f"; its plates: {plates}" if plates else "")
    ) from error


def _check_call(program: Callable, args: tuple, kwargs: dict) -> None:
    """A ``TypeError`` naming ``static_kwargs`` when the program cannot take the data arguments and
    them (a missing or misspelled keyword, which Python named without saying where it came from)."""
    try:
        signature = inspect.signature(program)
    except (TypeError, ValueError):  # a callable without a signature: its own call says
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        name = getattr(program, "__name__", type(program).__name__)
        raise TypeError(f"static_kwargs: the program {name}{signature} cannot be called with the data's "
                        f"{len(args)} positional argument(s) and static_kwargs {dict(kwargs)!r}: {error}") from None


def _raise_naming_a_start_outside_its_constraint(seeded: Callable, args: tuple, kwargs: dict,
                                                 error: ValueError) -> None:
    """Re-raise NumPyro's "distribution got invalid ... parameter", raised while the program ran at
    its params' starting values, naming the param whose starting value leaves its constraint."""
    if "got invalid" not in str(error):
        return
    try:
        with validation_enabled(False):
            trace = handlers.trace(seeded).get_trace(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the original error stands
        return
    for name, site in trace.items():
        if site["type"] != "param":
            continue
        constraint = site["kwargs"].get("constraint", dist.constraints.real)
        value = jnp.asarray(site["value"])
        if not bool(jnp.all(constraint.check(value))):
            raise ValueError(f"program: the starting value of param site {name!r} (numpyro.param's init_value, "
                             f"{np.asarray(value).tolist()!r:.120}) lies outside its constraint {constraint}; "
                             f"NumPyro said: {error}") from error


def inspect_program(program: Callable, args: tuple, kwargs: dict,
                    max_plate_nesting: int | None = None) -> dict[str, ParamSite]:
    """Check that ``program`` can be fitted by enumerated EM and return its param sites.

    Raises
    ------
    ValueError
        For a discrete latent sample site not marked ``infer={"enumerate": "parallel"}`` (it
        cannot be summed out), a continuous latent sample site (EM estimates point values: make
        it a ``numpyro.param``), a program without param sites, observed values whose shape is
        not their distribution's (batch shape from the plates, then event shape), or, with
        ``max_plate_nesting``, plates nested deeper than it.
    """
    _check_call(program, args, kwargs)
    seeded = handlers.seed(program, rng_seed=0)
    try:
        trace = handlers.trace(seeded).get_trace(*args, **kwargs)
    except ValueError as error:
        _raise_naming_the_site(error)
        _raise_naming_a_start_outside_its_constraint(seeded, args, kwargs, error)
        raise
    if max_plate_nesting is not None:
        deepest = min((frame for site in trace.values() for frame in site.get("cond_indep_stack", ())),
                      key=lambda frame: frame.dim, default=None)
        if deepest is not None and -deepest.dim > max_plate_nesting:
            raise ValueError(f"max_plate_nesting: the program's plate {deepest.name!r} lies at dim {deepest.dim}, "
                             f"deeper than max_plate_nesting={max_plate_nesting}; give "
                             f"EnumeratedEM(..., max_plate_nesting={-deepest.dim})")
    params: dict[str, ParamSite] = {}
    for name, site in trace.items():
        if site["type"] == "param":
            constraint = site["kwargs"].get("constraint", dist.constraints.real)
            params[name] = ParamSite(jnp.asarray(site["value"]), constraint)
        elif site["type"] == "sample" and site["is_observed"]:
            _check_observed_shape(name, site)
            _check_observed(name, site)
        elif site["type"] == "sample" and not site["is_observed"]:
            fn = site["fn"]
            discrete = getattr(fn, "has_enumerate_support", False) or fn.support.is_discrete
            if not discrete:
                raise ValueError(
                    f"program: sample site {name!r} is a continuous latent variable; enumerated EM "
                    "estimates point values of continuous unknowns, so declare it with "
                    "numpyro.param(name, init_value, constraint=...) instead"
                )
            mode = site["infer"].get("enumerate")
            if mode != "parallel":
                marked = (f"is marked infer={{'enumerate': {mode!r}}}, which enumerated EM does not run; mark it"
                          if mode is not None else "is not marked for enumeration; add")
                raise ValueError(
                    f"program: discrete latent site {name!r} {marked} "
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
class _Reweighted(dist.Distribution):
    """A distribution with ``base``'s support, enumeration and samples and a log_prob of its own."""

    def __init__(self, base, batch_shape):
        self.base = base
        super().__init__(batch_shape=batch_shape, event_shape=base.event_shape)

    @property
    def support(self):
        return self.base.support

    @property
    def has_enumerate_support(self):
        return self.base.has_enumerate_support

    def enumerate_support(self, expand=True):
        return self.base.enumerate_support(expand=expand)

    def sample(self, key, sample_shape=()):
        return self.base.sample(key, sample_shape)


class _Tilted(_Reweighted):
    """log_prob(v) = weight_previous · previous.log_prob(v) + weight_current · current.log_prob(v)."""

    def __init__(self, current, previous, weight_current, weight_previous):
        self.current, self.previous = current, previous
        self.weight_current, self.weight_previous = weight_current, weight_previous
        super().__init__(current, jnp.broadcast_shapes(current.batch_shape, previous.batch_shape))

    def log_prob(self, value):
        return self.weight_previous * self.previous.log_prob(value) + self.weight_current * self.current.log_prob(value)


def _plate_mask(msg: dict, plate: str, observed: Any) -> Any:
    """``observed`` (block,) reshaped to broadcast against the site's batch shape at ``plate``'s dim."""
    for frame in msg["cond_indep_stack"]:
        if frame.name == plate:
            return observed.reshape(observed.shape + (1,) * (-frame.dim - 1))
    raise ValueError(f"data_plate: sample site {msg['name']!r} lies outside plate {plate!r}")


class _MaskPadding(Messenger):
    """Mask the observed sites of padding observations (data-parallel blocks, module docstring)."""

    def __init__(self, fn, plate, observed):
        self.plate, self.observed = plate, observed
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["is_observed"]:
            msg["fn"] = msg["fn"].mask(_plate_mask(msg, self.plate, self.observed))


class _Tilt(Messenger):
    """Replace each sample site's distribution by a :class:`_Tilted` one (see module docstring).

    With ``padding`` = (plate name, observed mask), the λ term of latent sites of padding
    observations is dropped (their observed sites are masked by :class:`_MaskPadding`).
    """

    def __init__(self, fn, previous_fns, beta, lam, padding=None):
        self.previous_fns, self.beta, self.lam, self.padding = previous_fns, beta, lam, padding
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample":
            weight_previous = self.beta if msg["is_observed"] else 1.0
            weight_current = self.lam
            if self.padding is not None and not msg["is_observed"]:
                plate, observed = self.padding
                weight_current = self.lam * _plate_mask(msg, plate, observed).astype(jnp.result_type(self.lam))
            msg["fn"] = _Tilted(msg["fn"], self.previous_fns[msg["name"]], weight_current, weight_previous)


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

    Only needed to set the number of observations by hand: :func:`inference.em.tempered_em`
    also takes an :class:`EnumeratedEM`'s data as one array, a tuple of arrays (positional
    arguments) or a dict of arrays (by argument name), and then counts the observations itself
    (:meth:`EnumeratedEM.observation_count`).

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


class ShardedProgramArgs(NamedTuple):
    """Program arguments cut into blocks of observations (:meth:`EnumeratedEM.prepare_sharded`).

    Attributes
    ----------
    args : tuple of arrays, each with a leading block axis (n_shards, ...): the data arguments
        hold ``block_size`` observations per block, the others are repeated
    observed : (n_shards, block_size) bool array — False on the padding of the last blocks
    """

    args: tuple
    observed: Any


# ----------------------------------------------------------------------------- posteriors
class _Offset(_Reweighted):
    """log_prob(v) = fn.log_prob(v) + λ[..., index of v in ``support``]: a latent site whose log
    weights are shifted by λ (one per value, broadcast over the site's plates), so that the
    gradient of the enumerated log-normaliser in λ at 0 is the site's posterior marginals."""

    def __init__(self, fn, offsets, support):
        self.offsets, self.support_values = offsets, support
        super().__init__(fn, fn.batch_shape)

    def log_prob(self, value):
        one_hot = (jnp.expand_dims(value, -1) == self.support_values).astype(self.offsets.dtype)
        return self.base.log_prob(value) + jnp.sum(one_hot * self.offsets, axis=-1)


class _OffsetLatents(Messenger):
    """Give the latent sites named in ``offsets`` an :class:`_Offset` distribution."""

    def __init__(self, fn, offsets, supports):
        self.offsets, self.supports = offsets, supports
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["name"] in self.offsets:
            msg["fn"] = _Offset(msg["fn"], self.offsets[msg["name"]], self.supports[msg["name"]])


def _latent_layout(site: dict) -> tuple[tuple[int, ...], tuple[int, ...], Any]:
    """A latent site's offset shape (its plates at their dims, 1 elsewhere, then its values), the
    shape of its marginals (its plates' sizes, outermost first, then its values) and its values."""
    support = site["fn"].enumerate_support(expand=False)
    n_values = int(np.shape(support)[0])
    if int(np.size(support)) != n_values:
        raise ValueError(f"sites: latent site {site['name']!r} has values that differ along its batch "
                         f"(enumerate_support of shape {np.shape(support)}); its marginals are not one table")
    frames = sorted(site["cond_indep_stack"], key=lambda frame: frame.dim)
    rank = max((-frame.dim for frame in frames), default=0)
    offset_shape = [1] * rank
    for frame in frames:
        offset_shape[rank + frame.dim] = frame.size
    return tuple(offset_shape) + (n_values,), tuple(frame.size for frame in frames) + (n_values,), \
        jnp.reshape(support, (n_values,))


def _reduce(reduce: Any, value: Any) -> Any:
    """Apply the cross-block reduction (identity when fitting on one device)."""
    return value if reduce is None else reduce(value)


def _unpack(arrays: Any) -> tuple[tuple, Any]:
    """(program arguments, observed mask or None) from ``prepare`` or one block of ``prepare_sharded``."""
    if isinstance(arrays, ShardedProgramArgs):
        return arrays.args, arrays.observed
    return arrays, None


@dataclass(frozen=True)
class EnumeratedEM:
    """Tempered EM for a NumPyro program with enumerated discrete latents and param sites.

    Parameters
    ----------
    program : callable
        ``program(*data_arguments, **static_kwargs)``: discrete latents marked
        ``infer={"enumerate": "parallel"}``, unknowns declared with ``numpyro.param``.
    static_kwargs : dict or tuple of (name, value) pairs
        Keyword arguments that fix shapes (e.g. ``{"n_classes": 4}``); kept as a sorted tuple of
        pairs, so the values must be hashable and the fit compiles once per setting.
    max_plate_nesting : int
        Nested plates in the program.
    learning_rate : float
        Adam step size of the M-step in unconstrained space.
    m_step_iters : int
        Optimiser steps per M-step.
    init_scale : float
        Random restarts perturb the program's initial param values by Normal(0, init_scale) in
        unconstrained space.
    data_plate : str, optional
        Name of the plate of independent observations; needed for data-parallel fits
        (``tempered_em(..., devices=n)``), which split it over devices. Every sample site must
        lie inside it and its size must come from the data arguments' shapes.
    data_args : tuple of int, optional
        Positions of the arguments that hold one entry per observation along their first axis
        (the ones split over devices). Default: every array argument.

    Notes
    -----
    Data. ``tempered_em(model, data, ...)`` takes the program's data arguments as one array, a
    tuple of arrays (positional) or a dict of arrays (by argument name), or as a
    :class:`ProgramData`. The perplexity's denominator, the number of observations, is counted
    from the program: the number of values of each observed sample site (its plates' sizes,
    masked values left out), which all observed sites must agree on (:meth:`observation_count`);
    give ``ProgramData(args, total)`` when they do not.

    Saving. :func:`zoo.io.save_result` stores the program by its module and name, so a fit loads
    in another process (``load_result(path, trusted_modules=("my_models",))``) where the program
    is defined in a module that can be imported. One defined in a script or notebook
    (``__main__``), a lambda or a function defined inside another function cannot be imported
    there: ``save_result`` warns, and ``load_result(path, model=model)`` loads the parameters and
    history with the model given.

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
    >>> model = EnumeratedEM(mixture, static_kwargs={"n_classes": 2}, max_plate_nesting=1)
    >>> result = tempered_em(model, x, key=jax.random.key(0), max_iter=30)
    >>> [round(float(v), 1) for v in sorted(result.params["locs"])]
    [-3.0, 3.0]
    >>> marginals = model.posterior(result.params, x)["c"]  # P(c_i = k | x), one row per point
    >>> marginals.shape, bool(marginals[0].argmax() != marginals[-1].argmax())
    ((40, 2), True)
    """

    program: Callable
    static_kwargs: tuple = ()
    max_plate_nesting: int = 1
    learning_rate: float = 0.05
    m_step_iters: int = 50
    init_scale: float = 0.1
    data_plate: str | None = None
    data_args: tuple | None = None

    def __post_init__(self) -> None:
        if not callable(self.program):
            raise TypeError(f"program: expected a callable NumPyro program, got {type(self.program).__name__}")
        check_int("max_plate_nesting", self.max_plate_nesting, minimum=0)
        check_real("learning_rate", self.learning_rate, low=0.0, low_open=True)
        check_int("m_step_iters", self.m_step_iters, minimum=1)
        check_real("init_scale", self.init_scale, low=0.0)
        try:
            static = dict(self.static_kwargs)
        except (TypeError, ValueError):
            raise ValueError("static_kwargs: expected a dict or a tuple of (name, value) pairs") from None
        if not all(isinstance(name, str) for name in static):
            raise ValueError(f"static_kwargs: argument names must be str, got {list(static)!r}")
        static = tuple(sorted(static.items()))
        try:
            hash(static)
        except TypeError:
            raise ValueError("static_kwargs: values must be hashable (ints, floats, strings, tuples); pass "
                             "arrays as data arguments instead") from None
        object.__setattr__(self, "static_kwargs", static)
        if self.data_plate is not None and not isinstance(self.data_plate, str):
            raise TypeError(f"data_plate: expected a plate name (str), got {type(self.data_plate).__name__}")
        if self.data_args is not None:
            if not isinstance(self.data_args, tuple) or not all(
                isinstance(index, (int, np.integer)) and not isinstance(index, bool) for index in self.data_args
            ):
                raise ValueError(f"data_args: expected a tuple of argument positions, got {self.data_args!r}")

    # ---------------------------------------------------------------- declared constraints
    @property
    def probability_axes(self) -> dict[str, int]:
        """The param sites constrained to the simplex, each a distribution along its last axis (-1).

        Read from the program's ``numpyro.param`` constraints (``simplex``, or ``independent`` of
        it) as traced by the latest :meth:`prepare`, which :func:`inference.em.tempered_em` calls
        before it checks ``init=`` against them (``inference._validation.check_distributions``);
        empty before any ``prepare``.
        """
        constraints = getattr(self, "_param_constraints", {})
        return {name: -1 for name, constraint in constraints.items() if _is_simplex(constraint)}

    @property
    def positive_fields(self) -> tuple[str, ...]:
        """The param sites constrained to positive values (``positive``, ``greater_than(0)``, ...).

        Like :attr:`probability_axes`, from the constraints traced by the latest :meth:`prepare`;
        ``init=`` of :func:`inference.em.tempered_em` is refused when one holds a zero or a
        negative value (``inference._validation.check_positive``).
        """
        constraints = getattr(self, "_param_constraints", {})
        return tuple(name for name, constraint in constraints.items() if _is_positive(constraint))

    @property
    def unconstrained_params(self) -> tuple[str, ...]:
        """The param sites declared without a constraint (any real value), from the latest
        :meth:`prepare` like :attr:`probability_axes`."""
        constraints = getattr(self, "_param_constraints", {})
        return tuple(name for name, constraint in constraints.items()
                     if _base_constraint(constraint) is dist.constraints.real)

    # ---------------------------------------------------------------- helpers
    @property
    def _kwargs(self) -> dict:
        return dict(self.static_kwargs)

    def _enumerated(self, fn: Callable) -> Callable:
        return enum(fn, first_available_dim=-self.max_plate_nesting - 1)

    def _param_sites(self, args: tuple) -> dict[str, ParamSite]:
        return inspect_program(self.program, args, self._kwargs, self.max_plate_nesting)

    def _constrain(self, unconstrained: dict, sites: dict[str, ParamSite]) -> dict:
        return {name: biject_to(sites[name].constraint)(value) for name, value in unconstrained.items()}

    def _unconstrain(self, params: dict, sites: dict[str, ParamSite]) -> dict:
        return {name: biject_to(sites[name].constraint).inv(value) for name, value in params.items()}

    def _masked(self, observed: Any) -> Callable:
        """The program with the observed sites of padding observations masked (None: as is)."""
        if observed is None:
            return self.program
        return _MaskPadding(self.program, self.data_plate, observed)

    def _program_args(self, data: Any) -> tuple:
        """The program's positional data arguments from ProgramData, an array, a tuple or a dict."""
        if isinstance(data, ProgramData):
            check_real("data.total", data.total, low=0.0, low_open=True)
            args = tuple(data.args)
        elif isinstance(data, dict):
            args = self._args_by_name(data)
        elif isinstance(data, tuple):
            args = data
        elif isinstance(data, list) or (hasattr(data, "shape") and hasattr(data, "dtype")):
            args = (data,)
        else:
            raise TypeError("data: expected an array, a tuple of arrays (positional arguments), a dict of arrays "
                            f"by argument name or inference.enumerated.ProgramData, got {type(data).__name__}")
        args = tuple(jnp.asarray(arg) if isinstance(arg, (np.ndarray, list)) else arg for arg in args)
        for position, arg in enumerate(args):
            if hasattr(arg, "shape") and 0 in np.shape(arg):
                raise ValueError(f"data: argument {position} of the program is empty (shape {np.shape(arg)})")
        return args

    def _args_by_name(self, data: dict) -> tuple:
        """Positional arguments from a dict by the program's parameter names (static ones excluded)."""
        positional = [parameter for parameter in inspect.signature(self.program).parameters.values()
                      if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)]
        names = [parameter.name for parameter in positional]
        unknown = [name for name in data if name not in names or name in self._kwargs]
        if unknown:
            raise ValueError(f"data: {unknown} are not data arguments of {getattr(self.program, '__name__', 'the program')}"
                             f" (its positional arguments: {names}; static ones go in static_kwargs)")
        last = max(names.index(name) for name in data) if data else -1
        args = []
        for parameter in positional[:last + 1]:
            if parameter.name in data:
                args.append(data[parameter.name])
            elif parameter.default is not parameter.empty:
                args.append(parameter.default)
            else:
                raise ValueError(f"data: argument {parameter.name!r} of the program is missing")
        return tuple(args)

    def observation_count(self, data: Any) -> float:
        """The number of observations in ``data``: the perplexity's denominator.

        ``ProgramData.total`` when given; otherwise the number of values of the program's
        observed sample sites (the product of their plates' sizes, masked values left out, one
        value per event), which every observed site must agree on.
        """
        if isinstance(data, ProgramData):
            return float(check_real("data.total", data.total, low=0.0, low_open=True))
        args = self._program_args(data)
        trace = handlers.trace(handlers.seed(self.program, rng_seed=0)).get_trace(*args, **self._kwargs)
        counts = {}
        for name, site in trace.items():
            if site["type"] != "sample" or not site["is_observed"]:
                continue
            shape = tuple(site["fn"].batch_shape)
            kept = np.ones(shape, bool) if site.get("mask") is None else np.asarray(site["mask"], bool)
            fn = site["fn"]
            while isinstance(fn, (dist.MaskedDistribution, dist.ExpandedDistribution)):
                if isinstance(fn, dist.MaskedDistribution) and not isinstance(fn._mask, bool):
                    kept = kept & np.asarray(fn._mask, bool)
                elif isinstance(fn, dist.MaskedDistribution) and fn._mask is False:
                    kept = np.zeros(shape, bool)
                fn = fn.base_dist
            counts[name] = float(np.sum(np.broadcast_to(kept, shape)))
        if not counts:
            raise ValueError("data: the program has no observed sample site to count observations of")
        if len(set(counts.values())) > 1:
            raise ValueError(f"data: the observed sites hold different numbers of values {counts}; give "
                             "ProgramData(args, total) with the number of observations")
        return next(iter(counts.values()))

    # ---------------------------------------------------------------- EMModel protocol
    def prepare(self, data: Any) -> tuple:
        """Check the program against ``data`` (host side) and return the argument arrays.

        ``data``: one array, a tuple of arrays (positional arguments), a dict of arrays by
        argument name, or a :class:`ProgramData`. The enumerated log-likelihood is traced once per
        shape of the arguments (abstractly, nothing computed), so that a program whose latents
        cannot be summed out is named here and not inside the compiled fit.
        """
        args = self._program_args(data)
        sites = self._param_sites(args)
        self._check_enumerable(args, sites)
        # What the program declares of its parameters, for ``probability_axes`` / ``positive_fields``
        # (not a dataclass field: no part of the model's identity, hash or saved settings).
        object.__setattr__(self, "_param_constraints", {name: site.constraint for name, site in sites.items()})
        return args

    def prepare_sharded(self, data: Any, n_shards: int, *, process_local: bool = False) -> ShardedProgramArgs:
        """Like :meth:`prepare`, with the observations cut into ``n_shards`` equal blocks.

        The data arguments (``data_args``) are split along their first axis, the last blocks
        padded by repeating the final observation and masked out (``observed``); the other
        arguments are repeated per block. Checks that every sample site lies inside
        ``data_plate``, that its size follows the data arguments, and that no param site's shape
        depends on the number of observations.

        ``process_local``: ``data`` holds this process's observations (at least one) and the
        ``n_shards`` blocks are this process's; every process pads its blocks to the longest of
        any process, so the blocks of all processes together hold the whole data set. Every
        process must call it.
        """
        n_shards = check_int("n_shards", n_shards, minimum=1)
        if self.data_plate is None:
            raise ValueError("data_plate: name the program's plate of independent observations to split it "
                             "over devices, e.g. EnumeratedEM(program, data_plate='points')")
        args = self.prepare(data)
        n_observations = self._plate_size(args)
        positions = self._data_positions(args, n_observations)
        block_size = -(-n_observations // n_shards)
        if process_local:
            if n_observations == 0:
                raise ValueError("data: this process holds no observations; give every process some")
            block_size = process_max(block_size)
        padded_size = block_size * n_shards

        def blocks(position: int, arg: Any) -> Any:
            arg = jnp.asarray(arg)
            if position not in positions:
                return jnp.broadcast_to(arg, (n_shards,) + arg.shape)
            padding = jnp.broadcast_to(arg[-1:], (padded_size - n_observations,) + arg.shape[1:])
            return jnp.concatenate([arg, padding]).reshape((n_shards, block_size) + arg.shape[1:])

        sharded = tuple(blocks(position, arg) for position, arg in enumerate(args))
        block = tuple(arg[0] for arg in sharded)
        if self._plate_size(block) != block_size:
            raise ValueError(f"data_plate: the size of plate {self.data_plate!r} does not follow the data "
                             "arguments' first axis (it must be computed from their shapes)")
        full_sites, block_sites = self._param_sites(args), self._param_sites(block)
        for name, site in full_sites.items():
            if jnp.shape(site.init) != jnp.shape(block_sites[name].init):
                raise ValueError(f"data_plate: param site {name!r} has one value per observation; "
                                 "only parameters shared by all observations can be fitted on several devices")
        observed = (jnp.arange(padded_size) < n_observations).reshape(n_shards, block_size)
        return ShardedProgramArgs(sharded, observed)

    def _check_enumerable(self, args: tuple, sites: dict[str, ParamSite]) -> None:
        """The program's enumerated log density traced abstractly once per argument shape: funsor's
        bare "intractable!" (latents of plates that cross) and "Expected the joint log density is a
        scalar" (a latent indexing a parameter without ``Vindex`` in nested plates) named."""
        shapes = tuple((np.shape(arg), str(getattr(arg, "dtype", type(arg).__name__))) for arg in args)
        checked = self.__dict__.setdefault("_enumerable_shapes", set())
        if shapes in checked:
            return
        params = {name: site.init for name, site in sites.items()}
        try:
            jax.eval_shape(lambda values: self.log_likelihood(values, args), params)
        except (ValueError, AssertionError, NotImplementedError) as error:
            text = str(error)
            if "intractable" in text:
                raise ValueError(
                    "program: its latents cannot be summed out exactly (funsor: intractable): latent sites in "
                    "plates that cross (one per row and one per column, as in a co-clustering) make every "
                    "observation depend on all of them. Enumerated EM needs each observation to depend on "
                    "latents of plates that nest; for a two-sided clustering use zoo.dyadic.TwoSided "
                    "(mean-field EM)") from error
            if "joint log density is a scalar" in text:
                raise ValueError(
                    f"program: its enumerated log density is not a scalar ({text.splitlines()[0]}): a "
                    "latent indexes a parameter inside nested plates with plain indexing (theta[z]), so the "
                    "enumeration dimension does not broadcast; index with "
                    "numpyro.ops.indexing.Vindex(theta)[z, jnp.arange(n)] (see "
                    "notebooks/new_model_variant.ipynb)") from error
            raise
        checked.add(shapes)

    def _plate_size(self, args: tuple) -> int:
        """Size of ``data_plate`` in a trace of the program; checks every sample site is inside it."""
        trace = handlers.trace(handlers.seed(self.program, rng_seed=0)).get_trace(*args, **self._kwargs)
        size = None
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            frames = [frame for frame in site["cond_indep_stack"] if frame.name == self.data_plate]
            if not frames:
                raise ValueError(f"data_plate: sample site {name!r} lies outside plate {self.data_plate!r}, so "
                                 "the log-likelihood is not a sum over its observations")
            size = frames[0].size
        if size is None:
            raise ValueError(f"data_plate: the program has no sample site inside plate {self.data_plate!r}")
        return int(size)

    def _data_positions(self, args: tuple, n_observations: int) -> set[int]:
        """Positions of the arguments split over devices, checked against the plate size."""
        if self.data_args is None:
            positions = {position for position, arg in enumerate(args) if np.ndim(arg) >= 1}
        else:
            positions = set(int(position) for position in self.data_args)
            if any(not 0 <= position < len(args) for position in positions):
                raise ValueError(f"data_args: positions {sorted(positions)} for a program with {len(args)} arguments")
        for position in positions:
            length = np.shape(args[position])[0] if np.ndim(args[position]) >= 1 else None
            if length != n_observations:
                raise ValueError(f"data_args: argument {position} has first axis {length}, but plate "
                                 f"{self.data_plate!r} has {n_observations} observations (set data_args=)")
        return positions

    def init_params(self, rng_key: Any, args: tuple) -> dict:
        sites = self._param_sites(args)
        unconstrained = self._unconstrain({name: site.init for name, site in sites.items()}, sites)
        keys = jax.random.split(rng_key, len(unconstrained))
        noisy = {
            name: value + self.init_scale * jax.random.normal(key, jnp.shape(value), jnp.result_type(value))
            for key, (name, value) in zip(keys, sorted(unconstrained.items()))
        }
        return self._constrain(noisy, sites)

    def log_likelihood(self, params: dict, arrays: Any, reduce: Any = None) -> Any:
        """Exact marginal log-likelihood log p(x | θ) (latents enumerated).

        ``arrays`` comes from :meth:`prepare` or is one block of :meth:`prepare_sharded`, whose
        values ``reduce`` (e.g. a ``psum`` over devices) adds up.
        """
        args, observed = _unpack(arrays)
        value, _ = log_density(self._enumerated(self._masked(observed)), args, self._kwargs, params)
        return _reduce(reduce, value)

    heldout_log_lik = log_likelihood

    def check_heldout(self, name: str, params: dict, arrays: Any) -> None:
        """A ``ValueError`` naming ``name`` when the program, run on held-out ``arrays``, declares a
        param site of another shape than the fitted ``params`` (arrays or shape structs): a site
        with one value per observation (a rate per document, say) has fitted values for the
        training observations only. Held-out values of the same observations (a token split of
        the same rows, as ``CoOccurrence.split_tokens`` makes) keep the shapes and pass; other
        observations of the same number cannot be told from them, and score against the training
        observations' values."""
        args, _ = _unpack(arrays)
        sites = self._param_sites(args)
        shapes = {site: (tuple(params[site].shape), tuple(jnp.shape(sites[site].init))) for site in sites
                  if site in params}
        differ = {site: pair for site, pair in shapes.items() if pair[0] != pair[1]}
        if differ:
            listed = "; ".join(f"{site!r}: fitted {fitted}, here {here}" for site, (fitted, here) in differ.items())
            raise ValueError(
                f"{name}: param site(s) of another shape than fitted ({listed}): their shape follows the "
                f"data, one value per observation, so the fitted values belong to the training observations "
                f"and cannot score others. Score held-out values of the same observations (a token split of "
                f"the same rows), or write the program with parameters shared by all observations")

    def distribution_problems(self, params: dict, data: Any) -> list[str]:
        """The program's distributions whose arguments ``params`` put outside their constraints.

        The program is run once at ``params`` (NumPyro's own argument validation off) and every
        sample site's distribution checks its arguments (``arg_constraints``: probabilities on the
        simplex or in [0, 1], positive scales and rates). A ``numpyro.param`` declared without its
        constraint can leave them during the M-step with a finite log-likelihood that means
        nothing (unnormalised "probabilities" raise it without bound);
        :func:`inference.em.tempered_em` warns with what this returns. Empty when all is well.
        """
        args = self._program_args(data)
        program = handlers.substitute(handlers.seed(self.program, rng_seed=0), data=params)
        with validation_enabled(False):
            trace = handlers.trace(program).get_trace(*args, **self._kwargs)
        problems = []
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            fn = site["fn"]
            while isinstance(fn, (dist.ExpandedDistribution, dist.MaskedDistribution, dist.Independent)):
                fn = fn.base_dist
            for argument, constraint in getattr(fn, "arg_constraints", {}).items():
                try:
                    value = getattr(fn, argument)
                    inside = np.asarray(constraint(jnp.asarray(value)), bool)
                except Exception:  # an argument this distribution does not hold, or a check that cannot run
                    continue
                if not inside.all():
                    problems.append(f"site {name!r} ({type(fn).__name__}): {argument} outside {constraint} "
                                    f"({int((~inside).sum())} of {inside.size})")
        return problems

    def posterior(self, params: dict, data: Any, *, beta: float = 1.0, sites: Any = None) -> dict[str, Any]:
        """Posterior marginals of the enumerated latents: P(z_s = v | x, θ) for every latent site s.

        The E-step's distribution q_β(z | x, θ) ∝ p(z | θ) p(x | z, θ)^β, marginalised exactly:
        each latent site's log weights are shifted by λ_s (one per value, broadcast over its
        plates) and the gradient of the enumerated log-normaliser in λ at λ = 0 is the site's
        marginal table. Works for any number of latent sites and any dependence between them.

        Parameters
        ----------
        params : dict — the program's param values (e.g. ``result.params`` of
            :func:`inference.em.tempered_em`)
        data : what :func:`inference.em.tempered_em` accepts for this model (an array, a tuple or
            dict of arrays, :class:`ProgramData`); new observations too
        beta : float in (0, 1] — the tempering of the observations' likelihood (``result.beta`` for
            the posterior the fit's last E-step used; 1, the default, for the model's own)
        sites : str or sequence of str, optional — the latent sites wanted (default: all)

        Returns
        -------
        dict of site name -> array of shape (sizes of the site's plates, outermost first) +
        (number of values,), each row summing to 1 over the values (in the order of the site's
        ``enumerate_support``: 0, 1, ..., K - 1 for a Categorical).

        Examples
        --------
        See :class:`EnumeratedEM`'s, whose last line asks for the class of every point.
        """
        beta = check_real("beta", beta, low=0.0, high=1.0, low_open=True)
        if not isinstance(params, dict):
            raise TypeError(f"params: expected a dict of the program's param values, got {type(params).__name__}")
        names_given = isinstance(sites, (list, tuple, set, frozenset)) and all(isinstance(name, str) for name in sites)
        if sites is not None and not isinstance(sites, str) and not names_given:
            raise TypeError(f"sites: expected a site name or a sequence of them, got {sites!r:.60}")
        args = self.prepare(data)
        _check_params_of(self.program, params, args, self._kwargs)  # every site, of its shape
        _, trace = log_density(self._enumerated(self.program), args, self._kwargs, params)
        latent = {name: site for name, site in trace.items() if site["type"] == "sample" and not site["is_observed"]}
        if sites is None:
            wanted = list(latent)
        else:
            wanted = [sites] if isinstance(sites, str) else list(sites)
            unknown = [name for name in wanted if name not in latent]
            if unknown:
                raise ValueError(f"sites: {unknown} are not latent sample sites of the program (its latent sites: "
                                 f"{list(latent)})")
        if not wanted:
            return {}
        dtype = jnp.result_type(float)
        layouts = {name: _latent_layout(latent[name]) for name in wanted}
        supports = {name: layout[2] for name, layout in layouts.items()}

        def normaliser(offsets):
            shifted = _OffsetLatents(_ScaleObserved(self.program, beta), offsets, supports)
            value, _ = log_density(self._enumerated(shifted), args, self._kwargs, params)
            return value

        zeros = {name: jnp.zeros(layout[0], dtype) for name, layout in layouts.items()}
        gradients = jax.grad(normaliser)(zeros)
        return {name: jnp.reshape(gradients[name], layouts[name][1]) for name in wanted}

    def expected_complete_log_lik(self, params: dict, previous: dict, arrays: Any, beta: Any = 1.0) -> Any:
        """Q(θ; θ_t) = E_{q_β(z | x, θ_t)} log p(x, z | θ) (see the module docstring)."""
        args, observed = _unpack(arrays)
        _, trace = log_density(self._enumerated(self._masked(observed)), args, self._kwargs, previous)
        return self._q_value(params, trace, args, beta, observed)

    def _q_value(self, params: dict, previous_trace: Any, args: tuple, beta: Any, observed: Any = None) -> Any:
        previous_fns = {name: site["fn"] for name, site in previous_trace.items() if site["type"] == "sample"}
        padding = None if observed is None else (self.data_plate, observed)

        def normaliser(lam):
            tilted = _Tilt(self._masked(observed), previous_fns, beta, lam, padding)
            value, _ = log_density(self._enumerated(tilted), args, self._kwargs, params)
            return value

        _, derivative = jax.jvp(normaliser, (jnp.zeros(()),), (jnp.ones(()),))
        return derivative

    def em_step(self, params: dict, arrays: Any, beta: Any, reduce: Any = None) -> tuple[dict, Any]:
        """Exact tempered E-step, then an optax M-step on Q; returns (params, log p(x|params)).

        With ``reduce`` (a ``psum`` over devices holding blocks of observations) the blocks'
        log-likelihoods, Q values and gradients are added up before every optimiser step.
        """
        args, observed = _unpack(arrays)
        sites = self._param_sites(args)
        log_lik, previous_trace = log_density(self._enumerated(self._masked(observed)), args, self._kwargs, params)
        log_lik = _reduce(reduce, log_lik)
        dtype = jnp.result_type(log_lik)
        beta = jnp.asarray(beta, dtype)

        def block_negative_q(unconstrained):
            return -self._q_value(self._constrain(unconstrained, sites), previous_trace, args, beta, observed)

        def negative_q(unconstrained):
            return _reduce(reduce, block_negative_q(unconstrained))

        def negative_q_and_grad(unconstrained):
            # Differentiate the block's own Q and add the gradients afterwards (no psum under AD).
            return _reduce(reduce, jax.value_and_grad(block_negative_q)(unconstrained))

        optimizer = optax.adam(self.learning_rate)
        start = self._unconstrain(params, sites)
        start_value = negative_q(start)

        def step(carry, _):
            unconstrained, opt_state, best, best_value = carry
            value, grads = negative_q_and_grad(unconstrained)
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
