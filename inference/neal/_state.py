"""The state of a Dirichlet-process Gibbs chain, how it starts and what is computed from it.

:class:`GibbsState` (the partition as slots of a fixed capacity K_max, parameters, statistics, α)
and :class:`GibbsInfo` (per-step diagnostics); :func:`init` builds a state from labels and
:func:`grow_capacity` pads it to a larger K_max. The quantities the kernels read off a partition
live here too: the CRP prior :func:`log_crp_prior`, the exact per-slot statistics
:func:`cluster_stats`, the initial parameter draws and the log joint reported per step.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from inference._validation import as_index_array, check_choice, check_int, check_key, check_real
from inference.components import ComponentFamily
from inference.neal._slots import _take_row
from inference.segments import segment_sum
from inference.jit import jit

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
    rng_key = check_key("rng_key", rng_key)
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
_init_arrays = jit(_initial_state, static_argnums=(0, 1, 2))


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
