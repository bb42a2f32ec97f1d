"""Tests for inference.split_merge: split–merge moves with informed merges.

Exactness: chains made of the moves alone (no Gibbs sweep) must sample the enumerated partition
posterior (helpers of ``tests/test_neal.py``), and two deliberately broken Hastings ratios — the
merge's pair probability left out, the allocation probability q left out — must fail the same
check; the same with splits proposed from restricted Gibbs launch states (Jain & Neal 2004), on
five points, where a ratio without q fails too. Purpose: a partition over-split into many pieces
of a few tight groups is merged back in a few dozen moves, where pairs drawn uniformly (Jain &
Neal's choice) have merged few of them.
Also: Δ_ab against a direct computation, the gains carried from move to move equal those
computed afresh, moves restricted to movable slots, the outcome
independent of the capacity, and overflow.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

from inference import split_merge
from test_neal import DATA_4, DATA_6, FAMILY_1D, NOISE_LIMIT, TV_LIMIT, empirical_tv, exact_posterior, expected_tv_noise
from zoo.dirichlet.families import normal_gamma

MOVES_PER_DRAW = 3


# Compiled at LLVM's level 2 rather than the suite's level 0 (tests/conftest.py): these chains
# run millions of moves, and at level 0 the 192-chain cases ran 32 s against 10-15 s (2 cores,
# 2026-12-02); compiling takes about the same at either level. Only a TV is compared, never bits.
@partial(jax.jit, static_argnums=(0, 5, 6), compiler_options={"xla_backend_optimization_level": 2})
def _chains(family, keys, assignments, counts, data, n_draws, launch_scans=0):
    """Chains made of split–merge moves only: MOVES_PER_DRAW moves per draw."""
    def chain(key, assignments, counts):
        def draw(carry, draw_key):
            assignments, counts = carry
            assignments, counts, moves, overflow = split_merge.split_merge_moves(
                family, draw_key, data, assignments, counts, jnp.float32(0.8), MOVES_PER_DRAW,
                launch_scans=launch_scans)
            return (assignments, counts), (assignments, moves.splits_accepted + moves.merges_accepted, overflow)

        return jax.lax.scan(draw, (assignments, counts), jax.random.split(key, n_draws))[1]

    return jax.vmap(chain)(keys, assignments, counts)


def moves_alone_tv(seed=11, n_chains=96, n_draws=1000, points=DATA_4, launch_scans=0):
    n_points = points.shape[0]
    data = jnp.asarray(points, jnp.float32)
    exact = exact_posterior(FAMILY_1D, points, alpha=0.8)
    # Two spare slots: a split always finds a free slot, so no move is dropped for capacity.
    starts = np.array([np.arange(n_points) % (1 + chain % n_points) for chain in range(n_chains)], np.int32)
    counts = np.array([np.bincount(row, minlength=n_points + 2) for row in starts], np.int32)
    keys = jax.random.split(jax.random.key(seed), n_chains)
    draws, accepted, overflow = (np.asarray(a) for a in _chains(
        FAMILY_1D, keys, jnp.asarray(starts), jnp.asarray(counts), data, n_draws, launch_scans))
    assert not overflow.any()
    draws = draws[:, 100:]  # burn-in
    noise = expected_tv_noise(exact.values(), draws.shape[0] * draws.shape[1] / MOVES_PER_DRAW)
    assert noise < NOISE_LIMIT, "too few draws for the test to be able to fail"
    return empirical_tv(draws, exact), noise, accepted


def test_moves_alone_sample_the_exact_partition_posterior():
    """The moves alone are an irreducible Metropolis–Hastings chain on partitions: a wrong
    acceptance ratio cannot hide behind Gibbs sweeps."""
    tv, noise, accepted = moves_alone_tv()
    assert tv < TV_LIMIT, f"split–merge alone: total variation {tv:.4f} (expected noise {noise:.4f})"
    assert 0.05 < accepted.mean() / MOVES_PER_DRAW < 0.95  # proposed, and both accepted and rejected


def test_moves_with_restricted_gibbs_launch_states_sample_the_exact_partition_posterior(launch_scans=2):
    """Splits proposed by a restricted Gibbs scan from a launch state (Jain & Neal 2004), on five
    points (up to three of them in play, divided by the scans)."""
    tv, noise, accepted = moves_alone_tv(seed=13, n_chains=192, n_draws=2000, points=DATA_6[:5], launch_scans=launch_scans)
    assert tv < TV_LIMIT, f"launch scans {launch_scans}: total variation {tv:.4f} (expected noise {noise:.4f})"
    assert 0.05 < accepted.mean() / MOVES_PER_DRAW < 0.95


def test_a_launch_state_ratio_without_q_fails_the_exactness_check(monkeypatch):
    monkeypatch.setattr(split_merge, "_log_split_proposal", without_allocation_probability)
    jax.clear_caches()
    try:
        tv, noise, _ = moves_alone_tv(seed=14, n_chains=192, n_draws=2000, points=DATA_6[:5], launch_scans=2)
    finally:
        jax.clear_caches()
    assert tv > 3 * TV_LIMIT, f"a broken ratio passed: total variation {tv:.4f} (noise {noise:.4f})"


def without_pair_probability(log_g, size_i, size_j, original=split_merge._log_merge_proposal):
    return original(jnp.zeros_like(log_g), size_i, size_j)


def without_allocation_probability(n_clusters, size, log_q, original=split_merge._log_split_proposal):
    """q(split) = 1: the split proposal's allocation probability dropped from the ratio."""
    return original(n_clusters, size, jnp.zeros_like(log_q))


@pytest.mark.parametrize("broken", ["pair", "allocation"])
def test_broken_hastings_ratios_fail_the_exactness_check(monkeypatch, broken):
    if broken == "pair":
        monkeypatch.setattr(split_merge, "_log_merge_proposal", without_pair_probability)
    else:
        monkeypatch.setattr(split_merge, "_log_split_proposal", without_allocation_probability)
    jax.clear_caches()  # trace again with the broken ratio (and again after it, unbroken)
    try:
        tv, noise, _ = moves_alone_tv(seed=12)
    finally:
        jax.clear_caches()
    assert tv > 3 * TV_LIMIT, f"a broken ratio passed: total variation {tv:.4f} (noise {noise:.4f})"


def test_merge_gains_match_a_direct_computation():
    family = normal_gamma(2, kappa=0.5)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(9, 2)).astype(np.float32)
    assignments = np.array([0, 0, 1, 1, 1, 3, 3, 3, 3])
    counts = np.bincount(assignments, minlength=5)
    point_stats = jax.vmap(family.point_stats)(jnp.asarray(data))
    stats = jax.tree_util.tree_map(lambda leaf: jax.ops.segment_sum(leaf, jnp.asarray(assignments), 5), point_stats)
    log_alpha = jnp.log(jnp.float32(1.7))
    gains = np.asarray(split_merge.merge_gains(family.log_marginal, stats, jnp.asarray(counts), log_alpha))

    def log_posterior(labels):
        total = 0.0
        for label in np.unique(labels):
            members = jnp.asarray(data[labels == label])
            block = jax.tree_util.tree_map(lambda leaf: leaf.sum(0), jax.vmap(family.point_stats)(members))
            total += float(log_alpha + gammaln(float(members.shape[0])) + family.log_marginal(block))
        return total

    for a, b in [(0, 1), (0, 3), (1, 3)]:
        merged = np.where(assignments == a, b, assignments)
        np.testing.assert_allclose(gains[a, b], log_posterior(merged) - log_posterior(assignments), rtol=1e-4,
                                   atol=1e-3)
        np.testing.assert_allclose(gains[b, a], gains[a, b])
    assert np.isfinite(gains).sum() == 6  # the three pairs of the active slots, both ways


def over_split_groups(seed=0, n_groups=6, n_per_group=20, n_pieces=4, n_features=8):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 10.0, (n_groups, n_features))
    truth = np.repeat(np.arange(n_groups), n_per_group)
    data = (centres[truth] + 0.3 * rng.normal(size=(truth.size, n_features))).astype(np.float32)
    pieces = truth * n_pieces + rng.integers(0, n_pieces, truth.size)
    _, labels = np.unique(pieces, return_inverse=True)
    return data, truth, labels.astype(np.int32)


def run_moves(family, data, labels, n_moves, n_slots, seed=0):
    counts = np.bincount(labels, minlength=n_slots).astype(np.int32)
    run = jax.jit(partial(split_merge.split_merge_moves, family, n_moves=n_moves))
    return run(jax.random.key(seed), jnp.asarray(data), jnp.asarray(labels), jnp.asarray(counts), jnp.float32(1.0))


def test_informed_merges_undo_an_over_split_partition_quickly(monkeypatch):
    data, truth, labels = over_split_groups()
    family = normal_gamma(data.shape[1])
    assert np.unique(labels).size == 24
    assignments, counts, moves, overflow = run_moves(family, data, labels, 120, 32)
    assert int(jnp.sum(counts > 0)) == 6 and not bool(overflow)
    np.testing.assert_array_equal(np.unique(np.stack([truth, np.asarray(assignments)]), axis=1).shape, (2, 6))
    assert int(moves.merges_accepted) >= 18
    # Pairs drawn uniformly (g uniform, still an exact chain): few of the 18 merges are found.
    monkeypatch.setattr(split_merge, "UNIFORM_SHARE", 1.0)
    jax.clear_caches()
    try:
        _, uniform_counts, _, _ = run_moves(family, data, labels, 120, 32, seed=0)
    finally:
        jax.clear_caches()
    assert int(jnp.sum(uniform_counts > 0)) >= 14


def test_moves_leave_unmovable_slots_alone_and_do_not_depend_on_the_capacity():
    data, _, labels = over_split_groups(seed=1, n_groups=3, n_pieces=3)
    family = normal_gamma(data.shape[1])
    model = split_merge.family_side_model(family, jnp.asarray(data))
    n_clusters = int(labels.max()) + 1
    results = []
    for n_slots in (n_clusters + 2, 2 * n_clusters + 5):
        counts = jnp.asarray(np.bincount(labels, minlength=n_slots), jnp.int32)
        movable = jnp.arange(n_slots) >= 2  # the first two clusters stay as they are
        step = jax.jit(partial(split_merge.split_merge_move, model, movable=movable))
        assignments = jnp.asarray(labels)
        for move in range(40):
            result = step(jax.random.key(move), assignments, counts, jnp.log(jnp.float32(1.0)))
            assignments, counts = result.assignments, result.counts
        results.append(np.asarray(assignments))
        for slot in (0, 1):
            np.testing.assert_array_equal(np.asarray(assignments) == slot, labels == slot)
    np.testing.assert_array_equal(results[0], results[1])


def test_an_accepted_split_without_a_free_slot_is_an_overflow_that_changes_nothing():
    data = np.concatenate([np.full((4, 1), -5.0), np.full((4, 1), 5.0)]).astype(np.float32)
    data += np.random.default_rng(0).normal(0.0, 0.1, data.shape).astype(np.float32)
    labels = np.zeros(8, np.int32)
    for n_slots, expect_overflow in ((1, True), (2, False)):
        assignments, counts, moves, overflow = run_moves(FAMILY_1D, data, labels, 6, n_slots, seed=3)
        assert bool(overflow) == expect_overflow
        assert int(jnp.sum(counts > 0)) == (1 if expect_overflow else 2)


def test_gains_and_statistics_carried_from_move_to_move_equal_those_computed_afresh():
    data, _, labels = over_split_groups(seed=2, n_groups=3, n_pieces=3)
    family = normal_gamma(data.shape[1])
    model = split_merge.family_side_model(family, jnp.asarray(data))
    n_slots = 16
    counts = jnp.asarray(np.bincount(labels, minlength=n_slots), jnp.int32)
    log_alpha = jnp.log(jnp.float32(1.0))

    def fresh_stats(assignments):
        return jax.tree_util.tree_map(lambda leaf: jax.ops.segment_sum(leaf, assignments, n_slots), model.point_stats)

    def fresh(assignments, counts):
        return split_merge.merge_gains(family.log_marginal, fresh_stats(assignments), counts, log_alpha)

    step = jax.jit(partial(split_merge.split_merge_move, model))
    assignments, gains, stats, n_accepted = jnp.asarray(labels), None, None, 0
    for move in range(30):
        result = step(jax.random.key(move), assignments, counts, log_alpha, gains=gains, stats=stats)
        assignments, counts, gains, stats = result.assignments, result.counts, result.gains, result.stats
        n_accepted += int(result.accepted)
        for carried, computed in zip(jax.tree_util.tree_leaves(stats), jax.tree_util.tree_leaves(fresh_stats(assignments))):
            np.testing.assert_allclose(np.asarray(carried), np.asarray(computed), rtol=1e-5, atol=1e-4)
        expected = np.asarray(fresh(assignments, counts))
        np.testing.assert_array_equal(np.isfinite(np.asarray(gains)), np.isfinite(expected))
        finite = np.isfinite(expected)
        np.testing.assert_allclose(np.asarray(gains)[finite], expected[finite], rtol=1e-4, atol=1e-2)
    assert n_accepted >= 3


@pytest.mark.parametrize("family_name", ["normal-gamma", "normal-gamma-per-feature", "known-precision"])
@pytest.mark.numba
def test_numba_and_xla_dp_moves_give_the_same_chain(family_name):
    """inference.native.dp_moves runs the same moves as the XLA ones, with the same random
    numbers: the same partitions and move counts, for chains whose merges are accepted (an
    over-split start), whose splits are accepted (one cluster of six groups) and one that runs
    out of slots (overflow: two slots)."""
    if family_name == "known-precision":
        from zoo.dirichlet.known_precision import normal_known_precision
        family = normal_known_precision(8, precision=10.0, prior_variance=100.0)
    elif family_name == "normal-gamma":
        family = normal_gamma(8)
    else:
        family = normal_gamma(8, mean=np.linspace(-1, 1, 8), kappa=0.5, shape=np.linspace(1, 3, 8), rate=0.5)
    data, truth, labels = over_split_groups()
    together = np.zeros_like(labels)
    # Over-split, one cluster, the truth (32 slots); one cluster in 2 slots, whose splits overflow.
    for starts, n_slots in (np.stack([labels, together, truth.astype(np.int32)]), 32), (together[None], 2):
        counts = np.array([np.bincount(row, minlength=n_slots) for row in starts], np.int32)
        results = {}
        for backend in ("numba", "xla"):
            run = jax.jit(jax.vmap(partial(split_merge.split_merge_moves, family, n_moves=40, backend=backend),
                                   in_axes=(0, None, 0, 0, None)))
            assignments, slot_counts, history = jnp.asarray(starts), jnp.asarray(counts), []
            for step in range(3):
                keys = jax.random.split(jax.random.key(step), len(starts))
                assignments, slot_counts, moves, overflow = run(keys, jnp.asarray(data), assignments, slot_counts,
                                                                jnp.float32(1.0))
                history.append((np.asarray(assignments), np.asarray(slot_counts),
                                np.stack([np.asarray(m) for m in moves]), np.asarray(overflow)))
            results[backend] = history
        for numba_step, xla_step in zip(results["numba"], results["xla"]):
            for numba_part, xla_part in zip(numba_step, xla_step):
                np.testing.assert_array_equal(numba_part, xla_part)
        moves = sum(step[2] for step in results["numba"])  # (4 counts, chain)
        if n_slots == 32:
            assert moves[3, 0] > 0 and moves[1, 1] > 0, "expected accepted merges (chain 0) and splits (chain 1)"
        else:
            assert moves[1, 0] == 1 and any(step[3][0] for step in results["numba"]), "expected an overflow"
