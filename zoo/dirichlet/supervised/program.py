"""The NumPyro program of supervised clustering (DM05 eq. 1, Gaussian parameterisation of §5).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from zoo.dirichlet.mixture import stick_breaking_weights

__all__ = ["supervised_program"]


def supervised_program(
    features: jax.Array | None = None,
    *,
    n_points: int | None = None,
    n_features: int | None = None,
    max_clusters: int = 20,
    max_types: int = 10,
    alpha: float = 1.0,
    alpha_types: float = 1.0,
    prior_variance: float = 1.0,
    precision_shape: float = 1.0,
    precision_rate: float = 1.0,
) -> None:
    """NumPyro program of DM05 eq. 1 with the Gaussian parameterisation of §5.

    Both Dirichlet processes are truncated by stick-breaking (``max_clusters`` publications,
    ``max_types`` reference types); the indicators are enumerated in parallel.

    Parameters
    ----------
    features : jax.Array (N, D), optional
        Observed references; omit to simulate (then give ``n_points`` and ``n_features``).
    n_points, n_features : int, optional
        Sizes when simulating.
    max_clusters, max_types : int
        Truncation levels K and L.
    alpha, alpha_types : float
        Concentrations α^p and α^t.
    prior_variance : float
        σ², variance of G0^p = Normal(0, σ² I).
    precision_shape, precision_rate : float
        a and b of G0^t = Gamma(a, rate b) per feature.

    Notes
    -----
    Sites: ``cluster_fractions`` / ``type_fractions`` (plates ``cluster_sticks`` /
    ``type_sticks``), ``means`` (plates ``publications`` × ``features``), ``precisions`` (plates
    ``reference_types`` × ``features``), ``clusters`` and ``types`` (plate ``points`` at dim -2,
    so their draws carry a trailing singleton axis; enumerated) and ``x``.

    Examples
    --------
    >>> import jax
    >>> from numpyro.infer import Predictive
    >>> draws = Predictive(supervised_program, num_samples=2)(
    ...     jax.random.key(0), n_points=7, n_features=3)
    >>> draws["x"].shape, draws["clusters"].shape
    ((2, 7, 3), (2, 7, 1))
    """
    if features is not None:
        n_points, n_features = features.shape
    with numpyro.plate("cluster_sticks", max_clusters - 1):
        cluster_fractions = numpyro.sample("cluster_fractions", dist.Beta(1.0, alpha))
    with numpyro.plate("type_sticks", max_types - 1):
        type_fractions = numpyro.sample("type_fractions", dist.Beta(1.0, alpha_types))
    cluster_weights = stick_breaking_weights(cluster_fractions)
    type_weights = stick_breaking_weights(type_fractions)
    with numpyro.plate("features", n_features, dim=-1):
        with numpyro.plate("publications", max_clusters, dim=-2):
            means = numpyro.sample("means", dist.Normal(0.0, math.sqrt(prior_variance)))  # G0^p
        with numpyro.plate("reference_types", max_types, dim=-2):
            precisions = numpyro.sample("precisions", dist.Gamma(precision_shape, precision_rate))  # G0^t
    with numpyro.plate("points", n_points, dim=-2):
        cluster = numpyro.sample("clusters", dist.Categorical(cluster_weights), infer={"enumerate": "parallel"})
        reference_type = numpyro.sample("types", dist.Categorical(type_weights), infer={"enumerate": "parallel"})
        feature_index = jnp.arange(n_features)
        mean = means[cluster, feature_index]
        precision = precisions[reference_type, feature_index]
        with numpyro.plate("features", n_features, dim=-1):
            # DM05 eq. 1: r_n ~ F(p_{c_n}, t_{d_n}), a diagonal Gaussian.
            numpyro.sample("x", dist.Normal(mean, 1.0 / jnp.sqrt(precision)), obs=features)
