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
has zeros); its log-probability is -inf, and so is the held-out log-likelihood. One definition
serves the fit and the evaluation, :func:`zero_probability`: a token (x_i, y_k) has probability 0
when no class c has both R_ic and C_kc positive, a factor below the smallest normal number of the
parameters' dtype counting as 0 (XLA on the CPU flushes such subnormal numbers to 0). The kernels
(:func:`conditional_log_lik`) floor the normalised P(y|x) at 1e-30 (float32) to keep their sums
finite; :func:`split_zero_cells` takes the floored cells back out, counts the tokens of probability
0 and scores the others, whose P(y|x) is positive but tiny, at their exact log-probability (a
log-sum-exp over the classes). That is what the models' ``heldout_log_lik_and_zeros`` gives the EM
driver: its validation perplexity is inf with such tokens (unless ``tempered_em(..., floor=)``),
and it compares iterates by (tokens of probability 0, perplexity of the others). The evaluation
for users, :func:`heldout_evaluation` and :func:`perplexity` (and ``EMResult.perplexity``),
computed in float64, counts the same tokens, warns, and returns an infinite perplexity unless the
caller sets an explicit ``floor=``. Fitting with ``prior_count > 0`` (MAP-EM, pseudo-counts in the
M-step) makes every P(y|x) positive.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from inference._validation import user_stacklevel
from inference.sparse import _floor, row_cell_stats
from zoo.data import CoOccurrence, DyadicArrays, not_co_occurrence

__all__ = ["row_max_normalise", "conditional_log_lik", "zero_probability", "split_zero_cells", "predictive_factors",
           "predictive_matrix", "prediction_spread", "perplexity", "HeldOut", "heldout_evaluation",
           "heldout_from_factors",
           "ZeroProbabilityWarning"]


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


def zero_probability(row_cells: Any, col_cells: Any, dtype: Any) -> Any:
    """Whether P(y_k|x_i) = Σ_c R_ic C_kc is 0, for the cells given by their factors' rows.

    The one definition of a token of probability 0, used by the fit's validation
    (:func:`split_zero_cells`) and by the held-out evaluation (:func:`heldout_from_factors`): no
    class c has both R_ic and C_kc positive. A factor below the smallest normal number of ``dtype``
    (the parameters' working precision) counts as 0, as it does in XLA on the CPU, which flushes
    subnormal numbers to 0; so float32 parameters give the same count whether P(y|x) is computed
    in float32 inside the fit or in float64 by the evaluation. Works on numpy and JAX arrays.

    Parameters
    ----------
    row_cells : (n_cells, C) array — R_i of each cell's row
    col_cells : (n_cells, C) array — C_k of each cell's column
    dtype : the parameters' floating dtype

    Returns
    -------
    (n_cells,) bool array
    """
    tiny = float(np.finfo(np.dtype(dtype)).tiny)
    return ~((row_cells >= tiny) & (col_cells >= tiny)).any(axis=-1)


def _working_dtype(factors: Any) -> Any:
    """The floating dtype of ``factors`` (float64 for integer or object input)."""
    dtype = np.asarray(factors).dtype if not hasattr(factors, "dtype") else np.dtype(factors.dtype)
    return dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float64)


def split_zero_cells(log_lik: Any, row_factors: Any, col_factors: Any, arrays: DyadicArrays, *,
                     reduce: Any = None, chunk_cells: int = 1 << 16, batch_cells: int = 4096,
                     floor: float | None = None) -> tuple[Any, Any]:
    """Take the cells of probability 0 out of a kernel's Σ n log P(y|x) and count their tokens.

    The kernels (:func:`conditional_log_lik`, the aspect model's) score a cell whose normalised
    product z = (R_i / max R_i)·(C_k / max C_k) is below the floor of :mod:`inference.sparse`
    (1e-30 in float32, 1e-300 in float64) as n (log floor + log max R_i + log max C_k). This pass
    finds those cells and corrects what the kernel added for them: a cell of probability 0
    (:func:`zero_probability`) is taken out and its tokens counted; a cell of positive but tiny
    probability gets its exact n log P(y|x) = n log Σ_c exp(log R_ic + log C_kc), so that the
    result agrees with the float64 evaluation of :func:`heldout_from_factors`. Returns (Σ n log
    P(y|x) over the tokens of positive probability, their number of tokens of probability 0).
    ``log_lik`` is the kernel's sum over all blocks of cells (already reduced); ``reduce`` adds up
    this block's corrections across blocks (data-parallel EM). Without floored cells the first
    result is ``log_lik`` itself, bit for bit.

    With ``floor`` (a user's, as in :func:`heldout_from_factors`) every token is scored at
    max(P(y|x), ``floor``), those of probability 0 included: the cells below ``floor`` are found
    and corrected the same way, and the first result is the sum over all tokens (the second still
    counts the tokens of probability 0).

    Parameters
    ----------
    log_lik : scalar — the kernel's Σ n log max(P(y|x), floor) for ``arrays``
    row_factors : (n_rows, C) array — R
    col_factors : (n_cols, C) array — C
    arrays : DyadicArrays — the scored cells (padding cells have count 0)
    chunk_cells : int — cells per chunk of the pass that finds the floored cells
    batch_cells : int — floored cells scored at a time (a loop runs while any are left: usually none)
    floor : float in (0, 1), optional — score every token at max(P(y|x), floor)

    Returns
    -------
    (log_lik over tokens of positive probability, tokens of probability 0), scalars
    """
    dtype = arrays.counts.dtype
    R, C = jnp.asarray(row_factors, dtype), jnp.asarray(col_factors, dtype)
    A, log_rows = row_max_normalise(R)
    B, log_cols = row_max_normalise(C)
    floor_user, floor = floor, _floor(dtype)
    log_floor = jnp.log(jnp.asarray(floor, dtype))
    nnz = arrays.rows.shape[0]
    n_chunks = max(1, -(-nnz // chunk_cells))
    size = -(-nnz // n_chunks)
    pad = n_chunks * size - nnz
    # Padding ids may point past the end; their count is 0.
    rows = jnp.minimum(jnp.pad(arrays.rows, (0, pad)), A.shape[0] - 1)
    cols = jnp.minimum(jnp.pad(arrays.cols, (0, pad)), B.shape[0] - 1)
    counts = jnp.pad(arrays.counts, (0, pad))

    log_user = None if floor_user is None else jnp.log(jnp.asarray(floor_user, dtype))

    def flag(_, chunk):
        chunk_rows, chunk_cols, chunk_counts = chunk
        z = jnp.sum(A[chunk_rows] * B[chunk_cols], axis=1)  # elementwise: XLA's batched dot is slower on the CPU
        low = z < floor
        if log_user is not None:  # P(y|x) = z max R_i max C_k below the user's floor
            low = low | (jnp.log(z) + log_rows[chunk_rows] + log_cols[chunk_cols] < log_user)
        return None, low & (chunk_counts > 0)

    _, floored = jax.lax.scan(flag, None, tuple(array.reshape(n_chunks, size) for array in (rows, cols, counts)))
    floored = floored.reshape(-1)
    # The floored cells are few: score them in batches of their indices, in log space.
    batch = min(batch_cells, n_chunks * size)
    n_floored = jnp.sum(floored)
    n_batches_max = -(-(n_chunks * size) // batch)
    order = jnp.nonzero(floored, size=n_batches_max * batch, fill_value=0)[0]

    def score(state):
        index, n_zero, correction = state
        cells = jax.lax.dynamic_slice(order, (index * batch,), (batch,))
        in_batch = index * batch + jnp.arange(batch) < n_floored
        cell_rows, cell_cols, cell_counts = rows[cells], cols[cells], counts[cells]
        row_cells, col_cells = R[cell_rows], C[cell_cols]
        zero = in_batch & zero_probability(row_cells, col_cells, dtype)
        tiny = in_batch & ~zero
        exact = jax.nn.logsumexp(jnp.log(row_cells) + jnp.log(col_cells), axis=1)  # the products underflow
        z = jnp.sum(A[cell_rows] * B[cell_cols], axis=1)
        # What the kernel added: log max(z, its floor) + the normalisers.
        kernel = cell_counts * (jnp.maximum(jnp.log(z), log_floor) + log_rows[cell_rows] + log_cols[cell_cols])
        n_zero = n_zero + jnp.sum(jnp.where(zero, cell_counts, 0.0))
        if log_user is not None:  # every flagged token at max(log P, log floor), those of probability 0 too
            scored = cell_counts * jnp.maximum(jnp.where(zero, -jnp.inf, exact), log_user)
            correction = correction + jnp.sum(jnp.where(in_batch, kernel - scored, 0.0))
            return index + 1, n_zero, correction
        correction = correction + jnp.sum(jnp.where(zero, kernel, 0.0))
        correction = correction + jnp.sum(jnp.where(tiny, kernel - cell_counts * exact, 0.0))
        return index + 1, n_zero, correction

    zeros = jnp.zeros((), dtype)
    _, n_zero, correction = jax.lax.while_loop(lambda state: state[0] * batch < n_floored, score,
                                               (jnp.asarray(0, jnp.int32), zeros, zeros))
    if reduce is not None:
        n_zero, correction = reduce((n_zero, correction))
    return log_lik - correction, n_zero


def predictive_factors(model: Any, params: Any) -> tuple[Any, Any]:
    """(R, C) of any dyadic model, with P(y_k|x_i) = R_i·C_k in the data's own orientation."""
    if not hasattr(model, "predictive_factors"):
        raise TypeError(f"model: {type(model).__name__} has no predictive distribution P(y|x)")
    check = getattr(model, "check_params", None)  # the zoo's models refuse another model's parameters
    if callable(check):
        check(params)
    return model.predictive_factors(params)


def prediction_spread(row_factors: Any, col_factors: Any) -> float:
    """A bound on how far any row's prediction lies from the rows' mean, in total variation, in [0, 2].

    With ``P(y_k|x_i) = Σ_c R_ic C_kc`` (the factors of :func:`predictive_factors`, each row of R and
    each column of C a distribution), w the mean row of R and ``m = C w`` the mean prediction,
    ``P(·|x_i) − m = Σ_c (R_ic − w_c)(C_c − m)``, so ``TV(P(·|x_i), m) ≤ Σ_c |R_ic − w_c| TV(C_c, m)``:
    the largest over rows is returned. It is 0 when every row mixes the classes alike or the classes
    it mixes differently predict alike — the model then predicts as one class, the unigram, would
    (H99 §2.4's one-class limit); below :data:`inference.em.ALIKE_TOLERANCE` a fit warns
    (:class:`inference.em.ClassesAlikeWarning`). Computed in float64 in O((rows + columns) · K),
    without the dense matrix P(y|x).
    """
    rows = np.asarray(row_factors, np.float64)
    cols = np.asarray(col_factors, np.float64)
    weights = rows.mean(axis=0)
    mean_prediction = cols @ weights
    class_distance = 0.5 * np.abs(cols - mean_prediction[:, None]).sum(axis=0)  # TV(C_c, m), (K,)
    return float((np.abs(rows - weights) @ class_distance).max())


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
    n_zero_tokens : float — held-out tokens of probability 0 (:func:`zero_probability`; before any floor)
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
        raise not_co_occurrence("data", data)
    floor = _check_floor(floor)
    row_factors, col_factors = predictive_factors(model, params)
    if (row_factors.shape[0], col_factors.shape[0]) != data.shape:
        raise ValueError(
            f"data: shape {data.shape} differs from the fitted shape {(row_factors.shape[0], col_factors.shape[0])}"
        )
    return heldout_from_factors(row_factors, col_factors, data, floor=floor, warn=warn,
                                model_name=type(model).__name__)


def heldout_from_factors(row_factors: Any, col_factors: Any, data: CoOccurrence, *, floor: float | None = None,
                         warn: bool = True, model_name: str = "model", stacklevel: int | None = None,
                         set_floor: str = "pass floor=", map_em: str = "prior_count > 0") -> HeldOut:
    """:func:`heldout_evaluation` from the predictive factors: P(y_k|x_i) = Σ_c R_ic C_kc.

    For predictions that are not a model's own parameters, e.g. rows folded in
    (:mod:`zoo.sklearn`). ``row_factors`` is (n_rows, C), ``col_factors`` (n_cols, C), in the
    orientation of ``data``; ``model_name`` names the model in the warning, which points at the
    ``stacklevel``-th frame (by default the first frame outside latentzoo: the user's line), and
    ``set_floor`` and ``map_em`` say how the caller sets a floor and MAP-EM (an estimator: its
    hyperparameters).
    """
    floor = _check_floor(floor)
    working_dtype = _working_dtype(row_factors)  # the precision the fit worked in: its zeros
    row_factors = np.asarray(row_factors, np.float64)
    col_factors = np.asarray(col_factors, np.float64)
    log_lik, n_zero = 0.0, 0.0
    chunk = 1 << 16
    for start in range(0, data.nnz, chunk):
        cells = slice(start, start + chunk)
        counts = data.counts[cells]
        row_cells, col_cells = row_factors[data.rows[cells]], col_factors[data.cols[cells]]
        zero = zero_probability(row_cells, col_cells, working_dtype)
        probabilities = np.einsum("nc,nc->n", row_cells, col_cells)
        with np.errstate(divide="ignore"):
            log_p = np.log(np.where(zero, 1.0, probabilities))
            underflow = ~zero & (probabilities < np.finfo(np.float64).tiny)  # float64 products too small
            if underflow.any():
                log_p[underflow] = logsumexp(np.log(row_cells[underflow]) + np.log(col_cells[underflow]), axis=1)
        n_zero += float(counts[zero].sum())
        if floor is not None:
            log_p = np.maximum(log_p, math.log(floor))
        log_lik += float(np.sum(counts[~zero] * log_p[~zero]))
        if floor is not None:
            log_lik += float(counts[zero].sum()) * math.log(floor)
    if n_zero > 0 and floor is None:
        log_lik = -math.inf
    if n_zero > 0 and warn:
        share = n_zero / data.total
        what = (f"they are scored at floor={floor:g} (a fit with {map_em}, MAP-EM, leaves no prediction at 0)"
                if floor is not None else
                f"the held-out log-likelihood is -inf and the perplexity inf; {set_floor} to score them at an "
                f"explicit floor, or fit with {map_em} (MAP-EM) so that no prediction is 0")
        warnings.warn(f"{n_zero:g} of {data.total:g} held-out tokens ({share:.3%}) have probability 0 under "
                      f"the fitted {model_name}: {what}", ZeroProbabilityWarning,
                      stacklevel=user_stacklevel() if stacklevel is None else stacklevel)
    return HeldOut(log_lik=log_lik, n_tokens=float(data.total), n_zero_tokens=n_zero, floor=floor)


def perplexity(model: Any, params: Any, data: CoOccurrence, *, floor: float | None = None) -> float:
    """Held-out perplexity exp(-Σ n log P(y|x) / Σ n) of ``data`` (H99 §5).

    Tokens of probability 0 are not hidden: with any of them the perplexity is inf (and a
    :class:`ZeroProbabilityWarning` says how many) unless ``floor`` is set; see
    :func:`heldout_evaluation`.
    """
    return heldout_evaluation(model, params, data, floor=floor).perplexity
