"""Fitting the latent-class relational model: random starts, passes in jitted calls, held-out cases.

Restarts are ``vmap``-ped; their passes run in a ``lax.while_loop`` inside jitted calls of a number
of passes each, with Ctrl-C acted on between calls (:func:`_run_passes`); the fits of many
held-out cases run in jitted calls of a number of cases each (:func:`_fit_cases`), with Ctrl-C
and a time budget acted on between calls (:func:`_run_case_calls`, which the IRM's held-out cases
use too). Also here: predictive probabilities of cells and the exact log-likelihood by enumeration
(tiny data), which the tests compare with the bound. The model is
:class:`zoo.relational.latent_class.LatentClassRelational`.
"""

from __future__ import annotations

from functools import partial
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from inference._validation import user_stacklevel
from inference.interrupts import DeferredInterrupt, stop_reason
from inference.jit import jit
from inference.seeding import LLOYD_ITERATIONS, SKETCH_COLUMNS, kmeans_labels, smoothed_start
from zoo.relational._latent_class_passes import iem_pass
from zoo.relational._latent_class_state import LRMParams, _safe_log, m_step, sufficient_statistics
from zoo.relational.data import RelationalArrays, RelationalSchema




def _profiles(key: Any, arrays: RelationalArrays, schema: RelationalSchema, domain: int) -> Any:
    """(size, features): each individual's mean centred cell value, sketched by the partners' random rows.

    For every argument position at which ``domain`` appears, the one-hot values of an individual's
    cells, less the relation's mean, times a Gaussian row per partner (SKETCH_COLUMNS of them),
    averaged over its cells: individuals with alike cells with alike partners get nearby profiles,
    without a dense relation matrix. Unary relations contribute the centred values themselves.
    """
    size = schema.domain_sizes[domain]
    dtype = arrays.weights[0].dtype
    parts = []
    for key_part, (relation, position) in zip(jax.random.split(key, 64), schema.incidences(domain)):
        cells, weights = arrays.entries[relation], arrays.weights[relation]
        onehot = jax.nn.one_hot(arrays.values[relation], schema.n_values[relation], dtype=dtype) * weights[:, None]
        centred = (onehot - onehot.sum(axis=0) / jnp.maximum(weights.sum(), 1.0)) * weights[:, None]
        domains = schema.relation_domains[relation]
        if len(domains) == 2:
            partner = schema.domain_sizes[domains[1 - position]]
            rows = jax.random.normal(key_part, (partner, SKETCH_COLUMNS), dtype) / np.sqrt(SKETCH_COLUMNS)
            centred = (centred[:, :, None] * rows[cells[:, 1 - position]][:, None, :]).reshape(len(weights), -1)
        total = jax.ops.segment_sum(centred, cells[:, position], num_segments=size)
        count = jax.ops.segment_sum(weights, cells[:, position], num_segments=size)
        parts.append(total / jnp.maximum(count, 1.0)[:, None])
    return jnp.concatenate(parts, axis=1)


def _seeded_responsibilities(key: Any, profiles: Any, n_classes: int) -> Any:
    """k-means++ seeding (Arthur & Vassilvitskii 2007) and Lloyd iterations on the profiles, smoothed."""
    return smoothed_start(kmeans_labels(key, profiles, n_classes, LLOYD_ITERATIONS), n_classes, profiles.dtype)


def _init_params(rng_key: Any, arrays: RelationalArrays, *, schema: RelationalSchema,
                 n_classes: tuple[int, ...], prior_count: float, seeded: bool = False) -> LRMParams:
    """A start: every q_a ~ Dirichlet(1, ..., 1), or seeded from the data, then an M-step.

    ``seeded``: each domain's individuals clustered by k-means (k-means++ seeds and a few Lloyd
    iterations) on sketches of their cells (:func:`_profiles`), their class probabilities put mostly
    on their cluster. Random starts, soft or hard, fall into incremental EM's symmetric fixed point on
    data with plain groups (:class:`zoo.relational.latent_class.ClassesAlikeWarning`); these do not.
    """
    dtype = arrays.weights[0].dtype
    keys = jax.random.split(rng_key, len(schema.domain_sizes))
    responsibilities = []
    for domain, (key_domain, size, n_domain_classes) in enumerate(zip(keys, schema.domain_sizes, n_classes)):
        if seeded and n_domain_classes > 1 and schema.incidences(domain):
            key_profiles, key_seeds = jax.random.split(key_domain)
            profiles = _profiles(key_profiles, arrays, schema, domain)
            responsibilities.append(_seeded_responsibilities(key_seeds, profiles, n_domain_classes))
            continue
        draws = jax.random.exponential(key_domain, (size, n_domain_classes), dtype)
        responsibilities.append(draws / draws.sum(axis=1, keepdims=True))
    responsibilities = tuple(responsibilities)
    class_weights, relation_probs = m_step(sufficient_statistics(responsibilities, arrays, schema), prior_count,
                                           schema.symmetric)
    return LRMParams(class_weights, relation_probs, responsibilities)


# ----------------------------------------------------------------------------- the fit
class _FitState(NamedTuple):
    params: Any
    n_passes: Any
    previous: Any
    bound: Any  # (max_passes,) history
    objective: Any  # (max_passes,) history
    done: Any


def _start_one(rng_key, arrays, prior_count, *, schema, n_classes, max_passes, seeded=False):
    """A random (or seeded) start and empty (max_passes,) histories."""
    params = _init_params(rng_key, arrays, schema=schema, n_classes=n_classes, prior_count=prior_count,
                          seeded=seeded)
    return _fresh_state(params, max_passes)


def _fresh_state(params: LRMParams, max_passes: int) -> _FitState:
    """A run at ``params`` with no pass made: empty (max_passes,) histories."""
    dtype = params.responsibilities[0].dtype
    history = jnp.full((max_passes,), jnp.nan, dtype)
    return _FitState(params, jnp.asarray(0, jnp.int32), jnp.asarray(-jnp.inf, dtype), history, history,
                     jnp.asarray(False))


def _advance_one(state, arrays, flat, beta, tol, prior_count, stop_at, *, schema, backend):
    """Passes from ``state`` until ``stop_at`` passes in all or convergence."""

    def keep_going(state):
        return (state.n_passes < stop_at) & ~state.done

    def one_pass(state):
        params, info = iem_pass(state.params, arrays, beta, schema=schema, prior_count=prior_count, flat=flat,
                                backend=backend)
        change = jnp.abs(info.objective - state.previous)
        done = change <= tol * jnp.abs(info.objective)
        index = state.n_passes
        return _FitState(params, index + 1, info.objective, state.bound.at[index].set(info.bound),
                         state.objective.at[index].set(info.objective), done)

    return jax.lax.while_loop(keep_going, one_pass, state)


def _fit_one(rng_key, arrays, flat, beta, tol, prior_count, *, schema, n_classes, max_passes, backend, seeded):
    state = _start_one(rng_key, arrays, prior_count, schema=schema, n_classes=n_classes, max_passes=max_passes,
                       seeded=seeded)
    return _advance_one(state, arrays, flat, beta, tol, prior_count, max_passes, schema=schema, backend=backend)


_ARRAYS_SHARED = RelationalArrays(entries=None, values=None, weights=None, blankets=None)
_ARRAYS_BY_CASE = RelationalArrays(entries=None, values=None, weights=0, blankets=None)


_STATIC = ("schema", "n_classes", "max_passes", "backend", "seeded")


def _continued_state(params: LRMParams, max_passes: int) -> _FitState:
    """One run (a batch of one, as :func:`_start_restarts` gives) that continues from ``params``:
    a pass starts from the class posteriors alone (:func:`iem_pass`), so these are the passes the
    fit that ended at ``params`` would have made next."""
    return jax.tree_util.tree_map(lambda leaf: leaf[None], _fresh_state(params, max_passes))


@partial(jit, static_argnames=("schema", "n_classes", "max_passes", "seeded"))
def _start_restarts(keys, arrays, prior_count, *, schema, n_classes, max_passes, seeded=False):
    start = partial(_start_one, schema=schema, n_classes=n_classes, max_passes=max_passes, seeded=seeded)
    return jax.vmap(start, in_axes=(0, _ARRAYS_SHARED, None))(keys, arrays, prior_count)


@partial(jit, static_argnames=("schema", "backend"))
def _advance_restarts(states, arrays, flat, beta, tol, prior_count, stop_at, *, schema, backend):
    advance = partial(_advance_one, schema=schema, backend=backend)
    return jax.vmap(advance, in_axes=(0, _ARRAYS_SHARED, None, None, None, None, None))(
        states, arrays, flat, beta, tol, prior_count, stop_at)


def _run_passes(advance, states, *, max_passes, passes_per_call, deadline=None, progress=False):
    """Call ``advance(states, stop_at)`` in calls of ``passes_per_call`` passes; stop on convergence,
    Ctrl-C or the deadline.

    Ctrl-C is acted on between calls (:class:`inference.interrupts.DeferredInterrupt`): the states of
    the last finished call are returned, with ``"interrupted"``; a second Ctrl-C abandons the fit.
    ``deadline`` (a ``time.perf_counter()`` value) stops the passes after the call that passes it,
    with ``"time_budget"``. ``progress`` shows a tqdm bar of the passes of the longest-running
    restart, advanced after every call.
    """
    stopped_by = "max_passes"
    stop_at = 0
    bar = tqdm(total=max_passes, disable=not progress, unit="pass", desc="incremental EM")
    with DeferredInterrupt() as interrupt, bar:
        while stop_at < max_passes:
            stop_at = min(stop_at + passes_per_call, max_passes)
            states = advance(states, stop_at)
            bar.update(int(np.asarray(states.n_passes).max()) - bar.n)
            if np.asarray(states.done).all():
                stopped_by = "converged"
                break
            if stop_at >= max_passes:
                break
            reason = stop_reason(interrupt, deadline)
            if reason is not None:
                stopped_by = reason
                break
    return states, stopped_by


@partial(jit, static_argnames=_STATIC)
def _fit_cases(keys, arrays, flat, beta, tol, prior_count, *, schema, n_classes, max_passes, backend, seeded):
    """Fits for many weightings of the same cells (held-out cases) × restarts; keeps the best restart."""
    fit = partial(_fit_one, schema=schema, n_classes=n_classes, max_passes=max_passes, backend=backend,
                  seeded=seeded)
    restarts = jax.vmap(fit, in_axes=(0, _ARRAYS_SHARED, None, None, None, None))

    def best_of(case_keys, case_arrays):
        states = restarts(case_keys, case_arrays, flat, beta, tol, prior_count)
        best = jnp.argmax(jnp.where(jnp.isfinite(states.previous), states.previous, -jnp.inf))
        return jax.tree_util.tree_map(lambda leaf: leaf[best], states.params)

    return jax.vmap(best_of, in_axes=(0, _ARRAYS_BY_CASE))(keys, arrays)


# ----------------------------------------------------------------------------- prediction
def predict_proba(params: LRMParams, relation: int, cells: Any, schema: RelationalSchema) -> Any:
    """P(r(cell) = u) = Σ_g Π_i q_{a_i}(g_i) θ_r[g, u] for cells of relation ``relation``.

    Parameters
    ----------
    cells : int array, shape (n_cells, arity)

    Returns
    -------
    (n_cells, |r|) array of predictive probabilities.
    """
    domains = schema.relation_domains[relation]
    probs = params.relation_probs[relation]
    first = params.responsibilities[domains[0]][cells[:, 0]]
    if len(domains) == 1:
        return jnp.matmul(first, probs, precision="highest")
    second = params.responsibilities[domains[1]][cells[:, 1]]
    return jnp.einsum("ng,nh,ghu->nu", first, second, probs, precision="highest")


def _heldout_log_lik(params: LRMParams, arrays: RelationalArrays, schema: RelationalSchema) -> Any:
    total = 0.0
    for relation in range(len(schema.relation_domains)):
        probs = predict_proba(params, relation, arrays.entries[relation], schema)
        chosen = jnp.take_along_axis(probs, arrays.values[relation][:, None], axis=1)[:, 0]
        total = total + jnp.sum(arrays.weights[relation] * _safe_log(chosen))
    return total


# ----------------------------------------------------------------------------- exact likelihood
def exact_log_likelihood(params: LRMParams, arrays: RelationalArrays, schema: RelationalSchema,
                         n_classes: tuple[int, ...], max_assignments: int = 1 << 20) -> Any:
    """log P(y | θ) = log Σ_h P(y, h | θ) by enumerating every joint class assignment.

    Only for tiny data: Π_D g_D^{n_D} assignments, at most ``max_assignments``. Each term
    log P(y, h | θ) = Σ_a log θ_{h_D}[h(a)] + Σ_j w_j log θ_r[h(args_j), y_j] is computed from
    hard sufficient statistics, independently of the free energy.
    """
    radices = np.concatenate([np.full(size, g) for size, g in zip(schema.domain_sizes, n_classes)])
    log_total = float(np.sum(np.log(radices)))
    if log_total > np.log(max_assignments):
        raise ValueError(
            f"max_assignments: enumerating {np.exp(log_total):.3g} joint assignments exceeds {max_assignments}"
        )
    n_assignments = int(np.prod(radices))
    strides = np.concatenate([[1], np.cumprod(radices[:-1])]).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(schema.domain_sizes)])
    radices_j, strides_j = jnp.asarray(radices), jnp.asarray(strides)

    def log_joint(index):
        digits = (index // strides_j) % radices_j
        classes = [digits[offsets[d]: offsets[d + 1]] for d in range(len(schema.domain_sizes))]
        value = sum(jnp.sum(_safe_log(weights)[cls]) for weights, cls in zip(params.class_weights, classes))
        for relation, domains in enumerate(schema.relation_domains):
            cells = arrays.entries[relation]
            parents = tuple(classes[domain][cells[:, position]] for position, domain in enumerate(domains))
            log_probs = _safe_log(params.relation_probs[relation])[parents + (arrays.values[relation],)]
            value = value + jnp.sum(arrays.weights[relation] * log_probs)
        return value

    values = jax.lax.map(log_joint, jnp.arange(n_assignments), batch_size=min(n_assignments, 4096))
    return jax.nn.logsumexp(values)


def _check_hidden(hidden: Any, n_observed: int) -> np.ndarray:
    array = np.asarray(hidden)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"hidden: expected a non-empty (n_cases, n_hidden) array, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"hidden: expected integer positions, got dtype {array.dtype}")
    if array.max() >= n_observed or array.min() < -1:
        raise ValueError(f"hidden: positions must be in [0, {n_observed}) (or -1 for padding)")
    if (array[:, 0] < 0).any():
        raise ValueError("hidden: every case needs at least one cell (first column)")
    ordered = np.sort(array, axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if repeated.any():
        case = int(np.flatnonzero(repeated.any(axis=1))[0])
        raise ValueError(f"hidden: case {case} lists a position more than once "
                         f"({int(ordered[case, 1:][repeated[case]][0])})")
    return array.astype(np.int64)


def _case_weights(arrays: RelationalArrays, hidden: np.ndarray, relation: int) -> tuple:
    """Per-case weights: every relation's weights, with the case's hidden cells of ``relation`` set to 0."""
    weights = []
    n_cases = hidden.shape[0]
    for index, base in enumerate(arrays.weights):
        stacked = np.repeat(np.asarray(base)[None, :], n_cases, axis=0)
        if index == relation:
            rows = np.repeat(np.arange(n_cases), hidden.shape[1])
            columns = hidden.ravel()
            keep = columns >= 0
            stacked[rows[keep], columns[keep]] = 0.0
        weights.append(jnp.asarray(stacked, base.dtype))
    return tuple(weights)


# ----------------------------------------------------------------------------- held-out cases in calls
def _case_calls(n_cases: int, cases_per_call: int) -> list[tuple[np.ndarray, int]]:
    """The cases cut into equal calls of at most ``cases_per_call``: (positions, number of real cases).

    Every call gets the same number of positions (one compilation): the last is padded by
    repeating its last case, whose copies are dropped.
    """
    n_calls = -(-n_cases // cases_per_call)
    per_call = -(-n_cases // n_calls)
    calls = []
    for first in range(0, n_cases, per_call):
        positions = np.arange(first, min(first + per_call, n_cases))
        n_real = positions.shape[0]
        calls.append((np.concatenate([positions, np.full(per_call - n_real, positions[-1])]), n_real))
    return calls


#: How the warnings of held-out cases name a reason of :func:`inference.interrupts.stop_reason`.
STOPPED_BY = {"interrupted": "interrupted (Ctrl-C)", "time_budget": "time_budget ran out"}


def _run_case_calls(run_call: Callable[[np.ndarray, Callable[[], str | None]], tuple[Any, str | None]],
                    output: np.ndarray, cases_per_call: int, *, caller: str, deadline: float | None = None,
                    progress: bool = False) -> int:
    """Fill ``output`` (one row per case) by ``run_call(positions)`` in calls of cases; Ctrl-C between calls.

    ``run_call(positions, stopping)`` returns the rows of its cases and None, or None and the reason
    why the call could not run (the IRM when memory cannot hold the grown capacity that a chain of
    the call needs): the cases end there, as after Ctrl-C, those finished kept. ``stopping()`` says
    whether Ctrl-C or the deadline came (the reason of :func:`~inference.interrupts.stop_reason`, or
    None), for a call that can end early with what it has (the IRM's chains run until they mix).
    Ctrl-C is acted on between calls (:class:`inference.interrupts.DeferredInterrupt`), and so is
    ``deadline`` (a ``time.perf_counter()`` value: the calls stop after the one that passes it): the
    cases not finished keep ``output``'s NaN and a ``RuntimeWarning`` from ``caller`` says how many
    were; a second Ctrl-C abandons with ``KeyboardInterrupt``. ``progress`` shows a tqdm bar of the
    cases, advanced after every call. Returns the cases finished.
    """
    n_cases = output.shape[0]
    calls = _case_calls(n_cases, cases_per_call)
    finished = 0
    bar = tqdm(total=n_cases, disable=not progress, unit="case", desc=caller)
    with DeferredInterrupt() as interrupt, bar:
        for positions, n_real in calls:
            rows, cannot_run = run_call(positions, lambda: stop_reason(interrupt, deadline))
            if cannot_run is not None:
                warnings.warn(f"{caller}: {cannot_run}; stopped after {finished} of {n_cases} cases, the cases not "
                              "run are NaN", RuntimeWarning, stacklevel=user_stacklevel())
                break
            output[positions[:n_real]] = np.asarray(rows)[:n_real]
            finished += n_real
            bar.update(n_real)
            if finished == n_cases:
                break
            reason = stop_reason(interrupt, deadline)
            if reason is None:
                continue
            warnings.warn(f"{caller}: {STOPPED_BY[reason]} after {finished} of {n_cases} cases; the cases not run "
                          "are NaN", RuntimeWarning, stacklevel=user_stacklevel())
            break
    return finished
