"""Latent-class relational models (LRM) fitted by incremental EM (CP §1–2, Fig. 1).

Every individual a of a domain D has a latent class h_D(a) ∈ {1, ..., g_D} with prior
θ_{h_D} = P(h_D = g) (CP §1), and every observed cell of a relation r : D_1 × D_2 → {v_1, ...}
has the classes of its arguments as parents: P(r(a, b) = u | h) = θ_r[h_{D_1}(a), h_{D_2}(b), u]
(shared by all cells of r). Unobserved cells are omitted (missing at random, CP §2).

Incremental EM (CP §2, Neal & Hinton 1998). The exact posterior over all classes is intractable,
so q(h) = Π_a q_a(h(a)) is kept fully factorised and EM climbs the free energy

    F(q, θ) = E_q[log P(y, h | θ)] + Σ_a H(q_a)  <=  L(θ) = log P(y | θ)          (CP eq. 2)

one individual at a time. The partial E-step (CP eq. 4) recomputes q_a from a's Markov blanket —
the observed cells it takes part in and the current q of their other arguments — with everyone
else fixed; the M-step (CP eqs. 5–6) re-estimates θ_r[g, u] = N(r = u ∧ H = g) / N(H = g) from
expected counts whose case weights are w_j = Π_i q_{a_i}(g_i), updated incrementally by the change
q_a^new - q_a^old. Each partial step maximises F over one coordinate, so F never decreases at
β = 1, which Neal & Hinton's convergence argument needs. Two remarks on the paper's formulas:

* The coordinate maximiser of F is q_a(g) ∝ θ_{h_D}[g] exp(Σ_j E_{q}[log θ_r[y_j, g, h(b_j)]]),
  the mean-field form of the blanket marginal in eq. 4 (the expectation is over the blanket's
  latent variables, as eq. 4's sum says, taken inside the logarithm).
* CP eq. 3 sums the prior and entropy terms of each individual once per observed cell it takes
  part in; the bound tracked here counts them once per individual, which makes it a true lower
  bound on L(θ) (eq. 2 with factorised q) — the quantity the tests compare with the exact
  log-likelihood.

Tempering (as in the other EM models, H99 §4) raises the likelihood term of the E-step to β:
q_a(g) ∝ θ_{h_D}[g] exp(β Σ_j ...). With ``prior_count`` c > 0 the M-step is the MAP estimate
under symmetric Dirichlet(1 + c) priors (θ ∝ N + c) and the tracked ``objective`` is
F + c Σ log θ; with c = 0 it is CP's maximum-likelihood M-step and ``objective`` = F.

Batch passes and several devices. The incremental pass visits individuals one after another, so
it cannot be split over devices. :func:`batch_pass` is the full-batch alternative used by
``tempered_em(model.bind(data, update="batch"), ..., devices=n)``: domain after domain, every
q_a of the domain is recomputed at once from the same blanket sums (CP eq. 4, mean-field form)
and θ re-estimated (CP eq. 5). The blanket sums and the expected counts are sums over observed
cells, so with the cells split over devices each device sums its block and a ``psum`` adds them
up: the sharded pass equals the single-device one up to rounding. Between two different domains
the update of a whole domain is an exact block coordinate step on F (F never decreases at
β = 1); for a relation of a domain with itself (a social network) the individuals of the domain
are updated simultaneously from the previous q, which is not guaranteed to increase F.

The file reads top to bottom: the NumPyro program, the parameters, the sufficient statistics,
the M-step, the free energy, the incremental E-step (one pass = a ``lax.scan`` over the
individuals of each domain), the fit (passes in a ``lax.while_loop``, restarts ``vmap``ped, all
inside one ``jit``), prediction of held-out cells and the exact log-likelihood by enumeration.
The numba twin of the incremental pass (its loop and the flat list of cells it reads) is in
``zoo/relational/_latent_class_numba.py``; :func:`iem_pass` calls it as an XLA custom call.
Relations of arity 1 and 2 are supported; observed self-pairs r(a, a) are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from inference._xla_ffi import register_handler
from inference.em import _DeferredInterrupt
from inference.segments import segment_sum
from inference.sparse import resolve_backend
from inference._validation import (check_choice, check_int, check_key, check_memory, check_real, check_relation,
                             tree_nbytes)
from zoo.relational._latent_class_numba import _IEM_HANDLERS, FlatCells, flat_cells
from zoo.relational.data import RelationalArrays, RelationalData, RelationalSchema

__all__ = [
    "latent_class_program",
    "LRMParams",
    "LRMStats",
    "LRMInfo",
    "LatentClassRelational",
    "LRMResult",
    "sufficient_statistics",
    "m_step",
    "free_energy",
    "iem_pass",
    "batch_pass",
    "predict_proba",
    "exact_log_likelihood",
]


# ----------------------------------------------------------------------------- the program
def latent_class_program(entries, values=None, *, schema: RelationalSchema, n_classes: tuple[int, ...]):
    """NumPyro program of the LRM (CP Fig. 1): an enumerated class per individual.

    Parameters
    ----------
    entries : tuple of int arrays, one per relation, shape (n_observed_r, arity_r)
        The cells of each relation to observe (or to simulate).
    values : tuple of int arrays, shape (n_observed_r,), optional
        Observed value codes; omit to simulate.
    schema : RelationalSchema
    n_classes : tuple of int
        g_D for every domain.

    Sites
    -----
    ``class_weights_{D}`` (g_D,) and ``relation_probs_{r}`` (g_{D_1}, ..., g_{D_k}, |r|) are params
    on the simplex (last axis); ``class_{D}`` is the class of every individual, in the plate named
    after the domain D; ``{r}`` are the cells of relation r, in the plate ``{r}_cells``.
    """
    classes = []
    for domain, (name, size) in enumerate(zip(schema.domain_names, schema.domain_sizes)):
        n_domain_classes = n_classes[domain]
        weights = numpyro.param(
            f"class_weights_{name}", jnp.full((n_domain_classes,), 1.0 / n_domain_classes),
            constraint=dist.constraints.simplex,
        )
        with numpyro.plate(name, size):
            classes.append(
                numpyro.sample(f"class_{name}", dist.Categorical(weights), infer={"enumerate": "parallel"})
            )
    for relation, (name, domains, n_values) in enumerate(
        zip(schema.relation_names, schema.relation_domains, schema.n_values)
    ):
        shape = tuple(n_classes[domain] for domain in domains) + (n_values,)
        probs = numpyro.param(
            f"relation_probs_{name}", jnp.full(shape, 1.0 / n_values), constraint=dist.constraints.simplex
        )
        cells = jnp.asarray(entries[relation])
        parents = tuple(classes[domain][..., cells[:, position]] for position, domain in enumerate(domains))
        with numpyro.plate(f"{name}_cells", cells.shape[0]):
            numpyro.sample(name, dist.Categorical(probs[parents]),
                           obs=None if values is None else jnp.asarray(values[relation]))


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


def m_step(stats: LRMStats, prior_count: float) -> tuple[tuple, tuple]:
    """(class_weights, relation_probs) maximising the objective for fixed q (CP eq. 5)."""
    class_weights = tuple(_normalise_last(counts, prior_count) for counts in stats.class_counts)
    relation_probs = tuple(_normalise_last(counts, prior_count) for counts in stats.relation_counts)
    return class_weights, relation_probs


def _safe_log(probabilities: Any) -> Any:
    return jnp.log(jnp.maximum(probabilities, jnp.finfo(probabilities.dtype).tiny))


def _weighted_log(counts: Any, probabilities: Any) -> Any:
    """Σ N log θ with 0 log 0 = 0."""
    return jnp.sum(jnp.where(counts > 0, counts * _safe_log(probabilities), 0.0))


# ----------------------------------------------------------------------------- free energy
def free_energy(params: LRMParams, arrays: RelationalArrays, schema: RelationalSchema,
                prior_count: float = 0.0) -> LRMInfo:
    """F(q, θ) = E_q log P(y, h | θ) + Σ_a H(q_a) and the penalised objective F + c Σ log θ."""
    return _free_energy_from_stats(params, sufficient_statistics(params.responsibilities, arrays, schema),
                                   prior_count)


def _free_energy_from_stats(params: LRMParams, stats: LRMStats, prior_count: float) -> LRMInfo:
    expected = sum(_weighted_log(counts, probs) for counts, probs in zip(stats.relation_counts, params.relation_probs))
    expected += sum(_weighted_log(counts, weights) for counts, weights in zip(stats.class_counts, params.class_weights))
    entropy = -sum(_weighted_log(resp, resp) for resp in params.responsibilities)
    bound = expected + entropy
    penalty = sum(jnp.sum(_safe_log(probs)) for probs in params.relation_probs)
    penalty += sum(jnp.sum(_safe_log(weights)) for weights in params.class_weights)
    return LRMInfo(bound=bound, objective=bound + prior_count * penalty)


# ----------------------------------------------------------------------------- incremental E-step
def _blanket_message(relation: int, position: int, individual: Any, responsibilities: tuple,
                     arrays: RelationalArrays, schema: RelationalSchema) -> Any:
    """M[o, u] = Σ_{j in blanket} w_j [y_j = u] q_{b_j}(o): a's cells summarised by value and co-parent class."""
    cells = arrays.blankets[relation][position][individual]
    weights = _working_weights(arrays.weights[relation][cells], responsibilities[0].dtype)
    value_weights = _one_hot(arrays.values[relation][cells], schema.n_values[relation], weights.dtype) * weights[:, None]
    domains = schema.relation_domains[relation]
    if len(domains) == 1:
        return value_weights.sum(axis=0)
    other = 1 - position
    co_parents = responsibilities[domains[other]][arrays.entries[relation][cells, other]]
    return jnp.matmul(co_parents.T, value_weights, precision="highest")


def _message_score(log_probs: Any, message: Any, position: int, arity: int) -> Any:
    """Σ_{o,u} M[o, u] log θ[g at ``position``, o, u] for every class g of the individual."""
    if arity == 1:
        return jnp.matmul(log_probs, message, precision="highest")
    if position == 0:
        return jnp.einsum("gou,ou->g", log_probs, message, precision="highest")
    return jnp.einsum("ogu,ou->g", log_probs, message, precision="highest")


def _message_counts(delta: Any, message: Any, position: int, arity: int) -> Any:
    """Change of N_r when q_a changes by ``delta``: Δq_a ⊗ M at the individual's axis."""
    if arity == 1:
        return delta[:, None] * message[None, :]
    if position == 0:
        return delta[:, None, None] * message[None, :, :]
    return message[:, None, :] * delta[None, :, None]


def _domain_pass(domain: int, carry: tuple, arrays: RelationalArrays, beta: Any, *,
                 schema: RelationalSchema, prior_count: float) -> tuple:
    """One partial E-step + incremental M-step per individual of ``domain`` (a ``lax.scan``)."""
    incidences = schema.incidences(domain)
    touched = sorted({relation for relation, _ in incidences})

    def visit(carry, individual):
        responsibilities, class_counts, relation_counts, class_weights, relation_probs = carry
        old = responsibilities[domain][individual]
        score = _safe_log(class_weights[domain])
        messages = []
        for relation, position in incidences:
            arity = len(schema.relation_domains[relation])
            message = _blanket_message(relation, position, individual, responsibilities, arrays, schema)
            # CP eq. 4 (mean-field form), likelihood term tempered by β (H99 §4).
            score = score + beta * _message_score(_safe_log(relation_probs[relation]), message, position, arity)
            messages.append(message)
        new = jax.nn.softmax(score)
        delta = new - old
        # Incremental sufficient statistics (Neal & Hinton 1998): add Δq_a ⊗ blanket summary.
        relation_counts = list(relation_counts)
        for (relation, position), message in zip(incidences, messages):
            arity = len(schema.relation_domains[relation])
            relation_counts[relation] = relation_counts[relation] + _message_counts(delta, message, position, arity)
        class_counts = list(class_counts)
        class_counts[domain] = class_counts[domain] + delta
        # M-step (CP eq. 5) for what changed: θ_{h_D} and the relations D takes part in.
        class_weights = list(class_weights)
        class_weights[domain] = _normalise_last(class_counts[domain], prior_count)
        relation_probs = list(relation_probs)
        for relation in touched:
            relation_probs[relation] = _normalise_last(relation_counts[relation], prior_count)
        responsibilities = list(responsibilities)
        responsibilities[domain] = responsibilities[domain].at[individual].set(new)
        return (tuple(responsibilities), tuple(class_counts), tuple(relation_counts),
                tuple(class_weights), tuple(relation_probs)), None

    individuals = jnp.arange(schema.domain_sizes[domain])
    carry, _ = jax.lax.scan(visit, carry, individuals)
    return carry


# ----------------------------------------------------------------------------- the same pass, compiled by numba
# The loop and its cell list (FlatCells) live in zoo.relational._latent_class_numba; this is the call.
def _pad_to(array: Any, shape: tuple[int, ...]) -> Any:
    return jnp.pad(array, [(0, target - size) for size, target in zip(array.shape, shape)])


def _numba_pass(responsibilities, stats, class_weights, relation_probs, arrays, flat, beta, *, schema, prior_count):
    """All partial E-steps of one pass in a numba loop, run by XLA as a custom call."""
    n_classes = tuple(resp.shape[1] for resp in responsibilities)
    n_max = max(n_classes)
    n_values_max = max(schema.n_values)
    dtype = responsibilities[0].dtype
    q = jnp.concatenate([_pad_to(resp, (resp.shape[0], n_max)) for resp in responsibilities]
                        + [jnp.zeros((1, n_max), dtype).at[0, 0].set(1.0)])
    class_counts = jnp.stack([_pad_to(counts, (n_max,)) for counts in stats.class_counts])
    log_pi = jnp.stack([_pad_to(_safe_log(weights), (n_max,)) for weights in class_weights])
    counts = jnp.stack([_pad_to(c if c.ndim == 3 else c[:, None, :], (n_max, n_max, n_values_max))
                        for c in stats.relation_counts])
    log_theta = jnp.stack([_pad_to(_safe_log(p) if p.ndim == 3 else _safe_log(p)[:, None, :],
                                   (n_max, n_max, n_values_max)) for p in relation_probs])
    weights = jnp.concatenate([w[:-1] for w in arrays.weights])
    domain_of = np.concatenate([np.full(size, d) for d, size in enumerate(schema.domain_sizes)]).astype(np.int32)
    relation_classes = np.array([[n_classes[doms[0]], n_classes[doms[1]] if len(doms) == 2 else 1]
                                 for doms in schema.relation_domains], np.int32)
    constants = (np.asarray(n_classes, np.int32), np.asarray(schema.n_values, np.int32), relation_classes)

    name = register_handler(f"latentzoo_iem_pass_{jnp.dtype(dtype).name}", _IEM_HANDLERS[jnp.dtype(dtype).name])
    # The handler reads every float argument in the responsibilities' dtype (the data may be wider).
    q = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(q.shape, dtype), vmap_method="expand_dims")(
        *(array.astype(dtype) for array in (q, class_counts, counts, log_theta, log_pi)),
        jnp.asarray(beta, dtype), jnp.asarray(prior_count, dtype), weights.astype(dtype),
        flat.first, flat.second, flat.values, flat.relation, flat.item_start, flat.item_cell, flat.item_position,
        *(jnp.asarray(constant, jnp.int32) for constant in (domain_of, *constants)))
    offsets = np.concatenate([[0], np.cumsum(schema.domain_sizes)])
    return tuple(q[offsets[d]: offsets[d + 1], : n_classes[d]] for d in range(len(n_classes)))


def iem_pass(params: LRMParams, arrays: RelationalArrays, beta: Any, *, schema: RelationalSchema,
             prior_count: float, flat: FlatCells | None = None, backend: str = "xla") -> tuple[LRMParams, LRMInfo]:
    """One incremental-EM pass: every individual of every domain once, in order.

    The pass starts from exact statistics of q and an M-step, visits the individuals (partial
    E-step, incremental statistics, M-step after each), and ends with exact statistics, an M-step
    and the free energy of the result (exact recomputation keeps rounding from accumulating).

    Parameters
    ----------
    backend : {"xla", "numba"}
        "xla": a ``lax.scan`` per domain (any device). "numba": the same visits in a compiled
        loop on the host (CPU; needs ``flat``), an order of magnitude faster there.
    """
    stats = sufficient_statistics(params.responsibilities, arrays, schema)
    class_weights, relation_probs = m_step(stats, prior_count)
    if backend == "numba":
        responsibilities = _numba_pass(params.responsibilities, stats, class_weights, relation_probs, arrays, flat,
                                       beta, schema=schema, prior_count=prior_count)
    else:
        carry = (params.responsibilities, stats.class_counts, stats.relation_counts, class_weights, relation_probs)
        for domain in range(len(schema.domain_sizes)):
            carry = _domain_pass(domain, carry, arrays, beta, schema=schema, prior_count=prior_count)
        responsibilities = carry[0]
    stats = sufficient_statistics(responsibilities, arrays, schema)
    class_weights, relation_probs = m_step(stats, prior_count)
    new_params = LRMParams(class_weights, relation_probs, responsibilities)
    return new_params, _free_energy_from_stats(new_params, stats, prior_count)


# ----------------------------------------------------------------------------- the full-batch pass
def _reduce(reduce: Any, value: Any) -> Any:
    """Apply the cross-block reduction (identity when fitting on one device)."""
    return value if reduce is None else reduce(value)


def _statistics(responsibilities: tuple, arrays: RelationalArrays, schema: RelationalSchema, reduce: Any) -> LRMStats:
    """:func:`sufficient_statistics` with the sums over cells added up across blocks by ``reduce``."""
    stats = sufficient_statistics(responsibilities, arrays, schema)
    return stats._replace(relation_counts=_reduce(reduce, stats.relation_counts))


def _domain_scores(domain: int, responsibilities: tuple, relation_probs: tuple, arrays: RelationalArrays,
                   schema: RelationalSchema) -> Any:
    """Σ_{(r, position)} Σ_{o,u} M_a[o, u] log θ_r[g, o, u] for every individual a of ``domain``, (n_D, g_D).

    M_a is a's blanket summary of :func:`_blanket_message` (CP eq. 4), summed here over the
    cells of ``arrays`` for all individuals at once (``segment_sum``), so blocks of cells add up.
    """
    scores = jnp.zeros((schema.domain_sizes[domain], responsibilities[domain].shape[1]),
                       responsibilities[domain].dtype)
    for relation, position in schema.incidences(domain):
        domains = schema.relation_domains[relation]
        cells = arrays.entries[relation]
        weights = _working_weights(arrays.weights[relation], scores.dtype)
        log_probs = _safe_log(relation_probs[relation])
        value_weights = _one_hot(arrays.values[relation], schema.n_values[relation], weights.dtype) * weights[:, None]
        if len(domains) == 1:
            per_cell = jnp.matmul(value_weights, log_probs.T, precision="highest")
        else:
            co_parents = responsibilities[domains[1 - position]][cells[:, 1 - position]]
            own_first = log_probs if position == 0 else jnp.swapaxes(log_probs, 0, 1)  # (g, o, u)
            pairs = (co_parents[:, :, None] * value_weights[:, None, :]).reshape(cells.shape[0], -1)
            per_cell = jnp.matmul(pairs, own_first.reshape(own_first.shape[0], -1).T, precision="highest")
        scores = scores + segment_sum(per_cell, cells[:, position], num_segments=scores.shape[0])
    return scores


def batch_pass(params: LRMParams, arrays: RelationalArrays, beta: Any, *, schema: RelationalSchema,
               prior_count: float, reduce: Any = None) -> tuple[LRMParams, LRMInfo]:
    """One full-batch pass: domain after domain, all q_a of the domain at once, then θ.

    Starts from exact statistics and an M-step; for every domain recomputes q_a(g) ∝
    θ_{h_D}[g] exp(β Σ_j E_q log θ_r[...]) for all its individuals from the same q (CP eq. 4,
    mean-field form, tempered as in H99 §4), then the exact statistics and the M-step (CP eq. 5).
    Returns the new parameters and their free energy (module docstring: monotone between
    distinct domains, a simultaneous update within a self-related domain).

    Parameters
    ----------
    reduce : callable, optional
        Adds up sums over cells across blocks (a ``psum`` over devices when ``arrays`` holds one
        block of cells per device, :meth:`BoundLatentClassRelational.prepare_sharded`).
    """
    stats = _statistics(params.responsibilities, arrays, schema, reduce)
    class_weights, relation_probs = m_step(stats, prior_count)
    responsibilities = params.responsibilities
    for domain in range(len(schema.domain_sizes)):
        scores = _reduce(reduce, _domain_scores(domain, responsibilities, relation_probs, arrays, schema))
        # CP eq. 4 (mean-field form), likelihood term tempered by β (H99 §4).
        new = jax.nn.softmax(_safe_log(class_weights[domain])[None, :] + beta * scores, axis=1)
        responsibilities = responsibilities[:domain] + (new,) + responsibilities[domain + 1:]
        stats = _statistics(responsibilities, arrays, schema, reduce)
        class_weights, relation_probs = m_step(stats, prior_count)
    new_params = LRMParams(class_weights, relation_probs, responsibilities)
    return new_params, _free_energy_from_stats(new_params, stats, prior_count)


def _sharded_cells(arrays: RelationalArrays, n_shards: int) -> RelationalArrays:
    """Every relation's cells cut into ``n_shards`` equal blocks (padded with weight-0 cells)."""

    def blocks(cells: Any) -> Any:
        block = -(-cells.shape[0] // n_shards)
        padding = jnp.zeros((block * n_shards - cells.shape[0],) + cells.shape[1:], cells.dtype)
        return jnp.concatenate([cells, padding]).reshape((n_shards, block) + cells.shape[1:])

    return RelationalArrays(tuple(map(blocks, arrays.entries)), tuple(map(blocks, arrays.values)),
                            tuple(map(blocks, arrays.weights)), blankets=None)


def _init_params(rng_key: Any, arrays: RelationalArrays, *, schema: RelationalSchema,
                 n_classes: tuple[int, ...], prior_count: float) -> LRMParams:
    """Random start: every q_a ~ Dirichlet(1, ..., 1), then an M-step."""
    dtype = arrays.weights[0].dtype
    keys = jax.random.split(rng_key, len(schema.domain_sizes))
    responsibilities = []
    for key_domain, size, n_domain_classes in zip(keys, schema.domain_sizes, n_classes):
        draws = jax.random.exponential(key_domain, (size, n_domain_classes), dtype)
        responsibilities.append(draws / draws.sum(axis=1, keepdims=True))
    responsibilities = tuple(responsibilities)
    class_weights, relation_probs = m_step(sufficient_statistics(responsibilities, arrays, schema), prior_count)
    return LRMParams(class_weights, relation_probs, responsibilities)


# ----------------------------------------------------------------------------- the fit
class _FitState(NamedTuple):
    params: Any
    n_passes: Any
    previous: Any
    bound: Any  # (max_passes,) history
    objective: Any  # (max_passes,) history
    done: Any


def _start_one(rng_key, arrays, prior_count, *, schema, n_classes, max_passes):
    """A random start and empty (max_passes,) histories."""
    params = _init_params(rng_key, arrays, schema=schema, n_classes=n_classes, prior_count=prior_count)
    dtype = arrays.weights[0].dtype
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


def _fit_one(rng_key, arrays, flat, beta, tol, prior_count, *, schema, n_classes, max_passes, backend):
    state = _start_one(rng_key, arrays, prior_count, schema=schema, n_classes=n_classes, max_passes=max_passes)
    return _advance_one(state, arrays, flat, beta, tol, prior_count, max_passes, schema=schema, backend=backend)


_ARRAYS_SHARED = RelationalArrays(entries=None, values=None, weights=None, blankets=None)
_ARRAYS_BY_CASE = RelationalArrays(entries=None, values=None, weights=0, blankets=None)


_STATIC = ("schema", "n_classes", "max_passes", "backend")


@partial(jax.jit, static_argnames=("schema", "n_classes", "max_passes"))
def _start_restarts(keys, arrays, prior_count, *, schema, n_classes, max_passes):
    start = partial(_start_one, schema=schema, n_classes=n_classes, max_passes=max_passes)
    return jax.vmap(start, in_axes=(0, _ARRAYS_SHARED, None))(keys, arrays, prior_count)


@partial(jax.jit, static_argnames=("schema", "backend"))
def _advance_restarts(states, arrays, flat, beta, tol, prior_count, stop_at, *, schema, backend):
    advance = partial(_advance_one, schema=schema, backend=backend)
    return jax.vmap(advance, in_axes=(0, _ARRAYS_SHARED, None, None, None, None, None))(
        states, arrays, flat, beta, tol, prior_count, stop_at)


def _run_passes(advance, states, *, max_passes, passes_per_call):
    """Call ``advance(states, stop_at)`` in calls of ``passes_per_call`` passes; stop on convergence or Ctrl-C.

    Ctrl-C is acted on between calls (:class:`inference.em._DeferredInterrupt`): the states of
    the last finished call are returned, with ``"interrupted"``; a second Ctrl-C abandons the fit.
    """
    stopped_by = "max_passes"
    stop_at = 0
    with _DeferredInterrupt() as interrupt:
        while stop_at < max_passes:
            stop_at = min(stop_at + passes_per_call, max_passes)
            states = advance(states, stop_at)
            if np.asarray(states.done).all():
                stopped_by = "converged"
                break
            if interrupt.requested:
                stopped_by = "interrupted"
                break
    return states, stopped_by


@partial(jax.jit, static_argnames=_STATIC)
def _fit_cases(keys, arrays, flat, beta, tol, prior_count, *, schema, n_classes, max_passes, backend):
    """Fits for many weightings of the same cells (held-out cases) × restarts; keeps the best restart."""
    fit = partial(_fit_one, schema=schema, n_classes=n_classes, max_passes=max_passes, backend=backend)
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


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class LatentClassRelational:
    """Latent-class relational model with fixed numbers of classes, fitted by incremental EM.

    Parameters
    ----------
    n_classes : int or dict
        g_D, the same for every domain (an int, e.g. 2 for CP's iEM(2)) or per domain name.
    prior_count : float
        Dirichlet pseudo-count c added to the expected counts in the M-step (0: CP's maximum
        likelihood; the default 1 keeps held-out predictions away from 0 and 1).
    backend : {"auto", "xla", "numba"}
        Implementation of the pass over individuals (:func:`iem_pass`); "auto" is numba on the
        CPU backend when numba is installed, else XLA.

    Examples
    --------
    >>> import jax
    >>> from zoo.relational.data import load_karate_club
    >>> result = LatentClassRelational(2).fit(load_karate_club(), key=jax.random.key(0), n_restarts=2, max_passes=20)
    >>> result.params.relation_probs[0].shape
    (2, 2, 2)
    """

    n_classes: int | dict = 2
    prior_count: float = 1.0
    backend: str = "auto"

    #: The fields of :class:`LRMParams` that are distributions, and the axis each sums to 1 along
    #: (``init=`` of :func:`inference.em.tempered_em` is checked against it).
    probability_axes: ClassVar[dict] = {"class_weights": -1, "relation_probs": -1, "responsibilities": -1}

    def __post_init__(self) -> None:
        check_choice("backend", self.backend, ("auto", "xla", "numba"))
        if isinstance(self.n_classes, dict):
            if not self.n_classes:
                raise ValueError("n_classes: the dict is empty")
            for name, value in self.n_classes.items():
                check_int(f"n_classes[{name!r}]", value, minimum=1)
            object.__setattr__(self, "n_classes", tuple(sorted(self.n_classes.items())))
        elif isinstance(self.n_classes, tuple):
            for name, value in self.n_classes:
                check_int(f"n_classes[{name!r}]", value, minimum=1)
        else:
            check_int("n_classes", self.n_classes, minimum=1)
        check_real("prior_count", self.prior_count, low=0.0)

    program = staticmethod(latent_class_program)

    # ---------------------------------------------------------------- data
    def classes_for(self, schema: RelationalSchema) -> tuple[int, ...]:
        """g_D for each domain of ``schema``."""
        if isinstance(self.n_classes, tuple):
            given = dict(self.n_classes)
            unknown = set(given) - set(schema.domain_names)
            if unknown:
                raise ValueError(f"n_classes: unknown domains {sorted(unknown)} (domains: {schema.domain_names})")
            missing = [name for name in schema.domain_names if name not in given]
            if missing:
                raise ValueError(f"n_classes: no number of classes for domains {missing}")
            return tuple(int(given[name]) for name in schema.domain_names)
        return tuple(int(self.n_classes) for _ in schema.domain_names)

    def check_data(self, data: Any) -> RelationalData:
        """Validate ``data`` for this model (type, arity <= 2, no observed self-pairs)."""
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        for relation in data.relations:
            if relation.arity > 2:
                raise ValueError(f"data: relation {relation.name!r} has arity {relation.arity}; "
                                 "the models support arity 1 and 2")
            if relation.has_self_pairs:
                raise ValueError(f"data: relation {relation.name!r} observes self-pairs r(a, a); mask the diagonal")
        return data

    def prepare(self, data: RelationalData) -> tuple[RelationalArrays, FlatCells | None]:
        """Validate ``data`` and return its device arrays (and the numba pass's cell list)."""
        self.check_data(data)
        backend = resolve_backend(self.backend)
        return data.to_arrays(), (flat_cells(data) if backend == "numba" else None)

    # ---------------------------------------------------------------- EM protocol (inference.em)
    def bind(self, data: RelationalData, *, update: str = "incremental") -> "BoundLatentClassRelational":
        """This model with the schema of ``data`` attached, for :func:`inference.em.tempered_em`.

        ``update`` picks the EM iteration: "incremental" (:func:`iem_pass`) or "batch"
        (:func:`batch_pass`, which can also run on several devices: ``tempered_em(...,
        devices=n)``).
        """
        self.check_data(data)
        return BoundLatentClassRelational(self.n_classes, self.prior_count, self.backend, data.schema, update)

    def _check_memory(self, key: Any, arrays: RelationalArrays, schema: RelationalSchema, n_fits: int) -> None:
        """Refuse class counts whose fits cannot fit in memory (from the start's shapes, traced)."""
        start = jax.eval_shape(partial(_init_params, schema=schema, n_classes=self.classes_for(schema),
                                       prior_count=float(self.prior_count)), key, arrays)
        # Each fit holds the parameters, the new iterate and their statistics (about 4 copies).
        check_memory("n_classes", 4 * n_fits * tree_nbytes(start), f"{n_fits} fit(s) of {self!r}")

    # ---------------------------------------------------------------- fitting
    def fit(
        self,
        data: RelationalData,
        *,
        key: Any,
        n_restarts: int = 10,
        max_passes: int = 200,
        tol: float = 1e-6,
        beta: float = 1.0,
        passes_per_call: int = 25,
    ) -> "LRMResult":
        """Fit by incremental EM with random restarts (CP §3 uses 10), keeping the best.

        Parameters
        ----------
        data : RelationalData
        key : jax PRNG key
            Restart r starts from ``jax.random.split(key, n_restarts)[r]``.
        n_restarts : int
            Independent random starts, run in parallel with ``vmap``.
        max_passes : int
            Cap on passes over all individuals.
        tol : float
            Stop when the objective changes by less than ``tol`` relative.
        beta : float in (0, 1]
            Inverse temperature of the E-step's likelihood term.
        passes_per_call : int
            Passes per jitted call (the result does not depend on it). Between calls Ctrl-C is
            acted on: the first one returns the passes finished by the end of the current call
            (``result.stopped_by == "interrupted"``); a second one abandons the fit with
            ``KeyboardInterrupt``.

        Returns
        -------
        LRMResult
        """
        n_restarts = check_int("n_restarts", n_restarts, minimum=1)
        max_passes = check_int("max_passes", max_passes, minimum=1)
        tol = check_real("tol", tol, low=0.0)
        beta = check_real("beta", beta, low=0.0, high=1.0, low_open=True)
        passes_per_call = check_int("passes_per_call", passes_per_call, minimum=1)
        key = check_key("key", key)
        arrays, flat = self.prepare(data)
        schema = data.schema
        n_classes = self.classes_for(schema)
        self._check_memory(key, arrays, schema, n_restarts)
        dtype = arrays.weights[0].dtype
        keys = jax.random.split(key, n_restarts)
        beta, tol, prior_count = (jnp.asarray(value, dtype) for value in (beta, tol, self.prior_count))
        states = _start_restarts(keys, arrays, prior_count, schema=schema, n_classes=n_classes,
                                 max_passes=max_passes)
        backend = resolve_backend(self.backend)

        def advance(states, stop_at):
            return _advance_restarts(states, arrays, flat, beta, tol, prior_count, jnp.asarray(stop_at, jnp.int32),
                                     schema=schema, backend=backend)

        states, stopped_by = _run_passes(advance, states, max_passes=max_passes, passes_per_call=passes_per_call)
        states = jax.device_get(states)
        n_passes = np.asarray(states.n_passes)
        final = np.asarray(states.objective)[np.arange(n_restarts), np.maximum(n_passes - 1, 0)]
        best = int(np.nanargmax(np.where(np.isfinite(final), final, -np.inf)))
        params = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[best]), states.params)
        return LRMResult(
            model=self,
            schema=schema,
            params=params,
            history={"bound": np.asarray(states.bound[best][: n_passes[best]]),
                     "objective": np.asarray(states.objective[best][: n_passes[best]])},
            restart_scores=final,
            best_restart=best,
            n_passes=int(n_passes[best]),
            converged=bool(states.done[best]),
            stopped_by=stopped_by,
        )

    def predict_held_out(self, data: RelationalData, hidden: Any, *, key: Any, relation: int = 0,
                         n_restarts: int = 10, max_passes: int = 200, tol: float = 1e-6) -> np.ndarray:
        """Fit once per case with that case's cells hidden and predict them (all cases in one ``jit``).

        Parameters
        ----------
        data : RelationalData
        hidden : int array, shape (n_cases, n_hidden)
            Positions (into ``data.relations[relation].entries``) of the cells hidden in each
            case; -1 pads cases with fewer cells.
        key : jax PRNG key
        relation : int
            Index of the relation the cells belong to.

        Returns
        -------
        (n_cases, n_hidden, |r|) array of predictive probabilities (NaN rows for padding).
        """
        n_restarts = check_int("n_restarts", n_restarts, minimum=1)
        max_passes = check_int("max_passes", max_passes, minimum=1)
        tol = check_real("tol", tol, low=0.0)
        key = check_key("key", key)
        arrays, flat = self.prepare(data)
        schema = data.schema
        relation = check_relation("relation", relation, tuple(cells.name for cells in data.relations))
        hidden = _check_hidden(hidden, data.relations[relation].n_observed)
        self._check_memory(key, arrays, schema, n_restarts * hidden.shape[0])
        weights = _case_weights(arrays, hidden, relation)
        case_arrays = arrays._replace(weights=weights)
        n_cases = hidden.shape[0]
        keys = jax.random.split(key, (n_cases, n_restarts))
        dtype = arrays.weights[0].dtype
        params = _fit_cases(keys, case_arrays, flat, jnp.asarray(1.0, dtype), jnp.asarray(tol, dtype),
                            jnp.asarray(self.prior_count, dtype), schema=schema, n_classes=self.classes_for(schema),
                            max_passes=max_passes, backend=resolve_backend(self.backend))
        cells = arrays.entries[relation][jnp.asarray(np.where(hidden < 0, 0, hidden))]
        probs = jax.vmap(lambda case_params, case_cells: predict_proba(case_params, relation, case_cells, schema))(
            params, cells)
        probs = np.array(probs)
        probs[hidden < 0] = np.nan
        return probs


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


@dataclass(frozen=True)
class BoundLatentClassRelational(LatentClassRelational):
    """An LRM bound to one schema: the :class:`inference.em.EMModel` protocol.

    ``em_step`` is one incremental-EM pass (or, with ``update="batch"``, one :func:`batch_pass`)
    at inverse temperature β (so :func:`tempered_em`'s schedules, e.g. Hofmann's tempered EM on
    validation cells, apply), ``log_likelihood`` the free energy and ``heldout_log_lik``
    Σ log P(y_j) of held-out cells of known individuals. Batch passes can be split over devices
    (``prepare_sharded``; the sums over cells take a ``reduce``).
    """

    schema: RelationalSchema | None = field(default=None)
    update: str = "incremental"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("update", self.update, ("incremental", "batch"))

    def prepare(self, data: RelationalData) -> tuple[RelationalArrays, FlatCells | None]:
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        if data.schema != self.schema:
            raise ValueError("data: its domains and relations differ from the bound schema")
        return super().prepare(data)

    def prepare_sharded(self, data: RelationalData, n_shards: int) -> tuple[RelationalArrays, None]:
        """The observed cells of every relation cut into ``n_shards`` blocks (leading axis).

        Only batch passes (``update="batch"``) can be split: the incremental pass visits the
        individuals one after another.
        """
        if self.update != "batch":
            raise ValueError("devices: incremental EM visits individuals one at a time and cannot be split over "
                             "devices; bind the data with update='batch'")
        n_shards = check_int("n_shards", n_shards, minimum=1)
        arrays, _ = self.prepare(data)
        return _sharded_cells(arrays, n_shards), None

    def init_params(self, rng_key: Any, arrays: tuple) -> LRMParams:
        return _init_params(rng_key, arrays[0], schema=self.schema, n_classes=self.classes_for(self.schema),
                            prior_count=float(self.prior_count))

    def em_step(self, params: LRMParams, arrays: tuple, beta: Any, reduce: Any = None) -> tuple[LRMParams, Any]:
        """One pass; returns (new params, objective F + c Σ log θ of ``params``)."""
        cells, flat = arrays
        prior_count = float(self.prior_count)
        start = _free_energy_from_stats(params, _statistics(params.responsibilities, cells, self.schema, reduce),
                                        prior_count).objective
        if self.update == "batch":
            new_params, _ = batch_pass(params, cells, beta, schema=self.schema, prior_count=prior_count,
                                       reduce=reduce)
        else:
            new_params, _ = iem_pass(params, cells, beta, schema=self.schema, prior_count=prior_count,
                                     flat=flat, backend=resolve_backend(self.backend))
        return new_params, start

    def log_likelihood(self, params: LRMParams, arrays: tuple, reduce: Any = None) -> Any:
        stats = _statistics(params.responsibilities, arrays[0], self.schema, reduce)
        return _free_energy_from_stats(params, stats, float(self.prior_count)).bound

    def heldout_log_lik(self, params: LRMParams, arrays: tuple, reduce: Any = None) -> Any:
        return _reduce(reduce, _heldout_log_lik(params, arrays[0], self.schema))


@dataclass
class LRMResult:
    """A fitted LRM.

    Attributes
    ----------
    model : LatentClassRelational
    schema : RelationalSchema
    params : LRMParams — the best restart's parameters and class posteriors
    history : dict — ``bound`` and ``objective`` per pass of the best restart
    restart_scores : (n_restarts,) — final objective of every restart
    best_restart, n_passes : int
    converged : bool
    stopped_by : str — "converged" (every restart), "max_passes" or "interrupted" (Ctrl-C; the
        finished passes are kept)
    """

    model: Any
    schema: RelationalSchema
    params: LRMParams
    history: dict
    restart_scores: np.ndarray
    best_restart: int
    n_passes: int
    converged: bool
    stopped_by: str = "converged"

    def classes(self) -> dict[str, np.ndarray]:
        """The most probable class of every individual, by domain name."""
        return {name: np.asarray(jnp.argmax(resp, axis=1))
                for name, resp in zip(self.schema.domain_names, self.params.responsibilities)}

    def predict_proba(self, cells: Any, relation: int | str = 0) -> np.ndarray:
        """Predictive probabilities (n_cells, |r|) of the cells (n_cells, arity) of a relation."""
        index = self.schema.relation_names.index(relation) if isinstance(relation, str) else relation
        cells = np.asarray(cells)
        arity = len(self.schema.relation_domains[index])
        if cells.ndim != 2 or cells.shape[1] != arity:
            raise ValueError(f"cells: expected shape (n_cells, {arity}), got {cells.shape}")
        for position, domain in enumerate(self.schema.relation_domains[index]):
            if cells.size and (cells[:, position].min() < 0 or cells[:, position].max() >= self.schema.domain_sizes[domain]):
                raise ValueError(f"cells: column {position} out of range for domain {self.schema.domain_names[domain]!r}")
        return np.asarray(predict_proba(self.params, index, jnp.asarray(cells, jnp.int32), self.schema))

    def history_dataset(self):
        """The history as an ``xarray.Dataset`` over passes."""
        import xarray as xr

        return xr.Dataset({name: ("pass", values) for name, values in self.history.items()},
                          coords={"pass": np.arange(self.n_passes)})
