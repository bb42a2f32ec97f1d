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

Tokens of probability 0 (count data). A maximum-likelihood fit can give a token of X
P(y|x) = 0; the count estimators do not hide it under a floor, as :func:`zoo.dyadic.predictive.heldout_evaluation`
does not: ``score`` is then -inf and ``perplexity`` inf, with a
:class:`zoo.dyadic.predictive.ZeroProbabilityWarning` saying how many tokens, unless the
hyperparameter ``floor`` scores every token at max(P(y|x), floor) (also in the fit's validation,
as ``tempered_em(..., floor=)``) or ``prior_count > 0`` fits by MAP-EM so that no prediction is 0.
``heldout_evaluation(X)`` returns the count with the log-likelihood.

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
from functools import partial
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from inference.em import EMResult, tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM
from inference.segments import segment_sum
from inference._validation import check_choice, check_int, check_key, check_number_dtype, check_real
from zoo.data import CoOccurrence, as_numpy_rng
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.cluster_abstraction import CAMParams, ClusterAbstraction
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.predictive import HeldOut, heldout_from_factors
from zoo.dyadic.two_sided import TwoSided
from zoo.finite_mixture import GaussianMixture

__all__ = [
    "EMEstimator",
    "AspectEstimator",
    "OneSidedEstimator",
    "TwoSidedEstimator",
    "ClusterAbstractionEstimator",
    "GaussianMixtureEstimator",
    "DPMixtureEstimator",
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
        return check_key("random_state", random_state)
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
        if self._count_data:
            check_real("prior_count", self.prior_count, low=0.0)
            if self.floor is not None:
                check_real("floor", self.floor, low=0.0, high=1.0, low_open=True, high_open=True)
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
        check_number_dtype("X", X)
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
        # The fit's validation scores tokens of probability 0 as score() does: at ``floor``, or not at all.
        floor = {"floor": self.floor} if self._count_data and valid is not None and self.floor is not None else {}
        result = tempered_em(
            model, train, key=key_fit, valid=valid, schedule=schedule, n_restarts=n_restarts,
            max_iter=self.max_iter, tol=self.tol, init=init, time_budget=self.time_budget, progress=self.progress,
            **floor,
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
        perplexity of H99 §5; -inf when tokens of X have P(y|x) = 0 and ``floor`` is None (a
        :class:`~zoo.dyadic.predictive.ZeroProbabilityWarning` says how many; see
        :meth:`heldout_evaluation`). Features: the mean log density of the points.
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if not self._count_data:
            return self._mean_log_density(self.result_.params, X)
        evaluation = self._heldout(X)
        return evaluation.log_lik / evaluation.n_tokens

    def heldout_evaluation(self, X: Any) -> HeldOut:
        """Σ n log P(y|x) of the counts X (rows folded in), the number of tokens and of tokens of
        probability 0, in float64 (:func:`zoo.dyadic.predictive.heldout_evaluation`): -inf with
        such tokens unless the ``floor`` hyperparameter scores every token at max(P(y|x), floor)."""
        check_is_fitted(self)
        if not self._count_data:
            raise TypeError(f"X: {type(self).__name__} scores feature vectors; heldout_evaluation is for counts")
        return self._heldout(self._validate_X(X, reset=False))

    def perplexity(self, X: Any) -> float:
        """exp(-score(X)): held-out perplexity of count data (H99 §5); inf when tokens of X have
        probability 0 and ``floor`` is None."""
        return float(np.exp(-self.score(X)))

    def _heldout(self, X: sp.csr_matrix) -> HeldOut:
        if X.count_nonzero() == 0:
            raise ValueError("X: contains no positive counts to score")
        row_factors, col_factors = self._heldout_factors(X)
        return heldout_from_factors(row_factors, col_factors, CoOccurrence.from_sparse(X), floor=self.floor,
                                    model_name=type(self).__name__, stacklevel=5)

    def _heldout_factors(self, X: sp.csr_matrix) -> tuple[Any, Any]:
        """(R, C) with P(y_k|x_i) = Σ_c R_ic C_kc for the rows of X folded in."""
        return self._predictive_factors(self.result_.params, self._posterior_validated(X))

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

_COUNT_DOC = """prior_count : float ≥ 0, default 0
        MAP-EM pseudo-counts added to every expected count in the M-step (the model's
        ``prior_count``): with c > 0 no prediction P(y|x) is 0. 0 is maximum-likelihood EM (H99).
    floor : float in (0, 1), optional
        Score every token at max(P(y|x), floor) in ``score``, ``perplexity`` and the fit's
        validation. None (the default): tokens of probability 0 are not hidden (score -inf,
        perplexity inf, with a warning that counts them).
"""


def _document(estimator: type) -> type:
    """Insert the parameters shared by every estimator into the class docstring."""
    estimator.__doc__ = (estimator.__doc__.replace("COMMON_PARAMETERS\n", _COMMON_DOC + "\n")
                         .replace("COUNT_PARAMETERS\n", _COUNT_DOC))
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
    COUNT_PARAMETERS
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

    def __init__(self, n_classes=8, *, update="simultaneous", fold_in_iter=50, backend="auto", prior_count=0.0,
                 floor=None, schedule="em", valid_fraction=0.1, n_restarts=1, max_iter=200, tol=1e-6,
                 random_state=None, warm_start=False, time_budget=None, progress=False):
        self.n_classes = n_classes
        self.update = update
        self.fold_in_iter = fold_in_iter
        self.backend = backend
        self.prior_count = prior_count
        self.floor = floor
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
        self._build_model()

    def _check_data(self, data: Any, n_samples: int) -> None:
        """The aspect model needs no more rows than classes (aspects are shared by tokens)."""

    def _build_model(self) -> Aspect:
        return Aspect(self.n_classes, update=self.update, backend=self.backend, prior_count=self.prior_count)

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


def _init_count_estimator(estimator: EMEstimator, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


@_document
class OneSidedEstimator(ClusterMixin, EMEstimator):
    """One-sided clustering of the rows (ACM, H99 §2.2) as a scikit-learn clusterer.

    Every row belongs to one cluster; ``transform`` gives the cluster posteriors
    P{c(x) = c} ∝ P(c) ∏_k P(y_k|c)^{β n(x, y_k)} of new rows (one E-step with P(c), P(y|c)
    fixed) and ``components_`` holds P(y|c) as an (n_classes, n_features) array.

    Parameters
    ----------
    n_classes : int, default 8
        Number of row clusters K (at most the number of rows).
    backend : {"auto", "xla", "numba"}, default "auto"
    COUNT_PARAMETERS
    COMMON_PARAMETERS
    Attributes
    ----------
    result_ : EMResult
    labels_ : (n_samples,) int array — most probable cluster of each training row
    components_ : (n_classes, n_features) array — P(y|c)
    n_iter_, beta_, converged_
    """

    def __init__(self, n_classes=8, *, backend="auto", prior_count=0.0, floor=None, schedule="em", valid_fraction=0.1,
                 n_restarts=1, max_iter=200, tol=1e-6, random_state=None, warm_start=False, time_budget=None,
                 progress=False):
        _init_count_estimator(self, locals())

    def _check_model_params(self) -> None:
        self._build_model()

    def _build_model(self) -> OneSided:
        return OneSided(self.n_classes, side="rows", backend=self.backend, prior_count=self.prior_count)

    def _class_prior(self, params: Any) -> np.ndarray:
        return np.asarray(params.class_prior, np.float64)

    def _posterior(self, params: Any, data: CoOccurrence, beta: float) -> Any:
        return self.result_.model.assign(params, data, beta=beta)

    def _predictive_factors(self, params: Any, posterior: np.ndarray) -> tuple[Any, Any]:
        return posterior, params.feature_given_class  # P(y|x) = Σ_c P{c(x) = c} P(y|c) (H99 §2.4)

    @property
    def components_(self) -> np.ndarray:
        """P(y|c), shape (n_classes, n_features)."""
        check_is_fitted(self)
        return np.asarray(self.result_.params.feature_given_class, np.float64).T


@_document
class TwoSidedEstimator(ClusterMixin, EMEstimator):
    """Two-sided clustering (SCM, H99 §2.3) of rows and columns as a scikit-learn clusterer.

    Rows are clustered into ``n_classes`` and columns into ``n_col_classes`` clusters;
    ``transform`` gives the row-cluster posteriors of new rows by H99 eq. 10 with the fitted
    column posteriors and associations c_νμ held fixed.

    Parameters
    ----------
    n_classes : int, default 8
        Number of row clusters K_x.
    n_col_classes : int, optional
        Number of column clusters K_y (default K_x).
    backend : {"auto", "xla", "numba"}, default "auto"
    COUNT_PARAMETERS
    COMMON_PARAMETERS
    Attributes
    ----------
    result_ : EMResult
    labels_ : (n_samples,) int array — most probable row cluster of each training row
    column_labels_ : (n_features,) int array — most probable cluster of each column
    n_iter_, beta_, converged_
    """

    def __init__(self, n_classes=8, *, n_col_classes=None, backend="auto", prior_count=0.0, floor=None, schedule="em",
                 valid_fraction=0.1, n_restarts=1, max_iter=200, tol=1e-6, random_state=None, warm_start=False,
                 time_budget=None, progress=False):
        _init_count_estimator(self, locals())

    def _check_model_params(self) -> None:
        # The estimator's own name for the row clusters, not TwoSided's n_row_classes.
        check_int("n_classes", self.n_classes, minimum=1)
        self._build_model()

    def _build_model(self) -> TwoSided:
        return TwoSided(self.n_classes, self.n_col_classes, backend=self.backend, prior_count=self.prior_count)

    def _check_data(self, data: Any, n_samples: int) -> None:
        super()._check_data(data, n_samples)
        n_col_classes = self._build_model().n_col_classes
        if n_col_classes > data.n_cols:
            raise ValueError(f"X: {data.n_cols} feature(s) for n_col_classes={n_col_classes}; every column "
                             "cluster needs a column to start from")

    def _class_prior(self, params: Any) -> np.ndarray:
        return np.asarray(params.row_class_prior, np.float64)

    def _posterior(self, params: Any, data: CoOccurrence, beta: float) -> np.ndarray:
        """H99 eq. 10: P{c(x) = ν} ∝ P(ν) exp[β Σ_k n(x, y_k) Σ_μ P{c(y_k) = μ} log c_νμ]."""
        tiny = np.finfo(np.asarray(params.association).dtype).tiny  # the model's floor under log c
        log_ratio = np.log(np.maximum(np.asarray(params.association_ratio(), np.float64), tiny))
        row_col_counts = data.to_sparse() @ np.asarray(params.col_posterior, np.float64)  # (n, K_y)
        with np.errstate(divide="ignore"):
            log_prior = np.log(np.asarray(params.row_class_prior, np.float64))
        scores = log_prior[None, :] + beta * (row_col_counts @ log_ratio.T)
        scores -= scores.max(axis=1, keepdims=True)
        posterior = np.exp(scores)
        return posterior / posterior.sum(axis=1, keepdims=True)

    def _predictive_factors(self, params: Any, posterior: np.ndarray) -> tuple[Any, Any]:
        """R = Σ_ν P{c(x) = ν} P(μ|ν), C = P(y|μ) (H99 §2.4), as in TwoSided.predictive_factors."""
        association = np.asarray(params.association, np.float64)
        row_mass = association.sum(axis=1, keepdims=True)
        col_given_row_class = np.where(row_mass > 0, association / np.where(row_mass > 0, row_mass, 1.0),
                                       association.sum(axis=0)[None, :])
        _, col_factors = self.result_.model.predictive_factors(params)
        return posterior @ col_given_row_class, col_factors

    @property
    def column_labels_(self) -> np.ndarray:
        """Most probable cluster of every column, shape (n_features,)."""
        check_is_fitted(self)
        return np.asarray(self.result_.params.col_assignments(), np.int64)


@partial(jax.jit, static_argnames=("model", "n_iter"))
def _fold_in_rows(model: ClusterAbstraction, params: CAMParams, arrays: Any, beta: Any, n_iter: int) -> CAMParams:
    """EM over the row parameters of new rows (level weights, cluster posteriors) with the cluster
    prior P(c) and the aspects P(y|a) held fixed: the fold-in of H99 §2.4 for the CAM."""
    def step(current, _):
        updated, _ = model.em_step(current, arrays, beta)
        return current._replace(level_weights=updated.level_weights, cluster_posterior=updated.cluster_posterior), None

    folded, _ = jax.lax.scan(step, params, None, length=n_iter)
    return folded


@_document
class ClusterAbstractionEstimator(ClusterMixin, EMEstimator):
    """The cluster-abstraction model (CAM, H99 §3) on a complete tree, as a scikit-learn clusterer.

    Rows are clustered into the ``branching ** depth`` leaves of a tree whose every node carries
    an aspect P(y|a); ``transform`` gives the leaf posteriors of new rows, folded in by EM over
    their level weights P(a|c, x) with P(c) and P(y|a) fixed.

    Parameters
    ----------
    depth : int, default 2
        Levels below the root.
    branching : int, default 2
        Children per inner node.
    fold_in_iter : int, default 50
        EM iterations of the fold-in of new rows.
    backend : {"auto", "xla", "numba"}, default "auto"
    COUNT_PARAMETERS
    COMMON_PARAMETERS
    Attributes
    ----------
    result_ : EMResult
    labels_ : (n_samples,) int array — most probable leaf of each training row
    n_iter_, beta_, converged_
    """

    def __init__(self, depth=2, *, branching=2, fold_in_iter=50, backend="auto", prior_count=0.0, floor=None,
                 schedule="em", valid_fraction=0.1, n_restarts=1, max_iter=200, tol=1e-6, random_state=None,
                 warm_start=False, time_budget=None, progress=False):
        _init_count_estimator(self, locals())

    @classmethod
    def _classes_argument(cls, n_classes: int) -> dict[str, Any]:
        """K leaves of a binary tree: depth log2 K."""
        if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or n_classes < 2 \
                or n_classes & (n_classes - 1):
            raise ValueError(f"n_classes: the cluster-abstraction model has 2 ** depth leaves; {n_classes!r} is not "
                             "a power of 2 of at least 2")
        return {"depth": int(n_classes).bit_length() - 1}

    def _check_model_params(self) -> None:
        check_int("fold_in_iter", self.fold_in_iter, minimum=1)
        self._build_model()

    def _build_model(self) -> ClusterAbstraction:
        return ClusterAbstraction(depth=self.depth, branching=self.branching, backend=self.backend,
                                  prior_count=self.prior_count)

    def _n_classes(self) -> int:
        return self._build_model().n_classes

    def _class_prior(self, params: Any) -> np.ndarray:
        return np.asarray(params.cluster_prior, np.float64)

    def _folded(self, params: CAMParams, data: CoOccurrence, beta: float) -> CAMParams:
        model = self.result_.model
        arrays = data.to_arrays()
        dtype = arrays.counts.dtype
        mask = jnp.asarray(model.tree.path_mask, dtype)
        start = CAMParams(
            cluster_prior=params.cluster_prior.astype(dtype),
            col_given_node=params.col_given_node.astype(dtype),
            level_weights=jnp.broadcast_to(mask / mask.sum(axis=1, keepdims=True), (data.n_rows,) + mask.shape),
            row_marginal=arrays.row_sums / arrays.row_sums.sum(),
            cluster_posterior=jnp.full((data.n_rows, model.n_classes), 1.0 / model.n_classes, dtype),
        )
        return _fold_in_rows(model, start, arrays, jnp.asarray(beta, dtype), self.fold_in_iter)

    def _posterior(self, params: CAMParams, data: CoOccurrence, beta: float) -> Any:
        return self._folded(params, data, beta).cluster_posterior

    def _heldout_factors(self, X: sp.csr_matrix) -> tuple[Any, Any]:
        """P(y|x) = Σ_ν P(a_ν|x) P(y|a_ν) with X folded in (H99 §3)."""
        params = self.result_.params
        folded = self._folded(params, CoOccurrence.from_sparse(X), self.result_.beta)
        return self.result_.model.node_given_row(folded), params.col_given_node


# ----------------------------------------------------------------------------- the DP mixture
#: Component families of :class:`DPMixtureEstimator` (built-in conjugate priors, default settings).
DP_FAMILIES = ("normal-gamma", "beta-bernoulli")


@partial(jax.jit, static_argnames=("family", "n_clusters"))
def _predictive_log_weights(family: Any, train: Any, labels: Any, points: Any, log_alpha: Any, n_clusters: int) -> Any:
    """log n_k + log p(x | cluster k) for the K clusters of a partition, and log α + log p(x) for a
    new cluster (the Chinese-restaurant predictive, DM05 §3), shape (n_points, K + 1)."""
    point_stats = jax.vmap(family.point_stats)(train)
    # Segment K receives no point: its statistics are those of an empty (new) cluster.
    cluster_stats = jax.tree_util.tree_map(
        lambda leaf: segment_sum(leaf, labels, num_segments=n_clusters + 1), point_stats)
    sizes = jnp.bincount(labels, length=n_clusters + 1).astype(train.dtype)
    log_prior = jnp.where(jnp.arange(n_clusters + 1) < n_clusters, jnp.log(jnp.maximum(sizes, 1.0)), log_alpha)

    def per_point(x):
        return jax.vmap(lambda stats: family.log_predictive(stats, x))(cluster_stats)

    return log_prior[None, :] + jax.vmap(per_point)(points)


class DPMixtureEstimator(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """Dirichlet-process mixture (the CDP of DM05) fitted by Gibbs sampling, as a scikit-learn clusterer.

    ``fit`` runs :class:`zoo.dirichlet.mixture.DPMixture` (Neal 2000 Algorithm 8, 2 or 3 on
    ``n_chains`` chains) and keeps the posterior point-estimate partition as ``labels_``. New points
    are scored with the Chinese-restaurant predictive given that partition (DM05 §3): cluster k
    with weight n_k p(x | points of k), a new cluster with weight α p(x). ``transform`` gives
    these probabilities, shape (n_samples, ``n_clusters_`` + 1), the last column being a new
    cluster; ``score`` the mean log predictive density. The number of classes is not fixed: it is
    inferred. Features should be standardised for the default Normal–Gamma prior (mean 0, unit
    scales), e.g. with ``StandardScaler`` in a pipeline.

    Parameters
    ----------
    family : {"normal-gamma", "beta-bernoulli"}, default "normal-gamma"
        Diagonal Gaussian components (DM05 §5) or independent Bernoulli features.
    alpha : float, default 1.0
        Concentration (the initial value when ``alpha_prior`` is given).
    alpha_prior : (shape, rate) or None, default (1.0, 1.0)
        Gamma prior on α, resampled every sweep (DM05 App. B); None keeps α fixed.
    algorithm : {"auxiliary", "conjugate", "collapsed"}, default "collapsed"
        Neal (2000) Algorithm 8, 2 or 3.
    n_chains, n_warmup, n_draws : int, default 2, 100, 200
    max_clusters : int, default 32
        Initial capacity of the chains (grown when needed).
    loss : {"vi", "binder"}, default "vi"
        Loss of the point-estimate partition.
    random_state : None, int, numpy generator or JAX key
    progress : bool, default False

    Attributes
    ----------
    fit_ : DPMixtureFit — the draws, with ``idata`` (ArviZ) and diagnostics
    labels_ : (n_samples,) int array — the point-estimate partition of the training points
    n_clusters_ : int
    alpha_ : float — posterior mean of α (or the fixed α)
    """

    def __init__(self, family="normal-gamma", *, alpha=1.0, alpha_prior=(1.0, 1.0), algorithm="collapsed", n_chains=2,
                 n_warmup=100, n_draws=200, max_clusters=32, loss="vi", random_state=None, progress=False):
        self.family = family
        self.alpha = alpha
        self.alpha_prior = alpha_prior
        self.algorithm = algorithm
        self.n_chains = n_chains
        self.n_warmup = n_warmup
        self.n_draws = n_draws
        self.max_clusters = max_clusters
        self.loss = loss
        self.random_state = random_state
        self.progress = progress

    def _component_family(self, n_features: int) -> Any:
        from zoo.dirichlet.families import beta_bernoulli, normal_gamma

        return normal_gamma(n_features) if self.family == "normal-gamma" else beta_bernoulli(n_features)

    def _check_params(self) -> tuple[Any, Any]:
        from inference.concentration import gamma_prior

        check_choice("family", self.family, DP_FAMILIES)
        check_real("alpha", self.alpha, low=0.0, low_open=True)
        prior = None
        if self.alpha_prior is not None:
            if not isinstance(self.alpha_prior, (tuple, list)) or len(self.alpha_prior) != 2:
                raise TypeError(f"alpha_prior: expected (shape, rate) or None, got {self.alpha_prior!r}")
            try:
                prior = gamma_prior(*self.alpha_prior)
            except (TypeError, ValueError) as error:
                raise type(error)(f"alpha_prior: {error}") from None
        check_choice("algorithm", self.algorithm, ("auxiliary", "conjugate", "collapsed"))
        for name in ("n_chains", "n_draws", "max_clusters"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("n_warmup", self.n_warmup, minimum=0)
        check_choice("loss", self.loss, ("vi", "binder"))
        _check_bool("progress", self.progress)
        return prior, jax_key(self.random_state)

    def _validate_X(self, X: Any, *, reset: bool) -> np.ndarray:
        if _text_dtype(X):
            raise TypeError(f"X: expected numbers, got text (dtype {np.asarray(X).dtype})")
        check_number_dtype("X", X)
        try:
            X = validate_data(self, X, reset=reset, accept_sparse=("csr", "csc", "coo"), dtype=np.float64)
        except ValueError as error:
            raise ValueError(f"X: {error}") from None
        except TypeError as error:
            raise TypeError(f"X: {error}") from None
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        return self._component_family(X.shape[1]).check_data("X", X)

    def fit(self, X: Any, y: Any = None) -> "DPMixtureEstimator":
        """Sample the posterior partition of the rows of X; keep the point estimate."""
        from zoo.dirichlet.mixture import DPMixture

        prior, key = self._check_params()
        X = self._validate_X(X, reset=True)
        model = DPMixture(self._component_family(X.shape[1]), alpha=self.alpha, alpha_prior=prior,
                          algorithm=self.algorithm, max_clusters=self.max_clusters)
        self.fit_ = model.fit(X, key, n_chains=self.n_chains, n_warmup=self.n_warmup, n_draws=self.n_draws,
                              progress=self.progress)
        labels = np.asarray(self.fit_.point_estimate(self.loss))
        _, labels = np.unique(labels, return_inverse=True)  # 0..K-1
        self.labels_ = labels.astype(np.int64)
        self.n_clusters_ = int(labels.max()) + 1
        self.alpha_ = float(np.mean(self.fit_.result.samples["alpha"]))
        self._train = X
        self._n_features_out = self.n_clusters_ + 1
        return self

    def _log_weights(self, X: np.ndarray) -> np.ndarray:
        family = self._component_family(self._train.shape[1])
        dtype = jnp.result_type(float)
        weights = _predictive_log_weights(family, jnp.asarray(self._train, dtype), jnp.asarray(self.labels_),
                                          jnp.asarray(X, dtype), jnp.log(jnp.asarray(self.alpha_, dtype)),
                                          self.n_clusters_)
        # A copy: np.asarray of a float64 JAX array (under x64) is a read-only view, and the
        # callers normalise the weights in place.
        return np.array(weights, np.float64)

    def transform(self, X: Any) -> np.ndarray:
        """P(x joins cluster k | partition), k = 0..K-1, and of a new cluster (last column)."""
        check_is_fitted(self)
        weights = self._log_weights(self._validate_X(X, reset=False))
        weights -= weights.max(axis=1, keepdims=True)
        probabilities = np.exp(weights)
        return probabilities / probabilities.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """Most probable cluster of each row of X; ``n_clusters_`` stands for a new cluster."""
        return np.argmax(self.transform(X), axis=1).astype(np.int64)

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log predictive density log Σ_k w_k p(x | k) / (N + α) of the rows of X."""
        check_is_fitted(self)
        weights = self._log_weights(self._validate_X(X, reset=False))
        peak = weights.max(axis=1, keepdims=True)
        log_density = peak[:, 0] + np.log(np.exp(weights - peak).sum(axis=1))
        return float(np.mean(log_density - np.log(self._train.shape[0] + self.alpha_)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


#: Estimators by the model names of ``python -m zoo fit MODEL``.
ESTIMATORS: dict[str, type[EMEstimator]] = {
    "aspect": AspectEstimator,
    "one-sided": OneSidedEstimator,
    "two-sided": TwoSidedEstimator,
    "cam": ClusterAbstractionEstimator,
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
