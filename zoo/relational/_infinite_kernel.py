"""One sweep of the IRM sampler in XLA: :func:`build_kernel` (BlackJAX's shape).

A sweep visits every individual of every domain (collapsed Gibbs in the style of Neal's
Algorithm 3, a ``lax.scan`` per domain, :func:`_gibbs_domain`, or its numba twin
:func:`inference.native.relational_gibbs.numba_gibbs_sweep` run as an XLA custom call, called by
:func:`_numba_sweep`), optionally makes split–merge moves of each domain
(:mod:`zoo.relational._infinite_moves`, or their numba twin, also a custom call), then resamples
every α_D (Escobar & West) and every γ_r (griddy Gibbs on :data:`HYPER_GRID`). The conditional of one individual is in
:mod:`zoo.relational._infinite_conditional`; block counts are integers, so every log Γ is a
look-up in a table of log Γ(γ_u + m) built once per sweep (:func:`log_gamma_tables`). The model
and its equations are described in :mod:`zoo.relational.infinite`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from inference.concentration import GammaPrior, escobar_west_update
from inference.native.relational_gibbs import numba_gibbs_sweep
from inference.native.relational_moves import numba_split_merge_moves
from zoo.relational._infinite_conditional import log_gamma_tables, put_in, slot_log_weights, take_out
from zoo.relational._infinite_moves import MOVE_STATISTICS, all_move_draws, split_merge_moves
from zoo.relational._infinite_state import IRMInfo, IRMState, _log_beta, log_joint, upper_blocks
from zoo.relational.data import RelationalArrays, RelationalSchema


# ----------------------------------------------------------------------------- Gibbs over one domain
def _inverse_cdf(logits: Any, uniform: Any) -> Any:
    """Index drawn from softmax(``logits``) with one ``uniform`` in [0, 1), as the numba loop draws it:
    the first index whose running sum of exp(logits - max) reaches ``uniform`` × the total (a
    zero-weight index repeats its predecessor's sum exactly, so it is never drawn)."""
    weights = jnp.exp(logits - jnp.max(logits))
    cumulative = jnp.cumsum(weights)
    target = jnp.maximum(uniform * cumulative[-1], jnp.finfo(weights.dtype).tiny)
    return jnp.argmax(cumulative >= target).astype(jnp.int32)


def _gibbs_domain(domain: int, uniforms: Any, state: IRMState, arrays: RelationalArrays, tables: tuple, *,
                  schema: RelationalSchema, capacities: tuple) -> IRMState:
    """One collapsed Gibbs update (Neal 2000 Algorithm 3) per individual of ``domain``, each drawn
    by inverse CDF with its own entry of ``uniforms`` (one per individual of the domain); the
    conditional is :func:`~zoo.relational._infinite_conditional.slot_log_weights`."""

    def visit(state, inputs):
        individual, uniform = inputs
        out = take_out(state, domain, individual, arrays, schema=schema, capacities=capacities)
        logits, has_free = slot_log_weights(out, domain, state.concentrations[domain], tables, schema=schema,
                                            capacities=capacities)
        new = _inverse_cdf(logits, uniform.astype(logits.dtype))
        state = put_in(state, out, domain, individual, new, schema=schema)
        return state._replace(overflow=state.overflow | ~has_free), None

    individuals = jnp.arange(schema.domain_sizes[domain])
    state, _ = jax.lax.scan(visit, state, (individuals, uniforms))
    return state


# ----------------------------------------------------------------------------- hyperparameters
#: Support of every γ_{r,u}: a log-spaced grid (griddy Gibbs, exact for this discretised prior).
#: A point g carries the exponential prior's mass over its cell, which is ∝ g e^{-rate g} on a grid
#: whose cells have equal width in log γ (:func:`hyper_log_prior`).
HYPER_GRID = np.exp(np.linspace(np.log(1e-2), np.log(1e2), 61))


def hyper_log_prior(grid: Any, prior_rate: float) -> Any:
    """Unnormalised log prior of γ on a log-spaced grid: an Exponential(rate) discretised.

    The grid's cells have equal width in log γ, so a point g stands for the interval
    [g e^{-h/2}, g e^{h/2}], whose Exponential(rate) mass is ≈ rate e^{-rate g} · g h: the
    density times the Jacobian dγ = γ d log γ. Weighting the points by e^{-rate g} alone (as
    before 2026-11-27) left that Jacobian out and made small γ far too likely: on
    :data:`HYPER_GRID` with rate 1 it gave P(γ < 0.1) = 0.54 and a prior mean of 0.24,
    against 0.095 and 1 for the exponential; with the Jacobian 0.08 and 1.01.
    """
    return jnp.log(grid) - prior_rate * grid


def _resample_hyper(rng_key: Any, counts: Any, hyper: Any, prior_rate: float) -> Any:
    """Griddy Gibbs for each γ_u in turn: γ_u lives on :data:`HYPER_GRID` under the discretised
    exponential prior of :func:`hyper_log_prior`.

    The conditional of γ_u given the others and the block counts is evaluated at every grid point
    (all blocks at once) and a point drawn from it; empty blocks contribute nothing.
    """
    n_values = hyper.shape[0]
    grid = jnp.asarray(HYPER_GRID, hyper.dtype)
    keys = jax.random.split(rng_key, n_values)
    flat = counts.reshape(-1, n_values).astype(hyper.dtype)
    occupied = jnp.sum(flat, axis=1) > 0

    def update(hyper, inputs):
        value, key = inputs
        candidates = jnp.broadcast_to(hyper, (grid.shape[0], n_values)).at[:, value].set(grid)
        blocks = jnp.where(occupied[None, :], _log_beta(candidates[:, None, :] + flat[None, :, :])
                           - _log_beta(candidates)[:, None], 0.0)
        log_posterior = jnp.sum(blocks, axis=1) + hyper_log_prior(grid, prior_rate)
        chosen = jax.random.categorical(key, log_posterior)
        return hyper.at[value].set(grid[chosen]), None

    hyper, _ = jax.lax.scan(update, hyper, (jnp.arange(n_values), keys))
    return hyper


def _pack(state: IRMState, tables: tuple, *, schema: RelationalSchema, capacities: tuple):
    """The chain's state stacked and padded into the arrays the numba loops take: z (n_individuals
    + 1,) in global order (the virtual individual last), sizes (D, K), counts (R, K, K, V) and the
    log Γ tables (R, V + 1, L), K, V and L the largest of their kind."""
    n_max = max(capacities)
    n_values_max = max(schema.n_values)
    length = max(table.shape[1] for table in tables)
    z = jnp.concatenate(list(state.assignments) + [jnp.zeros(1, jnp.int32)]).astype(jnp.int32)
    sizes = jnp.stack([jnp.pad(size, (0, n_max - size.shape[0])) for size in state.sizes])
    counts = jnp.stack([jnp.pad(c if c.ndim == 3 else c[:, None, :],
                                [(0, n_max - c.shape[0]), (0, n_max - (c.shape[1] if c.ndim == 3 else 1)),
                                 (0, n_values_max - c.shape[-1])]) for c in state.counts])
    table = jnp.stack([jnp.pad(t, [(0, n_values_max + 1 - t.shape[0]), (0, length - t.shape[1])]) for t in tables])
    # The total row of each table sits at index |r| (padding rows come after it).
    return z, sizes, counts, table


def _unpack(state: IRMState, z: Any, sizes: Any, counts: Any, overflow: Any, *, schema: RelationalSchema,
            capacities: tuple) -> IRMState:
    """``state`` with the numba loops' z, sizes and counts split back (inverse of :func:`_pack`)."""
    offsets = np.concatenate([[0], np.cumsum(schema.domain_sizes)])
    assignments = tuple(z[offsets[d]: offsets[d + 1]] for d in range(len(schema.domain_sizes)))
    new_sizes = tuple(sizes[d, : capacities[d]] for d in range(len(schema.domain_sizes)))
    new_counts = []
    for r, domains in enumerate(schema.relation_domains):
        block = counts[r, : capacities[domains[0]]]
        if len(domains) == 2:
            new_counts.append(block[:, : capacities[domains[1]], : schema.n_values[r]])
        else:
            new_counts.append(block[:, 0, : schema.n_values[r]])
    return state._replace(assignments=assignments, sizes=new_sizes, counts=tuple(new_counts),
                          overflow=state.overflow | overflow)


def _same_domain(schema: RelationalSchema) -> np.ndarray:
    """Per relation: 0, 1 for a relation over D × D, 2 for a symmetric one (the numba loops' codes)."""
    return np.asarray([(len(d) == 2 and d[0] == d[1]) * (1 + schema.is_symmetric(r))
                       for r, d in enumerate(schema.relation_domains)], np.int64)


def _seen(arrays: RelationalArrays) -> Any:
    return jnp.concatenate([(w[:-1] > 0).astype(jnp.int32) for w in arrays.weights])


def _numba_sweep(uniforms: Any, move_keys: Any, state: IRMState, arrays: RelationalArrays, tables: tuple, flat: Any,
                 *, n_moves: int, n_scans: int, schema: RelationalSchema,
                 capacities: tuple) -> tuple[IRMState, Any]:
    """One sweep's Gibbs updates and split–merge moves in numba loops run by XLA as custom calls.

    The chain's state is packed once (:func:`_pack`) into the arrays the loops take, all Gibbs
    updates run in one call (:func:`numba_gibbs_sweep`, the same uniform per individual as
    :func:`_gibbs_domain` picks its new slot by inverse CDF), then ``n_moves`` moves of each domain
    of two or more individuals in one call per domain
    (:func:`inference.native.relational_moves.numba_split_merge_moves`, from the random numbers of
    the XLA moves, :func:`zoo.relational._infinite_moves.all_move_draws`, with ``move_keys[d]``),
    and the result is split back. Both backends give the same chain (up to float rounding).
    Returns the state and the moves' counts (D, 4).
    """
    z, sizes, counts, table = _pack(state, tables, schema=schema, capacities=capacities)
    log_alpha = jnp.log(state.concentrations)
    domain_of = np.concatenate([np.full(size, d) for d, size in enumerate(schema.domain_sizes)]).astype(np.int64)
    seen = _seen(arrays)
    same_domain = _same_domain(schema)  # the visits' and the moves' codes of each relation
    z, sizes, counts, overflow = numba_gibbs_sweep(
        z, sizes, counts, table, log_alpha, uniforms, seen, flat, domain_of, np.asarray(capacities, np.int64),
        np.asarray(schema.n_values, np.int64), same_domain)
    moves = jnp.zeros((len(schema.domain_sizes), len(MOVE_STATISTICS)), jnp.int32)
    for domain, n_individuals in enumerate(schema.domain_sizes):
        if n_moves and n_individuals >= 2:
            draws = all_move_draws(move_keys[domain], n_moves, n_individuals, n_scans, tables[0].dtype)
            z, sizes, counts, moves_overflow, domain_moves = numba_split_merge_moves(
                z, sizes, counts, table, state.concentrations, draws, seen, flat, domain=domain,
                offset=int(sum(schema.domain_sizes[:domain])), domain_sizes=schema.domain_sizes,
                n_values=schema.n_values, relation_domains=schema.relation_domains, same_domain=same_domain)
            overflow = overflow | moves_overflow
            moves = moves.at[domain].set(domain_moves)
    return _unpack(state, z, sizes, counts, overflow, schema=schema, capacities=capacities), moves


# ----------------------------------------------------------------------------- the kernel
def build_kernel(schema: RelationalSchema, capacities: tuple[int, ...], *, concentration_prior: GammaPrior,
                 hyper_prior_rate: float, sample_concentration: bool = True, sample_hyper: bool = True,
                 backend: str = "xla", n_split_merge: int = 0, split_merge_scans: int = 0):
    """Return ``step(rng_key, state, arrays, flat=None) -> (state, info)``: one sweep of the IRM sampler.

    A sweep visits every individual of every domain (Gibbs, Algorithm 3 style), then makes
    ``n_split_merge`` split–merge moves of each domain of two or more individuals
    (:func:`zoo.relational._infinite_moves.split_merge_moves`, launch states from
    ``split_merge_scans`` restricted Gibbs scans), then resamples each α_D (Escobar & West) and
    each γ_r (griddy Gibbs), as enabled. ``backend="xla"`` runs the visits as a ``lax.scan`` per
    domain (any device); ``"numba"`` runs them in a compiled host loop (CPU; needs ``flat`` from
    :func:`zoo.relational.latent_class.flat_cells`), and the moves likewise (:func:`_numba_sweep`),
    with the XLA moves' random numbers. ``backend`` is resolved already (:func:`inference.native.resolve_backend`).
    Without moves the chain's random numbers are those of a kernel that has none.
    """

    def step(rng_key: Any, state: IRMState, arrays: RelationalArrays, flat: Any = None) -> tuple[IRMState, IRMInfo]:
        n_domains = len(schema.domain_sizes)
        key_domains, key_alpha, key_hyper = jax.random.split(rng_key, 3)
        tables = log_gamma_tables(state.hyper, arrays)
        # One uniform per individual in global order (and one for the virtual individual of unary
        # relations), drawn before the visits so that both backends use the same numbers.
        uniforms = jax.random.uniform(key_domains, (sum(schema.domain_sizes) + 1,), jnp.result_type(*tables))
        # The moves' keys, apart from the other keys as in a kernel without moves.
        move_keys = jax.random.split(jax.random.fold_in(rng_key, 1), n_domains)
        if backend == "numba":
            state, moves = _numba_sweep(uniforms, move_keys, state, arrays, tables, flat, n_moves=n_split_merge,
                                        n_scans=split_merge_scans, schema=schema, capacities=capacities)
        else:
            moves = jnp.zeros((n_domains, len(MOVE_STATISTICS)), jnp.int32)
            offsets = np.cumsum([0, *schema.domain_sizes])
            for domain in range(n_domains):
                state = _gibbs_domain(domain, uniforms[offsets[domain]: offsets[domain + 1]], state, arrays, tables,
                                      schema=schema, capacities=capacities)
            for domain in range(n_domains):
                if n_split_merge and schema.domain_sizes[domain] >= 2:
                    state, counts = split_merge_moves(move_keys[domain], state, arrays, tables, domain=domain,
                                                      n_moves=n_split_merge, n_scans=split_merge_scans, schema=schema,
                                                      capacities=capacities)
                    moves = moves.at[domain].set(counts)
        n_clusters = jnp.stack([jnp.sum(sizes > 0).astype(jnp.int32) for sizes in state.sizes])
        if sample_concentration:
            # One Escobar–West update per domain, vmapped so the program holds a single copy.
            update = jax.vmap(lambda key, alpha, k, n: escobar_west_update(key, alpha, k, n, concentration_prior))
            concentrations = update(jax.random.split(key_alpha, n_domains), state.concentrations, n_clusters,
                                    jnp.asarray(schema.domain_sizes, jnp.int32))
            state = state._replace(concentrations=concentrations.astype(state.concentrations.dtype))
        if sample_hyper:
            keys = jax.random.split(key_hyper, len(state.hyper))
            # A symmetric relation's blocks are the unordered pairs of clusters: (k, l) for k <= l.
            state = state._replace(hyper=tuple(
                _resample_hyper(key, jnp.where(upper_blocks(counts.shape[0]), counts, 0) if schema.is_symmetric(r)
                                else counts, hyper, hyper_prior_rate).astype(hyper.dtype)
                for r, (key, counts, hyper) in enumerate(zip(keys, state.counts, state.hyper))))
        info = IRMInfo(n_clusters, log_joint(state, schema), state.concentrations, state.hyper, state.overflow,
                       moves)
        return state, info

    return step
