"""scikit-learn estimators of the dyadic models: aspect, one-sided, two-sided, cluster-abstraction."""

from __future__ import annotations

import numbers
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from sklearn.base import ClusterMixin
from sklearn.utils.validation import check_is_fitted

from inference._validation import check_int
from inference.jit import jit
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.cluster_abstraction import CAMParams, ClusterAbstraction
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.two_sided import TwoSided
from zoo.sklearn._base import EMEstimator, _document, _init_count_estimator

__all__ = ["AspectEstimator", "OneSidedEstimator", "TwoSidedEstimator", "ClusterAbstractionEstimator"]


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
    labels_ : (n_samples,) int array — most probable cluster of each training row (``predict(X)``: from all
        of the row's counts at ``beta_``, the tokens held out to choose β included; the fit's own
        last E-step, ``result_.params.assignments()``, came before its last M-step and saw
        only the training tokens, so it may differ on a few rows)
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
    labels_ : (n_samples,) int array — most probable row cluster of each training row (``predict(X)``: from all
        of the row's counts at ``beta_``, the tokens held out to choose β included; the fit's own
        last E-step, ``result_.params.assignments()``, came before its last M-step and saw
        only the training tokens, so it may differ on a few rows)
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


@partial(jit, static_argnames=("model", "n_iter"))
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
    an aspect P(y|a) (or the ``n_leaves`` leaves of a balanced tree); ``transform`` gives the leaf
    posteriors of new rows, folded in by EM over their level weights P(a|c, x) with P(c) and
    P(y|a) fixed.

    Parameters
    ----------
    depth : int, optional
        Levels below the root of a complete tree (2 when neither it nor ``n_leaves`` is given).
    n_leaves : int, optional
        The number of clusters K (≥ 2) instead of ``depth``: a balanced tree
        (:meth:`zoo.dyadic.cluster_abstraction.Tree.balanced`), so that K need not be a power
        of ``branching``.
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
    labels_ : (n_samples,) int array — most probable leaf of each training row (``predict(X)``: from all
        of the row's counts at ``beta_``, the tokens held out to choose β included; the fit's own
        last E-step, ``result_.params.assignments()``, came before its last M-step and saw
        only the training tokens, so it may differ on a few rows)
    n_iter_, beta_, converged_
    """

    def __init__(self, depth=None, *, n_leaves=None, branching=2, fold_in_iter=50, backend="auto", prior_count=0.0,
                 floor=None, schedule="em", valid_fraction=0.1, n_restarts=1, max_iter=200, tol=1e-6, random_state=None,
                 warm_start=False, time_budget=None, progress=False):
        _init_count_estimator(self, locals())

    @classmethod
    def _classes_argument(cls, n_classes: int) -> dict[str, Any]:
        """K leaves of a binary tree: the complete tree of depth log2 K when K is a power of 2, else
        the balanced tree of K leaves."""
        if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or n_classes < 2:
            raise ValueError(f"n_classes: the cluster-abstraction model needs an integer number of leaves of at "
                             f"least 2, got {n_classes!r}")
        if n_classes & (n_classes - 1):
            return {"n_leaves": int(n_classes)}
        return {"depth": int(n_classes).bit_length() - 1}

    def _check_model_params(self) -> None:
        check_int("fold_in_iter", self.fold_in_iter, minimum=1)
        self._build_model()

    def _build_model(self) -> ClusterAbstraction:
        depth = 2 if self.depth is None and self.n_leaves is None else self.depth
        return ClusterAbstraction(depth=depth, n_leaves=self.n_leaves, branching=self.branching, backend=self.backend,
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
