"""The precision prior against the training publications' spread (zoo.dirichlet.scale.precision_prior_shrinkage):
SupervisedDP warns when its Gamma prior holds the precisions far below what the labelled publications show,
and the rate it names recovers test entities that the default merges."""
import warnings

import jax
import numpy as np
import pytest

from inference.diagnostics import MixingWarning
from zoo.dirichlet import SupervisedDP
from zoo.dirichlet.scale import PrecisionPriorWarning, ScaleWarning, precision_prior_shrinkage
from zoo.metrics import clustering_scores


def _entities(seed=0, n_train=6, n_test=5, per=4, dims=3):
    """Entities of a few records each, 0.3 apart within against centres N(0, 4²), standardised together."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 4.0, (n_train + n_test, dims))
    points = np.concatenate([centre + 0.3 * rng.normal(size=(per, dims)) for centre in centres])
    labels = np.repeat(np.arange(n_train + n_test), per)
    points = (points - points.mean(axis=0)) / points.std(axis=0)
    train = labels < n_train
    return points[train], labels[train], points[~train], labels[~train]


def test_the_shrinkage_is_near_one_where_the_data_set_the_precisions_and_small_where_the_prior_does():
    rng = np.random.default_rng(1)
    wide = rng.normal(size=(300, 4))  # publications as wide as the data: the prior's mean precision 1 fits
    ratio, variance = precision_prior_shrinkage(wide, np.repeat(np.arange(5), 60), 1.0, 1.0)
    assert ratio == pytest.approx(1.0, abs=0.02) and variance == pytest.approx(1.0, abs=0.15)
    train, labels, _, _ = _entities()
    ratio, variance = precision_prior_shrinkage(train, labels, 1.0, 1.0)
    assert ratio < 0.2 and variance < 0.02
    # A prior whose mean precision is the data's leaves them to the data.
    assert precision_prior_shrinkage(train, labels, 1.0, variance)[0] == pytest.approx(1.0, abs=0.05)
    # Features constant within every publication are left out; none varying: nothing to say.
    assert precision_prior_shrinkage(np.repeat([[0.0], [1.0]], 3, axis=0), [0, 0, 0, 1, 1, 1], 1.0, 1.0)[0] == 1.0


def test_supervised_dp_warns_and_the_rate_it_names_finds_the_entities_the_default_merges():
    train, labels, test, truth = _entities()
    run = dict(key=jax.random.key(0), n_chains=2, n_warmup=100, n_draws=200, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = SupervisedDP(1).fit(train, labels, test, **run)
    prior = [warning for warning in caught if issubclass(warning.category, PrecisionPriorWarning)]
    assert len(prior) == 1 and issubclass(prior[0].category, ScaleWarning)
    message = str(prior[0].message)
    assert message.startswith("SupervisedDP(1): the prior of the precisions, Gamma(1, rate 1)")
    rate = float(message.split("precision_rate=")[1].split(" ")[0])
    assert 0.005 < rate < 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        warnings.simplefilter("error", PrecisionPriorWarning)
        fitted = SupervisedDP(1, precision_rate=rate).fit(train, labels, test, **run)
    # Two of the five test entities lie 0.84 apart against a within-entity sd of 0.085: merged by the
    # default prior (F 0.789 with these keys), held apart with the data's precision.
    assert clustering_scores(truth, default.point_estimate())["F"] < 0.9
    assert clustering_scores(truth, fitted.point_estimate())["F"] == pytest.approx(1.0)


def test_scdp_2_which_sets_its_prior_from_the_data_does_not_warn():
    train, labels, test, _ = _entities()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        warnings.simplefilter("error", PrecisionPriorWarning)
        SupervisedDP(2).fit(train, labels, test, key=jax.random.key(0), n_chains=1, n_warmup=2, n_draws=3,
                            progress=False)
