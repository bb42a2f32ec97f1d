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
        if np.abs(points).max() > limit:
            raise ValueError(f"data: values up to {np.abs(points).max():.3g} overflow {np.dtype(dtype).name} sums "
                             f"of squares (limit {limit:.3g}); rescale the features or enable float64")
        return jnp.asarray(points, dtype=dtype)

    def init_params(self, rng_key: Any, points: Any) -> GaussianMixtureParams:
        """Means at K distinct random points, unit-free scales from the data's spread."""
        n_points, n_features = points.shape
        chosen = jax.random.choice(rng_key, n_points, (self.n_classes,), replace=False)
        spread = jnp.std(points, axis=0) + 1e-3
        return GaussianMixtureParams(
            weights=jnp.full((self.n_classes,), 1.0 / self.n_classes, points.dtype),
            locs=points[chosen],
            scales=jnp.broadcast_to(spread, (self.n_classes, n_features)).astype(points.dtype),
        )

    def _log_joint(self, params: GaussianMixtureParams, points: Any) -> Any:
        """log w_c and log N(x_n; μ_c, σ_c²), shapes (K,) and (N, K)."""
        log_density = dist.Normal(params.locs[None], params.scales[None]).log_prob(points[:, None]).sum(-1)
        return jnp.log(params.weights), log_density

    def log_likelihood(self, params: GaussianMixtureParams, points: Any) -> Any:
        log_weights, log_density = self._log_joint(params, points)
        return jax.nn.logsumexp(log_weights + log_density, axis=1).sum()

    heldout_log_lik = log_likelihood

    def em_step(self, params: GaussianMixtureParams, points: Any, beta: Any) -> tuple[GaussianMixtureParams, Any]:
        log_weights, log_density = self._log_joint(params, points)
        log_lik = jax.nn.logsumexp(log_weights + log_density, axis=1).sum()
        responsibilities = jax.nn.softmax(log_weights + beta * log_density, axis=1)  # tempered E-step
        mass = responsibilities.sum(axis=0)
        safe_mass = jnp.where(mass > 0, mass, 1.0)
        locs = jnp.matmul(responsibilities.T, points, precision="highest") / safe_mass[:, None]
        second = jnp.matmul(responsibilities.T, points**2, precision="highest") / safe_mass[:, None]
        spread = jnp.var(points, axis=0)
        # A constant feature has no spread to scale the floor by: its floor is absolute.
        floor = self.variance_floor * jnp.where(spread > 0, spread, 1.0)
        variances = jnp.maximum(second - locs**2, floor)
        empty = (mass <= 0)[:, None]
        return GaussianMixtureParams(
            weights=mass / mass.sum(),
            locs=jnp.where(empty, params.locs, locs),
            scales=jnp.where(empty, params.scales, jnp.sqrt(variances)),
        ), log_lik
