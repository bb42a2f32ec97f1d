"""Held-out evaluation of the dyadic models: no hidden floor; MAP-EM keeps every prediction > 0."""

import jax
import numpy as np
import pytest

from inference.em import tempered_em
from inference.schedules import FixedBeta
from zoo.data import CoOccurrence
from zoo.dyadic import Aspect, ClusterAbstraction, OneSided, TwoSided
from zoo.dyadic.predictive import (ZeroProbabilityWarning, conditional_log_lik, heldout_evaluation,
                                  heldout_from_factors, perplexity, predictive_matrix, split_zero_cells,
                                  zero_probability)

MODELS = {
    "aspect": lambda prior_count: Aspect(3, prior_count=prior_count),
    "one_sided_rows": lambda prior_count: OneSided(3, prior_count=prior_count),
    "one_sided_cols": lambda prior_count: OneSided(3, side="cols", prior_count=prior_count),
    "two_sided": lambda prior_count: TwoSided(3, 2, prior_count=prior_count),
    "cam": lambda prior_count: ClusterAbstraction(n_leaves=3, prior_count=prior_count),
}


def _blocks():
    """Three row blocks with disjoint vocabularies, and held-out tokens that cross blocks.

    Maximum-likelihood one-sided clusters become hard and never saw the other blocks' words, so
    the crossing tokens get P(y|x) = 0; the last column is not in the training data at all.
    """
    rng = np.random.default_rng(0)
    train = np.zeros((9, 10))
    for block in range(3):
        train[3 * block:3 * block + 3, 3 * block:3 * block + 3] = rng.poisson(6.0, (3, 3)) + 1
    heldout = np.zeros_like(train)
    heldout[0, 0], heldout[1, 4], heldout[8, 9] = 2, 1, 1
    return CoOccurrence.from_dense(train), CoOccurrence.from_dense(heldout)


def _fit(model, train):
    return tempered_em(model, train, key=jax.random.key(0), max_iter=200)


def test_perplexity_counts_tokens_of_probability_zero_instead_of_flooring_them():
    train, heldout = _blocks()
    result = _fit(OneSided(3), train)
    with pytest.warns(ZeroProbabilityWarning, match=r"^2 of 4 held-out tokens \(50\.000%\) have probability 0"):
        evaluation = heldout_evaluation(result.model, result.params, heldout)
    assert evaluation.n_zero_tokens == 2 and evaluation.n_tokens == 4
    assert evaluation.log_lik == -np.inf and evaluation.perplexity == np.inf
    with pytest.warns(ZeroProbabilityWarning) as through_the_result:
        assert result.perplexity(heldout) == np.inf
    assert [warning.filename for warning in through_the_result] == [__file__]  # this file's line, not the library's
    # An explicit floor scores them at the floor: the number then depends on it, visibly.
    with pytest.warns(ZeroProbabilityWarning, match="scored at floor=1e-06"):
        floored = result.perplexity(heldout, floor=1e-6)
    conditional = predictive_matrix(result.model, result.params)
    positive = float(2 * np.log(conditional[0, 0]))
    np.testing.assert_allclose(floored, np.exp(-(positive + 2 * np.log(1e-6)) / 4), rtol=1e-6)


def test_perplexity_matches_the_dense_predictive_when_no_token_has_probability_zero(recwarn):
    train, heldout = _blocks()
    result = _fit(Aspect(3, prior_count=0.5), train)
    conditional = predictive_matrix(result.model, result.params)
    dense = heldout.to_dense()
    expected = np.exp(-np.sum(dense[dense > 0] * np.log(conditional[dense > 0])) / heldout.total)
    np.testing.assert_allclose(perplexity(result.model, result.params, heldout), expected, rtol=1e-6)
    np.testing.assert_allclose(result.perplexity(heldout), expected, rtol=1e-5)
    assert not [warning for warning in recwarn if warning.category is ZeroProbabilityWarning]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_map_em_gives_every_heldout_token_positive_probability(name):
    train, heldout = _blocks()
    model = MODELS[name](1.0)
    result = _fit(model, train)
    conditional = predictive_matrix(model, result.params)  # P(y|x) in the data's orientation
    assert np.all(conditional > 0)
    np.testing.assert_allclose(conditional.sum(axis=1), 1.0, rtol=1e-5)
    evaluation = heldout_evaluation(model, result.params, heldout)
    assert evaluation.n_zero_tokens == 0 and np.isfinite(evaluation.perplexity)


def test_aspect_map_m_step_adds_the_pseudo_counts_to_the_expected_counts():
    train, _ = _blocks()
    arrays = train.to_arrays()
    maximum_likelihood, pseudo = Aspect(3), Aspect(3, prior_count=0.7)
    params = maximum_likelihood.init_params(jax.random.key(1), arrays)
    ml_step, _ = maximum_likelihood.em_step(params, arrays, 1.0)
    map_step, _ = pseudo.em_step(params, arrays, 1.0)
    # ML: P(c) = n(c) / N and P(y|c) = n(y, c) / n(c), so the expected counts are recoverable.
    class_mass = np.asarray(ml_step.class_prior, np.float64) * train.total
    col_counts = np.asarray(ml_step.col_given_class, np.float64) * class_mass
    np.testing.assert_allclose(map_step.class_prior, (class_mass + 0.7) / (train.total + 3 * 0.7), rtol=1e-5)
    np.testing.assert_allclose(map_step.col_given_class, (col_counts + 0.7) / (class_mass + train.n_cols * 0.7),
                               rtol=1e-5)


@pytest.mark.parametrize("floor", [0.0, 1.5, -1e-3])
def test_bad_floor(floor):
    train, heldout = _blocks()
    result = _fit(Aspect(2), train)
    with pytest.raises(ValueError, match="^floor"):
        result.perplexity(heldout, floor=floor)


@pytest.mark.parametrize("build", [lambda: Aspect(2, prior_count=-1.0), lambda: OneSided(2, prior_count=-0.1),
                                   lambda: TwoSided(2, prior_count=-1), lambda: ClusterAbstraction(depth=1, prior_count=-1)])
def test_negative_prior_count_is_refused(build):
    with pytest.raises(ValueError, match="^prior_count"):
        build()


def _tiny_probability_cells():
    """Float32 factors of four held-out cells (K = 4):

    (0, 0) P = 1e-20·1e-15 = 1e-35, positive but below the kernels' 1e-30 floor after the row-max
    normalisation; (0, 1) P = 0, the classes of R_0 and C_1 do not overlap; (1, 0) P = 1e-40·1e-15,
    through a subnormal float32 factor, which XLA on the CPU flushes to 0; (1, 2) P = 0.5, an
    ordinary cell.
    """
    row_factors = np.array([[1.0, 1e-20, 0.0, 0.0], [0.0, 1e-40, 0.0, 1.0]], np.float32)
    col_factors = np.array([[0.0, 1e-15, 0.5, 0.0], [0.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5]], np.float32)
    counts = np.zeros((2, 3))
    counts[0, 0], counts[0, 1], counts[1, 0], counts[1, 2] = 2, 1, 3, 4
    return row_factors, col_factors, CoOccurrence.from_dense(counts)


def test_fit_and_evaluation_count_the_same_tokens_of_probability_zero():
    # The float32 in-fit validation (kernel + split_zero_cells) and the float64 held-out evaluation
    # use one definition of probability 0 (zero_probability): 1 + 3 tokens here. Before, the fit
    # counted every cell below the kernels' 1e-30 floor (the 1e-35 cell too, 6 tokens) and the
    # evaluation every P <= 0 in float64 (not the flushed subnormal, 1 token).
    row_factors, col_factors, heldout = _tiny_probability_cells()
    arrays = heldout.to_arrays(np.float32)
    kernel = conditional_log_lik(row_factors, col_factors, arrays)
    log_lik, n_zero = split_zero_cells(kernel, row_factors, col_factors, arrays)
    # The same in chunks of 3 cells and batches of 1 floored cell.
    assert split_zero_cells(kernel, row_factors, col_factors, arrays, chunk_cells=3, batch_cells=1) == pytest.approx(
        (float(log_lik), float(n_zero)))
    with pytest.warns(ZeroProbabilityWarning, match=r"^4 of 10 held-out tokens"):
        evaluation = heldout_from_factors(row_factors, col_factors, heldout)
    assert float(n_zero) == evaluation.n_zero_tokens == 4
    # The tiny positive cell is scored at its exact log-probability, not at the floor.
    expected = 2 * np.log(1e-35) + 4 * np.log(0.5)
    np.testing.assert_allclose(float(log_lik), expected, rtol=1e-5)
    with pytest.warns(ZeroProbabilityWarning):
        floored = heldout_from_factors(row_factors, col_factors, heldout, floor=1e-6)
    np.testing.assert_allclose(floored.log_lik, 2 * np.log(1e-6) + 4 * np.log(0.5) + 4 * np.log(1e-6), rtol=1e-6)
    # With a floor the in-fit score is the evaluation's: every token at max(P, floor), the tiny one too.
    log_lik, n_zero = split_zero_cells(kernel, row_factors, col_factors, arrays, floor=1e-6)
    np.testing.assert_allclose(float(log_lik), floored.log_lik, rtol=1e-6)
    assert float(n_zero) == 4
    assert list(zero_probability(row_factors[[0, 0, 1, 1]], col_factors[[0, 1, 0, 2]], np.float32)) == [
        False, True, True, False]


def test_float64_evaluation_scores_products_that_underflow_in_log_space():
    # Float64 factors whose products underflow float64 are positive, not 0.
    row_factors = np.array([[1e-200, 1.0]])
    col_factors = np.array([[1e-200, 0.0]])
    evaluation = heldout_from_factors(row_factors, col_factors, CoOccurrence.from_dense(np.array([[2.0]])))
    assert evaluation.n_zero_tokens == 0
    np.testing.assert_allclose(evaluation.log_lik, 2 * np.log(1e-200) * 2, rtol=1e-12)


def test_a_fit_with_a_floor_validates_with_the_perplexity_its_result_reports():
    """tempered_em(..., floor=) scores validation tokens as result.perplexity(valid, floor=) does, at
    max(P(y|x), floor); until 2026-12-07 the fit floored only tokens of probability 0 (here 65.25
    in the one-sided fit's history against 64.85 from its result)."""
    rng = np.random.default_rng(0)  # documents mixing a root, a half and a quarter of 120 words
    root = rng.dirichlet(np.ones(120))
    halves = [np.r_[rng.dirichlet(np.ones(60)), np.zeros(60)], np.r_[np.zeros(60), rng.dirichlet(np.ones(60))]]
    leaves = [np.r_[np.zeros(30 * k), rng.dirichlet(np.ones(30)), np.zeros(90 - 30 * k)] for k in range(4)]
    counts = np.array([rng.multinomial(60, w[0] * root + w[1] * halves[k // 2] + w[2] * leaves[k])
                       for k, w in zip(rng.integers(0, 4, 160), rng.dirichlet([1, 2, 3], 160))])
    train, valid = CoOccurrence.from_dense(counts).split_tokens([0.8, 0.2], rng=0)
    for model in (OneSided(4), Aspect(4)):
        result = tempered_em(model, train, key=jax.random.key(0), valid=valid, floor=1e-6, schedule=FixedBeta(1.0),
                             max_iter=200)
        predictions = np.asarray(predictive_matrix(result.model, result.params))[valid.to_dense() > 0]
        assert ((predictions > 0) & (predictions < 1e-6)).any()  # tokens the two definitions score apart
        np.testing.assert_allclose(result.history["valid_perplexity"][result.best_iteration],
                                   result.perplexity(valid, floor=1e-6), rtol=1e-5)


def test_one_sided_validation_counts_what_the_evaluation_counts():
    # Through a model: the EM driver's validation count equals the evaluation's count on the same tokens.
    train, heldout = _blocks()
    result = _fit(OneSided(3), train)
    arrays = result.model.prepare(heldout)
    _, n_zero = result.model.heldout_log_lik_and_zeros(result.params, arrays)
    with pytest.warns(ZeroProbabilityWarning):
        evaluation = heldout_evaluation(result.model, result.params, heldout)
    assert float(n_zero) == evaluation.n_zero_tokens == 2


def test_parameters_of_another_fit_or_a_fit_result_are_refused_naming_params():
    from inference.em import perplexity as perplexity_of
    from zoo.dyadic.cluster_abstraction import tree_text

    train, _ = _blocks()
    fits = {name: _fit(make(0.1), train) for name, make in MODELS.items()}
    for name, fit in fits.items():
        with pytest.raises(TypeError, match=r"^params: got a fit result \(EMResult\); pass its parameters"):
            perplexity(fit.model, fit, train)
        other = fits["aspect" if name != "aspect" else "two_sided"]
        with pytest.raises(TypeError, match="^params: expected .*Params \\(a fit's result.params\\), got"):
            perplexity(fit.model, other.params, train)
        assert np.isfinite(perplexity(fit.model, fit.params, train))
    with pytest.raises(ValueError, match=r"^params.class_prior: shape \(3,\) does not fit Aspect\(n_classes=4"):
        Aspect(4).fold_in(fits["aspect"].params, train)
    # Fold-in takes the result too (it checks the new rows' column names against it).
    np.testing.assert_array_equal(np.asarray(Aspect(3).fold_in(fits["aspect"], train)),
                                  np.asarray(Aspect(3).fold_in(fits["aspect"].params, train)))
    cam = fits["cam"]
    with pytest.raises(TypeError, match="^params: got a fit result"):
        tree_text(cam.model, cam)
    with pytest.raises(ValueError, match="^params.cluster_prior: shape"):
        tree_text(ClusterAbstraction(depth=3), cam.params)
    for total in (0, -5):
        with pytest.raises(ValueError, match="^total_count: must be in"):
            perplexity_of(-100.0, total)
