"""Tests of supervised clustering with the Dirichlet process (DM05 SCDP-1, -2, -3)."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from numpyro.infer import Predictive
from scipy.special import gammaln

from inference.chains import sample_chains, stack_states
from zoo.dirichlet import supervised as scdp
from zoo.dirichlet.supervised import SupervisedDP, embed_distances, supervised_program
from zoo.metrics import clustering_scores

PRIOR_VARIANCE, SHAPE, RATE = 1.0, 1.0, 1.0
ALPHA, ALPHA_TYPES = 0.8, 0.6


# ----------------------------------------------------------------------------------------------
# Exact posterior over test partitions by enumeration
# ----------------------------------------------------------------------------------------------
def _set_partitions(n_items: int):
    """All set partitions of range(n_items) as canonical label tuples (first occurrence order)."""

    def extend(prefix, n_blocks):
        if len(prefix) == n_items:
            yield tuple(prefix)
            return
        for label in range(n_blocks + 1):
            yield from extend(prefix + [label], max(n_blocks, label + 1))

    yield from extend([], 0)


def _canonical(labels) -> tuple:
    mapping: dict = {}
    return tuple(mapping.setdefault(label, len(mapping)) for label in labels)


def _log_crp(labels, alpha: float) -> float:
    sizes = np.bincount(np.asarray(labels))
    sizes = sizes[sizes > 0]
    n = int(sizes.sum())
    return len(sizes) * math.log(alpha) + gammaln(alpha) - gammaln(alpha + n) + gammaln(sizes).sum()


def _log_marginal(features_1d, clusters, types, n_nodes=24):
    """log ∫∫ Π_k N(p_k; 0, σ²) Π_l Gam(t_l) Π_n N(r_n; p_{c_n}, 1/t_{d_n}) for one feature:
    t integrated in closed form given p, p by a tensor Gauss–Hermite rule."""
    n_clusters = max(clusters) + 1
    nodes, weights = hermegauss(n_nodes)
    weights = weights / weights.sum()
    grids = np.meshgrid(*([nodes * math.sqrt(PRIOR_VARIANCE)] * n_clusters), indexing="ij")
    log_weights = sum(np.log(w) for w in np.meshgrid(*([weights] * n_clusters), indexing="ij"))
    means = np.stack([grid.ravel() for grid in grids])  # (K, G)
    total = log_weights.ravel().copy()
    for type_label in set(types):
        members = [n for n, d in enumerate(types) if d == type_label]
        count = len(members)
        squares = sum((features_1d[n] - means[clusters[n]]) ** 2 for n in members)
        total += (
            SHAPE * math.log(RATE) + gammaln(SHAPE + 0.5 * count) - gammaln(SHAPE)
            - 0.5 * count * math.log(2 * math.pi) - (SHAPE + 0.5 * count) * np.log(RATE + 0.5 * squares)
        )
    top = total.max()
    return top + math.log(np.exp(total - top).sum())


def _exact_test_posterior(train, train_labels, test, share_clusters):
    """Posterior probabilities of every test partition (canonical tuples)."""
    features = np.concatenate([train, test])[:, 0]
    n_train, n_points = len(train), len(train) + len(test)
    train_codes = _canonical(train_labels)
    n_train_clusters = max(train_codes) + 1
    log_post: dict = {}
    if share_clusters:
        full_partitions = [
            labels for labels in _set_partitions(n_points) if _canonical(labels[:n_train]) == train_codes
        ]
    else:
        full_partitions = [
            train_codes + tuple(n_train_clusters + label for label in test_labels)
            for test_labels in _set_partitions(n_points - n_train)
        ]
    type_partitions = list(_set_partitions(n_points))
    for clusters in full_partitions:
        if share_clusters:
            log_prior = _log_crp(clusters, ALPHA)
        else:
            log_prior = _log_crp(clusters[n_train:], ALPHA)
        clusters_dense = _canonical(clusters)
        terms = [
            log_prior + _log_crp(types, ALPHA_TYPES) + _log_marginal(features, clusters_dense, types)
            for types in type_partitions
        ]
        key = _canonical(clusters[n_train:])
        log_post[key] = np.logaddexp(log_post.get(key, -np.inf), np.logaddexp.reduce(terms))
    keys = list(log_post)
    values = np.array([log_post[k] for k in keys])
    probabilities = np.exp(values - np.logaddexp.reduce(values))
    return dict(zip(keys, probabilities))


def _sampled_test_posterior(train, train_labels, test, share_clusters, key, n_chains, n_draws):
    step = scdp.build_kernel(1, share_clusters=share_clusters, prior_variance=PRIOR_VARIANCE,
                             precision_shape=SHAPE, precision_rate=RATE)
    init_keys = jax.random.split(jax.random.fold_in(key, 1), n_chains)
    states = stack_states([
        scdp.init(k, train, train_labels, test, max_test_clusters=len(test), max_types=len(train) + len(test),
                  alpha=ALPHA, alpha_types=ALPHA_TYPES)
        for k in init_keys
    ])
    data = scdp.SupervisedData(
        jnp.asarray(np.concatenate([train, test]), jnp.result_type(float)),
        jnp.asarray(_canonical(train_labels), jnp.int32),
    )
    result = sample_chains(
        key, step, states, data, n_warmup=50, n_draws=n_draws, draws_per_call=n_draws, progress=False,
        record=scdp.record_supervised(len(train)),
    )
    draws = result.samples["assignments"].reshape(-1, len(test))
    counts: dict = {}
    for row in draws:
        k = _canonical(row)
        counts[k] = counts.get(k, 0) + 1
    return {k: v / len(draws) for k, v in counts.items()}, len(draws)


TRAIN = np.array([[-0.9], [-0.6]])
TRAIN_LABELS = ["a", "a"]
TEST = np.array([[-0.8], [0.7], [1.1]])


def _total_variation(exact, sampled):
    keys = set(exact) | set(sampled)
    return 0.5 * sum(abs(exact.get(k, 0.0) - sampled.get(k, 0.0)) for k in keys)


def test_quadrature_has_converged(x64):
    clusters, types = (0, 0, 1, 2, 2), (0, 1, 0, 1, 1)
    features = np.concatenate([TRAIN, TEST])[:, 0]
    used = _log_marginal(features, clusters, types)
    fine = _log_marginal(features, clusters, types, n_nodes=48)
    # A log-marginal error of 2e-3 moves each posterior probability by at most ~0.2 % of itself,
    # far below the Monte Carlo tolerances below.
    assert abs(used - fine) < 2e-3


@pytest.mark.parametrize("share_clusters", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_scdp1_matches_enumerated_posterior(x64, share_clusters):
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST, share_clusters)
    sampled, n_draws = _sampled_test_posterior(
        TRAIN, TRAIN_LABELS, TEST, share_clusters, jax.random.key(3), n_chains=8, n_draws=1000
    )
    # Per-partition error within 5 Monte Carlo standard errors (autocorrelation inflates the
    # i.i.d. error; a factor 3 covers it at these sizes).
    for partition, probability in exact.items():
        standard_error = 3.0 * math.sqrt(probability * (1 - probability) / n_draws) + 1e-3
        assert abs(sampled.get(partition, 0.0) - probability) < 5 * standard_error, partition
    assert _total_variation(exact, sampled) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("share_clusters", [False, True])
def test_scdp1_matches_enumerated_posterior_long(x64, share_clusters):
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST, share_clusters)
    sampled, _ = _sampled_test_posterior(
        TRAIN, TRAIN_LABELS, TEST, share_clusters, jax.random.key(4), n_chains=16, n_draws=4000
    )
    assert _total_variation(exact, sampled) < 0.02
