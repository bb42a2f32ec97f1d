"""The shared machinery of the scikit-learn estimators: the EM estimator base class, the
schedule names, the PRNG key of a ``random_state`` and the shared parameter documentation."""

from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar

import jax
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from inference.em import EMResult, tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM, validated_schedule
from inference._validation import check_int, check_key, check_number_dtype, check_real, user_stacklevel
from zoo.data import CoOccurrence, as_numpy_rng
from zoo.dyadic.predictive import HeldOut, heldout_from_factors

__all__ = ["EMEstimator", "SCHEDULES", "completion_scorer", "jax_key", "make_schedule"]


#: Schedule names accepted by the ``schedule`` hyperparameter (and ``python -m zoo fit``).
SCHEDULES = ("auto", "em", "tempered", "annealing")


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


class EmptyClassesWarning(UserWarning):
    """A clustering estimator's fit left some of its classes without any row of the fitted data."""


def completion_scorer(estimator: Any, X: Any, y: Any = None) -> float:
    """A ``scoring=`` for scikit-learn's model selection of a count estimator:
    ``estimator.completion_score(X)`` (:meth:`EMEstimator.completion_score`), which does not reward
    more classes as ``score`` does. ``GridSearchCV(AspectEstimator(floor=1e-6), {"n_classes": [2, 4,
    8]}, scoring=completion_scorer)``; a ``Pipeline`` (``make_pipeline(CountVectorizer(),
    AspectEstimator(floor=1e-6))``) is scored by its last step on ``X`` transformed by the others.

    Give the estimator ``floor=`` or ``prior_count > 0``: without them a held-out word that the fit
    gave probability 0 scores -inf, on most corpora in every fold of every candidate, and
    ``GridSearchCV`` then keeps the first candidate (a ``ZeroProbabilityWarning`` says so per fold).
    """
    while hasattr(estimator, "steps") and hasattr(estimator, "__getitem__"):  # a scikit-learn Pipeline
        if len(estimator.steps) > 1:
            X = estimator[:-1].transform(X)
        estimator = estimator[-1]
    if not callable(getattr(estimator, "completion_score", None)):
        raise TypeError(f"estimator: completion_scorer scores a zoo count estimator (AspectEstimator, "
                        f"OneSidedEstimator, ...) or a Pipeline ending in one, not {type(estimator).__name__}")
    return estimator.completion_score(X)


def make_schedule(schedule: Any, model: Any = None) -> Any:
    """The schedule object for a ``schedule`` hyperparameter.

    ``"auto"`` is what :func:`inference.em.tempered_em` runs with validation data by default: the
    ``model``'s own ``default_schedule()`` where it has one (the one-sided and cluster-abstraction
    models anneal up from β = 0.01, :func:`inference.schedules.anneal_up`), else
    :class:`TemperedEM`; it always holds out validation data. ``"em"`` is :class:`FixedBeta`
    (β = 1), ``"tempered"`` is :class:`TemperedEM` (β chosen on validation data, H99 §4) and ``"annealing"`` is
    :class:`DeterministicAnnealing`; schedule objects pass through.
    """
    if isinstance(schedule, (FixedBeta, TemperedEM, DeterministicAnnealing)):
        return schedule
    if schedule == "auto" and isinstance(schedule, str):
        return validated_schedule(model)
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


def _validate_features(estimator: BaseEstimator, X: Any, *, reset: bool) -> Any:
    """X validated by scikit-learn's rules as float64 (a sparse matrix stays sparse), with messages
    that start with ``X:``; ``reset`` as for ``validate_data``."""
    if _text_dtype(X):
        raise TypeError(f"X: expected numbers, got text (dtype {np.asarray(X).dtype})")
    check_number_dtype("X", X)
    try:
        return validate_data(estimator, X, reset=reset, accept_sparse=("csr", "csc", "coo"), dtype=np.float64)
    except ValueError as error:
        raise ValueError(f"X: {error}") from None
    except TypeError as error:
        raise TypeError(f"X: {error}") from None


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
        schedule = make_schedule(self.schedule, self._build_model())
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
        X = _validate_features(self, X, reset=reset)
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

    def _validated(self, schedule: Any) -> bool:
        """Whether the fit holds out validation data: the schedule needs it, or it is ``"auto"``'s."""
        return schedule.needs_validation or (isinstance(self.schedule, str) and self.schedule == "auto")

    def _train_valid(self, data: Any, schedule: Any, key: Any) -> tuple[Any, Any]:
        """Split off ``valid_fraction`` of the tokens (counts) or rows (features) when needed."""
        if not self._validated(schedule):
            return data, None
        rng = as_numpy_rng(key)
        fraction = float(self.valid_fraction)
        if self._count_data:
            with warnings.catch_warnings():  # an empty part is refused just below, naming valid_fraction
                warnings.filterwarnings("ignore", "fractions: part", UserWarning)
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
            self._warn_if_classes_empty()
        if result.stopped_by == "max_iter":  # as scikit-learn's own iterative estimators say
            warnings.warn(f"{type(self).__name__}: EM stopped at max_iter={self.max_iter} before converging "
                          f"(tol={self.tol}); raise max_iter, or the fit is what {self.max_iter} iterations "
                          "gave", ConvergenceWarning, stacklevel=user_stacklevel())
        elif result.stopped_by in ("time_budget", "interrupted"):  # the finished iterations are kept: say so
            why = f"time_budget={self.time_budget} s ran out" if result.stopped_by == "time_budget" else "Ctrl-C"
            warnings.warn(f"{type(self).__name__}: EM stopped after {result.n_iter} iterations ({why}) before "
                          f"converging (tol={self.tol}); the fit is those iterations' (warm_start=True and fit "
                          "again to continue)", ConvergenceWarning, stacklevel=user_stacklevel())
        return self

    def _warn_if_classes_empty(self) -> None:
        """An :class:`EmptyClassesWarning` when fewer classes than ``n_classes`` hold a row of the
        fitted data: EM from a poor start can leave classes empty (the two-sided model's three
        topics in one class in one of five seeds), and the fit converges there in silence."""
        held = np.unique(np.asarray(self.labels_)).size
        wanted = int(self._n_features_out)  # the classes labels_ chooses among
        if held < wanted:
            warnings.warn(f"{type(self).__name__}: {wanted - held} of the {wanted} classes "
                          f"{'holds' if wanted - held == 1 else 'hold'} no row of the "
                          "fitted data (every row is most probable under the others); more restarts "
                          f"(n_restarts, now {self.n_restarts}; the best is kept) may find a fit that uses them, or "
                          "fewer classes suffice", EmptyClassesWarning, stacklevel=user_stacklevel())

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
        :meth:`heldout_evaluation`). Features: the mean log density of the points. For counts it
        rewards more classes (the fold-in sees the tokens it scores): to choose the number of
        classes, score by :meth:`completion_score`.
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if not self._count_data:
            return self._mean_log_density(self.result_.params, X)
        evaluation = self._heldout(X)
        return evaluation.log_lik / evaluation.n_tokens

    def completion_score(self, X: Any, y: Any = None, *, fraction: float = 0.5, rng: Any = 0) -> float:
        """Mean log-likelihood per held-out token of the counts X by *document completion*: each
        row's tokens are split at random (``fraction`` of them observed, ``rng`` seeding the split,
        :meth:`zoo.data.CoOccurrence.split_tokens`), P(c|x) is folded in from the observed part and
        the other part is scored, Σ n log P(y|x) / Σ n (``floor`` as in :meth:`score`).

        :meth:`score` (H99 §5) folds P(c|x) in from the very tokens it scores, so it keeps rising
        with the number of classes (more classes fit a row's own tokens better) and a grid search
        on it picks the largest K; scoring tokens the fold-in did not see does not reward that.
        Choose K with it: ``GridSearchCV(estimator, {"n_classes": [...]}, scoring=completion_scorer)``
        (:func:`zoo.sklearn.completion_scorer`).
        """
        check_is_fitted(self)
        if not self._count_data:
            raise TypeError(f"X: {type(self).__name__} scores feature vectors; completion_score is for counts")
        fraction = check_real("fraction", fraction, low=0.0, high=1.0, low_open=True, high_open=True)
        X = self._validate_X(X, reset=False)
        if X.count_nonzero() == 0:
            raise ValueError("X: contains no positive counts to score")
        observed, held_out = CoOccurrence.from_sparse(X).split_tokens([fraction, 1.0 - fraction], rng=rng)
        if observed is None or held_out is None:
            raise ValueError(f"X: too few tokens to split into an observed and a held-out part ({X.sum():g} in all)")
        evaluation = self._heldout(observed.to_sparse(), scored=held_out)
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

    def _heldout(self, X: sp.csr_matrix, scored: CoOccurrence | None = None) -> HeldOut:
        """The tokens of ``scored`` (default: X's own) scored with P(c|x) folded in from the rows of X."""
        if X.count_nonzero() == 0:
            raise ValueError("X: contains no positive counts to score")
        row_factors, col_factors = self._heldout_factors(X)
        scored = CoOccurrence.from_sparse(X) if scored is None else scored
        return heldout_from_factors(row_factors, col_factors, scored, floor=self.floor,
                                    model_name=type(self).__name__,
                                    set_floor="set the estimator's floor (estimator.set_params(floor=1e-6))",
                                    map_em="the estimator's prior_count > 0")

    def _heldout_factors(self, X: sp.csr_matrix) -> tuple[Any, Any]:
        """(R, C) with P(y_k|x_i) = Σ_c R_ic C_kc for the rows of X folded in."""
        return self._predictive_factors(self.result_.params, self._posterior_validated(X))

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = self._count_data
        return tags


_COMMON_DOC = """schedule : {"auto", "em", "tempered", "annealing"} or schedule object, default "em"
        β schedule (see :func:`make_schedule`). "tempered" holds out ``valid_fraction`` of the
        training data to choose β (H99 §4); "auto" holds it out too and runs the model's own
        schedule (annealing up for the one-sided and cluster-abstraction models, tempered EM for
        the others), as ``python -m zoo fit`` does by default.
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


def _init_count_estimator(estimator: EMEstimator, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)
