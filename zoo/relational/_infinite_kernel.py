"""One sweep of the IRM sampler in XLA: :func:`build_kernel` (BlackJAX's shape).

A sweep visits every individual of every domain (collapsed Gibbs in the style of Neal's
Algorithm 3, a ``lax.scan`` per domain, :func:`_gibbs_domain`, or its numba twin
:func:`inference.native.relational_gibbs.numba_gibbs_sweep` run as an XLA custom call, called by
:func:`_numba_gibbs`), then resamples every α_D (Escobar & West) and every γ_r (griddy Gibbs
on :data:`HYPER_GRID`). Block counts are integers, so every log Γ is a look-up in a table of
log Γ(γ_u + m) built once per sweep (:func:`log_gamma_tables`). The model and its equations are
described in :mod:`zoo.relational.infinite`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from inference.concentration import GammaPrior, escobar_west_update
from inference.native.relational_gibbs import numba_gibbs_sweep
from zoo.relational._infinite_state import IRMInfo, IRMState, _log_beta, log_joint
from zoo.relational.data import RelationalArrays, RelationalSchema


# ----------------------------------------------------------------------------- Gibbs over one domain
def _cell_counts(relation: int, position: int, individual: Any, state_assignments: tuple,
                 arrays: RelationalArrays, schema: RelationalSchema, capacities: tuple) -> Any:
    """C[l, u]: weight of the individual's cells with value u whose other argument sits in slot l."""
    cells = arrays.blankets[relation][position][individual]
    seen = (arrays.weights[relation][cells] > 0).astype(jnp.int32)
    values = arrays.values[relation][cells]
    domains = schema.relation_domains[relation]
    n_values = schema.n_values[relation]
    if len(domains) == 1:
        return jnp.zeros(n_values, jnp.int32).at[values].add(seen)
    other = 1 - position
    slots = state_assignments[domains[other]][arrays.entries[relation][cells, other]]
    return jnp.zeros((capacities[domains[other]], n_values), jnp.int32).at[slots, values].add(seen)


def _move(counts: Any, slot: Any, added: Any, position: int, arity: int) -> Any:
    if arity == 1 or position == 0:
        return counts.at[slot].add(added)
    return counts.at[:, slot].add(added)


def log_gamma_tables(hyper: tuple, arrays: RelationalArrays) -> tuple:
    """Per relation, T[u, m] = log Γ(γ_u + m) and T[|r|, m] = log Γ(Σ_u γ_u + m) for m = 0..n_observed.

    Block counts are integers, so during the Gibbs sweep (γ fixed) every log Γ is a table look-up.
    """
    tables = []
    for concentration, weights in zip(hyper, arrays.weights):
        counts = jnp.arange(weights.shape[0], dtype=concentration.dtype)
        shifts = jnp.concatenate([concentration, jnp.sum(concentration)[None]])
        tables.append(gammaln(shifts[:, None] + counts[None, :]))
    return tuple(tables)


def _sum_log_beta(table: Any, terms: list) -> Any:
    """Σ_t sign_t Σ_{reduced axes} log B(γ + n_t), with log Γ looked up in ``table``.

    ``terms`` holds (n, sign, n_reduce): integer counts ``n`` of shape (K, ..., |r|); the log B
    values are summed over the ``n_reduce`` axes after the first, one (K,) vector per term.
    """
    n_values = table.shape[0] - 1
    total = 0.0
    for counts, sign, n_reduce in terms:
        per_value = sum(table[value][counts[..., value]] for value in range(n_values))
        per_block = per_value - table[n_values][jnp.sum(counts, axis=-1)]
        reduced = jnp.sum(per_block, axis=tuple(range(1, 1 + n_reduce))) if n_reduce else per_block
        total = total + sign * reduced
    return total


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
    by inverse CDF with its own entry of ``uniforms`` (one per individual of the domain)."""
    incidences = schema.incidences(domain)
    capacity = capacities[domain]
    slots = jnp.arange(capacity)

    def visit(carry, inputs):
        state = carry
        individual, uniform = inputs
        old = state.assignments[domain][individual]
        cell_counts = [_cell_counts(relation, position, individual, state.assignments, arrays, schema, capacities)
                       for relation, position in incidences]
        counts = list(state.counts)
        for (relation, position), added in zip(incidences, cell_counts):
            arity = len(schema.relation_domains[relation])
            counts[relation] = _move(counts[relation], old, -added, position, arity)
        sizes = state.sizes[domain].at[old].add(-1)
        # CRP prior: n_k for an occupied slot, α for the first free slot (Algorithm 3).
        occupied = sizes > 0
        free = ~occupied
        first_free = jnp.argmax(free)
        has_free = jnp.any(free)
        dtype = state.concentrations.dtype
        log_prior = jnp.where(occupied, jnp.log(jnp.maximum(sizes, 1).astype(dtype)), -jnp.inf)
        log_prior = jnp.where(has_free & (slots == first_free), jnp.log(state.concentrations[domain]), log_prior)
        # Collapsed predictive of a's cells in each candidate slot k:
        # Σ_blocks log B(γ + n + c) - log B(γ + n) over the blocks a's cells fall in.
        log_like = jnp.zeros(capacity, dtype)
        pair_parts = {}
        for (relation, position), added in zip(incidences, cell_counts):
            base = counts[relation]
            if len(schema.relation_domains[relation]) == 1:
                terms = [(base + added[None, :], 1.0, 0), (base, -1.0, 0)]
            else:
                rows = base if position == 0 else jnp.swapaxes(base, 0, 1)
                terms = [(rows + added[None, :, :], 1.0, 1), (rows, -1.0, 1)]
                pair_parts.setdefault(relation, {})[position] = added
            log_like = log_like + _sum_log_beta(tables[relation], terms)
        for relation, parts in pair_parts.items():
            if len(parts) == 2:
                # Relation over D × D: block (k, k) receives a's row and column cells together, so
                # its term is L(n + r + c) - L(n) instead of [L(n + r) - L(n)] + [L(n + c) - L(n)].
                diagonal = jnp.diagonal(counts[relation], axis1=0, axis2=1).T
                as_row, as_column = parts[0], parts[1]
                terms = [(diagonal + as_row + as_column, 1.0, 0), (diagonal + as_row, -1.0, 0),
                         (diagonal + as_column, -1.0, 0), (diagonal, 1.0, 0)]
                log_like = log_like + _sum_log_beta(tables[relation], terms)
        new = _inverse_cdf(log_prior + log_like, uniform.astype(dtype))
        for (relation, position), added in zip(incidences, cell_counts):
            arity = len(schema.relation_domains[relation])
            counts[relation] = _move(counts[relation], new, added, position, arity)
        all_sizes = list(state.sizes)
        all_sizes[domain] = sizes.at[new].add(1)
        assignments = list(state.assignments)
        assignments[domain] = assignments[domain].at[individual].set(new)
        state = state._replace(assignments=tuple(assignments), sizes=tuple(all_sizes), counts=tuple(counts),
                               overflow=state.overflow | ~has_free)
        return state, None

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


def _numba_gibbs(uniforms: Any, state: IRMState, arrays: RelationalArrays, tables: tuple, flat: Any, *,
                 schema: RelationalSchema, capacities: tuple) -> IRMState:
    """All Gibbs updates of one sweep in the numba loop (:func:`numba_gibbs_sweep`): the chain's
    state stacked and padded into the arrays the loop takes, and the result split back.

    Uses the same uniform per individual as :func:`_gibbs_domain` to pick its new slot by inverse
    CDF, so both give the same chain (up to float rounding).
    """
    n_domains = len(schema.domain_sizes)
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
    log_alpha = jnp.log(state.concentrations)
    seen = jnp.concatenate([(w[:-1] > 0).astype(jnp.int32) for w in arrays.weights])
    domain_of = np.concatenate([np.full(size, d) for d, size in enumerate(schema.domain_sizes)]).astype(np.int64)
    z, sizes, counts, overflow = numba_gibbs_sweep(
        z, sizes, counts, table, log_alpha, uniforms, seen, flat, domain_of, np.asarray(capacities, np.int64),
        np.asarray(schema.n_values, np.int64),
        np.asarray([len(d) == 2 and d[0] == d[1] for d in schema.relation_domains], np.bool_))
    offsets = np.concatenate([[0], np.cumsum(schema.domain_sizes)])
    assignments = tuple(z[offsets[d]: offsets[d + 1]] for d in range(n_domains))
    new_sizes = tuple(sizes[d, : capacities[d]] for d in range(n_domains))
    new_counts = []
    for r, domains in enumerate(schema.relation_domains):
        block = counts[r, : capacities[domains[0]]]
        if len(domains) == 2:
            new_counts.append(block[:, : capacities[domains[1]], : schema.n_values[r]])
        else:
            new_counts.append(block[:, 0, : schema.n_values[r]])
    return state._replace(assignments=assignments, sizes=new_sizes, counts=tuple(new_counts),
                          overflow=state.overflow | overflow)


# ----------------------------------------------------------------------------- the kernel
def build_kernel(schema: RelationalSchema, capacities: tuple[int, ...], *, concentration_prior: GammaPrior,
                 hyper_prior_rate: float, sample_concentration: bool = True, sample_hyper: bool = True,
                 backend: str = "xla"):
    """Return ``step(rng_key, state, arrays, flat=None) -> (state, info)``: one sweep of the IRM sampler.

    A sweep visits every individual of every domain (Gibbs, Algorithm 3 style), then resamples
    each α_D (Escobar & West) and each γ_r (griddy Gibbs), as enabled. ``backend="xla"`` runs the
    visits as a ``lax.scan`` per domain (any device); ``"numba"`` runs them in a compiled host loop
    (CPU; needs ``flat`` from :func:`zoo.relational.latent_class.flat_cells`). ``backend`` is
    resolved already (:func:`inference.native.resolve_backend`).
    """

    def step(rng_key: Any, state: IRMState, arrays: RelationalArrays, flat: Any = None) -> tuple[IRMState, IRMInfo]:
        n_domains = len(schema.domain_sizes)
        key_domains, key_alpha, key_hyper = jax.random.split(rng_key, 3)
        tables = log_gamma_tables(state.hyper, arrays)
        # One uniform per individual in global order (and one for the virtual individual of unary
        # relations), drawn before the visits so that both backends use the same numbers.
        uniforms = jax.random.uniform(key_domains, (sum(schema.domain_sizes) + 1,), jnp.result_type(*tables))
        if backend == "numba":
            state = _numba_gibbs(uniforms, state, arrays, tables, flat, schema=schema, capacities=capacities)
        else:
            offsets = np.cumsum([0, *schema.domain_sizes])
            for domain in range(n_domains):
                state = _gibbs_domain(domain, uniforms[offsets[domain]: offsets[domain + 1]], state, arrays, tables,
                                      schema=schema, capacities=capacities)
        n_clusters = jnp.stack([jnp.sum(sizes > 0).astype(jnp.int32) for sizes in state.sizes])
        if sample_concentration:
            # One Escobar–West update per domain, vmapped so the program holds a single copy.
            update = jax.vmap(lambda key, alpha, k, n: escobar_west_update(key, alpha, k, n, concentration_prior))
            concentrations = update(jax.random.split(key_alpha, n_domains), state.concentrations, n_clusters,
                                    jnp.asarray(schema.domain_sizes, jnp.int32))
            state = state._replace(concentrations=concentrations.astype(state.concentrations.dtype))
        if sample_hyper:
            keys = jax.random.split(key_hyper, len(state.hyper))
            state = state._replace(hyper=tuple(
                _resample_hyper(key, counts, hyper, hyper_prior_rate).astype(hyper.dtype)
                for key, counts, hyper in zip(keys, state.counts, state.hyper)))
        info = IRMInfo(n_clusters, log_joint(state, schema), state.concentrations, state.hyper, state.overflow)
        return state, info

    return step
