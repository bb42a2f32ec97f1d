"""Tests for inference.partitions: co-clustering matrix and point estimates of a partition."""

from __future__ import annotations

import numpy as np
import pytest

import inference.partitions as partitions
from inference.partitions import (
    co_clustering,
    expected_binder_loss,
    expected_variation_of_information,
    expected_vi_lower_bound,
    most_probable_draw,
    point_partition,
)
from zoo.metrics import variation_of_information


def set_partitions(n_points):
    """All partitions of n points as restricted growth strings (Bell(n) rows)."""

    def extend(prefix, n_blocks):
        if len(prefix) == n_points:
            yield list(prefix)
            return
        for block in range(n_blocks + 1):
            yield from extend(prefix + [block], max(n_blocks, block + 1))

    return np.array(list(extend([0], 1)))


def brute_force_co_clustering(draws):
    flat = np.asarray(draws).reshape(-1, np.shape(draws)[-1])
    n_draws, n_points = flat.shape
    matrix = np.zeros((n_points, n_points))
    for draw in flat:
        for i in range(n_points):
            for j in range(n_points):
                matrix[i, j] += draw[i] == draw[j]
    return matrix / n_draws


def all_losses(candidates, matrix):
    """Binder loss and VI lower bound of every candidate partition, vectorised."""
    same = candidates[:, :, None] == candidates[:, None, :]
    upper = np.triu_indices(candidates.shape[1], 1)
    binder = np.where(same, 1 - matrix, matrix)[:, upper[0], upper[1]].sum(axis=1)
    sizes = same.sum(axis=2)
    masses = np.where(same, matrix, 0.0).sum(axis=2)
    bound = np.mean(np.log(sizes) + np.log(matrix.sum(axis=1)) - 2 * np.log(masses), axis=1)
    return {"binder": binder, "vi": bound}


LOSS_FUNCTIONS = {"binder": expected_binder_loss, "vi": expected_vi_lower_bound}


# ---------------------------------------------------------------- co-clustering


def test_co_clustering_matches_brute_force_with_arbitrary_labels():
    rng = np.random.default_rng(0)
    draws = rng.integers(-3, 40, size=(3, 7, 9))  # (chain, draw, N), labels not 0..K-1
    draws[:, :2] = draws[:, 2:4]  # repeated draws exercise the weighting of unique partitions
    np.testing.assert_allclose(co_clustering(draws), brute_force_co_clustering(draws))


def test_co_clustering_in_several_chunks(monkeypatch):
    monkeypatch.setattr(partitions, "_ELEMENTS_PER_CHUNK", 24)
    rng = np.random.default_rng(1)
    draws = rng.integers(0, 4, size=(23, 6))  # 6 points: blocks of 4 draws, chunks of 4 clusters, padded
    np.testing.assert_allclose(co_clustering(draws), brute_force_co_clustering(draws))


def test_distinct_clusters_are_the_sets_the_draws_hold():
    # A chain that moves one point per draw: most clusters recur from draw to draw.
    rng = np.random.default_rng(11)
    draws = [rng.integers(0, 6, 40)]
    for _ in range(60):
        draw = draws[-1].copy()
        draw[rng.integers(40)] = rng.integers(0, 7)
        draws.append(draw)
    unique, counts, _ = partitions._unique_draws(np.array(draws))
    clusters = partitions._distinct_clusters(unique, counts)
    expected = {}
    for draw, count in zip(unique, counts):
        for label in np.unique(draw):
            members = tuple(np.flatnonzero(draw == label))
            expected[members] = expected.get(members, 0) + count
    found = {tuple(np.flatnonzero(unique[d] == label)): weight
             for d, label, weight in zip(clusters.draw, clusters.label, clusters.weight)}
    assert found == expected
    assert len(clusters.draw) < sum(len(np.unique(draw)) for draw in unique)
    np.testing.assert_array_equal(clusters.size, [len(members) for members in found])
    for d, draw in enumerate(unique):  # each draw's labels point at its own clusters, -1 where empty
        np.testing.assert_array_equal(np.flatnonzero(clusters.of[d] >= 0), np.unique(draw))
        for label in np.unique(draw):
            cluster = clusters.of[d, label]
            assert np.array_equal(unique[clusters.draw[cluster]] == clusters.label[cluster], draw == label)


def test_distinct_clusters_survive_colliding_keys(monkeypatch):
    # Keys that give every cluster of one size the same sums: the point-by-point check catches the
    # collision and new keys are drawn.
    real_generator = np.random.default_rng
    calls = []

    def generator(seed):
        calls.append(seed)
        return real_generator(seed) if seed else type("Constant", (), {"random": lambda self, shape: np.ones(shape)})()

    monkeypatch.setattr(partitions.np.random, "default_rng", generator)
    draws = np.array([[0, 0, 1, 1], [0, 1, 0, 1]])
    np.testing.assert_allclose(co_clustering(draws), brute_force_co_clustering(draws))
    assert calls == [0, 1]


def test_co_clustering_of_one_draw_and_properties():
    matrix = co_clustering(np.array([2, 7, 2, 2]))
    np.testing.assert_array_equal(
        matrix, [[1, 0, 1, 1], [0, 1, 0, 0], [1, 0, 1, 1], [1, 0, 1, 1]]
    )
    rng = np.random.default_rng(2)
    matrix = co_clustering(rng.integers(0, 3, size=(50, 12)))
    np.testing.assert_allclose(matrix, matrix.T)
    np.testing.assert_array_equal(np.diag(matrix), 1.0)


# ---------------------------------------------------------------- point estimates


@pytest.mark.parametrize("loss", ["vi", "binder"])
def test_concentrated_draws_return_their_partition(loss):
    truth = np.array([3, 3, 1, 1, 0, 2])
    rng = np.random.default_rng(3)
    # The same partition under different label names in every draw.
    draws = np.stack([rng.permutation(10)[truth] for _ in range(40)])
    np.testing.assert_array_equal(
        point_partition(draws, loss=loss), [0, 0, 1, 1, 2, 3]
    )


@pytest.mark.parametrize("loss", ["vi", "binder"])
def test_consensus_outside_the_draws_is_found(loss):
    """Every draw misplaces one point; the truth, never sampled, is the minimiser."""
    truth = np.repeat(np.arange(3), 4)
    draws = []
    for point in range(truth.size):
        draw = truth.copy()
        draw[point] = (truth[point] + 1) % 3
        draws.append(draw)
    draws = np.array(draws)
    assert not (draws == truth).all(axis=1).any()
    estimate = point_partition(draws, loss=loss)
    np.testing.assert_array_equal(estimate, truth)


@pytest.mark.usefixtures("x64")
@pytest.mark.parametrize("loss", ["vi", "binder"])
def test_minimum_over_all_partitions_of_five_points(loss):
    """Weighted draws covering all 52 partitions of 5 points: the global minimum is returned."""
    candidates = set_partitions(5)
    assert candidates.shape[0] == 52
    rng = np.random.default_rng(4)
    for _ in range(3):
        weights = rng.integers(1, 30, size=candidates.shape[0])
        draws = np.repeat(candidates, weights, axis=0)
        matrix = co_clustering(draws)
        estimate = point_partition(draws, loss=loss)
        losses = all_losses(candidates, matrix)[loss]
        assert LOSS_FUNCTIONS[loss](estimate, matrix) == pytest.approx(losses.min(), abs=1e-12)


@pytest.mark.usefixtures("x64")
@pytest.mark.parametrize("loss", ["vi", "binder"])
def test_minimum_over_all_partitions_from_few_draws(loss):
    """Draws on a few partitions of 6 points: the search beyond them reaches the global minimum."""
    candidates = set_partitions(6)
    rng = np.random.default_rng(5)
    for _ in range(8):
        chosen = rng.choice(candidates.shape[0], size=rng.integers(2, 8), replace=False)
        draws = np.repeat(candidates[chosen], rng.integers(1, 10, size=chosen.size), axis=0)
        matrix = co_clustering(draws)
        estimate = point_partition(draws, loss=loss)
        losses = all_losses(candidates, matrix)[loss]
        assert LOSS_FUNCTIONS[loss](estimate, matrix) == pytest.approx(losses.min(), abs=1e-12)


@pytest.mark.parametrize("loss", ["vi", "binder"])
def test_result_is_a_local_minimum_and_beats_every_draw(loss):
    rng = np.random.default_rng(6)
    truth = rng.integers(0, 4, size=12)
    noise = rng.random((60, 12)) < 0.25
    draws = np.where(noise, rng.integers(0, 6, size=(60, 12)), truth)
    matrix = co_clustering(draws)
    estimate = point_partition(draws, loss=loss)
    np.testing.assert_array_equal(estimate, partitions._relabel_rows(estimate[None])[0])
    value = LOSS_FUNCTIONS[loss](estimate, matrix)
    assert value <= all_losses(draws, matrix)[loss].min() + 1e-6
    neighbours = []
    for point in range(estimate.size):
        for target in range(estimate.max() + 2):
            moved = estimate.copy()
            moved[point] = target
            neighbours.append(moved)
    for keep in range(estimate.max() + 1):
        for absorb in range(keep + 1, estimate.max() + 1):
            neighbours.append(np.where(estimate == absorb, keep, estimate))
    assert value <= all_losses(np.array(neighbours), matrix)[loss].min() + 1e-5


@pytest.mark.parametrize("loss", ["vi", "binder"])
def test_ranking_of_draws_matches_exact_objective(monkeypatch, loss):
    rng = np.random.default_rng(8)
    draws = partitions._relabel_rows(rng.integers(0, 5, size=(30, 12)))
    co_counts = np.rint(co_clustering(draws) * 30).astype(np.int64)
    exact = partitions._exact_objective(draws, co_counts, 30, loss)
    in_one_chunk = partitions._rank_objective(draws, co_counts, 30, loss)
    monkeypatch.setattr(partitions, "_ELEMENTS_PER_CHUNK", 40)  # chunks of 2 clusters
    in_chunks = partitions._rank_objective(draws, co_counts, 30, loss)
    np.testing.assert_allclose(in_one_chunk, exact, rtol=1e-5)
    np.testing.assert_allclose(in_chunks, exact, rtol=1e-5)
    # Binder's objective, (E[loss] D - Σ_{i<j} C_ij), is exact in integers.
    if loss == "binder":
        matrix = co_counts / 30
        expected = [expected_binder_loss(draw, matrix) for draw in draws]
        upper = np.triu_indices(12, 1)
        np.testing.assert_allclose((exact + co_counts[upper].sum()) / 30, expected, rtol=1e-12)


def test_relabelling_by_first_positions_equals_sorting_each_row():
    rng = np.random.default_rng(12)
    for low, high in ((0, 5), (-3, 8), (100, 130), (0, 40)):  # spans below and above N = 30
        labels = rng.integers(low, high, size=(50, 30))
        relabelled = partitions._relabel_rows(labels)
        np.testing.assert_array_equal(relabelled, partitions._relabel_rows_by_sorting(labels))
        for row, new in zip(labels, relabelled):  # same partition, labels in order of first appearance
            _, first, inverse = np.unique(row, return_index=True, return_inverse=True)
            np.testing.assert_array_equal(new, np.argsort(np.argsort(first))[inverse])


def test_points_too_many_for_memory_are_refused_before_any_work(monkeypatch):
    monkeypatch.setenv("LATENTZOO_MEMORY_LIMIT", str(30 * 100**2))
    draws = np.random.default_rng(13).integers(0, 3, size=(4, 100))
    assert co_clustering(draws).shape == (100, 100)  # 24 bytes an entry fit
    with pytest.raises(ValueError, match=r"^assignments: a point estimate of 100 points .* needs about"):
        point_partition(draws)


def test_outputs_are_relabelled_in_order_of_first_appearance():
    draws = np.array([[9, 4, 4, 9, 7, -1]] * 3)
    np.testing.assert_array_equal(point_partition(draws, loss="binder"), [0, 1, 1, 0, 2, 3])
    np.testing.assert_array_equal(point_partition(draws[0], loss="vi"), [0, 1, 1, 0, 2, 3])


# ---------------------------------------------------------------- expected losses


def test_expected_losses_by_hand():
    # Draws {01|2} and {0|12}: p01 = p12 = 1/2, p02 = 0.
    draws = np.array([[0, 0, 1], [0, 1, 1]])
    matrix = co_clustering(draws)
    # ĉ = {012}: pairs 01, 12 disagree half the time, 02 always: 1/2 + 1/2 + 1 = 2.
    assert expected_binder_loss([0, 0, 0], matrix) == pytest.approx(2.0)
    # ĉ = {0|1|2}: only 01 and 12 are ever together: 1/2 + 1/2 = 1.
    assert expected_binder_loss([0, 1, 2], matrix) == pytest.approx(1.0)
    # VI bound of {0|1|2}: (1/3) Σ_i [log 1 + log r_i - 2 log 1], r = (1.5, 2, 1.5).
    assert expected_vi_lower_bound([0, 1, 2], matrix) == pytest.approx(
        (2 * np.log(1.5) + np.log(2.0)) / 3
    )
    # Exact E[VI] of {0|1|2}: each draw has H = log 3 - (2/3) log 2, VI = H(fine) - H(draw).
    assert expected_variation_of_information([0, 1, 2], draws) == pytest.approx(
        (2 / 3) * np.log(2.0)
    )


def test_exact_expected_vi_matches_metrics_and_bounds_it():
    rng = np.random.default_rng(7)
    draws = rng.integers(0, 4, size=(2, 15, 10))
    matrix = co_clustering(draws)
    for candidate in rng.integers(0, 3, size=(5, 10)):
        exact = expected_variation_of_information(candidate, draws)
        per_draw = [variation_of_information(candidate, draw) for draw in draws.reshape(-1, 10)]
        mean = np.mean(per_draw)
        assert exact == pytest.approx(mean, rel=1e-12)
        assert expected_vi_lower_bound(candidate, matrix) <= exact + 1e-12


# ---------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    good = np.array([[0, 1, 1], [0, 0, 1]])
    cases = [
        (lambda: co_clustering([]), ValueError, "assignments"),
        (lambda: co_clustering(np.zeros((4, 0), int)), ValueError, "assignments"),
        (lambda: co_clustering([[0.0, np.nan]]), ValueError, "assignments"),
        (lambda: co_clustering([[0.5, 1.0]]), ValueError, "assignments"),
        (lambda: co_clustering([["a", "b"]]), TypeError, "assignments"),
        (lambda: co_clustering(None), TypeError, "assignments"),
        (lambda: point_partition(good, loss="l2"), ValueError, "loss"),
        (lambda: point_partition(np.zeros((0, 3), int)), ValueError, "assignments"),
        (lambda: expected_binder_loss([0, 1], np.eye(3)), ValueError, "co_clustering_matrix"),
        (lambda: expected_vi_lower_bound([[0, 1]], np.eye(2)), ValueError, "labels"),
        (lambda: expected_binder_loss([0, 1], 2 * np.eye(2)), ValueError, "co_clustering_matrix"),
        (lambda: expected_binder_loss([0, 1], [[1.0, 0.9], [0.1, 1.0]]), ValueError, "co_clustering_matrix: must be"),
        (lambda: expected_vi_lower_bound([0, 1], [[1.0, 0.9], [0.1, 1.0]]), ValueError, "co_clustering_matrix"),
        (lambda: expected_variation_of_information([0, 1], good), ValueError, "labels"),
    ]
    for call, error, name in cases:
        with pytest.raises(error, match=f"^{name}"):
            call()


def test_the_most_probable_draw_skips_nan_and_names_empty_input():
    log_joint = np.array([[-5.0, np.nan, -3.0], [-4.0, -2.5, np.inf]])
    # np.argmax would give NaN's (0, 1); an infinite log joint is no draw either.
    assert most_probable_draw(log_joint) == (1, 1)
    assert most_probable_draw([[7.0]]) == (0, 0)
    for bad in (np.full((2, 3), np.nan), np.zeros((0, 4)), np.zeros(5)):
        with pytest.raises(ValueError, match=r"^log_joint: expected \(n_chains, n_draws\) values"):
            most_probable_draw(bad)
