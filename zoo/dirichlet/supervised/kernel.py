"""The Gibbs step of SCDP-1, -2 and -3 (BlackJAX shape: ``build_kernel(...)`` returns a pure
``step(rng_key, state, data)``): split–merge moves, parameters, the assignment sweep, then the
concentrations.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from inference.concentration import escobar_west_multi_group_update, GammaPrior
from inference.native.backend import resolve_backend
from inference.step_cache import shared_step
from inference._validation import check_bool, check_int, check_real
from zoo.dirichlet.families import sample_log_gamma
from zoo.dirichlet.supervised.conditionals import (
    _gibbs_means_conditioned, _log_joint, _metropolis_precisions_conditioned, _sample_means, _sample_precisions,
    _separation_prior,
)
from zoo.dirichlet.supervised.precision_moves import _precision_split_merge_moves, moves_per_sweep
from zoo.dirichlet.supervised.split_merge import _split_merge_moves, _type_split_merge_moves
from zoo.dirichlet.supervised.state import (_Carry, _Config, MODELS, _nearest_partners_in_graph, SupervisedData,
                                            SupervisedInfo, SupervisedState)
from zoo.dirichlet.supervised.sweep_xla import _SweepDraws, _xla_sweep

__all__ = ["build_kernel", "DEFAULT_SPLIT_MERGE", "DEFAULT_PRECISION_SPLIT_MERGE", "partition_moves_per_sweep"]

DEFAULT_SPLIT_MERGE = 10
"""Split–merge moves of the test partition per sweep by default: :func:`build_kernel`'s, and the
fewest that ``SupervisedDP(n_split_merge=None)`` gives
(:func:`zoo.dirichlet.supervised.fit.auto_split_merge`)."""

DEFAULT_PRECISION_SPLIT_MERGE = 2
"""SCDP-3's split–merge moves with precisions per sweep when ``n_precision_split_merge`` is None."""

DEFAULT_TYPE_SPLIT_MERGE = 5
"""SCDP-2's split–merge moves of the reference types per sweep when ``n_type_split_merge`` is None
(SCDP-1 runs none then; see :func:`build_kernel`)."""


def _supply_sizes(n_test: int, n_points: int, n_cluster_slots: int, n_type_slots: int) -> tuple[int, int]:
    """Rows of fresh draws per sweep: twice the capacity, at most one per reference that can open
    a cluster (type), so full capacity never runs out (see :class:`_SweepDraws`)."""
    return max(1, min(n_test, 2 * n_cluster_slots)), max(1, min(n_points, 2 * n_type_slots))


def partition_moves_per_sweep(step) -> int:
    """Split–merge moves of the test partition that a step of
    :func:`zoo.dirichlet.supervised.kernel.build_kernel` runs per sweep, the count behind
    ``SupervisedInfo``'s ``split_merge_accepted``: ``n_split_merge`` and, for
    SCDP-3, the moves with precisions and their singleton moves."""
    config = step.args[0]
    return config.n_split_merge + moves_per_sweep(config.n_precision_split_merge)


def _step(config: _Config, rng_key: jax.Array, state: SupervisedState, data: SupervisedData):
    features = data.features
    dtype = features.dtype
    n_train = data.n_train
    n_points, n_features = features.shape
    n_test = n_points - n_train
    n_train_clusters = jnp.max(data.train_labels) + 1
    (key_means, key_precisions, key_uniform, key_positions, key_cluster_supply, key_type_supply,
     key_alpha, key_alpha_types, key_split_merge) = jax.random.split(rng_key, 9)
    key_type_moves = jax.random.fold_in(rng_key, 9)  # a key of its own: the chains without type moves are unchanged
    key_precision_moves = jax.random.fold_in(rng_key, 10)  # likewise
    key_pairs = jax.random.fold_in(rng_key, 11)  # likewise

    carry = _Carry(
        state.clusters, state.cluster_counts, state.means, state.types, state.type_counts, state.precisions,
        state.overflow,
    )
    # 0. Split–merge moves of the test partition, means integrated given the types (they move
    #    whole groups of references, which one-reference updates cannot do).
    n_accepted = n_type_accepted = jnp.zeros((), jnp.int32)
    if config.n_split_merge and n_test >= 2:
        carry, moves = _split_merge_moves(config, key_split_merge, carry, features, n_train, n_train_clusters,
                                          state.alpha)
        n_accepted = moves.splits_accepted + moves.merges_accepted
    shape, rate = state.precision_shape, state.precision_rate
    if config.n_precision_split_merge and n_test >= 2:
        # SCDP-3: splits and merges of test publications that propose the precisions with them.
        carry, moves = _precision_split_merge_moves(config, key_precision_moves, carry, features, n_train_clusters,
                                                    state.alpha, shape, rate)
        n_accepted = n_accepted + moves.splits_accepted + moves.merges_accepted
    if config.model == 2:
        shape, rate = _separation_prior(
            carry.means, carry.cluster_counts, jnp.full((n_features,), config.precision_shape, dtype),
            jnp.full((n_features,), config.precision_rate, dtype),
        )
    n_cluster_slots, n_type_slots = carry.means.shape[0], carry.precisions.shape[0]
    # Every Gamma shape drawn below is a + n / 2 >= a: with a fixed prior shape a >= 1 (SCDP-1 and
    # -3 by default; SCDP-2 re-sets a each sweep) the sampler needs no boost for shapes below one.
    shape_at_least_one = config.model != 2 and config.precision_shape >= 1.0
    n_cluster_supply, n_type_supply = _supply_sizes(n_test, n_points, n_cluster_slots, n_type_slots)

    # 1. Parameters given the indicators (DM05 Fig. 2 first two lines; §4.2 for SCDP-3), and the
    #    fresh draws of the assignment sweep (see _SweepDraws).
    uniforms = jax.random.uniform(key_uniform, (2, n_points), dtype)
    n_pairs = n_test if config.pair_moves and n_test >= 2 else 0
    key_pair_uniforms, key_pair_normals = jax.random.split(key_pairs)
    pair_uniforms = jax.random.uniform(key_pair_uniforms, (3 * n_pairs,), dtype)
    pair_normals = jax.random.normal(key_pair_normals, (2 * n_pairs, n_features), dtype)
    if config.model == 3:
        carry = _gibbs_means_conditioned(config, key_means, carry, features)
        carry = _metropolis_precisions_conditioned(config, key_precisions, carry, features, shape, rate)
        n_auxiliary = config.n_auxiliary
        cluster_draws = math.sqrt(config.prior_variance) * jax.random.normal(
            key_cluster_supply, (n_auxiliary + n_cluster_supply, n_features), dtype
        )
        type_draws = jnp.exp(
            sample_log_gamma(key_type_supply, shape, (n_auxiliary + n_type_supply, n_features),
                             at_least_one=shape_at_least_one) - jnp.log(rate)
        )
        draws = _SweepDraws(
            uniforms=uniforms,
            positions=jax.random.randint(key_positions, (2, n_points), 0, n_auxiliary, jnp.int32),
            cluster_supply=cluster_draws[n_auxiliary:],
            type_supply=type_draws[n_auxiliary:],
            cluster_pool=cluster_draws[:n_auxiliary],
            type_pool=type_draws[:n_auxiliary],
            pair_uniforms=pair_uniforms,
            pair_normals=pair_normals,
        )
    else:
        point_precisions = carry.precisions[carry.types]
        means = _sample_means(
            key_means, features, carry.clusters, point_precisions, n_cluster_slots, config.prior_variance
        )
        residuals = features - means[carry.clusters]
        if config.n_type_split_merge:
            # Split–merge moves of the types, their precisions integrated given the means; the
            # precisions drawn next for every type complete the block update of (d, t).
            carry, type_moves = _type_split_merge_moves(config, key_type_moves, carry, residuals, shape, rate,
                                                        state.alpha_types)
            n_type_accepted = type_moves.splits_accepted + type_moves.merges_accepted
        # One bulk Gamma draw serves the precision posteriors and the new-type supply.
        precisions, log_gamma_unit = _sample_precisions(
            key_precisions, residuals, carry.types, carry.type_counts, shape, rate, n_type_supply,
            at_least_one=shape_at_least_one,
        )
        carry = carry._replace(means=means, precisions=precisions)
        draws = _SweepDraws(
            uniforms=uniforms,
            positions=jnp.zeros((2, n_points), jnp.int32),
            cluster_supply=jax.random.normal(key_cluster_supply, (n_cluster_supply, n_features), dtype),
            type_supply=log_gamma_unit,
            cluster_pool=jnp.zeros((0, n_features), dtype),
            type_pool=jnp.ones((0, n_features), dtype),
            pair_uniforms=pair_uniforms,
            pair_normals=pair_normals,
        )

    # 2. Indicators, one reference at a time: c_n for test references, then the pair moves, then
    #    d_n for the training references.
    if config.backend == "numba":
        from inference.native.supervised_sweep import numba_sweep as sweep  # imports numba
    else:
        sweep = _xla_sweep
    partners = data.partners
    if not n_pairs:
        partners = jnp.zeros((0,), jnp.int32)
    elif partners is None:
        partners = _nearest_partners_in_graph(features, n_train)
    carry = sweep(config, carry, features, n_train, n_train_clusters, state.alpha, state.alpha_types, shape, rate,
                  draws, partners)

    # 3. Concentrations (DM05 §4.3, App. B multi-group form).
    n_test_clusters = jnp.sum(jnp.zeros(n_cluster_slots, jnp.int32).at[carry.clusters[n_train:]].add(1) > 0)
    alpha = state.alpha
    if config.alpha_prior is not None:
        total_clusters = jnp.sum(carry.cluster_counts > 0)
        groups = jnp.asarray([n_points]) if config.share_clusters else jnp.asarray([n_train, n_test])
        alpha = escobar_west_multi_group_update(key_alpha, alpha, total_clusters, groups, config.alpha_prior)
    alpha_types = state.alpha_types
    n_types = jnp.sum(carry.type_counts > 0)
    if config.alpha_types_prior is not None:
        alpha_types = escobar_west_multi_group_update(
            key_alpha_types, alpha_types, n_types, jnp.asarray([n_points]), config.alpha_types_prior
        )
    log_joint = _log_joint(config, carry, features, n_train, alpha, alpha_types, shape, rate, n_train_clusters)
    new_state = SupervisedState(
        carry.clusters, carry.cluster_counts, carry.means, carry.types, carry.type_counts, carry.precisions,
        alpha, alpha_types, shape, rate, carry.overflow,
    )
    info = SupervisedInfo(
        n_clusters=n_test_clusters.astype(jnp.int32),
        n_types=n_types.astype(jnp.int32),
        log_joint=log_joint,
        alpha=alpha,
        alpha_types=alpha_types,
        overflow=carry.overflow,
        split_merge_accepted=n_accepted,
        type_split_merge_accepted=n_type_accepted,
    )
    return new_state, info


def build_kernel(
    model: int = 1,
    *,
    share_clusters: bool = False,
    prior_variance: float = 1.0,
    precision_shape: float = 1.0,
    precision_rate: float = 1.0,
    alpha_prior: GammaPrior | None = None,
    alpha_types_prior: GammaPrior | None = None,
    n_auxiliary: int = 8,
    n_split_merge: int = DEFAULT_SPLIT_MERGE,
    n_precision_steps: int = 8,
    backend: str = "auto",
    n_type_split_merge: int | None = None,
    n_precision_split_merge: int | None = None,
    pair_moves: bool | None = None,
):
    """Build the Gibbs step of SCDP-1, -2 or -3.

    Parameters
    ----------
    model : {1, 2, 3}
        SCDP variant (see the module docstring).
    share_clusters : bool
        Whether test references may join training publications (DM05 §4.1).
    prior_variance : float
        σ² of G0^p = Normal(0, σ² I).
    precision_shape, precision_rate : float
        Gamma(a, rate b) of G0^t (the starting prior for SCDP-2).
    alpha_prior, alpha_types_prior : GammaPrior, optional
        Priors of α^p and α^t; None keeps the concentration fixed.
    n_auxiliary : int
        M, auxiliary draws of Algorithm 8 (SCDP-3; DM05 use 8).
    n_split_merge : int
        Split–merge Metropolis–Hastings moves of the test partition per sweep
        (:mod:`inference.split_merge`: informed merges, sequentially allocated splits), with the publication means integrated given the reference types (for
        SCDP-3 conditionally on the other means, eq. 3): they split or merge whole test
        publications, which one-reference Gibbs updates almost never do in many dimensions
        (a chain started with every test reference in one publication stays there). 0 turns
        them off.
    n_precision_steps : int
        SCDP-3: Metropolis steps on the log precisions per sweep (their conditional is not a
        Gamma, see :func:`_metropolis_precisions_conditioned`).
    n_type_split_merge : int
        SCDP-1 and -2: split–merge moves of the reference-type partition per sweep
        (:func:`.split_merge._type_split_merge_moves`: all references, training and test, the
        precisions integrated given the publication means), run between the means and the
        precisions. Without them a chain keeps about the number of types its first sweeps open
        (one-reference updates open a type from one reference's residual, in many dimensions
        almost never). Off by default: on the digits of ``notebooks/supervised_digits.ipynb``
        five per sweep brought SCDP-1's chains to the same types and 550–1,090 nats higher, but on
        the FEBRL records of ``notebooks/record_linkage.ipynb`` (16 coordinates) the chains held
        2 types where those without the moves held 2–3, and ended in test partitions 70–1,280
        nats lower (F 0.42 against 0.87): the moves acted from the first sweeps, while the test
        partition was still coarse (1–9 test publications), and in three chains of four the
        test publications then grew slowly, to 54–68 after 800 sweeps against ~95 without.
        Switching them on only after 250 sweeps without (by hand, with
        :func:`inference.chains.sample_chains`) kept the FEBRL chains where those without moves
        are (F 0.88), but left the digits' chains at 29–33 test publications and 220–770 nats
        lower than with moves from the first sweep (20–22 publications). They run on either
        backend (numba as the Normal–Gamma DP mixture's moves; SCDP-2's prior, which changes
        every sweep, goes to them as an array): on the digits, four chains, five moves add 2.3 ms
        to SCDP-1's sweep and 22 ms to SCDP-2's (per-feature priors, 99 ms in XLA). SCDP-3 has
        none (its precisions are tied to the means by eq. 3). ``None`` (default): 5 for SCDP-2
        (since 2026-12-07), 0 for SCDP-1 and -3. Without them SCDP-2's number of types did not
        mix in the 4,000 draws of a default fit (4 chains, key 0, half of the rows trained with
        their classes, standardised): on iris (R-hat of ``n_types`` above 1.01 after 4,000 draws,
        10.1 s) and on wine (``n_types``, ``alpha_types`` and the partition entropy, 14.5 s),
        where with five a sweep both mixed (750 draws in 7.2 s, 1,380 in 11.9 s) at the same F
        (0.714, 0.734); on the FEBRL records SCDP-2 held one type in every chain either way and
        gave the same chains and F (0.842) in 66 s against 51 s. SCDP-1, whose FEBRL chains the
        moves sent lower (above), stays without; on the same iris and wine fits it mixed with and
        without them.
    n_precision_split_merge : int, optional
        SCDP-3: split–merge moves of the test partition per sweep that propose every active
        type's precisions together with the split or merge (:mod:`.precision_moves`), run after
        the ``n_split_merge`` moves, in XLA on every backend. The moves at fixed precisions
        cannot leave a partition whose precisions make every split too dear: on the dequantised
        digits of ``notebooks/supervised_digits.ipynb`` (4 chains, 1,000 sweeps, key 3) one SCDP-3
        chain without these moves held 8 test publications to the end, its second half 558 nats
        below the other three, every fixed-precision move after sweep 7 rejected; with two per
        sweep it reached 9 publications at sweep 24, and the four chains' second halves agreed
        within 2 nats, at 9 publications each (from the stuck chain's last state, one of these
        moves split a publication and raised the top-right pixel's precision from 1.46 to 3.0).
        Cost there: 28.2 ms a sweep of four chains without, 33.8 with two, 50.1 with five.
        ``None`` (default): 2 for SCDP-3, 0 for SCDP-1 and -2, which have none (their
        precisions are conjugate). Each sweep also runs as many singleton moves
        (one test reference split off alone, or a singleton merged into another publication, the
        precisions proposed from the publications' own averages; see :mod:`.precision_moves`),
        which free chains held by a feature that one outlying reference inks. Their acceptances
        are counted with the test partition's in ``split_merge_accepted``.
    pair_moves : bool, optional
        SCDP-1 and -2: after the test references' one-reference updates, one pair move per test
        reference (:func:`.sweep_xla._pair_move`): it and its nearest test reference
        (:func:`zoo.dirichlet.supervised.state.nearest_partners`), when they share a type that
        other references hold, get their publications and common type redrawn jointly, apart or
        together, in existing or new publications. One-reference updates change a reference's
        publication given its type and its type given its publication; a close pair that is
        either a publication of its own with the tight common type or part of a large
        publication with a type of large variances, or two records of one entity each inside a
        wrong publication with the loose type, passes between these only through a state where
        one of the two has left, which both one-reference updates avoid. On scikit-learn's wine
        (13 standardised features; classes 0 and 1 trained, the 48 wines of class 2 the test
        references; 4 chains × 2,000 sweeps) such a pair changed mode 3–6 times per chain and
        held the bulk ESS of the number of test publications at 41 and 25 (keys 0 and 1); with
        pair moves it was 144, 333, 278, 158 and 202 (keys 0–4), at 3.9–4.2 s per fit against
        3.7–4.0 s (``benchmarks/bench_scdp_mixing.py``). On the FEBRL records of
        ``notebooks/record_linkage.ipynb`` (key 0) the R-hat of the number of test entities was
        1.96 without pair moves, 1.39 with the first version of the move (2026-11-29: the pair
        redrawn only when together, and kept together) and 1.15 with this one (bulk ESS 9 → 19),
        in 77 s against 69 s and 65 s. Long runs on wine with and without pair moves
        (``n_type_split_merge=5``, 4 chains × 8,000 kept draws, the first version) agree on the
        posterior: mean log joint -2,692.7 ± 0.4 and -2,693.3 ± 0.5, mean K 2.53 ± 0.02 and
        2.56 ± 0.04. On the digits of ``notebooks/supervised_digits.ipynb`` (five type moves per
        sweep) neither version freed K (R-hat of SCDP-1's 3.5 without, 5.7 and 5.2 with; SCDP-2's
        3.2, 2.8 and 1.45) nor changed F by more than separate runs differ (SCDP-1 0.505, 0.488,
        0.481; SCDP-2 0.470, 0.474, 0.471); this one costs about a third more per SCDP-1 fit there
        (39 s against 30 s in the notebook's runs). ``None`` (default): on for SCDP-1 and -2. SCDP-3 has none: there a
        publication that the pair opens adds its mean to eq. 3's conditioning, which the move
        must integrate; a prototype that did (exact against the log joint, 2026-11-29) left
        SCDP-3's chains on the digits in the modes they hold without it (three at -73,070, one at
        -70,492).
    backend : {"auto", "xla", "numba"}
        Where the assignment sweep and the split–merge moves run: "xla" as ``lax`` loops (any
        device); "numba" as compiled loops that XLA calls as custom calls, the chains in
        parallel (CPU, much faster there); "auto" picks numba on the CPU backend when numba is
        installed. Both use the same random numbers and give the same chain.

    Returns
    -------
    callable
        ``step(rng_key, state, data) -> (SupervisedState, SupervisedInfo)``; jit it or pass it
        to :func:`inference.chains.sample_chains`.
    """
    if check_int("model", model) not in MODELS:  # an integer: 1 + 0j or 2.7 are not model numbers
        raise ValueError(f"model: must be one of 1, 2, 3, got {model!r}")
    check_bool("share_clusters", share_clusters)
    for name, prior in (("alpha_prior", alpha_prior), ("alpha_types_prior", alpha_types_prior)):
        if prior is not None and not isinstance(prior, GammaPrior):
            raise TypeError(f"{name}: expected a GammaPrior or None, got {type(prior).__name__}")
    if n_type_split_merge is None:
        n_type_split_merge = DEFAULT_TYPE_SPLIT_MERGE if int(model) == 2 else 0
    n_type_split_merge = check_int("n_type_split_merge", n_type_split_merge, minimum=0)
    if n_type_split_merge and int(model) == 3:
        raise ValueError("n_type_split_merge: SCDP-3's reference types have no split-merge moves (their precisions "
                         "are conditioned on the means by DM05 eq. 3); give 0")
    if n_precision_split_merge is None:
        n_precision_split_merge = DEFAULT_PRECISION_SPLIT_MERGE if int(model) == 3 else 0
    n_precision_split_merge = check_int("n_precision_split_merge", n_precision_split_merge, minimum=0)
    if n_precision_split_merge and int(model) != 3:
        raise ValueError("n_precision_split_merge: only SCDP-3 has split-merge moves with precisions (SCDP-1's and "
                         "-2's precisions are conjugate; their type moves integrate them); give 0 or None")
    if pair_moves is None:
        pair_moves = int(model) != 3
    if not isinstance(pair_moves, (bool, np.bool_)):
        raise TypeError(f"pair_moves: expected a bool or None, got {type(pair_moves).__name__}")
    pair_moves = bool(pair_moves)
    if pair_moves and int(model) == 3:
        raise ValueError("pair_moves: SCDP-3 has no pair moves (see build_kernel's docstring); give False or None")
    config = _Config(
        model=int(model),
        share_clusters=bool(share_clusters),
        prior_variance=check_real("prior_variance", prior_variance, low=0.0, low_open=True),
        precision_shape=check_real("precision_shape", precision_shape, low=0.0, low_open=True),
        precision_rate=check_real("precision_rate", precision_rate, low=0.0, low_open=True),
        alpha_prior=alpha_prior,
        alpha_types_prior=alpha_types_prior,
        n_auxiliary=check_int("n_auxiliary", n_auxiliary, minimum=1),
        n_split_merge=check_int("n_split_merge", n_split_merge, minimum=0),
        n_precision_steps=check_int("n_precision_steps", n_precision_steps, minimum=1),
        backend=resolve_backend(backend),
        n_type_split_merge=n_type_split_merge,
        n_precision_split_merge=n_precision_split_merge,
        pair_moves=pair_moves,
    )
    return shared_step(_step, config)
