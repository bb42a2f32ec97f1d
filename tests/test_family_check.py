"""zoo.dirichlet.family_check: a family's optional parts against its likelihood and base measure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

from zoo.dirichlet import beta_bernoulli, custom_family, dirichlet_multinomial, normal_gamma, normal_known_precision
from zoo.dirichlet.family_check import FamilyCheckWarning, check_family

SHAPE, RATE = 2.0, 1.0  # the Gamma base measure of the Poisson rates


def _log_likelihood(rate, x):
    return jnp.sum(x * jnp.log(rate) - rate - gammaln(x + 1))


def _sample_base(key, shape):
    return jax.random.gamma(key, SHAPE, shape + (3,)) / RATE


def _point_stats(x):
    return {"n": jnp.ones(()), "s": x, "log_factorials": jnp.sum(gammaln(x + 1))}


def _log_marginal(stats, shape=SHAPE):
    return jnp.sum(shape * jnp.log(RATE) - gammaln(shape) + gammaln(shape + stats["s"])
                   - (shape + stats["s"]) * jnp.log(RATE + stats["n"])) - stats["log_factorials"]


def _sample_posterior(key, stats, shape=SHAPE):
    return jax.random.gamma(key, shape + stats["s"]) / (RATE + stats["n"])


def _poisson(**parts):
    return custom_family(_log_likelihood, _sample_base, point_stats=_point_stats, **parts)


COUNTS = np.random.default_rng(0).poisson(3.0, (10, 3))


@pytest.mark.parametrize("family, points", [
    (beta_bernoulli(4), np.random.default_rng(1).integers(0, 2, (10, 4))),
    (normal_gamma(2), np.random.default_rng(2).normal(size=(10, 2))),
    (normal_known_precision(2), np.random.default_rng(3).normal(size=(10, 2))),
    (dirichlet_multinomial(5), np.random.default_rng(4).integers(0, 4, (10, 5))),
    (_poisson(log_marginal=_log_marginal, sample_posterior=_sample_posterior), COUNTS),
], ids=["beta_bernoulli", "normal_gamma", "normal_known_precision", "dirichlet_multinomial", "poisson_gamma"])
def test_the_built_in_families_and_a_right_custom_one_pass(family, points):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FamilyCheckWarning)
        table = check_family(family, points, jax.random.key(0))
    assert len(table) == 5 and set(table["status"]) == {"ok"}, table
    assert (table["effective draws"].dropna() >= 100).all()


@pytest.mark.parametrize("parts, failing", [
    # log_marginal written for another prior than sample_base's G0
    ({"log_marginal": lambda stats: _log_marginal(stats, shape=1.0)}, ["log_marginal of 1 point", "log_marginal of 3"]),
    # statistics read as a mean where point_stats sums them: right for one point, wrong for several
    ({"log_marginal": lambda stats: _log_marginal({**stats, "s": stats["s"] * stats["n"]})}, ["log_marginal of 3"]),
    # posterior draws under another prior
    ({"log_marginal": _log_marginal, "sample_posterior": lambda key, stats: _sample_posterior(key, stats, shape=6.0)},
     ["sample_posterior given 3"]),
    # a hand-written predictive that is not the chain rule on the marginal
    ({"log_marginal": _log_marginal, "log_predictive": lambda stats, x: _log_marginal(_point_stats(x))},
     ["log_predictive of point 3"]),
])
def test_parts_that_disagree_with_the_likelihood_and_base_measure_fail_by_name(parts, failing):
    with pytest.warns(FamilyCheckWarning, match="FAILED") as caught:
        table = check_family(_poisson(**parts), COUNTS, jax.random.key(0))
    failed = [name for name, status in table["status"].items() if status == "FAILED"]
    assert [any(name.startswith(prefix) for name in failed) for prefix in failing] == [True] * len(failing), table
    assert len(failed) == len(failing), table
    assert all(prefix in str(caught[0].message) for prefix in failing)


def test_too_few_effective_draws_is_said_not_passed():
    """In 64 dimensions almost no draw of G0 is near three points: no Monte Carlo verdict."""
    points = np.random.default_rng(5).normal(size=(10, 64))
    table = check_family(normal_gamma(64), points, jax.random.key(0), n_draws=2_000)
    assert table.loc["log_marginal of 3 points against G0 draws", "status"] == "too few effective draws"
    assert table.loc["log_predictive of point 3 given the others against log_marginal", "status"] == "ok"


def test_a_family_without_optional_parts_has_nothing_to_check_and_bad_input_is_named():
    family = custom_family(_log_likelihood, _sample_base)
    table = check_family(family, COUNTS, jax.random.key(0))
    assert table.empty and "no optional parts" in table.attrs["note"]
    with pytest.raises(TypeError, match="family: expected a ComponentFamily"):
        check_family(_log_likelihood, COUNTS, jax.random.key(0))
    with pytest.raises(ValueError, match=r"points: need at least 4 points"):
        check_family(family, COUNTS[:3], jax.random.key(0))
    with pytest.raises(ValueError, match="n_points"):
        check_family(family, COUNTS, jax.random.key(0), n_points=1)
