"""SCDP-3: split–merge moves of the test partition that propose the reference types' precisions
with it (DM05 §5.2, eq. 3).

Why. SCDP-3's precisions weigh every publication at once: eq. 3's conditioning exp(-Σ_f S_f / t_f)
(S the spread of the means over pairs of publications) makes a new publication cheap where the
precision is high and dear where it is low, and the precision is itself set by the residuals the
partition leaves. A chain can then hold a partition and precisions that agree with each other,
with no split or merge worth taking at those precisions. On the dequantised digits of
``notebooks/supervised_digits.ipynb`` one chain of four kept twenty sevens with ink in the top-right
corner inside a publication of 65, its precision on that pixel 1.5 where the other chains have
4.1: splitting them off scored +8 nats in the likelihood and -40 in the CRP at 1.5 (rejected), but
+1,270 at 4.1, and that precision follows from the split, not before it. The test split–merge
moves of :mod:`zoo.dirichlet.supervised.split_merge` keep the precisions fixed, so they cannot
make that step.

The move. Target: p(c_test, t | p_rest, d, r), the means of the one or two publications in play
integrated (as in :mod:`zoo.dirichlet.supervised.split_merge`), every active type's precisions t_l
part of the move. A split picks a test publication and two anchors uniformly and allocates its other references
sequentially at the current precisions (Dahl 2003); a merge picks an ordered pair of test
publications uniformly and the anchors uniformly in them. The precisions of the other state are
then drawn per type and feature as

    log t' ~ Normal(log t̂, s²),   t̂ = (α + sqrt(α² + 4 β S)) / (2 β),   s = (β t̂ + S / t̂)^{-1/2},

the mode and curvature in log t of the precisions' conditional t^{α-1} exp(-β t - S / t)
(:func:`.conditionals._metropolis_precisions_conditioned`), with α = a + m_l / 2, β = b + Q_l / 2, the
residual squares Q and the pair spread S computed at the posterior means of the moving publications
(two rounds of means and modes, starting from the current precisions). The reverse proposal is
computed in the proposed state the same way, so the Hastings ratio is exact:

    log α + log Γ(n_A) Γ(n_B) / Γ(n_C) + T(split, t_split) - T(merged, t_merged)
    + log[½ / (K_s (K_s - 1) n_A n_B)] + log q(t_merged | merged, t_split)          (reverse merge)
    - log[P_split / K_m / (n_C (n_C - 1)) q_alloc] - log q(t_split | split, t_merged) (the split)

with T the log posterior of the precisions and the partition, the moving means integrated: the
precisions' Gamma prior, every reference's likelihood (the others at their publications' means),
eq. 3's pairs among the other publications, and the Gaussian integral over the moving means
(:func:`zoo.dirichlet.supervised.split_merge._log_integrated`). K_m and K_s count the test
publications of the merged and split states; the allocation runs at t_merged in both directions.
Whatever the outcome, the means of the publications then holding the anchors are drawn from their
conditional, so the move is a block update of (c_test, t, the moving means). SCDP-3 only: SCDP-1
and -2 have conjugate precisions, which their type moves integrate.

Singleton moves. Each sweep's moves with sequential allocation are followed by as many singleton
moves: a test reference i is picked uniformly; if its publication holds others, i is split off
alone, and if it is a singleton, it merges into another test publication picked uniformly, so

    log[P_split / P_merge] = log[(1 / M) / ((1 / M) (1 / (K_s - 1)))] = log(K_s - 1).

Their precisions' proposal starts its rounds from the moving publications' own averages (precisions
of UNPULLED_START, so neither eq. 3's coupling nor the prior pulls the means), in both directions.
Why: a feature that one digit of 1,270 inks (pixel 56 of the digits) has a precision near 1 while
that digit shares a publication, and near 660 once it stands alone; started from the current
precisions, the rounds shrink the lone digit's mean back to the others' and propose about 1 again.
On the digits of ``notebooks/supervised_digits.ipynb`` (4 chains, 1,000 sweeps, key 3) one chain of
four found that mode (log joint -70,488) and three sat 9,000 nats lower (-79,440 to -79,485);
with the singleton moves those three reached -72,900 to -73,060 (pixels 56 and 48 at high
precision), but not pixel 40, whose two inked digits must stand together (no single move makes
that pair).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from inference.segments import segment_sum
from inference.split_merge import (_log_split_proposal, _nth_member, SplitMergeMoves, move_uniforms, no_moves,
                                   sequential_allocation)
from zoo.dirichlet.supervised.conditionals import _log_gamma_density
from zoo.dirichlet.supervised.split_merge import (_coupled_means, _log_integrated, _MoveContext, _redraw_moved_means,
                                                  _rest, _side_model)
from zoo.dirichlet.supervised.state import _CLUSTER_OVERFLOW

__all__ = ["CENTRE_ROUNDS"]

UNPULLED_START = 1e4
"""Precisions from which a singleton move's proposal rounds start (see :func:`_precision_move`)."""

SINGLETON_KEY = 0x5EED
"""``fold_in`` datum of the singleton moves' keys (the allocation moves' keys stay as they were)."""

CENTRE_ROUNDS = 2
"""Rounds of (posterior means of the moving publications, mode of the precisions) that place the
precisions' proposal; the first starts from the precisions of the state the proposal leaves."""

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class _Sides(NamedTuple):
    """References of J = 1 or 2 moving publications summed by type: count (J, L), Σ r and Σ r²
    (J, L, D)."""

    count: jax.Array
    total: jax.Array
    square: jax.Array


class _Rest(NamedTuple):
    """What the move holds fixed: the number, sum and sum of squares of the other publications'
    means (D), their pair spread S_rest (D), and the residual squares of the references outside
    the move per type Q_rest (L, D)."""

    n_rest: jax.Array
    total: jax.Array
    total_sq: jax.Array
    spread: jax.Array
    squares: jax.Array


def _sides_of(features, types, masks, n_type_slots) -> _Sides:
    """The references of each mask (J, N) summed by type."""
    def one(mask):
        weight = mask.astype(features.dtype)
        return (segment_sum(weight, types, n_type_slots), segment_sum(features * weight[:, None], types, n_type_slots),
                segment_sum(features * features * weight[:, None], types, n_type_slots))

    return _Sides(*jax.vmap(one)(masks))


def _weights(sides: _Sides, precisions):
    """(A, B) = (Σ t_{d_n}, Σ t_{d_n} r_n) of each side, (J, D)."""
    return sides.count @ precisions, jnp.einsum("sld,ld->sd", sides.total, precisions)


def _posterior_means(config, coupling, rest: _Rest, weight, weighted):
    """Means of the J moving publications given the rest: the mode of their Gaussian
    (:func:`zoo.dirichlet.supervised.split_merge._coupled_means`), (J, D)."""
    diagonal, linear = _coupled_means(config, coupling, rest.n_rest, rest.total, weight, weighted)
    if weight.shape[0] == 1:
        return linear / diagonal
    off = -2.0 * coupling
    det = diagonal[0] * diagonal[1] - off * off
    return jnp.stack([(diagonal[1] * linear[0] - off * linear[1]) / det,
                      (diagonal[0] * linear[1] - off * linear[0]) / det])


def _safe(precisions, active_types):
    return jnp.where(active_types[:, None], precisions, 1.0)


def _coupling(precisions, active_types):
    """V = Σ_l 1 / t_l over the active types (eq. 3's weight of the pair spread)."""
    return jnp.sum(jnp.where(active_types[:, None], 1.0 / precisions, 0.0), axis=0)


def _proposal(config, sides: _Sides, precisions, active_types, type_counts, shape, rate, rest: _Rest):
    """Centre log t̂ and scale s of the precisions' proposal (L, D) for the partition whose moving
    publications are ``sides``, starting from ``precisions`` (see the module docstring)."""
    counts = type_counts.astype(precisions.dtype)[:, None]
    alpha = shape + 0.5 * counts
    mode = _safe(precisions, active_types)
    for _ in range(CENTRE_ROUNDS):
        coupling = _coupling(mode, active_types)
        means = _posterior_means(config, coupling, rest, *_weights(sides, mode))
        squares = rest.squares + jnp.sum(sides.square - 2.0 * means[:, None, :] * sides.total
                                         + sides.count[:, :, None] * means[:, None, :] ** 2, axis=0)
        n_total = rest.n_rest + means.shape[0]
        spread = jnp.maximum(n_total * (rest.total_sq + jnp.sum(means * means, 0))
                             - (rest.total + jnp.sum(means, 0)) ** 2, 0.0)
        beta = rate + 0.5 * jnp.maximum(squares, 0.0)
        mode = (alpha + jnp.sqrt(alpha * alpha + 4.0 * beta * spread)) / (2.0 * beta)
        mode = _safe(mode, active_types)
    scale = 1.0 / jnp.sqrt(beta * mode + spread / mode)
    return jnp.log(mode), scale


def _log_proposal(precisions, centre, scale, active_types):
    """log q(t) of the log-normal proposal, summed over the active types and features (a density
    in t: the log-normal's, Jacobian 1 / t included)."""
    log_t = jnp.log(_safe(precisions, active_types))
    z = (log_t - centre) / scale
    terms = -0.5 * z * z - jnp.log(scale) - _LOG_SQRT_2PI - log_t
    return jnp.sum(jnp.where(active_types[:, None], terms, 0.0))


def _log_target(config, sides: _Sides, precisions, active_types, type_counts, shape, rate, rest: _Rest):
    """T: log p(partition's moving part, t | rest) up to terms that depend on neither (see the
    module docstring); the CRP ratio is added by the move."""
    safe = _safe(precisions, active_types)
    coupling = _coupling(safe, active_types)
    weight, weighted = _weights(sides, safe)
    integrated = _log_integrated(config, coupling, rest.n_rest, rest.total, rest.total_sq, weight, weighted)
    counts = type_counts.astype(safe.dtype)
    moving_squares = jnp.sum(sides.square, axis=0)  # the moving references' -½ t r², outside the integral
    likelihood = jnp.sum(jnp.where(active_types[:, None], 0.5 * counts[:, None] * jnp.log(safe)
                                   - 0.5 * safe * (rest.squares + moving_squares), 0.0))
    prior = jnp.sum(jnp.where(active_types, _log_gamma_density(safe, shape, rate), 0.0))
    return integrated + likelihood + prior - jnp.sum(coupling * rest.spread)


def _precision_move(config, rng_key, carry, features, n_train_clusters, log_alpha, shape, rate, singleton=False):
    """One split or merge of test publications with new precisions (see the module docstring).
    With ``singleton``, the split takes one reference out on its own and the merge puts a
    singleton publication into another (see the module docstring). Returns (carry, split
    proposed, merge proposed, accepted)."""
    dtype = features.dtype
    n_points = features.shape[0]
    key_move, key_noise, key_means = jax.random.split(rng_key, 3)
    draws = move_uniforms(key_move, n_points, dtype)[0]
    clusters, counts, means = carry.clusters, carry.cluster_counts, carry.means
    types, type_counts, precisions = carry.types, carry.type_counts, carry.precisions
    n_slots, n_type_slots = counts.shape[0], type_counts.shape[0]
    noise = jax.random.normal(key_noise, precisions.shape, dtype)
    slots, index = jnp.arange(n_slots), jnp.arange(n_points)
    active = (counts > 0) & (slots >= n_train_clusters)
    n_clusters = jnp.sum(active).astype(jnp.int32)
    n_active = n_clusters.astype(dtype)
    choice = draws.choice
    if singleton:
        # A test reference, uniformly (their number does not change with the move, so it cancels).
        in_test = active[clusters]
        i = _nth_member(in_test, choice[0], jnp.sum(in_test).astype(dtype))
        own = clusters[i]
        n_own = counts[own].astype(dtype)
        is_split = n_own >= 2.0
        # Split: i leaves; j, the first other reference of its publication, labels the rest.
        # Merge: i is a singleton and joins another test publication chosen uniformly.
        target = _nth_member(active & (slots != own), choice[1], n_active - 1)
        j = jnp.where(is_split, _nth_member((clusters == own) & (index != i), jnp.zeros((), dtype), n_own - 1),
                      _nth_member(clusters == target, jnp.zeros((), dtype), counts[target].astype(dtype)))
        possible = jnp.any(in_test) & (is_split | (n_clusters >= 2))
    else:
        is_split = (n_clusters <= 1) | (draws.kind < 0.5)
        # Split: a test publication, then an ordered pair of distinct anchors in it, uniformly.
        split_slot = _nth_member(active, choice[0], n_active)
        n_split = counts[split_slot].astype(dtype)
        in_split = clusters == split_slot
        split_i = _nth_member(in_split, choice[1], n_split)
        split_j = _nth_member(in_split & (index != split_i), choice[2], n_split - 1)
        # Merge: an ordered pair of test publications, then an anchor in each, uniformly.
        first = _nth_member(active, choice[0], n_active)
        second = _nth_member(active & (slots != first), choice[3], n_active - 1)
        merge_i = _nth_member(clusters == first, choice[1], counts[first].astype(dtype))
        merge_j = _nth_member(clusters == second, choice[2], counts[second].astype(dtype))
        i, j = jnp.where(is_split, split_i, merge_i), jnp.where(is_split, split_j, merge_j)
        possible = jnp.where(is_split, (n_clusters >= 1) & (n_split >= 2), n_clusters >= 2)

    label_i, label_j = clusters[i], clusters[j]
    moving = (clusters == label_i) | (clusters == label_j)
    in_play = moving & (index != i) & (index != j)
    active_types = type_counts > 0
    residuals = features - means[clusters]
    n_rest, rest_total, rest_total_sq = _rest(means, counts > 0, slots, label_i, label_j)
    rest = _Rest(n_rest, rest_total, rest_total_sq, jnp.maximum(n_rest * rest_total_sq - rest_total**2, 0.0),
                 segment_sum(jnp.where(moving[:, None], 0.0, residuals * residuals), types, n_type_slots))
    merged = _sides_of(features, types, moving[None], n_type_slots)
    proposal = lambda sides, start: _proposal(config, sides, start, active_types, type_counts, shape, rate, rest)

    # Precisions of the merged state: proposed for a merge, the current ones for a split.
    # Where the rounds start: the precisions of the state the proposal leaves, or for a singleton
    # move the moving publications' own averages (precisions so high that eq. 3's coupling and the
    # prior do not pull the means), so that a lone outlier's publication can propose the high
    # precision its feature has once it stands alone.
    unpulled = jnp.full_like(precisions, UNPULLED_START)
    start = (lambda current: unpulled) if singleton else (lambda current: current)
    centre, scale = proposal(merged, start(precisions))
    precisions_merged = jnp.where(is_split, precisions,
                                  jnp.where(active_types[:, None], jnp.exp(centre + scale * noise), precisions))
    # The division of the references in play, at the merged state's precisions (drawn for a
    # split, the current one's probability for a merge).
    safe_merged = _safe(precisions_merged, active_types)
    point_precisions = safe_merged[types]
    context = _MoveContext(point_precisions, point_precisions * features, _coupling(safe_merged, active_types))
    if singleton:  # allocates nothing: every reference in play stays with j, no order is read
        order, n_visits = index, jnp.zeros((), jnp.int32)
    else:
        order = jnp.argsort(jnp.where(in_play, draws.keys, jnp.uint32(0xFFFFFFFF)))
        n_visits = jnp.where(possible, jnp.sum(in_play), 0).astype(jnp.int32)
    on_i, log_q = sequential_allocation(_side_model(config, features, context, means, counts), order,
                                        draws.uniforms, n_visits, i, j, ~is_split, clusters == label_i)
    side_i, side_j = moving & on_i, moving & ~on_i
    split = _sides_of(features, types, jnp.stack([side_i, side_j]), n_type_slots)
    centre_split, scale_split = proposal(split, start(precisions_merged))
    precisions_split = jnp.where(is_split & active_types[:, None], jnp.exp(centre_split + scale_split * noise),
                                 precisions)
    # The merge's proposal seen from the split.
    centre_merged, scale_merged = proposal(merged, start(precisions_split))

    size_i, size_j = jnp.sum(side_i).astype(dtype), jnp.sum(side_j).astype(dtype)
    size_both = size_i + size_j
    n_merged = jnp.where(is_split, n_clusters, n_clusters - 1).astype(dtype)
    n_split_state = n_merged + 1.0
    target = lambda sides, t: _log_target(config, sides, t, active_types, type_counts, shape, rate, rest)
    log_posterior = (log_alpha + gammaln(size_i) + gammaln(size_j) - gammaln(size_both)
                     + target(split, precisions_split) - target(merged, precisions_merged))
    if singleton:
        # Split: the reference (1 / M). Merge: the singleton (1 / M), then the other publication
        # (1 / (K_s - 1)).
        log_split_proposal = _log_proposal(precisions_split, centre_split, scale_split, active_types)
        log_merge_proposal = (-jnp.log(n_split_state - 1.0)
                              + _log_proposal(precisions_merged, centre_merged, scale_merged, active_types))
    else:
        log_split_proposal = (_log_split_proposal(n_merged, size_both, log_q)
                              + _log_proposal(precisions_split, centre_split, scale_split, active_types))
        # The merge picks its ordered pair uniformly (1 / K_s (K_s - 1)), not by merge gains.
        log_merge_proposal = (math.log(0.5) - jnp.log(n_split_state) - jnp.log(n_split_state - 1.0)
                              - jnp.log(size_i) - jnp.log(size_j)
                              + _log_proposal(precisions_merged, centre_merged, scale_merged, active_types))
    log_ratio = log_posterior + log_merge_proposal - log_split_proposal
    log_ratio = jnp.where(is_split, log_ratio, -log_ratio)
    accepted = possible & (jnp.log(draws.accept) < log_ratio)
    free = counts == 0
    overflow = accepted & is_split & ~jnp.any(free)
    accepted = accepted & ~overflow

    new_slot = jnp.argmax(free).astype(clusters.dtype)
    moved = jnp.where(is_split, side_j, clusters == label_i)
    clusters = jnp.where(accepted & moved, jnp.where(is_split, new_slot, label_j), clusters)
    counts = segment_sum(jnp.ones((n_points,), counts.dtype), clusters, num_segments=n_slots)
    precisions = jnp.where(accepted, jnp.where(is_split, precisions_split, precisions_merged), precisions)
    # The means of the publications now holding i and j, from their conditional given the others
    # and the precisions after the move (jointly when there are two).
    safe = _safe(precisions, active_types)
    coupling = _coupling(safe, active_types)
    weight, weighted = _weights(split, safe)
    separate = is_split == accepted  # an accepted split or a rejected merge
    new_means = _redraw_moved_means(config, key_means, means, coupling, n_rest, rest_total, weight, weighted, separate,
                                    clusters[i], clusters[j])
    carry = carry._replace(clusters=clusters, cluster_counts=counts, means=jnp.where(possible, new_means, means),
                           precisions=precisions,
                           overflow=carry.overflow | jnp.where(overflow, _CLUSTER_OVERFLOW, 0))
    return carry, (is_split & possible, ~is_split & possible, accepted)


def moves_per_sweep(n_precision_split_merge: int) -> int:
    """Moves of the test partition that ``_precision_split_merge_moves`` runs per sweep: each
    move with sequential allocation, then as many singleton moves."""
    return 2 * n_precision_split_merge


def _precision_split_merge_moves(config, rng_key, carry, features, n_train_clusters, alpha, shape, rate):
    """``config.n_precision_split_merge`` moves with sequential allocation in a row (keys
    ``fold_in(rng_key, move)``), then as many singleton moves (keys ``fold_in(fold_in(rng_key,
    SINGLETON_KEY), move)``), in XLA on every backend. Returns (carry, SplitMergeMoves counts)."""
    log_alpha = jnp.log(alpha).astype(features.dtype)

    def moves_of(singleton, key):
        def move(state, move_index):
            carry, moves = state
            carry, (split, merge, accepted) = _precision_move(
                config, jax.random.fold_in(key, move_index), carry, features, n_train_clusters, log_alpha, shape,
                rate, singleton=singleton)
            moves = SplitMergeMoves(moves.splits_proposed + split, moves.splits_accepted + (split & accepted),
                                    moves.merges_proposed + merge, moves.merges_accepted + (merge & accepted))
            return (carry, moves), None
        return move

    state = (carry, no_moves())
    state, _ = jax.lax.scan(moves_of(False, rng_key), state, jnp.arange(config.n_precision_split_merge))
    state, _ = jax.lax.scan(moves_of(True, jax.random.fold_in(rng_key, SINGLETON_KEY)), state,
                            jnp.arange(config.n_precision_split_merge))
    return state
