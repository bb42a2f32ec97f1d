"""The Gibbs step: :func:`build_kernel` and the pure ``step(rng_key, state, data)`` it returns.

One step (BlackJAX's shape: a configuration closed over, the key and the state as arguments) is a
sweep over the points (:func:`_sweep` prepares what the algorithm needs in bulk and runs one of
:mod:`inference.neal._sweeps`), optional split–merge moves (:mod:`inference.split_merge`), the
component parameters (posterior draws or the independence sampler), then α and the diagnostics
(:func:`_finish_step`, shared with :mod:`inference.subcluster`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from inference._validation import check_bool, check_int
from inference.components import ComponentFamily
from inference.concentration import GammaPrior, escobar_west_update
from inference.neal._slots import _concat_rows, _select_rows, _take_row
from inference.neal._state import (
    GibbsInfo,
    GibbsState,
    _check_algorithm,
    _check_family,
    _log_joint,
    cluster_stats,
)
from inference.neal._sweeps import _collapsed_sweep, _compact_rows, _fresh_candidate_sweep, _reuse_sweep
from inference.native.backend import resolve_backend
from inference.segments import segment_sum
from inference.step_cache import shared_step
from inference.split_merge import split_merge_moves


def build_kernel(
    family: ComponentFamily,
    algorithm: str = "auxiliary",
    *,
    n_auxiliary: int = 3,
    reuse_auxiliary: bool = False,
    alpha_prior: GammaPrior | None = None,
    n_param_proposals: int = 5,
    n_split_merge: int = 0,
    split_merge_scans: int = 0,
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
    split_merge_scans : int
        How a split is proposed: 0, by sequential allocation (Dahl 2003); t > 0, by a restricted
        Gibbs scan from a launch state made with t restricted Gibbs scans (Jain & Neal 2004), about
        t + 1 times the allocation's cost, with proposals that find the divisions the data favour
        (and merges whose reverse split is then likely enough to be accepted).
    backend : {"auto", "xla", "numba"}
        How the sequential loop over the points runs: ``"xla"`` as a ``lax.scan`` (any JAX
        backend), ``"numba"`` as a compiled loop that XLA calls as a custom call
        (CPU; several times faster there). ``"auto"`` picks numba on the
        CPU backend when numba is installed (see :func:`inference.native.resolve_backend`). Both
        use the same random numbers and make the same decisions, so they give the same chain up
        to floating-point rounding. Used by Algorithms 2 and 8 (fresh or reused auxiliaries)
        when the family has the dot-product form of :mod:`zoo.dirichlet.families` (the built-in
        ones), by Algorithm 8 with reused auxiliaries for any family, and by Algorithm 3 and the
        split–merge moves (with ``split_merge_scans=0``) when the family declares a
        ``native_predictive`` (:func:`zoo.dirichlet.families.normal_gamma`,
        :func:`zoo.dirichlet.known_precision.normal_known_precision`); the others run in XLA.

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
    >>> from inference.neal import build_kernel, init
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
    split_merge_scans = check_int("split_merge_scans", split_merge_scans, minimum=0)
    if n_split_merge and not (family.has_marginal and (algorithm == "collapsed" or family.has_posterior)):
        raise ValueError(f"n_split_merge: split–merge moves need the marginal likelihoods of the family "
                         f"{family.name!r} (point_stats, log_marginal, log_predictive) and, for algorithm "
                         f"{algorithm!r}, its posterior sampler")
    check_bool("reuse_auxiliary", reuse_auxiliary)
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
        split_merge_scans=split_merge_scans,
        backend=resolve_backend(backend),
    )
    return shared_step(_step, config)


class _KernelConfig(NamedTuple):
    family: ComponentFamily
    algorithm: str
    n_auxiliary: int
    reuse_auxiliary: bool
    alpha_prior: GammaPrior | None
    n_param_proposals: int
    n_split_merge: int
    split_merge_scans: int
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
            family, data, state.assignments, state.counts, state.stats, jnp.log(alpha), prior_log_pred, uniforms,
            config.backend,
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
            family, key_split_merge, data, assignments, counts, state.alpha, config.n_split_merge,
            launch_scans=config.split_merge_scans, backend=config.backend)
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
