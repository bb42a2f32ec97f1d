"""scikit-learn estimators of feature vectors: the Gaussian mixture (EM) and the Dirichlet-process
mixture (Gibbs chains)."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from inference._validation import check_choice, check_int, check_real, row_names
from zoo.dirichlet.predictive import crp_log_weights
from zoo.finite_mixture import GaussianMixture
from zoo.sklearn._chains import ChainEstimatorMixin, check_gamma_prior
from zoo.sklearn._base import EMEstimator, _check_bool, _document, _validate_features, jax_key

__all__ = ["GaussianMixtureEstimator", "DPMixtureEstimator", "DP_FAMILIES"]


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
    labels_ : (n_samples,) int array — most probable class of each training point (``predict(X)`` at ``beta_``,
        the points held out to choose β included)
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

    def _log_densities(self, params: Any, points: np.ndarray) -> np.ndarray:
        """log p(x_n) = log Σ_c w_c N(x_n; μ_c, diag σ_c²) of each point, shape (n_points,)."""
        log_joint = self._log_joint(params, points)
        peak = log_joint.max(axis=1, keepdims=True)
        return peak[:, 0] + np.log(np.exp(log_joint - peak).sum(axis=1))

    def _mean_log_density(self, params: Any, points: np.ndarray) -> float:
        return float(np.mean(self._log_densities(params, points)))

    def predict_proba(self, X: Any) -> np.ndarray:
        """P(c | x) of each row of X, shape (n_samples, n_classes), as scikit-learn's
        ``GaussianMixture.predict_proba`` (the same as :meth:`transform`)."""
        return self.transform(X)

    def score_samples(self, X: Any) -> np.ndarray:
        """log p(x) of each row of X under the fitted mixture, shape (n_samples,), as scikit-learn's
        ``GaussianMixture.score_samples`` (:meth:`score` is their mean)."""
        check_is_fitted(self)
        return self._log_densities(self.result_.params, self._validate_X(X, reset=False))

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


# ----------------------------------------------------------------------------- the DP mixture
#: Component families of :class:`DPMixtureEstimator` (built-in conjugate priors, default settings).
DP_FAMILIES = ("normal-gamma", "normal-known-precision", "beta-bernoulli")


class DPMixtureEstimator(ChainEstimatorMixin, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin,
                         BaseEstimator):
    """Dirichlet-process mixture fitted by Gibbs sampling, as a scikit-learn clusterer (by default of
    diagonal Gaussians with Normal–Gamma priors; DM05's CDP, Gaussians of identity precision, is the
    registry's ``cdp``, ``zoo.get_model("cdp", n_features=D)``).

    ``fit`` runs :class:`zoo.dirichlet.mixture.DPMixture` (Neal 2000 Algorithm 8, 2 or 3 on
    ``n_chains`` chains) and keeps the posterior point-estimate partition as ``labels_``. New points
    are scored with the Chinese-restaurant predictive given that partition (DM05 §3): cluster k
    with weight n_k p(x | points of k), a new cluster with weight α p(x). ``transform`` gives
    these probabilities, shape (n_samples, ``n_clusters_`` + 1), the last column being a new
    cluster. ``score`` is the mean log predictive density averaged over every draw instead, the
    posterior predictive (``fit_.log_predictive_density``; until 2026-12-04 that of the point
    estimate alone). The number of classes is not fixed: it is inferred. Features should
    be standardised for the default Normal–Gamma prior (mean 0, unit scales), e.g. with
    ``StandardScaler`` in a pipeline; the estimator fits them as given (``python -m zoo fit
    dp-mixture`` standardises a table unless ``--no-standardize``).

    Parameters
    ----------
    family : {"normal-gamma", "normal-known-precision", "beta-bernoulli"}, default "normal-gamma"
        Diagonal Gaussian components with learned precisions (DM05 §5), of identity precision
        (DM05 §7.1's CDP, :func:`zoo.dirichlet.known_precision.normal_known_precision`; what
        ``python -m zoo fit cdp`` fits), or independent Bernoulli features.
    alpha : float, default 1.0
        Concentration (the initial value when ``alpha_prior`` is given).
    alpha_prior : (shape, rate) or None, default (1.0, 1.0)
        Gamma prior on α, resampled every sweep (DM05 App. B); None keeps α fixed.
    algorithm : {"auxiliary", "conjugate", "collapsed", "subcluster"}, default "collapsed"
        Neal (2000) Algorithm 8, 2 or 3 (each with split–merge moves), or the sub-cluster
        split/merge sampler of Chang & Fisher (2013), which updates every point at once.
    n_chains, n_warmup, n_draws : int, default 4, 100, 250
        Chains and their sweeps: ``n_warmup`` discarded, then ``n_draws`` kept. Four chains of
        250, 1,000 draws in all, so that chains that mix can show it: R-hat is trusted from a bulk
        and tail ESS of 400 (Vehtari et al. 2021), which 2 chains of 200 could reach only with
        draws better than independent (the defaults until 2026-12-02).
    max_clusters : int, default 32
        Initial capacity of the chains (grown when needed).
    init : str or array_like of int, default "dispersed"
        The chains' starting partitions (see :meth:`zoo.dirichlet.DPMixture.fit`): ``"dispersed"``
        (chain c from the c-th of one cluster, K-means with min(16, ``max_clusters``) clusters and
        random labels, in turn, so that R-hat compares chains started far apart), ``"random"``,
        ``"single"``, ``"kmeans"``, or labels of shape (n_samples,) or (n_chains, n_samples).
    loss : {"vi", "binder"}, default "vi"
        Loss of the point-estimate partition.
    random_state : None, int, numpy generator or JAX key
    time_budget : float, optional
        Seconds; the sampling stops after the call in which they ran out and the estimate is made
        from the draws finished (``fit_.result.completed`` is then False, and a fit with
        ``warm_start=True`` goes on). Spent before the first draw, ``fit`` raises a
        ``ValueError`` and the estimator stays unfitted.
    progress : bool, default False
    until_mixed : bool, default False
        Stop the sampling as soon as the chains mix (every label-invariant quantity with R-hat
        ≤ 1.01 and bulk and tail ESS ≥ 400), asked each time the draws have grown by a tenth:
        ``n_draws`` is then the most to draw (give a generous one, with a ``time_budget``). With
        ``warm_start=True`` the draws of every fit so far are asked about.
    warm_start : bool, default False
        Continue the previous fit's chains for ``n_draws`` more draws each (``fit_.resume``)
        instead of starting new ones, and make the estimate from the draws of every fit so far:
        for chains that do not mix yet, or that a ``time_budget`` stopped (one spent in the
        warm-up too: the next warm-started fit finishes it). The data and the settings that make
        the chains (``family``, ``alpha``, ``alpha_prior``, ``algorithm``, ``n_chains``,
        ``n_warmup``, ``max_clusters``) must be those of the previous fit; ``init`` and
        ``random_state`` are not used again (the chains go on from where they are, with their own
        keys).

    Attributes
    ----------
    fit_ : DPMixtureFit — the draws, with ``idata`` (ArviZ) and diagnostics
    labels_ : (n_samples,) int array — the point-estimate partition of the training points
    n_clusters_ : int
    alpha_ : float — posterior mean of α (or the fixed α)
    """

    def __init__(self, family="normal-gamma", *, alpha=1.0, alpha_prior=(1.0, 1.0), algorithm="collapsed", n_chains=4,
                 n_warmup=100, n_draws=250, max_clusters=32, init="dispersed", loss="vi", random_state=None,
                 time_budget=None, progress=False, warm_start=False, until_mixed=False):
        self.family = family
        self.alpha = alpha
        self.alpha_prior = alpha_prior
        self.algorithm = algorithm
        self.n_chains = n_chains
        self.n_warmup = n_warmup
        self.n_draws = n_draws
        self.max_clusters = max_clusters
        self.init = init
        self.loss = loss
        self.random_state = random_state
        self.time_budget = time_budget
        self.progress = progress
        self.warm_start = warm_start
        self.until_mixed = until_mixed

    # The settings that make the chains: a warm start goes on only with the same ones.
    _CHAIN_SETTINGS = ("family", "alpha", "alpha_prior", "algorithm", "n_chains", "n_warmup", "max_clusters")

    def _estimator_calls(self) -> dict[str, str]:
        from zoo.dirichlet.mixture import RESUME_CALL

        return {RESUME_CALL: self._WARM_START_CALL}

    def _component_family(self, n_features: int) -> Any:
        from zoo.dirichlet.families import beta_bernoulli, normal_gamma
        from zoo.dirichlet.known_precision import normal_known_precision

        families = {"normal-gamma": normal_gamma, "normal-known-precision": normal_known_precision,
                    "beta-bernoulli": beta_bernoulli}
        return families[self.family](n_features)

    def _check_params(self) -> tuple[Any, Any]:
        check_choice("family", self.family, DP_FAMILIES)
        check_real("alpha", self.alpha, low=0.0, low_open=True)
        prior = check_gamma_prior("alpha_prior", self.alpha_prior)
        check_choice("algorithm", self.algorithm, ("auxiliary", "conjugate", "collapsed", "subcluster"))
        for name in ("n_chains", "n_draws", "max_clusters"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("n_warmup", self.n_warmup, minimum=0)
        check_choice("loss", self.loss, ("vi", "binder"))
        if self.time_budget is not None:
            check_real("time_budget", self.time_budget, low=0.0, low_open=True)
        _check_bool("progress", self.progress)
        _check_bool("warm_start", self.warm_start)
        _check_bool("until_mixed", self.until_mixed)
        return prior, jax_key(self.random_state)

    def _validate_X(self, X: Any, *, reset: bool) -> np.ndarray:
        X = _validate_features(self, X, reset=reset)
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        return self._component_family(X.shape[1]).check_data("X", X)

    def fit(self, X: Any, y: Any = None) -> "DPMixtureEstimator":
        """Sample the posterior partition of the rows of X; keep the point estimate."""
        from zoo.dirichlet.mixture import DPMixture

        prior, key = self._check_params()
        names = row_names(X)  # a DataFrame's row labels name the draws' points, as DPMixture.fit does

        def start(X):
            import pandas as pd

            model = DPMixture(self._component_family(X.shape[1]), alpha=self.alpha, alpha_prior=prior,
                              algorithm=self.algorithm, max_clusters=self.max_clusters)
            data = X if names is None else pd.DataFrame(X, index=pd.Index(names))
            return model.fit(data, key, n_chains=self.n_chains, n_warmup=self.n_warmup, n_draws=self.n_draws,
                             time_budget=self.time_budget, progress=self.progress, init=self.init,
                             until_mixed=bool(self.until_mixed))

        X = self._run_chains(partial(self._validate_X, X), start,
                             lambda previous, X: previous.resume(X, n_draws=self.n_draws, time_budget=self.time_budget,
                                                                 progress=self.progress,
                                                                 until_mixed=bool(self.until_mixed)))
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
        weights = crp_log_weights(family, jnp.asarray(self._train, dtype), jnp.asarray(self.labels_),
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
        """Mean posterior predictive log density of the rows of X: for each row, the predictive
        [Σ_k n_k p(x | k) + α p(x)] / (N + α) averaged over every draw of the chains
        (:meth:`zoo.dirichlet.mixture.DPMixtureFit.log_predictive_density`), not only the point
        estimate's partition that ``transform`` scores against."""
        check_is_fitted(self)
        return float(np.mean(self.fit_.log_predictive_density(self._train, self._validate_X(X, reset=False))))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
