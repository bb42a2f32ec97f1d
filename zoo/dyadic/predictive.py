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

Held-out tokens of probability 0. A maximum-likelihood fit can give a held-out token P(y|x) = 0
(a word never seen in training, or one-sided clusters whose posteriors are hard and whose P(y|c)
has zeros); its log-probability is -inf, and so is the held-out log-likelihood. The kernels
(:func:`conditional_log_lik`) floor such cells at 1e-30 (float32) to keep their sums finite;
:func:`split_zero_cells` takes them back out and counts them, which is what the models'
``heldout_log_lik_and_zeros`` gives the EM driver: its validation perplexity is inf with such tokens
(unless ``tempered_em(..., floor=)``), and it compares iterates by (tokens of probability 0,
perplexity of the others). The evaluation for users, :func:`heldout_evaluation` and
:func:`perplexity` (and ``EMResult.perplexity``), does not hide them either: it counts them, warns,
and returns an infinite perplexity unless the caller sets an explicit ``floor=``. Fitting with
``prior_count > 0`` (MAP-EM, pseudo-counts in the M-step) makes every P(y|x) positive.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from inference.sparse import _floor, row_cell_stats
from zoo.data import CoOccurrence, DyadicArrays

__all__ = ["row_max_normalise", "conditional_log_lik", "split_zero_cells", "predictive_factors", "predictive_matrix",
           "perplexity", "HeldOut", "heldout_evaluation", "heldout_from_factors", "ZeroProbabilityWarning"]


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


def split_zero_cells(log_lik: Any, row_factors: Any, col_factors: Any, arrays: DyadicArrays, *,
                     reduce: Any = None, chunk_cells: int = 1 << 16) -> tuple[Any, Any]:
    """Take the cells of probability 0 out of a kernel's Σ n log P(y|x) and count their tokens.

    The kernels (:func:`conditional_log_lik`, the aspect model's) score a cell whose normalised
    product z = (R_i / max R_i)·(C_k / max C_k) is below the floor of :mod:`inference.sparse`
    (1e-30 in float32, 1e-300 in float64) as n (log floor + log max R_i + log max C_k). This pass
    finds those cells (probability 0 in the working precision), subtracts what the kernel added for
    them and returns (Σ n log P(y|x) over the tokens of positive probability, their number of
    tokens). ``log_lik`` is the kernel's sum over all blocks of cells (already reduced); ``reduce``
    adds up this block's corrections across blocks (data-parallel EM). Without such cells the first
    result is ``log_lik`` itself, bit for bit.

    Parameters
    ----------
    log_lik : scalar — the kernel's Σ n log max(P(y|x), floor) for ``arrays``
    row_factors : (n_rows, C) array — R
    col_factors : (n_cols, C) array — C
    arrays : DyadicArrays — the scored cells (padding cells have count 0)

    Returns
    -------
    (log_lik over tokens of positive probability, tokens of probability 0), scalars
    """
    dtype = arrays.counts.dtype
    A, log_rows = row_max_normalise(jnp.asarray(row_factors, dtype))
    B, log_cols = row_max_normalise(jnp.asarray(col_factors, dtype))
    floor = _floor(dtype)
    nnz = arrays.rows.shape[0]
    n_chunks = max(1, -(-nnz // chunk_cells))
    size = -(-nnz // n_chunks)
    pad = n_chunks * size - nnz
    cells = tuple(jnp.pad(array, (0, pad)).reshape(n_chunks, size)
                  for array in (arrays.rows, arrays.cols, arrays.counts))

    def body(carry, chunk):
        n_zero, floored = carry
        rows, cols, counts = chunk
        rows = jnp.minimum(rows, A.shape[0] - 1)  # padding ids may point past the end; their count is 0
        cols = jnp.minimum(cols, B.shape[0] - 1)
        z = jnp.sum(A[rows] * B[cols], axis=1)  # elementwise: XLA's batched dot is slower on the CPU
        zero = (z < floor) & (counts > 0)
        n_zero = n_zero + jnp.sum(jnp.where(zero, counts, 0.0))
        floored = floored + jnp.sum(jnp.where(zero, counts * (jnp.log(floor) + log_rows[rows] + log_cols[cols]), 0.0))
        return (n_zero, floored), None

    zero = jnp.zeros((), dtype)
    (n_zero, floored), _ = jax.lax.scan(body, (zero, zero), cells)
    if reduce is not None:
        n_zero, floored = reduce((n_zero, floored))
    return log_lik - floored, n_zero


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


class ZeroProbabilityWarning(UserWarning):
    """Held-out tokens have probability 0 under the fitted model (their perplexity is infinite)."""


class HeldOut(NamedTuple):
    """Held-out evaluation of a dyadic model, computed in float64.

    Attributes
    ----------
    log_lik : float — Σ n log P(y|x) over the held-out tokens; -inf when some have P(y|x) = 0
        and no floor was set; with ``floor``, every P(y|x) is replaced by max(P(y|x), floor)
    n_tokens : float — Σ n, the number (total count) of held-out tokens
    n_zero_tokens : float — held-out tokens whose P(y|x) is exactly 0 (before any floor)
    floor : float or None — the floor the caller set
    """

    log_lik: float
    n_tokens: float
    n_zero_tokens: float
    floor: float | None

    @property
    def perplexity(self) -> float:
        """exp(-log_lik / n_tokens) (H99 §5): inf when tokens of probability 0 were not floored."""
        return math.exp(-self.log_lik / self.n_tokens) if math.isfinite(self.log_lik) else math.inf


def _check_floor(floor: Any) -> float | None:
    if floor is None:
        return None
    if isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating)):
        raise TypeError(f"floor: expected a float in (0, 1) or None, got {type(floor).__name__}")
    floor = float(floor)
    if not 0.0 < floor < 1.0:
        raise ValueError(f"floor: must lie in (0, 1), got {floor!r}")
    return floor


def heldout_evaluation(model: Any, params: Any, data: CoOccurrence, *, floor: float | None = None,
                       warn: bool = True) -> HeldOut:
    """Σ n log P(y|x) of held-out ``data`` with the tokens of probability 0 counted, not hidden.

    Parameters
    ----------
    model, params : a fitted dyadic model (aspect, one-sided, two-sided, CAM) and its parameters
    data : CoOccurrence — held-out tokens of rows and columns known from training
    floor : float in (0, 1), optional
        Score every token at max(P(y|x), floor). Without it a token of probability 0 makes the
        log-likelihood -inf and the perplexity inf.
    warn : bool
        Emit a :class:`ZeroProbabilityWarning` naming how many tokens have probability 0.

    Returns
    -------
    HeldOut
    """
    if not isinstance(data, CoOccurrence):
        raise TypeError(f"data: expected a zoo.data.CoOccurrence, got {type(data).__name__}")
    floor = _check_floor(floor)
    row_factors, col_factors = predictive_factors(model, params)
    if (row_factors.shape[0], col_factors.shape[0]) != data.shape:
        raise ValueError(
            f"data: shape {data.shape} differs from the fitted shape {(row_factors.shape[0], col_factors.shape[0])}"
        )
    return heldout_from_factors(row_factors, col_factors, data, floor=floor, warn=warn,
                                model_name=type(model).__name__, stacklevel=4)


def heldout_from_factors(row_factors: Any, col_factors: Any, data: CoOccurrence, *, floor: float | None = None,
                         warn: bool = True, model_name: str = "model", stacklevel: int = 3) -> HeldOut:
    """:func:`heldout_evaluation` from the predictive factors: P(y_k|x_i) = Σ_c R_ic C_kc.

    For predictions that are not a model's own parameters, e.g. rows folded in
    (:mod:`zoo.sklearn`). ``row_factors`` is (n_rows, C), ``col_factors`` (n_cols, C), in the
    orientation of ``data``; ``model_name`` names the model in the warning.
    """
    floor = _check_floor(floor)
    row_factors = np.asarray(row_factors, np.float64)
    col_factors = np.asarray(col_factors, np.float64)
    log_lik, n_zero = 0.0, 0.0
    chunk = 1 << 16
    for start in range(0, data.nnz, chunk):
        cells = slice(start, start + chunk)
        counts = data.counts[cells]
        probabilities = np.einsum("nc,nc->n", row_factors[data.rows[cells]], col_factors[data.cols[cells]])
        zero = probabilities <= 0
        n_zero += float(counts[zero].sum())
        if floor is not None:
            probabilities = np.maximum(probabilities, floor)
        log_lik += float(np.sum(counts[~zero] * np.log(probabilities[~zero])))
        if floor is not None:
            log_lik += float(counts[zero].sum()) * math.log(floor)
    if n_zero > 0 and floor is None:
        log_lik = -math.inf
    if n_zero > 0 and warn:
        share = n_zero / data.total
        what = (f"they are scored at floor={floor:g}" if floor is not None else
                "the held-out log-likelihood is -inf and the perplexity inf; pass floor= to score them at an "
                "explicit floor")
        warnings.warn(f"{n_zero:g} of {data.total:g} held-out tokens ({share:.3%}) have probability 0 under "
                      f"the fitted {model_name}: {what}, or fit with prior_count > 0 (MAP-EM) so that "
                      "no prediction is 0", ZeroProbabilityWarning, stacklevel=stacklevel)
    return HeldOut(log_lik=log_lik, n_tokens=float(data.total), n_zero_tokens=n_zero, floor=floor)


def perplexity(model: Any, params: Any, data: CoOccurrence, *, floor: float | None = None) -> float:
    """Held-out perplexity exp(-Σ n log P(y|x) / Σ n) of ``data`` (H99 §5).

    Tokens of probability 0 are not hidden: with any of them the perplexity is inf (and a
    :class:`ZeroProbabilityWarning` says how many) unless ``floor`` is set; see
    :func:`heldout_evaluation`.
    """
    return heldout_evaluation(model, params, data, floor=floor).perplexity
