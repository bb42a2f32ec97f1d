"""Tests of supervised clustering with the Dirichlet process (DM05 SCDP-1, -2, -3)."""

from __future__ import annotations

import functools
import html
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from numpyro.infer import Predictive
from scipy.special import gammaln, kve

from zoo.dirichlet import supervised as scdp  # first: zoo.dirichlet's package import pulls in inference.chains
from zoo.dirichlet.supervised import (SupervisedDP, conditionals, embed_distances, precision_moves, split_merge,
                                      supervised_program)
from zoo.dirichlet.supervised.state import _Carry
from zoo.baselines import cdp_partition
from zoo.metrics import clustering_scores
from inference.chains import sample_chains, stack_states
from inference.concentration import GammaPrior
from inference.native import available_backends

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


def _log_marginal(features_1d, clusters, types, n_nodes=24, conditioning=False):
    """log ∫∫ Π_k N(p_k; 0, σ²) Π_l Gam(t_l) Π_n N(r_n; p_{c_n}, 1/t_{d_n}) for one feature:
    t integrated in closed form given p, p by a tensor Gauss–Hermite rule. With
    ``conditioning`` (SCDP-3, DM05 eq. 3, λ = 1) each type also carries exp(-S(p) / t_l), S the
    sum of (p_j - p_k)² over pairs of publications, and t_l is integrated against it through
    ∫ t^{α-1} exp(-β t - S / t) dt = 2 (S / β)^{α/2} K_α(2 sqrt(β S)) (a Bessel function)."""
    n_clusters = max(clusters) + 1
    nodes, weights = hermegauss(n_nodes)
    weights = weights / weights.sum()
    grids = np.meshgrid(*([nodes * math.sqrt(PRIOR_VARIANCE)] * n_clusters), indexing="ij")
    log_weights = sum(np.log(w) for w in np.meshgrid(*([weights] * n_clusters), indexing="ij"))
    means = np.stack([grid.ravel() for grid in grids])  # (K, G)
    total = log_weights.ravel().copy()
    pair_spread = sum(
        (means[j] - means[k]) ** 2 for j in range(n_clusters) for k in range(j)
    ) if conditioning else 0.0
    for type_label in set(types):
        members = [n for n, d in enumerate(types) if d == type_label]
        count = len(members)
        squares = sum((features_1d[n] - means[clusters[n]]) ** 2 for n in members)
        shape, rate = SHAPE + 0.5 * count, RATE + 0.5 * squares
        if conditioning:
            spread = np.maximum(pair_spread, 1e-300)
            argument = 2.0 * np.sqrt(rate * spread)
            log_integral = np.where(
                pair_spread > 0,
                math.log(2.0) + 0.5 * shape * (np.log(spread) - np.log(rate)) + np.log(kve(shape, argument)) - argument,
                gammaln(shape) - shape * np.log(rate),
            )
        else:
            log_integral = gammaln(shape) - shape * np.log(rate)
        total += SHAPE * math.log(RATE) - gammaln(SHAPE) - 0.5 * count * math.log(2 * math.pi) + log_integral
    top = total.max()
    return top + math.log(np.exp(total - top).sum())


def _exact_test_posterior(train, train_labels, test, share_clusters, conditioning=False, n_nodes=24,
                          marginal="test"):
    """Posterior probabilities of every test partition (canonical tuples), or with
    ``marginal="types"`` of every partition of all references into types."""
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
            log_prior + _log_crp(types, ALPHA_TYPES)
            + _log_marginal(features, clusters_dense, types, n_nodes=n_nodes, conditioning=conditioning)
            for types in type_partitions
        ]
        if marginal == "types":
            for types, term in zip(type_partitions, terms):
                key = _canonical(types)
                log_post[key] = np.logaddexp(log_post.get(key, -np.inf), term)
        else:
            key = _canonical(clusters[n_train:])
            log_post[key] = np.logaddexp(log_post.get(key, -np.inf), np.logaddexp.reduce(terms))
    return _normalised(log_post)


def _record_types(state, info):
    """Recorder of every reference's type (for the type-partition marginal)."""
    return {"assignments": state.types}


def _sampled_test_posterior(train, train_labels, test, share_clusters, key, n_chains, n_draws, model=1,
                            backend="auto", n_split_merge=10, n_type_split_merge=0, marginal="test"):
    step = scdp.build_kernel(model, share_clusters=share_clusters, prior_variance=PRIOR_VARIANCE,
                             precision_shape=SHAPE, precision_rate=RATE, backend=backend,
                             n_split_merge=n_split_merge, n_type_split_merge=n_type_split_merge)
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
        record=_record_types if marginal == "types" else scdp.record_supervised(len(train)),
    )
    draws = result.samples["assignments"].reshape(n_chains * n_draws, -1)
    return _frequencies(draws), len(draws)


TRAIN = np.array([[-0.9], [-0.6]])
TRAIN_LABELS = ["a", "a"]
TEST = np.array([[-0.8], [0.7], [1.1]])


def _frequencies(rows) -> dict:
    """Share of each partition (canonical tuple) among the sampled label rows."""
    counts: dict = {}
    for row in rows:
        key = _canonical(row)
        counts[key] = counts.get(key, 0) + 1
    return {key: count / len(rows) for key, count in counts.items()}


def _normalised(log_target: dict) -> dict:
    """Probabilities from unnormalised log probabilities."""
    values = np.array(list(log_target.values()))
    return dict(zip(log_target, np.exp(values - np.logaddexp.reduce(values))))


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
    # Most of the mass is on two or three test publications, so splitting is exercised.
    assert sum(p for partition, p in exact.items() if len(set(partition)) >= 2) > 0.55  # 0.587 shared, 0.6+ not
    sampled, n_draws = _sampled_test_posterior(
        TRAIN, TRAIN_LABELS, TEST, share_clusters, jax.random.key(3), n_chains=8, n_draws=1000
    )
    # Per-partition error within 5 Monte Carlo standard errors (autocorrelation inflates the
    # i.i.d. error; a factor 3 covers it at these sizes).
    for partition, probability in exact.items():
        standard_error = 3.0 * math.sqrt(probability * (1 - probability) / n_draws) + 1e-3
        assert abs(sampled.get(partition, 0.0) - probability) < 5 * standard_error, partition
    assert _total_variation(exact, sampled) < 0.05


# SCDP-3's conditioning term makes the integrand of the means less smooth: two test references
# (at most three publications) and a finer rule keep the enumeration exact and cheap.
TEST_SCDP3 = TEST[:2]
NODES_SCDP3 = 96


def test_conditioned_quadrature_has_converged(x64):
    clusters, types = (0, 0, 1, 2), (0, 1, 0, 1)
    features = np.concatenate([TRAIN, TEST_SCDP3])[:, 0]
    used = _log_marginal(features, clusters, types, n_nodes=NODES_SCDP3, conditioning=True)
    fine = _log_marginal(features, clusters, types, n_nodes=128, conditioning=True)
    assert abs(used - fine) < 2e-3


@pytest.mark.slow
@pytest.mark.parametrize("share_clusters", [False, True])
def test_scdp3_matches_enumerated_posterior(x64, share_clusters):
    # SCDP-3 targets the conditioned prior of DM05 eq. 3: Algorithm 8 with reused auxiliaries and
    # the independence refreshes must reproduce it, conditioning term included.
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST_SCDP3, share_clusters, conditioning=True,
                                  n_nodes=NODES_SCDP3)
    sampled, n_draws = _sampled_test_posterior(
        TRAIN, TRAIN_LABELS, TEST_SCDP3, share_clusters, jax.random.key(5), n_chains=8, n_draws=1000, model=3
    )
    for partition, probability in exact.items():
        standard_error = 3.0 * math.sqrt(probability * (1 - probability) / n_draws) + 1e-3
        assert abs(sampled.get(partition, 0.0) - probability) < 5 * standard_error, partition
    assert _total_variation(exact, sampled) < 0.05


# Test references far apart: 80 % of the posterior on two or more test publications.
TEST_APART = np.array([[-2.0], [1.6], [2.0]])


@pytest.mark.parametrize("backend", ["numba", pytest.param("xla", marks=pytest.mark.slow)])
@pytest.mark.parametrize("n_split_merge", [0, 10])
def test_scdp1_matches_a_posterior_of_separate_test_clusters(x64, backend, n_split_merge):
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST_APART, False)
    assert sum(p for partition, p in exact.items() if len(set(partition)) >= 2) > 0.75
    sampled, _ = _sampled_test_posterior(TRAIN, TRAIN_LABELS, TEST_APART, False, jax.random.key(8), n_chains=8,
                                         n_draws=1000, backend=backend, n_split_merge=n_split_merge)
    assert _total_variation(exact, sampled) < 0.05


@pytest.mark.numba
def test_kernel_with_type_moves_samples_the_exact_type_partition(x64):
    # The whole SCDP-1 kernel with type moves, not the moves alone (as in
    # test_type_split_merge_moves_alone_sample_the_exact_type_partition): the means, the moves,
    # the precisions and the one-reference updates together keep the joint posterior. The type
    # partition of all five references is the marginal the moves act on; the test partition's
    # hardly depends on them here.
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST_APART, False, marginal="types")
    sampled, _ = _sampled_test_posterior(TRAIN, TRAIN_LABELS, TEST_APART, False, jax.random.key(12), n_chains=8,
                                         n_draws=1000, backend="numba", n_type_split_merge=3, marginal="types")
    # 0.032 measured; 0.114 with the moves' proposal terms left out, 0.081 with every split accepted.
    assert _total_variation(exact, sampled) < 0.05


@pytest.mark.slow
def test_scdp1_xla_sweep_matches_enumerated_posterior(x64):
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST, False)
    sampled, _ = _sampled_test_posterior(
        TRAIN, TRAIN_LABELS, TEST, False, jax.random.key(6), n_chains=8, n_draws=1000, backend="xla"
    )
    assert _total_variation(exact, sampled) < 0.05


@pytest.mark.parametrize("model, n_type_split_merge", [(1, 0), (2, 3), pytest.param(1, 3, marks=pytest.mark.slow),
                                                       pytest.param(2, 0, marks=pytest.mark.slow),
                                                       pytest.param(3, 0, marks=pytest.mark.slow)])
@pytest.mark.numba
def test_numba_and_xla_sweeps_give_the_same_chain(x64, model, n_type_split_merge):
    rng = np.random.default_rng(1)
    train, test = rng.normal(size=(12, 2)), 1.5 * rng.normal(size=(9, 2))
    labels = rng.integers(0, 3, 12)
    state = scdp.init(jax.random.key(0), train, labels, test, max_test_clusters=9, max_types=21)
    data = scdp.SupervisedData(
        jnp.asarray(np.concatenate([train, test])), jnp.asarray(np.unique(labels, return_inverse=True)[1], jnp.int32)
    )
    finals = {}
    runs = [("xla", None), ("numba", None)] + ([("numba", False)] if model != 3 else [])
    for backend, pair_moves in runs:
        step = jax.jit(scdp.build_kernel(model, backend=backend, alpha_prior=GammaPrior(1.0, 1.0),
                                         alpha_types_prior=GammaPrior(1.0, 1.0),
                                         n_type_split_merge=n_type_split_merge, pair_moves=pair_moves))
        current, accepted_type_moves = state, 0
        for sweep in range(8):
            current, info = step(jax.random.key(sweep), current, data)
            accepted_type_moves += int(info.type_split_merge_accepted)
        finals[backend, pair_moves] = (current, info)
    (xla_state, xla_info), (numba_state, numba_info) = finals["xla", None], finals["numba", None]
    if model != 3:  # SCDP-1 and -2 ran their pair moves (on by default), and they moved
        without = finals["numba", False][0]
        assert not (np.array_equal(without.clusters, numba_state.clusters)
                    and np.array_equal(without.types, numba_state.types))
    assert not bool(xla_state.overflow)
    for name in ("clusters", "cluster_counts", "types", "type_counts"):
        assert np.array_equal(getattr(xla_state, name), getattr(numba_state, name)), name
    assert np.allclose(xla_state.means, numba_state.means, rtol=1e-9, atol=1e-12)
    assert np.allclose(xla_state.precisions, numba_state.precisions, rtol=1e-9)
    assert float(xla_info.log_joint) == pytest.approx(float(numba_info.log_joint), rel=1e-10)
    if n_type_split_merge:  # the type moves ran, and moved
        assert int(xla_info.type_split_merge_accepted) == int(numba_info.type_split_merge_accepted)
        assert accepted_type_moves > 0


# A state for the pair move: training references 0-3 in publications 0 and 1; test references 4
# and 5 (the pair) alone in publication 2 with type 0, test references 6 and 7 in publication 3;
# types 0 and 1 held, slot 2 empty; publication slots 4 and 5 empty.
PAIR_FEATURES = np.array([[-1.2, 0.3], [-0.8, 0.1], [1.0, -0.4], [1.3, -0.9],
                          [0.2, 0.6], [0.5, 0.2], [0.9, -0.3], [1.6, -1.1]])
PAIR_CLUSTERS = np.array([0, 0, 1, 1, 2, 2, 3, 3])
PAIR_MEANS = np.array([[-1.0, 0.2], [1.1, -0.6], [0.3, 0.4], [1.2, -0.7], [0.0, 0.0], [0.0, 0.0]])
PAIR_PRECISIONS = np.array([[4.0, 2.0], [0.5, 0.3], [1.0, 1.0]])
PAIR_ALPHA = 0.7


def _pair_carry(types, clusters=PAIR_CLUSTERS):
    types = np.asarray(types)
    return _Carry(jnp.asarray(clusters, jnp.int32), jnp.asarray(np.bincount(clusters, minlength=6), jnp.int32),
                  jnp.asarray(PAIR_MEANS), jnp.asarray(types, jnp.int32),
                  jnp.asarray(np.bincount(types, minlength=3), jnp.int32), jnp.asarray(PAIR_PRECISIONS),
                  jnp.zeros((), jnp.int32))


def _pair_moves(backend, config, carry, uniforms, normals):
    """(publications, types, means, counts, type counts, overflow) after the pair move of test
    reference 4 with reference 5, one per row of ``uniforms`` (N, 3); ``normals`` (2, D)."""
    held = np.asarray(carry.type_counts) > 0
    type_log_det = np.where(held, np.log(PAIR_PRECISIONS).sum(axis=-1), 0.0)
    if backend == "xla":
        from zoo.dirichlet.supervised.sweep_xla import _pair_move, _SweepCarry

        def move(uniform):
            sweep = _SweepCarry(carry, jnp.asarray(type_log_det), None, None, None, None, None)
            out = _pair_move(config, sweep, 4, 5, jnp.asarray(PAIR_FEATURES[4]), jnp.asarray(PAIR_FEATURES[5]),
                             uniform, jnp.asarray(normals), PAIR_ALPHA, 2).state
            return out.clusters, out.types, out.means, out.cluster_counts, out.type_counts, out.overflow

        return [np.asarray(a) for a in jax.jit(jax.vmap(move))(jnp.asarray(uniforms))]
    from inference.native.supervised_sweep import _pair_moves as numba_pair_moves

    outputs = [[] for _ in range(6)]
    for uniform in uniforms:
        clusters, counts, means, types, type_counts, precisions = (np.array(a) for a in carry[:6])
        overflow = numba_pair_moves(4, config.prior_variance, PAIR_FEATURES, 0 if config.share_clusters else 2,
                                    clusters, counts, means, types, type_counts, precisions, type_log_det,
                                    PAIR_ALPHA, np.array([5, 5, 6, 7], np.int32),  # only reference 4 has a partner
                                    np.concatenate([uniform, np.full(9, 0.5)]), np.tile(normals, (4, 1)))
        for out, array in zip(outputs, (clusters, types, means, counts, type_counts, overflow)):
            out.append(array)
    return [np.stack(out) for out in outputs]


@pytest.mark.parametrize("backend", ["xla", pytest.param("numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("share_clusters", [False, True])
@pytest.mark.parametrize("start", ["together", "apart"])
def test_pair_move_draws_from_the_restricted_conditional_of_the_log_joint(x64, backend, share_clusters, start):
    # Exact: each option's probability is the model's log joint (conditionals._log_joint, with
    # the means of the publications the pair opens integrated on a grid) of the state it leads
    # to, normalised over the options in which the pair shares a type that others hold. From
    # either start (the pair alone in publication 2, or reference 4 there and 5 in publication 3
    # with 6 and 7) the rest of the state is the same, and so is the conditional.
    config = scdp.build_kernel(1, share_clusters=share_clusters, prior_variance=PRIOR_VARIANCE,
                               precision_shape=SHAPE, precision_rate=RATE, backend=backend).args[0]
    assert config.pair_moves
    clusters = PAIR_CLUSTERS if start == "together" else np.array([0, 0, 1, 1, 2, 3, 3, 3])
    carry = _pair_carry([0, 0, 1, 1, 0, 0, 0, 1], clusters)
    shape, rate = jnp.full(2, SHAPE), jnp.full(2, RATE)
    features = jnp.asarray(PAIR_FEATURES)

    @jax.jit
    def log_joint(cluster_i, cluster_j, type_slot, mean_2, mean_4):
        assigned = carry.clusters.at[4].set(cluster_i).at[5].set(cluster_j)
        state = carry._replace(
            clusters=assigned,
            cluster_counts=jnp.zeros(6, jnp.int32).at[assigned].add(1),
            means=carry.means.at[2].set(mean_2).at[4].set(mean_4),
            types=carry.types.at[4].set(type_slot).at[5].set(type_slot),
            type_counts=carry.type_counts.at[0].add(-2).at[type_slot].add(2),
        )
        return conditionals._log_joint(config, state, features, 4, jnp.asarray(PAIR_ALPHA), jnp.asarray(0.6), shape,
                                       rate, 2)

    grid = np.linspace(-6.0, 6.0, 801)
    step = grid[1] - grid[0]
    mesh = jnp.asarray(np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1).reshape(-1, 2))
    zero = jnp.zeros(2)

    def integrated(option, slot):
        """log ∫ exp(log joint) over the mean of ``slot``, and that mean's posterior mean."""
        values = jax.vmap(lambda mean: log_joint(*option, mean if slot == 2 else zero, mean if slot == 4 else zero))(
            mesh)
        top = float(values.max())
        weights = np.exp(np.asarray(values) - top)
        return top + math.log(weights.sum() * step * step), (weights[:, None] * np.asarray(mesh)).sum(0) / weights.sum()

    existing = (0, 1, 3) if share_clusters else (3,)
    log_exact, posterior_means = {}, {}
    for type_slot in (0, 1):
        # Publication 2 is the first free slot once the pair has left, 4 the second.
        options = ([(a, b) for a in existing for b in existing] + [(2, b) for b in existing]
                   + [(a, 2) for a in existing] + [(2, 2), (2, 4)])
        for cluster_i, cluster_j in options:
            option = (cluster_i, cluster_j, type_slot)
            if (cluster_i, cluster_j) == (2, 4):  # two new means, apart: the log joint is a sum of their terms
                log_2, posterior_means[option, 2] = integrated(option, 2)
                log_4, posterior_means[option, 4] = integrated(option, 4)
                log_exact[option] = log_2 + log_4 - float(log_joint(*option, zero, zero))
            elif 2 in (cluster_i, cluster_j):
                log_exact[option], posterior_means[option, 2] = integrated(option, 2)
            else:
                log_exact[option] = float(log_joint(*option, zero, zero))
    total = np.logaddexp.reduce(list(log_exact.values()))
    exact = {option: math.exp(value - total) for option, value in log_exact.items()}

    n_draws = 40_000
    uniforms = np.random.default_rng(3).uniform(size=(n_draws, 3))
    clusters, types, means, counts, type_counts, overflow = _pair_moves(backend, config, carry, uniforms,
                                                                       np.zeros((2, 2)))
    assert not overflow.any()
    assert (types[:, 4] == types[:, 5]).all()
    assert (counts == np.stack([np.bincount(row, minlength=6) for row in clusters])).all()
    assert (type_counts == np.stack([np.bincount(row, minlength=3) for row in types])).all()
    sampled = {option: np.mean((clusters[:, 4] == option[0]) & (clusters[:, 5] == option[1])
                               & (types[:, 4] == option[2])) for option in exact}
    assert sum(sampled.values()) == 1.0  # never a type that no other reference holds, never another slot
    for option, probability in exact.items():
        # Independent draws: each share within 4.5 standard errors of its probability.
        error = math.sqrt(probability * (1.0 - probability) / n_draws)
        assert sampled[option] == pytest.approx(probability, abs=4.5 * error + 1e-4), option
    for (option, slot), posterior_mean in posterior_means.items():
        # A publication the pair opens takes its mean from its posterior (here its mean: normals 0).
        chosen = (clusters[:, 4] == option[0]) & (clusters[:, 5] == option[1]) & (types[:, 4] == option[2])
        if chosen.any():
            assert np.allclose(means[chosen, slot], posterior_mean, atol=1e-4), (option, slot)
    # Every kind of outcome has a share that a broken weight would shift.
    kinds = {"apart": lambda a, b: a != b and 2 not in (a, b), "together": lambda a, b: a == b != 2,
             "new together": lambda a, b: a == b == 2, "one new": lambda a, b: (a == 2) != (b == 2) and 4 not in (a, b),
             "both new": lambda a, b: (a, b) == (2, 4)}
    for kind, belongs in kinds.items():
        share = sum(p for option, p in exact.items() if belongs(*option[:2]))
        assert (share > 0.01) or (kind == "apart" and not share_clusters), (kind, share)
    assert max(exact.values()) < 0.9


@pytest.mark.parametrize("backend", ["xla", pytest.param("numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("types", [[0, 0, 1, 1, 0, 1, 0, 1],  # the pair in two types
                                   [0, 0, 0, 0, 1, 1, 0, 0]])  # the pair alone in its type
def test_pair_move_leaves_pairs_in_two_types_or_alone_in_their_type_unchanged(backend, types):
    config = scdp.build_kernel(1, backend=backend).args[0]
    carry = _pair_carry(types)
    uniforms = np.stack([np.linspace(0.01, 0.99, 7)] * 3, axis=-1)
    clusters, moved_types, means, *_ = _pair_moves(backend, config, carry, uniforms, np.ones((2, 2)))
    assert (clusters == PAIR_CLUSTERS).all() and (moved_types == np.asarray(types)).all()
    assert np.allclose(means, PAIR_MEANS)


@pytest.mark.slow
@pytest.mark.numba
def test_numba_sweep_runs_vmapped_chains_like_single_ones():
    rng = np.random.default_rng(2)
    train, test = rng.normal(size=(10, 2)), rng.normal(size=(6, 2))
    labels = [0, 0, 1, 1, 2, 2, 2, 1, 0, 1]
    states = [scdp.init(jax.random.key(c), train, labels, test, max_test_clusters=6, max_types=16) for c in range(3)]
    data = scdp.SupervisedData(jnp.asarray(np.concatenate([train, test]), jnp.float32), jnp.asarray(labels, jnp.int32))
    step = scdp.build_kernel(1, backend="numba")
    keys = jax.random.split(jax.random.key(7), 3)
    batched, _ = jax.jit(jax.vmap(step, in_axes=(0, 0, None)))(keys, stack_states(states), data)
    for chain, state in enumerate(states):
        single, _ = jax.jit(step)(keys[chain], state, data)
        assert np.array_equal(batched.clusters[chain], single.clusters)
        assert np.array_equal(batched.types[chain], single.types)


def test_overflow_bits_name_the_capacity_and_only_that_capacity_grows():
    rng = np.random.default_rng(5)
    train, test = rng.normal(size=(12, 2)), 4.0 * rng.normal(size=(10, 2))
    labels = rng.integers(0, 3, 12)
    data = scdp.SupervisedData(
        jnp.asarray(np.concatenate([train, test]), jnp.float32),
        jnp.asarray(np.unique(labels, return_inverse=True)[1], jnp.int32),
    )
    # One test slot, plenty of types; then plenty of test slots, one type slot. Widely spread test
    # points with a large alpha must open publications (types) within a few sweeps.
    for capacities, bit in (((1, 22), 1), ((10, 1), 2)):
        state = scdp.init(jax.random.key(0), train, labels, test, max_test_clusters=capacities[0],
                          max_types=capacities[1], alpha=50.0, alpha_types=50.0)
        for backend in available_backends():
            step = jax.jit(scdp.build_kernel(1, backend=backend))
            current = state
            for sweep in range(4):
                current, info = step(jax.random.key(sweep), current, data)
            assert int(current.overflow) == bit, (backend, capacities)
        grown = state.grow_after_overflow(current)
        slots, types = state.cluster_counts.shape[0], state.type_counts.shape[0]
        if bit == 1:
            assert grown.cluster_counts.shape[0] == 2 * slots and grown.means.shape[0] == 2 * slots
            assert grown.type_counts.shape[0] == types
        else:
            assert grown.type_counts.shape[0] == 2 * types and grown.precisions.shape[0] == 2 * types
            assert grown.cluster_counts.shape[0] == slots
        # The occupied slots are untouched; the new ones are empty.
        assert np.array_equal(grown.cluster_counts[:slots], state.cluster_counts)
        assert np.array_equal(grown.type_counts[:types], state.type_counts)
        assert int(grown.cluster_counts[slots:].sum()) == 0 and int(grown.type_counts[types:].sum()) == 0


def test_fit_grows_the_capacity_it_runs_out_of_and_keeps_going():
    rng = np.random.default_rng(6)
    train, test = rng.normal(size=(12, 2)), 4.0 * rng.normal(size=(10, 2))
    labels = rng.integers(0, 3, 12)
    model = SupervisedDP(1, alpha=20.0, alpha_prior=None, max_test_clusters=1, max_types=16)
    fit = model.fit(train, labels, test, key=jax.random.key(0), n_chains=2, n_sweeps=20, progress=False)
    final = fit.result.final_state
    assert final.means.shape[1] > 3 + 1  # publication slots grew beyond K_train + 1
    assert final.precisions.shape[1] == 16  # types never ran out: not grown
    assert not np.any(np.asarray(final.overflow))
    assert fit.result.samples["n_clusters"].max() > 1
    attributes = fit.idata.posterior.attrs  # on the posterior group, where zoo.report reads them
    assert attributes["n_warmup"] == 10 and attributes["inference_library"] == "latentzoo"


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="^backend: "):
        scdp.build_kernel(1, backend="gpu")


@pytest.mark.slow
@pytest.mark.parametrize("share_clusters", [False, True])
def test_scdp1_matches_enumerated_posterior_long(x64, share_clusters):
    exact = _exact_test_posterior(TRAIN, TRAIN_LABELS, TEST, share_clusters)
    sampled, _ = _sampled_test_posterior(
        TRAIN, TRAIN_LABELS, TEST, share_clusters, jax.random.key(4), n_chains=16, n_draws=4000
    )
    assert _total_variation(exact, sampled) < 0.02


# ----------------------------------------------------------------------------------------------
# Distances instead of coordinates
# ----------------------------------------------------------------------------------------------
def test_distance_path_gives_the_coordinate_posterior(x64):
    coordinates = np.concatenate([TRAIN, TEST])
    centred = coordinates - coordinates.mean(axis=0)
    distances = np.abs(centred[:, None, 0] - centred[None, :, 0])
    embedded = embed_distances(distances)
    assert np.allclose(np.abs(embedded), np.abs(centred), atol=1e-10)
    n_train = len(TRAIN)
    from_coordinates = _exact_test_posterior(centred[:n_train], TRAIN_LABELS, centred[n_train:], False)
    from_distances = _exact_test_posterior(embedded[:n_train], TRAIN_LABELS, embedded[n_train:], False)
    for partition, probability in from_coordinates.items():
        assert from_distances[partition] == pytest.approx(probability, abs=1e-9)


def test_embedding_of_several_features_recovers_each_one():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(12, 3))
    points -= points.mean(axis=0)
    distances = np.abs(points.T[:, :, None] - points.T[:, None, :])
    assert np.allclose(np.abs(embed_distances(distances)), np.abs(points), atol=1e-8)


@pytest.mark.parametrize(
    "matrix, message",
    [
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), ">= 0"),
        (np.array([[0.0, 1.0], [2.0, 0.0]]), "symmetric"),
        (np.array([[1.0, 1.0], [1.0, 0.0]]), "zero diagonal"),
        (np.zeros((2, 3)), "square"),
    ],
)
def test_bad_distances_are_rejected(matrix, message):
    with pytest.raises(ValueError, match=f"^distances: .*{message}"):
        embed_distances(matrix)
    with pytest.raises(ValueError, match="^distances: "):
        SupervisedDP().fit_distances(matrix, [0], key=jax.random.key(0))


# ----------------------------------------------------------------------------------------------
# Input validation
# ----------------------------------------------------------------------------------------------
def test_misaligned_training_labels_are_rejected():
    with pytest.raises(ValueError, match="^train_labels: expected one label per training point"):
        SupervisedDP().fit(TRAIN, ["a", "a", "b"], TEST, key=jax.random.key(0))


def test_missing_labels_are_named_by_their_row():
    for labels in ([0.0, np.nan], ["a", None]):
        with pytest.raises(ValueError, match=r"^train_labels: the label of row 1 is missing \(None or NaN\)$"):
            SupervisedDP().fit(TRAIN, labels, TEST, key=jax.random.key(0))


def test_minus_one_among_the_training_labels_is_a_class_with_a_warning():
    # SupervisedDPEstimator (zoo.sklearn) clusters the rows labelled -1, as scikit-learn's semi-supervised
    # estimators do; SupervisedDP takes -1 as one more training publication, and says so. The labels are
    # checked before anything runs: n_chains=0 is refused right after the warning.
    message = (r"^train_labels: 1 of 2 training labels are -1, which SupervisedDP takes as one more publication .*"
               r"zoo\.sklearn\.SupervisedDPEstimator is the interface where -1 marks the unlabelled rows to cluster")
    distances = np.abs(np.subtract.outer(np.r_[TRAIN[:, 0], TEST[:, 0]], np.r_[TRAIN[:, 0], TEST[:, 0]]))
    for fit in (lambda labels: SupervisedDP().fit(TRAIN, labels, TEST, jax.random.key(0), n_chains=0),
                lambda labels: SupervisedDP().fit_distances(distances, labels, key=jax.random.key(0), n_chains=0)):
        with pytest.warns(UserWarning, match=message) as caught, pytest.raises(ValueError, match="^n_chains"):
            fit(np.array([0, -1]))
        assert len([warning for warning in caught if "-1" in str(warning.message)]) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # other labels, and the text "-1", are not warned about
            for labels in ([0, 1], ["-1", "a"]):
                with pytest.raises(ValueError, match="^n_chains"):
                    fit(labels)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_dataframes_of_features_are_matched_to_the_training_features_by_column_name():
    # As scikit-learn's feature_names_in_: test features whose columns are the training features' in another
    # order are reordered to theirs (they were taken by position, in silence), other names refused, named.
    import pickle

    import pandas as pd

    from zoo.dirichlet.ties import TiedValuesWarning

    train, labels, test = _two_class_problem()
    model, key = SupervisedDP(1), jax.random.key(2)
    run = dict(n_chains=2, n_warmup=4, draws_per_call=2, progress=False)
    train_frame, test_frame = pd.DataFrame(train, columns=["x", "y"]), pd.DataFrame(test, columns=["x", "y"])
    in_arrays = model.fit(train, labels, test, key, n_draws=6, **run)
    named = pickle.loads(pickle.dumps(model.fit(train_frame, labels, test_frame[["y", "x"]], key, n_draws=6, **run)))
    assert named.feature_names == ("x", "y") and in_arrays.feature_names is None
    np.testing.assert_array_equal(named.assignments, in_arrays.assignments)
    # resume matches its features to the fit's names (the digest is of the fit's columns); arrays by position
    for train_given, test_given in ((train_frame[["y", "x"]], test_frame), (train, test)):
        resumed = named.resume(train_given, labels, test_given, n_draws=2, draws_per_call=2, progress=False)
        assert resumed.feature_names == ("x", "y") and resumed.idata.posterior.sizes["draw"] == 8
    renamed = test_frame.rename(columns={"y": "z"})
    with pytest.raises(ValueError, match=r"^test_features: its column names are not the feature names of "
                                         r"train_features \(missing 'y'; unexpected 'z'\); those of train_features "
                                         r"are 'x', 'y'$"):
        model.fit(train_frame, labels, renamed, key, n_draws=6, **run)
    with pytest.raises(ValueError, match=r"^test_features: its column names are not the feature names of the fit "
                                         r"\(missing 'y'; unexpected 'z'\)"):
        named.resume(train, labels, renamed, n_draws=2)
    with pytest.raises(ValueError, match=r"^train_features: its column names are not the feature names of the fit "
                                         r"\(missing 'y'; unexpected 'z'\)"):
        named.resume(train_frame.rename(columns={"y": "z"}), labels, test, n_draws=2)
    # The tied-values warning names the columns of a DataFrame, and the positions of an array's.
    rated = train_frame.assign(rating=np.r_[np.zeros(7), np.ones(3)])
    rated_test = test_frame.assign(rating=np.zeros(6))
    for given, shown in (((rated, rated_test), "'rating'"), ((rated.to_numpy(), rated_test.to_numpy()), "2")):
        with pytest.warns(TiedValuesWarning, match=rf"^train_features and test_features: 1 of 3 features .*"
                                                   rf"\(0 constant; columns {shown}\)\."), \
                pytest.raises(ValueError, match="^n_chains"):
            model.fit(given[0], labels, given[1], key, n_chains=0)


def test_feature_mismatch_and_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="^test_features: "):
        SupervisedDP().fit(TRAIN, TRAIN_LABELS, np.zeros((3, 2)), key=jax.random.key(0))
    with pytest.raises(ValueError, match="^train_features: "):
        SupervisedDP().fit(np.array([[np.nan], [0.0]]), TRAIN_LABELS, TEST, key=jax.random.key(0))
    with pytest.raises(ValueError, match="^model: "):
        SupervisedDP(model=4)
    with pytest.raises(ValueError, match="^prior_variance: "):
        SupervisedDP(prior_variance=-1.0)
    with pytest.raises(ValueError, match="^n_type_split_merge: SCDP-3"):
        SupervisedDP(3, n_type_split_merge=2)
    with pytest.raises(ValueError, match="^n_type_split_merge: "):
        SupervisedDP(1, n_type_split_merge=-1)
    with pytest.raises(ValueError, match="^n_precision_split_merge: only SCDP-3"):
        SupervisedDP(1, n_precision_split_merge=2)
    with pytest.raises(ValueError, match="^n_precision_split_merge: "):
        SupervisedDP(3, n_precision_split_merge=-1)
    with pytest.raises(TypeError, match="^n_precision_split_merge: "):
        SupervisedDP(3, n_precision_split_merge=2.5)
    assert SupervisedDP(3).n_precision_split_merge == 2 and SupervisedDP(2).n_precision_split_merge == 0
    # Type moves by default for SCDP-2 alone (build_kernel's docstring gives the measurements), and
    # a repr that shows only what was given.
    assert [SupervisedDP(model).n_type_split_merge for model in (1, 2, 3)] == [0, 5, 0]
    assert repr(SupervisedDP(2)) == "SupervisedDP(2)" and SupervisedDP(2, n_type_split_merge=0).n_type_split_merge == 0
    with pytest.raises(ValueError, match="^n_split_merge: "):
        SupervisedDP(1, n_split_merge=-1)
    with pytest.raises(TypeError, match="^n_split_merge: "):
        SupervisedDP(1, n_split_merge=2.5)
    with pytest.raises(ValueError, match="^pair_moves: SCDP-3"):
        SupervisedDP(3, pair_moves=True)
    with pytest.raises(TypeError, match="^pair_moves: "):
        SupervisedDP(1, pair_moves="yes")
    assert SupervisedDP(1).pair_moves and SupervisedDP(2).pair_moves and not SupervisedDP(3).pair_moves


def test_partners_are_the_nearest_other_test_reference_and_the_step_finds_the_same_without_them():
    rng = np.random.default_rng(4)
    train, test = rng.normal(size=(6, 3)), rng.normal(size=(9, 3))
    features = np.concatenate([train, test])
    partners = scdp.nearest_partners(features, 6)
    distances = ((test[:, None] - test[None]) ** 2).sum(-1) + np.diag(np.full(9, np.inf))
    assert (partners == 6 + distances.argmin(axis=1)).all() and partners.dtype == np.int32
    assert (scdp.state._nearest_partners_in_graph(jnp.asarray(features), 6) == partners).all()
    assert (scdp.nearest_partners(features[:7], 6) == [6]).all()  # one test reference: itself, never moved
    labels = [0, 0, 1, 1, 2, 2]
    state = scdp.init(jax.random.key(0), train, labels, test, max_test_clusters=9, max_types=15)
    step = jax.jit(scdp.build_kernel(1, backend="xla"))
    finals = []
    for given in (jnp.asarray(partners), None):
        data = scdp.SupervisedData(jnp.asarray(features, jnp.float32), jnp.asarray(labels, jnp.int32), given)
        current = state
        for sweep in range(5):
            current, _ = step(jax.random.key(sweep), current, data)
        finals.append(current)
    assert np.array_equal(finals[0].clusters, finals[1].clusters) and np.array_equal(finals[0].types, finals[1].types)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 3 draws
def test_the_default_split_merge_moves_grow_with_the_publications_the_training_data_lead_one_to_expect():
    from zoo.dirichlet.supervised import auto_split_merge

    # M · (training publications / training references) / 2, rounded up, between 10 and 100.
    assert auto_split_merge(505, 150, 367) == 55  # FEBRL records of notebooks/record_linkage.ipynb
    assert auto_split_merge(644, 5, 626) == 10  # the digits of notebooks/supervised_digits.ipynb
    assert auto_split_merge(100, 100, 10_000) == 100
    # Training publications of two references and 60 test references: 30 expected, 15 moves; the
    # kernel is built for that count once, and a refit of the same sizes reuses it.
    rng = np.random.default_rng(0)
    train, labels = rng.normal(size=(40, 2)), np.repeat(np.arange(20), 2)
    test = rng.normal(size=(60, 2))
    model = SupervisedDP(1)
    assert model.n_split_merge is None
    options = dict(n_chains=2, n_sweeps=6, progress=False)
    fit = model.fit(train, labels, test, key=jax.random.key(0), **options)
    assert fit._n_split_merge == 15
    moves = fit.result.samples["split_merge_accepted"]
    model.fit(train, labels, test, key=jax.random.key(1), **options)
    assert sorted(model._steps) == [10, 15]  # 10: built at construction, to check the settings
    # A count given is the count run, whatever the data.
    given = SupervisedDP(1, n_split_merge=15).fit(train, labels, test, key=jax.random.key(0), **options)
    assert given._n_split_merge == 15
    np.testing.assert_array_equal(given.result.samples["split_merge_accepted"], moves)
    np.testing.assert_array_equal(given.assignments, fit.assignments)


# ----------------------------------------------------------------------------------------------
# Trained beats untrained on data simulated from the program
# ----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _simulate(seed: int, n_points: int = 90):
    """Data from :func:`supervised_program` with two reference types that both ignore feature 2
    (low precision) and measure features 0 and 1 precisely."""
    precisions = np.array([[60.0, 30.0, 0.04], [30.0, 60.0, 0.04]])[None]
    draws = Predictive(
        supervised_program, posterior_samples={"precisions": precisions}, batch_ndims=1
    )(jax.random.key(seed), n_points=n_points, n_features=3, max_clusters=12, max_types=2, alpha=3.0,
      prior_variance=4.0)
    return np.asarray(draws["x"][0]), np.asarray(draws["clusters"][0]).ravel()


@pytest.mark.slow
def test_program_simulates_the_declared_structure():
    features, clusters = _simulate(0)
    assert features.shape == (90, 3)
    large = [k for k in np.unique(clusters) if (clusters == k).sum() > 3]
    within = np.mean([features[clusters == k].std(axis=0) for k in large], axis=0)
    assert within[2] > 10 * max(within[0], within[1])


@pytest.mark.slow
def test_trained_scdp1_beats_untrained_cdp():
    features, clusters = _simulate(1)
    labels = np.unique(clusters)
    test_clusters = labels[::2]
    is_test = np.isin(clusters, test_clusters)
    fit = SupervisedDP(1).fit(
        features[~is_test], clusters[~is_test], features[is_test], key=jax.random.key(0),
        n_chains=2, n_sweeps=200, progress=False,
    )
    supervised_f = fit.scores(clusters[is_test])["F"]
    untrained_f = clustering_scores(
        clusters[is_test], cdp_partition(features[is_test], key=jax.random.key(0), n_warmup=100, n_draws=100)
    )["F"]
    assert supervised_f > untrained_f + 0.2, (supervised_f, untrained_f)


# ----------------------------------------------------------------------------------------------
# SCDP-2 and SCDP-3 pieces
# ----------------------------------------------------------------------------------------------
def test_scdp2_prior_follows_the_spread_of_the_means(x64):
    means = np.array([[0.0, 1.0], [2.0, 1.0], [5.0, 1.0], [9.0, 9.0]])
    counts = np.array([3, 1, 2, 0])
    shape, rate = conditionals._separation_prior(jnp.asarray(means), jnp.asarray(counts), jnp.ones(2), jnp.ones(2) * 2.0)
    spread = (means[:3, 0] - means[:3, 0].mean()) ** 2
    prior_mean, prior_variance = 0.5 * spread.mean(), spread.var()
    # DM05 §5.1: a·s = half the mean variance, a·s² = the variance of the variance (s = 1 / rate).
    assert float(shape[0] / rate[0]) == pytest.approx(prior_mean)
    assert float(shape[0] / rate[0] ** 2) == pytest.approx(prior_variance)
    # Feature 1 has no spread among the active means: the base prior stays.
    assert (float(shape[1]), float(rate[1])) == (1.0, 2.0)


def test_scdp3_conditioning_is_the_sum_over_size_ordered_pairs(x64):
    rng = np.random.default_rng(0)
    means = rng.normal(size=(5, 3))
    counts = np.array([4, 0, 7, 1, 2])
    precision = rng.gamma(1.0, size=3)
    order = sorted(np.flatnonzero(counts), key=lambda k: -counts[k])
    brute = -sum(
        np.sum((means[order[j]] - means[order[k]]) ** 2 / precision) for j in range(len(order)) for k in range(j)
    )
    spread = conditionals._pair_spread(jnp.asarray(means), jnp.asarray(counts))
    assert float(conditionals._log_conditioning(jnp.asarray(precision), spread)) == pytest.approx(brute)


@pytest.mark.parametrize("model", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_scdp2_and_scdp3_sweeps_keep_a_consistent_state(model):
    step = jax.jit(scdp.build_kernel(model, alpha_prior=GammaPrior(1.0, 1.0)))
    rng = np.random.default_rng(0)
    train = rng.normal(size=(8, 2))
    test = rng.normal(size=(5, 2))
    labels = [0, 0, 1, 1, 2, 2, 2, 1]
    state = scdp.init(jax.random.key(0), train, labels, test, max_test_clusters=5, max_types=13)
    data = scdp.SupervisedData(jnp.asarray(np.concatenate([train, test]), jnp.float32), jnp.asarray(labels, jnp.int32))
    for sweep in range(5):
        state, info = step(jax.random.key(sweep), state, data)
    clusters, types = np.asarray(state.clusters), np.asarray(state.types)
    assert clusters[:8].tolist() == labels
    assert np.array_equal(np.bincount(clusters, minlength=8), np.asarray(state.cluster_counts))
    assert np.array_equal(np.bincount(types, minlength=13), np.asarray(state.type_counts))
    assert np.isfinite(float(info.log_joint)) and not bool(info.overflow)
    assert np.all(np.asarray(state.precisions)[np.asarray(state.type_counts) > 0] > 0)


# ----------------------------------------------------------------------------------------------
# Split–merge moves of the test partition
# ----------------------------------------------------------------------------------------------
def _log_integrated_partition(test_labels, test, point_precisions, train_means, coupling, alpha):
    """log p(c_test | t, p_train) up to a constant, the test means integrated in closed form: per
    feature a Gaussian integral over the K_t test means, whose precision matrix holds SCDP-3's
    pair terms -V Σ_{pairs} (p_j - p_k)² (DM05 eq. 3, V = Σ_l 1 / t_l; V = 0 for SCDP-1 and -2)."""
    labels = np.asarray(test_labels)
    n_test_clusters = labels.max() + 1
    n_train_clusters = train_means.shape[0]
    train_total, train_total_sq = train_means.sum(0), (train_means**2).sum(0)
    total = _log_crp(labels, alpha)
    for f in range(test.shape[1]):
        precision = np.diag(np.full(n_test_clusters, 1.0 / PRIOR_VARIANCE))
        precision += 2.0 * coupling[f] * ((n_train_clusters + n_test_clusters - 1) * np.eye(n_test_clusters))
        precision -= 2.0 * coupling[f] * (1.0 - np.eye(n_test_clusters))
        linear = np.full(n_test_clusters, 2.0 * coupling[f] * train_total[f])
        for k in range(n_test_clusters):
            members = labels == k
            precision[k, k] += point_precisions[members, f].sum()
            linear[k] += (point_precisions[members, f] * test[members, f]).sum()
        _, log_det = np.linalg.slogdet(precision)
        total += (-0.5 * n_test_clusters * math.log(PRIOR_VARIANCE) - 0.5 * log_det
                  + 0.5 * linear @ np.linalg.solve(precision, linear)
                  - coupling[f] * n_test_clusters * train_total_sq[f])
    return total


@pytest.mark.parametrize("model, alpha", [(1, 0.7), (3, 0.7), (3, 10.0)])
def test_split_merge_moves_alone_sample_the_exact_test_partition(x64, model, alpha):
    # Types and precisions fixed, training means fixed: the moves (with their redraws of the
    # means they touch) must sample p(c_test | t, p_train) with the test means integrated.
    # SCDP-3 at α = 10 puts mass on three and four test publications, whose moves condition on
    # the means of the others: redrawing the means of an accepted split from the merged
    # cluster's conditional (and a merged one's from one side's) gave TV 0.053 there.
    rng = np.random.default_rng(11)
    n_train, n_test, n_features = 3, 4, 2
    train = rng.normal(size=(n_train, n_features))
    test = np.array([[-1.2, 0.3], [-0.9, 0.1], [1.0, -0.4], [1.4, -0.2]])
    features = np.concatenate([train, test])
    labels = np.array([0, 1, 1])
    state = scdp.init(jax.random.key(0), train, labels, test, max_test_clusters=n_test, max_types=3,
                      test_clusters=np.zeros(n_test, np.int32))
    types = np.array([0, 1, 0, 1, 2, 2, 0])
    # SCDP-3's eq. 3 penalises spread means by exp(-V S), V = Σ_l 1 / t_l: with tighter types
    # the exact posterior is again mostly on two or more test publications.
    scale = 1.0 if model == 1 else 4.0
    precisions = scale * np.array([[2.0, 0.5], [0.8, 3.0], [1.5, 1.0]])
    state = state._replace(types=jnp.asarray(types, jnp.int32), type_counts=jnp.asarray(np.bincount(types), jnp.int32),
                           precisions=jnp.asarray(precisions))
    config = scdp.build_kernel(model, n_split_merge=1).args[0]
    carry = _Carry(state.clusters, state.cluster_counts, state.means, state.types, state.type_counts,
                        state.precisions, state.overflow)
    data = jnp.asarray(features)

    def chain(key):
        def one(carry, move_key):
            carry, _ = split_merge._split_merge_moves(config, move_key, carry, data, n_train, 2, jnp.asarray(alpha))
            return carry, carry.clusters[n_train:]
        return jax.lax.scan(one, carry, jax.random.split(key, 300))[1][50:]

    draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(1), 200))).reshape(-1, n_test)
    sampled = _frequencies(draws)
    coupling = (1.0 / precisions).sum(0) if model == 3 else np.zeros(n_features)
    point_precisions = precisions[types[n_train:]]
    log_target = {
        part: _log_integrated_partition(part, test, point_precisions, np.asarray(state.means[:2]), coupling, alpha)
        for part in _set_partitions(n_test)
    }
    exact = _normalised(log_target)
    assert sum(p for part, p in exact.items() if len(set(part)) >= 2) > 0.5
    assert _total_variation(exact, sampled) < 0.02


def _log_partition_and_mean_precision(test_labels, train, train_labels, train_means, test, alpha, types=None,
                                      n_grid=6000):
    """log p(c_test | p_train, d) up to a constant and E[t_0 | c_test, p_train, d] per feature
    (the precisions of type 0), for SCDP-3 with the reference types ``types`` fixed (default: one
    type for all): the test means integrated in closed form as in :func:`_log_integrated_partition`,
    then the types' precisions t_lf on a product grid in log t (``n_grid`` points per type;
    features are independent given the partition)."""
    labels = np.asarray(test_labels)
    n_train = len(train)
    types = np.zeros(n_train + len(test), int) if types is None else np.asarray(types)
    n_types = types.max() + 1
    n_test_clusters, n_train_clusters = labels.max() + 1, train_means.shape[0]
    axis = np.linspace(math.log(1e-4), math.log(1e3), n_grid)
    log_t = np.stack([grid.ravel() for grid in np.meshgrid(*([axis] * n_types), indexing="ij")], axis=1)  # (G, L)
    precision_grid = np.exp(log_t)
    coupling = (1.0 / precision_grid).sum(1)  # V = Σ_l 1 / t_l
    point_precisions = precision_grid[:, types]  # (G, N)
    counts = np.bincount(types, minlength=n_types)
    total, mean_precision = _log_crp(labels, alpha), []
    for f in range(test.shape[1]):
        means_f = train_means[:, f]
        data_f = np.concatenate([train[:, f] - means_f[train_labels], test[:, f]])  # residuals, then test values
        log_f = ((SHAPE * math.log(RATE) - gammaln(SHAPE) + (SHAPE - 1.0) * log_t - RATE * precision_grid).sum(1)
                 + 0.5 * (counts * log_t).sum(1) - 0.5 * point_precisions @ data_f**2
                 - coupling * (n_train_clusters * (means_f**2).sum() - means_f.sum() ** 2))
        precision = np.zeros((len(log_t), n_test_clusters, n_test_clusters))
        linear = np.zeros((len(log_t), n_test_clusters))
        for k in range(n_test_clusters):
            members = n_train + np.flatnonzero(labels == k)
            precision[:, k] = -2.0 * coupling[:, None]
            precision[:, k, k] = (1.0 / PRIOR_VARIANCE + point_precisions[:, members].sum(1)
                                  + 2.0 * coupling * (n_train_clusters + n_test_clusters - 1))
            linear[:, k] = point_precisions[:, members] @ data_f[members] + 2.0 * coupling * means_f.sum()
        _, log_det = np.linalg.slogdet(precision)
        quadratic = np.einsum("gk,gk->g", linear, np.linalg.solve(precision, linear[..., None])[..., 0])
        log_f += (-0.5 * n_test_clusters * math.log(PRIOR_VARIANCE) - 0.5 * log_det + 0.5 * quadratic
                  - coupling * n_test_clusters * (means_f**2).sum() + log_t.sum(1))  # + log t: the grid is in log t
        top = log_f.max()
        weights = np.exp(log_f - top)
        total += top + math.log(weights.sum() * (axis[1] - axis[0]) ** n_types)
        mean_precision.append((weights * precision_grid[:, 0]).sum() / weights.sum())
    return total, np.array(mean_precision)


@pytest.mark.parametrize("n_types, singleton", [(1, False), (2, False), (1, True), (2, True)])
def test_precision_moves_alone_sample_the_exact_partition_and_precisions(x64, n_types, singleton):
    # SCDP-3 with the reference types fixed (one for all, or two alternating), the training means
    # fixed: the split-merge moves that propose the precisions (with their redraws of the means
    # they touch) must sample p(c_test, t | p_train, d), checked on the test partition and on the
    # mean of type 0's precisions. At α = 10 most of the mass is on two or more test publications
    # with one type. Without the log-normal's Jacobian in the proposal density, one type: TV 0.14
    # and E[t] 1.31, 4.53 against 1.82, 5.26.
    rng = np.random.default_rng(11)
    train, train_labels = rng.normal(size=(3, 2)), np.array([0, 1, 1])
    test = np.array([[-1.2, 0.3], [-0.9, 0.1], [1.0, -0.4], [1.4, -0.2]])
    n_train, n_test, alpha = 3, 4, 10.0
    state = scdp.init(jax.random.key(0), train, train_labels, test, max_test_clusters=n_test, max_types=3,
                      test_clusters=np.zeros(n_test, np.int32))
    types = np.arange(n_train + n_test, dtype=np.int32) % n_types
    state = state._replace(types=jnp.asarray(types),
                           type_counts=jnp.asarray(np.bincount(types, minlength=3), jnp.int32),
                           precisions=jnp.full((3, 2), 2.0))
    config = scdp.build_kernel(3).args[0]
    carry = _Carry(state.clusters, state.cluster_counts, state.means, state.types, state.type_counts,
                   state.precisions, state.overflow)
    data = jnp.asarray(np.concatenate([train, test]))
    shape, rate = jnp.full(2, SHAPE), jnp.full(2, RATE)

    def chain(key):
        def one(carry, move_key):
            carry, _ = precision_moves._precision_move(config, move_key, carry, data, 2, jnp.log(alpha), shape, rate,
                                                       singleton=singleton)
            return carry, (carry.clusters[n_train:], carry.precisions[0])
        return jax.tree_util.tree_map(lambda leaf: leaf[50:], jax.lax.scan(one, carry, jax.random.split(key, 300))[1])

    clusters, precisions = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(1), 400))
    sampled = _frequencies(np.asarray(clusters).reshape(-1, n_test))
    train_means = np.asarray(state.means[:2])
    exact_terms = {part: _log_partition_and_mean_precision(part, train, train_labels, train_means, test, alpha, types,
                                                          n_grid=6000 if n_types == 1 else 300)
                   for part in _set_partitions(n_test)}
    exact = _normalised({part: term[0] for part, term in exact_terms.items()})
    assert sum(p for part, p in exact.items() if len(set(part)) >= 2) > (0.8 if n_types == 1 else 0.4)  # 0.84, 0.43
    total_variation = _total_variation(exact, sampled)
    assert total_variation < 0.02, total_variation
    expected = sum(exact[part] * term[1] for part, term in exact_terms.items())
    sampled_mean = np.asarray(precisions).reshape(-1, 2).mean(0)
    assert np.allclose(sampled_mean, expected, rtol=0.02), (sampled_mean, expected)


def _log_type_partition(types, residuals, alpha_types):
    """log p(d | c, p, r) up to a constant: the CRP of the types times, per type and feature, the
    residuals' likelihood with the precision integrated against Gamma(SHAPE, RATE)."""
    labels = np.asarray(types)
    total = _log_crp(labels, alpha_types)
    for label in np.unique(labels):
        members = residuals[labels == label]
        shape, rate = SHAPE + 0.5 * len(members), RATE + 0.5 * (members**2).sum(0)
        total += np.sum(SHAPE * math.log(RATE) - gammaln(SHAPE) + gammaln(shape) - shape * np.log(rate)
                        - 0.5 * len(members) * math.log(2 * math.pi))
    return total


@pytest.mark.parametrize("model, backend, alpha_types",
                         [(1, "numba", 0.6), (1, "numba", 3.0), (1, "xla", 3.0), (2, "xla", 3.0), (2, "numba", 3.0)])
def test_type_split_merge_moves_alone_sample_the_exact_type_partition(x64, model, backend, alpha_types):
    # Publications and their means fixed: the moves of the reference types must sample
    # p(d | c, p, r) with the precisions integrated; the precisions the step then draws for
    # every type are checked through the type of reference 0, whose precisions must have their
    # exact posterior mean. SCDP-2's moves (whose prior of the precisions changes every sweep, so
    # it is traced) run here on SCDP-1's prior.
    n_train, n_features = 3, 2
    train = np.array([[0.1, -0.2], [1.9, 1.1], [2.3, 0.7]])
    test = np.array([[-3.0, 0.0], [3.0, 0.2], [2.2, -1.4]])  # residuals 0, ±0.2 and ±3: two kinds of type
    labels = np.array([0, 1, 1])
    state = scdp.init(jax.random.key(0), train, labels, test, max_test_clusters=3, max_types=6,
                      test_clusters=np.array([0, 0, 1]))
    residuals = np.concatenate([train, test]) - np.asarray(state.means)[np.asarray(state.clusters)]
    config = scdp.build_kernel(model, n_type_split_merge=1, backend=backend).args[0]
    carry = _Carry(state.clusters, state.cluster_counts, state.means, state.types, state.type_counts,
                   state.precisions, state.overflow)
    shape, rate = state.precision_shape, state.precision_rate

    def chain(key):
        def one(carry, move_key):
            key_move, key_precisions = jax.random.split(move_key)
            carry, _ = split_merge._type_split_merge_moves(config, key_move, carry, jnp.asarray(residuals), shape,
                                                           rate, jnp.asarray(alpha_types))
            precisions, _ = conditionals._sample_precisions(key_precisions, jnp.asarray(residuals), carry.types,
                                                            carry.type_counts, shape, rate, 1)
            return carry, (carry.types, precisions[carry.types[0]])
        return jax.tree_util.tree_map(lambda leaf: leaf[50:], jax.lax.scan(one, carry, jax.random.split(key, 300))[1])

    types, precisions_of_0 = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(2), 400))
    sampled = _frequencies(np.asarray(types).reshape(-1, n_train + len(test)))
    exact = _normalised({part: _log_type_partition(part, residuals, alpha_types)
                         for part in _set_partitions(len(residuals))})
    assert sum(p for part, p in exact.items() if len(set(part)) >= 2) > 0.5
    total_variation = _total_variation(exact, sampled)
    assert total_variation < 0.05, total_variation  # 0.46 and 0.55 with the proposal terms left out
    # E[t_f of reference 0's type] = Σ_d p(d) (a + n/2) / (b + S_f / 2), n and S of 0's type in d.
    expected = np.zeros(n_features)
    for part, probability in exact.items():
        members = residuals[np.asarray(part) == part[0]]
        expected += probability * (SHAPE + 0.5 * len(members)) / (RATE + 0.5 * (members**2).sum(0))
    sampled_mean = np.asarray(precisions_of_0).reshape(-1, n_features).mean(0)
    assert np.allclose(sampled_mean, expected, rtol=0.03), (sampled_mean, expected)


@pytest.mark.numba
@pytest.mark.parametrize("model", [1, 3])
def test_numba_and_xla_split_merge_moves_give_the_same_chain(x64, model):
    # Three test groups and three training publications in 3-D; three chains start from one test
    # publication (the moves split it) and three from singletons (they merge). Both backends from
    # the same keys, the six chains vmapped.
    rng = np.random.default_rng(4)
    centres = 2.5 * rng.normal(size=(6, 3))
    train = np.concatenate([centres[c] + 0.5 * rng.normal(size=(5, 3)) for c in range(3)])
    test = np.concatenate([centres[c] + 0.5 * rng.normal(size=(8, 3)) for c in range(3, 6)])
    labels = np.repeat(np.arange(3), 5)
    starts = [np.zeros(24, np.int32)] * 3 + [np.arange(24, dtype=np.int32)] * 3
    states = stack_states([scdp.init(jax.random.key(c), train, labels, test, max_test_clusters=24, max_types=8,
                                     test_clusters=start) for c, start in enumerate(starts)])
    # Unit precisions (the groups' own scale), not init's start from the spread within the single
    # publication, which is too broad for any split to be accepted.
    states = states._replace(precisions=jnp.ones_like(states.precisions))
    features = jnp.asarray(np.concatenate([train, test]))
    keys = jax.random.split(jax.random.key(9), 6)
    finals = {}
    for backend in ("xla", "numba"):
        config = scdp.build_kernel(model, n_split_merge=15, backend=backend).args[0]

        def run(key, state):
            carry = _Carry(state.clusters, state.cluster_counts, state.means, state.types, state.type_counts,
                           state.precisions, state.overflow)

            def call(carry, call_key):
                carry, counted = split_merge._split_merge_moves(config, call_key, carry, features, 15, 3,
                                                                jnp.asarray(1.5))
                return carry, jnp.stack(counted)

            return jax.lax.scan(call, carry, jax.random.split(key, 4))

        finals[backend] = jax.jit(jax.vmap(run))(keys, states)
    (xla, xla_moves), (native, native_moves) = finals["xla"], finals["numba"]
    assert np.array_equal(xla_moves, native_moves)
    moves = np.asarray(xla_moves)  # (chain, call, [splits proposed, accepted, merges proposed, accepted])
    # The comparison covers accepted splits (from one publication) and merges (from singletons).
    assert moves[:3, :, 1].sum() >= 3 and moves[3:, :, 3].sum() >= 3, moves.sum(axis=1)
    assert np.array_equal(xla.clusters, native.clusters)
    assert np.array_equal(xla.cluster_counts, native.cluster_counts)
    assert np.array_equal(xla.overflow, native.overflow)
    assert np.allclose(xla.means, native.means, rtol=1e-9, atol=1e-12)


def _planted(seed: int, n_features: int = 8, n_per_cluster: int = 40):
    """Six well-separated publications simulated from :func:`supervised_program` (means N(0, 3²)
    per feature, two reference types of precision 4 and 16): three for training, three for test."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 3.0, (1, 6, n_features))
    precisions = np.array([[4.0] * n_features, [16.0] * n_features])[None]
    fractions = np.full((1, 5), 1.0 / 6.0) / (1.0 - np.arange(5)[None] / 6.0)  # equal sticks
    draws = Predictive(
        supervised_program,
        posterior_samples={name: jnp.asarray(value) for name, value in
                           (("means", means), ("precisions", precisions), ("cluster_fractions", fractions))},
        batch_ndims=1,
    )(jax.random.key(seed), n_points=6 * n_per_cluster, n_features=n_features, max_clusters=6, max_types=2,
      prior_variance=9.0)
    features, clusters = np.asarray(draws["x"][0]), np.asarray(draws["clusters"][0]).ravel()
    is_test = clusters >= 3
    return features[~is_test], clusters[~is_test], features[is_test], clusters[is_test]


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 30 draws: ESS < 400
@pytest.mark.parametrize("start", ["single", "singletons"])
@pytest.mark.parametrize("model", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)])
def test_planted_test_publications_are_recovered(model, start):
    train, train_labels, test, test_labels = _planted(0)
    assert len(np.unique(test_labels)) == 3
    fit = SupervisedDP(model, prior_variance=9.0).fit(
        train, train_labels, test, key=jax.random.key(1), n_chains=2, n_sweeps=60, init=start, progress=False
    )
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(test_labels, fit.point_estimate()) >= 0.9
    # Every chain found the planted number of publications by the end.
    assert np.all(fit.result.samples["n_clusters"][:, -1] == 3), fit.result.samples["n_clusters"][:, -5:]


def test_the_default_fit_runs_until_the_test_partition_mixes_and_stops_there():
    # Given neither n_sweeps nor until_mixed (since 2026-12-04, as DPMixture.fit): 500 warm-up
    # sweeps, then draws until every label-invariant quantity mixes, 4,000 at most; given
    # until_mixed=False alone, the fixed 1,000 sweeps of before.
    from inference.diagnostics import MixingWarning, mixes
    from zoo.dirichlet.supervised.fit import DEFAULT_SWEEPS, UNTIL_MIXED_DRAWS

    train, train_labels, test, _ = _planted(0)
    model = SupervisedDP(1, prior_variance=9.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)  # it ends mixing: no warning
        fit = model.fit(train, train_labels, test, key=jax.random.key(1), n_chains=2, init="single", progress=False)
    assert fit.result.n_warmup == DEFAULT_SWEEPS // 2 and fit.result.completed
    assert fit.result.n_draws < UNTIL_MIXED_DRAWS and mixes(fit.mixing), fit.mixing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fixed = model.fit(train, train_labels, test, key=jax.random.key(1), n_chains=2, until_mixed=False,
                          progress=False)
    assert (fixed.result.n_warmup, fixed.result.n_draws) == (DEFAULT_SWEEPS // 2, DEFAULT_SWEEPS // 2)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 3 draws
@pytest.mark.parametrize("model", [1, 2, 3])
def test_a_start_partition_survives_the_first_sweeps_whatever_the_data_scale(model):
    # Many small, tight publications (within-publication sd 0.05, as record linkage gives): a
    # chain started at the truth (as the mixing advice's restarts start from a chain's last
    # partition) must still hold it after its first sweeps. With unit starting precisions the
    # first sweep merged them (ARI 0.2-0.4 with SCDP-1, 0 with SCDP-3; 87 -> 30 publications on
    # the FEBRL records).
    rng = np.random.default_rng(0)
    centres = rng.normal(0.0, 1.0, (40, 4))
    labels = np.repeat(np.arange(40), 3)
    features = centres[labels] + 0.05 * rng.normal(size=(120, 4))
    train, test = features[:60], features[60:]
    from sklearn.metrics import adjusted_rand_score

    fit = SupervisedDP(model, n_split_merge=0, n_precision_split_merge=0).fit(
        train, labels[:60], test, key=jax.random.key(0), n_chains=2, n_sweeps=3, n_warmup=0,
        init=labels[60:], progress=False)
    for chain in fit.assignments:
        assert adjusted_rand_score(labels[60:], chain[0]) >= 0.95
        assert adjusted_rand_score(labels[60:], chain[-1]) >= 0.95


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 20 draws: ESS < 400
def test_summary_says_when_chains_stay_where_they_started():
    # Without split–merge or pair moves a chain started with both test groups in one publication
    # stays there, and one started at the truth stays there too: the summary must say so.
    from inference.diagnostics import MixingWarning

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 1.5, (4, 16))
    train = np.concatenate([centres[0] + 0.3 * rng.normal(size=(30, 16)), centres[1] + 0.3 * rng.normal(size=(30, 16))])
    test = np.concatenate([centres[2] + 0.3 * rng.normal(size=(30, 16)), centres[3] + 0.3 * rng.normal(size=(30, 16))])
    truth = np.repeat([0, 1], 30)
    starts = np.stack([np.zeros(60, int), truth])
    with pytest.warns(MixingWarning, match="n_clusters"):
        fit = SupervisedDP(1, n_split_merge=0, pair_moves=False).fit(
            train, truth, test, key=jax.random.key(0), n_chains=2, n_sweeps=40, init=starts, progress=False)
    assert fit.result.samples["n_clusters"][:, -1].tolist() == [1, 2]
    table = fit.mixing
    assert table.loc["n_clusters", "status"] == "chains disagree"
    assert table.loc["n_clusters", "r_hat"] == np.inf
    assert "sub-cluster" not in table.attrs["advice"]  # a sampler SupervisedDP does not have
    with warnings.catch_warnings():  # fit warned already; summary() does not repeat it
        warnings.simplefilter("error", MixingWarning)
        assert fit.summary().equals(table)
    # With the moves (the default) both chains find the two test publications; so do the pair
    # moves alone (a close pair of the other group opens a publication, and its group follows).
    for n_split_merge in (None, 0):
        fit = SupervisedDP(1, n_split_merge=n_split_merge).fit(train, truth, test, key=jax.random.key(0), n_chains=2,
                                                                n_sweeps=40, init=starts, progress=False)
        assert fit.result.samples["n_clusters"][:, -1].tolist() == [2, 2]
    # One chain warns too (split R-hat), as its card says; it was silent.
    with pytest.warns(MixingWarning, match="^The chain does NOT mix"):
        single = SupervisedDP(1).fit(train, truth, test, key=jax.random.key(0), n_chains=1, n_sweeps=40,
                                     progress=False)
    assert "The chain does NOT mix" in repr(single)


def _two_class_problem():
    """Ten training points of two classes and six test points, 2-D, standard normal (seed 0)."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(10, 2)), [0] * 5 + [1] * 5, rng.normal(size=(6, 2))


def _stored_draws(rng, n_draws, **overrides):
    """Draws of two chains as SupervisedDPFit reads them (6 test points), random where not given."""
    shape = (2, n_draws)
    samples = {
        "assignments": rng.integers(0, 3, shape + (6,)),
        "alpha": rng.gamma(2.0, 1.0, shape),
        "alpha_types": rng.gamma(2.0, 1.0, shape),
        "n_clusters": rng.integers(2, 4, shape),
        "n_types": np.ones(shape, int),
        "log_joint": rng.normal(0.0, 1.0, shape),
    }
    return samples | overrides


def test_mixing_advice_names_the_type_moves_when_the_types_do_not_mix():
    # Each chain keeps its own number of types (as SCDP-1's chains did on the digits without the
    # type moves): the advice points at n_type_split_merge, and never at a sampler SCDP lacks.
    from inference.chains import ChainResult
    from inference.diagnostics import MixingWarning
    from zoo.dirichlet.supervised import SupervisedDPFit
    from zoo.report import report_html

    rng = np.random.default_rng(0)
    n_chains, n_draws = 2, 60
    samples = _stored_draws(rng, n_draws, n_types=np.repeat([[7], [9]], n_draws, axis=1))
    result = ChainResult(samples, None, 0, 1, True, 0.0)
    for settings, names_type_moves in (({"model": 1, "n_type_split_merge": 0}, True),
                                       ({"model": 2, "n_type_split_merge": 0}, True),
                                       ({"model": 1, "n_type_split_merge": 5}, False),
                                       ({"model": 3, "n_type_split_merge": 0}, False),
                                       ({}, False)):
        fit = SupervisedDPFit(result, **settings)
        assert fit.mixing.loc["n_types", "status"] == "chains disagree"
        advice = fit.mixing.attrs["advice"]
        assert ("n_type_split_merge" in advice) == names_type_moves, settings
        assert "sub-cluster" not in advice and "n_split_merge" in advice
        with pytest.warns(MixingWarning) as caught:
            fit.summary()
        assert str(caught[0].message).endswith(advice)
        assert html.escape(advice) in report_html(fit)  # the HTML report's verdict says the same
    # Chains run without pair moves whose K does not mix are told of them; with them, or with
    # the setting unknown (fits saved before it was kept), or for SCDP-3, they are not.
    samples_k = dict(samples, n_clusters=np.repeat([[3], [5]], n_draws, axis=1))
    result_k = ChainResult(samples_k, None, 0, 1, True, 0.0)
    for settings, names_pair_moves in (({"model": 1, "pair_moves": False}, True),
                                       ({"model": 2, "pair_moves": False}, True),
                                       ({"model": 1, "pair_moves": True}, False),
                                       ({"model": 3, "pair_moves": False}, False),
                                       ({"model": 1}, False)):
        assert ("pair_moves=True" in SupervisedDPFit(result_k, **settings).mixing.attrs["advice"]) == names_pair_moves
    # Types that differ little between chains (R-hat below 1.1) are no reason for the moves.
    samples["n_types"] = rng.integers(7, 9, (n_chains, n_draws))
    table = SupervisedDPFit(result, model=1, n_type_split_merge=0).mixing
    assert table.loc["n_types", "status"] in ("not mixing", "few effective draws")  # ESS < 400
    assert table.loc["n_types", "r_hat"] < 1.1
    assert "n_type_split_merge" not in table.attrs["advice"]


def test_mixing_advice_does_not_ask_for_more_of_moves_that_were_never_accepted():
    # SCDP-3 on the dequantised digits: no test move accepted in any kept draw, one chain held 559
    # nats lower by its precisions. Asking for more moves would not help; a restart from the
    # chains' last partitions did.
    from inference.chains import ChainResult
    from inference.diagnostics import MixingWarning
    from zoo.dirichlet.supervised import SupervisedDPFit

    rng = np.random.default_rng(1)
    n_draws = 50
    samples = _stored_draws(rng, n_draws, n_clusters=np.repeat([[8], [9]], n_draws, axis=1),
                            log_joint=rng.normal(0.0, 1.0, (2, n_draws)) + [[-559.0], [0.0]],
                            split_merge_accepted=np.zeros((2, n_draws), np.int32))
    result = ChainResult(samples, None, 0, 1, True, 0.0)
    advice = SupervisedDPFit(result, model=3, n_split_merge=10).mixing.attrs["advice"]
    assert advice.startswith("No split-merge move of the test publications was accepted (10 per sweep, 0 of 1,000 ")
    assert "init=fit.assignments[:, -1]" in advice and "more split-merge moves" not in advice
    with pytest.warns(MixingWarning) as caught:
        SupervisedDPFit(result, model=3, n_split_merge=10).summary()
    assert str(caught[0].message).endswith(advice)
    # One accepted move, no moves run, or settings unknown: the usual advice.
    samples["split_merge_accepted"][1, 7] = 1
    for fit in (SupervisedDPFit(result, model=3, n_split_merge=10), SupervisedDPFit(result, model=3, n_split_merge=0),
                SupervisedDPFit(result, model=3)):
        assert fit.mixing.attrs["advice"].startswith("Run longer, or again with more split-merge moves")
    samples["split_merge_accepted"][1, 7] = 0
    assert SupervisedDPFit(result, model=3, n_split_merge=0).mixing.attrs["advice"].startswith("Run longer")
    # No move accepted, but the chains agree on the log joint and K (as SCDP-3's on the digits since its
    # moves with precisions, where only the entropy of the sizes mixed slowly): more sweeps, not
    # restarts.
    samples["log_joint"] = rng.normal(0.0, 1.0, (2, n_draws))
    samples["n_clusters"] = np.full((2, n_draws), 9)
    agreeing = SupervisedDPFit(result, model=3, n_split_merge=12).mixing
    assert float(agreeing.loc["log_joint", "r_hat"]) <= 1.01
    assert agreeing.attrs["advice"].startswith("No split-merge move of the test publications was accepted (12 per "
                                               "sweep, 0 of 1,200 in the kept draws), so more of them will not help; "
                                               "the chains agree on the log joint")
    assert "run more sweeps" in agreeing.attrs["advice"] and "init=" not in agreeing.attrs["advice"]


def test_new_models_of_the_same_settings_reuse_the_compiled_sampler():
    # Each new SupervisedDP(...) compiled its sweeps again (9-11 s for a small fit on 2 cores).
    from inference.chains import _run_calls_jit

    assert SupervisedDP(2)._step(10) is SupervisedDP(2)._step(10)
    assert SupervisedDP(2)._step(10) is not SupervisedDP(2, prior_variance=2.0)._step(10)
    assert SupervisedDP(1)._step(10) is not SupervisedDP(1)._step(11)
    train, labels, test = _two_class_problem()
    fit = lambda: SupervisedDP(1).fit(train, labels, test, key=jax.random.key(0), n_chains=2,  # noqa: E731
                                      n_sweeps=4, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = fit()
        compiled = _run_calls_jit.cache_size()
        second = fit()
    assert _run_calls_jit.cache_size() == compiled  # no new compilation
    np.testing.assert_array_equal(first.assignments, second.assignments)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
@pytest.mark.filterwarnings("ignore::zoo.dirichlet.ties.TiedValuesWarning")
def test_resume_continues_the_chains_as_one_longer_run():
    import pickle

    from zoo.dirichlet.supervised import SupervisedDPFit

    train, labels, test = _two_class_problem()
    model, key = SupervisedDP(1), jax.random.key(2)
    run = dict(key=key, n_chains=2, n_warmup=4, draws_per_call=2, progress=False)
    whole = model.fit(train, labels, test, n_sweeps=10, **run)  # 4 warm-up sweeps, 6 draws
    first = model.fit(train, labels, test, n_sweeps=6, **run)
    resumed = pickle.loads(pickle.dumps(first)).resume(train, labels, test, n_draws=4, draws_per_call=2,
                                                       progress=False)
    with pytest.warns(RuntimeWarning, match=r"before their first draw.*fit\.resume\(train_features"):
        stopped = model.fit(train, labels, test, n_sweeps=10, time_budget=1e-9, **run)  # half the warm-up
    assert stopped.result.next_sweep == 2 and not stopped.result.samples
    finished = stopped.resume(train, labels, test, n_draws=6, draws_per_call=2, progress=False)
    for fit in (resumed, finished):
        for name, values in whole.result.samples.items():
            np.testing.assert_array_equal(fit.result.samples[name], values)
        assert fit.result.next_sweep == 10 and fit.result.n_warmup == 4 and fit.idata.posterior.sizes["draw"] == 6
    # 6 draws cannot reach a bulk ESS of 400: the advice names the call that continues the chains.
    assert ("Run longer (fit.resume(train_features, train_labels, test_features, n_draws=..., until_mixed=True) "
            "continues these chains), or again with more split-merge moves") in whole.mixing.attrs["advice"]
    with pytest.raises(ValueError, match="^train_features, train_labels and test_features: not the data"):
        first.resume(train, labels, test + 1.0, n_draws=2)
    with pytest.raises(ValueError, match="^n_draws"):
        first.resume(train, labels, test, n_draws=0)
    with pytest.raises(ValueError, match="^fit: only a fit returned by SupervisedDP.fit"):
        SupervisedDPFit(first.result).resume(train, labels, test, n_draws=2)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_the_length_as_kept_draws_is_the_same_run_as_in_sweeps_and_the_key_may_be_positional():
    # As DPMixture.fit and the command line's --draws: n_draws draws after n_warmup sweeps (500 by
    # default), n_sweeps the older form with the warm-up included; the model's compiled sampler serves both.
    train, labels, test = _two_class_problem()
    model, key = SupervisedDP(1), jax.random.key(2)
    run = dict(n_chains=2, n_warmup=4, draws_per_call=2, progress=False)
    in_sweeps = model.fit(train, labels, test, key=key, n_sweeps=10, **run)
    in_draws = model.fit(train, labels, test, key, n_draws=6, **run)
    assert in_draws.result.n_warmup == 4 and in_draws.idata.posterior.sizes["draw"] == 6
    view = in_draws.label_invariant().posterior  # for ArviZ: what mixing judges, with the fit's attributes
    assert list(view.data_vars) == list(in_draws.mixing.index) and view.attrs["n_warmup"] == 4
    for name, values in in_sweeps.result.samples.items():
        np.testing.assert_array_equal(in_draws.result.samples[name], values)
    thinned = model.fit(train, labels, test, key, n_draws=3, thin=2, **run)
    assert thinned.result.next_sweep == 10 and thinned.idata.posterior.sizes["draw"] == 3
    import pandas as pd  # test rows with labels of their own name the draws' points (ArviZ's coords)

    named = model.fit(train, labels, pd.DataFrame(test, index=[f"r{i}" for i in range(6)]), key, n_draws=6, **run)
    assert list(named.idata.posterior.points.values) == [f"r{i}" for i in range(6)]
    np.testing.assert_array_equal(named.assignments, in_draws.assignments)
    with pytest.raises(ValueError, match="^n_draws, n_sweeps: give one length, not both"):
        model.fit(train, labels, test, key, n_draws=6, n_sweeps=10)
    with pytest.raises(ValueError, match="^n_draws"):
        model.fit(train, labels, test, key, n_draws=0)


def test_mixing_advice_for_chains_at_one_height_in_different_partitions():
    # As SCDP-1 on FEBRL's records: every chain's number of test publications moves, but one chain
    # stays a publication short of the other at the same log joint. Longer runs and more moves did
    # not join such chains there, so the advice says so instead of asking for them.
    from inference.chains import ChainResult
    from zoo.dirichlet.supervised import SupervisedDPFit

    rng = np.random.default_rng(1)
    n_draws = 200
    k = np.stack([92 + rng.integers(0, 2, n_draws), 91 + rng.integers(0, 2, n_draws)])
    samples = _stored_draws(rng, n_draws, n_clusters=k, log_joint=rng.normal(2120.0, 50.0, (2, n_draws)))
    table = SupervisedDPFit(ChainResult(samples, None, 0, 1, True, 0.0), model=1).mixing
    assert table.loc["n_clusters", "status"] == "not mixing" and table.loc["n_clusters", "r_hat"] > 1.1
    advice = table.attrs["advice"]
    assert advice.startswith("The chains reach the same height") and "FEBRL" in advice
    assert "sub-cluster" not in advice and "92.5, 91.5" in advice
    # Chains in separate modes (500 nats apart) are told to run longer, as before.
    apart = dict(samples, log_joint=samples["log_joint"] + np.array([[0.0], [-500.0]]))
    advice = SupervisedDPFit(ChainResult(apart, None, 0, 1, True, 0.0), model=1).mixing.attrs["advice"]
    assert "same height" not in advice and advice.startswith("Run longer")
    # So are short runs, which look the same (SupervisedDP(1) on the iris data, reported with 4 chains
    # of 50 draws, was told that longer runs did not join such chains; its default run mixed at 1,380
    # draws): 2 chains of 60 draws cannot reach a bulk ESS of 400, so their agreement on the log joint
    # bears nothing out.
    short = {name: values[:, :60] for name, values in samples.items()}
    table = SupervisedDPFit(ChainResult(short, None, 0, 1, True, 0.0), model=1).mixing
    assert table.loc["n_clusters", "r_hat"] > 1.1 and table.loc["log_joint", "r_hat"] < 1.1
    assert "same height" not in table.attrs["advice"] and table.attrs["advice"].startswith("Run longer")


def test_until_mixed_wants_enough_draws_before_a_constant_ends_the_run():
    # As DPMixture's (inference.diagnostics.mixes_to_stop): draws in which nothing moved end an
    # until-mixed run only once the chains hold 400 in all; a few did at the first question before.
    from inference.chains import ChainResult

    model = SupervisedDP(1)
    stop = model._when_mixed(model._step(10))
    for n_draws, stops in ((20, False), (199, False), (200, True)):
        constant = {name: np.ones((2, n_draws), int) for name in ("alpha", "alpha_types", "n_clusters", "n_types")}
        samples = constant | {"assignments": np.zeros((2, n_draws, 6), int), "log_joint": np.full((2, n_draws), -3.5)}
        assert stop(ChainResult(samples, None, 0, 1, True, 0.0)) is stops, n_draws


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_a_pickled_fit_that_does_not_mix_warns_again_in_its_summary():
    # Whether the fit had issued its warning was pickled with it: loaded in a new session, summary()
    # said nothing of chains that do not mix.
    import pickle

    from inference.diagnostics import MixingWarning

    train, labels, test = _two_class_problem()
    fit = SupervisedDP(1).fit(train, labels, test, jax.random.key(0), n_chains=2, n_draws=6, n_warmup=4,
                              progress=False)
    assert fit._warned
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        fit.summary()  # not twice in one session
    with pytest.warns(MixingWarning):
        pickle.loads(pickle.dumps(fit)).summary()
    assert fit._warned


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_shared_publications_say_which_training_class_a_test_reference_joined():
    # The point estimate numbers publications afresh; training_shares names the training ones.
    from zoo.dirichlet.supervised import SupervisedDPFit

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 1.5, (3, 16))
    train = np.concatenate([centres[0] + 0.3 * rng.normal(size=(30, 16)), centres[1] + 0.3 * rng.normal(size=(30, 16))])
    test = np.concatenate([centres[0] + 0.3 * rng.normal(size=(8, 16)), centres[2] + 0.3 * rng.normal(size=(8, 16))])
    labels = ["b"] * 30 + ["a"] * 30  # codes in sorted order: "a" is publication 0, the second class
    fit = SupervisedDP(1, share_clusters=True).fit(train, labels, test, key=jax.random.key(0), n_chains=2,
                                                   n_sweeps=60, progress=False)
    shares = fit.training_shares()
    assert list(shares.columns) == ["a", "b", "new"] and shares.shape == (16, 3)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    assert (shares["b"][:8] > 0.9).all() and (shares["new"][8:] > 0.9).all()
    with pytest.raises(ValueError, match=r"^share_clusters: this model keeps test references out"):
        SupervisedDP(1).fit(train, labels, test, key=jax.random.key(0), n_chains=1, n_sweeps=4,
                            progress=False).training_shares()
    with pytest.raises(ValueError, match=r"^fit: only a fit returned by SupervisedDP.fit"):
        SupervisedDPFit(fit.result).training_shares()

