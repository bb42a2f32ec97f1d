"""The parameters of the latent-class relational model, their statistics, M-step and free energy.

What every pass of :mod:`zoo.relational.latent_class` reads and writes: :class:`LRMParams` (θ and
the factorised posterior q), the expected counts :class:`LRMStats` of q (CP eqs. 5–6), the M-step
(CP eq. 5, MAP with pseudo-counts c) and the free energy F(q, θ) (CP eq. 2) with the penalised
objective F + c Σ log θ. The incremental and batch passes are in
``zoo/relational/_latent_class_passes.py``, the fit in ``zoo/relational/_latent_class_fit.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from zoo.relational.data import RelationalArrays, RelationalSchema


# ----------------------------------------------------------------------------- parameters
class LRMParams(NamedTuple):
    """Parameters and class posteriors of an LRM.

    Attributes
    ----------
    class_weights : tuple of (g_D,) arrays — θ_{h_D}, the class prior of each domain
    relation_probs : tuple of (g_{D_1}, ..., g_{D_k}, |r|) arrays — θ_r (CP eq. 5), last axis sums to 1
    responsibilities : tuple of (n_D, g_D) arrays — q_a, the factorised class posterior (CP eq. 4)
    """

    class_weights: tuple
    relation_probs: tuple
    responsibilities: tuple

    def program_params(self, schema: RelationalSchema) -> dict:
        """The parameters under the site names of :func:`latent_class_program`."""
        params = {f"class_weights_{name}": weights for name, weights in zip(schema.domain_names, self.class_weights)}
        params.update({f"relation_probs_{name}": probs
                       for name, probs in zip(schema.relation_names, self.relation_probs)})
        return params


class LRMStats(NamedTuple):
    """Expected counts under q (CP eqs. 5–6).

    Attributes
    ----------
    class_counts : tuple of (g_D,) arrays — Σ_a q_a(g)
    relation_counts : tuple of (g_{D_1}, ..., g_{D_k}, |r|) arrays — N(r = u ∧ H = g)
    """

    class_counts: tuple
    relation_counts: tuple


class LRMInfo(NamedTuple):
    """What one pass reports.

    Attributes
    ----------
    bound : scalar — F(q, θ) after the pass (CP eq. 2 with factorised q)
    objective : scalar — F + c Σ log θ, the quantity the pass increases at β = 1
    """

    bound: Any
    objective: Any


def _one_hot(values: Any, n_values: int, dtype: Any) -> Any:
    return jax.nn.one_hot(values, n_values, dtype=dtype)


def _working_weights(weights: Any, dtype: Any) -> Any:
    """Cell weights in the parameters' dtype, the working precision.

    The arrays carry weights in JAX's default float, the parameters may be narrower (float32
    under x64); statistics built from float64 weights would turn the float32 carries of the
    incremental pass into float64 ones.
    """
    return weights.astype(dtype)


# ----------------------------------------------------------------------------- sufficient statistics
def sufficient_statistics(responsibilities: tuple, arrays: RelationalArrays, schema: RelationalSchema) -> LRMStats:
    """Exact expected counts from the class posteriors (CP eqs. 5–6), all cells at once.

    N_r[g_1, g_2, u] = Σ_j w_j [y_j = u] q_{a_j}(g_1) q_{b_j}(g_2), with w_j the cell weights.
    The counts are in the dtype of q (float32 parameters under x64 stay float32).
    """
    class_counts = tuple(resp.sum(axis=0) for resp in responsibilities)
    relation_counts = []
    for relation, domains in enumerate(schema.relation_domains):
        cells = arrays.entries[relation]
        dtype = responsibilities[domains[0]].dtype
        weights = _working_weights(arrays.weights[relation], dtype)
        value_weights = _one_hot(arrays.values[relation], schema.n_values[relation], dtype) * weights[:, None]
        first = responsibilities[domains[0]][cells[:, 0]]
        if len(domains) == 1:
            relation_counts.append(jnp.matmul(first.T, value_weights, precision="highest"))
        else:
            second = responsibilities[domains[1]][cells[:, 1]]
            # One (g_1 × n) @ (n × g_2|r|) product: faster on CPU than a three-operand einsum.
            pairs = (second[:, :, None] * value_weights[:, None, :]).reshape(cells.shape[0], -1)
            relation_counts.append(jnp.matmul(first.T, pairs, precision="highest").reshape(first.shape[1], second.shape[1], -1))
    return LRMStats(class_counts, tuple(relation_counts))


# ----------------------------------------------------------------------------- M-step
def _normalise_last(counts: Any, prior_count: float) -> Any:
    """θ ∝ max(N, 0) + c along the last axis; a slice with no mass becomes uniform."""
    mass = jnp.maximum(counts, 0.0) + prior_count
    total = mass.sum(axis=-1, keepdims=True)
    uniform = jnp.full_like(mass, 1.0 / mass.shape[-1])
    return jnp.where(total > 0, mass / jnp.where(total > 0, total, 1.0), uniform)


def relation_prior(prior_count: float, counts: Any, symmetric: bool) -> Any:
    """The pseudo-count of every block of a relation's θ, to broadcast against its counts.

    c for every block (g_1, g_2) of a relation; a symmetric relation has one Dirichlet(1 + c)
    prior per unordered block {g_1, g_2}, whose counts (½ per cell, both cells of each pair)
    sit in both (g_1, g_2) and (g_2, g_1): c on the diagonal and c/2 off it, so that off the
    diagonal θ ∝ N + c/2 is the unordered block's θ ∝ 2N + c.
    """
    if not symmetric:
        return prior_count
    n_classes = counts.shape[0]
    return (prior_count * jnp.where(jnp.eye(n_classes, dtype=bool), 1.0, 0.5)[:, :, None]).astype(counts.dtype)


def relation_m_step(counts: Any, prior_count: float, symmetric: bool) -> Any:
    """θ_r maximising the objective for the relation's expected counts N_r (CP eq. 5)."""
    return _normalise_last(counts, relation_prior(prior_count, counts, symmetric))


def _per_relation(symmetric: tuple, n_relations: int) -> tuple:
    """``RelationalSchema.symmetric`` with one entry per relation (it is empty when none is symmetric)."""
    return symmetric or (False,) * n_relations


def m_step(stats: LRMStats, prior_count: float, symmetric: tuple = ()) -> tuple[tuple, tuple]:
    """(class_weights, relation_probs) maximising the objective for fixed q (CP eq. 5).

    ``symmetric``: whether each relation is symmetric (``RelationalSchema.symmetric``; empty:
    none is), which sets its blocks' pseudo-counts (:func:`relation_prior`).
    """
    symmetric = _per_relation(symmetric, len(stats.relation_counts))
    class_weights = tuple(_normalise_last(counts, prior_count) for counts in stats.class_counts)
    relation_probs = tuple(relation_m_step(counts, prior_count, sym)
                           for counts, sym in zip(stats.relation_counts, symmetric))
    return class_weights, relation_probs


def _safe_log(probabilities: Any) -> Any:
    return jnp.log(jnp.maximum(probabilities, jnp.finfo(probabilities.dtype).tiny))


def _weighted_log(counts: Any, probabilities: Any) -> Any:
    """Σ N log θ with 0 log 0 = 0."""
    return jnp.sum(jnp.where(counts > 0, counts * _safe_log(probabilities), 0.0))


# ----------------------------------------------------------------------------- free energy
def free_energy(params: LRMParams, arrays: RelationalArrays, schema: RelationalSchema,
                prior_count: float = 0.0) -> LRMInfo:
    """F(q, θ) = E_q log P(y, h | θ) + Σ_a H(q_a) and the penalised objective F + c Σ log θ.

    A symmetric relation's pairs count once (their cells weigh ½ each, ``RelationalArrays``) and
    so do its unordered blocks in the penalty (:func:`relation_prior`).
    """
    return _free_energy_from_stats(params, sufficient_statistics(params.responsibilities, arrays, schema),
                                   prior_count, schema.symmetric)


def _free_energy_from_stats(params: LRMParams, stats: LRMStats, prior_count: float, symmetric: tuple) -> LRMInfo:
    symmetric = _per_relation(symmetric, len(stats.relation_counts))
    expected = sum(_weighted_log(counts, probs) for counts, probs in zip(stats.relation_counts, params.relation_probs))
    expected += sum(_weighted_log(counts, weights) for counts, weights in zip(stats.class_counts, params.class_weights))
    entropy = -sum(_weighted_log(resp, resp) for resp in params.responsibilities)
    bound = expected + entropy
    penalty = sum(jnp.sum(relation_prior(prior_count, probs, sym) * _safe_log(probs))
                  for probs, sym in zip(params.relation_probs, symmetric))
    penalty += prior_count * sum(jnp.sum(_safe_log(weights)) for weights in params.class_weights)
    return LRMInfo(bound=bound, objective=bound + penalty)


def _reduce(reduce: Any, value: Any) -> Any:
    """Apply the cross-block reduction (identity when fitting on one device)."""
    return value if reduce is None else reduce(value)


def _statistics(responsibilities: tuple, arrays: RelationalArrays, schema: RelationalSchema, reduce: Any) -> LRMStats:
    """:func:`sufficient_statistics` with the sums over cells added up across blocks by ``reduce``."""
    stats = sufficient_statistics(responsibilities, arrays, schema)
    return stats._replace(relation_counts=_reduce(reduce, stats.relation_counts))
