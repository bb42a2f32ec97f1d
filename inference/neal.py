"""Gibbs kernels for Dirichlet-process mixtures: Neal (2000) Algorithms 2, 3 and 8.

The state holds the partition of N points as cluster *slots* in a fixed capacity
``max_clusters`` (K_max): ``counts[k]`` is the number of points in slot k and the slot is active
when the count is positive. Fixed shapes let one sweep (a ``lax.scan`` over the points) be
jit-compiled once and ``vmap``-ped over chains.

Algorithms (Neal 2000; DM05 §4 uses 2 and 8):

* ``"collapsed"`` — Algorithm 3: component parameters integrated out; a point joins cluster k
  with probability ∝ n_{-i,k} p(x_i | x_{k,-i}) or a new cluster ∝ α ∫ F(x_i | φ) dG0(φ).
* ``"conjugate"`` — Algorithm 2 (DM05 §4.1, Figure 2, eq. 2): explicit parameters; joining k is
  ∝ n_{-i,k} F(x_i | φ_k), a new cluster ∝ α ∫ F(x_i | φ) dG0(φ), whose φ is then drawn from
  its posterior given x_i; after the sweep every φ_k is redrawn from its posterior.
* ``"auxiliary"`` — Algorithm 8 (DM05 §4.2) with m auxiliary components drawn from G0: joining k
  is ∝ n_{-i,k} F(x_i | φ_k), auxiliary j ∝ (α / m) F(x_i | φ_j); when x_i was alone its own φ is
  the first auxiliary component. After the sweep φ_k is redrawn from its posterior when the family
  has one, otherwise updated by an independence Metropolis–Hastings sampler with G0 proposals
  (DM05 §4.2).

Speed. Everything that does not depend on the current partition is computed in bulk before the
scan: point features, the candidate components (Algorithm 2's posterior draws, Algorithm 8's
auxiliary draws), their log-likelihoods, the prior predictive of every point, and one uniform per
point. Each point update is then one (K_max, F) × (F,) product for the built-in families (see
:mod:`zoo.dirichlet.families`), an inverse-CDF draw with that single uniform and a few writes.
With ``reuse_auxiliary=True`` (Favaro & Teh 2013) Algorithm 8 keeps its auxiliary components from
one point to the next, so it needs about one draw from G0 per new cluster instead of m per point.
On CPU the sequential loop of Algorithms 2 and 8 runs by default as a numba kernel called through
:func:`jax.pure_callback` (``backend=`` of :func:`build_kernel`; the chains of a ``vmap`` become
one call spread over numba's threads): inside XLA's while loop each point update costs a few
microseconds of per-operation overhead, in numba a fraction of one. It scores a point only
against the clusters and the candidates it may join, and draws with the same uniform as the XLA
path, so both give the same chain (up to floating-point rounding).

Split–merge. ``n_split_merge > 0`` adds that many Metropolis–Hastings split–merge moves after
each sweep (:mod:`inference.split_merge`: sequentially allocated splits, Dahl 2003, after Jain &
Neal 2004, and merges whose pair of clusters is chosen by how much the merge would raise the
posterior). The moves work on the partition with the parameters integrated out, so they need the
family's marginal likelihoods; Algorithms 2 and 8 redraw every φ from its posterior right after
them. One-point-at-a-time Gibbs needs many sweeps to move a whole group of points between
clusters, and cannot open a cluster whose points are far from G0's typical draws; a split or
merge does it in one step.

Capacity. When a point must open a new cluster and every slot is taken, ``overflow`` is set (in
the step's info, and sticky in the state) and the step returns the partition it started from:
the sweep was not an exact Gibbs sweep and is dropped. :func:`grow_capacity` pads a state to a
larger capacity; :func:`inference.chains.sample_chains` does this automatically and re-runs the
sweeps with the same keys. Random draws are indexed by slot, point or draw number (JAX's
partitionable Threefry makes a longer leading axis extend the same values) and each point uses
one uniform, so a sweep's outcome does not depend on the capacity (up to floating-point
rounding) and the re-run continues the same chain.

Log joint (per step, for diagnostics): log p(x, z | α) with the parameters integrated out when the
family has marginal likelihoods (comparable across the three algorithms), else
log p(z | α) + Σ_i log F(x_i | φ_{z_i}) + Σ_k log G0(φ_k) (the last term when the family has a
base density).
"""

from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from inference.concentration import GammaPrior, escobar_west_update
from inference.segments import segment_sum
from inference.sparse import resolve_backend
from inference.split_merge import split_merge_moves
from inference._validation import as_index_array, check_choice, check_int, check_real
from inference.components import ComponentFamily

__all__ = [
    "ALGORITHMS",
    "GibbsState",
    "GibbsInfo",
    "init",
    "build_kernel",
    "grow_capacity",
    "log_crp_prior",
    "cluster_stats",
]

ALGORITHMS = ("collapsed", "conjugate", "auxiliary")


class GibbsState(NamedTuple):
    """State of a Dirichlet-process Gibbs chain with capacity K_max.

    Attributes
    ----------
    assignments : jax.Array, int32 (N,)
        Slot of every point, in [0, K_max).
    counts : jax.Array, int32 (K_max,)
        Points per slot; a slot is active when its count is positive.
    params : pytree or None
        Component parameters with leading axis K_max (Algorithms 2 and 8; None for Algorithm 3).
        Entries of inactive slots are arbitrary.
    stats : pytree or None
        Sufficient statistics per slot, recomputed exactly from the assignments after every step
        (None when the family has no ``point_stats``).
    alpha : jax.Array, scalar
        Concentration α.
    overflow : jax.Array, bool scalar
        Sticky: set once a sweep needed more than K_max clusters. The chain is then not exact.
    """

    assignments: jax.Array
    counts: jax.Array
    params: Any
    stats: Any
    alpha: jax.Array
    overflow: jax.Array

    @property
    def active(self) -> jax.Array:
        """Boolean mask of occupied slots, shape (..., K_max)."""
        return self.counts > 0

    @property
    def max_clusters(self) -> int:
        """The capacity K_max."""
        return self.counts.shape[-1]


class GibbsInfo(NamedTuple):
    """Per-step diagnostics (label-invariant).

    Attributes
    ----------
    n_clusters : jax.Array, int32
        Number of occupied clusters after the step.
    log_joint : jax.Array
        Log joint density after the step (see the module docstring).
    alpha : jax.Array
        Concentration after the step.
    overflow : jax.Array, bool
        Whether this step ran out of capacity.
    split_merge_accepted : jax.Array, int32
        How many of the step's split–merge proposals were accepted (0 without split–merge).
    """

    n_clusters: jax.Array
    log_joint: jax.Array
    alpha: jax.Array
    overflow: jax.Array
    split_merge_accepted: jax.Array


# ----------------------------------------------------------------------------------------------
# Pieces shared by the kernels
# ----------------------------------------------------------------------------------------------
def log_crp_prior(counts: jax.Array, alpha: jax.Array, n_points: int) -> jax.Array:
    """log p(z | α) of a partition under the Chinese restaurant process.

    p(z | α) = α^K Γ(α) / Γ(α + N) Π_k Γ(n_k) (Antoniak 1974; DM05 App. B).

    Parameters
    ----------
    counts : jax.Array (K_max,)
        Cluster sizes; zeros are ignored.
    alpha : jax.Array
        Concentration α > 0.
    n_points : int
        N, the sum of the counts.

    Returns
    -------
    jax.Array
        Scalar log probability of the partition.
    """
    counts = jnp.asarray(counts)
    active = counts > 0
    alpha = jnp.asarray(alpha)
    n_clusters = jnp.sum(active)
    log_sizes = jnp.where(active, gammaln(jnp.where(active, counts, 1).astype(alpha.dtype)), 0.0)
    return n_clusters * jnp.log(alpha) + gammaln(alpha) - gammaln(alpha + n_points) + jnp.sum(log_sizes)


def cluster_stats(family: ComponentFamily, data: jax.Array, assignments: jax.Array, max_clusters: int) -> Any:
    """Sufficient statistics of every slot, summed exactly from the points.

    Parameters
    ----------
    family : ComponentFamily
        Family with ``point_stats``.
    data : jax.Array (N, D)
        Points.
    assignments : jax.Array int (N,)
        Slot of each point.
    max_clusters : int
        Number of slots K_max.

    Returns
    -------
    pytree
        Statistics with leading axis K_max.
    """
    per_point = jax.vmap(family.point_stats)(data)
    return jax.tree_util.tree_map(
        lambda leaf: segment_sum(leaf, assignments, num_segments=max_clusters), per_point
    )


def _sample_slot_params(family: ComponentFamily, rng_key: jax.Array, stats: Any, n_slots: int) -> Any:
    """One parameter draw per slot: from the posterior given the slot's statistics when the family
    can, else from G0. Draws are indexed by slot, so they do not depend on K_max."""
    if stats is not None and family.sample_posterior is not None:
        return family.sample_posterior(rng_key, stats)
    return family.sample_base(rng_key, (n_slots,))


def _max_and_first_free(logits: jax.Array, free: jax.Array) -> tuple[jax.Array, jax.Array]:
    """max(logits) and the first index where ``free`` holds, in one variadic reduction."""
    size = logits.shape[0]
    candidates = jnp.where(free, jnp.arange(size, dtype=jnp.int32), size)

    def combine(left, right):
        return jnp.maximum(left[0], right[0]), jnp.minimum(left[1], right[1])

    initial = (jnp.asarray(-jnp.inf, logits.dtype), jnp.asarray(size, jnp.int32))
    return jax.lax.reduce((logits, candidates), initial, combine, (0,))


def _draw_index(logits: jax.Array, top: jax.Array, uniform: jax.Array, upper: jax.Array) -> jax.Array:
    """Inverse-CDF draw from softmax(logits) with one uniform in (0, 1]; ``top`` = max(logits).

    The cumulative sums come from a product with the upper-triangular matrix of ones ``upper``:
    every column accumulates in the same order, so they never decrease and a zero-probability
    entry repeats its predecessor exactly; it can never be selected. The index is the number of
    cumulative sums below the threshold, counted with a second product (cheaper on CPU than a
    reduction).
    """
    cumulative = jnp.matmul(jnp.exp(logits - top), upper, precision="highest")
    below = (cumulative < uniform * cumulative[-1]).astype(logits.dtype)
    return jnp.matmul(below, jnp.ones_like(below), precision="highest").astype(jnp.int32)


def _upper_ones(size: int, dtype) -> jax.Array:
    index = jnp.arange(size)
    return (index[:, None] <= index[None, :]).astype(dtype)


def _take_row(tree: Any, index: jax.Array) -> Any:
    return jax.tree_util.tree_map(lambda leaf: leaf[index], tree)


def _set_row(tree: Any, index: jax.Array, row: Any) -> Any:
    return jax.tree_util.tree_map(lambda leaf, value: leaf.at[index].set(value), tree, row)


def _concat_rows(*trees: Any) -> Any:
    return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves, axis=0), *trees)


def _select_rows(mask: jax.Array, new: Any, old: Any) -> Any:
    def select(new_leaf, old_leaf):
        return jnp.where(mask.reshape(mask.shape + (1,) * (old_leaf.ndim - 1)), new_leaf, old_leaf)

    return jax.tree_util.tree_map(select, new, old)


# ----------------------------------------------------------------------------------------------
# Sweeps
# ----------------------------------------------------------------------------------------------
def _fresh_candidate_sweep(
    family: ComponentFamily,
    features: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    cache: Any,
    log_new_weight: jax.Array,
    candidate_log_lik: jax.Array,
    candidate_cache: Any,
    uniforms: jax.Array,
    *,
    own_component_is_candidate: bool,
    backend: str = "xla",
):
    """One pass over the points with explicit parameters and fresh candidates (Algorithms 2, 8).

    ``candidate_*`` hold, for every point, the m components it may open a new cluster with:
    Algorithm 8's auxiliary draws from G0 (weight α/m each) or Algorithm 2's single draw from the
    posterior given the point (weight α times the prior predictive, passed as its log-likelihood).
    Row K of the working arrays is a scratch row: always empty, it absorbs writes that must go
    nowhere and is the "first free slot" only when every slot is taken.

    ``backend`` "numba" (families with the dot-product form only) runs the same updates, with the
    same uniforms, in a compiled loop on the host (:func:`_numba_fresh_sweep`).

    Returns the new assignments (N,), counts (K,), the origin of every slot's parameters
    (its old slot k, or K + i·m + j for candidate j of point i) and the overflow flag.
    """
    if backend == "numba" and family.likelihood_cache is not None:
        return _numba_fresh_sweep(features, assignments, counts, cache, log_new_weight, candidate_log_lik,
                                  candidate_cache, uniforms, own_component_is_candidate)
    n_slots = counts.shape[0]
    n_candidates = candidate_log_lik.shape[1]
    dtype = features.dtype
    rows = jnp.arange(n_slots + 1)
    scratch = n_slots
    upper = _upper_ones(n_slots + 1 + n_candidates, dtype)
    first_candidate = jnp.arange(n_candidates) == 0
    not_a_slot = jnp.zeros((n_candidates,), bool)
    score_all = jax.vmap(family.cached_log_likelihood, in_axes=(0, None))

    def update_point(carry, inputs):
        counts, cache, origin, overflow = carry
        index, label, point, cand_log_lik, cand_cache, uniform = inputs
        was_here = rows == label
        counts = counts - was_here
        log_lik = score_all(cache, point)
        log_weights = jnp.where(counts > 0, jnp.log(counts) + log_lik, -jnp.inf)
        cand_weights = log_new_weight + cand_log_lik
        if own_component_is_candidate:
            # Neal (2000) Alg. 8: if x_i was alone, its φ is the first auxiliary component.
            singleton = counts[label] == 0
            log_weights = jnp.where(was_here & singleton, log_new_weight + log_lik, log_weights)
            cand_weights = jnp.where(first_candidate & singleton, -jnp.inf, cand_weights)
        logits = jnp.concatenate([log_weights, cand_weights])
        top, first_free = _max_and_first_free(logits, jnp.concatenate([counts == 0, not_a_slot]))
        choice = _draw_index(logits, top, uniform, upper)
        opens = choice > scratch
        overflow_now = opens & (first_free == scratch)
        slot = jnp.where(opens, jnp.where(overflow_now, label, first_free), choice)
        candidate = jnp.clip(choice - scratch - 1, 0, n_candidates - 1)
        target = jnp.where(opens & ~overflow_now, first_free, scratch)
        cache = _set_row(cache, target, _take_row(cand_cache, candidate))
        origin = origin.at[target].set(n_slots + index * n_candidates + candidate)
        counts = counts + (rows == slot)
        return (counts, cache, origin, overflow | overflow_now), slot

    carry = (
        jnp.concatenate([counts.astype(dtype), jnp.zeros((1,), dtype)]),
        _concat_rows(cache, _take_row(cache, jnp.arange(1))),
        jnp.arange(n_slots + 1, dtype=jnp.int32),
        jnp.zeros((), bool),
    )
    inputs = (
        jnp.arange(features.shape[0], dtype=jnp.int32),
        assignments,
        features,
        candidate_log_lik,
        candidate_cache,
        uniforms,
    )
    (counts, _, origin, overflow), new_assignments = jax.lax.scan(update_point, carry, inputs)
    return new_assignments, counts[:-1].astype(jnp.int32), origin[:-1], overflow


def _reuse_sweep(
    family: ComponentFamily,
    rows_cache: Any,
    features: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    n_pool: int,
    n_supply: int,
    log_new_weight: jax.Array,
    uniforms: jax.Array,
    positions: jax.Array,
    backend: str,
):
    """One pass of Algorithm 8 whose auxiliary components persist from point to point.

    The "ReUse" scheme of Favaro & Teh (2013, §5): the m auxiliary components form a pool that
    starts as fresh draws from G0; when x_i leaves a cluster it was alone in, that cluster's φ
    replaces a uniformly chosen pool member; when x_i picks a pool member, that member becomes a
    cluster and the next fresh G0 draw joins the pool in its place. Each point update is a Gibbs
    step on (z_i, pool) that leaves the posterior (with the pool i.i.d. G0) invariant, and only one
    G0 draw per new cluster is needed instead of m per point.

    Rows of ``rows_cache`` (their parameters are fixed during the sweep; only labels move): the m
    initial pool draws, then the K slots, then S supply draws from G0, then one scratch row that
    stays empty. The pool is a position 0..m-1 per row (-1 outside the pool), so no parameters are
    copied and "a uniformly chosen member" is the one at a uniform position. Needing more than S
    supply draws, or ending with more than K occupied rows, sets the overflow flag.

    ``backend`` "xla" computes log F(x_i | φ_r) for every point and row before the sweep (rows are
    fixed, so this is one batched product) and runs the points in a ``lax.scan``; "numba" runs
    the same updates, with the same uniforms and positions, in a compiled loop on the host
    (:func:`_numba_reuse_sweep`) that scores a point only against the rows it may join (the
    clusters and the pool) when the family has the dot-product form, else reads the table.

    Returns the row of every point (N,), the final counts per row (R,) and the overflow flag.
    """
    dtype = features.dtype
    row_labels = assignments + n_pool
    initial_counts = _reuse_initial_counts(counts, n_pool, n_supply, dtype)
    if backend == "numba" and family.likelihood_cache is not None:
        return _numba_reuse_sweep(rows_cache, features, None, row_labels, initial_counts, uniforms, positions,
                                  log_new_weight, n_pool, n_supply)
    point_log_lik = jax.vmap(
        jax.vmap(family.cached_log_likelihood, in_axes=(0, None)), in_axes=(None, 0)
    )(rows_cache, features)
    if backend == "numba":
        return _numba_reuse_sweep(None, None, point_log_lik, row_labels, initial_counts, uniforms, positions,
                                  log_new_weight, n_pool, n_supply)
    n_rows = point_log_lik.shape[1]
    first_supply_row = n_rows - n_supply - 1
    rows = jnp.arange(n_rows)
    upper = _upper_ones(n_rows, point_log_lik.dtype)

    def update_point(carry, inputs):
        counts, pool_position, n_supplied, overflow = carry
        label, log_lik, uniform, position = inputs
        was_here = rows == label
        counts = counts - was_here
        emptied = was_here & (counts == 0)
        # ReUse step 1: an emptied cluster's φ replaces the pool member at a uniform position.
        singleton = counts[label] == 0
        discarded = (pool_position == position) & singleton
        pool_position = jnp.where(emptied, position, jnp.where(discarded, -1, pool_position))
        is_pool = pool_position >= 0
        logits = jnp.where(counts > 0, jnp.log(counts), jnp.where(is_pool, log_new_weight, -jnp.inf))
        logits = logits + log_lik
        choice = _draw_index(logits, jnp.max(logits), uniform, upper)
        # ReUse step 2: a chosen pool member becomes a cluster; the next fresh draw takes its place.
        chosen_position = pool_position[choice]
        opens = chosen_position >= 0
        refill = opens & (n_supplied < n_supply)
        pool_position = jnp.where(rows == choice, -1, pool_position)
        pool_position = jnp.where(refill & (rows == first_supply_row + n_supplied), chosen_position, pool_position)
        counts = counts + (rows == choice)
        return (counts, pool_position, n_supplied + refill, overflow | (opens & ~refill)), choice

    carry = (
        initial_counts,
        jnp.where(rows < n_pool, rows, -1).astype(jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
    )
    inputs = (row_labels, point_log_lik, uniforms, positions)
    (counts, _, _, overflow), row_assignments = jax.lax.scan(update_point, carry, inputs)
    return row_assignments, counts, overflow


def _reuse_initial_counts(counts: jax.Array, n_pool: int, n_supply: int, dtype) -> jax.Array:
    """Counts per row (pool, slots, supply, scratch) at the start of a ReUse sweep."""
    return jnp.concatenate([jnp.zeros((n_pool,), dtype), counts.astype(dtype), jnp.zeros((n_supply + 1,), dtype)])


# ----------------------------------------------------------------------------------------------
# CPU fast path: the sequential point loop compiled by numba, called through pure_callback
# ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _numba_sweep_kernels():
    from numba import njit, prange

    # fastmath: only reassociation and contraction, so that the feature dot products vectorise;
    # infinities keep their meaning (rows of weight zero have logit -inf).
    @njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def _inverse_cdf_draw(logits, n_live, cumulative, uniform):
        """Index drawn from softmax(logits[:n_live]) with one uniform, as _draw_index."""
        top = logits[:n_live].max()
        cumulative[0] = np.exp(logits[0] - top)
        for j in range(1, n_live):
            cumulative[j] = cumulative[j - 1] + np.exp(logits[j] - top)
        threshold = uniform * cumulative[n_live - 1]
        j = 0
        while j < n_live - 1 and cumulative[j] < threshold:
            j += 1
        return j

    @njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def reuse_sweep_kernel(rows_cache, features, log_lik_table, row_labels, initial_counts, uniforms, positions,
                           log_new_weight, n_pool, n_supply, use_table):
        n_chains, n_rows, n_features = rows_cache.shape
        n_points = row_labels.shape[1]
        dtype = uniforms.dtype
        first_supply_row = n_rows - n_supply - 1
        # log n for n = 1..N, in the data's precision (the XLA path takes log of float counts).
        log_count = np.log(np.arange(1, n_points + 1).astype(dtype))
        row_assignments = np.empty((n_chains, n_points), np.int32)
        final_counts = np.empty((n_chains, n_rows), dtype)
        overflow = np.zeros(n_chains, np.bool_)
        for chain in prange(n_chains):
            cache = rows_cache[chain]
            chain_features = features[chain % features.shape[0]]  # one shared copy or one per chain
            counts = initial_counts[chain].astype(np.int64)
            pool_position = np.full(n_rows, -1, np.int32)
            for row in range(n_pool):
                pool_position[row] = row
            # Rows of positive weight (clusters and pool members) in increasing order; the others
            # add nothing to the cumulative sums, so the draw only visits (and scores) these. The
            # list is rebuilt when a cluster is born or dies.
            live = np.empty(n_rows, np.int64)
            n_live = 0
            stale = True
            logits = np.empty(n_rows, dtype)
            cumulative = np.empty(n_rows, dtype)
            n_supplied = 0
            for i in range(n_points):
                label = row_labels[chain, i]
                counts[label] -= 1
                if counts[label] == 0:
                    # ReUse step 1: the emptied cluster's φ replaces the pool member at a uniform
                    # position.
                    position = positions[chain, i]
                    for row in range(n_rows):
                        if pool_position[row] == position:
                            pool_position[row] = -1
                    pool_position[label] = position
                    stale = True
                if stale:
                    n_live = 0
                    for row in range(n_rows):
                        if counts[row] > 0 or pool_position[row] >= 0:
                            live[n_live] = row
                            n_live += 1
                    stale = False
                point = chain_features[i]
                for j in range(n_live):
                    row = live[j]
                    if use_table:
                        log_lik = log_lik_table[chain, i, row]
                    else:
                        # log F(x_i | φ_row) = cache_row · features_i (the families' dot form).
                        log_lik = cache[row, 0] * point[0]
                        for feature in range(1, n_features):
                            log_lik += cache[row, feature] * point[feature]
                    if counts[row] > 0:
                        logits[j] = log_count[counts[row] - 1] + log_lik
                    else:
                        logits[j] = log_new_weight[chain] + log_lik
                choice = live[_inverse_cdf_draw(logits, n_live, cumulative, uniforms[chain, i])]
                # ReUse step 2: a chosen pool member becomes a cluster; the next fresh draw takes
                # its place.
                chosen_position = pool_position[choice]
                pool_position[choice] = -1
                if chosen_position >= 0:
                    stale = True
                    if n_supplied < n_supply:
                        pool_position[first_supply_row + n_supplied] = chosen_position
                        n_supplied += 1
                    else:
                        overflow[chain] = True
                counts[choice] += 1
                row_assignments[chain, i] = choice
            final_counts[chain] = counts.astype(dtype)
        return row_assignments, final_counts, overflow

    @njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def fresh_sweep_kernel(features, assignments, initial_counts, slot_cache, log_new_weight, candidate_log_lik,
                           candidate_cache, uniforms, own_component_is_candidate):
        n_chains, n_slots, n_features = slot_cache.shape
        n_points, n_candidates = candidate_log_lik.shape[1:]
        dtype = uniforms.dtype
        log_count = np.log(np.arange(1, n_points + 1).astype(dtype))
        new_assignments = np.empty((n_chains, n_points), np.int32)
        final_counts = np.empty((n_chains, n_slots), np.int32)
        origin = np.empty((n_chains, n_slots), np.int32)
        overflow = np.zeros(n_chains, np.bool_)
        for chain in prange(n_chains):
            cache = slot_cache[chain].copy()
            chain_features = features[chain % features.shape[0]]  # one shared copy or one per chain
            counts = initial_counts[chain].astype(np.int64)
            chain_origin = np.arange(n_slots).astype(np.int32)
            # Entries of positive weight in the order of the XLA path: slots, then candidates.
            live = np.empty(n_slots + n_candidates, np.int64)
            logits = np.empty(n_slots + n_candidates, dtype)
            cumulative = np.empty(n_slots + n_candidates, dtype)
            for i in range(n_points):
                label = assignments[chain, i]
                counts[label] -= 1
                singleton = own_component_is_candidate and counts[label] == 0
                point = chain_features[i]
                n_live = 0
                first_free = n_slots
                for slot in range(n_slots):
                    if counts[slot] > 0 or (singleton and slot == label):
                        log_lik = cache[slot, 0] * point[0]
                        for feature in range(1, n_features):
                            log_lik += cache[slot, feature] * point[feature]
                        if counts[slot] > 0:
                            logits[n_live] = log_count[counts[slot] - 1] + log_lik
                        else:
                            # Neal (2000) Alg. 8: if x_i was alone, its φ is the first auxiliary.
                            logits[n_live] = log_new_weight[chain] + log_lik
                        live[n_live] = slot
                        n_live += 1
                    if counts[slot] == 0 and first_free == n_slots:
                        first_free = slot
                for candidate in range(1 if singleton else 0, n_candidates):
                    logits[n_live] = log_new_weight[chain] + candidate_log_lik[chain, i, candidate]
                    live[n_live] = n_slots + candidate
                    n_live += 1
                choice = live[_inverse_cdf_draw(logits, n_live, cumulative, uniforms[chain, i])]
                slot = choice
                if choice >= n_slots:
                    if first_free == n_slots:
                        overflow[chain] = True
                        slot = label
                    else:
                        slot = first_free
                        candidate = choice - n_slots
                        cache[slot] = candidate_cache[chain, i, candidate]
                        chain_origin[slot] = n_slots + i * n_candidates + candidate
                counts[slot] += 1
                new_assignments[chain, i] = slot
            final_counts[chain] = counts
            origin[chain] = chain_origin
        return new_assignments, final_counts, origin, overflow

    return reuse_sweep_kernel, fresh_sweep_kernel


def _numba_reuse_host(n_pool, n_supply, use_table, rows_cache, features, log_lik_table, row_labels, initial_counts,
                      uniforms, positions, log_new_weight):
    """Host side of the ReUse sweep. Arrays arrive with leading batch (chain) axes, of size 1
    where an argument is shared ("expand_dims"); they are flattened into one chain axis, and the
    shared features are not copied per chain."""
    kernel = _numba_sweep_kernels()[0]
    n_points = row_labels.shape[-1]
    n_rows, n_features = rows_cache.shape[-2:]
    batch = np.broadcast_shapes(
        rows_cache.shape[:-2], row_labels.shape[:-1], initial_counts.shape[:-1], uniforms.shape[:-1],
        positions.shape[:-1], log_new_weight.shape, log_lik_table.shape[:-2],
    )
    dtype = uniforms.dtype

    def per_chain(array, tail, kind):
        return np.ascontiguousarray(np.broadcast_to(array, batch + tail).reshape((math.prod(batch),) + tail), dtype=kind)

    if math.prod(features.shape[:-2]) == 1:
        features = features.reshape((1, n_points, n_features))
    else:
        features = per_chain(features, (n_points, n_features), dtype)
    table_tail = (n_points, n_rows) if use_table else (0, 0)
    row_assignments, final_counts, overflow = kernel(
        per_chain(rows_cache, (n_rows, n_features), dtype),
        np.ascontiguousarray(features, dtype=dtype),
        per_chain(log_lik_table, table_tail, dtype) if use_table else np.zeros((1,) + table_tail, dtype),
        per_chain(row_labels, (n_points,), np.int32),
        per_chain(initial_counts, (n_rows,), dtype),
        per_chain(uniforms, (n_points,), dtype),
        per_chain(positions, (n_points,), np.int32),
        per_chain(log_new_weight, (), dtype),
        n_pool,
        n_supply,
        use_table,
    )
    return (
        row_assignments.reshape(batch + (n_points,)),
        final_counts.reshape(batch + (n_rows,)),
        overflow.reshape(batch),
    )


def _numba_reuse_sweep(rows_cache, features, log_lik_table, row_labels, initial_counts, uniforms, positions,
                       log_new_weight, n_pool, n_supply):
    """The ReUse sweep in numba. With ``log_lik_table`` None the kernel scores each point against
    the rows it may join (``rows_cache`` · features, the dot form of the built-in families) as it
    goes; otherwise it reads the table."""
    n_points = row_labels.shape[0]
    n_rows = initial_counts.shape[0]
    dtype = uniforms.dtype
    use_table = log_lik_table is not None
    shapes = (
        jax.ShapeDtypeStruct((n_points,), jnp.int32),
        jax.ShapeDtypeStruct((n_rows,), dtype),
        jax.ShapeDtypeStruct((), jnp.bool_),
    )
    if use_table:
        rows_cache, features = jnp.zeros((n_rows, 0), dtype), jnp.zeros((n_points, 0), dtype)
    else:
        log_lik_table = jnp.zeros((0, 0), dtype)
    # "expand_dims": a vmap over chains becomes one call with a leading chain axis (size 1 for
    # shared arguments such as the data), which the kernel spreads over numba's threads.
    return jax.pure_callback(
        partial(_numba_reuse_host, n_pool, n_supply, use_table),
        shapes,
        rows_cache,
        features.astype(dtype),
        log_lik_table,
        row_labels.astype(jnp.int32),
        initial_counts,
        uniforms,
        positions,
        jnp.asarray(log_new_weight, dtype),
        vmap_method="expand_dims",
    )


def _numba_fresh_host(own_component_is_candidate, features, assignments, counts, slot_cache, log_new_weight,
                      candidate_log_lik, candidate_cache, uniforms):
    """Host side of the fresh-candidate sweep (batch axes handled as in :func:`_numba_reuse_host`)."""
    kernel = _numba_sweep_kernels()[1]
    n_points, n_features = features.shape[-2:]
    n_slots = counts.shape[-1]
    n_candidates = candidate_log_lik.shape[-1]
    batch = np.broadcast_shapes(
        assignments.shape[:-1], counts.shape[:-1], slot_cache.shape[:-2], log_new_weight.shape,
        candidate_log_lik.shape[:-2], candidate_cache.shape[:-3], uniforms.shape[:-1],
    )
    dtype = uniforms.dtype

    def per_chain(array, tail, kind):
        return np.ascontiguousarray(np.broadcast_to(array, batch + tail).reshape((math.prod(batch),) + tail), dtype=kind)

    if math.prod(features.shape[:-2]) == 1:
        features = np.ascontiguousarray(features.reshape((1, n_points, n_features)), dtype=dtype)
    else:
        features = per_chain(features, (n_points, n_features), dtype)
    new_assignments, final_counts, origin, overflow = kernel(
        features,
        per_chain(assignments, (n_points,), np.int32),
        per_chain(counts, (n_slots,), np.int32),
        per_chain(slot_cache, (n_slots, n_features), dtype),
        per_chain(log_new_weight, (), dtype),
        per_chain(candidate_log_lik, (n_points, n_candidates), dtype),
        per_chain(candidate_cache, (n_points, n_candidates, n_features), dtype),
        per_chain(uniforms, (n_points,), dtype),
        own_component_is_candidate,
    )
    return (
        new_assignments.reshape(batch + (n_points,)),
        final_counts.reshape(batch + (n_slots,)),
        origin.reshape(batch + (n_slots,)),
        overflow.reshape(batch),
    )


def _numba_fresh_sweep(features, assignments, counts, cache, log_new_weight, candidate_log_lik, candidate_cache,
                       uniforms, own_component_is_candidate):
    """The fresh-candidate sweep in numba: each point is scored only against the occupied slots
    (``cache`` · features) and its own candidates; an opened slot takes its candidate's cache."""
    n_points = assignments.shape[0]
    n_slots = counts.shape[0]
    dtype = uniforms.dtype
    shapes = (
        jax.ShapeDtypeStruct((n_points,), jnp.int32),
        jax.ShapeDtypeStruct((n_slots,), jnp.int32),
        jax.ShapeDtypeStruct((n_slots,), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.bool_),
    )
    return jax.pure_callback(
        partial(_numba_fresh_host, bool(own_component_is_candidate)),
        shapes,
        features.astype(dtype),
        assignments.astype(jnp.int32),
        counts.astype(jnp.int32),
        cache.astype(dtype),
        jnp.asarray(log_new_weight, dtype),
        candidate_log_lik.astype(dtype),
        candidate_cache.astype(dtype),
        uniforms,
        vmap_method="expand_dims",
    )


def _compact_rows(row_assignments: jax.Array, row_counts: jax.Array, n_slots: int):
    """Map the occupied rows to slots 0..K-1 in row order; overflow if more than K are occupied."""
    occupied = row_counts > 0
    overflow = jnp.sum(occupied) > n_slots
    rank = jnp.cumsum(occupied) - 1
    order = jnp.nonzero(occupied, size=n_slots, fill_value=row_counts.shape[0] - 1)[0]
    assignments = jnp.clip(rank[row_assignments], 0, n_slots - 1).astype(jnp.int32)
    return assignments, row_counts[order].astype(jnp.int32), order, overflow


def _collapsed_sweep(
    family: ComponentFamily,
    data: jax.Array,
    assignments: jax.Array,
    counts: jax.Array,
    stats: Any,
    log_alpha: jax.Array,
    prior_log_pred: jax.Array,
    uniforms: jax.Array,
):
    """One pass of Neal (2000) Algorithm 3 over the points (parameters integrated out)."""
    n_slots = counts.shape[0]
    dtype = data.dtype
    rows = jnp.arange(n_slots + 1)
    scratch = n_slots
    upper = _upper_ones(n_slots + 2, dtype)
    point_stats = jax.vmap(family.point_stats)(data)
    score_all = jax.vmap(family.cached_log_predictive, in_axes=(0, None))
    stats = _concat_rows(stats, jax.tree_util.tree_map(lambda leaf: jnp.zeros_like(leaf[:1]), stats))
    terms = jax.vmap(family.predictive_terms)(stats)
    not_a_slot = jnp.zeros((1,), bool)

    def update_point(carry, inputs):
        counts, stats, terms, overflow = carry
        label, point, own_stats, prior_log_pred_i, uniform = inputs
        counts = counts - (rows == label)
        emptied = counts[label] == 0
        # Remove x_i from its cluster; an emptied slot gets exact zeros (no rounding residue).
        removed = jax.tree_util.tree_map(
            lambda total, own: jnp.where(emptied, jnp.zeros_like(own), total - own),
            _take_row(stats, label),
            own_stats,
        )
        stats = _set_row(stats, label, removed)
        terms = _set_row(terms, label, family.predictive_terms(removed))
        log_pred = score_all(terms, point)
        log_weights = jnp.where(counts > 0, jnp.log(counts) + log_pred, -jnp.inf)
        logits = jnp.concatenate([log_weights, (log_alpha + prior_log_pred_i)[None]])
        top, first_free = _max_and_first_free(logits, jnp.concatenate([counts == 0, not_a_slot]))
        choice = _draw_index(logits, top, uniform, upper)
        opens = choice > scratch
        overflow_now = opens & (first_free == scratch)
        slot = jnp.where(opens, jnp.where(overflow_now, label, first_free), choice)
        added = jax.tree_util.tree_map(jnp.add, _take_row(stats, slot), own_stats)
        stats = _set_row(stats, slot, added)
        terms = _set_row(terms, slot, family.predictive_terms(added))
        counts = counts + (rows == slot)
        return (counts, stats, terms, overflow | overflow_now), slot

    carry = (
        jnp.concatenate([counts.astype(dtype), jnp.zeros((1,), dtype)]),
        stats,
        terms,
        jnp.zeros((), bool),
    )
    inputs = (assignments, data, point_stats, prior_log_pred, uniforms)
    (counts, _, _, overflow), new_assignments = jax.lax.scan(update_point, carry, inputs)
    return new_assignments, counts[:-1].astype(jnp.int32), overflow


def _independence_update(
    family: ComponentFamily,
    rng_key: jax.Array,
    params: Any,
    features: jax.Array,
    assignments: jax.Array,
    n_proposals: int,
) -> Any:
    """Independence Metropolis–Hastings for every slot's φ with G0 proposals (DM05 §4.2).

    With proposals from the prior, the acceptance ratio is the likelihood ratio
    Π_{i in k} F(x_i | φ') / F(x_i | φ_k).
    """
    n_slots = jax.tree_util.tree_leaves(params)[0].shape[0]

    def slot_log_lik(params):
        cache = jax.vmap(family.component_cache)(params)
        per_point = jax.vmap(lambda point, slot: family.cached_log_likelihood(_take_row(cache, slot), point))(
            features, assignments
        )
        return segment_sum(per_point, assignments, num_segments=n_slots)

    def propose(carry, proposal_index):
        params, current = carry
        key_proposal, key_accept = jax.random.split(jax.random.fold_in(rng_key, proposal_index))
        proposal = family.sample_base(key_proposal, (n_slots,))
        proposed = slot_log_lik(proposal)
        log_uniform = jnp.log(jax.random.uniform(key_accept, (n_slots,), dtype=features.dtype))
        accept = log_uniform < proposed - current
        return (_select_rows(accept, proposal, params), jnp.where(accept, proposed, current)), None

    (params, _), _ = jax.lax.scan(propose, (params, slot_log_lik(params)), jnp.arange(n_proposals))
    return params


def _log_joint(family: ComponentFamily, state_parts, features: jax.Array, n_points: int) -> jax.Array:
    assignments, counts, params, stats, alpha = state_parts
    log_prior = log_crp_prior(counts, alpha, n_points)
    active = counts > 0
    if family.has_marginal:
        per_slot = jax.vmap(family.log_marginal)(stats)
        return log_prior + jnp.sum(jnp.where(active, per_slot, 0.0))
    cache = jax.vmap(family.component_cache)(params)
    log_lik = jnp.sum(
        jax.vmap(lambda point, slot: family.cached_log_likelihood(_take_row(cache, slot), point))(
            features, assignments
        )
    )
    total = log_prior + log_lik
    if family.log_base_density is not None:
        total = total + jnp.sum(jnp.where(active, jax.vmap(family.log_base_density)(params), 0.0))
    return total


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------
def _check_family(family: Any) -> ComponentFamily:
    if not isinstance(family, ComponentFamily):
        raise TypeError(f"family: expected a ComponentFamily, got {type(family).__name__}")
    return family


def _check_algorithm(family: ComponentFamily, algorithm: Any) -> str:
    algorithm = check_choice("algorithm", algorithm, ALGORITHMS)
    if algorithm == "collapsed" and not family.has_marginal:
        raise ValueError(
            f"algorithm: 'collapsed' needs a family with point_stats and log_marginal; "
            f"{family.name!r} has none, use 'auxiliary'"
        )
    if algorithm == "conjugate" and not family.is_conjugate:
        raise ValueError(
            f"algorithm: 'conjugate' needs a family with a marginal likelihood and posterior "
            f"sampling; {family.name!r} lacks them, use 'auxiliary'"
        )
    return algorithm


def init(
    rng_key: jax.Array,
    data: Any,
    family: ComponentFamily,
    *,
    algorithm: str = "auxiliary",
    max_clusters: int,
    alpha: float,
    assignments: Any = None,
) -> GibbsState:
    """Build a Gibbs state from initial cluster labels.

    Parameters
    ----------
    rng_key : jax.Array
        Key for the initial component parameters (drawn from their posterior when the family has
        one, else from G0).
    data : array_like (N, D)
        Points; checked by the family (finite values, right number of features, ...).
    family : ComponentFamily
        Component family.
    algorithm : {"collapsed", "conjugate", "auxiliary"}
        Neal's Algorithm 3, 2 or 8; decides whether parameters are kept.
    max_clusters : int
        Capacity K_max >= 1.
    alpha : float
        Initial concentration α > 0.
    assignments : array_like of int (N,), optional
        Initial labels (any non-negative integers; relabelled to slots 0..K-1 in order of first
        appearance). Default: all points in one cluster.

    Returns
    -------
    GibbsState

    Raises
    ------
    ValueError
        If an argument is invalid (the message starts with its name).
    """
    family = _check_family(family)
    algorithm = _check_algorithm(family, algorithm)
    max_clusters = check_int("max_clusters", max_clusters, minimum=1)
    alpha = check_real("alpha", alpha, low=0.0, low_open=True)
    checker = family.check_data
    data = checker("data", data) if checker is not None else np.asarray(data)
    n_points = data.shape[0]
    if assignments is None:
        labels = np.zeros(n_points, dtype=np.int64)
    else:
        labels = as_index_array("assignments", assignments)
        if labels.shape[0] != n_points:
            raise ValueError(f"assignments: expected {n_points} labels (one per point), got {labels.shape[0]}")
        _, first_seen, labels = np.unique(labels, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first_seen))
        labels = order[labels]
    n_used = int(labels.max()) + 1
    if n_used > max_clusters:
        raise ValueError(f"assignments: uses {n_used} clusters, more than max_clusters={max_clusters}")
    # The data's dtype is the working precision, as in the step (float32 points under x64 stay
    # float32; integer points take the default float): statistics and α are scan carries there,
    # so they must start in the dtype the step computes them in.
    dtype = jnp.result_type(data, float)
    return _init_arrays(
        family,
        algorithm != "collapsed",
        max_clusters,
        rng_key,
        jnp.asarray(data, dtype=dtype),
        jnp.asarray(labels, dtype=jnp.int32),
        jnp.asarray(alpha, dtype=dtype),
    )


def _initial_state(
    family: ComponentFamily,
    with_params: bool,
    max_clusters: int,
    rng_key: jax.Array,
    data: jax.Array,
    slots: jax.Array,
    alpha: jax.Array,
) -> GibbsState:
    stats = cluster_stats(family, data, slots, max_clusters) if family.point_stats is not None else None
    return GibbsState(
        assignments=slots,
        counts=jnp.zeros((max_clusters,), jnp.int32).at[slots].add(1),
        params=_sample_slot_params(family, rng_key, stats, max_clusters) if with_params else None,
        stats=stats,
        alpha=alpha,
        overflow=jnp.zeros((), bool),
    )


# Compiled once per family and shape: drawing the initial parameters runs rejection loops.
_init_arrays = jax.jit(_initial_state, static_argnums=(0, 1, 2))


def grow_capacity(state: GibbsState, max_clusters: int) -> GibbsState:
    """Pad a state (or a batch of states, chains first) to a larger capacity K_max.

    New slots are empty; their parameters copy slot 0 (any finite value will do, they are never
    scored while empty) and their statistics are zero. The sticky overflow flag is kept.

    Parameters
    ----------
    state : GibbsState
        State with capacity K <= ``max_clusters``; leading batch axes are allowed.
    max_clusters : int
        New capacity.

    Returns
    -------
    GibbsState
    """
    current = state.counts.shape[-1]
    max_clusters = check_int("max_clusters", max_clusters, minimum=current)
    extra = max_clusters - current
    batch = state.counts.ndim - 1

    def pad(leaf, zero):
        widths = [(0, 0)] * leaf.ndim
        widths[batch] = (0, extra)
        if zero:
            return jnp.pad(leaf, widths)
        first = jax.lax.slice_in_dim(leaf, 0, 1, axis=batch)
        repeated = jnp.repeat(first, extra, axis=batch)
        return jnp.concatenate([leaf, repeated], axis=batch)

    return state._replace(
        counts=pad(state.counts, True),
        params=jax.tree_util.tree_map(lambda leaf: pad(leaf, False), state.params),
        stats=jax.tree_util.tree_map(lambda leaf: pad(leaf, True), state.stats),
    )


def build_kernel(
    family: ComponentFamily,
    algorithm: str = "auxiliary",
    *,
    n_auxiliary: int = 3,
    reuse_auxiliary: bool = False,
    alpha_prior: GammaPrior | None = None,
    n_param_proposals: int = 5,
    n_split_merge: int = 0,
    backend: str = "auto",
) -> Callable[[jax.Array, GibbsState, jax.Array], tuple[GibbsState, GibbsInfo]]:
    """Build a pure Gibbs step: one sweep over the points, split–merge moves, parameters, then α.

    Parameters
    ----------
    family : ComponentFamily
        Component family (see :mod:`zoo.dirichlet.families`).
    algorithm : {"collapsed", "conjugate", "auxiliary"}
        Neal (2000) Algorithm 3, 2 or 8.
    n_auxiliary : int
        m >= 1, the number of auxiliary components of Algorithm 8 (DM05 use 8).
    reuse_auxiliary : bool
        Algorithm 8 only: keep the auxiliary components from one point to the next (Favaro & Teh
        2013, "ReUse") instead of drawing m fresh ones per point. Both are exact; reuse needs
        about one draw from G0 per new cluster instead of m per point, which is most of the cost
        of Algorithm 8 when components have many parameters.
    alpha_prior : GammaPrior, optional
        If given, α is resampled after every sweep by the Escobar–West update (DM05 §4.3,
        App. B); otherwise it stays fixed.
    n_param_proposals : int
        Independence-sampler proposals per cluster and step, for Algorithm 8 with a family that
        cannot sample its posterior (DM05 §4.2).
    n_split_merge : int
        Split–merge Metropolis–Hastings moves per step, after the sweep (0: none; see the module
        docstring). Needs the family's marginal likelihoods, and for Algorithms 2 and 8 its
        posterior sampler (φ is redrawn from it after the moves).
    backend : {"auto", "xla", "numba"}
        How the sequential loop over the points runs: ``"xla"`` as a ``lax.scan`` (any JAX
        backend), ``"numba"`` as a compiled loop on the host called through
        :func:`jax.pure_callback` (CPU; several times faster there). ``"auto"`` picks numba on the
        CPU backend when numba is installed (see :func:`inference.sparse.resolve_backend`). Both
        use the same random numbers and make the same decisions, so they give the same chain up
        to floating-point rounding. Used by Algorithms 2 and 8 (fresh or reused auxiliaries)
        when the family has the dot-product form of :mod:`zoo.dirichlet.families` (the built-in
        ones), and by Algorithm 8 with reused auxiliaries for any family; Algorithm 3 always runs
        its loop in XLA.

    Returns
    -------
    callable
        ``step(rng_key, state, data) -> (GibbsState, GibbsInfo)``, pure and jittable; ``data``
        is the (N, D) array of points (an argument, so one compiled step serves any data of the
        same shape). Wrap it in ``jax.jit`` and ``jax.vmap`` over chains as needed.

    Raises
    ------
    ValueError
        If an argument is invalid or the family lacks what the algorithm needs.

    Examples
    --------
    >>> import jax, numpy as np
    >>> from zoo.dirichlet.families import normal_gamma
    >>> data = np.random.default_rng(0).normal(size=(20, 2))
    >>> family = normal_gamma(2)
    >>> step = jax.jit(build_kernel(family, "collapsed"))
    >>> state = init(jax.random.key(0), data, family, algorithm="collapsed", max_clusters=8, alpha=1.0)
    >>> state, info = step(jax.random.key(1), state, data)
    >>> int(info.n_clusters) >= 1
    True
    """
    family = _check_family(family)
    algorithm = _check_algorithm(family, algorithm)
    n_auxiliary = check_int("n_auxiliary", n_auxiliary, minimum=1)
    n_param_proposals = check_int("n_param_proposals", n_param_proposals, minimum=1)
    n_split_merge = check_int("n_split_merge", n_split_merge, minimum=0)
    if n_split_merge and not (family.has_marginal and (algorithm == "collapsed" or family.has_posterior)):
        raise ValueError(f"n_split_merge: split–merge moves need the marginal likelihoods of the family "
                         f"{family.name!r} (point_stats, log_marginal, log_predictive) and, for algorithm "
                         f"{algorithm!r}, its posterior sampler")
    if not isinstance(reuse_auxiliary, (bool, np.bool_)):
        raise TypeError(f"reuse_auxiliary: expected a bool, got {type(reuse_auxiliary).__name__}")
    if reuse_auxiliary and algorithm != "auxiliary":
        raise ValueError(f"reuse_auxiliary: only applies to algorithm='auxiliary', got {algorithm!r}")
    if alpha_prior is not None and not isinstance(alpha_prior, GammaPrior):
        raise TypeError(f"alpha_prior: expected a GammaPrior or None, got {type(alpha_prior).__name__}")
    config = _KernelConfig(
        family=family,
        algorithm=algorithm,
        n_auxiliary=n_auxiliary,
        reuse_auxiliary=bool(reuse_auxiliary),
        alpha_prior=alpha_prior,
        n_param_proposals=n_param_proposals,
        n_split_merge=n_split_merge,
        backend=resolve_backend(backend),
    )
    return partial(_step, config)


class _KernelConfig(NamedTuple):
    family: ComponentFamily
    algorithm: str
    n_auxiliary: int
    reuse_auxiliary: bool
    alpha_prior: GammaPrior | None
    n_param_proposals: int
    n_split_merge: int
    backend: str


def _sweep(config: _KernelConfig, rng_key: jax.Array, state: GibbsState, data: jax.Array, features: jax.Array):
    """Reassign every point once. Returns assignments, counts, parameters or None, overflow."""
    family = config.family
    n_points = data.shape[0]
    n_slots = state.counts.shape[0]
    alpha = state.alpha
    key_uniforms, key_candidates, key_positions, key_supply = jax.random.split(rng_key, 4)
    uniforms = 1.0 - jax.random.uniform(key_uniforms, (n_points,), dtype=data.dtype)  # in (0, 1]

    if config.algorithm == "collapsed":
        empty = family.empty_stats(data[0])
        prior_log_pred = jax.vmap(family.log_predictive, in_axes=(None, 0))(empty, data)
        assignments, counts, overflow = _collapsed_sweep(
            family, data, state.assignments, state.counts, state.stats, jnp.log(alpha), prior_log_pred, uniforms
        )
        return (*_keep_partition_on_overflow(overflow, state, assignments, counts), None, overflow)

    n_auxiliary = config.n_auxiliary
    if config.algorithm == "auxiliary" and config.reuse_auxiliary:
        n_supply = n_slots
        pool = family.sample_base(key_candidates, (n_auxiliary,))
        supply = family.sample_base(key_supply, (n_supply,))
        sources = _concat_rows(pool, state.params, supply, _take_row(state.params, jnp.arange(1)))
        positions = jax.random.randint(key_positions, (n_points,), 0, n_auxiliary, dtype=jnp.int32)
        row_assignments, row_counts, overflow = _reuse_sweep(
            family,
            jax.vmap(family.component_cache)(sources),
            features,
            state.assignments,
            state.counts,
            n_auxiliary,
            n_supply,
            jnp.log(alpha) - jnp.log(float(n_auxiliary)),  # α / m per auxiliary component
            uniforms,
            positions,
            config.backend,
        )
        assignments, counts, origin, too_many = _compact_rows(row_assignments, row_counts, n_slots)
        overflow = overflow | too_many
    else:
        cache = jax.vmap(family.component_cache)(state.params)
        if config.algorithm == "auxiliary":
            candidates = family.sample_base(key_candidates, (n_points, n_auxiliary))
            candidate_cache = jax.vmap(jax.vmap(family.component_cache))(candidates)
            candidate_log_lik = jax.vmap(jax.vmap(family.cached_log_likelihood, in_axes=(0, None)))(
                candidate_cache, features
            )
            log_new_weight = jnp.log(alpha) - jnp.log(float(n_auxiliary))  # α / m per auxiliary
        else:
            # Algorithm 2: the new cluster's φ ~ posterior given x_i alone; weight α ∫F dG0.
            empty = family.empty_stats(data[0])
            candidate_log_lik = jax.vmap(family.log_predictive, in_axes=(None, 0))(empty, data)[:, None]
            own_stats = jax.vmap(family.point_stats)(data)
            candidates = jax.tree_util.tree_map(lambda leaf: leaf[:, None], family.sample_posterior(key_candidates, own_stats))
            candidate_cache = jax.vmap(jax.vmap(family.component_cache))(candidates)
            log_new_weight = jnp.log(alpha)
        assignments, counts, origin, overflow = _fresh_candidate_sweep(
            family,
            features,
            state.assignments,
            state.counts,
            cache,
            log_new_weight,
            candidate_log_lik,
            candidate_cache,
            uniforms,
            own_component_is_candidate=config.algorithm == "auxiliary",
            backend=config.backend,
        )
        flat = jax.tree_util.tree_map(lambda leaf: leaf.reshape((-1,) + leaf.shape[2:]), candidates)
        sources = _concat_rows(state.params, flat)
    assignments, counts = _keep_partition_on_overflow(overflow, state, assignments, counts)
    if family.has_posterior:
        return assignments, counts, None, overflow  # every φ is redrawn from its posterior next
    params = _take_row(sources, origin)
    return assignments, counts, _select_rows(~overflow & (counts > 0), params, state.params), overflow


def _keep_partition_on_overflow(overflow, state, assignments, counts):
    """An overflowing sweep is not exact: return the partition the step started from instead."""
    return jnp.where(overflow, state.assignments, assignments), jnp.where(overflow, state.counts, counts)


def _step(
    config: _KernelConfig, rng_key: jax.Array, state: GibbsState, data: jax.Array
) -> tuple[GibbsState, GibbsInfo]:
    family = config.family
    # Partitionable Threefry: the first three keys are those of split(rng_key, 3), so chains without
    # split–merge moves are the same as before the moves existed.
    key_sweep, key_params, key_alpha, key_split_merge = jax.random.split(rng_key, 4)
    data = jnp.asarray(data)
    n_points = data.shape[0]
    n_slots = state.counts.shape[0]
    features = jax.vmap(family.prepare_point)(data)

    assignments, counts, params, overflow = _sweep(config, key_sweep, state, data, features)
    split_merge_accepted = jnp.zeros((), jnp.int32)
    if config.n_split_merge and n_points > 1:
        assignments, counts, moves, split_overflow = split_merge_moves(
            family, key_split_merge, data, assignments, counts, state.alpha, config.n_split_merge)
        split_merge_accepted = moves.splits_accepted + moves.merges_accepted
        overflow = overflow | split_overflow
        assignments, counts = _keep_partition_on_overflow(overflow, state, assignments, counts)
        split_merge_accepted = jnp.where(overflow, 0, split_merge_accepted)
    stats = cluster_stats(family, data, assignments, n_slots) if family.point_stats is not None else None
    if config.algorithm != "collapsed":
        if family.has_posterior:
            params = family.sample_posterior(key_params, stats)
        else:
            params = _independence_update(
                family, key_params, params, features, assignments, config.n_param_proposals
            )

    new_state, n_clusters, log_joint = _finish_step(
        family, config.alpha_prior, key_alpha, state, assignments, counts, params, stats, overflow, features)
    return new_state, GibbsInfo(n_clusters=n_clusters, log_joint=log_joint, alpha=new_state.alpha,
                                overflow=overflow, split_merge_accepted=split_merge_accepted)


def _finish_step(family, alpha_prior, key_alpha, state, assignments, counts, params, stats, overflow, features):
    """The end of every DP step (here and in :mod:`inference.subcluster`): α by Escobar–West when
    it has a prior, the log joint, the new state. Returns (state, number of clusters, log joint)."""
    n_points = assignments.shape[0]
    n_clusters = jnp.sum(counts > 0).astype(jnp.int32)
    alpha = state.alpha
    if alpha_prior is not None:
        alpha = escobar_west_update(key_alpha, alpha, n_clusters, n_points, alpha_prior).astype(alpha.dtype)
    log_joint = _log_joint(family, (assignments, counts, params, stats, alpha), features, n_points)
    new_state = GibbsState(
        assignments=assignments,
        counts=counts,
        params=params,
        stats=stats,
        alpha=alpha,
        overflow=state.overflow | overflow,
    )
    return new_state, n_clusters, log_joint
