"""Schedule state machines, driven by hand-made validation curves."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.em import tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM
from zoo.data import CoOccurrence
from zoo.datasets import load_reuters
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.predictive import ZeroProbabilityWarning


def _drive(schedule, perplexities, converged=None):
    state = schedule.init(jnp.float32)
    betas, stops = [], []
    for index, value in enumerate(perplexities):
        flag = False if converged is None else converged[index]
        state, beta, stop = schedule.update(state, jnp.float32(value), jnp.asarray(flag))
        betas.append(float(beta))
        stops.append(bool(stop))
    return betas, stops


def test_tempered_em_lowers_beta_when_validation_stalls_and_stops_when_lowering_fails():
    schedule = TemperedEM(eta=0.5, patience=1, min_improvement=0.0)
    # β = 1: improves twice then stalls -> β = 0.5; improves to 70 then stalls -> β = 0.25;
    # the β = 0.25 level improves within itself (72, 71) but stalls without beating 70 -> stop.
    curve = [100, 90, 95, 80, 70, 75, 72, 71, 71.5]
    betas, stops = _drive(schedule, curve)
    assert betas[:3] == [1.0, 1.0, 0.5]
    assert betas[5] == 0.25
    assert stops.index(True) == 8


def test_tempered_em_restarts_each_lower_beta_from_the_best_parameters():
    schedule = TemperedEM(eta=0.5, patience=2, min_improvement=0.0)
    state = schedule.init(jnp.float32)
    flags = []
    for value in [100, 90, 95, 96, 80]:
        state, _, _ = schedule.update(state, jnp.float32(value), jnp.asarray(False))
        flags.append(bool(state.from_best))
    # The β = 1 level ends after two iterations without improvement (95, 96): only then.
    assert flags == [False, False, False, True, False]


def test_tempered_em_default_patience_gets_past_a_transient_rise():
    # After β is lowered the validation perplexity may rise for a few iterations before it falls.
    curve = [100, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100] + [95, 97, 99, 92, 85, 80]
    betas, stops = _drive(TemperedEM(), curve)
    assert betas[11] == pytest.approx(0.9) and not any(stops)


def test_tempered_em_respects_beta_min():
    schedule = TemperedEM(eta=0.5, beta_min=0.4, patience=1)
    betas, stops = _drive(schedule, [100, 101, 90, 91])
    assert betas[1] == 0.5 and stops[3]


def test_fixed_beta_stops_on_convergence_or_patience():
    betas, stops = _drive(FixedBeta(0.7), [5, 4, 3], converged=[False, False, True])
    np.testing.assert_allclose(betas, 0.7, rtol=1e-6)
    assert stops == [False, False, True]
    _, stops = _drive(FixedBeta(1.0, early_stopping=True, patience=2), [10, 9, 9.5, 9.6, 8])
    assert stops == [False, False, False, True, False]


def test_deterministic_annealing_raises_beta_to_one_then_stops():
    schedule = DeterministicAnnealing(beta_start=0.25, growth=2.0, max_iter_per_level=3)
    betas, stops = _drive(schedule, [1.0] * 12)
    assert betas[:3] == [0.25, 0.25, 0.5]
    assert max(betas) == 1.0 and np.all(np.diff(betas) >= 0)
    assert stops.index(True) == 8


def test_annealed_fit_ends_at_beta_one_with_finite_history():
    rng = np.random.default_rng(0)
    data = CoOccurrence.from_dense(rng.poisson(1.0, size=(20, 30)) + 1)
    result = tempered_em(Aspect(3), data, key=jax.random.key(0), schedule=DeterministicAnnealing(0.3, 1.5, 20),
                         max_iter=300)
    assert result.history["beta"][0] == pytest.approx(0.3) and result.history["beta"][-1] == 1.0
    assert result.stopped_by == "converged" and np.all(np.isfinite(result.history["log_lik"]))


def test_schedules_compare_tokens_of_probability_zero_before_perplexity():
    """Validation is judged by (tokens of probability 0, perplexity of the others): inf values
    from a fit whose iterates all have such tokens still order the iterates and β levels."""
    schedule = TemperedEM(eta=0.5, patience=1, min_improvement=0.0)
    state = schedule.init(jnp.float32)
    betas = []
    # β = 1: 5 zero tokens, then 3 (better despite the higher perplexity), then 3 at 90 (better),
    # then 4 (worse) -> β = 0.5, whose 2 zero tokens beat the β = 1 level, then a stall -> β = 0.25;
    # its best, 2 zero tokens at 95, does not beat (2, 80) -> stop.
    curve = [(5, 100), (3, 120), (3, 90), (4, 50), (2, 80), (2, 85), (2, 95), (2, 96)]
    stops = []
    for zero, perplexity in curve:
        state, beta, stop = schedule.update(state, jnp.float32(perplexity), jnp.asarray(False), jnp.float32(zero))
        betas.append(float(beta))
        stops.append(bool(stop))
    assert betas == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25]
    assert stops == [False] * 7 + [True]
    assert float(state.previous_stage_best_zero) == 2 and float(state.previous_stage_best) == 80


def _crossing_blocks():
    """Two blocks of rows with disjoint words; the validation tokens cross the blocks once each
    (probability 0 once one-sided EM has separated the blocks) and use a word never seen in
    training (probability 0 at every iterate of maximum-likelihood EM)."""
    rng = np.random.default_rng(0)
    block = np.zeros((40, 61))
    block[:20, :30] = 1
    block[20:, 30:60] = 1
    train = CoOccurrence.from_dense(rng.poisson(1.5 * block))
    valid_counts = rng.poisson(0.4 * block)
    valid_counts[0, 45] = 2
    valid_counts[25, 3] = 1
    always = valid_counts.copy()
    always[3, 60] = 1  # column 60 has no training token
    return train, CoOccurrence.from_dense(valid_counts), CoOccurrence.from_dense(always)


@pytest.mark.parametrize("schedule", [FixedBeta(1.0), TemperedEM(patience=3), DeterministicAnnealing(0.2, 1.5, 10)])
def test_fit_counts_validation_tokens_of_probability_zero_instead_of_flooring_them(schedule):
    train, valid, _ = _crossing_blocks()
    fit = partial(tempered_em, OneSided(2), train, key=jax.random.key(0), valid=valid, schedule=schedule,
                  max_iter=100)
    result = fit()
    history = result.history
    zeros = history["valid_zero_tokens"]
    assert zeros.max() == 3 and zeros[result.best_iteration] == 0  # the iterate before the blocks separate
    np.testing.assert_array_equal(np.isinf(history["valid_perplexity"]), zeros > 0)
    assert np.isfinite(result.restart_scores).all()
    assert result.model.heldout_evaluation(result.params, valid).n_zero_tokens == 0
    # An explicit floor scores them instead (as EMResult.perplexity(floor=) does), with the same count.
    floored = fit(floor=1e-30)
    np.testing.assert_array_equal(floored.history["valid_zero_tokens"], zeros)
    assert np.isfinite(floored.history["valid_perplexity"]).all()
    separated = int(np.argmax(zeros > 0))
    with pytest.warns(ZeroProbabilityWarning):
        at_floor = tempered_em(OneSided(2), train, key=jax.random.key(0), schedule=FixedBeta(1.0),
                               max_iter=separated + 1, tol=0.0).perplexity(valid, floor=1e-30)
    if isinstance(schedule, FixedBeta):
        np.testing.assert_allclose(floored.history["valid_perplexity"][separated], at_floor, rtol=1e-4)


def test_fit_whose_every_iterate_has_tokens_of_probability_zero_keeps_the_fewest_then_the_lowest_perplexity():
    train, _, valid = _crossing_blocks()
    # The fit says so: its validation perplexity is inf throughout (on 20 Newsgroups the one-sided model's
    # default annealing kept its first β, 0.01, for the fewest such tokens, with clusters near uniform).
    with pytest.warns(RuntimeWarning, match=r"^tempered_em: every iterate left validation tokens of probability 0 "
                                            r"\(1 at the kept one, β = 1\), .* compared by the number of such "
                                            r"tokens\. Give floor="):
        counted = tempered_em(OneSided(2), train, key=jax.random.key(0), valid=valid, schedule=FixedBeta(1.0),
                              max_iter=100)
    floored = tempered_em(OneSided(2), train, key=jax.random.key(0), valid=valid, schedule=FixedBeta(1.0),
                          max_iter=100, floor=1e-30)
    zeros = counted.history["valid_zero_tokens"]
    assert zeros.min() == 1 and np.isinf(counted.history["valid_perplexity"]).all()
    assert counted.restart_scores[0] == np.inf
    # The same iterate as the floored comparison: the count is fixed before the blocks separate.
    assert counted.best_iteration == floored.best_iteration == int(np.argmin(floored.history["valid_perplexity"]))
    assert zeros[counted.best_iteration] == 1


def test_a_floor_needs_validation_data_and_lies_in_the_unit_interval():
    train, valid, _ = _crossing_blocks()
    with pytest.raises(ValueError, match="^floor"):
        tempered_em(OneSided(2), train, key=jax.random.key(0), floor=1e-30)
    with pytest.raises(ValueError, match="^floor"):
        tempered_em(OneSided(2), train, key=jax.random.key(0), valid=valid, floor=1.5)


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: TemperedEM(eta=1.0), "eta"),
        (lambda: TemperedEM(beta_min=0.0), "beta_min"),
        (lambda: DeterministicAnnealing(growth=1.0), "growth"),
        (lambda: DeterministicAnnealing(beta_start=2.0), "beta_start"),
        (lambda: FixedBeta(patience=0), "patience"),
    ],
)
def test_bad_schedule_settings(build, argument):
    with pytest.raises(ValueError, match=f"^{argument}"):
        build()


def _reuters_fit(schedule):
    data = load_reuters()
    train, valid, test = data.split_tokens([0.8, 0.1, 0.1], rng=0)
    result = tempered_em(Aspect(32), train, key=jax.random.key(0), valid=valid, schedule=schedule, max_iter=400)
    return result, result.perplexity(test)


def test_default_tempered_em_tempers_on_reuters_and_beats_plain_em_stopped_early():
    """H99 §4–5 without tuning: the default schedule chooses β < 1 and generalises better."""
    tempered, tempered_test = _reuters_fit(TemperedEM())
    plain, plain_test = _reuters_fit(FixedBeta(1.0, early_stopping=True, patience=10))
    assert tempered.beta < 0.9
    assert tempered.restart_scores.min() < plain.restart_scores.min()  # validation, by construction
    assert tempered_test < 0.9 * plain_test  # measured: 1204 against 1628 (key 0)


def test_tempered_em_first_level_is_plain_em_stopped_early_from_the_same_start():
    """From one start, TemperedEM's β = 1 level repeats the iterates of plain EM with early stopping
    (with more patience it sees a superset of them), so its kept validation perplexity is never
    worse: annealing chosen on validation cannot lose to plain EM on validation."""
    rng = np.random.default_rng(1)
    topics = rng.dirichlet(np.full(40, 0.1), size=4)
    mixtures = rng.dirichlet(np.full(4, 0.3), size=60)
    data = CoOccurrence.from_dense(rng.poisson(30 * mixtures @ topics))
    train, valid, _ = data.split_tokens([0.7, 0.3, 0.0], rng=0)
    fit = partial(tempered_em, Aspect(6, prior_count=0.1), train, key=jax.random.key(3), valid=valid, max_iter=300)
    plain = fit(schedule=FixedBeta(1.0, early_stopping=True, patience=3))
    tempered = fit(schedule=TemperedEM(eta=0.8, patience=10))
    shared = plain.n_iter
    assert tempered.history["beta"][:shared].tolist() == [1.0] * shared
    for name in ("log_lik", "valid_perplexity"):
        np.testing.assert_array_equal(tempered.history[name][:shared], plain.history[name])
    assert tempered.restart_scores[0] <= plain.restart_scores[0]


@pytest.mark.parametrize("model", [Aspect(3, backend="xla"), OneSided(3, backend="xla")])
def test_the_training_log_likelihood_shown_is_that_of_the_kept_parameters(model):
    # The history holds each iteration's E-step, the log-likelihood of the parameters it starts from;
    # the kept parameters are those an iteration produced, so their own is one E-step later.
    counts = CoOccurrence.from_dense(np.random.default_rng(3).poisson(1.0, size=(30, 12)))
    train, valid = counts.split_tokens([0.8, 0.2], rng=0)
    validated = tempered_em(model, train, valid=valid, key=jax.random.key(0), max_iter=60)
    plain = tempered_em(model, train, key=jax.random.key(0), n_restarts=3, max_iter=40, tol=0.0)
    for result in (validated, plain):
        np.testing.assert_allclose(result.log_lik, result.log_likelihood(train), rtol=1e-5)
        assert f"{result.log_lik:,.1f} (the kept parameters" in repr(result)
    np.testing.assert_allclose(plain.log_lik, plain.history["log_lik"][-1], rtol=1e-3)  # one iteration later
    assert plain.best_restart == int(np.argmax(plain.restart_scores))  # restarts ranked by their kept parameters
    np.testing.assert_array_equal(plain.restart_scores[plain.best_restart], plain.log_lik)
