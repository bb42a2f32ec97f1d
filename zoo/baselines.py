"""Baseline clusterings that DM05 (Daumé & Marcu, 2005, §7.1) compare every system against.

This module holds the two trivial baselines of DM05 Tables 1–4: *Coarse*, which puts every point
in one cluster, and *Fine*, which puts every point in a cluster of its own. They bracket the
metrics of :mod:`zoo.metrics` (Fine has precision 1 and recall 0, Coarse recall 1 and low
precision) and show why DM05 distrust the Rand index: Fine scores a high RI whenever the gold
standard has many small clusters. Later issues add DM05's learned and unsupervised baselines here
(K-means with an oracle number of clusters, the Binary classifier-plus-clustering system, and
Xing-K with a learned distance metric).
"""

from __future__ import annotations

import numpy as np

from zoo._validation import check_int

__all__ = ["coarse_partition", "fine_partition"]


def coarse_partition(n_points: int) -> np.ndarray:
    """DM05's Coarse baseline: every point in the same cluster.

    Parameters
    ----------
    n_points : int
        Number of points N (at least 1).

    Returns
    -------
    np.ndarray of int64, shape (N,)
        All zeros.

    Examples
    --------
    >>> coarse_partition(3)
    array([0, 0, 0])
    """
    n_points = check_int("n_points", n_points, minimum=1)
    return np.zeros(n_points, dtype=np.int64)


def fine_partition(n_points: int) -> np.ndarray:
    """DM05's Fine baseline: every point in a cluster of its own.

    Parameters
    ----------
    n_points : int
        Number of points N (at least 1).

    Returns
    -------
    np.ndarray of int64, shape (N,)
        ``0, 1, ..., N - 1``.

    Examples
    --------
    >>> fine_partition(3)
    array([0, 1, 2])
    """
    n_points = check_int("n_points", n_points, minimum=1)
    return np.arange(n_points, dtype=np.int64)
