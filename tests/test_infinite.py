"""IRM: the Gibbs sampler against the exact posterior over joint partitions, recovery, overflow, diagnostics."""
import math
import pickle
import re
import warnings
from collections import Counter
from dataclasses import replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from numpyro import handlers
from scipy.special import gammaln

from inference.concentration import GammaPrior
from inference import diagnostics
from inference.diagnostics import MixingWarning
from inference.display import quantity_text
from inference.partitions import point_partition
from inference.provenance import ProvenanceWarning
from zoo.metrics import adjusted_rand_index
from zoo.relational.data import Domain, Relation, RelationalData, load_florentine_families, load_karate_club
from zoo.relational._infinite_conditional import log_gamma_tables
from zoo.relational._infinite_moves import split_merge_moves
from zoo.relational._infinite_state import init
from zoo.relational.evaluation import held_out_cases, leave_one_out_log_loss
from zoo.relational.infinite import (
    DEFAULT_WARMUP,
    HYPER_GRID,
    InfiniteRelational,
    IRMResult,
    UNTIL_MIXED_DRAWS,
    _resample_hyper,
    _warn_if_cases_do_not_mix,
    infinite_relational_program,
)


def _set_partitions(n):
    """Every partition of range(n) as a canonical label tuple (first appearance order)."""
    if n == 0:
        yield ()
        return
    for labels in _set_partitions(n - 1):
        for label in range(max(labels, default=-1) + 2):
            yield labels + (label,)


def _canonical(labels):
    mapping = {}
    return tuple(mapping.setdefault(label, len(mapping)) for label in labels)


def _log_crp(labels, alpha):
    sizes = np.bincount(labels)
    return len(sizes) * math.log(alpha) + gammaln(alpha) - gammaln(alpha + len(labels)) + gammaln(sizes).sum()


def _log_collapsed(relation, partitions, hyper):
    """Σ_blocks log B(γ + n_block) - log B(γ) of one relation under given partitions (one per argument);
    a symmetric relation's blocks are the unordered pairs of clusters, each unordered pair of
    individuals counted once."""
    blocks = {}
    for cell, value in zip(relation.entries, relation.values):
        if getattr(relation, "symmetric", False) and cell[0] > cell[1]:
            continue  # the mirror of a pair counted from its other cell
        key = tuple(partitions[p][index] for p, index in enumerate(cell))
        if getattr(relation, "symmetric", False):
            key = tuple(sorted(key))
        blocks.setdefault(key, np.zeros(relation.n_values))[value] += 1
    log_b = lambda a: gammaln(a).sum() - gammaln(a.sum())  # noqa: E731
    return sum(log_b(hyper + counts) - log_b(hyper) for counts in blocks.values())


def _draw_frequencies(result, names):
    draws = [result.assignments[name].reshape(-1, result.assignments[name].shape[-1]) for name in names]
    return Counter(tuple(_canonical(d[i]) for d in draws) for i in range(draws[0].shape[0])), draws[0].shape[0]


def _total_variation(exact, counts, n_draws):
    keys = set(exact) | set(counts)
    return 0.5 * sum(abs(exact.get(key, 0.0) - counts.get(key, 0) / n_draws) for key in keys)


def _bipartite_data():
    # 4 rows × 3 columns, one cell missing.
    matrix = np.array([[1, 1, 0], [1, np.nan, 0], [0, 0, 1], [1, 0, 1]], dtype=float)
    return RelationalData.from_adjacency(matrix, domains=("rows", "cols"))


def _one_domain_data():
    # 4 people: a directed relation (self-pairs missing) and a unary attribute with 3 values.
    links = np.array([[0, 1, 1, 0], [1, 0, 1, 0], [0, 0, 0, 1], [0, 1, 1, 0]], dtype=float)
    network = RelationalData.from_adjacency(links, domains="people", relation="links")
    kind = Relation("kind", ("people",), (4,), [[0], [1], [2], [3]], [0, 0, 2, 1], value_labels=("a", "b", "c"))
    return RelationalData(network.domains, (network.relation(), kind))


def _undirected_data():
    # 5 people: an undirected network (self-pairs missing) and a unary attribute; the IRM counts each
    # unordered pair once.
    ties = np.array([[0, 1, 1, 0, 0], [1, 0, 1, 0, 0], [1, 1, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 1, 1, 0]], float)
    network = RelationalData.from_adjacency(ties, domains="people", relation="ties", symmetric=True)
    kind = Relation("kind", ("people",), (5,), [[0], [1], [2], [3], [4]], [0, 0, 1, 1, 1])
    return RelationalData(network.domains, (network.relation(), kind))


def _directed(data):
    """``data`` with every relation declared directed (both cells of a pair seen as two observations)."""
    for relation in data.relations:
        data = data.replace_relation(replace(relation, symmetric=False))
    return data


def _exact_posterior(data, alpha, hyper):
    names = data.domain_names
    sizes = [domain.size for domain in data.domains]
    log_posts = {}
    import itertools

    for partitions in itertools.product(*[list(_set_partitions(size)) for size in sizes]):
        by_domain = dict(zip(names, partitions))
        value = sum(_log_crp(np.array(labels), alpha) for labels in partitions)
        for relation in data.relations:
            value += _log_collapsed(relation, [by_domain[name] for name in relation.domains],
                                    np.full(relation.n_values, hyper))
        log_posts[partitions] = value
    top = max(log_posts.values())
    total = sum(math.exp(v - top) for v in log_posts.values())
    return {key: math.exp(v - top) / total for key, v in log_posts.items()}


def _sampled(data, alpha, hyper, n_chains, n_sweeps, seed, backend, n_split_merge=0):
    model = InfiniteRelational(concentration=alpha, hyper=hyper, sample_concentration=False, sample_hyper=False,
                               max_clusters=4, init_clusters=2, backend=backend, n_split_merge=n_split_merge)
    return model.sample(data, key=jax.random.key(seed), n_chains=n_chains, n_sweeps=n_sweeps, n_warmup=20)


@pytest.mark.parametrize("backend", [pytest.param("xla", marks=pytest.mark.slow), "numba"])
@pytest.mark.parametrize("make_data", [_bipartite_data, _one_domain_data])
def test_gibbs_matches_the_exact_posterior_over_joint_partitions(make_data, backend):
    data = make_data()
    alpha, hyper = 1.3, 0.6
    exact = _exact_posterior(data, alpha, hyper)
    result = _sampled(data, alpha, hyper, n_chains=128, n_sweeps=420, seed=0, backend=backend)
    counts, n_draws = _draw_frequencies(result, data.domain_names)
    assert n_draws == 128 * 400
    assert _total_variation(exact, counts, n_draws) < 0.02


@pytest.mark.parametrize("backend", [pytest.param("xla", marks=pytest.mark.slow), "numba"])
@pytest.mark.parametrize("make_data", [_bipartite_data, _one_domain_data])
def test_gibbs_with_split_merge_moves_matches_the_exact_posterior(make_data, backend):
    data = make_data()
    exact = _exact_posterior(data, 1.3, 0.6)
    result = _sampled(data, 1.3, 0.6, n_chains=128, n_sweeps=420, seed=4, backend=backend, n_split_merge=2)
    counts, n_draws = _draw_frequencies(result, data.domain_names)
    assert result.split_merge_acceptance[["splits_accepted", "merges_accepted"]].to_numpy().min() > 0
    assert _total_variation(exact, counts, n_draws) < 0.02


@pytest.mark.parametrize("backend", ["xla", "numba"])
@pytest.mark.parametrize("n_split_merge", [0, 2])
def test_an_undirected_network_counts_each_pair_once_and_samples_the_exact_posterior(n_split_merge, backend):
    # Both cells of every pair were two observations: 16 clusters on a 100-node Erdős–Rényi graph.
    data = _undirected_data()
    exact = _exact_posterior(data, 1.3, 0.6)
    result = _sampled(data, 1.3, 0.6, n_chains=128, n_sweeps=420, seed=2, backend=backend, n_split_merge=n_split_merge)
    counts, n_draws = _draw_frequencies(result, data.domain_names)
    assert _total_variation(exact, counts, n_draws) < 0.02
    # The directed reading of the same cells is another posterior, which the sampler does not match.
    assert _total_variation(_exact_posterior(_directed(data), 1.3, 0.6), counts, n_draws) > 0.1


def test_an_undirected_networks_likelihood_has_one_block_per_pair_of_clusters():
    from zoo.relational.infinite import block_counts, collapsed_log_likelihood

    data = load_karate_club()
    schema, arrays, relation = data.schema, data.to_arrays(), data.relation()
    assert schema.symmetric == (True,)
    hyper = (jnp.asarray([0.7, 1.9]),)
    for seed in range(3):
        labels = np.random.default_rng(seed).integers(0, 5, size=34)
        counts = block_counts((jnp.asarray(labels, jnp.int32),), arrays, schema, (5,))
        np.testing.assert_array_equal(counts[0], np.swapaxes(np.asarray(counts[0]), 0, 1))
        # pairs between clusters at (k, l) and (l, k), those within at (k, k): each cell's count less those within
        assert int(counts[0].sum()) == relation.n_observed - int(np.trace(counts[0]).sum())
        np.testing.assert_allclose(float(collapsed_log_likelihood(counts, hyper, schema.symmetric)),
                                   _log_collapsed(relation, [labels, labels], np.asarray(hyper[0])), rtol=1e-5)
    # Each pair counted from one cell: a case hiding a cell without its mirror would still see the pair.
    mirrors = relation.mirror_index()
    with pytest.raises(ValueError, match="^hidden: 'friends' is symmetric, and case 1 hides a cell without its mirror"):
        InfiniteRelational().predict_held_out(data, np.array([[0, mirrors[0]], [5, -1]]), key=jax.random.key(0))


def test_planted_communities_of_an_undirected_network_are_found_and_noise_is_one_cluster():
    rng = np.random.default_rng(3)
    truth = np.repeat(np.arange(3), 14)
    chance = np.where(truth[:, None] == truth[None, :], 0.55, 0.04)
    upper = np.triu(rng.random((42, 42)) < chance, 1)
    communities = RelationalData.from_adjacency((upper | upper.T).astype(float), domains="nodes")
    noise_upper = np.triu(rng.random((42, 42)) < 0.15, 1)
    noise = RelationalData.from_adjacency((noise_upper | noise_upper.T).astype(float), domains="nodes")
    model = InfiniteRelational()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        found = model.sample(communities, jax.random.key(0), n_chains=2, n_warmup=100, n_draws=100, progress=False)
        nothing = model.sample(noise, jax.random.key(0), n_chains=2, n_warmup=100, n_draws=100, progress=False)
    # Each pair counted twice (until 2026-12-07): ARI 0.60, and 13 clusters of the noise.
    assert adjusted_rand_index(truth, found.map_partition()["nodes"]) > 0.95
    assert np.unique(nothing.map_partition()["nodes"]).size == 1


@pytest.mark.numba
@pytest.mark.parametrize("make_data", [_bipartite_data, _one_domain_data, load_florentine_families,
                                       lambda: _directed(load_florentine_families())])
def test_numba_and_xla_sweeps_give_the_same_chain(x64, make_data):
    """Same key, same uniforms, same decisions: the numba visits reproduce the XLA scan, with α and γ
    resampled after every sweep (the florentine families add a symmetric relation over one domain ×
    itself, and read as directed a relation over D × D)."""
    data = make_data()
    runs = {backend: InfiniteRelational(max_clusters=6, init_clusters=3, backend=backend).sample(
        data, key=jax.random.key(5), n_chains=3, n_sweeps=40, n_warmup=0) for backend in ("xla", "numba")}
    for name in data.domain_names:
        np.testing.assert_array_equal(runs["xla"].assignments[name], runs["numba"].assignments[name])
        np.testing.assert_allclose(runs["xla"].concentrations[name], runs["numba"].concentrations[name], rtol=1e-12)
    for relation in data.relations:
        np.testing.assert_allclose(runs["xla"].hyper[relation.name], runs["numba"].hyper[relation.name], rtol=1e-12)
    np.testing.assert_allclose(runs["xla"].log_joint, runs["numba"].log_joint, rtol=1e-10)
    assert len({tuple(labels) for labels in runs["xla"].assignments[data.domain_names[0]].reshape(
        -1, data.domains[0].size)}) > 1  # the chains move


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["xla", "numba"])
@pytest.mark.parametrize("make_data", [_bipartite_data, _one_domain_data])
def test_gibbs_matches_the_exact_posterior_long_run(make_data, backend):
    data = make_data()
    exact = _exact_posterior(data, 0.7, 1.5)
    result = _sampled(data, 0.7, 1.5, n_chains=256, n_sweeps=2020, seed=1, backend=backend)
    counts, n_draws = _draw_frequencies(result, data.domain_names)
    assert _total_variation(exact, counts, n_draws) < 0.008


def test_griddy_gibbs_hyperparameters_match_the_grid_posterior():
    counts = jnp.asarray([[5, 1], [0, 7], [3, 3], [0, 0]], jnp.int32)
    rate = 1.0

    def chain(key):
        def body(hyper, step_key):
            hyper = _resample_hyper(step_key, counts, hyper, rate)
            return hyper, hyper

        return jax.lax.scan(body, jnp.ones(2), jax.random.split(key, 600))[1][100:]

    draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(3), 64))).reshape(-1, 2)
    grid = HYPER_GRID
    log_b = lambda a: gammaln(a).sum(-1) - gammaln(a.sum(-1))  # noqa: E731
    first, second = np.meshgrid(grid, grid, indexing="ij")
    hyper = np.stack([first, second], axis=-1)
    occupied = np.asarray(counts).sum(1) > 0
    log_post = sum(log_b(hyper + np.asarray(c, float)) - log_b(hyper) for c in np.asarray(counts)[occupied])
    log_post = log_post + np.log(first) + np.log(second) - rate * (first + second)  # the grid's prior
    posterior = np.exp(log_post - log_post.max())
    posterior /= posterior.sum()
    index = np.searchsorted(grid, draws[:, 0] * (1 - 1e-6))
    sampled = np.bincount(index, minlength=grid.shape[0]) / draws.shape[0]
    assert 0.5 * np.abs(sampled - posterior.sum(axis=1)).sum() < 0.03


@pytest.mark.parametrize("rate", [0.1, 1.0, 5.0])
def test_the_hyperparameter_prior_is_the_exponential_discretised_on_the_grid(rate):
    """With no data the griddy update draws γ from the grid's prior: each point with the
    Exponential(rate) mass of its cell (equal widths in log γ), mean ≈ 1 / rate. Weighting the
    points by e^{-rate γ} alone gave mean 0.24 and P(γ < 0.1) = 0.54 at rate 1."""
    counts = jnp.zeros((3, 2), jnp.int32)  # every block empty: the conditional is the prior

    def chain(key):
        return jax.lax.scan(lambda hyper, k: (_resample_hyper(k, counts, hyper, rate),) * 2,
                            jnp.ones(2), jax.random.split(key, 250))[1]

    draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(5), 64)))[..., 0].ravel()
    half = 0.5 * np.log(HYPER_GRID[1] / HYPER_GRID[0])
    edges = np.concatenate([HYPER_GRID * np.exp(-half), HYPER_GRID[-1:] * np.exp(half)])
    mass = np.diff(-np.exp(-rate * edges))  # Exponential(rate) mass of each point's cell
    mass /= mass.sum()
    index = np.searchsorted(HYPER_GRID, draws * (1 - 1e-6))
    sampled = np.bincount(index, minlength=HYPER_GRID.shape[0]) / draws.size
    assert 0.5 * np.abs(sampled - mass).sum() < 0.03
    assert abs(draws.mean() * rate - 1) < 0.1


def test_recovers_planted_blocks_simulated_from_the_program():
    import arviz as az

    sizes = (48, 36)
    domains = (Domain("rows", sizes[0]), Domain("cols", sizes[1]))
    cells = np.array([(i, j) for i in range(sizes[0]) for j in range(sizes[1])])
    schema = RelationalData(domains, (Relation("r", ("rows", "cols"), sizes, cells, np.zeros(len(cells), int)),)).schema
    max_clusters = 6
    # Planted blocks: four equally likely clusters per domain (sticks 1/4, 1/3, 1/2, 1) and
    # block probabilities far apart; the program draws the assignments and every cell.
    sticks = jnp.asarray([1 / 4, 1 / 3, 1 / 2, 1.0, 0.5])
    pattern = np.array([[1, 0, 0, 1, 0, 0], [0, 1, 0, 1, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0],
                        [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    eta = jnp.asarray(np.stack([1 - (0.1 + 0.8 * pattern), 0.1 + 0.8 * pattern], axis=-1))
    planted = handlers.condition(infinite_relational_program,
                                 data={"sticks_rows": sticks, "sticks_cols": sticks, "eta_r": eta})
    trace = handlers.trace(handlers.seed(planted, rng_seed=4)).get_trace(
        (jnp.asarray(cells),), None, schema=schema, concentrations=(1.0, 1.0), hyper=(jnp.array([1.0, 1.0]),),
        max_clusters=max_clusters)
    data = RelationalData(domains, (Relation("r", ("rows", "cols"), sizes, cells, np.asarray(trace["r"]["value"])),))
    result = InfiniteRelational(max_clusters=8).sample(data, key=jax.random.key(0), n_chains=2, n_sweeps=60)
    found = result.map_partition()
    assert adjusted_rand_index(np.asarray(trace["cluster_rows"]["value"]), found["rows"]) > 0.9
    assert adjusted_rand_index(np.asarray(trace["cluster_cols"]["value"]), found["cols"]) > 0.9
    # Label-invariant diagnostics as ArviZ InferenceData.
    posterior = result.to_inference_data().posterior
    assert set(posterior.data_vars) == {"n_clusters_rows", "n_clusters_cols", "concentration_rows",
                                        "concentration_cols", "hyper_r", "log_joint"}
    assert posterior["log_joint"].dims == ("chain", "draw") and posterior.sizes["draw"] == 30
    assert posterior["hyper_r"].dims == ("chain", "draw", "r_value")
    assert posterior.attrs["host_cpu"] == result.provenance["host_cpu"]  # taken when it sampled
    assert np.isfinite(float(az.rhat(result.to_inference_data())["log_joint"]))
    hyper = np.asarray(result.hyper["r"])
    assert np.all(np.isin(hyper, HYPER_GRID.astype(hyper.dtype)))  # the grid in the working dtype
    probs = result.predict_proba([[0, 1], [2, 3]])
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)


def test_a_run_stopped_in_its_warm_up_says_it_has_no_draws_to_predict_from():
    with pytest.warns(RuntimeWarning, match="^InfiniteRelational.sample: the run kept no draws"):
        stopped = InfiniteRelational().sample(load_florentine_families(), key=jax.random.key(0), n_sweeps=400,
                                              time_budget=1e-3, progress=False)
    assert stopped.log_joint.shape[1] == 0
    for call in (stopped.map_partition, lambda: stopped.predict_proba([[0, 1]])):
        with pytest.raises(ValueError, match=r"^the run kept no draws: it stopped during its warm-up; result.resume"):
            call()
    # The summary says why it cannot judge, and nothing else (ArviZ's "More chains (4) than draws (0)" was shown).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = stopped.summary()
    assert (table["status"] == "too few draws").all()
    assert [type(warning.message).__name__ for warning in caught] == ["MixingWarning"]


def _result_from_draws(n_clusters, log_joint, hyper):
    draws = np.shape(log_joint)
    return IRMResult(schema=None, capacities=(8,), n_clusters={"people": np.asarray(n_clusters)},
                     concentrations={"people": np.ones(draws)}, hyper={"knows": np.asarray(hyper)},
                     log_joint=np.asarray(log_joint), warmup_log_joint=np.zeros((draws[0], 0)), assignments=None)


def test_summary_says_when_the_chains_do_not_mix_and_is_quiet_when_they_do():
    rng = np.random.default_rng(0)
    hyper = rng.choice([0.5, 1.0, 2.0], size=(4, 1000, 2))
    mixed = _result_from_draws(rng.integers(3, 6, (4, 1000)), rng.normal(-50, 2, (4, 1000)), hyper)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        table = mixed.summary()
    assert list(table.index) == ["n_clusters_people", "concentration_people", "hyper_knows[0]", "hyper_knows[1]",
                                 "log_joint"]
    assert table.loc["n_clusters_people", "status"] == "ok" and table.loc["concentration_people", "status"] == "constant"
    # Each chain stays at its own K: reported as such, with advice for this sampler, never a silent R-hat.
    stuck = _result_from_draws(np.repeat([[3], [4], [5], [6]], 1000, axis=1), rng.normal(-50, 2, (4, 1000)), hyper)
    with pytest.warns(MixingWarning, match=r"n_clusters_people \(chains disagree.*more chains from dispersed starts"):
        table = stuck.summary()
    assert table.loc["n_clusters_people", "status"] == "chains disagree" and table.loc["n_clusters_people", "r_hat"] == np.inf
    assert "sub-cluster" not in str(table.attrs["advice"])


def test_chains_at_one_number_of_clusters_that_cut_the_domain_differently_are_flagged():
    # Two clusters of 20 people in every draw of both chains, but chain 0 splits them 10/10 and chain 1
    # 18/2, with one person moving between clusters in each: K and the log joint cannot tell the chains
    # apart, the entropy of the cluster sizes can, and the summary says so (as a DP mixture's does).
    rng = np.random.default_rng(1)
    hyper = rng.choice([0.5, 1.0, 2.0], size=(2, 1000, 2))
    assignments = np.zeros((2, 1000, 20), np.int32)
    assignments[0, :, 10:] = 1
    assignments[1, :, 18:] = 1
    assignments[:, ::2, 0] = 1  # one person moves back and forth
    result = _result_from_draws(np.full((2, 1000), 2), rng.normal(-50, 2, (2, 1000)), hyper)
    result.assignments = {"people": assignments}
    with pytest.warns(MixingWarning, match=r"partition_entropy_people \((not mixing|chains disagree)"):
        table = result.summary()
    assert table.loc["n_clusters_people", "status"] == "constant"
    assert table.loc["partition_entropy_people", "r_hat"] > 1.01
    # A run that kept no assignments has no such quantity, and says nothing of one.
    assert "partition_entropy_people" not in _result_from_draws(np.full((2, 1000), 2), rng.normal(-50, 2, (2, 1000)),
                                                                hyper).mixing.index


def test_sample_warns_when_its_chains_do_not_mix():
    # Four draws per chain cannot give a bulk ESS of 400: the run says so when it returns.
    with pytest.warns(MixingWarning, match="Chains do NOT mix"):
        result = InfiniteRelational().sample(load_florentine_families(), key=jax.random.key(0), n_chains=2,
                                             n_sweeps=8, n_warmup=4)
    assert result.mixing.loc["log_joint", "status"] != "ok"
    # One chain too (split R-hat): its card says "does NOT mix", and so does the warning.
    with pytest.warns(MixingWarning, match="The chain does NOT mix"):
        single = InfiniteRelational().sample(load_florentine_families(), key=jax.random.key(0), n_chains=1,
                                             n_sweeps=8, n_warmup=4)
    assert "The chain does NOT mix" in repr(single)
    # Once per run: summary() does not repeat the warning sample() issued (its table says the same).
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        assert result.summary().loc["log_joint", "status"] != "ok"


def test_the_default_run_goes_on_until_the_chains_mix():
    # The Florentine marriages mix by default. The run keeps drawing after its 1,000
    # warm-up sweeps until every quantity passes (a fixed 200 sweeps always warned, mixing or not), and
    # stops there, far below the limit (the draws of a run without until_mixed, cut there: tested below).
    data = load_florentine_families()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        result = InfiniteRelational().sample(data, key=jax.random.key(0), progress=False)
    n_draws = result.log_joint.shape[1]
    assert result.warmup_log_joint.shape[1] == DEFAULT_WARMUP and n_draws < UNTIL_MIXED_DRAWS
    table = result.mixing
    assert (table["status"] == "ok").all() and table["ess_bulk"].min() >= 400 and table["r_hat"].max() <= 1.01


def test_the_length_as_kept_draws_is_the_same_run_as_in_sweeps_and_the_key_may_be_positional():
    # As DPMixture.fit and the command line's --draws: n_draws draws after n_warmup sweeps (1,000 by
    # default), n_sweeps the older form with the warm-up included.
    data = load_florentine_families()
    model, key = InfiniteRelational(), jax.random.key(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # short chains
        in_sweeps = model.sample(data, key=key, n_chains=2, n_sweeps=12, n_warmup=4, progress=False)
        in_draws = model.sample(data, key, n_chains=2, n_draws=8, n_warmup=4, progress=False)
    assert in_draws.warmup_log_joint.shape[1] == 4 and in_draws.log_joint.shape[1] == 8
    attrs = in_draws.to_inference_data().posterior.attrs  # as a DP or SCDP fit's, for the report's table
    assert attrs["n_warmup"] == 4 and attrs["thin"] == 1 and attrs["completed"] == 1
    _assert_same_draws(in_draws, in_sweeps)
    with pytest.raises(ValueError, match="^n_draws, n_sweeps: give one length, not both"):
        model.sample(data, key, n_draws=8, n_sweeps=12)
    with pytest.raises(ValueError, match="^n_draws"):
        model.sample(data, key, n_draws=0)


@pytest.mark.parametrize("n_split_merge", [0, 3])
def test_overflow_grows_the_capacity_and_the_draws_are_those_of_a_run_at_it(n_split_merge):
    """A call in which a chain outgrows its capacity runs again at twice it, from the states it started
    with, and the run goes on (until 2026-12-07 every chain ran again from its start): the draws are
    those of a run at the grown capacity from the start, with and without moves."""
    data = load_florentine_families()
    model = InfiniteRelational(concentration=5.0, max_clusters=4, init_clusters=1, sample_concentration=False,
                               sample_hyper=False, n_split_merge=n_split_merge)  # one cluster at any capacity
    # A sweep per call: a chain outgrows 4 clusters in the second sweep, after a finished call.
    run = partial(InfiniteRelational.sample, data=data, key=jax.random.key(2), n_chains=2, n_sweeps=12, n_warmup=4,
                  sweeps_per_call=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        result = run(model)
        assert result.capacities[0] > 4 and result.completed
        assert result.n_clusters["families"].max() <= result.capacities[0]
        wide = run(replace(model, max_clusters=result.capacities[0]))
    # The same partitions; the log joint sums over the empty blocks of another capacity in another order.
    np.testing.assert_array_equal(result.assignments["families"], wide.assignments["families"])
    np.testing.assert_allclose(result.log_joint, wide.log_joint, rtol=1e-6)
    np.testing.assert_allclose(result.warmup_log_joint, wide.warmup_log_joint, rtol=1e-6)
    assert result.capacities == wide.capacities and result.stopped_by == wide.stopped_by == "n_draws"


def test_a_growth_that_memory_cannot_hold_ends_the_run_with_the_sweeps_finished(monkeypatch):
    """Where memory cannot hold a grown capacity the run stops there and returns what finished, saying
    so (until 2026-12-07 the ValueError of the memory check lost the whole run)."""
    data = load_florentine_families()
    model = InfiniteRelational(concentration=5.0, max_clusters=4, init_clusters=1, sample_concentration=False,
                               sample_hyper=False, n_split_merge=0)
    check = InfiniteRelational._check_memory

    def small_memory(self, arrays, schema, capacities, *args):
        if capacities[0] > 4:
            raise ValueError(f"max_clusters: {capacities} would need more memory than there is")
        return check(self, arrays, schema, capacities, *args)

    monkeypatch.setattr(InfiniteRelational, "_check_memory", small_memory)
    for n_warmup, n_draws in ((0, 12), (4, 8)):  # a chain outgrows 4 clusters in the second sweep
        with pytest.warns(RuntimeWarning, match=r"a chain outgrew capacities \(4,\), and the run stopped there, the "
                                                r"sweeps finished before returned \(completed=False\): max_clusters"):
            result = model.sample(data, key=jax.random.key(2), n_chains=2, n_warmup=n_warmup, n_draws=n_draws,
                                  sweeps_per_call=1, progress=False)
        assert result.stopped_by == "capacity" and not result.completed and result.capacities == (4,)
        assert result.log_joint.shape[1] + result.warmup_log_joint.shape[1] == 1  # the first sweep's call
        if n_warmup == 0:
            assert result.to_inference_data().posterior.attrs["stopped_by"] == "capacity"
        card = " ".join(repr(result).split())  # its lines joined
        assert "memory could not hold the grown capacity" in card, card


def _assert_same_draws(result, expected):
    for name in ("n_clusters", "concentrations", "hyper", "log_joint", "warmup_log_joint", "assignments",
                 "split_merge"):
        got, want = getattr(result, name), getattr(expected, name)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want), name
        for got_leaf, want_leaf in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(got_leaf, want_leaf, err_msg=name)
    assert result.capacities == expected.capacities and result.completed == expected.completed
    assert result.stopped_by == expected.stopped_by


def test_until_mixed_ends_the_run_once_the_chains_mix_with_the_draws_of_a_run_without_it():
    from inference.diagnostics import mixes

    data = _one_domain_data()  # 4 people: chains that mix within a few hundred sweeps
    run = partial(InfiniteRelational().sample, data, key=jax.random.key(0), n_chains=2, n_warmup=50,
                  sweeps_per_call=10, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)  # it ends mixing: no warning
        mixed = run(n_sweeps=100_000, until_mixed=True)
    n_draws = mixed.log_joint.shape[1]
    assert 200 <= n_draws < 99_900 and mixed.completed and mixes(mixed.mixing), mixed.mixing
    assert mixed.stopped_by == "mixed" and mixed.to_inference_data().posterior.attrs["stopped_by"] == "mixed"
    # Continued until mixed, the draws of both runs are asked about: it ends where the one run did,
    # with the draws of one run (resume's own tests: the draws of one run without until_mixed).
    with pytest.warns(MixingWarning):
        short = run(n_sweeps=100)
    _assert_same_draws(short.resume(data, n_draws=100_000, until_mixed=True, progress=False), mixed)


def test_resume_continues_the_chains_as_one_longer_run():
    # Sweeps of 4 per call everywhere, so that one compiled call serves every run at a capacity; with
    # this key and Gibbs sweeps alone 24 sweeps fit in 8 clusters, and 4 sweeps in 4 while 24 need 8.
    data = load_florentine_families()
    model = InfiniteRelational(max_clusters=8, init_clusters=1, n_split_merge=0)
    run = partial(model.sample, data, key=jax.random.key(0), n_chains=2, n_warmup=8, sweeps_per_call=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        whole = run(n_sweeps=24)
        # A finished run, pickled, continued for 8 more draws.
        first = pickle.loads(pickle.dumps(run(n_sweeps=16)))
        _assert_same_draws(first.resume(data, n_draws=8), whole)
        # A run the time budget stopped in its warm-up, continued twice: the warm-up is finished first.
        cut = run(n_sweeps=24, time_budget=1e-9)
        assert not cut.completed and cut.log_joint.shape == (2, 0) and cut.warmup_log_joint.shape == (2, 4)
        assert cut.stopped_by == "time_budget" and "stopped during the 8 warm-up sweeps (time budget)" in repr(cut)
        _assert_same_draws(cut.resume(data, n_draws=6).resume(data, n_draws=10), whole)
        # A continuation that outgrows the capacities goes on with twice them, as the longer run did.
        small = partial(replace(model, max_clusters=4).sample, data, key=jax.random.key(0), n_chains=2, n_warmup=0,
                        sweeps_per_call=4)
        early, longer = small(n_sweeps=4), small(n_sweeps=24)
        assert early.capacities == (4,) and longer.capacities == (8,) == whole.capacities
        _assert_same_draws(early.resume(data, n_draws=20), longer)
    assert first.log_joint.shape == (2, 8)  # the continued result is unchanged
    # Seconds add up over the calls that made a result; the ArviZ attributes carry them.
    continued = cut.resume(data, n_draws=6, progress=False)
    assert 0 < cut.seconds < continued.seconds and not cut.completed and continued.completed
    assert continued.to_inference_data().posterior.attrs["sampling_seconds"] == continued.seconds
    assert cut.to_inference_data().posterior.attrs["completed"] == 0
    # 16 draws cannot reach a bulk ESS of 400: the advice names the call that continues the chains.
    assert whole.mixing.attrs["advice"].startswith("Run more sweeps (result.resume(data, n_draws=..., until_mixed=True) "
                                                   "continues these chains), or again with split-merge moves")
    assert _result_from_draws([[1, 2], [2, 1]], [[0.0, 1.0], [1.0, 0.0]], np.ones((2, 2, 2))).mixing.attrs[
        "advice"].startswith("Run more sweeps, or again with split-merge moves")
    elsewhere = replace(first, provenance={**first.provenance, "host_cpu": "other"})
    with pytest.warns(ProvenanceWarning, match="host_cpu 'other' then"), warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        _assert_same_draws(elsewhere.resume(data, n_draws=8), whole)  # here the same bits, but warned
    with pytest.raises(ValueError, match="^data: not the data"):
        first.resume(load_karate_club(), n_draws=2)
    # A result saved before the symmetric relations' cells weighed ½ (they weighed 1) resumes: the IRM
    # reads only which cells are seen, and so does the data's digest.
    from zoo.relational.infinite import _relational_digest

    arrays = data.to_arrays()
    assert _relational_digest(arrays) == _relational_digest(
        arrays._replace(weights=tuple(jnp.where(w > 0, 1.0, 0.0).astype(w.dtype) for w in arrays.weights)))
    assert _relational_digest(arrays) != _relational_digest(
        arrays._replace(weights=tuple(w.at[0].set(0.0) for w in arrays.weights)))  # a cell hidden is other data
    with pytest.raises(ValueError, match="^n_draws"):
        first.resume(data, n_draws=0)
    with pytest.raises(ValueError, match="^result: only a result returned by"):
        _result_from_draws([[1, 2], [2, 1]], [[0.0, 1.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]).resume(data, n_draws=2)


def test_held_out_prediction_of_a_network():
    data = load_florentine_families()
    model = InfiniteRelational(sample_concentration=False, sample_hyper=False)
    loss = leave_one_out_log_loss(model, data, key=jax.random.key(1), max_cases=4, n_chains=2, n_sweeps=20)
    assert loss.losses.shape == (4,) and np.isfinite(loss.mean)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: InfiniteRelational(concentration=0.0), "concentration"),
        (lambda: InfiniteRelational(hyper=-1.0), "hyper"),
        (lambda: InfiniteRelational(max_clusters=0), "max_clusters"),
        (lambda: InfiniteRelational(n_split_merge=-1), "n_split_merge"),
        (lambda: InfiniteRelational(split_merge_scans=-1), "split_merge_scans"),
        (lambda: InfiniteRelational(backend="tpu"), "backend"),
        (lambda: InfiniteRelational(hyper_prior_rate=0.0), "hyper_prior_rate"),
        (lambda: InfiniteRelational(concentration_prior=GammaPrior(-1.0, 1.0)), "concentration_prior.shape"),
        (lambda: InfiniteRelational().sample(load_florentine_families(), key=jax.random.key(0), n_sweeps=10,
                                             n_warmup=10), "n_warmup"),
        (lambda: InfiniteRelational().sample(load_florentine_families(), key=jax.random.key(0), n_chains=0),
         "n_chains"),
        (lambda: InfiniteRelational().sample(
            RelationalData.from_adjacency(np.ones((3, 3)), domains="a", diagonal="observed"), key=jax.random.key(0)),
         "data"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        call()


def _moves_only(data, alpha, hyper, *, n_chains, n_steps, n_scans, seed):
    """Chains of split–merge moves alone (one per domain and step, no Gibbs visits), at capacity = the
    domain's size (a split always finds a free slot): the assignments of every step."""
    arrays, schema = data.to_arrays(), data.schema
    capacities = tuple(schema.domain_sizes)

    def chain(key):
        key_init, key_steps = jax.random.split(key)
        state = init(key_init, arrays, schema, capacities, concentration=alpha, hyper=hyper, init_clusters=2)
        tables = log_gamma_tables(state.hyper, arrays)

        def step(state, key):
            for domain, key_domain in enumerate(jax.random.split(key, len(capacities))):
                state, _ = split_merge_moves(key_domain, state, arrays, tables, domain=domain, n_moves=1,
                                             n_scans=n_scans, schema=schema, capacities=capacities)
            return state, state.assignments

        return jax.lax.scan(step, state, jax.random.split(key_steps, n_steps))[1]

    draws = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(seed), n_chains))
    return [np.asarray(d)[:, 20:].reshape(-1, d.shape[-1]) for d in draws]


@pytest.mark.parametrize("n_scans", [0, 2])
@pytest.mark.parametrize("make_data", [_bipartite_data, _one_domain_data])
def test_split_merge_moves_alone_sample_the_exact_posterior(make_data, n_scans):
    """The moves alone (no Gibbs visits) reach every joint partition and leave the exact posterior
    invariant, with the coins alone as launch (t = 0) and with restricted Gibbs scans (t = 2)."""
    data = make_data()
    alpha, hyper = 1.3, 0.6
    exact = _exact_posterior(data, alpha, hyper)
    draws = _moves_only(data, alpha, hyper, n_chains=128, n_steps=420, n_scans=n_scans, seed=3)
    counts = Counter(tuple(_canonical(d[i]) for d in draws) for i in range(draws[0].shape[0]))
    # Measured 0.010-0.018; with the proposal's log q left out of the ratio 0.085-0.24.
    assert _total_variation(exact, counts, draws[0].shape[0]) < 0.04


def test_split_merge_moves_change_the_chain_and_report_their_acceptance():
    data = _one_domain_data()
    runs = {moves: InfiniteRelational(n_split_merge=moves, max_clusters=4).sample(
        data, key=jax.random.key(2), n_chains=2, n_sweeps=30, n_warmup=10) for moves in (0, 3)}
    assert runs[0].split_merge_acceptance.empty
    table = runs[3].split_merge_acceptance
    assert list(table.index) == ["people"]
    assert table.loc["people", "splits_proposed"] + table.loc["people", "merges_proposed"] == 2 * 30 * 3
    assert 0 < table.loc["people", "splits_accepted"] + table.loc["people", "merges_accepted"]
    assert not np.array_equal(runs[0].assignments["people"], runs[3].assignments["people"])
    assert "InfiniteRelational(n_split_merge=10)" in runs[0].mixing.attrs["advice"]
    assert "more split-merge moves per sweep" in runs[3].mixing.attrs["advice"]
    # Its repr says the same: the moves' acceptance and the verdict of its mixing table (tests/test_display.py).
    text = " ".join(repr(runs[3]).split())
    rate = table.loc["people", "splits_rate"]
    assert text.startswith("IRMResult of InfiniteRelational(") and f"people: splits {rate:.2g}," in text
    assert " ".join(diagnostics.mixing_verdict(runs[3].mixing).split()) in text
    assert "split-merge accepted" not in repr(runs[0]) and "2 chains × 20 draws after 10 warm-up sweeps" in repr(runs[0])
    alpha = quantity_text(runs[3].concentrations["people"], spec=".3g")
    assert f"α of people {alpha}" in text and "clusters of people" in text  # K and α, as getting_started says
    # A point estimate of every domain from all the draws, as a DP fit's; the card names it.
    estimate = runs[3].point_estimate()
    assert list(estimate) == ["people"] and "result.point_estimate()" in text
    np.testing.assert_array_equal(estimate["people"], point_partition(runs[3].assignments["people"]))
    np.testing.assert_array_equal(runs[3].point_estimate("binder")["people"],
                                  point_partition(runs[3].assignments["people"], loss="binder"))


def test_chains_saved_with_their_clusters_give_the_result_again(tmp_path):
    """``to_inference_data(assignments=True)`` keeps every draw's clusters (and the warm-up's log joints,
    the split-merge counts), so that the chains read back with the data are the run's result: its
    partitions, predictions, mixing table and a report with the clusters of every domain."""
    from zoo.io import load_chains, save_chains
    from zoo.report import report_html

    data = _bipartite_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # short chains
        result = InfiniteRelational(n_split_merge=2).sample(data, key=jax.random.key(3), n_chains=2, n_sweeps=30,
                                                            n_warmup=10, progress=False)
    plain = result.to_inference_data()
    assert not [name for name in plain.posterior.data_vars if name.startswith("assignments")]
    idata = result.to_inference_data(assignments=True)
    assert idata.posterior["assignments_rows"].dims == ("chain", "draw", "rows_individual")
    assert idata.warmup_posterior["log_joint"].shape == (2, 10)
    assert idata.sample_stats["split_merge_rows"].shape == (2, 20, 4)
    save_chains(tmp_path / "chains.nc", idata)
    back = IRMResult.from_inference_data(load_chains(tmp_path / "chains.nc"), data)
    for name in data.schema.domain_names:
        np.testing.assert_array_equal(back.assignments[name], result.assignments[name])
        np.testing.assert_array_equal(back.map_partition()[name], result.map_partition()[name])
    np.testing.assert_array_equal(back.warmup_log_joint, result.warmup_log_joint)
    pd.testing.assert_frame_equal(back.split_merge_acceptance, result.split_merge_acceptance)
    pd.testing.assert_frame_equal(back.mixing, result.mixing)
    cells = np.array([[0, 0], [1, 2]])
    np.testing.assert_allclose(back.predict_proba(cells), result.predict_proba(cells), rtol=1e-6)
    assert back.provenance == result.provenance and back.seconds == pytest.approx(result.seconds)
    assert back.stopped_by == result.stopped_by == "n_draws"
    page = report_html(load_chains(tmp_path / "chains.nc"), data=data)
    assert "Clusters of the rows" in page and "Clusters of the cols" in page and "<h2>Relations</h2>" in page
    # Chains without their clusters, or of other data, are named.
    with pytest.raises(ValueError, match=r"no assignments_rows, assignments_cols .*to_inference_data\(assignments"):
        IRMResult.from_inference_data(plain, data)
    larger = RelationalData.from_adjacency(np.eye(5, 3), domains=("rows", "cols"))
    with pytest.raises(ValueError, match="data: domain 'rows' has 5 individuals, where the chains clustered 4"):
        IRMResult.from_inference_data(idata, larger)
    with pytest.raises(TypeError, match="data: expected a zoo.relational.RelationalData"):
        IRMResult.from_inference_data(idata, np.zeros((3, 4)))


@pytest.mark.numba
@pytest.mark.parametrize("make_data", [_bipartite_data, load_florentine_families,
                                       lambda: _directed(load_florentine_families())])
def test_numba_and_xla_moves_give_the_same_chain(x64, make_data):
    """The numba moves (after the numba visits) reproduce the XLA moves from the same random numbers:
    same partitions, same moves accepted, with α and γ resampled (a domain × itself relation, and
    two domains)."""
    data = make_data()
    # At capacity 16 no chain outgrows its capacity: one compilation per backend (growth has its own test).
    runs = {backend: InfiniteRelational(max_clusters=16, n_split_merge=3, backend=backend).sample(
        data, key=jax.random.key(5), n_chains=3, n_sweeps=30, n_warmup=0) for backend in ("xla", "numba")}
    for name in data.domain_names:
        np.testing.assert_array_equal(runs["xla"].assignments[name], runs["numba"].assignments[name])
        np.testing.assert_array_equal(runs["xla"].split_merge[name], runs["numba"].split_merge[name])
    np.testing.assert_allclose(runs["xla"].log_joint, runs["numba"].log_joint, rtol=1e-10)
    accepted = runs["xla"].split_merge_acceptance[["splits_accepted", "merges_accepted"]].to_numpy()
    assert accepted.sum(axis=1).min() > 0


def test_held_out_cases_whose_chains_sit_apart_are_counted_in_a_warning():
    # On the karate club, 2 chains x 200 sweeps per case (relational_social_networks' setting) had R-hat of
    # the log joint above 1.1 in 49 of 100 cases, and the loss from either chain alone was 0.311 or 0.256
    # nats, in silence.
    rng = np.random.default_rng(0)
    log_joint = rng.normal(-100.0, 1.0, (5, 2, 100))
    log_joint[[1, 3], 1] += 10.0  # two cases whose second chain sits 10 nats higher
    log_joint[4] = np.nan  # a case not run (Ctrl-C): left out
    with pytest.warns(MixingWarning, match=r"^InfiniteRelational.predict_held_out: the chains of 2 of 4 cases do not "
                                           r"mix \(R-hat of the log joint above 1.1; .*\(n_sweeps, now 200; or "
                                           r"until_mixed=True, each case until its chains mix\), or split-merge moves"):
        _warn_if_cases_do_not_mix(log_joint, n_sweeps=200, n_split_merge=0)
    # Leave-one-out cases are pointed to the reweighted draws of one run; folds, which hide too many cells, are not.
    for few_hidden in (True, False):
        with pytest.warns(MixingWarning) as caught:
            _warn_if_cases_do_not_mix(log_joint, n_sweeps=200, n_split_merge=10, few_hidden=few_hidden)
        assert ("run the model once on all the data" in str(caught[0].message)) == few_hidden
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_if_cases_do_not_mix(log_joint[[0, 2]], n_sweeps=200, n_split_merge=0)  # chains that agree
        _warn_if_cases_do_not_mix(log_joint[:, :1], n_sweeps=200, n_split_merge=0)  # one chain: nothing to compare


def test_held_out_cases_run_until_their_chains_mix_each_where_it_passes(monkeypatch):
    """until_mixed: a case ends at the first segment after which its kept sweeps (the later half of
    the segments run) pass the rule, and its prediction is that of a fixed run of as many sweeps with
    the first half as warm-up, whatever its call runs after for other cases. Finished cases run on in
    the batch (their sweeps discarded) until the Gibbs steps they waste reach CASE_COMPILE_STEPS, and
    then the batch shrinks to the cases left. A case that never passes ends after n_sweeps and is
    counted in the warning; after a fixed warm-up every later segment is kept."""
    from zoo.relational import _infinite_chains, infinite
    from zoo.relational._infinite_chains import CASE_SEGMENT_SWEEPS as segment

    data = load_florentine_families()
    hidden = held_out_cases(data, max_cases=5)
    model = InfiniteRelational(max_clusters=16)
    options = dict(key=jax.random.key(5), n_chains=2, progress=False)
    needs = np.array([3, 5, 5, 3, 5])  # the segments after which each case passes (it keeps 2 or 3)
    batches, finished, asked = [], set(), []
    advance = _infinite_chains._advance_cases

    def counting(*args, **kwargs):
        batches.append(args[3].shape[0])
        asked[:] = [case for case in range(needs.size) if case not in finished]  # asked in this order
        return advance(*args, **kwargs)

    def rule(log_joint):
        if not asked:  # asked again for the warning, after the run
            return rule.passes
        case = asked.pop(0)
        passes = rule.passes and log_joint.shape[1] >= (needs[case] - needs[case] // 2) * segment
        if passes:
            finished.add(case)
        return passes

    monkeypatch.setattr(_infinite_chains, "_advance_cases", counting)
    monkeypatch.setattr(infinite, "_case_mixes", rule)
    rule.passes = True
    runs = {}
    # Two finished cases waste 2 x 15 individuals x 2 chains x 25 sweeps = 1,500 steps a segment.
    for compile_steps, expected in ((3_000, [5, 5, 5, 5, 3]), (1_500, [5, 5, 5, 3, 3])):
        monkeypatch.setattr(_infinite_chains, "CASE_COMPILE_STEPS", compile_steps)
        batches.clear(), finished.clear()
        runs[compile_steps] = model.predict_held_out(data, hidden, n_sweeps=200, until_mixed=True, **options)
        assert batches == expected, (compile_steps, batches)
    np.testing.assert_array_equal(*runs.values()) if jax.default_backend() == "cpu" else \
        np.testing.assert_allclose(*runs.values(), rtol=1e-5, atol=1e-6)
    for need in (3, 5):
        fixed = model.predict_held_out(data, hidden, n_sweeps=need * segment, n_warmup=need // 2 * segment,
                                       **options)
        np.testing.assert_allclose(runs[1_500][needs == need], fixed[needs == need], rtol=1e-5)
    rule.passes = False
    with pytest.warns(MixingWarning, match=r"the chains of 5 of 5 cases do not mix \(within the sweeps they ran: "
                                           r"R-hat of the log joint above 1.01 or its bulk ESS below 100;.*now 200, "
                                           r"the most each case ran until its chains mixed\)"):
        late = model.predict_held_out(data, hidden, n_sweeps=200, until_mixed=True, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # one case of five above 1.1
        fixed = model.predict_held_out(data, hidden, n_sweeps=200, **options)
    np.testing.assert_allclose(late, fixed, rtol=1e-5)
    # A fixed warm-up is one segment, and every later one is kept: cases 0 and 3 pass after it and two
    # more, the others after three more.
    rule.passes = True
    finished.clear()
    fixed_warmup = model.predict_held_out(data, hidden, n_sweeps=200, n_warmup=30, until_mixed=True, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # nor in 80
        again = model.predict_held_out(data, hidden, n_sweeps=30 + 2 * segment, n_warmup=30, **options)
    np.testing.assert_allclose(fixed_warmup[needs == 3], again[needs == 3], rtol=1e-5)


def test_held_out_cases_until_mixed_on_a_network():
    """The default (until the chains mix, 5,000 sweeps at most) and its rule (R-hat of the log joint
    at most 1.01, bulk ESS at least 100): the Florentine families' cases mix after a few hundred
    sweeps, and silently; their predictions do not depend on how the cases are cut into calls."""
    from zoo.relational import _infinite_chains

    data = load_florentine_families()
    hidden = held_out_cases(data, max_cases=3)
    segments = []
    advance = _infinite_chains._advance_cases

    def counting(*args, **kwargs):
        segments.append(len(args[4]))
        return advance(*args, **kwargs)

    model = InfiniteRelational()
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("error")
        patch.setattr(_infinite_chains, "_advance_cases", counting)
        together = model.predict_held_out(data, hidden, key=jax.random.key(0), progress=False)
        assert sum(segments) < 1500, segments
        apart = model.predict_held_out(data, hidden, key=jax.random.key(0), n_sweeps=5000, until_mixed=True,
                                       cases_per_call=1, progress=False)
    assert np.isfinite(together[hidden >= 0]).all()
    np.testing.assert_array_equal(together, apart) if jax.default_backend() == "cpu" else \
        np.testing.assert_allclose(together, apart, rtol=1e-5, atol=1e-6)


def test_split_merge_moves_run_in_held_out_cases():
    """Held-out cases vmap the chains twice (cases × chains); the moves run there too."""
    data = load_florentine_families()
    loss = leave_one_out_log_loss(InfiniteRelational(n_split_merge=2), data, key=jax.random.key(0), max_cases=2,
                                  n_chains=2, n_sweeps=20)
    assert np.isfinite(loss.mean) and loss.losses.shape == (2,)
