"""One-sided clustering (ACM): kernel = program, monotone EM, X/Y symmetry, recovery, bad input."""
import re
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpyro.infer import Predictive
from scipy.special import logsumexp, softmax
from sklearn.metrics import adjusted_rand_score

from inference.em import tempered_em
from inference.schedules import FixedBeta
from inference.enumerated import enumerated_log_likelihood
from inference.sparse import count_matmul
from zoo.data import CoOccurrence
from zoo.dyadic.one_sided import OneSided, OneSidedParams, one_sided_program, padded_tokens
from zoo.dyadic.predictive import perplexity, predictive_matrix


def _random_params(rng, model, arrays):
    n_objects, n_features = arrays.shape
    marginal = np.asarray(arrays.row_sums, np.float64)
    return OneSidedParams(
        class_prior=jnp.asarray(rng.dirichlet(np.ones(model.n_classes))),
        feature_given_class=jnp.asarray(rng.dirichlet(np.ones(n_features), size=model.n_classes).T),
        object_marginal=jnp.asarray(marginal / marginal.sum()),
        cluster_posterior=jnp.asarray(rng.dirichlet(np.ones(model.n_classes), size=n_objects)),
    )


def _dense_oriented(data, side):
    return data.to_dense() if side == "rows" else data.to_dense().T


def _numpy_log_lik(params, counts):
    """H99 eq. 6 in float64 NumPy."""
    q = np.asarray(params.feature_given_class, np.float64)
    prior = np.asarray(params.class_prior, np.float64)
    marginal = np.asarray(params.object_marginal, np.float64)
    scores = counts @ np.log(np.maximum(q, np.finfo(np.float32).tiny))  # the kernel's floor for q = 0
    sums = counts.sum(axis=1)
    return float(logsumexp(np.log(prior) + scores, axis=1).sum() + np.sum(sums[sums > 0] * np.log(marginal[sums > 0])))


def _exact_log_lik(program, params, *args, max_plate_nesting, **static):
    """The program's enumerated log-likelihood, traced once with ``jit`` (eager funsor compiles op by op)."""
    run = jax.jit(lambda params, *args: enumerated_log_likelihood(program, params, *args,
                                                                   max_plate_nesting=max_plate_nesting, **static))
    return run(params, *args)


@partial(jax.jit, static_argnames=("model",))
def _heldout(model, params, arrays):
    return model.heldout_log_lik(params, arrays)


# One compiled function per model and shape, shared by the tests (compilation dominates their time).
@partial(jax.jit, static_argnames=("model",))
def _log_lik(model, params, arrays):
    return model.log_likelihood(params, arrays)


@partial(jax.jit, static_argnames=("model",))
def _em_step(model, params, arrays, beta):
    return model.em_step(params, arrays, beta)


def _small_data():
    """12 × 9 counts with an empty row (0) and an empty column (1), shared by several tests."""
    rng = np.random.default_rng(3)
    counts = rng.poisson(1.0, size=(12, 9)) * (rng.random((12, 9)) < 0.7)
    counts[0], counts[:, 1] = 0, 0
    counts[2, 3] += 4
    return CoOccurrence.from_dense(counts)


def _fit(side, data, **kwargs):
    """OneSided(3) on ``data`` ("rows") or on its transpose ("cols"): two compiled fits in all."""
    observed = data if side == "rows" else data.transpose()
    return tempered_em(OneSided(3, side=side), observed, key=jax.random.key(5), max_iter=40, **kwargs)


@partial(jax.jit, static_argnames=("model", "n_steps"))
def _em_log_liks(model, params, arrays, n_steps):
    def step(params, _):
        params, log_lik = model.em_step(params, arrays, 1.0)
        return params, log_lik

    return jax.lax.scan(step, params, None, length=n_steps)[1]


@pytest.mark.parametrize("side, n_classes, backends", [("rows", 3, ("xla", "numba")), ("cols", 3, ("xla", "numba")),
                                                       ("rows", 1, ("numba",))])
def test_kernel_log_likelihood_equals_enumerated_program(x64, side, n_classes, backends):
    rng = np.random.default_rng(n_classes)
    counts = rng.poisson(1.0, size=(5, 6))
    counts[4] = 0  # an empty row and an empty column must not disturb anything
    counts[:, 2] = 0
    counts[0, 0] += 2
    data = CoOccurrence.from_dense(counts)
    model = OneSided(n_classes, side=side)
    arrays = model.prepare(data)
    params = _random_params(rng, model, arrays)
    tokens, mask = padded_tokens(data, side)
    exact = _exact_log_lik(
        model.program, params.program_params(side), jnp.asarray(mask), jnp.asarray(tokens),
        n_features=arrays.shape[1], n_classes=n_classes, side=side, max_plate_nesting=2,
    )
    np.testing.assert_allclose(_numpy_log_lik(params, _dense_oriented(data, side)), float(exact), rtol=1e-10)
    for backend in backends:
        kernel = _log_lik(OneSided(n_classes, side=side, backend=backend), params, arrays)
        np.testing.assert_allclose(float(kernel), float(exact), rtol=1e-5)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([1, 3]), st.sampled_from(["rows", "cols"]), st.floats(0.2, 3.0), st.integers(0, 2**31 - 1))
def test_em_log_likelihood_never_decreases_at_beta_one(n_classes, side, rate, seed):
    rng = np.random.default_rng(seed)
    # Every cell observed, so all examples share one shape and one compilation per (K, side).
    data = CoOccurrence.from_dense(rng.poisson(rate, size=(7, 8)) + 1)
    model = OneSided(n_classes, side=side, backend="xla")
    arrays = model.prepare(data)
    log_lik = np.asarray(_em_log_liks(model, model.init_params(jax.random.key(seed), arrays), arrays, 25))
    assert np.all(np.isfinite(log_lik))
    assert np.all(np.diff(log_lik) >= -1e-5 * np.abs(log_lik[:-1]))


def test_row_clustering_of_a_matrix_equals_column_clustering_of_its_transpose():
    data = _small_data()
    rows, cols = _fit("rows", data), _fit("cols", data)
    for a, b in zip(rows.params, cols.params):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(rows.history["log_lik"], cols.history["log_lik"])
    np.testing.assert_allclose(rows.log_likelihood(data), cols.log_likelihood(data.transpose()), rtol=1e-6)


def test_fitted_clusters_recover_clusters_simulated_from_the_program():
    n_objects, n_features, n_classes, n_tokens = 60, 30, 3, 40
    rng = np.random.default_rng(0)
    params = {
        "class_prior": jnp.ones(n_classes) / n_classes,
        "col_given_class": jnp.asarray(rng.dirichlet(np.full(n_features, 0.2), n_classes)),
        "row_marginal": jnp.ones(n_objects) / n_objects,
    }
    simulated = Predictive(one_sided_program, params=params, num_samples=1)(
        jax.random.key(1), jnp.ones((n_objects, n_tokens), bool), n_features=n_features, n_classes=n_classes
    )
    truth = np.asarray(simulated["c"]).reshape(n_objects)
    tokens = np.asarray(simulated["y"]).reshape(n_objects, n_tokens)
    pairs = np.stack([np.repeat(np.arange(n_objects), n_tokens), tokens.ravel()], axis=1)
    data = CoOccurrence.from_pairs(pairs, shape=(n_objects, n_features))
    # Column clustering of the transpose is the same computation (test above).
    result = tempered_em(OneSided(n_classes), data, key=jax.random.key(2), n_restarts=3, max_iter=100)
    assert adjusted_rand_score(truth, np.asarray(result.params.assignments())) > 0.95


def test_tempering_multiplies_the_counts_of_the_cluster_posterior(x64):
    rng = np.random.default_rng(7)
    counts = rng.poisson(2.0, size=(8, 6)).astype(float)
    data = CoOccurrence.from_dense(counts)
    model = OneSided(3, backend="xla")
    arrays = model.prepare(data)
    params = _random_params(rng, model, arrays)
    beta = 0.3
    new, _ = _em_step(model, params, arrays, beta)
    # HP98 §5: n_ij → β n_ij in eq. 2.
    expected = softmax(np.log(np.asarray(params.class_prior)) + beta * counts @ np.log(np.asarray(params.feature_given_class)), axis=1)
    np.testing.assert_allclose(np.asarray(new.cluster_posterior), expected, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(new.class_prior), expected.mean(0), rtol=1e-10)
    q = counts.T @ expected
    np.testing.assert_allclose(np.asarray(new.feature_given_class), q / q.sum(0), rtol=1e-10)


@pytest.mark.numba
def test_backends_agree_on_a_tempered_step():
    rng = np.random.default_rng(2)
    data = CoOccurrence.from_dense(rng.poisson(0.7, size=(40, 60)) + (rng.random((40, 60)) < 0.02))
    models = [OneSided(5, backend=backend) for backend in ("xla", "numba")]
    arrays = models[0].prepare(data)
    params = models[0].init_params(jax.random.key(1), arrays)
    (xla, ll_xla), (fast, ll_fast) = (_em_step(model, params, arrays, 0.6) for model in models)
    for a, b in zip(xla, fast):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(float(ll_xla), float(ll_fast), rtol=1e-5)


@pytest.mark.parametrize("backend", ["xla", "numba"])
def test_count_matmul_matches_dense_products(x64, backend):
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.5, size=(30, 40)).astype(float)
    counts[3], counts[29], counts[:, 5] = 0, 0, 0
    counts[0, 0] += 1
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    right = rng.random((40, 4))
    right[5, 1] = -np.inf  # an unobserved column may hold -inf (log 0) without producing NaN
    left = rng.random((30, 4))
    left[29, 2] = -np.inf  # so may an unobserved row, although the padding cells (count 0) sit in it
    product = np.asarray(count_matmul(jnp.asarray(right), arrays, backend=backend))
    finite = right.copy()
    finite[5, 1] = 0.0
    np.testing.assert_allclose(product, counts @ finite, rtol=1e-12)
    transposed = np.asarray(count_matmul(jnp.asarray(left), arrays, transpose=True, backend=backend))
    finite = left.copy()
    finite[29, 2] = 0.0
    np.testing.assert_allclose(transposed, counts.T @ finite, rtol=1e-12)


def test_empty_rows_and_columns_stay_finite():
    data = _small_data()  # row 0 and column 1 are empty
    for side in ("rows", "cols"):
        model = OneSided(3, side=side)
        result = _fit(side, data)
        for leaf in result.params:
            assert np.all(np.isfinite(np.asarray(leaf)))
        observed = data if side == "rows" else data.transpose()
        assert np.isfinite(float(_log_lik(model, result.params, model.prepare(observed))))
        # Either way the clustered objects are the rows of ``data``; row 0 has no counts.
        posterior = np.asarray(model.posterior(result.params, model.prepare(observed)))
        np.testing.assert_allclose(posterior[0], np.asarray(result.params.class_prior), rtol=1e-6)
        assert np.all(np.isfinite(predictive_matrix(model, result.params)))


def test_rows_with_many_tokens_do_not_underflow():
    rng = np.random.default_rng(1)
    counts = rng.poisson(1.0, size=(10, 30)).astype(float)
    counts[0, :10] = 2_000  # 20,000 tokens: ∏ q^n underflows any float by far
    counts[1, 10:20] = 1_500
    data = CoOccurrence.from_dense(counts)
    model = OneSided(3)
    result = tempered_em(model, data, key=jax.random.key(0), max_iter=50)
    posterior = np.asarray(result.params.cluster_posterior)
    assert np.all(np.isfinite(posterior)) and np.allclose(posterior.sum(1), 1.0, atol=1e-5)
    assert posterior[0].max() > 0.999 and posterior[1].max() > 0.999
    kernel = result.log_likelihood(data)
    np.testing.assert_allclose(kernel, _numpy_log_lik(result.params, counts), rtol=1e-5)


def test_predictive_distribution_is_normalised_and_scores_heldout_tokens():
    data = _small_data()
    rng = np.random.default_rng(4)
    heldout_counts = rng.poisson(0.5, size=data.shape) + np.eye(*data.shape)
    # Objects never seen in training (row 0, column 1) get probability 0 when predicted.
    heldout_counts[0], heldout_counts[:, 1] = 0, 0
    heldout = CoOccurrence.from_dense(heldout_counts)
    for side in ("rows", "cols"):
        model = OneSided(3, side=side)
        result = _fit(side, data)
        # P(y|x) in the orientation the model was given: rows predict columns.
        conditional = predictive_matrix(model, result.params)
        observed_heldout = heldout if side == "rows" else heldout.transpose()
        assert conditional.shape == observed_heldout.shape
        np.testing.assert_allclose(conditional.sum(axis=1), 1.0, rtol=1e-5)
        dense = observed_heldout.to_dense()
        expected = np.sum(dense[dense > 0] * np.log(conditional[dense > 0]))
        np.testing.assert_allclose(float(_heldout(model, result.params, model.prepare(observed_heldout))), expected, rtol=1e-5)
        np.testing.assert_allclose(perplexity(model, result.params, observed_heldout),
                                   np.exp(-expected / observed_heldout.total), rtol=1e-5)


def test_assign_new_objects_matches_the_training_posterior():
    data = _small_data()
    model = OneSided(3)
    result = _fit("rows", data)
    again = np.asarray(model.assign(result.params, data))
    refit, _ = _em_step(model, result.params, model.prepare(data), 1.0)
    np.testing.assert_allclose(again, np.asarray(refit.cluster_posterior), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: OneSided(0), "n_classes"),
        (lambda: OneSided(2, side="both"), "side"),
        (lambda: OneSided(2, backend="gpu"), "backend"),
        (lambda: OneSided(4).prepare(CoOccurrence.from_dense(np.ones((3, 5)))), "n_classes"),
        (lambda: OneSided(4, side="cols").prepare(CoOccurrence.from_dense(np.ones((5, 3)))), "n_classes"),
        (lambda: OneSided(2).assign(None, CoOccurrence.from_dense(np.ones((3, 5))), beta=0.0), "beta"),
        (lambda: padded_tokens(CoOccurrence.from_dense([[0.5, 1.0]])), "data"),
        (lambda: padded_tokens(CoOccurrence.from_dense([[1.0]]), side="x"), "side"),
    ],
)
def test_bad_settings_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        call()


def test_wrong_kinds_of_input_raise_type_or_value_errors():
    data = CoOccurrence.from_dense(np.ones((4, 5)))
    with pytest.raises(TypeError, match="^data"):
        OneSided(2).prepare(np.ones((4, 5)))
    params = OneSided(2).init_params(jax.random.key(0), data.to_arrays())
    with pytest.raises(ValueError, match="^data"):
        OneSided(2).assign(params, CoOccurrence.from_dense(np.ones((4, 6))))


def test_default_schedule_with_validation_anneals_up_and_beats_plain_em_on_reuters():
    from inference.schedules import DeterministicAnnealing
    from zoo.datasets import load_reuters

    train, valid, test = load_reuters().split_tokens([0.8, 0.1, 0.1], rng=0)
    model = OneSided(32, prior_count=0.1)
    assert model.default_schedule() == DeterministicAnnealing(0.01, 1.5, 25)  # inference.schedules.anneal_up
    annealed = tempered_em(model, train, key=jax.random.key(0), valid=valid, max_iter=500)
    plain = tempered_em(model, train, key=jax.random.key(0), valid=valid, max_iter=500,
                        schedule=FixedBeta(1.0, early_stopping=True, patience=10))
    assert annealed.beta < 0.5
    assert annealed.perplexity(test) < 0.95 * plain.perplexity(test)  # 1382 against 1582
