"""Sub-cluster split/merge sampler for Dirichlet-process mixtures (Chang & Fisher 2013), exact.

Chang & Fisher (2013, "Parallel sampling of DP mixture models using sub-cluster splits", NIPS;
CF13 below) alternate a *restricted* Gibbs sweep, in which every point is relabelled at once among
the K existing clusters given instantiated weights and parameters (§3), with Metropolis–Hastings
splits and merges proposed from two *sub-clusters* kept inside every cluster (§4). Every part of a
step is a batched array operation over points, clusters or pairs of clusters — no loop runs over
the points — so one step is a handful of XLA kernels on an accelerator, ``jit``-ted once and
``vmap``-ped over chains.

One step of :func:`build_kernel`:

(a)–(c) **Restricted Gibbs** (CF13 §3). Weights (π_1, …, π_K, π_new) ~ Dir(N_1, …, N_K, α) as
    normalised Gamma(N_k), Gamma(α) draws; the cluster parameters θ_k are the state's posterior
    draws; every point's label is drawn from p(z_i = k) ∝ π_k F(x_i | θ_k) over the existing
    clusters, all points at once. The normaliser (π_new's Gamma(α) included) cancels in this
    conditional, so only the Gamma(N_k) variables are drawn, each as a sum of N_k Exp(1).

(d) **Sub-cluster splits** (CF13 §4). Each cluster's two sub-clusters are grown by CF13's
    sub-cluster Gibbs iterations — sub-weights (π̄_l, π̄_r) ~ Dir(N_l + α/2, N_r + α/2),
    sub-parameters θ̄ from their posteriors, every point's sub-label ∝ π̄_h F(x_i | θ̄_h), all
    points at once — and a split of the cluster drawn from its two sub-clusters is accepted
    with CF13's ratio

        H_split = α Γ(N_l) f(x_l) Γ(N_r) f(x_r) / (Γ(N_k) f(x_k)),

    f the marginal likelihood (``family.log_marginal``), over the probability q of the drawn
    split, times the probability of the auxiliary "links" described below; a merge of two
    clusters whose union the same sub-clusters would split uses the reciprocal.

(d') **Merges** (CF13 §4, merge moves whose reverse is a random split): two clusters are merged
    with CF13's ratio

        H_merge = Γ(N_1 + N_2) f(x_12) / (α Γ(N_1) Γ(N_2) f(x_1) f(x_2))
                  × 2 Γ(α) Γ(α/2 + N_1) Γ(α/2 + N_2) / (Γ(α/2)² Γ(α + N_1 + N_2)),

    the second line being the probability that a split drawing labels from a Dir(α/2, α/2)
    Pólya urn gives back the two clusters (both labellings), again times the links' probability.

(e) α by the Escobar–West update when ``alpha_prior`` is given; the cluster parameters are redrawn
    from their posteriors given the new partition.

Why this version differs from CF13, and why it is exact
--------------------------------------------------------
The marginal of the chain on partitions must be p(z | x, α) ∝ α^K Π_k Γ(N_k) f(x_k). Three
steps of CF13 do not leave it invariant as published:

1. *Emptying clusters.* A parallel relabelling can take the last point out of a cluster, which
   then disappears; no move re-creates it at the matching rate. Here every cluster keeps a
   *keeper*, its point of lowest rank in a fresh uniformly random ordering of the points, and a
   point may only join clusters whose keeper ranks below it. Given the keepers, the other labels
   are independent with p(z_i = k) ∝ π_k F(x_i | θ_k) on the allowed clusters; this is the exact
   conditional of the joint p(z, π̃, θ) ∝ Π_k π̃_k^{N_k - 1} G0(θ_k) Π_i F(x_i | θ_{z_i}) on
   partitions with K non-empty clusters (whose z-marginal is ∝ Π_k Γ(N_k) f(x_k)), and the
   keepers are unchanged by it, so the sweep is a Gibbs update. K is changed only by (d) and (d').
2. *Sub-clusters as state.* CF13 carry the sub-clusters from step to step, which makes them an
   auxiliary variable whose target — each cluster's two-component posterior — has a normaliser
   (that cluster's two-component marginal likelihood) that differs between the clusters before
   and after a split and cannot be computed. Their split ratio omits it; it is right only if the
   new clusters' sub-clusters were drawn from that posterior, which is why new sub-clusters are
   left to "burn in" before their splits are proposed. Their merge ratio takes a random split as
   the reverse move, which is not the move that proposes splits. Here the sub-clusters are
   rebuilt in every step as a *launch state* (Jain & Neal 2004) Λ(S, ω), a deterministic
   function of a cluster's point set S and of the step's fresh random numbers ω (random point
   ranks, per-point uniforms, and draws indexed by the slot of S's lowest-ranked point, which a
   split or merge never relocates): ``n_sub_iterations`` sub-cluster Gibbs iterations started
   from two seeds, S's lowest-ranked point and a point drawn k-means++-like. The split is then
   *drawn* by one more sub-cluster Gibbs iteration from Λ, every point but the leader taking a
   side independently, so the probability q(A, B | Λ) of any division of S is a product over
   its points. Splitting X and merging two clusters Y, Z with Y ∪ Z = X use the same Λ(X, ω),
   so a merge's reverse probability is q(Y, Z | Λ(Y ∪ Z)) and every pair of clusters can be
   merged (an earlier version required the launch itself to reproduce Y and Z, which almost
   never happens in many dimensions). ω has the same distribution whatever the state, so the
   acceptance ratio is the ratio of the targets — CF13's H_split — over q, times the selection
   probabilities. A second pair of moves, (d'), uses as split proposal the random Pólya-urn
   split (whose probability CF13's H_merge already contains), which merges small clusters
   whatever their shape.
3. *Parallel moves.* Proposing a move for every cluster at once and accepting each on its own is
   valid only if the grouping of clusters into moves is the same before and after any subset of
   the moves. The grouping is therefore built from auxiliary *links*: the lowest-ranked point of
   every cluster C (its leader) links, with probability ``LINK_PROBABILITY`` (0 when C holds
   every point), to a point j outside C drawn with probability q(j | C) ∝ p(x_j | x_C), C's
   posterior predictive, else to nothing. This conditional distribution is normalised and
   depends on C alone, so it factorises over clusters; it is redrawn before each kind of move
   (a Gibbs update of the links). A cluster that does not link is a *split block*; a
   cluster that links to a non-linking one, under the rank conditions of :func:`_plan_blocks`,
   forms a *merge block* with it. The conditions make the blocks disjoint and unchanged by any
   move in another block; a split turns a split block into a merge block of its two halves (the
   leader's half linking to the other for the sub-cluster splits, the reverse for the random
   splits, so that small clusters linking into large ones can merge), and a merge does the
   converse. Each block's Hastings ratio then involves only its own clusters; the links add the
   factor LINK_PROBABILITY · Q to a split's ratio (and its inverse to a merge's), with

        Q = Σ_{j ∈ other half} p(x_j | x_L) / Σ_{j ∉ L} p(x_j | x_L),

   L the linking half (the half holding the leader for sub-cluster splits, the other half for
   random splits): the probability that L's link lands in the other half, the link itself being
   proposed from q restricted to that half. When the split cluster holds every point the factor
   is also multiplied by 1 - LINK_PROBABILITY (it could not link, so its "no link" had
   probability 1). Predictive-weighted links land in a neighbouring cluster, so a small cluster
   next to a large one is proposed for a merge with it often.

With the restricted Gibbs sweep, the moves and the α update each leaving p(z, α | x) invariant,
and splits and merges connecting any two partitions, the chain is exact;
``tests/test_subcluster.py`` checks it against partition posteriors enumerated on four to six
points. One property of CF13 remains: a single point can only leave or join a cluster through a
split or merge (the restricted sweep cannot create or remove a cluster), so clusters of one or
two outlying points change more slowly than under Neal's one-point-at-a-time Gibbs sweeps.

State and capacity. The state is :class:`inference.neal.GibbsState` (``params`` hold posterior
draws of the cluster parameters, ``stats`` the sufficient statistics), so
:func:`inference.chains.sample_chains`, :func:`inference.chains.record_gibbs`,
:func:`inference.neal.grow_capacity` and :func:`inference.diagnostics.to_inference_data` work
unchanged. A split needs a free slot; when the accepted splits of a step need more slots than the
capacity K_max has free, ``overflow`` is set and the step returns the partition it started from,
as in :mod:`inference.neal`. Every random draw is indexed by point, by slot or by a cluster's
leader point, so a step's outcome does not depend on K_max (up to floating-point rounding) and a
re-run after growing the capacity continues the same chain. Each step evaluates log-likelihoods
and posterior predictives on (N, K_max) arrays and segment sums over the points, plus
``n_sub_iterations`` passes of O(N) work for the sub-clusters.

Log joint (per step): log p(x, z | α) with the parameters integrated out, computed as
:mod:`inference.neal` does, so chains of different algorithms are comparable.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from inference.concentration import GammaPrior
from inference.segments import segment_sum
from inference.step_cache import shared_step
from inference.neal import GibbsState
from inference.neal import init as _neal_init
from inference.neal._kernel import _finish_step, _keep_partition_on_overflow
from inference.split_merge import SplitMergeMoves, no_moves
from inference._validation import check_int
from inference.components import ComponentFamily, sample_log_gamma

__all__ = [
    "LINK_PROBABILITY",
    "SubclusterState",
    "SubclusterInfo",
    "init",
    "build_kernel",
]

LINK_PROBABILITY = 0.3
"""Probability that a cluster's leader links to a point outside the cluster (see the module
docstring): a cluster is proposed for a split with probability about 1 - LINK_PROBABILITY, and a
split's Hastings ratio carries the factor LINK_PROBABILITY · Q (Q <= 1, near 1 when the two halves
are each other's nearest data)."""

SubclusterState = GibbsState
"""The state of the sub-cluster sampler: :class:`inference.neal.GibbsState` (cluster parameters in
``params``, sufficient statistics in ``stats``)."""


class SubclusterInfo(NamedTuple):
    """Per-step diagnostics; the first four fields are those of :class:`inference.neal.GibbsInfo`.

    Attributes
    ----------
    n_clusters : jax.Array, int32
        Number of occupied clusters after the step.
    log_joint : jax.Array
        log p(x, z | α) after the step, the parameters integrated out.
    alpha : jax.Array
        Concentration after the step.
    overflow : jax.Array, bool
        Whether the step ran out of capacity (its moves were then dropped).
    split_merge_accepted : jax.Array, int32
        Accepted splits plus accepted merges.
    splits_proposed, splits_accepted : jax.Array, int32
        Split proposals of the step (sub-cluster and random splits of split blocks with two
        non-empty halves) and how many were accepted.
    merges_proposed, merges_accepted : jax.Array, int32
        Merge proposals (merge blocks; for the sub-cluster moves, only those whose union the
        sub-cluster split would divide as it is) and how many were accepted.
    """

    n_clusters: jax.Array
    log_joint: jax.Array
    alpha: jax.Array
    overflow: jax.Array
    split_merge_accepted: jax.Array
    splits_proposed: jax.Array
    splits_accepted: jax.Array
    merges_proposed: jax.Array
    merges_accepted: jax.Array


# ----------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------
def _take(tree: Any, index: jax.Array) -> Any:
    return jax.tree_util.tree_map(lambda leaf: leaf[index], tree)


def _segment_sum_tree(tree: Any, segments: jax.Array, n_segments: int) -> Any:
    return jax.tree_util.tree_map(
        lambda leaf: segment_sum(leaf, segments, num_segments=n_segments), tree
    )


def _random_ranks(rng_key: jax.Array, n_points: int) -> tuple[jax.Array, jax.Array]:
    """A uniformly random ordering of the points: ``perm[r]`` is the point of rank r, ``rank[i]``
    the rank of point i (int32)."""
    perm = jax.random.permutation(rng_key, n_points).astype(jnp.int32)
    rank = jnp.zeros((n_points,), jnp.int32).at[perm].set(jnp.arange(n_points, dtype=jnp.int32))
    return perm, rank


def _per_point_keys(rng_key: jax.Array, points: jax.Array) -> jax.Array:
    """One key per entry of ``points`` (point indices), ``fold_in(rng_key, point)``."""
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(rng_key, points)


def _log_lik_matrix(family: ComponentFamily, params: Any, features: jax.Array) -> jax.Array:
    """log F(x_i | θ_k) for every point and slot, (N, K_max)."""
    cache = jax.vmap(family.component_cache)(params)
    if family.likelihood_cache is not None:
        return jnp.matmul(features, cache.T, precision="highest")
    return jax.vmap(lambda point: jax.vmap(lambda row: family.cached_log_likelihood(row, point))(cache))(features)


# ----------------------------------------------------------------------------------------------
# (a)-(c): restricted Gibbs sweep with keepers (CF13 §3)
# ----------------------------------------------------------------------------------------------
def _restricted_gibbs(
    family: ComponentFamily,
    rng_key: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    params: Any,
    features: jax.Array,
) -> jax.Array:
    """Relabel all points at once among the existing clusters, keepers fixed; returns the labels.

    Weights: log π_k = log G_k + const with G_k ~ Gamma(N_k) (CF13 §3: (π, π_new) ~
    Dir(N_1, …, N_K, α)), drawn as the sum of one Exp(1) variable per point of cluster k; the
    constant, π_new's Gamma(α) included, cancels. Point i joins cluster k
    with probability ∝ π_k F(x_i | θ_k) among the clusters whose keeper ranks below i; keepers stay
    (see the module docstring). Draws are Gumbel-max with one key per point, so the outcome does
    not depend on K_max.
    """
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    dtype = features.dtype
    key_weights, key_ranks, key_labels = jax.random.split(rng_key, 3)
    active = counts > 0
    exponentials = jax.random.exponential(key_weights, (n_points,), dtype)
    log_weights = jnp.log(segment_sum(exponentials, assignments, num_segments=n_slots))
    _, rank = _random_ranks(key_ranks, n_points)
    keeper_rank = jax.ops.segment_min(rank, assignments, num_segments=n_slots)
    is_keeper = keeper_rank[assignments] == rank
    allowed = active[None, :] & (keeper_rank[None, :] < rank[:, None])
    logits = jnp.where(allowed, log_weights[None, :] + _log_lik_matrix(family, params, features), -jnp.inf)
    gumbel = jax.vmap(lambda key: jax.random.gumbel(key, (n_slots,), dtype))(
        _per_point_keys(key_labels, jnp.arange(n_points))
    )
    choice = jnp.argmax(logits + gumbel, axis=1).astype(assignments.dtype)
    return jnp.where(is_keeper, assignments, choice)


# ----------------------------------------------------------------------------------------------
# Blocks of the parallel split/merge moves
# ----------------------------------------------------------------------------------------------
class _Blocks(NamedTuple):
    """How the clusters are grouped into independent moves (all arrays indexed by slot).

    ``key_of[s]``: the block's key slot for every slot in a block, K_max otherwise; the key slot of
    a block holds its leader (lowest-ranked point). ``split``/``merge``: split and merge blocks, at
    their key slot. ``leader``: each slot's lowest-ranked point. ``perm``/``rank``: the ordering.
    """

    key_of: jax.Array
    split: jax.Array
    merge: jax.Array
    leader: jax.Array
    perm: jax.Array
    rank: jax.Array


def _log_predictive_matrix(family: ComponentFamily, stats: Any, data: jax.Array) -> jax.Array:
    """log p(x_j | the points summarised by row k of ``stats``) for every row and point, (K, N)."""
    terms = jax.vmap(family.predictive_terms)(stats)
    return jax.vmap(lambda row: jax.vmap(lambda point: family.cached_log_predictive(row, point))(data))(terms)


def _plan_blocks(
    family: ComponentFamily,
    rng_key: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    data: jax.Array,
    point_stats: Any,
    *,
    leader_links: bool,
) -> _Blocks:
    """Draw the ordering and the links, and group the clusters into split and merge blocks.

    Every cluster C has a leader ℓ_C (lowest rank r). With probability ``LINK_PROBABILITY`` (0
    when C holds every point) ℓ_C links to a point j outside C drawn with probability
    q(j | C) ∝ p(x_j | x_C), C's posterior predictive — a normalised distribution that depends on
    C alone — making C → D for the cluster D of that point. With in(C) the clusters linking to C:

    * ``leader_links`` (sub-cluster moves; a split's leader half links to the other half):
      split block C: no link, and every cluster in in(C) has r(ℓ) > r(ℓ_C);
      merge block k → m: m has no link, k is the lowest-ranked cluster of in(m),
      r(ℓ_k) < r(ℓ_m), and every cluster of in(k) has r(ℓ) > r(ℓ_k). Key slot: k.
    * otherwise (random splits; the non-leader half links to the leader half):
      split block C: no link, and every cluster in in(C) has r(ℓ) < r(ℓ_C);
      merge block s → t: t has no link, r(ℓ_s) > r(ℓ_t), s is the only cluster of in(t) ranked
      above ℓ_t, and every cluster of in(s) has r(ℓ) < r(ℓ_t). Key slot: t.

    In both cases the blocks are disjoint, a split of a split block produces exactly a merge
    block of its halves and a merge of a merge block a split block, and no move changes another
    block's status (clusters of a block never link outside it). The link coin and the Gumbel
    noise of the link's target are drawn with keys of the leader point.
    """
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    key_ranks, key_link, key_target = jax.random.split(rng_key, 3)
    perm, rank = _random_ranks(key_ranks, n_points)
    slots = jnp.arange(n_slots, dtype=jnp.int32)
    active = counts > 0
    lead_rank = jnp.where(active, jax.ops.segment_min(rank, assignments, num_segments=n_slots), n_points)
    leader = perm[jnp.minimum(lead_rank, n_points - 1)]
    has_link = active & (counts < n_points) & (jax.random.uniform(key_link, (n_points,))[leader] < LINK_PROBABILITY)
    stats = _segment_sum_tree(point_stats, assignments, n_slots)
    outside = assignments[None, :] != slots[:, None]
    gumbel = jax.vmap(lambda key: jax.random.gumbel(key, (n_points,)))(_per_point_keys(key_target, leader))
    scores = jnp.where(outside, _log_predictive_matrix(family, stats, data) + gumbel, -jnp.inf)
    target = jnp.where(has_link, assignments[jnp.argmax(scores, axis=1)], n_slots)
    # Summaries of the links into every slot (empty segments: int max for min, int min for max).
    low_in = jax.ops.segment_min(lead_rank, target, num_segments=n_slots + 1)[:n_slots]
    high_in = jax.ops.segment_max(lead_rank, target, num_segments=n_slots + 1)[:n_slots]
    safe_target = jnp.minimum(target, n_slots - 1)
    target_rank = lead_rank[safe_target]
    n_above = segment_sum(
        (has_link & (lead_rank > target_rank)).astype(jnp.int32), target, num_segments=n_slots + 1
    )[:n_slots]
    target_free = has_link & ~has_link[safe_target]
    if leader_links:
        split = active & ~has_link & (low_in > lead_rank)
        merge = target_free & (low_in[safe_target] == lead_rank) & (lead_rank < target_rank) & (low_in > lead_rank)
        key_slot = jnp.where(merge, slots, n_slots)
        other_slot = jnp.where(merge, safe_target, n_slots)
    else:
        split = active & ~has_link & (high_in < lead_rank)
        linking = target_free & (lead_rank > target_rank) & (n_above[safe_target] == 1) & (high_in < target_rank)
        merge = jnp.zeros((n_slots,), bool).at[jnp.where(linking, safe_target, n_slots)].set(True, mode="drop")
        key_slot = jnp.where(linking, safe_target, n_slots)
        other_slot = jnp.where(linking, slots, n_slots)
    key_of = jnp.where(split, slots, n_slots)
    key_of = key_of.at[key_slot].set(key_slot, mode="drop").at[other_slot].set(key_slot, mode="drop")
    return _Blocks(key_of=key_of, split=split, merge=merge, leader=leader, perm=perm, rank=rank)


# ----------------------------------------------------------------------------------------------
# The two split proposals: sub-clusters (Φ) and random Pólya-urn splits
# ----------------------------------------------------------------------------------------------
def _subcluster_sides(
    family: ComponentFamily,
    rng_key: jax.Array,
    blocks: _Blocks,
    block: jax.Array,
    data: jax.Array,
    features: jax.Array,
    point_stats: Any,
    alpha: jax.Array,
    n_iterations: int,
) -> tuple[jax.Array, jax.Array]:
    """The sub-cluster split proposal of every block (CF13 §4): sampled sides and their log-odds.

    *Launch* (Jain & Neal 2004's launch state, grown as CF13's sub-clusters). Seeds
    (k-means++-like): the block's leader, and a point drawn with probability
    ∝ max_j log p(x_j | x_leader) - log p(x_i | x_leader) (one-point posterior predictive).
    Every point starts on the side of the seed under whose one-point predictive it is likelier.
    Then ``n_iterations`` sub-cluster Gibbs iterations: (π̄_l, π̄_r) ~ Dir(N_l + α/2, N_r + α/2)
    (as normalised Gamma(α/2) + Σ_{i on side h} Exp(1) variables, one exponential per point),
    θ̄_h from the posterior of side h, every point's side ∝ π̄_h F(x_i | θ̄_h).

    *Proposal*: one more such iteration whose probabilities are kept: with θ̄ and π̄ drawn from
    the launch, every point other than the leader takes a side independently, and the leader
    stays on its launch side. The probability of any division of the block into the leader's
    side and the other is then Π_{i ≠ leader} p_i(side of i), computed from the returned log-odds
    — for the split it proposes and for the division of a merge block into its two clusters,
    the reverse of that merge.

    Draws are indexed by point, or by the block's key slot — the slot of its leader's cluster,
    which the block's move never relocates — so the launch and the log-odds of a block depend on
    its point set and the step's random numbers only: the same before and after its move.

    Returns
    -------
    sides : bool (N,)
        The proposed side of every point (meaningful in blocks only).
    log_odds_other : (N,)
        log p_i(not the leader's side) - log p_i(the leader's side) of every point (the leader's
        own entry is unused).
    """
    n_points = block.shape[0]
    n_slots = blocks.key_of.shape[0]
    dtype = features.dtype
    key_seed, key_base, key_iterations, key_uniforms = jax.random.split(rng_key, 4)
    in_block = block < n_slots
    safe_block = jnp.minimum(block, n_slots - 1)
    points = jnp.arange(n_points, dtype=jnp.int32)
    first = blocks.leader[safe_block]
    is_first = points == first
    predictive = jax.vmap(family.log_predictive)
    from_first = predictive(_take(point_stats, first), data)
    top = jax.ops.segment_max(from_first, block, num_segments=n_slots + 1)[safe_block]
    tiny = jnp.finfo(dtype).tiny
    score = jnp.log(jnp.maximum(top - from_first, tiny)) + jax.random.gumbel(key_seed, (n_points,), dtype)
    score = jnp.where(is_first | ~in_block, -jnp.inf, score)
    best = jax.ops.segment_max(score, block, num_segments=n_slots + 1)[safe_block]
    second = jax.ops.segment_min(jnp.where(score == best, points, n_points), block,
                                 num_segments=n_slots + 1)[safe_block]
    has_second = second < n_points
    from_second = predictive(_take(point_stats, jnp.minimum(second, n_points - 1)), data)
    side = jnp.where(is_first, False, (from_second > from_first) & has_second) | (points == second)
    segments = 2 * n_slots + 1
    # Gamma(α/2) parts of the sub-cluster weights of every iteration (the proposal's included).
    log_base = sample_log_gamma(key_base, (0.5 * alpha).astype(dtype), (n_iterations + 1, n_slots, 2)).astype(dtype)

    def log_odds_right(iteration, side):
        """log p_i(right) - log p_i(left) of a sub-cluster Gibbs iteration from ``side``."""
        key_weights, key_params = jax.random.split(jax.random.fold_in(key_iterations, iteration))
        segment = jnp.where(in_block, 2 * block + side, 2 * n_slots)
        sub_stats = _take(_segment_sum_tree(point_stats, segment, segments), jnp.arange(2 * n_slots))
        exponentials = jax.random.exponential(key_weights, (n_points,), dtype)
        sums = segment_sum(exponentials, segment, num_segments=segments)[:-1].reshape(n_slots, 2)
        log_gamma = jnp.logaddexp(log_base[iteration], jnp.log(sums))  # log Gamma(N_h + α/2)
        log_weights = log_gamma - jax.nn.logsumexp(log_gamma, axis=1, keepdims=True)
        sub_params = family.sample_posterior(key_params, sub_stats)  # row 2 k + h: side h of block k
        cache = jax.vmap(family.component_cache)(sub_params)
        score = jax.vmap(family.cached_log_likelihood)
        left = score(_take(cache, 2 * safe_block), features) + log_weights[safe_block, 0]
        right = score(_take(cache, 2 * safe_block + 1), features) + log_weights[safe_block, 1]
        return right - left

    def iterate(iteration, side):
        uniforms = jax.random.uniform(jax.random.fold_in(key_uniforms, iteration), (n_points,), dtype=dtype)
        return jnp.log(uniforms) < jax.nn.log_sigmoid(log_odds_right(iteration, side))

    launch = jax.lax.fori_loop(0, n_iterations, iterate, side)
    log_odds = log_odds_right(n_iterations, launch)
    leader_right = launch[first]
    log_odds_other = jnp.where(leader_right, -log_odds, log_odds)
    uniforms = jax.random.uniform(jax.random.fold_in(key_uniforms, n_iterations), (n_points,), dtype=dtype)
    other = (jnp.log(uniforms) < jax.nn.log_sigmoid(log_odds_other)) & ~is_first
    return other, log_odds_other


def _random_sides(rng_key: jax.Array, blocks: _Blocks, block: jax.Array, alpha: jax.Array, dtype) -> jax.Array:
    """Labels of a Pólya-urn split: p ~ Beta(α/2, α/2) per block (indexed by its key slot), then
    each point's label ~ Bernoulli(p) — jointly the Dir(α/2, α/2)-multinomial labels of CF13 §4."""
    key_fraction, key_labels = jax.random.split(rng_key)
    n_slots = blocks.key_of.shape[0]
    log_gamma = sample_log_gamma(key_fraction, (0.5 * alpha).astype(dtype), (n_slots, 2)).astype(dtype)
    log_fraction = log_gamma[:, 0] - jax.nn.logsumexp(log_gamma, axis=1)
    uniforms = jax.random.uniform(key_labels, (block.shape[0],), dtype=dtype)
    return jnp.log(uniforms) < log_fraction[jnp.minimum(block, n_slots - 1)]


# ----------------------------------------------------------------------------------------------
# Hastings ratios
# ----------------------------------------------------------------------------------------------
def _log_posterior_ratio(
    family: ComponentFamily, side_stats: Any, n_a: jax.Array, n_o: jax.Array, alpha: jax.Array
) -> jax.Array:
    """log p(z_split | x, α) - log p(z_merged | x, α) of splitting every block into its two sides
    (CF13 §4, H_split): log α + log Γ(N_a) + log Γ(N_o) - log Γ(N) + log f(x_a) + log f(x_o)
    - log f(x). ``side_stats`` rows 2b, 2b + 1 are block b's sides; both sides must be non-empty
    (entries with an empty side are meaningless)."""
    dtype = n_a.dtype
    both = (n_a > 0) & (n_o > 0)
    safe_a, safe_o = jnp.where(both, n_a, 1.0), jnp.where(both, n_o, 1.0)
    side_a, side_o = _take(side_stats, jnp.s_[0::2]), _take(side_stats, jnp.s_[1::2])
    log_marginal = jax.vmap(family.log_marginal)
    return (
        jnp.log(alpha).astype(dtype) + gammaln(safe_a) + gammaln(safe_o) - gammaln(safe_a + safe_o)
        + log_marginal(side_a) + log_marginal(side_o) - log_marginal(jax.tree_util.tree_map(jnp.add, side_a, side_o))
    )


def _log_link_ratio(log_link_fraction: jax.Array, n: jax.Array, n_points: int) -> jax.Array:
    """Log probability ratio of the links between a block split (one half linking to the other)
    and merged (no link): log LINK_PROBABILITY + log Q, where Q = q(target half | linking half)
    is the probability that the linking half's link lands in the other half; plus
    log(1 - LINK_PROBABILITY) when the merged cluster holds every point (it cannot link, so its
    "no link" has probability 1, against 1 - LINK_PROBABILITY for the non-linking half)."""
    return math.log(LINK_PROBABILITY) + log_link_fraction + jnp.where(n < n_points, 0.0, math.log1p(-LINK_PROBABILITY))


def _log_urn_probability(n_a: jax.Array, n_o: jax.Array, alpha: jax.Array) -> jax.Array:
    """Log probability that a Pólya-urn split (labels ~ Dir(α/2, α/2)-multinomial) of N_a + N_o
    points gives a given division into two non-empty sides: both labellings,
    log 2 + log Γ(α) - log Γ(α + N) + Σ_h log Γ(α/2 + N_h) - 2 log Γ(α/2) (CF13 §4, H_merge)."""
    alpha = alpha.astype(n_a.dtype)
    half = 0.5 * alpha
    return (math.log(2.0) + gammaln(alpha) - gammaln(alpha + n_a + n_o)
            + gammaln(half + n_a) + gammaln(half + n_o) - 2.0 * gammaln(half))


def _log_proposal_probability(
    log_odds_other: jax.Array, other: jax.Array, counted: jax.Array, block: jax.Array, n_slots: int
) -> jax.Array:
    """Log probability, per block, that the sub-cluster proposal gives the division ``other``
    (True: not on the leader's side): Σ_{i ≠ leader} log p_i(side of i), p_i from the log-odds of
    :func:`_subcluster_sides` (Jain & Neal 2004's q(split | launch)). ``counted`` marks the
    points of blocks other than their leaders."""
    log_prob = jax.nn.log_sigmoid(jnp.where(other, log_odds_other, -log_odds_other))
    return segment_sum(jnp.where(counted, log_prob, 0.0), block, num_segments=n_slots + 1)[:n_slots]


def _move_pass(
    family: ComponentFamily,
    kind: str,
    rng_key: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    data: jax.Array,
    features: jax.Array,
    point_stats: Any,
    alpha: jax.Array,
    n_sub_iterations: int,
) -> tuple[jax.Array, jax.Array, SplitMergeMoves, jax.Array]:
    """One round of parallel split/merge moves of ``kind`` ("subcluster" or "random").

    Every block is evaluated as a split of its point set into side a (holding the leader) and side
    o: a split block with its proposed sides, a merge block with its two clusters. The log Hastings
    ratio of the split is the posterior ratio plus the links' ratio (the linking side is a for
    sub-cluster moves, o for random ones), minus for random moves the urn probability; a merge
    uses its negative. Returns the new assignments, counts, move counts and the overflow flag. A
    merged cluster keeps its key slot (the leader's); the second half of an accepted split takes
    the lowest free slot, in the order of the blocks' key slots.
    """
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    dtype = features.dtype
    key_plan, key_sides, key_accept = jax.random.split(rng_key, 3)
    blocks = _plan_blocks(family, key_plan, assignments, counts, data, point_stats,
                          leader_links=kind == "subcluster")
    block = blocks.key_of[assignments]
    in_block = block < n_slots
    safe_block = jnp.minimum(block, n_slots - 1)
    # In a merge block the key slot holds the leader: the other cluster is side o.
    division = in_block & (assignments != block)
    if kind == "subcluster":
        sides, log_odds_other = _subcluster_sides(family, key_sides, blocks, block, data, features, point_stats,
                                                  alpha, n_sub_iterations)
    else:
        sides = _random_sides(key_sides, blocks, block, alpha, dtype)
    is_leader = jnp.arange(n_points) == blocks.leader[safe_block]
    proposed_other = in_block & (sides != sides[blocks.leader[safe_block]])
    merge_here = blocks.merge[safe_block]
    other = jnp.where(merge_here, division, proposed_other)
    segment = jnp.where(in_block, 2 * block + other, 2 * n_slots)
    side_stats = _take(_segment_sum_tree(point_stats, segment, 2 * n_slots + 1), jnp.arange(2 * n_slots))
    side_counts = segment_sum(jnp.ones((n_points,), dtype), segment,
                                      num_segments=2 * n_slots + 1)[:-1].reshape(n_slots, 2)
    n_a, n_o = side_counts[:, 0], side_counts[:, 1]
    # Q: probability that the linking side's link (∝ its predictive) lands in the other side.
    linking = 0 if kind == "subcluster" else 1
    log_pred = _log_predictive_matrix(family, _take(side_stats, jnp.s_[linking::2]), data)
    slots = jnp.arange(n_slots)[:, None]
    in_linking = (block[None, :] == slots) & (other[None, :] == bool(linking))
    in_target = (block[None, :] == slots) & (other[None, :] != bool(linking))
    log_link_fraction = (jax.nn.logsumexp(jnp.where(in_target, log_pred, -jnp.inf), axis=1)
                         - jax.nn.logsumexp(jnp.where(in_linking, -jnp.inf, log_pred), axis=1))
    both = (n_a > 0) & (n_o > 0)
    log_ratio = (_log_posterior_ratio(family, side_stats, n_a, n_o, alpha)
                 + _log_link_ratio(log_link_fraction, n_a + n_o, n_points))
    if kind == "random":
        log_ratio = log_ratio - _log_urn_probability(n_a, n_o, alpha)
    else:
        log_ratio = log_ratio - _log_proposal_probability(log_odds_other, other, in_block & ~is_leader, block, n_slots)
    uniforms = 1.0 - jax.random.uniform(key_accept, (n_points,), dtype=dtype)  # in (0, 1]
    log_uniform = jnp.log(uniforms[blocks.leader])
    split_proposed = blocks.split & both
    merge_proposed = blocks.merge & both
    accept_split = split_proposed & (log_uniform < log_ratio)
    accept_merge = merge_proposed & (log_uniform < -log_ratio)
    # Merges first: the other cluster joins the key slot; then every accepted split sends its
    # second half to a free slot.
    merged = division & accept_merge[safe_block]
    new_assignments = jnp.where(merged, block, assignments)
    merged_counts = jnp.zeros((n_slots,), counts.dtype).at[new_assignments].add(1)
    free = merged_counts == 0
    free_slots = jnp.nonzero(free, size=n_slots, fill_value=n_slots)[0].astype(assignments.dtype)
    split_order = jnp.cumsum(accept_split) - 1
    overflow = jnp.sum(accept_split) > jnp.sum(free)
    new_slot = free_slots[jnp.clip(split_order, 0, n_slots - 1)]
    moved = proposed_other & ~merge_here & accept_split[safe_block]
    new_assignments = jnp.where(moved, new_slot[safe_block], new_assignments)
    new_counts = jnp.zeros((n_slots,), counts.dtype).at[new_assignments].add(1, mode="drop")
    moves = SplitMergeMoves(
        splits_proposed=jnp.sum(split_proposed).astype(jnp.int32),
        splits_accepted=jnp.sum(accept_split).astype(jnp.int32),
        merges_proposed=jnp.sum(merge_proposed).astype(jnp.int32),
        merges_accepted=jnp.sum(accept_merge).astype(jnp.int32),
    )
    return new_assignments, new_counts, moves, overflow


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------
def _check_family(family: Any) -> ComponentFamily:
    if not isinstance(family, ComponentFamily):
        raise TypeError(f"family: expected a ComponentFamily, got {type(family).__name__}")
    if not (family.has_marginal and family.has_posterior):
        raise ValueError(
            f"algorithm: 'subcluster' needs a family with point_stats, log_marginal, log_predictive and "
            f"sample_posterior; {family.name!r} lacks some of them, use 'auxiliary'"
        )
    return family


def init(
    rng_key: jax.Array,
    data: Any,
    family: ComponentFamily,
    *,
    max_clusters: int,
    alpha: float,
    assignments: Any = None,
) -> GibbsState:
    """Build a sub-cluster sampler state from initial cluster labels.

    Parameters
    ----------
    rng_key : jax.Array
        Key for the initial cluster parameters (drawn from their posteriors).
    data : array_like (N, D)
        Points; checked by the family.
    family : ComponentFamily
        A family with marginal likelihoods and a posterior sampler (the built-in ones).
    max_clusters : int
        Capacity K_max >= 1.
    alpha : float
        Initial concentration α > 0.
    assignments : array_like of int (N,), optional
        Initial labels (relabelled to slots 0..K-1 in order of first appearance). Default: one
        cluster.

    Returns
    -------
    GibbsState

    Raises
    ------
    ValueError
        If an argument is invalid or the family cannot be used (the message names the argument).
    """
    family = _check_family(family)
    return _neal_init(rng_key, data, family, algorithm="conjugate", max_clusters=max_clusters, alpha=alpha,
                      assignments=assignments)


class _KernelConfig(NamedTuple):
    family: ComponentFamily
    alpha_prior: GammaPrior | None
    n_sub_iterations: int


def build_kernel(
    family: ComponentFamily,
    *,
    alpha_prior: GammaPrior | None = None,
    n_sub_iterations: int = 4,
) -> Callable[[jax.Array, GibbsState, jax.Array], tuple[GibbsState, SubclusterInfo]]:
    """Build a pure step of the exact sub-cluster split/merge sampler (see the module docstring).

    Parameters
    ----------
    family : ComponentFamily
        Component family with ``point_stats``, ``log_marginal``, ``log_predictive`` and
        ``sample_posterior`` (:func:`~zoo.dirichlet.families.normal_gamma`,
        :func:`~zoo.dirichlet.families.dirichlet_multinomial`,
        :func:`~zoo.dirichlet.families.beta_bernoulli`, or a
        :func:`~zoo.dirichlet.families.custom_family` with them).
    alpha_prior : GammaPrior, optional
        If given, α is resampled every step by the Escobar–West update; otherwise it stays fixed.
    n_sub_iterations : int
        Sub-cluster Gibbs iterations (CF13 §4) that grow the sub-clusters of every cluster in
        every step, from two seed points (>= 0; 0 splits each cluster by its seeds alone).

    Returns
    -------
    callable
        ``step(rng_key, state, data) -> (GibbsState, SubclusterInfo)``, pure and jittable;
        ``vmap`` it over chains, or pass it to :func:`inference.chains.sample_chains`.

    Raises
    ------
    TypeError
        If ``family`` is not a ComponentFamily or ``alpha_prior`` not a GammaPrior.
    ValueError
        If the family lacks what the algorithm needs (the message names ``algorithm``) or
        ``n_sub_iterations`` is negative.

    Examples
    --------
    >>> import jax, numpy as np
    >>> from zoo.dirichlet.families import normal_gamma
    >>> data = np.concatenate([np.full((10, 2), -3.0), np.full((10, 2), 3.0)])
    >>> data += np.random.default_rng(0).normal(size=data.shape)
    >>> family = normal_gamma(2)
    >>> step = jax.jit(build_kernel(family))
    >>> state = init(jax.random.key(0), data, family, max_clusters=8, alpha=1.0)
    >>> for sweep in range(20):
    ...     state, info = step(jax.random.key(sweep), state, data)
    >>> int(info.n_clusters) >= 2
    True
    """
    family = _check_family(family)
    if alpha_prior is not None and not isinstance(alpha_prior, GammaPrior):
        raise TypeError(f"alpha_prior: expected a GammaPrior or None, got {type(alpha_prior).__name__}")
    n_sub_iterations = check_int("n_sub_iterations", n_sub_iterations, minimum=0)
    return shared_step(_step, _KernelConfig(family, alpha_prior, n_sub_iterations))


def _step(
    config: _KernelConfig, rng_key: jax.Array, state: GibbsState, data: jax.Array
) -> tuple[GibbsState, SubclusterInfo]:
    family = config.family
    key_gibbs, key_subcluster, key_random, key_params, key_alpha = jax.random.split(rng_key, 5)
    data = jnp.asarray(data)
    n_slots = state.counts.shape[0]
    features = jax.vmap(family.prepare_point)(data)
    point_stats = jax.vmap(family.point_stats)(data)
    alpha = state.alpha

    assignments = _restricted_gibbs(family, key_gibbs, state.assignments, state.counts, state.params, features)
    counts = jnp.zeros((n_slots,), state.counts.dtype).at[assignments].add(1)
    overflow = jnp.zeros((), bool)
    totals = no_moves()
    for kind, key in (("subcluster", key_subcluster), ("random", key_random)):
        assignments, counts, moves, overflow_now = _move_pass(
            family, kind, key, assignments, counts, data, features, point_stats, alpha, config.n_sub_iterations)
        overflow = overflow | overflow_now
        totals = SplitMergeMoves(*(total + count for total, count in zip(totals, moves)))
    # An overflowing step is not exact: keep the partition the step started from.
    assignments, counts = _keep_partition_on_overflow(overflow, state, assignments, counts)
    totals = SplitMergeMoves(*(jnp.where(overflow, 0, count) for count in totals))

    stats = _segment_sum_tree(point_stats, assignments, n_slots)
    params = family.sample_posterior(key_params, stats)
    new_state, n_clusters, log_joint = _finish_step(
        family, config.alpha_prior, key_alpha, state, assignments, counts, params, stats, overflow, features)
    info = SubclusterInfo(
        n_clusters=n_clusters,
        log_joint=log_joint,
        alpha=new_state.alpha,
        overflow=overflow,
        split_merge_accepted=totals.splits_accepted + totals.merges_accepted,
        splits_proposed=totals.splits_proposed,
        splits_accepted=totals.splits_accepted,
        merges_proposed=totals.merges_proposed,
        merges_accepted=totals.merges_accepted,
    )
    return new_state, info
