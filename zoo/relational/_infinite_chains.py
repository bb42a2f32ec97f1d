"""Running IRM chains: starts, sweeps in jitted calls, held-out cases, predictive draws.

Chains are ``vmap``-ped; each runs the kernel of ``zoo/relational/_infinite_kernel.py`` in a
``lax.scan`` over its sweeps. :func:`_run_chains_in_calls` cuts the sweeps into jitted calls and
acts on Ctrl-C between them; :func:`_run_cases` runs the chains of a call's held-out cases in one
``jit`` (the model cuts the cases into such calls). The model that calls them is
:class:`zoo.relational.infinite.InfiniteRelational`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from inference.chains import UNTIL_MIXED_BAR
from inference.interrupts import DeferredInterrupt, stop_reason
from inference.jit import jit
from zoo.relational._infinite_kernel import build_kernel
from zoo.relational._infinite_state import IRMInfo, IRMState, _predictive, block_counts, grown, init
from zoo.relational.data import RelationalArrays


class _RunOutput(NamedTuple):
    info: IRMInfo
    assignments: tuple
    predictive: Any
    final: IRMState


def _start_chain(rng_key, arrays, hidden_cells, *, schema, capacities, settings, n_sweeps, relation):
    """The chain's start, an empty predictive sum and the keys of its ``n_sweeps`` sweeps."""
    key_init, key_sweeps = jax.random.split(rng_key)
    state = init(key_init, arrays, schema, capacities, concentration=settings["concentration"],
                 hyper=settings["hyper"], init_clusters=settings["init_clusters"])
    predictive = jnp.zeros(hidden_cells.shape[:1] + (schema.n_values[relation],), arrays.weights[0].dtype)
    return state, predictive, jax.random.split(key_sweeps, n_sweeps)


def _advance_chain(state, predictive, arrays, flat, hidden_cells, indices, keys, *, schema, capacities, settings,
                   n_warmup, relation, keep_assignments):
    """The sweeps numbered ``indices`` (with their ``keys``): new state and predictive sum, per-sweep output."""
    step = build_kernel(schema, capacities, concentration_prior=settings["concentration_prior"],
                        hyper_prior_rate=settings["hyper_prior_rate"],
                        sample_concentration=settings["sample_concentration"],
                        sample_hyper=settings["sample_hyper"], backend=settings["backend"],
                        n_split_merge=settings["n_split_merge"], split_merge_scans=settings["split_merge_scans"])

    def sweep(carry, inputs):
        state, predictive = carry
        index, key = inputs
        state, info = step(key, state, arrays, flat)
        kept = index >= n_warmup
        predictive = predictive + jnp.where(kept, _predictive(state, relation, hidden_cells, schema), 0.0)
        out = (info, state.assignments if keep_assignments else ())
        return (state, predictive), out

    return jax.lax.scan(sweep, (state, predictive), (indices, keys))


def _run_chain(rng_key, arrays, flat, hidden_cells, *, schema, capacities, settings, n_sweeps, n_warmup, relation,
               keep_assignments):
    state, predictive, keys = _start_chain(rng_key, arrays, hidden_cells, schema=schema, capacities=capacities,
                                           settings=settings, n_sweeps=n_sweeps, relation=relation)
    (state, predictive), (infos, assignments) = _advance_chain(
        state, predictive, arrays, flat, hidden_cells, jnp.arange(n_sweeps), keys, schema=schema,
        capacities=capacities, settings=settings, n_warmup=n_warmup, relation=relation,
        keep_assignments=keep_assignments)
    return _RunOutput(infos, assignments, predictive / max(n_sweeps - n_warmup, 1), state)


_SHARED = RelationalArrays(entries=None, values=None, weights=None, blankets=None)
_BY_CASE = RelationalArrays(entries=None, values=None, weights=0, blankets=None)
_STATIC = ("schema", "capacities", "settings", "n_sweeps", "n_warmup", "relation", "keep_assignments")


@partial(jit, static_argnames=("schema", "capacities", "settings", "n_sweeps", "relation"))
def _start_chains(keys, arrays, hidden_cells, **static):
    return jax.vmap(partial(_start_chain, **static), in_axes=(0, _SHARED, None))(keys, arrays, hidden_cells)


@partial(jit, static_argnames=("schema", "capacities", "settings", "n_warmup", "relation", "keep_assignments"))
def _advance_chains(states, predictive, arrays, flat, hidden_cells, indices, keys, **static):
    advance = partial(_advance_chain, **static)
    return jax.vmap(advance, in_axes=(0, 0, _SHARED, None, None, None, 0))(states, predictive, arrays, flat,
                                                                          hidden_cells, indices, keys)


def _run_chains_in_calls(keys, arrays, flat, hidden_cells, *, schema, capacities, settings, n_sweeps, n_warmup,
                         relation, keep_assignments, sweeps_per_call, states=None, first_sweep=0, deadline=None,
                         progress=False, stop_rule=None, grow=None):
    """Every chain's sweeps in jitted calls of about ``sweeps_per_call`` sweeps, Ctrl-C acted on between calls.

    The sweeps are cut into equal calls (one compilation, two when they do not divide evenly);
    sweep s of a chain uses the same key as in one call, so the draws do not depend on the cut.
    With ``states`` (the chains' states after sweep ``first_sweep - 1``) the run continues them
    from sweep ``first_sweep`` instead of starting: sweep s's key is ``split(key_sweeps,
    n_sweeps)[s]``, which with JAX's default ``jax_threefry_partitionable`` does not depend on
    ``n_sweeps``, so a continued run draws what one longer run draws. ``deadline`` (a
    ``time.perf_counter()`` value) stops the run after the call that passes it, as Ctrl-C does.
    ``progress`` shows a tqdm bar of the sweeps, advanced after every call. ``stop_rule(first_sweep,
    capacities)``, when given, makes the :class:`inference.chains.StopRule` asked (as it is due)
    about the output of the sweeps so far; when it says so, the run ends there, completed.
    ``grow(capacities)``, when given, is asked for larger capacities when a chain of a call outgrows
    them: the call runs again from the states it started with, grown
    (:func:`~zoo.relational._infinite_state.grown`), with the same keys, and the run goes on at
    those capacities; the draws are those of a run at them from the start. Where memory cannot hold
    them ``grow`` returns None and the run ends with the calls finished before. Returns the output
    of the sweeps finished (``info`` and ``assignments`` over them, from
    ``first_sweep`` on), why the run ended (:data:`inference.chains.STOPPED_BY`): ``"n_draws"``
    (every sweep ran), ``"mixed"`` (``stop_rule`` said so), ``"interrupted"`` (Ctrl-C), ``"time_budget"``
    (the deadline) or ``"capacity"`` (a chain overflowed, and without ``grow`` the caller runs
    again), and the capacities it ended at.
    """
    starts, predictive, sweep_keys = _start_chains(keys, arrays, hidden_cells, schema=schema, capacities=capacities,
                                                   settings=settings, n_sweeps=n_sweeps, relation=relation)
    states = starts if states is None else jax.tree_util.tree_map(jnp.asarray, states)
    n_calls = -(-(n_sweeps - first_sweep) // sweeps_per_call)
    per_call = -(-(n_sweeps - first_sweep) // n_calls)
    static = dict(schema=schema, capacities=capacities, settings=settings, n_warmup=n_warmup, relation=relation,
                  keep_assignments=keep_assignments)
    chunks = []
    stopped_by = "n_draws"
    rule = stop_rule(first_sweep, capacities) if stop_rule is not None else None
    until = UNTIL_MIXED_BAR if rule is not None else ""
    bar = tqdm(total=n_sweeps - first_sweep, disable=not progress, unit="sweep",
               desc=f"{keys.shape[0]} chains, capacity {max(capacities)}{until}")
    with DeferredInterrupt() as interrupt, bar:
        first = first_sweep
        while first < n_sweeps:
            indices = jnp.arange(first, min(first + per_call, n_sweeps))
            (after, predictive_after), chunk = _advance_chains(states, predictive, arrays, flat, hidden_cells, indices,
                                                               sweep_keys[:, first: first + per_call], **static)
            if grow is not None and np.any(np.asarray(after.overflow)):
                # The same call again from the states it started with, grown; the finished calls stand.
                capacities = grow(static["capacities"])
                if capacities is None:  # memory cannot hold them: the finished calls are returned
                    chunks = chunks or [jax.tree_util.tree_map(lambda part: part[:, :0], jax.device_get(chunk))]
                    stopped_by = "capacity"
                    break
                states, static["capacities"] = grown(states, schema, capacities), capacities
                bar.set_description(f"{keys.shape[0]} chains, capacity {max(capacities)}{until}")
                continue
            states, predictive = after, predictive_after
            chunks.append(jax.device_get(chunk))
            bar.update(len(indices))
            first += per_call
            if np.any(np.asarray(states.overflow)):  # without grow: the caller runs every chain again
                stopped_by = "capacity"
                break
            reason = stop_reason(interrupt, deadline)
            if reason is not None and first < n_sweeps:
                stopped_by = reason
                break
            n_kept = first - max(n_warmup, first_sweep)  # draws of this run so far
            if rule is not None and first < n_sweeps and n_kept > 0 and rule.due(n_kept):
                if rule.ask(_RunOutput(*_joined(chunks), None, states), n_kept):
                    stopped_by = "mixed"
                    break
    infos, assignments = _joined(chunks)
    output = _RunOutput(infos, assignments, predictive / max(n_sweeps - n_warmup, 1), states)
    return output, stopped_by, static["capacities"]


def _joined(chunks):
    """The ``info`` and ``assignments`` of successive calls, joined along the sweeps."""
    return jax.tree_util.tree_map(lambda *parts: np.concatenate(parts, axis=1), *chunks)


@partial(jit, static_argnames=_STATIC)
def _run_cases(keys, arrays, flat, hidden_cells, **static):
    run = partial(_run_chain, **static)
    chains = jax.vmap(run, in_axes=(0, _SHARED, None, None))
    return jax.vmap(chains, in_axes=(0, _BY_CASE, None, 0))(keys, arrays, flat, hidden_cells)


@partial(jit, static_argnames=("schema", "capacities", "settings", "n_sweeps", "relation"))
def _start_cases(keys, arrays, hidden_cells, **static):
    """Every case's chains started (as :func:`_run_cases` starts them): states and sweep keys."""
    chains = jax.vmap(partial(_start_chain, **static), in_axes=(0, _SHARED, None))
    states, _, sweep_keys = jax.vmap(chains, in_axes=(0, _BY_CASE, 0))(keys, arrays, hidden_cells)
    return states, sweep_keys


@partial(jit, static_argnames=("schema", "capacities", "settings", "relation"))
def _advance_cases(states, arrays, flat, hidden_cells, indices, keys, *, schema, capacities, settings, relation):
    """The sweeps ``indices`` of every case's chains: their states, the sum over these sweeps and the
    chains of the hidden cells' predictive (cases, cells, values), and the log joints (cases,
    chains, sweeps)."""
    def chain(state, case_arrays, case_cells, chain_keys):
        zero = jnp.zeros(case_cells.shape[:1] + (schema.n_values[relation],), arrays.weights[0].dtype)
        (state, total), (info, _) = _advance_chain(
            state, zero, case_arrays, flat, case_cells, indices, chain_keys, schema=schema, capacities=capacities,
            settings=settings, n_warmup=0, relation=relation, keep_assignments=False)
        return state, total, info.log_joint

    chains = jax.vmap(chain, in_axes=(0, None, None, 0))
    states, totals, log_joint = jax.vmap(chains, in_axes=(0, _BY_CASE, 0, 0))(states, arrays, hidden_cells, keys)
    return states, totals.sum(axis=1), log_joint


#: Most segments an until-mixed run of held-out cases is cut into (:func:`_run_cases_until_mixed`):
#: the mixing is asked after each, and each case's predictive is kept as one sum per segment.
CASE_SEGMENTS = 64
#: Fewest sweeps in a segment of such a run.
CASE_SEGMENT_SWEEPS = 25
#: Gibbs steps (one individual in one chain) that cost about as much as compiling the sweep of a
#: batch of held-out cases for a new number of cases: 20-35 µs per step and 2-3 s per compilation on
#: 2 cores, whatever the size (2026-12-06: the Florentine families, 15 individuals, in calls of 21
#: cases of 2 chains, 1.7 s per 79 sweeps and 2.0-2.6 s per compilation; a MovieLens fold, 2,100
#: individuals, 104 s for 1,250 sweeps of 2 chains). An until-mixed run keeps its finished cases in
#: the batch until they have wasted this many (:func:`_run_cases_until_mixed`).
CASE_COMPILE_STEPS = 100_000


class _CasesRun(NamedTuple):
    predictive: np.ndarray  # (cases, cells, values), averaged over chains and kept sweeps
    log_joint: list  # per case: (chains, kept sweeps)
    stopped: tuple | None  # (stopping()'s reason, cases not mixed, sweeps they ran) when it ended them, else None


def _case_segments(n_sweeps: int, n_warmup: int | None) -> list[tuple[int, int]]:
    """The segments (first, stop) of sweeps: the warm-up one segment when it is fixed."""
    length = max(CASE_SEGMENT_SWEEPS, -(-n_sweeps // CASE_SEGMENTS))
    first = 0 if n_warmup is None else n_warmup
    bounds = ([0] if first else []) + list(range(first, n_sweeps, length)) + [n_sweeps]
    return list(zip(bounds[:-1], bounds[1:]))


def _kept_segments(n_done: int, n_warmup: int | None) -> range:
    """Of the first ``n_done`` segments, those kept: after the fixed warm-up, else the later half
    (the middle one kept, as a fixed run of n sweeps keeps n - n // 2)."""
    if n_warmup is None:
        return range(n_done // 2, n_done)
    return range(1 if n_warmup else 0, n_done)


def _run_cases_until_mixed(keys, arrays, flat, hidden_cells, *, schema, capacities, settings, n_sweeps, n_warmup,
                           relation, mixed, stopping):
    """The chains of a call's held-out cases, in segments, each case until its chains mix.

    After each segment every case still running is asked ``mixed(log_joint)`` about its kept
    draws ((chains, sweeps): after ``n_warmup`` when it is given, else the later half of the
    segments run); a case that passes ends there, its predictive the average over its kept sweeps.
    Finished cases stay in the batch, their further sweeps discarded, until the sweeps they waste
    would cost more than compiling the sweep for a batch of the cases left
    (:data:`CASE_COMPILE_STEPS`, counted in Gibbs steps of an individual): small cases, such as a
    network's pairs, then keep one compiled shape, and large ones, such as the folds of a ratings
    matrix, run only the cases left from the segment after the first ones end (the rule reads
    sizes only, so the batches run do not depend on timings). A case's result is what it would be
    alone (vmapped cases are independent; bit for bit on the CPU).
    Cases that do not pass end after ``n_sweeps``; when ``stopping()`` says so (Ctrl-C, the time
    budget) every case left ends with the sweeps run (once past a fixed warm-up; ``stopped`` says why,
    how many cases and after how many sweeps). Returns a :class:`_CasesRun`, or None when a chain outgrew its capacity
    (the caller runs again with larger ones).
    """
    static = dict(schema=schema, capacities=capacities, settings=settings, relation=relation)
    states, sweep_keys = _start_cases(keys, arrays, hidden_cells, n_sweeps=n_sweeps, **static)
    segments = _case_segments(n_sweeps, n_warmup)
    n_cases = keys.shape[0]
    sums = [[] for _ in range(n_cases)]  # per case, per segment run: predictive summed over sweeps and chains
    joints = [[] for _ in range(n_cases)]  # per case, per segment run: log joint (chains, sweeps)
    batch = np.arange(n_cases)  # the case of each row of the batch
    steps = keys.shape[1] * sum(schema.domain_sizes)  # Gibbs steps in one sweep of a case's chains
    wasted = 0  # steps run by the rows of finished cases since the batch last shrank
    running = np.ones(n_cases, bool)  # by case: not yet mixed
    stopped = None
    for first, stop in segments:
        states, total, log_joint = _advance_cases(
            states, arrays._replace(weights=tuple(weights[batch] for weights in arrays.weights)), flat,
            hidden_cells[batch], jnp.arange(first, stop), sweep_keys[batch, :, first:stop], **static)
        if np.any(np.asarray(states.overflow)[running[batch]]):
            return None
        total, log_joint = np.asarray(total), np.asarray(log_joint)
        wasted += int(np.sum(~running[batch])) * steps * (stop - first)
        for row, case in enumerate(batch):
            if running[case]:
                sums[case].append(total[row])
                joints[case].append(log_joint[row])
                kept = _kept_segments(len(joints[case]), n_warmup)
                running[case] = not (len(kept) and mixed(np.concatenate([joints[case][k] for k in kept], axis=-1)))
        if not running.any():
            break
        done = len(joints[np.flatnonzero(running)[0]])
        reason = stopping()
        if reason and len(_kept_segments(done, n_warmup)):  # once they keep some sweeps
            stopped = (reason, int(running.sum()), stop)
            break
        # Ski rental: finished cases run on until their waste, with the next segment's, would pay for a compilation.
        idle = int(np.sum(~running[batch]))
        if idle and wasted + idle * steps * (stop - first) >= CASE_COMPILE_STEPS:
            rows = running[batch]
            batch = batch[rows]
            states = jax.tree_util.tree_map(lambda leaf: leaf[rows], states)
            wasted = 0
    predictive = np.empty((n_cases,) + sums[0][0].shape, sums[0][0].dtype)
    kept_joints = []
    for case in range(n_cases):
        kept = _kept_segments(len(sums[case]), n_warmup)
        sweeps = sum(segments[k][1] - segments[k][0] for k in kept)
        predictive[case] = sum(sums[case][k] for k in kept) / (sweeps * keys.shape[1])
        kept_joints.append(np.concatenate([joints[case][k] for k in kept], axis=-1))
    return _CasesRun(predictive, kept_joints, stopped)


class _Settings(tuple):
    """Hashable sampler settings (a ``jit`` static argument) readable by key."""

    def __new__(cls, **values):
        return super().__new__(cls, tuple(sorted(values.items())))

    def __getitem__(self, name):
        return dict(tuple(self))[name]


@partial(jit, static_argnames=("schema", "capacities", "relation"))
def _draw_predictive(assignments, hyper, arrays, cells, *, schema, capacities, relation):
    def one(draw_assignments, draw_hyper):
        counts = block_counts(draw_assignments, arrays, schema, capacities)
        state = IRMState(draw_assignments, (), counts, None, draw_hyper, None)
        return _predictive(state, relation, cells, schema)

    return jax.lax.map(lambda args: one(*args), (assignments, hyper))
