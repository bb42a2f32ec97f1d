"""Fits whose classes collapse to one: warned about, and the defaults do not keep them in silence.

At a low β a document of a few tokens scores its clusters all but alike, the M-step makes the
clusters alike, and that is a fixed point at every β; EM from random partitions of the two-sided
model falls into the same point on short sentences. The data below are the newcomer audit's
(300 documents of 10 tokens from 4 topics over 60 words; 300 sentences of 8–20 words).
"""

import warnings

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from inference.em import ALIKE_TOLERANCE, ClassesAlikeWarning, tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM, anneal_up
from zoo.data import CoOccurrence
from zoo.dyadic import Aspect, OneSided, TwoSided
from zoo.dyadic.predictive import predictive_matrix, prediction_spread

KEY = jax.random.key(0)


def short_documents():
    """300 documents of 10 tokens, each from one of 4 sparse topics over 60 words; 80/10/10 split."""
    rng = np.random.default_rng(0)
    topics = rng.dirichlet(np.full(60, 0.1), size=4)
    counts = np.stack([rng.multinomial(10, topics[topic]) for topic in rng.integers(4, size=300)])
    return CoOccurrence.from_dense(counts).split_tokens([0.8, 0.1, 0.1], rng=0)


TOPICS = {
    "sport": "goal match team player coach score league win season ball referee stadium".split(),
    "finance": "market stock price bank invest profit loss trade share fund rate economy".split(),
    "science": "cell gene protein experiment lab data theory physics atom energy research study".split(),
    "food": "bread cheese recipe cook oven flavor sugar salt dinner kitchen taste meal".split(),
}
COMMON = "the a of and to in is was for with on that".split()


def short_sentences():
    """300 sentences of 8–19 words: 30% function words, 55% of the sentence's topic, 15% of any,
    counted as scikit-learn's CountVectorizer counts them (which drops "a"); 80/10/10 token split."""
    from sklearn.feature_extraction.text import CountVectorizer

    rng = np.random.default_rng(0)
    names = list(TOPICS)
    sentences = []
    for _ in range(300):
        topic, other = rng.choice(4, p=[0.3, 0.3, 0.2, 0.2]), rng.choice(4)
        words = []
        for _ in range(rng.integers(8, 20)):
            draw = rng.random()
            if draw < 0.3:
                words.append(rng.choice(COMMON))
            elif draw < 0.85:
                words.append(rng.choice(TOPICS[names[topic]]))
            else:
                words.append(rng.choice(TOPICS[names[other]]))
        sentences.append(" ".join(words))
    counts = CountVectorizer().fit_transform(sentences)
    return CoOccurrence.from_sparse(counts).split_tokens([0.8, 0.1, 0.1], rng=0)


@pytest.fixture(scope="module")
def documents():
    return short_documents()


@pytest.fixture(scope="module")
def sentences():
    return short_sentences()


def unigram_perplexity(train, test):
    return tempered_em(Aspect(1, prior_count=0.1), train, key=KEY).perplexity(test)


def test_prediction_spread_bounds_the_spread_of_the_predictions():
    rng = np.random.default_rng(3)
    rows, cols = rng.dirichlet(np.ones(4), size=30), rng.dirichlet(np.ones(50), size=4).T
    predictions = rows @ cols.T
    exact = 0.5 * np.abs(predictions - predictions.mean(axis=0)).sum(axis=1).max()
    assert exact <= prediction_spread(rows, cols) + 1e-12
    assert prediction_spread(np.tile(rows[:1], (30, 1)), cols) == pytest.approx(0.0, abs=1e-15)
    assert prediction_spread(rows, np.tile(cols[:, :1], (1, 4))) == pytest.approx(0.0, abs=1e-15)


def test_default_one_sided_schedule_does_not_keep_the_unigram_on_short_documents(documents):
    train, valid, test = documents
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClassesAlikeWarning)
        result = tempered_em(OneSided(4, prior_count=0.1), train, key=KEY, valid=valid)
    plain = tempered_em(OneSided(4, prior_count=0.1), train, key=KEY, valid=valid,
                        schedule=FixedBeta(1.0, early_stopping=True))
    # Annealing up kept β = 0.01 and the unigram (27.75 against the unigram's 27.90); tempered EM 11.83.
    assert result.schedule == TemperedEM()
    assert result.perplexity(test) <= plain.perplexity(test) * 1.001
    assert result.perplexity(test) < 0.6 * unigram_perplexity(train, test)
    assert OneSided(4).prediction_spread(result.params) > 0.3


def test_annealing_without_a_fallback_warns_that_the_classes_are_alike(documents):
    train, valid, test = documents
    with pytest.warns(ClassesAlikeWarning, match=r"classes are alike.*TemperedEM\(\)"):
        result = tempered_em(OneSided(4, prior_count=0.1), train, key=KEY, valid=valid,
                             schedule=DeterministicAnnealing(0.01, 1.5, 25))
    assert result.beta == pytest.approx(0.01)
    assert OneSided(4).prediction_spread(result.params) < ALIKE_TOLERANCE
    rows = predictive_matrix(result.model, result.params)
    assert 0.5 * np.abs(rows - rows.mean(axis=0)).sum(axis=1).max() < ALIKE_TOLERANCE


def test_anneal_up_compares_with_tempered_em_and_equals_plain_annealing():
    assert anneal_up().fallback == TemperedEM()
    assert anneal_up() == DeterministicAnnealing(0.01, 1.5, 25)  # the fallback is no part of the annealing
    with pytest.raises(TypeError, match="^fallback: "):
        DeterministicAnnealing(0.01, 1.5, 25, fallback="tempered")


@pytest.mark.parametrize("schedule", [None, FixedBeta(1.0)], ids=["default", "plain-em"])
def test_two_sided_random_starts_that_collapse_are_compared_with_seeded_ones(sentences, schedule):
    train, valid, test = sentences
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClassesAlikeWarning)
        result = tempered_em(TwoSided(4), train, key=KEY, valid=valid, schedule=schedule)
    # Random partitions converged to the unigram (57.17; seeded starts 35.97).
    assert result.model == TwoSided(4, starts="seeded")
    assert result.perplexity(test) < 0.8 * unigram_perplexity(train, test)
    assert np.unique(np.asarray(result.params.row_assignments())).size > 1


def test_two_sided_without_validation_data_keeps_the_better_training_fit(sentences):
    train, _, _ = sentences
    result = tempered_em(TwoSided(4), train, key=KEY, schedule=FixedBeta(1.0))
    assert result.model.starts == "seeded"
    assert np.unique(np.asarray(result.params.row_assignments())).size > 1


def test_fits_whose_classes_differ_are_not_rerun_and_one_class_is_not_warned_about(sentences):
    train, valid, test = sentences
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClassesAlikeWarning)
        aspect = tempered_em(Aspect(4), train, key=KEY, valid=valid)
        tempered_em(Aspect(1), train, key=KEY, valid=valid)
        tempered_em(TwoSided(1, 3), train, key=KEY, valid=valid, max_iter=20)
    assert aspect.schedule == TemperedEM() and aspect.model == Aspect(4)
    assert Aspect(1).prediction_spread(aspect.params) is None


def test_perplexity_refuses_held_out_rows_in_another_order(sentences):
    train, valid, test = sentences
    named = CoOccurrence(train.rows, train.cols, train.counts, train.shape,
                         [f"doc{index}" for index in range(train.n_rows)], train.col_names)
    named_test = CoOccurrence(test.rows, test.cols, test.counts, test.shape, named.row_names, test.col_names)
    result = tempered_em(Aspect(4), named, key=KEY, max_iter=30)
    assert result.row_names == named.row_names and result.col_names == train.col_names
    order = np.random.default_rng(1).permutation(test.n_rows)
    shuffled = named_test.select_rows(order)
    with pytest.raises(ValueError, match=r"^data: its row_names differ from the fitted data's \(at 0: 'doc"):
        result.perplexity(shuffled)
    with pytest.raises(ValueError, match=r"^data: its row_names differ"):
        result.heldout_log_likelihood(shuffled, floor=1e-6)
    back = shuffled.select_rows(np.argsort(order))  # the fitted order again
    assert result.perplexity(back) == pytest.approx(result.perplexity(named_test))
    unnamed = CoOccurrence(test.rows, test.cols, test.counts, test.shape)
    assert result.perplexity(unnamed) == pytest.approx(result.perplexity(named_test))  # nothing to compare


def test_a_sparse_matrix_given_as_valid_is_named_valid_in_the_advice(sentences):
    train, valid, _ = sentences
    matrix = sp.csr_matrix((valid.counts, (valid.rows, valid.cols)), shape=valid.shape)
    with pytest.raises(TypeError, match=r"^valid: .*CoOccurrence\.from_sparse\(valid\)"):
        tempered_em(Aspect(2), train, key=KEY, valid=matrix)
