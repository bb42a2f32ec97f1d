"""scikit-learn estimators for the zoo's EM models.

Each estimator wraps one zoo model and :func:`inference.em.tempered_em` behind the usual
``fit`` / ``transform`` / ``predict`` / ``score`` interface, so the models drop into pipelines,
grid searches and cross-validation:

* ``fit(X)`` — X is an (n_samples, n_features) array or ``scipy.sparse`` matrix. For the dyadic
  models it holds counts n(x_i, y_k) (rows are the objects x, e.g. documents; columns the objects
  y, e.g. words); for the Gaussian mixture it holds feature vectors.
* ``transform(X)`` — class posteriors of the rows of X, shape (n_samples, n_classes). New rows
  are *folded in* with the fitted class-conditional distributions held fixed (H99 §2.4, §5).
* ``predict(X)`` — the most probable class of each row.
* ``score(X)`` — mean log-likelihood per observation: for counts, Σ n log P(y|x) / Σ n with the
  folded-in P(c|x) (the negative log of the perplexity, H99 §5); for features, the mean log
  density of the points. Higher is better, so model selection by ``GridSearchCV`` works.

Hyperparameters common to all estimators: ``schedule`` ("em" for β = 1, "tempered" for
Hofmann's tempered EM with β chosen on an internal validation split of ``valid_fraction`` of the
tokens (or rows), "annealing" for deterministic annealing, or a schedule object from
:mod:`inference.schedules`), ``n_restarts``, ``max_iter``, ``tol``, ``random_state`` (an int
seed becomes ``jax.random.key(seed)``), ``warm_start`` (continue from the previous fit's
parameters through ``tempered_em(..., init=...)``), ``time_budget`` and ``progress``. After ``fit``
the :class:`inference.em.EMResult` is ``result_`` (save it with :func:`zoo.io.save_result`, turn
it into a report with :func:`zoo.report.write_report`).

Adding a model is one small subclass of :class:`EMEstimator` (``_build_model``,
``_posterior`` and ``_predictive_factors``) plus one entry in :data:`ESTIMATORS`.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import jax
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from inference.em import EMResult, tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM
from zoo._validation import check_int, check_real
from zoo.data import CoOccurrence, as_numpy_rng
from zoo.dyadic.aspect import Aspect
from zoo.finite_mixture import GaussianMixture

__all__ = [
    "EMEstimator",
    "AspectEstimator",
    "GaussianMixtureEstimator",
    "ESTIMATORS",
    "SCHEDULES",
    "jax_key",
    "make_schedule",
    "expected_failed_checks",
]

#: Schedule names accepted by the ``schedule`` hyperparameter (and ``python -m zoo fit``).
SCHEDULES = ("em", "tempered", "annealing")


def jax_key(random_state: Any) -> Any:
    """Turn a scikit-learn ``random_state`` into a JAX PRNG key.

    Parameters
    ----------
    random_state : None, int, numpy RandomState / Generator, or JAX key
        An int ``s >= 0`` gives ``jax.random.key(s)``; a NumPy generator (and ``None``, which
        means NumPy's global generator, as in scikit-learn) draws the seed from it; a JAX key is
        returned unchanged.

    Returns
    -------
    jax PRNG key
    """
    if type(random_state).__module__.startswith(("jax", "jaxlib")):
        if not jax.dtypes.issubdtype(random_state.dtype, jax.dtypes.prng_key):
            raise TypeError("random_state: a JAX array that is not a PRNG key; use jax.random.key(seed)")
        return random_state
    if random_state is None:
        random_state = np.random.mtrand._rand
    if isinstance(random_state, np.random.RandomState):
        return jax.random.key(int(random_state.randint(np.iinfo(np.int32).max)))
    if isinstance(random_state, np.random.Generator):
        return jax.random.key(int(random_state.integers(np.iinfo(np.int32).max)))
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, numbers.Integral):
        raise TypeError(
            f"random_state: expected None, an int, a numpy RandomState/Generator or a JAX key, got {random_state!r}"
        )
    seed = check_int("random_state", random_state, minimum=0, maximum=np.iinfo(np.uint32).max)
    return jax.random.key(seed)


def make_schedule(schedule: Any) -> Any:
    """The schedule object for a ``schedule`` hyperparameter.

    ``"em"`` is :class:`FixedBeta` (β = 1), ``"tempered"`` is :class:`TemperedEM` (H99 §4) and
    ``"annealing"`` is :class:`DeterministicAnnealing`; schedule objects pass through.
    """
    if isinstance(schedule, (FixedBeta, TemperedEM, DeterministicAnnealing)):
        return schedule
    if schedule == "em" and isinstance(schedule, str):
        return FixedBeta(1.0)
    if schedule == "tempered" and isinstance(schedule, str):
        return TemperedEM()
    if schedule == "annealing" and isinstance(schedule, str):
        return DeterministicAnnealing()
    raise ValueError(
        f"schedule: must be one of {', '.join(map(repr, SCHEDULES))} or a FixedBeta, TemperedEM or "
        f"DeterministicAnnealing object, got {schedule!r}"
    )


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def _text_dtype(X: Any) -> bool:
    """Whether X is an array (or nested list) of strings, which NumPy would silently parse."""
    if isinstance(X, (list, tuple)):
        try:
            X = np.asarray(X)
        except ValueError:  # ragged: left to scikit-learn's validation
            return False
    return getattr(getattr(X, "dtype", None), "kind", "") in ("U", "S")


def _mean_conditional_log_lik(row_factors: np.ndarray, col_factors: np.ndarray, counts: sp.csr_matrix) -> float:
    """Σ_ik n_ik log Σ_c R_ic C_kc / Σ_ik n_ik in float64, over the non-zero cells (H99 §5).

    A cell predicted with probability 0 contributes n log(tiny): huge but finite.
    """
    coo = counts.tocoo()
    total = float(coo.data.sum())
    log_lik = 0.0
    tiny = np.finfo(np.float64).tiny
    chunk = 1 << 16
    for start in range(0, coo.nnz, chunk):
        rows, cols = coo.row[start:start + chunk], coo.col[start:start + chunk]
        probabilities = np.einsum("nc,nc->n", row_factors[rows], col_factors[cols])
        log_lik += float(np.sum(coo.data[start:start + chunk] * np.log(np.maximum(probabilities, tiny))))
    return log_lik / total


class EMEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Shared machinery of the EM estimators (not used directly).

    A subclass defines ``_build_model()`` (the zoo model for the current hyperparameters),
    ``_posterior(params, data, beta)`` (class posteriors of the rows of new data) and, for count
    data, ``_predictive_factors(params, posterior)`` (R, C with P(y_k|x_i) = Σ_c R_ic C_kc).
    """

    #: Whether X holds counts (dyadic models) rather than real feature vectors.
    _count_data: ClassVar[bool] = True

    # ------------------------------------------------------------------ hooks
    def _check_model_params(self) -> None:
        """Validate the model's own hyperparameters (names in the messages)."""

    def _check_data(self, data: Any, n_samples: int) -> None:
        """Model-specific checks of the training data (e.g. enough rows for the classes)."""
        n_classes = self._n_classes()
        if n_classes > n_samples:
            raise ValueError(
                f"X: {n_samples} sample(s) for n_classes={n_classes}; every class needs a sample to start from"
            )

    def _n_classes(self) -> int:
        return self.n_classes

    @classmethod
    def _classes_argument(cls, n_classes: int) -> dict[str, Any]:
        """Constructor arguments for "K classes" (``python -m zoo fit --classes K``)."""
        return {"n_classes": n_classes}

    # ------------------------------------------------------------------ validation
    def _check_params(self) -> tuple[Any, Any]:
        """Validate every hyperparameter before any computation; returns (schedule, key)."""
        self._check_model_params()
        schedule = make_schedule(self.schedule)
        check_real("valid_fraction", self.valid_fraction, low=0.0, high=1.0, low_open=True, high_open=True)
        check_int("n_restarts", self.n_restarts, minimum=1)
        check_int("max_iter", self.max_iter, minimum=1)
        check_real("tol", self.tol, low=0.0)
        if self.time_budget is not None:
            check_real("time_budget", self.time_budget, low=0.0, low_open=True)
        _check_bool("progress", self.progress)
        _check_bool("warm_start", self.warm_start)
        return schedule, jax_key(self.random_state)

    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        """Validate X with scikit-learn's rules, with messages that start with ``X:``."""
        if isinstance(X, CoOccurrence):
            X = X.to_sparse()
        if _text_dtype(X):
            raise TypeError(f"X: expected numbers, got text (dtype {np.asarray(X).dtype})")
        try:
            X = validate_data(self, X, reset=reset, accept_sparse=("csr", "csc", "coo"), dtype=np.float64)
        except ValueError as error:
            raise ValueError(f"X: {error}") from None
        except TypeError as error:
            raise TypeError(f"X: {error}") from None
        if self._count_data:
            values = X.data if sp.issparse(X) else X
            if values.size and values.min() < 0:
                raise ValueError(
                    f"X: Negative values in data passed to {type(self).__name__}: counts must be non-negative "
                    f"(min {values.min()})"
                )
            return sp.csr_matrix(X)
        return X.toarray() if sp.issparse(X) else np.asarray(X)

    # ------------------------------------------------------------------ data
    def _as_data(self, X: Any) -> Any:
        """Training data for the model: a CoOccurrence of counts, or the (n, d) points."""
        if not self._count_data:
            return X
        if X.count_nonzero() == 0:
            raise ValueError("X: contains no positive counts")
        return CoOccurrence.from_sparse(X)

    def _train_valid(self, data: Any, schedule: Any, key: Any) -> tuple[Any, Any]:
        """Split off ``valid_fraction`` of the tokens (counts) or rows (features) when needed."""
        if not schedule.needs_validation:
            return data, None
        rng = as_numpy_rng(key)
        fraction = float(self.valid_fraction)
        if self._count_data:
            train, valid = data.split_tokens([1.0 - fraction, fraction], rng=rng)
            if train is None or valid is None:
                raise ValueError(
                    f"valid_fraction: splitting {data.total:g} tokens left an empty training or validation "
                    f"part; use more data, another valid_fraction or schedule='em'"
                )
            return train, valid
        n_samples = data.shape[0]
        n_valid = int(round(fraction * n_samples))
        # GaussianMixture.prepare wants at least n_classes points in the validation part too.
        if min(n_valid, n_samples - n_valid) < self._n_classes():
            raise ValueError(
                f"valid_fraction: {fraction} of {n_samples} samples leaves fewer training or validation "
                f"samples than classes; use more data, another valid_fraction or schedule='em'"
            )
        order = rng.permutation(n_samples)
        return data[np.sort(order[n_valid:])], data[np.sort(order[:n_valid])]

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None) -> "EMEstimator":
        """Fit the model to X by (tempered) EM.

        Parameters
        ----------
        X : array_like or scipy.sparse matrix, shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        schedule, key = self._check_params()
        X = self._validate_X(X, reset=True)
        data = self._as_data(X)
        model = self._build_model()
        key_split, key_fit = jax.random.split(key)
        train, valid = self._train_valid(data, schedule, key_split)
        self._check_data(train, train.shape[0])
        init, n_restarts = None, self.n_restarts
        if self.warm_start and isinstance(getattr(self, "result_", None), EMResult):
            if self.result_.model != model or getattr(self.result_, "_shape", None) != getattr(train, "shape", None):
                raise ValueError("warm_start: the previous fit has other settings or another data shape; "
                                 "set warm_start=False to start afresh")
            init, n_restarts = self.result_.params, 1
        result = tempered_em(
            model, train, key=key_fit, valid=valid, schedule=schedule, n_restarts=n_restarts,
            max_iter=self.max_iter, tol=self.tol, init=init, time_budget=self.time_budget, progress=self.progress,
        )
        self.result_ = result
        self.n_iter_ = result.n_iter
        self.beta_ = result.beta
        self.converged_ = result.converged
        self._n_features_out = self._n_classes()
        if isinstance(self, ClusterMixin):
            self.labels_ = self._predict_validated(X)
        return self

    # ------------------------------------------------------------------ inference on new rows
    def _posterior_validated(self, X: Any) -> np.ndarray:
        params = self.result_.params
        if self._count_data:
            if X.count_nonzero() == 0:  # rows without counts keep the class prior
                return np.tile(self._class_prior(params), (X.shape[0], 1))
            posterior = self._posterior(params, CoOccurrence.from_sparse(X), self.result_.beta)
        else:
            posterior = self._posterior(params, X, self.result_.beta)
        return np.asarray(posterior, dtype=np.float64)

    def _predict_validated(self, X: Any) -> np.ndarray:
        return np.argmax(self._posterior_validated(X), axis=1).astype(np.int64)

    def transform(self, X: Any) -> np.ndarray:
        """Class posteriors of the rows of X, shape (n_samples, n_classes); rows sum to 1.

        For count data new rows are folded in at the fitted β with the class-conditional
        distributions held fixed (H99 §2.4, §5).
        """
        check_is_fitted(self)
        return self._posterior_validated(self._validate_X(X, reset=False))

    def predict(self, X: Any) -> np.ndarray:
        """Most probable class of each row of X, shape (n_samples,)."""
        check_is_fitted(self)
        return self._predict_validated(self._validate_X(X, reset=False))

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood per observation of X (higher is better).

        Counts: Σ n log P(y|x) / Σ n with P(c|x) folded in from X itself, the negative log
        perplexity of H99 §5. Features: the mean log density of the points.
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if not self._count_data:
            return self._mean_log_density(self.result_.params, X)
        if X.count_nonzero() == 0:
            raise ValueError("X: contains no positive counts to score")
        posterior = self._posterior_validated(X)
        row_factors, col_factors = self._predictive_factors(self.result_.params, posterior)
        return _mean_conditional_log_lik(np.asarray(row_factors, np.float64), np.asarray(col_factors, np.float64), X)

    def perplexity(self, X: Any) -> float:
        """exp(-score(X)): held-out perplexity of count data (H99 §5)."""
        return float(np.exp(-self.score(X)))

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = self._count_data
        return tags


_COMMON_DOC = """schedule : {"em", "tempered", "annealing"} or schedule object, default "em"
        β schedule (see :func:`make_schedule`). "tempered" holds out ``valid_fraction`` of the
        training data to choose β (H99 §4).
    valid_fraction : float in (0, 1), default 0.1
        Share of the tokens (counts) or rows (features) held out when the schedule needs
        validation data.
    n_restarts : int, default 1
        Random initialisations run in parallel; the best is kept.
    max_iter : int, default 200
    tol : float, default 1e-6
        Relative change of the training log-likelihood that counts as convergence.
    random_state : None, int, numpy generator or JAX key
        Seed of the initialisation and of the validation split (see :func:`jax_key`).
    warm_start : bool, default False
        Continue from the parameters of the previous ``fit`` (same data shape) instead of a
        random start.
    time_budget : float, optional
        Seconds after which fitting stops and keeps the iterations done so far.
    progress : bool, default False
        Show a progress bar over EM iterations.
"""


def _document(estimator: type) -> type:
    """Insert the parameters shared by every estimator into the class docstring."""
    estimator.__doc__ = estimator.__doc__.replace("COMMON_PARAMETERS\n", _COMMON_DOC + "\n")
    return estimator


@_document
class AspectEstimator(EMEstimator):
    """The aspect model (PLSA, H99 §2.1) as a scikit-learn transformer.

    ``transform`` gives P(c|x) of each row (mixed membership); ``predict`` its most probable
    aspect; ``components_`` holds P(y|c) as an (n_classes, n_features) array.

    Parameters
    ----------
    n_classes : int, default 8
        Number of aspects K.
    update : {"simultaneous", "alternating"}, default "simultaneous"
        EM variant (see :class:`zoo.dyadic.aspect.Aspect`).
    fold_in_iter : int, default 50
        EM iterations of the fold-in of new rows.
    backend : {"auto", "xla", "numba"}, default "auto"
    COMMON_PARAMETERS
    Attributes
    ----------
    result_ : EMResult
    components_ : (n_classes, n_features) array — P(y|c)
    n_iter_, beta_, converged_ : iterations run, chosen β, whether EM stopped by itself

    Examples
    --------
    >>> import numpy as np
    >>> counts = np.array([[4, 1, 0], [3, 0, 1], [0, 5, 2], [1, 4, 3]])
    >>> estimator = AspectEstimator(n_classes=2, max_iter=50, random_state=0).fit(counts)
    >>> estimator.transform(counts).shape
    (4, 2)
    """

    def __init__(self, n_classes=8, *, update="simultaneous", fold_in_iter=50, backend="auto", schedule="em",
                 valid_fraction=0.1, n_restarts=1, max_iter=200, tol=1e-6, random_state=None, warm_start=False,
                 time_budget=None, progress=False):
        self.n_classes = n_classes
        self.update = update
        self.fold_in_iter = fold_in_iter
        self.backend = backend
        self.schedule = schedule
        self.valid_fraction = valid_fraction
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.warm_start = warm_start
        self.time_budget = time_budget
        self.progress = progress

    def _check_model_params(self) -> None:
        check_int("fold_in_iter", self.fold_in_iter, minimum=1)
        Aspect(self.n_classes, update=self.update, backend=self.backend)

    def _check_data(self, data: Any, n_samples: int) -> None:
        """The aspect model needs no more rows than classes (aspects are shared by tokens)."""

    def _build_model(self) -> Aspect:
        return Aspect(self.n_classes, update=self.update, backend=self.backend)

    def _class_prior(self, params: Any) -> np.ndarray:
        return np.asarray(params.class_prior, np.float64)

    def _posterior(self, params: Any, data: CoOccurrence, beta: float) -> Any:
        return self.result_.model.fold_in(params, data, n_iter=self.fold_in_iter, beta=beta)

    def _predictive_factors(self, params: Any, posterior: np.ndarray) -> tuple[Any, Any]:
        return posterior, params.col_given_class  # P(y|x) = Σ_c P(c|x) P(y|c) (H99 §2.4)

    @property
    def components_(self) -> np.ndarray:
        """P(y|c), shape (n_classes, n_features)."""
        check_is_fitted(self)
        return np.asarray(self.result_.params.col_given_class, np.float64).T


@_document
class GaussianMixtureEstimator(ClusterMixin, EMEstimator):
    """Mixture of diagonal Gaussians fitted by tempered EM, as a scikit-learn clusterer.

    Parameters
    ----------
    n_classes : int, default 8
    variance_floor : float, default 1e-6
        Lower bound on class variances relative to the data's variance.
    COMMON_PARAMETERS
    Attributes
    ----------
    result_ : EMResult
    labels_ : (n_samples,) int array — most probable class of each training point
    weights_, means_, scales_ : fitted mixture weights (K,), means and standard deviations (K, D)
    n_iter_, beta_, converged_

    Examples
    --------
    >>> import numpy as np
    >>> points = np.concatenate([np.full((10, 2), -3.0), np.full((10, 2), 3.0)])
    >>> points += np.random.default_rng(0).normal(size=points.shape) * 0.1
    >>> estimator = GaussianMixtureEstimator(n_classes=2, random_state=0).fit(points)
    >>> sorted(np.bincount(estimator.labels_).tolist())
    [10, 10]
    """

    _count_data = False

    def __init__(self, n_classes=8, *, variance_floor=1e-6, schedule="em", valid_fraction=0.1, n_restarts=1,
                 max_iter=200, tol=1e-6, random_state=None, warm_start=False, time_budget=None, progress=False):
        self.n_classes = n_classes
        self.variance_floor = variance_floor
        self.schedule = schedule
        self.valid_fraction = valid_fraction
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.warm_start = warm_start
        self.time_budget = time_budget
        self.progress = progress

    def _check_model_params(self) -> None:
        GaussianMixture(self.n_classes, variance_floor=self.variance_floor)

    def _check_data(self, data: Any, n_samples: int) -> None:
        """Enough training points for the classes, and no constant feature: the variance floor is
        relative to each feature's spread, and a feature without spread makes the fit NaN."""
        super()._check_data(data, n_samples)
        constant = np.flatnonzero(np.ptp(data, axis=0) == 0)
        if constant.size:
            raise ValueError(f"X: feature(s) {constant.tolist()} are constant in the training data; "
                             "remove them (the variance floor is relative to each feature's spread)")

    def _build_model(self) -> GaussianMixture:
        return GaussianMixture(self.n_classes, variance_floor=self.variance_floor)

    @staticmethod
    def _log_joint(params: Any, points: np.ndarray) -> np.ndarray:
        """log w_c + log N(x_n; μ_c, diag σ_c²), shape (n_points, K), in float64."""
        locs = np.asarray(params.locs, np.float64)
        scales = np.asarray(params.scales, np.float64)
        standardised = (points[:, None, :] - locs[None]) / scales[None]
        log_density = -0.5 * np.sum(standardised**2 + np.log(2.0 * np.pi * scales[None] ** 2), axis=2)
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(params.weights, np.float64))[None, :] + log_density

    def _posterior(self, params: Any, points: np.ndarray, beta: float) -> np.ndarray:
        """Responsibilities P(c|x_n) at β = 1."""
        log_joint = self._log_joint(params, points)
        log_joint -= log_joint.max(axis=1, keepdims=True)
        posterior = np.exp(log_joint)
        return posterior / posterior.sum(axis=1, keepdims=True)

    def _mean_log_density(self, params: Any, points: np.ndarray) -> float:
        log_joint = self._log_joint(params, points)
        peak = log_joint.max(axis=1, keepdims=True)
        return float(np.mean(peak[:, 0] + np.log(np.exp(log_joint - peak).sum(axis=1))))

    def _class_prior(self, params: Any) -> np.ndarray:
        return np.asarray(params.weights, np.float64)

    @property
    def weights_(self) -> np.ndarray:
        check_is_fitted(self)
        return np.asarray(self.result_.params.weights, np.float64)

    @property
    def means_(self) -> np.ndarray:
        check_is_fitted(self)
        return np.asarray(self.result_.params.locs, np.float64)

    @property
    def scales_(self) -> np.ndarray:
        check_is_fitted(self)
        return np.asarray(self.result_.params.scales, np.float64)


#: Estimators by the model names of ``python -m zoo fit MODEL``.
ESTIMATORS: dict[str, type[EMEstimator]] = {
    "aspect": AspectEstimator,
    "gaussian-mixture": GaussianMixtureEstimator,
}


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """scikit-learn checks that do not apply to ``estimator``, with the reason.

    For ``sklearn.utils.estimator_checks.parametrize_with_checks(...,
    expected_failed_checks=expected_failed_checks)``.
    """
    failures: dict[str, str] = {}
    if isinstance(estimator, ClusterMixin) and getattr(estimator, "_count_data", False):
        failures["check_clustering"] = (
            "check_clustering fits standardised Gaussian blobs with negative values, which are not "
            "counts; the count models reject them (tags.input_tags.positive_only)"
        )
    return failures
