"""The state of an IRM chain, how it starts, and what is computed from it.

:class:`IRMState` (partitions as slots of a fixed capacity, block value counts, α, γ, overflow)
and :class:`IRMInfo` (label-invariant summaries of a sweep); :func:`init`, a random start; the
collapsed likelihood P(y | z, γ) (Kemp et al. 2006), the CRP prior and the log joint; and the
collapsed predictive of a cell. The sweeps are in ``zoo/relational/_infinite_kernel.py`` (XLA)
and ``inference/native/relational_gibbs.py`` (numba); the model is
:class:`zoo.relational.infinite.InfiniteRelational`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from inference._validation import check_key
from zoo.relational.data import RelationalArrays, RelationalSchema


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
    moves : int32 (n_domains, 4) — the sweep's split–merge moves per domain: splits proposed and
        accepted, merges proposed and accepted (``zoo.relational._infinite_moves.MOVE_STATISTICS``)
    """

    n_clusters: Any
    log_joint: Any
    concentrations: Any
    hyper: tuple
    overflow: Any
    moves: Any


# ----------------------------------------------------------------------------- collapsed likelihood
def _log_beta(concentration: Any) -> Any:
    """log B(a) = Σ_u log Γ(a_u) - log Γ(Σ_u a_u) over the last axis."""
    return jnp.sum(gammaln(concentration), axis=-1) - gammaln(jnp.sum(concentration, axis=-1))


def block_counts(assignments: tuple, arrays: RelationalArrays, schema: RelationalSchema,
                 capacities: tuple[int, ...]) -> tuple:
    """Exact value counts of every block from the assignments (weights of hidden cells are 0).

    A symmetric relation (an undirected network, ``schema.is_symmetric``) counts each unordered
    pair {a, b} once, from its cell with a ≤ b (the mirror is observed or hidden with it): the
    block of clusters {k, l} holds the pairs between them at both (k, l) and (l, k), and (k, k)
    the pairs within k. One parameter per unordered pair of clusters; counting both cells, as for
    a directed relation, gave every pair twice and the blocks within a cluster each pair as two
    independent observations, which over-split: 16 clusters on a 100-node Erdős–Rényi graph with
    no structure at all, where each pair once gives 1 (measured 2026-12-07).
    """
    counts = []
    for relation, domains in enumerate(schema.relation_domains):
        cells = arrays.entries[relation]
        block = tuple(assignments[domain][cells[:, position]] for position, domain in enumerate(domains))
        shape = tuple(capacities[domain] for domain in domains) + (schema.n_values[relation],)
        seen = arrays.weights[relation] > 0
        if schema.is_symmetric(relation):
            seen = seen & (cells[:, 0] <= cells[:, 1])
        once = jnp.zeros(shape, jnp.int32).at[block + (arrays.values[relation],)].add(seen.astype(jnp.int32))
        counts.append(symmetrised(once) if schema.is_symmetric(relation) else once)
    return tuple(counts)


def symmetrised(once: Any) -> Any:
    """Counts (K, K, |r|) of pairs placed once, at (z_a, z_b) for a ≤ b, as every unordered block
    holds them: (k, l) and (l, k) both get the pairs between k and l, (k, k) those within k."""
    diagonal = jnp.eye(once.shape[0], dtype=bool)[:, :, None]
    return once + jnp.swapaxes(once, 0, 1) - jnp.where(diagonal, once, 0)


def upper_blocks(capacity: int) -> Any:
    """(K, K, 1) bool: the blocks k ≤ l, one for each unordered pair of clusters of a symmetric relation."""
    return jnp.triu(jnp.ones((capacity, capacity), dtype=bool))[:, :, None]


def collapsed_log_likelihood(counts: tuple, hyper: tuple, symmetric: tuple = ()) -> Any:
    """log P(y | z, γ) = Σ_r Σ_blocks [log B(γ_r + n_block) - log B(γ_r)] (Kemp et al. 2006).

    ``symmetric`` (``RelationalSchema.symmetric``) marks the relations whose blocks are the
    unordered pairs of clusters k ≤ l (:func:`block_counts`).
    """
    total = 0.0
    for relation, (relation_counts, concentration) in enumerate(zip(counts, hyper)):
        blocks = _log_beta(concentration + relation_counts.astype(concentration.dtype)) - _log_beta(concentration)
        if symmetric and symmetric[relation]:
            blocks = jnp.where(upper_blocks(relation_counts.shape[0])[..., 0], blocks, 0.0)
        total = total + jnp.sum(blocks)
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
    return prior + collapsed_log_likelihood(state.counts, state.hyper, schema.symmetric)


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


def grown(state: IRMState, schema: RelationalSchema, capacities: tuple[int, ...]) -> IRMState:
    """``state`` (of one chain or of chains on leading axes) with more slots: ``capacities`` per
    domain, the new slots empty and their blocks without counts; ``overflow`` cleared.

    The same partitions, counts, α and γ: a chain continued from it draws what the chain at these
    capacities would have (the sweeps' draws do not depend on the capacity while it suffices; the
    log joint, a sum over the blocks, may differ in its last bit).
    """
    def pad(array: Any, axes: tuple[int, ...], targets: tuple[int, ...]) -> Any:
        widths = [(0, 0)] * array.ndim
        for axis, target in zip(axes, targets):
            widths[axis] = (0, target - array.shape[axis])
        return jnp.pad(array, widths)

    sizes = tuple(pad(sizes, (-1,), (capacity,)) for sizes, capacity in zip(state.sizes, capacities))
    counts = tuple(pad(counts, tuple(range(-len(domains) - 1, -1)), tuple(capacities[d] for d in domains))
                   for counts, domains in zip(state.counts, schema.relation_domains))
    return state._replace(sizes=sizes, counts=counts, overflow=jnp.zeros_like(state.overflow))


def _predictive(state: IRMState, relation: int, cells: Any, schema: RelationalSchema) -> Any:
    """P(r(cell) = u | z, y, γ) = (γ_u + n_block,u) / (Σγ + n_block) for cells (n, arity)."""
    domains = schema.relation_domains[relation]
    block = tuple(state.assignments[domain][cells[:, position]] for position, domain in enumerate(domains))
    mass = state.hyper[relation] + state.counts[relation][block].astype(state.hyper[relation].dtype)
    return mass / jnp.sum(mass, axis=-1, keepdims=True)
