"""Neal's (2000) Algorithm 3 on the CPU: the collapsed Gibbs sweep compiled by numba (the
``"numba"`` backend of :func:`inference.neal.build_kernel` with ``algorithm="collapsed"``).

XLA twin: ``inference.neal._sweeps._collapsed_sweep`` (the same chain, up to float rounding:
same uniforms, same slot for a new cluster, same overflow rule).

Equality tests: tests/test_neal.py::test_numba_and_xla_collapsed_give_the_same_chain (known
precision; Normal–Gamma shapes that differ between features) and
tests/test_neal.py::test_numba_and_xla_give_the_same_chain (its ``collapsed`` case: Normal–Gamma,
clusters born and dying in every sweep, overflowing chains).

Each point is removed from its cluster, scored against the occupied clusters only (the XLA sweep
scores all K_max slots) and against a new cluster (weight α times its prior predictive), and
added where its uniform falls. A cluster's predictive is kept as a cached row, recomputed from
its statistics (count, Σx, Σx²) when a point leaves or joins it, so scoring is one pass over
the features. The kernel computes the predictive of the families that declare a
:class:`inference.components.NativePredictive` (``ComponentFamily.native_predictive``):

* ``"normal_known"``: Gaussian components of known precision τ with a Normal(m0, 1/p0) prior
  on their means (:func:`zoo.dirichlet.known_precision.normal_known_precision`); the predictive
  is Normal(m_n, 1/p_n + 1/τ), p_n = p0 + nτ, m_n = (p0 m0 + τ Σx) / p_n, a dot product with
  (x, x², 1);
* ``"normal_gamma"``: Normal–Gamma components (:func:`zoo.dirichlet.families.normal_gamma`);
  the predictive is the product over features of Student-t densities with 2a_n degrees of
  freedom (Murphy 2007, eq. 100); when the prior shape is the same for every feature, so is the
  power a_n + ½, and the kernel takes one log per 8 features of the product of (1 + z_d).

A module-level numba kernel (cached on disk between processes) runs a ``vmap``'s chains in
parallel on numba's threads; XLA calls it as a custom call on its own buffers
(:mod:`inference.native.ffi`, the handler at the end of this file).
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
import numpy as np
from numba import njit, prange

from inference.components import NativePredictive
from inference.native.neal_sweeps import _inverse_cdf_draw
from inference.native.ffi import (I32, batch_layout, batched_matrices, batched_scalars, batched_vectors, float64_bits,
                                  float64_matrix, prologue, register_handler, write_result)
from inference.native.supervised_sweep import batch_row

__all__ = ["KINDS", "native_arguments", "numba_collapsed_sweep"]

KINDS = ("normal_known", "normal_gamma")
_KIND_INDEX = {kind: index for index, kind in enumerate(KINDS)}
_LOG_2PI = math.log(2.0 * math.pi)


def native_arguments(native: NativePredictive, n_features: int) -> tuple[int, bool, bool, np.ndarray]:
    """The kernels' static view of a family's predictive: (kind index, whether the Student-t
    power is the same for every feature, whether the whole prior is, the prior as a
    (n_hyper, D) float64 array)."""
    hyper = np.stack([np.broadcast_to(np.asarray(value, np.float64), (n_features,)) for value in native.hyper])
    uniform_power = bool(native.kind == "normal_gamma" and np.all(hyper[2] == hyper[2, 0]))
    uniform_hyper = bool(np.all(hyper == hyper[:, :1]))
    return _KIND_INDEX[native.kind], uniform_power, uniform_hyper, hyper


@njit(cache=True, nogil=True)
def _row_size(kind, n_features):
    """Entries of a cluster's cached row (see :func:`_cache_row`)."""
    return 2 * n_features + 1 if kind == 0 else 3 * n_features + 1


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _log_of_product(values, n_values):
    """Σ log values[:n_values], one log per eight values (values far from 0 and overflow)."""
    log_sum = 0.0
    d = 0
    while d < n_values:
        product = 1.0
        stop = min(d + 8, n_values)
        while d < stop:
            product *= values[d]
            d += 1
        log_sum += math.log(product)
    return log_sum


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _cache_row(kind, uniform_hyper, hyper, count, total, total_sq, row, scratch):
    """Write the predictive terms of a cluster with statistics (count, total, total_sq) into
    ``row``: "normal_known" (x coefficients, x² coefficients, constant), 2D + 1 entries;
    "normal_gamma" (m_n, z coefficients, powers, constant), 3D + 1 entries. With
    ``uniform_hyper`` (the same prior for every feature) the terms that depend on the count only
    are computed once."""
    n_features = total.shape[0]
    if kind == 0:
        constant = 0.0
        for d in range(n_features):
            if d == 0 or not uniform_hyper:
                tau, mean0, p0 = hyper[0, d], hyper[1, d], hyper[2, d]
                p_n = p0 + count * tau
                variance = 1.0 / p_n + 1.0 / tau
                inverse_variance = 1.0 / variance
                prior_part = p0 * mean0
                weight = tau / p_n
                log_variance = math.log(variance)
            m_n = prior_part / p_n + weight * total[d]
            row[d] = m_n * inverse_variance
            row[n_features + d] = -0.5 * inverse_variance
            constant += _LOG_2PI + log_variance + m_n * m_n * inverse_variance
        row[2 * n_features] = -0.5 * constant
        return
    safe_count = max(count, 1.0)
    constant = 0.0
    for d in range(n_features):
        if d == 0 or not uniform_hyper:
            mean0, kappa0, shape0, rate0 = hyper[0, d], hyper[1, d], hyper[2, d], hyper[3, d]
            kappa_n = kappa0 + count
            shape_n = shape0 + 0.5 * count
            scale = kappa_n / (kappa_n + 1.0)
            count_terms = math.lgamma(shape_n + 0.5) - math.lgamma(shape_n) - 0.5 * (_LOG_2PI - math.log(scale))
        sample_mean = total[d] / safe_count
        within = max(total_sq[d] - total[d] * sample_mean, 0.0)
        between = count * (sample_mean - mean0) ** 2 * (kappa0 / kappa_n)
        rate_n = rate0 + 0.5 * (within + between)
        scratch[d] = rate_n
        row[d] = (kappa0 * mean0 + total[d]) / kappa_n
        row[n_features + d] = scale / (2.0 * rate_n)
        row[2 * n_features + d] = shape_n + 0.5
        constant += count_terms
    # Σ_d -½ log b_n,d, one log per eight features (b_n >= b0 > 0, and far from overflow).
    row[3 * n_features] = constant - 0.5 * _log_of_product(scratch, n_features)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _score(kind, uniform_power, row, z, n_features):
    """log p(x | cluster) from the cluster's cached row (see :func:`_cache_row`) and the point's
    features z = (x, x²) (2D entries)."""
    if kind == 0:
        # One contiguous dot product over (x, x²): it vectorises (two interleaved halves do not).
        total = row[2 * n_features]
        for j in range(2 * n_features):
            total += row[j] * z[j]
        return total
    if uniform_power:
        # Σ_d a log(1 + z_d) = a Σ_groups log Π_{d in group} (1 + z_d), eight features a group
        # (in float64, far from overflow for any z a standardised feature gives).
        log_sum = 0.0
        d = 0
        while d < n_features:
            product = 1.0
            stop = min(d + 8, n_features)
            while d < stop:
                difference = z[d] - row[d]
                product *= 1.0 + row[n_features + d] * difference * difference
                d += 1
            log_sum += math.log(product)
        return row[3 * n_features] - row[2 * n_features] * log_sum
    total = row[3 * n_features]
    for d in range(n_features):
        difference = z[d] - row[d]
        total -= row[2 * n_features + d] * math.log1p(row[n_features + d] * difference * difference)
    return total


@njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _collapsed_kernel(n_batch, kind, uniform_power, uniform_hyper, hyper, data, assignments, initial_counts,
                      initial_total, initial_total_sq, log_alpha, prior_log_pred, uniforms):
    # Every input has a leading batch axis of size n_batch or 1 (shared by all chains).
    n_slots = initial_counts.shape[1]
    n_points, n_features = data.shape[1:]
    row_size = _row_size(kind, n_features)
    dtype = uniforms.dtype
    log_count = np.log(np.arange(1, n_points + 1).astype(dtype))
    new_assignments = np.empty((n_batch, n_points), np.int32)
    final_counts = np.empty((n_batch, n_slots), np.int32)
    overflow = np.zeros(n_batch, np.bool_)
    for chain in prange(n_batch):
        x_all = data[batch_row(chain, data)]
        chain_assignments = assignments[batch_row(chain, assignments)]
        chain_prior_log_pred = prior_log_pred[batch_row(chain, prior_log_pred)]
        chain_uniforms = uniforms[batch_row(chain, uniforms)]
        chain_log_alpha = log_alpha[batch_row(chain, log_alpha)]
        counts = initial_counts[batch_row(chain, initial_counts)].astype(np.int64)
        total = initial_total[batch_row(chain, initial_total)].astype(np.float64)
        total_sq = initial_total_sq[batch_row(chain, initial_total_sq)].astype(np.float64)
        cache = np.zeros((n_slots, row_size), np.float64)
        scratch = np.empty(n_features, np.float64)
        saved_row = np.empty(row_size, np.float64)
        saved_total = np.empty(n_features, np.float64)
        saved_total_sq = np.empty(n_features, np.float64)
        for slot in range(n_slots):
            if counts[slot] > 0:
                _cache_row(kind, uniform_hyper, hyper, float(counts[slot]), total[slot], total_sq[slot], cache[slot],
                           scratch)
        live = np.empty(n_slots + 1, np.int64)
        logits = np.empty(n_slots + 1, dtype)
        cumulative = np.empty(n_slots + 1, dtype)
        z = np.empty(2 * n_features, np.float64)  # (x, x²)
        x = z[:n_features]
        x_sq = z[n_features:]
        for i in range(n_points):
            for d in range(n_features):
                x[d] = x_all[i, d]
                x_sq[d] = x[d] * x[d]
            label = chain_assignments[i]
            # Remove x_i from its cluster (an emptied slot gets exact zeros), keeping the
            # cluster's row and statistics to put back if x_i returns to it.
            saved_row[:] = cache[label]
            saved_total[:] = total[label]
            saved_total_sq[:] = total_sq[label]
            counts[label] -= 1
            if counts[label] == 0:
                total[label] = 0.0
                total_sq[label] = 0.0
            else:
                for d in range(n_features):
                    total[label, d] -= x[d]
                    total_sq[label, d] -= x_sq[d]
                _cache_row(kind, uniform_hyper, hyper, float(counts[label]), total[label], total_sq[label],
                           cache[label], scratch)
            n_live = 0
            first_free = n_slots
            for slot in range(n_slots):
                if counts[slot] > 0:
                    logits[n_live] = log_count[counts[slot] - 1] + _score(kind, uniform_power, cache[slot], z, n_features)
                    live[n_live] = slot
                    n_live += 1
                elif first_free == n_slots:
                    first_free = slot
            logits[n_live] = chain_log_alpha + chain_prior_log_pred[i]
            live[n_live] = n_slots  # a new cluster
            n_live += 1
            slot = live[_inverse_cdf_draw(logits, n_live, cumulative, chain_uniforms[i])]
            if slot == n_slots:
                if first_free == n_slots:
                    overflow[chain] = True
                    slot = label
                else:
                    slot = first_free
            counts[slot] += 1
            if slot == label and counts[slot] > 1:
                cache[slot] = saved_row
                total[slot] = saved_total
                total_sq[slot] = saved_total_sq
            else:
                for d in range(n_features):
                    total[slot, d] += x[d]
                    total_sq[slot, d] += x_sq[d]
                _cache_row(kind, uniform_hyper, hyper, float(counts[slot]), total[slot], total_sq[slot], cache[slot],
                           scratch)
            new_assignments[chain, i] = slot
        final_counts[chain] = counts
    return new_assignments, final_counts, overflow


# The sweep runs as an XLA custom call (inference.native.ffi): no Python between XLA and the numba
# loop, and a program that calls it can be kept in JAX's persistent compilation cache. Arguments:
# the prior (float64 bits, n_hyper × D × 2 int32), the flags (kind, uniform power, uniform prior;
# int32), data, assignments (int32), counts (int32), Σx, Σx², log α, the prior predictive of every
# point, the uniforms (the model's float dtype). Results: assignments, counts (int32), overflow
# (bool). Under vmap every argument gets the batch axes, of size 1 where it is shared; the chains
# run in parallel on numba's threads.
@njit(inline="always")
def _collapsed_call(frame, real):
    done, code = prologue(frame, 10, 3)
    if done:
        return code
    batch, n_lead, n_batch = batch_layout(frame, 1)
    at = (batch, n_lead, n_batch)
    flags = batched_vectors(frame, 1, *at, I32)[0]
    new_assignments, final_counts, overflow = _collapsed_kernel(
        np.int64(n_batch), np.int64(flags[0]), flags[1] != 0, flags[2] != 0, float64_matrix(frame, 0, n_lead),
        batched_matrices(frame, 2, *at, real), batched_vectors(frame, 3, *at, I32),
        batched_vectors(frame, 4, *at, I32), batched_matrices(frame, 5, *at, real),
        batched_matrices(frame, 6, *at, real), batched_scalars(frame, 7, *at, real),
        batched_vectors(frame, 8, *at, real), batched_vectors(frame, 9, *at, real))
    write_result(frame, 0, new_assignments, I32)
    write_result(frame, 1, final_counts, I32)
    write_result(frame, 2, overflow.astype(np.uint8), np.uint8(0))
    return 0


def _collapsed_f32(frame):
    return _collapsed_call(frame, np.float32(0))


def _collapsed_f64(frame):
    return _collapsed_call(frame, np.float64(0))


#: This module's XLA custom-call targets by name, each compiled and registered on first use
#: (:func:`inference.native.precompile.precompile` compiles them all into numba's disk cache).
HANDLERS = {"latentzoo_dp_collapsed_sweep_float32": _collapsed_f32,
            "latentzoo_dp_collapsed_sweep_float64": _collapsed_f64}


def numba_collapsed_sweep(native: NativePredictive, data, assignments, counts, stats, log_alpha, prior_log_pred,
                          uniforms):
    """One Algorithm 3 sweep in numba for a family with a :class:`inference.components.NativePredictive`.

    ``stats`` are the slots' Gaussian statistics (count, total, total_sq), ``prior_log_pred``
    the prior predictive of every point, ``uniforms`` one in (0, 1] per point. Returns
    (assignments, counts, overflow) as the XLA sweep does.
    """
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    dtype = uniforms.dtype
    shapes = (
        jax.ShapeDtypeStruct((n_points,), jnp.int32),
        jax.ShapeDtypeStruct((n_slots,), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_),
    )
    kind, uniform_power, uniform_hyper, hyper = native_arguments(native, data.shape[-1])
    name = f"latentzoo_dp_collapsed_sweep_{jnp.dtype(dtype).name}"
    register_handler(name, HANDLERS[name])
    return jax.ffi.ffi_call(name, shapes, vmap_method="expand_dims")(
        float64_bits(hyper),
        jnp.asarray([kind, uniform_power, uniform_hyper], jnp.int32),
        data.astype(dtype),
        assignments.astype(jnp.int32),
        counts.astype(jnp.int32),
        stats.total.astype(dtype),
        stats.total_sq.astype(dtype),
        jnp.asarray(log_alpha, dtype),
        prior_log_pred.astype(dtype),
        uniforms,
    )
