"""Tests for inference.diagnostics: ArviZ conversion and label-invariant summaries.

The chain results are built by hand (no sampling), so the expected values are known exactly.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from inference import diagnostics
from inference.chains import ChainResult
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
    assert set(idata.sample_stats.data_vars) == {"n_clusters", "log_joint"}
    assert idata.posterior.attrs["n_warmup"] == 10 and idata.posterior.attrs["thin"] == 2


def test_summary_is_label_invariant_and_drops_constants():
    result = synthetic_result()
    table = diagnostics.summary(diagnostics.to_inference_data(result))
    assert list(table.index) == ["n_clusters", "alpha", "log_joint"]
    np.testing.assert_allclose(table.loc["n_clusters", "mean"], result.samples["n_clusters"].mean(), atol=1e-3)
    # i.i.d. draws: R-hat close to 1 and bulk ESS near the number of draws.
    assert np.all(table["r_hat"] < 1.02)
    assert table.loc["log_joint", "ess_bulk"] > 0.7 * N_CHAINS * N_DRAWS
    constant = diagnostics.summary(diagnostics.to_inference_data(synthetic_result(constant_alpha=True)))
    assert "alpha" not in constant.index
    view = diagnostics.label_invariant(diagnostics.to_inference_data(result))
    np.testing.assert_allclose(az.rhat(view)["n_clusters"].values, table.loc["n_clusters", "r_hat"], atol=0.01)


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
