"""Finite mixture of diagonal Gaussians fitted by tempered EM: the feature-vector member of the zoo.

Each point x_n ∈ R^D has a class c_n with P(c) = w_c and x_n | c ~ N(μ_c, diag(σ_c²)). The
tempered E-step raises the likelihood to β (as in H99 §4): P_β(c | x_n) ∝ w_c N(x_n; μ_c, σ_c²)^β;
the M-step is the usual weighted mean and variance, with a variance floor so a class that
collapses onto one point stays finite. It is the closed-form reference against which generic
EM on the same NumPyro program (:mod:`inference.enumerated`) is tested, and a baseline beside
the Dirichlet-process mixtures of :mod:`zoo.dirichlet`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from inference._validation import as_float_array, check_int, check_real

__all__ = ["GaussianMixture", "GaussianMixtureParams", "gaussian_mixture_program", "Features"]


def gaussian_mixture_program(points=None, *, n_classes: int, n_points: int | None = None, n_features: int | None = None):
    """NumPyro program: enumerated class per point, diagonal Gaussian per class.

    Plates: ``points`` (N) and ``features`` (D). Params: ``weights`` (K,) on the simplex,
    ``locs`` (K, D), ``scales`` (K, D) positive.
    """
    n_points = points.shape[0] if points is not None else n_points
    n_features = points.shape[1] if points is not None else n_features
    weights = numpyro.param("weights", jnp.full((n_classes,), 1.0 / n_classes), constraint=dist.constraints.simplex)
    locs = numpyro.param("locs", jnp.zeros((n_classes, n_features)))
    scales = numpyro.param("scales", jnp.ones((n_classes, n_features)), constraint=dist.constraints.positive)
    with numpyro.plate("points", n_points):
        c = numpyro.sample("c", dist.Categorical(weights), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Normal(locs[c], scales[c]).to_event(1), obs=points)


class GaussianMixtureParams(NamedTuple):
    """weights (K,), locs (K, D), scales (K, D) — the program's param sites."""

    weights: Any
    locs: Any
    scales: Any


class Features(NamedTuple):
    """Validated feature matrix (N, D) with its number of observations (N, for perplexity)."""

    points: Any

    @property
    def total(self) -> float:
        return float(self.points.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.points.shape)


@dataclass(frozen=True)
class GaussianMixture:
    """K-class diagonal Gaussian mixture fitted by :func:`inference.em.tempered_em`.

    Parameters
    ----------
    n_classes : int
    variance_floor : float
        Lower bound on every class variance (relative to the data's overall variance).
    """

    n_classes: int
    variance_floor: float = 1e-6

    #: ``weights`` is a distribution over the classes and every scale is positive: ``init=`` of
    #: :func:`inference.em.tempered_em` is checked against them (``locs`` only need be finite).
    probability_axes: ClassVar[dict] = {"weights": -1}
    positive_fields: ClassVar[tuple] = ("scales",)
    #: Its data are an (N, D) array of points: held-out data may hold any number, of D features each.
    points_data: ClassVar[bool] = True
    #: What a fit's summary points to beyond the parameters.
    see_also: ClassVar[tuple] = ("result.model.responsibilities(result.params, points)",
                                 "result.model.assignments(result.params, points)")

    def __post_init__(self) -> None:
        check_int("n_classes", self.n_classes, minimum=1)
        check_real("variance_floor", self.variance_floor, low=0.0, low_open=True)

    program = staticmethod(gaussian_mixture_program)

    def prepare(self, data: Any) -> Any:
        """Validate an (N, D) array (or :class:`Features`) and return it as a JAX array."""
        points = data.points if isinstance(data, Features) else data
        points = as_float_array("data", points, ndim=2)
        if points.shape[0] < self.n_classes:
            raise ValueError(f"n_classes: {self.n_classes} classes for only {points.shape[0]} points")
        dtype = jnp.result_type(float)
        # The M-step sums squares of the points: they must not overflow the working precision.
        limit = float(np.sqrt(np.finfo(dtype).max / (16.0 * points.shape[0])))
        if float(np.abs(points).max()) > limit:  # a float32 maximum against a float64 limit: compared as Python floats
            raise ValueError(f"data: values up to {np.abs(points).max():.3g} overflow {np.dtype(dtype).name} sums "
                             f"of squares (limit {limit:.3g}); rescale the features or enable float64")
        # The variance floor is relative to each feature's variance: it must be a normal number of the
        # working dtype, or the kernel computes it as 0 (XLA flushes subnormals) and scales can vanish.
        variances = points.var(axis=0, dtype=np.float64)
        tiny = float(np.finfo(dtype).tiny)
        narrow = np.flatnonzero((variances > 0) & (variances * self.variance_floor < tiny))
        if narrow.size:
            raise ValueError(f"data: feature {narrow[0]} has variance {variances[narrow[0]]:.3g}, whose variance floor "
                             f"(x variance_floor={self.variance_floor:g}) is below the smallest normal "
                             f"{np.dtype(dtype).name} ({tiny:.3g}); rescale the features or enable float64")
        return jnp.asarray(points, dtype=dtype)

    def init_params(self, rng_key: Any, points: Any) -> GaussianMixtureParams:
        """Means at K distinct random points, unit-free scales from the data's spread."""
        points = jnp.asarray(points)  # a NumPy float64 array becomes JAX's default float (no dtype warning)
        n_points, n_features = points.shape
        chosen = jax.random.choice(rng_key, n_points, (self.n_classes,), replace=False)
        spread = jnp.std(points, axis=0) + 1e-3
        return GaussianMixtureParams(
            weights=jnp.full((self.n_classes,), 1.0 / self.n_classes, points.dtype),
            locs=points[chosen],
            scales=jnp.broadcast_to(spread, (self.n_classes, n_features)).astype(points.dtype),
        )

    def _log_joint(self, params: GaussianMixtureParams, points: Any) -> tuple[Any, Any, Any]:
        """log w_c, log N(x_n; μ_c, σ_c²) and log Σ_d ((x_nd - μ_cd) / σ_cd)², shapes (K,), (N, K), (N, K).

        The log-density is -inf where the squared distance overflows (a scale of 1e-30 in
        float32); the log of the squared distance, taken from logs, stays finite there, and
        ranks the classes of a point whose every density underflows (see :meth:`em_step`).
        """
        log_density = dist.Normal(params.locs[None], params.scales[None]).log_prob(points[:, None]).sum(-1)
        log_gap = jnp.log(jnp.abs(points[:, None] - params.locs[None])) - jnp.log(params.scales[None])
        log_distance = jax.nn.logsumexp(2.0 * log_gap, axis=-1)
        return jnp.log(params.weights), log_density, log_distance

    def log_likelihood(self, params: GaussianMixtureParams, points: Any) -> Any:
        log_weights, log_density, _ = self._log_joint(params, points)
        return jax.nn.logsumexp(log_weights + log_density, axis=1).sum()

    heldout_log_lik = log_likelihood

    def responsibilities(self, params: GaussianMixtureParams, data: Any) -> Any:
        """P(c | x_n) of every point under ``params`` (β = 1), shape (N, K): e.g.
        ``result.model.responsibilities(result.params, points)`` after :func:`inference.em.tempered_em`."""
        points = self._points(data, params)
        log_weights, log_density, _ = self._log_joint(params, points)
        return jax.nn.softmax(log_weights + log_density, axis=1)

    def assignments(self, params: GaussianMixtureParams, data: Any) -> np.ndarray:
        """The most probable class of every point under ``params``, shape (N,)."""
        return np.asarray(jnp.argmax(self.responsibilities(params, data), axis=1))

    def _points(self, data: Any, params: GaussianMixtureParams) -> Any:
        """``data`` checked as the fitted points are (any number of points, as many features as
        ``params``), in the parameters' precision."""
        points = as_float_array("data", data.points if isinstance(data, Features) else data, ndim=2)
        n_features = np.shape(params.locs)[-1]
        if points.shape[1] != n_features:
            raise ValueError(f"data: points of {points.shape[1]} features, where the mixture's classes have "
                             f"{n_features}")
        return jnp.asarray(points, dtype=jnp.asarray(params.locs).dtype)

    def em_step(self, params: GaussianMixtureParams, points: Any, beta: Any) -> tuple[GaussianMixtureParams, Any]:
        log_weights, log_density, log_distance = self._log_joint(params, points)
        log_lik = jax.nn.logsumexp(log_weights + log_density, axis=1).sum()
        # Tempered E-step (β = 0 leaves the weights: 0 × -inf is read as 0, not NaN).
        tempered = log_weights + jnp.where(beta > 0, beta * log_density, 0.0)
        responsibilities = jax.nn.softmax(tempered, axis=1)
        # A point whose density underflows to 0 under every class of positive weight (a start with
        # tiny scales) goes wholly to the class it is nearest in standard units, the limit of the
        # responsibilities as the densities vanish, instead of the 0/0 of the softmax.
        lost = ~jnp.isfinite(tempered).any(axis=1, keepdims=True)
        nearest = jnp.argmin(jnp.where(params.weights > 0, log_distance, jnp.inf), axis=1)
        responsibilities = jnp.where(lost, jax.nn.one_hot(nearest, self.n_classes, dtype=points.dtype),
                                     responsibilities)
        mass = responsibilities.sum(axis=0)
        safe_mass = jnp.where(mass > 0, mass, 1.0)
        # Moments about the points' mean: E[x²] - μ² of raw values loses the variance to float32
        # rounding where a feature's mean is large against its spread (iris + 1,000 fitted one
        # class of all points; raw latitudes and longitudes the same), about the mean it does not.
        centre = jnp.mean(points, axis=0)
        shifted = points - centre
        offsets = jnp.matmul(responsibilities.T, shifted, precision="highest") / safe_mass[:, None]
        locs = centre + offsets
        second = jnp.matmul(responsibilities.T, shifted**2, precision="highest") / safe_mass[:, None]
        spread = jnp.var(points, axis=0)
        # A constant feature has no spread to scale the floor by: its floor is absolute. Nor does a
        # variance go below the smallest normal number: log and division flush subnormals to 0.
        floor = jnp.maximum(self.variance_floor * jnp.where(spread > 0, spread, 1.0), jnp.finfo(points.dtype).tiny)
        variances = jnp.maximum(second - offsets**2, floor)
        empty = (mass <= 0)[:, None]
        return GaussianMixtureParams(
            weights=mass / mass.sum(),
            locs=jnp.where(empty, params.locs, locs),
            scales=jnp.where(empty, params.scales, jnp.sqrt(variances)),
        ), log_lik
