"""Component families F(x | φ) with base measures G0(φ) for Dirichlet-process mixtures.

A Dirichlet-process mixture (DM05 §3, App. A; Neal 2000) draws each cluster's parameters φ from a
base measure G0 and each point of the cluster from F(· | φ). The Gibbs kernels of
:mod:`inference.neal` need, depending on the algorithm (Neal 2000):

* Algorithm 8 (auxiliary components, any G0 that can be sampled): ``sample_base`` and
  ``log_likelihood``; the cluster parameters are resampled after each sweep from
  ``sample_posterior`` when the family has one, else by an independence sampler with G0 proposals
  (DM05 §4.2).
* Algorithm 2 (conjugate, explicit parameters): also the prior predictive and
  ``sample_posterior`` (DM05 §4.1, Figure 2).
* Algorithm 3 (collapsed): sufficient statistics, ``log_predictive`` and ``log_marginal``.

A family is a :class:`ComponentFamily`: a ``NamedTuple`` of pure, jittable functions (closed over
the prior's hyperparameters), so a user can build one from two functions with
:func:`custom_family`. Three conjugate families are built in:

* :func:`normal_gamma` — diagonal Gaussian with an independent Normal–Gamma prior per feature
  (DM05 §5: means and per-feature precisions, "product of inverse-gamma" variances);
* :func:`dirichlet_multinomial` — rows of counts, Multinomial with a Dirichlet prior;
* :func:`beta_bernoulli` — binary features, independent Bernoullis with Beta priors;

and, in :mod:`zoo.dirichlet.known_precision`, :func:`~zoo.dirichlet.known_precision.normal_known_precision`
— diagonal Gaussians of fixed precision with a Normal prior on the means (DM05 §7.1's CDP).

Fast path. Each built-in family writes its log-likelihood as a dot product,
``log F(x | φ) = likelihood_cache(φ) · features(x)``, exact (the point-only terms ride along as a
feature with weight one). The kernels precompute ``features`` once per data set and the cache once
per cluster, so scoring a point against K clusters is one (K, F) × (F,) product. Families without
this form use ``features = identity`` and ``likelihood_cache = identity``.

Conventions: ``params`` and ``stats`` are pytrees whose leaves carry the component axis first
when batched; one point ``x`` has shape (n_features,). All Gamma distributions use *rate*.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from inference._validation import as_float_array, check_int, check_real
from inference.display import call_text, init_defaults
from inference.components import (ComponentFamily, NativePredictive, _as_float, _default_dtype, _log_dirichlet, add_stats,
                                  sample_log_gamma, subtract_stats)
from zoo.dirichlet.scale import warn_off_scale
from zoo.dirichlet.ties import warn_tied_features

__all__ = [
    "ComponentFamily",
    "GaussianParams",
    "GaussianStats",
    "MultinomialParams",
    "MultinomialStats",
    "BernoulliParams",
    "BernoulliStats",
    "normal_gamma",
    "dirichlet_multinomial",
    "beta_bernoulli",
    "custom_family",
    "sample_log_gamma",
    "add_stats",
    "subtract_stats",
]

_LOG_2PI = math.log(2.0 * math.pi)


def _check_width(name: str, array: np.ndarray, n_features: int, *, custom: bool = False) -> None:
    """A ``ValueError`` naming ``name`` and the cure when the data's columns are not the family's
    features (a ``custom`` family's ``n_features`` is a keyword, not its first argument)."""
    if array.shape[1] != n_features:
        width = array.shape[1]
        cure = (f"custom_family(..., n_features={width})" if custom else
                f"its first argument, n_features, e.g. normal_gamma({width}); zoo.get_model(name, "
                f"n_features={width}) for a registry model")
        raise ValueError(f"{name}: expected {n_features} features (columns), got {width}: the component family was "
                         f"built for {n_features}; build it for {width} ({cure})")


def _check_finite_matrix(name: str, data: Any, n_features: int | None, *, custom: bool = False) -> np.ndarray:
    array = as_float_array(name, data, ndim=2)
    if n_features is not None:
        _check_width(name, array, n_features, custom=custom)
    # A cluster's statistics sum squares of its points: they must not overflow the working float
    # (values of 1e19 in float32 made every log joint -inf, in silence).
    dtype = jnp.result_type(float)
    limit = float(np.sqrt(np.finfo(dtype).max / (16.0 * max(array.shape[0], 1))))
    largest = float(np.abs(array).max()) if array.size else 0.0
    if largest > limit:
        raise ValueError(f"{name}: values up to {largest:.3g} overflow {np.dtype(dtype).name} sums of squares "
                         f"(limit {limit:.3g}); rescale the features or enable float64")
    return array


# ----------------------------------------------------------------------------------------------
# Diagonal Gaussian with a Normal–Gamma prior (DM05 §5)
# ----------------------------------------------------------------------------------------------
class GaussianParams(NamedTuple):
    """Parameters of a diagonal Gaussian component: ``mean`` and ``precision`` (n_features,)."""

    mean: jax.Array
    precision: jax.Array


class GaussianStats(NamedTuple):
    """Sufficient statistics: point ``count`` (scalar), ``total`` and ``total_sq`` (n_features,)."""

    count: jax.Array
    total: jax.Array
    total_sq: jax.Array


class _NormalGammaPrior(NamedTuple):
    mean: np.ndarray
    kappa: np.ndarray
    shape: np.ndarray
    rate: np.ndarray
    n_features: int


def _ng_posterior(prior: _NormalGammaPrior, stats: GaussianStats):
    """Posterior Normal–Gamma hyperparameters per feature (conjugate update)."""
    like = stats.total
    mean0, kappa0 = _as_float(prior.mean, like), _as_float(prior.kappa, like)
    shape0, rate0 = _as_float(prior.shape, like), _as_float(prior.rate, like)
    count = jnp.expand_dims(stats.count, -1)  # statistics may carry leading cluster axes
    kappa_n = kappa0 + count
    mean_n = (kappa0 * mean0 + stats.total) / kappa_n
    safe_count = jnp.maximum(count, 1.0)
    sample_mean = stats.total / safe_count
    within = jnp.maximum(stats.total_sq - stats.total * sample_mean, 0.0)
    between = count * (sample_mean - mean0) ** 2 * (kappa0 / kappa_n)  # κ0 n / κn without the product κ0 n
    rate_n = rate0 + 0.5 * (within + between)
    shape_n = shape0 + 0.5 * count
    return mean_n, kappa_n, shape_n, rate_n


def _ng_point_stats(x: jax.Array) -> GaussianStats:
    return GaussianStats(jnp.ones((), x.dtype), x, x * x)


def _ng_log_marginal(prior: _NormalGammaPrior, stats: GaussianStats) -> jax.Array:
    like = stats.total
    kappa0, shape0, rate0 = (_as_float(v, like) for v in (prior.kappa, prior.shape, prior.rate))
    _, kappa_n, shape_n, rate_n = _ng_posterior(prior, stats)
    per_feature = (
        gammaln(shape_n) - gammaln(shape0) + shape0 * jnp.log(rate0) - shape_n * jnp.log(rate_n)
        + 0.5 * (jnp.log(kappa0) - jnp.log(kappa_n))
    )
    per_feature = jnp.broadcast_to(per_feature, stats.total.shape)
    return jnp.sum(per_feature) - 0.5 * stats.count * stats.total.shape[-1] * _LOG_2PI


def _ng_log_predictive(prior: _NormalGammaPrior, stats: GaussianStats, x: jax.Array) -> jax.Array:
    mean_n, kappa_n, shape_n, rate_n = _ng_posterior(prior, stats)
    # Student-t predictive with 2 a_n degrees of freedom (posterior predictive of a Normal–Gamma).
    scale_factor = kappa_n / (kappa_n + 1.0)
    per_feature = (
        gammaln(shape_n + 0.5) - gammaln(shape_n)
        - 0.5 * (_LOG_2PI + jnp.log(rate_n) - jnp.log(scale_factor))
        - (shape_n + 0.5) * jnp.log1p(scale_factor * (x - mean_n) ** 2 / (2.0 * rate_n))
    )
    return jnp.sum(per_feature)


def _ng_predictive_cache(prior: _NormalGammaPrior, stats: GaussianStats) -> jax.Array:
    mean_n, kappa_n, shape_n, rate_n = _ng_posterior(prior, stats)
    scale_factor = kappa_n / (kappa_n + 1.0)
    power = jnp.broadcast_to(shape_n + 0.5, mean_n.shape)
    coefficient = jnp.broadcast_to(scale_factor / (2.0 * rate_n), mean_n.shape)
    constant = jnp.sum(
        jnp.broadcast_to(
            gammaln(shape_n + 0.5) - gammaln(shape_n) - 0.5 * (_LOG_2PI + jnp.log(rate_n) - jnp.log(scale_factor)),
            mean_n.shape,
        )
    )
    return jnp.concatenate([mean_n, coefficient, power, constant[None]])


def _ng_log_predictive_from_cache(cache: jax.Array, x: jax.Array) -> jax.Array:
    n_features = x.shape[-1]
    mean_n = cache[:n_features]
    coefficient = cache[n_features : 2 * n_features]
    power = cache[2 * n_features : 3 * n_features]
    return cache[3 * n_features] - jnp.sum(power * jnp.log1p(coefficient * (x - mean_n) ** 2))


def _ng_draw(
    prior_values, rng_key: jax.Array, full_shape: tuple[int, ...], at_least_one: bool
) -> GaussianParams:
    mean_n, kappa_n, shape_n, rate_n = prior_values
    key_precision, key_mean = jax.random.split(rng_key)
    log_precision = sample_log_gamma(key_precision, shape_n, full_shape, at_least_one=at_least_one) - jnp.log(rate_n)
    noise = jax.random.normal(key_mean, full_shape, dtype=log_precision.dtype)
    mean = mean_n + noise * jnp.exp(-0.5 * (jnp.log(kappa_n) + log_precision))
    return GaussianParams(mean=mean, precision=jnp.exp(log_precision))


def _ng_sample_base(prior: _NormalGammaPrior, rng_key: jax.Array, shape: tuple[int, ...]) -> GaussianParams:
    like = jnp.zeros((), _default_dtype())
    shape0 = prior.shape
    concentration = float(shape0) if np.ndim(shape0) == 0 else _as_float(shape0, like)
    values = (_as_float(prior.mean, like), _as_float(prior.kappa, like), concentration, _as_float(prior.rate, like))
    return _ng_draw(values, rng_key, tuple(shape) + (prior.n_features,), bool(np.all(prior.shape >= 1.0)))


def _ng_sample_posterior(prior: _NormalGammaPrior, rng_key: jax.Array, stats: GaussianStats) -> GaussianParams:
    values = _ng_posterior(prior, stats)
    full_shape = jnp.broadcast_shapes(*(jnp.shape(value) for value in values))
    return _ng_draw(values, rng_key, full_shape, bool(np.all(prior.shape >= 1.0)))


def _ng_log_likelihood(params: GaussianParams, x: jax.Array) -> jax.Array:
    precision = params.precision
    return 0.5 * jnp.sum(jnp.log(precision) - _LOG_2PI - precision * (x - params.mean) ** 2)


def _ng_log_base_density(prior: _NormalGammaPrior, params: GaussianParams) -> jax.Array:
    like = params.mean
    mean0, kappa0 = _as_float(prior.mean, like), _as_float(prior.kappa, like)
    shape0, rate0 = _as_float(prior.shape, like), _as_float(prior.rate, like)
    precision = params.precision
    log_gamma = shape0 * jnp.log(rate0) - gammaln(shape0) + (shape0 - 1.0) * jnp.log(precision) - rate0 * precision
    log_normal = 0.5 * (jnp.log(kappa0 * precision) - _LOG_2PI - kappa0 * precision * (params.mean - mean0) ** 2)
    return jnp.sum(log_gamma + log_normal)


def _ng_features(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, x * x, jnp.ones((1,), x.dtype)])


def _ng_cache(params: GaussianParams) -> jax.Array:
    precision, mean = params.precision, params.mean
    # log N(x | μ, 1/λ) = λμ·x - λ/2·x² + Σ(½ log λ - ½ λ μ²) - D/2 log 2π
    offset = 0.5 * jnp.sum(jnp.log(precision) - precision * mean * mean - _LOG_2PI, axis=-1, keepdims=True)
    return jnp.concatenate([precision * mean, -0.5 * precision, offset], axis=-1)


def _ng_program_params(prior: _NormalGammaPrior, n_components: int) -> GaussianParams:
    import numpyro
    import numpyro.distributions as dist

    with numpyro.plate("components", n_components, dim=-2), numpyro.plate("features", prior.n_features, dim=-1):
        precision = numpyro.sample("precision", dist.Gamma(jnp.asarray(prior.shape), jnp.asarray(prior.rate)))
        mean = numpyro.sample(
            "mean", dist.Normal(jnp.asarray(prior.mean), 1.0 / jnp.sqrt(jnp.asarray(prior.kappa) * precision))
        )
    return GaussianParams(mean=mean, precision=precision)


def _ng_program_observe(prior: _NormalGammaPrior, params: GaussianParams, assignment, data, n_points: int) -> None:
    import numpyro
    import numpyro.distributions as dist
    from numpyro.ops.indexing import Vindex

    feature_index = jnp.arange(prior.n_features)
    mean = Vindex(params.mean)[assignment, feature_index]
    precision = Vindex(params.precision)[assignment, feature_index]
    with numpyro.plate("features", prior.n_features, dim=-1):
        numpyro.sample("x", dist.Normal(mean, 1.0 / jnp.sqrt(precision)), obs=data)


def _ng_warn_data(prior: _NormalGammaPrior, name: str, array: np.ndarray, stacklevel: int = 2, *,
                  columns: Any = None) -> None:
    """Tied features (:func:`~zoo.dirichlet.ties.warn_tied_features`), and features far from the
    prior's scale (:func:`~zoo.dirichlet.scale.warn_off_scale`): a cluster's variance about
    rate / shape, its mean's about rate / (shape kappa) around ``mean``."""
    warn_tied_features(name, array, stacklevel + 1, columns=columns)
    within = prior.rate / prior.shape
    warn_off_scale(name, array, prior.mean, np.sqrt(within + within / prior.kappa), stacklevel=stacklevel + 1,
                   columns=columns)


def _describe(constructor: Callable[..., ComponentFamily], prior: NamedTuple) -> str:
    """The family's :attr:`~inference.components.ComponentFamily.description`: the constructor's call
    with the prior's values that differ from its defaults (``normal_gamma(64, rate=0.5)``)."""
    values = {name: value for name, value in prior._asdict().items() if name != "n_features"}
    return call_text(constructor.__name__, [prior.n_features], values, init_defaults(constructor))


def _per_feature(name: str, value: Any, n_features: int, *, positive: bool) -> np.ndarray:
    """A hyperparameter as a scalar or one value per feature, within the working dtype's safe range.

    The kernels square hyperparameters and data (κ0 (x̄ - m0)², λ (x - μ)²) and take log Γ and
    logs of them, so a value must lie within [√tiny, √max] of the working float (about
    [1.1e-19, 1.8e19] in float32; |mean| at most √max): beyond it, log-densities overflow or a
    subnormal value is computed as 0 and the chains fill with NaN.
    """
    if np.ndim(value) == 0:
        number = check_real(name, value, low=0.0 if positive else None, low_open=positive)
        array = np.asarray(number, dtype=np.float64)
    else:
        array = np.array(as_float_array(name, value, ndim=1), dtype=np.float64)  # a copy: never the caller's array
        if array.shape[0] != n_features:
            raise ValueError(f"{name}: expected a scalar or {n_features} values, got shape {array.shape}")
        if positive and (array <= 0).any():
            raise ValueError(f"{name}: must be > 0, got minimum {array.min()}")
    working = np.finfo(np.dtype(_default_dtype()))
    low, high = float(np.sqrt(working.tiny)), float(np.sqrt(working.max))
    magnitude = np.abs(array)
    if magnitude.max() > high or (positive and magnitude.min() < low):
        bounds = f"[{low:.3g}, {high:.3g}]" if positive else f"[-{high:.3g}, {high:.3g}]"
        worst = magnitude.max() if magnitude.max() > high else magnitude.min()
        raise ValueError(f"{name}: {worst:.3g} lies outside {bounds}, the range whose squares {working.dtype} holds; "
                         "rescale the data or enable float64")
    return array


_SHARED_FAMILIES: dict[tuple, ComponentFamily] = {}
_MAX_SHARED_FAMILIES = 256


def _shared_family(prior: NamedTuple, build: Callable[[], ComponentFamily]) -> ComponentFamily:
    """The family of ``prior``, one object per distinct prior: built by ``build`` the first time,
    then returned again for a prior of equal values (and the same working float).

    JAX compiles a sampler once per step function, and a step holds its family; two calls of
    ``normal_gamma(64)`` would otherwise give two families of functions bound to two priors, and
    a new ``DPMixture(normal_gamma(64))`` in a re-run notebook cell would compile its sweeps
    again (7 to 10 s for a small fit on 2 cores) instead of reusing them. Priors hold numbers and
    numpy arrays copied from the caller's values, so a family never changes after it is built.
    """
    parts = [type(prior).__name__, np.dtype(_default_dtype()).str]
    for value in prior:
        if isinstance(value, np.ndarray):
            parts.append(("array", value.dtype.str, value.shape, value.tobytes()))
        elif isinstance(value, (bool, int, float, str)):
            parts.append((type(value).__name__, value))
        else:
            return build()
    key = tuple(parts)
    family = _SHARED_FAMILIES.get(key)
    if family is None:
        if len(_SHARED_FAMILIES) >= _MAX_SHARED_FAMILIES:
            _SHARED_FAMILIES.pop(next(iter(_SHARED_FAMILIES)))
        family = _SHARED_FAMILIES[key] = build()
    return family


def normal_gamma(
    n_features: int, *, mean: Any = 0.0, kappa: Any = 1.0, shape: Any = 1.0, rate: Any = 1.0
) -> ComponentFamily:
    """Diagonal Gaussian components with an independent Normal–Gamma prior per feature.

    For each feature d: λ_d ~ Gamma(shape, rate), μ_d | λ_d ~ Normal(mean_d, 1 / (kappa λ_d)),
    x_d | μ, λ ~ Normal(μ_d, 1 / λ_d). This is DM05 §5's Gaussian with a diagonal precision
    ("reference type") and a mean ("publication"), with the standard conjugate coupling of the
    mean's prior to the precision. DM05's defaults for centred, sphered data are mean 0 and
    Gamma(1, 1) precisions.

    Each cluster's precision has the Gamma prior to itself, so in a small cluster the prior
    outweighs the data: however tight its n points, the posterior mean of λ_d stays below
    (shape + n / 2) / rate (2.5 for three points under the defaults, a standard deviation of
    about 0.6). Small, tight clusters therefore merge on data of unit scale: forty clusters of
    three points in 4-D with spread 0.05 and centres N(0, 1), started at the truth, held 8 and 9
    clusters in two chains after three sweeps of Algorithm 3. For such data give a rate near
    shape times the expected within-cluster variance, and a kappa near that variance over the
    centres' (μ's prior variance is 1 / (kappa λ)): with rate and kappa both 0.0025 the same
    start held 40, 40 and 39 clusters; with the rate alone, 18 to 34.

    Parameters
    ----------
    n_features : int
        Dimension D of each point.
    mean : float or array (D,)
        Prior mean of μ.
    kappa : float or array (D,)
        Prior pseudo-count of μ (> 0): μ's prior precision is kappa λ.
    shape, rate : float or array (D,)
        Gamma(shape, rate) prior on each precision λ_d (> 0).

    Returns
    -------
    ComponentFamily
        Conjugate family with :class:`GaussianParams` parameters and :class:`GaussianStats`.

    Examples
    --------
    >>> family = normal_gamma(2)
    >>> family.is_conjugate
    True
    """
    n_features = check_int("n_features", n_features, minimum=1)
    prior = _NormalGammaPrior(
        mean=_per_feature("mean", mean, n_features, positive=False),
        kappa=_per_feature("kappa", kappa, n_features, positive=True),
        shape=_per_feature("shape", shape, n_features, positive=True),
        rate=_per_feature("rate", rate, n_features, positive=True),
        n_features=n_features,
    )
    description = _describe(normal_gamma, prior)
    return _shared_family(prior, lambda: ComponentFamily(
        description=description,
        name="normal_gamma",
        n_features=n_features,
        log_likelihood=_ng_log_likelihood,
        sample_base=partial(_ng_sample_base, prior),
        log_base_density=partial(_ng_log_base_density, prior),
        point_stats=_ng_point_stats,
        log_marginal=partial(_ng_log_marginal, prior),
        log_predictive=partial(_ng_log_predictive, prior),
        sample_posterior=partial(_ng_sample_posterior, prior),
        features=_ng_features,
        likelihood_cache=_ng_cache,
        predictive_cache=partial(_ng_predictive_cache, prior),
        log_predictive_from_cache=_ng_log_predictive_from_cache,
        native_predictive=NativePredictive.of("normal_gamma", prior.mean, prior.kappa, prior.shape, prior.rate),
        check_data=partial(_check_finite_matrix, n_features=n_features),
        warn_data=partial(_ng_warn_data, prior),
        program_params=partial(_ng_program_params, prior),
        program_observe=partial(_ng_program_observe, prior),
        **location_fields(prior.mean, n_features, lambda: normal_gamma(
            n_features, mean=0.0, kappa=prior.kappa, shape=prior.shape, rate=prior.rate)),
    ))


def location_fields(mean: np.ndarray, n_features: int, centred: Callable[[], ComponentFamily]) -> dict:
    """The ``origin`` and ``centred`` fields of a Gaussian family whose prior mean is ``mean``:
    none for a mean of 0 (the kernels work about it already), else the mean, one value per
    feature, and the family of the same prior about 0 (see :class:`ComponentFamily`)."""
    if not np.any(mean):
        return {}
    return {"origin": tuple(float(value) for value in np.broadcast_to(mean, (n_features,))), "centred": centred}


# ----------------------------------------------------------------------------------------------
# Multinomial rows of counts with a Dirichlet prior
# ----------------------------------------------------------------------------------------------
class MultinomialParams(NamedTuple):
    """Parameters of a Multinomial component: ``log_probs`` (n_features,), normalised."""

    log_probs: jax.Array


class MultinomialStats(NamedTuple):
    """Sufficient statistics: summed ``counts`` (n_features,) and summed ``log_coefficient``."""

    counts: jax.Array
    log_coefficient: jax.Array


class _DirichletPrior(NamedTuple):
    concentration: np.ndarray
    n_features: int
    total_count: int


def _log_multinomial_coefficient(x: jax.Array) -> jax.Array:
    return gammaln(jnp.sum(x, axis=-1) + 1.0) - jnp.sum(gammaln(x + 1.0), axis=-1)


def _dm_point_stats(x: jax.Array) -> MultinomialStats:
    return MultinomialStats(x, _log_multinomial_coefficient(x))


def _dm_concentration(prior: _DirichletPrior, like: jax.Array) -> jax.Array:
    return jnp.broadcast_to(_as_float(prior.concentration, like), (prior.n_features,))


def _dm_log_marginal(prior: _DirichletPrior, stats: MultinomialStats) -> jax.Array:
    beta = _dm_concentration(prior, stats.counts)
    total = jnp.sum(beta)
    # Dirichlet–multinomial evidence of all points of one cluster.
    return (
        stats.log_coefficient + gammaln(total) - gammaln(total + jnp.sum(stats.counts))
        + jnp.sum(gammaln(beta + stats.counts) - gammaln(beta))
    )


def _dm_log_predictive(prior: _DirichletPrior, stats: MultinomialStats, x: jax.Array) -> jax.Array:
    posterior = _dm_concentration(prior, stats.counts) + stats.counts
    total = jnp.sum(posterior)
    return (
        _log_multinomial_coefficient(x) + gammaln(total) - gammaln(total + jnp.sum(x))
        + jnp.sum(gammaln(posterior + x) - gammaln(posterior))
    )


def _dm_predictive_cache(prior: _DirichletPrior, stats: MultinomialStats) -> jax.Array:
    posterior = _dm_concentration(prior, stats.counts) + stats.counts
    total = jnp.sum(posterior)
    return jnp.concatenate([posterior, jnp.stack([total, gammaln(total) - jnp.sum(gammaln(posterior))])])


def _dm_log_predictive_from_cache(cache: jax.Array, x: jax.Array) -> jax.Array:
    n_features = x.shape[-1]
    posterior, total, constant = cache[:n_features], cache[n_features], cache[n_features + 1]
    return (
        _log_multinomial_coefficient(x) + constant - gammaln(total + jnp.sum(x))
        + jnp.sum(gammaln(posterior + x))
    )


def _dm_sample_base(prior: _DirichletPrior, rng_key: jax.Array, shape: tuple[int, ...]) -> MultinomialParams:
    beta = _dm_concentration(prior, jnp.zeros((), _default_dtype()))
    return MultinomialParams(_log_dirichlet(rng_key, beta, tuple(shape) + (prior.n_features,)))


def _dm_sample_posterior(prior: _DirichletPrior, rng_key: jax.Array, stats: MultinomialStats) -> MultinomialParams:
    posterior = _dm_concentration(prior, stats.counts) + stats.counts
    return MultinomialParams(_log_dirichlet(rng_key, posterior, posterior.shape))


def _dm_log_likelihood(params: MultinomialParams, x: jax.Array) -> jax.Array:
    return _log_multinomial_coefficient(x) + jnp.sum(x * params.log_probs)


def _dm_log_base_density(prior: _DirichletPrior, params: MultinomialParams) -> jax.Array:
    beta = _dm_concentration(prior, params.log_probs)
    return gammaln(jnp.sum(beta)) - jnp.sum(gammaln(beta)) + jnp.sum((beta - 1.0) * params.log_probs)


def _dm_features(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, _log_multinomial_coefficient(x)[None]])


def _dm_cache(params: MultinomialParams) -> jax.Array:
    ones = jnp.ones(params.log_probs.shape[:-1] + (1,), params.log_probs.dtype)
    return jnp.concatenate([params.log_probs, ones], axis=-1)


def _dm_check_data(prior: _DirichletPrior, name: str, data: Any) -> np.ndarray:
    array = as_float_array(name, data, ndim=2, nonnegative=True)
    _check_width(name, array, prior.n_features)
    if (array != np.round(array)).any():
        raise ValueError(f"{name}: counts must be whole numbers")
    return array


def _dm_program_params(prior: _DirichletPrior, n_components: int) -> MultinomialParams:
    import numpyro
    import numpyro.distributions as dist

    beta = jnp.broadcast_to(jnp.asarray(prior.concentration), (prior.n_features,))
    with numpyro.plate("components", n_components, dim=-1):
        probs = numpyro.sample("probs", dist.Dirichlet(beta))
    return MultinomialParams(jnp.log(probs))


def _dm_program_observe(prior: _DirichletPrior, params: MultinomialParams, assignment, data, n_points: int) -> None:
    import numpyro
    import numpyro.distributions as dist
    from numpyro.ops.indexing import Vindex

    # ``assignment`` carries the points plate at dim -2; rows get a singleton axis to match.
    probs = jnp.exp(Vindex(params.log_probs)[assignment, :])
    if data is None:
        total = jnp.full((n_points, 1), prior.total_count)
        observed = None
    else:
        total = jnp.sum(data, axis=-1, keepdims=True)
        observed = data[:, None, :]
    numpyro.sample("x", dist.Multinomial(total_count=total, probs=probs), obs=observed)


def dirichlet_multinomial(n_features: int, *, concentration: Any = 1.0, total_count: int = 10) -> ComponentFamily:
    """Multinomial components over rows of counts with a Dirichlet(concentration) prior.

    Parameters
    ----------
    n_features : int
        Number of categories D (columns of the count matrix).
    concentration : float or array (D,)
        Dirichlet concentration β > 0.
    total_count : int
        Row total used only when the NumPyro program simulates data without observations.

    Returns
    -------
    ComponentFamily
        Conjugate family with :class:`MultinomialParams` and :class:`MultinomialStats`.

    Examples
    --------
    >>> dirichlet_multinomial(5, concentration=0.5).name
    'dirichlet_multinomial'
    """
    n_features = check_int("n_features", n_features, minimum=1)
    prior = _DirichletPrior(
        concentration=_per_feature("concentration", concentration, n_features, positive=True),
        n_features=n_features,
        total_count=check_int("total_count", total_count, minimum=0),
    )
    description = _describe(dirichlet_multinomial, prior)
    return _shared_family(prior, lambda: ComponentFamily(
        description=description,
        name="dirichlet_multinomial",
        n_features=n_features,
        log_likelihood=_dm_log_likelihood,
        sample_base=partial(_dm_sample_base, prior),
        log_base_density=partial(_dm_log_base_density, prior),
        point_stats=_dm_point_stats,
        log_marginal=partial(_dm_log_marginal, prior),
        log_predictive=partial(_dm_log_predictive, prior),
        sample_posterior=partial(_dm_sample_posterior, prior),
        features=_dm_features,
        likelihood_cache=_dm_cache,
        predictive_cache=partial(_dm_predictive_cache, prior),
        log_predictive_from_cache=_dm_log_predictive_from_cache,
        check_data=partial(_dm_check_data, prior),
        program_params=partial(_dm_program_params, prior),
        program_observe=partial(_dm_program_observe, prior),
    ))


# ----------------------------------------------------------------------------------------------
# Independent Bernoulli features with Beta priors
# ----------------------------------------------------------------------------------------------
class BernoulliParams(NamedTuple):
    """Parameters of a Bernoulli component: ``logits`` (n_features,) of P(x_d = 1)."""

    logits: jax.Array


class BernoulliStats(NamedTuple):
    """Sufficient statistics: point ``count`` (scalar) and ``ones`` per feature (n_features,)."""

    count: jax.Array
    ones: jax.Array


class _BetaPrior(NamedTuple):
    a: np.ndarray
    b: np.ndarray
    n_features: int


def _bb_point_stats(x: jax.Array) -> BernoulliStats:
    return BernoulliStats(jnp.ones((), x.dtype), x)


def _bb_hyper(prior: _BetaPrior, like: jax.Array):
    shape = (prior.n_features,)
    return jnp.broadcast_to(_as_float(prior.a, like), shape), jnp.broadcast_to(_as_float(prior.b, like), shape)


def _log_beta_function(a: jax.Array, b: jax.Array) -> jax.Array:
    return gammaln(a) + gammaln(b) - gammaln(a + b)


def _bb_log_marginal(prior: _BetaPrior, stats: BernoulliStats) -> jax.Array:
    a, b = _bb_hyper(prior, stats.ones)
    zeros = stats.count - stats.ones
    return jnp.sum(_log_beta_function(a + stats.ones, b + zeros) - _log_beta_function(a, b))


def _bb_log_predictive(prior: _BetaPrior, stats: BernoulliStats, x: jax.Array) -> jax.Array:
    a, b = _bb_hyper(prior, stats.ones)
    a_n, b_n = a + stats.ones, b + stats.count - stats.ones
    return jnp.sum(x * jnp.log(a_n) + (1.0 - x) * jnp.log(b_n) - jnp.log(a_n + b_n))


def _bb_predictive_cache(prior: _BetaPrior, stats: BernoulliStats) -> jax.Array:
    a, b = _bb_hyper(prior, stats.ones)
    a_n, b_n = a + stats.ones, b + stats.count - stats.ones
    # Σ_d x_d log(a_n / b_n) + Σ_d log(b_n / (a_n + b_n)): linear in x.
    offset = jnp.sum(jnp.log(b_n) - jnp.log(a_n + b_n))
    return jnp.concatenate([jnp.log(a_n) - jnp.log(b_n), offset[None]])


def _bb_log_predictive_from_cache(cache: jax.Array, x: jax.Array) -> jax.Array:
    n_features = x.shape[-1]
    return jnp.dot(cache[:n_features], x, precision="highest") + cache[n_features]


def _bb_draw(rng_key: jax.Array, a: jax.Array, b: jax.Array, shape: tuple[int, ...]) -> BernoulliParams:
    key_one, key_zero = jax.random.split(rng_key)
    # θ = G1 / (G1 + G0) with G1 ~ Gamma(a), G0 ~ Gamma(b); logit θ = log G1 - log G0.
    return BernoulliParams(sample_log_gamma(key_one, a, shape) - sample_log_gamma(key_zero, b, shape))


def _bb_sample_base(prior: _BetaPrior, rng_key: jax.Array, shape: tuple[int, ...]) -> BernoulliParams:
    a, b = _bb_hyper(prior, jnp.zeros((), _default_dtype()))
    return _bb_draw(rng_key, a, b, tuple(shape) + (prior.n_features,))


def _bb_sample_posterior(prior: _BetaPrior, rng_key: jax.Array, stats: BernoulliStats) -> BernoulliParams:
    a, b = _bb_hyper(prior, stats.ones)
    count = jnp.expand_dims(stats.count, -1)
    return _bb_draw(rng_key, a + stats.ones, b + count - stats.ones, stats.ones.shape)


def _bb_log_likelihood(params: BernoulliParams, x: jax.Array) -> jax.Array:
    return jnp.sum(x * params.logits - jax.nn.softplus(params.logits))


def _bb_log_base_density(prior: _BetaPrior, params: BernoulliParams) -> jax.Array:
    a, b = _bb_hyper(prior, params.logits)
    log_p, log_q = -jax.nn.softplus(-params.logits), -jax.nn.softplus(params.logits)
    # Beta density of θ = sigmoid(logits), with respect to θ.
    return jnp.sum((a - 1.0) * log_p + (b - 1.0) * log_q - _log_beta_function(a, b))


def _bb_features(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, jnp.ones((1,), x.dtype)])


def _bb_cache(params: BernoulliParams) -> jax.Array:
    logits = params.logits
    offset = -jnp.sum(jax.nn.softplus(logits), axis=-1, keepdims=True)
    return jnp.concatenate([logits, offset], axis=-1)


def _bb_check_data(prior: _BetaPrior, name: str, data: Any) -> np.ndarray:
    array = as_float_array(name, data, ndim=2)
    _check_width(name, array, prior.n_features)
    if not np.isin(array, (0.0, 1.0)).all():
        raise ValueError(f"{name}: binary features must be 0 or 1")
    return array


def _bb_program_params(prior: _BetaPrior, n_components: int) -> BernoulliParams:
    import numpyro
    import numpyro.distributions as dist

    with numpyro.plate("components", n_components, dim=-2), numpyro.plate("features", prior.n_features, dim=-1):
        probs = numpyro.sample("probs", dist.Beta(jnp.asarray(prior.a), jnp.asarray(prior.b)))
    return BernoulliParams(jnp.log(probs) - jnp.log1p(-probs))


def _bb_program_observe(prior: _BetaPrior, params: BernoulliParams, assignment, data, n_points: int) -> None:
    import numpyro
    import numpyro.distributions as dist
    from numpyro.ops.indexing import Vindex

    logits = Vindex(params.logits)[assignment, jnp.arange(prior.n_features)]
    with numpyro.plate("features", prior.n_features, dim=-1):
        numpyro.sample("x", dist.Bernoulli(logits=logits), obs=data)


def beta_bernoulli(n_features: int, *, a: Any = 1.0, b: Any = 1.0) -> ComponentFamily:
    """Independent Bernoulli features with Beta(a, b) priors on each success probability.

    Parameters
    ----------
    n_features : int
        Number of binary features D.
    a, b : float or array (D,)
        Beta prior parameters (> 0).

    Returns
    -------
    ComponentFamily
        Conjugate family with :class:`BernoulliParams` and :class:`BernoulliStats`.

    Examples
    --------
    >>> beta_bernoulli(3).n_features
    3
    """
    n_features = check_int("n_features", n_features, minimum=1)
    prior = _BetaPrior(
        a=_per_feature("a", a, n_features, positive=True),
        b=_per_feature("b", b, n_features, positive=True),
        n_features=n_features,
    )
    description = _describe(beta_bernoulli, prior)
    return _shared_family(prior, lambda: ComponentFamily(
        description=description,
        name="beta_bernoulli",
        n_features=n_features,
        log_likelihood=_bb_log_likelihood,
        sample_base=partial(_bb_sample_base, prior),
        log_base_density=partial(_bb_log_base_density, prior),
        point_stats=_bb_point_stats,
        log_marginal=partial(_bb_log_marginal, prior),
        log_predictive=partial(_bb_log_predictive, prior),
        sample_posterior=partial(_bb_sample_posterior, prior),
        features=_bb_features,
        likelihood_cache=_bb_cache,
        predictive_cache=partial(_bb_predictive_cache, prior),
        log_predictive_from_cache=_bb_log_predictive_from_cache,
        check_data=partial(_bb_check_data, prior),
        program_params=partial(_bb_program_params, prior),
        program_observe=partial(_bb_program_observe, prior),
    ))


# ----------------------------------------------------------------------------------------------
# User-defined families
# ----------------------------------------------------------------------------------------------
def _rowwise_posterior(per_cluster, rng_key, stats):
    """Apply a one-cluster posterior sampler to every row, with one key per row index."""
    n_rows = jax.tree_util.tree_leaves(stats)[0].shape[0]
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(rng_key, jnp.arange(n_rows))
    return jax.vmap(per_cluster)(keys, stats)


def _derived_log_predictive(point_stats, log_marginal, stats, x):
    # p(x | S) = p(S ∪ {x}) / p(S): the chain rule on the cluster's marginal likelihood.
    return log_marginal(add_stats(stats, point_stats(x))) - log_marginal(stats)


def _require_callable(name: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not callable(value):
        raise TypeError(f"{name}: expected a callable, got {type(value).__name__}")


def custom_family(
    log_likelihood: Callable[[Any, jax.Array], jax.Array],
    sample_base: Callable[[jax.Array, tuple[int, ...]], Any],
    *,
    log_base_density: Callable[[Any], jax.Array] | None = None,
    point_stats: Callable[[jax.Array], Any] | None = None,
    sample_posterior: Callable[[jax.Array, Any], Any] | None = None,
    log_marginal: Callable[[Any], jax.Array] | None = None,
    log_predictive: Callable[[Any, jax.Array], jax.Array] | None = None,
    n_features: int | None = None,
    name: str = "custom",
) -> ComponentFamily:
    """Build a family from a log-likelihood and a base-measure sampler (for Algorithm 8).

    Parameters
    ----------
    log_likelihood : callable
        ``(params, x) -> scalar``: log F(x | φ) for one component's parameters and one point.
    sample_base : callable
        ``(rng_key, shape) -> params``: independent draws from G0 whose leaves have leading axes
        ``shape`` (e.g. ``shape + (n_features,)`` for a per-feature parameter).
    log_base_density : callable, optional
        ``params -> scalar``, log G0(φ); when given, the kernels' log joint includes it.
    point_stats : callable, optional
        ``x -> stats``, additive sufficient statistics (a pytree); needed by the optional parts
        below.
    sample_posterior : callable, optional
        ``(rng_key, stats) -> params``, an exact draw from the conditional posterior given the
        statistics of one cluster's points (it is applied row by row with keys derived from the
        row index). Without it, Algorithm 8 resamples each cluster's
        parameters by an independence Metropolis–Hastings sampler with G0 proposals (DM05 §4.2).
    log_marginal : callable, optional
        ``stats -> scalar``, the cluster's marginal likelihood; enables Algorithms 2 and 3 and the
        collapsed log joint.
    log_predictive : callable, optional
        ``(stats, x) -> scalar``; derived from ``log_marginal`` when omitted.
    n_features : int, optional
        Point dimension, checked against the data when given.
    name : str
        Name used in messages.

    Returns
    -------
    ComponentFamily

    Raises
    ------
    TypeError
        If a function argument is not callable.
    ValueError
        If an optional part is given without the ``point_stats`` it needs.

    Examples
    --------
    A Poisson family with a log-normal base measure on the rates:

    >>> import jax, jax.numpy as jnp
    >>> from jax.scipy.stats import poisson
    >>> family = custom_family(
    ...     lambda log_rate, x: jnp.sum(poisson.logpmf(x, jnp.exp(log_rate))),
    ...     lambda key, shape: jax.random.normal(key, shape + (3,)),
    ... )
    >>> family.is_conjugate
    False
    """
    _require_callable("log_likelihood", log_likelihood, optional=False)
    _require_callable("sample_base", sample_base, optional=False)
    for arg_name, value in (
        ("log_base_density", log_base_density),
        ("point_stats", point_stats),
        ("sample_posterior", sample_posterior),
        ("log_marginal", log_marginal),
        ("log_predictive", log_predictive),
    ):
        _require_callable(arg_name, value, optional=True)
    for arg_name, value in (
        ("sample_posterior", sample_posterior),
        ("log_marginal", log_marginal),
        ("log_predictive", log_predictive),
    ):
        if value is not None and point_stats is None:
            raise ValueError(f"{arg_name}: needs point_stats to summarise a cluster's points")
    if log_predictive is None and log_marginal is not None:
        log_predictive = partial(_derived_log_predictive, point_stats, log_marginal)
    if n_features is not None:
        n_features = check_int("n_features", n_features, minimum=1)
    if not isinstance(name, str):
        raise TypeError(f"name: expected a string, got {type(name).__name__}")
    return ComponentFamily(
        description=call_text("custom_family", [], {"name": name, "n_features": n_features},
                              init_defaults(custom_family)),
        name=name,
        n_features=n_features,
        log_likelihood=log_likelihood,
        sample_base=sample_base,
        log_base_density=log_base_density,
        point_stats=point_stats,
        log_marginal=log_marginal,
        log_predictive=log_predictive,
        sample_posterior=None if sample_posterior is None else partial(_rowwise_posterior, sample_posterior),
        check_data=partial(_check_custom_data, n_features=n_features, log_likelihood=log_likelihood,
                           sample_base=sample_base, log_base_density=log_base_density, point_stats=point_stats,
                           log_marginal=log_marginal, sample_posterior=sample_posterior),
    )


#: Draws of G0 on which :func:`_check_custom_data` tries a custom family's functions.
PROBE_DRAWS = 8


def _check_custom_data(name: str, data: Any, *, n_features: int | None, log_likelihood: Callable,
                       sample_base: Callable, log_base_density: Callable | None, point_stats: Callable | None,
                       log_marginal: Callable | None, sample_posterior: Callable | None) -> np.ndarray:
    """``data`` as a finite matrix, and a custom family's functions tried on it before any chain runs.

    Each user function is called as the samplers call it, on :data:`PROBE_DRAWS` draws of
    ``sample_base`` and every point; a ``TypeError``/``ValueError`` names the function whose call
    fails, returns another shape, or returns NaN or +inf (and ``data`` for a point that has
    probability 0 under every draw: outside the family's support). A family with a mistake ran to
    the end before, with K = 1 and a NaN log joint, or a cluster per point.
    """
    array = _check_finite_matrix(name, data, n_features, custom=True)
    staged = isinstance(jnp.zeros(()) + 0, jax.core.Tracer)  # inside a jitted call: the fit's own check probed it
    if array.shape[0] == 0 or staged or isinstance(array, jax.core.Tracer):
        return array
    points = jnp.asarray(array, jnp.result_type(float))
    key = jax.random.key(0)  # the probe's own: the chains' draws do not depend on it

    def call(function_name: str, function: Callable, *args: Any) -> Any:
        try:
            return function(*args)
        except Exception as error:  # the user's function, called as the samplers call it
            signature = {"log_likelihood": "(params, x)", "sample_base": "(rng_key, shape)",
                         "log_base_density": "(params)", "point_stats": "(x)", "log_marginal": "(stats)",
                         "sample_posterior": "(rng_key, stats)"}[function_name]
            raise TypeError(f"{function_name}: calling it as {function_name}{signature} failed: "
                            f"{type(error).__name__}: {str(error)[:300]}") from None

    def traced(function_name: str, function: Callable, *args: Any) -> Any:
        """``function`` traced as the compiled sweeps call it, on abstract values: NumPy on its
        arguments, ``float()`` or a Python ``if`` on them fail here, naming it, not in the chains."""
        return call(function_name, lambda *values: jax.eval_shape(function, *values), *args)

    def scalar(function_name: str, value: Any, what: str) -> Any:
        value = jnp.asarray(value)
        if value.shape != ():
            raise ValueError(f"{function_name}: expected one number {what}, got an array of shape {value.shape}")
        return value

    draws = call("sample_base", sample_base, key, (PROBE_DRAWS,))
    leaves = jax.tree_util.tree_leaves(draws)
    if not leaves or any(jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != PROBE_DRAWS for leaf in leaves):
        raise ValueError(f"sample_base: sample_base(rng_key, ({PROBE_DRAWS},)) must return parameters whose every "
                         f"leaf has leading axis {PROBE_DRAWS}, got shapes {[jnp.shape(leaf) for leaf in leaves]}")
    constants: list[bool] = []

    def draw_traced(key: Any) -> Any:  # what the traced draws are: NumPy arrays do not depend on the key
        drawn = sample_base(key, (PROBE_DRAWS,))
        constants.extend(isinstance(leaf, np.ndarray) for leaf in jax.tree_util.tree_leaves(drawn))
        return drawn

    traced("sample_base", draw_traced, key)
    if any(constants):
        raise ValueError("sample_base: returns NumPy arrays that do not depend on rng_key (NumPy's random "
                         "generator?): inside the compiled chains every call would return the same draws; "
                         "draw them with jax.random from rng_key")
    first = jax.tree_util.tree_map(lambda leaf: leaf[0], draws)
    scalar("log_likelihood", call("log_likelihood", log_likelihood, first, points[0]), "per point (log F(x | φ))")
    values = call("log_likelihood", jax.vmap(lambda params: jax.vmap(lambda x: log_likelihood(params, x))(points)),
                  draws)  # (draws, points)
    values = np.asarray(values, np.float64)
    if np.isnan(values).any() or np.isposinf(values).any():
        draw, point = np.argwhere(np.isnan(values) | np.isposinf(values))[0]
        raise ValueError(f"log_likelihood: returned {values[draw, point]} for {name} row {point} and a draw of "
                         "sample_base")
    nowhere = np.isneginf(values).all(axis=0)
    if nowhere.any():
        row = int(np.flatnonzero(nowhere)[0])
        raise ValueError(f"{name}: row {row} ({array[row].tolist()!r:.80}) has probability 0 (log_likelihood -inf) "
                         f"under each of {PROBE_DRAWS} draws of sample_base: outside the family's support? (or "
                         "log_likelihood takes its arguments in another order than (params, x))")
    if log_base_density is not None:
        traced("log_base_density", log_base_density, first)
        density = scalar("log_base_density", call("log_base_density", log_base_density, first), "per draw (log G0)")
        if not np.isfinite(float(density)):
            raise ValueError(f"log_base_density: returned {float(density)} for a draw of sample_base")
    stats = None
    if point_stats is not None:
        traced("point_stats", point_stats, points[0])
        stats = call("point_stats", point_stats, points[0])
    if log_marginal is not None:
        traced("log_marginal", log_marginal, stats)
        marginal = scalar("log_marginal", call("log_marginal", log_marginal, stats), "per cluster")
        if not np.isfinite(float(marginal)):
            raise ValueError(f"log_marginal: returned {float(marginal)} for the cluster of {name} row 0 alone")
    if sample_posterior is not None:
        traced("sample_posterior", sample_posterior, key, stats)
        drawn = call("sample_posterior", sample_posterior, key, stats)
        expected = [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(first)]
        got = [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(drawn)]
        if got != expected:
            raise ValueError(f"sample_posterior: returned parameters of shapes {got}; one draw of sample_base has "
                             f"{expected}")
    return array
