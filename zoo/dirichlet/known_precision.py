"""Gaussian components of known precision: the CDP of DM05 §7.1 as a component family.

DM05's untrained baseline, CDP, is their model "that does not use any of the training data":
α^p = 1 and "a single reference type, the identity matrix" (DM05 §7.1) — every cluster is a
Gaussian whose precision is fixed, and only its mean is drawn from G0^p = Normal(m0, σ² I)
(DM05 §5: publications are means, reference types precisions). Per feature d::

    μ_d ~ Normal(m0_d, σ²_d),        x_d | μ ~ Normal(μ_d, 1 / τ_d),   τ fixed.

Conjugate updates (one feature; n points of sum S and sum of squares Q, mean x̄ = S / n)::

    posterior precision  p_n = 1/σ² + n τ,        posterior mean  m_n = (m0/σ² + τ S) / p_n,
    log f(x_1..n) = n/2 (log τ - log 2π) + ½ (log(1/σ²) - log p_n)
                    - ½ [τ (Q - n x̄²) + (τ n / (σ² p_n)) (x̄ - m0)²],
    predictive       x* | x_1..n ~ Normal(m_n, 1/p_n + 1/τ),

the bracket written, as for the Normal–Gamma family, as within- plus between-cluster squares.

Why it is not :func:`zoo.dirichlet.families.normal_gamma` with a tight prior: with learned
precisions, a cluster whose points share a value exactly (the blank pixels of scikit-learn's
digits) has a marginal likelihood growing like log Γ(n/2) in n (see :mod:`zoo.dirichlet.ties`),
and the posterior's modes follow the ties, hundreds of nats apart. With the precision fixed no
such term exists: on the 1,797 standardised digits, four chains of Algorithm 3 with split–merge
moves from dispersed starts agree on the log joint within 5 minutes (R-hat 1.008), where
Normal–Gamma chains stay in modes hundreds of nats apart (``benchmarks/bench_dp_mixing.py``). They
do not agree on the number of clusters or on how the digits are cut (R-hat of K and of the
partition entropy about 2.5 in ``notebooks/dp_mixture_digits.ipynb``): modes of equal height that
no move here travels between.

Every part of the fast path exists: the log-likelihood as a dot product with the Normal–Gamma
family's features (x, x², 1), and the predictive as a cached (K, 2D + 1) table, so Algorithms
2, 3 and 8 (numba sweeps included), split–merge moves and the sub-cluster sampler all run on it.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from inference._validation import check_int
from inference.display import call_text, init_defaults
from inference.components import ComponentFamily, NativePredictive, _as_float, _default_dtype
from zoo.dirichlet.families import (_LOG_2PI, GaussianParams, GaussianStats, _check_finite_matrix, _ng_cache,
                                    _ng_features, _ng_log_likelihood, _ng_point_stats, _per_feature,
                                    _shared_family, location_fields)
from zoo.dirichlet.scale import warn_off_scale

__all__ = ["normal_known_precision"]


def _warn_data(prior: _KnownPrecisionPrior, name: str, array: np.ndarray, stacklevel: int = 2, *,
               columns: Any = None) -> None:
    """Features far from the prior's scale (:func:`~zoo.dirichlet.scale.warn_off_scale`): a cluster's
    variance 1 / precision, its mean's 1 / prior_precision around ``mean``. (Tied values earn these
    components nothing beyond their distance: no tied-values warning.)"""
    warn_off_scale(name, array, prior.mean, np.sqrt(1.0 / prior.precision + 1.0 / prior.prior_precision),
                   stacklevel=stacklevel + 1, columns=columns)


class _KnownPrecisionPrior(NamedTuple):
    precision: np.ndarray  # τ, the components' fixed precision
    mean: np.ndarray  # m0, the prior mean of μ
    prior_precision: np.ndarray  # 1 / σ², the prior precision of μ
    n_features: int


def _posterior(prior: _KnownPrecisionPrior, stats: GaussianStats):
    """(τ, p0, p_n, m_n, within, between) per feature for statistics with leading cluster axes."""
    like = stats.total
    tau, mean0, p0 = (_as_float(value, like) for value in (prior.precision, prior.mean, prior.prior_precision))
    count = jnp.expand_dims(stats.count, -1)
    p_n = p0 + count * tau
    m_n = (p0 * mean0 + tau * stats.total) / p_n
    sample_mean = stats.total / jnp.maximum(count, 1.0)
    within = jnp.maximum(stats.total_sq - stats.total * sample_mean, 0.0)
    between = count * (sample_mean - mean0) ** 2 * (p0 / p_n)
    return tau, p0, p_n, m_n, within, between


def _log_marginal(prior: _KnownPrecisionPrior, stats: GaussianStats) -> jax.Array:
    tau, p0, p_n, _, within, between = _posterior(prior, stats)
    count = jnp.expand_dims(stats.count, -1)
    per_feature = (0.5 * count * (jnp.log(tau) - _LOG_2PI) + 0.5 * (jnp.log(p0) - jnp.log(p_n))
                   - 0.5 * tau * (within + between))
    return jnp.sum(per_feature, axis=-1)


def _predictive_moments(prior: _KnownPrecisionPrior, stats: GaussianStats):
    tau, _, p_n, m_n, _, _ = _posterior(prior, stats)
    return m_n, jnp.broadcast_to(1.0 / p_n + 1.0 / tau, m_n.shape)  # predictive mean and variance


def _log_predictive(prior: _KnownPrecisionPrior, stats: GaussianStats, x: jax.Array) -> jax.Array:
    mean, variance = _predictive_moments(prior, stats)
    return -0.5 * jnp.sum(_LOG_2PI + jnp.log(variance) + (x - mean) ** 2 / variance, axis=-1)


def _predictive_cache(prior: _KnownPrecisionPrior, stats: GaussianStats) -> jax.Array:
    # log N(x | m, v) = (m/v)·x - (1/(2v))·x² - ½ Σ (log 2πv + m²/v)
    mean, variance = _predictive_moments(prior, stats)
    constant = -0.5 * jnp.sum(_LOG_2PI + jnp.log(variance) + mean * mean / variance, axis=-1, keepdims=True)
    return jnp.concatenate([mean / variance, -0.5 / variance, constant], axis=-1)


def _log_predictive_from_cache(cache: jax.Array, x: jax.Array) -> jax.Array:
    n_features = x.shape[-1]
    return cache[2 * n_features] + jnp.sum(cache[:n_features] * x + cache[n_features : 2 * n_features] * x * x)


def _params(prior: _KnownPrecisionPrior, mean: jax.Array) -> GaussianParams:
    return GaussianParams(mean=mean, precision=jnp.broadcast_to(_as_float(prior.precision, mean), mean.shape))


def _sample_base(prior: _KnownPrecisionPrior, rng_key: jax.Array, shape: tuple[int, ...]) -> GaussianParams:
    like = jnp.zeros((), _default_dtype())
    mean0, p0 = _as_float(prior.mean, like), _as_float(prior.prior_precision, like)
    noise = jax.random.normal(rng_key, tuple(shape) + (prior.n_features,), like.dtype)
    return _params(prior, mean0 + noise / jnp.sqrt(p0))


def _sample_posterior(prior: _KnownPrecisionPrior, rng_key: jax.Array, stats: GaussianStats) -> GaussianParams:
    _, _, p_n, m_n, _, _ = _posterior(prior, stats)
    noise = jax.random.normal(rng_key, m_n.shape, m_n.dtype)  # row r's draw is row r of one bulk draw
    return _params(prior, m_n + noise / jnp.sqrt(p_n))


def _log_base_density(prior: _KnownPrecisionPrior, params: GaussianParams) -> jax.Array:
    mean0, p0 = _as_float(prior.mean, params.mean), _as_float(prior.prior_precision, params.mean)
    return 0.5 * jnp.sum(jnp.log(p0) - _LOG_2PI - p0 * (params.mean - mean0) ** 2)


def _program_params(prior: _KnownPrecisionPrior, n_components: int) -> GaussianParams:
    import numpyro
    import numpyro.distributions as dist

    with numpyro.plate("components", n_components, dim=-2), numpyro.plate("features", prior.n_features, dim=-1):
        mean = numpyro.sample(
            "mean", dist.Normal(jnp.asarray(prior.mean), 1.0 / jnp.sqrt(jnp.asarray(prior.prior_precision)))
        )
    return _params(prior, mean)


def _program_observe(prior: _KnownPrecisionPrior, params: GaussianParams, assignment, data, n_points: int) -> None:
    import numpyro
    import numpyro.distributions as dist
    from numpyro.ops.indexing import Vindex

    mean = Vindex(params.mean)[assignment, jnp.arange(prior.n_features)]
    with numpyro.plate("features", prior.n_features, dim=-1):
        numpyro.sample("x", dist.Normal(mean, 1.0 / jnp.sqrt(jnp.asarray(prior.precision))), obs=data)


def normal_known_precision(
    n_features: int, *, precision: Any = 1.0, mean: Any = 0.0, prior_variance: Any = 1.0
) -> ComponentFamily:
    """Diagonal Gaussian components of fixed precision with a Normal prior on their means.

    For each feature d: μ_d ~ Normal(mean_d, prior_variance_d), x_d | μ ~ Normal(μ_d, 1 /
    precision_d). With the defaults (identity precision, Normal(0, I) means) this is DM05 §7.1's
    CDP for centred data scaled to unit variance: α^p and "a single reference type, the identity
    matrix". Unlike :func:`~zoo.dirichlet.families.normal_gamma`, exactly tied values (discrete
    data) earn a cluster nothing beyond their distance, so it needs no dequantisation.

    Parameters
    ----------
    n_features : int
        Dimension D of each point.
    precision : float or array (D,)
        Fixed precision τ of every component (> 0): 1 / the within-cluster variance.
    mean : float or array (D,)
        Prior mean m0 of the component means.
    prior_variance : float or array (D,)
        Prior variance σ² of the component means (> 0).

    Returns
    -------
    ComponentFamily
        Conjugate family with :class:`~zoo.dirichlet.families.GaussianParams` parameters (the
        precision field holds τ) and :class:`~zoo.dirichlet.families.GaussianStats`.

    Examples
    --------
    >>> import jax, numpy as np
    >>> from zoo.dirichlet.mixture import DPMixture
    >>> data = np.concatenate([np.full((10, 2), -3.0), np.full((10, 2), 3.0)])
    >>> model = DPMixture(normal_known_precision(2), algorithm="collapsed", max_clusters=8)
    >>> fit = model.fit(data, jax.random.key(0), n_chains=2, n_warmup=20, n_draws=20, progress=False)
    >>> int(fit.result.samples["n_clusters"][:, -1].max())
    2
    """
    n_features = check_int("n_features", n_features, minimum=1)
    prior = _KnownPrecisionPrior(
        precision=_per_feature("precision", precision, n_features, positive=True),
        mean=_per_feature("mean", mean, n_features, positive=False),
        prior_precision=1.0 / _per_feature("prior_variance", prior_variance, n_features, positive=True),
        n_features=n_features,
    )
    description = call_text("normal_known_precision", [n_features],
                            {"precision": prior.precision, "mean": prior.mean, "prior_variance": 1.0 / prior.prior_precision},
                            init_defaults(normal_known_precision))
    return _shared_family(prior, lambda: ComponentFamily(
        description=description,
        name="normal_known_precision",
        n_features=n_features,
        log_likelihood=_ng_log_likelihood,
        sample_base=partial(_sample_base, prior),
        log_base_density=partial(_log_base_density, prior),
        point_stats=_ng_point_stats,
        log_marginal=partial(_log_marginal, prior),
        log_predictive=partial(_log_predictive, prior),
        sample_posterior=partial(_sample_posterior, prior),
        features=_ng_features,
        likelihood_cache=_ng_cache,
        predictive_cache=partial(_predictive_cache, prior),
        log_predictive_from_cache=_log_predictive_from_cache,
        native_predictive=NativePredictive.of("normal_known", prior.precision, prior.mean, prior.prior_precision),
        check_data=partial(_check_finite_matrix, n_features=n_features),
        warn_data=partial(_warn_data, prior),
        program_params=partial(_program_params, prior),
        program_observe=partial(_program_observe, prior),
        **location_fields(prior.mean, n_features, lambda: normal_known_precision(
            n_features, precision=prior.precision, mean=0.0, prior_variance=1.0 / prior.prior_precision)),
    ))
