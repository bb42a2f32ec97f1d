"""The component-family protocol of the Dirichlet-process kernels, and the random variates they share.

:class:`ComponentFamily` is what :mod:`inference.neal`, :mod:`inference.subcluster` and
:mod:`inference.split_merge` consume: a ``NamedTuple`` of pure, jittable functions F(x | φ) and
G0(φ). The families themselves (Normal–Gamma, Dirichlet–multinomial, Beta–Bernoulli, user-built
ones) live with the models in :mod:`zoo.dirichlet.families`, which builds these records.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from inference._validation import check_key

__all__ = ["ComponentFamily", "sample_log_gamma", "add_stats", "subtract_stats"]


# ----------------------------------------------------------------------------------------------
# Random variates
# ----------------------------------------------------------------------------------------------
def sample_log_gamma(
    rng_key: jax.Array, concentration: Any, shape: tuple[int, ...] = (), *, at_least_one: bool = False
) -> jax.Array:
    """Draw log G for G ~ Gamma(concentration, rate 1), vectorised over the whole array.

    Marsaglia & Tsang (2000) squeeze-rejection for concentration >= 1; for concentration a < 1 the
    boost G(a) = G(a + 1) U^(1/a) is applied in log space, so small concentrations do not underflow.
    All elements are proposed together and rejected ones are redrawn in further rounds of a
    ``lax.while_loop`` (about 1.05 rounds per element on average), which is much faster on CPU
    than ``jax.random.gamma``'s per-element loop. A Python ``concentration == 1`` uses the
    exponential distribution directly. Element values depend only on the key and their position,
    so a longer leading axis extends the same draws.

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key.
    concentration : float or array
        Shape parameter(s) a > 0, broadcast against ``shape``.
    shape : tuple of int
        Output shape; broadcast with the shape of ``concentration``.
    at_least_one : bool
        Promise that every concentration is >= 1, which skips the boost (less code to compile).

    Returns
    -------
    jax.Array
        Log-Gamma draws, shape ``broadcast(shape, concentration.shape)``.
    """
    rng_key = check_key("rng_key", rng_key)  # one key (traced ones too), before any JAX code
    dtype = jnp.result_type(float)
    if isinstance(concentration, (int, float)) and float(concentration) == 1.0:
        return jnp.log(jax.random.exponential(rng_key, shape, dtype=dtype))
    concentration = jnp.asarray(concentration, dtype=dtype)
    out_shape = jnp.broadcast_shapes(tuple(shape), concentration.shape)
    concentration = jnp.broadcast_to(concentration, out_shape)
    boosted = concentration < 1.0
    shape_used = concentration if at_least_one else jnp.where(boosted, concentration + 1.0, concentration)
    d = shape_used - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    tiny = jnp.finfo(dtype).tiny
    n_uniforms = 2 if at_least_one else 3

    def propose(uniforms, d, c, concentration, boosted):
        # uniforms: the normal, the acceptance test and (for a < 1) the boost, on the last axis.
        z = jnp.sqrt(2.0) * jax.lax.erf_inv(2.0 * uniforms[..., 0] - 1.0)  # standard normal
        v = (1.0 + c * z) ** 3
        safe_v = jnp.where(v > 0, v, 1.0)
        # Marsaglia & Tsang (2000), acceptance test in log form.
        accept = (v > 0) & (jnp.log(uniforms[..., 1]) < 0.5 * z * z + d - d * safe_v + d * jnp.log(safe_v))
        proposal = jnp.log(d) + jnp.log(safe_v)
        if not at_least_one:
            proposal = jnp.where(boosted, proposal + jnp.log(uniforms[..., 2]) / concentration, proposal)
        return accept, proposal

    # First attempt of every element in bulk. The trailing axis keeps each element's uniforms next
    # to each other, so a longer leading axis of the output extends the same draws.
    uniforms = jax.random.uniform(jax.random.fold_in(rng_key, 0), out_shape + (n_uniforms,), dtype=dtype, minval=tiny)
    accepted, log_value = propose(uniforms, d, c, concentration, boosted)
    # Retries (a few percent of the elements): only the rejected ones, gathered up to `batch` at a
    # time. Attempt t of element e uses uniforms keyed by (t, e) alone, so every value depends
    # only on the key and its position, however the retries are scheduled.
    size = math.prod(out_shape)
    batch = min(size, size // 8 + 8)
    flat = [jnp.ravel(leaf) for leaf in (d, c, concentration, boosted)]

    def not_done(carry):
        return ~jnp.all(carry[0])

    def retry(carry):
        accepted, log_value, attempts = carry
        index = jnp.nonzero(~accepted, size=batch, fill_value=size)[0]  # out of range: dropped
        inside = jnp.minimum(index, size - 1)
        element_keys = jax.vmap(lambda element, attempt: jax.random.fold_in(jax.random.fold_in(rng_key, attempt), element))(
            inside, attempts[inside]
        )
        uniforms = jax.vmap(lambda key: jax.random.uniform(key, (n_uniforms,), dtype=dtype, minval=tiny))(element_keys)
        accept, proposal = propose(uniforms, *(leaf[inside] for leaf in flat))
        return (
            accepted.at[index].set(accept, mode="drop"),
            log_value.at[index].set(proposal, mode="drop"),
            attempts.at[index].add(1, mode="drop"),
        )

    start = (jnp.ravel(accepted), jnp.ravel(log_value), jnp.ones((size,), jnp.int32))
    return jax.lax.while_loop(not_done, retry, start)[1].reshape(out_shape)


def _log_dirichlet(rng_key: jax.Array, concentration: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """log θ for θ ~ Dirichlet(concentration) over the last axis, from normalised log-Gamma draws."""
    log_gamma = sample_log_gamma(rng_key, concentration, shape)
    return log_gamma - jax.nn.logsumexp(log_gamma, axis=-1, keepdims=True)


def add_stats(left: Any, right: Any) -> Any:
    """Sum two sufficient-statistics pytrees leaf by leaf (statistics are additive)."""
    return jax.tree_util.tree_map(jnp.add, left, right)


def subtract_stats(left: Any, right: Any) -> Any:
    """Difference of two sufficient-statistics pytrees leaf by leaf."""
    return jax.tree_util.tree_map(jnp.subtract, left, right)


def _as_float(value: Any, like: jax.Array) -> jax.Array:
    return jnp.asarray(value, dtype=jnp.result_type(like))


def _default_dtype():
    return jnp.result_type(float)


# ----------------------------------------------------------------------------------------------
# The family record
# ----------------------------------------------------------------------------------------------
class NativePredictive(NamedTuple):
    """A family's posterior predictive in a form that the numba Algorithm 3 sweep computes
    (:mod:`inference.native.collapsed_sweep`).

    ``kind`` is ``"normal_known"`` (Gaussian components of known precision, Normal prior on
    the means; ``hyper`` = (τ, m0, p0)) or ``"normal_gamma"`` (Normal–Gamma; ``hyper`` = (m0,
    κ0, a0, b0)); each ``hyper`` entry is a tuple of floats, one per feature or one for all
    (tuples, so that the family stays hashable as a static argument of ``jax.jit``). Build one
    with :meth:`of`. The numba split–merge moves
    (:func:`inference.native.dp_moves.numba_split_merge_moves`) also take ``hyper`` as an array
    (n_hyper, D) computed inside a traced program (SCDP-2's types, whose prior changes every
    sweep); the collapsed sweep takes tuples only.
    """

    kind: str
    hyper: tuple[tuple[float, ...], ...]

    @classmethod
    def of(cls, kind: str, *hyper: Any) -> "NativePredictive":
        """From per-feature arrays (or scalars)."""
        return cls(kind, tuple(tuple(float(v) for v in np.ravel(np.asarray(value, np.float64))) for value in hyper))


class ComponentFamily(NamedTuple):
    """A component distribution F(x | φ) and its base measure G0(φ), as pure functions.

    Required fields are ``log_likelihood`` and ``sample_base``; the others enable more algorithms
    or faster paths (see the module docstring). Build one with :func:`normal_gamma`,
    :func:`dirichlet_multinomial`, :func:`beta_bernoulli` or :func:`custom_family`.

    Attributes
    ----------
    name : str
        Short name used in messages.
    n_features : int or None
        Length of one data point, if fixed by the family.
    log_likelihood : callable
        ``(params, x) -> scalar``, log F(x | φ) for one component and one point (n_features,).
    sample_base : callable
        ``(rng_key, shape) -> params``, independent draws from G0 with leading axes ``shape``.
    log_base_density : callable or None
        ``params -> scalar``, log G0(φ) for one component (used in the log joint).
    point_stats : callable or None
        ``x -> stats``, additive sufficient statistics of one point.
    log_marginal : callable or None
        ``stats -> scalar``, log ∫ Π_i F(x_i | φ) dG0(φ) for the points summarised by ``stats``.
    log_predictive : callable or None
        ``(stats, x) -> scalar``, log p(x | points summarised by stats); with empty statistics it
        is the prior predictive ∫ F(x | φ) dG0(φ).
    sample_posterior : callable or None
        ``(rng_key, stats) -> params``: for statistics with a leading axis (one row per cluster),
        one draw per row from the posterior G0(φ) Π_i F(x_i | φ), normalised. Row r's draw
        depends only on the key, r and row r, so it does not change with the number of rows
        (the built-in families draw in bulk, whose values are indexed by position).
    features : callable or None
        ``x -> t``, point features of the dot-product form (None: identity).
    likelihood_cache : callable or None
        ``params -> w`` with ``log F(x | φ) = w · features(x)`` (None: identity).
    predictive_cache : callable or None
        ``stats -> c``, per-cluster terms of the predictive, so that Algorithm 3 scores a point
        against K clusters without recomputing Gamma functions (None: the statistics).
    log_predictive_from_cache : callable or None
        ``(c, x) -> scalar`` equal to ``log_predictive(stats, x)`` (None: ``log_predictive``).
    native_predictive : NativePredictive or None
        The same predictive in a form that the numba Algorithm 3 sweep computes (a kind and the
        prior's per-feature arrays); None: Algorithm 3 runs the XLA sweep on every backend.
    check_data : callable or None
        ``(name, data) -> np.ndarray``, validates a data matrix, raising ``ValueError`` naming it.
    warn_data : callable or None
        ``(name, array, stacklevel) -> None``, warns about valid data that the family models
        badly (e.g. exactly tied values under Gaussian components); called once per fit.
    program_params : callable or None
        ``n_components -> params``; NumPyro sample sites of G0 for the mixture program.
    program_observe : callable or None
        ``(params, assignment, data, n_points) -> None``; NumPyro observation sites.
    description : str or None
        How the family was made, e.g. ``"normal_gamma(64, rate=0.5)"``: its ``repr`` (the
        constructors set it; None: the name and dimension).
    origin : tuple of float or None
        For a family whose model does not change when the data and the prior's location move
        together (the Gaussian ones: x - c under the prior's mean m0 - c), the point about which
        the kernels had best work, one value per feature: the prior's mean. None: the data as
        given (the default, and the Gaussian families' for a prior mean of 0).
    centred : callable or None
        ``() -> ComponentFamily``: this family with its prior moved to ``-origin`` (for the
        Gaussian ones, mean 0), for the data less ``origin``. :class:`zoo.dirichlet.DPMixture`
        samples with it, subtracting ``origin`` from the data in float64 before the working
        float: float32 sums of squares of points far from 0 (years, coordinates in degrees)
        cancel their spread away, which gave wrong log joints, predictive densities and K.
    """

    name: str
    n_features: int | None
    log_likelihood: Callable[[Any, jax.Array], jax.Array]
    sample_base: Callable[[jax.Array, tuple[int, ...]], Any]
    log_base_density: Callable[[Any], jax.Array] | None = None
    point_stats: Callable[[jax.Array], Any] | None = None
    log_marginal: Callable[[Any], jax.Array] | None = None
    log_predictive: Callable[[Any, jax.Array], jax.Array] | None = None
    sample_posterior: Callable[[jax.Array, Any], Any] | None = None
    features: Callable[[jax.Array], jax.Array] | None = None
    likelihood_cache: Callable[[Any], Any] | None = None
    predictive_cache: Callable[[Any], Any] | None = None
    log_predictive_from_cache: Callable[[Any, jax.Array], jax.Array] | None = None
    native_predictive: NativePredictive | None = None
    check_data: Callable[[str, Any], np.ndarray] | None = None
    warn_data: Callable[..., None] | None = None
    program_params: Callable[[int], Any] | None = None
    program_observe: Callable[..., None] | None = None
    description: str | None = None
    origin: tuple[float, ...] | None = None
    centred: Callable[[], "ComponentFamily"] | None = None

    def __repr__(self) -> str:
        # The fields are functions bound to the prior's arrays: their repr ran to 3,000 characters.
        return self.description or f"ComponentFamily(name={self.name!r}, n_features={self.n_features})"

    @property
    def has_marginal(self) -> bool:
        """Whether collapsed quantities (Algorithm 3, the collapsed log joint) are available."""
        return (
            self.point_stats is not None
            and self.log_marginal is not None
            and self.log_predictive is not None
        )

    @property
    def has_posterior(self) -> bool:
        """Whether cluster parameters can be drawn from their conditional posterior exactly."""
        return self.point_stats is not None and self.sample_posterior is not None

    @property
    def is_conjugate(self) -> bool:
        """Whether Algorithm 2 applies (prior predictive and posterior sampling both available)."""
        return self.has_marginal and self.has_posterior

    def prepare_point(self, x: jax.Array) -> jax.Array:
        """Features of one point for :meth:`cached_log_likelihood` (identity by default)."""
        return x if self.features is None else self.features(x)

    def component_cache(self, params: Any) -> Any:
        """Per-component terms for :meth:`cached_log_likelihood` (the parameters by default)."""
        return params if self.likelihood_cache is None else self.likelihood_cache(params)

    def cached_log_likelihood(self, cache: Any, prepared: jax.Array) -> jax.Array:
        """log F(x | φ) from ``component_cache(φ)`` and ``prepare_point(x)``; exact."""
        if self.likelihood_cache is None:
            return self.log_likelihood(cache, prepared)
        return jnp.dot(cache, prepared, precision="highest")

    def predictive_terms(self, stats: Any) -> Any:
        """Per-cluster terms for :meth:`cached_log_predictive` (the statistics by default)."""
        return stats if self.predictive_cache is None else self.predictive_cache(stats)

    def cached_log_predictive(self, terms: Any, x: jax.Array) -> jax.Array:
        """log p(x | cluster) from ``predictive_terms(stats)`` and the raw point; exact."""
        if self.predictive_cache is None:
            return self.log_predictive(terms, x)
        return self.log_predictive_from_cache(terms, x)

    def empty_stats(self, x: jax.Array) -> Any:
        """Statistics of no points, shaped like ``point_stats(x)``."""
        return jax.tree_util.tree_map(jnp.zeros_like, self.point_stats(x))
