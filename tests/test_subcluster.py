"""Tests for inference.subcluster: the exact sub-cluster split/merge sampler (Chang & Fisher 2013).

Exactness: on four to six points every set partition is enumerated and the exact posterior
p(z | x) ∝ CRP(z | α) Π_k f(x_k) (α fixed, or integrated against its Gamma prior) is computed with
the helpers of ``tests/test_neal.py``. The draws of many chains must match it in total variation:
TV < ``TV_LIMIT`` = 0.03, after checking that the Monte Carlo noise of that TV (from the exact
probabilities, budgeting an integrated autocorrelation time of 4 sweeps) is below
``NOISE_LIMIT`` = 0.012, so a real error of a few percent cannot hide in the noise. Two
deliberately broken Hastings ratios — the published CF13 ratios without this implementation's
link probabilities, and the Pólya-urn probability off by its factor 2 — must fail the same
check (they give TV ≈ 0.5 and ≈ 0.2 on the four-point problem).

Recovery: 5 well-separated 4-D Gaussian clusters from a one-cluster start (2,000 points in the
slow test, 500 in the fast one) must reach ARI >= 0.95 within a few dozen sweeps and stay there.

Kernel: jit without recompilation, vmap over chains equal to separate chains, same key same
bits, capacity overflow and growth, keepers that never empty a cluster, DPMixture and ArviZ.
"""

from __future__ import annotations

import math
import time
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from inference import neal, subcluster
from inference.chains import record_gibbs, sample_chains, stack_states
from inference.concentration import GammaPrior
from test_neal import (
    DATA_4,
    DATA_6,
    FAMILY_1D,
    check_log_joint_and_stats,
    empirical_tv,
    exact_posterior,
    expected_tv_noise,
)
from zoo.dirichlet.families import beta_bernoulli, custom_family, dirichlet_multinomial, normal_gamma
from zoo.dirichlet.known_precision import normal_known_precision
from zoo.dirichlet.mixture import DPMixture

TV_LIMIT = 0.03
NOISE_LIMIT = 0.012
INTEGRATED_AUTOCORRELATION = 4.0
BINARY_5 = np.array([[1, 0, 1], [1, 0, 0], [0, 1, 0], [0, 1, 1], [1, 1, 1]], dtype=float)
COUNTS_5 = np.array([[3, 0, 1], [2, 1, 0], [0, 2, 2], [0, 3, 1], [1, 1, 1]], dtype=float)


# ----------------------------------------------------------------------------- exactness
def record_moves(state, info):
    """record_gibbs plus the accepted splits and merges of the step."""
    return {**record_gibbs(state, info), "splits": info.splits_accepted, "merges": info.merges_accepted}


@lru_cache(maxsize=None)
def cached_step(family, alpha_prior=None, n_sub_iterations=4):
    return subcluster.build_kernel(family, alpha_prior=alpha_prior, n_sub_iterations=n_sub_iterations)


def run_chains(step, family, data, *, alpha, n_chains, n_draws, seed):
    # float32 points: the working precision, as in tests/test_neal.py.
    data = np.asarray(data, dtype=np.float32)
    states = stack_states(
        [
            subcluster.init(jax.random.key(chain), data, family, max_clusters=len(data), alpha=alpha,
                            assignments=np.arange(len(data)) % (1 + chain % 3))
            for chain in range(n_chains)
        ]
    )
    return sample_chains(jax.random.key(seed), step, states, jnp.asarray(data), n_warmup=50, n_draws=n_draws,
                         draws_per_call=500, progress=False, record=record_moves)


def partition_tv(step, family, data, *, alpha=1.0, alpha_prior=None, n_chains=16, n_draws=4000, seed=0):
    """(TV, expected noise, result) of a kernel's draws against the enumerated posterior."""
    prior_pair = None if alpha_prior is None else (alpha_prior.shape, alpha_prior.rate)
    exact = exact_posterior(family, data, alpha=alpha, alpha_prior=prior_pair)
    noise = expected_tv_noise(exact.values(), n_chains * n_draws / INTEGRATED_AUTOCORRELATION)
    assert noise < NOISE_LIMIT, "too few draws for the test to be able to fail"
    result = run_chains(step, family, data, alpha=alpha, n_chains=n_chains, n_draws=n_draws, seed=seed)
    return empirical_tv(result.samples["assignments"], exact), noise, result


def check_exact(family, data, *, alpha=1.0, alpha_prior=None, n_chains=16, n_draws=4000, seed=0,
                n_sub_iterations=4):
    step = cached_step(family, alpha_prior, n_sub_iterations)
    tv, noise, result = partition_tv(step, family, data, alpha=alpha, alpha_prior=alpha_prior, n_chains=n_chains,
                                     n_draws=n_draws, seed=seed)
    print(f"{family.name}, {len(data)} points: total variation {tv:.4f} (noise budget {noise:.4f})")
    assert tv < TV_LIMIT, f"total variation {tv:.4f} (expected noise {noise:.4f})"
    splits, merges = int(result.samples["splits"].sum()), int(result.samples["merges"].sum())
    # Both kinds of move happen, and in equilibrium they balance (each split is undone by a merge).
    assert splits > 100 and merges > 100
    assert abs(splits - merges) <= 3 * math.sqrt(splits + merges) + n_chains * len(data)
    return result


def test_exact_partition_posterior_normal_gamma():
    result = check_exact(FAMILY_1D, DATA_4, alpha=0.8)
    check_log_joint_and_stats(FAMILY_1D, DATA_4, result)
    assert np.all(result.samples["alpha"] == np.float32(0.8))


def test_exact_partition_posterior_known_precision():
    check_exact(normal_known_precision(1, precision=2.0, mean=0.2, prior_variance=1.5), DATA_4, alpha=0.8, seed=6)


def test_exact_partition_posterior_beta_bernoulli_four_points():
    # One sub-cluster iteration: exactness does not depend on it, and the Beta draws are the slow
    # part of this family's step on CPU.
    check_exact(beta_bernoulli(3, a=0.6, b=0.9), BINARY_5[:4], alpha=1.1, seed=2, n_sub_iterations=1)


@pytest.mark.slow
def test_exact_partition_posterior_slow_cases():
    family = beta_bernoulli(3, a=0.6, b=0.9)
    result = check_exact(family, BINARY_5, alpha=1.1, n_chains=32, n_draws=6000, seed=3)
    check_log_joint_and_stats(family, BINARY_5, result)
    check_exact(FAMILY_1D, DATA_6, alpha=1.3, n_chains=64, n_draws=9000, seed=4)
    check_exact(dirichlet_multinomial(3, concentration=0.8), COUNTS_5, alpha=0.9, n_chains=32, n_draws=6000, seed=5)


@pytest.mark.slow
def test_exact_partition_posterior_alpha_resampled():
    prior = GammaPrior(2.0, 1.5)
    result = check_exact(FAMILY_1D, DATA_4, alpha=0.8, alpha_prior=prior, n_chains=32, n_draws=5000, seed=6)
    assert np.unique(result.samples["alpha"]).size > 1000


def drop_link_ratio(log_link_fraction, n, n_points):
    """The published CF13 ratios: no probability of the links that pair the moves."""
    return jnp.zeros_like(log_link_fraction)


def urn_without_both_labellings(n_a, n_o, alpha, original=subcluster._log_urn_probability):
    """The Pólya-urn probability of one labelling instead of both."""
    return original(n_a, n_o, alpha) - math.log(2.0)


BROKEN = {"links": ("_log_link_ratio", drop_link_ratio), "urn": ("_log_urn_probability", urn_without_both_labellings)}


@pytest.mark.parametrize("broken", ["links", pytest.param("urn", marks=pytest.mark.slow)])
def test_broken_hastings_ratio_fails_the_exactness_check(monkeypatch, broken):
    name, replacement = BROKEN[broken]
    monkeypatch.setattr(subcluster, name, replacement)
    # Kernels of equal settings are one step object (inference.step_cache), which sample_chains
    # compiles once: trace it again with the broken ratio (and again after it, unbroken).
    jax.clear_caches()
    try:
        tv, noise, _ = partition_tv(subcluster.build_kernel(FAMILY_1D), FAMILY_1D, DATA_4, alpha=0.8, seed=7)
    finally:
        jax.clear_caches()
    print(f"broken {broken}: total variation {tv:.4f} (noise budget {noise:.4f})")
    assert tv > 3 * TV_LIMIT, f"a broken ratio passed: total variation {tv:.4f}"


# ----------------------------------------------------------------------------- recovery
def separated_gaussians(n_per_cluster, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 6.0, size=(5, 4))
    labels = np.repeat(np.arange(5), n_per_cluster)
    return (centers[labels] + rng.normal(size=(labels.size, 4))).astype(np.float32), labels


def check_recovery(n_per_cluster, n_sweeps, *, reach_by):
    data, labels = separated_gaussians(n_per_cluster)
    model = DPMixture(normal_gamma(4), algorithm="subcluster", max_clusters=16)
    start = time.perf_counter()
    fit = model.fit(data, jax.random.key(0), n_chains=2, n_warmup=0, n_draws=n_sweeps, init="single",
                    draws_per_call=20, progress=False)  # calls of one size: one compiled program
    seconds = time.perf_counter() - start
    draws = fit.result.samples["assignments"]
    ari = np.array([[adjusted_rand_score(labels, draw) for draw in chain] for chain in draws])
    first = [int(np.argmax(row >= 0.95)) + 1 if np.any(row >= 0.95) else None for row in ari]
    assert all(sweep is not None and sweep <= reach_by for sweep in first), f"ARI >= 0.95 first at sweeps {first}"
    assert np.all(ari[:, reach_by:] >= 0.95), f"lowest later ARI {ari[:, reach_by:].min():.3f}"
    assert fit.idata.posterior["assignments"].shape == (2, n_sweeps, data.shape[0])
    return first, ari[:, -1], seconds


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")
def test_recovers_separated_clusters_from_one_cluster():
    check_recovery(100, 60, reach_by=30)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")
def test_recovers_separated_clusters_from_one_cluster_at_scale():
    first, final, seconds = check_recovery(400, 300, reach_by=50)
    print(f"2000 points: ARI >= 0.95 first at sweeps {first}, final ARI {final}, {seconds:.1f} s for 300 sweeps "
          f"x 2 chains (compilation included)")


# ----------------------------------------------------------------------------- the kernel
THREE_GROUPS = np.concatenate(
    [np.random.default_rng(5).normal(center, 0.5, size=(15, 2)) for center in (-4.0, 0.0, 4.0)]
).astype(np.float32)
FAMILY_2D = normal_gamma(2, kappa=0.2)
KERNEL_2D = subcluster.build_kernel(FAMILY_2D)
TRACES = []


def _counted_step(key, state, data):
    TRACES.append(state.counts.shape)  # runs once per trace
    return KERNEL_2D(key, state, data)


STEP_2D = jax.jit(_counted_step)  # shared by the tests below: one compilation per capacity


def test_jit_compiles_once_and_the_same_key_gives_the_same_bits():
    data = jnp.asarray(THREE_GROUPS)
    state = subcluster.init(jax.random.key(0), THREE_GROUPS, FAMILY_2D, max_clusters=8, alpha=1.0)
    first = STEP_2D(jax.random.key(1), state, data)
    n_traces = len(TRACES)
    second = STEP_2D(jax.random.key(1), state, data)
    other = STEP_2D(jax.random.key(2), first[0], data + 0.1)  # same shapes, new values
    assert len(TRACES) == n_traces and n_traces >= 1
    for leaf, again in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
        np.testing.assert_array_equal(leaf, again)
    assert int(other[1].n_clusters) >= 1


def test_vmap_over_chains_equals_separate_chains():
    data = jnp.asarray(THREE_GROUPS)
    states = [subcluster.init(jax.random.key(chain), THREE_GROUPS, FAMILY_2D, max_clusters=8, alpha=alpha,
                              assignments=np.arange(len(THREE_GROUPS)) % (1 + chain))
              for chain, alpha in enumerate([0.5, 1.0, 3.0])]
    batched = stack_states(states)
    many = jax.jit(jax.vmap(KERNEL_2D, in_axes=(0, 0, None)))
    for sweep in range(4):
        keys = jax.random.split(jax.random.key(sweep), len(states))
        batched, batched_info = many(keys, batched, data)
        states = [STEP_2D(keys[chain], state, data)[0] for chain, state in enumerate(states)]
        for chain, state in enumerate(states):
            np.testing.assert_array_equal(batched.assignments[chain], state.assignments)
    assert np.all(batched_info.n_clusters >= 2)


def test_draws_do_not_depend_on_the_capacity():
    data = jnp.asarray(THREE_GROUPS)
    small = subcluster.init(jax.random.key(0), THREE_GROUPS, FAMILY_2D, max_clusters=4, alpha=0.05)
    large = neal.grow_capacity(small, 8)
    clusters = set()
    for sweep in range(8):
        key = jax.random.key(10 + sweep)
        small, small_info = STEP_2D(key, small, data)
        large, large_info = STEP_2D(key, large, data)
        assert not bool(small_info.overflow)
        np.testing.assert_array_equal(small.assignments, large.assignments)
        np.testing.assert_allclose(small_info.log_joint, large_info.log_joint, rtol=1e-5)
        clusters.add(int(small_info.n_clusters))
    assert 3 in clusters


def test_restricted_gibbs_never_empties_a_cluster_but_moves_points():
    family = FAMILY_2D
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 6, size=len(THREE_GROUPS))
    labels[:3] = [6, 7, 7]  # a singleton and a pair among random clusters
    state = subcluster.init(jax.random.key(0), THREE_GROUPS, family, max_clusters=10, alpha=1.0, assignments=labels)
    features = jax.vmap(family.prepare_point)(jnp.asarray(THREE_GROUPS))
    sweep = jax.jit(lambda key: subcluster._restricted_gibbs(family, key, state.assignments, state.counts,
                                                             state.params, features))
    moved = 0
    for seed in range(50):
        assignments = np.asarray(sweep(jax.random.key(seed)))
        counts = np.bincount(assignments, minlength=10)
        np.testing.assert_array_equal(counts > 0, np.asarray(state.counts) > 0)
        moved += int(np.sum(assignments != np.asarray(state.assignments)))
    assert moved > 100


TWO_GROUPS = (np.concatenate([np.full((3, 1), -4.0), np.full((3, 1), 4.0)])
              + np.linspace(-0.2, 0.2, 6)[:, None]).astype(np.float32)


def test_overflow_keeps_the_partition_and_the_grown_state_continues():
    step = jax.jit(subcluster.build_kernel(FAMILY_1D))
    data = jnp.asarray(TWO_GROUPS)
    state = subcluster.init(jax.random.key(0), TWO_GROUPS, FAMILY_1D, max_clusters=1, alpha=1.0)
    small, info = step(jax.random.key(3), state, data)
    large, large_info = step(jax.random.key(3), neal.grow_capacity(state, 2), data)
    assert bool(info.overflow) and bool(small.overflow)
    np.testing.assert_array_equal(small.assignments, np.zeros(6))
    assert int(info.split_merge_accepted) == 0
    assert not bool(large_info.overflow) and int(large_info.n_clusters) == 2


KERNEL_1D = subcluster.build_kernel(FAMILY_1D)


def run_two_groups(max_clusters):
    state = subcluster.init(jax.random.key(0), TWO_GROUPS, FAMILY_1D, max_clusters=1, alpha=1.0)
    states = stack_states([neal.grow_capacity(state, max_clusters)] * 2)
    return sample_chains(jax.random.key(0), KERNEL_1D, states, jnp.asarray(TWO_GROUPS), n_warmup=0, n_draws=10,
                         progress=False)


@pytest.mark.parametrize("compare", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["grows", "grows-and-matches-a-large-capacity"])
def test_sample_chains_grows_the_capacity_and_continues_the_same_chain(compare):
    grown = run_two_groups(1)
    assert grown.final_state.max_clusters >= 2 and not np.any(grown.final_state.overflow)
    assert np.all(grown.samples["n_clusters"].max(axis=1) >= 2)
    if compare:  # the re-run after growing is the chain a large capacity gives from the start
        np.testing.assert_array_equal(grown.samples["assignments"], run_two_groups(6).samples["assignments"])


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")
def test_dp_mixture_fit_with_arviz_output():
    # A capacity these chains do not outgrow (at 4 or 8 they do, and the step compiles again:
    # growing is tested above).
    model = DPMixture(FAMILY_2D, algorithm="subcluster", alpha_prior=GammaPrior(1.0, 1.0), max_clusters=12)
    fit = model.fit(THREE_GROUPS, jax.random.key(0), n_chains=2, n_warmup=10, n_draws=20, progress=False)
    assert fit.idata.posterior["assignments"].shape == (2, 20, len(THREE_GROUPS))
    assert set(fit.idata.sample_stats) >= {"n_clusters", "log_joint"}
    assert np.unique(fit.idata.posterior["alpha"]).size > 10
    assert np.all(fit.idata.sample_stats["n_clusters"].values[:, -1] >= 3)


def test_validation():
    poisson = custom_family(lambda params, x: jnp.sum(x * params), lambda key, shape: jax.random.normal(key, shape + (1,)))
    with pytest.raises(ValueError, match="^algorithm: 'subcluster' needs"):
        subcluster.build_kernel(poisson)
    with pytest.raises(ValueError, match="^algorithm: 'subcluster' needs"):
        subcluster.init(jax.random.key(0), [[1.0]], poisson, max_clusters=2, alpha=1.0)
    with pytest.raises(ValueError, match="^algorithm"):
        DPMixture(poisson, algorithm="subcluster")
    with pytest.raises(ValueError, match="^algorithm"):
        DPMixture(FAMILY_1D, algorithm="subcluster", n_split_merge=2)
    with pytest.raises(ValueError, match="^n_sub_iterations"):
        subcluster.build_kernel(FAMILY_1D, n_sub_iterations=-1)
    with pytest.raises(TypeError, match="^alpha_prior"):
        subcluster.build_kernel(FAMILY_1D, alpha_prior=(1.0, 1.0))
    with pytest.raises(TypeError, match="^family"):
        subcluster.build_kernel("normal")
    with pytest.raises(ValueError, match="^max_clusters"):
        subcluster.init(jax.random.key(0), [[1.0]], FAMILY_1D, max_clusters=0, alpha=1.0)
