"""Metrics comparing a hypothesis clustering with a gold-standard clustering.

Daumé & Marcu (2005, "A Bayesian model for supervised clustering with the Dirichlet process
prior", JMLR 6; cited as DM05) review these metrics in §6 and report them in the column order
RI, P, R, F, CED, NES, VI, NVI of their Tables 1–4. Every metric here is computed from the
contingency table of the two labelings (a sparse matrix with one entry per non-empty
intersection of a gold cluster and a hypothesis cluster), so the cost is O(N + table size), never
O(N²) over pairs of points.

Conventions (all stated by DM05 §6 unless marked otherwise):

* Pair counts: ``N11`` pairs together in both clusterings, ``N00`` apart in both, ``N10`` together
  in the gold standard only, ``N01`` together in the hypothesis only (DM05 §6.1–6.2).
* Logarithms are natural. DM05's tables are consistent with nats: for the Fine and Coarse
  baselines VI(Fine) + VI(Coarse) = log N (Table 2: 2.345 + 3.589 = 5.934 = log 378).
* F is the harmonic mean 2PR/(P + R). DM05 §6.2 prints (P⁻¹ + R⁻¹)⁻¹, which is half of that,
  but every F in their tables is 2PR/(P + R) (Table 1, K-Means: P = .481, R = .656, F = .555).
* Degenerate denominators (our convention, matching the Fine row of DM05's tables where
  P = 1.00 and F = .000): a clustering that places no pair together has precision 1; a gold
  standard with no pair together gives recall 1; F = 0 when P + R = 0; with a single point,
  RI = 1, VI = 0 and NVI = 1; ARI = 1 when both clusterings are all-in-one or all-singletons
  (as scikit-learn does).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import maximum_bipartite_matching

__all__ = [
    "rand_index",
    "adjusted_rand_index",
    "pairwise_precision_recall_f",
    "cluster_edit_distance",
    "normalized_edit_score",
    "variation_of_information",
    "normalized_variation_of_information",
    "clustering_scores",
]


def _encode_labels(name: str, labels: Any) -> np.ndarray:
    """Map a 1-D sequence of hashable labels to integer codes 0..K-1 (order of first appearance)."""
    if labels is None or isinstance(labels, (str, bytes, set, frozenset, dict)):
        # A set or dict has no order: its labels could not be matched to the points.
        raise TypeError(
            f"{name}: expected a 1-D sequence of labels, got {type(labels).__name__}"
        )
    if isinstance(labels, np.ndarray) or hasattr(labels, "__array__"):
        array = np.asarray(labels)
        if array.ndim != 1:
            raise ValueError(f"{name}: expected 1 dimension, got shape {array.shape}")
    else:
        try:
            items = list(labels)
        except TypeError:
            raise TypeError(
                f"{name}: expected a 1-D sequence of labels, got {type(labels).__name__}"
            ) from None
        array = np.empty(len(items), dtype=object)
        array[:] = items
    if array.size == 0:
        raise ValueError(f"{name}: is empty")
    try:
        codes, _ = pd.factorize(array, use_na_sentinel=True)
    except TypeError as error:
        raise TypeError(f"{name}: labels must be hashable ({error})") from None
    if (codes < 0).any():
        raise ValueError(f"{name}: contains missing labels (None or NaN)")
    return codes.astype(np.int64)


class _Contingency:
    """Contingency table of two labelings: ``table[i, j]`` = #points in gold i and hypothesis j."""

    def __init__(self, table: sparse.csr_matrix):
        self.table = table
        self.n_points = int(table.sum())
        self.sizes_true = np.asarray(table.sum(axis=1)).ravel()
        self.sizes_pred = np.asarray(table.sum(axis=0)).ravel()

    @classmethod
    def from_labels(cls, labels_true: Any, labels_pred: Any) -> "_Contingency":
        """Validate two labelings of the same points and count their intersections."""
        codes_true = _encode_labels("labels_true", labels_true)
        codes_pred = _encode_labels("labels_pred", labels_pred)
        if codes_true.shape[0] != codes_pred.shape[0]:
            raise ValueError(
                f"labels_pred: has {codes_pred.shape[0]} labels but labels_true has "
                f"{codes_true.shape[0]}"
            )
        shape = (int(codes_true.max()) + 1, int(codes_pred.max()) + 1)
        table = sparse.coo_matrix(
            (np.ones(codes_true.shape[0], dtype=np.int64), (codes_true, codes_pred)), shape=shape
        ).tocsr()
        table.sum_duplicates()
        return cls(table)

    def transposed(self) -> "_Contingency":
        """The same table with the roles of gold standard and hypothesis exchanged."""
        return _Contingency(self.table.T.tocsr())

    def pair_counts(self) -> tuple[int, int, int, int]:
        """Return ``(N11, N10, N01, N00)`` as Python ints (DM05 §6.1–6.2)."""

        def pairs(counts: np.ndarray) -> int:
            counts = counts.astype(np.int64)
            return int((counts * (counts - 1) // 2).sum())

        together_both = pairs(self.table.data)
        together_true = pairs(self.sizes_true)
        together_pred = pairs(self.sizes_pred)
        n_pairs = self.n_points * (self.n_points - 1) // 2
        n11 = together_both
        n10 = together_true - together_both
        n01 = together_pred - together_both
        n00 = n_pairs - n11 - n10 - n01
        return n11, n10, n01, n00

    def entropies(self) -> tuple[float, float, float]:
        """Return ``(H(G), H(H), H(G, H))`` in nats, with cluster probabilities n_k / N."""

        def entropy(counts: np.ndarray) -> float:
            probabilities = counts[counts > 0] / self.n_points
            return float(-(probabilities * np.log(probabilities)).sum())

        return (
            entropy(self.sizes_true),
            entropy(self.sizes_pred),
            entropy(self.table.data.astype(np.float64)),
        )

    def edit_distance(self) -> int:
        """Minimum number of create/move/merge operations turning the hypothesis into the gold."""
        # A plan without splits assigns every hypothesis cluster h to one gold cluster f(h): the
        # points of h outside f(h) are moved out (one operation each; moving a point into a new
        # cluster is DM05's "create"), and the c_g >= 1 hypothesis clusters assigned to gold
        # cluster g are merged (c_g - 1 operations). Gold clusters that receive no hypothesis
        # cluster are built from moved points at no extra cost. Hence
        #   CED = N - sum_h n[h, f(h)] + K_H - |f(H)|,
        # minimised by giving every h a plurality gold cluster (largest n[h, g]) and, among the
        # ties, covering as many distinct gold clusters as possible: a maximum bipartite matching
        # in the graph of (hypothesis cluster, plurality gold cluster) edges.
        by_pred = self.table.T.tocsr()
        row_max = by_pred.max(axis=1).toarray().ravel()
        row_of_entry = np.repeat(np.arange(by_pred.shape[0]), np.diff(by_pred.indptr))
        is_plurality = by_pred.data == row_max[row_of_entry]
        plurality_graph = sparse.csr_matrix(
            (
                np.ones(int(is_plurality.sum()), dtype=np.int8),
                (row_of_entry[is_plurality], by_pred.indices[is_plurality]),
            ),
            shape=by_pred.shape,
        )
        matching = maximum_bipartite_matching(plurality_graph, perm_type="column")
        n_covered = int((matching >= 0).sum())
        n_clusters_pred = by_pred.shape[0]
        return int(self.n_points - row_max.sum() + n_clusters_pred - n_covered)


def _rand_index(counts: _Contingency) -> float:
    n11, _, _, n00 = counts.pair_counts()
    n_pairs = counts.n_points * (counts.n_points - 1) // 2
    if n_pairs == 0:
        return 1.0
    return (n11 + n00) / n_pairs  # DM05 §6.1


def _precision_recall_f(counts: _Contingency) -> tuple[float, float, float]:
    n11, n10, n01, _ = counts.pair_counts()
    precision = n11 / (n11 + n01) if n11 + n01 > 0 else 1.0  # DM05 §6.2
    recall = n11 / (n11 + n10) if n11 + n10 > 0 else 1.0  # DM05 §6.2
    f_score = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return float(precision), float(recall), float(f_score)


def _normalized_edit_score(counts: _Contingency) -> float:
    total = counts.edit_distance() + counts.transposed().edit_distance()
    return 1.0 - total / (2 * counts.n_points)  # DM05 §6.3


def _variation_of_information(counts: _Contingency) -> float:
    entropy_true, entropy_pred, entropy_joint = counts.entropies()
    # I(G, H) = H(G) + H(H) - H(G, H), so VI = 2 H(G, H) - H(G) - H(H) (DM05 §6.4).
    return max(0.0, 2.0 * entropy_joint - entropy_true - entropy_pred)


def _normalized_variation_of_information(counts: _Contingency) -> float:
    if counts.n_points == 1:
        return 1.0
    return float(1.0 - _variation_of_information(counts) / np.log(counts.n_points))  # DM05 §6.4


def rand_index(labels_true: Any, labels_pred: Any) -> float:
    """Rand index, the fraction of point pairs on which the two clusterings agree.

    ``RI(G, H) = 2 [N11 + N00] / [N (N - 1)]`` (DM05 §6.1). Symmetric; 1 for identical clusterings.

    Parameters
    ----------
    labels_true : sequence of hashable, shape (N,)
        Gold-standard cluster label of every point.
    labels_pred : sequence of hashable, shape (N,)
        Hypothesis cluster label of every point.

    Returns
    -------
    float
        The Rand index in [0, 1] (1 when N = 1).

    Examples
    --------
    >>> rand_index([0, 0, 1, 1], [0, 0, 1, 2])
    0.8333333333333334
    """
    return _rand_index(_Contingency.from_labels(labels_true, labels_pred))


def adjusted_rand_index(labels_true: Any, labels_pred: Any) -> float:
    """Rand index adjusted for chance (Hubert & Arabie, 1985).

    ``ARI = (N11 - E) / (M - E)`` with ``E = T_G T_H / C(N, 2)`` and ``M = (T_G + T_H) / 2``,
    where ``T_G`` and ``T_H`` count the pairs placed together by each clustering. Symmetric; 1 for
    identical clusterings, about 0 for independent ones, and 1 when both clusterings are
    all-in-one or both all-singletons.

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.

    Returns
    -------
    float
    """
    counts = _Contingency.from_labels(labels_true, labels_pred)
    n11, n10, n01, _ = counts.pair_counts()
    n_pairs = counts.n_points * (counts.n_points - 1) // 2
    together_true = n11 + n10
    together_pred = n11 + n01
    if n_pairs == 0:
        return 1.0
    expected = together_true * together_pred / n_pairs
    maximum = (together_true + together_pred) / 2
    if maximum == expected:
        return 1.0
    return float((n11 - expected) / (maximum - expected))


def pairwise_precision_recall_f(labels_true: Any, labels_pred: Any) -> tuple[float, float, float]:
    """Precision, recall and F-score of the pairs placed in the same cluster.

    ``P = N11 / (N11 + N01)``, ``R = N11 / (N11 + N10)`` (DM05 §6.2) and ``F = 2PR / (P + R)``,
    the harmonic mean that DM05's tables report (their printed ``(P⁻¹ + R⁻¹)⁻¹`` is half of it).
    A hypothesis placing no pair together has P = 1 (the Fine baseline: P = 1.00, R = .000 in DM05
    Tables 1–4); a gold standard with no pair together gives R = 1.

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.

    Returns
    -------
    precision, recall, f : float
    """
    return _precision_recall_f(_Contingency.from_labels(labels_true, labels_pred))


def cluster_edit_distance(labels_true: Any, labels_pred: Any, *, normalize: bool = False) -> float:
    """Cluster edit distance CED(G, H) of Pantel (2003) as described in DM05 §6.3.

    The minimum number of operations that transform the hypothesis clustering ``labels_pred``
    into the gold standard ``labels_true`` when each operation costs one and splits are not
    allowed: *move* one point into another existing cluster, *create* a new cluster by moving one
    point into it, *merge* two clusters. It is 0 for the perfect clustering and below N otherwise
    (DM05 §6.3), and it is not symmetric: splitting an m-point cluster in half costs one merge to
    repair, wrongly merging two m/2-point clusters costs m/2 moves.

    The minimum is exact (not a greedy plan): it assigns each hypothesis cluster to a gold cluster
    holding a plurality of its points and breaks ties by a maximum bipartite matching, so that as
    few merges as possible are needed.

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.
    normalize : bool
        Divide by N. DM05's tables report CED on this scale (Table 1, Coarse: CED = .725, i.e.
        1 - largest gold cluster / N).

    Returns
    -------
    float
        The number of operations (a whole number) or, with ``normalize``, that number over N.

    Examples
    --------
    >>> cluster_edit_distance([0, 0, 1, 1], [0, 1, 2, 3])  # two merges
    2.0
    >>> cluster_edit_distance([0, 1, 2, 3], [0, 0, 1, 1])  # two moves into new clusters
    2.0
    """
    if not isinstance(normalize, (bool, np.bool_)):
        raise TypeError(f"normalize: expected a bool, got {type(normalize).__name__}")
    counts = _Contingency.from_labels(labels_true, labels_pred)
    distance = counts.edit_distance()
    return distance / counts.n_points if normalize else float(distance)


def normalized_edit_score(labels_true: Any, labels_pred: Any) -> float:
    """Normalized edit score ``NES(G, H) = 1 - [CED(G, H) + CED(H, G)] / [2N]`` (DM05 §6.3).

    Symmetric, in [0, 1], 1 for the perfect clustering. For the Fine baseline (every point
    alone) against a gold standard with K clusters it equals K / N.

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.

    Returns
    -------
    float
    """
    return _normalized_edit_score(_Contingency.from_labels(labels_true, labels_pred))


def variation_of_information(labels_true: Any, labels_pred: Any) -> float:
    """Variation of information ``VI(G, H) = H(G) + H(H) - 2 I(G, H)`` (Meila 2003; DM05 §6.4).

    Entropies use cluster probabilities n_k / N and natural logarithms. VI is a metric on
    partitions, 0 only for identical clusterings and at most log N.

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.

    Returns
    -------
    float
        VI in nats.
    """
    return _variation_of_information(_Contingency.from_labels(labels_true, labels_pred))


def normalized_variation_of_information(labels_true: Any, labels_pred: Any) -> float:
    """Normalized variation of information ``NVI(G, H) = 1 - VI(G, H) / log N`` (DM05 §6.4).

    In [0, 1] with 1 for the correct clustering (1 when N = 1).

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.

    Returns
    -------
    float
    """
    return _normalized_variation_of_information(_Contingency.from_labels(labels_true, labels_pred))


def clustering_scores(labels_true: Any, labels_pred: Any) -> dict[str, float]:
    """All DM05 §6 metrics in the column order of DM05 Table 1.

    Parameters
    ----------
    labels_true, labels_pred : sequence of hashable, shape (N,)
        Gold-standard and hypothesis cluster labels.

    Returns
    -------
    dict
        Keys ``RI, P, R, F, CED, NES, VI, NVI``. CED is divided by N as in DM05's tables.

    Examples
    --------
    >>> scores = clustering_scores([0, 0, 1, 1], [0, 0, 1, 1])
    >>> list(scores), scores["F"], scores["VI"]
    (['RI', 'P', 'R', 'F', 'CED', 'NES', 'VI', 'NVI'], 1.0, 0.0)
    """
    counts = _Contingency.from_labels(labels_true, labels_pred)
    precision, recall, f_score = _precision_recall_f(counts)
    return {
        "RI": _rand_index(counts),
        "P": precision,
        "R": recall,
        "F": f_score,
        "CED": counts.edit_distance() / counts.n_points,
        "NES": _normalized_edit_score(counts),
        "VI": _variation_of_information(counts),
        "NVI": _normalized_variation_of_information(counts),
    }
