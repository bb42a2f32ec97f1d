"""Baseline clusterings that DM05 (Daumé & Marcu, 2005, §7.1) compare every system against.

This module holds the two trivial baselines of DM05 Tables 1–4: *Coarse*, which puts every point
in one cluster, and *Fine*, which puts every point in a cluster of its own. They bracket the
metrics of :mod:`zoo.metrics` (Fine has precision 1 and recall 0, Coarse recall 1 and low
precision) and show why DM05 distrust the Rand index: Fine scores a high RI whenever the gold
standard has many small clusters. DM05's learned and unsupervised baselines are here too: K-means
with an oracle number of clusters, the untrained DP mixture (CDP), the Binary
classifier-plus-clustering system, and Xing-K with a learned distance metric.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from inference._validation import as_float_array, check_int, check_key, check_memory, check_real, user_stacklevel
from inference.jit import jit
from zoo.metrics import clustering_scores

__all__ = [
    "coarse_partition",
    "fine_partition",
    "kmeans_partition",
    "cdp_partition",
    "unit_variance_gaussian",
    "binary_partition",
    "learn_diagonal_metric",
    "xing_kmeans_partition",
]


def coarse_partition(n_points: int) -> np.ndarray:
    """DM05's Coarse baseline: every point in the same cluster.

    Parameters
    ----------
    n_points : int
        Number of points N (at least 1).

    Returns
    -------
    np.ndarray of int64, shape (N,)
        All zeros.

    Examples
    --------
    >>> coarse_partition(3)
    array([0, 0, 0])
    """
    n_points = check_int("n_points", n_points, minimum=1)
    check_memory("n_points", 8 * n_points, f"a partition of {n_points:,} points", device=False)
    return np.zeros(n_points, dtype=np.int64)


def fine_partition(n_points: int) -> np.ndarray:
    """DM05's Fine baseline: every point in a cluster of its own.

    Parameters
    ----------
    n_points : int
        Number of points N (at least 1).

    Returns
    -------
    np.ndarray of int64, shape (N,)
        ``0, 1, ..., N - 1``.

    Examples
    --------
    >>> fine_partition(3)
    array([0, 1, 2])
    """
    n_points = check_int("n_points", n_points, minimum=1)
    check_memory("n_points", 8 * n_points, f"a partition of {n_points:,} points", device=False)
    return np.arange(n_points, dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# Shared checks and pair sampling
# ----------------------------------------------------------------------------------------------
def _check_train(train_features: Any, train_labels: Any) -> tuple[np.ndarray, np.ndarray]:
    train = as_float_array("train_features", train_features, ndim=2)
    labels = np.asarray(train_labels)
    if labels.ndim != 1 or labels.shape[0] != train.shape[0]:
        raise ValueError(
            f"train_labels: expected one label per training point ({train.shape[0]}), got shape {labels.shape}"
        )
    _, codes = np.unique(labels, return_inverse=True)
    if codes.max() < 1:
        raise ValueError("train_labels: need at least two training clusters")
    return train, codes


def _check_test(test_features: Any, n_features: int) -> np.ndarray:
    test = as_float_array("test_features", test_features, ndim=2)
    if test.shape[1] != n_features:
        raise ValueError(f"test_features: expected {n_features} features like train_features, got {test.shape[1]}")
    return test


def _sample_pairs(labels: np.ndarray, max_pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``max_pairs`` index pairs (i < j), half same-cluster and half different when possible."""
    n_points = labels.shape[0]
    first, second = np.triu_indices(n_points, k=1)
    same = labels[first] == labels[second]
    chosen = []
    for mask in (same, ~same):
        candidates = np.flatnonzero(mask)
        take = min(candidates.size, max_pairs // 2)
        chosen.append(rng.choice(candidates, size=take, replace=False))
    index = np.concatenate(chosen)
    return np.stack([first[index], second[index]], axis=1), same[index]


# ----------------------------------------------------------------------------------------------
# K-means with the oracle number of clusters
# ----------------------------------------------------------------------------------------------
def kmeans_partition(test_features: Any, n_clusters: int, *, seed: int = 0, n_init: int = 10) -> np.ndarray:
    """DM05's K-Means baseline: K-means on the test points with the true number of clusters.

    Parameters
    ----------
    test_features : array_like (M, D)
        Points to cluster.
    n_clusters : int
        The oracle number of clusters k (1 <= k <= M).
    seed : int
        Seed of the k-means++ initialisations.
    n_init : int
        Restarts; the best inertia wins.

    Returns
    -------
    np.ndarray of int64, shape (M,)

    Examples
    --------
    >>> kmeans_partition([[0.0], [0.1], [5.0], [5.1]], 2).tolist() in ([0, 0, 1, 1], [1, 1, 0, 0])
    True
    """
    from sklearn.cluster import KMeans

    test = as_float_array("test_features", test_features, ndim=2)
    n_clusters = check_int("n_clusters", n_clusters, minimum=1, maximum=test.shape[0])
    n_init = check_int("n_init", n_init, minimum=1)
    model = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=check_int("seed", seed, minimum=0))
    return model.fit_predict(test).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# CDP: the untrained Dirichlet-process mixture
# ----------------------------------------------------------------------------------------------
def unit_variance_gaussian(n_features: int, *, prior_variance: float = 1.0):
    """Gaussian components with identity covariance and a Normal(0, σ² I) prior on the means.

    The single reference type of DM05's CDP baseline (precision fixed to the identity):
    :func:`zoo.dirichlet.known_precision.normal_known_precision` with ``precision=1`` and
    ``mean=0``, whose marginal likelihood per feature is (2π)^(-n/2) √(τ0/τn)
    exp(-½ (Σx² - (Σx)²/τn)) with τ0 = 1/σ², τn = τ0 + n.

    Parameters
    ----------
    n_features : int
        Dimension D.
    prior_variance : float
        σ² > 0.

    Returns
    -------
    ComponentFamily
    """
    from zoo.dirichlet.known_precision import normal_known_precision

    return normal_known_precision(n_features, precision=1.0, mean=0.0, prior_variance=prior_variance)


#: The advice of :func:`cdp_partition`'s :class:`~inference.diagnostics.MixingWarning` when its
#: chains do not mix (the fit's own names ``fit.resume``, which the function does not return).
CDP_ADVICE = ("Run longer (cdp_partition's n_warmup and n_draws), or again with more split-merge moves per sweep "
              "(n_split_merge) or more chains (n_chains); to continue the same chains (fit.resume) or change "
              "their moves, fit zoo.dirichlet.DPMixture directly.")


def cdp_partition(
    test_features: Any,
    *,
    key: jax.Array,
    n_chains: int = 2,
    n_warmup: int = 200,
    n_draws: int = 200,
    prior_variance: float = 1.0,
    n_split_merge: int | None = 10,
    progress: bool = False,
) -> np.ndarray:
    """DM05's CDP baseline: the DP mixture without training (α^p starts at 1, identity precision).

    Parameters
    ----------
    test_features : array_like (M, D)
        Points to cluster (centred and scaled, as DM05 do).
    key : jax.Array
        PRNG key.
    n_chains, n_warmup, n_draws : int
        Chains and sweeps (collapsed Gibbs, Neal's Algorithm 3).
    prior_variance : float
        σ² of the Normal prior on the means.
    n_split_merge : int, optional
        Split–merge moves per sweep (0: Gibbs alone); the default is :class:`DPMixture`'s, which
        ``None`` also gives.
    progress : bool
        Show a progress bar.

    Returns
    -------
    np.ndarray of int64, shape (M,)
        The partition minimising the posterior expected variation of information.

    Warns
    -----
    inference.diagnostics.MixingWarning
        With two or more chains, when a label-invariant quantity does not mix; its advice names
        this function's settings (:data:`CDP_ADVICE`).
    """
    from inference.concentration import GammaPrior
    from inference.diagnostics import MixingWarning, warn_if_not_mixing
    from zoo.dirichlet.mixture import DPMixture

    key = check_key("key", key)
    test = as_float_array("test_features", test_features, ndim=2)
    # σ²I, one variance for every feature (DM05 §7.1); normal_known_precision would also take a
    # vector, which this baseline does not offer.
    prior_variance = check_real("prior_variance", prior_variance, low=0.0, low_open=True)
    model = DPMixture(
        unit_variance_gaussian(test.shape[1], prior_variance=prior_variance),
        alpha=1.0,
        alpha_prior=GammaPrior(1.0, 1.0),
        algorithm="collapsed",
        max_clusters=min(32, test.shape[0]),
        n_split_merge=n_split_merge,
    )
    # Random starts, not DPMixture's dispersed default: only the point estimate is returned, and
    # the stored notebook runs used them. The fit's MixingWarning would advise its own resume(),
    # which this function does not return: issued again with advice in this function's terms.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit = model.fit(test, key, n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws, progress=progress,
                        init="random")
    if fit.result.n_chains >= 2 and fit.result.samples:
        table = fit.mixing
        table.attrs["continue_with"] = None
        table.attrs["advice"] = CDP_ADVICE
        warn_if_not_mixing(table, stacklevel=user_stacklevel())
    return fit.point_estimate("vi").astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Binary: pairwise RBF SVM + agglomerative clustering
# ----------------------------------------------------------------------------------------------
def _pair_features(features: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    return np.abs(features[pairs[:, 0]] - features[pairs[:, 1]])


def _agglomerate(distance_matrix: np.ndarray, link: str, threshold: float) -> np.ndarray:
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if distance_matrix.shape[0] == 1:
        return np.zeros(1, dtype=np.int64)
    tree = linkage(squareform(distance_matrix, checks=False), method=link)
    return fcluster(tree, t=threshold, criterion="distance").astype(np.int64) - 1


def _pair_distances(classifier, features: np.ndarray) -> np.ndarray:
    """Distance 1 / (1 + exp(decision)) in (0, 1) for every pair: small when the SVM says 'same'."""
    n_points = features.shape[0]
    first, second = np.triu_indices(n_points, k=1)
    decision = classifier.decision_function(np.abs(features[first] - features[second]))
    matrix = np.zeros((n_points, n_points))
    matrix[first, second] = matrix[second, first] = 1.0 / (1.0 + np.exp(decision))
    return matrix


def binary_partition(
    train_features: Any,
    train_labels: Any,
    test_features: Any,
    *,
    seed: int = 0,
    n_folds: int = 3,
    max_pairs: int = 2000,
    c_grid: Any = (0.1, 1.0, 10.0, 100.0),
    gamma_grid: Any = (0.01, 0.1, 1.0),
    thresholds: Any = np.linspace(0.05, 0.95, 19),
) -> np.ndarray:
    """DM05's Binary baseline: a pairwise RBF SVM, then tuned agglomerative clustering.

    1. Pairs of training points (balanced, at most ``max_pairs``) with features |x_i - x_j| and
       label "same cluster"; C and γ chosen by ``n_folds``-fold cross-validated accuracy (DM05 use
       golden-section search under 10-fold CV; a grid here).
    2. Link (single, complete, average) and threshold on the pair distance 1 / (1 + e^{f(x)})
       chosen by cross-validation over training clusters: the SVM is refitted without one fold of
       clusters, that fold is clustered, and the mean F-score decides. Each fold holds out at
       least two clusters (so at most ``n_training_clusters // 2`` folds; with fewer than four
       training clusters, points of every cluster are held out instead); without any fold that
       can be scored, average link at 0.5, the SVM's decision boundary.
    3. The final SVM (all training pairs) and the chosen link and threshold cluster the test points.

    Parameters
    ----------
    train_features : array_like (N, D)
    train_labels : array_like (N,)
    test_features : array_like (M, D)
    seed : int
        Seed of the pair sampling and folds.
    n_folds : int
        Folds of both cross-validations.
    max_pairs : int
        Training pairs per SVM fit.
    c_grid, gamma_grid : sequence of float
        Candidate C and γ.
    thresholds : sequence of float
        Candidate stopping thresholds in (0, 1).

    Returns
    -------
    np.ndarray of int64, shape (M,)
    """
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    train, labels = _check_train(train_features, train_labels)
    test = _check_test(test_features, train.shape[1])
    n_folds = check_int("n_folds", n_folds, minimum=2)
    max_pairs = check_int("max_pairs", max_pairs, minimum=4)
    c_grid = as_float_array("c_grid", c_grid, ndim=1, nonnegative=True)
    gamma_grid = as_float_array("gamma_grid", gamma_grid, ndim=1, nonnegative=True)
    thresholds = as_float_array("thresholds", thresholds, ndim=1, nonnegative=True)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))

    pairs, same = _sample_pairs(labels, max_pairs, rng)
    search = GridSearchCV(SVC(kernel="rbf"), {"C": list(c_grid), "gamma": list(gamma_grid)}, cv=n_folds)
    search.fit(_pair_features(train, pairs), same)
    best_c, best_gamma = search.best_params_["C"], search.best_params_["gamma"]

    links = ("single", "complete", "average")
    scores = np.zeros((len(links), thresholds.size))
    scored = 0
    for held_out in _held_out_folds(labels, n_folds, rng):
        inner_pairs, inner_same = _sample_pairs(labels[~held_out], max_pairs, rng)
        if inner_same.all() or not inner_same.any() or np.unique(labels[held_out]).size < 2:
            continue
        scored += 1
        classifier = SVC(kernel="rbf", C=best_c, gamma=best_gamma).fit(
            _pair_features(train[~held_out], inner_pairs), inner_same
        )
        distances = _pair_distances(classifier, train[held_out])
        for link_index, link in enumerate(links):
            for threshold_index, threshold in enumerate(thresholds):
                predicted = _agglomerate(distances, link, threshold)
                scores[link_index, threshold_index] += clustering_scores(labels[held_out], predicted)["F"]
    if scored:
        link_index, threshold_index = np.unravel_index(np.argmax(scores), scores.shape)
        link, threshold = links[link_index], float(thresholds[threshold_index])
    else:  # too few training points to tune: the SVM's own boundary (decision 0), average link
        link, threshold = "average", 0.5
    classifier = SVC(kernel="rbf", C=best_c, gamma=best_gamma).fit(_pair_features(train, pairs), same)
    return _agglomerate(_pair_distances(classifier, test), link, threshold)


def _held_out_folds(labels: np.ndarray, n_folds: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Masks of the held-out training points of Binary's second cross-validation.

    Whole clusters are held out, as the test clusters are unseen, in groups of at least two: a
    group of one cluster is best "clustered" by merging everything (F = 1 at any threshold that
    merges it), which on DM05's digits protocol (five training digits, three folds) chose a
    threshold that put every test digit in one cluster. With fewer than four training clusters
    (two held out, two to train on) the folds hold out points of every cluster instead.
    """
    n_clusters = int(labels.max()) + 1
    if n_clusters >= 4:
        n_groups = min(n_folds, n_clusters // 2)
        fold_of_cluster = rng.permutation(n_clusters) % n_groups
        return [fold_of_cluster[labels] == fold for fold in range(n_groups)]
    fold_of_point = rng.permutation(labels.size) % n_folds
    return [fold_of_point == fold for fold in range(n_folds)]


# ----------------------------------------------------------------------------------------------
# Xing-K: diagonal metric learning + K-means
# ----------------------------------------------------------------------------------------------
def _xing_objective(log_weights, similar_sq, dissimilar_sq, trade_off):
    # Xing et al. (2003) diagonal case: Σ_S ||x_i - x_j||²_A - C log Σ_D ||x_i - x_j||_A, A = diag(w).
    weights = jnp.exp(log_weights)
    similar = jnp.sum(jnp.matmul(similar_sq, weights, precision="highest"))
    dissimilar = jnp.sum(jnp.sqrt(jnp.matmul(dissimilar_sq, weights, precision="highest") + 1e-12))
    return similar / similar_sq.shape[0] - trade_off * jnp.log(dissimilar / dissimilar_sq.shape[0])


_xing_value_and_grad = jit(jax.value_and_grad(_xing_objective))


def learn_diagonal_metric(
    train_features: Any,
    train_labels: Any,
    *,
    trade_off: float = 1.0,
    seed: int = 0,
    max_pairs: int = 4000,
    n_steps: int = 500,
    learning_rate: float = 0.05,
) -> np.ndarray:
    """Diagonal Mahalanobis weights w >= 0 of Xing et al. (2003), fitted with optax (Adam on log w).

    Minimises mean_S ||x_i - x_j||²_w - C log mean_D ||x_i - x_j||_w over similar pairs S (same
    training cluster) and dissimilar pairs D; C is DM05's trade-off weight.

    Parameters
    ----------
    train_features : array_like (N, D)
    train_labels : array_like (N,)
    trade_off : float
        C > 0.
    seed : int
        Seed of the pair sampling.
    max_pairs : int
        Pairs used (half similar, half dissimilar when available).
    n_steps : int
        Adam steps.
    learning_rate : float
        Adam step size.

    Returns
    -------
    np.ndarray (D,)
        The weights w; 0 for a feature on which no sampled training pair differs (the objective
        does not depend on it: on scikit-learn's digits, pixels blank in every training digit
        but inked in a few test digits would otherwise keep their starting weight while the
        others shrink about a hundredfold, and K-means would split off those few test digits).
    """
    train, labels = _check_train(train_features, train_labels)
    trade_off = check_real("trade_off", trade_off, low=0.0, low_open=True)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    learning_rate = check_real("learning_rate", learning_rate, low=0.0, low_open=True)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    pairs, same = _sample_pairs(labels, check_int("max_pairs", max_pairs, minimum=4), rng)
    differences = (train[pairs[:, 0]] - train[pairs[:, 1]]) ** 2
    similar_sq = jnp.asarray(differences[same])
    dissimilar_sq = jnp.asarray(differences[~same])
    optimizer = optax.adam(learning_rate)
    log_weights = jnp.zeros(train.shape[1])
    opt_state = optimizer.init(log_weights)
    for _ in range(n_steps):
        _, grads = _xing_value_and_grad(log_weights, similar_sq, dissimilar_sq, trade_off)
        updates, opt_state = optimizer.update(grads, opt_state)
        log_weights = optax.apply_updates(log_weights, updates)
    # A feature on which no training pair differs leaves the objective unchanged (its gradient is 0),
    # so it would keep its starting weight 1 while the others shrink, and rule the metric on test
    # points that do vary there: weight 0, as the training data give no reason to use it.
    informative = differences.sum(axis=0) > 0
    return np.where(informative, np.exp(np.asarray(log_weights)), 0.0)


def xing_kmeans_partition(
    train_features: Any,
    train_labels: Any,
    test_features: Any,
    n_clusters: int,
    *,
    trade_off: float = 1.0,
    seed: int = 0,
    **metric_options: Any,
) -> np.ndarray:
    """DM05's Xing-K baseline: learn a diagonal metric on the training data, then K-means (oracle k).

    Parameters
    ----------
    train_features, train_labels, test_features
        As for :func:`binary_partition`.
    n_clusters : int
        Oracle number of test clusters.
    trade_off : float
        Xing's C (DM05 try 1, |S|/|D| and (|S|/|D|)² and keep the best by test F, an oracle).
    seed : int
        Seed of the pair sampling and K-means.
    **metric_options
        Passed to :func:`learn_diagonal_metric`.

    Returns
    -------
    np.ndarray of int64, shape (M,)
    """
    train, labels = _check_train(train_features, train_labels)
    test = _check_test(test_features, train.shape[1])
    weights = learn_diagonal_metric(train, labels, trade_off=trade_off, seed=seed, **metric_options)
    return kmeans_partition(test * np.sqrt(weights), n_clusters, seed=seed)
