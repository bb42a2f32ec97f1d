"""The incremental-EM pass of the latent-class relational model (LRM; Kemp et al. 2004, CP
eqs. 4–6) on the CPU, compiled by numba (the ``"numba"`` backend of ``zoo.relational.latent_class``).

XLA twin: :func:`numba_iem_pass` — the ``lax.scan`` per domain of ``zoo.relational._latent_class_passes._domain_pass``
(the same partial E-steps, mean-field form, tempered by β, incremental statistics and M-steps,
visited in the same order). ``zoo.relational._latent_class_passes._numba_pass`` packs the model's
state into the arrays this module takes; this module is pure array code and imports nothing of
``zoo``.

Equality test: tests/test_latent_class.py::test_numba_and_xla_passes_agree (and
tests/test_latent_class.py::test_numba_pass_of_float32_parameters_on_float64_data).

Its input is every relation's cells in one list (``zoo.relational._flat_cells.FlatCells``); the
loop runs as an XLA custom call (:mod:`inference.native.ffi`) registered and called by
:func:`numba_iem_pass`, at the end of this file.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

from inference.native.ffi import (I32, batch_element, batch_layout, buffer_flat, prologue, register_handler,
                                  ret_buffer, write_element)

__all__ = ["numba_iem_pass"]


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
             relation_n_values, relation_classes, symmetric):
    # q: (n_individuals + 1, G); class_counts, log_pi: (D, G); counts, log_theta: (R, G, G, V)
    # symmetric (R,): 1 for a relation whose pairs count once (cells of weight 1/2), whose blocks
    # off the diagonal take half the pseudo-count (relation_prior of the XLA twin).
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
                        block_prior = prior_count * 0.5 if symmetric[r] and g != o else prior_count
                        _normalise_log(counts[r, g, o], block_prior, relation_n_values[r], log_theta[r, g, o])
    return q


# The pass runs as an XLA custom call (inference.native.ffi): XLA hands the handler its buffers and
# the numba loop runs without Python. Under vmap (restarts, held-out cases) every argument gets the
# same leading axes, of size 1 where it is shared; the fits run one after the other in float64.
# Arguments: q, class_counts, counts, log_theta, log_pi, beta, prior_count, weights (the model's
# float dtype); first, second, values, relation, item_start, item_cell, item_position, domain_of,
# n_classes, relation_n_values, relation_classes, symmetric (int32). Result: q.
_IEM_ARGS = 20


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
        symmetric, _ = batch_element(frame, 19, result_shape, n_lead, fit, I32)
        q_fit = q.astype(np.float64).reshape((q_dims[0], q_dims[1]))
        count_shape = (count_dims[0], count_dims[1], count_dims[2], count_dims[3])
        _iem_scan(q_fit, class_counts.astype(np.float64).reshape((class_dims[0], class_dims[1])),
                  counts.astype(np.float64).reshape(count_shape), log_theta.astype(np.float64).reshape(count_shape),
                  log_pi.astype(np.float64).reshape((class_dims[0], class_dims[1])), np.float64(beta[0]),
                  np.float64(prior_count[0]), integers[0], integers[1], integers[2], integers[3],
                  weights.astype(np.float64), integers[4], integers[5], integers[6], integers[7], integers[8],
                  integers[9], relation_classes.reshape((relation_classes.shape[0] // 2, 2)), symmetric)
        write_element(out, fit, q_fit.reshape(-1))
    return 0


def _iem_pass_f32(frame):
    return _iem_call(frame, np.float32(0))


def _iem_pass_f64(frame):
    return _iem_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_iem_pass_float32": _iem_pass_f32, "latentzoo_iem_pass_float64": _iem_pass_f64}


# ----------------------------------------------------------------------------- the call from XLA
def numba_iem_pass(q, class_counts, counts, log_theta, log_pi, beta, prior_count, weights, flat, domain_of,
                   n_classes, n_values, relation_classes, symmetric):
    """All partial E-steps of one pass in a numba loop, run by XLA as a custom call; returns the new q.

    ``q`` (n_individuals + 1, G): every domain's responsibilities stacked and padded to G classes,
    the virtual individual last; ``class_counts``, ``log_pi`` (D, G); ``counts``, ``log_theta``
    (R, G, G, V); ``weights`` (n_cells,); ``flat`` the cells in one list (first, second, values,
    relation, item_start, item_cell, item_position); ``domain_of`` (n_individuals,),
    ``n_classes`` (D,), ``n_values`` (R,), ``relation_classes`` (R, 2) and ``symmetric`` (R,: 1 for a
    relation whose pairs count once) host integers. Every
    float is read in ``q``'s dtype.
    """
    dtype = q.dtype
    name = f"latentzoo_iem_pass_{jnp.dtype(dtype).name}"
    register_handler(name, HANDLERS[name])
    return jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(q.shape, dtype), vmap_method="expand_dims")(
        *(array.astype(dtype) for array in (q, class_counts, counts, log_theta, log_pi)),
        jnp.asarray(beta, dtype), jnp.asarray(prior_count, dtype), weights.astype(dtype),
        flat.first, flat.second, flat.values, flat.relation, flat.item_start, flat.item_cell, flat.item_position,
        *(jnp.asarray(constant, jnp.int32)
          for constant in (domain_of, n_classes, n_values, relation_classes, symmetric)))
