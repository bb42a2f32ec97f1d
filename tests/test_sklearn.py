"""scikit-learn estimators: the estimator checks, equality with the core driver, fold-in, scores.

The full ``parametrize_with_checks`` run fits every estimator on about fifteen data shapes, and
each new shape compiles the EM loop once (seconds on a CPU), so it is marked slow; the default
run keeps scikit-learn's API checks (``legacy=False``) for the aspect and Gaussian-mixture
estimators, which share all their machinery with the others.
"""

import pickle
import warnings

import jax
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture as SklearnGaussianMixture
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from inference.diagnostics import MixingWarning
from inference.em import ClassesAlikeWarning, tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM, anneal_up
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.predictive import ZeroProbabilityWarning
from zoo.finite_mixture import GaussianMixture
from zoo.sklearn import (
    ESTIMATORS,
    AspectEstimator,
    ClusterAbstractionEstimator,
    DPMixtureEstimator,
    GaussianMixtureEstimator,
    OneSidedEstimator,
    SupervisedDPEstimator,
    TwoSidedEstimator,
    completion_scorer,
    expected_failed_checks,
    jax_key,
    make_schedule,
)


def _checked_instances():
    """One small, quick instance per estimator (fixed seed, few iterations)."""
    instances = []
    for estimator_type in ESTIMATORS.values():
        estimator = estimator_type(**estimator_type._classes_argument(2), max_iter=5, random_state=0)
        if "backend" in estimator.get_params():
            estimator.set_params(backend="xla")  # no numba compilation in the checks
        if isinstance(estimator, GaussianMixtureEstimator):
            estimator.set_params(n_classes=3, max_iter=30)  # check_clustering wants ARI > 0.4 on 3 blobs
        instances.append(estimator)
    return instances


# The estimators share their machinery (EMEstimator); the default run checks the API with one count
# model and the feature model, the slow run checks everything for every estimator.
@parametrize_with_checks([estimator for estimator in _checked_instances()
                          if isinstance(estimator, (AspectEstimator, GaussianMixtureEstimator))],
                         legacy=False, expected_failed_checks=expected_failed_checks)
def test_sklearn_api_checks(estimator, check):
    check(estimator)


# A short Gibbs run: the checks test the interface, not the posterior.
DP_CHECKED = DPMixtureEstimator(n_chains=1, n_warmup=20, n_draws=20, max_clusters=8, random_state=0)


SCDP_CHECKED = SupervisedDPEstimator(n_chains=1, n_warmup=5, n_draws=10, random_state=0)


@pytest.mark.slow
@parametrize_with_checks(_checked_instances() + [DP_CHECKED, SCDP_CHECKED],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_all_checks(estimator, check):
    check(estimator)


def test_supervised_clustering_says_which_checks_cannot_apply_and_passes_the_others():
    # scikit-learn's checks label every row of y, which SCDP refuses ("no row to cluster"): those are
    # listed with the reason (none were: 30 of 47 failed), and a missing y is refused in scikit-learn's words.
    from sklearn.utils.estimator_checks import check_estimator, check_requires_y_none

    check_requires_y_none("SupervisedDPEstimator", clone(SCDP_CHECKED))
    assert "check_fit_idempotent" in expected_failed_checks(SCDP_CHECKED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(clone(SCDP_CHECKED), on_fail=None, legacy=False,
                                  expected_failed_checks=expected_failed_checks(SCDP_CHECKED))
    assert [result["check_name"] for result in results if result["status"] == "failed"] == []


def test_every_estimator_is_checked():
    assert {type(estimator) for estimator in _checked_instances()} == set(ESTIMATORS.values())


# ----------------------------------------------------------------------------- data
def _topic_counts(seed=0, n_rows=40, n_cols=12, n_classes=3, length=30):
    """Counts from an aspect model with well-separated classes."""
    rng = np.random.default_rng(seed)
    col_given_class = rng.dirichlet(np.full(n_cols, 0.2), size=n_classes)
    mixing = rng.dirichlet(np.full(n_classes, 0.3), size=n_rows)
    return np.stack([rng.multinomial(length, mixing[i] @ col_given_class) for i in range(n_rows)])


COUNTS = _topic_counts()
# One iteration cap and tolerance throughout: both are static in the compiled EM loop, so equal
# settings on equal shapes reuse one compilation. The XLA backend avoids numba compilation here;
# tests/test_aspect.py checks that both backends agree.
FIT = {"max_iter": 60, "random_state": 7, "backend": "xla"}


@pytest.fixture(scope="module")
def fitted_aspect():
    return AspectEstimator(n_classes=3, **FIT).fit(COUNTS)


# ----------------------------------------------------------------------------- the aspect estimator
def test_aspect_estimator_equals_tempered_em_with_the_split_key(fitted_aspect):
    _, key_fit = jax.random.split(jax.random.key(FIT["random_state"]))
    direct = tempered_em(Aspect(3, backend="xla"), CoOccurrence.from_dense(COUNTS), key=key_fit,
                         max_iter=FIT["max_iter"])
    for fitted, expected in zip(fitted_aspect.result_.params, direct.params):
        np.testing.assert_array_equal(np.asarray(fitted), np.asarray(expected))
    assert fitted_aspect.n_iter_ == direct.n_iter
    np.testing.assert_array_equal(fitted_aspect.components_, np.asarray(direct.params.col_given_class).T)


def test_sparse_and_dense_input_give_the_same_fit(fitted_aspect):
    for matrix in (sp.csr_matrix(COUNTS), sp.csc_matrix(COUNTS), sp.coo_array(COUNTS)):
        fitted = AspectEstimator(n_classes=3, **FIT).fit(matrix)
        np.testing.assert_array_equal(np.asarray(fitted.result_.params.col_given_class),
                                      np.asarray(fitted_aspect.result_.params.col_given_class))
        np.testing.assert_array_equal(fitted.transform(matrix), fitted_aspect.transform(COUNTS))


def _row_log_lik(mixing, col_given_class, counts):
    return np.sum(counts * np.log(np.maximum(mixing @ col_given_class.T, 1e-300)), axis=1)


def test_transform_folds_in_rows_by_maximum_likelihood(fitted_aspect):
    # Fold-in maximises Σ_k n(x, y_k) log Σ_c P(c|x) P(y_k|c) over P(c|x) with P(y|c) fixed, so it
    # does at least as well as the fitted P(c|x) on the training rows, and stays close to it.
    posterior = fitted_aspect.transform(COUNTS)
    col_given_class = np.asarray(fitted_aspect.result_.params.col_given_class, np.float64)
    fitted = np.asarray(fitted_aspect.result_.params.class_given_row(), np.float64)
    folded, reference = _row_log_lik(posterior, col_given_class, COUNTS), _row_log_lik(fitted, col_given_class, COUNTS)
    assert np.all(folded >= reference - 1e-3 * np.abs(reference))
    np.testing.assert_allclose(posterior, fitted, atol=0.05)
    np.testing.assert_allclose(posterior.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(fitted_aspect.predict(COUNTS), np.argmax(posterior, axis=1))


def test_score_is_minus_log_perplexity_of_the_folded_in_rows(fitted_aspect):
    test = _topic_counts(seed=5, n_rows=10)
    model, params = fitted_aspect.result_.model, fitted_aspect.result_.params
    test_data = CoOccurrence.from_dense(test)
    mixing = model.fold_in(params, test_data, n_iter=fitted_aspect.fold_in_iter, beta=fitted_aspect.beta_)
    expected = model.fold_in_heldout_log_lik(params, mixing, test_data) / test_data.total
    assert fitted_aspect.score(test) == pytest.approx(expected, rel=1e-5)
    assert fitted_aspect.perplexity(test) == pytest.approx(np.exp(-expected), rel=1e-5)


def test_rows_without_counts_get_the_class_prior(fitted_aspect):
    prior = np.asarray(fitted_aspect.result_.params.class_prior)
    zeros = np.zeros((2, COUNTS.shape[1]))
    np.testing.assert_allclose(fitted_aspect.transform(zeros), np.tile(prior, (2, 1)), rtol=1e-6)
    mixed = np.vstack([COUNTS[:39], zeros[:1]])
    np.testing.assert_allclose(fitted_aspect.transform(mixed)[39], prior, rtol=1e-6)
    with pytest.raises(ValueError, match="^X: contains no positive counts"):
        fitted_aspect.score(zeros)


COUNT_ESTIMATORS = [AspectEstimator(2), OneSidedEstimator(2), TwoSidedEstimator(2, n_col_classes=2),
                    ClusterAbstractionEstimator(1)]


@pytest.mark.parametrize("estimator", COUNT_ESTIMATORS, ids=lambda estimator: type(estimator).__name__)
def test_score_reports_tokens_of_probability_zero_instead_of_flooring_them(estimator):
    """A word never seen in training has P(y|x) = 0 under maximum likelihood: score is -inf and
    perplexity inf, with a warning that counts the tokens, unless floor= is set; MAP-EM removes them."""
    train = COUNTS.copy()
    train[:, 0] = 0
    test = _topic_counts(seed=5, n_rows=10)
    test[:3, 0] += 2
    n_zero = float(test[:, 0].sum())
    settings = dict(max_iter=30, random_state=0, backend="xla")
    fitted = clone(estimator).set_params(**settings).fit(train)
    with pytest.warns(ZeroProbabilityWarning, match=f"^{n_zero:g} of {test.sum():g} held-out tokens") as scored:
        assert fitted.score(test) == -np.inf
    # The advice is the estimator's own: its floor hyperparameter (score and perplexity take none).
    assert r"set the estimator's floor (estimator.set_params(floor=1e-6))" in str(scored[0].message)
    assert "the estimator's prior_count > 0 (MAP-EM)" in str(scored[0].message)
    with pytest.warns(ZeroProbabilityWarning) as perplexity:
        assert fitted.perplexity(test) == np.inf
    with pytest.warns(ZeroProbabilityWarning) as evaluated:
        evaluation = fitted.heldout_evaluation(test)
    # Each warning points at the line above that called the estimator (shown once per line and data).
    assert {warning.filename for record in (scored, perplexity, evaluated) for warning in record} == {__file__}
    assert evaluation.n_zero_tokens == n_zero and evaluation.n_tokens == test.sum() and evaluation.floor is None
    # An explicit floor: every token at max(P(y|x), floor), the same fit otherwise.
    floored = clone(fitted).set_params(floor=1e-12).fit(train)
    with pytest.warns(ZeroProbabilityWarning, match="scored at floor=1e-12"):
        floored_score = floored.score(test)
    rest = test.copy()
    rest[:, 0] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no token of probability 0 is left
        rest_log_lik = fitted.heldout_evaluation(rest).log_lik
    # Folding in ``test`` and ``rest`` gives nearly the same rows: the unseen word carries little information
    # (none where the classes are alike, as the two-sided model's random start here was before its
    # seeded fallback, exactly equal then; 1.5e-4 apart with the classes it keeps now).
    expected = (rest_log_lik + n_zero * np.log(1e-12)) / test.sum()
    assert floored_score == pytest.approx(expected, rel=1e-3)
    # MAP-EM: no prediction is 0, no warning.
    smoothed = clone(fitted).set_params(prior_count=0.5).fit(train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(smoothed.score(test)) and smoothed.heldout_evaluation(test).n_zero_tokens == 0
    assert smoothed.result_.model.prior_count == 0.5


def test_bad_floor_and_prior_count():
    with pytest.raises(ValueError, match="^floor"):
        OneSidedEstimator(2, floor=2.0).fit(COUNTS)
    with pytest.raises(ValueError, match="^prior_count"):
        AspectEstimator(2, prior_count=-1.0).fit(COUNTS)
    with pytest.raises(TypeError, match="^X: .* heldout_evaluation is for counts"):
        GaussianMixtureEstimator(2, max_iter=5, random_state=0).fit(np.random.default_rng(0).normal(size=(20, 2))) \
            .heldout_evaluation(np.zeros((2, 2)))


def test_tempered_schedule_holds_out_tokens_and_chooses_beta():
    settings = dict(n_classes=6, schedule="tempered", valid_fraction=0.2, max_iter=300, random_state=3, backend="xla")
    estimator = AspectEstimator(**settings).fit(COUNTS)
    history = estimator.result_.history
    assert np.isfinite(history["valid_perplexity"]).all()
    assert 0.0 < estimator.beta_ <= 1.0
    assert history["beta"].min() < 1.0  # tempered EM lowered β at least once
    again = AspectEstimator(**settings).fit(COUNTS)
    np.testing.assert_array_equal(again.result_.history["valid_perplexity"], history["valid_perplexity"])


@pytest.mark.parametrize("schedule, expected", [
    ("em", FixedBeta(1.0)), ("tempered", TemperedEM()), ("annealing", DeterministicAnnealing()),
    (FixedBeta(0.5), FixedBeta(0.5)),
])
def test_make_schedule(schedule, expected):
    assert make_schedule(schedule) == expected


def test_auto_schedule_is_the_models_own_on_a_validation_split():
    assert make_schedule("auto", OneSided(3)) == anneal_up() and make_schedule("auto", Aspect(3)) == TemperedEM()
    estimator = OneSidedEstimator(3, schedule="auto", max_iter=300, random_state=0, backend="xla").fit(COUNTS)
    history = estimator.result_.history
    assert np.isfinite(history["valid_perplexity"]).all()  # tokens held out, which annealing does not need
    # Annealed up from β = 0.01 these rows' classes end alike (the collapse of anneal_up's docstring), so
    # the fit ran the schedule's fallback, tempered EM from β = 1, and kept it: better on the validation tokens.
    assert estimator.result_.schedule == anneal_up().fallback == TemperedEM()
    assert history["beta"][0] == 1.0
    annealed = OneSidedEstimator(3, schedule=DeterministicAnnealing(0.01, 1.5, 25), max_iter=300, random_state=0,
                                 backend="xla")
    with pytest.warns(ClassesAlikeWarning):
        history = annealed.fit(COUNTS).result_.history
    assert history["beta"][0] == pytest.approx(0.01)


def test_warm_start_continues_from_the_previous_parameters(fitted_aspect):
    warm = AspectEstimator(n_classes=3, warm_start=True, **FIT).fit(COUNTS)
    first_log_lik = warm.result_.history["log_lik"]
    warm.fit(COUNTS)
    # The second fit starts where the first stopped: its first log-likelihood is that of the
    # first fit's final parameters, above every value of the first fit (EM is monotone at β = 1).
    assert warm.result_.history["log_lik"][0] >= first_log_lik.max() - 1e-6 * abs(first_log_lik.max())
    with pytest.raises(ValueError, match="^warm_start:"):
        warm.fit(COUNTS[:, :-1])


def test_a_spent_time_budget_warns_as_max_iter_does():
    # It returned the iterations so far without a word (a max_iter stop gave a ConvergenceWarning).
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"^AspectEstimator: EM stopped after \d+ iterations \(time_budget="
                                                r"1e-09 s ran out\) before converging .*warm_start=True"):
        estimator = AspectEstimator(n_classes=3, time_budget=1e-9, **FIT).fit(COUNTS)
    assert estimator.result_.stopped_by == "time_budget"


def test_the_number_of_classes_is_chosen_by_completion_not_by_the_fold_in_score():
    # score folds P(c|x) in from the tokens it scores, so it rises with K and a grid search on it
    # picks the largest; completion_score scores tokens the fold-in did not see and peaks at the
    # planted 3 classes.
    counts = _topic_counts(seed=0, n_rows=260, n_cols=30, n_classes=3, length=40)
    split = [(np.arange(200), np.arange(200, 260))]
    grid = {"n_classes": [3, 12, 48]}
    estimator = AspectEstimator(max_iter=100, floor=1e-6, random_state=0, backend="xla")
    by_score = GridSearchCV(estimator, grid, cv=split).fit(counts)
    by_completion = GridSearchCV(estimator, grid, cv=split, scoring=completion_scorer).fit(counts)
    assert by_score.best_params_ == {"n_classes": 48} and by_completion.best_params_ == {"n_classes": 3}
    completion = by_completion.cv_results_["mean_test_score"]
    assert completion[0] > completion[1] > completion[2]
    fitted = by_completion.best_estimator_
    assert fitted.completion_score(counts[200:]) == fitted.completion_score(counts[200:], rng=0)
    assert fitted.completion_score(counts[200:], rng=1) != fitted.completion_score(counts[200:], rng=0)
    with pytest.raises(ValueError, match=r"^fraction"):
        fitted.completion_score(counts[200:], fraction=1.0)
    with pytest.raises(ValueError, match=r"^X: too few tokens to split"):
        fitted.completion_score(np.eye(1, 30) * 1)
    # A pipeline is scored by its last step on what the steps before give it (it has no
    # completion_score of its own: every candidate scored NaN in a search).
    from sklearn.preprocessing import FunctionTransformer

    pipeline = make_pipeline(FunctionTransformer(lambda x: x), clone(fitted)).fit(counts[:200])
    assert completion_scorer(pipeline, counts[200:]) == pipeline[-1].completion_score(counts[200:])
    with pytest.raises(TypeError, match="^estimator: completion_scorer scores a zoo count estimator"):
        completion_scorer(make_pipeline(FunctionTransformer()), counts[200:])


def test_grid_search_pipeline_clone_and_pickle(fitted_aspect):
    everything = np.arange(COUNTS.shape[0])
    search = GridSearchCV(AspectEstimator(**FIT), {"n_classes": [3]}, cv=[(everything, everything)])
    search.fit(COUNTS)
    assert search.best_score_ == pytest.approx(fitted_aspect.score(COUNTS), rel=1e-6)
    pipeline = make_pipeline(AspectEstimator(n_classes=3, **FIT)).fit(COUNTS)
    restored = pickle.loads(pickle.dumps(pipeline))
    np.testing.assert_array_equal(restored.transform(COUNTS), fitted_aspect.transform(COUNTS))
    assert clone(pipeline[0]).get_params() == pipeline[0].get_params()


def test_pandas_output_names_the_classes():
    pandas = pytest.importorskip("pandas")
    estimator = AspectEstimator(n_classes=3, **FIT).set_output(transform="pandas")
    frame = estimator.fit_transform(COUNTS)
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == ["aspectestimator0", "aspectestimator1", "aspectestimator2"]


def test_counts_must_be_non_negative_and_finite():
    bad = COUNTS.astype(float)
    bad[0, 0] = -1.0
    with pytest.raises(ValueError, match="^X: Negative values in data passed to AspectEstimator"):
        AspectEstimator(n_classes=2, backend="xla").fit(bad)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="^X: .*NaN"):
        AspectEstimator(n_classes=2, backend="xla").fit(bad)
    with pytest.raises(ValueError, match="^X: contains no positive counts"):
        AspectEstimator(n_classes=2, backend="xla").fit(np.zeros((3, 4)))


@pytest.mark.parametrize("params, message", [
    ({"n_classes": 0}, "^n_classes: must be >= 1"),
    ({"schedule": "fast"}, "^schedule: must be one of"),
    ({"valid_fraction": 1.0}, "^valid_fraction: must be in"),
    ({"max_iter": 0}, "^max_iter: must be >= 1"),
    ({"tol": -1.0}, "^tol: must be in"),
    ({"random_state": -3}, "^random_state: must be >= 0"),
    ({"update": "sometimes"}, "^update: must be one of"),
    ({"fold_in_iter": 0}, "^fold_in_iter: must be >= 1"),
    ({"warm_start": "yes"}, "^warm_start: expected True or False"),
])
def test_bad_hyperparameters_are_named(params, message):
    with pytest.raises((ValueError, TypeError), match=message):
        AspectEstimator(**params).fit(COUNTS)


def test_two_sided_estimator_names_its_own_argument():
    # TwoSided calls the row clusters n_row_classes; the estimator's argument is n_classes.
    with pytest.raises(ValueError, match="^n_classes: must be >= 1"):
        TwoSidedEstimator(n_classes=0).fit(COUNTS)


def test_tempered_split_needs_tokens_on_both_sides():
    with pytest.raises(ValueError, match="^valid_fraction:"):
        AspectEstimator(n_classes=1, schedule="tempered", valid_fraction=0.01, random_state=0).fit([[1.0, 0.0]])


# ----------------------------------------------------------------------------- the clustering models
def test_one_sided_estimator_equals_the_model_and_assigns_new_rows():
    estimator = OneSidedEstimator(n_classes=3, **FIT).fit(COUNTS)
    _, key_fit = jax.random.split(jax.random.key(FIT["random_state"]))
    model = OneSided(3, backend="xla")
    direct = tempered_em(model, CoOccurrence.from_dense(COUNTS), key=key_fit, max_iter=FIT["max_iter"])
    for fitted, expected in zip(estimator.result_.params, direct.params):
        np.testing.assert_array_equal(np.asarray(fitted), np.asarray(expected))
    data = CoOccurrence.from_dense(COUNTS)
    expected = model.posterior(direct.params, model.prepare(data))  # one E-step with P(c), P(y|c) fixed
    np.testing.assert_allclose(estimator.transform(COUNTS), np.asarray(expected), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(estimator.labels_, estimator.predict(COUNTS))
    np.testing.assert_array_equal(estimator.components_, np.asarray(direct.params.feature_given_class).T)
    perplexity = np.exp(-direct.heldout_log_likelihood(data) / data.total)
    assert estimator.perplexity(COUNTS) == pytest.approx(perplexity, rel=1e-4)


def test_two_sided_new_rows_follow_eq_10_with_the_columns_fixed():
    estimator = TwoSidedEstimator(n_classes=3, n_col_classes=2, **FIT).fit(COUNTS)
    model, params = estimator.result_.model, estimator.result_.params
    arrays = model.prepare(CoOccurrence.from_dense(COUNTS))
    # The first stage of an EM sweep is eq. 10 for the rows with the stored columns and c_νμ.
    swept, _ = model.em_step(params, arrays, estimator.beta_)
    np.testing.assert_allclose(estimator.transform(COUNTS), np.asarray(swept.row_posterior), atol=1e-4)
    assert estimator.column_labels_.shape == (COUNTS.shape[1],)
    assert np.isfinite(estimator.score(COUNTS))
    with pytest.raises(ValueError, match="^X: 12 feature"):
        TwoSidedEstimator(n_classes=2, n_col_classes=13).fit(COUNTS)


def test_cluster_abstraction_folds_in_new_rows():
    estimator = ClusterAbstractionEstimator(depth=1, **FIT).fit(COUNTS)
    posterior = estimator.transform(COUNTS)
    assert posterior.shape == (COUNTS.shape[0], 2)
    np.testing.assert_allclose(posterior.sum(axis=1), 1.0, rtol=1e-5)
    fitted = np.asarray(estimator.result_.params.cluster_posterior)
    assert np.mean(posterior.argmax(axis=1) == fitted.argmax(axis=1)) >= 0.9
    np.testing.assert_array_equal(estimator.labels_, estimator.predict(COUNTS))
    assert np.isfinite(estimator.score(COUNTS[:10]))
    assert ClusterAbstractionEstimator._classes_argument(8) == {"depth": 3}
    assert ClusterAbstractionEstimator._classes_argument(6) == {"n_leaves": 6}  # a balanced tree
    with pytest.raises(ValueError, match="^n_classes: .* at least 2"):
        ClusterAbstractionEstimator._classes_argument(1)
    three = ClusterAbstractionEstimator(n_leaves=3, **FIT).fit(COUNTS)
    assert three.transform(COUNTS).shape == (COUNTS.shape[0], 3)
    assert ClusterAbstractionEstimator()._build_model().n_classes == 4  # depth 2 when neither is given


# ----------------------------------------------------------------------------- random_state
def test_jax_key_from_random_state():
    np.testing.assert_array_equal(jax.random.key_data(jax_key(5)), jax.random.key_data(jax.random.key(5)))
    key = jax.random.key(9)
    assert jax_key(key) is key
    first = jax.random.key_data(jax_key(np.random.RandomState(0)))
    np.testing.assert_array_equal(first, jax.random.key_data(jax_key(np.random.RandomState(0))))
    jax_key(None)
    jax_key(np.random.default_rng(0))
    with pytest.raises(TypeError, match="^random_state:"):
        jax_key("seed")
    with pytest.raises(TypeError, match="^random_state:"):
        jax_key(1.5)
    with pytest.raises(TypeError, match="^random_state:"):
        jax_key(jax.numpy.zeros(2))


# ----------------------------------------------------------------------------- the Gaussian mixture
def _blobs(seed=0, n_per_class=40):
    rng = np.random.default_rng(seed)
    centers = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])
    labels = np.repeat(np.arange(3), n_per_class)
    return centers[labels] + rng.normal(size=(labels.size, 2)) * np.array([1.0, 0.5]), labels


GMM_FIT = {"n_classes": 3, "n_restarts": 4, "max_iter": 300, "tol": 1e-8, "random_state": 0}


def test_gaussian_mixture_agrees_with_scikit_learn_and_the_core_driver():
    points, labels = _blobs()
    ours = GaussianMixtureEstimator(**GMM_FIT).fit(points)
    _, key_fit = jax.random.split(jax.random.key(0))
    direct = tempered_em(GaussianMixture(3), points, key=key_fit, n_restarts=4, max_iter=300, tol=1e-8)
    for fitted, expected in zip(ours.result_.params, direct.params):
        np.testing.assert_array_equal(np.asarray(fitted), np.asarray(expected))
    reference = SklearnGaussianMixture(3, covariance_type="diag", n_init=4, tol=1e-8, reg_covar=1e-9,
                                       random_state=0).fit(points)
    assert adjusted_rand_score(labels, ours.labels_) == 1.0
    order = np.argsort(ours.means_[:, 0])
    reference_order = np.argsort(reference.means_[:, 0])
    np.testing.assert_allclose(ours.means_[order], reference.means_[reference_order], atol=1e-3)
    np.testing.assert_allclose(ours.scales_[order] ** 2, reference.covariances_[reference_order], rtol=1e-3)
    np.testing.assert_allclose(ours.weights_[order], reference.weights_[reference_order], atol=1e-4)
    assert ours.score(points) == pytest.approx(reference.score(points), rel=1e-4)
    np.testing.assert_allclose(ours.transform(points)[:, order], reference.predict_proba(points)[:, reference_order],
                               atol=1e-4)
    # scikit-learn's GaussianMixture's names for the same: responsibilities and per-point log densities.
    np.testing.assert_array_equal(ours.predict_proba(points), ours.transform(points))
    np.testing.assert_allclose(ours.score_samples(points), reference.score_samples(points), rtol=1e-4)
    assert ours.score_samples(points).mean() == pytest.approx(ours.score(points), rel=1e-12)
    with pytest.raises(ValueError, match="^X: 2 sample"):
        GaussianMixtureEstimator(n_classes=3).fit(points[:2])


def test_gaussian_mixture_fits_features_far_from_zero_as_near_it():
    # Iris measured from an origin 10,000 away: E[x²] - μ² in float32 lost every variance to the floor,
    # and the fit put all points in one class, ARI 0, converged, without a word (scikit-learn: 0.76).
    from sklearn.datasets import load_iris

    points, labels = load_iris(return_X_y=True)
    near = GaussianMixtureEstimator(3, random_state=0, n_restarts=4).fit(points)
    far = GaussianMixtureEstimator(3, random_state=0, n_restarts=4).fit(points + 1e4)
    assert adjusted_rand_score(labels, far.labels_) == pytest.approx(adjusted_rand_score(labels, near.labels_))
    assert adjusted_rand_score(labels, far.labels_) > 0.7
    np.testing.assert_allclose(np.sort(far.scales_, axis=0), np.sort(near.scales_, axis=0), rtol=1e-2)
    assert far.score(points + 1e4) == pytest.approx(near.score(points), abs=1e-2)


def test_gaussian_mixture_tempered_holds_out_rows():
    points, labels = _blobs(2)
    estimator = GaussianMixtureEstimator(n_classes=3, schedule="tempered", valid_fraction=0.25, max_iter=200,
                                         random_state=0).fit(points)
    assert np.isfinite(estimator.result_.history["valid_perplexity"]).all()
    assert adjusted_rand_score(labels, estimator.predict(points)) > 0.9


# ----------------------------------------------------------------------------- the DP mixture
@pytest.fixture(scope="module")
def fitted_dp():
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(3), 12)
    points = np.array([[-2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])[labels] + 0.25 * rng.normal(size=(36, 2))
    return DPMixtureEstimator(n_chains=2, n_warmup=40, n_draws=40, max_clusters=8, random_state=0).fit(points), points, labels


def test_dp_mixture_finds_the_blobs(fitted_dp):
    estimator, points, labels = fitted_dp
    assert estimator.n_clusters_ == 3
    assert adjusted_rand_score(labels, estimator.labels_) == 1.0
    assert estimator.fit_.idata.posterior["assignments"].shape == (2, 40, points.shape[0])


def _normal_gamma_log_predictive(members, new_points):
    """Normal–Gamma(0, 1, 1, 1) per feature: the posterior predictive of a cluster is a Student-t
    with 2 a_n degrees of freedom, location m_n and scale² b_n (κ_n + 1) / (a_n κ_n)."""
    from scipy.stats import t as student_t

    count = members.shape[0]
    kappa, shape = 1.0 + count, 1.0 + 0.5 * count
    mean = members.sum(axis=0) / kappa
    centred = ((members - members.mean(axis=0)) ** 2).sum(axis=0) if count else 0.0
    sample_mean = members.mean(axis=0) if count else 0.0
    rate = 1.0 + 0.5 * (centred + count * sample_mean**2 / kappa)
    scale = np.sqrt(rate * (kappa + 1.0) / (shape * kappa))
    return student_t.logpdf(new_points, df=2.0 * shape, loc=mean, scale=scale).sum(axis=1)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # a few draws
def test_dp_mixture_names_the_draws_points_by_a_data_frames_index(fitted_dp):
    import pandas as pd

    _, points, _ = fitted_dp
    frame = pd.DataFrame(points, index=[f"row{index}" for index in range(36)], columns=["a", "b"])
    estimator = DPMixtureEstimator(n_chains=1, n_warmup=2, n_draws=3, random_state=0).fit(frame)
    assert estimator.fit_.idata.posterior["points"].values.tolist() == list(frame.index)


def test_dp_mixture_predictive_is_the_student_t_of_each_cluster(fitted_dp):
    estimator, points, _ = fitted_dp
    new_points = np.array([[0.1, -0.2], [3.0, 3.0], [-1.0, 0.5]])
    log_weights = []
    for members in [points[estimator.labels_ == k] for k in range(estimator.n_clusters_)] + [points[:0]]:
        log_weights.append(np.log(members.shape[0] or estimator.alpha_)
                           + _normal_gamma_log_predictive(members, new_points))
    log_weights = np.stack(log_weights, axis=1)
    expected = np.exp(log_weights - log_weights.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(estimator.transform(new_points), expected, rtol=1e-4, atol=1e-6)
    assert estimator.predict(new_points)[1] == estimator.n_clusters_  # far away: a new cluster
    # score averages the same predictive over every draw's partition and α (the posterior
    # predictive), not over the point estimate's alone.
    posterior = estimator.fit_.log_predictive_density(points, new_points)
    assert estimator.score(new_points) == pytest.approx(np.mean(posterior), rel=1e-12)
    draws = estimator.fit_.result.samples
    by_draw = []
    for labels, alpha in zip(draws["assignments"].reshape(-1, len(points)), draws["alpha"].ravel()):
        sizes = np.bincount(labels)
        weights = [np.log(sizes[k]) + _normal_gamma_log_predictive(points[labels == k], new_points)
                   for k in np.flatnonzero(sizes)]
        weights.append(np.log(alpha) + _normal_gamma_log_predictive(points[:0], new_points))  # a new cluster
        by_draw.append(np.logaddexp.reduce(np.stack(weights), axis=0) - np.log(len(points) + alpha))
    by_draw = np.stack(by_draw)
    np.testing.assert_allclose(posterior, np.log(np.mean(np.exp(by_draw), axis=0)), rtol=1e-4)


def test_dp_mixture_with_the_sub_cluster_sampler_finds_the_blobs(fitted_dp):
    import warnings

    collapsed, points, labels = fitted_dp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains
        estimator = DPMixtureEstimator(algorithm="subcluster", n_chains=2, n_warmup=40, n_draws=40, max_clusters=8,
                                       random_state=0).fit(points)
    assert estimator.n_clusters_ == 3 and adjusted_rand_score(labels, estimator.labels_) == 1.0
    # The same settings and key as the collapsed fit, another sampler: other draws.
    assert not np.array_equal(estimator.fit_.result.samples["log_joint"], collapsed.fit_.result.samples["log_joint"])


def test_dp_mixture_with_dm05s_cdp_components_finds_the_blobs(fitted_dp):
    # family="normal-known-precision": Gaussians of identity precision, Normal(0, 1) means (DM05 §7.1).
    import warnings

    _, points, labels = fitted_dp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains
        estimator = DPMixtureEstimator(family="normal-known-precision", n_chains=2, n_warmup=40, n_draws=40,
                                       max_clusters=8, random_state=0).fit(points)
    assert estimator._component_family(2).name == "normal_known_precision"
    assert estimator.n_clusters_ == 3 and adjusted_rand_score(labels, estimator.labels_) == 1.0
    assert estimator.predict(points[:3]).tolist() == estimator.labels_[:3].tolist()


def test_dp_mixture_time_budget_estimates_from_the_draws_finished(fitted_dp):
    # Ten draws per call: a budget spent in the first call keeps its ten draws, the same as those
    # of the full fit; spent in the warm-up, there is nothing to estimate from.
    import warnings

    from sklearn.exceptions import NotFittedError

    _, points, _ = fitted_dp
    options = dict(n_chains=2, n_warmup=0, n_draws=40, max_clusters=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ten draws do not mix
        cut = DPMixtureEstimator(time_budget=1e-9, **options).fit(points)
        full = DPMixtureEstimator(**options).fit(points)
    assert not cut.fit_.result.completed and cut.fit_.idata.posterior.sizes["draw"] == 10
    assert cut.fit_.result.stopped_by == "time_budget" and cut.fit_.idata.posterior.attrs["stopped_by"] == "time_budget"
    np.testing.assert_array_equal(cut.fit_.idata.posterior["assignments"],
                                  full.fit_.idata.posterior["assignments"][:, :10])
    assert cut.labels_.shape == (points.shape[0],)
    stopped = DPMixtureEstimator(time_budget=1e-9, n_chains=2, n_warmup=40, n_draws=40, random_state=0)
    with pytest.raises(ValueError, match="^time_budget: 1e-09 s ran out in the warm-up"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fit's own warning that it has no draws
        stopped.fit(points)
    with pytest.raises(NotFittedError):
        stopped.predict(points)


def test_dp_mixture_interrupted_in_its_warm_up_says_so_not_that_a_budget_ran_out(fitted_dp, monkeypatch):
    # Ctrl-C in the first call of sweeps (no time budget given): the error named "time_budget: None s".
    from sklearn.exceptions import NotFittedError

    import inference.chains

    _, points, _ = fitted_dp

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(inference.chains, "_run_calls_jit", interrupted)
    stopped = DPMixtureEstimator(n_chains=2, n_warmup=40, n_draws=40, random_state=0)
    with pytest.raises(KeyboardInterrupt, match=r"^DPMixtureEstimator.fit: stopped in the warm-up, before the first "
                                                r"draw; .*warm_start=True"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fit's own warning that it has no draws
        stopped.fit(points)
    with pytest.raises(NotFittedError):
        stopped.predict(points)
    # Ctrl-C while a budget is given, and spent by the time the call returns: still Ctrl-C (the
    # estimator told the two apart by the run's seconds, and named the budget).
    budgeted = DPMixtureEstimator(n_chains=2, n_warmup=40, n_draws=40, random_state=0, time_budget=1e-9)
    with pytest.raises(KeyboardInterrupt, match=r"^DPMixtureEstimator.fit: stopped in the warm-up"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        budgeted.fit(points)


def test_dp_mixture_until_mixed_stops_once_the_chains_mix(fitted_dp):
    import warnings

    from inference.diagnostics import mixes

    _, points, labels = fitted_dp
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)  # it ends mixing: no warning
        estimator = DPMixtureEstimator(n_chains=2, n_warmup=40, n_draws=100_000, max_clusters=8, random_state=0,
                                       until_mixed=True).fit(points)
    assert 200 <= estimator.fit_.result.n_draws < 100_000 and mixes(estimator.fit_.mixing)
    assert adjusted_rand_score(labels, estimator.labels_) == 1.0
    with pytest.raises(TypeError, match="^until_mixed: expected True or False"):
        DPMixtureEstimator(until_mixed="yes").fit(points)


def test_dp_mixture_warm_start_continues_the_chains_as_one_longer_fit(fitted_dp):
    # Two warm-started fits of 20 draws are the fit of 40 (same key, same settings); a fit whose
    # budget ran out in the warm-up is finished by the next warm-started one.
    import warnings

    full, points, _ = fitted_dp
    options = dict(n_chains=2, n_warmup=40, max_clusters=8, random_state=0, warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains
        warm = DPMixtureEstimator(n_draws=20, **options).fit(points)
        assert warm.fit_.idata.posterior.sizes["draw"] == 20
        warm.fit(points)
        stopped = DPMixtureEstimator(n_draws=40, time_budget=1e-9, **options)
        with pytest.raises(ValueError, match="warm_start=True to finish the warm-up"):
            stopped.fit(points)
        stopped.set_params(time_budget=None).fit(points)
    for estimator in (warm, stopped):
        np.testing.assert_array_equal(estimator.fit_.idata.posterior["assignments"],
                                      full.fit_.idata.posterior["assignments"])
        np.testing.assert_array_equal(estimator.labels_, full.labels_)
    # The fit's warnings give the estimator's way to continue, issued where the estimator was called.
    advice = r"estimator\.set_params\(warm_start=True, until_mixed=True\)\.fit\(X\) continues these chains"
    with pytest.warns(MixingWarning, match=advice) as caught:
        DPMixtureEstimator(n_draws=10, **options).fit(points)
    assert all(warning.filename == __file__ for warning in caught)
    # Also through scikit-learn's own code (it named sklearn/base.py and sklearn/pipeline.py until 2026-12-08).
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with pytest.warns(MixingWarning) as caught:
        DPMixtureEstimator(n_draws=10, **options).fit_predict(points)
        make_pipeline(StandardScaler(), DPMixtureEstimator(n_draws=10, **options)).fit(points)
    assert len(caught) >= 2 and all(warning.filename == __file__ for warning in caught), caught
    assert not any("fit.resume" in str(warning.message) for warning in caught)
    with pytest.raises(ValueError, match="^warm_start: the previous fit's chains were made with other n_chains, "
                                         "max_clusters; set warm_start=False"):
        warm.set_params(n_chains=3, max_clusters=9).fit(points)
    with pytest.raises(ValueError, match="^warm_start: data: not the data these chains were fitted to"):
        warm.set_params(n_chains=2, max_clusters=8).fit(points + 1.0)
    with pytest.raises(TypeError, match="^warm_start: expected True or False"):
        DPMixtureEstimator(warm_start="yes").fit(points)
    assert warm.fit_.idata.posterior.sizes["draw"] == 40  # the refused fits changed nothing


def test_dp_mixture_rejects_bad_settings():
    points, _ = _blobs(0, n_per_class=4)
    for params, message in [({"family": "poisson"}, "^family:"), ({"alpha_prior": (0.0, 1.0)}, "^alpha_prior:"),
                            ({"n_draws": 0}, "^n_draws:"), ({"loss": "l2"}, "^loss:"),
                            ({"time_budget": 0.0}, "^time_budget:"), ({"init": "spread"}, "^init: must be one of")]:
        with pytest.raises(ValueError, match=message):
            DPMixtureEstimator(**params).fit(points)
    with pytest.raises(ValueError, match="^X: binary features"):
        DPMixtureEstimator(family="beta-bernoulli").fit(points)


def _labelled_blobs():
    """Four tight groups in 2-D: two labelled (0 and 1), two to cluster (-1), ten rows each."""
    rng = np.random.default_rng(0)
    centres = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 4.0], [0.0, -4.0]])
    X = np.concatenate([centre + 0.3 * rng.normal(size=(10, 2)) for centre in centres])
    return X, np.repeat([0, 1, -1, -1], 10), np.repeat([0, 1, 2, 3], 10)


@pytest.fixture(scope="module")
def fitted_supervised():
    X, y, truth = _labelled_blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # 40 draws: ESS < 400
        estimator = SupervisedDPEstimator(n_chains=2, n_warmup=20, n_draws=40, random_state=0).fit(X, y)
    return estimator, X, y, truth


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 40 draws: ESS < 400
def test_supervised_dp_clusters_the_unlabelled_rows_as_the_core_model_does(fitted_supervised, tmp_path):
    from zoo.dirichlet.supervised import SupervisedDP
    from zoo.report import write_report

    estimator, X, y, truth = fitted_supervised
    labels = estimator.labels_
    np.testing.assert_array_equal(labels[:20], y[:20])  # the labelled rows keep their labels
    assert adjusted_rand_score(truth[20:], labels[20:]) == 1.0
    assert set(labels[20:]) == {2, 3} and labels[20] == 2  # new labels from max(y) + 1, in order of occurrence
    assert estimator.n_clusters_ == 2 and estimator.alpha_ > 0 and estimator.alpha_types_ > 0
    # The same chains as the core model's fit with the estimator's key.
    core = SupervisedDP(1).fit(X[:20], y[:20], X[20:], key=jax_key(0), n_chains=2, n_sweeps=60, n_warmup=20,
                               progress=False)
    np.testing.assert_array_equal(estimator.fit_.assignments, core.assignments)
    # The draws' points are X's rows (by position in X, not among the unlabelled rows).
    assert estimator.fit_.idata.posterior["points"].values.tolist() == list(range(20, 40))
    assert clone(estimator).get_params() == estimator.get_params()
    restored = pickle.loads(pickle.dumps(estimator))
    np.testing.assert_array_equal(restored.labels_, labels)
    page = write_report(tmp_path / "report.html", estimator).read_text()  # the chains' report
    assert "n_types" in page and "estimator.set_params(" in page and "fit.resume" not in page  # the estimator's advice


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # a few draws
def test_supervised_dp_names_the_draws_points_by_a_data_frames_index():
    import pandas as pd

    X, y, _ = _labelled_blobs()
    frame = pd.DataFrame(X, index=[f"row{index}" for index in range(40)], columns=["a", "b"])
    estimator = SupervisedDPEstimator(n_chains=1, n_warmup=2, n_draws=3, random_state=0).fit(frame, y)
    assert estimator.fit_.idata.posterior["points"].values.tolist() == [f"row{index}" for index in range(20, 40)]


def test_supervised_dp_warm_start_continues_the_chains_as_one_longer_fit(fitted_supervised):
    full, X, y, _ = fitted_supervised
    options = dict(n_chains=2, n_warmup=20, random_state=0, warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        warm = SupervisedDPEstimator(n_draws=20, **options).fit(X, y)
        warm.fit(X, y)
        stopped = SupervisedDPEstimator(n_draws=40, time_budget=1e-9, **options)
        with (pytest.raises(ValueError, match="warm_start=True to finish the warm-up"),
              pytest.warns(RuntimeWarning, match=r"continue it with estimator\.set_params\(warm_start=True, "
                                                 r"until_mixed=True\)\.fit\(X, y\)")):
            stopped.fit(X, y)
        assert not hasattr(stopped, "labels_")
        stopped.set_params(time_budget=None).fit(X, y)  # finishes the warm-up, then draws
    for estimator in (warm, stopped):
        np.testing.assert_array_equal(estimator.fit_.assignments, full.fit_.assignments)
        np.testing.assert_array_equal(estimator.labels_, full.labels_)
    # The fit's warnings name the estimator's way to continue, at the caller's line.
    with pytest.warns(MixingWarning, match=r"estimator\.set_params\(warm_start=True, until_mixed=True\)\.fit\(X, "
                                           r"y\) continues") as caught:
        SupervisedDPEstimator(n_draws=10, **options).fit(X, y)
    assert all(warning.filename == __file__ for warning in caught)
    assert not any("fit.resume" in str(warning.message) or "init=fit." in str(warning.message) for warning in caught)
    # A restart from the chains' last partitions, as the advice can say.
    last = full.fit_.assignments[:, -1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        restarted = SupervisedDPEstimator(n_chains=2, n_warmup=0, n_draws=5, init=last, random_state=1).fit(X, y)
    assert adjusted_rand_score(restarted.fit_.assignments[0, 0], last[0]) > 0.9
    with pytest.raises(ValueError, match="^warm_start: the previous fit's chains were made with other n_chains;"):
        warm.set_params(n_chains=3).fit(X, y)
    with pytest.raises(ValueError, match="^warm_start: train_features, train_labels and test_features: not the data"):
        warm.set_params(n_chains=2).fit(X + 1.0, y)
    assert warm.fit_.assignments.shape[1] == 40  # the refused fits changed nothing


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 10 draws
def test_supervised_dp_passes_its_priors_to_the_model():
    from zoo.dirichlet.supervised import SupervisedDP

    X, y, _ = _labelled_blobs()
    priors = dict(prior_variance=4.0, precision_shape=2.0, precision_rate=0.5)
    estimator = SupervisedDPEstimator(n_chains=2, n_warmup=5, n_draws=10, random_state=3, **priors).fit(X, y)
    core = SupervisedDP(1, **priors).fit(X[:20], y[:20], X[20:], key=jax_key(3), n_chains=2, n_sweeps=15,
                                         n_warmup=5, progress=False)
    np.testing.assert_array_equal(estimator.fit_.assignments, core.assignments)
    np.testing.assert_array_equal(estimator.fit_.result.samples["log_joint"], core.result.samples["log_joint"])
    with pytest.raises(ValueError, match="^warm_start: the previous fit's chains were made with other prior_variance;"):
        estimator.set_params(warm_start=True, prior_variance=1.0).fit(X, y)


def test_supervised_dp_share_clusters_gives_unlabelled_rows_the_training_label_they_join():
    # Half of group 0 unlabelled: with share_clusters those rows join training cluster 0.
    X, _, _ = _labelled_blobs()
    y = np.repeat([0, 1, -1, 7], 10)
    y[5:10] = -1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        labels = SupervisedDPEstimator(share_clusters=True, n_chains=2, n_warmup=20, n_draws=20, random_state=0).fit_predict(X, y)
    np.testing.assert_array_equal(labels[5:10], 0)
    np.testing.assert_array_equal(labels[20:30], 8)  # a cluster of its own: the next label after 7


@pytest.mark.parametrize("y, error, message", [
    (None, ValueError, "^y: requires y to be passed, but the target y is None: give the labels"),
    (np.full(40, -1), ValueError, "^y: no labelled row: .* use DPMixtureEstimator"),
    (np.repeat([0, 1], 20), ValueError, "^y: no row to cluster: mark the rows to cluster with -1"),
    (np.repeat([0, 1, -2, -1], 10), ValueError, "^y: labels are -1"),
    (np.repeat(["a", "b", "c", "d"], 10), ValueError,
     r"^y: has dtype <U1 \(strings\), where the integer -1 cannot mark .* give y dtype object, .*LabelEncoder"),
    (np.array(["a"] * 20 + [None] * 20, dtype=object), ValueError,
     r"^y: the label of row 20 is missing \(None or NaN\): mark the rows to cluster with -1$"),
    (np.r_[np.zeros(20), np.full(20, np.nan)], ValueError, r"^y: the label of row 20 is missing \(NaN\)"),
    (np.array(["a"] * 10 + [3] * 10 + [-1] * 20, dtype=object), TypeError,
     "^y: labels are integers, or strings with the integer -1 .* types int, str$"),
    (np.repeat([0, -1], 10), ValueError, r"^y: expected one label per row of X \(40\), got shape \(20,\)"),
])
def test_supervised_dp_rejects_bad_labels(y, error, message):
    X, _, _ = _labelled_blobs()
    with pytest.raises(error, match=message):
        SupervisedDPEstimator().fit(X, y)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 40 draws: ESS < 400
def test_supervised_dp_takes_string_labels_with_minus_one_as_self_training_classifier_does(fitted_supervised):
    # scikit-learn's SelfTrainingClassifier takes string labels in an array of dtype object, -1 (an integer)
    # marking the unlabelled rows; the same chains as integer labels, the labelled rows keep their strings
    # and the clusters get the integers from 0.
    import pandas as pd

    integer, X, y, _ = fitted_supervised
    names = np.where(y == 0, "left", "right").astype(object)
    names[y == -1] = -1
    for labels in (names, pd.Series(names)):
        estimator = SupervisedDPEstimator(n_chains=2, n_warmup=20, n_draws=40, random_state=0).fit(X, labels)
        np.testing.assert_array_equal(estimator.fit_.assignments, integer.fit_.assignments)
        assert estimator.labels_.tolist() == names[:20].tolist() + (integer.labels_[20:] - 2).tolist()
        assert estimator.n_clusters_ == integer.n_clusters_
    shared = names.copy()
    shared[5:10] = -1  # half of "left" to cluster: with share_clusters those rows join it
    labels = SupervisedDPEstimator(share_clusters=True, n_chains=2, n_warmup=20, n_draws=20,
                                   random_state=0).fit_predict(X, shared)
    assert labels[5:10].tolist() == ["left"] * 5 and set(labels[20:].tolist()) <= {0, 1}
    numbers = y.astype(object)  # an object array of integers is integer labels
    assert SupervisedDPEstimator(n_chains=1, n_warmup=2, n_draws=3, random_state=0).fit(X, numbers).labels_.dtype == int


def test_supervised_dp_rejects_bad_settings():
    X, y, _ = _labelled_blobs()
    for params, error, message in [({"model": 4}, ValueError, "^model:"), ({"model": 2.5}, TypeError, "^model:"),
                                   ({"share_clusters": "no"}, TypeError, "^share_clusters:"),
                                   ({"alpha_types_prior": (1.0,)}, TypeError, "^alpha_types_prior:"),
                                   ({"n_warmup": -1}, ValueError, "^n_warmup:"), ({"loss": "l2"}, ValueError, "^loss:"),
                                   ({"n_split_merge": -1}, ValueError, "^n_split_merge:"),
                                   ({"n_type_split_merge": 1.5}, TypeError, "^n_type_split_merge:"),
                                   ({"pair_moves": "yes"}, TypeError, "^pair_moves:"),
                                   ({"prior_variance": 0.0}, ValueError, "^prior_variance:"),
                                   ({"precision_shape": "1"}, TypeError, "^precision_shape:"),
                                   ({"precision_rate": -1.0}, ValueError, "^precision_rate:"),
                                   ({"n_precision_split_merge": 1}, ValueError,  # passed on: SCDP-1 has none
                                    "^n_precision_split_merge: only SCDP-3"),
                                   ({"model": 3, "n_precision_split_merge": -1}, ValueError,
                                    "^n_precision_split_merge:")]:
        with pytest.raises(error, match=message):
            SupervisedDPEstimator(**params).fit(X, y)
    with pytest.raises(ValueError, match="^X: "):
        SupervisedDPEstimator().fit(np.full((40, 2), np.nan), y)


def test_a_fit_stopped_by_max_iter_says_so_as_scikit_learn_does():
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"^AspectEstimator: EM stopped at max_iter=2 before converging"):
        AspectEstimator(n_classes=3, max_iter=2, random_state=0, backend="xla").fit(COUNTS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert AspectEstimator(n_classes=3, max_iter=500, random_state=0, backend="xla").fit(COUNTS).converged_


def test_an_empty_validation_part_is_refused_once_by_name():
    # The split's own warning is not said again before the error that names valid_fraction.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="^valid_fraction: splitting 2 tokens left an empty"):
            AspectEstimator(2, schedule="tempered", valid_fraction=0.001, random_state=0).fit(
                sp.csr_matrix(np.array([[1, 0], [0, 1]])))
