"""Aspect model: kernel = program, monotone EM, equivalence with KL-NMF, fold-in, bad input."""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import NMF

from inference.em import tempered_em
from inference.enumerated import enumerated_log_likelihood
from inference.schedules import FixedBeta
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect, AspectParams


def _random_params(rng, n_rows, n_cols, n_classes):
    prior = rng.dirichlet(np.ones(n_classes))
    rows = rng.dirichlet(np.ones(n_rows), size=n_classes).T
    cols = rng.dirichlet(np.ones(n_cols), size=n_classes).T
    return AspectParams(jnp.asarray(prior), jnp.asarray(rows), jnp.asarray(cols))


def _tokens(data: CoOccurrence):
    repeats = data.counts.astype(int)
    return np.repeat(data.rows, repeats), np.repeat(data.cols, repeats)


@pytest.mark.parametrize("backend", ["xla", "numba"])
@pytest.mark.parametrize("n_classes", [1, 3])
def test_kernel_log_likelihood_equals_enumerated_program(x64, backend, n_classes):
    rng = np.random.default_rng(n_classes)
    counts = rng.poisson(1.0, size=(5, 7))
    counts[4] = 0  # an empty row must not disturb anything
    counts[0, 0] += 2
    data = CoOccurrence.from_dense(counts)
    model = Aspect(n_classes, backend=backend)
    params = _random_params(rng, 5, 7, n_classes)
    kernel = model.log_likelihood(params, model.prepare(data))
    rows, cols = _tokens(data)
    exact = enumerated_log_likelihood(
        model.program, params.program_params(), jnp.asarray(rows), jnp.asarray(cols),
        n_rows=5, n_cols=7, n_classes=n_classes, max_plate_nesting=1,
    )
    np.testing.assert_allclose(float(kernel), float(exact), rtol=1e-5)


_STEPS = {update: jax.jit(Aspect.em_step, static_argnums=0) for update in ("simultaneous", "alternating")}


# Few distinct shapes so the step compiles a handful of times; hypothesis varies the counts.
@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from([1, 2, 4]),
    st.sampled_from([(3, 8), (9, 5)]),
    st.integers(0, 2**31 - 1),
)
def test_em_log_likelihood_never_decreases_at_beta_one(n_classes, shape, seed):
    n_rows, n_cols = shape
    rng = np.random.default_rng(seed)
    counts = rng.poisson(1.5, size=(n_rows, n_cols))
    counts[0, 0] += 1
    arrays = CoOccurrence.from_dense(counts).to_arrays()
    for update, step in _STEPS.items():
        model = Aspect(n_classes, update=update, backend="xla")
        params = model.init_params(jax.random.key(seed), arrays)
        log_lik = []
        for _ in range(40):
            params, value = step(model, params, arrays, 1.0)
            log_lik.append(float(value))
        log_lik = np.asarray(log_lik)
        assert np.all(np.isfinite(log_lik))
        assert np.all(np.diff(log_lik) >= -1e-4 * np.abs(log_lik[:-1]))


def test_alternating_em_is_kl_nmf_step_for_step(x64):
    rng = np.random.default_rng(0)
    counts = rng.poisson(2.0, size=(12, 15)).astype(float)
    counts[0, 0] += 1
    data = CoOccurrence.from_dense(counts)
    n_classes = 3
    params = _random_params(rng, 12, 15, n_classes)
    model = Aspect(n_classes, update="alternating", backend="xla")
    arrays = model.prepare(data)
    # NMF factors of the same starting point: W = N·P(x, c), H = P(y|c)ᵀ.
    W0 = np.asarray(params.row_given_class * params.class_prior) * counts.sum()
    H0 = np.asarray(params.col_given_class).T
    step = jax.jit(model.em_step)
    for n_iter in (1, 2, 5):
        nmf = NMF(n_classes, init="custom", solver="mu", beta_loss="kullback-leibler",
                  max_iter=n_iter, tol=0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "maximum number of iterations reached"
            W = nmf.fit_transform(counts, W=W0.copy(), H=H0.copy())
        H = nmf.components_
        current = params
        for _ in range(n_iter):
            current, _ = step(current, arrays, 1.0)
        # Normalise NMF's factors the way the aspect model is parametrised.
        mass = W.sum(0) * H.sum(1)
        np.testing.assert_allclose(np.asarray(current.class_prior), mass / mass.sum(), rtol=1e-7)
        np.testing.assert_allclose(np.asarray(current.row_given_class), W / W.sum(0), rtol=1e-7)
        np.testing.assert_allclose(np.asarray(current.col_given_class), (H / H.sum(1, keepdims=True)).T, rtol=1e-7)


def test_simultaneous_em_is_simultaneous_kl_nmf_update(x64):
    rng = np.random.default_rng(1)
    counts = rng.poisson(2.0, size=(10, 9)).astype(float) + np.eye(10, 9)
    data = CoOccurrence.from_dense(counts)
    params = _random_params(rng, 10, 9, 4)
    new, _ = Aspect(4).em_step(params, data.to_arrays(), 1.0)
    W = np.asarray(params.row_given_class * params.class_prior)
    H = np.asarray(params.col_given_class).T
    ratio = counts / (W @ H)
    W_new = W * (ratio @ H.T) / H.sum(1)
    H_new = H * (W.T @ ratio) / W.sum(0)[:, None]
    np.testing.assert_allclose(np.asarray(new.row_given_class), W_new / W_new.sum(0), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(new.col_given_class), (H_new / H_new.sum(1, keepdims=True)).T, rtol=1e-9)


@pytest.mark.numba
def test_backends_agree_on_a_tempered_step():
    rng = np.random.default_rng(2)
    data = CoOccurrence.from_dense(rng.poisson(0.7, size=(40, 60)) + (rng.random((40, 60)) < 0.02))
    params = _random_params(rng, 40, 60, 5)
    params = AspectParams(*(leaf.astype(jnp.float32) for leaf in params))
    arrays = data.to_arrays()
    xla, ll_xla = Aspect(5, backend="xla").em_step(params, arrays, 0.7)
    fast, ll_fast = Aspect(5, backend="numba").em_step(params, arrays, 0.7)
    for a, b in zip(xla, fast):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-7)
    np.testing.assert_allclose(float(ll_xla), float(ll_fast), rtol=1e-5)


def test_tempering_raises_only_the_likelihood_term():
    # One cell, two classes: P_β(c|x,y) ∝ P(c) [P(x|c) P(y|c)]^β (H99 §4).
    data = CoOccurrence.from_dense([[3.0, 0.0], [0.0, 0.0]])
    params = AspectParams(
        jnp.array([0.25, 0.75]), jnp.array([[0.8, 0.2], [0.2, 0.8]]), jnp.array([[0.6, 0.1], [0.4, 0.9]])
    )
    beta = 0.5
    new, _ = Aspect(2, backend="xla").em_step(params, data.to_arrays(), beta)
    weights = np.array([0.25, 0.75]) * (np.array([0.8, 0.2]) * np.array([0.6, 0.1])) ** beta
    np.testing.assert_allclose(np.asarray(new.class_prior), weights / weights.sum(), rtol=1e-6)


def test_empty_rows_and_columns_stay_finite():
    counts = np.zeros((6, 7))
    counts[1, 2], counts[3, 4], counts[1, 4] = 5, 2, 1
    data = CoOccurrence.from_dense(counts)
    result = tempered_em(Aspect(3), data, key=jax.random.key(0), max_iter=30)
    for leaf in result.params:
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert np.isfinite(result.log_likelihood(data))
    for shape in ((6, 9), (5, 7)):  # other columns or rows: refused, not scored as the fitted ones
        with pytest.raises(ValueError, match=rf"^data: shape \({shape[0]}, {shape[1]}\) differs from the fitted"):
            result.log_likelihood(CoOccurrence.from_dense(np.ones(shape)))
    given_row = np.asarray(result.params.class_given_row())
    np.testing.assert_allclose(given_row[0], np.asarray(result.params.class_prior), rtol=1e-6)


def test_same_key_same_fit_different_keys_different_start():
    rng = np.random.default_rng(5)
    data = CoOccurrence.from_dense(rng.poisson(1.0, size=(20, 25)) + 1)
    fit = lambda seed: tempered_em(Aspect(4), data, key=jax.random.key(seed), max_iter=20)  # noqa: E731
    first, again, other = fit(0), fit(0), fit(1)
    np.testing.assert_array_equal(np.asarray(first.params.col_given_class), np.asarray(again.params.col_given_class))
    assert not np.allclose(first.history["log_lik"][0], other.history["log_lik"][0])
    model = Aspect(4)
    arrays = model.prepare(data)
    start_a = model.init_params(jax.random.key(0), arrays)
    start_b = model.init_params(jax.random.key(1), arrays)
    assert not np.allclose(np.asarray(start_a.col_given_class), np.asarray(start_b.col_given_class))


def test_fold_in_recovers_mixing_weights_of_training_rows():
    rng = np.random.default_rng(4)
    n_rows, n_cols, n_classes = 60, 40, 3
    topics = rng.dirichlet(np.full(n_cols, 0.1), size=n_classes)
    mixing = rng.dirichlet(np.full(n_classes, 0.3), size=n_rows)
    counts = np.stack([rng.multinomial(300, m @ topics) for m in mixing])
    data = CoOccurrence.from_dense(counts)
    result = tempered_em(Aspect(n_classes), data, key=jax.random.key(2), max_iter=300, n_restarts=3)
    folded = np.asarray(Aspect(n_classes).fold_in(result.params, data, n_iter=200))
    np.testing.assert_allclose(folded, np.asarray(result.params.class_given_row()), atol=0.02)
    heldout = Aspect(n_classes).fold_in_heldout_log_lik(result.params, folded, data)
    np.testing.assert_allclose(heldout, result.heldout_log_likelihood(data), rtol=1e-3)


def test_fold_in_from_the_result_refuses_a_vocabulary_in_another_order():
    """New rows whose columns name the fitted words in another order: from the result (not only its
    parameters) fold_in, fold_in_heldout_log_lik and OneSided.assign refuse them, naming data (they
    were folded in by position, in silence: P(c|x) off by up to 0.77 in a user's audit)."""
    import pandas as pd

    from zoo.dyadic.one_sided import OneSided

    rng = np.random.default_rng(5)
    words = [f"w{index}" for index in range(12)]
    frame = pd.DataFrame(rng.poisson(2.0, (20, 12)), columns=words, index=[f"d{index}" for index in range(20)])
    data = CoOccurrence.from_dense(frame)
    new = CoOccurrence.from_dense(frame.iloc[:5])
    shuffled = CoOccurrence.from_dense(frame.iloc[:5][sorted(words)])  # w0, w1, w10, w11, w2, ...
    result = tempered_em(Aspect(2), data, key=jax.random.key(0), max_iter=5)
    model = Aspect(2)
    folded = model.fold_in(result, new)
    np.testing.assert_array_equal(np.asarray(folded), np.asarray(model.fold_in(result.params, new)))
    assert model.fold_in_heldout_log_lik(result, folded, new) == model.fold_in_heldout_log_lik(result.params, folded,
                                                                                               new)
    refused = r"^data: its col_names differ from the fitted data's \(at 2: 'w10' against 'w2'\)"
    with pytest.raises(ValueError, match=refused):
        model.fold_in(result, shuffled)
    with pytest.raises(ValueError, match=refused):
        model.fold_in_heldout_log_lik(result, folded, shuffled)
    for side, (fitted, renamed) in {"rows": (data, shuffled),
                                    "cols": (CoOccurrence.from_dense(frame.T), CoOccurrence.from_dense(
                                        frame.iloc[:5][sorted(words)].T))}.items():
        clusters = tempered_em(OneSided(2, side=side), fitted, key=jax.random.key(0), max_iter=5)
        axis = "col_names" if side == "rows" else "row_names"
        with pytest.raises(ValueError, match=rf"^data: its {axis} differ from the fitted data's"):
            OneSided(2, side=side).assign(clusters, renamed)
    same = OneSided(2).assign(clusters := tempered_em(OneSided(2), data, key=jax.random.key(0), max_iter=5), new)
    np.testing.assert_array_equal(np.asarray(same), np.asarray(OneSided(2).assign(clusters.params, new)))


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: Aspect(0), "n_classes"),
        (lambda: Aspect(2, update="both"), "update"),
        (lambda: FixedBeta(1.5), "beta"),
        (lambda: FixedBeta(0.0), "beta"),
    ],
)
def test_bad_settings_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        call()


def test_fit_arguments_are_validated():
    data = CoOccurrence.from_dense([[1, 2], [3, 0]])
    with pytest.raises(ValueError, match="^valid"):
        from inference.schedules import TemperedEM

        tempered_em(Aspect(2), data, key=jax.random.key(0), schedule=TemperedEM())
    with pytest.raises(ValueError, match="^n_restarts"):
        tempered_em(Aspect(2), data, key=jax.random.key(0), n_restarts=0)
    with pytest.raises(TypeError, match="^data"):
        tempered_em(Aspect(2), np.ones((2, 2)), key=jax.random.key(0))
    other = CoOccurrence.from_dense([[1, 2, 3]])
    with pytest.raises(ValueError, match="^valid"):
        tempered_em(Aspect(2), data, key=jax.random.key(0), valid=other)


def test_time_budget_returns_the_finished_iterations():
    rng = np.random.default_rng(6)
    data = CoOccurrence.from_dense(rng.poisson(1.0, size=(30, 40)) + 1)
    result = tempered_em(Aspect(3), data, key=jax.random.key(0), max_iter=400, tol=0.0,
                         segment=5, time_budget=1e-9)
    assert result.stopped_by == "time_budget"
    assert result.n_iter == 5 and np.all(np.isfinite(result.history["log_lik"]))
    full = tempered_em(Aspect(3), data, key=jax.random.key(0), max_iter=5, tol=0.0)
    np.testing.assert_allclose(result.history["log_lik"], full.history["log_lik"], rtol=1e-6)
    assert full.stopped_by == "max_iter"


def test_segmented_fit_equals_one_long_call():
    rng = np.random.default_rng(7)
    data = CoOccurrence.from_dense(rng.poisson(1.0, size=(15, 12)) + 1)
    one = tempered_em(Aspect(3), data, key=jax.random.key(1), max_iter=37, tol=0.0, segment=37)
    many = tempered_em(Aspect(3), data, key=jax.random.key(1), max_iter=37, tol=0.0, segment=4, progress=True)
    np.testing.assert_array_equal(one.history["log_lik"], many.history["log_lik"])
    np.testing.assert_array_equal(np.asarray(one.params.col_given_class), np.asarray(many.params.col_given_class))
