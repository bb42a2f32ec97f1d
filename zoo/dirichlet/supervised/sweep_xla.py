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
    pair_uniforms : (P,)
        The pair move of each test reference (:func:`_pair_move`): its uniform; P = 0 without
        pair moves.
    pair_normals : (P, D)
        Standard normals of the mean of a publication that a pair move opens.
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


def _pair_move(config, sweep, i, j, x_i, x_j, uniform, normal, alpha, n_train_clusters):
    """Joint Gibbs update of the publications and types of test references i and j (j the
    nearest test reference to i, :func:`zoo.dirichlet.supervised.state.nearest_partners`),
    restricted to the pair staying together: c_i = c_j, d_i = d_j, in a type that other
    references hold.

    When i and j share their publication and type and others hold that type, (c, d) is drawn for
    both from their conditional on that set: an existing publication k and type l
    ∝ n_k (n_k + 1) m_l (m_l + 1) F(x_i | p_k, t_l) F(x_j | p_k, t_l) (the CRP weights of
    adding two references, counts without i and j), a new publication
    ∝ α^p m_l (m_l + 1) ∫ G0^p(p) F(x_i | p, t_l) F(x_j | p, t_l) dp, whose mean is then drawn
    from its posterior. Otherwise nothing changes. Which pairs move is decided by the data and by
    the rest of the state, never by (c_i, d_i, c_j, d_j) beyond their being together, so the
    update is a Gibbs step on a fixed set and leaves the posterior invariant; no type opens or
    closes, so the precisions stay as they are.

    Why: a pair of test references far from the other test references can sit in a publication
    of their own with the common, tight type, or inside a large publication with a type of
    large variances, and one-reference updates pass between the two only through states where
    one of them has left (wine of scikit-learn, class 2 held out: such a pair changed mode
    3–6 times in 1,000 sweeps of each chain, and set the bulk ESS of the number of test
    publications; see :func:`zoo.dirichlet.supervised.kernel.build_kernel`).
    """
    carry = sweep.state
    cluster, type_slot = carry.clusters[i], carry.types[i]
    together = (carry.clusters[j] == cluster) & (carry.types[j] == type_slot) & (i != j)
    removed = jnp.where(together, 2, 0)
    counts = carry.cluster_counts.at[cluster].add(-removed)
    type_counts = carry.type_counts.at[type_slot].add(-removed)
    moves = together & (type_counts[type_slot] > 0)
    n_slots, n_type_slots = counts.shape[0], type_counts.shape[0]
    dtype = carry.means.dtype
    allowed = (counts > 0) & (config.share_clusters | (jnp.arange(n_slots) >= n_train_clusters))
    held = type_counts > 0
    precisions, means = carry.precisions, carry.means
    # log F(x_i | p_k, t_l) + log F(x_j | p_k, t_l) for every (k, l), from
    # (x_i - p)² + (x_j - p)² = 2 (x̄ - p)² + ½ (x_i - x_j)², x̄ the pair's midpoint.
    midpoint, gap = 0.5 * (x_i + x_j), x_i - x_j
    square = (2.0 * jnp.sum(precisions[None] * ((midpoint - means) ** 2)[:, None], axis=-1)
              + 0.5 * jnp.sum(precisions * gap * gap, axis=-1)[None])
    log_lik = sweep.type_log_det[None] - x_i.shape[-1] * _LOG_2PI - 0.5 * square
    type_weight = jnp.maximum(type_counts, 1).astype(dtype)
    log_type = jnp.where(held, jnp.log(type_weight) + jnp.log(type_weight + 1.0), -jnp.inf)
    cluster_weight = jnp.maximum(counts, 1).astype(dtype)
    log_cluster = jnp.where(allowed, jnp.log(cluster_weight) + jnp.log(cluster_weight + 1.0), -jnp.inf)
    log_existing = log_cluster[:, None] + log_type[None] + log_lik
    # ∫ N(p | 0, σ²) N(x_i | p, 1/t) N(x_j | p, 1/t) dp per feature: a Gaussian of (x_i, x_j) with
    # covariance I / t + σ² 1 1ᵀ, determinant (1 + 2 σ² t) / t² and quadratic form
    # t (½ (x_i - x_j)² + (x_i + x_j)² / (2 (1 + 2 σ² t))) (no cancellation for large t).
    variance = config.prior_variance
    spread = 1.0 + 2.0 * variance * precisions
    both = x_i + x_j
    log_new = log_type + jnp.log(alpha) + (
        jnp.sum(jnp.log(precisions) - _LOG_2PI - 0.5 * jnp.log(spread), axis=-1)
        - 0.5 * (jnp.sum(precisions * both * both * (0.5 / spread), axis=-1)
                 + 0.5 * jnp.sum(precisions * gap * gap, axis=-1))
    )
    choice = _draw(jnp.concatenate([log_existing.reshape(-1), log_new]), uniform)
    n_existing = n_slots * n_type_slots
    wants_new = choice >= n_existing
    free_slot, has_free = _first_free(counts)
    no_room = moves & wants_new & ~has_free
    moves = moves & ~no_room
    new_cluster = jnp.where(moves, jnp.where(wants_new, free_slot, choice // n_type_slots), cluster)
    new_type = jnp.where(moves, jnp.where(wants_new, choice - n_existing, choice % n_type_slots), type_slot)
    opened = moves & wants_new
    precision = precisions[new_type]
    posterior_precision = 1.0 / variance + 2.0 * precision
    fresh_mean = precision * (x_i + x_j) / posterior_precision + normal / jnp.sqrt(posterior_precision)
    state = carry._replace(
        clusters=carry.clusters.at[i].set(new_cluster).at[j].set(jnp.where(together, new_cluster,
                                                                           carry.clusters[j])),
        cluster_counts=counts.at[new_cluster].add(removed),
        means=means.at[new_cluster].set(jnp.where(opened, fresh_mean, means[new_cluster])),
        types=carry.types.at[i].set(new_type).at[j].set(jnp.where(together, new_type, carry.types[j])),
        type_counts=type_counts.at[new_type].add(removed),
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
        i, j, uniform, normal = inputs
        return _pair_move(config, sweep, i, j, features[i], features[j], uniform, normal, alpha, n_train_clusters), None

    uniforms, positions = draws.uniforms, draws.positions
    sweep, _ = jax.lax.scan(
        visit_test,
        sweep,
        (jnp.arange(n_train, n_points), features[n_train:], uniforms[0, n_train:], uniforms[1, n_train:],
         positions[0, n_train:], positions[1, n_train:]),
    )
    if draws.pair_uniforms.shape[0]:
        sweep, _ = jax.lax.scan(
            visit_pair, sweep, (jnp.arange(n_train, n_points), partners, draws.pair_uniforms, draws.pair_normals)
        )
    sweep, _ = jax.lax.scan(
        visit_train, sweep, (jnp.arange(n_train), features[:n_train], uniforms[1, :n_train], positions[1, :n_train])
    )
    return sweep.state
