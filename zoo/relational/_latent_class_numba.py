"""The incremental-EM pass of :mod:`zoo.relational.latent_class`, compiled by numba.

The twin of the XLA pass (``_domain_pass`` in ``zoo/relational/_latent_class_passes.py``, a
``lax.scan`` per domain): the same partial E-steps (CP eq. 4, mean-field form, tempered by β),
incremental statistics and M-steps (CP eqs. 5–6), visited in the same order, as one loop on the
host. Its input is every relation's cells in one list (:class:`FlatCells`, built by
:func:`flat_cells`); the loop runs as an XLA custom call (:mod:`inference._xla_ffi`) registered
and called by :func:`_numba_pass`, at the end of this file. tests/test_latent_class.py checks
that both give the same fit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

from inference._xla_ffi import (I32, batch_element, batch_layout, buffer_flat, prologue, register_handler,
                                ret_buffer, write_element)
from zoo.relational._latent_class_state import _safe_log
from zoo.relational.data import RelationalData


class FlatCells(NamedTuple):
    """All relations' cells in one list, for the numba pass (arity 1 gets a virtual second argument).

    Individuals are numbered globally, domain after domain; index ``n_individuals`` is a virtual
    individual with one class whose q is 1, the second argument of unary relations.

    Attributes
    ----------
    first, second : int32 (n_cells,) — global individual of each argument
    values, relation : int32 (n_cells,)
    item_start : int32 (n_individuals + 1,) — CSR pointer into the items of every individual
    item_cell, item_position : int32 (n_items,) — the cell and the argument position of each item
    """

    first: Any
    second: Any
    values: Any
    relation: Any
    item_start: Any
    item_cell: Any
    item_position: Any


def flat_cells(data: RelationalData) -> FlatCells:
    """Build :class:`FlatCells` from validated data (host side)."""
    schema = data.schema
    offsets = np.concatenate([[0], np.cumsum(schema.domain_sizes)])
    virtual = int(offsets[-1])
    first, second, values, relation_ids = [], [], [], []
    for index, (relation, domains) in enumerate(zip(data.relations, schema.relation_domains)):
        first.append(relation.entries[:, 0] + offsets[domains[0]])
        second.append(relation.entries[:, 1] + offsets[domains[1]] if len(domains) == 2
                      else np.full(relation.n_observed, virtual))
        values.append(relation.values)
        relation_ids.append(np.full(relation.n_observed, index))
    first, second = np.concatenate(first), np.concatenate(second)
    owners = np.concatenate([first, second])
    positions = np.repeat([0, 1], first.shape[0])
    cells = np.tile(np.arange(first.shape[0]), 2)
    real = owners < virtual
    owners, positions, cells = owners[real], positions[real], cells[real]
    order = np.argsort(owners, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(owners, minlength=virtual))])
    as32 = lambda array: jnp.asarray(np.asarray(array, np.int32))  # noqa: E731
    return FlatCells(as32(first), as32(second), as32(np.concatenate(values)), as32(np.concatenate(relation_ids)),
                     as32(start), as32(cells[order]), as32(positions[order]))


@njit(cache=True, nogil=True)
def _normalise_log(counts, prior_count, n_values, out_log):
    total = 0.0
    for value in range(n_values):
        total += max(counts[value], 0.0) + prior_count
    for value in range(n_values):
        mass = max(counts[value], 0.0) + prior_count
        probability = mass / total if total > 0 else 1.0 / n_values
        out_log[value] = np.log(max(probability, 1e-300))

@njit(cache=True, nogil=True)
def _iem_scan(q, class_counts, counts, log_theta, log_pi, beta, prior_count, first, second, values,
             relation, weights, item_start, item_cell, item_position, domain_of, n_classes,
             relation_n_values, relation_classes):
    # q: (n_individuals + 1, G); class_counts, log_pi: (D, G); counts, log_theta: (R, G, G, V)
    n_relations, n_max, _, n_values_max = counts.shape
    message = np.zeros((n_relations, 2, n_max, n_values_max))
    touched = np.zeros((n_relations, 2), np.bool_)
    score = np.zeros(n_max)
    for individual in range(item_start.shape[0] - 1):
        domain = domain_of[individual]
        n_own = n_classes[domain]
        message[:] = 0.0
        touched[:] = False
        for item in range(item_start[individual], item_start[individual + 1]):
            cell = item_cell[item]
            weight = weights[cell]
            position = item_position[item]
            r = relation[cell]
            touched[r, position] = True
            if weight == 0.0:
                continue
            other = second[cell] if position == 0 else first[cell]
            value = values[cell]
            for o in range(n_max):
                message[r, position, o, value] += weight * q[other, o]
        # CP eq. 4 (mean-field form), likelihood tempered by β.
        for g in range(n_own):
            total = 0.0
            for r in range(n_relations):
                for position in range(2):
                    if not touched[r, position]:
                        continue
                    for o in range(n_max):
                        for value in range(relation_n_values[r]):
                            m = message[r, position, o, value]
                            if m != 0.0:
                                if position == 0:
                                    total += m * log_theta[r, g, o, value]
                                else:
                                    total += m * log_theta[r, o, g, value]
            score[g] = log_pi[domain, g] + beta * total
        largest = score[0]
        for g in range(1, n_own):
            largest = max(largest, score[g])
        norm = 0.0
        for g in range(n_own):
            score[g] = np.exp(score[g] - largest)
            norm += score[g]
        # Incremental statistics and M-step (CP eqs. 5-6).
        for g in range(n_own):
            new = score[g] / norm
            delta = new - q[individual, g]
            q[individual, g] = new
            class_counts[domain, g] += delta
            for r in range(n_relations):
                for o in range(n_max):
                    for value in range(relation_n_values[r]):
                        if touched[r, 0]:
                            counts[r, g, o, value] += delta * message[r, 0, o, value]
                        if touched[r, 1]:
                            counts[r, o, g, value] += delta * message[r, 1, o, value]
        _normalise_log(class_counts[domain], prior_count, n_own, log_pi[domain])
        for r in range(n_relations):
            if touched[r, 0] or touched[r, 1]:
                for g in range(relation_classes[r, 0]):
                    for o in range(relation_classes[r, 1]):
                        _normalise_log(counts[r, g, o], prior_count, relation_n_values[r], log_theta[r, g, o])
    return q


# The pass runs as an XLA custom call (inference._xla_ffi): XLA hands the handler its buffers and
# the numba loop runs without Python. Under vmap (restarts, held-out cases) every argument gets the
# same leading axes, of size 1 where it is shared; the fits run one after the other in float64.
# Arguments: q, class_counts, counts, log_theta, log_pi, beta, prior_count, weights (the model's
# float dtype); first, second, values, relation, item_start, item_cell, item_position, domain_of,
# n_classes, relation_n_values, relation_classes (int32). Result: q.
_IEM_ARGS = 19


@njit(inline="always")
def _iem_call(frame, real):
    done, code = prologue(frame, _IEM_ARGS, 1)
    if done:
        return code
    result_shape, n_lead, n_fits = batch_layout(frame, 2)
    out = buffer_flat(ret_buffer(frame, 0), real)
    for fit in range(n_fits):
        q, q_dims = batch_element(frame, 0, result_shape, n_lead, fit, real)
        class_counts, class_dims = batch_element(frame, 1, result_shape, n_lead, fit, real)
        counts, count_dims = batch_element(frame, 2, result_shape, n_lead, fit, real)
        log_theta, _ = batch_element(frame, 3, result_shape, n_lead, fit, real)
        log_pi, _ = batch_element(frame, 4, result_shape, n_lead, fit, real)
        beta, _ = batch_element(frame, 5, result_shape, n_lead, fit, real)
        prior_count, _ = batch_element(frame, 6, result_shape, n_lead, fit, real)
        weights, _ = batch_element(frame, 7, result_shape, n_lead, fit, real)
        integers = [batch_element(frame, index, result_shape, n_lead, fit, I32)[0] for index in range(8, 18)]
        relation_classes, _ = batch_element(frame, 18, result_shape, n_lead, fit, I32)
        q_fit = q.astype(np.float64).reshape((q_dims[0], q_dims[1]))
        count_shape = (count_dims[0], count_dims[1], count_dims[2], count_dims[3])
        _iem_scan(q_fit, class_counts.astype(np.float64).reshape((class_dims[0], class_dims[1])),
                  counts.astype(np.float64).reshape(count_shape), log_theta.astype(np.float64).reshape(count_shape),
                  log_pi.astype(np.float64).reshape((class_dims[0], class_dims[1])), np.float64(beta[0]),
                  np.float64(prior_count[0]), integers[0], integers[1], integers[2], integers[3],
                  weights.astype(np.float64), integers[4], integers[5], integers[6], integers[7], integers[8],
                  integers[9], relation_classes.reshape((relation_classes.shape[0] // 2, 2)))
        write_element(out, fit, q_fit.reshape(-1))
    return 0


def _iem_pass_f32(frame):
    return _iem_call(frame, np.float32(0))


def _iem_pass_f64(frame):
    return _iem_call(frame, np.float64(0))


_IEM_HANDLERS = {"float32": _iem_pass_f32, "float64": _iem_pass_f64}


# ----------------------------------------------------------------------------- the call from XLA
# :func:`_numba_pass` runs the loop above as a custom call; ``iem_pass`` calls it (backend="numba").
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
