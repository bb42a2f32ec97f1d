"""Predictive distributions P(y|x) shared by the dyadic models, so perplexities are comparable.

Every dyadic model of the zoo predicts a held-out co-occurrence (x_i, y_k) of a known row x_i by a
conditional distribution that factorises through some set of classes C (H99 §2.4 table):

    P(y_k | x_i) = Σ_c R_ic C_kc,          Σ_k C_kc = 1,  Σ_c R_ic = 1,

* aspect model: R = P(c|x) ∝ P(c) P(x|c), C = P(y|c);
* one-sided X clustering: R = P{c(x_i) = c} (the posterior), C = P(y|c);
* one-sided Y clustering: R = P(c|x) ∝ P(c) P(x|c), C = P(y|c) ∝ P(y) P{c(y) = c};
* two-sided clustering: R = Σ_ν P{c(x_i) = ν} P(μ|ν), C = P(y|μ) ∝ P(y) P{c(y) = μ};
* cluster-abstraction model: R = P(a_ν|x_i) = Σ_α P{c(x_i) = α} P(a_ν|α, x_i), C = P(y|a_ν).

Each model exposes ``predictive_factors(params) -> (R, C)``; :func:`conditional_log_lik` turns
them into Σ n(x_i, y_k) log P(y_k|x_i) over sparse counts, the numerator of the per-observation
log-likelihood l in the perplexity P = exp(-l) (H99 §5).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from inference.sparse import row_cell_stats
from zoo.data import CoOccurrence, DyadicArrays

__all__ = ["row_max_normalise", "conditional_log_lik", "predictive_factors", "predictive_matrix", "perplexity"]


def row_max_normalise(factors: Any) -> tuple[Any, Any]:
    """Divide each row by its maximum (rows of zeros are left alone); returns (factors, log max).

    Σ n log(R_i·C_k) is recovered exactly by adding back Σ n log max; the division only keeps
    products of small probabilities away from float32 underflow.
    """
    row_max = factors.max(axis=1, keepdims=True)
    safe = jnp.where(row_max > 0, row_max, 1.0)
    return factors / safe, jnp.log(safe[:, 0])


def conditional_log_lik(row_factors: Any, col_factors: Any, arrays: DyadicArrays, *, backend: str = "auto") -> Any:
    """Σ_ik n(x_i, y_k) log Σ_c R_ic C_kc over the non-zero cells of ``arrays``.

    Parameters
    ----------
    row_factors : (n_rows, C) array — R
    col_factors : (n_cols, C) array — C
    arrays : DyadicArrays
        Counts to score (held-out tokens of known rows and columns).
    backend : {"auto", "xla", "numba"}

    Returns
    -------
    scalar array. A cell whose predicted probability is 0 contributes n log(floor), with the
    floor of :mod:`inference.sparse` (1e-30 in float32): huge but finite.
    """
    dtype = arrays.counts.dtype
    A, log_rows = row_max_normalise(jnp.asarray(row_factors, dtype))
    B, log_cols = row_max_normalise(jnp.asarray(col_factors, dtype))
    stats = row_cell_stats(A, B, arrays, want_rows=False, want_cols=False, backend=backend)
    return jnp.sum(stats.row_log_norm) + jnp.sum(arrays.counts * (log_rows[arrays.rows] + log_cols[arrays.cols]))


def predictive_factors(model: Any, params: Any) -> tuple[Any, Any]:
    """(R, C) of any dyadic model, with P(y_k|x_i) = R_i·C_k in the data's own orientation."""
    from zoo.dyadic.aspect import Aspect

    if isinstance(model, Aspect):
        return params.class_given_row(), params.col_given_class
    if not hasattr(model, "predictive_factors"):
        raise TypeError(f"model: {type(model).__name__} has no predictive distribution P(y|x)")
    return model.predictive_factors(params)


def predictive_matrix(model: Any, params: Any) -> np.ndarray:
    """Dense P(y_k|x_i), shape (n_rows, n_cols): every row sums to 1 (for small data)."""
    row_factors, col_factors = predictive_factors(model, params)
    return np.asarray(row_factors, np.float64) @ np.asarray(col_factors, np.float64).T


def perplexity(model: Any, params: Any, data: CoOccurrence) -> float:
    """Held-out perplexity exp(-Σ n log P(y|x) / Σ n) of ``data`` (H99 §5)."""
    if not isinstance(data, CoOccurrence):
        raise TypeError(f"data: expected a zoo.data.CoOccurrence, got {type(data).__name__}")
    row_factors, col_factors = predictive_factors(model, params)
    if (row_factors.shape[0], col_factors.shape[0]) != data.shape:
        raise ValueError(
            f"data: shape {data.shape} differs from the fitted shape {(row_factors.shape[0], col_factors.shape[0])}"
        )
    backend = getattr(model, "backend", "auto")
    log_lik = _conditional_log_lik(row_factors, col_factors, data.to_arrays(), backend=backend)
    return float(np.exp(-float(log_lik) / data.total))


_conditional_log_lik = jax.jit(conditional_log_lik, static_argnames=("backend",))
