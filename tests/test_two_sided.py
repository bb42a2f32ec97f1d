"""Two-sided clustering (SCM): monotone mean-field EM, lower bound on the exact likelihood,
E-step equations, the program, recovery, predictive distribution, bad input."""
import re
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpyro.infer import Predictive
from scipy.special import softmax
from sklearn.metrics import adjusted_rand_score

from inference.em import tempered_em
from inference.enumerated import enumerated_log_likelihood
from zoo.data import CoOccurrence
from zoo.dyadic.predictive import predictive_matrix
from zoo.dyadic.two_sided import TwoSided, TwoSidedParams, exact_log_likelihood, two_sided_program


def _exact_log_lik(program, params, *args, max_plate_nesting, **static):
    """The program's enumerated log-likelihood, traced once with ``jit`` (eager funsor compiles op by op)."""
    run = jax.jit(lambda params, *args: enumerated_log_likelihood(program, params, *args,
                                                                   max_plate_nesting=max_plate_nesting, **static))
    return run(params, *args)


@partial(jax.jit, static_argnames=("model",))
def _heldout(model, params, arrays):
    return model.heldout_log_lik(params, arrays)


@partial(jax.jit, static_argnames=("model",))
def _em_step(model, params, arrays, beta):
    return model.em_step(params, arrays, beta)


@partial(jax.jit, static_argnames=("model",))
def _objective(model, params, arrays):
    return model.objective(params, arrays)


@partial(jax.jit, static_argnames=("model", "n_steps"))
def _objectives(model, params, arrays, n_steps):
    def step(params, _):
        params, objective = model.em_step(params, arrays, 1.0)
        return params, objective

    return jax.lax.scan(step, params, None, length=n_steps)[1]


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([(1, 2), (3, 2), (2, 3)]), st.floats(0.2, 3.0), st.integers(0, 2**31 - 1))
def test_mean_field_objective_never_decreases_at_beta_one(n_classes, rate, seed):
    rng = np.random.default_rng(seed)
    # Every cell observed, so all examples share one shape and one compilation per (K_x, K_y).
    data = CoOccurrence.from_dense(rng.poisson(rate, size=(7, 8)) + 1)
    model = TwoSided(*n_classes, backend="xla")
    arrays = model.prepare(data)
    objective = np.asarray(_objectives(model, model.init_params(jax.random.key(seed), arrays), arrays, 25))
    assert np.all(np.isfinite(objective))
    assert np.all(np.diff(objective) >= -1e-5 * np.abs(objective[:-1]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_objective_is_a_lower_bound_on_the_exact_log_likelihood(x64, seed):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(1.2, size=(3, 4))
    counts[0, 0] += 3
    data = CoOccurrence.from_dense(counts)
    model = TwoSided(2, 2, backend="xla")
    arrays = model.prepare(data)
    params = model.init_params(jax.random.key(seed), arrays)
    # Start from soft posteriors, so the bound is not tight by construction.
    soft_rows = jnp.asarray(rng.dirichlet(np.ones(2), size=3))
    soft_cols = jnp.asarray(rng.dirichlet(np.ones(2), size=4))
    params = params._replace(row_posterior=soft_rows, col_posterior=soft_cols,
                             association=soft_rows.T @ jnp.asarray(counts, float) @ soft_cols / counts.sum())
    for _ in range(6):
        bound = float(_objective(model, params, arrays))
        exact = exact_log_likelihood(params, data)  # sums the 2^3 · 2^4 joint assignments of H99 eq. 8
        assert bound <= exact + 1e-9
        params, _ = _em_step(model, params, arrays, 1.0)


def test_objective_is_exact_with_one_cluster_per_side(x64):
    rng = np.random.default_rng(3)
    data = CoOccurrence.from_dense(rng.poisson(1.0, size=(3, 4)) + np.eye(3, 4))
    model = TwoSided(1, 1, backend="xla")
    arrays = model.prepare(data)
    params = model.init_params(jax.random.key(0), arrays)
    np.testing.assert_allclose(float(_objective(model, params, arrays)), exact_log_likelihood(params, data), rtol=1e-12)
    counts = data.to_dense()
    sums, col_sums, total = counts.sum(1), counts.sum(0), counts.sum()
    independent = np.sum(sums * np.log(sums / total)) + np.sum(col_sums * np.log(col_sums / total))
    np.testing.assert_allclose(float(_objective(model, params, arrays)), independent, rtol=1e-12)


def test_em_step_follows_equations_9_and_10(x64):
    rng = np.random.default_rng(5)
    counts = rng.poisson(1.5, size=(6, 5)).astype(float)
    data = CoOccurrence.from_dense(counts)
    model = TwoSided(3, 2)
    arrays = model.prepare(data)
    rows = rng.dirichlet(np.ones(3), size=6)
    cols = rng.dirichlet(np.ones(2), size=5)
    total = counts.sum()
    params = TwoSidedParams(
        row_class_prior=jnp.asarray(rng.dirichlet(np.ones(3))),
        col_class_prior=jnp.asarray(rng.dirichlet(np.ones(2))),
        association=jnp.asarray(rows.T @ counts @ cols / total),
        row_posterior=jnp.asarray(rows), col_posterior=jnp.asarray(cols),
        row_marginal=jnp.asarray(counts.sum(1) / total), col_marginal=jnp.asarray(counts.sum(0) / total),
    )
    beta = 0.7
    new, _ = _em_step(model, params, arrays, beta)

    def log_ratio(rows, cols):  # c = π / (π^x π^y), π from eq. 9
        pi = rows.T @ counts @ cols / total
        return np.log(pi / np.outer(pi.sum(1), pi.sum(0)))

    expected_rows = softmax(np.log(np.asarray(params.row_class_prior)) + beta * counts @ cols @ log_ratio(rows, cols).T, axis=1)
    expected_cols = softmax(np.log(np.asarray(params.col_class_prior))
                            + beta * counts.T @ expected_rows @ log_ratio(expected_rows, cols), axis=1)
    np.testing.assert_allclose(np.asarray(new.row_posterior), expected_rows, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(new.col_posterior), expected_cols, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(new.row_class_prior), expected_rows.mean(0), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(new.association), expected_rows.T @ counts @ expected_cols / total, rtol=1e-10)


def test_program_given_assignments_is_equation_8(x64):
    rng = np.random.default_rng(6)
    n_rows, n_cols = 5, 4
    row_classes, col_classes = np.array([0, 1, 1, 2, 0]), np.array([1, 0, 1, 1])
    counts = rng.poisson(1.0, size=(n_rows, n_cols))
    counts[0, 0] += 1
    data = CoOccurrence.from_dense(counts)
    rows, cols = np.repeat(data.rows, data.counts.astype(int)), np.repeat(data.cols, data.counts.astype(int))
    association = rng.dirichlet(np.ones(6)).reshape(3, 2)
    values = {
        "row_class_prior": rng.dirichlet(np.ones(3)), "col_class_prior": rng.dirichlet(np.ones(2)),
        "row_marginal": rng.dirichlet(np.ones(n_rows)), "col_marginal": rng.dirichlet(np.ones(n_cols)),
        "association": association.ravel(), "row_class": row_classes, "col_class": col_classes,
    }
    program_log_lik = _exact_log_lik(
        two_sided_program, values, jnp.asarray(rows), jnp.asarray(cols), n_rows=n_rows, n_cols=n_cols,
        n_row_classes=3, n_col_classes=2, max_plate_nesting=1,
    )
    # P(x_i, y_k | c) = P(x_i) P(y_k) π_{c(x_i) c(y_k)} / (P^x_{c(x_i)} P^y_{c(y_k)}).
    row_mass = np.bincount(row_classes, weights=values["row_marginal"], minlength=3)
    col_mass = np.bincount(col_classes, weights=values["col_marginal"], minlength=2)
    ratio = association / np.outer(row_mass, col_mass)
    expected = (np.log(values["row_class_prior"][row_classes]).sum() + np.log(values["col_class_prior"][col_classes]).sum()
                + np.sum(np.log(values["row_marginal"][rows] * values["col_marginal"][cols]
                                * ratio[row_classes[rows], col_classes[cols]])))
    np.testing.assert_allclose(float(program_log_lik), expected, rtol=1e-10)


def test_fitted_clusters_recover_clusters_simulated_from_the_program():
    n_rows, n_cols, n_tokens = 45, 30, 3000
    association = np.array([[0.28, 0.02], [0.02, 0.28], [0.2, 0.2]])  # the third row cluster is flat
    params = {
        "row_class_prior": jnp.ones(3) / 3, "col_class_prior": jnp.ones(2) / 2,
        "row_marginal": jnp.ones(n_rows) / n_rows, "col_marginal": jnp.ones(n_cols) / n_cols,
        "association": jnp.asarray(association.ravel()),
    }
    simulated = Predictive(two_sided_program, params=params, num_samples=1)(
        jax.random.key(0), n_rows=n_rows, n_cols=n_cols, n_row_classes=3, n_col_classes=2, n_tokens=n_tokens
    )
    pairs = np.stack([np.asarray(simulated["x"]).ravel(), np.asarray(simulated["y"]).ravel()], axis=1)
    data = CoOccurrence.from_pairs(pairs, shape=(n_rows, n_cols))
    result = tempered_em(TwoSided(3, 2), data, key=jax.random.key(1), n_restarts=3, max_iter=40)
    assert adjusted_rand_score(np.asarray(simulated["row_class"]).ravel(), np.asarray(result.params.row_assignments())) > 0.95
    assert adjusted_rand_score(np.asarray(simulated["col_class"]).ravel(), np.asarray(result.params.col_assignments())) > 0.95
    np.testing.assert_allclose(np.sort(np.asarray(result.params.association).ravel()), np.sort(association.ravel()), atol=0.03)


def test_empty_rows_long_rows_and_predictive_distribution():
    rng = np.random.default_rng(4)
    counts = rng.poisson(1.0, size=(9, 8)) * (rng.random((9, 8)) < 0.8)
    counts[0], counts[:, 1] = 0, 0
    counts[2, 3] += 4
    counts[3, 4:] = 3_000  # 12,000 tokens in one row: its posterior is computed in log space
    data = CoOccurrence.from_dense(counts)
    model = TwoSided(3, 2)
    result = tempered_em(model, data, key=jax.random.key(2), max_iter=40)
    for leaf in result.params:
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert np.isfinite(result.history["log_lik"]).all()
    np.testing.assert_allclose(np.asarray(result.params.row_posterior).sum(axis=1), 1.0, rtol=1e-5)
    # Row 0 has no counts: its posterior after an E-step is the prior that E-step used.
    after, _ = _em_step(model, result.params, model.prepare(data), 1.0)
    np.testing.assert_allclose(np.asarray(after.row_posterior[0]), np.asarray(result.params.row_class_prior), rtol=1e-6)
    conditional = predictive_matrix(model, result.params)
    np.testing.assert_allclose(conditional.sum(axis=1), 1.0, rtol=1e-5)
    heldout_counts = rng.poisson(0.7, size=(9, 8)) + np.eye(9, 8)
    heldout_counts[:, 1] = 0  # a column never seen in training has P(y|x) = 0
    heldout = CoOccurrence.from_dense(heldout_counts)
    expected = np.sum(heldout_counts[heldout_counts > 0] * np.log(conditional[heldout_counts > 0]))
    np.testing.assert_allclose(float(_heldout(model, result.params, model.prepare(heldout))), expected, rtol=1e-5)


@pytest.mark.numba
def test_backends_agree_on_a_tempered_step():
    rng = np.random.default_rng(2)
    data = CoOccurrence.from_dense(rng.poisson(0.7, size=(40, 60)) + (rng.random((40, 60)) < 0.02))
    models = [TwoSided(4, 3, backend=backend) for backend in ("xla", "numba")]
    arrays = models[0].prepare(data)
    params = models[0].init_params(jax.random.key(1), arrays)
    (xla, objective_xla), (fast, objective_fast) = (_em_step(model, params, arrays, 0.8) for model in models)
    for a, b in zip(xla, fast):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(float(objective_xla), float(objective_fast), rtol=1e-5)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: TwoSided(0), "n_row_classes"),
        (lambda: TwoSided(2, 0), "n_col_classes"),
        (lambda: TwoSided(2, backend="tpu"), "backend"),
        (lambda: TwoSided(4, 2).prepare(CoOccurrence.from_dense(np.ones((3, 5)))), "n_row_classes"),
        (lambda: TwoSided(2, 6).prepare(CoOccurrence.from_dense(np.ones((3, 5)))), "n_col_classes"),
        (lambda: TwoSided(2, starts="kmeans"), "starts"),
    ],
)
def test_bad_settings_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        call()


def test_exact_log_likelihood_refuses_large_problems():
    data = CoOccurrence.from_dense(np.ones((12, 12)))
    model = TwoSided(3, 3)
    params = model.init_params(jax.random.key(0), model.prepare(data))
    with pytest.raises(ValueError, match="^data"):
        exact_log_likelihood(params, data)
    with pytest.raises(ValueError, match="^data"):
        exact_log_likelihood(params, CoOccurrence.from_dense(np.ones((2, 2))))
    with pytest.raises(TypeError, match="^data"):
        model.prepare(np.ones((3, 3)))


def test_seeded_starts_find_planted_blocks_in_one_restart():
    # 240 documents x 160 words, four row and four column clusters, a row cluster's own column
    # cluster 16 times likelier than another: random hard partitions (the default) ended at ARI
    # 0.67-0.73 with 1 and with 4 restarts (keys 0-2); the truth has the higher log-likelihood.
    rng = np.random.default_rng(0)
    row_truth, col_truth = rng.integers(0, 4, 240), np.repeat(np.arange(4), 40)
    affinity = np.full((4, 4), 0.5) + 7.5 * np.eye(4)
    probabilities = affinity[row_truth][:, col_truth]
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    counts = np.stack([rng.multinomial(rng.poisson(80) + 1, p) for p in probabilities])
    data = CoOccurrence.from_dense(counts)
    for key in range(2):
        seeded = tempered_em(TwoSided(4, starts="seeded"), data, key=jax.random.key(key), max_iter=300)
        assert adjusted_rand_score(row_truth, np.asarray(seeded.params.row_assignments())) == 1.0
        assert adjusted_rand_score(col_truth, np.asarray(seeded.params.col_assignments())) == 1.0
    random = tempered_em(TwoSided(4), data, key=jax.random.key(0), max_iter=300)
    assert random.log_lik < seeded.log_lik - 1000  # a worse local optimum
    assert np.isfinite(random.log_lik)
