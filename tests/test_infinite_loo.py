"""IRM held-out predictions from the draws of one run (PSIS): the exact leave-one-out predictive on
problems small enough to enumerate, the case likelihood as a ratio of collapsed likelihoods, and
the result standing for its model in the leave-one-out loss, with the unreliable cases run again."""
import itertools
import warnings
from types import SimpleNamespace
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference import diagnostics
from inference.diagnostics import MixingWarning
from test_infinite import (_bipartite_data, _log_collapsed, _log_crp, _one_domain_data, _sampled, _set_partitions,
                           _undirected_data)
from zoo.relational._infinite_loo import _one_draw, _weighted_predictive, pareto_k_limit
from zoo.relational._infinite_state import block_counts, collapsed_log_likelihood
from zoo.relational.data import load_davis_southern_women, load_florentine_families, load_karate_club
from zoo.relational.evaluation import fold_cases, held_out_cases, leave_one_out_log_loss
from zoo.relational.infinite import InfiniteRelational, IRMResult


def _exact_held_out(data, alpha, hyper, relation, hidden_row):
    """P(y_c = u | y_-G) for the first hidden cell c, by enumerating every joint partition (α, γ fixed)."""
    target = data.relations[relation]
    keep = np.ones(target.n_observed, bool)
    keep[hidden_row[hidden_row >= 0]] = False
    first = target.entries[hidden_row[0]]
    log_posts, predictives = [], []
    for partitions in itertools.product(*[list(_set_partitions(d.size)) for d in data.domains]):
        by_domain = dict(zip(data.domain_names, partitions))
        log_post = sum(_log_crp(np.array(labels), alpha) for labels in partitions)
        for index, relation_cells in enumerate(data.relations):
            seen = keep if index == relation else np.ones(relation_cells.n_observed, bool)
            cells = SimpleNamespace(entries=relation_cells.entries[seen], values=relation_cells.values[seen],
                                    n_values=relation_cells.n_values, symmetric=relation_cells.symmetric)
            log_post += _log_collapsed(cells, [by_domain[name] for name in relation_cells.domains],
                                       np.full(relation_cells.n_values, hyper))
        def block_of(cell):  # a symmetric relation's block is the unordered pair of clusters
            block = tuple(by_domain[name][cell[p]] for p, name in enumerate(target.domains))
            return tuple(sorted(block)) if target.symmetric else block

        counts = np.zeros(target.n_values)
        for cell, value in zip(target.entries[keep], target.values[keep]):
            if not (target.symmetric and cell[0] > cell[1]):  # each unordered pair once
                counts[value] += block_of(cell) == block_of(first)
        log_posts.append(log_post)
        predictives.append((hyper + counts) / (hyper * target.n_values + counts.sum()))
    weights = np.exp(np.array(log_posts) - max(log_posts))
    return weights @ np.array(predictives) / weights.sum()


@pytest.mark.parametrize("make_data", [_bipartite_data, _one_domain_data, _undirected_data])
def test_psis_predictions_are_the_exact_leave_one_out_predictive(make_data):
    """Every observed cell of every relation held out (with its mirror when symmetric), from one run
    on all the data, against the enumerated posterior without it: measured within 0.0035 with these
    64 chains × 400 draws. The same draws averaged without the importance weights (the predictive
    given y_-G under p(z | y), which has seen the cell) miss by far more, so the check can fail."""
    data = make_data()
    alpha, hyper = 1.3, 0.6
    result = _sampled(data, alpha, hyper, n_chains=64, n_sweeps=420, seed=0, backend="auto")
    for relation in range(len(data.relations)):
        hidden = held_out_cases(data, relation=relation, max_cases=50, rng=0)
        estimate = result.psis_held_out(hidden, relation)
        exact = np.array([_exact_held_out(data, alpha, hyper, relation, row) for row in hidden])
        assert np.abs(estimate.probs[:, 0] - exact).max() < 0.012
        draws = tuple(jnp.asarray(result.assignments[name].reshape(-1, result.assignments[name].shape[-1]))
                      for name in data.domain_names)
        gammas = tuple(jnp.asarray(result.hyper[name].reshape(-1, result.hyper[name].shape[-1]))
                       for name in data.schema.relation_names)
        arrays = data.to_arrays()
        positions = np.where(hidden >= 0, hidden, 0)
        uniform = jnp.full((draws[0].shape[0], hidden.shape[0]), 1.0 / draws[0].shape[0])
        unweighted = np.asarray(_weighted_predictive(
            draws, gammas, uniform, arrays, jnp.asarray(np.asarray(arrays.entries[relation])[positions]),
            jnp.asarray(np.asarray(arrays.values[relation])[positions]), jnp.asarray(hidden >= 0),
            schema=data.schema, capacities=result.capacities, relation=relation))
        assert np.abs(unweighted[:, 0] - exact).max() > 0.05


@pytest.mark.parametrize("make_data", [load_florentine_families, load_davis_southern_women])
def test_case_likelihood_and_predictive_are_ratios_of_collapsed_likelihoods(x64, make_data):
    """log p(y_G | z, γ, y_-G) = log P(y | z, γ) - log P(y_-G | z, γ) and the predictive from the
    counts without G, for leave-one-out cases and a fold of 40 cells (many sharing a block)."""
    data = make_data()
    arrays, schema = data.to_arrays(), data.schema
    rng = np.random.default_rng(3)
    capacities = tuple(schema.domain_sizes)
    assignments = tuple(jnp.asarray(rng.integers(0, 4, size=size), jnp.int32) for size in schema.domain_sizes)
    hyper = tuple(jnp.asarray(rng.uniform(0.2, 3.0, size=n_values)) for n_values in schema.n_values)
    fold = fold_cases(data, n_folds=5, rng=1)[0][:1, :40]
    loo = held_out_cases(data, max_cases=6, rng=2)
    for hidden in (np.pad(loo, ((0, 0), (0, 40 - loo.shape[1])), constant_values=-1), fold):
        valid = hidden >= 0
        positions = np.where(valid, hidden, 0)
        cells = jnp.asarray(np.asarray(arrays.entries[0])[positions])
        values = jnp.asarray(np.asarray(arrays.values[0])[positions])
        log_likelihood, predictive = _one_draw(assignments, hyper, arrays, cells, values, jnp.asarray(valid),
                                               schema=schema, capacities=capacities, relation=0)
        everything = collapsed_log_likelihood(block_counts(assignments, arrays, schema, capacities), hyper,
                                              schema.symmetric)
        for case, row in enumerate(hidden):
            weights = np.asarray(arrays.weights[0]).copy()
            weights[row[row >= 0]] = 0.0
            without = block_counts(assignments, arrays._replace(weights=(jnp.asarray(weights),)), schema, capacities)
            np.testing.assert_allclose(log_likelihood[case],
                                       everything - collapsed_log_likelihood(without, hyper, schema.symmetric),
                                       rtol=1e-10)
            block = tuple(assignments[domain][cells[case, 0, p]]
                          for p, domain in enumerate(schema.relation_domains[0]))
            mass = hyper[0] + without[0][block]
            np.testing.assert_allclose(predictive[case, 0], mass / mass.sum(), rtol=1e-12)


def _short_run(data):
    model = InfiniteRelational()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)  # short chains, on purpose: few draws, a strict k limit
        return model, model.sample(data, key=jax.random.key(4), n_chains=2, n_sweeps=60, n_warmup=20,
                                   progress=False)


def test_a_result_stands_for_its_model_and_runs_the_unreliable_cases_again():
    data = load_florentine_families()
    model, result = _short_run(data)
    hidden = held_out_cases(data, max_cases=12, rng=0)
    estimate = result.psis_held_out(hidden)
    assert estimate.k_limit == pareto_k_limit(80) < 0.7  # few draws: a stricter limit
    unreliable = estimate.unreliable
    assert unreliable.any() and (~unreliable).any()
    refit = dict(n_chains=2, n_sweeps=20, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MixingWarning)  # short chains
        probs = result.predict_held_out(data, hidden, key=jax.random.key(9), **refit)
    # The cases run again say so, and do not advise what the caller is doing already.
    cases_apart = [str(w.message) for w in caught if "cases do not mix" in str(w.message)]
    assert cases_apart and all(m.startswith("IRMResult.predict_held_out (the cases run again): the chains of ")
                               and "run the model once" not in m for m in cases_apart)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        again = model.predict_held_out(data, hidden[unreliable], key=jax.random.key(9), **refit)
        loss = leave_one_out_log_loss(result, data, key=jax.random.key(9), max_cases=12, **refit)
    np.testing.assert_array_equal(probs[~unreliable], estimate.probs[~unreliable])
    np.testing.assert_array_equal(probs[unreliable], again)
    truth = data.relations[0].values[hidden[:, 0]]
    np.testing.assert_allclose(loss.losses, -np.log2(probs[np.arange(12), 0, truth]), rtol=1e-6)
    # Stopped (here by the time budget, as by Ctrl-C) after the first case run again: the others keep their
    # reweighted predictions, said in a warning, rather than NaN.
    stopped_message = rf"^IRMResult.predict_held_out: stopped before {unreliable.sum() - 1} of the {unreliable.sum()}"
    with warnings.catch_warnings(), pytest.warns(RuntimeWarning, match=stopped_message):
        warnings.simplefilter("ignore", MixingWarning)
        stopped = result.predict_held_out(data, hidden, key=jax.random.key(9), cases_per_call=1, time_budget=1e-9,
                                          **refit)
    first, rest = np.flatnonzero(unreliable)[0], np.flatnonzero(unreliable)[1:]
    np.testing.assert_array_equal(stopped[first], again[0])
    np.testing.assert_array_equal(stopped[rest], estimate.probs[rest])
    kept_message = rf"^IRMResult.predict_held_out: {unreliable.sum()} of 12 cases have a Pareto k above"
    with warnings.catch_warnings(), pytest.warns(RuntimeWarning, match=kept_message):
        warnings.simplefilter("ignore", MixingWarning)
        kept = result.predict_held_out(data, hidden, refit=False)
    np.testing.assert_array_equal(kept, estimate.probs)


def test_a_result_whose_chains_do_not_mix_says_so_and_bad_input_is_named():
    data = load_florentine_families()
    _, result = _short_run(data)
    hidden = held_out_cases(data, max_cases=12, rng=0)
    apart = np.random.default_rng(0).normal(size=(2, 200)) + np.array([[0.0], [5.0]])
    table = diagnostics.mixing_table(diagnostics.from_dict_in_order(posterior={"log_joint": apart}))
    with mock.patch.object(IRMResult, "mixing", new=property(lambda self: table)), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the cases above the k limit, kept (refit=False)
        with pytest.warns(MixingWarning, match=r"^IRMResult.predict_held_out: the chains reweighted do not mix"):
            result.predict_held_out(data, hidden, refit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        with pytest.raises(ValueError, match="^data: not the data these draws were run on"):
            result.predict_held_out(load_karate_club(), hidden, key=jax.random.key(0))
        with pytest.raises(ValueError, match="^key: .* cases have a Pareto k above"):
            result.predict_held_out(data, hidden)
        with pytest.raises(ValueError, match="^hidden"):
            result.psis_held_out(np.array([[10_000]]))
        with pytest.raises(ValueError, match=r"^hidden: case 1 lists a position more than once \(7\)"):
            result.psis_held_out(np.array([[3, -1, -1], [7, 2, 7]]))
        with pytest.raises(ValueError, match="^relation"):
            result.psis_held_out(hidden, relation="kinship")
        with pytest.raises(TypeError, match="^refit"):
            result.predict_held_out(data, hidden, refit="yes")
