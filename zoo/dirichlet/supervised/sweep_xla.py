"""The assignment sweep (one reference at a time: c_n for test references, d_n for all) as
``lax.scan`` loops, on every JAX backend: Algorithm 2 (SCDP-1, -2) and Algorithm 8 with reused
auxiliaries (SCDP-3), and the pair moves of SCDP-1 and -2 (:func:`_pair_move`).
:mod:`inference.native.supervised_sweep` is its CPU twin.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from zoo.dirichlet.supervised.conditionals import (
    _active_variance_total, _LOG_2PI, _log_conditioning, _log_normal_diag, _log_student_marginal, _pair_spread,
)
from zoo.dirichlet.supervised.state import _Carry, _CLUSTER_OVERFLOW, _TYPE_OVERFLOW

class _SweepDraws(NamedTuple):
    """Random numbers of one assignment sweep, drawn before it so that both backends use them.

    Fresh parameters come from a *supply* consumed in order: the j-th cluster (type) opened in
    the sweep takes row j. The rows are i.i.d. and independent of everything else, so which row
    an opening takes does not change the chain's law. A sweep that opens more clusters (types)
    than the supply holds reports overflow; the supply grows with the capacity and reaches one
    row per reference at full capacity, so the re-run of :meth:`SupervisedDP.fit` always ends.

    Attributes
    ----------
    uniforms : (2, N)
        Uniforms of the cluster (row 0) and type (row 1) draws of each reference.
    positions : int32 (2, N)
        SCDP-3: pool position that a cluster (row 0) or type (row 1) left empty by reference n
        replaces (Favaro & Teh 2013, ReUse); unused by SCDP-1 and -2.
    cluster_supply : (S_c, D)
        SCDP-1/2: standard normals of new publication means; SCDP-3: means drawn from G0^p.
    type_supply : (S_t, D)
        SCDP-1/2: log Gamma(a + ½, 1) draws of new precisions; SCDP-3: precisions from G0^t.
    cluster_pool, type_pool : (M, D)
        SCDP-3: Algorithm 8's M auxiliary means and precisions at the start of the sweep, drawn
        from G0^p and G0^t; (0, D) for SCDP-1 and -2.
    pair_uniforms : (3 P,)
        The pair move of each test reference (:func:`_pair_move`): its three uniforms, in a row;
        P = 0 without pair moves.
    pair_normals : (2 P, D)
        Standard normals of the means of the publications that a pair move opens (i's, then j's).
    """

    uniforms: jax.Array
    positions: jax.Array
    cluster_supply: jax.Array
    type_supply: jax.Array
    cluster_pool: jax.Array
    type_pool: jax.Array
    pair_uniforms: jax.Array
    pair_normals: jax.Array


class _SweepCarry(NamedTuple):
    """The XLA sweep's loop state: the partition state plus per-type log-determinants Σ_f log t_lf,
    the SCDP-3 auxiliary pools and how many supply rows have been used."""

    state: _Carry
    type_log_det: jax.Array
    cluster_pool: jax.Array
    type_pool: jax.Array
    type_pool_log_det: jax.Array
    n_cluster_supply_used: jax.Array
    n_type_supply_used: jax.Array


def _draw(logits: jax.Array, uniform: jax.Array) -> jax.Array:
    """Inverse-CDF draw of a categorical index from unnormalised log weights and one uniform:
    the first index whose cumulative weight exceeds u × total (never a zero-weight index, even
    for u = 0)."""
    weights = jnp.exp(logits - jnp.max(logits))
    cumulative = jnp.cumsum(weights)
    return jnp.minimum(jnp.sum(cumulative <= uniform * cumulative[-1]), logits.shape[0] - 1).astype(jnp.int32)


def _first_free(counts: jax.Array) -> tuple[jax.Array, jax.Array]:
    free = counts == 0
    return jnp.argmax(free).astype(jnp.int32), jnp.any(free)


def _log_lik_rows(x: jax.Array, rows: jax.Array, precision: jax.Array, log_det: jax.Array) -> jax.Array:
    """log Normal(x | row_k, diag(precision)^-1) for every row k, from the precomputed
    log-determinant Σ_f log precision_f (broadcast over rows)."""
    return 0.5 * (log_det - x.shape[-1] * _LOG_2PI - jnp.sum(precision * (x - rows) ** 2, axis=-1))


def _take_supply(supply: jax.Array, n_used: jax.Array, opened: jax.Array):
    """Next supply row, whether an opening found the supply exhausted, and the new count used."""
    exhausted = opened & (n_used >= supply.shape[0])
    row = supply[jnp.minimum(n_used, supply.shape[0] - 1)]
    return row, exhausted, n_used + opened.astype(n_used.dtype)


def _cluster_move_conjugate(config, sweep, index, x, uniform, position, alpha, n_train_clusters, draws):
    """Algorithm 2 for c_n (DM05 eq. 2): join k ∝ n_{-n,k} F(r_n | p_k, t_{d_n}), new
    ∝ α^p ∫ G0^p(p) F(r_n | p, t_{d_n}) dp; a new publication's mean is drawn from its posterior."""
    carry = sweep.state
    old = carry.clusters[index]
    counts = carry.cluster_counts.at[old].add(-1)
    type_slot = carry.types[index]
    precision = carry.precisions[type_slot]
    slots = jnp.arange(counts.shape[0])
    allowed = (counts > 0) & (config.share_clusters | (slots >= n_train_clusters))
    log_existing = jnp.where(
        allowed,
        jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(x, carry.means, precision, sweep.type_log_det[type_slot]),
        -jnp.inf,
    )
    # ∫ G0^p F dp = Normal(x | 0, σ² + 1/t) per feature.
    marginal_precision = precision / (1.0 + config.prior_variance * precision)
    log_new = jnp.log(alpha) + _log_normal_diag(x, 0.0, marginal_precision)
    choice = _draw(jnp.concatenate([log_existing, log_new[None]]), uniform)
    free_slot, has_free = _first_free(counts)
    wants_new = choice == counts.shape[0]
    opened = wants_new & has_free
    normal, exhausted, n_used = _take_supply(draws.cluster_supply, sweep.n_cluster_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    posterior_precision = 1.0 / config.prior_variance + precision
    fresh_mean = precision * x / posterior_precision + normal / jnp.sqrt(posterior_precision)
    means = carry.means.at[new].set(jnp.where(opened, fresh_mean, carry.means[new]))
    state = carry._replace(
        clusters=carry.clusters.at[index].set(new),
        cluster_counts=counts.at[new].add(1),
        means=means,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _CLUSTER_OVERFLOW, 0),
    )
    return sweep._replace(state=state, n_cluster_supply_used=n_used)


def _type_move_conjugate(config, sweep, index, x, uniform, position, alpha_types, shape, rate, draws):
    """Algorithm 2 for d_n (DM05 Fig. 2): join l ∝ m_{-n,l} F(r_n | p_{c_n}, t_l), new
    ∝ α^t ∫ G0^t(t) F(r_n | p_{c_n}, t) dt (Student-t); a new type's precision is drawn from its
    posterior Gamma(a + ½, b + ½ (r_n - p_{c_n})²)."""
    carry = sweep.state
    old = carry.types[index]
    counts = carry.type_counts.at[old].add(-1)
    residual = x - carry.means[carry.clusters[index]]
    log_existing = jnp.where(
        counts > 0,
        jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(residual, 0.0, carry.precisions, sweep.type_log_det),
        -jnp.inf,
    )
    log_new = jnp.log(alpha_types) + _log_student_marginal(residual, shape, rate)
    choice = _draw(jnp.concatenate([log_existing, log_new[None]]), uniform)
    free_slot, has_free = _first_free(counts)
    wants_new = choice == counts.shape[0]
    opened = wants_new & has_free
    log_gamma_unit, exhausted, n_used = _take_supply(draws.type_supply, sweep.n_type_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    log_fresh = log_gamma_unit - jnp.log(rate + 0.5 * residual * residual)
    precisions = carry.precisions.at[new].set(jnp.where(opened, jnp.exp(log_fresh), carry.precisions[new]))
    state = carry._replace(
        types=carry.types.at[index].set(new),
        type_counts=counts.at[new].add(1),
        precisions=precisions,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _TYPE_OVERFLOW, 0),
    )
    type_log_det = sweep.type_log_det.at[new].set(
        jnp.where(opened, jnp.sum(log_fresh), sweep.type_log_det[new])
    )
    return sweep._replace(state=state, type_log_det=type_log_det, n_type_supply_used=n_used)


PAIR_KINDS = 6
"""Kinds of outcome of a pair move, in the order of its first draw (per type):
0 both in existing publications apart, 1 both in one existing publication, 2 both in one new
publication, 3 i in a new publication and j in an existing one, 4 i in an existing one and j in
a new one, 5 each in a new publication of its own."""


def _exclusive_log_sum(logits: jax.Array) -> jax.Array:
    """log Σ_{b ≠ a} exp(logits[b]) for every a along axis 0, without cancellation: with the
    weights scaled by their largest, the total minus one weight keeps at least half the total
    for every a but the largest, whose sum of the others is summed apart (no cumulative sums,
    which XLA's CPU backend runs as slow windowed reductions)."""
    top = jnp.max(logits, axis=0, keepdims=True)
    weights = jnp.exp(logits - jnp.where(jnp.isfinite(top), top, 0.0))
    largest = jnp.argmax(logits, axis=0)
    is_largest = jnp.arange(logits.shape[0])[:, None] == largest[None]
    total = jnp.sum(weights, axis=0, keepdims=True)
    without_largest = jnp.sum(jnp.where(is_largest, 0.0, weights), axis=0, keepdims=True)
    others = jnp.where(is_largest, without_largest, jnp.maximum(total - weights, 0.0))
    return top + jnp.log(others)


def _pair_move(config, sweep, i, j, x_i, x_j, uniforms, normals, alpha, n_train_clusters):
    """Joint Gibbs update of the publications c_i, c_j and the common type l of test references
    i and j (j the nearest test reference to i,
    :func:`zoo.dirichlet.supervised.state.nearest_partners`), restricted to the two sharing a
    type that other references hold: d_i = d_j = l.

    When i and j share their type and others hold it, (c_i, c_j, l) is drawn from its
    conditional on that set, the means of the publications that stay held as they are and those
    of new publications integrated (Algorithm 2 for a block of two). With n_k and m_l the counts
    without i and j, the weights are m_l (m_l + 1) (the type CRP of adding two references) times

    0. n_a n_b F_i(a) F_j(b), a ≠ b existing publications;
    1. n_a (n_a + 1) F_i(a) F_j(a);
    2. α^p ∫ G0^p(p) F_i(p) F_j(p) dp, both in one new publication;
    3. α^p ∫ G0^p F_i · n_b F_j(b), and 4. the same with i and j exchanged;
    5. (α^p)² ∫ G0^p F_i · ∫ G0^p F_j, each in a new publication of its own,

    F_i(p) = F(x_i | p, t_l); a new publication's mean is then drawn from its posterior. The
    draw is hierarchical: one uniform picks the type and the kind (:data:`PAIR_KINDS`), a second
    the publication of an existing one (a for kinds 0, 1 and 4, b for kind 3), a third b ≠ a for
    kind 0. Whether a pair moves is decided by the data and by the other references' types,
    never by (c_i, c_j) or by which type the pair shares, so the update is a Gibbs step on a
    fixed set and leaves the posterior invariant; no type opens or closes, so the precisions stay
    as they are. A draw that needs more free publication slots than there are leaves the pair as
    it is and reports the overflow (the fit then re-runs with more capacity).

    Why: a pair of test references close to each other and far from the other test references
    can sit in a publication of their own with the common, tight type, or inside a large
    publication with a type of large variances (wine of scikit-learn, class 2 held out: 3–6
    changes of mode in 1,000 sweeps of each chain with one-reference updates), or each inside
    a different wrong publication with the loose type (the FEBRL records of
    ``notebooks/record_linkage.ipynb``). One-reference updates pass between these only through
    states where one of the two has left, which both avoid.
    """
    carry = sweep.state
    cluster_i, cluster_j, type_slot = carry.clusters[i], carry.clusters[j], carry.types[i]
    same_type = (carry.types[j] == type_slot) & (i != j)
    one = jnp.where(same_type, 1, 0)
    counts = carry.cluster_counts.at[cluster_i].add(-one).at[cluster_j].add(-one)
    type_counts = carry.type_counts.at[type_slot].add(-2 * one)
    moves = same_type & (type_counts[type_slot] > 0)
    n_slots = counts.shape[0]
    dtype = carry.means.dtype
    n_features = x_i.shape[-1]
    allowed = (counts > 0) & (config.share_clusters | (jnp.arange(n_slots) >= n_train_clusters))
    held = type_counts > 0
    precisions, means = carry.precisions, carry.means
    variance = config.prior_variance
    # log F(x | p_k, t_l) for every (k, l), and log ∫ G0^p F(x | p, t_l) dp = log N(x | 0, σ² + 1/t).
    # Σ_f t_lf (x_f - p_kf)² as a product of (K, D) squares and (D, L) precisions (full float32 or
    # float64 on every device: no TF32), not a (K, L, D) array, which cost XLA's CPU backend 6x.
    def log_f(x):
        square = jnp.matmul((x - means) ** 2, precisions.T, precision=jax.lax.Precision.HIGHEST)
        return 0.5 * (sweep.type_log_det[None] - n_features * _LOG_2PI - square)

    log_f_i, log_f_j = log_f(x_i), log_f(x_j)
    marginal = precisions / (1.0 + variance * precisions)
    log_new_i = _log_normal_diag(x_i, 0.0, marginal)
    log_new_j = _log_normal_diag(x_j, 0.0, marginal)
    cluster_weight = jnp.maximum(counts, 1).astype(dtype)
    log_n = jnp.where(allowed, jnp.log(cluster_weight), -jnp.inf)[:, None]
    log_u = log_n + log_f_i  # i in k
    log_v = log_n + log_f_j  # j in k
    log_apart = log_u + _exclusive_log_sum(log_v)  # i in k, j in another
    log_together = log_n + jnp.log(cluster_weight + 1.0)[:, None] + log_f_i + log_f_j
    # ∫ N(p | 0, σ²) N(x_i | p, 1/t) N(x_j | p, 1/t) dp per feature: a Gaussian of (x_i, x_j) with
    # covariance I / t + σ² 1 1ᵀ, determinant (1 + 2 σ² t) / t² and quadratic form
    # t (½ (x_i - x_j)² + (x_i + x_j)² / (2 (1 + 2 σ² t))) (no cancellation for large t).
    spread = 1.0 + 2.0 * variance * precisions
    both, gap = x_i + x_j, x_i - x_j
    log_new_pair = (jnp.sum(jnp.log(precisions) - _LOG_2PI - 0.5 * jnp.log(spread), axis=-1)
                    - 0.5 * (jnp.sum(precisions * both * both * (0.5 / spread), axis=-1)
                             + 0.5 * jnp.sum(precisions * gap * gap, axis=-1)))
    log_alpha = jnp.log(alpha)
    log_sum = partial(jax.nn.logsumexp, axis=0)
    kinds = jnp.stack([log_sum(log_apart), log_sum(log_together), log_alpha + log_new_pair,
                       log_alpha + log_new_i + log_sum(log_v), log_alpha + log_new_j + log_sum(log_u),
                       2.0 * log_alpha + log_new_i + log_new_j], axis=-1)
    type_weight = jnp.maximum(type_counts, 1).astype(dtype)
    log_type = jnp.where(held, jnp.log(type_weight) + jnp.log(type_weight + 1.0), -jnp.inf)
    choice = _draw(jnp.where(held[:, None], log_type[:, None] + kinds, -jnp.inf).reshape(-1), uniforms[0])
    new_type, kind = choice // PAIR_KINDS, choice % PAIR_KINDS
    column = jnp.where(kind == 0, log_apart[:, new_type], jnp.where(
        kind == 1, log_together[:, new_type], jnp.where(kind == 3, log_v[:, new_type], log_u[:, new_type])))
    first = _draw(column, uniforms[1])
    others = jnp.where(jnp.arange(n_slots) == first, -jnp.inf, log_v[:, new_type])
    second = _draw(others, uniforms[2])
    free = counts == 0
    free_1 = jnp.argmax(free).astype(jnp.int32)
    free_2 = jnp.argmax(free & (jnp.arange(n_slots) != free_1)).astype(jnp.int32)
    n_free = jnp.sum(free)
    needed = jnp.array([0, 0, 1, 1, 1, 2])[kind]
    no_room = moves & (n_free < needed)
    moves = moves & ~no_room
    new_i = jnp.where((kind == 0) | (kind == 1) | (kind == 4), first, free_1)
    new_j = jnp.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4], [second, first, free_1, first, free_1],
                       free_2)
    opens_i = (kind == 2) | (kind == 3) | (kind == 5)
    opens_j = (kind == 4) | (kind == 5)
    precision = precisions[new_type]
    alone_precision = 1.0 / variance + precision
    pair_precision = 1.0 / variance + 2.0 * precision
    mean_i = jnp.where(kind == 2, precision * both / pair_precision + normals[0] / jnp.sqrt(pair_precision),
                       precision * x_i / alone_precision + normals[0] / jnp.sqrt(alone_precision))
    mean_j = precision * x_j / alone_precision + normals[1] / jnp.sqrt(alone_precision)
    new_means = means.at[new_i].set(jnp.where(opens_i, mean_i, means[new_i]))
    new_means = new_means.at[new_j].set(jnp.where(opens_j, mean_j, new_means[new_j]))
    new_i = jnp.where(moves, new_i, cluster_i)
    new_j = jnp.where(moves, new_j, cluster_j)
    new_type = jnp.where(moves, new_type, type_slot)
    state = carry._replace(
        clusters=carry.clusters.at[i].set(new_i).at[j].set(new_j),
        cluster_counts=counts.at[new_i].add(one).at[new_j].add(one),
        means=jnp.where(moves, new_means, means),
        types=carry.types.at[i].set(new_type).at[j].set(jnp.where(same_type, new_type, carry.types[j])),
        type_counts=type_counts.at[new_type].add(2 * one),
        overflow=carry.overflow | jnp.where(no_room, _CLUSTER_OVERFLOW, 0),
    )
    return sweep._replace(state=state)


# Indicator updates of the non-conjugate SCDP-3: Neal's Algorithm 8 (DM05 §4.2) whose M auxiliary
# parameters persist from point to point (Favaro & Teh 2013, §5, "ReUse"): the pool starts as M
# draws from the base measure; a cluster (type) left empty by reference n replaces the pool member
# at a uniform position; a chosen pool member becomes a cluster (type) and the next supply row
# takes its place. Each update is a Gibbs step on (indicator, pool) that leaves the posterior, with
# the pool i.i.d. from the base measure, invariant, and needs one base draw per opening instead of
# M per reference.
def _cluster_move_auxiliary(config, sweep, index, x, uniform, position, alpha, n_train_clusters, draws):
    """Algorithm 8 for c_n: existing publications ∝ n_{-n,k} F, pool means ∝ (α^p / M) F ×
    exp(-Σ_l Σ_k Σ_f (p̃_f - p_kf)² / t_lf), the change of DM05 eq. 3's conditioning term when p̃ joins
    the active means p_k (all types l, all publications k after n has left)."""
    carry = sweep.state
    old = carry.clusters[index]
    counts = carry.cluster_counts.at[old].add(-1)
    was_alone = counts[old] == 0
    pool = sweep.cluster_pool.at[position].set(jnp.where(was_alone, carry.means[old], sweep.cluster_pool[position]))
    type_slot = carry.types[index]
    precision = carry.precisions[type_slot]
    log_det = sweep.type_log_det[type_slot]
    slots = jnp.arange(counts.shape[0])
    active = counts > 0
    allowed = active & (config.share_clusters | (slots >= n_train_clusters))
    log_existing = jnp.where(
        allowed, jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(x, carry.means, precision, log_det), -jnp.inf
    )
    variance_total = _active_variance_total(carry.precisions, carry.type_counts)
    n_active = jnp.sum(active)
    total = jnp.sum(jnp.where(active[:, None], carry.means, 0.0), axis=0)
    total_sq = jnp.sum(jnp.where(active[:, None], carry.means * carry.means, 0.0), axis=0)
    # Σ_k (p̃_f - p_kf)² = K p̃_f² - 2 p̃_f Σ_k p_kf + Σ_k p_kf² (DM05 eq. 3, λ = 1).
    coupling = -jnp.sum(variance_total * (n_active * pool * pool - 2.0 * pool * total + total_sq), axis=-1)
    n_auxiliary = pool.shape[0]
    log_pool = jnp.log(alpha / n_auxiliary) + _log_lik_rows(x, pool, precision, log_det) + coupling
    choice = _draw(jnp.concatenate([log_existing, log_pool]), uniform)
    free_slot, has_free = _first_free(counts)
    n_slots = counts.shape[0]
    wants_new = choice >= n_slots
    opened = wants_new & has_free
    member = jnp.clip(choice - n_slots, 0, n_auxiliary - 1)
    replacement, exhausted, n_used = _take_supply(draws.cluster_supply, sweep.n_cluster_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    means = carry.means.at[new].set(jnp.where(opened, pool[member], carry.means[new]))
    pool = pool.at[member].set(jnp.where(opened, replacement, pool[member]))
    state = carry._replace(
        clusters=carry.clusters.at[index].set(new),
        cluster_counts=counts.at[new].add(1),
        means=means,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _CLUSTER_OVERFLOW, 0),
    )
    return sweep._replace(state=state, cluster_pool=pool, n_cluster_supply_used=n_used)


def _type_move_auxiliary(config, sweep, index, x, uniform, position, alpha_types, shape, rate, draws):
    """Algorithm 8 for d_n: existing types ∝ m_{-n,l} F, pool precisions ∝ (α^t / M) F × the
    conditioning of the candidate precision on the means (DM05 eq. 3), so the draws from G0^t
    are weighted by their unnormalised posterior (DM05 §5.2, last paragraph)."""
    carry = sweep.state
    old = carry.types[index]
    counts = carry.type_counts.at[old].add(-1)
    was_alone = counts[old] == 0
    pool = sweep.type_pool.at[position].set(jnp.where(was_alone, carry.precisions[old], sweep.type_pool[position]))
    pool_log_det = sweep.type_pool_log_det.at[position].set(
        jnp.where(was_alone, sweep.type_log_det[old], sweep.type_pool_log_det[position])
    )
    residual = x - carry.means[carry.clusters[index]]
    log_existing = jnp.where(
        counts > 0,
        jnp.log(jnp.maximum(counts, 1)) + _log_lik_rows(residual, 0.0, carry.precisions, sweep.type_log_det),
        -jnp.inf,
    )
    n_auxiliary = pool.shape[0]
    conditioning = _log_conditioning(pool, _pair_spread(carry.means, carry.cluster_counts))
    log_pool = jnp.log(alpha_types / n_auxiliary) + _log_lik_rows(residual, 0.0, pool, pool_log_det) + conditioning
    choice = _draw(jnp.concatenate([log_existing, log_pool]), uniform)
    free_slot, has_free = _first_free(counts)
    n_slots = counts.shape[0]
    wants_new = choice >= n_slots
    opened = wants_new & has_free
    member = jnp.clip(choice - n_slots, 0, n_auxiliary - 1)
    replacement, exhausted, n_used = _take_supply(draws.type_supply, sweep.n_type_supply_used, opened)
    new = jnp.where(wants_new, jnp.where(has_free, free_slot, old), choice)
    precisions = carry.precisions.at[new].set(jnp.where(opened, pool[member], carry.precisions[new]))
    type_log_det = sweep.type_log_det.at[new].set(jnp.where(opened, pool_log_det[member], sweep.type_log_det[new]))
    pool_log_det = pool_log_det.at[member].set(jnp.where(opened, jnp.sum(jnp.log(replacement)), pool_log_det[member]))
    pool = pool.at[member].set(jnp.where(opened, replacement, pool[member]))
    state = carry._replace(
        types=carry.types.at[index].set(new),
        type_counts=counts.at[new].add(1),
        precisions=precisions,
        overflow=carry.overflow | jnp.where((wants_new & ~has_free) | exhausted, _TYPE_OVERFLOW, 0),
    )
    return sweep._replace(
        state=state, type_log_det=type_log_det, type_pool=pool, type_pool_log_det=pool_log_det,
        n_type_supply_used=n_used,
    )


def _xla_sweep(config, carry, features, n_train, n_train_clusters, alpha, alpha_types, shape, rate, draws,
               partners):
    """The assignment sweep as ``lax.scan`` loops: test references (c_n then d_n), the pair move of
    each test reference with its partner (``partners``, int32 (M,); when ``draws`` hold pair
    uniforms), then training references (d_n). Runs on every backend."""
    n_points = features.shape[0]
    type_log_det = jnp.sum(jnp.log(jnp.where((carry.type_counts > 0)[:, None], carry.precisions, 1.0)), axis=-1)
    sweep = _SweepCarry(
        state=carry,
        type_log_det=type_log_det,
        cluster_pool=draws.cluster_pool,
        type_pool=draws.type_pool,
        type_pool_log_det=jnp.sum(jnp.log(draws.type_pool), axis=-1),
        n_cluster_supply_used=jnp.zeros((), jnp.int32),
        n_type_supply_used=jnp.zeros((), jnp.int32),
    )
    if config.model == 3:
        cluster_move, type_move = partial(_cluster_move_auxiliary, config), partial(_type_move_auxiliary, config)
    else:
        cluster_move, type_move = partial(_cluster_move_conjugate, config), partial(_type_move_conjugate, config)

    def visit_test(sweep, inputs):
        index, x, uniform_cluster, uniform_type, position_cluster, position_type = inputs
        sweep = cluster_move(sweep, index, x, uniform_cluster, position_cluster, alpha, n_train_clusters, draws)
        return type_move(sweep, index, x, uniform_type, position_type, alpha_types, shape, rate, draws), None

    def visit_train(sweep, inputs):
        index, x, uniform_type, position_type = inputs
        return type_move(sweep, index, x, uniform_type, position_type, alpha_types, shape, rate, draws), None

    def visit_pair(sweep, inputs):
        i, j, pair_uniforms, pair_normals = inputs
        return _pair_move(config, sweep, i, j, features[i], features[j], pair_uniforms, pair_normals, alpha,
                          n_train_clusters), None

    uniforms, positions = draws.uniforms, draws.positions
    sweep, _ = jax.lax.scan(
        visit_test,
        sweep,
        (jnp.arange(n_train, n_points), features[n_train:], uniforms[0, n_train:], uniforms[1, n_train:],
         positions[0, n_train:], positions[1, n_train:]),
    )
    if draws.pair_uniforms.shape[0]:
        sweep, _ = jax.lax.scan(
            visit_pair, sweep, (jnp.arange(n_train, n_points), partners,
                                draws.pair_uniforms.reshape(-1, 3), draws.pair_normals.reshape(-1, 2, features.shape[-1]))
        )
    sweep, _ = jax.lax.scan(
        visit_train, sweep, (jnp.arange(n_train), features[:n_train], uniforms[1, :n_train], positions[1, :n_train])
    )
    return sweep.state
