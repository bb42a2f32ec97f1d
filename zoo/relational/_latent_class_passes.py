"""The E-step passes of the latent-class relational model, in XLA (CP eq. 4, §2).

:func:`iem_pass` is one incremental-EM pass (Neal & Hinton): every individual of every domain in
order, its q_a recomputed from its Markov blanket, the statistics updated incrementally and θ
re-estimated after each (a ``lax.scan`` per domain, :func:`_domain_pass`, or its numba twin
:func:`inference.native.relational_em.numba_iem_pass` as an XLA custom call, called by
:func:`_numba_pass`). :func:`batch_pass` updates a
whole domain at once from sums over cells, so its cells can be split over devices. The model and
the equations are described in :mod:`zoo.relational.latent_class`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from inference.native.relational_em import numba_iem_pass
from inference.segments import segment_sum
from zoo.relational._flat_cells import FlatCells
from zoo.relational._latent_class_state import (LRMInfo, LRMParams, _free_energy_from_stats, _normalise_last,
                                                _one_hot, _reduce, _safe_log, _statistics, _working_weights, m_step,
                                                relation_m_step, sufficient_statistics)
from zoo.relational.data import RelationalArrays, RelationalSchema


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
            relation_probs[relation] = relation_m_step(relation_counts[relation], prior_count,
                                                       schema.is_symmetric(relation))
        responsibilities = list(responsibilities)
        responsibilities[domain] = responsibilities[domain].at[individual].set(new)
        return (tuple(responsibilities), tuple(class_counts), tuple(relation_counts),
                tuple(class_weights), tuple(relation_probs)), None

    individuals = jnp.arange(schema.domain_sizes[domain])
    carry, _ = jax.lax.scan(visit, carry, individuals)
    return carry


def _pad_to(array: Any, shape: tuple[int, ...]) -> Any:
    return jnp.pad(array, [(0, target - size) for size, target in zip(array.shape, shape)])


def _numba_pass(responsibilities, stats, class_weights, relation_probs, arrays, flat, beta, *, schema, prior_count):
    """All partial E-steps of one pass in the numba loop (:func:`numba_iem_pass`): the model's
    state stacked and padded into the arrays the loop takes, and its q split back by domain."""
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
    symmetric = np.asarray([schema.is_symmetric(r) for r in range(len(schema.relation_domains))], np.int32)
    q = numba_iem_pass(q, class_counts, counts, log_theta, log_pi, beta, prior_count, weights, flat, domain_of,
                       np.asarray(n_classes, np.int32), np.asarray(schema.n_values, np.int32), relation_classes,
                       symmetric)
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
    class_weights, relation_probs = m_step(stats, prior_count, schema.symmetric)
    if backend == "numba":
        responsibilities = _numba_pass(params.responsibilities, stats, class_weights, relation_probs, arrays, flat,
                                       beta, schema=schema, prior_count=prior_count)
    else:
        carry = (params.responsibilities, stats.class_counts, stats.relation_counts, class_weights, relation_probs)
        for domain in range(len(schema.domain_sizes)):
            carry = _domain_pass(domain, carry, arrays, beta, schema=schema, prior_count=prior_count)
        responsibilities = carry[0]
    stats = sufficient_statistics(responsibilities, arrays, schema)
    class_weights, relation_probs = m_step(stats, prior_count, schema.symmetric)
    new_params = LRMParams(class_weights, relation_probs, responsibilities)
    return new_params, _free_energy_from_stats(new_params, stats, prior_count, schema.symmetric)


# ----------------------------------------------------------------------------- the full-batch pass


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
    class_weights, relation_probs = m_step(stats, prior_count, schema.symmetric)
    responsibilities = params.responsibilities
    for domain in range(len(schema.domain_sizes)):
        scores = _reduce(reduce, _domain_scores(domain, responsibilities, relation_probs, arrays, schema))
        # CP eq. 4 (mean-field form), likelihood term tempered by β (H99 §4).
        new = jax.nn.softmax(_safe_log(class_weights[domain])[None, :] + beta * scores, axis=1)
        responsibilities = responsibilities[:domain] + (new,) + responsibilities[domain + 1:]
        stats = _statistics(responsibilities, arrays, schema, reduce)
        class_weights, relation_probs = m_step(stats, prior_count, schema.symmetric)
    new_params = LRMParams(class_weights, relation_probs, responsibilities)
    return new_params, _free_energy_from_stats(new_params, stats, prior_count, schema.symmetric)


def _sharded_cells(arrays: RelationalArrays, n_shards: int, block_sizes: tuple | None = None) -> RelationalArrays:
    """Every relation's cells cut into ``n_shards`` equal blocks (padded with weight-0 cells).

    ``block_sizes``: the cells per block of every relation (at least what its cells need; e.g.
    the longest of several processes), instead of the fewest that hold them.
    """

    def blocks(cells: Any, block: int) -> Any:
        padding = jnp.zeros((block * n_shards - cells.shape[0],) + cells.shape[1:], cells.dtype)
        return jnp.concatenate([cells, padding]).reshape((n_shards, block) + cells.shape[1:])

    if block_sizes is None:
        block_sizes = tuple(-(-cells.shape[0] // n_shards) for cells in arrays.entries)
    return RelationalArrays(*(tuple(map(blocks, part, block_sizes)) for part in arrays[:3]), blankets=None)
