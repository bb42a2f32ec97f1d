"""Split–merge Metropolis–Hastings moves on Dirichlet-process partitions, with informed merges.

Target: the partition posterior with the component parameters integrated out,

    p(z | x, α) ∝ α^K Π_k Γ(n_k) m(x_k)                        (the CRP prior times the marginals)

m the family's marginal likelihood. One move (:func:`split_merge_move`) either splits one cluster
in two or merges two, and is accepted by Metropolis–Hastings. Each move visits only the points of
the clusters it touches; :func:`split_merge_moves` runs several in a row.

Why informed merges. Dahl's (2003) sequentially allocated moves, as Jain & Neal (2004) pick them,
draw two points at random: they merge the two clusters of the points when these differ. With K
clusters, almost every draw then proposes to merge two clusters that have nothing in common, and
the few merges worth making are proposed once in hundreds of moves. On scikit-learn's digits (64
dimensions) chains of Algorithm 8 with ten such moves per sweep kept every pair of clusters whose
merge would raise log p(z | x) by 30 to 90 nats for hundreds of sweeps. Here a merge picks its
pair of clusters {a, b} from

    g({a, b} | z) = s / P + (1 - s) softmax_pairs(Δ_ab),   Δ_ab = log p(z_{a∪b} | x) - log p(z | x),

P the number of pairs and s = :data:`UNIFORM_SHARE` (the uniform part keeps the reverse of any
split likely enough); every Δ_ab is computed from the clusters' statistics (K² marginal
likelihoods at the first move of a run, then only the rows of the clusters a move touched). A split picks one of the K clusters uniformly. Both probabilities are computed in
the state the move starts from and in the state it proposes, so they enter the Hastings ratio
exactly.

The split proposal (Dahl 2003, sequential allocation): two distinct anchor points i, j of the
cluster C are drawn uniformly (1 / (n_C (n_C - 1)) as an ordered pair); the other points of C are
visited in a uniformly random order and each joins i's side with probability
∝ n_i p(x_k | side i) against n_j p(x_k | side j) (posterior predictives of the sides so far),
which gives q(split) = Π_k q_k. The merge of {a, b} is the reverse move: its anchors are drawn
as the split's would be seen from the merged state — i uniform in one of the two clusters (each
with probability 1/2), j uniform in the other, probability 1 / (2 n_a n_b) — and q of the current
division is computed by the same allocation, each point sent to its own cluster's side. With
the kind of move chosen with probability 1/2 each (a split for sure when K = 1), the log
acceptance ratio of a split of C into A (holding i) and B is

    log α + log Γ(n_A) Γ(n_B) / Γ(n_C) + log m(x_A) m(x_B) / m(x_C)          (posterior ratio)
    + log[½ g({A, B} | z_split) / (2 n_A n_B)]                                (reverse merge)
    - log[P_split(z) / K(z) / (n_C (n_C - 1)) q(A, B)]                        (the split)

(P_split = 1 when K = 1, else 1/2), and a merge uses the negative of the ratio of its reverse
split. Proposals that cannot be made (a split of a one-point cluster) leave the state unchanged.

Restricted Gibbs launch states (``launch_scans = t > 0``; Jain & Neal 2004, §3). Sequential
allocation decides the first points of a split from the anchors alone, so in many dimensions it
rarely proposes the division the data favour; its q of that division is then tiny, and the merge
that would undo it is rejected too. With t > 0 the points in play (all of C but the anchors, or
of A ∪ B for a merge) are first put on a side by a fair coin each, then moved by t restricted
Gibbs scans (each point in the visiting order drawn from p(side | the other points in play)):
the launch state, made without looking at how the points are divided now. One more scan from
it draws the split, q being the product of its conditional probabilities; for a merge, the same
scan is forced to the current division and gives q of the reverse split. The launch is the same
auxiliary draw for a move and its reverse, so q(final scan | launch) replaces the allocation's q
in the ratio above and the move stays exact.

Capacity. An accepted split needs a free slot; without one the move changes nothing and reports
``overflow``. Every draw is indexed by point or made with one uniform against cumulative sums
over slots in a fixed order (inactive slots add exactly zero), so a move's outcome does not
depend on the capacity K_max (up to floating-point rounding).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from inference.segments import segment_sum

__all__ = [
    "UNIFORM_SHARE",
    "MoveUniforms",
    "move_uniforms",
    "SideModel",
    "MoveResult",
    "SplitMergeMoves",
    "family_side_model",
    "merge_gains",
    "split_merge_move",
    "split_merge_moves",
    "sequential_allocation",
    "count_move",
    "no_moves",
]

UNIFORM_SHARE = 0.5
"""Share of the merge proposals that pick their pair of clusters uniformly (the rest pick it by
the softmax of the merge gains Δ_ab)."""


class SplitMergeMoves(NamedTuple):
    """Counts of a run of moves (int32 scalars)."""

    splits_proposed: jax.Array
    splits_accepted: jax.Array
    merges_proposed: jax.Array
    merges_accepted: jax.Array


def _tree_rows(tree: Any, index: jax.Array) -> Any:
    return jax.tree_util.tree_map(lambda leaf: leaf[index], tree)


def _set_row(matrix: jax.Array, slot: jax.Array, row: jax.Array) -> jax.Array:
    """A symmetric matrix with row and column ``slot`` replaced by ``row`` (diagonal -inf)."""
    row = row.at[slot].set(-jnp.inf)
    return matrix.at[slot, :].set(row).at[:, slot].set(row)


def _gains_against(
    log_marginal: Callable[[Any], jax.Array], row_stats: Any, row_count: jax.Array, stats: Any,
    counts: jax.Array, single_marginal: jax.Array, log_alpha: jax.Array, valid: jax.Array,
) -> jax.Array:
    """Δ of merging one set (``row_stats``, ``row_count`` points) with the cluster of every slot,
    (K_max,); -inf where ``valid`` is False."""
    dtype = jnp.result_type(log_alpha)
    row_size = jnp.maximum(row_count, 1).astype(dtype)
    sizes = jnp.where(valid, counts, 1).astype(dtype)
    merged = jax.tree_util.tree_map(lambda row, leaf: row[None] + leaf, row_stats, stats)
    gains = (-log_alpha + gammaln(row_size + sizes) - gammaln(row_size) - gammaln(sizes)
             + jax.vmap(log_marginal)(merged) - log_marginal(row_stats) - single_marginal)
    return jnp.where(valid & (row_count > 0), gains, -jnp.inf)


def merge_gains(
    log_marginal: Callable[[Any], jax.Array], stats: Any, counts: jax.Array, log_alpha: jax.Array,
    movable: jax.Array | None = None,
) -> jax.Array:
    """Δ_ab = log p(z with clusters a and b merged | x, α) - log p(z | x, α) for every pair.

    Parameters
    ----------
    log_marginal : callable
        log m(statistics) of one cluster (e.g. ``family.log_marginal``).
    stats : pytree
        Sufficient statistics per slot (leading axis K_max).
    counts : jax.Array int (K_max,)
        Cluster sizes (0 for empty slots).
    log_alpha : jax.Array
        log α.
    movable : jax.Array bool (K_max,), optional
        Slots that may be merged (default: all).

    Returns
    -------
    jax.Array (K_max, K_max)
        Symmetric; Δ_ab for active movable slots a ≠ b, -inf elsewhere:
        -log α + log Γ(n_a + n_b) - log Γ(n_a) - log Γ(n_b) + log m(x_a ∪ x_b) - log m(x_a) - log m(x_b).
    """
    n_slots = counts.shape[0]
    active = counts > 0
    if movable is not None:
        active = active & movable
    slots = jnp.arange(n_slots)
    single_marginal = jax.vmap(log_marginal)(stats)

    def row(slot):
        return _gains_against(log_marginal, _tree_rows(stats, slot), counts[slot], stats, counts, single_marginal,
                              log_alpha, active & active[slot] & (slots != slot))

    gains = jax.vmap(row)(slots)
    return jnp.where(slots[:, None] < slots[None, :], gains, gains.T)  # exactly symmetric


def _log_pair_probability(gain: jax.Array, log_total: jax.Array, n_clusters: jax.Array) -> jax.Array:
    """log g({a, b} | z) of a pair with merge gain ``gain``, ``log_total`` the log-sum-exp of the
    gains of all pairs (see the module docstring)."""
    n_pairs = jnp.maximum(n_clusters * (n_clusters - 1) // 2, 1).astype(gain.dtype)
    log_informed = math.log1p(-UNIFORM_SHARE) if UNIFORM_SHARE < 1.0 else -math.inf
    mixed = jnp.logaddexp(math.log(UNIFORM_SHARE) - jnp.log(n_pairs), log_informed + gain - log_total)
    return jnp.where(gain > -jnp.inf, mixed, -jnp.inf)


def _upper(gains: jax.Array) -> jax.Array:
    """The pairs a < b of a symmetric gain matrix (-inf elsewhere)."""
    slots = jnp.arange(gains.shape[0])
    return jnp.where(slots[:, None] < slots[None, :], gains, -jnp.inf)


def _log_sum_exp(values: jax.Array) -> jax.Array:
    """log Σ exp(values), -inf entries ignored (0 when all are -inf: no pair, never used)."""
    top = jnp.max(values)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    return top + jnp.log(jnp.sum(jnp.exp(values - top)))


def _log_split_proposal(n_clusters: jax.Array, size: jax.Array, log_q: jax.Array) -> jax.Array:
    """log probability that a split of a cluster of ``size`` points into given sides with
    anchors (i, j) is proposed from the merged state of ``n_clusters`` movable clusters: the kind
    (1/2, or 1 when it is the only cluster), the cluster (1/K), the ordered anchors
    (1 / n (n - 1)) and the sequential allocation (q)."""
    log_kind = jnp.where(n_clusters == 1, 0.0, math.log(0.5))
    return log_kind - jnp.log(n_clusters) - jnp.log(size) - jnp.log(size - 1) + log_q


def _log_merge_proposal(log_g: jax.Array, size_i: jax.Array, size_j: jax.Array) -> jax.Array:
    """log probability that a merge of {A, B} with anchors (i, j) is proposed from the split
    state: the kind (1/2), the pair (g), i's cluster (1/2) and the two anchors (1 / n_A n_B)."""
    return math.log(0.25) + log_g - jnp.log(size_i) - jnp.log(size_j)


def _inverse_cdf(weights: jax.Array, uniform: jax.Array) -> jax.Array:
    """Index drawn ∝ ``weights`` (flat, non-negative) with one uniform in [0, 1): the number of
    cumulative sums at or below the threshold. Zero weights repeat their predecessor's sum, so
    padding slots change nothing."""
    cumulative = jnp.cumsum(weights)
    index = jnp.sum(cumulative <= uniform * cumulative[-1])
    return jnp.minimum(index, weights.shape[0] - 1).astype(jnp.int32)


def _nth_member(mask: jax.Array, uniform: jax.Array, size: jax.Array) -> jax.Array:
    """The ⌊uniform · size⌋-th index (0-based) where ``mask`` holds."""
    rank = jnp.minimum(jnp.floor(uniform * size), size - 1).astype(jnp.int32)
    return jnp.argmax(jnp.cumsum(mask.astype(jnp.int32)) > rank).astype(jnp.int32)


class SideModel(NamedTuple):
    """What the moves need to know of a model, in terms of summed statistics of point sets.

    Attributes
    ----------
    point_stats : pytree
        Statistics of every point (leading axis N); a set's statistics are their sum.
    log_predictive : callable
        ``log_predictive(stats, k)``: log p(point k | the points summarised by ``stats``), used
        by the sequential allocation.
    log_marginal : callable
        ``log_marginal(stats)``: log marginal likelihood of a set, used to rank the merges (the
        proposal); the moves stay exact whatever it is.
    log_split_ratio : callable
        ``log_split_ratio(stats_i, stats_j, slot_i, slot_j)``: log m(A) m(B) / m(A ∪ B) of the
        target, the likelihood part of a split's posterior ratio (α and the Γ(n) terms are added
        here); ``slot_i``, ``slot_j`` are the slots of the anchors before the move (equal for a
        split), for models whose clusters interact.
    """

    point_stats: Any
    log_predictive: Callable[[Any, jax.Array], jax.Array]
    log_marginal: Callable[[Any], jax.Array]
    log_split_ratio: Callable[[Any, Any, jax.Array, jax.Array], jax.Array]


def family_side_model(family: Any, data: jax.Array) -> SideModel:
    """The :class:`SideModel` of a DP mixture of a component family with marginal likelihoods."""
    def log_split_ratio(stats_i, stats_j, slot_i, slot_j):
        both = jax.tree_util.tree_map(jnp.add, stats_i, stats_j)
        return family.log_marginal(stats_i) + family.log_marginal(stats_j) - family.log_marginal(both)

    return SideModel(
        point_stats=jax.vmap(family.point_stats)(data),
        log_predictive=lambda stats, k: family.log_predictive(stats, data[k]),
        log_marginal=family.log_marginal,
        log_split_ratio=log_split_ratio,
    )


class MoveResult(NamedTuple):
    """Outcome of one :func:`split_merge_move`.

    Attributes
    ----------
    assignments, counts : jax.Array
        The partition after the move.
    split_proposed, merge_proposed, accepted, overflow : jax.Array bool
        Which kind was proposed (neither when the drawn proposal could not be made: a split of a
        one-point cluster), whether it was accepted, whether an accepted split found no free
        slot (then nothing changed).
    anchor_i, anchor_j : jax.Array int32
        The two anchor points.
    stats_i, stats_j : pytree
        Statistics of i's and j's sides (the two clusters of the split state).
    gains : jax.Array (K_max, K_max)
        :func:`merge_gains` of the new partition, updated in O(K) (pass it to the next move).
    stats : pytree
        The point statistics per slot of the new partition, updated from the sides (pass it to
        the next move).
    """

    assignments: jax.Array
    counts: jax.Array
    split_proposed: jax.Array
    merge_proposed: jax.Array
    accepted: jax.Array
    overflow: jax.Array
    anchor_i: jax.Array
    anchor_j: jax.Array
    stats_i: Any
    stats_j: Any
    gains: jax.Array
    stats: Any


def _visit(model: SideModel, order: jax.Array, uniforms: jax.Array, forced: jax.Array, now_on_i: jax.Array,
           take_out: bool):
    """The ``fori_loop`` body of one pass over the points in play (in ``order``): each point goes to
    i's or j's side with probability ∝ size × posterior predictive of the side, drawn with
    ``uniforms`` or, where ``forced``, as ``now_on_i`` says; log q adds up the probabilities of the
    choices. ``take_out``: the point is first taken out of the side it is on (a restricted Gibbs
    scan); without it the sides grow from the anchors (sequential allocation). The carry is
    (stats of i's side, of j's side, their sizes, log q, on i's side per point)."""
    def visit(position, carry):
        side_i, side_j, size_i, size_j, log_q, on_i = carry
        k = order[position]
        own = _tree_rows(model.point_stats, k)
        if take_out:  # the conditional of k given every other point in play
            was_i = on_i[k]
            side_i = jax.tree_util.tree_map(lambda total, add: total - jnp.where(was_i, add, 0), side_i, own)
            side_j = jax.tree_util.tree_map(lambda total, add: total - jnp.where(was_i, 0, add), side_j, own)
            size_i, size_j = size_i - was_i, size_j - ~was_i
        logit_i = jnp.log(size_i) + model.log_predictive(side_i, k)
        logit_j = jnp.log(size_j) + model.log_predictive(side_j, k)
        norm = jnp.logaddexp(logit_i, logit_j)
        to_i = jnp.where(forced, now_on_i[k], uniforms[k] < jnp.exp(logit_i - norm))
        log_q = log_q + jnp.where(to_i, logit_i, logit_j) - norm
        side_i = jax.tree_util.tree_map(lambda total, add: total + jnp.where(to_i, add, 0), side_i, own)
        side_j = jax.tree_util.tree_map(lambda total, add: total + jnp.where(to_i, 0, add), side_j, own)
        return side_i, side_j, size_i + to_i, size_j + ~to_i, log_q, on_i.at[k].set(to_i)

    return visit


def _restricted_gibbs(model: SideModel, rng_key: jax.Array, uniforms: jax.Array, n_scans: int, order: jax.Array,
                      n_visits: jax.Array, in_play: jax.Array, i: jax.Array, j: jax.Array, is_split: jax.Array,
                      now_on_i: jax.Array):
    """Jain & Neal's (2004) proposal of a division of the points in play between anchors i and j:
    a launch state (each point on a side by a fair coin, then ``n_scans`` restricted Gibbs scans)
    made without looking at the current division, then one more scan, which draws the split
    (``uniforms``) or, for a merge, is forced to the current division (``now_on_i``); q is the
    product of that scan's conditional probabilities. Returns the carry of :func:`_visit`."""
    n_points = in_play.shape[0]
    dtype = uniforms.dtype
    key_start, key_scans = jax.random.split(rng_key)
    index = jnp.arange(n_points)
    on_i = jnp.where(in_play, jax.random.uniform(key_start, (n_points,), dtype=dtype) < 0.5, index == i)
    members_i, members_j = (in_play & on_i) | (index == i), (in_play & ~on_i) | (index == j)

    def side(members):
        return jax.tree_util.tree_map(lambda leaf: jnp.sum(jnp.where(
            members.reshape((-1,) + (1,) * (leaf.ndim - 1)), leaf, 0), axis=0), model.point_stats)

    carry = (side(members_i), side(members_j), jnp.sum(members_i).astype(dtype), jnp.sum(members_j).astype(dtype),
             jnp.zeros((), dtype), on_i)
    launch_uniforms = jax.random.uniform(key_scans, (n_scans, n_points), dtype=dtype)
    never = jnp.zeros((), bool)
    for scan_index in range(n_scans):  # the launch state
        carry = jax.lax.fori_loop(0, n_visits, _visit(model, order, launch_uniforms[scan_index], never, now_on_i,
                                                      take_out=True), carry)
    carry = carry[:4] + (jnp.zeros((), dtype), carry[5])  # q is the last scan's alone
    return jax.lax.fori_loop(0, n_visits, _visit(model, order, uniforms, ~is_split, now_on_i, take_out=True), carry)


def sequential_allocation(model: SideModel, order: jax.Array, uniforms: jax.Array, n_visits: jax.Array,
                          i: jax.Array, j: jax.Array, forced: jax.Array, now_on_i: jax.Array):
    """Dahl's (2003) sequential allocation of the points in play between anchors ``i`` and ``j``,
    as :func:`split_merge_move` makes its splits, for moves built on it: the first ``n_visits``
    points of ``order`` join i's or j's side with probability ∝ size × ``model.log_predictive``
    of the side so far, drawn with ``uniforms`` (indexed by point) or, where ``forced``, as
    ``now_on_i`` says (the reverse of a merge).

    Returns
    -------
    (on_side_i, log_q)
        Per point whether it ends on i's side (i itself True, j and points not in play False),
        and log q of the allocation: the sum of the log probabilities of its choices.
    """
    dtype = uniforms.dtype
    index = jnp.arange(uniforms.shape[0])
    one = jnp.ones((), dtype)
    start = (_tree_rows(model.point_stats, i), _tree_rows(model.point_stats, j), one, one, jnp.zeros((), dtype),
             index == i)
    result = jax.lax.fori_loop(0, n_visits, _visit(model, order, uniforms, forced, now_on_i, take_out=False), start)
    return result[5], result[4]


class MoveUniforms(NamedTuple):
    """The random numbers of one :func:`split_merge_move`: the kind (< 1/2: split), four uniforms
    choosing the cluster or pair and the anchors, 31-bit keys ordering the points in play, one
    allocation uniform per point, the acceptance uniform."""

    kind: jax.Array
    choice: jax.Array
    keys: jax.Array
    uniforms: jax.Array
    accept: jax.Array


def move_uniforms(rng_key: jax.Array, n_points: int, dtype: Any, launch_scans: int = 0):
    """(:class:`MoveUniforms`, key of the launch scans or None) of a move from ``rng_key``, as
    :func:`split_merge_move` draws them (a native twin of the move draws the same ones here)."""
    if launch_scans == 0:
        key_kind, key_choice, key_order, key_allocate, key_accept = jax.random.split(rng_key, 5)
        key_launch = None
    else:
        key_kind, key_choice, key_order, key_allocate, key_accept, key_launch = jax.random.split(rng_key, 6)
    return MoveUniforms(
        kind=jax.random.uniform(key_kind, (), dtype=dtype),
        choice=jax.random.uniform(key_choice, (4,), dtype=dtype),
        keys=jax.random.bits(key_order, (n_points,), jnp.uint32) >> 1,
        uniforms=jax.random.uniform(key_allocate, (n_points,), dtype=dtype),
        accept=jax.random.uniform(key_accept, (), dtype=dtype),
    ), key_launch


def split_merge_move(
    model: SideModel,
    rng_key: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    log_alpha: jax.Array,
    movable: jax.Array | None = None,
    gains: jax.Array | None = None,
    stats: Any | None = None,
    launch_scans: int = 0,
) -> MoveResult:
    """One split or merge Metropolis–Hastings move (see the module docstring).

    Parameters
    ----------
    model : SideModel
        Point statistics, predictive and marginal likelihoods (:func:`family_side_model`).
    rng_key : jax.Array
        Key of this move.
    assignments : jax.Array int32 (N,), counts : jax.Array int32 (K_max,)
        The partition.
    log_alpha : jax.Array
        log α (floating point, the working precision).
    movable : jax.Array bool (K_max,), optional
        Slots whose clusters the moves may split or merge (default: all); a split's new cluster
        is movable too.
    gains : jax.Array (K_max, K_max), optional
        :func:`merge_gains` of the partition (with ``model.log_marginal``), e.g. the ``gains`` of
        the previous move's result; computed when not given (K² marginal likelihoods, against
        3 K for the update after a move).
    stats : pytree, optional
        The point statistics summed per slot (leading axis K_max), e.g. the ``stats`` of the
        previous move's result; computed when not given (a pass over all N points).
    launch_scans : int
        0: the split is proposed by sequential allocation (Dahl 2003). t > 0: by one restricted
        Gibbs scan from a launch state made of a random division and t restricted Gibbs scans
        (Jain & Neal 2004, §3; see the module docstring). Static.

    Returns
    -------
    MoveResult
    """
    point_stats = model.point_stats
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    dtype = jnp.result_type(log_alpha)
    if movable is None:
        movable = jnp.ones((n_slots,), bool)
    draws, key_launch = move_uniforms(rng_key, n_points, dtype, launch_scans)
    choice = draws.choice
    active = (counts > 0) & movable
    n_clusters = jnp.sum(active).astype(jnp.int32)
    if stats is None:
        stats = jax.tree_util.tree_map(
            lambda leaf: segment_sum(leaf, assignments, num_segments=n_slots), point_stats)
    if gains is None:
        gains = merge_gains(model.log_marginal, stats, counts, log_alpha, movable)
    pairs_now = _upper(gains)
    log_pair_now = _log_pair_probability(pairs_now, _log_sum_exp(pairs_now), n_clusters)
    is_split = (n_clusters <= 1) | (draws.kind < 0.5)

    # Split: a cluster uniformly, then an ordered pair of distinct anchors uniformly in it.
    split_slot = _nth_member(active, choice[0], n_clusters.astype(dtype))
    n_split = counts[split_slot].astype(dtype)
    in_split = assignments == split_slot
    split_i = _nth_member(in_split, choice[1], n_split)
    split_j = _nth_member(in_split & (jnp.arange(n_points) != split_i), choice[2], n_split - 1)
    # Merge: a pair by g, then i's cluster by a fair coin, i and j uniformly in their clusters.
    pair = _inverse_cdf(jnp.exp(log_pair_now).reshape(-1), choice[0])
    pair_low, pair_high = pair // n_slots, pair % n_slots
    first = jnp.where(choice[3] < 0.5, pair_low, pair_high)
    second = pair_low + pair_high - first
    merge_i = _nth_member(assignments == first, choice[1], counts[first].astype(dtype))
    merge_j = _nth_member(assignments == second, choice[2], counts[second].astype(dtype))
    i = jnp.where(is_split, split_i, merge_i)
    j = jnp.where(is_split, split_j, merge_j)
    possible = jnp.where(is_split, (n_clusters >= 1) & (n_split >= 2), n_clusters >= 2)

    label_i, label_j = assignments[i], assignments[j]
    index = jnp.arange(n_points)
    in_play = ((assignments == label_i) | (assignments == label_j)) & (index != i) & (index != j)
    # Only the points in play are visited, first in the order of one sort of random 31-bit keys
    # (the others keyed past them). A permutation of all N points followed by a sort to put the
    # points in play first cost more than the rest of a move on the digits; a Fisher–Yates shuffle
    # inside the loop was cheaper there but copied its N-long array at every visit (5x slower on
    # 100,000 points). Equal keys (probability about n²/2³²) keep the points' index order, which
    # depends on the points in play only, the same for a split and the merge that reverses it.
    order = jnp.argsort(jnp.where(in_play, draws.keys, jnp.uint32(0xFFFFFFFF)))
    uniforms = draws.uniforms
    n_visits = jnp.where(possible, jnp.sum(in_play), 0).astype(jnp.int32)

    now_on_i = assignments == label_i
    if launch_scans == 0:
        one = jnp.ones((), dtype)
        start = (_tree_rows(point_stats, i), _tree_rows(point_stats, j), one, one, jnp.zeros((), dtype), index == i)
        allocate = _visit(model, order, uniforms, ~is_split, now_on_i, take_out=False)
        side_i, side_j, size_i, size_j, log_q, on_side_i = jax.lax.fori_loop(0, n_visits, allocate, start)
    else:
        side_i, side_j, size_i, size_j, log_q, on_side_i = _restricted_gibbs(
            model, key_launch, uniforms, launch_scans, order, n_visits, in_play, i, j, is_split, now_on_i)
    size_both = size_i + size_j
    log_crp_ratio = log_alpha + gammaln(size_i) + gammaln(size_j) - gammaln(size_both)
    log_posterior_ratio = log_crp_ratio + model.log_split_ratio(side_i, side_j, label_i, label_j)  # split / merged

    # The pair probability g({A, B}) in the split state: now for a merge; for a split, in the
    # proposed state, whose gains differ from the current ones in the rows of A (in C's slot) and
    # B (a new slot), and in the pair (A, B) — computed even when no slot is free.
    single_marginal = jax.vmap(model.log_marginal)(stats)
    slots = jnp.arange(n_slots)
    against = partial(_gains_against, model.log_marginal, stats=stats, counts=counts, single_marginal=single_marginal,
                      log_alpha=log_alpha)
    others = active & (slots != split_slot)
    row_a = against(side_i, size_i, valid=others)
    row_b = against(side_j, size_j, valid=others)
    merged_stats = jax.tree_util.tree_map(jnp.add, side_i, side_j)
    pair_ab = -(log_crp_ratio + model.log_marginal(side_i) + model.log_marginal(side_j)
                - model.log_marginal(merged_stats))  # Δ of merging A and B, as merge_gains has it
    kept = jnp.where((slots[:, None] == split_slot) | (slots[None, :] == split_slot), -jnp.inf, pairs_now)
    log_total_split = _log_sum_exp(jnp.concatenate([kept.reshape(-1), row_a, row_b, pair_ab[None]]))
    log_g = jnp.where(is_split, _log_pair_probability(pair_ab, log_total_split, n_clusters + 1),
                      log_pair_now[pair_low, pair_high])
    n_merged_clusters = jnp.where(is_split, n_clusters, n_clusters - 1).astype(dtype)
    log_split_proposal = _log_split_proposal(n_merged_clusters, size_both, log_q)
    log_merge_proposal = _log_merge_proposal(log_g, size_i, size_j)
    log_ratio = log_posterior_ratio + log_merge_proposal - log_split_proposal
    log_ratio = jnp.where(is_split, log_ratio, -log_ratio)
    accepted = possible & (jnp.log(draws.accept) < log_ratio)
    free = counts == 0
    overflow = accepted & is_split & ~jnp.any(free)
    accepted = accepted & ~overflow
    # A split sends j's side to the first free slot; a merge sends i's cluster to j's.
    new_slot = jnp.argmax(free).astype(assignments.dtype)
    moved = jnp.where(is_split, (in_play | (index == j)) & ~on_side_i, assignments == label_i)
    target = jnp.where(is_split, new_slot, label_j)
    assignments = jnp.where(accepted & moved, target, assignments)
    counts = segment_sum(jnp.ones((n_points,), counts.dtype), assignments, num_segments=n_slots)
    # The gains of the new partition: an accepted split puts A's row in C's slot and B's in the
    # new one; an accepted merge empties i's slot and gives j's the merged cluster's row.
    row_merged = against(merged_stats, size_both, valid=active & (slots != label_i) & (slots != label_j))
    split_gains = _set_row(_set_row(gains, split_slot, row_a), new_slot, row_b)
    split_gains = split_gains.at[split_slot, new_slot].set(pair_ab).at[new_slot, split_slot].set(pair_ab)
    merge_gains_after = _set_row(_set_row(gains, label_i, jnp.full((n_slots,), -jnp.inf, gains.dtype)),
                                 label_j, row_merged)
    gains = jnp.where(accepted & is_split, split_gains, jnp.where(accepted, merge_gains_after, gains))
    # The statistics per slot, updated the same way (the sides' sums, not a new pass over the points).
    split_stats = jax.tree_util.tree_map(lambda leaf, a, b: leaf.at[split_slot].set(a).at[new_slot].set(b),
                                         stats, side_i, side_j)
    merge_stats = jax.tree_util.tree_map(lambda leaf, both: leaf.at[label_i].set(0).at[label_j].set(both),
                                         stats, merged_stats)
    stats = jax.tree_util.tree_map(
        lambda leaf, split, merge: jnp.where(accepted & is_split, split, jnp.where(accepted, merge, leaf)),
        stats, split_stats, merge_stats)
    return MoveResult(assignments=assignments, counts=counts, split_proposed=is_split & possible,
                      merge_proposed=~is_split & possible, accepted=accepted, overflow=overflow,
                      anchor_i=i.astype(jnp.int32), anchor_j=j.astype(jnp.int32), stats_i=side_i, stats_j=side_j,
                      gains=gains, stats=stats)


def count_move(moves: SplitMergeMoves, result: MoveResult) -> SplitMergeMoves:
    """``moves`` plus the outcome of one move."""
    return SplitMergeMoves(
        splits_proposed=moves.splits_proposed + result.split_proposed,
        splits_accepted=moves.splits_accepted + (result.split_proposed & result.accepted),
        merges_proposed=moves.merges_proposed + result.merge_proposed,
        merges_accepted=moves.merges_accepted + (result.merge_proposed & result.accepted),
    )


def no_moves() -> SplitMergeMoves:
    """Zero counts."""
    zero = jnp.zeros((), jnp.int32)
    return SplitMergeMoves(zero, zero, zero, zero)


def split_merge_moves(
    family: Any,
    rng_key: jax.Array,
    data: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    alpha: jax.Array,
    n_moves: int,
    launch_scans: int = 0,
    backend: str = "xla",
) -> tuple[jax.Array, jax.Array, SplitMergeMoves, jax.Array]:
    """``n_moves`` moves in a row on a DP mixture of ``family`` (keys ``fold_in(rng_key, move)``),
    their splits proposed with ``launch_scans`` restricted Gibbs scans (:func:`split_merge_move`).

    ``backend`` "numba" (families with a ``native_predictive``, ``launch_scans=0``) runs the same
    moves, with the same random numbers, on the CPU
    (:func:`inference.native.dp_moves.numba_split_merge_moves`).

    Returns
    -------
    (assignments, counts, moves, overflow)
        The partition after the moves, their :class:`SplitMergeMoves` counts, and whether any
        accepted split found no free slot.
    """
    log_alpha = jnp.log(alpha).astype(data.dtype)
    if backend == "numba" and launch_scans == 0 and family.native_predictive is not None:
        from inference.native.dp_moves import numba_split_merge_moves  # imports numba

        draws = jax.vmap(lambda move: move_uniforms(jax.random.fold_in(rng_key, move), data.shape[0], data.dtype)[0])(
            jnp.arange(n_moves))
        assignments, counts, moves, overflow = numba_split_merge_moves(
            family.native_predictive, data, assignments, counts, log_alpha, draws)
        return assignments, counts, SplitMergeMoves(*(moves[index] for index in range(4))), overflow
    model = family_side_model(family, data)

    stats = jax.tree_util.tree_map(lambda leaf: segment_sum(leaf, assignments, num_segments=counts.shape[0]),
                                   model.point_stats)

    def move(carry, move_index):
        assignments, counts, gains, stats, moves, overflow = carry
        result = split_merge_move(model, jax.random.fold_in(rng_key, move_index), assignments, counts, log_alpha,
                                  gains=gains, stats=stats, launch_scans=launch_scans)
        return (result.assignments, result.counts, result.gains, result.stats, count_move(moves, result),
                overflow | result.overflow), None

    start = (assignments, counts, merge_gains(model.log_marginal, stats, counts, log_alpha), stats, no_moves(),
             jnp.zeros((), bool))
    assignments, counts, _, _, moves, overflow = jax.lax.scan(move, start, jnp.arange(n_moves))[0]
    return assignments, counts, moves, overflow
