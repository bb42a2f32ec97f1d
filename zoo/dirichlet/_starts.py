"""Starting partitions of the DP and SCDP chains: one cluster, random labels, K-means, and the
dispersed turn of the three, so that R-hat compares chains started far apart."""

from __future__ import annotations

import warnings

import numpy as np

from inference._validation import check_memory

__all__ = ["DISPERSED", "check_start_memory", "one_start", "start_kinds", "start_labels"]

#: The starts that ``init="dispersed"`` gives chains 0, 1, 2, 3, ... in turn.
DISPERSED = ("single", "kmeans", "random")


def check_start_memory(n_chains: int, n_points: int) -> None:
    """Refuse, naming ``n_chains``, more chains than the memory holds even the starting labels of
    (three int64 copies of each chain's labels: far less than the chains' states, which are checked
    when they are built, but checked before the starts are drawn one chain at a time)."""
    check_memory("n_chains", 3 * 8 * n_chains * n_points, f"starting {n_chains:,} chains of {n_points:,} points")


def start_kinds(init: str, n_chains: int) -> list[str]:
    """The start of each chain: ``init`` itself, or for ``"dispersed"`` :data:`DISPERSED` in turn."""
    return [DISPERSED[chain % len(DISPERSED)] if init == "dispersed" else init for chain in range(n_chains)]


def start_labels(kind: str, points: np.ndarray, rng: np.random.Generator, *, n_random: int,
                 n_kmeans: int) -> np.ndarray:
    """One chain's starting labels of the N rows of ``points``: ``"single"`` (all 0),
    ``"singletons"`` (0..N-1), ``"random"`` (uniform among ``n_random``, drawn from ``rng``) or
    ``"kmeans"`` (K-means with ``n_kmeans`` clusters, seeded from ``rng``; labels 0..K-1 as
    they occur in K-means' numbering, fewer when the points have fewer distinct values)."""
    n_points = points.shape[0]
    if kind == "single":
        return np.zeros(n_points, dtype=np.int64)
    if kind == "singletons":
        return np.arange(n_points, dtype=np.int64)
    if kind == "random":
        return rng.integers(0, n_random, size=n_points)
    from sklearn.cluster import KMeans

    with warnings.catch_warnings():  # fewer distinct points than clusters: K-means says so, and uses fewer
        warnings.simplefilter("ignore")
        kmeans = KMeans(n_clusters=n_kmeans, n_init=1, random_state=int(rng.integers(2**31)))
        labels = kmeans.fit_predict(np.asarray(points).reshape(n_points, -1))
    return np.unique(labels, return_inverse=True)[1].astype(np.int64)


def one_start(labels: np.ndarray) -> bool:
    """Whether every chain of ``labels`` (n_chains, N) starts from one and the same partition (the
    same clusters, whatever their numbers), as ``init="single"`` or one array of labels for all
    chains give: chains that then never leave it agree whatever the posterior, so the mixing table
    cannot count their agreement (``attrs["one_start"]``, :func:`inference.diagnostics.mixes`)."""
    labels = np.asarray(labels)
    if labels.ndim != 2 or labels.shape[0] < 2:
        return False
    canonical = [np.unique(row, return_index=True, return_inverse=True) for row in labels]
    # Relabel each chain's clusters by the first point each holds: equal rows are equal partitions.
    firsts = [np.argsort(np.argsort(index))[inverse] for _, index, inverse in canonical]
    return all(np.array_equal(firsts[0], row) for row in firsts[1:])
