"""Tests for zoo.metrics (DM05 §6) and the trivial baselines of zoo.baselines (DM05 §7)."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import adjusted_rand_score, mutual_info_score, rand_score

from zoo.baselines import coarse_partition, fine_partition
from zoo.metrics import (
    adjusted_rand_index,
    cluster_edit_distance,
    clustering_scores,
    normalized_edit_score,
    normalized_variation_of_information,
    pairwise_precision_recall_f,
    rand_index,
    variation_of_information,
)

# ---------------------------------------------------------------- a worked example
#
# G = [0, 0, 0, 1, 1, 2]  gold:       {0,1,2} {3,4} {5}
# H = [0, 0, 1, 1, 2, 2]  hypothesis: {0,1} {2,3} {4,5}
# Contingency (gold x hyp): n(G0,H0) = 2, n(G0,H1) = 1, n(G1,H1) = 1, n(G1,H2) = 1, n(G2,H2) = 1.
# Pairs: C(6,2) = 15. Together in G: 3 + 1 = 4; in H: 1 + 1 + 1 = 3; in both: C(2,2) = 1.
#   N11 = 1, N10 = 4 - 1 = 3, N01 = 3 - 1 = 2, N00 = 15 - 6 = 9.
#   RI = (1 + 9) / 15 = 2/3; P = 1/3; R = 1/4; F = 2 (1/12) / (7/12) = 2/7.
#   ARI: E = 4 * 3 / 15 = 0.8, M = 3.5, ARI = (1 - 0.8) / (3.5 - 0.8) = 2/27.
# CED(G, H), H -> G: move 2 into {0,1}; move 4 into what is left of {2,3}: 2 operations.
# CED(H, G), G -> H: move 2 into {3,4} -> {2,3,4}; move 4 into {5} -> {4,5}: 2 operations
#   (no single operation turns one into the other).
#   NES = 1 - (2 + 2) / 12 = 2/3.
# Entropies (nats): H(G) = -(1/2 log 1/2 + 1/3 log 1/3 + 1/6 log 1/6) = 1.0114042647;
#   H(H) = log 3; H(G,H) = -(1/3 log 1/3 + 4 (1/6) log 1/6) = 1.5607104090.
#   VI = 2 H(G,H) - H(G) - H(H) = 1.0114042647; NVI = 1 - VI / log 6 = 0.4355245321.

GOLD = [0, 0, 0, 1, 1, 2]
HYPOTHESIS = [0, 0, 1, 1, 2, 2]


def test_worked_example():
    scores = clustering_scores(GOLD, HYPOTHESIS)
    assert list(scores) == ["RI", "P", "R", "F", "CED", "NES", "VI", "NVI"]
    entropy_gold = -(np.log(1 / 2) / 2 + np.log(1 / 3) / 3 + np.log(1 / 6) / 6)
    entropy_joint = -(np.log(1 / 3) / 3 + 4 * np.log(1 / 6) / 6)
    variation = 2 * entropy_joint - entropy_gold - np.log(3)
    expected = {
        "RI": 2 / 3,
        "P": 1 / 3,
        "R": 1 / 4,
        "F": 2 / 7,
        "CED": 2 / 6,
        "NES": 2 / 3,
        "VI": variation,
        "NVI": 1 - variation / np.log(6),
    }
    assert scores == pytest.approx(expected, rel=1e-12)
    assert variation == pytest.approx(1.0114042647, abs=1e-10)
    assert adjusted_rand_index(GOLD, HYPOTHESIS) == pytest.approx(2 / 27, rel=1e-12)
    assert cluster_edit_distance(GOLD, HYPOTHESIS) == 2
    assert cluster_edit_distance(HYPOTHESIS, GOLD) == 2


def test_edit_distance_is_asymmetric_as_dm05_describe():
    # DM05 §6.3: splitting an m-point cluster in half costs one merge to repair ...
    one_cluster, two_halves = [0] * 8, [0] * 4 + [1] * 4
    assert cluster_edit_distance(one_cluster, two_halves) == 1
    # ... while wrongly merging two m/2-point clusters costs m/2 moves.
    assert cluster_edit_distance(two_halves, one_cluster) == 4
    assert cluster_edit_distance(two_halves, one_cluster, normalize=True) == 0.5
    assert normalized_edit_score(two_halves, one_cluster) == pytest.approx(1 - 5 / 16)


# ---------------------------------------------------------------- CED by exhaustive search


def _canonical(blocks):
    labels = {}
    for label, block in enumerate(blocks):
        for point in block:
            labels[point] = label
    order = {}
    return tuple(order.setdefault(labels[p], len(order)) for p in sorted(labels))


def _blocks(labels):
    groups = collections.defaultdict(list)
    for point, label in enumerate(labels):
        groups[label].append(point)
    return [frozenset(group) for group in groups.values()]


def _neighbours(labels):
    """Partitions one create/move/merge operation away (DM05 §6.3; no splits of a cluster)."""
    blocks = _blocks(labels)
    for point, source in itertools.product(range(len(labels)), range(len(blocks))):
        if point not in blocks[source]:
            continue
        rest = [block for index, block in enumerate(blocks) if index != source]
        remaining = blocks[source] - {point}
        base = rest + ([remaining] if remaining else [])
        if remaining:  # create: move the point into a new cluster
            yield _canonical(base + [frozenset({point})])
        for target in range(len(rest)):  # move into another existing cluster
            moved = list(base)
            moved[target] = moved[target] | {point}
            yield _canonical(moved)
    for first, second in itertools.combinations(range(len(blocks)), 2):
        merged = [block for index, block in enumerate(blocks) if index not in (first, second)]
        yield _canonical(merged + [blocks[first] | blocks[second]])


def _all_partitions(n_points):
    def extend(prefix, n_blocks):
        if len(prefix) == n_points:
            yield tuple(prefix)
            return
        for block in range(n_blocks + 1):
            yield from extend(prefix + [block], max(n_blocks, block + 1))

    return list(extend([0], 1))


def test_edit_distance_equals_shortest_operation_sequence():
    """CED(G, H) = BFS distance from H to G over all 52 partitions of 5 points."""
    partitions = _all_partitions(5)
    for hypothesis in partitions:
        distance = {hypothesis: 0}
        queue = collections.deque([hypothesis])
        while queue:
            state = queue.popleft()
            for neighbour in _neighbours(state):
                if neighbour not in distance:
                    distance[neighbour] = distance[state] + 1
                    queue.append(neighbour)
        assert len(distance) == len(partitions)
        for gold in partitions:
            assert cluster_edit_distance(gold, hypothesis) == distance[gold], (gold, hypothesis)
            assert distance[gold] < 5  # below N (DM05 §6.3)


# ---------------------------------------------------------------- scikit-learn and identities


def labelings(max_points=40, max_labels=6):
    return st.integers(1, max_points).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, max_labels - 1), min_size=n, max_size=n),
            st.lists(st.integers(0, max_labels - 1), min_size=n, max_size=n),
        )
    )


@settings(max_examples=150, deadline=None)
@given(labelings())
def test_agrees_with_scikit_learn(pair):
    labels_true, labels_pred = pair
    assert rand_index(labels_true, labels_pred) == pytest.approx(
        rand_score(labels_true, labels_pred), rel=1e-12, abs=1e-12
    )
    assert adjusted_rand_index(labels_true, labels_pred) == pytest.approx(
        adjusted_rand_score(labels_true, labels_pred), rel=1e-9, abs=1e-12
    )
    # VI = H(G) + H(H) - 2 I(G, H) (DM05 §6.4), entropies in nats.
    entropy_true = stats.entropy(np.bincount(labels_true))
    entropy_pred = stats.entropy(np.bincount(labels_pred))
    mutual = mutual_info_score(labels_true, labels_pred)
    assert variation_of_information(labels_true, labels_pred) == pytest.approx(
        max(0.0, entropy_true + entropy_pred - 2 * mutual), abs=1e-10
    )


@settings(max_examples=150, deadline=None)
@given(labelings(), st.permutations(range(6)), st.permutations(range(6)))
def test_invariant_to_relabelling(pair, rename_true, rename_pred):
    labels_true, labels_pred = pair
    renamed_true = [f"gold-{rename_true[label]}" for label in labels_true]
    renamed_pred = [(rename_pred[label], "h") for label in labels_pred]  # tuples are hashable
    assert clustering_scores(renamed_true, renamed_pred) == pytest.approx(
        clustering_scores(labels_true, labels_pred), abs=1e-12
    )


@settings(max_examples=150, deadline=None)
@given(labelings())
def test_symmetry_and_ranges(pair):
    labels_true, labels_pred = pair
    forward = clustering_scores(labels_true, labels_pred)
    backward = clustering_scores(labels_pred, labels_true)
    for key in ("RI", "F", "NES", "VI", "NVI"):
        assert forward[key] == pytest.approx(backward[key], abs=1e-12), key
    assert forward["P"] == pytest.approx(backward["R"]) and forward["R"] == pytest.approx(
        backward["P"]
    )
    assert adjusted_rand_index(labels_true, labels_pred) == pytest.approx(
        adjusted_rand_index(labels_pred, labels_true)
    )
    for key in ("RI", "P", "R", "F", "CED", "NES", "NVI"):
        assert -1e-12 <= forward[key] <= 1 + 1e-12, key
    assert 0.0 <= forward["VI"] <= np.log(len(labels_true)) + 1e-12
    same = clustering_scores(labels_true, labels_true)
    assert same == pytest.approx(
        {"RI": 1, "P": 1, "R": 1, "F": 1, "CED": 0, "NES": 1, "VI": 0, "NVI": 1}
    )


def test_linear_cost_on_a_million_points():
    rng = np.random.default_rng(0)
    labels_true = rng.integers(0, 2000, size=1_000_000)
    noise = rng.integers(0, 2000, size=1_000_000)
    labels_pred = np.where(rng.random(1_000_000) < 0.9, labels_true, noise)
    scores = clustering_scores(labels_true, labels_pred)
    assert 0.8 < scores["NES"] < 1.0 and 0.0 < scores["VI"] < 2.0


# ---------------------------------------------------------------- DM05's Coarse and Fine baselines


def _gold_with_many_clusters(n_points, n_clusters, seed):
    """A gold standard with n_clusters non-empty clusters of uneven sizes."""
    rng = np.random.default_rng(seed)
    extra = rng.integers(0, n_clusters, size=n_points - n_clusters)
    labels = np.concatenate([np.arange(n_clusters), extra])
    return rng.permutation(labels)


@pytest.mark.parametrize(
    "n_points, n_clusters, table_nes",
    [(378, 103, 0.273), (950, 523, 0.551)],  # DM05 Table 2 (identity uncertainty), Table 3 (ACE)
)
def test_fine_and_coarse_baselines_follow_dm05_tables(n_points, n_clusters, table_nes):
    gold = _gold_with_many_clusters(n_points, n_clusters, seed=n_clusters)
    fine = clustering_scores(gold, fine_partition(n_points))
    coarse = clustering_scores(gold, coarse_partition(n_points))
    # Fine: precision 1, recall 0, F 0 and a high Rand index (DM05 §6.1, Tables 1-4).
    assert (fine["P"], fine["R"], fine["F"]) == (1.0, 0.0, 0.0)
    assert fine["RI"] > 0.99
    # Coarse: recall 1 and a low precision equal to its Rand index (all pairs predicted together).
    assert coarse["R"] == 1.0 and coarse["P"] < 0.05
    assert coarse["RI"] == pytest.approx(coarse["P"])
    assert fine["RI"] == pytest.approx(1 - coarse["P"])  # Table 1: .771 = 1 - .229
    # Fine needs N - K merges one way and N - K moves the other: NES = K / N.
    assert fine["NES"] == pytest.approx(n_clusters / n_points)
    assert abs(fine["NES"] - table_nes) < 1e-3
    # Coarse: CED(G, Coarse) moves every point outside the largest gold cluster.
    largest = np.bincount(gold).max()
    assert coarse["CED"] == pytest.approx(1 - largest / n_points)
    # VI(Fine) = log N - H(G) and VI(Coarse) = H(G), so they sum to log N and the NVIs to 1
    # (Table 2: 2.345 + 3.589 = 5.934 ~ log 378; NVI .605 + .395; Table 3: .868 + .132).
    assert fine["VI"] + coarse["VI"] == pytest.approx(np.log(n_points))
    assert fine["NVI"] + coarse["NVI"] == pytest.approx(1.0)
    assert coarse["VI"] == pytest.approx(stats.entropy(np.bincount(gold)))


def test_fine_rand_index_grows_with_the_number_of_clusters():
    few = clustering_scores(np.repeat(np.arange(3), 100), fine_partition(300))["RI"]
    many = clustering_scores(np.repeat(np.arange(100), 3), fine_partition(300))["RI"]
    assert few < 0.7 < 0.99 < many


def test_baseline_shapes():
    np.testing.assert_array_equal(coarse_partition(4), [0, 0, 0, 0])
    np.testing.assert_array_equal(fine_partition(4), [0, 1, 2, 3])
    single = clustering_scores([7], fine_partition(1))
    perfect = {"RI": 1.0, "P": 1.0, "R": 1.0, "F": 1.0, "CED": 0.0, "NES": 1.0, "VI": 0.0}
    assert single == {**perfect, "NVI": 1.0}


# ---------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    cases = [
        (lambda: rand_index([], [0]), ValueError, "labels_true"),
        (lambda: rand_index([0], []), ValueError, "labels_pred"),
        (lambda: adjusted_rand_index([0, 1], [0, 1, 2]), ValueError, "labels_pred"),
        (lambda: pairwise_precision_recall_f(np.zeros((2, 2)), [0, 1]), ValueError, "labels_true"),
        (lambda: cluster_edit_distance([0, None], [0, 1]), ValueError, "labels_true"),
        (lambda: normalized_edit_score([0, 1], [0.0, np.nan]), ValueError, "labels_pred"),
        (lambda: variation_of_information("ab", [0, 1]), TypeError, "labels_true"),
        (lambda: normalized_variation_of_information([0, 1], None), TypeError, "labels_pred"),
        (lambda: clustering_scores([0, 1], 3), TypeError, "labels_pred"),
        (lambda: clustering_scores([[0], [1, 2]], [0, 1]), TypeError, "labels_true"),
        (lambda: clustering_scores({0, 1}, [0, 1]), TypeError, "labels_true"),  # a set has no order
        (lambda: coarse_partition(0), ValueError, "n_points"),
        (lambda: fine_partition(-3), ValueError, "n_points"),
        (lambda: fine_partition(2.5), TypeError, "n_points"),
    ]
    for call, error, name in cases:
        with pytest.raises(error, match=f"^{name}"):
            call()
