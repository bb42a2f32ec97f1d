"""A user-written component family runs through the DP engine and samples the exact posterior.

The family is a diagonal Gaussian with a Normal-Gamma base measure written here from scratch
(its own log-likelihood and G0 sampler, and in a second version its own conjugate posterior and
marginal likelihood) and given to :func:`zoo.dirichlet.families.custom_family`. For four points
in two dimensions every set partition is enumerated and the exact posterior p(z | x) is computed
from the built-in :func:`zoo.dirichlet.families.normal_gamma` with the same hyperparameters (the
helpers of tests/test_neal.py); the user family's chains must match it in total variation, with
the Monte Carlo noise of the TV checked to be well below the limit first, as in test_neal.py.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln
from jax.scipy.stats import gamma, norm
from test_neal import NOISE_LIMIT, TV_LIMIT, empirical_tv, exact_posterior, expected_tv_noise, run_kernel

from inference.diagnostics import label_invariant, to_inference_data
from zoo.dirichlet.families import GaussianParams, add_stats, custom_family, normal_gamma

N_FEATURES = 2
PRIOR_MEAN, PRIOR_KAPPA, PRIOR_SHAPE, PRIOR_RATE = 0.0, 0.5, 2.0, 1.0
BUILT_IN = normal_gamma(N_FEATURES, mean=PRIOR_MEAN, kappa=PRIOR_KAPPA, shape=PRIOR_SHAPE, rate=PRIOR_RATE)
POINTS = np.array([[-1.2, 0.3], [-0.9, -0.2], [0.8, 0.1], [1.3, 0.9]])
ALPHA = 0.8


# ----------------------------------------------------------------------------- the user's family
class DiagonalGaussian(NamedTuple):
    """One component: ``loc`` and ``precision``, each (n_features,)."""

    loc: jax.Array
    precision: jax.Array


def log_likelihood(params: DiagonalGaussian, x: jax.Array) -> jax.Array:
    """log N(x | loc, diag(1 / precision)) for one point x (n_features,)."""
    return jnp.sum(norm.logpdf(x, params.loc, 1.0 / jnp.sqrt(params.precision)))


def sample_base(rng_key: jax.Array, shape: tuple[int, ...]) -> DiagonalGaussian:
    """G0: precision ~ Gamma(shape, rate), loc | precision ~ Normal(mean, 1 / (kappa precision))."""
    key_precision, key_loc = jax.random.split(rng_key)
    full_shape = tuple(shape) + (N_FEATURES,)
    precision = jax.random.gamma(key_precision, PRIOR_SHAPE, full_shape) / PRIOR_RATE
    loc = PRIOR_MEAN + jax.random.normal(key_loc, full_shape) / jnp.sqrt(PRIOR_KAPPA * precision)
    return DiagonalGaussian(loc, precision)


def log_base_density(params: DiagonalGaussian) -> jax.Array:
    log_gamma = gamma.logpdf(params.precision, PRIOR_SHAPE, scale=1.0 / PRIOR_RATE)
    log_normal = norm.logpdf(params.loc, PRIOR_MEAN, 1.0 / jnp.sqrt(PRIOR_KAPPA * params.precision))
    return jnp.sum(log_gamma + log_normal)


def point_stats(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(count, Σx, Σx²), additive over points."""
    return jnp.ones((), x.dtype), x, x * x


def posterior_hyperparameters(stats):
    """Normal-Gamma posterior (mean_n, kappa_n, shape_n, rate_n) per feature."""
    count, total, total_sq = stats
    kappa_n = PRIOR_KAPPA + count
    mean_n = (PRIOR_KAPPA * PRIOR_MEAN + total) / kappa_n
    # rate_n = rate + ½ [Σx² + κ m² - κ_n m_n²] = rate + ½ [Σ(x - x̄)² + κ n (x̄ - m)² / κ_n]
    rate_n = PRIOR_RATE + 0.5 * (total_sq + PRIOR_KAPPA * PRIOR_MEAN**2 - kappa_n * mean_n**2)
    return mean_n, kappa_n, PRIOR_SHAPE + 0.5 * count, rate_n


def sample_posterior(rng_key: jax.Array, stats) -> DiagonalGaussian:
    """One exact draw from the cluster's posterior given its statistics."""
    mean_n, kappa_n, shape_n, rate_n = posterior_hyperparameters(stats)
    key_precision, key_loc = jax.random.split(rng_key)
    precision = jax.random.gamma(key_precision, shape_n * jnp.ones(N_FEATURES)) / rate_n
    loc = mean_n + jax.random.normal(key_loc, (N_FEATURES,)) / jnp.sqrt(kappa_n * precision)
    return DiagonalGaussian(loc, precision)


def log_marginal(stats) -> jax.Array:
    """log ∫ Π_i N(x_i | loc, 1/precision) dG0 for the points summarised by ``stats``."""
    count = stats[0]
    _, kappa_n, shape_n, rate_n = posterior_hyperparameters(stats)
    per_feature = (gammaln(shape_n) - gammaln(PRIOR_SHAPE) + PRIOR_SHAPE * jnp.log(PRIOR_RATE)
                   - shape_n * jnp.log(rate_n) + 0.5 * (jnp.log(PRIOR_KAPPA) - jnp.log(kappa_n)))
    return jnp.sum(per_feature) - 0.5 * count * N_FEATURES * jnp.log(2.0 * jnp.pi)


SAMPLER_ONLY = custom_family(log_likelihood, sample_base, log_base_density=log_base_density,
                             n_features=N_FEATURES, name="user_gaussian")
CONJUGATE = custom_family(log_likelihood, sample_base, log_base_density=log_base_density, point_stats=point_stats,
                          sample_posterior=sample_posterior, log_marginal=log_marginal, n_features=N_FEATURES,
                          name="user_gaussian_conjugate")


# ----------------------------------------------------------------------------- tests
def test_the_user_family_agrees_with_the_built_in_one(x64):
    params = DiagonalGaussian(jnp.array([0.4, -1.0]), jnp.array([2.0, 0.5]))
    x = jnp.array([0.1, 0.7])
    np.testing.assert_allclose(log_likelihood(params, x), BUILT_IN.log_likelihood(GaussianParams(*params), x),
                               rtol=1e-12)
    np.testing.assert_allclose(log_base_density(params), BUILT_IN.log_base_density(GaussianParams(*params)),
                               rtol=1e-12)
    stats, built_in_stats = point_stats(jnp.asarray(POINTS[0])), BUILT_IN.point_stats(jnp.asarray(POINTS[0]))
    for point in POINTS[1:3]:
        stats = add_stats(stats, point_stats(jnp.asarray(point)))
        built_in_stats = add_stats(built_in_stats, BUILT_IN.point_stats(jnp.asarray(point)))
    np.testing.assert_allclose(log_marginal(stats), BUILT_IN.log_marginal(built_in_stats), rtol=1e-12)
    assert not SAMPLER_ONLY.has_posterior and CONJUGATE.is_conjugate


@partial(jax.jit, static_argnames="n_draws")
def _sampler_draws(rng_key, stats, n_draws):
    key_base, key_posterior = jax.random.split(rng_key)
    many_stats = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (n_draws,) + leaf.shape), stats)
    return sample_base(key_base, (n_draws,)), CONJUGATE.sample_posterior(key_posterior, many_stats)


def test_the_user_samplers_draw_from_their_distributions():
    # G0 and the posterior sampler, checked on means (tolerances of 5 Monte Carlo standard errors).
    n_draws = 20_000
    stats = (jnp.asarray(3.0), jnp.array([1.5, -0.6]), jnp.array([2.0, 0.5]))
    base, posterior = _sampler_draws(jax.random.key(0), stats, n_draws)
    mean_n, _, shape_n, rate_n = posterior_hyperparameters(stats)
    for values, expected in ((base.precision, PRIOR_SHAPE / PRIOR_RATE), (base.loc, PRIOR_MEAN),
                             (posterior.loc, mean_n), (posterior.precision, shape_n / rate_n)):
        values = np.asarray(values)
        assert np.all(np.abs(values.mean(0) - expected) < 5 * values.std(0) / np.sqrt(n_draws))


def check_exact_partition_posterior(variant, family, *, n_chains=128, n_draws=500):
    exact = exact_posterior(BUILT_IN, POINTS, alpha=ALPHA)
    # Gibbs draws are autocorrelated: budget an integrated autocorrelation time of 2 sweeps.
    noise = expected_tv_noise(exact.values(), n_chains * n_draws / 2.0)
    assert noise < NOISE_LIMIT, "too few draws for the test to be able to fail"
    result = run_kernel(family, POINTS, variant, alpha=ALPHA, alpha_prior=None, n_chains=n_chains,
                        n_draws=n_draws, seed=5)
    tv = empirical_tv(result.samples["assignments"], exact)
    assert tv < TV_LIMIT, f"{variant} with {family.name}: total variation {tv:.4f} (expected noise {noise:.4f})"
    # ArviZ output of the user's chains: (chain, draw) dims and converged label-invariant summaries.
    idata = label_invariant(to_inference_data(result))
    assert idata.posterior["n_clusters"].shape == (n_chains, n_draws)
    assert float(az.rhat(idata, var_names=["n_clusters"])["n_clusters"]) < 1.01


def test_algorithm_8_with_only_a_likelihood_and_a_base_sampler():
    """The minimal user family: parameters updated by the independence sampler (DM05 §4.2)."""
    check_exact_partition_posterior("auxiliary", SAMPLER_ONLY)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["auxiliary", "conjugate"], ids=["algorithm-8", "algorithm-2"])
def test_user_conjugate_posterior_with_algorithms_8_and_2(variant):
    """Algorithm 8 with the user's posterior sampler; Algorithm 2 (needs the user's marginal too)."""
    check_exact_partition_posterior(variant, CONJUGATE)
