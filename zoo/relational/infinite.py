"""The Infinite Relational Model (IRM; Kemp, Tenenbaum, Griffiths, Yamada & Ueda 2006).

Each domain D is partitioned by a Chinese restaurant process with concentration α_D; every
relation r assigns each block (one cluster per argument) a distribution η over its values, drawn
from a Dirichlet(γ_r) (a Beta(γ_1, γ_0) for a binary relation), and each observed cell draws its
value from the η of its block. Integrating η out gives the collapsed likelihood

    P(y | z, γ) = Π_r Π_blocks B(γ_r + n_block) / B(γ_r),     B(a) = Π_u Γ(a_u) / Γ(Σ_u a_u),

with n_block the counts of each value among the block's observed cells (Kemp et al. 2006 write
the Beta–Bernoulli case). Unobserved cells are left out.

Sampler. Gibbs over the assignments in the style of Neal's (2000) Algorithm 3: individual a
leaves its cluster and rejoins an occupied cluster k with probability ∝ n_k P(y_a | k) or a new one
∝ α_D P(y_a | new), where P(y_a | k) is the ratio of collapsed likelihoods with and without a's
cells in cluster k. For a relation over D × D the cells r(a, a') and r(a', a) of a move together,
so the block (k, k) receives both at once and is scored jointly. Each sweep then resamples every
α_D by Escobar & West's update (:func:`inference.concentration.escobar_west_update`) and every
γ_{r,u} by griddy Gibbs on a log-spaced grid (:data:`HYPER_GRID`, 0.01 to 100) under an
exponential prior restricted to the grid — an exact Gibbs update for that discretised prior.

Two implementations of the Gibbs visits compute the same conditionals: a ``lax.scan`` per domain
(``backend="xla"``, any device) and a compiled numba loop that XLA runs as a custom call on its
own buffers (``backend="numba"``, CPU, see ``inference._xla_ffi``; it scores only the blocks an
individual's cells fall in and is an order of magnitude faster there). Block counts are integers,
so every log Γ is a look-up in a table of log Γ(γ_u + m) built once per sweep.

State: fixed capacity ``K_max`` per domain with an occupancy count per slot (a slot is active when
its count is positive). If an individual must be able to open a new cluster and no slot is free,
the sweep sets ``overflow`` (sticky); :meth:`InfiniteRelational.sample` then re-runs all chains with
twice the capacity, so a returned result never contains an overflowed chain.

Diagnostics are label-invariant (number of clusters per domain, log joint, α_D, γ_r) and come back
as an ArviZ ``InferenceData``. Relations of arity 1 and 2 are supported; observed self-pairs are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numba import njit

from inference._xla_ffi import (I32, batch_element, batch_layout, buffer_flat, prologue, register_handler,
                                ret_buffer, write_element)
from inference.concentration import GammaPrior, escobar_west_update
from inference.em import _DeferredInterrupt
from inference.sparse import resolve_backend
from inference._validation import check_choice, check_int, check_key, check_real, check_relation
from zoo.relational.data import RelationalArrays, RelationalData, RelationalSchema
from zoo.relational.latent_class import flat_cells

__all__ = [
    "infinite_relational_program",
    "IRMState",
    "IRMInfo",
    "InfiniteRelational",
    "IRMResult",
    "block_counts",
    "collapsed_log_likelihood",
    "log_joint",
    "init",
    "build_kernel",
    "HYPER_GRID",
    "log_gamma_tables",
    "log_crp_prior",
]


# ----------------------------------------------------------------------------- the program
def infinite_relational_program(entries, values=None, *, schema: RelationalSchema, concentrations: tuple,
                                hyper: tuple, max_clusters: int):
    """NumPyro program of the IRM with explicit block parameters (for simulation).

    The CRP of each domain is written as a Dirichlet process by stick-breaking, truncated at
    ``max_clusters`` sticks (the last stick takes the remaining mass), so for ``max_clusters``
    at least the domain size it differs from the CRP only by that last stick's mass.

    Parameters
    ----------
    entries : tuple of int arrays (n_observed_r, arity_r), one per relation
    values : tuple of int arrays, optional — observed value codes; omit to simulate
    schema : RelationalSchema
    concentrations : tuple of float — α_D per domain
    hyper : tuple of (|r|,) arrays — Dirichlet parameters γ_r per relation
    max_clusters : int — truncation of the stick-breaking

    Sites
    -----
    ``sticks_{D}`` (plate ``{D}_clusters``), ``cluster_{D}`` (plate D), ``eta_{r}`` (block
    parameters, one plate per argument), ``{r}`` (plate ``{r}_cells``).
    """
    clusters = []
    for name, size, alpha in zip(schema.domain_names, schema.domain_sizes, concentrations):
        with numpyro.plate(f"{name}_clusters", max_clusters - 1):
            sticks = numpyro.sample(f"sticks_{name}", dist.Beta(1.0, alpha))
        remaining = jnp.concatenate([jnp.ones(1), jnp.cumprod(1.0 - sticks)])
        weights = jnp.concatenate([sticks, jnp.ones(1)]) * remaining
        with numpyro.plate(name, size):
            clusters.append(numpyro.sample(f"cluster_{name}", dist.Categorical(weights)))
    for relation, (name, domains) in enumerate(zip(schema.relation_names, schema.relation_domains)):
        concentration = jnp.asarray(hyper[relation])
        with numpyro.plate(f"{name}_first", max_clusters, dim=-1 if len(domains) == 1 else -2):
            if len(domains) == 1:
                eta = numpyro.sample(f"eta_{name}", dist.Dirichlet(concentration))
            else:
                with numpyro.plate(f"{name}_second", max_clusters, dim=-1):
                    eta = numpyro.sample(f"eta_{name}", dist.Dirichlet(concentration))
        cells = jnp.asarray(entries[relation])
        block = tuple(clusters[domain][cells[:, position]] for position, domain in enumerate(domains))
        with numpyro.plate(f"{name}_cells", cells.shape[0]):
            numpyro.sample(name, dist.Categorical(eta[block]),
                           obs=None if values is None else jnp.asarray(values[relation]))


# ----------------------------------------------------------------------------- state
class IRMState(NamedTuple):
    """State of one IRM chain.

    Attributes
    ----------
    assignments : tuple of int32 (n_D,) — slot of every individual, per domain
    sizes : tuple of int32 (K_D,) — individuals per slot (a slot is active when > 0)
    counts : tuple of int32 arrays — per relation, value counts per block: (K_1, K_2, |r|) or (K_1, |r|)
    concentrations : (n_domains,) — α_D
    hyper : tuple of (|r|,) — γ_r
    overflow : bool scalar — sticky: some sweep needed more than K_D clusters
    """

    assignments: tuple
    sizes: tuple
    counts: tuple
    concentrations: Any
    hyper: tuple
    overflow: Any


class IRMInfo(NamedTuple):
    """Label-invariant summaries of one sweep.

    Attributes
    ----------
    n_clusters : int32 (n_domains,)
    log_joint : scalar — log P(y, z | α, γ) with the block parameters integrated out
    concentrations : (n_domains,)
    hyper : tuple of (|r|,)
    overflow : bool
    """

    n_clusters: Any
    log_joint: Any
    concentrations: Any
    hyper: tuple
    overflow: Any


# ----------------------------------------------------------------------------- collapsed likelihood
def _log_beta(concentration: Any) -> Any:
    """log B(a) = Σ_u log Γ(a_u) - log Γ(Σ_u a_u) over the last axis."""
    return jnp.sum(gammaln(concentration), axis=-1) - gammaln(jnp.sum(concentration, axis=-1))


def block_counts(assignments: tuple, arrays: RelationalArrays, schema: RelationalSchema,
                 capacities: tuple[int, ...]) -> tuple:
    """Exact value counts of every block from the assignments (weights of hidden cells are 0)."""
    counts = []
    for relation, domains in enumerate(schema.relation_domains):
        cells = arrays.entries[relation]
        block = tuple(assignments[domain][cells[:, position]] for position, domain in enumerate(domains))
        shape = tuple(capacities[domain] for domain in domains) + (schema.n_values[relation],)
        seen = (arrays.weights[relation] > 0).astype(jnp.int32)
        counts.append(jnp.zeros(shape, jnp.int32).at[block + (arrays.values[relation],)].add(seen))
    return tuple(counts)


def collapsed_log_likelihood(counts: tuple, hyper: tuple) -> Any:
    """log P(y | z, γ) = Σ_r Σ_blocks [log B(γ_r + n_block) - log B(γ_r)] (Kemp et al. 2006)."""
    total = 0.0
    for relation_counts, concentration in zip(counts, hyper):
        total = total + jnp.sum(_log_beta(concentration + relation_counts.astype(concentration.dtype))
                                - _log_beta(concentration))
    return total


def log_crp_prior(sizes: Any, alpha: Any, n_points: int) -> Any:
    """log P(z | α) = K log α + log Γ(α) - log Γ(α + N) + Σ_k log Γ(n_k) of a CRP partition (Antoniak 1974).

    ``sizes`` are slot occupancies (zeros ignored). Written here rather than imported from
    :mod:`inference.neal` so this module does not pull in the mixture machinery.
    """
    occupied = sizes > 0
    log_sizes = jnp.where(occupied, gammaln(jnp.maximum(sizes, 1).astype(alpha.dtype)), 0.0)
    return (jnp.sum(occupied) * jnp.log(alpha) + gammaln(alpha) - gammaln(alpha + n_points)
            + jnp.sum(log_sizes))


def log_joint(state: IRMState, schema: RelationalSchema) -> Any:
    """log P(y, z | α, γ): CRP priors of the partitions plus the collapsed likelihood."""
    prior = sum(log_crp_prior(sizes, state.concentrations[domain], schema.domain_sizes[domain])
                for domain, sizes in enumerate(state.sizes))
    return prior + collapsed_log_likelihood(state.counts, state.hyper)


def init(rng_key: Any, arrays: RelationalArrays, schema: RelationalSchema, capacities: tuple[int, ...], *,
         concentration: float, hyper: float, init_clusters: int) -> IRMState:
    """A random start: every individual in one of the first ``init_clusters`` slots, uniformly."""
    rng_key = check_key("rng_key", rng_key)  # one key (traced ones too), before any JAX code
    keys = jax.random.split(rng_key, len(schema.domain_sizes))
    dtype = arrays.weights[0].dtype
    assignments = tuple(
        jax.random.randint(key, (size,), 0, min(init_clusters, capacity, size)).astype(jnp.int32)
        for key, size, capacity in zip(keys, schema.domain_sizes, capacities)
    )
    sizes = tuple(jnp.zeros(capacity, jnp.int32).at[assigned].add(1)
                  for assigned, capacity in zip(assignments, capacities))
    return IRMState(
        assignments=assignments,
        sizes=sizes,
        counts=block_counts(assignments, arrays, schema, capacities),
        concentrations=jnp.full((len(schema.domain_sizes),), concentration, dtype),
        hyper=tuple(jnp.full((n_values,), hyper, dtype) for n_values in schema.n_values),
        overflow=jnp.asarray(False),
    )


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


def _gibbs_domain(domain: int, rng_key: Any, state: IRMState, arrays: RelationalArrays, tables: tuple, *,
                  schema: RelationalSchema, capacities: tuple) -> IRMState:
    """One collapsed Gibbs update (Neal 2000 Algorithm 3) per individual of ``domain``."""
    incidences = schema.incidences(domain)
    capacity = capacities[domain]
    slots = jnp.arange(capacity)

    def visit(carry, inputs):
        state = carry
        individual, key_choice = inputs
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
        new = jax.random.categorical(key_choice, log_prior + log_like).astype(jnp.int32)
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
    keys = jax.random.split(rng_key, schema.domain_sizes[domain])
    state, _ = jax.lax.scan(visit, state, (individuals, keys))
    return state


# ----------------------------------------------------------------------------- the same sweep, compiled by numba
@njit(cache=True, nogil=True)
def _block_log_beta(table, counts, n_values):
    """L(n) = Σ_u log Γ(γ_u + n_u) - log Γ(Σγ + Σn) from the relation's log Γ table."""
    total = 0
    value = 0.0
    for u in range(n_values):
        value += table[u, counts[u]]
        total += counts[u]
    return value - table[n_values, total]


@njit(cache=True, nogil=True)
def _gibbs_sweep(z, sizes, counts, tables, log_alpha, uniforms, first, second, values, relation, seen, item_start,
                 item_cell, item_position, domain_of, capacities, relation_n_values, same_domain):
    """Neal (2000) Algorithm 3 over all individuals in global order (see :func:`_gibbs_domain`).

    z: (n_individuals + 1,) slots (the last is the virtual second argument of unary relations,
    always slot 0); sizes: (D, K); counts: (R, K, K, V) (unary relations use [:, :, 0, :]);
    tables: (R, V + 1, M) log Γ look-ups; returns whether some individual found no free slot.
    """
    n_relations, n_max, _, n_values_max = counts.shape
    added = np.zeros((n_relations, 2, n_max, n_values_max), np.int64)
    touched = np.zeros((n_relations, 2), np.bool_)
    partners = np.zeros((n_relations, 2, n_max), np.int64)
    n_partners = np.zeros((n_relations, 2), np.int64)
    scores = np.zeros(n_max)
    work = np.zeros(n_values_max, np.int64)
    work2 = np.zeros(n_values_max, np.int64)
    overflow = False
    for individual in range(item_start.shape[0] - 1):
        domain = domain_of[individual]
        capacity = capacities[domain]
        old = z[individual]
        touched[:] = False
        n_partners[:] = 0
        for item in range(item_start[individual], item_start[individual + 1]):
            cell = item_cell[item]
            position = item_position[item]
            r = relation[cell]
            if not touched[r, position]:
                touched[r, position] = True
                added[r, position] = 0
            if seen[cell] == 0:
                continue
            other = z[second[cell]] if position == 0 else z[first[cell]]
            fresh = True
            for u in range(relation_n_values[r]):
                if added[r, position, other, u] != 0:
                    fresh = False
            if fresh:
                partners[r, position, n_partners[r, position]] = other
                n_partners[r, position] += 1
            added[r, position, other, values[cell]] += 1
        # Remove the individual's cells from its blocks.
        for r in range(n_relations):
            for position in range(2):
                if touched[r, position]:
                    for index in range(n_partners[r, position]):
                        l = partners[r, position, index]
                        for u in range(relation_n_values[r]):
                            if position == 0:
                                counts[r, old, l, u] -= added[r, position, l, u]
                            else:
                                counts[r, l, old, u] -= added[r, position, l, u]
        sizes[domain, old] -= 1
        first_free = -1
        for k in range(capacity):
            if sizes[domain, k] == 0:
                first_free = k
                break
        if first_free < 0:
            overflow = True
        largest = -np.inf
        for k in range(capacity):
            if sizes[domain, k] > 0:
                score = np.log(sizes[domain, k])
            elif k == first_free:
                score = log_alpha[domain]
            else:
                scores[k] = -np.inf
                continue
            for r in range(n_relations):
                n_values = relation_n_values[r]
                for position in range(2):
                    if not touched[r, position]:
                        continue
                    for index in range(n_partners[r, position]):
                        l = partners[r, position, index]
                        for u in range(n_values):
                            work[u] = counts[r, k, l, u] if position == 0 else counts[r, l, k, u]
                            work2[u] = work[u] + added[r, position, l, u]
                        score += _block_log_beta(tables[r], work2, n_values) - _block_log_beta(tables[r], work, n_values)
                if same_domain[r] and touched[r, 0] and touched[r, 1]:
                    # Block (k, k) gets the row and column cells together: L(n+a+b) - L(n+a) - L(n+b) + L(n).
                    for u in range(n_values):
                        work[u] = counts[r, k, k, u] + added[r, 0, k, u] + added[r, 1, k, u]
                    score += _block_log_beta(tables[r], work, n_values)
                    for u in range(n_values):
                        work[u] = counts[r, k, k, u] + added[r, 0, k, u]
                    score -= _block_log_beta(tables[r], work, n_values)
                    for u in range(n_values):
                        work[u] = counts[r, k, k, u] + added[r, 1, k, u]
                    score -= _block_log_beta(tables[r], work, n_values)
                    for u in range(n_values):
                        work[u] = counts[r, k, k, u]
                    score += _block_log_beta(tables[r], work, n_values)
            scores[k] = score
            largest = max(largest, score)
        total = 0.0
        for k in range(capacity):
            scores[k] = np.exp(scores[k] - largest)
            total += scores[k]
        target = uniforms[individual] * total
        new = -1
        running = 0.0
        for k in range(capacity):
            if scores[k] > 0:
                new = k
                running += scores[k]
                if running >= target:
                    break
        for r in range(n_relations):
            for position in range(2):
                if touched[r, position]:
                    for index in range(n_partners[r, position]):
                        l = partners[r, position, index]
                        for u in range(relation_n_values[r]):
                            if position == 0:
                                counts[r, new, l, u] += added[r, position, l, u]
                            else:
                                counts[r, l, new, u] += added[r, position, l, u]
        sizes[domain, new] += 1
        z[individual] = new
    return overflow


# The sweep runs as an XLA custom call (inference._xla_ffi): no Python between XLA and the numba
# loop. Under vmap (chains) every argument gets the same leading axes, of size 1 where it is shared;
# the chains run one after the other. Arguments: z, sizes, counts (int32); table, log_alpha,
# uniforms (the model's float dtype); seen, first, second, values, relation, item_start, item_cell,
# item_position, domain_of, capacities, relation_n_values, same_domain (int32). Results: z,
# sizes, counts (int32) and overflow (bool), each with the batch axes.
_SWEEP_ARGS, _SWEEP_RETS = 18, 4


@njit(inline="always")
def _sweep_call(frame, real):
    done, code = prologue(frame, _SWEEP_ARGS, _SWEEP_RETS)
    if done:
        return code
    z_shape, n_lead, n_chains = batch_layout(frame, 1)
    out_z = buffer_flat(ret_buffer(frame, 0), I32)
    out_sizes = buffer_flat(ret_buffer(frame, 1), I32)
    out_counts = buffer_flat(ret_buffer(frame, 2), I32)
    out_overflow = buffer_flat(ret_buffer(frame, 3), np.uint8(0))  # XLA's PRED: one byte
    for chain in range(n_chains):
        z, _ = batch_element(frame, 0, z_shape, n_lead, chain, I32)
        sizes, size_dims = batch_element(frame, 1, z_shape, n_lead, chain, I32)
        counts, count_dims = batch_element(frame, 2, z_shape, n_lead, chain, I32)
        table, table_dims = batch_element(frame, 3, z_shape, n_lead, chain, real)
        log_alpha, _ = batch_element(frame, 4, z_shape, n_lead, chain, real)
        uniforms, _ = batch_element(frame, 5, z_shape, n_lead, chain, real)
        integers = [batch_element(frame, index, z_shape, n_lead, chain, I32)[0] for index in range(6, 17)]
        same_domain, _ = batch_element(frame, 17, z_shape, n_lead, chain, I32)
        z_chain = z.astype(np.int64)
        sizes_chain = sizes.astype(np.int64).reshape((size_dims[0], size_dims[1]))
        counts_chain = counts.astype(np.int64).reshape((count_dims[0], count_dims[1], count_dims[2], count_dims[3]))
        overflow = _gibbs_sweep(
            z_chain, sizes_chain, counts_chain,
            table.astype(np.float64).reshape((table_dims[0], table_dims[1], table_dims[2])),
            log_alpha.astype(np.float64), uniforms.astype(np.float64), integers[1], integers[2], integers[3],
            integers[4], integers[0], integers[5], integers[6], integers[7], integers[8], integers[9], integers[10],
            same_domain != 0)
        write_element(out_z, chain, z_chain)
        write_element(out_sizes, chain, sizes_chain.reshape(-1))
        write_element(out_counts, chain, counts_chain.reshape(-1))
        out_overflow[chain] = np.uint8(1) if overflow else np.uint8(0)
    return 0


def _sweep_f32(frame):
    return _sweep_call(frame, np.float32(0))


def _sweep_f64(frame):
    return _sweep_call(frame, np.float64(0))


_SWEEP_HANDLERS = {"float32": _sweep_f32, "float64": _sweep_f64}


def _numba_gibbs(rng_key: Any, state: IRMState, arrays: RelationalArrays, tables: tuple, flat: Any, *,
                 schema: RelationalSchema, capacities: tuple) -> IRMState:
    """All Gibbs updates of one sweep in a numba loop, run by XLA as a custom call.

    Uses one uniform per individual (drawn here from ``rng_key``) to pick its new slot by inverse
    CDF; the same conditional distributions as :func:`_gibbs_domain`.
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
    uniforms = jax.random.uniform(rng_key, (z.shape[0],), table.dtype)
    seen = jnp.concatenate([(w[:-1] > 0).astype(jnp.int32) for w in arrays.weights])
    domain_of = np.concatenate([np.full(size, d) for d, size in enumerate(schema.domain_sizes)]).astype(np.int64)
    constants = (domain_of, np.asarray(capacities, np.int64), np.asarray(schema.n_values, np.int64),
                 np.asarray([len(d) == 2 and d[0] == d[1] for d in schema.relation_domains], np.bool_))

    shapes = (jax.ShapeDtypeStruct(z.shape, jnp.int32), jax.ShapeDtypeStruct(sizes.shape, jnp.int32),
              jax.ShapeDtypeStruct(counts.shape, jnp.int32), jax.ShapeDtypeStruct((), jnp.bool_))
    real = jnp.dtype(table.dtype).name
    name = register_handler(f"latentzoo_irm_sweep_{real}", _SWEEP_HANDLERS[real])
    z, sizes, counts, overflow = jax.ffi.ffi_call(name, shapes, vmap_method="expand_dims")(
        z, sizes.astype(jnp.int32), counts.astype(jnp.int32), table, log_alpha.astype(table.dtype),
        uniforms.astype(table.dtype), seen.astype(jnp.int32),
        flat.first, flat.second, flat.values, flat.relation, flat.item_start, flat.item_cell, flat.item_position,
        *(jnp.asarray(constant, jnp.int32) for constant in constants))
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


# ----------------------------------------------------------------------------- hyperparameters
#: Support of every γ_{r,u}: a log-spaced grid (griddy Gibbs, exact for this discretised prior).
HYPER_GRID = np.exp(np.linspace(np.log(1e-2), np.log(1e2), 61))


def _resample_hyper(rng_key: Any, counts: Any, hyper: Any, prior_rate: float) -> Any:
    """Griddy Gibbs for each γ_u in turn: γ_u lives on :data:`HYPER_GRID` with prior ∝ exp(-rate γ) there.

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
        log_posterior = jnp.sum(blocks, axis=1) - prior_rate * grid
        chosen = jax.random.categorical(key, log_posterior)
        return hyper.at[value].set(grid[chosen]), None

    hyper, _ = jax.lax.scan(update, hyper, (jnp.arange(n_values), keys))
    return hyper


# ----------------------------------------------------------------------------- the kernel
def build_kernel(schema: RelationalSchema, capacities: tuple[int, ...], *, concentration_prior: GammaPrior,
                 hyper_prior_rate: float, sample_concentration: bool = True, sample_hyper: bool = True,
                 backend: str = "xla"):
    """Return ``step(rng_key, state, arrays, flat=None) -> (state, info)``: one sweep of the IRM sampler.

    A sweep visits every individual of every domain (Gibbs, Algorithm 3 style), then resamples
    each α_D (Escobar & West) and each γ_r (griddy Gibbs), as enabled. ``backend="xla"`` runs the
    visits as a ``lax.scan`` per domain (any device); ``"numba"`` runs them in a compiled host loop
    (CPU; needs ``flat`` from :func:`zoo.relational.latent_class.flat_cells`).
    """

    def step(rng_key: Any, state: IRMState, arrays: RelationalArrays, flat: Any = None) -> tuple[IRMState, IRMInfo]:
        n_domains = len(schema.domain_sizes)
        key_domains, key_alpha, key_hyper = jax.random.split(rng_key, 3)
        tables = log_gamma_tables(state.hyper, arrays)
        if backend == "numba":
            state = _numba_gibbs(key_domains, state, arrays, tables, flat, schema=schema, capacities=capacities)
        else:
            for domain, key_domain in enumerate(jax.random.split(key_domains, n_domains)):
                state = _gibbs_domain(domain, key_domain, state, arrays, tables, schema=schema,
                                      capacities=capacities)
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


def _predictive(state: IRMState, relation: int, cells: Any, schema: RelationalSchema) -> Any:
    """P(r(cell) = u | z, y, γ) = (γ_u + n_block,u) / (Σγ + n_block) for cells (n, arity)."""
    domains = schema.relation_domains[relation]
    block = tuple(state.assignments[domain][cells[:, position]] for position, domain in enumerate(domains))
    mass = state.hyper[relation] + state.counts[relation][block].astype(state.hyper[relation].dtype)
    return mass / jnp.sum(mass, axis=-1, keepdims=True)


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
                        sample_hyper=settings["sample_hyper"], backend=settings["backend"])

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


@partial(jax.jit, static_argnames=("schema", "capacities", "settings", "n_sweeps", "relation"))
def _start_chains(keys, arrays, hidden_cells, **static):
    return jax.vmap(partial(_start_chain, **static), in_axes=(0, _SHARED, None))(keys, arrays, hidden_cells)


@partial(jax.jit, static_argnames=("schema", "capacities", "settings", "n_warmup", "relation", "keep_assignments"))
def _advance_chains(states, predictive, arrays, flat, hidden_cells, indices, keys, **static):
    advance = partial(_advance_chain, **static)
    return jax.vmap(advance, in_axes=(0, 0, _SHARED, None, None, None, 0))(states, predictive, arrays, flat,
                                                                          hidden_cells, indices, keys)


def _run_chains_in_calls(keys, arrays, flat, hidden_cells, *, schema, capacities, settings, n_sweeps, n_warmup,
                         relation, keep_assignments, sweeps_per_call):
    """Every chain's sweeps in jitted calls of about ``sweeps_per_call`` sweeps, Ctrl-C acted on between calls.

    The sweeps are cut into equal calls (one compilation, two when they do not divide evenly);
    sweep s of a chain uses the same key as in one call, so the draws do not depend on the cut.
    Returns the output of the sweeps finished (``info`` and ``assignments`` over them) and whether
    all ``n_sweeps`` were (False after Ctrl-C, or on overflow: the caller re-runs then).
    """
    states, predictive, sweep_keys = _start_chains(keys, arrays, hidden_cells, schema=schema, capacities=capacities,
                                                   settings=settings, n_sweeps=n_sweeps, relation=relation)
    n_calls = -(-n_sweeps // sweeps_per_call)
    per_call = -(-n_sweeps // n_calls)
    static = dict(schema=schema, capacities=capacities, settings=settings, n_warmup=n_warmup, relation=relation,
                  keep_assignments=keep_assignments)
    chunks = []
    completed = True
    with _DeferredInterrupt() as interrupt:
        for first in range(0, n_sweeps, per_call):
            indices = jnp.arange(first, min(first + per_call, n_sweeps))
            (states, predictive), chunk = _advance_chains(states, predictive, arrays, flat, hidden_cells, indices,
                                                          sweep_keys[:, first: first + per_call], **static)
            chunks.append(jax.device_get(chunk))
            if np.any(np.asarray(states.overflow)):
                completed = False
                break
            if interrupt.requested and first + per_call < n_sweeps:
                completed = False
                break
    infos, assignments = jax.tree_util.tree_map(lambda *parts: np.concatenate(parts, axis=1), *chunks)
    return _RunOutput(infos, assignments, predictive / max(n_sweeps - n_warmup, 1), states), completed


@partial(jax.jit, static_argnames=_STATIC)
def _run_cases(keys, arrays, flat, hidden_cells, **static):
    run = partial(_run_chain, **static)
    chains = jax.vmap(run, in_axes=(0, _SHARED, None, None))
    return jax.vmap(chains, in_axes=(0, _BY_CASE, None, 0))(keys, arrays, flat, hidden_cells)


class _Settings(tuple):
    """Hashable sampler settings (a ``jit`` static argument) readable by key."""

    def __new__(cls, **values):
        return super().__new__(cls, tuple(sorted(values.items())))

    def __getitem__(self, name):
        return dict(tuple(self))[name]


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class InfiniteRelational:
    """The IRM sampled by collapsed Gibbs with hyperparameter updates, several chains at once.

    Parameters
    ----------
    concentration : float
        Initial α_D of every domain (> 0).
    hyper : float
        Initial γ_{r,u} of every relation and value; must lie on :data:`HYPER_GRID` when
        ``sample_hyper`` (the nearest grid point is used); 1 is a uniform Beta/Dirichlet.
    concentration_prior : GammaPrior
        Gamma(shape, rate) prior of every α_D (Escobar & West).
    hyper_prior_rate : float
        Rate of the exponential prior of every γ_{r,u}.
    sample_concentration, sample_hyper : bool
        Resample α_D / γ_r after every sweep (otherwise they stay at their initial values).
    max_clusters : int
        Initial capacity K_max of every domain (capped at the domain's size); doubled and the
        run repeated when a chain overflows.
    init_clusters : int
        Individuals start spread uniformly over this many clusters.
    backend : {"auto", "xla", "numba"}
        Implementation of the Gibbs visits (see :func:`build_kernel`); "auto" is numba on the
        CPU backend when numba is installed, else XLA.

    Examples
    --------
    >>> import jax
    >>> from zoo.relational.data import load_florentine_families
    >>> result = InfiniteRelational().sample(load_florentine_families(), key=jax.random.key(0),
    ...                                      n_chains=2, n_sweeps=20, n_warmup=10)
    >>> result.n_clusters["families"].shape
    (2, 10)
    """

    concentration: float = 1.0
    hyper: float = 1.0
    concentration_prior: GammaPrior = field(default_factory=lambda: GammaPrior(1.0, 1.0))
    hyper_prior_rate: float = 1.0
    sample_concentration: bool = True
    sample_hyper: bool = True
    max_clusters: int = 16
    init_clusters: int = 3
    backend: str = "auto"

    def __post_init__(self) -> None:
        check_choice("backend", self.backend, ("auto", "xla", "numba"))
        for name in ("sample_concentration", "sample_hyper"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name}: expected a bool, got {type(getattr(self, name)).__name__}")
        check_real("concentration", self.concentration, low=0.0, low_open=True)
        check_real("hyper", self.hyper, low=0.0, low_open=True)
        if not isinstance(self.concentration_prior, GammaPrior):
            raise TypeError(f"concentration_prior: expected a GammaPrior, got {type(self.concentration_prior).__name__}")
        check_real("concentration_prior.shape", self.concentration_prior.shape, low=0.0, low_open=True)
        check_real("concentration_prior.rate", self.concentration_prior.rate, low=0.0, low_open=True)
        check_real("hyper_prior_rate", self.hyper_prior_rate, low=0.0, low_open=True)
        check_int("max_clusters", self.max_clusters, minimum=1)
        check_int("init_clusters", self.init_clusters, minimum=1)

    program = staticmethod(infinite_relational_program)

    def check_data(self, data: Any) -> RelationalData:
        """Validate ``data`` (type, arity <= 2, no observed self-pairs)."""
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        for relation in data.relations:
            if relation.arity > 2:
                raise ValueError(f"data: relation {relation.name!r} has arity {relation.arity}; "
                                 "the IRM sampler supports arity 1 and 2")
            if relation.has_self_pairs:
                raise ValueError(f"data: relation {relation.name!r} observes self-pairs r(a, a); mask the diagonal")
        return data

    def _settings(self) -> _Settings:
        hyper = float(self.hyper)
        if self.sample_hyper:
            hyper = float(HYPER_GRID[np.argmin(np.abs(np.log(HYPER_GRID) - np.log(hyper)))])
        return _Settings(
            concentration=float(self.concentration), hyper=hyper,
            concentration_prior=GammaPrior(float(self.concentration_prior.shape), float(self.concentration_prior.rate)),
            hyper_prior_rate=float(self.hyper_prior_rate), sample_concentration=bool(self.sample_concentration),
            sample_hyper=bool(self.sample_hyper), init_clusters=int(self.init_clusters),
            backend=resolve_backend(self.backend),
        )

    def _capacities(self, schema: RelationalSchema, scale: int) -> tuple[int, ...]:
        return tuple(min(size, self.max_clusters * scale) for size in schema.domain_sizes)

    def _run(self, runner, keys, data, arrays, hidden_cells, schema, **kwargs):
        """Run, doubling the capacity and repeating with the same keys while any chain overflows.

        ``runner`` returns (output, whether every sweep ran).
        """
        settings = self._settings()
        flat = flat_cells(data) if settings["backend"] == "numba" else None
        scale = 1
        while True:
            capacities = self._capacities(schema, scale)
            output, completed = runner(keys, arrays, flat, hidden_cells, schema=schema, capacities=capacities,
                                       settings=settings, **kwargs)
            overflowed = bool(np.any(np.asarray(output.final.overflow)))
            if not overflowed:
                return output, capacities, completed
            if all(capacity == size for capacity, size in zip(capacities, schema.domain_sizes)):
                raise RuntimeError("overflow reported with every capacity at its domain size")
            scale *= 2

    def sample(self, data: RelationalData, *, key: Any, n_chains: int = 4, n_sweeps: int = 200,
               n_warmup: int | None = None, keep_assignments: bool = True, sweeps_per_call: int = 50) -> "IRMResult":
        """Run ``n_chains`` chains of ``n_sweeps`` sweeps (``vmap``ped, in jitted calls of sweeps).

        Parameters
        ----------
        data : RelationalData
        key : jax PRNG key — chain c uses ``jax.random.split(key, n_chains)[c]``
        n_chains, n_sweeps : int
        n_warmup : int, optional — sweeps discarded as warm-up (default half)
        keep_assignments : bool — keep every kept draw's partitions (for co-clustering and ARI)
        sweeps_per_call : int — at most this many sweeps per jitted call (the draws do not depend
            on it). Between calls Ctrl-C is acted on: the first one returns the sweeps finished by
            the end of the current call (``result.completed`` is False); a second one abandons
            the run with ``KeyboardInterrupt``.

        Returns
        -------
        IRMResult
        """
        n_chains = check_int("n_chains", n_chains, minimum=1)
        n_sweeps = check_int("n_sweeps", n_sweeps, minimum=1)
        n_warmup = n_sweeps // 2 if n_warmup is None else check_int("n_warmup", n_warmup, minimum=0,
                                                                      maximum=n_sweeps - 1)
        sweeps_per_call = check_int("sweeps_per_call", sweeps_per_call, minimum=1)
        key = check_key("key", key)
        self.check_data(data)
        arrays = data.to_arrays()
        schema = data.schema
        keys = jax.random.split(key, n_chains)
        hidden_cells = arrays.entries[0][:1]
        output, capacities, completed = self._run(
            _run_chains_in_calls, keys, data, arrays, hidden_cells, schema, n_sweeps=n_sweeps, n_warmup=n_warmup,
            relation=0, keep_assignments=keep_assignments, sweeps_per_call=sweeps_per_call)
        output = jax.device_get(output)
        n_run = output.info.log_joint.shape[1]  # fewer than n_sweeps after Ctrl-C
        kept = slice(min(n_warmup, n_run), n_run)
        return IRMResult(
            schema=schema,
            capacities=capacities,
            n_clusters={name: np.asarray(output.info.n_clusters[:, kept, d])
                        for d, name in enumerate(schema.domain_names)},
            concentrations={name: np.asarray(output.info.concentrations[:, kept, d])
                            for d, name in enumerate(schema.domain_names)},
            hyper={name: np.asarray(output.info.hyper[r][:, kept]) for r, name in enumerate(schema.relation_names)},
            log_joint=np.asarray(output.info.log_joint[:, kept]),
            warmup_log_joint=np.asarray(output.info.log_joint[:, :n_warmup]),
            assignments=({name: np.asarray(output.assignments[d][:, kept])
                          for d, name in enumerate(schema.domain_names)} if keep_assignments else None),
            completed=completed,
            _arrays=arrays,
        )

    def predict_held_out(self, data: RelationalData, hidden: Any, *, key: Any, relation: int = 0,
                         n_chains: int = 2, n_sweeps: int = 200, n_warmup: int | None = None) -> np.ndarray:
        """For each case, sample with that case's cells hidden and average their predictive.

        Parameters
        ----------
        hidden : int array (n_cases, n_hidden) — positions in ``data.relations[relation].entries``,
            -1 for padding (see :meth:`LatentClassRelational.predict_held_out`).

        Returns
        -------
        (n_cases, n_hidden, |r|) predictive probabilities averaged over chains and kept sweeps.
        """
        from zoo.relational.latent_class import _case_weights, _check_hidden

        n_chains = check_int("n_chains", n_chains, minimum=1)
        n_sweeps = check_int("n_sweeps", n_sweeps, minimum=1)
        n_warmup = n_sweeps // 2 if n_warmup is None else check_int("n_warmup", n_warmup, minimum=0,
                                                                      maximum=n_sweeps - 1)
        key = check_key("key", key)
        self.check_data(data)
        arrays = data.to_arrays()
        schema = data.schema
        relation = check_relation("relation", relation, tuple(cells.name for cells in data.relations))
        hidden = _check_hidden(hidden, data.relations[relation].n_observed)
        case_arrays = arrays._replace(weights=_case_weights(arrays, hidden, relation))
        cells = arrays.entries[relation][jnp.asarray(np.where(hidden < 0, 0, hidden))]
        keys = jax.random.split(key, (hidden.shape[0], n_chains))
        output, _, _ = self._run(lambda *args, **kwargs: (_run_cases(*args, **kwargs), True), keys, data, case_arrays,
                                 cells, schema, n_sweeps=n_sweeps, n_warmup=n_warmup, relation=relation,
                                 keep_assignments=False)
        probs = np.array(output.predictive).mean(axis=1)
        probs[hidden < 0] = np.nan
        return probs


@dataclass
class IRMResult:
    """Draws of an IRM run (after warm-up), as (chain, draw, ...) arrays.

    Attributes
    ----------
    schema : RelationalSchema
    capacities : tuple of int — K_max per domain the run needed
    n_clusters, concentrations : dict domain name → (chain, draw)
    hyper : dict relation name → (chain, draw, |r|)
    log_joint : (chain, draw)
    warmup_log_joint : (chain, n_warmup)
    assignments : dict domain name → (chain, draw, n_D) int, or None
    completed : bool — False when Ctrl-C stopped the run: the arrays hold the sweeps finished
        (no draws at all when it came during warm-up)
    """

    schema: RelationalSchema
    capacities: tuple
    n_clusters: dict
    concentrations: dict
    hyper: dict
    log_joint: np.ndarray
    warmup_log_joint: np.ndarray
    assignments: dict | None
    completed: bool = True
    _arrays: Any = field(default=None, repr=False)

    def to_inference_data(self):
        """ArviZ ``InferenceData`` of the label-invariant quantities (R-hat, ESS apply)."""
        import arviz as az

        posterior = {f"n_clusters_{name}": values for name, values in self.n_clusters.items()}
        posterior.update({f"concentration_{name}": values for name, values in self.concentrations.items()})
        posterior.update({f"hyper_{name}": values for name, values in self.hyper.items()})
        posterior["log_joint"] = self.log_joint
        dims = {f"hyper_{name}": [f"{name}_value"] for name in self.hyper}
        return az.from_dict(posterior=posterior, dims=dims)

    def summary(self):
        """``arviz.summary`` of the label-invariant quantities (means, R-hat, ESS)."""
        import arviz as az

        return az.summary(self.to_inference_data())

    def map_partition(self) -> dict[str, np.ndarray]:
        """The kept draw with the highest log joint, relabelled 0..K-1 in order of first appearance."""
        if self.assignments is None:
            raise ValueError("keep_assignments: the run did not keep the assignments")
        chain, draw = np.unravel_index(np.argmax(self.log_joint), self.log_joint.shape)
        result = {}
        for name, draws in self.assignments.items():
            labels = draws[chain, draw]
            _, first = np.unique(labels, return_index=True)
            order = np.argsort(first)
            mapping = np.empty(labels.max() + 1, np.int64)
            mapping[np.unique(labels)[order]] = np.arange(order.shape[0])
            result[name] = mapping[labels]
        return result

    def predict_proba(self, cells: Any, relation: int | str = 0) -> np.ndarray:
        """Predictive probabilities (n_cells, |r|) of cells of a relation, averaged over all kept draws."""
        if self.assignments is None:
            raise ValueError("keep_assignments: the run did not keep the assignments")
        index = self.schema.relation_names.index(relation) if isinstance(relation, str) else relation
        cells = np.asarray(cells)
        arity = len(self.schema.relation_domains[index])
        if cells.ndim != 2 or cells.shape[1] != arity:
            raise ValueError(f"cells: expected shape (n_cells, {arity}), got {cells.shape}")
        names = self.schema.domain_names
        assignments = tuple(jnp.asarray(self.assignments[name].reshape(-1, self.assignments[name].shape[-1]))
                            for name in names)
        hyper = tuple(jnp.asarray(self.hyper[name].reshape(-1, self.hyper[name].shape[-1]))
                      for name in self.schema.relation_names)
        probs = _draw_predictive(assignments, hyper, self._arrays, jnp.asarray(cells, jnp.int32),
                                 schema=self.schema, capacities=self.capacities, relation=index)
        return np.asarray(probs).mean(axis=0)


@partial(jax.jit, static_argnames=("schema", "capacities", "relation"))
def _draw_predictive(assignments, hyper, arrays, cells, *, schema, capacities, relation):
    def one(draw_assignments, draw_hyper):
        counts = block_counts(draw_assignments, arrays, schema, capacities)
        state = IRMState(draw_assignments, (), counts, None, draw_hyper, None)
        return _predictive(state, relation, cells, schema)

    return jax.lax.map(lambda args: one(*args), (assignments, hyper))
