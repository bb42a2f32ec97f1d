"""Features far from the scale a Gaussian prior expects: how to find them, the warning.

The Gaussian families' defaults (``normal_gamma``: mean 0, Gamma(1, 1) precisions, kappa 1;
``normal_known_precision``: identity precision, Normal(0, 1) means; SupervisedDP's G0) describe
features that are centred and of about unit variance, as DM05 §5 prepare them ("we typically
center and spherize the training data"). On data of another scale the prior, not the data, sets
the clusters, and nothing fails: iris's raw measurements (features with means of 1.2 to 5.8, up
to 4 of the prior's standard deviations from its mean 0) give ``DPMixture(normal_gamma(4))`` two
clusters in every draw of every chain; plus 100, or standardised and then times 1e-3, one;
standardised, three to five (2 chains, 100 + 50 sweeps). :func:`off_scale_features` finds such
features from the prior's implied spread of the data, and ``DPMixture.fit`` (through the Gaussian
families' ``warn_data``) and ``SupervisedDP.fit`` warn with :class:`ScaleWarning`.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

__all__ = ["MEAN_LIMIT", "SPREAD_LIMIT", "ScaleWarning", "off_scale_features", "warn_off_scale"]

#: A feature is off scale when its mean lies more than this many of the prior's standard deviations
#: of the data from the prior's mean ...
MEAN_LIMIT = 3.0
#: ... or when its standard deviation is more than this factor above or below the prior's.
SPREAD_LIMIT = 10.0


class ScaleWarning(UserWarning):
    """Gaussian components were given features far from the scale their prior expects
    (see :func:`off_scale_features`)."""


def off_scale_features(array: np.ndarray, mean: Any, spread: Any) -> np.ndarray:
    """Columns of ``array`` (N, D; finite, as the families' ``check_data`` leave it) whose mean lies
    more than :data:`MEAN_LIMIT` × ``spread`` from ``mean``, or whose standard deviation is more
    than :data:`SPREAD_LIMIT` times above or below ``spread`` (constant columns are the tied-values
    warning's, not this one's). ``mean`` and ``spread`` (scalars or (D,)) are the prior's: where it
    puts the data's centre, and the standard deviation of the data it implies (a cluster's own
    spread and that of the clusters' means together).

    >>> off_scale_features(np.array([[0.1, 100.0, 0.001], [-0.2, 101.0, 0.002], [0.9, 99.0, 0.0]]),
    ...                    0.0, 1.4).tolist()
    [1, 2]
    """
    array = np.asarray(array, np.float64)
    if array.ndim != 2 or array.shape[0] < 2:
        return np.zeros(0, np.int64)
    spread = np.broadcast_to(np.asarray(spread, np.float64), array.shape[1:])
    offset = np.abs(array.mean(axis=0) - np.broadcast_to(np.asarray(mean, np.float64), array.shape[1:]))
    sd = array.std(axis=0)
    varies = sd > 0
    off = (offset > MEAN_LIMIT * spread) | (varies & ((sd > SPREAD_LIMIT * spread) | (sd < spread / SPREAD_LIMIT)))
    return np.flatnonzero(off)


def warn_off_scale(name: str, array: np.ndarray, mean: Any, spread: Any, *, stacklevel: int = 2,
                   columns: Sequence[str] | None = None) -> None:
    """A :class:`ScaleWarning` naming ``name`` and the features of :func:`off_scale_features` (by
    ``columns``, a DataFrame's names, where given), with their means and standard deviations."""
    off = off_scale_features(array, mean, spread)
    if off.size == 0:
        return
    values = np.asarray(array, np.float64)
    shown = ", ".join(f"{columns[index]!r}" if columns is not None else f"{index}" for index in off[:5])
    more = f", ... ({off.size} in all)" if off.size > 5 else ""
    first = int(off[0])
    centre, implied = (float(np.broadcast_to(np.asarray(value, np.float64), values.shape[1:])[first])
                       for value in (mean, spread))
    warnings.warn(
        f"{name}: {off.size} of {values.shape[1]} features {'is' if off.size == 1 else 'are'} far from the scale "
        f"the prior expects (mean {centre:.3g}, standard deviation about {implied:.3g}): {'columns' if off.size > 1 else 'column'} {shown}{more} (the first: mean "
        f"{values[:, first].mean():.3g}, standard deviation {values[:, first].std():.3g}). The prior, not the data, "
        "then sets the clusters; centre each feature and scale it to unit variance ((X - X.mean(0)) / X.std(0), as "
        "DM05 §5 do and the command line does), or set the prior's mean and scale to the data's.",
        ScaleWarning, stacklevel=stacklevel + 1)
