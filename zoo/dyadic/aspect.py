"""The aspect model (probabilistic latent semantic analysis) for dyadic data.

H99 §2.1, eqs. 1–4; HP98 eq. 1. Every co-occurrence (x_i, y_k) carries its own latent class
("aspect") c, and x and y are conditionally independent given c:

    P(x_i, y_k) = Σ_c P(c) P(x_i|c) P(y_k|c)                                  (H99 eq. 2)

EM alternates the class posteriors P{c_ik = c} ∝ P(c) P(x_i|c) P(y_k|c) (eq. 3) with
re-estimation of the three distributions from expected counts (eq. 4). Tempered EM raises the
likelihood term to β: P_β{c_ik = c} ∝ P(c) [P(x_i|c) P(y_k|c)]^β (H99 §4). Predictions for held-out
tokens of known rows use P(y|x) = Σ_c P(c|x) P(y|c) with P(c|x) ∝ P(c) P(x|c) (H99 §2.4 table).

MAP-EM. With ``prior_count`` c > 0 the M-step adds c pseudo-counts to every expected count,
P(c) ∝ n(c) + c, P(x_i|c) ∝ n(x_i, c) + c, P(y_k|c) ∝ n(y_k, c) + c: the MAP estimate under
symmetric Dirichlet(1 + c) priors (as the LRM's ``prior_count``), so no P(y|x) is ever 0. With
c = 0 (the default) it is H99's maximum-likelihood EM.

The file reads top to bottom: the NumPyro program (the specification, with an enumerated class
per token), the parameters, the sufficient statistics, the E-step and M-step, fold-in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from inference.em import fitted_params
from inference.native.backend import resolve_backend
from inference.sparse import cell_stats
from inference._validation import check_choice, check_fitted_params, check_int, check_real
from inference.jit import jit
from zoo.data import CoOccurrence, DyadicArrays, not_co_occurrence
from zoo.dyadic.predictive import HeldOut, heldout_evaluation, prediction_spread, split_zero_cells

__all__ = ["Aspect", "AspectParams"]


# ----------------------------------------------------------------------------- the program
def aspect_program(rows=None, cols=None, *, n_rows: int, n_cols: int, n_classes: int, n_tokens: int | None = None):
    """NumPyro program of the aspect model, one enumerated class per token (H99 eq. 1).

    Parameters
    ----------
    rows, cols : int arrays, shape (n_tokens,), optional
        Observed tokens (x, y); omit both to simulate ``n_tokens`` tokens.
    n_rows, n_cols, n_classes : int
        Sizes of X, Y and the number of aspects K.

    Sites
    -----
    ``class_prior`` (K,), ``row_given_class`` (K, n_rows), ``col_given_class`` (K, n_cols): params
    on the simplex; ``c``: enumerated class per token; ``x``, ``y``: observed tokens. The plate
    ``tokens`` names the token dimension.
    """
    if n_tokens is None:
        n_tokens = rows.shape[0]
    class_prior = numpyro.param("class_prior", jnp.full((n_classes,), 1.0 / n_classes), constraint=dist.constraints.simplex)
    row_given_class = numpyro.param(
        "row_given_class", jnp.full((n_classes, n_rows), 1.0 / n_rows), constraint=dist.constraints.simplex
    )
    col_given_class = numpyro.param(
        "col_given_class", jnp.full((n_classes, n_cols), 1.0 / n_cols), constraint=dist.constraints.simplex
    )
    with numpyro.plate("tokens", n_tokens):
        c = numpyro.sample("c", dist.Categorical(class_prior), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Categorical(row_given_class[c]), obs=rows)
        numpyro.sample("y", dist.Categorical(col_given_class[c]), obs=cols)


# ----------------------------------------------------------------------------- parameters
class AspectParams(NamedTuple):
    """Parameters of the aspect model (H99 eq. 2).

    Attributes
    ----------
    class_prior : (K,) — P(c)
    row_given_class : (n_rows, K) — P(x_i|c); every column sums to 1
    col_given_class : (n_cols, K) — P(y_k|c); every column sums to 1
    """

    class_prior: Any
    row_given_class: Any
    col_given_class: Any

    def program_params(self) -> dict:
        """The same parameters under the names and layouts of :func:`aspect_program`."""
        return {
            "class_prior": self.class_prior,
            "row_given_class": self.row_given_class.T,
            "col_given_class": self.col_given_class.T,
        }

    def class_given_row(self) -> Any:
        """P(c|x_i) ∝ P(c) P(x_i|c), shape (n_rows, K); rows never seen get P(c)."""
        joint = self.class_prior[None, :] * self.row_given_class
        total = joint.sum(axis=1, keepdims=True)
        return jnp.where(total > 0, joint / jnp.where(total > 0, total, 1.0), self.class_prior[None, :])


def _reduce(reduce: Any, value: Any) -> Any:
    """Apply the cross-block reduction (identity when fitting on one device)."""
    return value if reduce is None else reduce(value)


def _power(probabilities: Any, beta: Any) -> Any:
    """p^β with 0^β = 0, computed in log space; at β = 1 the exp/log pass is skipped."""

    def tempered():
        positive = probabilities > 0
        powered = jnp.exp(beta * jnp.log(jnp.where(positive, probabilities, 1.0)))
        return jnp.where(positive, powered, 0.0).astype(probabilities.dtype)

    if isinstance(beta, (int, float)):
        return probabilities if beta == 1 else tempered()
    return jax.lax.cond(beta == 1, lambda: probabilities, tempered)


def _row_max_normalise(factors: Any) -> tuple[Any, Any]:
    """Divide each row by its maximum (rows of zeros are left alone); returns (factors, log max).

    The class posteriors are invariant to per-row scaling, so this only prevents underflow of
    products like P(c) P(x|c) P(y|c) in float32 on large vocabularies.
    """
    row_max = factors.max(axis=1, keepdims=True)
    safe = jnp.where(row_max > 0, row_max, 1.0)
    return factors / safe, jnp.log(safe[:, 0])


def _normalise_columns(stats: Any, fallback: Any, prior_count: float = 0.0) -> Any:
    """Columns of ``stats`` + ``prior_count`` divided by their sums; a class with no mass keeps
    ``fallback`` (only possible without pseudo-counts)."""
    stats = stats + prior_count
    totals = stats.sum(axis=0, keepdims=True)
    return jnp.where(totals > 0, stats / jnp.where(totals > 0, totals, 1.0), fallback)


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class Aspect:
    """Aspect model with K classes, fitted by (tempered) EM on sparse counts.

    Parameters
    ----------
    n_classes : int
        Number of aspects K (≥ 1).
    update : {"simultaneous", "alternating"}
        "simultaneous" is EM as in H99 eqs. 3–4 (all distributions from one E-step).
        "alternating" re-estimates P(c), P(x|c) from one E-step, then P(c), P(y|c) from a second
        E-step with the new values (an ECM variant, also monotone); at β = 1 it reproduces the
        Kullback–Leibler NMF multiplicative updates (Lee & Seung) step for step, with
        W = P(x, c) and H = P(y|c)ᵀ.
    backend : {"auto", "xla", "numba"}
        Implementation of the sparse E-step (see :mod:`inference.sparse`).
    prior_count : float ≥ 0
        Pseudo-counts added to every expected count in the M-step (MAP-EM under symmetric
        Dirichlet(1 + c) priors; module docstring). 0 is maximum-likelihood EM; any c > 0 keeps
        every prediction P(y|x) > 0, so held-out perplexity needs no floor.

    Examples
    --------
    >>> import jax
    >>> from zoo.data import CoOccurrence
    >>> from inference.em import tempered_em
    >>> data = CoOccurrence.from_dense([[4, 1, 0], [3, 0, 1], [0, 5, 2]])
    >>> result = tempered_em(Aspect(n_classes=2), data, key=jax.random.key(1), max_iter=50)
    >>> result.params.class_prior.shape
    (2,)
    """

    n_classes: int
    update: str = "simultaneous"
    backend: str = "auto"
    prior_count: float = 0.0

    #: What a fit's summary points to beyond the parameters: each aspect's most probable words, and
    #: each row's P(c|x).
    see_also: ClassVar[tuple] = ("zoo.report.class_profiles(result, col_names=data.col_names)",
                                 "result.params.class_given_row()")

    #: The fields of :class:`AspectParams` that are distributions, and the axis each sums to 1
    #: along (``init=`` of :func:`inference.em.tempered_em` is checked against it).
    probability_axes: ClassVar[dict] = {"class_prior": -1, "row_given_class": 0, "col_given_class": 0}

    def __post_init__(self) -> None:
        check_int("n_classes", self.n_classes, minimum=1)
        check_choice("update", self.update, ("simultaneous", "alternating"))
        resolve_backend(self.backend)  # a bad name, or numba off the CPU, refused here
        object.__setattr__(self, "prior_count", check_real("prior_count", self.prior_count, low=0.0))

    program = staticmethod(aspect_program)

    # ---------------------------------------------------------------- data and initialisation
    def prepare(self, data: CoOccurrence) -> DyadicArrays:
        """Validate ``data`` and return its device arrays."""
        if not isinstance(data, CoOccurrence):
            raise not_co_occurrence("data", data)
        return data.to_arrays()

    def prepare_sharded(self, data: CoOccurrence, n_shards: int, *, process_local: bool = False) -> DyadicArrays:
        """Like :meth:`prepare`, split into ``n_shards`` blocks of cells (leading axis).

        ``process_local``: ``data`` is this process's part of the cells (any part; with the
        global shape) and the blocks are this process's (:meth:`CoOccurrence.to_sharded_arrays`).
        """
        if not isinstance(data, CoOccurrence):
            raise not_co_occurrence("data", data)
        return data.to_sharded_arrays(n_shards, process_local=process_local)

    def init_params(self, rng_key: Any, arrays: DyadicArrays) -> AspectParams:
        """Random start: P(c) uniform, P(x|c) and P(y|c) uniform(0.5, 1.5) noise, normalised."""
        n_rows, n_cols = arrays.shape
        dtype = arrays.counts.dtype
        key_rows, key_cols = jax.random.split(rng_key)
        rows = jax.random.uniform(key_rows, (n_rows, self.n_classes), dtype, 0.5, 1.5)
        cols = jax.random.uniform(key_cols, (n_cols, self.n_classes), dtype, 0.5, 1.5)
        return AspectParams(
            class_prior=jnp.full((self.n_classes,), 1.0 / self.n_classes, dtype),
            row_given_class=rows / rows.sum(axis=0),
            col_given_class=cols / cols.sum(axis=0),
        )

    # ---------------------------------------------------------------- sufficient statistics
    def _factors(self, params: AspectParams, beta: Any) -> tuple[Any, Any, Any, Any]:
        """Row-normalised A_ic ∝ P(c) P(x_i|c)^β and B_kc ∝ P(y_k|c)^β with their log scales."""
        A, log_scale_rows = _row_max_normalise(params.class_prior[None, :] * _power(params.row_given_class, beta))
        B, log_scale_cols = _row_max_normalise(_power(params.col_given_class, beta))
        return A, B, log_scale_rows, log_scale_cols

    def log_likelihood(self, params: AspectParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """Σ n(x_i, y_k) log P(x_i, y_k) (H99 eq. 2), the quantity EM increases at β = 1.

        ``reduce`` (e.g. a ``psum`` over devices) adds up sums over cells computed block by block.
        """
        A, B, log_rows, log_cols = self._factors(params, 1.0)
        stats = cell_stats(A, B, arrays, want_rows=False, want_cols=False, backend=self.backend)
        return _reduce(reduce, stats.log_norm) + self._scale_correction(arrays, log_rows, log_cols)

    @staticmethod
    def _scale_correction(arrays: DyadicArrays, log_rows: Any, log_cols: Any) -> Any:
        """Σ_ik n_ik (log s_i + log t_k) = Σ_i n_i log s_i + Σ_k n_k log t_k: undoes the per-row
        normalisation of the factors. It needs only the margins, which every block of a sharded
        fit holds whole, so it is added once, after the sums over cells are reduced."""
        return (jnp.dot(arrays.row_sums.astype(log_rows.dtype), log_rows, precision="highest")
                + jnp.dot(arrays.col_sums.astype(log_cols.dtype), log_cols, precision="highest"))

    def heldout_log_lik(self, params: AspectParams, arrays: DyadicArrays, reduce: Any = None) -> Any:
        """Σ n(x_i, y_k) log P(y_k|x_i), P(y|x) = Σ_c P(c|x) P(y|c) (H99 §2.4)."""
        A, log_rows = _row_max_normalise(params.class_given_row())
        B, log_cols = _row_max_normalise(params.col_given_class)
        stats = cell_stats(A, B, arrays, want_rows=False, want_cols=False, backend=self.backend)
        return _reduce(reduce, stats.log_norm) + self._scale_correction(arrays, log_rows, log_cols)

    def heldout_log_lik_and_zeros(self, params: AspectParams, arrays: DyadicArrays,
                                  reduce: Any = None, floor: float | None = None) -> tuple[Any, Any]:
        """(Σ n log P(y|x) over held-out tokens of positive probability, tokens of probability 0):
        the validation score of the EM driver (:func:`zoo.dyadic.predictive.split_zero_cells`).
        With ``prior_count > 0`` no prediction is 0 and the count pass is skipped. With ``floor``
        every token is scored at max(P(y|x), floor) (:func:`~zoo.dyadic.predictive.split_zero_cells`),
        as the evaluation does."""
        log_lik = self.heldout_log_lik(params, arrays, reduce)
        if self.prior_count > 0 and floor is None:
            return log_lik, jnp.zeros((), log_lik.dtype)
        return split_zero_cells(log_lik, params.class_given_row(), params.col_given_class, arrays, reduce=reduce,
                                floor=floor)

    # ---------------------------------------------------------------- E-step + M-step
    def em_step(self, params: AspectParams, arrays: DyadicArrays, beta: Any,
                reduce: Any = None) -> tuple[AspectParams, Any]:
        """One tempered EM iteration; returns (new params, β = 1 log-likelihood of ``params``).

        E-step (H99 eq. 3 with β, §4): P_β{c_ik = c} = A_ic B_kc / z_ik with A_ic ∝ P(c) P(x_i|c)^β,
        B_kc ∝ P(y_k|c)^β. M-step (eq. 4): expected counts n(x_i, c) and n(y_k, c), normalised.
        With ``reduce`` (a ``psum`` over devices holding blocks of cells) the expected counts are
        added up across blocks before the M-step: data-parallel EM.
        """
        A, B, log_rows_beta, log_cols_beta = self._factors(params, beta)
        # The β = 1 log-likelihood of ``params`` comes out of the same pass over the cells. At β = 1
        # the β = 1 factors are the ones just computed, so ``lax.cond`` skips recomputing them and
        # the kernel skips the second product per cell. (Under vmapped restarts with batched β both
        # branches of the cond run; the single pass over the cells is kept either way.)
        A_one, B_one, log_rows, log_cols = jax.lax.cond(
            beta == 1.0,
            lambda: (A, B, log_rows_beta, log_cols_beta),
            lambda: self._factors(params, 1.0),
        )
        stats = cell_stats(A, B, arrays, want_rows=True, want_cols=self.update == "simultaneous",
                           backend=self.backend, eval_factors=(A_one, B_one), eval_needed=beta != 1.0)
        stats = _reduce(reduce, stats)
        log_lik = stats.eval_log_norm + self._scale_correction(arrays, log_rows, log_cols)
        prior_count = self.prior_count
        class_mass = stats.row_stats.sum(axis=0) + prior_count  # Σ_ik n_ik P{c_ik = c} (+ c)
        class_prior = class_mass / class_mass.sum()
        row_given_class = _normalise_columns(stats.row_stats, params.row_given_class, prior_count)
        if self.update == "simultaneous":
            col_stats = stats.col_stats
        else:
            # ECM: second E-step with the new P(c), P(x|c) before re-estimating P(y|c).
            half = AspectParams(class_prior, row_given_class, params.col_given_class)
            A_new, B_new, _, _ = self._factors(half, beta)
            col_stats = _reduce(reduce, cell_stats(A_new, B_new, arrays, want_rows=False, want_cols=True,
                                                   backend=self.backend).col_stats)
            # The second conditional M-step re-estimates P(c) together with P(y|c).
            second_mass = col_stats.sum(axis=0) + prior_count
            class_prior = second_mass / second_mass.sum()
        col_given_class = _normalise_columns(col_stats, params.col_given_class, prior_count)
        return AspectParams(class_prior, row_given_class, col_given_class), log_lik

    # ---------------------------------------------------------------- prediction
    def check_params(self, params: Any, name: str = "params") -> AspectParams:
        """``params`` as a fit of this model's (``TypeError``/``ValueError`` naming ``name`` otherwise)."""
        sizes = {"class_prior": self.n_classes, "row_given_class": self.n_classes, "col_given_class": self.n_classes}
        return check_fitted_params(name, params, AspectParams, sizes, self)

    def predictive_factors(self, params: AspectParams) -> tuple[Any, Any]:
        """(R, C) = (P(c|x_i), P(y_k|c)): P(y_k|x_i) = Σ_c R_ic C_kc (H99 §2.4)."""
        return params.class_given_row(), params.col_given_class

    def prediction_spread(self, params: AspectParams) -> float | None:
        """How far any row's P(y|x) lies from the rows' mean, at most (total variation;
        :func:`zoo.dyadic.predictive.prediction_spread`); None for one class.
        :func:`inference.em.tempered_em` warns when a fit's is below
        :data:`inference.em.ALIKE_TOLERANCE`: the classes are alike."""
        if self.n_classes == 1:
            return None
        return prediction_spread(*self.predictive_factors(params))

    def heldout_evaluation(self, params: AspectParams, data: CoOccurrence, *, floor: float | None = None) -> HeldOut:
        """Σ n log P(y|x) of held-out ``data`` in float64, tokens of probability 0 counted
        (:func:`zoo.dyadic.predictive.heldout_evaluation`: no hidden floor)."""
        return heldout_evaluation(self, params, data, floor=floor)

    # ---------------------------------------------------------------- fold-in of new rows
    def fold_in(
        self,
        params: Any,
        data: CoOccurrence,
        *,
        n_iter: int = 50,
        beta: float = 1.0,
    ) -> Any:
        """P(c|x) for the rows of ``data`` (new objects), with P(y|c) held fixed.

        EM over the mixing weights only: P(c|x_new) ← Σ_k n(x_new, y_k) P_β{c | x_new, y_k}
        normalised, the usual "folding-in" of unseen documents (Hofmann 1999).

        Parameters
        ----------
        params : AspectParams or EMResult
            The fit. Given the result (``tempered_em``'s), ``data`` that names its columns must
            name them as the fitted data did, in order (a ``ValueError`` naming ``data``): the
            columns are read by position, so a vocabulary in another order would be folded in
            wrongly, in silence. Given the parameters, only the number of columns is checked.
        data : CoOccurrence — the new rows, over the fitted columns
        n_iter : int — EM iterations over the mixing weights
        beta : float — the E-step's β (the fit's ``result.beta`` for a tempered fit)

        Returns
        -------
        (n_new_rows, K) array of P(c|x) for the rows of ``data``.
        """
        params = fitted_params(params, data, "col_names")
        self.check_params(params)
        n_iter = check_int("n_iter", n_iter, minimum=1)
        beta = check_real("beta", beta, low=0.0, high=1.0, low_open=True)
        self._check_new_rows(params, data)
        arrays = data.to_arrays()
        return _fold_in(params.col_given_class, params.class_prior, arrays, data.n_rows, n_iter,
                        jnp.asarray(beta, arrays.counts.dtype), backend=self.backend)

    def _check_new_rows(self, params: AspectParams, data: Any) -> None:
        """``data`` as new rows over the columns of the fit ``params`` (a ``TypeError``/``ValueError`` naming it)."""
        if not isinstance(data, CoOccurrence):
            raise not_co_occurrence("data", data)
        if data.n_cols != params.col_given_class.shape[0]:
            raise ValueError(
                f"data: has {data.n_cols} columns but the model was fitted with {params.col_given_class.shape[0]}"
            )

    def fold_in_heldout_log_lik(self, params: AspectParams, mixing: Any, data: CoOccurrence) -> float:
        """Σ n log P(y|x) of ``data`` for folded-in rows with mixing weights ``mixing`` = P(c|x).

        ``params``: the fit's parameters or its ``EMResult``, which also checks ``data``'s column
        names, as :meth:`fold_in` does.
        """
        params = fitted_params(params, data, "col_names")
        self.check_params(params)
        self._check_new_rows(params, data)
        if np.shape(mixing) != (data.n_rows, self.n_classes):
            raise ValueError(f"mixing: expected shape {(data.n_rows, self.n_classes)} (P(c|x) of data's rows, "
                             f"from fold_in), got {np.shape(mixing)}")
        arrays = data.to_arrays()
        A, log_rows = _row_max_normalise(jnp.asarray(mixing, arrays.counts.dtype))
        B, log_cols = _row_max_normalise(params.col_given_class.astype(arrays.counts.dtype))
        stats = cell_stats(A, B, arrays, want_rows=False, want_cols=False, backend=self.backend)
        return float(stats.log_norm + self._scale_correction(arrays, log_rows, log_cols))


from functools import partial  # noqa: E402


@partial(jit, static_argnames=("n_rows", "n_iter", "backend"))
def _fold_in(col_given_class, class_prior, arrays, n_rows, n_iter, beta, *, backend):
    B, _ = _row_max_normalise(_power(col_given_class.astype(arrays.counts.dtype), beta))
    mixing = jnp.broadcast_to(class_prior.astype(arrays.counts.dtype), (n_rows, class_prior.shape[0]))

    def step(mixing, _):
        stats = cell_stats(mixing, B, arrays, want_rows=True, want_cols=False, backend=backend)
        return _normalise_rows(stats.row_stats, mixing), None

    mixing, _ = jax.lax.scan(step, mixing, None, length=n_iter)
    return mixing


def _normalise_rows(stats: Any, fallback: Any) -> Any:
    totals = stats.sum(axis=1, keepdims=True)
    return jnp.where(totals > 0, stats / jnp.where(totals > 0, totals, 1.0), fallback)
