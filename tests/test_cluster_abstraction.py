"""Cluster-abstraction model: trees, kernel = program, monotone EM, the sparse path-mixture
primitive, equivalence with one-sided clustering, recovery, growth by annealing, bad input."""
import re
from functools import partial

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpyro.infer import Predictive
from scipy.special import logsumexp, softmax
from sklearn.metrics import adjusted_rand_score

matplotlib.use("Agg")

from inference.em import tempered_em  # noqa: E402
from inference.enumerated import enumerated_log_likelihood  # noqa: E402
from inference.native import available_backends  # noqa: E402
from inference.sparse import path_mixture_stats, row_cell_stats  # noqa: E402
from zoo.data import CoOccurrence  # noqa: E402
from zoo.dyadic.cluster_abstraction import (  # noqa: E402
    CAMParams, ClusterAbstraction, Tree, anneal_tree, cluster_abstraction_program, plot_tree, tree_text,
)
from zoo.dyadic.one_sided import OneSided, OneSidedParams, padded_tokens  # noqa: E402
from zoo.dyadic.predictive import predictive_matrix  # noqa: E402

IRREGULAR = Tree((-1, 0, 0, 1, 1))  # leaves 2 (depth 1), 3 and 4 (depth 2)


def _exact_log_lik(program, params, *args, max_plate_nesting, **static):
    """The program's enumerated log-likelihood, traced once with ``jit`` (eager funsor compiles op by op)."""
    run = jax.jit(lambda params, *args: enumerated_log_likelihood(program, params, *args,
                                                                   max_plate_nesting=max_plate_nesting, **static))
    return run(params, *args)


@partial(jax.jit, static_argnames=("model",))
def _heldout(model, params, arrays):
    return model.heldout_log_lik(params, arrays)


@partial(jax.jit, static_argnames=("model",))
def _log_lik(model, params, arrays):
    return model.log_likelihood(params, arrays)


@partial(jax.jit, static_argnames=("model",))
def _em_step(model, params, arrays, beta):
    return model.em_step(params, arrays, beta)


@partial(jax.jit, static_argnames=("model", "n_steps"))
def _em_log_liks(model, params, arrays, n_steps):
    def step(params, _):
        params, log_lik = model.em_step(params, arrays, 1.0)
        return params, log_lik

    return jax.lax.scan(step, params, None, length=n_steps)[1]


def _random_params(rng, tree, n_rows, n_cols):
    mask = tree.path_mask
    weights = rng.dirichlet(np.ones(tree.n_levels), size=(n_rows, tree.n_leaves)) * mask[None]
    return CAMParams(
        cluster_prior=jnp.asarray(rng.dirichlet(np.ones(tree.n_leaves))),
        col_given_node=jnp.asarray(rng.dirichlet(np.ones(n_cols), size=tree.n_nodes).T),
        level_weights=jnp.asarray(weights / weights.sum(-1, keepdims=True)),
        row_marginal=jnp.asarray(rng.dirichlet(np.ones(n_rows))),
        cluster_posterior=jnp.asarray(rng.dirichlet(np.ones(tree.n_leaves), size=n_rows)),
    )


def _dense_mixtures(tree, params, beta=1.0):
    """z[i, k, α] = Σ_ℓ W_iαℓ P^β_k,path[α,ℓ] in NumPy."""
    aspects = np.asarray(params.col_given_node, np.float64) ** beta
    on_path = aspects[:, tree.paths] * tree.path_mask[None]  # (n_cols, K, L)
    return np.einsum("ial,kal->ika", np.asarray(params.level_weights, np.float64), on_path)


def _simulate(tree, level_weights, n_rows, n_cols, n_tokens, seed, concentration=0.2):
    rng = np.random.default_rng(seed)
    params = {
        "cluster_prior": jnp.ones(tree.n_leaves) / tree.n_leaves,
        "level_weights": jnp.asarray(np.broadcast_to(level_weights, (n_rows, tree.n_leaves, tree.n_levels))),
        "col_given_node": jnp.asarray(rng.dirichlet(np.full(n_cols, concentration), tree.n_nodes)),
        "row_marginal": jnp.ones(n_rows) / n_rows,
    }
    simulated = Predictive(cluster_abstraction_program, params=params, num_samples=1)(
        jax.random.key(seed), jnp.ones((n_rows, n_tokens), bool), n_cols=n_cols, tree=tree
    )
    tokens = np.asarray(simulated["y"]).reshape(n_rows, n_tokens)
    pairs = np.stack([np.repeat(np.arange(n_rows), n_tokens), tokens.ravel()], axis=1)
    return CoOccurrence.from_pairs(pairs, shape=(n_rows, n_cols)), np.asarray(simulated["c"]).reshape(n_rows)


# ----------------------------------------------------------------------------- trees
def test_trees_know_their_paths():
    tree = Tree.complete(depth=2, branching=2)
    assert tree.n_nodes == 7 and tree.leaves == (3, 4, 5, 6) and tree.depth == 2
    np.testing.assert_array_equal(tree.paths, [[0, 1, 3], [0, 1, 4], [0, 2, 5], [0, 2, 6]])
    assert tree.path_mask.all()
    wide = Tree.complete(depth=1, branching=3)
    assert wide.leaves == (1, 2, 3) and wide.children[0] == (1, 2, 3)
    np.testing.assert_array_equal(IRREGULAR.paths, [[0, 2, 0], [0, 1, 3], [0, 1, 4]])
    np.testing.assert_array_equal(IRREGULAR.path_mask, [[True, True, False], [True] * 3, [True] * 3])
    assert IRREGULAR.leaf_order() == (3, 4, 2)
    grown = Tree.single().split([0]).split([2])
    assert grown.parents == (-1, 0, 0, 2, 2) and grown.leaves == (1, 3, 4)
    assert ClusterAbstraction(depth=2, branching=3).n_classes == 9


def test_a_model_sized_by_its_number_of_leaves():
    assert ClusterAbstraction(n_leaves=4).tree == Tree.complete(depth=2, branching=2)
    assert ClusterAbstraction(n_leaves=9, branching=3).tree == Tree.complete(depth=2, branching=3)
    odd = ClusterAbstraction(n_leaves=5).tree
    assert odd.n_leaves == 5 and odd.depth == 3 and odd.parents == (-1, 0, 0, 1, 1, 2, 2, 3, 3)
    with pytest.raises(ValueError, match="^n_leaves"):
        ClusterAbstraction(n_leaves=4, branching=3)
    with pytest.raises(ValueError, match="^depth: give one of depth, n_leaves or tree"):
        ClusterAbstraction(depth=2, n_leaves=4)


# ----------------------------------------------------------------------------- kernel = program
@pytest.mark.parametrize("tree", [Tree.complete(1, 3), Tree.complete(2, 2), IRREGULAR])
def test_kernel_log_likelihood_equals_enumerated_program(x64, tree):
    rng = np.random.default_rng(tree.n_nodes)
    counts = rng.poisson(1.0, size=(5, 6))
    counts[4], counts[:, 2] = 0, 0  # an empty row and an empty column
    counts[0, 0] += 2
    data = CoOccurrence.from_dense(counts)
    params = _random_params(rng, tree, 5, 6)
    tokens, mask = padded_tokens(data)
    exact = _exact_log_lik(
        cluster_abstraction_program, params.program_params(), jnp.asarray(mask), jnp.asarray(tokens),
        n_cols=6, tree=tree, max_plate_nesting=2,
    )
    mixtures = _dense_mixtures(tree, params)
    scores = np.einsum("ik,ika->ia", counts, np.log(mixtures))
    sums = counts.sum(1)
    by_hand = (logsumexp(np.log(np.asarray(params.cluster_prior)) + scores, axis=1).sum()
               + np.sum(sums * np.log(np.asarray(params.row_marginal))))
    np.testing.assert_allclose(by_hand, float(exact), rtol=1e-10)
    # The default backend (numba on the CPU, XLA elsewhere) on every tree; the XLA path, checked against
    # the dense formulas below, once more on the CPU (one compilation, for padding).
    for backend in available_backends() if tree is IRREGULAR else ("auto",):
        model = ClusterAbstraction(tree=tree, backend=backend)
        np.testing.assert_allclose(float(_log_lik(model, params, model.prepare(data))), float(exact), rtol=1e-5)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([Tree.complete(1, 3), IRREGULAR]), st.floats(0.3, 3.0),
       st.integers(0, 2**31 - 1))
def test_em_log_likelihood_never_decreases_at_beta_one(tree, rate, seed):
    rng = np.random.default_rng(seed)
    data = CoOccurrence.from_dense(rng.poisson(rate, size=(9, 8)) + 1)  # one shape: one compilation per tree
    model = ClusterAbstraction(tree=tree)
    arrays = model.prepare(data)
    log_lik = np.asarray(_em_log_liks(model, model.init_params(jax.random.key(seed), arrays), arrays, 25))
    assert np.all(np.isfinite(log_lik))
    assert np.all(np.diff(log_lik) >= -1e-5 * np.abs(log_lik[:-1]))


# ----------------------------------------------------------------------------- primitives
@pytest.mark.parametrize("backend", ["xla", "numba"])
def test_path_mixture_stats_match_dense_formulas(x64, backend):
    rng = np.random.default_rng(1)
    counts = rng.poisson(0.8, size=(7, 9)).astype(float)
    counts[2] = 0
    arrays = CoOccurrence.from_dense(counts + np.eye(7, 9)).to_arrays()
    counts = counts + np.eye(7, 9)
    params = _random_params(rng, IRREGULAR, 7, 9)
    beta = 0.6
    log_prior = np.log(np.asarray(params.cluster_prior))
    aspects = np.asarray(params.col_given_node)
    stats = path_mixture_stats(
        params.level_weights, params.col_given_node, jnp.asarray(IRREGULAR.paths), jnp.asarray(IRREGULAR.path_mask),
        jnp.asarray(log_prior), arrays, tempered_aspects=jnp.asarray(aspects ** beta), backend=backend,
    )
    plain, hot = _dense_mixtures(IRREGULAR, params), _dense_mixtures(IRREGULAR, params, beta)
    np.testing.assert_allclose(np.asarray(stats.scores), np.einsum("ik,ika->ia", counts, np.log(plain)), rtol=1e-10)
    posterior = softmax(log_prior + np.einsum("ik,ika->ia", counts, np.log(hot)), axis=1)
    np.testing.assert_allclose(np.asarray(stats.posterior), posterior, rtol=1e-10)
    weights = np.asarray(params.level_weights)
    on_path = (aspects ** beta)[:, IRREGULAR.paths] * IRREGULAR.path_mask[None]  # (n_cols, K, L)
    ratio = counts[:, :, None] / hot  # (n_rows, n_cols, K)
    np.testing.assert_allclose(np.asarray(stats.level_stats), weights * np.einsum("ika,kal->ial", ratio, on_path),
                               rtol=1e-10)
    node_stats = np.zeros(aspects.shape)
    contributions = np.einsum("ia,ika,ial,kal->kal", posterior, ratio, weights, on_path)
    for leaf in range(IRREGULAR.n_leaves):
        for level in range(IRREGULAR.n_levels):
            if IRREGULAR.path_mask[leaf, level]:
                node_stats[:, IRREGULAR.paths[leaf, level]] += contributions[:, leaf, level]
    np.testing.assert_allclose(np.asarray(stats.node_stats), node_stats, rtol=1e-10)


@pytest.mark.numba
def test_numba_path_mixture_stats_have_the_same_bits_on_any_number_of_threads(monkeypatch):
    """The node statistics sum over the rows of each column: the kernel adds them column by column,
    so that a fit's bits do not depend on how many thread ranges (cores) the rows were cut into."""
    from inference.native import sparse_cells

    rng = np.random.default_rng(3)
    counts = rng.poisson(0.7, size=(61, 23)).astype(float)
    counts[:, 4] = 0  # an empty column
    arrays = CoOccurrence.from_dense(counts).to_arrays(jnp.float32)
    params = _random_params(rng, IRREGULAR, 61, 23)
    aspects = jnp.asarray(params.col_given_node, jnp.float32)
    outputs = []
    for n_threads in (1, 2, 3, 8):
        monkeypatch.setattr(sparse_cells, "numba_threads", lambda n=n_threads: jnp.asarray(n, jnp.int32))
        stats = path_mixture_stats(
            jnp.asarray(params.level_weights, jnp.float32), aspects, jnp.asarray(IRREGULAR.paths),
            jnp.asarray(IRREGULAR.path_mask), jnp.log(jnp.asarray(params.cluster_prior, jnp.float32)), arrays,
            tempered_aspects=aspects ** 0.7, backend="numba")
        outputs.append([np.asarray(value).tobytes() for value in stats])
    assert all(output == outputs[0] for output in outputs[1:])


@pytest.mark.parametrize("backend", ["xla", "numba"])
def test_row_cell_stats_match_dense_formulas(x64, backend):
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.5, size=(30, 40)).astype(float)
    counts[3], counts[:, 5] = 0, 0
    counts[0, 0] += 1
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    A, B, weights = rng.random((30, 3)), rng.random((40, 3)), rng.random(30)
    stats = row_cell_stats(jnp.asarray(A), jnp.asarray(B), arrays, row_weights=jnp.asarray(weights), backend=backend)
    Z = A @ B.T
    R = np.where(counts > 0, counts / Z, 0.0)
    np.testing.assert_allclose(np.asarray(stats.row_stats), A * (R @ B), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.col_stats), B * ((weights[:, None] * R).T @ A), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.row_log_norm), np.where(counts > 0, counts * np.log(Z), 0).sum(1),
                               rtol=1e-12)


# ----------------------------------------------------------------------------- model properties
def test_leaf_only_weights_make_the_cam_a_one_sided_clustering(x64):
    # With all weight on the leaf level, eq. 12 is eq. 7 and the tempering is HP98's n → β·n.
    rng = np.random.default_rng(2)
    counts = rng.poisson(1.0, size=(8, 6)).astype(float) + np.eye(8, 6)
    data = CoOccurrence.from_dense(counts)
    tree = Tree.complete(1, 3)
    cam = ClusterAbstraction(tree=tree, backend="xla")
    arrays = cam.prepare(data)
    params = _random_params(rng, tree, 8, 6)
    leaf_only = np.zeros((8, 3, 2))
    leaf_only[:, :, 1] = 1.0
    params = params._replace(level_weights=jnp.asarray(leaf_only), row_marginal=arrays.row_sums / arrays.row_sums.sum())
    acm = OneSided(3, backend="xla")
    acm_params = OneSidedParams(params.cluster_prior, params.col_given_node[:, 1:], params.row_marginal,
                                params.cluster_posterior)
    for beta in (1.0, 0.7):
        cam_new, cam_log_lik = _em_step(cam, params, arrays, beta)
        acm_new, acm_log_lik = _em_step(acm, acm_params, arrays, beta)
        np.testing.assert_allclose(float(cam_log_lik), float(acm_log_lik), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(cam_new.cluster_posterior), np.asarray(acm_new.cluster_posterior), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(cam_new.col_given_node[:, 1:]), np.asarray(acm_new.feature_given_class),
                                   rtol=1e-10)


def test_fitted_clusters_recover_clusters_simulated_from_the_program():
    tree = Tree.complete(1, 3)
    data, truth = _simulate(tree, np.array([0.5, 0.5]), n_rows=45, n_cols=40, n_tokens=100, seed=3)
    result = tempered_em(ClusterAbstraction(tree=tree), data, key=jax.random.key(0), n_restarts=2, max_iter=80)
    assert adjusted_rand_score(truth, np.asarray(result.params.assignments())) > 0.95


@pytest.mark.numba
def test_backends_agree_on_a_tempered_step():
    rng = np.random.default_rng(2)
    data = CoOccurrence.from_dense(rng.poisson(0.7, size=(40, 60)) + (rng.random((40, 60)) < 0.02))
    models = [ClusterAbstraction(tree=IRREGULAR, backend=backend) for backend in ("xla", "numba")]
    arrays = models[0].prepare(data)
    params = models[0].init_params(jax.random.key(1), arrays)
    (xla, ll_xla), (fast, ll_fast) = (_em_step(model, params, arrays, 0.6) for model in models)
    for a, b in zip(xla, fast):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(float(ll_xla), float(ll_fast), rtol=1e-5)


def test_empty_rows_long_rows_and_the_predictive_distribution():
    rng = np.random.default_rng(4)
    counts = rng.poisson(1.0, size=(10, 12)).astype(float)
    counts[0], counts[:, 1] = 0, 0  # an empty row and an empty column
    counts[2, :6] = 2_000  # 12,000 tokens in one row
    data = CoOccurrence.from_dense(counts)
    model = ClusterAbstraction(tree=IRREGULAR)
    result = tempered_em(model, data, key=jax.random.key(2), max_iter=40)
    for leaf in result.params:
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert np.isfinite(float(_log_lik(model, result.params, model.prepare(data))))
    assert np.asarray(result.params.cluster_posterior)[2].max() > 0.999
    conditional = predictive_matrix(model, result.params)
    np.testing.assert_allclose(conditional.sum(axis=1), 1.0, rtol=1e-5)
    heldout_counts = rng.poisson(0.7, size=(10, 12)) + np.eye(10, 12)
    heldout_counts[:, 1] = 0  # a column never seen in training has P(y|x) = 0
    heldout = CoOccurrence.from_dense(heldout_counts)
    expected = np.sum(heldout_counts[heldout_counts > 0] * np.log(conditional[heldout_counts > 0]))
    np.testing.assert_allclose(float(_heldout(model, result.params, model.prepare(heldout))), expected, rtol=1e-5)
    usage = np.asarray(model.node_usage(result.params))
    np.testing.assert_allclose(usage.sum(), 1.0, rtol=1e-5)


# ----------------------------------------------------------------------------- growth by annealing
def test_annealing_splits_two_groups_and_leaves_homogeneous_data_alone():
    tree = Tree.complete(1, 2)
    data, truth = _simulate(tree, np.array([0.5, 0.5]), n_rows=40, n_cols=30, n_tokens=60, seed=3, concentration=0.3)
    schedule = {"beta_start": 0.05, "beta_growth": 2.0, "max_leaves": 2, "max_iter_per_level": 100,
                "tol": 1e-5}
    grown = anneal_tree(data, key=jax.random.key(0), **schedule)
    history = grown.history
    assert list(history["beta"]) == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
    assert grown.tree.n_leaves == 2 and history["n_split"].sum() == 1
    split_at = history.loc[history["n_split"] > 0, "beta"].iloc[0]
    assert split_at < 1.0
    assert history["log_lik"].iloc[-1] > history["log_lik"].iloc[0] + 100  # the split explains the two groups
    # The two groups are told apart by the aspects they use, P(a|x) (through c or the level weights).
    node_given_row = np.asarray(grown.model.node_given_row(grown.params))
    assert adjusted_rand_score(truth, node_given_row.argmax(axis=1)) > 0.9

    rng = np.random.default_rng(0)
    flat_tokens = rng.choice(30, size=40 * 60, p=rng.dirichlet(np.full(30, 0.3)))
    flat = CoOccurrence.from_pairs(np.stack([np.repeat(np.arange(40), 60), flat_tokens], axis=1), shape=(40, 30))
    flat_history = anneal_tree(flat, key=jax.random.key(0), **schedule).history
    assert (flat_history.loc[flat_history["beta"] < 0.5, "n_leaves"] == 1).all()

    text = tree_text(grown.model, grown.params, col_names=[f"w{k}" for k in range(30)], n_words=3)
    assert text.count("\n") == 2 and "leaf 1" in text and "w" in text
    figure = plot_tree(grown.model, grown.params, n_words=3)
    assert isinstance(figure, matplotlib.figure.Figure)


def test_every_leaf_of_a_grown_tree_holds_rows():
    # Three levels planted (a root aspect, two parents, four leaves; 60 rows of 40 tokens). A split
    # whose copy took no rows used to be kept (separation 1 from its sibling): the grown tree ended
    # with 3 leaves of 19, 41 and 0 rows.
    rng = np.random.default_rng(1)
    root, parents, leaves = np.full(48, 1 / 48), np.zeros((2, 48)), np.zeros((4, 48))
    for index in range(2):
        parents[index, 12 * index:12 * (index + 1)] = 1 / 12
    for index in range(4):
        leaves[index, 24 + 6 * index:24 + 6 * (index + 1)] = 1 / 6
    truth = rng.integers(0, 4, 60)
    counts = np.stack([rng.multinomial(40, 0.2 * root + 0.4 * parents[leaf // 2] + 0.4 * leaves[leaf])
                       for leaf in truth])
    train, valid = CoOccurrence.from_dense(counts).split_tokens([0.9, 0.1], rng=2)
    grown = anneal_tree(train, key=jax.random.key(0), valid=valid, max_leaves=4)
    likeliest = np.asarray(grown.params.cluster_posterior).argmax(axis=1)
    assert (np.bincount(likeliest, minlength=grown.tree.n_leaves) > 0).all()
    assert (grown.history["n_split"] <= grown.history["n_tried"]).all()


def test_annealing_with_validation_keeps_the_best_level():
    rng = np.random.default_rng(5)
    data = CoOccurrence.from_dense(rng.poisson(2.0, size=(12, 10)) + 1)
    train, valid = data.split_tokens([0.8, 0.2], rng=0)
    grown = anneal_tree(train, key=jax.random.key(1), valid=valid, max_leaves=2, beta_start=0.5, beta_growth=2.0,
                        max_iter_per_level=50)
    perplexities = grown.history["valid_perplexity"].to_numpy()
    assert np.all(np.isfinite(perplexities))
    best = int(np.argmin(perplexities))
    assert grown.beta == grown.history["beta"].iloc[best]
    assert grown.tree.n_leaves == grown.history["n_leaves"].iloc[best]
    last = anneal_tree(train, key=jax.random.key(1), valid=valid, max_leaves=2, beta_start=0.5, beta_growth=2.0,
                       max_iter_per_level=50, keep="last")
    assert last.beta == 1.0 and last.tree.n_leaves == last.history["n_leaves"].iloc[-1]
    np.testing.assert_allclose(last.history["valid_perplexity"], perplexities, rtol=1e-6)


def test_annealing_counts_validation_tokens_of_probability_zero_and_map_em_removes_them():
    rng = np.random.default_rng(5)
    train_counts = rng.poisson(2.0, size=(12, 10)) + 1
    train_counts[:, 9] = 0  # a word never seen in training: probability 0 under maximum likelihood
    train = CoOccurrence.from_dense(train_counts)
    valid_counts = rng.poisson(0.5, size=(12, 10))
    valid_counts[:, 9] = 0
    valid_counts[:3, 9] = 1
    valid = CoOccurrence.from_dense(valid_counts)
    options = dict(key=jax.random.key(1), valid=valid, max_leaves=2, beta_start=0.5, beta_growth=2.0,
                   max_iter_per_level=50)
    ml = anneal_tree(train, **options)
    assert (ml.history["valid_zero_tokens"] == 3).all() and np.isinf(ml.history["valid_perplexity"]).all()
    assert ml.model.prior_count == 0.0
    smoothed = anneal_tree(train, prior_count=0.5, **options)
    assert smoothed.model.prior_count == 0.5
    assert (smoothed.history["valid_zero_tokens"] == 0).all() and np.isfinite(smoothed.history["valid_perplexity"]).all()
    best = int(np.argmin(smoothed.history["valid_perplexity"].to_numpy()))
    assert smoothed.beta == smoothed.history["beta"].iloc[best]
    # The kept parameters are MAP-EM's: the unseen word has positive probability, and the recorded
    # perplexity is the float64 evaluation's.
    evaluation = smoothed.model.heldout_evaluation(smoothed.params, valid)
    assert evaluation.n_zero_tokens == 0
    np.testing.assert_allclose(evaluation.perplexity, smoothed.history["valid_perplexity"].iloc[best], rtol=1e-4)
    with pytest.raises(ValueError, match="^prior_count"):
        anneal_tree(train, key=jax.random.key(0), max_leaves=2, prior_count=-1.0)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: ClusterAbstraction(), "depth"),
        (lambda: ClusterAbstraction(depth=0), "depth"),
        (lambda: ClusterAbstraction(depth=2, branching=1), "branching"),
        (lambda: ClusterAbstraction(depth=1, tree=IRREGULAR), "depth"),
        (lambda: ClusterAbstraction(depth=2, backend="gpu"), "backend"),
        (lambda: Tree.complete(0), "depth"),
        (lambda: Tree((0, 0)), "parents"),
        (lambda: Tree((-1, 2, 0)), "parents"),
        (lambda: IRREGULAR.split([1]), "leaves"),
        (lambda: ClusterAbstraction(depth=3).prepare(CoOccurrence.from_dense(np.ones((5, 4)))), "depth"),
        (lambda: ClusterAbstraction(tree=Tree.complete(1, 6)).prepare(CoOccurrence.from_dense(np.ones((5, 4)))), "tree"),
        (lambda: anneal_tree(CoOccurrence.from_dense(np.ones((5, 4))), key=jax.random.key(0), max_leaves=0), "max_leaves"),
        (lambda: anneal_tree(CoOccurrence.from_dense(np.ones((5, 4))), key=jax.random.key(0), max_leaves=6), "max_leaves"),
        (lambda: anneal_tree(CoOccurrence.from_dense(np.ones((5, 4))), key=jax.random.key(0), max_leaves=2,
                             beta_growth=1.0), "beta_growth"),
        (lambda: anneal_tree(CoOccurrence.from_dense(np.ones((5, 4))), key=jax.random.key(0), max_leaves=2,
                             split_threshold=1.5), "split_threshold"),
        (lambda: anneal_tree(CoOccurrence.from_dense(np.ones((5, 4))), key=None, max_leaves=2), "key"),
        (lambda: anneal_tree(CoOccurrence.from_dense(np.ones((5, 4))), key=jax.random.key(0), max_leaves=2,
                             keep="first"), "keep"),
    ],
)
def test_bad_settings_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        call()


def test_rendering_validates_its_arguments():
    data = CoOccurrence.from_dense(np.ones((4, 3)))
    model = ClusterAbstraction(depth=1)
    params = model.init_params(jax.random.key(0), model.prepare(data))
    with pytest.raises(ValueError, match="^col_names"):
        tree_text(model, params, col_names=["a", "b"])
    with pytest.raises(ValueError, match="^n_words"):
        plot_tree(model, params, n_words=0)
    with pytest.raises(TypeError, match="^model"):
        tree_text(OneSided(2), params)
    with pytest.raises(TypeError, match="^tree"):
        ClusterAbstraction(tree=(-1, 0, 0))
