"""Tests for inference.neal: Neal (2000) Algorithms 2, 3 and 8 (and 8 with reused auxiliaries).

Exactness: for a handful of points every set partition is enumerated and the exact posterior
p(z | x) ∝ CRP(z | α) Π_k p(x_k) is computed — with α fixed, or with α integrated against its
Gamma prior by 1-D quadrature. Each kernel's draws (many chains, ``vmap``-ped) must match it in
total variation (< 0.02), and the test first checks that the Monte Carlo noise of that TV
(computed from the exact probabilities and the number of draws) is well below 0.02, so the
comparison can fail. The same runs check the recorded log joint against log p(x, z | α) and the
final statistics against the assignments. By default each algorithm runs once (one with α
resampled) and the capacity checks use Algorithm 3; every pairing, 6 points (203 partitions),
the discrete families and the independence sampler for non-conjugate parameters are slow tests.

Capacity: a tiny K_max must report overflow (sticky, partition kept valid), and a sweep's draws
must not depend on K_max — the basis of growing the capacity on overflow.

Backends: Algorithms 2 and 8 (fresh or reused auxiliaries) run their point loop in numba on CPU
by default ("auto"); the XLA path must give the same chain from the same keys (and is checked
for exactness itself in the slow tests, "auxiliary-reuse-xla").
"""

from __future__ import annotations

import itertools
from collections import Counter
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

from inference import neal
from inference.chains import sample_chains, stack_states
from inference.concentration import GammaPrior
from zoo.dirichlet.families import (
    add_stats,
    beta_bernoulli,
    custom_family,
    dirichlet_multinomial,
    normal_gamma,
)
from zoo.dirichlet.known_precision import normal_known_precision

TV_LIMIT = 0.02
NOISE_LIMIT = 0.008
VARIANTS = {
    "collapsed": dict(algorithm="collapsed"),
    "conjugate": dict(algorithm="conjugate"),
    "auxiliary": dict(algorithm="auxiliary", n_auxiliary=2),
    "auxiliary-reuse": dict(algorithm="auxiliary", n_auxiliary=2, reuse_auxiliary=True),
    "auxiliary-reuse-xla": dict(algorithm="auxiliary", n_auxiliary=2, reuse_auxiliary=True, backend="xla"),
    "collapsed-split-merge": dict(algorithm="collapsed", n_split_merge=2),
    "conjugate-split-merge": dict(algorithm="conjugate", n_split_merge=2),
}


# ----------------------------------------------------------------------------- exact targets
def set_partitions(n_points: int) -> list[tuple[int, ...]]:
    """Every partition of range(n) as canonical labels (first appearance order)."""

    def extend(prefix, n_blocks):
        if len(prefix) == n_points:
            yield tuple(prefix)
            return
        for label in range(n_blocks + 1):
            yield from extend(prefix + [label], max(n_blocks, label + 1))

    return list(extend([], 0))


def canonical(labels) -> tuple[int, ...]:
    mapping: dict[int, int] = {}
    return tuple(mapping.setdefault(int(label), len(mapping)) for label in labels)


def log_crp_weight(sizes, n_clusters, log_alpha_term) -> float:
    return log_alpha_term[n_clusters] + sum(special.gammaln(size) for size in sizes)


def log_partition_weights(family, data, *, alpha=None, alpha_prior=None) -> dict[tuple[int, ...], float]:
    """log p(x, z | α) of every partition z, α fixed or integrated against a Gamma(shape, rate) prior
    (their log-sum-exp is log p(x), the evidence)."""
    n_points = len(data)
    if alpha_prior is None:
        log_alpha_term = {
            k: k * np.log(alpha) + special.gammaln(alpha) - special.gammaln(alpha + n_points)
            for k in range(1, n_points + 1)
        }
    else:
        shape, rate = alpha_prior

        def prior_times_crp(value, k):
            return np.exp(
                stats_gamma_logpdf(value, shape, rate)
                + k * np.log(value)
                + special.gammaln(value)
                - special.gammaln(value + n_points)
            )

        log_alpha_term = {
            k: np.log(integrate.quad(prior_times_crp, 0.0, np.inf, args=(k,), epsabs=0, epsrel=1e-11, limit=200)[0])
            for k in range(1, n_points + 1)
        }
    points = [jnp.asarray(point) for point in data]
    log_weights = {}
    for labels in set_partitions(n_points):
        blocks = [[i for i in range(n_points) if labels[i] == block] for block in range(max(labels) + 1)]
        log_weight = log_crp_weight([len(block) for block in blocks], len(blocks), log_alpha_term)
        for block in blocks:
            stats = family.point_stats(points[block[0]])
            for i in block[1:]:
                stats = add_stats(stats, family.point_stats(points[i]))
            log_weight += float(family.log_marginal(stats))
        log_weights[labels] = log_weight
    return log_weights


def exact_posterior(family, data, *, alpha=None, alpha_prior=None) -> dict[tuple[int, ...], float]:
    """p(z | x) over all partitions, α fixed or integrated against a Gamma(shape, rate) prior."""
    log_weights = log_partition_weights(family, data, alpha=alpha, alpha_prior=alpha_prior)
    top = max(log_weights.values())
    total = sum(np.exp(value - top) for value in log_weights.values())
    return {labels: float(np.exp(value - top) / total) for labels, value in log_weights.items()}


def stats_gamma_logpdf(value, shape, rate):
    return shape * np.log(rate) - special.gammaln(shape) + (shape - 1) * np.log(value) - rate * value


def expected_tv_noise(probabilities, n_effective) -> float:
    """E[TV] between a distribution and the empirical one of n i.i.d. draws (normal approx.)."""
    p = np.asarray(list(probabilities))
    return float(0.5 * np.sum(np.sqrt(2.0 * p * (1.0 - p) / (np.pi * n_effective))))


def empirical_tv(draws: np.ndarray, exact: dict) -> float:
    counts = Counter(canonical(row) for row in draws.reshape(-1, draws.shape[-1]))
    total = sum(counts.values())
    unknown = sum(count for labels, count in counts.items() if labels not in exact)
    assert unknown == 0
    return 0.5 * sum(abs(counts.get(labels, 0) / total - p) for labels, p in exact.items())


def run_kernel(family, data, variant, *, alpha, alpha_prior, n_chains, n_draws, seed):
    # The checks are float32 ones (float32 statistics, α == float32(0.8)); the data's dtype sets
    # the working precision, so the states are built from the same float32 points as the sweeps.
    data = np.asarray(data, dtype=np.float32)
    step = _cached_step(family, variant, alpha_prior)
    states = stack_states(
        [
            neal.init(
                jax.random.key(chain),
                data,
                family,
                algorithm=VARIANTS[variant]["algorithm"],
                max_clusters=len(data),
                alpha=alpha,
                assignments=np.arange(len(data)) % (1 + chain % 3),
            )
            for chain in range(n_chains)
        ]
    )
    result = sample_chains(
        jax.random.key(seed),
        step,
        states,
        jnp.asarray(data),
        n_warmup=50,
        n_draws=n_draws,
        draws_per_call=50,
        progress=False,
    )
    return result


@lru_cache(maxsize=None)
def _cached_step(family, variant, alpha_prior):
    return neal.build_kernel(family, alpha_prior=alpha_prior, **VARIANTS[variant])


FAMILY_1D = normal_gamma(1, mean=0.0, kappa=0.5, shape=2.0, rate=1.0)
DATA_4 = np.array([[-1.2], [-0.9], [0.8], [1.3]])
DATA_6 = np.array([[-1.6], [-1.1], [-0.9], [0.7], [1.0], [2.4]])


def check_exactness(family, data, variant, *, alpha=1.0, alpha_prior=None, n_chains, n_draws, seed=0):
    prior_pair = None if alpha_prior is None else (alpha_prior.shape, alpha_prior.rate)
    exact = exact_posterior(family, data, alpha=alpha, alpha_prior=prior_pair)
    # Gibbs draws are autocorrelated: budget an integrated autocorrelation time of 2 sweeps.
    noise = expected_tv_noise(exact.values(), n_chains * n_draws / 2.0)
    assert noise < NOISE_LIMIT, "too few draws for the test to be able to fail"
    result = run_kernel(
        family, data, variant, alpha=alpha, alpha_prior=alpha_prior, n_chains=n_chains, n_draws=n_draws, seed=seed
    )
    tv = empirical_tv(result.samples["assignments"], exact)
    assert tv < TV_LIMIT, f"{variant}: total variation {tv:.4f} (expected noise {noise:.4f})"
    return result


def check_log_joint_and_stats(family, data, result):
    """The recorded log joint is log p(x, z | α) with the parameters integrated out, and the
    final state's counts and statistics are those of its assignments."""
    samples = result.samples
    for chain, draw in [(0, -1), (1, 5), (2, 17)]:
        labels = samples["assignments"][chain, draw]
        alpha = float(samples["alpha"][chain, draw])
        sizes, log_marginals = [], 0.0
        for block in np.unique(labels):
            members = jnp.asarray(data[labels == block], dtype=jnp.float32)
            stats = family.point_stats(members[0])
            for point in members[1:]:
                stats = add_stats(stats, family.point_stats(point))
            log_marginals += float(family.log_marginal(stats))
            sizes.append(len(members))
        log_crp = len(sizes) * np.log(alpha) + special.gammaln(alpha) - special.gammaln(alpha + len(data))
        expected = log_crp + sum(special.gammaln(sizes)) + log_marginals
        np.testing.assert_allclose(samples["log_joint"][chain, draw], expected, rtol=2e-5)
        assert samples["n_clusters"][chain, draw] == len(sizes)
    final = result.final_state
    for chain in range(3):
        labels = np.asarray(final.assignments[chain])
        np.testing.assert_array_equal(final.counts[chain], np.bincount(labels, minlength=final.max_clusters))
        expected_stats = neal.cluster_stats(family, jnp.asarray(data, jnp.float32), final.assignments[chain], final.max_clusters)
        for leaf, expected_leaf in zip(jax.tree_util.tree_leaves(final.stats), jax.tree_util.tree_leaves(expected_stats)):
            np.testing.assert_allclose(leaf[chain], expected_leaf, rtol=1e-5, atol=1e-6)


# Default: each algorithm once, one of them with α resampled; the slow tests cover every pairing.
QUICK_CASES = [
    ("collapsed", None),
    ("conjugate", None),
    ("auxiliary", None),
    ("auxiliary-reuse", GammaPrior(2.0, 1.5)),
    ("conjugate-split-merge", GammaPrior(2.0, 1.5)),
]


@pytest.mark.parametrize("variant, alpha_prior", QUICK_CASES, ids=[case[0] for case in QUICK_CASES])
def test_exact_partition_posterior(variant, alpha_prior):
    result = check_exactness(FAMILY_1D, DATA_4, variant, alpha=0.8, alpha_prior=alpha_prior, n_chains=128, n_draws=800)
    check_log_joint_and_stats(FAMILY_1D, DATA_4, result)
    if alpha_prior is None:
        assert np.all(result.samples["alpha"] == np.float32(0.8))
    else:
        assert np.unique(result.samples["alpha"]).size > 100


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("resample_alpha", [False, True], ids=["alpha-fixed", "alpha-resampled"])
def test_exact_partition_posterior_six_points(variant, resample_alpha):
    prior = GammaPrior(1.5, 1.0) if resample_alpha else None
    check_exactness(FAMILY_1D, DATA_6, variant, alpha=1.3, alpha_prior=prior, n_chains=256, n_draws=3000, seed=1)


@pytest.mark.parametrize("variant", ["collapsed-split-merge", "auxiliary-reuse"])
def test_exact_partition_posterior_known_precision(variant):
    # DM05's CDP components (fixed precision): the cached predictive (Algorithm 3, split-merge)
    # and the dot-form likelihood (Algorithm 8, numba on the CPU) against the enumerated posterior.
    family = normal_known_precision(1, precision=2.0, mean=0.2, prior_variance=1.5)
    result = check_exactness(family, DATA_4, variant, alpha=0.8, n_chains=128, n_draws=800, seed=5)
    check_log_joint_and_stats(family, DATA_4, result)


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_exact_partition_posterior_discrete_families(variant):
    binary = np.array([[1, 0, 1], [1, 0, 0], [0, 1, 0], [0, 1, 1], [1, 1, 1]], dtype=float)
    check_exactness(beta_bernoulli(3, a=0.6, b=0.9), binary, variant, alpha=1.1, n_chains=128, n_draws=2000, seed=2)
    counts = np.array([[3, 0, 1], [2, 1, 0], [0, 2, 2], [0, 3, 1], [1, 1, 1]], dtype=float)
    check_exactness(
        dirichlet_multinomial(3, concentration=0.8), counts, variant, alpha=0.9, n_chains=128, n_draws=2000, seed=3
    )


@pytest.mark.slow
def test_exact_partition_posterior_independence_sampler_for_parameters():
    """Algorithm 8 with a family that cannot sample its posterior: φ is updated by DM05 §4.2's
    independence sampler, and the partition posterior is still the exact one."""
    base = normal_gamma(1, mean=0.0, kappa=0.5, shape=2.0, rate=1.0)
    family = custom_family(base.log_likelihood, base.sample_base, log_base_density=base.log_base_density)
    exact = exact_posterior(base, DATA_4, alpha=0.8)
    noise = expected_tv_noise(exact.values(), 128 * 1600 / 2.0)
    assert noise < NOISE_LIMIT
    for variant in ("auxiliary", "auxiliary-reuse"):
        result = run_kernel(family, DATA_4, variant, alpha=0.8, alpha_prior=None, n_chains=128, n_draws=1600, seed=4)
        assert empirical_tv(result.samples["assignments"], exact) < TV_LIMIT


# ----------------------------------------------------------------------------- kernel-level checks
SEPARATED = np.array([[-5.0], [-5.2], [5.1], [4.9], [0.0]], dtype=np.float32)
SEPARATED_FAMILY = normal_gamma(1, kappa=0.1)


def check_overflow_and_capacity(variant):
    """K_max = 2 for five points in three far-apart groups: with a large α a sweep soon needs a
    third cluster, which must be reported (and is sticky) while the state stays a valid partition;
    grown to K_max = 5 the same step never overflows. With a small α no sweep overflows, and the
    draws at K_max = 2 and 5 coincide."""
    algorithm = VARIANTS[variant]["algorithm"]
    step = jax.jit(neal.build_kernel(SEPARATED_FAMILY, **VARIANTS[variant]))
    data = jnp.asarray(SEPARATED)
    state = neal.init(jax.random.key(0), SEPARATED, SEPARATED_FAMILY, algorithm=algorithm, max_clusters=2,
                      alpha=50.0, assignments=[0, 0, 1, 1, 1])
    for sweep in range(20):
        previous = state
        state, info = step(jax.random.key(sweep), state, data)
        if bool(info.overflow):
            break
    assert bool(info.overflow) and bool(state.overflow), "no sweep overflowed"
    np.testing.assert_array_equal(state.assignments, previous.assignments)
    np.testing.assert_array_equal(state.counts, np.bincount(state.assignments, minlength=2))
    later_state, _ = step(jax.random.key(99), state, data)
    assert bool(later_state.overflow)
    grown = neal.grow_capacity(previous, 5)
    for sweep in range(5):
        grown, grown_info = step(jax.random.key(100 + sweep), grown, data)
        assert not bool(grown_info.overflow)

    small = neal.init(jax.random.key(0), SEPARATED, SEPARATED_FAMILY, algorithm=algorithm, max_clusters=2,
                      alpha=0.05, assignments=[0, 0, 1, 1, 1])
    large = neal.grow_capacity(small, 5)
    for sweep in range(5):
        key = jax.random.key(200 + sweep)
        small, small_info = step(key, small, data)
        large, large_info = step(key, large, data)
        assert not bool(small_info.overflow)
        np.testing.assert_array_equal(small.assignments, large.assignments)
        np.testing.assert_allclose(small_info.log_joint, large_info.log_joint, rtol=1e-5)


def test_overflow_is_detected_and_capacity_does_not_change_the_draws():
    check_overflow_and_capacity("collapsed")


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["conjugate", "auxiliary", "auxiliary-reuse", "auxiliary-reuse-xla"])
def test_overflow_and_capacity_other_algorithms(variant):
    check_overflow_and_capacity(variant)


BACKEND_VARIANTS = {
    "auxiliary-reuse": dict(algorithm="auxiliary", n_auxiliary=3, reuse_auxiliary=True),
    "auxiliary": dict(algorithm="auxiliary", n_auxiliary=3),
    "conjugate": dict(algorithm="conjugate"),
    "collapsed": dict(algorithm="collapsed"),
}


def _two_backend_chains(data, family, variant, *, alphas, max_clusters, n_sweeps, batched):
    """Run a kernel with backend "numba" and "xla" from the same states and keys; one chain per
    entry of ``alphas`` (a single unbatched chain when ``batched`` is false)."""
    settings = BACKEND_VARIANTS[variant]
    kernels = {backend: neal.build_kernel(family, **settings, backend=backend) for backend in ("numba", "xla")}
    initial = [
        neal.init(jax.random.key(chain), data, family, algorithm=settings["algorithm"], max_clusters=max_clusters,
                  alpha=alpha, assignments=np.arange(len(data)) % (1 + chain % 3))
        for chain, alpha in enumerate(alphas)
    ]
    device_data = jnp.asarray(data, jnp.float32)
    runs = {}
    for backend, kernel in kernels.items():
        step = jax.jit(jax.vmap(kernel, in_axes=(0, 0, None))) if batched else jax.jit(kernel)
        state = stack_states(initial) if batched else initial[0]
        history = []
        for sweep in range(n_sweeps):
            keys = jax.random.split(jax.random.key(sweep), len(alphas)) if batched else jax.random.key(sweep)
            state, info = step(keys, state, device_data)
            history.append((np.asarray(state.assignments), np.asarray(info.overflow), np.asarray(info.log_joint)))
        runs[backend] = history
    return runs


def check_backends_agree(runs, n_points):
    n_clusters_seen = set()
    for (labels, overflow, log_joint), (labels_xla, overflow_xla, log_joint_xla) in zip(runs["numba"], runs["xla"]):
        np.testing.assert_array_equal(labels, labels_xla)
        np.testing.assert_array_equal(overflow, overflow_xla)
        np.testing.assert_allclose(log_joint, log_joint_xla, rtol=1e-5)
        n_clusters_seen.update(len(np.unique(row)) for row in labels.reshape(-1, n_points))
    assert len(n_clusters_seen) > 2, "the partition barely moved; the comparison is too weak"


THREE_GROUPS = np.concatenate(
    [np.random.default_rng(5).normal(center, 0.7, size=(30, 2)) for center in (-3.0, 0.0, 3.0)]
)


def check_numba_and_xla_give_the_same_chain(variant, family=None):
    """Same keys, same uniforms, same decisions: the numba point loop reproduces the XLA scan, for
    chains whose clusters are born and die in every sweep and for chains that run out of capacity
    (K_max = 7, α up to 60): both backends report the same overflowing sweeps."""
    family = normal_gamma(2, kappa=0.2) if family is None else family
    runs = _two_backend_chains(THREE_GROUPS, family, variant, alphas=[0.5, 3.0, 3.0, 60.0],
                               max_clusters=7, n_sweeps=8, batched=True)
    check_backends_agree(runs, len(THREE_GROUPS))
    overflow = np.array([flags for _, flags, _ in runs["numba"]])
    assert np.any(overflow[:, -1]) and not np.any(overflow[:, 0]), "expected both exact and overflowing sweeps"


@pytest.mark.parametrize("variant", ["auxiliary-reuse", "auxiliary", "collapsed"])
@pytest.mark.numba
def test_numba_and_xla_give_the_same_chain(variant):
    check_numba_and_xla_give_the_same_chain(variant)


@pytest.mark.parametrize("family", [
    normal_known_precision(2, precision=[2.0, 0.5], mean=[0.0, 1.0], prior_variance=[4.0, 9.0]),
    normal_gamma(2, mean=[0.0, 1.0], kappa=[0.2, 0.5], shape=[1.0, 2.5], rate=[1.0, 0.5]),
], ids=["known-precision", "normal-gamma-per-feature-shape"])
@pytest.mark.numba
def test_numba_and_xla_collapsed_give_the_same_chain(family):
    """Algorithm 3's numba sweep computes each family's predictive itself
    (``ComponentFamily.native_predictive``): per-feature priors, and the Normal–Gamma shapes that
    differ between features (one log1p per feature instead of one log per eight)."""
    check_numba_and_xla_give_the_same_chain("collapsed", family)


@pytest.mark.numba
def test_numba_and_xla_give_the_same_chain_without_dot_form():
    """A family without the dot-product form: the numba ReUse loop reads the XLA-computed
    point x row log-likelihood table instead of scoring points itself."""
    base = normal_gamma(2, kappa=0.2)
    check_numba_and_xla_give_the_same_chain("auxiliary-reuse", custom_family(base.log_likelihood, base.sample_base))


@pytest.mark.slow
@pytest.mark.numba
def test_numba_and_xla_give_the_same_chain_conjugate():
    check_numba_and_xla_give_the_same_chain("conjugate")


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(BACKEND_VARIANTS))
@pytest.mark.numba
def test_numba_and_xla_give_the_same_chain_unbatched(variant):
    runs = _two_backend_chains(THREE_GROUPS, normal_gamma(2, kappa=0.2), variant, alphas=[3.0], max_clusters=24,
                               n_sweeps=8, batched=False)
    check_backends_agree(runs, len(THREE_GROUPS))


# ----------------------------------------------------------------------------- split–merge
def test_split_merge_overflow_keeps_the_partition_and_growing_capacity_continues_the_chain():
    data = np.concatenate([np.full((3, 1), -4.0), np.full((3, 1), 4.0)]).astype(np.float32)
    step = jax.jit(neal.build_kernel(FAMILY_1D, "collapsed", n_split_merge=4))
    together = np.zeros(6, int)
    state = neal.init(jax.random.key(0), data, FAMILY_1D, algorithm="collapsed", max_clusters=1, alpha=1.0,
                      assignments=together)
    grown = neal.grow_capacity(state, 4)
    small, info = step(jax.random.key(3), state, data)
    large, large_info = step(jax.random.key(3), grown, data)
    assert bool(info.overflow) and bool(small.overflow)
    np.testing.assert_array_equal(small.assignments, together)
    assert int(info.split_merge_accepted) == 0
    assert not bool(large_info.overflow) and int(large_info.n_clusters) == 2  # the two groups split


def test_split_merge_moves_separate_groups_that_single_point_gibbs_keeps_together():
    # Two tight groups far apart, started as one cluster: moving a single point out of it costs
    # too much, so Gibbs sweeps keep the one cluster for a long time; one split separates them.
    rng = np.random.default_rng(0)
    family = normal_gamma(1, mean=0.0, kappa=0.01, shape=1.0, rate=1.0)
    data = np.concatenate([rng.normal(-1.0, 0.05, (25, 1)), rng.normal(1.0, 0.05, (25, 1))]).astype(np.float32)
    start = neal.init(jax.random.key(0), data, family, algorithm="collapsed", max_clusters=4, alpha=0.05,
                      assignments=np.zeros(50, int))
    clusters = {}
    for n_split_merge in (0, 1):
        step = jax.jit(neal.build_kernel(family, "collapsed", n_split_merge=n_split_merge))
        state = start
        for sweep in range(5):
            state, info = step(jax.random.key(sweep), state, data)
        clusters[n_split_merge] = int(info.n_clusters)
    assert clusters == {0: 1, 1: 2}


def test_crp_prior_sums_to_one_over_partitions():
    log_prior = jax.jit(neal.log_crp_prior, static_argnums=2)
    for alpha in (0.3, 1.0, 4.0):
        counts = np.array([np.bincount(labels, minlength=5) for labels in set_partitions(5)])
        total = np.exp(np.asarray(jax.vmap(log_prior, (0, None, None))(jnp.asarray(counts), jnp.float32(alpha), 5))).sum()
        np.testing.assert_allclose(total, 1.0, rtol=1e-5)


# ----------------------------------------------------------------------------- validation
def test_init_and_build_kernel_validate_arguments():
    family = normal_gamma(1)
    good = dict(algorithm="collapsed", max_clusters=3, alpha=1.0)
    with pytest.raises(ValueError, match="^data: contains NaN"):
        neal.init(jax.random.key(0), [[0.0], [np.nan]], family, **good)
    with pytest.raises(ValueError, match="^assignments: expected 2 labels"):
        neal.init(jax.random.key(0), [[0.0], [1.0]], family, **good, assignments=[0, 1, 1])
    with pytest.raises(ValueError, match="^assignments: uses 3 clusters"):
        neal.init(jax.random.key(0), [[0.0], [1.0], [2.0]], family, algorithm="collapsed", max_clusters=2,
                  alpha=1.0, assignments=[0, 1, 2])
    with pytest.raises(ValueError, match="^alpha"):
        neal.init(jax.random.key(0), [[0.0]], family, algorithm="collapsed", max_clusters=3, alpha=0.0)
    with pytest.raises(ValueError, match="^max_clusters"):
        neal.init(jax.random.key(0), [[0.0]], family, algorithm="collapsed", max_clusters=0, alpha=1.0)
    with pytest.raises(ValueError, match="^n_auxiliary"):
        neal.build_kernel(family, "auxiliary", n_auxiliary=0)
    with pytest.raises(ValueError, match="^algorithm"):
        neal.build_kernel(family, "neal9")
    with pytest.raises(ValueError, match="^reuse_auxiliary"):
        neal.build_kernel(family, "collapsed", reuse_auxiliary=True)
    with pytest.raises(TypeError, match="^family"):
        neal.build_kernel("normal", "collapsed")
    with pytest.raises(ValueError, match="^backend"):
        neal.build_kernel(family, "auxiliary", reuse_auxiliary=True, backend="cuda")
    poisson = custom_family(lambda params, x: jnp.sum(x * params), lambda key, shape: jax.random.normal(key, shape + (1,)))
    with pytest.raises(ValueError, match="^algorithm: 'collapsed' needs"):
        neal.build_kernel(poisson, "collapsed")
    with pytest.raises(ValueError, match="^algorithm: 'conjugate' needs"):
        neal.build_kernel(poisson, "conjugate")
    with pytest.raises(ValueError, match="^n_split_merge"):
        neal.build_kernel(family, "collapsed", n_split_merge=-1)
    with pytest.raises(ValueError, match="^n_split_merge: split–merge moves need"):
        neal.build_kernel(poisson, "auxiliary", n_split_merge=1)


def test_set_partitions_counts_bell_numbers():
    assert [len(set_partitions(n)) for n in range(1, 7)] == [1, 2, 5, 15, 52, 203]
    assert len(set(set_partitions(5))) == 52
    assert all(canonical(labels) == labels for labels in set_partitions(4))
    assert list(itertools.islice(set_partitions(3), 1)) == [(0, 0, 0)]
