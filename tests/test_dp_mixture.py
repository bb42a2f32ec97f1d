"""Tests for zoo.dirichlet.mixture: the NumPyro program of a DP mixture and the DPMixture model.

* The program's prior: the number of occupied clusters among N simulated points follows Antoniak's
  exact distribution p(K | α, N) = |s(N, K)| α^K Γ(α) / Γ(α + N) (with α fixed, and integrated
  against its Gamma prior by quadrature); truncation at 30 or 40 sticks is negligible.
* The program's enumerated log density (funsor) equals the joint computed from the family's
  own functions, for every built-in family — the program and the kernels describe one model.
* DPMixture fits, scores and validates its inputs.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.contrib.funsor import enum, log_density
from numpyro.infer import Predictive
from scipy import integrate, special, stats

from inference.concentration import GammaPrior
from inference.diagnostics import MixingWarning
from test_neal import DATA_4, DATA_6, FAMILY_1D, log_partition_weights
from zoo.dirichlet.families import beta_bernoulli, dirichlet_multinomial, normal_gamma
from zoo.dirichlet.known_precision import normal_known_precision
from zoo.dirichlet.mixture import DPMixture, DPMixtureFit, dp_mixture_program, stick_breaking_weights
from zoo.dirichlet.predictive import leave_one_out_log_likelihood

Z_LIMIT = 4.5
# Unsigned Stirling numbers of the first kind |s(6, K)|, K = 1..6.
STIRLING_6 = np.array([120, 274, 225, 85, 15, 1])


def crp_cluster_count(alpha: float, n_points: int = 6) -> np.ndarray:
    ks = np.arange(1, n_points + 1)
    return STIRLING_6 * np.exp(ks * np.log(alpha) + special.gammaln(alpha) - special.gammaln(alpha + n_points))


def occupied_clusters(draws: dict) -> np.ndarray:
    labels = np.asarray(draws["assignments"]).reshape(draws["assignments"].shape[0], -1)
    return np.array([np.unique(row).size for row in labels])


def check_frequencies(counts: np.ndarray, expected: np.ndarray) -> None:
    n_draws = counts.size
    observed = np.bincount(counts, minlength=7)[1:7] / n_draws
    standard_error = np.sqrt(expected * (1 - expected) / n_draws)
    assert np.all(np.abs(observed - expected) < Z_LIMIT * standard_error + 1e-12), (observed, expected)


def test_stick_breaking_weights_sum_to_one():
    fractions = jnp.asarray([0.5, 0.2, 0.9])
    weights = stick_breaking_weights(fractions)
    np.testing.assert_allclose(weights, [0.5, 0.1, 0.36, 0.04], rtol=1e-6)


def test_prior_number_of_clusters_is_antoniak():
    predictive = Predictive(dp_mixture_program, num_samples=10000, return_sites=["assignments"])
    draws = predictive(jax.random.key(0), family=normal_gamma(1), n_points=6, max_clusters=30, alpha=1.5)
    check_frequencies(occupied_clusters(draws), crp_cluster_count(1.5))


def test_prior_number_of_clusters_with_gamma_prior_on_alpha():
    prior = GammaPrior(2.0, 1.0)
    predictive = Predictive(dp_mixture_program, num_samples=10000, return_sites=["assignments", "alpha"])
    draws = predictive(jax.random.key(1), family=normal_gamma(1), n_points=6, max_clusters=40, alpha_prior=prior)
    expected = np.array(
        [
            integrate.quad(lambda a, k=k: stats.gamma(2.0).pdf(a) * crp_cluster_count(a)[k], 0, np.inf)[0]
            for k in range(6)
        ]
    )
    check_frequencies(occupied_clusters(draws), expected)


def test_the_program_names_what_it_cannot_simulate_or_observe():
    # n_points=-1 failed in NumPyro's plate, no n_points in a comparison with None, a list of rows of
    # the wrong width in .shape: each is now named before the program samples anything.
    model = DPMixture(normal_gamma(2))
    simulate = Predictive(model.program, num_samples=2)
    for kwargs, error, match in ((dict(n_points=-1), ValueError, "^n_points: must be >= 1"),
                                 ({}, ValueError, "^n_points: give the number of points to simulate, or data"),
                                 (dict(n_points=2.5), TypeError, "^n_points: expected an integer"),
                                 (dict(data=[[1.0, 2.0, 3.0]]), ValueError, "^data: expected 2 features"),
                                 (dict(data=np.array([[np.nan, 1.0]])), ValueError, "^data: contains NaN")):
        with pytest.raises(error, match=match):
            simulate(jax.random.key(0), **kwargs)
    assert simulate(jax.random.key(0), data=[[1.0, 2.0], [0.0, 1.0]])["x"].shape == (2, 2, 2)


@pytest.mark.parametrize(
    "family, simulate_counts",
    [
        (normal_gamma(2, mean=0.5, kappa=0.7, shape=2.0, rate=1.5), False),
        (dirichlet_multinomial(3, concentration=0.8, total_count=5), True),
        (beta_bernoulli(3, a=0.7, b=1.2), False),
        (normal_known_precision(2, precision=[0.5, 3.0], mean=0.4, prior_variance=[2.0, 0.7]), False),
    ],
    ids=["normal_gamma", "dirichlet_multinomial", "beta_bernoulli", "normal_known_precision"],
)
def test_enumerated_log_density_matches_the_family(family, simulate_counts, x64):
    n_points, n_components, alpha = 5, 4, 1.3
    kwargs = dict(family=family, n_points=n_points, max_clusters=n_components, alpha=alpha)
    draw = Predictive(dp_mixture_program, num_samples=1)(jax.random.key(3), **kwargs)
    draw = {name: value[0] for name, value in draw.items()}
    data = draw["x"].reshape(n_points, -1)
    latent = {name: value for name, value in draw.items() if name not in ("x", "assignments", "weights")}
    model = enum(dp_mixture_program, first_available_dim=-3)
    program_log_joint, _ = log_density(model, (data,), dict(kwargs, n_points=None), latent)

    # The same joint from the family: sticks, base measure, and each point marginalised over z.
    fractions = latent["fractions"]
    log_sticks = stats.beta(1.0, alpha).logpdf(np.asarray(fractions)).sum()
    if family.name == "normal_gamma":
        from zoo.dirichlet.families import GaussianParams

        params = GaussianParams(latent["mean"], latent["precision"])
    elif family.name == "normal_known_precision":  # no precision site: the family fixes it
        from zoo.dirichlet.families import GaussianParams

        params = GaussianParams(latent["mean"], jnp.broadcast_to(jnp.array([0.5, 3.0]), latent["mean"].shape))
    elif family.name == "dirichlet_multinomial":
        from zoo.dirichlet.families import MultinomialParams

        params = MultinomialParams(jnp.log(latent["probs"]))
    else:
        from zoo.dirichlet.families import BernoulliParams

        params = BernoulliParams(jnp.log(latent["probs"]) - jnp.log1p(-latent["probs"]))
    log_base = jnp.sum(jax.vmap(family.log_base_density)(params))
    log_weights = jnp.log(stick_breaking_weights(fractions))
    log_lik = jax.vmap(jax.vmap(family.log_likelihood, (0, None)), (None, 0))(params, data)
    log_marginal_points = jax.scipy.special.logsumexp(log_weights + log_lik, axis=1).sum()
    expected = log_sticks + float(log_base) + float(log_marginal_points)
    np.testing.assert_allclose(float(program_log_joint), expected, rtol=1e-9)
    if simulate_counts:
        np.testing.assert_array_equal(np.asarray(data).sum(-1), 5)


# ----------------------------------------------------------------------------- the model
SEPARATED = np.concatenate(
    [np.random.default_rng(0).normal(center, 0.3, size=(8, 2)) for center in (-4.0, 0.0, 4.0)]
)
TRUTH = np.repeat([0, 1, 2], 8)


@pytest.fixture(scope="module")
def fitted():
    model = DPMixture(normal_gamma(2), algorithm="collapsed", alpha=1.0, max_clusters=8)
    with pytest.warns(MixingWarning, match="log_joint"):  # 2 x 30 draws: bulk ESS far below 400
        fit = model.fit(SEPARATED, jax.random.key(0), n_chains=2, n_warmup=20, n_draws=30, progress=False)
    return model, fit


def test_fit_recovers_separated_clusters(fitted):
    model, fit = fitted
    assert fit.result.samples["assignments"].shape == (2, 30, len(SEPARATED))
    scores = fit.scores(TRUTH)
    assert scores["RI"] == 1.0 and scores["VI"] == 0.0
    # fit warned already (the fixture); summary() does not repeat it, a fit made from the draws does.
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        table = fit.summary()
    with pytest.warns(MixingWarning, match="log_joint"):
        assert DPMixtureFit(fit.result).summary().equals(table)
    assert "n_clusters" in table.index and table.loc["alpha", "status"] == "constant"
    assert fit.co_clustering().shape == (len(SEPARATED), len(SEPARATED))
    # One chain warns as its card speaks (split R-hat), where it was silent.
    with pytest.warns(MixingWarning, match="^Too few effective draws to rely on split R-hat.*the chain holds 30 draws"):
        single = model.fit(SEPARATED, jax.random.key(0), n_chains=1, n_warmup=20, n_draws=30, progress=False)
    assert "Too few effective draws to rely on split R-hat" in repr(single)
    # alpha=1.0 is held fixed: the view for ArviZ leaves it out (az.summary warned of a division by zero for it).
    assert set(fit.label_invariant().posterior.data_vars) == {"n_clusters", "log_joint", "partition_entropy"}


def test_warnings_point_at_the_users_line_also_through_a_library_function():
    # cdp_partition calls DPMixture.fit: its MixingWarning names this file, not zoo/baselines.py
    # (a warning pointed at a library line shows once per process under Python's default filter).
    from zoo.baselines import cdp_partition

    with pytest.warns(MixingWarning) as record:
        cdp_partition(SEPARATED, key=jax.random.key(0), n_chains=2, n_warmup=5, n_draws=10)
    mixing = [warning for warning in record if warning.category is MixingWarning]
    assert [warning.filename for warning in mixing] == [__file__]
    # Once, with advice in the function's terms: it returns labels, not a fit to resume.
    message = str(mixing[0].message)
    assert "fit.resume(data" not in message and "cdp_partition's n_warmup and n_draws" in message


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_split_merge_fit_starting_from_one_cluster_recovers_separated_clusters():
    model = DPMixture(normal_gamma(2), algorithm="conjugate", alpha=1.0, max_clusters=8, n_split_merge=2)
    fit = model.fit(SEPARATED, jax.random.key(1), n_chains=2, n_warmup=10, n_draws=20, init="single", progress=False)
    assert fit.scores(TRUTH)["RI"] == 1.0
    # The moves accepted in each draw's sweep are kept with the draws (not in the InferenceData,
    # whose every (chain, draw) statistic the HTML report would judge for mixing).
    accepted = fit.result.samples["split_merge_accepted"]
    assert accepted.shape == (2, 20) and accepted.min() >= 0 and accepted.max() <= 2
    assert "split_merge_accepted" not in fit.idata.sample_stats


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_dispersed_starts_take_turns_and_the_chains_meet():
    model = DPMixture(normal_gamma(2), algorithm="collapsed", max_clusters=8, n_split_merge=2)
    # The starting partitions themselves (no sweep records them): one cluster, K-means with
    # min(16, K_max) = 8 clusters, random labels among min(10, K_max) = 8, then one cluster again.
    starts = model._initial_labels("dispersed", 4, SEPARATED, np.random.default_rng(0))
    assert [np.unique(row).size for row in starts] == [1, 8, 8, 1]
    kmeans = starts[1]
    assert all(np.unique(kmeans[TRUTH == k]).size <= 3 for k in range(3))  # K-means cuts within the blobs
    np.testing.assert_array_equal(model._initial_labels("kmeans", 2, SEPARATED, np.random.default_rng(0))[0], kmeans)
    fit = model.fit(SEPARATED, jax.random.key(2), n_chains=4, n_warmup=20, n_draws=20, init="dispersed",
                    progress=False)
    assert (np.median(fit.result.samples["n_clusters"], axis=1) == 3).all() and fit.scores(TRUTH)["RI"] == 1.0
    with pytest.raises(ValueError, match="^init: must be one of 'dispersed', 'random', 'single', 'kmeans'"):
        model.fit(SEPARATED, jax.random.key(2), init="spread", progress=False)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_same_key_same_fit(fitted):
    model, fit = fitted
    again = model.fit(SEPARATED, jax.random.key(0), n_chains=2, n_warmup=20, n_draws=30, progress=False)
    np.testing.assert_array_equal(fit.result.samples["assignments"], again.result.samples["assignments"])
    other = model.fit(SEPARATED, jax.random.key(5), n_chains=2, n_warmup=20, n_draws=30, progress=False)
    assert not np.array_equal(fit.result.samples["log_joint"], other.result.samples["log_joint"])


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_until_mixed_stops_once_the_chains_mix_with_the_draws_of_a_run_without_it(fitted):
    from inference.diagnostics import mixes

    model, _ = fitted  # its compiled sampler serves every run here
    key, run = jax.random.key(5), dict(n_chains=2, n_warmup=20, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)  # it ends mixing: no warning
        fit = model.fit(SEPARATED, key, n_draws=100_000, until_mixed=True, **run)
    n_draws = fit.result.n_draws
    assert 200 <= n_draws < 100_000 and fit.result.completed  # 2 chains need 200 draws each for ESS 400
    assert fit.result.stopped_by == "mixed" and "ended when the chains mixed" in " ".join(repr(fit).split())
    assert mixes(fit.mixing), fit.mixing
    # Asked every tenth more draws: the run before the last question did not mix yet.
    plain = model.fit(SEPARATED, key, n_draws=n_draws, **run)
    for name, values in plain.result.samples.items():
        np.testing.assert_array_equal(fit.result.samples[name], values)
    with pytest.warns(MixingWarning):
        short = model.fit(SEPARATED, key, n_draws=30, **run)
    resumed = short.resume(SEPARATED, n_draws=100_000, until_mixed=True, progress=False)
    assert resumed.result.n_draws < 100_030 and mixes(resumed.mixing)
    np.testing.assert_array_equal(resumed.result.samples["log_joint"][:, :30], short.result.samples["log_joint"])
    # A rule that cannot hold within n_draws leaves the run whole, with its warning.
    with pytest.warns(MixingWarning):
        whole = model.fit(SEPARATED, key, n_draws=40, until_mixed=True, **run).result
    assert whole.n_draws == 40 and whole.stopped_by == "n_draws"
    with pytest.raises(TypeError, match="^until_mixed: expected a bool"):
        model.fit(SEPARATED, key, n_draws=40, until_mixed="yes", **run)


def test_the_default_fit_runs_until_the_chains_mix():
    # Four chains of 500 draws, the fixed default until 2026-12-03, warned on the standardised iris
    # data (key 0: R-hat of K 1.016, bulk ESS 382); by default the run now goes on until the chains
    # mix, 10,000 draws at most (4,000 until 2026-12-05). Algorithm 8, the default sampler until
    # 2026-12-05: key 1 500 draws, keys 0 to 3 400 to 750; Algorithm 3, the default since: key 1 230
    # draws, keys 0 to 3 230 to 500.
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    from inference.diagnostics import mixes
    from zoo.dirichlet import custom_family
    from zoo.dirichlet.mixture import DEFAULT_DRAWS, DEFAULT_SPLIT_MERGE, UNTIL_MIXED_DRAWS

    data = StandardScaler().fit_transform(load_iris().data)
    model = DPMixture(normal_gamma(4))
    # Algorithm 3 with split-merge moves where the family has a marginal likelihood (Algorithm 8
    # until 2026-12-05), Algorithm 8 where it has not.
    assert model.algorithm == "collapsed" and model.n_split_merge == DEFAULT_SPLIT_MERGE
    likelihood_only = custom_family(normal_gamma(4).log_likelihood, normal_gamma(4).sample_base)
    assert DPMixture(likelihood_only).algorithm == "auxiliary"
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)  # it ends mixing: no warning
        fit = model.fit(data, jax.random.key(1), progress=False)
    assert fit.result.n_draws < UNTIL_MIXED_DRAWS and fit.result.completed and mixes(fit.mixing), fit.mixing
    # Asked for a run without the rule, it draws the fixed default.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        assert model.fit(data, jax.random.key(1), n_warmup=0, until_mixed=False,
                         progress=False).result.n_draws == DEFAULT_DRAWS


def test_a_short_run_is_told_to_run_longer_not_that_its_chains_sit_at_one_height():
    # 25 draws per chain on the standardised iris data: the log joint's chain means lay within its
    # sd and K's differed (R-hat 1.20), so the warning said the chains held partitions of equal height
    # that more sweeps would not join, though the log joint itself had R-hat 1.179 and bulk ESS 22 and
    # the chains, continued, mixed at 565 draws. 100 draws in all cannot bear that advice out.
    from sklearn.datasets import load_iris

    data = load_iris().data
    data = (data - data.mean(0)) / data.std(0)
    with pytest.warns(MixingWarning) as record:
        fit = DPMixture(normal_gamma(4)).fit(data, jax.random.key(4), n_draws=25, progress=False)
    message = str(record[0].message)
    assert "same height" not in message and "neither more sweeps" not in message
    assert "Run longer (fit.resume(data, n_draws=..., until_mixed=True) continues these chains)" in message
    assert fit.mixing.loc["n_clusters", "status"] == "not mixing"


def _three_tight_clusters() -> np.ndarray:
    """90 standardised points in three clusters far apart: K 3 in most draws."""
    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(centre, 0.15, (30, 2)) for centre in (-3.0, 0.0, 3.0)])
    return (points - points.mean(0)) / points.std(0)


def test_until_mixed_wants_enough_draws_before_a_constant_ends_the_run():
    # The sub-cluster sampler held one partition in the first 20 draws of all four chains; the first
    # question of an until-mixed run found every quantity constant and ended the run there, silent
    # ("a posterior concentrated on one state"), though K moves from the 33rd draw on. A constant now
    # ends a run only once the chains hold 400 draws in all (inference.diagnostics.mixes_to_stop).
    from inference.diagnostics import mixes, mixing_verdict

    data, key = _three_tight_clusters(), jax.random.key(1)
    model = DPMixture(normal_gamma(2), algorithm="subcluster")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        first = model.fit(data, key, n_draws=20, progress=False)  # what the first question saw
    assert set(first.mixing["status"]) == {"constant"} and mixes(first.mixing)
    with pytest.warns(MixingWarning):
        fit = model.fit(data, key, n_draws=150, until_mixed=True, progress=False)
    assert fit.result.n_draws == 150 and set(np.unique(fit.result.samples["n_clusters"])) == {3, 4}
    np.testing.assert_array_equal(fit.result.samples["assignments"][:, :20], first.result.samples["assignments"])
    # A posterior that stays on one partition (α 1e-4: no fourth cluster is opened) still ends the run,
    # at the first question with 100 draws per chain, and says so without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        still = DPMixture(normal_gamma(2), alpha=1e-4).fit(data, key, progress=False)
    assert still.result.n_draws == 100 and still.result.completed and set(still.mixing["status"]) == {"constant"}
    assert mixing_verdict(still.mixing).startswith("Nothing to assess")


def test_a_family_without_the_parts_for_better_moves_is_told_which_to_give():
    # A custom_family of a log-likelihood and a G0 sampler alone runs Algorithm 8 without split-merge
    # moves, its parameters redrawn by Metropolis-Hastings from G0 proposals (seldom accepted in 12
    # dimensions). The advice asked for split-merge moves it cannot make (or, at one height, said that
    # more sweeps and moves did not help elsewhere) and never named the parts that would help.
    from zoo.dirichlet import custom_family
    from zoo.dirichlet.mixture import _missing_parts_advice

    gaussian = normal_gamma(12)
    likelihood_only = custom_family(gaussian.log_likelihood, gaussian.sample_base, n_features=12, name="gauss12")
    rng = np.random.default_rng(0)
    data = np.concatenate([rng.normal(centre, 1.0, (20, 12)) for centre in (-2.0, 0.0, 2.0)])
    with pytest.warns(MixingWarning) as record:
        DPMixture(likelihood_only).fit(data, jax.random.key(0), n_draws=30, progress=False)
    message = str(record[0].message)
    assert ("The family 'gauss12' gives the sampler no split-merge moves, and Algorithm 8 redraws each cluster's "
            "parameters by Metropolis-Hastings with proposals from G0") in message
    assert "point_stats with sample_posterior" in message and "or with log_marginal" in message
    assert "meanwhile, run longer (fit.resume(data, n_draws=..., until_mixed=True) continues these chains)" in message
    assert "more split-merge moves per sweep" not in message and "neither more sweeps" not in message
    # With exact draws of the parameters, only the marginal likelihood is missing.
    with_posterior = custom_family(gaussian.log_likelihood, gaussian.sample_base, point_stats=gaussian.point_stats,
                                   sample_posterior=gaussian.sample_posterior, name="exact")
    advice = _missing_parts_advice(DPMixture(with_posterior), None)
    assert advice.startswith("The family 'exact' gives the sampler no split-merge moves, which need its marginal")
    assert "Metropolis" not in advice and "log_marginal" in advice and advice.endswith(
        "meanwhile, run longer, or again with more chains from dispersed starts.")
    # Families with the parts keep the usual advice.
    assert _missing_parts_advice(DPMixture(gaussian), None) == ""
    assert _missing_parts_advice(DPMixture(gaussian, algorithm="auxiliary", n_split_merge=0), None) == ""


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_a_pickled_fit_that_does_not_mix_warns_again_in_its_summary(fitted):
    # Whether the fit had issued its warning was pickled with it: loaded in a new session, summary()
    # said nothing of chains that do not mix.
    import pickle

    _, fit = fitted  # warned when it was made (30 draws)
    assert fit._warned
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        fit.summary()  # not twice in one session
    restored = pickle.loads(pickle.dumps(fit))
    with pytest.warns(MixingWarning, match="log_joint"):
        restored.summary()
    assert fit._warned


def test_resume_continues_the_chains_as_one_longer_run(fitted):
    import pickle

    from inference.diagnostics import mixing_verdict
    from inference.provenance import ProvenanceWarning

    model, _ = fitted  # its settings and calls of 10 sweeps: the fixture's compiled sampler serves every run here
    key, run = jax.random.key(4), dict(n_chains=2, n_warmup=20, progress=False)
    whole = model.fit(SEPARATED, key, n_draws=20, **run)
    first = model.fit(SEPARATED, key, n_draws=10, **run)
    resumed = pickle.loads(pickle.dumps(first)).resume(SEPARATED, n_draws=10, progress=False)
    with pytest.warns(RuntimeWarning, match=r"before their first draw.*continue it with fit\.resume\(data, n_draws"):
        stopped = model.fit(SEPARATED, key, n_draws=20, time_budget=1e-9, **run)  # stops after one call
    assert stopped.result.next_sweep == 10 and not stopped.result.samples
    # the rest of the warm-up first, then the draws, in two resumptions
    finished = stopped.resume(SEPARATED, n_draws=10, progress=False).resume(SEPARATED, n_draws=10, progress=False)
    for fit in (resumed, finished):
        for name, values in whole.result.samples.items():
            np.testing.assert_array_equal(fit.result.samples[name], values)
        assert fit.result.next_sweep == whole.result.next_sweep == 40 and fit.result.n_warmup == 20
        assert fit.idata.posterior.sizes["draw"] == 20 and fit.result.completed
    assert first.result.samples["assignments"].shape[1] == 10  # the resumed fit is left as it was
    # 20 draws cannot reach a bulk ESS of 400: the advice names the call that continues the chains.
    # (Here the R-hats pass, so it says to draw more; chains that do not mix are told to run longer.)
    assert "Draw more (fit.resume(data, n_draws=..., until_mixed=True) continues these chains), or again with more " \
        "chains." \
        in mixing_verdict(whole.mixing)
    # A fit made from the draws alone cannot name the call.
    assert "Draw more, or again with more chains." in mixing_verdict(DPMixtureFit(whole.result).mixing)

    with pytest.raises(ValueError, match="^data: not the data"):
        first.resume(SEPARATED[:-1], n_draws=2)
    with pytest.raises(ValueError, match="same shape, other values"):
        first.resume(SEPARATED + 1.0, n_draws=2)
    with pytest.raises(ValueError, match="^n_draws"):
        first.resume(SEPARATED, n_draws=0)
    with pytest.raises(ValueError, match="^fit: only a fit returned by DPMixture.fit"):
        DPMixtureFit(first.result).resume(SEPARATED, n_draws=2)
    elsewhere = DPMixtureFit(first.result._replace(provenance={**first.result.provenance, "host_cpu": "other"}))
    elsewhere._continuation = first._continuation
    with pytest.warns(ProvenanceWarning, match="host_cpu 'other' then"):
        elsewhere.resume(SEPARATED, n_draws=10, progress=False)


def test_bad_input_names_the_argument(fitted):
    model, fit = fitted
    family = normal_gamma(2)
    with pytest.raises(ValueError, match="^data: contains NaN"):
        model.fit(np.where(np.eye(24, 2) > 0, np.nan, SEPARATED), jax.random.key(0))
    with pytest.raises(ValueError, match="^data: expected 2 features .* build it for 3 .* n_features=3"):
        model.fit(np.zeros((5, 3)), jax.random.key(0))
    with pytest.raises(ValueError, match="^labels"):
        fit.scores(TRUTH[:-1])
    with pytest.raises(ValueError, match="^alpha"):
        DPMixture(family, alpha=0.0)
    with pytest.raises(ValueError, match="^alpha"):
        DPMixture(family, alpha=-1.0)
    with pytest.raises(ValueError, match="^max_clusters"):
        DPMixture(family, max_clusters=0)
    with pytest.raises(ValueError, match="^n_auxiliary"):
        DPMixture(family, n_auxiliary=0)
    with pytest.raises(ValueError, match="^n_split_merge"):
        DPMixture(family, n_split_merge=-2)
    with pytest.raises(ValueError, match="^split_merge_scans"):
        DPMixture(family, split_merge_scans=-1)
    with pytest.raises(ValueError, match="^algorithm: 'subcluster' makes its own"):
        DPMixture(family, algorithm="subcluster", split_merge_scans=3)
    with pytest.raises(ValueError, match="^algorithm"):
        DPMixture(family, algorithm="gibbs")
    with pytest.raises(ValueError, match="^backend"):
        DPMixture(family, backend="cuda")
    with pytest.raises(TypeError, match="^family"):
        DPMixture("gaussian")
    with pytest.raises(TypeError, match="^alpha_prior"):
        DPMixture(family, alpha_prior=(1.0, 1.0))
    with pytest.raises(ValueError, match="^init"):
        model.fit(SEPARATED, jax.random.key(0), init=np.zeros(5, int))
    with pytest.raises(ValueError, match="^init"):
        model.fit(SEPARATED, jax.random.key(0), init="kmeans++")
    with pytest.raises(ValueError, match="^n_chains"):
        model.fit(SEPARATED, jax.random.key(0), n_chains=0)


def log_evidence(family, data, *, alpha: float, alpha_prior=None) -> float:
    """log p(data) of the DP mixture, every partition enumerated (α fixed, or integrated against a
    Gamma(shape, rate) prior by quadrature): the predictive p(x | data) is then
    p(data, x) / p(data), with no Chinese-restaurant weights of new points in the computation."""
    log_weights = log_partition_weights(family, data, alpha=alpha, alpha_prior=alpha_prior)
    return float(special.logsumexp(list(log_weights.values())))


@pytest.mark.parametrize("algorithm, alpha_prior", [("collapsed", None), ("subcluster", (2.0, 1.5))])
def test_log_predictive_density_is_the_exact_posterior_predictive(algorithm, alpha_prior):
    # Four points, every partition enumerated: p(x | data) = p(data, x) / p(data). The fit's
    # estimate averages 8,000 draws (sd about 0.001 in log density over seeds); the Chinese-
    # restaurant predictive of the point-estimate partition alone misses by 0.04-0.16.
    new = np.array([[-1.0], [0.0], [2.5]])
    prior = None if alpha_prior is None else GammaPrior(*alpha_prior)
    exact = np.array([log_evidence(FAMILY_1D, np.vstack([DATA_4, x]), alpha=0.8, alpha_prior=alpha_prior)
                      for x in new]) - log_evidence(FAMILY_1D, DATA_4, alpha=0.8, alpha_prior=alpha_prior)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit = DPMixture(FAMILY_1D, alpha=0.8, alpha_prior=prior, algorithm=algorithm).fit(
            DATA_4, jax.random.key(1), n_chains=4, n_draws=2000, n_warmup=50, progress=False)
    estimate = fit.log_predictive_density(DATA_4, new)
    np.testing.assert_allclose(estimate, exact, atol=0.006)
    by_chain = fit.log_predictive_density(DATA_4, new, by_chain=True)
    assert by_chain.shape == (4, 3) and np.all(np.abs(by_chain - exact) < 0.02)
    np.testing.assert_allclose(np.log(np.mean(np.exp(by_chain), axis=0)), estimate, rtol=1e-12)


@pytest.mark.parametrize("alpha_prior", [None, (2.0, 1.5)])
def test_loo_is_the_exact_leave_one_out_predictive(alpha_prior):
    # Six points, every partition enumerated: p(x_i | x₋ᵢ) = p(x) / p(x₋ᵢ). From one fit on all six,
    # each point's draws reweighted (PSIS); measured within 0.0027 and 0.0028 with these 8,000 draws. The
    # same draws' plain average of p(x_i | z₋ᵢ, α, x₋ᵢ), whose draws have seen x_i, misses by more than
    # 0.015 (0.019 with α fixed).
    prior = None if alpha_prior is None else GammaPrior(*alpha_prior)
    exact = np.array([log_evidence(FAMILY_1D, DATA_6, alpha=0.8, alpha_prior=alpha_prior)
                      - log_evidence(FAMILY_1D, np.delete(DATA_6, i, axis=0), alpha=0.8, alpha_prior=alpha_prior)
                      for i in range(len(DATA_6))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit = DPMixture(FAMILY_1D, alpha=0.8, alpha_prior=prior, algorithm="collapsed").fit(
            DATA_6, jax.random.key(1), n_chains=4, n_draws=2000, n_warmup=50, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's Pareto k warning: few partitions, tied weights
        loo = fit.loo(DATA_6)
    np.testing.assert_allclose(np.asarray(loo.loo_i), exact, atol=0.006)
    np.testing.assert_allclose(loo.elpd_loo, exact.sum(), atol=0.02)
    assert loo.pareto_k.shape == (6,) and np.isnan(loo.p_loo)
    samples = fit.result.samples
    plain = special.logsumexp(leave_one_out_log_likelihood(FAMILY_1D, DATA_6, samples["assignments"],
                                                           samples["alpha"]).reshape(-1, 6), axis=0) - np.log(8000)
    assert np.abs(plain - exact).max() > 0.015
    with pytest.raises(ValueError, match="^data: not the data"):
        fit.loo(DATA_6 + 1.0)
    with pytest.raises(ValueError, match="^fit: only a fit returned by DPMixture.fit"):
        DPMixtureFit(fit.result).loo(DATA_6)


def test_loo_fits_again_without_the_points_it_cannot_reweight(monkeypatch):
    # Few draws with tied weights: ArviZ's tail fit gave every point k̂ > 0.7 (up to inf), though their
    # importance ratios stay within 1.4 times their mean and their estimates within 0.007 nats of the
    # exact ones; bounded ratios now count as reliable (k̂ 0).
    exact = np.array([log_evidence(FAMILY_1D, DATA_6, alpha=0.8)
                      - log_evidence(FAMILY_1D, np.delete(DATA_6, i, axis=0), alpha=0.8) for i in range(6)])
    model = DPMixture(FAMILY_1D, alpha=0.8, algorithm="collapsed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit = model.fit(DATA_6, jax.random.key(2), n_chains=2, n_draws=300, n_warmup=50, progress=False)
        warnings.simplefilter("error", UserWarning)
        bounded = fit.loo(DATA_6)
    assert np.all(np.asarray(bounded.pareto_k) == 0) and not bounded.warning
    np.testing.assert_allclose(np.asarray(bounded.loo_i), exact, atol=0.008)
    # Without that rule (only uniform ratios taken for bounded), ArviZ's k̂ leaves some points unreliable.
    # Those are fitted again without them (as ArviZ's reloo), which gives their exact leave-one-out
    # density; the others keep theirs.
    monkeypatch.setattr("zoo.dirichlet.mixture.LOO_RATIO_EXPONENT", 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        with pytest.warns(UserWarning, match="Estimated shape parameter of Pareto"):  # ArviZ's k̂ warning
            kept = fit.loo(DATA_6)
        warnings.simplefilter("error", UserWarning)  # with refit, the points it names are fitted again: no warning
        again = fit.loo(DATA_6, refit=True, key=jax.random.key(3), n_chains=4, n_draws=2000, n_warmup=50)
    unreliable = np.asarray(kept.pareto_k) > kept.good_k
    assert unreliable.any() and (~unreliable).any()
    np.testing.assert_allclose(np.asarray(again.loo_i)[unreliable], exact[unreliable], atol=0.006)
    np.testing.assert_array_equal(np.asarray(again.loo_i)[~unreliable], np.asarray(kept.loo_i)[~unreliable])
    assert np.all(np.asarray(again.pareto_k)[unreliable] == 0) and not again.warning
    np.testing.assert_allclose(again.elpd_loo, np.asarray(again.loo_i).sum(), rtol=1e-12)
    with pytest.raises(ValueError, match="^key: refit=True"):
        fit.loo(DATA_6, refit=True)
    with pytest.raises(TypeError, match="^refit"):
        fit.loo(DATA_6, refit="yes")


def test_loo_of_points_whose_draws_never_change_is_exact_not_unreliable():
    # Two groups 40 sd apart: every draw holds the same partition, so each point's leave-one-out
    # log-likelihood is one number, its importance weights uniform and its estimate exact. ArviZ's tail
    # fit of constant weights gave k̂ = inf for all 60 points, its warning, and with refit=True 60 refits.
    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(-20, 1, (30, 2)), rng.normal(20, 1, (30, 2))])
    fit = DPMixture(normal_gamma(2)).fit(points, jax.random.key(0), n_chains=2, n_draws=50, n_warmup=20,
                                         progress=False)
    assert (fit.mixing["status"] == "constant").all()
    samples = fit.result.samples
    each = leave_one_out_log_likelihood(fit._continuation.model.family, points.astype(np.float32),
                                        samples["assignments"], samples["alpha"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loo = fit.loo(points)
    assert np.all(np.asarray(loo.pareto_k) == 0) and not loo.warning
    np.testing.assert_allclose(np.asarray(loo.loo_i), np.asarray(each)[0, 0], rtol=1e-6)
    # Rows of a DataFrame with labels of their own name the points of the draws and of the LOO, also resumed.
    import pandas as pd

    frame = pd.DataFrame(points, index=[f"p{i}" for i in range(60)])
    named = DPMixture(normal_gamma(2)).fit(frame, jax.random.key(0), n_chains=2, n_draws=50, n_warmup=20,
                                           progress=False)
    np.testing.assert_array_equal(named.result.samples["assignments"], fit.result.samples["assignments"])
    for idata in (named.idata, named.resume(frame, n_draws=5, progress=False).idata):
        assert list(idata.posterior.points.values[:2]) == ["p0", "p1"]
    assert list(named.loo(frame).loo_i.points.values[-1:]) == ["p59"]


def test_log_predictive_density_refuses_what_it_cannot_score(fitted):
    model, fit = fitted
    with pytest.raises(ValueError, match="^data: not the data"):
        fit.log_predictive_density(SEPARATED + 1.0, SEPARATED[:2])
    with pytest.raises(ValueError, match="^new_points: expected 2 features"):
        fit.log_predictive_density(SEPARATED, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="^new_points: contains NaN"):
        fit.log_predictive_density(SEPARATED, [[0.0, np.nan]])
    with pytest.raises(ValueError, match="^new_points: is empty"):
        fit.log_predictive_density(SEPARATED, np.zeros((0, 2)))
    with pytest.raises(TypeError, match="^by_chain"):
        fit.log_predictive_density(SEPARATED, SEPARATED[:2], by_chain="yes")
    with pytest.raises(ValueError, match="^fit: only a fit returned by DPMixture.fit"):
        DPMixtureFit(fit.result).log_predictive_density(SEPARATED, SEPARATED[:2])


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_a_dataframe_fit_matches_later_dataframes_by_column_name(fitted):
    # As scikit-learn's feature_names_in_: a DataFrame whose columns are the fit's in another order is reordered
    # to the fit's (they were taken by position: iris' reversed columns scored 8 nats lower, in silence); other
    # names are refused, named; arrays are taken by position.
    import pickle

    import pandas as pd

    model, plain = fitted  # its settings: the fixture's compiled sampler serves these runs
    frame = pd.DataFrame(SEPARATED * [1.0, 3.0], columns=["x", "y"])  # unequal scales: a swap of columns matters
    swapped = frame[["y", "x"]]
    fit = model.fit(frame, jax.random.key(0), n_chains=2, n_warmup=20, n_draws=30, progress=False)
    assert fit.feature_names == ("x", "y") and plain.feature_names is None
    reference = fit.log_predictive_density(frame, frame.iloc[:3])
    np.testing.assert_array_equal(fit.log_predictive_density(frame, swapped.iloc[:3]), reference)
    np.testing.assert_array_equal(fit.log_predictive_density(swapped, frame.to_numpy()[:3]), reference)
    assert np.all(np.abs(fit.log_predictive_density(frame, swapped.to_numpy()[:3]) - reference) > 1.0)  # by position
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's Pareto k warning: 60 draws
        np.testing.assert_array_equal(fit.loo(swapped).loo_i, fit.loo(frame).loo_i)
    restored = pickle.loads(pickle.dumps(fit))
    assert restored.feature_names == ("x", "y")
    resumed = restored.resume(swapped, n_draws=10, progress=False)  # the digest of the fit's columns
    assert resumed.feature_names == ("x", "y") and resumed.result.samples["assignments"].shape == (2, 40, 24)
    renamed = frame.rename(columns={"y": "z"})
    with pytest.raises(ValueError, match=r"^new_points: its column names are not the feature names of the fit "
                                         r"\(missing 'y'; unexpected 'z'\); those of the fit are 'x', 'y'$"):
        fit.log_predictive_density(frame, renamed)
    with pytest.raises(ValueError, match=r"^data: its column names are not the feature names of the fit "
                                         r"\(missing 'y'\)"):
        fit.log_predictive_density(frame[["x"]], frame)
    with pytest.raises(ValueError, match=r"^data: its column names .*\(missing 'y'; unexpected 'z'\)"):
        fit.resume(renamed, n_draws=2)
    with pytest.raises(ValueError, match=r"^data: its column names .*\(missing 'y'; unexpected 'z'\)"):
        fit.loo(renamed)
    # A fit of an array has no feature names: a DataFrame is then taken by position, whatever its names.
    numbered = pd.DataFrame(SEPARATED[:2], columns=["b", "a"])
    np.testing.assert_array_equal(plain.log_predictive_density(SEPARATED, numbered),
                                  plain.log_predictive_density(SEPARATED, SEPARATED[:2]))


def test_rows_named_by_a_multiindex_name_the_points_by_their_text(fitted):
    # A DataFrame indexed by two columns (set_index, groupby): its tuples could not be a coordinate,
    # and the fit failed inside xarray after every chain had run (until 2026-12-08).
    import pandas as pd

    model, _ = fitted
    frame = pd.DataFrame(SEPARATED, columns=["x", "y"],
                         index=pd.MultiIndex.from_product([["a", "b"], range(12)], names=["group", "number"]))
    fit = model.fit(frame, jax.random.key(0), n_chains=2, n_warmup=5, n_draws=5, progress=False)
    assert list(fit.idata.posterior.points.values[:2]) == ["('a', 0)", "('a', 1)"]
    assert fit.idata.posterior.points.values[-1] == "('b', 11)"


def test_a_dataframe_names_its_non_numeric_and_tied_columns():
    from zoo.dirichlet.ties import TiedValuesWarning

    import pandas as pd

    frame = pd.DataFrame(SEPARATED, columns=["x", "y"])
    species = frame.assign(species=np.repeat(["a", "b", "c"], 8))
    with pytest.raises(TypeError, match=r"^data: expected numbers, got dtype object \(non-numeric column: "
                                        r"'species' \(object\)\)$"):
        DPMixture(normal_gamma(3)).fit(species, jax.random.key(0))
    with pytest.raises(TypeError, match=r"^data: expected numbers, got dtype object$"):  # an array has no names
        DPMixture(normal_gamma(3)).fit(species.to_numpy(), jax.random.key(0))
    rated = frame.assign(rating=(TRUTH > 0).astype(float))  # 16 of 24 points rated 1: tied, not constant
    # The data are checked before anything runs: n_chains=0 is refused right after the warning.
    for data, shown in ((rated, "'rating'"), (rated.to_numpy(), "2")):
        with pytest.warns(TiedValuesWarning, match=rf"^data: 1 of 3 features .*\(0 constant; columns {shown}\)\."), \
                pytest.raises(ValueError, match="^n_chains"):
            DPMixture(normal_gamma(3)).fit(data, jax.random.key(0), n_chains=0)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # 3 draws
@pytest.mark.parametrize("algorithm", ["collapsed", "subcluster"])
def test_a_start_with_more_clusters_than_max_clusters_is_kept(algorithm):
    # Twelve groups started at the truth with max_clusters=4: the capacity fits the start (as
    # SupervisedDP's does), so the chains hold more clusters than max_clusters from their first
    # draw (how many of the twelve stay apart is the Normal-Gamma prior's business); with
    # on_overflow="raise" the capacity is fixed, so the start is refused naming init.
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(12), 5)
    data = 10.0 * rng.normal(size=(12, 2))[labels] + 0.1 * rng.normal(size=(60, 2))
    model = DPMixture(normal_gamma(2), algorithm=algorithm, max_clusters=4)
    fit = model.fit(data, jax.random.key(0), n_chains=2, n_warmup=0, n_draws=3, init=labels, progress=False)
    assert np.all(np.asarray(fit.result.samples["n_clusters"]) > 4), fit.result.samples["n_clusters"]
    with pytest.raises(ValueError, match="^init: uses 12 clusters"):
        DPMixture(normal_gamma(2), algorithm=algorithm, max_clusters=4, on_overflow="raise").fit(
            data, jax.random.key(0), init=labels, progress=False)


# ----------------------------------------------------------------------------- mixing on real data
def _digits_and_dispersed_starts(n_points):
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    digits = load_digits()
    rows = np.sort(np.random.default_rng(0).choice(len(digits.target), size=n_points, replace=False))
    data = StandardScaler().fit_transform(digits.data[rows]).astype(np.float32)
    rng = np.random.default_rng(1)
    starts = [np.zeros(n_points, int), rng.integers(0, 10, n_points)]
    starts += [KMeans(n_clusters=k, n_init=1, random_state=k).fit_predict(data) for k in (20, 50)]
    return data, np.stack(starts)


def _spread_and_within(log_joint):
    """Range of the chains' mean log joints, and the largest within-chain sd."""
    return np.ptp(log_joint.mean(axis=1)), log_joint.std(axis=1).max()


def test_cdp_chains_on_digits_meet_where_normal_gamma_chains_stay_apart():
    """DM05's CDP (identity precision) on 300 standardised digits: four chains from one cluster,
    random labels and K-means with 20 and 50 clusters end in one region (R-hat of the log joint
    near 1, chain means within their own spread, K within one cluster of each other). The same data
    under learned Normal–Gamma precisions, whose modes follow the tied pixels, end in modes many
    within-chain sds apart — and the fit says so."""
    data, starts = _digits_and_dispersed_starts(300)
    cdp = DPMixture(normal_known_precision(64), alpha_prior=GammaPrior(1.0, 1.0), algorithm="collapsed",
                    max_clusters=64)
    fit = cdp.fit(data, jax.random.key(0), n_chains=4, n_warmup=150, n_draws=300, init=starts, progress=False)
    samples = fit.result.samples
    spread, within = _spread_and_within(samples["log_joint"])
    assert fit.mixing.loc["log_joint", "r_hat"] < 1.05 and spread < 3 * within, (spread, within)
    assert np.ptp(samples["n_clusters"].mean(axis=1)) <= 1.0

    learned = DPMixture(normal_gamma(64), alpha_prior=GammaPrior(1.0, 1.0), algorithm="auxiliary", n_auxiliary=3,
                        reuse_auxiliary=True, max_clusters=64)
    with pytest.warns(MixingWarning, match="Chains do NOT mix"), pytest.warns(Warning, match="features take one value"):
        apart = learned.fit(data, jax.random.key(0), n_chains=4, n_warmup=150, n_draws=150, init=starts,
                            progress=False)
    spread, within = _spread_and_within(apart.result.samples["log_joint"])
    assert spread > 10 * within, (spread, within)


def test_new_models_of_the_same_settings_reuse_the_compiled_sampler():
    # Each new DPMixture(normal_gamma(D)) compiled its sweeps again (7-10 s for a small fit on
    # 2 cores): the families and steps of equal settings are now the same objects.
    from inference.chains import _run_calls_jit

    assert normal_gamma(3) is normal_gamma(3, mean=0, rate=np.float32(1.0))
    assert normal_gamma(3, rate=[1.0, 2.0, 3.0]) is normal_gamma(3, rate=np.arange(1, 4))
    assert normal_gamma(3) is not normal_gamma(3, rate=2.0)
    assert normal_known_precision(2, precision=1) is normal_known_precision(2, precision=1.0)
    assert dirichlet_multinomial(4) is dirichlet_multinomial(4) and beta_bernoulli(4) is beta_bernoulli(4)
    rate = np.array([1.0, 2.0, 3.0])
    family = normal_gamma(3, rate=rate)
    rate[0] = 5.0  # the family keeps its own copy of the caller's values
    assert family is normal_gamma(3, rate=[1.0, 2.0, 3.0]) is not normal_gamma(3, rate=rate)
    for algorithm in ("collapsed", "auxiliary", "subcluster"):
        assert DPMixture(normal_gamma(3), algorithm=algorithm).step is DPMixture(normal_gamma(3), algorithm=algorithm).step
    assert DPMixture(normal_gamma(3), n_split_merge=2).step is not DPMixture(normal_gamma(3)).step

    data = np.random.default_rng(0).normal(size=(12, 3))
    fit = lambda seed: DPMixture(normal_gamma(3), algorithm="collapsed", max_clusters=8).fit(  # noqa: E731
        data, jax.random.key(seed), n_chains=2, n_warmup=2, n_draws=4, draws_per_call=2, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        first = fit(0)
        compiled = _run_calls_jit.cache_size()
        second = fit(0)
    assert _run_calls_jit.cache_size() == compiled  # no new compilation
    np.testing.assert_array_equal(first.result.samples["assignments"], second.result.samples["assignments"])


def test_features_far_from_the_priors_scale_warn_and_standardised_ones_do_not():
    # Raw iris under normal_gamma's defaults: two clusters in every draw, the prior setting them; the
    # warning names the feature (its mean 5.84 lies 4 of the prior's 1.41 from 0) and the remedy.
    from sklearn.datasets import load_iris

    from zoo.dirichlet import SupervisedDP
    from zoo.dirichlet.known_precision import normal_known_precision
    from zoo.dirichlet.scale import ScaleWarning, off_scale_features

    frame = load_iris(as_frame=True).data
    options = dict(n_chains=1, n_warmup=2, n_draws=4, progress=False)
    with pytest.warns(ScaleWarning, match=r"^data: 1 of 4 features is far from the scale the prior expects \(mean 0, "
                                          r"standard deviation about 1.41\): column 'sepal length \(cm\)' \(the first: "
                                          r"mean 5.84.*centre each feature and scale it to unit variance"):
        DPMixture(normal_gamma(4)).fit(frame, jax.random.key(0), **options)
    with pytest.warns(ScaleWarning, match=r"^data: 4 of 4 features are far .*: columns 0, 1, 2, 3"):
        DPMixture(normal_known_precision(4)).fit(frame.to_numpy() * 1e3, jax.random.key(0), **options)
    standardised = ((frame - frame.mean()) / frame.std()).to_numpy()
    assert off_scale_features(standardised, 0.0, np.sqrt(2.0)).size == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaleWarning)
        DPMixture(normal_gamma(4)).fit(standardised, jax.random.key(0), **options)
        # A prior set to the data's scale is not warned of either.
        DPMixture(normal_gamma(4, mean=frame.mean().to_numpy(), rate=frame.var().to_numpy())).fit(
            frame, jax.random.key(0), **options)
    with pytest.warns(ScaleWarning, match=r"^train_features and test_features: 4 of 4 features are far"):
        SupervisedDP(1).fit(standardised[:50] + 100, np.zeros(50, int), standardised[50:] + 100, jax.random.key(0),
                            n_chains=1, n_sweeps=4, progress=False)


def test_chains_drawn_at_one_float_width_refuse_to_continue_at_the_other():
    # The chains' states keep their float width: continued in a session of the other, the error says so
    # (it said the data had "other values", or a JAX scan's carry types differed).
    from inference.diagnostics import MixingWarning
    from zoo.dirichlet import SupervisedDP
    from zoo.relational import InfiniteRelational, load_florentine_families

    points = np.random.default_rng(0).normal(size=(30, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit = DPMixture(normal_gamma(2)).fit(points, jax.random.key(0), n_chains=2, n_warmup=2, n_draws=3,
                                             progress=False)
        supervised = SupervisedDP(1).fit(points[:20], np.repeat([0, 1], 10), points[20:], jax.random.key(0),
                                         n_chains=2, n_warmup=2, n_draws=3, progress=False)
        network = load_florentine_families()
        irm = InfiniteRelational(n_split_merge=0).sample(network, jax.random.key(0), n_chains=1, n_warmup=2,
                                                         n_draws=2, progress=False)
    drawn = bool(jax.config.jax_enable_x64)
    width = "true \\(float64" if drawn else "false \\(float32"
    jax.config.update("jax_enable_x64", not drawn)
    try:
        with pytest.raises(ValueError, match=rf"^fit: these chains were drawn with jax_enable_x64 {width} states\)"
                                             rf'.*jax.config.update\("jax_enable_x64", {drawn}\)'):
            fit.resume(points, n_draws=2, progress=False)
        with pytest.raises(ValueError, match=rf"^fit: these chains were drawn with jax_enable_x64 {width}"):
            supervised.resume(points[:20], np.repeat([0, 1], 10), points[20:], n_draws=2, progress=False)
        with pytest.raises(ValueError, match=rf"^result: these chains were drawn with jax_enable_x64 {width}"):
            irm.resume(network, n_draws=2, progress=False)
    finally:
        jax.config.update("jax_enable_x64", drawn)


@pytest.mark.parametrize("make, algorithm", [(normal_gamma, "collapsed"), (normal_known_precision, "collapsed"),
                                             (normal_gamma, "auxiliary"), (normal_gamma, "subcluster")])
def test_points_far_from_zero_under_a_prior_there_are_fitted_as_the_same_points_about_zero(make, algorithm):
    # Points 2^14 from 0 with their prior's mean (as docs/dirichlet_in_practice.md offers instead of
    # centring): float32 sums of squares x² of such points lose the clusters' spread (an offset of
    # 10,000 gave a log joint of -163.9 where float64 gives -232.6, and K 4.0 instead of 2.6, until
    # 2026-12-08). The kernels work about the prior's mean, so the fit is that of the same points
    # about 0 under the prior at 0, bit for bit (the shift is exact in float64), and so are its
    # predictive densities, its leave-one-out and its continuation.
    rng = np.random.default_rng(0)
    near = np.r_[rng.normal(-2, 0.5, 30), rng.normal(2, 0.5, 30)][:, None].astype(np.float32)
    offset = 2.0 ** 14
    far = near.astype(np.float64) + offset
    options = dict(n_chains=2, n_warmup=10, n_draws=30, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit_near = DPMixture(make(1), algorithm=algorithm).fit(near, jax.random.key(0), **options)
        fit_far = DPMixture(make(1, mean=offset), algorithm=algorithm).fit(far, jax.random.key(0), **options)
        for name in ("assignments", "log_joint", "n_clusters"):
            np.testing.assert_array_equal(fit_far.result.samples[name], fit_near.result.samples[name], err_msg=name)
        new = np.array([[-2.0], [0.0], [2.0]])
        np.testing.assert_array_equal(fit_far.log_predictive_density(far, new + offset),
                                      fit_near.log_predictive_density(near, new))
        np.testing.assert_array_equal(np.asarray(fit_far.loo(far).loo_i), np.asarray(fit_near.loo(near).loo_i))
        np.testing.assert_array_equal(fit_far.resume(far, n_draws=5).result.samples["assignments"],
                                      fit_near.resume(near, n_draws=5).result.samples["assignments"])
