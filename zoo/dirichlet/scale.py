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

__all__ = ["MEAN_LIMIT", "PRIOR_SHRINK_LIMIT", "PrecisionPriorWarning", "SPREAD_LIMIT", "ScaleWarning",
           "off_scale_features", "precision_prior_shrinkage", "warn_off_scale", "warn_precision_prior"]

#: A feature is off scale when its mean lies more than this many of the prior's standard deviations
#: of the data from the prior's mean ...
MEAN_LIMIT = 3.0
#: ... or when its standard deviation is more than this factor above or below the prior's.
SPREAD_LIMIT = 10.0


#: The precision prior outweighs the training publications when it holds the typical feature's
#: posterior precision below this fraction of what those publications show
#: (:func:`precision_prior_shrinkage`).
PRIOR_SHRINK_LIMIT = 0.5


class ScaleWarning(UserWarning):
    """Gaussian components were given features far from the scale their prior expects
    (see :func:`off_scale_features`)."""


class PrecisionPriorWarning(ScaleWarning):
    """The Gamma prior of the precisions holds them far below the spread that the labelled
    training publications show (see :func:`precision_prior_shrinkage`): a scale warning about the
    clusters' width rather than the data's."""


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


def precision_prior_shrinkage(train: Any, labels: Any, shape: float, rate: float) -> tuple[float, float]:
    """How far a Gamma(``shape``, rate ``rate``) prior of per-feature precisions pulls them from
    what labelled training publications show: the median over features of the posterior mean
    precision given the training references, (a + d/2) / (b + S/2), divided by the data's own
    d / S, and the median within-publication variance S / d (S: the feature's sum of squares about
    its publication's mean; d: references less publications).

    A ratio near 1 means the data set the precisions; far below 1, the prior does, and publications
    as tight as the training ones cannot be held apart. Measured (2026-12-07): standardised
    digits of the notebook's protocol 1.00 (median within-publication variance 0.63), scikit-learn's
    wine classes 0 and 1 0.99 (0.55), FEBRL records embedded by edit distances (200 records of 60
    entities) 0.62 (0.023), and six entities of four records in 3-D, standardised with five more
    entities, 0.14 (0.017): there SCDP-1 with the default rate 1 merged two of five test entities
    ten within-entity sds apart (F 0.789), and ``precision_rate=0.01`` found all five (F 1.000).
    Features constant within every publication are left out (the tied-values warning's).

    >>> rng = np.random.default_rng(0)
    >>> tight = np.repeat(rng.normal(size=(6, 2)), 4, axis=0) + 0.05 * rng.normal(size=(24, 2))
    >>> ratio, variance = precision_prior_shrinkage(tight, np.repeat(np.arange(6), 4), 1.0, 1.0)
    >>> round(ratio, 2), round(variance, 4)
    (0.02, 0.002)
    """
    train = np.asarray(train, np.float64)
    codes = np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)
    n_publications = int(codes.max()) + 1 if codes.size else 0
    degrees = train.shape[0] - n_publications
    if train.ndim != 2 or degrees < 1:
        return 1.0, float("nan")
    sums = np.zeros((n_publications, train.shape[1]))
    np.add.at(sums, codes, train)
    means = sums / np.bincount(codes, minlength=n_publications)[:, None]
    within = ((train - means[codes]) ** 2).sum(axis=0)
    varies = within > 0
    if not varies.any():
        return 1.0, float("nan")
    within = within[varies]
    ratio = (shape + degrees / 2) / (rate + within / 2) * within / degrees
    return float(np.median(ratio)), float(np.median(within / degrees))


def warn_precision_prior(name: str, train: Any, labels: Any, shape: float, rate: float, *,
                         stacklevel: int = 2) -> bool:
    """A :class:`PrecisionPriorWarning` when :func:`precision_prior_shrinkage` is below
    :data:`PRIOR_SHRINK_LIMIT`, naming ``name``'s ``precision_rate`` and a value under which the
    prior's mean precision, ``shape`` / rate, is what the training publications show. Returns
    whether it warned."""
    ratio, variance = precision_prior_shrinkage(train, labels, shape, rate)
    if not ratio < PRIOR_SHRINK_LIMIT:
        return False
    suggested = shape * variance
    warnings.warn(
        f"{name}: the prior of the precisions, Gamma({shape:.3g}, rate {rate:.3g}) with mean {shape / rate:.3g}, "
        f"outweighs the training publications: their references vary by {variance:.3g} about their publication's "
        f"mean (median over features, precision {1 / variance:.3g}), and the prior holds the precisions at "
        f"{ratio:.2f} of that, so test publications as tight as the training ones can be merged. Give a prior "
        f"whose mean precision is the data's: precision_rate={suggested:.2g} (precision_shape × {variance:.3g}).",
        PrecisionPriorWarning, stacklevel=stacklevel + 1)
    return True
