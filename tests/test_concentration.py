"""Tests for inference.concentration: Escobar–West updates of a Dirichlet-process concentration.

The main check is Geweke's (2004) "getting it right" joint test: alternate
    K ~ p(K | α)       (the CRP number of clusters, drawn exactly by Antoniak's construction)
    α ~ update(α, K)   (the kernel under test).
If the update leaves p(α | K) invariant, p(α) p(K | α) is stationary, so chains started from the
prior keep α distributed as the Gamma prior. Chains are independent, so the final states are
i.i.d. and tolerances are plain Monte Carlo standard errors (fixed keys: deterministic).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from inference.concentration import (
    GammaPrior,
    _add_exponentials,
    _auxiliary_draws,
    _multi_group_mixture,
    escobar_west_multi_group_update,
    escobar_west_update,
    expected_n_clusters,
    gamma_prior,
    variance_n_clusters,
)

Z_LIMIT = 4.0
N_CHAINS = 4000
N_STEPS = 25


def _single_update(key, alpha, n_clusters, group_sizes, prior):
    return escobar_west_update(key, alpha, n_clusters, group_sizes[0], prior)


def _multi_update(key, alpha, n_clusters, group_sizes, prior):
    return escobar_west_multi_group_update(key, alpha, n_clusters, group_sizes, prior)


def _dm05_printed_eq6_update(key, alpha, n_clusters, group_sizes, prior):
    """The multi-group update with DM05 App. B eq. 6 as printed: Γ(â + S), not Γ(â + 1 + S)."""
    sizes = group_sizes.astype(jnp.float32)
    key_gammas, key_component, key_extra = jax.random.split(key, 3)
    n_empty = jnp.sum(sizes == 0).astype(jnp.int32)
    base_shape = prior.shape - sizes.shape[0] + n_clusters + n_empty
    log_x, log_base = _auxiliary_draws(key_gammas, alpha, sizes, base_shape)
    log_weights, shapes, rate = _multi_group_mixture(
        log_x.sum(), n_clusters.astype(jnp.float32), sizes, prior
    )
    printed = log_weights - jnp.log(shapes - 1.0)  # Γ(â + S) = Γ(â + 1 + S) / (â + S)
    component = jax.random.categorical(key_component, printed)
    n_extra = jnp.clip(component - n_empty, 0, sizes.shape[0])
    return jnp.exp(_add_exponentials(key_extra, log_base, n_extra, sizes.shape[0]) - jnp.log(rate))


@partial(jax.jit, static_argnames=("update", "n_steps"))
def _run_chains(keys, alpha0, group_sizes, within, valid, fixed_clusters, prior, update, n_steps):
    """Independent chains of α updates; returns the final α of each chain, shape (chains,).

    Each step draws K = Σ_m K_m, K_m ~ CRP(α, n_m) independently, by Antoniak's construction
    K_m = Σ_{i<n_m} Bernoulli(α / (α + i)) (``within`` holds i for every point, ``valid`` masks
    padding), unless ``fixed_clusters`` >= 0, which holds K fixed instead. Everything except the
    update and the number of steps is traced, so one compilation serves every configuration.
    """

    def chain(key, alpha):
        def step(alpha, key_step):
            key_k, key_alpha = jax.random.split(key_step)
            uniforms = jax.random.uniform(key_k, within.shape)
            crp_clusters = jnp.sum(valid & (uniforms < alpha / (alpha + within)))
            n_clusters = jnp.where(fixed_clusters >= 0, fixed_clusters, crp_clusters)
            return update(key_alpha, alpha, n_clusters.astype(jnp.int32), group_sizes, prior), None

        return jax.lax.scan(step, alpha, jax.random.split(key, n_steps))[0]

    return jax.vmap(chain)(keys, alpha0)


def run_chains(seed, update, group_sizes, prior, *, n_groups, n_positions, fixed_clusters=-1,
               n_chains=N_CHAINS, n_steps=N_STEPS):
    """Pad the groups to ``n_groups`` (empty groups) and points to ``n_positions``, then run."""
    sizes = np.zeros(n_groups, np.int32)
    sizes[: len(group_sizes)] = group_sizes
    within = np.zeros(n_positions, np.float32)
    valid = np.zeros(n_positions, bool)
    positions = np.concatenate([np.arange(size) for size in group_sizes] + [np.zeros(0)])
    within[: positions.size] = positions
    valid[: positions.size] = True
    alpha0 = np.random.default_rng(seed).gamma(prior.shape, 1 / prior.rate, n_chains)
    traced_prior = GammaPrior(jnp.float32(prior.shape), jnp.float32(prior.rate))
    final = _run_chains(
        jax.random.split(jax.random.key(seed), n_chains),
        jnp.asarray(alpha0, jnp.float32),
        jnp.asarray(sizes),
        jnp.asarray(within),
        jnp.asarray(valid),
        jnp.int32(fixed_clusters),
        traced_prior,
        update,
        n_steps,
    )
    return np.asarray(final, np.float64)


def prior_match_z_scores(samples, prior):
    """z-scores of mean, variance and CDF at three quantiles against the Gamma prior."""
    n = samples.shape[0]
    a, b = prior.shape, prior.rate
    mean, variance = a / b, a / b**2
    # Var of the sample variance ≈ (μ4 - σ⁴) / n with μ4 = σ⁴ (3 + 6 / a) for a Gamma.
    z = {
        "mean": (samples.mean() - mean) / np.sqrt(variance / n),
        "variance": (samples.var() - variance) / np.sqrt(variance**2 * (2 + 6 / a) / n),
    }
    for probability in (0.1, 0.5, 0.9):
        quantile = stats.gamma.ppf(probability, a, scale=1 / b)
        fraction = (samples <= quantile).mean()
        z[f"cdf@{probability}"] = (fraction - probability) / np.sqrt(
            probability * (1 - probability) / n
        )
    return z


# ---------------------------------------------------------------- Geweke joint tests

FAST_SINGLE = [(GammaPrior(2.0, 1.0), (25,)), (GammaPrior(0.5, 0.25), (8,))]
FAST_MULTI = [(GammaPrior(2.0, 1.0), (0, 1, 6, 30)), (GammaPrior(0.7, 0.5), (3, 3, 12))]


@pytest.mark.parametrize("prior, group_sizes", FAST_SINGLE)
def test_geweke_single_group_keeps_gamma_prior(prior, group_sizes):
    samples = run_chains(11, _single_update, group_sizes, prior, n_groups=1, n_positions=64)
    z = prior_match_z_scores(samples, prior)
    assert all(abs(value) < Z_LIMIT for value in z.values()), z


@pytest.mark.parametrize("prior, group_sizes", FAST_MULTI)
def test_geweke_multi_group_keeps_gamma_prior(prior, group_sizes):
    samples = run_chains(12, _multi_update, group_sizes, prior, n_groups=4, n_positions=64)
    z = prior_match_z_scores(samples, prior)
    assert all(abs(value) < Z_LIMIT for value in z.values()), z


def test_geweke_detects_dm05_printed_eq6():
    """Negative control: the same statistics reject the off-by-one weights printed in DM05."""
    prior = GammaPrior(1.2, 1.0)
    samples = run_chains(
        13, _dm05_printed_eq6_update, (2, 1, 3, 2), prior, n_groups=4, n_positions=64
    )
    z = prior_match_z_scores(samples, prior)
    assert max(abs(value) for value in z.values()) > 3 * Z_LIMIT, z


@pytest.mark.slow
@pytest.mark.parametrize(
    "prior, group_sizes",
    [
        (GammaPrior(2.0, 1.0), (40,)),
        (GammaPrior(0.3, 0.1), (15,)),
        (GammaPrior(1.5, 0.5), (0, 2, 5, 9, 17, 30, 50, 1, 1, 4)),
        (GammaPrior(0.4, 2.0), (100, 3, 60)),
    ],
)
def test_geweke_long(prior, group_sizes):
    options = dict(n_groups=10, n_positions=256, n_chains=12000, n_steps=40)
    samples = run_chains(21, _multi_update, group_sizes, prior, **options)
    z = prior_match_z_scores(samples, prior)
    assert all(abs(value) < Z_LIMIT for value in z.values()), z
    if len(group_sizes) == 1:
        options["n_groups"] = 1
        samples = run_chains(22, _single_update, group_sizes, prior, **options)
        z = prior_match_z_scores(samples, prior)
        assert all(abs(value) < Z_LIMIT for value in z.values()), z


def test_empty_data_draws_from_prior():
    prior = GammaPrior(3.0, 2.0)
    for update, n_groups in ((_multi_update, 4), (_single_update, 1)):
        samples = run_chains(14, update, (0,), prior, n_groups=n_groups, n_positions=64)
        z = prior_match_z_scores(samples, prior)
        assert all(abs(value) < Z_LIMIT for value in z.values()), z


# ---------------------------------------------------------------- posterior given fixed K


def _posterior_moments(prior, n_clusters, group_sizes):
    """Mean and variance of p(α | K, n) ∝ Gamma(α; a, b) α^K Π_m Γ(α) / Γ(α + n_m)."""

    def log_density(alpha):
        value = (prior.shape - 1 + n_clusters) * np.log(alpha) - prior.rate * alpha
        for size in group_sizes:
            value += special.gammaln(alpha) - special.gammaln(alpha + size)
        return value

    grid = np.linspace(1e-3, 60, 20001)
    offset = log_density(grid).max()
    moments = [
        integrate.quad(lambda x, p=p: x**p * np.exp(log_density(x) - offset), 0, 200, limit=200)[0]
        for p in (0, 1, 2)
    ]
    mean = moments[1] / moments[0]
    return mean, moments[2] / moments[0] - mean**2


@pytest.mark.parametrize(
    "update, n_groups, group_sizes, n_clusters",
    [
        (_single_update, 1, (30,), 7),
        (_single_update, 1, (30,), 1),
        (_multi_update, 4, (5, 0, 12, 40), 14),
    ],
)
def test_update_targets_posterior_given_clusters(update, n_groups, group_sizes, n_clusters):
    prior = GammaPrior(1.5, 0.5)
    samples = run_chains(
        5, update, group_sizes, prior, n_groups=n_groups, n_positions=64,
        fixed_clusters=n_clusters,
    )
    mean, variance = _posterior_moments(prior, n_clusters, group_sizes)
    z_mean = (samples.mean() - mean) / np.sqrt(variance / samples.size)
    assert abs(z_mean) < Z_LIMIT, (samples.mean(), mean)
    assert samples.var() == pytest.approx(variance, rel=0.15)


# ---------------------------------------------------------------- the collapsed mixture


@pytest.mark.usefixtures("x64")
def test_multi_group_mixture_equals_eq4_density():
    """The collapsed eq. 5 mixture is the normalised eq. 4 density α^â e^{-α b̂} Π_m (α + n_m)."""
    prior = GammaPrior(1.3, 0.7)
    group_sizes = np.array([4.0, 0.0, 9.0, 1.0])
    n_clusters, log_x_total = 7.0, -2.1
    log_weights, shapes, rate = _multi_group_mixture(
        jnp.asarray(log_x_total), jnp.asarray(n_clusters), jnp.asarray(group_sizes), prior
    )
    weights = np.exp(np.asarray(log_weights) - special.logsumexp(np.asarray(log_weights)))
    grid = np.linspace(1e-4, 40, 4001)
    mixture = sum(
        w * stats.gamma.pdf(grid, s, scale=1 / float(rate))
        for w, s in zip(weights, np.asarray(shapes))
        if w > 0
    )
    a_hat = prior.shape - len(group_sizes) - 1 + n_clusters
    b_hat = prior.rate - log_x_total
    target = grid**a_hat * np.exp(-b_hat * grid) * np.prod(grid[:, None] + group_sizes, axis=1)
    target /= integrate.quad(
        lambda x: x**a_hat * np.exp(-b_hat * x) * np.prod(x + group_sizes), 0, np.inf
    )[0]
    np.testing.assert_allclose(mixture, target, rtol=1e-8, atol=1e-12)
    assert float(rate) == pytest.approx(b_hat)


@pytest.mark.usefixtures("x64")
def test_one_group_mixture_is_escobar_west():
    """M = 1: odds of the upper component are (a + k - 1) / [n (b - log η)] (E&W 1995 §6)."""
    prior = GammaPrior(2.5, 1.5)
    n_points, n_clusters, log_eta = 17.0, 5.0, -0.8
    log_weights, shapes, rate = _multi_group_mixture(
        jnp.asarray(log_eta), jnp.asarray(n_clusters), jnp.asarray([n_points]), prior
    )
    odds = np.exp(float(log_weights[1] - log_weights[0]))
    assert odds == pytest.approx(
        (prior.shape + n_clusters - 1) / (n_points * (prior.rate - log_eta)), rel=1e-12
    )
    np.testing.assert_allclose(
        np.asarray(shapes), [prior.shape + n_clusters - 1, prior.shape + n_clusters]
    )


# ---------------------------------------------------------------- JAX behaviour


def test_jit_vmap_and_traced_counts_agree_with_unbatched():
    prior = gamma_prior(2.0, 1.0)
    keys = jax.random.split(jax.random.key(3), 6)
    alphas = jnp.linspace(0.2, 5.0, 6)
    group_sizes = jnp.array([[3, 0, 9], [5, 5, 5], [1, 1, 1], [0, 0, 30], [2, 2, 2], [9, 9, 0]])
    group_clusters = jnp.array([4, 6, 3, 10, 3, 2])
    batched = jax.jit(jax.vmap(escobar_west_multi_group_update, in_axes=(0, 0, 0, 0, None)))(
        keys, alphas, group_clusters, group_sizes, prior
    )
    one = jax.jit(escobar_west_multi_group_update)
    unbatched = [
        one(keys[i], alphas[i], group_clusters[i], group_sizes[i], prior) for i in range(6)
    ]
    np.testing.assert_allclose(np.asarray(batched), np.asarray(unbatched), rtol=1e-5)
    assert np.all(np.asarray(batched) > 0)


# ---------------------------------------------------------------- CRP moments


@pytest.mark.usefixtures("x64")
@pytest.mark.parametrize("alpha", [0.05, 1.0, 7.5, 300.0])
def test_expected_and_variance_n_clusters_match_sums(alpha):
    n_points = np.array([0, 1, 2, 10, 137, 1000])
    steps = alpha / (alpha + np.arange(1000))
    mean = np.concatenate([[0.0], np.cumsum(steps)])[n_points]
    variance = np.concatenate([[0.0], np.cumsum(steps * (1 - steps))])[n_points]
    np.testing.assert_allclose(np.asarray(expected_n_clusters(alpha, n_points)), mean, rtol=1e-10)
    np.testing.assert_allclose(
        np.asarray(variance_n_clusters(alpha, n_points)), variance, rtol=1e-8, atol=1e-10
    )


@pytest.mark.parametrize("x64_on", [False, True])
def test_crp_moments_hold_at_extreme_concentrations(x64_on, request):
    # ψ(α + n) - ψ(α) cancels for large α and ψ(α) overflows for tiny α: against the sums in
    # float64 (exact to rounding for these n), at both of JAX's precisions, never NaN.
    if x64_on:
        request.getfixturevalue("x64")
    n_points = np.array([1, 2, 5, 100, 1000])
    for alpha in (1e-30, 1e-8, 9.99, 10.01, 999.0, 1001.0, 1e5, 1e7, 1e12, 1e20, 3e38):
        steps = alpha / (alpha + np.arange(1000.0))
        mean = np.cumsum(steps)[n_points - 1]
        variance = np.cumsum(steps * (1 - steps))[n_points - 1]
        rtol = 1e-11 if x64_on else 2e-6
        np.testing.assert_allclose(np.asarray(expected_n_clusters(alpha, n_points)), mean, rtol=rtol,
                                   err_msg=str(alpha))
        # Var[K] = E[K] - Σ α²/(α+i)²: for large α a small difference of two sums near n, so absolute.
        np.testing.assert_allclose(np.asarray(variance_n_clusters(alpha, n_points)), variance, rtol=rtol,
                                   atol=rtol * n_points.max(), err_msg=str(alpha))
    if not x64_on:  # beyond float32: named, not inf or NaN
        with pytest.raises(ValueError, match="^alpha: 1e\\+39 is out of the range of float32"):
            expected_n_clusters(1e39, 5)
        with pytest.raises(ValueError, match="^alpha: 1e-40 is out of the range of float32"):
            escobar_west_update(jax.random.key(0), 1e-40, 3, 10, gamma_prior(1.0, 1.0))


def test_expected_n_clusters_matches_simulated_crp():
    alpha, n_points = 2.3, 60
    within = jnp.arange(n_points, dtype=jnp.float32)
    uniforms = jax.random.uniform(jax.random.key(4), (20000, n_points))
    counts = np.asarray(jnp.sum(uniforms < alpha / (alpha + within), axis=1))
    mean = float(expected_n_clusters(alpha, n_points))
    sd = float(np.sqrt(variance_n_clusters(alpha, n_points)))
    assert abs(counts.mean() - mean) < Z_LIMIT * sd / np.sqrt(counts.size)
    assert counts.std() == pytest.approx(sd, rel=0.05)


# ---------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    prior = gamma_prior(1.0, 1.0)
    key = jax.random.key(0)
    cases = [
        (lambda: gamma_prior(0.0, 1.0), ValueError, "shape"),
        (lambda: gamma_prior(1.0, -2.0), ValueError, "rate"),
        (lambda: gamma_prior(float("nan"), 1.0), ValueError, "shape"),
        (lambda: escobar_west_update(key, 0.0, 1, 5, prior), ValueError, "alpha"),
        (lambda: escobar_west_update(key, -1.0, 1, 5, prior), ValueError, "alpha"),
        (lambda: escobar_west_update(key, 1.0, 1, -5, prior), ValueError, "n_points"),
        (lambda: escobar_west_update(key, 1.0, 6, 5, prior), ValueError, "n_clusters"),
        (lambda: escobar_west_update(key, 1.0, 0, 5, prior), ValueError, "n_clusters"),
        (lambda: escobar_west_update(key, 1.0, 1.5, 5, prior), TypeError, "n_clusters"),
        (lambda: escobar_west_update(key, 1.0, 1, 5, GammaPrior(-1.0, 1.0)), ValueError, "prior"),
        (lambda: escobar_west_update(key, 1.0, 1, 5, (1.0, 1.0)), TypeError, "prior"),
        (
            lambda: escobar_west_multi_group_update(key, 1.0, 3, [4, -1], prior),
            ValueError,
            "group_sizes",
        ),
        (
            lambda: escobar_west_multi_group_update(key, 1.0, 3, [[4, 1]], prior),
            ValueError,
            "group_sizes",
        ),
        (
            lambda: escobar_west_multi_group_update(key, 1.0, 3, [], prior),
            ValueError,
            "group_sizes",
        ),
        (
            lambda: escobar_west_multi_group_update(key, 1.0, 1, [4, 2], prior),
            ValueError,
            "n_clusters",
        ),
        (
            lambda: escobar_west_multi_group_update(key, 1.0, 7, [4, 2], prior),
            ValueError,
            "n_clusters",
        ),
        (
            lambda: escobar_west_multi_group_update(key, 0.0, 3, [4, 2], prior),
            ValueError,
            "alpha",
        ),
        (lambda: expected_n_clusters(0.0, 3), ValueError, "alpha"),
        (lambda: expected_n_clusters(1.0, -3), ValueError, "n_points"),
        (lambda: variance_n_clusters([1.0, -1.0], 3), ValueError, "alpha"),
        (lambda: variance_n_clusters(1.0, [3, -1]), ValueError, "n_points"),
    ]
    for call, error, name in cases:
        with pytest.raises(error, match=f"^{name}"):
            call()
