"""Run many Markov chains at once: ``vmap`` over chains, warm-up, thinning, progress, interruption.

:func:`sample_chains` drives any BlackJAX-style kernel ``step(rng_key, state, data) -> (state,
info)`` over a batch of chains (chains on the leading axis). Sweeps run inside jitted calls of a
fixed number of sweeps each, so

* a tqdm progress bar advances after every call;
* Ctrl-C or an exhausted ``time_budget`` (seconds) stops after the call in flight and returns
  every draw finished so far, that call's included, flagged ``completed=False``, with
  ``stopped_by`` saying which (Ctrl-C is deferred to the end of the call,
  :class:`inference.interrupts.DeferredInterrupt`; a second one drops the call in flight and
  returns the draws before it, or, with chains over several processes, abandons the run);
* a ``stop_when`` rule (e.g. "every label-invariant quantity mixes") is asked, each time the draws
  have grown by a tenth, whether the draws so far are enough; the run then ends there;
* the key of sweep s of chain c is ``fold_in(split(rng_key, n_chains)[c], s)``, so the draws do
  not depend on how the run is cut into calls: the same key gives identical chains.

Dirichlet-process states (:class:`inference.neal.GibbsState`) have a fixed capacity. When a call
reports that a chain ran out of it, the driver either raises :class:`CapacityError`
(``on_overflow="raise"``) or doubles the capacity of every chain (at most N), re-jits, and re-runs
the same call from the states it started with, with the same keys. Because the kernels' draws do
not depend on the capacity, the re-run reproduces the chain up to the point of overflow and then
continues it exactly ("grow", the default). A model's memory estimate before sampling is for its
starting capacity; every growth is checked again (three copies of the grown states), and one that
memory cannot hold stops the run with a ``RuntimeWarning`` giving the figure, returning the draws
finished so far (``completed=False``). A state class may define its own
``grow_after_overflow(overflowed)`` (the supervised DP's state doubles only the capacity that ran
out); its kernel's draws may depend on the capacity, in which case the re-run is a valid chain
from the same states but not the same draws.

Chains over devices. With ``devices=`` (an int, the first that many of ``jax.devices()``, or a
sequence of devices) the chains are split into equal groups, one per device, with ``shard_map``
over the chain axis; the data are copied to every device. Each chain still uses its own key
``fold_in(split(rng_key, n_chains)[c], s)``, so the draws are those of the single-device run and
:func:`inference.diagnostics.to_inference_data` turns the gathered result into one
``InferenceData``.

Chains over processes. After ``jax.distributed.initialize()``, ``devices=jax.devices()`` spreads
the chains over the devices of every process; every process runs the same call with the same
key, arguments and (whole) data, which each device holds a copy of. Each process places only
its own chains on its devices: either every process passes all the initial states and keeps
the chains of its devices (the default), or, with ``process_local=True``, each passes only the
chains of its own devices (chains ``[p * n, (p + 1) * n)`` for process p with n chains each,
the layout of ``jax.devices()``). The chains never communicate while they run; after each call
the draws are gathered onto every process, so every process returns the same global
:class:`ChainResult` (every chain's draws and ``final_state``), equal to the
one-process run of the same chains with the same key. The processes agree on stopping: the
time budget of any one of them, or Ctrl-C in any one of them, ends the run for all after the
call in flight (Ctrl-C is deferred to the end of the call,
:class:`inference.interrupts.DeferredInterrupt`; a second one abandons the run, and the others
then fail saying that a process died). A capacity
growth gathers the states of the call, grows them on every process and lays them out again.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from contextlib import ExitStack
from functools import lru_cache, partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from tqdm.auto import tqdm

from inference.display import Card, Described, chains_text, made_with
from inference.em import device_mesh
from inference.interrupts import DeferredInterrupt
from inference.neal import GibbsInfo, GibbsState, grow_capacity
from inference.processes import distribute, gather, local_rows, lost_peers_named, process_max
from inference.provenance import check_same_float_width, provenance, warn_if_made_elsewhere
from inference._validation import (check_choice, check_int, check_key, check_real, memory_shortfall, tree_nbytes,
                                   user_stacklevel)
from inference.jit import jit

#: What a progress bar of a run until the chains mix adds to its description: its total is then the
#: most the run may take (the IRM's bar says the same).
UNTIL_MIXED_BAR = ", until they mix, at most"

__all__ = ["ChainResult", "CapacityError", "sample_chains", "continue_chains", "record_gibbs", "stack_states",
           "StopRule"]


class CapacityError(RuntimeError):
    """A Dirichlet-process chain needed more clusters than its capacity ``max_clusters``."""


class ChainResult(NamedTuple):
    """Draws of many chains.

    Attributes
    ----------
    samples : dict of str to np.ndarray
        Recorded quantities, each shaped (chain, draw, ...); empty when stopped before the first
        draw.
    final_state : pytree
        Batched kernel state (chains first) after the last sweep run.
    n_warmup : int
        Warm-up sweeps run per chain before the first draw.
    thin : int
        Sweeps per recorded draw.
    completed : bool
        False when Ctrl-C, the time budget or memory for a grown capacity stopped the run early.
    seconds : float
        Wall-clock time of the sampling loop (compilation included).
    next_sweep : int
        Index of the next sweep of every chain (sweeps run so far, counting those of the runs
        this one continued). Passing it as ``first_sweep`` with ``final_state`` and the same key
        continues the chains exactly as one uninterrupted run would have
        (see :func:`zoo.io.save_checkpoint`).
    provenance : dict of str to str or None
        What drew them, taken when the sampling started (:func:`inference.provenance.provenance`:
        versions, JAX's backend, float width, the CPU compiled for); ``None`` in a result built
        by hand.
    stopped_by : str or None
        Why the run ended (one of :data:`STOPPED_BY`): ``"n_draws"`` (every draw asked for was
        drawn), ``"mixed"`` (``stop_when`` said the draws so far are enough: the fits' ``until_mixed``
        rule, that the chains mix), ``"interrupted"`` (Ctrl-C), ``"time_budget"`` or ``"capacity"``
        (memory could not hold the grown capacity a chain needed; a ``RuntimeWarning`` gave the
        figure). ``completed`` is False for the last three. ``None`` in a result built by hand.
    """

    samples: dict[str, np.ndarray]
    final_state: Any
    n_warmup: int
    thin: int
    completed: bool
    seconds: float
    next_sweep: int = 0
    provenance: dict[str, str] | None = None
    stopped_by: str | None = None

    @property
    def n_chains(self) -> int:
        """Number of chains."""
        return jax.tree_util.tree_leaves(self.final_state)[0].shape[0]

    @property
    def n_draws(self) -> int:
        """Draws recorded per chain (0 when stopped before the first draw)."""
        return next(iter(self.samples.values())).shape[1] if self.samples else 0

    def _card(self) -> Card:
        card = Card("ChainResult")
        card.add("chains", chains_text(n_chains=self.n_chains, n_draws=self.n_draws, n_warmup=self.n_warmup,
                                       thin=self.thin, seconds=self.seconds, completed=self.completed,
                                       stopped_by=self.stopped_by))
        card.add("samples", [f"{name} {tuple(np.shape(values))}" for name, values in self.samples.items()] or None)
        card.add("next sweep", f"{self.next_sweep:,}")
        card.add("made with", made_with(self.provenance))
        return card

    # A NamedTuple cannot mix in inference.display.Described: the same two methods, written out.
    # The default repr printed every draw and the whole final state.
    def __repr__(self) -> str:
        return Described.__repr__(self)

    def _repr_html_(self) -> str:
        return Described._repr_html_(self)

    def _safe_card(self):
        return Described._safe_card(self)


def record_gibbs(state: GibbsState, info: GibbsInfo) -> dict[str, jax.Array]:
    """What a Dirichlet-process draw keeps: assignments, α, number of clusters, log joint, and the
    split–merge moves accepted in the draw's last sweep (0 for a sampler without them)."""
    return {
        "assignments": state.assignments,
        "alpha": info.alpha,
        "n_clusters": info.n_clusters,
        "log_joint": info.log_joint,
        "split_merge_accepted": info.split_merge_accepted,
    }


def stack_states(states: list[Any]) -> Any:
    """Stack single-chain states into one batched state (chains on the leading axis)."""
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *states)


def _run_calls(step, record, chain_keys, states, data, first_sweep, n_records, thin):
    """``n_records`` draws of ``thin`` sweeps each, for every chain (vmapped)."""

    def run_chain(chain_key, state):
        def one_draw(state, draw_index):
            def one_sweep(state, sweep_offset):
                sweep = first_sweep + draw_index * thin + sweep_offset
                return step(jax.random.fold_in(chain_key, sweep), state, data)

            state, infos = jax.lax.scan(one_sweep, state, jnp.arange(thin))
            last_info = jax.tree_util.tree_map(lambda leaf: leaf[-1], infos)
            return state, record(state, last_info)

        return jax.lax.scan(one_draw, state, jnp.arange(n_records))

    return jax.vmap(run_chain)(chain_keys, states)


_run_calls_jit = jit(_run_calls, static_argnames=("step", "record", "n_records", "thin"))

CHAIN_AXIS = "chains"


@lru_cache(maxsize=32)
def _sharded_run_calls(step, record, n_records, thin, mesh):
    """:func:`_run_calls` in ``shard_map``: each device runs its group of chains, data replicated."""
    sharded = jax.shard_map(
        partial(_run_calls, step, record, n_records=n_records, thin=thin), mesh=mesh,
        in_specs=(P(CHAIN_AXIS), P(CHAIN_AXIS), P(), P()), out_specs=P(CHAIN_AXIS), check_vma=False,
    )
    return jit(sharded)


def _chain_mesh(devices: Any, n_chains: int) -> Mesh | None:
    """A one-axis mesh over ``devices`` (None: one device); the chains must split evenly."""
    mesh = device_mesh(devices, CHAIN_AXIS)
    if mesh is not None and n_chains % mesh.devices.size:
        raise ValueError(f"devices: {n_chains} chains do not split evenly over {mesh.devices.size} devices")
    return mesh


def _overflowed(states: Any) -> bool:
    flag = getattr(states, "overflow", None)
    return bool(np.any(gather(flag))) if flag is not None else False


def _mesh_processes(mesh: Mesh | None) -> int:
    """Number of processes whose devices are in ``mesh`` (1 or all of them)."""
    if mesh is None:
        return 1
    n_processes = len({device.process_index for device in mesh.devices.flat})
    if 1 < n_processes != jax.process_count():
        raise ValueError(f"devices: spans {n_processes} of the {jax.process_count()} processes; pass the devices of "
                         "this process only or of every process (jax.devices())")
    return n_processes


def sample_chains(
    rng_key: jax.Array,
    step: Callable[[jax.Array, Any, Any], tuple[Any, Any]],
    init_states: Any,
    data: Any,
    *,
    n_warmup: int = 100,
    n_draws: int = 200,
    thin: int = 1,
    draws_per_call: int = 10,
    time_budget: float | None = None,
    progress: bool = True,
    record: Callable[[Any, Any], dict[str, jax.Array]] = record_gibbs,
    on_overflow: str = "grow",
    devices: Any = None,
    process_local: bool = False,
    first_sweep: int = 0,
    stop_when: Callable[[ChainResult], bool] | None = None,
) -> ChainResult:
    """Run a batch of chains of ``step`` with warm-up and thinning.

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key; chain c uses ``split(rng_key, n_chains)[c]``.
    step : callable
        ``step(rng_key, state, data) -> (state, info)`` for one chain (e.g. from
        :func:`inference.neal.build_kernel`). Keep the same function object across calls to
        reuse the compiled code.
    init_states : pytree
        Batched initial states, chains on the leading axis (see :func:`stack_states`).
    data : array_like
        Passed to ``step`` unchanged (shared by all chains).
    n_warmup : int
        Sweeps discarded before the first draw; rounded up to whole calls of
        ``draws_per_call * thin`` sweeps.
    n_draws : int
        Draws to record per chain.
    thin : int
        Sweeps per recorded draw.
    draws_per_call : int
        Draws per jitted call (the granularity of the progress bar, of Ctrl-C and of the time
        budget). Calls of one size share one compiled program; when ``n_draws`` is not a
        multiple of it, the last, shorter call compiles the step once more (10-12 s for the
        sub-cluster sampler's step on 2 CPU cores), so prefer a divisor of ``n_draws``.
    time_budget : float, optional
        Seconds after which no new call is started; the finished draws are returned.
    progress : bool
        Show a tqdm progress bar.
    record : callable
        ``record(state, info) -> dict`` of arrays kept per draw (default :func:`record_gibbs`).
    on_overflow : {"grow", "raise"}
        What to do when a Dirichlet-process chain runs out of capacity (see the module
        docstring).
    devices : int or sequence of jax devices, optional
        Spread the chains over devices (``shard_map`` over the chain axis); the number of
        chains must be a multiple of the number of devices. An int takes the first that many of
        ``jax.devices()``. The draws equal those of the single-device run with the same key.
        After ``jax.distributed.initialize()``, ``jax.devices()`` spans every process (see the
        module docstring).
    process_local : bool
        With ``devices``: ``init_states`` holds only the chains of this process's devices (the
        same number in every process), not all of them; the result still holds every chain.
    first_sweep : int
        Index of the first sweep: 0 for new chains, ``result.next_sweep`` to continue the chains
        of an earlier ``result`` from ``result.final_state`` with the same key (usually with
        ``n_warmup=0``). The continued chains are bit-identical to an uninterrupted run.
    stop_when : callable, optional
        ``stop_when(so_far) -> bool``, asked about the draws so far (a :class:`ChainResult`) once
        there are :data:`STOP_CHECK_MIN_DRAWS` per chain and again each time they have grown by
        :data:`STOP_CHECK_GROWTH`; True ends the run there (``stopped_by="mixed"``, completed).

    Returns
    -------
    ChainResult
        ``stopped_by`` says why the run ended.

    Raises
    ------
    CapacityError
        With ``on_overflow="raise"``, when a chain needed more than ``max_clusters`` clusters.
    """
    rng_key = check_key("rng_key", rng_key)
    n_warmup = check_int("n_warmup", n_warmup, minimum=0)
    n_draws = check_int("n_draws", n_draws, minimum=1)
    thin = check_int("thin", thin, minimum=1)
    draws_per_call = check_int("draws_per_call", draws_per_call, minimum=1)
    if time_budget is not None:
        time_budget = check_real("time_budget", time_budget, low=0.0, low_open=True)
    on_overflow = check_choice("on_overflow", on_overflow, ("grow", "raise"))
    first_sweep = check_int("first_sweep", first_sweep, minimum=0)
    if not callable(step):
        raise TypeError(f"step: expected a callable, got {type(step).__name__}")
    if stop_when is not None and not callable(stop_when):
        raise TypeError(f"stop_when: expected a callable or None, got {type(stop_when).__name__}")
    if stop_when is not None and not isinstance(stop_when, StopRule):
        stop_when = StopRule(stop_when)
    leaves = jax.tree_util.tree_leaves(init_states)
    leading = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in leaves}
    if len(leading) != 1 or None in leading or 0 in leading:
        raise ValueError("init_states: expected every array to have the same leading chain axis (see stack_states)")
    n_chains = leading.pop()
    if not isinstance(process_local, (bool, np.bool_)):
        raise TypeError(f"process_local: expected a bool, got {process_local!r}")
    if process_local and devices is None:
        raise ValueError("process_local: needs devices= (e.g. jax.devices() after jax.distributed.initialize())")
    if _overflowed(init_states):
        raise ValueError("init_states: the overflow flag is set; start from states that did not overflow")
    mesh = device_mesh(devices, CHAIN_AXIS)
    n_processes = _mesh_processes(mesh)
    if process_local and n_processes > 1:
        init_states = local_rows(init_states, mesh, CHAIN_AXIS)  # checks the processes' numbers of chains
        n_chains = jax.tree_util.tree_leaves(init_states)[0].shape[0]
    mesh = _chain_mesh(devices, n_chains)
    chain_keys = jax.random.split(rng_key, n_chains)
    data = jax.tree_util.tree_map(jnp.asarray, data)
    if mesh is not None:
        # Each device keeps its group of chains and a copy of the data for the whole run; across
        # processes each process places only its own chains (distribute: no data sent, no check).
        by_chain, replicated = NamedSharding(mesh, P(CHAIN_AXIS)), NamedSharding(mesh, P())
        chain_keys = distribute(chain_keys, by_chain)
        if not (process_local and n_processes > 1):
            init_states = distribute(init_states, by_chain)
        data = distribute(data, replicated)

    draws_per_call = min(draws_per_call, n_draws)
    sweeps_per_call = draws_per_call * thin
    warmup_calls = math.ceil(n_warmup / sweeps_per_call)
    full, remainder = divmod(n_draws, draws_per_call)
    # The calls, made as they are run: a generous cap on the draws (until mixed) need not fit a list.
    calls = itertools.chain(itertools.repeat((draws_per_call, False), warmup_calls),
                            itertools.repeat((draws_per_call, True), full), [(remainder, True)] if remainder else [])
    total_sweeps = (warmup_calls * draws_per_call + n_draws) * thin

    states = init_states
    chunks: list[dict[str, np.ndarray]] = []
    completed = True
    stopped_by = "n_draws"
    enough = False  # stop_when said the draws so far are enough
    n_kept = 0  # draws per chain kept so far
    sweep = first_sweep
    made_by = provenance()
    start = time.perf_counter()
    several = n_processes > 1  # the processes gather the draws and agree on stopping after every call
    until = UNTIL_MIXED_BAR if stop_when is not None else ""
    bar = tqdm(total=total_sweeps, disable=not progress, unit="sweep", desc=f"{n_chains} chains{until}")
    with ExitStack() as contexts:
        interrupt = contexts.enter_context(DeferredInterrupt())  # Ctrl-C acted on after the call in flight
        contexts.enter_context(lost_peers_named(n_processes))
        contexts.callback(bar.close)
        for n_records, keep in calls:
            while True:
                try:
                    if mesh is None:
                        new_states, records = _run_calls_jit(
                            step, record, chain_keys, states, data, jnp.int32(sweep), n_records, thin
                        )
                    else:
                        run = _sharded_run_calls(step, record, n_records, thin, mesh)
                        new_states, records = run(chain_keys, states, data, np.int32(sweep) if several
                                                  else jnp.int32(sweep))
                    jax.block_until_ready(new_states)
                except KeyboardInterrupt:
                    # A second Ctrl-C (or one where no handler defers it): in one process the call in
                    # flight is dropped and the finished ones returned; across processes the run is
                    # abandoned (the others then fail, saying a process died).
                    if several:
                        raise
                    completed, stopped_by = False, "interrupted"
                    break
                if not _overflowed(new_states):
                    break
                grown, shortfall = _handle_overflow(gather(states) if several else states,
                                                    gather(new_states) if several else new_states, on_overflow)
                if shortfall is not None:  # the same on every process: all stop, keeping the finished draws
                    warnings.warn(f"sample_chains: stopped after {sweep - first_sweep} sweeps, the draws finished so "
                                  f"far returned (completed=False): {shortfall}", RuntimeWarning, stacklevel=2)
                    completed, stopped_by = False, "capacity"
                    break
                # grown on every process from the gathered states, then laid out again
                states = distribute(grown, by_chain) if several else grown
            if not completed:
                break
            states = new_states
            sweep += n_records * thin
            if keep:
                chunks.append(gather(records))
                n_kept += n_records
            bar.update(n_records * thin)
            # why to stop after this call: 0 go on, 1 the time budget, 2 Ctrl-C (the larger wins across processes)
            stop = int(time_budget is not None and time.perf_counter() - start > time_budget)
            if stop_when is not None and keep and stop_when.due(n_kept) and sweep < first_sweep + total_sweeps:
                so_far = ChainResult(samples=_joined(chunks), final_state=states,
                                     n_warmup=warmup_calls * sweeps_per_call, thin=thin, completed=True,
                                     seconds=time.perf_counter() - start, next_sweep=sweep, provenance=made_by)
                enough = bool(stop_when(so_far))
                if several:  # asked on every process at the same draw; one that is done ends them all
                    enough = bool(process_max(int(enough)))
            stop = 2 if interrupt.requested else stop
            if several:  # one process out of time or interrupted stops them all
                stop = int(process_max(stop))
            if enough:
                stopped_by = "mixed"
                break
            if stop and sweep < first_sweep + total_sweeps:
                completed, stopped_by = False, ("time_budget", "interrupted")[stop - 1]
                break
        if several:
            states = jax.tree_util.tree_map(jnp.asarray, gather(states))
    return ChainResult(
        samples=_joined(chunks),
        final_state=states,
        n_warmup=warmup_calls * sweeps_per_call,
        thin=thin,
        completed=completed,
        seconds=time.perf_counter() - start,
        next_sweep=sweep,
        provenance=made_by,
        stopped_by=stopped_by,
    )


#: Why a run of chains ended (:attr:`ChainResult.stopped_by`); the last three leave it ``completed=False``.
STOPPED_BY = ("n_draws", "mixed", "interrupted", "time_budget", "capacity")

#: :func:`sample_chains` asks its ``stop_when`` again once the draws have grown by this factor.
STOP_CHECK_GROWTH = 1.1
#: Draws per chain before :func:`sample_chains` first asks its ``stop_when``. The fits' until-mixed
#: rules (:func:`inference.diagnostics.mixes_to_stop`) let a quantity constant in every draw so far end
#: a run only later, once the chains hold 400 draws in all: 20 draws without a move showed nothing.
STOP_CHECK_MIN_DRAWS = 20


class StopRule:
    """A ``stop_when`` rule asked each time the draws have grown by :data:`STOP_CHECK_GROWTH`.

    :func:`sample_chains` wraps its ``stop_when`` in one; a driver of its own loop over calls (the
    IRM's) asks ``due(n_draws)`` after each call (``n_draws``: the draws per chain of this run so
    far) and, when it is, ``ask(so_far, n_draws)``, which passes ``so_far`` (the draws so far, in
    whatever form the rule reads) to the rule. ``draws_before`` counts the draws of the runs these
    chains continue, so that the draws of both runs set when it is due.
    """

    def __init__(self, rule: Callable[[Any], bool], draws_before: int = 0):
        self.rule, self.draws_before = rule, draws_before
        self.next_check = max(STOP_CHECK_MIN_DRAWS, math.ceil(draws_before * STOP_CHECK_GROWTH))

    def due(self, n_draws: int) -> bool:
        """Whether to ask, with ``n_draws`` draws per chain in this run."""
        return self.draws_before + n_draws >= self.next_check

    def ask(self, so_far: Any, n_draws: int) -> bool:
        """The rule's answer about ``so_far``, which holds ``n_draws`` draws per chain of this run."""
        total = self.draws_before + n_draws
        self.next_check = max(total + 1, math.ceil(total * STOP_CHECK_GROWTH))
        return bool(self.rule(so_far))

    def __call__(self, so_far: ChainResult) -> bool:
        return self.ask(so_far, so_far.n_draws)


def _joined(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The draws of successive calls, one array per name (chain, draw, ...)."""
    return {name: np.concatenate([chunk[name] for chunk in chunks], axis=1) for name in chunks[0]} if chunks else {}


def continue_chains(
    rng_key: jax.Array,
    step: Callable[[jax.Array, Any, Any], tuple[Any, Any]],
    previous: ChainResult,
    data: Any,
    *,
    n_draws: int,
    draws_per_call: int = 10,
    time_budget: float | None = None,
    progress: bool = True,
    record: Callable[[Any, Any], dict[str, jax.Array]] = record_gibbs,
    on_overflow: str = "grow",
    stop_when: Callable[[ChainResult], bool] | None = None,
) -> ChainResult:
    """Run the chains of ``previous`` for ``n_draws`` more draws each; one result holding both runs.

    The chains go on from ``previous.final_state`` at sweep ``previous.next_sweep`` with the key
    ``previous`` was sampled with (``rng_key``), finishing first the warm-up ``previous`` was
    stopped in (Ctrl-C, a time budget), thinned as ``previous`` was. The new draws are appended
    to ``previous``'s; ``n_warmup`` counts the warm-up sweeps run in both and ``seconds`` adds
    their times. With the same versions, backend, float width and CPU the result is bit for bit
    one longer run's when ``draws_per_call`` is the same in both (it sets how the warm-up is
    rounded); where ``previous.provenance`` says otherwise a
    :class:`~inference.provenance.ProvenanceWarning` is issued, and the draws are valid but not
    those bits. ``stop_when`` is asked about ``previous``'s draws and the new ones together. Other
    arguments as :func:`sample_chains`.
    """
    if not isinstance(previous, ChainResult):
        raise TypeError(f"previous: expected a ChainResult, got {type(previous).__name__}")
    n_draws = check_int("n_draws", n_draws, minimum=1)
    check_same_float_width(previous.provenance, "previous: these chains")
    warn_if_made_elsewhere(previous.provenance, "previous: these chains", saved_word="then", current_word="now",
                           stacklevel=user_stacklevel())
    if stop_when is not None and not callable(stop_when):
        raise TypeError(f"stop_when: expected a callable or None, got {type(stop_when).__name__}")
    warmup_done = min(previous.n_warmup, previous.next_sweep)
    more = sample_chains(
        rng_key, step, previous.final_state, data,
        n_warmup=previous.n_warmup - warmup_done, n_draws=n_draws, thin=previous.thin,
        draws_per_call=draws_per_call, time_budget=time_budget, progress=progress, record=record,
        on_overflow=on_overflow, first_sweep=previous.next_sweep,
        # asked about both runs' draws, as their total grows by a tenth (not the new draws alone)
        stop_when=None if stop_when is None else StopRule(
            lambda so_far: stop_when(_appended(previous, so_far, warmup_done)), draws_before=previous.n_draws),
    )
    return _appended(previous, more, warmup_done)


def _appended(previous: ChainResult, more: ChainResult, warmup_done: int) -> ChainResult:
    """One result of ``previous`` and ``more``, the run that continued it (``warmup_done`` warm-up
    sweeps of ``previous`` were run before it stopped)."""
    samples = more.samples or previous.samples
    if previous.samples and more.samples:
        samples = {name: np.concatenate([previous.samples[name], more.samples[name]], axis=1)
                   for name in previous.samples}
    return ChainResult(
        samples=samples,
        final_state=more.final_state,
        n_warmup=warmup_done + more.n_warmup,
        thin=previous.thin,
        completed=more.completed,
        seconds=previous.seconds + more.seconds,
        next_sweep=more.next_sweep,
        provenance=previous.provenance or more.provenance,
        stopped_by=more.stopped_by,
    )


#: Copies of the chains' states a jitted call holds while it steps them (input, output, temporaries).
STATE_COPIES = 3


def _grown_states_shortfall(grown: Any) -> str | None:
    """None if a call can step the (possibly abstract) ``grown`` states, else why memory cannot hold them."""
    return memory_shortfall(STATE_COPIES * tree_nbytes(grown), "stepping the chains at the grown capacity")


def _handle_overflow(states: Any, overflowed: Any, on_overflow: str) -> tuple[Any, str | None]:
    """Grown copy of ``states`` (the last states without overflow) after ``overflowed``, or why not.

    Returns (grown states, None), or (None, the sentence saying that memory cannot hold the
    grown states): the starting capacity's memory estimate of a model does not cover growth,
    so it is checked again here (from shapes, before growing, for a :class:`GibbsState`).
    A state class of another kernel can take part by defining
    ``grow_after_overflow(self, overflowed) -> grown state`` (raising :class:`CapacityError`
    when it cannot grow), as :class:`zoo.dirichlet.supervised.SupervisedState` does.
    """
    grow = getattr(states, "grow_after_overflow", None)
    if grow is not None:
        if on_overflow == "raise":
            raise CapacityError("a chain ran out of capacity; use on_overflow='grow' or a larger capacity")
        grown = grow(overflowed)
        shortfall = _grown_states_shortfall(grown)
        return (None, shortfall) if shortfall is not None else (grown, None)
    if not isinstance(states, GibbsState):
        raise CapacityError("a chain reported overflow but its state cannot be grown")
    capacity = states.max_clusters
    n_points = states.assignments.shape[-1]
    if on_overflow == "raise" or capacity >= n_points:
        raise CapacityError(
            f"max_clusters={capacity} is too small: a sweep needed a new cluster while all slots "
            f"were taken; increase max_clusters or use on_overflow='grow'"
        )
    new_capacity = min(2 * capacity, n_points)
    shortfall = _grown_states_shortfall(jax.eval_shape(partial(grow_capacity, max_clusters=new_capacity), states))
    if shortfall is not None:
        return None, f"max_clusters {capacity} -> {new_capacity}: {shortfall}"
    return grow_capacity(states, new_capacity), None
