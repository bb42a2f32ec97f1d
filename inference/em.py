"""Tempered EM driver: the whole fit in one ``jit``, restarts ``vmap``-ped, history recorded.

A model fitted by this driver provides (see :class:`EMModel`):

* ``prepare(data) -> arrays`` — validate ``data`` against the model's settings and convert it to
  the kernel's device arrays (host side, before any JAX code);
* ``init_params(rng_key, arrays) -> params`` — a random starting point;
* ``em_step(params, arrays, beta) -> (params, log_lik)`` — one tempered E-step (likelihood term
  raised to β, H99 §4) and M-step; ``log_lik`` is the β = 1 training log-likelihood of the
  *input* parameters, computed in the same pass;
* ``heldout_log_lik(params, arrays) -> scalar`` — Σ n log P(y|x) of held-out counts, the numerator
  of the per-observation log-likelihood l in the perplexity P = exp(-l) (H99 §5).

A model may declare ``probability_axes``, a dict from the fields of its parameters that are
distributions to the axis they sum to 1 along (None: the whole array), or to a
:class:`inference._validation.Support` (the axis and a mask of the entries that may be positive:
the CAM's level weights beyond a cluster's leaf must be 0); ``init=`` is then
refused, naming ``init`` and the field, when such a field holds negative or unnormalised values
(:func:`inference._validation.check_distributions`), before any JAX code runs. A model may also
declare ``positive_fields``, a tuple of the fields that must be positive (scales, rates), and
``init=`` is refused when one holds a zero or negative value. The dyadic models and the bound
LRM declare ``probability_axes``, the Gaussian mixture both, and :class:`inference.enumerated.EnumeratedEM`
derives both from its program's parameter constraints (simplex; positive) at each ``prepare``.

A model whose predictions can be 0 also provides ``heldout_log_lik_and_zeros(params, arrays) ->
(log_lik, n_zero)``: Σ n log P(y|x) over the held-out tokens of positive probability and the
number of tokens of probability 0 (the dyadic models, which count them by the definition their
held-out evaluation uses, :func:`zoo.dyadic.predictive.zero_probability`, so that a float32 fit and
the float64 evaluation of its parameters count the same tokens). The validation perplexity of the fit is
then not set by a hidden floor: with tokens of probability 0 it is inf (unless ``floor=`` scores
them at an explicit floor), and iterates, β levels and restarts are compared by the pair (tokens of
probability 0, perplexity of the others) in lexicographic order (:func:`inference.schedules.beats`),
so a fit whose every iterate has such tokens still keeps the one with the fewest, then the lowest
perplexity of the rest. ``prior_count > 0`` (MAP-EM) makes every prediction positive.

A model may also provide ``check_heldout(name, params, arrays)``, which raises a ``ValueError``
naming ``name`` (``valid``, or ``data`` of :meth:`EMResult.perplexity`) when held-out arrays cannot
be scored with parameters fitted to the training arrays: :class:`inference.enumerated.EnumeratedEM`
refuses a program whose param sites follow the data's size (one value per observation).

A model may provide ``prediction_spread(params) -> float | None``: an upper bound on how far
(total variation) any row's predictive distribution P(y|x) lies from the rows' mean, None for a
model of one class (the dyadic models: :func:`zoo.dyadic.predictive.prediction_spread`). Below
:data:`ALIKE_TOLERANCE` the kept classes tell no row apart — the fit predicts as one class, the
unigram P(y), would — and :func:`tempered_em` then tries what its defaults offer (the schedule's
``fallback``, :class:`inference.schedules.DeterministicAnnealing`; the model's
``fallback_model()``, e.g. the two-sided model's seeded starts for its random ones), keeps the
fit better on validation (without validation data: on training log-likelihood), and warns
(:class:`ClassesAlikeWarning`) when the kept one still tells no row apart.

:func:`tempered_em` runs the schedule's state machine in a ``lax.while_loop`` inside one jitted
function; several random restarts are ``vmap``-ped and the best kept (lowest validation perplexity,
or highest training log-likelihood without validation data). Data are arguments of the jitted
function, so fits of equal shapes never recompile.

Data-parallel EM (``devices=``). The E-step's sufficient statistics are sums over observations,
so a model that also provides

* ``prepare_sharded(data, n_shards) -> arrays`` — the same arrays cut into ``n_shards`` blocks of
  observations (every leaf gets a leading block axis), and accepts ``reduce=`` in ``em_step``
  and ``heldout_log_lik`` (and ``log_likelihood``) — a function that adds a pytree of partial
  sums across blocks —

can be fitted with its observations split over devices: :func:`tempered_em` runs the whole fit
inside ``shard_map``, every device holds one block, and ``reduce`` is a ``psum`` over the device
axis. Parameters, schedules and stopping decisions are therefore identical on every device and
equal those of the single-device fit up to floating-point rounding (the order of the sums).
Models with it: :class:`zoo.dyadic.aspect.Aspect`, :class:`zoo.dyadic.one_sided.OneSided`,
:class:`zoo.dyadic.two_sided.TwoSided`, :class:`zoo.dyadic.cluster_abstraction.ClusterAbstraction`
(blocks of cells), :class:`inference.enumerated.EnumeratedEM` (blocks of the observation plate)
and the LRM bound with ``update="batch"``
(:meth:`zoo.relational.latent_class.LatentClassRelational.bind`; blocks of observed cells).

On one machine, ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (set before JAX is
imported) gives 8 CPU devices to try it on. Across several hosts (e.g. one GPU per process on a
cluster), start every process with the same script and data and call, in each::

    import jax
    jax.distributed.initialize()        # coordinator address, process count and id from the
                                        # environment (SLURM, Open MPI, TPU pods) or as arguments
    result = tempered_em(model, data, key=jax.random.key(0), devices=jax.devices())

``jax.devices()`` then lists the devices of all processes; each process holds the blocks of its
own devices, the ``psum`` runs across hosts, and every process gets the same result. So that no
process reads the whole data, pass ``process_local=True`` and, in each process, only its part
(e.g. a ``CoOccurrence`` of its rows with the global shape): the model's
``prepare_sharded(data, n_local_blocks, process_local=True)`` cuts it into the blocks of this
process's devices, agreeing with the other processes on the margins and the padded block length
(:mod:`inference.processes`), and the blocks of all processes make the global arrays. The
models above (the dyadic ones) accept it. A process that dies makes the others' next ``psum``
fail with a ``RuntimeError`` that says so. Gibbs chains spread over devices the same way
(:func:`inference.chains.sample_chains`, ``devices=``).
"""

from __future__ import annotations

import inspect
import re
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from inference.display import Card, Described, made_with, params_text, scores_text, stopped_text
from inference.interrupts import DeferredInterrupt, deadline_after, stop_reason
from inference.processes import (broadcast_from_first, global_blocks, local_block_count, lost_peers_named,
                                 process_max, process_sum, replicate)
from inference.provenance import provenance
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM, beats, validated_schedule
from inference._validation import (check_bool, check_distributions, check_int, check_key, check_memory, check_model,
                                   check_params_like, check_positive, check_real, renamed, tree_nbytes,
                                   user_stacklevel)
from inference.jit import jit

__all__ = ["EMModel", "EMResult", "FitState", "tempered_em", "perplexity", "device_mesh", "ClassesAlikeWarning",
           "ALIKE_TOLERANCE"]

#: Largest spread of the kept parameters' predictions (``model.prediction_spread``: a bound on the
#: total variation between any row's P(y|x) and the rows' mean) for which a fit's classes count as
#: alike (:class:`ClassesAlikeWarning`). Measured 2026-12-07: fits collapsed to the unigram spread
#: 4e-4 to 7e-4 (the one-sided model annealed up on documents of 10 tokens; the two-sided model from
#: random starts on sentences of 8–20 words), fits that found the topics 0.65 to 0.96, and the
#: one-sided model on Reuters about 1.
ALIKE_TOLERANCE = 0.01


class ClassesAlikeWarning(UserWarning):
    """The kept parameters' classes tell no row apart: every row's P(y|x) lies within
    :data:`ALIKE_TOLERANCE` of the others, so the fit predicts as one class (the unigram) would."""

#: The old private name of :class:`inference.interrupts.DeferredInterrupt`, still importable.
_DeferredInterrupt = DeferredInterrupt


class EMModel(Protocol):
    """What :func:`tempered_em` needs from a model (see the module docstring)."""

    def prepare(self, data: Any) -> Any: ...

    def init_params(self, rng_key: Any, arrays: Any) -> Any: ...

    def em_step(self, params: Any, arrays: Any, beta: Any) -> tuple[Any, Any]: ...

    def heldout_log_lik(self, params: Any, arrays: Any) -> Any: ...


class FitState(NamedTuple):
    """State of one fit inside the ``while_loop``."""

    params: Any
    iteration: Any
    schedule: Any
    previous_log_lik: Any
    best_params: Any
    best_score: Any  # validation perplexity of the tokens of positive probability (or -iteration)
    best_zero: Any  # validation tokens of probability 0 of the kept iterate
    best_beta: Any
    best_iteration: Any
    log_lik: Any  # (segment,) history of the current segment, at iteration % segment
    valid_perplexity: Any  # (segment,) history, idem
    valid_zero_tokens: Any  # (segment,) history, idem
    beta: Any  # (segment,) history, idem
    done: Any


def perplexity(log_lik_total: Any, total_count: Any) -> Any:
    """P = exp(-l), l = per-observation log-likelihood (H99 §5): ``log_lik_total`` / ``total_count``.

    A ``total_count`` given as a number (not a traced array) must be positive: a ``ValueError``
    names it (the result would be a division by zero, or meaningless)."""
    if not isinstance(total_count, jax.core.Tracer) and np.ndim(total_count) == 0:
        check_real("total_count", total_count, low=0.0, low_open=True)
    return jnp.exp(-log_lik_total / total_count)


def _observation_count(data: Any, model: Any = None) -> float:
    """Denominator of the perplexity: ``model.observation_count(data)`` where the model counts
    its observations (:class:`inference.enumerated.EnumeratedEM`), else ``data.total`` (counts)
    or the number of rows (arrays)."""
    count = getattr(model, "observation_count", None)
    if count is not None:
        return float(count(data))
    total = getattr(data, "total", None)
    return float(total) if total is not None else float(np.shape(data)[0])


def _initial_state(params, *, schedule, segment):
    # The history buffers hold one segment (a jitted call's iterations); the host copies them
    # out after every call (:class:`_HistoryRecorder`), so no shape depends on ``max_iter`` and
    # fits with another ``max_iter`` reuse the compiled loop.
    dtype = jax.tree_util.tree_leaves(params)[0].dtype
    nan_history = jnp.full((segment,), jnp.nan, dtype)
    return FitState(
        params=params,
        iteration=jnp.asarray(0, jnp.int32),
        schedule=schedule.init(dtype),
        previous_log_lik=jnp.asarray(-jnp.inf, dtype),
        best_params=params,
        best_score=jnp.asarray(jnp.inf, dtype),
        best_zero=jnp.asarray(jnp.inf, dtype),
        best_beta=jnp.asarray(schedule.initial_beta, dtype),
        best_iteration=jnp.asarray(-1, jnp.int32),
        log_lik=nan_history,
        valid_perplexity=nan_history,
        valid_zero_tokens=nan_history,
        beta=nan_history,
        done=jnp.asarray(False),
    )


def _scores_with_floor(model: Any) -> bool:
    """Whether ``model.heldout_log_lik_and_zeros`` takes ``floor=`` (every token at max(P(y|x), floor))."""
    method = getattr(model, "heldout_log_lik_and_zeros", None)
    return method is not None and "floor" in inspect.signature(method).parameters


def _validation_scores(model, params, valid, valid_total, *, floor, dtype, extra):
    """(reported perplexity, tokens of probability 0, compared count, compared perplexity) of ``valid``.

    The reported perplexity is inf when tokens have probability 0 and ``floor`` is None, and the
    comparison is by (their count, the perplexity of the others); with ``floor`` every token is
    scored at max(P(y|x), floor), as ``EMResult.perplexity(..., floor=)`` scores it, and the
    comparison is by that perplexity alone (count 0). (Models whose ``heldout_log_lik_and_zeros``
    takes no ``floor`` score only the tokens of probability 0 at it, as every model did until
    2026-12-07.) Models without ``heldout_log_lik_and_zeros`` report no tokens of probability 0.
    """
    if floor is not None and _scores_with_floor(model):  # every token at max(P(y|x), floor), as evaluated
        log_lik, n_zero = model.heldout_log_lik_and_zeros(params, valid, floor=floor, **extra)
        scored = perplexity(log_lik, valid_total).astype(dtype)
        scored = jnp.where(jnp.isfinite(scored), scored, jnp.inf)
        n_zero = jnp.asarray(n_zero, dtype)
        return scored, n_zero, jnp.zeros_like(n_zero), scored
    if hasattr(model, "heldout_log_lik_and_zeros"):
        log_lik, n_zero = model.heldout_log_lik_and_zeros(params, valid, **extra)
    else:
        log_lik, n_zero = model.heldout_log_lik(params, valid, **extra), 0.0
    n_zero = jnp.asarray(n_zero, dtype)
    if floor is not None:
        scored = perplexity(log_lik + n_zero * jnp.log(jnp.asarray(floor, dtype)), valid_total).astype(dtype)
        scored = jnp.where(jnp.isfinite(scored), scored, jnp.inf)
        return scored, n_zero, jnp.zeros_like(n_zero), scored
    positive = valid_total - n_zero
    rest = jnp.where(positive > 0, perplexity(log_lik, jnp.where(positive > 0, positive, 1.0)), jnp.inf).astype(dtype)
    rest = jnp.where(jnp.isfinite(rest), rest, jnp.inf)
    return jnp.where(n_zero > 0, jnp.inf, rest), n_zero, n_zero, rest


def _advance_one(state, train, valid, valid_total, stop_at, *, model, schedule, tol, floor=None, reduce=None):
    """Run EM iterations from ``state`` until ``stop_at`` iterations, convergence or the schedule stops."""
    dtype = state.log_lik.dtype
    has_valid = valid is not None
    # Sharded fits pass ``reduce`` (a psum over devices); single-device models need not accept it.
    extra = {} if reduce is None else {"reduce": reduce}

    def cond(state: FitState):
        return (state.iteration < stop_at) & ~state.done

    def body(state: FitState):
        beta = state.schedule.beta
        new_params, log_lik = model.em_step(state.params, train, beta, **extra)
        change = jnp.abs(log_lik - state.previous_log_lik)
        converged = (state.iteration > 0) & (change <= tol * jnp.abs(log_lik))
        if has_valid:
            valid_perp, history_zero, valid_zero, score = _validation_scores(
                model, new_params, valid, valid_total, floor=floor, dtype=dtype, extra=extra)
            schedule_state, _, stop = schedule.update(state.schedule, score, converged, valid_zero)
        else:
            valid_perp = history_zero = jnp.asarray(jnp.nan, dtype)
            valid_zero = jnp.asarray(0.0, dtype)
            score = jnp.asarray(-state.iteration, dtype)  # without validation the latest is best
            schedule_state, _, stop = schedule.update(state.schedule, jnp.asarray(jnp.inf, dtype), converged)
        better = beats(valid_zero, score, state.best_zero, state.best_score)
        keep = partial(jnp.where, better)
        index = state.iteration
        slot = index % state.log_lik.shape[0]  # place in the segment's history
        best_params = jax.tree_util.tree_map(keep, new_params, state.best_params)
        next_params, previous_log_lik = new_params, log_lik
        if getattr(schedule, "restarts_from_best", False):
            # TemperedEM starts each lower β from the best parameters so far (H99 §4: EM with
            # early stopping, then lower β); convergence is not judged across the jump.
            from_best = partial(jnp.where, schedule_state.from_best)
            next_params = jax.tree_util.tree_map(from_best, best_params, new_params)
            previous_log_lik = from_best(jnp.asarray(-jnp.inf, dtype), log_lik)
        return FitState(
            params=next_params,
            iteration=index + 1,
            schedule=schedule_state,
            previous_log_lik=previous_log_lik,
            best_params=best_params,
            best_score=keep(score, state.best_score),
            best_zero=keep(valid_zero, state.best_zero),
            best_beta=keep(beta, state.best_beta),
            best_iteration=keep(index, state.best_iteration),
            log_lik=state.log_lik.at[slot].set(log_lik),
            valid_perplexity=state.valid_perplexity.at[slot].set(valid_perp),
            valid_zero_tokens=state.valid_zero_tokens.at[slot].set(history_zero),
            beta=state.beta.at[slot].set(beta),
            done=stop,
        )

    return jax.lax.while_loop(cond, body, state)


def _init_dtype(init: Any) -> Any:
    """The floating dtype of starting parameters (None if they hold no floats)."""
    dtypes = [jnp.asarray(leaf).dtype for leaf in jax.tree_util.tree_leaves(init)]
    floating = [dtype for dtype in dtypes if jnp.issubdtype(dtype, jnp.floating)]
    return jnp.result_type(*floating) if floating else None


def _in_dtype(arrays: Any, dtype: Any, data: Any) -> Any:
    """The floating leaves of a model's data ``arrays`` in ``dtype``, the precision of ``init``.

    The starting parameters set the working precision: float32 parameters under x64 are fitted
    in float32, so the data, prepared in JAX's default float, follow them (float64 counts would
    turn the float32 carries of the EM loop into float64 ones). Counts must not overflow the
    narrower dtype: checked on the host, before any JAX code, like the default dtype's range.
    """
    if dtype is None or arrays is None:
        return arrays
    check_range = getattr(data, "_check_range", None)  # a zoo.data.CoOccurrence checks its counts fit
    if callable(check_range):
        check_range(dtype)

    def cast(leaf):
        leaf_dtype = getattr(leaf, "dtype", None)
        if leaf_dtype is None or not jnp.issubdtype(leaf_dtype, jnp.floating) or leaf_dtype == dtype:
            return leaf
        values = np.asarray(leaf)
        cast_values = values.astype(dtype)
        if (np.isfinite(values) & ~np.isfinite(cast_values)).any():
            raise ValueError(f"data: values up to {np.abs(values).max():.3g} overflow {np.dtype(dtype).name}, "
                             "the dtype of init; rescale the data or start from wider parameters")
        return cast_values if isinstance(leaf, np.ndarray) else jnp.asarray(cast_values)

    return jax.tree_util.tree_map(cast, arrays)


@partial(jit, static_argnames=("model",))
def _initial_params(keys, train, *, model):
    return jax.vmap(model.init_params, in_axes=(0, None))(keys, train)


@partial(jit, static_argnames=("schedule", "segment"))
def _initial_states(starts, *, schedule, segment):
    return jax.vmap(partial(_initial_state, schedule=schedule, segment=segment))(starts)


class _HistoryRecorder:
    """Copies every restart's per-iteration history out of the states after each segment.

    A segment runs at most ``segment`` iterations and writes iteration t at slot t % segment, so
    the slots of the iterations a segment ran are all its own.
    """

    names = ("log_lik", "valid_perplexity", "valid_zero_tokens", "beta")

    def __init__(self, n_restarts: int) -> None:
        self.iterations = np.zeros(n_restarts, np.int64)
        self.chunks: dict[str, list[list[np.ndarray]]] = {name: [[] for _ in range(n_restarts)] for name in self.names}

    def __call__(self, states: FitState) -> None:
        iterations = np.asarray(states.iteration)
        buffers = {name: np.asarray(getattr(states, name)) for name in self.names}
        size = buffers["log_lik"].shape[1]
        for restart, (before, after) in enumerate(zip(self.iterations, iterations)):
            slots = np.arange(before, after) % size
            for name in self.names:
                self.chunks[name][restart].append(buffers[name][restart, slots])
        self.iterations = iterations.astype(np.int64)

    def history(self, restart: int) -> dict[str, np.ndarray]:
        return {name: np.concatenate(self.chunks[name][restart]) if self.chunks[name][restart] else np.zeros(0)
                for name in self.names}


def _advance_restarts(states, train, valid, valid_total, stop_at, *, model, schedule, tol, floor=None, reduce=None):
    advance = partial(_advance_one, model=model, schedule=schedule, tol=tol, floor=floor, reduce=reduce)
    return jax.vmap(advance, in_axes=(0, None, None, None, None))(states, train, valid, valid_total, stop_at)


_advance = jit(_advance_restarts, static_argnames=("model", "schedule", "tol", "floor"), donate_argnums=0)

SHARD_AXIS = "shards"


@lru_cache(maxsize=32)
def _sharded_advance(model, schedule, tol, mesh, has_valid, floor=None):
    """:func:`_advance_restarts` wrapped in ``shard_map``: cells split over devices, statistics psummed.

    Every device runs the same while-loop on its block of cells; sums over cells are added with
    ``psum`` before each M-step, so parameters, schedules and stopping stay identical across
    devices and equal (to float tolerance) those of the single-device fit.
    """
    reduce = partial(jax.lax.psum, axis_name=SHARD_AXIS)
    block = lambda tree: jax.tree_util.tree_map(lambda leaf: leaf[0], tree)  # noqa: E731

    def run(states, train, valid, valid_total, stop_at):
        return _advance_restarts(states, block(train), block(valid) if has_valid else None, valid_total, stop_at,
                                 model=model, schedule=schedule, tol=tol, floor=floor, reduce=reduce)

    sharded = jax.shard_map(
        run, mesh=mesh,
        in_specs=(P(), P(SHARD_AXIS), P(SHARD_AXIS) if has_valid else None, P(), P()),
        out_specs=P(), check_vma=False,
    )
    return jit(sharded)


def _kept_log_liks_of(params, train, beta_one, *, model, reduce=None):
    """The β = 1 training log-likelihood of each restart's kept parameters: ``em_step``'s second
    value, which is the log-likelihood of the parameters it is given (so a model needs nothing more)."""
    extra = {} if reduce is None else {"reduce": reduce}
    return jax.vmap(lambda one: model.em_step(one, train, beta_one, **extra)[1])(params)


_kept_log_liks = jit(_kept_log_liks_of, static_argnames=("model",))


@lru_cache(maxsize=32)
def _sharded_kept_log_liks(model, mesh):
    """:func:`_kept_log_liks_of` on cells split over devices, as :func:`_sharded_advance` runs the fit."""
    reduce = partial(jax.lax.psum, axis_name=SHARD_AXIS)
    block = lambda tree: jax.tree_util.tree_map(lambda leaf: leaf[0], tree)  # noqa: E731
    run = lambda params, train, beta_one: _kept_log_liks_of(  # noqa: E731
        params, block(train), beta_one, model=model, reduce=reduce)
    return jit(jax.shard_map(run, mesh=mesh, in_specs=(P(), P(SHARD_AXIS), P()), out_specs=P(), check_vma=False))


def _names_of(data: Any) -> dict[str, tuple | None]:
    """The ``row_names`` and ``col_names`` of a co-occurrence container (None each for other data)."""
    if not hasattr(data, "to_arrays"):
        return {"row_names": None, "col_names": None}
    return {axis: None if getattr(data, axis, None) is None else tuple(getattr(data, axis))
            for axis in ("row_names", "col_names")}


def fitted_params(params: Any, data: Any, axis: str) -> Any:
    """The parameters of ``params``, a model's parameters or the :class:`EMResult` of a fit; from a
    result, ``data`` (new rows or objects over the fitted features) must name its ``axis``
    ("row_names" or "col_names") as the fitted data did, in order (a ``ValueError`` naming
    ``data``): the features are read by position, so another order would be read in silence."""
    if not isinstance(params, EMResult):
        return params
    _check_same_names("data", {axis: getattr(params, axis)}, data)
    return params.params


def _check_same_names(argument: str, fitted: dict[str, tuple | None], data: Any) -> None:
    """A ``ValueError`` naming ``argument`` when ``data`` (a co-occurrence container) names its rows or
    columns otherwise than the fitted data did (``fitted``): held-out tokens are scored by position, so
    rows in another order would be scored with other rows' parameters, in silence. Nothing is checked
    where either side has no names."""
    if not hasattr(data, "to_arrays"):
        return
    for axis in ("row_names", "col_names"):
        ours, theirs = fitted.get(axis), getattr(data, axis, None)
        if ours is None or theirs is None or tuple(ours) == tuple(theirs):
            continue
        theirs = tuple(theirs)
        if len(ours) != len(theirs):  # the shape check says more; here only names are compared
            raise ValueError(f"{argument}: {len(theirs)} {axis}, where the fitted data had {len(ours)}")
        position = next(index for index, (one, other) in enumerate(zip(ours, theirs)) if one != other)
        whose = "the data's" if argument == "valid" else "the fitted data's"
        raise ValueError(f"{argument}: its {axis} differ from {whose} (at {position}: "
                         f"{theirs[position]!r:.40} against {ours[position]!r:.40}); held-out tokens are scored by "
                         "position, so give both in one order (e.g. CoOccurrence.split_tokens of one matrix, or "
                         "select_rows of the fitted order)")


def _point_shape(model: Any, data: Any) -> tuple | None:
    """For a model whose data are an array of points (``points_data``, e.g. a Gaussian mixture's
    (N, D)), the shape of one point of ``data`` (all but the first axis); else, or for data that
    are not one array, None."""
    if not getattr(model, "points_data", False) or hasattr(data, "to_arrays") or isinstance(data, (dict, tuple)):
        return None
    try:
        shape = np.shape(data)
    except (ValueError, TypeError):  # ragged nested lists: the model's own checks name them
        return None
    return tuple(int(size) for size in shape[1:]) if len(shape) else None


@dataclass(repr=False)
class EMResult(Described):
    """A fitted EM model.

    Attributes
    ----------
    model : the model object that was fitted
    params : NamedTuple of arrays — the kept parameters (best restart; with validation data, the
        iterate with the lowest validation perplexity)
    beta : float — inverse temperature at which the kept parameters were produced
    log_lik : float — training log-likelihood at β = 1 of the kept parameters (computed once
        after the fit; NaN for a result saved before 2026-12-05)
    history : dict of numpy arrays over iterations of the kept restart: ``log_lik`` (training
        log-likelihood at β = 1 of the parameters each iteration starts from, its E-step's, so
        iteration i + 1's is that of the parameters iteration i produced), ``valid_perplexity`` (of the parameters each
        iteration produced; inf when validation tokens have probability 0 and no ``floor=`` was
        set; NaN without validation data), ``valid_zero_tokens`` (validation tokens of
        probability 0; NaN without validation data) and ``beta``
    restart_scores : (n_restarts,) array — validation perplexity (lower is better; inf for a
        restart whose kept iterate gives validation tokens probability 0, the restarts then being
        ranked by their count and the perplexity of the other tokens) or training log-likelihood
        of the kept parameters (higher is better) of every restart
    best_restart : int
    n_iter : int — iterations run by the kept restart
    converged : bool — whether the kept restart stopped before ``max_iter``
    stopped_by : str — "converged" (every restart stopped by its schedule), "max_iter",
        "time_budget" or "interrupted" (Ctrl-C; the finished iterations are kept)
    provenance : dict — what made the fit (versions, JAX's backend, float width, the CPU compiled
        for; :func:`inference.provenance.provenance`), taken when it was fitted and kept by
        :func:`zoo.io.save_result`; empty for a result loaded from a file saved without it
    schedule : FixedBeta, TemperedEM or DeterministicAnnealing, or None — the β schedule the fit
        ran (the default one too, e.g. the one-sided model's annealing with validation data, or
        its ``fallback`` where that was kept); None for a result loaded from a file saved without one
    row_names, col_names : tuple or None — the names of the fitted data's rows and columns (a
        :class:`zoo.data.CoOccurrence`'s), None where it had none (or for a result saved without
        them): held-out data with names of their own must name the same rows and columns in the same
        order (:meth:`perplexity` refuses others, as ``tempered_em`` refuses such a ``valid``)
    """

    model: Any
    params: Any
    beta: float
    history: dict[str, np.ndarray]
    restart_scores: np.ndarray
    best_restart: int
    n_iter: int
    converged: bool
    best_iteration: int
    stopped_by: str = "converged"
    log_lik: float = float("nan")
    _shape: Any = field(default=None, repr=False)
    provenance: dict = field(default_factory=provenance, repr=False, compare=False)
    schedule: Any = field(default=None, repr=False, compare=False)
    row_names: tuple | None = field(default=None, repr=False, compare=False)
    col_names: tuple | None = field(default=None, repr=False, compare=False)

    def _card(self) -> Card:
        card = Card(f"EMResult of {self.model!r}")
        card.add("fit", f"{self.n_iter:,} iterations of the kept restart, "
                        f"{stopped_text(self.stopped_by)}")
        if self.schedule is not None:
            card.add("schedule", repr(self.schedule))
        history = self.history or {}
        validated = "valid_perplexity" in history and not np.isnan(history["valid_perplexity"]).all()
        n_restarts = np.size(self.restart_scores)
        if n_restarts > 1:
            kind = "validation perplexity" if validated else "training log-likelihood"
            card.add("restarts", f"best {self.best_restart} of {n_restarts} by {kind} "
                                 f"({scores_text(self.restart_scores, '.6g')})")
        card.add("β", f"{self.beta:.4g}")
        at = self.best_iteration
        if np.isfinite(self.log_lik):
            card.add("training log-lik", f"{self.log_lik:,.1f} (the kept parameters, made by iteration {at} of "
                                         "the kept restart)")
        for name, label, spec in (("valid_perplexity", "valid perplexity", ".6g"),
                                  ("valid_zero_tokens", "valid tokens of p = 0", ",.0f")):
            values = history.get(name)
            if values is not None and 0 <= at < len(values) and not np.isnan(values[at]):
                if name == "valid_zero_tokens" and values[at] == 0:
                    continue
                card.add(label, f"{values[at]:{spec}} (iteration {at} of the kept restart)")
        card.add("parameters", params_text(self.params))
        card.add("made with", made_with(self.provenance))
        card.add("see", ["result.summary()", "result.perplexity(test)", "result.heldout_log_likelihood(test)",
                         "result.history_dataset()", "result.params", *getattr(self.model, "see_also", ())])
        return card

    def summary(self):
        """The fit's figures as a ``pandas.DataFrame``, one row per quantity, as the summaries of
        Gibbs fits (:meth:`zoo.dirichlet.mixture.DPMixtureFit.summary`,
        :meth:`zoo.relational.IRMResult.summary`) give theirs: what the card (``repr``) says, for
        code to read and tables to join.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``quantity``: ``log_lik`` (training log-likelihood at β = 1 of the kept
            parameters; NaN for a result saved before 2026-12-05), ``beta``,
            ``valid_perplexity`` and ``valid_zero_tokens`` (at the kept iteration; NaN without
            validation data), ``n_iter``, ``best_iteration``, ``n_restarts`` and
            ``best_restart``; columns ``value`` (float) and ``about`` (what the value is, in
            words). Every row is there for every fit, so tables of several fits line up.
        """
        import pandas as pd

        history = self.history or {}
        at = self.best_iteration
        validated = "valid_perplexity" in history and not np.isnan(history["valid_perplexity"]).all()
        n_restarts = int(np.size(self.restart_scores))
        kind = "validation perplexity" if validated else "training log-likelihood"

        def at_kept(name: str) -> float:
            values = history.get(name)
            return float(values[at]) if validated and values is not None and 0 <= at < len(values) else np.nan

        where = f"iteration {at} of the kept restart"
        rows = [
            ("log_lik", self.log_lik, f"training log-likelihood at β = 1 of the kept parameters, made by {where}"
             if not np.isnan(self.log_lik) else "training log-likelihood of the kept parameters: not known (a result "
             "saved before results kept it, 2026-12-05)"),
            ("beta", self.beta, "inverse temperature β of the kept parameters"),
            ("valid_perplexity", at_kept("valid_perplexity"),
             f"validation perplexity at {where}" if validated else "no validation data"),
            ("valid_zero_tokens", at_kept("valid_zero_tokens"),
             f"validation tokens of probability 0 at {where}" if validated else "no validation data"),
            ("n_iter", self.n_iter, f"iterations run by the kept restart; {stopped_text(self.stopped_by)}"),
            ("best_iteration", at, "iteration of the kept restart whose parameters were kept"),
            ("n_restarts", n_restarts, "random restarts run"),
            ("best_restart", self.best_restart,
             f"the restart kept, by {kind} ({scores_text(self.restart_scores, '.6g')})" if n_restarts > 1
             else "the only restart"),
        ]
        return pd.DataFrame({"value": np.asarray([row[1] for row in rows], np.float64),
                             "about": [row[2] for row in rows]},
                            index=pd.Index([row[0] for row in rows], name="quantity"))

    def log_likelihood(self, data: Any) -> float:
        """Training-objective log-likelihood Σ n log P(x, y) of ``data`` under the kept parameters.

        ``data`` must have the fitted shape (the same rows and columns; a ``ValueError`` naming
        ``data`` otherwise)."""
        return float(self.model.log_likelihood(self.params, self._arrays(data)))

    def heldout_log_likelihood(self, data: Any, *, floor: float | None = None) -> float:
        """Σ n log P(y|x) of held-out counts (rows known from training).

        Models with ``heldout_evaluation`` (the dyadic models) count held-out tokens of
        probability 0 instead of flooring them: the result is -inf when there are any (with a
        warning), unless ``floor`` sets an explicit floor under P(y|x).
        """
        _check_same_names("data", {"row_names": self.row_names, "col_names": self.col_names}, data)
        evaluate = getattr(self.model, "heldout_evaluation", None)
        if evaluate is not None:
            return evaluate(self.params, data, floor=floor).log_lik
        if floor is not None:
            raise TypeError(f"floor: {type(self.model).__name__} has no held-out evaluation with a floor")
        arrays = self._arrays(data)
        if hasattr(self.model, "check_heldout"):  # e.g. a program's params per observation
            self.model.check_heldout("data", self.params, arrays)
        return float(self.model.heldout_log_lik(self.params, arrays))

    def _arrays(self, data: Any) -> Any:
        # Co-occurrence containers (to_arrays and a shape, as tempered_em's valid=): the rows and
        # columns fitted; points of a mixture may be any number.
        shape = getattr(data, "shape", None) if hasattr(data, "to_arrays") else None
        if self._shape is not None and shape is not None and tuple(shape) != tuple(self._shape):
            raise ValueError(f"data: shape {tuple(shape)} differs from the fitted shape {tuple(self._shape)}")
        _check_same_names("data", {"row_names": self.row_names, "col_names": self.col_names}, data)
        fitted_points = tuple(self._shape)[1:] if self._shape is not None and len(self._shape) else None
        point_shape = _point_shape(self.model, data)
        if fitted_points is not None and point_shape not in (None, fitted_points):
            raise ValueError(f"data: points of shape {point_shape} (the shape after the first axis), where the "
                             f"fitted points' are {fitted_points}")
        # Evaluated in the precision of the fit, the parameters' dtype, as in tempered_em.
        return _in_dtype(self.model.prepare(data), _init_dtype(self.params), data)

    def perplexity(self, data: Any, *, floor: float | None = None) -> float:
        """Held-out perplexity exp(-l), l = Σ n log P(y|x) / Σ n (H99 §5).

        inf when held-out tokens have probability 0 under the model (a warning says how many),
        unless ``floor`` scores them at max(P(y|x), floor); see :meth:`heldout_log_likelihood`.
        """
        return float(np.exp(-self.heldout_log_likelihood(data, floor=floor) / _observation_count(data, self.model)))

    def history_dataset(self):
        """The history as an ``xarray.Dataset`` with an ``iteration`` dimension."""
        import xarray as xr

        iterations = np.arange(self.n_iter)
        return xr.Dataset(
            {name: ("iteration", values) for name, values in self.history.items()},
            coords={"iteration": iterations},
            attrs={"beta": self.beta, "best_iteration": self.best_iteration},
        )


def _warn_if_not_finite(log_liks: np.ndarray, kept: float) -> None:
    """Say (``RuntimeWarning``) when the kept restart's training log-likelihood is not finite: the
    fit went on in silence, with parameters that mean nothing from that iteration on."""
    bad = ~np.isfinite(np.append(np.asarray(log_liks, np.float64), kept))
    if not bad.any():
        return
    first = int(np.flatnonzero(bad)[0])
    value = np.append(np.asarray(log_liks, np.float64), kept)[first]
    where = f"from iteration {first}" if first < len(log_liks) else "for the kept parameters"
    cause = ("the parameters left the values their distributions accept (a numpyro.param declared without "
             "its constraint, e.g. constraints.positive or constraints.simplex?)" if np.isnan(value)
             else "some observation has probability 0 under the parameters")
    warnings.warn(f"tempered_em: the training log-likelihood is {value} {where} of the kept restart: {cause}",
                  RuntimeWarning, stacklevel=user_stacklevel())


def _warn_if_chosen_by_zero_tokens(n_zero: float, history: dict, beta: float) -> None:
    """Say (``RuntimeWarning``) when every iterate left validation tokens of probability 0: the
    validation perplexity was inf throughout, so the fit was chosen by the number of such tokens,
    which flatter predictions (a smaller β) lower. On 20 Newsgroups the one-sided model's default
    annealing kept its first β, 0.01, and clusters barely apart from uniform (2026-12-06)."""
    betas = np.asarray(history.get("beta", []), np.float64)
    betas = betas[np.isfinite(betas)]
    several = betas.size and betas.min() < betas.max()
    levels = (f"; over β from {betas.min():.3g} to {betas.max():.3g}, flatter predictions (a smaller β) have "
              "fewer, so the kept β may be chosen for that alone" if several else "")
    warnings.warn(f"tempered_em: every iterate left validation tokens of probability 0 ({n_zero:,.0f} at the kept "
                  f"one, β = {beta:.3g}), so the validation perplexity was inf throughout and iterates"
                  f"{', β levels' if several else ''} and restarts were compared by the number of such "
                  f"tokens{levels}. Give floor= (e.g. 1e-6) to compare them by a perplexity, or fit with "
                  "prior_count > 0 (MAP-EM) so that no prediction is 0.", RuntimeWarning, stacklevel=user_stacklevel())


def _warn_if_outside_constraints(model: Any, params: Any, data: Any) -> None:
    """Say (``RuntimeWarning``) when the kept parameters put a distribution of the model's program
    outside its arguments' constraints (``EnumeratedEM.distribution_problems``): a finite
    log-likelihood there means nothing, and unnormalised probabilities raise it without bound."""
    problems = model.distribution_problems(params, data)
    if not problems:
        return
    free = getattr(model, "unconstrained_params", ())
    declared = f" Declared without a constraint: {', '.join(map(repr, free))}." if free else ""
    warnings.warn(f"tempered_em: the kept parameters are outside what the program's distributions accept: "
                  f"{'; '.join(problems)}. The log-likelihood there means nothing.{declared} Declare each "
                  "numpyro.param with its constraint (constraints.simplex for probabilities, "
                  "constraints.unit_interval for a probability, constraints.positive for rates and scales).",
                  RuntimeWarning, stacklevel=user_stacklevel())


def _prepare_named(name: str, model: Any, value: Any) -> Any:
    """``model.prepare(value)`` for held-out data given as ``name``: its errors name ``name``, also
    where they suggest a call on the argument (``CoOccurrence.from_sparse(valid)``)."""
    try:
        return renamed(name, model.prepare, value)
    except (TypeError, ValueError) as error:
        message = str(error)
        if not message.startswith(name):
            raise
        raise type(error)(re.sub(r"\(data([,)])", rf"({name}\1", message)) from None


def _prediction_spread(result: EMResult) -> float | None:
    """``result.model.prediction_spread(result.params)`` where the model has it and the parameters are
    finite, else None (nothing to judge)."""
    spread = getattr(result.model, "prediction_spread", None)
    if not callable(spread) or not np.isfinite(result.log_lik):
        return None
    value = spread(result.params)
    return None if value is None or not np.isfinite(value) else float(value)


def _fallbacks(result: EMResult, valid: Any, init: Any) -> list[tuple[Any, Any, str]]:
    """(model, schedule, what it is) of the fits to try besides ``result`` when its classes are alike:
    the schedule's ``fallback`` from the same starts (with validation data, which it judges on), and
    the model's ``fallback_model()`` (other starts; not where ``init`` fixed the start)."""
    tries = []
    fallback_schedule = getattr(result.schedule, "fallback", None)
    if fallback_schedule is not None and valid is not None:
        tries.append((result.model, fallback_schedule, f"schedule={fallback_schedule!r}"))
    fallback_model = getattr(result.model, "fallback_model", None)
    other = fallback_model() if callable(fallback_model) and init is None else None
    if other is not None:
        tries.append((other, result.schedule, repr(other)))
    return tries


def _warn_classes_alike(result: EMResult, spread: float, tried: list[str]) -> None:
    """A :class:`ClassesAlikeWarning`: the kept classes tell no row apart (``spread`` below
    :data:`ALIKE_TOLERANCE`), with what was tried and what to try."""
    advice = ["more restarts (n_restarts, now "
              f"{np.size(result.restart_scores)}; the best is kept)"]
    if isinstance(result.schedule, DeterministicAnnealing):
        advice.append("schedule=TemperedEM() or FixedBeta(1.0, early_stopping=True) (annealing up from a low β "
                      "collapses where rows hold few tokens)")
    if getattr(result.model, "starts", None) == "random":
        advice.append("starts='seeded'")
    advice.append("fewer classes")
    also = f"; also tried, and kept only where better: {', '.join(tried)}" if tried else ""
    warnings.warn(f"tempered_em: the kept parameters' classes are alike: every row's P(y|x) lies within {spread:.2g} "
                  f"(total variation, at most) of the rows' mean, below {ALIKE_TOLERANCE:g}, so the fit predicts as "
                  f"one class (the unigram P(y)) would{also}. Either the data hold no such groups, or EM fell into "
                  f"the fixed point where every class is alike: try {', '.join(advice)}.",
                  ClassesAlikeWarning, stacklevel=user_stacklevel())


#: Reasons to stop a fit early, weakest first (what processes agree on: the largest index wins).
_REASONS = (None, "time_budget", "interrupted")


def _run_segments(advance, states, *, max_iter, segment, time_budget, progress, record=None, several=False):
    """Call ``advance`` in segments of iterations; stop on completion, budget or Ctrl-C.

    ``advance`` may donate its input: ``states`` is replaced only by a segment that has finished,
    and Ctrl-C is acted on between segments (:class:`inference.interrupts.DeferredInterrupt`), so
    the states returned are always those of the last finished segment. With ``several`` (a fit
    whose devices span processes) the processes agree after every segment: one process out of
    time or interrupted stops them all after the same segment (a process that went on alone
    would wait in the next segment's collectives for ever), and all report the same reason.
    """
    from tqdm.auto import tqdm

    deadline = deadline_after(time_budget)
    stopped_by = "max_iter"
    stop_at = 0
    with tqdm(total=max_iter, disable=not progress, desc="EM", unit="it") as bar, DeferredInterrupt() as interrupt:
        while stop_at < max_iter:
            stop_at = min(stop_at + segment, max_iter)
            advanced = advance(states, stop_at)
            finished = np.asarray(advanced.done)
            iterations = int(np.max(np.asarray(advanced.iteration)))
            states = advanced
            if record is not None:
                record(states)
            bar.update(iterations - bar.n)
            if finished.all():
                stopped_by = "converged"
                break
            reason = stop_reason(interrupt, deadline)
            if several:  # the strongest reason of any process, Ctrl-C before the budget
                reason = _REASONS[process_max(_REASONS.index(reason))]
            if reason is not None and stop_at < max_iter:
                stopped_by = reason
                break
    return states, stopped_by


def device_mesh(devices: Any, axis_name: str = SHARD_AXIS) -> Mesh | None:
    """A one-axis ``Mesh`` named ``axis_name`` over ``devices`` (None stays None: one device).

    ``devices`` is an int (the first that many of ``jax.devices()``) or a sequence of jax
    devices; anything else raises ``TypeError``/``ValueError`` naming the ``devices`` argument.
    """
    if devices is None:
        return None
    if isinstance(devices, bool):
        raise TypeError("devices: expected an int or a sequence of devices")
    if isinstance(devices, (int, np.integer)):
        available = jax.devices()
        count = check_int("devices", devices, minimum=1, maximum=len(available))
        devices = available[:count]
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise TypeError(f"devices: expected an int or a sequence of jax devices, got {devices!r}")
    devices = list(devices)
    if not devices:
        raise ValueError("devices: is empty")
    if not all(isinstance(device, jax.Device) for device in devices):
        raise TypeError(f"devices: expected jax devices (e.g. jax.devices()), got {devices!r:.80}")
    return Mesh(np.array(devices), (axis_name,))


def tempered_em(
    model: Any,
    data: Any,
    *,
    key: Any,
    valid: Any = None,
    schedule: Any = None,
    n_restarts: int = 1,
    max_iter: int = 500,
    tol: float = 1e-6,
    init: Any = None,
    devices: Any = None,
    process_local: bool = False,
    time_budget: float | None = None,
    progress: bool = False,
    segment: int = 25,
    floor: float | None = None,
) -> EMResult:
    """Fit ``model`` to ``data`` by tempered EM.

    Parameters
    ----------
    model : EMModel
        E.g. ``zoo.dyadic.Aspect(n_classes=16)``.
    data : CoOccurrence (or what ``model.prepare`` accepts)
        Training counts.
    key : jax PRNG key
        Randomness of the initialisations; restart r uses ``jax.random.split(key, n_restarts)[r]``.
    valid : same type as ``data``, optional
        Validation counts (same rows and columns). Required by :class:`TemperedEM`; with it the
        kept parameters are those with the lowest validation perplexity.
    schedule : FixedBeta, TemperedEM or DeterministicAnnealing
        Default: with ``valid``, the model's ``default_schedule()`` if it has one (the one-sided and
        cluster-abstraction models: ``DeterministicAnnealing(0.01, 1.5, 25)``), else ``TemperedEM()``;
        without ``valid``, ``FixedBeta(1.0)``.
    n_restarts : int
        Independent random initialisations, run in parallel with ``vmap``; the best is kept.
    max_iter : int
        Iteration cap for the whole schedule.
    tol : float
        Convergence: relative change of the training log-likelihood below ``tol``.
    init : params, optional
        Starting parameters (the model's params type) used instead of a random start; then
        ``n_restarts`` must be 1. Their floating dtype is the working precision of the fit: the
        data's arrays are cast to it (float32 parameters are fitted in float32 under x64 too).
        They are checked before any JAX code runs: the model's fields and shapes, finite values,
        distributions that are distributions (``probability_axes``) and positive scales
        (``positive_fields``); a ``ValueError``/``TypeError`` names ``init`` and the field.
        Resuming: a fit at fixed β without ``valid`` (``schedule=FixedBeta(b)``) stopped by Ctrl-C,
        ``time_budget`` or ``max_iter`` continues bit-identically with ``init=result.params``,
        ``schedule=FixedBeta(result.beta)`` and the iterations left as ``max_iter``: its whole
        state is the last iterate, which is what it keeps (the first resumed iteration cannot
        declare convergence, so with ``tol > 0`` it may run one iteration more). Bit for bit for a
        fit of one restart: a restart kept from several is continued alone, and XLA rounds one
        restart run alone and inside the vmapped batch of several differently in the last bits
        (measured 2026-12-07, the aspect model on Reuters, 8 restarts: the continued parameters
        within 1e-7 of one longer run's, not equal). Fits with
        ``valid`` or a schedule that moves β (``TemperedEM``, ``DeterministicAnnealing``) cannot be
        resumed exactly: their state also holds the schedule's level, counters and best validation
        score, the best parameters so far (kept instead of the last iterate, and the start of each
        TemperedEM level) and the previous log-likelihood, which :class:`EMResult` does not keep;
        from ``init=result.params`` they start the schedule over.
    devices : int or sequence of jax devices, optional
        Data-parallel EM: the cells are split into one block per device (``shard_map``) and the
        E-step statistics are summed across devices with ``psum``. An int takes the first that
        many of ``jax.devices()``. The iterates equal those of the single-device fit up to
        floating-point rounding. Across hosts, call ``jax.distributed.initialize()`` first and
        pass ``jax.devices()`` (every process runs the same call, on the same data or, with
        ``process_local``, on its own part of it).
    process_local : bool
        With ``devices`` spanning several processes: ``data`` (and ``valid``) hold only this
        process's part of the cells, with the global shape, and the blocks of all processes
        together are the data set (the model's ``prepare_sharded`` takes ``process_local=True``).
        No process sees another's cells; every process gets the same result, that of the whole
        data. A random start that reads the data (one-sided, two-sided, CAM) is drawn from
        process 0's part and sent to the others; ``init=`` fixes it instead.
    time_budget : float, optional
        Seconds after which the fit stops at the end of the current segment and returns what
        it has (``result.stopped_by == "time_budget"``). With ``devices`` spanning processes, one
        process out of time or interrupted stops every process after the same segment.
    progress : bool
        Show a tqdm progress bar over iterations.
    segment : int
        Iterations per jitted call; between calls the driver updates the progress bar, checks
        the time budget and acts on Ctrl-C: the first one returns the iterations finished by the
        end of the current segment (``result.stopped_by == "interrupted"``) instead of losing
        them; a second one abandons the fit with ``KeyboardInterrupt``.
    floor : float in (0, 1), optional
        Score every validation token at max(P(y|x), ``floor``) in the fit's validation perplexity,
        as ``result.perplexity(valid, floor=...)`` does (the zoo's dyadic models; until 2026-12-07
        only the tokens of probability 0 were floored in the fit, so the two differed). Without it
        such tokens make the validation perplexity inf (the history counts
        them in ``valid_zero_tokens``) and the fit compares iterates, β levels and restarts by
        (tokens of probability 0, perplexity of the others); see the module docstring. Fitting
        with ``prior_count > 0`` (MAP-EM) leaves no such tokens.

    Returns
    -------
    EMResult
    """
    arguments = dict(key=key, valid=valid, n_restarts=n_restarts, max_iter=max_iter, tol=tol, devices=devices,
                     process_local=process_local, progress=progress, segment=segment, floor=floor)
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:  # said below, for the fit that is kept
        warnings.simplefilter("always")
        result, rank = _fit_once(model, data, schedule=schedule, init=init, time_budget=time_budget, **arguments)
    fits = [(rank, result, caught)]
    spread = _prediction_spread(result)
    tried: list[str] = []
    if spread is not None and spread < ALIKE_TOLERANCE and result.stopped_by in ("converged", "max_iter"):
        for other_model, other_schedule, what in _fallbacks(result, valid, init):
            budget = None if time_budget is None else time_budget - (time.monotonic() - started)
            if budget is not None and budget <= 0:
                break
            tried.append(what)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                other, other_rank = _fit_once(other_model, data, schedule=other_schedule,
                                              init=init if other_model is model else None, time_budget=budget,
                                              **arguments)
            fits.append((other_rank, other, caught))
        rank, result, caught = min(fits, key=lambda fit: fit[0])  # the first of equals: the default's own
        spread = _prediction_spread(result)
    for warning in caught:  # through the caller's filters, from where they were raised
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                               source=warning.source)
    if spread is not None and spread < ALIKE_TOLERANCE:
        _warn_classes_alike(result, spread, tried)
    return result


def _fit_once(model: Any, data: Any, *, key: Any, valid: Any, schedule: Any, n_restarts: int, max_iter: int,
              tol: float, init: Any, devices: Any, process_local: bool, time_budget: float | None, progress: bool,
              segment: int, floor: float | None) -> tuple[EMResult, tuple]:
    """One fit of :func:`tempered_em` (its arguments, all given, checked here), and its rank: (validation tokens of
    probability 0, validation perplexity of the others) of the kept iterate, or (0, -training
    log-likelihood) without validation data; the lower the better."""
    model = check_model("model", model, ("prepare", "init_params", "em_step", "heldout_log_lik"),
                        "zoo.dyadic.Aspect(n_classes=16)")
    n_restarts = check_int("n_restarts", n_restarts, minimum=1)
    segment = check_int("segment", segment, minimum=1)
    if time_budget is not None:
        time_budget = check_real("time_budget", time_budget, low=0.0, low_open=True)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    tol = check_real("tol", tol, low=0.0)
    progress = check_bool("progress", progress)
    if floor is not None:
        floor = check_real("floor", floor, low=0.0, high=1.0, low_open=True, high_open=True)
        if valid is None:
            raise ValueError("floor: scores validation tokens of probability 0; it needs valid=")
    if schedule is None:
        schedule = FixedBeta(1.0) if valid is None else validated_schedule(model)
    if not isinstance(schedule, (FixedBeta, TemperedEM, DeterministicAnnealing)):
        raise TypeError(f"schedule: expected FixedBeta, TemperedEM or DeterministicAnnealing, got {schedule!r}")
    if schedule.needs_validation and valid is None:
        raise ValueError("valid: TemperedEM chooses β on held-out data; pass valid= (e.g. from data.split_tokens)")
    key = check_key("key", key)
    if init is not None and n_restarts != 1:
        raise ValueError("n_restarts: must be 1 when init= fixes the starting point")
    mesh = device_mesh(devices)
    if mesh is not None and not hasattr(model, "prepare_sharded"):
        raise ValueError(f"devices: {type(model).__name__} does not support data-parallel fitting")
    if not isinstance(process_local, (bool, np.bool_)):
        raise TypeError(f"process_local: expected a bool, got {process_local!r}")
    if process_local and mesh is None:
        raise ValueError("process_local: needs devices= (e.g. jax.devices() after jax.distributed.initialize())")
    if process_local and "process_local" not in inspect.signature(model.prepare_sharded).parameters:
        raise ValueError(f"process_local: {type(model).__name__} cannot be fitted from per-process parts of the data")
    # Co-occurrence containers (to_arrays and a shape; not relational data) must share one shape.
    if (valid is not None and hasattr(data, "to_arrays") and hasattr(data, "shape")
            and getattr(valid, "shape", None) != data.shape):
        raise ValueError(f"valid: shape {getattr(valid, 'shape', None)} differs from data shape {data.shape}")
    # Held-out tokens are scored by their row and column: named rows or columns must be the data's, in order.
    names = _names_of(data)
    if valid is not None:
        _check_same_names("valid", names, valid)
    # Arrays of points (a mixture's feature vectors): any number of points, each of the data's shape.
    point_shape = _point_shape(model, data)
    if valid is not None and point_shape is not None and _point_shape(model, valid) != point_shape:
        raise ValueError(f"valid: points of shape {_point_shape(model, valid)} (the shape after the first axis), "
                         f"where the data's are {point_shape}")
    # Starting parameters set the working precision (float32 ones stay float32 under x64).
    prepared = model.prepare(data)
    valid_prepared = _prepare_named("valid", model, valid) if valid is not None else None  # errors name valid
    start = jax.eval_shape(model.init_params, key, prepared)  # the shapes of a start: traced, not run
    if valid is not None and hasattr(model, "check_heldout"):  # e.g. a program's params per observation
        model.check_heldout("valid", start, valid_prepared)
    # The loop holds the parameters, the kept best, the new iterate and their statistics per restart.
    check_memory("model", 4 * n_restarts * tree_nbytes(start), f"fitting {model!r} with n_restarts={n_restarts}")
    if init is not None:  # against the shapes of the model's own start
        check_params_like("init", init, start)
        probability_axes = getattr(model, "probability_axes", None)  # the fields that are distributions
        if probability_axes:
            check_distributions("init", init, probability_axes)
        positive_fields = getattr(model, "positive_fields", ())  # scales, rates: > 0
        if positive_fields:
            check_positive("init", init, positive_fields)
    init_dtype = _init_dtype(init) if init is not None else None
    train_arrays = _in_dtype(prepared, init_dtype, data)
    valid_count = _observation_count(valid, model) if valid is not None else 1.0
    if process_local and valid is not None:
        valid_count = float(process_sum(valid_count))
    valid_total = jnp.asarray(valid_count, jnp.result_type(float))
    keys = jax.random.split(key, n_restarts)
    if init is None:
        starts = _initial_params(keys, train_arrays, model=model)
        if process_local:  # a start drawn from process 0's part, the same everywhere
            starts = broadcast_from_first(starts)
    else:
        starts = jax.tree_util.tree_map(lambda leaf: _in_dtype(jnp.asarray(leaf), init_dtype, None)[None], init)
    states = _initial_states(starts, schedule=schedule, segment=segment)
    recorder = _HistoryRecorder(n_restarts)
    if mesh is None:
        valid_arrays = _in_dtype(valid_prepared, init_dtype, valid) if valid is not None else None
        advance = partial(_advance, model=model, schedule=schedule, tol=tol, floor=floor)
    else:
        n_shards = mesh.devices.size
        # Lay the blocks out on their devices once (not at every segment); across hosts this
        # makes the global arrays from the same host data on every process, or, process_local,
        # from each process's own blocks.
        blocks = NamedSharding(mesh, P(SHARD_AXIS))
        if process_local:
            n_local = local_block_count(mesh)
            lay_out = lambda part: global_blocks(  # noqa: E731
                _in_dtype(model.prepare_sharded(part, n_local, process_local=True), init_dtype, part), mesh, SHARD_AXIS)
        else:
            lay_out = lambda part: jax.device_put(  # noqa: E731
                _in_dtype(model.prepare_sharded(part, n_shards), init_dtype, part), blocks)
        train_arrays = lay_out(data)
        valid_arrays = lay_out(valid) if valid is not None else None
        states, valid_total = replicate((states, valid_total), mesh)
        advance = _sharded_advance(model, schedule, tol, mesh, valid is not None, floor)

    def run(states, stop_at):
        return advance(states, train_arrays, valid_arrays, valid_total, jnp.asarray(stop_at, jnp.int32))

    n_processes = 1 if mesh is None else len({device.process_index for device in mesh.devices.flat})
    with lost_peers_named(n_processes):  # a process that dies breaks the others' next psum: say so
        states, stopped_by = _run_segments(run, states, max_iter=max_iter, segment=segment, time_budget=time_budget,
                                           progress=progress, record=recorder, several=n_processes > 1)
    # The history's log-likelihoods are those of the parameters each iteration starts from, so the
    # kept parameters' own (the last iterate's, or the best by validation) takes one E-step more.
    beta_one = jnp.ones((), states.log_lik.dtype)
    if mesh is None:
        kept_log_liks = _kept_log_liks(states.best_params, train_arrays, beta_one, model=model)
    else:
        kept_log_liks = _sharded_kept_log_liks(model, mesh)(states.best_params, train_arrays,  # replicated
                                                            replicate(beta_one, mesh))
    kept_log_liks = np.asarray(jax.device_get(kept_log_liks), np.float64)
    states = jax.device_get(states)
    iterations = np.asarray(states.iteration)
    if valid is not None:
        zeros, scores = np.asarray(states.best_zero), np.asarray(states.best_score)
        best = int(np.lexsort((scores, zeros))[0])  # fewest tokens of probability 0, then lowest perplexity
        restart_scores = np.where(zeros > 0, np.inf, scores)
    else:
        restart_scores = kept_log_liks
        best = int(np.nanargmax(restart_scores)) if np.isfinite(restart_scores).any() else 0
    n_iter = int(iterations[best])
    history = recorder.history(best)
    _warn_if_not_finite(history["log_lik"], kept_log_liks[best])
    if valid is not None and zeros[best] > 0:
        _warn_if_chosen_by_zero_tokens(float(zeros[best]), history, float(states.best_beta[best]))
    pick = lambda leaf: jnp.asarray(leaf[best])  # noqa: E731
    params = jax.tree_util.tree_map(pick, states.best_params)
    if hasattr(model, "distribution_problems") and np.isfinite(kept_log_liks[best]) and not process_local:
        _warn_if_outside_constraints(model, params, data)
    result = EMResult(
        model=model,
        params=params,
        beta=float(states.best_beta[best]),
        history=history,
        restart_scores=restart_scores,
        best_restart=best,
        n_iter=n_iter,
        converged=bool(states.done[best]),
        stopped_by=stopped_by,
        best_iteration=int(states.best_iteration[best]),
        log_lik=float(kept_log_liks[best]),
        _shape=getattr(data, "shape", None),
        schedule=schedule,
        row_names=names["row_names"],
        col_names=names["col_names"],
    )
    if valid is not None:
        rank = (float(zeros[best]), float(scores[best]))
    else:
        kept = float(kept_log_liks[best])
        rank = (0.0, -kept if np.isfinite(kept) else np.inf)
    return result, rank
