"""Tests for inference.diagnostics: ArviZ conversion and label-invariant summaries.

The chain results are built by hand (no sampling), so the expected values are known exactly.
"""

from __future__ import annotations

import warnings

import arviz as az
import jax
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from inference import diagnostics
from inference.chains import ChainResult
from inference.diagnostics import (MIXING_STATUSES, NOT_MIXING_STATUSES, PASSING_STATUSES, MixingWarning, mixing_table,
                                   mixing_verdict, warn_if_not_mixing)
from inference.partitions import co_clustering, point_partition

N_CHAINS, N_DRAWS, N_POINTS = 4, 300, 5


def synthetic_result(constant_alpha: bool = False, seed: int = 0) -> ChainResult:
    rng = np.random.default_rng(seed)
    # Points 0-1 and 3-4 always together, point 2 with the first pair half of the time.
    first = np.where(rng.random((N_CHAINS, N_DRAWS)) < 0.5, 0, 1)
    labels = np.stack(
        [np.zeros((N_CHAINS, N_DRAWS), int), np.zeros((N_CHAINS, N_DRAWS), int), first,
         np.full((N_CHAINS, N_DRAWS), 2), np.full((N_CHAINS, N_DRAWS), 2)],
        axis=-1,
    )
    # Relabel half the draws: labels are exchangeable, the summaries must not care.
    labels = np.where(rng.random((N_CHAINS, N_DRAWS, 1)) < 0.5, 7 - labels, labels)
    n_clusters = np.array([[len(np.unique(draw)) for draw in chain] for chain in labels])
    alpha = np.full((N_CHAINS, N_DRAWS), 1.5) if constant_alpha else rng.gamma(2.0, 1.0, (N_CHAINS, N_DRAWS))
    return ChainResult(
        samples={
            "assignments": labels.astype(np.int32),
            "alpha": alpha.astype(np.float32),
            "n_clusters": n_clusters.astype(np.int32),
            "log_joint": rng.normal(-50.0, 2.0, (N_CHAINS, N_DRAWS)).astype(np.float32),
        },
        final_state={"assignments": labels[:, -1]},
        n_warmup=10,
        thin=2,
        completed=True,
        seconds=1.0,
    )


def test_inference_data_layout():
    idata = diagnostics.to_inference_data(synthetic_result(), point_names=list("abcde"))
    assert set(idata.groups()) == {"posterior", "sample_stats"}
    assignments = idata.posterior["assignments"]
    assert assignments.dims == ("chain", "draw", "points")
    assert assignments.shape == (N_CHAINS, N_DRAWS, N_POINTS)
    assert list(assignments.coords["points"].values) == list("abcde")
    assert idata.posterior["alpha"].dims == ("chain", "draw")
    assert set(idata.sample_stats.data_vars) == {"n_clusters", "log_joint", "partition_entropy"}
    assert idata.posterior.attrs["n_warmup"] == 10 and idata.posterior.attrs["thin"] == 2


def test_provenance_says_what_made_the_draws_and_survives_netcdf(tmp_path):
    made = diagnostics.provenance()
    assert made["inference_library"] == "latentzoo"
    assert made["jax_version"] == jax.__version__ and made["jax_backend"] == jax.default_backend()
    assert made["jax_enable_x64"] == str(bool(jax.config.jax_enable_x64)).lower()
    assert made["host_cpu"] and all(isinstance(value, str) for value in made.values())
    diagnostics.to_inference_data(synthetic_result()).to_netcdf(tmp_path / "fit.nc")
    restored = az.from_netcdf(tmp_path / "fit.nc").posterior.attrs
    assert {key: restored[key] for key in made} == made


def test_summary_is_label_invariant_and_marks_constants():
    result = synthetic_result()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)  # i.i.d. draws mix: no warning
        table = diagnostics.summary(diagnostics.to_inference_data(result))
    assert list(table.index) == ["n_clusters", "alpha", "log_joint", "partition_entropy"]
    assert list(table.columns) == ["mean", "sd", "ess_bulk", "ess_tail", "r_hat", "status"]
    assert list(table["status"]) == ["ok"] * 4
    np.testing.assert_allclose(table.loc["n_clusters", "mean"], result.samples["n_clusters"].mean(), atol=1e-3)
    # i.i.d. draws: R-hat close to 1 and bulk ESS near the number of draws.
    assert np.all(table["r_hat"] < 1.02)
    assert table.loc["log_joint", "ess_bulk"] > 0.7 * N_CHAINS * N_DRAWS
    constant = diagnostics.summary(diagnostics.to_inference_data(synthetic_result(constant_alpha=True)))
    assert constant.loc["alpha", "status"] == "constant" and constant.loc["alpha", "mean"] == 1.5
    assert constant.loc["alpha", ["r_hat", "ess_bulk", "ess_tail"]].isna().all()  # not computed
    view = diagnostics.label_invariant(diagnostics.to_inference_data(result))
    np.testing.assert_allclose(az.rhat(view)["n_clusters"].values, table.loc["n_clusters", "r_hat"], atol=0.01)


def test_label_invariant_keeps_the_attributes_and_every_scalar_of_the_draws():
    # The view az.summary or a report gets: the fit's warm-up, thinning and provenance kept (they were
    # dropped), and any other numeric scalar per draw, as a supervised fit's n_types and alpha_types.
    idata = diagnostics.to_inference_data(synthetic_result())
    idata.sample_stats["n_types"] = idata.sample_stats["n_clusters"] + 1
    view = diagnostics.label_invariant(idata)
    assert list(view.posterior.data_vars) == ["n_clusters", "alpha", "log_joint", "partition_entropy", "n_types"]
    assert view.posterior.attrs == idata.posterior.attrs and view.posterior.attrs["n_warmup"] == 10
    assert list(diagnostics.summary(idata, warn=False).index)[-1] == "n_types"


def test_the_view_for_arviz_leaves_out_a_concentration_held_fixed():
    # A fixed alpha (one value in every draw) has no R-hat: az.summary of the view warned
    # "invalid value encountered in scalar divide" for it. summary() still lists it as constant.
    idata = diagnostics.to_inference_data(synthetic_result(constant_alpha=True))
    idata.posterior["alpha_types"] = idata.posterior["alpha"] * 0 + 0.5
    idata.sample_stats["n_types"] = idata.sample_stats["n_clusters"] * 0 + 3  # constant, but not a setting: kept
    view = diagnostics.label_invariant(idata)
    assert list(view.posterior.data_vars) == ["n_clusters", "log_joint", "partition_entropy", "n_types"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        az.summary(diagnostics.label_invariant(diagnostics.to_inference_data(synthetic_result(constant_alpha=True))))
    assert diagnostics.summary(idata, warn=False).loc["alpha", "status"] == "constant"
    assert "alpha" in diagnostics.label_invariant(diagnostics.to_inference_data(synthetic_result())).posterior


def test_r_hat_above_the_limit_is_never_printed_as_the_limit():
    # 1.0100313 fails R-hat <= 1.01; printed to three decimals as "1.01", the warning read as a contradiction.
    assert diagnostics.rhat_text(1.0100313) == "1.01003" and diagnostics.rhat_text(1.010455) == "1.0105"
    assert diagnostics.rhat_text(1.00987) == "1.01" and diagnostics.rhat_text(1.0123) == "1.012"
    assert diagnostics.rhat_text(float("inf")) == "inf" and diagnostics.rhat_text(12.34) == "12.3"
    table = pd.DataFrame({"r_hat": [1.0100313], "ess_bulk": [900.0], "ess_tail": [900.0], "status": ["not mixing"]},
                         index=["partition_entropy"])
    assert "partition_entropy (not mixing: R-hat 1.01003, bulk ESS 900)" in diagnostics.mixing_verdict(table)


def test_partition_entropy_tells_apart_chains_with_the_same_k_in_different_cuts():
    entropy = diagnostics.partition_entropy
    assert entropy(np.zeros(6, np.int32)) == 0.0
    np.testing.assert_allclose(entropy(np.arange(6)), np.log(6))
    # Sizes (2, 1, 1) of 4 points under two labellings: -(½ log ½ + 2 · ¼ log ¼) = 1.5 log 2.
    np.testing.assert_allclose(entropy(np.array([[0, 0, 1, 2], [9, 9, 4, 7]])), [1.5 * np.log(2)] * 2)
    # Two chains at K = 2 in every draw, with i.i.d. log joints and α: one moves a point between
    # sizes (8, 2) and (7, 3), the other between (5, 5) and (6, 4). K, α and the log joint pass;
    # only the entropy says the chains cut the data differently.
    rng = np.random.default_rng(0)
    n_draws = 400
    first_sizes = np.stack([rng.choice([8, 7], n_draws), rng.choice([5, 6], n_draws)])
    labels = (np.arange(10)[None, None, :] >= first_sizes[..., None]).astype(np.int32)
    result = ChainResult(
        samples={"assignments": labels, "alpha": rng.gamma(2.0, 1.0, (2, n_draws)).astype(np.float32),
                 "n_clusters": np.full((2, n_draws), 2, np.int32),
                 "log_joint": rng.normal(-50.0, 2.0, (2, n_draws)).astype(np.float32)},
        final_state={}, n_warmup=0, thin=1, completed=True, seconds=1.0,
    )
    with pytest.warns(MixingWarning, match="partition_entropy"):
        table = diagnostics.summary(diagnostics.to_inference_data(result))
    assert table.loc["n_clusters", "status"] == "constant"
    assert table.loc["alpha", "status"] == "ok" and table.loc["log_joint", "status"] == "ok"
    assert table.loc["partition_entropy", "status"] == "not mixing" and table.loc["partition_entropy", "r_hat"] > 2
    # An InferenceData without the recorded entropy (saved before it was) gets it from the labels.
    idata = diagnostics.to_inference_data(result)
    stored = idata.sample_stats["partition_entropy"].values
    del idata.sample_stats["partition_entropy"]
    np.testing.assert_array_equal(diagnostics.label_invariant(idata).posterior["partition_entropy"].values, stored)
    with pytest.raises(ValueError, match="assignments"):
        entropy(np.array([[0, -1]]))
    with pytest.raises(ValueError, match="assignments"):
        entropy(np.zeros((2, 3)))


def test_co_clustering_and_point_estimate():
    result = synthetic_result()
    idata = diagnostics.to_inference_data(result)
    matrix = diagnostics.co_clustering_matrix(idata)
    assert matrix.dims == ("points", "points_other")
    np.testing.assert_allclose(matrix.values, co_clustering(result.samples["assignments"]))
    assert matrix.values[0, 1] == 1.0 and matrix.values[3, 4] == 1.0 and matrix.values[0, 3] == 0.0
    np.testing.assert_allclose(matrix.values[0, 2], np.mean(result.samples["assignments"][..., 2] == result.samples["assignments"][..., 0]))
    estimate = diagnostics.point_estimate(idata, loss="binder")
    np.testing.assert_array_equal(estimate, point_partition(result.samples["assignments"], loss="binder"))
    assert estimate[0] == estimate[1] and estimate[3] == estimate[4] and estimate[0] != estimate[3]


def test_bad_inputs_are_rejected():
    with pytest.raises(TypeError, match="^result"):
        diagnostics.to_inference_data({"assignments": np.zeros((1, 1, 2))})
    empty = synthetic_result()._replace(samples={})
    with pytest.raises(ValueError, match="^result: has no draws"):
        diagnostics.to_inference_data(empty)
    with pytest.raises(ValueError, match="^point_names"):
        diagnostics.to_inference_data(synthetic_result(), point_names=["a"])
    with pytest.raises(TypeError, match="^idata"):
        diagnostics.summary("posterior")
    with pytest.raises(ValueError, match="^idata"):
        diagnostics.co_clustering_matrix(az.from_dict(posterior={"x": np.zeros((1, 2))}))
    with pytest.raises(TypeError, match="^posterior"):
        mixing_table(np.zeros((2, 10)))
    with pytest.raises(ValueError, match="^posterior: variable 'assignments'"):
        mixing_table(diagnostics.to_inference_data(synthetic_result()))
    with pytest.raises(ValueError, match="^var_names"):
        mixing_table(_dataset(x=np.zeros((2, 10))), var_names=["y"])
    with pytest.raises(ValueError, match="^rhat_max"):
        mixing_table(_dataset(x=np.zeros((2, 10))), rhat_max=0)
    with pytest.raises(TypeError, match="^table"):
        mixing_verdict(np.zeros(3))
    with pytest.raises(ValueError, match="^table"):
        warn_if_not_mixing(az.summary(np.random.default_rng(0).normal(size=(2, 50)))[["mean"]])


# ----------------------------------------------------------------------------- mixing
RNG = np.random.default_rng(42)
IID = RNG.normal(size=(4, 1000))
WALK = np.cumsum(RNG.normal(size=(4, 1000)), axis=1)  # drifts slowly: far from mixing in 1000 steps
STUCK_K = np.repeat(np.array([[9], [10], [11], [10]]), 1000, axis=1)


def _dataset(**arrays):
    return xr.Dataset({name: (("chain", "draw"), np.asarray(values)) for name, values in arrays.items()})


def _no_mixing_warning(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        return function(*args, **kwargs)


def test_chains_that_never_move_disagree_with_infinite_rhat_and_warn():
    result = synthetic_result()
    result = result._replace(samples=result.samples | {"n_clusters": STUCK_K[:, :N_DRAWS].astype(np.int32)})
    expected = r"do NOT mix: n_clusters \(chains disagree: values by chain 9, 10, 11, 10\)"
    with pytest.warns(MixingWarning, match=expected):
        table = diagnostics.summary(diagnostics.to_inference_data(result))
    row = table.loc["n_clusters"]
    assert row["status"] == "chains disagree"
    assert row["r_hat"] == np.inf  # not NaN, not ArviZ's 1e8
    assert row["ess_bulk"] == 0.0 and row["ess_tail"] == 0.0
    assert table.loc["log_joint", "status"] == "ok"  # the others still judged on their own
    assert table.attrs["chain_constants"]["n_clusters"] == [9.0, 10.0, 11.0, 10.0]
    verdict = mixing_verdict(table)
    assert verdict.startswith("Chains do NOT mix: n_clusters (chains disagree")
    assert "log_joint" not in verdict and "Run longer" in verdict


def test_iid_chains_mix_without_a_warning():
    table = _no_mixing_warning(mixing_table, _dataset(x=IID, k=RNG.poisson(5.0, size=(4, 1000))))
    assert list(table["status"]) == ["ok", "ok"]
    np.testing.assert_allclose(table.loc["x", "r_hat"], az.rhat(IID), rtol=1e-12)
    np.testing.assert_allclose(table.loc["x", "ess_bulk"], az.ess(IID, method="bulk"), rtol=1e-12)
    np.testing.assert_allclose(table.loc["x", "ess_tail"], az.ess(IID, method="tail"), rtol=1e-12)
    np.testing.assert_allclose(table.loc["x", ["mean", "sd"]].to_numpy(float), [IID.mean(), IID.std(ddof=1)])
    assert table.loc["x", "r_hat"] <= 1.01 and table[["ess_bulk", "ess_tail"]].min().min() >= 400
    assert mixing_verdict(table) == "Chains mix: R-hat <= 1.01 and bulk and tail ESS >= 400 for x, k."
    assert _no_mixing_warning(warn_if_not_mixing, table) is False


def test_a_drifting_random_walk_does_not_mix():
    table = mixing_table(_dataset(walk=WALK, x=IID))
    assert table.loc["walk", "status"] == "not mixing" and table.loc["x", "status"] == "ok"
    assert table.loc["walk", "r_hat"] > 1.01 and table.loc["walk", "ess_bulk"] < 400
    assert np.isfinite(table.loc["walk", "r_hat"])
    verdict = mixing_verdict(table)
    assert verdict.startswith("Chains do NOT mix: walk (not mixing: R-hat ")
    assert f"bulk ESS {table.loc['walk', 'ess_bulk']:.0f}" in verdict and "x (" not in verdict
    with pytest.warns(MixingWarning, match="walk") as record:
        assert warn_if_not_mixing(table, stacklevel=1) is True
    assert record[0].filename == __file__  # stacklevel 1: the line calling warn_if_not_mixing
    stricter = mixing_table(_dataset(x=IID), rhat_max=1.0001)
    assert stricter.loc["x", "status"] == "not mixing" and stricter.attrs["rhat_max"] == 1.0001


def test_chains_that_pass_r_hat_with_too_few_effective_draws_are_told_so_not_that_they_do_not_mix():
    # Four chains of 50 independent draws: R-hat passes, but 200 draws cannot give an ESS of 400.
    table = mixing_table(_dataset(x=IID[:, :50], k=RNG.poisson(5.0, size=(4, 50))))
    assert list(table["status"]) == ["few effective draws"] * 2
    assert "few effective draws" in MIXING_STATUSES and "few effective draws" not in (
        PASSING_STATUSES + NOT_MIXING_STATUSES)  # failing, but not a failure to mix
    assert set(PASSING_STATUSES + NOT_MIXING_STATUSES) < set(MIXING_STATUSES)
    assert (table["r_hat"] <= 1.01).all() and (table["ess_bulk"] < 400).all()
    verdict = mixing_verdict(table)
    assert verdict.startswith("Too few effective draws to rely on R-hat, though it is <= 1.01 for every quantity "
                              "assessed: x (few effective draws: R-hat ")
    assert "the chains hold 200 draws in all, so no ESS can reach 400. Draw more, or again with more chains." in verdict
    assert "NOT mix" not in verdict
    with pytest.warns(MixingWarning, match="^Too few effective draws"):
        assert warn_if_not_mixing(table) is True
    # Named with the call that continues the chains, as the run-longer advice is.
    table.attrs["continue_with"] = "fit.resume(data, n_draws=...)"
    assert "Draw more (fit.resume(data, n_draws=...) continues these chains), or again with more chains." in (
        mixing_verdict(table))
    # Enough draws in all: the count is given, without saying that none could reach the threshold.
    long = mixing_table(_dataset(x=IID), ess_min=3900)  # bulk ESS about 3,700 of 4,000 draws
    assert long.loc["x", "status"] == "few effective draws"
    assert "the chains hold 4,000 draws in all. Draw more" in mixing_verdict(long)
    single = mixing_verdict(mixing_table(_dataset(x=IID[:1]), ess_min=2000))
    assert "rely on split R-hat" in single and "the chain holds 1,000 draws in all, so no ESS" in single
    # Beside a quantity whose R-hat fails, the chains do not mix, and each quantity keeps its word.
    both = mixing_table(_dataset(walk=WALK[:, :50], x=IID[:, :50]))
    assert mixing_verdict(both).startswith("Chains do NOT mix: walk (not mixing: R-hat ")
    assert "x (few effective draws: R-hat " in mixing_verdict(both)


def test_constant_quantities_are_kept_marked_and_not_judged():
    table = _no_mixing_warning(mixing_table, _dataset(alpha=np.full((4, 1000), 1.5), x=IID))
    row = table.loc["alpha"]
    assert row["status"] == "constant" and row["mean"] == 1.5 and row["sd"] == 0.0
    assert np.isnan(row["r_hat"]) and np.isnan(row["ess_bulk"]) and np.isnan(row["ess_tail"])
    assert mixing_verdict(table) == ("Chains mix: R-hat <= 1.01 and bulk and tail ESS >= 400 for x "
                                     "(alpha is constant).")
    only = mixing_table(_dataset(alpha=np.full((2, 10), 1.5)))
    assert mixing_verdict(only) == ("Nothing to assess: alpha held one value in every draw of every chain, the "
                                    "same in all chains. Chains from dispersed starts that agree so are what a "
                                    "posterior concentrated on one state gives, but R-hat and ESS are not defined: "
                                    "more draws would show any move.")
    one = mixing_table(_dataset(alpha=np.full((1, 10), 1.5)))
    assert mixing_verdict(one).startswith("Nothing to assess: alpha held one value in every draw of the chain. One "
                                          "chain cannot tell")
    assert _no_mixing_warning(warn_if_not_mixing, only) is False


def test_a_chain_stuck_while_others_move():
    values = RNG.integers(3, 8, size=(4, 1000)).astype(float)
    values[2] = 5.0
    table = mixing_table(_dataset(k=values))
    assert table.loc["k", "status"] == "stuck"
    assert table.attrs["chain_constants"]["k"] == [None, None, 5.0, None]
    assert "k (stuck: chain 2 at 5 never moves, R-hat" in mixing_verdict(table)
    # A chain may legitimately sit on the posterior mode of a discrete quantity: that alone is not "stuck".
    mode = np.where(RNG.random((4, 4000)) < 0.999, 3.0, 4.0)
    mode[1] = 3.0
    assert mixing_table(_dataset(k=mode)).loc["k", "status"] == "ok"


def test_one_chain_uses_split_rhat():
    table = mixing_table(_dataset(x=IID[:1], walk=WALK[:1]))
    assert table.attrs["n_chains"] == 1
    assert table.loc["x", "status"] == "ok" and np.isfinite(table.loc["x", "r_hat"])  # az.rhat gives NaN
    assert table.loc["walk", "status"] == "not mixing" and table.loc["walk", "r_hat"] > 1.01
    assert mixing_verdict(table).startswith("The chain does NOT mix: walk (not mixing")
    assert mixing_verdict(table.loc[["x"]]) == ("The chain mixes: split R-hat <= 1.01 and bulk and tail ESS "
                                                ">= 400 for x.")
    # the single-chain R-hat is ArviZ's rank-normalised split R-hat, which needs two chains itself
    np.testing.assert_allclose(table.loc["walk", "r_hat"], diagnostics.rank_split_rhat(WALK[:1]))
    for chains in (WALK, IID[:2], IID[:, :51]):
        np.testing.assert_allclose(diagnostics.rank_split_rhat(chains), az.rhat(chains), rtol=1e-12)
    # one constant chain is just constant; one chain that jumps once at its middle has infinite R-hat
    assert mixing_table(_dataset(k=np.full((1, 50), 4.0))).loc["k", "status"] == "constant"
    jump = mixing_table(_dataset(k=np.repeat([[3.0, 4.0]], 50, axis=1)))
    assert jump.loc["k", "status"] == "not mixing" and jump.loc["k", "r_hat"] == np.inf


def test_too_few_draws_or_non_finite_draws_cannot_be_judged():
    table = mixing_table(_dataset(x=IID[:, :3]))
    assert table.loc["x", "status"] == "too few draws" and np.isnan(table.loc["x", "r_hat"])
    assert mixing_verdict(table) == "Mixing cannot be judged: x (too few draws: 3 per chain, need 4)."
    bad = IID.copy()
    bad[0, 5] = -np.inf
    table = mixing_table(_dataset(log_joint=bad))
    assert table.loc["log_joint", "status"] == "not finite"
    with pytest.warns(MixingWarning, match="cannot be judged"):
        warn_if_not_mixing(table)


def test_dp_mixture_fit_summary_warns_and_mixing_does_not():
    from zoo.dirichlet.mixture import DPMixtureFit

    result = synthetic_result(constant_alpha=True)
    stuck = result._replace(samples=result.samples | {"n_clusters": STUCK_K[:, :N_DRAWS].astype(np.int32)})
    fit = DPMixtureFit(stuck)
    table = _no_mixing_warning(lambda: fit.mixing)
    assert table.loc["n_clusters", "status"] == "chains disagree" and table.loc["alpha", "status"] == "constant"
    with pytest.warns(MixingWarning, match="n_clusters") as record:
        summary = fit.summary()
    assert record[0].filename == __file__
    assert summary.equals(table)
    assert list(_no_mixing_warning(DPMixtureFit(result).summary)["status"]) == ["ok", "constant", "ok", "ok"]



def test_chains_in_separate_modes_are_named_with_the_best_chain():
    # Four chains that each mix within their own mode, one mode 500 nats above the others.
    offsets = np.array([-2000.0, -1500.0, -2000.0, -2000.0])[:, None]
    table = mixing_table(_dataset(log_joint=offsets + RNG.normal(size=(4, 400))))
    verdict = mixing_verdict(table)
    assert "The chains sit in separate modes: mean log joint by chain -2000, -1500, -2000, -2000" in verdict
    assert "chain 1 is 500 nats above the lowest" in verdict
    # One mode: no sentence about modes.
    assert "separate modes" not in mixing_verdict(mixing_table(_dataset(log_joint=IID - 2000.0)))


def test_chains_that_agree_are_told_apart_from_the_one_below_them():
    # Breast cancer's pattern (the default DPMixture fit, 2026-12-05): three chains in one mode, one
    # 12 nats below. "Chain 0 is 12 nats above the lowest" read as if chains 2 and 3 had not found it.
    offsets = np.array([-14979.0, -14991.0, -14979.7, -14979.2])[:, None]
    verdict = mixing_verdict(mixing_table(_dataset(log_joint=offsets + RNG.normal(size=(4, 400)))))
    assert "mean log joint by chain -14979, -14991, -14980, -14979; chains 0, 2 and 3 agree within 1 nat, " \
           "and chain 1 sits 12 nats below them, so it has not found their mode." in verdict
    offsets = np.array([-2000.2, -1500.0, -1980.2, -1501.0])[:, None]
    verdict = mixing_verdict(mixing_table(_dataset(log_joint=offsets + RNG.normal(size=(4, 400)))))
    assert "chains 1 and 3 agree within 1 nat, and chains 0 and 2 sit 500 and 480 nats below them, so they " \
           "have not found their mode." in verdict


def test_chains_at_one_height_in_different_partitions_are_told_to_report_the_spread():
    # The digits' and breast cancer's pattern: every chain at the same log joint, each holding its
    # own number of clusters. Running longer is not the advice then; the spread is to be reported.
    k = STUCK_K + (np.random.default_rng(7).random(size=STUCK_K.shape) < 0.01)  # moves now and then, in its chain
    table = mixing_table(_dataset(n_clusters=k, log_joint=5.0 * IID - 1000.0))
    assert table.attrs["means_by_chain"]["n_clusters"] == pytest.approx(k.mean(axis=1))
    verdict = mixing_verdict(table)
    assert "The chains reach the same height (mean log joint by chain -1000, -1000, -1000, -1000" in verdict
    assert "but differ in the number of clusters:" in verdict
    assert "(mean number of clusters by chain 9.0, 10.0, 11.0, 10.0)" in verdict
    assert "Run longer" not in verdict
    # Chains in separate modes, or whose K only mixes slowly (R-hat below 1.1): run longer.
    for log_joint, n_clusters in ((np.array([[0.0], [0.0], [0.0], [300.0]]) + IID - 1000.0, k),
                                  (5.0 * IID - 1000.0, np.round(WALK / 40.0 + IID))):
        table = mixing_table(_dataset(n_clusters=n_clusters, log_joint=log_joint))
        assert table.loc["n_clusters", "status"] != "ok"
        assert "Run longer" in mixing_verdict(table) and "same height" not in mixing_verdict(table)
    # Chains of one mean K whose split R-hat fails (each drifts the same way, as short runs do) do not
    # "differ in the number of clusters": run longer.
    drift = np.repeat(np.repeat([[4.0, 5.0, 6.0, 6.0]], 250, axis=1), 4, axis=0)
    drifting = mixing_table(_dataset(n_clusters=drift + (RNG.random(drift.shape) < 0.02),
                                     log_joint=5.0 * IID - 1000.0))
    assert drifting.loc["n_clusters", "r_hat"] > 1.1 and np.ptp(drifting.attrs["means_by_chain"]["n_clusters"]) < 0.1
    assert "Run longer" in mixing_verdict(drifting) and "same height" not in mixing_verdict(drifting)
    # A sampler's own advice comes first.
    table.attrs["advice"] = "Do this."
    assert mixing_verdict(table).endswith("Do this.")


def test_chains_at_one_height_are_told_so_only_when_the_log_joint_bears_it_out():
    # Short runs look like chains at one height in different partitions: each chain still near its
    # start, the log joint's sd wide. DPMixture on the standardised iris data after 25 draws per
    # chain (log joint R-hat 1.179, bulk ESS 22) was told that more sweeps would not join its chains;
    # they mixed at 565 draws per chain. Each condition on the log joint alone now gives "Run longer".
    k = STUCK_K + (np.random.default_rng(3).random(size=STUCK_K.shape) < 0.2)  # each chain at its own K
    draws = np.arange(1000)
    cases = {
        # 60 draws per chain, 240 in all: the log joint agrees (R-hat ~1, bulk ESS ~280), but no
        # quantity could reach an ESS of 400 yet.
        "few draws in all": (k[:, :60], 5.0 * IID[:, :60] - 1000.0),
        # Every chain drifts the same way (one mean per chain, so within the sd): split R-hat > 1.1.
        "log joint drifts": (k, np.linspace(-40.0, 0.0, 1000) + 5.0 * IID - 1000.0),
        # Slow swings in step in every chain: R-hat ~1, but a bulk ESS below HEIGHT_ESS_MIN.
        "few effective draws of the log joint": (k, 10.0 * np.sin(2 * np.pi * draws / 250) + IID - 1000.0),
    }
    for case, (n_clusters, log_joint) in cases.items():
        table = mixing_table(_dataset(n_clusters=n_clusters, log_joint=log_joint))
        # Everything else as for the chains that get the advice: K apart in means and R-hat, one height.
        assert table.loc["n_clusters", "status"] == "not mixing" and table.loc["n_clusters", "r_hat"] > 1.1, case
        assert np.ptp(table.attrs["log_joint_by_chain"]) < max(10.0, table.loc["log_joint", "sd"]), case
        verdict = mixing_verdict(table)
        assert "same height" not in verdict and "Run longer" in verdict, (case, verdict)
        assert diagnostics.equal_height_advice(table) == "", case
    few, drifting, slow = (mixing_table(_dataset(n_clusters=n, log_joint=lj)) for n, lj in cases.values())
    assert few.loc["log_joint", "r_hat"] <= 1.01 and few.loc["log_joint", "ess_bulk"] >= diagnostics.HEIGHT_ESS_MIN
    assert drifting.loc["log_joint", "r_hat"] > diagnostics.RHAT_APART
    assert slow.loc["log_joint", "r_hat"] <= 1.01 and slow.loc["log_joint", "ess_bulk"] < diagnostics.HEIGHT_ESS_MIN
    # The same chains, long and with a log joint that mixes, are told the spread is to be reported.
    assert "The chains reach the same height" in mixing_verdict(mixing_table(_dataset(
        n_clusters=k, log_joint=5.0 * IID - 1000.0)))


def test_a_constant_ends_an_until_mixed_run_only_after_enough_draws_to_show_a_move():
    # The sub-cluster sampler on three easy clusters held one partition in the first 20 draws of all
    # four chains and stopped there, though K moved later. mixes() passes constants (a fixed α is one);
    # mixes_to_stop, the rule of the until-mixed runs, wants ESS_MIN draws in all first.
    from inference.diagnostics import ESS_MIN, mixes, mixes_to_stop

    for n_chains in (1, 2, 4):
        enough = ESS_MIN // n_chains
        for n_draws, stops in ((20, False), (enough - 1, False), (enough, True)):
            table = mixing_table(_dataset(n_clusters=np.full((n_chains, n_draws), 3),
                                          log_joint=np.full((n_chains, n_draws), -180.5)))
            assert mixes(table) and set(table["status"]) == {"constant"}
            assert mixes_to_stop(table) is stops, (n_chains, n_draws)
    # A fixed α beside quantities that mix: those have ESS 400 already, so nothing changes.
    table = mixing_table(_dataset(alpha=np.ones((4, 1000)), log_joint=IID))
    assert diagnostics.mixes(table) and diagnostics.mixes_to_stop(table)
    # What does not mix never stops the run.
    table = mixing_table(_dataset(alpha=np.ones((4, 1000)), log_joint=WALK))
    assert not mixes(table) and not mixes_to_stop(table)
    with pytest.raises(TypeError, match="^table: expected a pandas.DataFrame"):
        mixes_to_stop("table")


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_a_pickled_relational_result_that_does_not_mix_warns_again_in_its_summary():
    # IRMResult kept whether sample() had warned in its pickle: loaded in a new session, its summary()
    # said nothing of chains that do not mix.
    import pickle

    from test_infinite import _one_domain_data
    from zoo.relational import InfiniteRelational

    result = InfiniteRelational().sample(_one_domain_data(), key=jax.random.key(0), n_chains=2, n_sweeps=12,
                                         n_warmup=4, progress=False)
    assert result._warned and not diagnostics.mixes(result.mixing)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        result.summary()  # warned once, in this session
    restored = pickle.loads(pickle.dumps(result))
    with pytest.warns(MixingWarning, match="do NOT mix|Too few effective draws"):
        restored.summary()
    assert result._warned  # the result pickled is left as it was


def test_from_dict_in_order_keeps_each_groups_order_and_passes_the_rest_through():
    # ArviZ before 0.23 sorted from_dict's variables by name; the fits' tables follow this order.
    draws = np.arange(20.0).reshape(2, 10)
    idata = diagnostics.from_dict_in_order(
        posterior={"z": draws, "assignments": np.zeros((2, 10, 3)), "a": draws + 1},
        sample_stats={"n_clusters": draws, "log_joint": -draws},
        coords={"points": ["p", "q", "r"]},
        dims={"assignments": ["points"]},
    )
    assert list(idata.posterior.data_vars) == ["z", "assignments", "a"]
    assert list(idata.sample_stats.data_vars) == ["n_clusters", "log_joint"]
    assert list(idata.posterior["points"].values) == ["p", "q", "r"]
    np.testing.assert_array_equal(idata.sample_stats["log_joint"].values, -draws)


def test_constant_chains_that_all_started_from_one_partition_cannot_be_judged():
    # Chains that never leave a start they share agree whatever the posterior: the table cannot count that.
    constants = {"n_clusters": np.full((4, 200), 1), "log_joint": np.full((4, 200), -5.0)}
    table = mixing_table(diagnostics.from_dict_in_order(posterior=constants))  # az.from_dict sorted before 0.23
    assert diagnostics.mixes(table) and diagnostics.mixes_to_stop(table)
    table.attrs["one_start"] = True
    assert not diagnostics.mixes(table) and not diagnostics.mixes_to_stop(table)
    assert diagnostics.mixing_verdict(table).startswith("Mixing cannot be judged: n_clusters, log_joint held one value")
    # What moved is judged as before: a quantity that mixes shows the chains left their start.
    moving = mixing_table(az.from_dict(posterior={"n_clusters": np.full((4, 1000), 1),
                                                  "log_joint": np.random.default_rng(0).normal(size=(4, 1000))}))
    moving.attrs["one_start"] = True
    assert diagnostics.mixes(moving)


def test_a_dp_fit_whose_chains_share_one_start_and_stay_there_warns():
    from zoo.dirichlet import DPMixture, normal_gamma

    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(-1.5, 0.3, (40, 2)), rng.normal(1.5, 0.3, (40, 2))])
    points = (points - points.mean(axis=0)) / points.std(axis=0)
    model = DPMixture(normal_gamma(2), n_split_merge=0, alpha=1e-3)  # no move opens the second cluster
    with pytest.warns(MixingWarning, match="all started from one partition"):
        fit = model.fit(points, jax.random.key(0), n_chains=2, init="single", n_warmup=0, n_draws=50, progress=False)
    assert fit.mixing.attrs["one_start"] and (fit.result.samples["n_clusters"] == 1).all()
    # Labels given for every chain alike are one start too; different labels per chain are not.
    labels = np.repeat([0, 1], 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        same = model.fit(points, jax.random.key(0), n_chains=2, init=labels, n_warmup=0, n_draws=5, progress=False)
        apart = model.fit(points, jax.random.key(0), n_chains=2, init=np.stack([labels, np.zeros(80, int)]),
                          n_warmup=0, n_draws=5, progress=False)
    assert same.mixing.attrs.get("one_start") and not apart.mixing.attrs.get("one_start")


def test_why_saved_chains_stopped_is_read_back_and_a_value_of_no_run_is_refused():
    assert diagnostics.stopped_by_attribute({"stopped_by": "mixed"}) == "mixed"
    assert diagnostics.stopped_by_attribute({"completed": 1}) is None  # files written before it was kept
    with pytest.raises(ValueError, match=r"^idata: the posterior's attribute stopped_by is 'tired', not one of"):
        diagnostics.stopped_by_attribute({"stopped_by": "tired"})
