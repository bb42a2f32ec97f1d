"""Tests of the DM05 §7.1 baselines: Coarse, Fine, K-means, CDP family, Binary and Xing-K."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from zoo.baselines import (
    _held_out_folds,
    binary_partition,
    cdp_partition,
    coarse_partition,
    fine_partition,
    kmeans_partition,
    learn_diagonal_metric,
    unit_variance_gaussian,
    xing_kmeans_partition,
)
from zoo.dirichlet.families import GaussianStats
from zoo.metrics import clustering_scores


def _two_feature_clusters(seed: int, n_clusters: int, n_per: int):
    """Clusters separated along feature 0 only; feature 1 is wide noise shared by all clusters."""
    rng = np.random.default_rng(seed)
    centres = np.arange(n_clusters) * 3.0 + rng.normal(0, 0.1, n_clusters)
    features = np.concatenate(
        [np.stack([rng.normal(c, 0.2, n_per), rng.normal(0, 4.0, n_per)], axis=1) for c in centres]
    )
    return features, np.repeat(np.arange(n_clusters), n_per)


def test_trivial_baselines():
    assert coarse_partition(4).tolist() == [0, 0, 0, 0]
    assert fine_partition(3).tolist() == [0, 1, 2]


def test_kmeans_with_oracle_k_recovers_separated_clusters():
    points = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0], [10.0, 0.0], [10.2, 0.1]])
    labels = kmeans_partition(points, 3)
    assert clustering_scores([0, 0, 1, 1, 2, 2], labels)["F"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="^n_clusters: "):
        kmeans_partition(points, 7)


def test_unit_variance_gaussian_marginal_is_the_multivariate_normal(x64):
    rng = np.random.default_rng(1)
    points = rng.normal(size=(4, 2))
    prior_variance = 2.5
    family = unit_variance_gaussian(2, prior_variance=prior_variance)
    stats = GaussianStats(jnp.asarray(4.0), jnp.asarray(points.sum(0)), jnp.asarray((points**2).sum(0)))
    covariance = np.eye(4) + prior_variance * np.ones((4, 4))  # x = μ 1 + ε per feature
    expected = sum(multivariate_normal(np.zeros(4), covariance).logpdf(points[:, f]) for f in range(2))
    assert float(family.log_marginal(stats)) == pytest.approx(expected, rel=1e-10)


def test_xing_metric_downweights_the_noise_feature():
    train, labels = _two_feature_clusters(0, 5, 12)
    weights = learn_diagonal_metric(train, labels)
    assert weights[0] > 50 * weights[1]


def test_xing_metric_gives_no_weight_to_a_feature_that_never_varies_in_training():
    # Pixels blank in every training digit but inked in a few test digits: the objective does not
    # depend on such a feature, and left at its starting weight it ruled the metric while the
    # others shrank, so K-means split off the few test points that vary there (F 0.37 on the
    # digits protocol, Coarse's score).
    train, train_labels = _two_feature_clusters(0, 5, 12)
    test, test_labels = _two_feature_clusters(1, 3, 10)
    train = np.column_stack([train, np.zeros(len(train))])
    test = np.column_stack([test, np.zeros(len(test))])
    test[[0, 15], 2] = 5.0  # two test points inked where no training point is
    weights = learn_diagonal_metric(train, train_labels)
    assert weights[2] == 0.0 and weights[0] > 0.0
    xing = clustering_scores(test_labels, xing_kmeans_partition(train, train_labels, test, 3))["F"]
    assert xing > 0.95


def test_binary_tuning_holds_out_at_least_two_clusters_per_fold():
    # A fold of one held-out cluster is "clustered" best by merging everything, whatever the
    # threshold; with five training digits and three folds that chose one cluster for every test
    # digit. Folds now hold out two clusters or more (and train on two or more).
    rng = np.random.default_rng(0)
    five = np.repeat(np.arange(5), 4)
    for folds in (3, 10):
        masks = _held_out_folds(five, folds, rng)
        assert len(masks) == 2 and np.all(np.sum(masks, axis=0) == 1)
        for held_out in masks:
            assert np.unique(five[held_out]).size >= 2 and np.unique(five[~held_out]).size >= 2
    three = np.repeat(np.arange(3), 6)  # too few clusters to hold two out: points of every cluster
    masks = _held_out_folds(three, 3, rng)
    assert len(masks) == 3 and np.all(np.sum(masks, axis=0) == 1)
    assert all(held_out.sum() == 6 for held_out in masks)


def test_xing_kmeans_and_binary_separate_clusters_that_plain_kmeans_mixes():
    train, train_labels = _two_feature_clusters(0, 5, 12)
    test, test_labels = _two_feature_clusters(1, 3, 10)
    plain = clustering_scores(test_labels, kmeans_partition(test, 3))["F"]
    xing = clustering_scores(test_labels, xing_kmeans_partition(train, train_labels, test, 3))["F"]
    binary = clustering_scores(test_labels, binary_partition(train, train_labels, test, max_pairs=600))["F"]
    assert xing > 0.95
    assert binary > 0.9
    assert plain < xing - 0.2


def test_bad_training_input_is_rejected():
    train, labels = _two_feature_clusters(0, 2, 3)
    with pytest.raises(ValueError, match="^train_labels: expected one label per training point"):
        binary_partition(train, labels[:-1], train)
    with pytest.raises(ValueError, match="^train_labels: need at least two"):
        xing_kmeans_partition(train, np.zeros(6), train, 2)
    with pytest.raises(ValueError, match="^test_features: "):
        xing_kmeans_partition(train, labels, np.zeros((3, 5)), 2)
    with pytest.raises(ValueError, match="^trade_off: "):
        learn_diagonal_metric(train, labels, trade_off=-1.0)


def test_cdp_partition_takes_one_prior_variance_for_every_feature():
    # DM05's CDP has σ²I; a per-feature list was once passed on to the family unchecked.
    points = np.zeros((4, 2))
    with pytest.raises(TypeError, match=r"^prior_variance: expected a scalar, got shape \(2,\)$"):
        cdp_partition(points, key=jax.random.key(0), prior_variance=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"^prior_variance: must be in \(0\.0, inf\), got 0\.0$"):
        cdp_partition(points, key=jax.random.key(0), prior_variance=0)


def test_cdp_partition_makes_dp_mixtures_default_split_merge_moves():
    # The count is a parameter now (it was fixed at DPMixture's); its default must stay DPMixture's.
    from zoo.dirichlet.mixture import DEFAULT_SPLIT_MERGE

    assert inspect.signature(cdp_partition).parameters["n_split_merge"].default == DEFAULT_SPLIT_MERGE
