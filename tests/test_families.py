"""Tests for zoo.dirichlet.families: component families of Dirichlet-process mixtures.

Every closed form is checked against an independent computation: scipy densities, numerical
integration of the marginal likelihood, the chain rule p(x_1..x_n) = Π p(x_i | x_<i), and Monte
Carlo moments of the samplers with tolerances scaled by their standard errors (fixed keys).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from zoo.dirichlet.families import (
    BernoulliParams,
    GaussianParams,
    MultinomialParams,
    add_stats,
    beta_bernoulli,
    custom_family,
    dirichlet_multinomial,
    normal_gamma,
    sample_log_gamma,
)
from zoo.dirichlet.known_precision import normal_known_precision
from zoo.dirichlet.ties import TiedValuesWarning, tied_features

Z_LIMIT = 4.5


def _stats_of(family, points):
    total = family.empty_stats(points[0])
    for point in points:
        total = add_stats(total, family.point_stats(point))
    return total


def _families_and_data():
    rng = np.random.default_rng(0)
    return [
        (normal_gamma(3, mean=[0.5, 0.0, -1.0], kappa=2.0, shape=1.5, rate=0.7), rng.normal(size=(5, 3))),
        (dirichlet_multinomial(4, concentration=[0.7, 1.0, 2.0, 0.3]), rng.integers(0, 4, size=(5, 4)).astype(float)),
        (beta_bernoulli(3, a=0.5, b=[2.0, 1.0, 0.8]), rng.integers(0, 2, size=(5, 3)).astype(float)),
        (normal_known_precision(3, precision=[0.5, 2.0, 1.0], mean=[0.3, -1.0, 0.0], prior_variance=[2.0, 0.5, 1.5]),
         rng.normal(size=(5, 3))),
        (normal_known_precision(3, precision=2.0, prior_variance=0.5), rng.normal(size=(5, 3))),  # scalar settings
    ]


@pytest.fixture(params=range(5), ids=["normal_gamma", "dirichlet_multinomial", "beta_bernoulli",
                                      "normal_known_precision", "normal_known_precision_scalars"])
def family_and_data(request, x64):
    family, data = _families_and_data()[request.param]
    return family, jnp.asarray(data)


# ----------------------------------------------------------------------------- samplers
_log_gamma = jax.jit(sample_log_gamma, static_argnames=("shape", "at_least_one"))


@pytest.mark.parametrize("concentration", [0.05, 0.3, 1.0, 2.5, 40.0])
def test_sample_log_gamma_matches_gamma_distribution(concentration):
    draws = np.exp(np.asarray(_log_gamma(jax.random.key(3), jnp.float32(concentration), (20000,)), dtype=float))
    assert stats.kstest(draws, stats.gamma(concentration).cdf).pvalue > 1e-3


def test_sample_log_gamma_exponential_fast_path_prefix_and_small_shapes():
    draws = np.exp(np.asarray(sample_log_gamma(jax.random.key(4), 1.0, (20000,)), dtype=float))
    assert stats.kstest(draws, stats.expon().cdf).pvalue > 1e-3
    longer = _log_gamma(jax.random.key(5), jnp.full((7, 2), 0.4), (7, 2))
    shorter = _log_gamma(jax.random.key(5), jnp.full((4, 2), 0.4), (4, 2))
    np.testing.assert_array_equal(longer[:4], shorter)
    tiny = _log_gamma(jax.random.key(0), jnp.full((4, 2), 1e-3), (4, 2))
    assert np.isfinite(np.asarray(tiny)).all()


# ----------------------------------------------------------------------------- closed forms
def test_log_marginal_is_product_of_predictives(family_and_data):
    family, data = family_and_data
    sequential = 0.0
    running = family.empty_stats(data[0])
    for point in data:
        sequential += float(family.log_predictive(running, point))
        running = add_stats(running, family.point_stats(point))
    np.testing.assert_allclose(float(family.log_marginal(_stats_of(family, data))), sequential, rtol=1e-10)


def _two_components(family):
    """Two fixed, valid parameter values of the family (no random draws, so nothing to compile)."""
    n_features = family.n_features
    if family.name == "normal_gamma":
        return GaussianParams(jnp.linspace(-1.0, 1.0, 2 * n_features).reshape(2, -1),
                              jnp.linspace(0.5, 2.0, 2 * n_features).reshape(2, -1))
    if family.name == "normal_known_precision":  # its precision field holds the fixed τ
        return family.sample_base(jax.random.key(0), (2,))
    if family.name == "dirichlet_multinomial":
        probs = jnp.stack([jnp.linspace(1.0, 2.0, n_features), jnp.linspace(3.0, 0.5, n_features)])
        return MultinomialParams(jnp.log(probs / probs.sum(-1, keepdims=True)))
    return BernoulliParams(jnp.linspace(-2.0, 1.5, 2 * n_features).reshape(2, -1))


def test_cached_forms_are_exact(family_and_data):
    family, data = family_and_data
    params = _two_components(family)
    cache = jax.vmap(family.component_cache)(params)
    prepared = jax.vmap(family.prepare_point)(data)
    cached = jax.vmap(jax.vmap(family.cached_log_likelihood, (0, None)), (None, 0))(cache, prepared)
    direct = jax.vmap(jax.vmap(family.log_likelihood, (0, None)), (None, 0))(params, data)
    np.testing.assert_allclose(cached, direct, rtol=1e-10)
    stats_three = _stats_of(family, data[:3])
    for stats_used in (family.empty_stats(data[0]), stats_three):
        terms = family.predictive_terms(stats_used)
        np.testing.assert_allclose(
            float(family.cached_log_predictive(terms, data[4])),
            float(family.log_predictive(stats_used, data[4])),
            rtol=1e-10,
        )


def test_normal_gamma_against_scipy_and_quadrature(x64):
    family = normal_gamma(1, mean=0.3, kappa=0.5, shape=2.0, rate=1.5)
    points = np.array([[0.2], [1.1], [-0.4]])
    mean, precision = 0.7, 1.8
    params = GaussianParams(jnp.array([mean]), jnp.array([precision]))
    expected = stats.norm(mean, precision**-0.5).logpdf(points[0, 0])
    np.testing.assert_allclose(float(family.log_likelihood(params, jnp.asarray(points[0]))), expected, rtol=1e-10)
    expected_prior = stats.gamma(2.0, scale=1 / 1.5).logpdf(precision) + stats.norm(0.3, (0.5 * precision) ** -0.5).logpdf(mean)
    np.testing.assert_allclose(float(family.log_base_density(params)), expected_prior, rtol=1e-10)

    def log_normal(x, mean, precision):
        return 0.5 * (np.log(precision) - np.log(2 * np.pi) - precision * (x - mean) ** 2)

    def integrand(mu, lam):
        log_density = 2.0 * np.log(1.5) - special.gammaln(2.0) + np.log(lam) - 1.5 * lam
        log_density += log_normal(mu, 0.3, 0.5 * lam) + log_normal(points[:, 0], mu, lam).sum()
        return np.exp(log_density)

    evidence, _ = integrate.dblquad(integrand, 0.0, 30.0, -15.0, 15.0, epsabs=1e-12, epsrel=1e-9)
    log_marginal = float(family.log_marginal(_stats_of(family, jnp.asarray(points))))
    np.testing.assert_allclose(log_marginal, np.log(evidence), rtol=1e-6)


def test_normal_known_precision_against_scipy(x64):
    # Per feature, the points of one cluster are jointly Normal: mean m0, covariance σ² 11ᵀ + I/τ.
    tau, mean0, variance = np.array([0.5, 2.0, 1.0]), np.array([0.3, -1.0, 0.0]), np.array([2.0, 0.5, 1.5])
    family = normal_known_precision(3, precision=tau, mean=mean0, prior_variance=variance)
    points = np.random.default_rng(4).normal(1.0, 2.0, size=(5, 3))
    expected = sum(
        stats.multivariate_normal(np.full(5, mean0[d]), variance[d] * np.ones((5, 5)) + np.eye(5) / tau[d]).logpdf(
            points[:, d])
        for d in range(3)
    )
    np.testing.assert_allclose(float(family.log_marginal(_stats_of(family, jnp.asarray(points)))), expected, rtol=1e-10)
    params = family.sample_base(jax.random.key(1), ())
    np.testing.assert_array_equal(np.asarray(params.precision), tau)
    np.testing.assert_allclose(float(family.log_likelihood(params, jnp.asarray(points[0]))),
                               stats.norm(np.asarray(params.mean), tau**-0.5).logpdf(points[0]).sum(), rtol=1e-10)
    np.testing.assert_allclose(float(family.log_base_density(params)),
                               stats.norm(mean0, np.sqrt(variance)).logpdf(np.asarray(params.mean)).sum(), rtol=1e-10)
    # Posterior of the means: Normal with precision 1/σ² + nτ and mean (m0/σ² + τ Σx) / that.
    n_draws = 20000
    batch = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (n_draws,) + leaf.shape),
                                   _stats_of(family, jnp.asarray(points)))
    draws = np.asarray(jax.jit(family.sample_posterior)(jax.random.key(2), batch).mean)
    precision_n = 1 / variance + 5 * tau
    mean_n = (mean0 / variance + tau * points.sum(0)) / precision_n
    assert np.all(np.abs(draws.mean(0) - mean_n) < Z_LIMIT * precision_n**-0.5 / np.sqrt(n_draws))
    np.testing.assert_allclose(draws.var(0), 1 / precision_n, rtol=0.05)


def test_dirichlet_multinomial_against_scipy(x64):
    beta = np.array([0.7, 1.0, 2.0])
    family = dirichlet_multinomial(3, concentration=beta)
    points = np.array([[2.0, 0.0, 1.0], [0.0, 3.0, 1.0], [1.0, 1.0, 1.0]])
    log_probs = np.log(np.array([0.2, 0.5, 0.3]))
    params = MultinomialParams(jnp.asarray(log_probs))
    np.testing.assert_allclose(
        float(family.log_likelihood(params, jnp.asarray(points[0]))),
        stats.multinomial(3, np.exp(log_probs)).logpmf(points[0]),
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        float(family.log_base_density(params)), stats.dirichlet(beta).logpdf(np.exp(log_probs)), rtol=1e-10
    )
    # p(x_1..x_n) = Π_i DirMult(x_i | β + Σ_{j<i} x_j): scipy's pmf at each updated concentration.
    expected, running = 0.0, beta.copy()
    for point in points:
        expected += stats.dirichlet_multinomial(running, point.sum()).logpmf(point)
        running = running + point
    np.testing.assert_allclose(float(family.log_marginal(_stats_of(family, jnp.asarray(points)))), expected, rtol=1e-10)


def test_beta_bernoulli_against_scipy_and_quadrature(x64):
    family = beta_bernoulli(2, a=[0.5, 2.0], b=[1.5, 1.0])
    points = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0]])
    theta = np.array([0.3, 0.8])
    params = BernoulliParams(jnp.asarray(np.log(theta) - np.log1p(-theta)))
    np.testing.assert_allclose(
        float(family.log_likelihood(params, jnp.asarray(points[0]))),
        stats.bernoulli(theta).logpmf(points[0]).sum(),
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        float(family.log_base_density(params)),
        stats.beta([0.5, 2.0], [1.5, 1.0]).logpdf(theta).sum(),
        rtol=1e-10,
    )
    expected = 0.0
    for feature, (a, b) in enumerate([(0.5, 1.5), (2.0, 1.0)]):
        ones = points[:, feature].sum()

        def integrand(p, ones=ones, a=a, b=b):
            return stats.beta(a, b).pdf(p) * p**ones * (1 - p) ** (len(points) - ones)

        expected += np.log(integrate.quad(integrand, 0.0, 1.0, epsabs=1e-13)[0])
    np.testing.assert_allclose(float(family.log_marginal(_stats_of(family, jnp.asarray(points)))), expected, rtol=1e-7)


# ----------------------------------------------------------------------------- posterior draws
def test_posterior_draws_have_conjugate_moments(x64):
    n_draws = 20000
    family = normal_gamma(2, mean=0.0, kappa=1.0, shape=1.5, rate=2.0)
    points = jnp.asarray(np.random.default_rng(1).normal(1.0, 0.5, size=(6, 2)))
    stats_one = _stats_of(family, points)
    batch = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (n_draws,) + leaf.shape), stats_one)
    draws = jax.jit(family.sample_posterior)(jax.random.key(2), batch)
    # Normal–Gamma posterior: E[λ] = a_n / b_n, E[μ] = m_n.
    count, total, total_sq = 6.0, np.asarray(points.sum(0)), np.asarray((points**2).sum(0))
    kappa_n, mean_n = 1.0 + count, total / 7.0
    shape_n = 1.5 + count / 2
    rate_n = 2.0 + 0.5 * (total_sq - total**2 / count) + 0.5 * count * (total / count) ** 2 / kappa_n
    precision = np.asarray(draws.precision)
    expected_precision = shape_n / rate_n
    standard_error = np.sqrt(shape_n) / rate_n / np.sqrt(n_draws)
    assert np.all(np.abs(precision.mean(0) - expected_precision) < Z_LIMIT * standard_error)
    mean_draws = np.asarray(draws.mean)
    assert np.all(np.abs(mean_draws.mean(0) - mean_n) < Z_LIMIT * mean_draws.std(0) / np.sqrt(n_draws))

    beta_family = beta_bernoulli(2, a=0.5, b=2.0)
    binary = jnp.asarray([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    batch = jax.tree_util.tree_map(
        lambda leaf: jnp.broadcast_to(leaf, (n_draws,) + leaf.shape), _stats_of(beta_family, binary)
    )
    theta = np.asarray(jax.nn.sigmoid(jax.jit(beta_family.sample_posterior)(jax.random.key(3), batch).logits))
    expected_theta = (0.5 + np.array([2.0, 1.0])) / (2.5 + 3.0)
    assert np.all(np.abs(theta.mean(0) - expected_theta) < Z_LIMIT * theta.std(0) / np.sqrt(n_draws))

    dm_family = dirichlet_multinomial(3, concentration=0.5)
    counts = jnp.asarray([[3.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    batch = jax.tree_util.tree_map(
        lambda leaf: jnp.broadcast_to(leaf, (n_draws,) + leaf.shape), _stats_of(dm_family, counts)
    )
    probs = np.exp(np.asarray(jax.jit(dm_family.sample_posterior)(jax.random.key(4), batch).log_probs))
    expected_probs = (0.5 + np.array([5.0, 1.0, 1.0])) / (1.5 + 7.0)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-10)
    assert np.all(np.abs(probs.mean(0) - expected_probs) < Z_LIMIT * probs.std(0) / np.sqrt(n_draws))


def test_base_draws_extend_with_more_rows():
    """Draws indexed by position: a longer leading axis extends the same values (the basis of
    capacity-independent sweeps in inference.neal)."""
    family = normal_gamma(2, shape=1.5)
    sample = jax.jit(family.sample_base, static_argnums=1)
    longer, shorter = sample(jax.random.key(7), (6,)), sample(jax.random.key(7), (3,))
    for long_leaf, short_leaf in zip(jax.tree_util.tree_leaves(longer), jax.tree_util.tree_leaves(shorter)):
        np.testing.assert_array_equal(long_leaf[:3], short_leaf)


# ----------------------------------------------------------------------------- user-defined families
def _poisson_family(**parts):
    def log_likelihood(log_rate, x):
        return jnp.sum(stats_poisson_logpmf(x, jnp.exp(log_rate)))

    def sample_base(rng_key, shape):
        return jax.random.normal(rng_key, tuple(shape) + (2,))

    return custom_family(log_likelihood, sample_base, n_features=2, name="poisson", **parts)


def stats_poisson_logpmf(x, rate):
    return x * jnp.log(rate) - rate - jax.scipy.special.gammaln(x + 1.0)


def test_custom_family_defaults_and_derived_predictive(x64):
    family = _poisson_family()
    assert not family.is_conjugate and not family.has_marginal and not family.has_posterior
    single = jnp.asarray([0.3, -0.2])
    point = jnp.asarray([2.0, 0.0])
    np.testing.assert_allclose(
        float(family.cached_log_likelihood(family.component_cache(single), family.prepare_point(point))),
        float(family.log_likelihood(single, point)),
    )
    base = normal_gamma(1)
    conjugate = custom_family(
        base.log_likelihood,
        base.sample_base,
        point_stats=base.point_stats,
        log_marginal=base.log_marginal,
        sample_posterior=base.sample_posterior,
    )
    assert conjugate.is_conjugate
    data = jnp.asarray([[0.3], [1.2], [-0.5]])
    stats_two = _stats_of(conjugate, data[:2])
    np.testing.assert_allclose(
        float(conjugate.log_predictive(stats_two, data[2])),
        float(base.log_predictive(stats_two, data[2])),
        rtol=1e-10,
    )
    batch = jax.tree_util.tree_map(lambda leaf: jnp.stack([leaf] * 5), stats_two)
    draws = jax.jit(conjugate.sample_posterior)(jax.random.key(0), batch)
    assert draws.mean.shape == (5, 1)
    assert np.unique(np.asarray(draws.mean)).size == 5


def test_custom_family_rejects_bad_parts():
    family = normal_gamma(1)
    with pytest.raises(TypeError, match="^log_likelihood"):
        custom_family("not callable", family.sample_base)
    with pytest.raises(TypeError, match="^sample_base"):
        custom_family(family.log_likelihood, None)
    with pytest.raises(ValueError, match="^sample_posterior"):
        custom_family(family.log_likelihood, family.sample_base, sample_posterior=family.sample_posterior)
    with pytest.raises(ValueError, match="^log_marginal"):
        custom_family(family.log_likelihood, family.sample_base, log_marginal=family.log_marginal)
    with pytest.raises(ValueError, match="^n_features"):
        custom_family(family.log_likelihood, family.sample_base, n_features=0)


def test_custom_family_functions_are_tried_on_the_data_before_any_chain():
    # A user's walk-through: each of these ran to the end (K = 1 and a NaN log joint, or a cluster per point).
    counts = np.array([[1.0, 3.0], [0.0, 2.0], [4.0, 1.0]])
    good = _poisson_family()
    assert good.check_data("data", counts).shape == (3, 2)
    base = normal_gamma(2)
    cases = [
        (custom_family(lambda p, x: jnp.nan * jnp.sum(p), good.sample_base), ValueError,
         "^log_likelihood: returned nan for data row 0 and a draw of sample_base"),
        (custom_family(lambda p, x: jnp.exp(p) * x, good.sample_base), ValueError,
         r"^log_likelihood: expected one number per point .*shape \(2,\)"),
        (custom_family(lambda p: jnp.sum(p), good.sample_base), TypeError,
         r"^log_likelihood: calling it as log_likelihood\(params, x\) failed: TypeError"),
        (custom_family(good.log_likelihood, lambda key, shape: jax.random.normal(key, (2,))), ValueError,
         r"^sample_base: sample_base\(rng_key, \(8,\)\) must return parameters whose every leaf has leading axis 8"),
        (custom_family(base.log_likelihood, base.sample_base, point_stats=base.point_stats,
                       log_marginal=lambda stats: jnp.nan), ValueError, "^log_marginal: returned nan"),
        (custom_family(base.log_likelihood, base.sample_base, point_stats=base.point_stats,
                       log_marginal=base.log_marginal, sample_posterior=lambda key, stats: jnp.zeros(())), ValueError,
         r"^sample_posterior: returned parameters of shapes \[\(\)\]"),
        # Functions that run on concrete values but not as the compiled sweeps trace them: they passed
        # here and failed inside the chains with JAX's tracer errors (or a NumPy draw, JAX's assertion).
        (custom_family(base.log_likelihood, base.sample_base, point_stats=base.point_stats,
                       log_marginal=lambda stats: base.log_marginal(jax.tree_util.tree_map(np.asarray, stats))),
         TypeError, r"^log_marginal: calling it as log_marginal\(stats\) failed: TracerArrayConversionError"),
        (custom_family(base.log_likelihood, base.sample_base, point_stats=base.point_stats,
                       log_marginal=lambda stats: base.log_marginal(stats) if stats.count > 0 else 0.0),
         TypeError, r"^log_marginal: calling it as log_marginal\(stats\) failed: TracerBoolConversionError"),
        (custom_family(base.log_likelihood, base.sample_base, point_stats=lambda x: base.point_stats(np.asarray(x))),
         TypeError, r"^point_stats: calling it as point_stats\(x\) failed"),
        (custom_family(good.log_likelihood, lambda key, shape: np.random.default_rng(0).gamma(1.0, 1.0, shape + (2,))),
         ValueError, r"^sample_base: returns NumPy arrays that do not depend on rng_key"),
    ]
    for family, error, message in cases:
        with pytest.raises(error, match=message):
            family.check_data("data", counts)
    with pytest.raises(ValueError, match=r"^data: row 0 \(\[-1.0, 3.0\]\) has probability 0 .* outside the family"):
        good.check_data("data", counts - np.array([2.0, 0.0]))  # a negative count for a Poisson


# ----------------------------------------------------------------------------- validation
def test_constructors_validate_hyperparameters():
    with pytest.raises(ValueError, match="^n_features"):
        normal_gamma(0)
    with pytest.raises(ValueError, match="^kappa"):
        normal_gamma(2, kappa=0.0)
    with pytest.raises(ValueError, match="^rate"):
        normal_gamma(2, rate=[1.0, -1.0])
    with pytest.raises(ValueError, match="^mean"):
        normal_gamma(2, mean=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="^concentration"):
        dirichlet_multinomial(3, concentration=-1.0)
    with pytest.raises(ValueError, match="^b"):
        beta_bernoulli(2, b=0.0)
    with pytest.raises(ValueError, match="^total_count"):
        dirichlet_multinomial(3, total_count=-2)


def test_check_data_names_the_argument():
    with pytest.raises(ValueError, match="^data: contains NaN"):
        normal_gamma(2).check_data("data", [[0.0, np.nan]])
    with pytest.raises(ValueError, match="^data: expected 2 features"):
        normal_gamma(2).check_data("data", np.zeros((3, 4)))
    # A custom family's width is its keyword n_features, not a first argument.
    family = custom_family(lambda params, x: -jnp.sum((x - params) ** 2),
                           lambda key, shape: jax.random.normal(key, shape + (2,)), n_features=2)
    with pytest.raises(ValueError, match=r"build it for 4 \(custom_family\(\.\.\., n_features=4\)\)$"):
        family.check_data("data", np.zeros((3, 4)))
    with pytest.raises(ValueError, match="^data: expected 2 dimension"):
        normal_gamma(2).check_data("data", np.zeros(3))
    with pytest.raises(ValueError, match="^data: binary"):
        beta_bernoulli(2).check_data("data", [[0.0, 0.5]])
    with pytest.raises(ValueError, match="^data: counts must be whole"):
        dirichlet_multinomial(2).check_data("data", [[1.5, 2.0]])
    with pytest.raises(ValueError, match="^data: contains negative"):
        dirichlet_multinomial(2).check_data("data", [[-1.0, 2.0]])
    assert normal_gamma(2).check_data("data", [[0.0, 1.0]]).shape == (1, 2)
    # Squares a cluster's statistics would sum beyond the working float: every log joint was -inf.
    if jnp.result_type(float) == jnp.float32:
        for family in (normal_gamma(2), normal_known_precision(2)):
            with pytest.raises(ValueError, match="^data: values up to 1e\\+19 overflow float32 sums of squares"):
                family.check_data("data", [[0.0, 1e19], [1.0, 2.0]])


def test_tied_values_pull_gaussian_clusters_together_and_are_found():
    # Why the warning exists: n points sharing one value exactly make a Normal-Gamma cluster's
    # marginal grow like log Gamma(n/2), so merging two tied clusters of 100 gains ~69 nats per
    # feature, while two clusters of spread values (same size, different means) lose by merging.
    family = normal_gamma(1)

    def stats(values):
        values = jnp.asarray(values, jnp.float32)[:, None]
        return family.point_stats(values[0])._replace(
            count=jnp.float32(values.shape[0]), total=values.sum(0), total_sq=(values**2).sum(0))

    tied_gain = family.log_marginal(stats(np.zeros(200))) - 2 * family.log_marginal(stats(np.zeros(100)))
    assert float(tied_gain) == pytest.approx(68.7, abs=0.1)
    rng = np.random.default_rng(0)
    apart = np.concatenate([rng.normal(-1, 0.3, 100), rng.normal(1, 0.3, 100)])
    spread_gain = (family.log_marginal(stats(apart))
                   - family.log_marginal(stats(apart[:100])) - family.log_marginal(stats(apart[100:])))
    assert float(spread_gain) < -50

    data = np.column_stack([np.zeros(10), [0, 0, 0, 0, 0, 1, 2, 3, 4, 5], np.arange(10.0), [1, 1, 1, 2, 2, 3, 3, 3, 4, 4]])
    assert tied_features(data).tolist() == [0, 1]
    assert tied_features(data, share=0.3).tolist() == [0, 1, 3]
    assert tied_features(np.zeros((0, 3))).tolist() == []


def test_fits_warn_once_about_tied_features_with_gaussian_components_only():
    from zoo.dirichlet.mixture import DPMixture
    from zoo.dirichlet.supervised import SupervisedDP

    rng = np.random.default_rng(1)
    continuous = rng.normal(size=(40, 3))
    tied = continuous.copy()
    tied[:, 1] = 0.0  # a constant feature, as standardisation leaves a blank pixel
    # The data are checked before anything runs: n_chains=0 is refused right after the warning.
    no_chains = pytest.raises(ValueError, match="n_chains")
    with pytest.warns(TiedValuesWarning, match=r"data: 1 of 3 features .*1 constant; columns 1\)") as caught, no_chains:
        DPMixture(normal_gamma(3)).fit(tied, jax.random.key(0), n_chains=0)
    assert [w.filename for w in caught if w.category is TiedValuesWarning] == [__file__]  # the caller's line, once
    with pytest.warns(TiedValuesWarning, match="train_features and test_features"), no_chains:
        SupervisedDP(1).fit(tied[:30], [0, 1, 2] * 10, tied[30:], key=jax.random.key(0), n_chains=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TiedValuesWarning)
        for family, data in ((normal_gamma(3), continuous), (beta_bernoulli(3), (continuous > 0).astype(float))):
            with no_chains:
                DPMixture(family).fit(data, jax.random.key(0), n_chains=0)
