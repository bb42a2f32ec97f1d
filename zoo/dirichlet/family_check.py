"""Check a component family's optional parts against its likelihood and base measure.

A :func:`~zoo.dirichlet.families.custom_family` is given F(x | φ) (``log_likelihood``) and G0
(``sample_base``); the optional parts that make the samplers fast — ``point_stats`` with
``log_marginal`` (Algorithms 2 and 3, split–merge moves, the sub-cluster sampler),
``sample_posterior`` (exact parameter draws in Algorithm 8) and ``log_predictive`` — must agree
with those two, and nothing in a fit says when they do not: a ``log_marginal`` written for another
prior, or statistics that do not add up over points (a mean instead of a sum), give chains that
mix well on the wrong posterior. :func:`check_family` compares each part, on a few points of the
user's data, with what F and G0 imply:

* ``log_marginal`` against a Monte Carlo estimate of log ∫ Π_i F(x_i | φ) dG0(φ) from draws of G0
  (for one point and for a few together, so that statistics that do not add up show);
* ``log_predictive`` against the chain rule on ``log_marginal`` (exact), including the prior
  predictive from empty statistics;
* ``sample_posterior`` against importance-weighted draws of G0: the mean of log F(x* | φ) at a probe
  point x* under the posterior of the points.

Each Monte Carlo comparison allows four standard errors and 0.02 nats; where the draws of G0 that
carry the weight are too few to tell (in many dimensions, or with many points), the row says so
("too few effective draws") rather than passing.

>>> import jax, numpy as np
>>> from zoo.dirichlet import beta_bernoulli
>>> points = np.random.default_rng(0).integers(0, 2, (10, 4))
>>> table = check_family(beta_bernoulli(4), points, jax.random.key(0))
>>> sorted(set(table["status"]))
['ok']
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from inference._validation import as_float_array, check_int, check_key
from inference.components import ComponentFamily, add_stats

__all__ = ["check_family", "FamilyCheckWarning"]

#: Monte Carlo comparisons pass within this many standard errors ...
STANDARD_ERRORS = 4.0
#: ... plus this many nats.
ABSOLUTE_NATS = 0.02
#: Below this effective number of G0 draws a Monte Carlo comparison is not made.
MIN_EFFECTIVE_DRAWS = 100.0


class FamilyCheckWarning(UserWarning):
    """A part of a component family disagrees with its likelihood and base measure."""


def _normalised(log_weights: np.ndarray) -> tuple[np.ndarray, float]:
    """The importance weights exp(``log_weights``) normalised to sum 1, and their effective number
    of draws (Kish)."""
    log_weights = np.asarray(log_weights, np.float64)
    weights = np.exp(log_weights - log_weights.max())
    weights /= weights.sum()
    return weights, float(1.0 / np.sum(weights ** 2))


def _weights_summary(log_weights: np.ndarray) -> tuple[float, float, float]:
    """log mean exp of ``log_weights``, its Monte Carlo standard error (delta method) and the
    effective number of draws (Kish)."""
    weights, effective = _normalised(log_weights)
    log_mean = float(special.logsumexp(np.asarray(log_weights, np.float64)) - np.log(weights.size))
    se = weights.std() / (weights.mean() * np.sqrt(weights.size))
    return log_mean, float(se), effective


def _row(check: str, value: float, reference: float, se: float | None, effective: float | None) -> dict:
    difference = value - reference
    if effective is not None and effective < MIN_EFFECTIVE_DRAWS:
        status = "too few effective draws"
    elif not np.isfinite(value) or not np.isfinite(reference):
        status = "FAILED"
    else:
        allowed = ABSOLUTE_NATS + (STANDARD_ERRORS * se if se is not None else 1e-4 * (1.0 + abs(reference)))
        status = "ok" if abs(difference) <= allowed else "FAILED"
    return {"check": check, "value": value, "reference": reference, "difference": difference,
            "standard error": np.nan if se is None else se,
            "effective draws": np.nan if effective is None else effective, "status": status}


def check_family(family: ComponentFamily, points: Any, key: Any, *, n_draws: int = 20_000,
                 n_points: int = 3) -> Any:
    """Compare ``family``'s optional parts with what its likelihood and base measure imply.

    Parameters
    ----------
    family : ComponentFamily
        A built-in family or one from :func:`~zoo.dirichlet.families.custom_family`.
    points : array_like (N, D)
        Data points like those the family will model (the first ``n_points`` are used, and the
        next one as the probe point of the posterior check).
    key : jax.random.key
        For the draws of G0 and of the posterior.
    n_draws : int
        Draws of G0 (and of the posterior) per Monte Carlo comparison.
    n_points : int
        How many points the comparisons of several points summarise (at least 2).

    Returns
    -------
    pandas.DataFrame
        One row per comparison: the family's value, the reference, their difference, the Monte
        Carlo standard error and effective draws where there are any, and a status ("ok",
        "FAILED", "too few effective draws"). A :class:`FamilyCheckWarning` names the failures.
    """
    import pandas as pd

    if not isinstance(family, ComponentFamily):
        raise TypeError(f"family: expected a ComponentFamily (custom_family, normal_gamma, ...), "
                        f"got {type(family).__name__}")
    key = check_key("key", key)
    n_draws = check_int("n_draws", n_draws, minimum=100)
    n_points = check_int("n_points", n_points, minimum=2)
    array = as_float_array("points", points, ndim=2)
    if array.shape[0] < n_points + 1:
        raise ValueError(f"points: need at least {n_points + 1} points (n_points + 1, the last a probe), "
                         f"got {array.shape[0]}")
    if family.check_data is not None:
        array = family.check_data("points", array)
    chosen = jnp.asarray(array[:n_points + 1])
    subset, probe = chosen[:n_points], chosen[n_points]
    base_key, posterior_key = jax.random.split(key)
    phi = family.sample_base(base_key, (n_draws,))
    # log F(x_i | φ_d) for every draw d and point i: (n_draws, n_points + 1)
    log_lik = np.asarray(jax.vmap(lambda params: jax.vmap(lambda x: family.log_likelihood(params, x))(chosen))(phi),
                         np.float64)
    if not np.isfinite(log_lik).all():
        raise ValueError("family: log_likelihood is not finite at some draws of sample_base for these points "
                         "(does sample_base draw from the parameters' support?)")
    rows = []
    stats = None
    if family.point_stats is not None:
        per_point = [family.point_stats(x) for x in subset]
        stats = {1: per_point[0]}
        total = per_point[0]
        for part in per_point[1:]:
            total = add_stats(total, part)
        stats[n_points] = total
        empty = jax.tree_util.tree_map(jnp.zeros_like, per_point[0])
    if family.log_marginal is not None:
        for count in (1, n_points):
            reference, se, effective = _weights_summary(log_lik[:, :count].sum(axis=1))
            value = float(family.log_marginal(stats[count]))
            rows.append(_row(f"log_marginal of {count} point{'s' if count > 1 else ''} against G0 draws",
                             value, reference, se, effective))
    if family.log_predictive is not None and family.log_marginal is not None:
        value = float(family.log_predictive(empty, subset[0]))
        rows.append(_row("log_predictive from empty statistics (prior predictive) against log_marginal",
                         value, float(family.log_marginal(stats[1])), None, None))
        before = per_point[0]  # the first n_points - 1 points, to predict the last
        for part in per_point[1:n_points - 1]:
            before = add_stats(before, part)
        value = float(family.log_predictive(before, subset[-1]))
        reference = float(family.log_marginal(stats[n_points]) - family.log_marginal(before))
        rows.append(_row(f"log_predictive of point {n_points} given the others against log_marginal",
                         value, reference, None, None))
    elif family.log_predictive is not None:  # no log_marginal: the prior predictive by Monte Carlo
        reference, se, effective = _weights_summary(log_lik[:, 0])
        value = float(family.log_predictive(empty, subset[0]))
        rows.append(_row("log_predictive from empty statistics against G0 draws", value, reference, se, effective))
    if family.sample_posterior is not None:
        weights, effective = _normalised(log_lik[:, :n_points].sum(axis=1))
        probe_values = log_lik[:, n_points]
        reference = float(np.sum(weights * probe_values))
        reference_se = float(np.sqrt(np.sum(weights ** 2 * (probe_values - reference) ** 2)))
        rows_of_stats = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (n_draws,) + jnp.shape(leaf)),
                                               stats[n_points])
        drawn = family.sample_posterior(posterior_key, rows_of_stats)
        values = np.asarray(jax.vmap(lambda params: family.log_likelihood(params, probe))(drawn), np.float64)
        value = float(values.mean())
        se = float(np.hypot(values.std() / np.sqrt(values.size), reference_se))
        rows.append(_row(f"sample_posterior given {n_points} points: mean log F(probe | φ) against weighted G0 draws",
                         value, reference, se, effective))
    table = pd.DataFrame(rows, columns=["check", "value", "reference", "difference", "standard error",
                                        "effective draws", "status"]).set_index("check")
    failed = table.index[table["status"] == "FAILED"].tolist()
    if failed:
        warnings.warn(f"family {family.name!r}: {'; '.join(failed)}: FAILED (see the table's differences). A "
                      "log_marginal or sample_posterior for another prior than sample_base's, or point_stats that "
                      "do not add up over points (a sum, not a mean), gives the samplers another posterior.",
                      FamilyCheckWarning, stacklevel=2)
    if not rows:
        table.attrs["note"] = "the family has no optional parts to check (log_likelihood and sample_base only)"
    return table
