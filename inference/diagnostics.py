"""Dirichlet-process chains as ArviZ ``InferenceData``, with label-invariant diagnostics.

Cluster labels are exchangeable — relabelling the clusters of a draw gives an equally probable
draw — so R-hat and ESS of the labels themselves mean nothing. Convergence is judged on
label-invariant quantities: the number of clusters K, the concentration α and the log joint
density (DESIGN.md, "Dimensions and ArviZ"); the partition itself is summarised by the posterior
co-clustering matrix and a point estimate (:mod:`inference.partitions`).

Layout of :func:`to_inference_data`:

* ``posterior``: ``assignments`` (chain, draw, points), ``alpha`` (chain, draw);
* ``sample_stats``: ``n_clusters`` and ``log_joint`` (chain, draw);
* attributes of ``posterior``: warm-up sweeps, thinning, whether the run completed, seconds.
"""

from __future__ import annotations

from typing import Any, Sequence

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from inference.chains import ChainResult
from inference.partitions import co_clustering, point_partition

__all__ = [
    "to_inference_data",
    "label_invariant",
    "summary",
    "co_clustering_matrix",
    "point_estimate",
]

LABEL_INVARIANT = ("n_clusters", "alpha", "log_joint")


def _check_result(result: Any) -> ChainResult:
    if not isinstance(result, ChainResult):
        raise TypeError(f"result: expected a ChainResult, got {type(result).__name__}")
    missing = {"assignments", "alpha", "n_clusters", "log_joint"} - set(result.samples)
    if missing:
        raise ValueError(f"result: has no draws of {sorted(missing)} (was it stopped before the first draw?)")
    return result


def to_inference_data(result: ChainResult, *, point_names: Sequence[Any] | None = None) -> az.InferenceData:
    """Convert Dirichlet-process chains to ``arviz.InferenceData``.

    Parameters
    ----------
    result : ChainResult
        Output of :func:`inference.chains.sample_chains` recorded with
        :func:`inference.chains.record_gibbs`.
    point_names : sequence, optional
        Coordinates of the ``points`` dimension (default 0..N-1).

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior`` and ``sample_stats`` (see the module docstring).

    Raises
    ------
    ValueError
        If the result holds no draws, or ``point_names`` has the wrong length.
    """
    result = _check_result(result)
    assignments = np.asarray(result.samples["assignments"])
    n_points = assignments.shape[-1]
    if point_names is None:
        point_names = np.arange(n_points)
    elif len(point_names) != n_points:
        raise ValueError(f"point_names: expected {n_points} names, got {len(point_names)}")
    idata = az.from_dict(
        posterior={"assignments": assignments, "alpha": np.asarray(result.samples["alpha"])},
        sample_stats={
            "n_clusters": np.asarray(result.samples["n_clusters"]),
            "log_joint": np.asarray(result.samples["log_joint"]),
        },
        coords={"points": list(point_names)},
        dims={"assignments": ["points"]},
    )
    idata.posterior.attrs.update(
        n_warmup=result.n_warmup,
        thin=result.thin,
        completed=int(result.completed),
        sampling_seconds=result.seconds,
    )
    return idata


def _check_idata(idata: Any) -> az.InferenceData:
    if not isinstance(idata, az.InferenceData):
        raise TypeError(f"idata: expected an arviz.InferenceData, got {type(idata).__name__}")
    if "posterior" not in idata.groups() or "assignments" not in idata.posterior:
        raise ValueError("idata: needs a posterior group with 'assignments' (see to_inference_data)")
    return idata


def label_invariant(idata: az.InferenceData) -> az.InferenceData:
    """The label-invariant quantities K, α and log joint, all in one ``posterior`` group.

    ArviZ's plots and diagnostics read the ``posterior`` group, so this view is what to pass to
    ``az.plot_trace``, ``az.plot_rank``, ``az.rhat``, ``az.ess`` or ``az.summary``.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` with variables ``n_clusters``, ``alpha`` and ``log_joint``.
    """
    idata = _check_idata(idata)
    dataset = xr.Dataset(
        {
            "n_clusters": idata.sample_stats["n_clusters"],
            "alpha": idata.posterior["alpha"],
            "log_joint": idata.sample_stats["log_joint"],
        }
    )
    return az.InferenceData(posterior=dataset)


def summary(idata: az.InferenceData) -> pd.DataFrame:
    """ArviZ summary (mean, sd, HDI, ESS, R-hat) of K, α and the log joint.

    A quantity that is constant across every draw (α when it is not resampled) is left out,
    since its R-hat and ESS are undefined.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.

    Returns
    -------
    pandas.DataFrame
        One row per label-invariant quantity.
    """
    view = label_invariant(idata)
    names = [name for name in LABEL_INVARIANT if np.ptp(view.posterior[name].values) > 0]
    return az.summary(view, var_names=names)


def co_clustering_matrix(idata: az.InferenceData) -> xr.DataArray:
    """Posterior co-clustering probabilities P(c_i = c_j | data) over all chains and draws.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.

    Returns
    -------
    xarray.DataArray, shape (points, points)
        Symmetric with unit diagonal; dims ``points`` and ``points_other``.
    """
    idata = _check_idata(idata)
    assignments = idata.posterior["assignments"]
    matrix = co_clustering(assignments.values)
    points = assignments.coords["points"].values
    return xr.DataArray(
        matrix,
        dims=("points", "points_other"),
        coords={"points": points, "points_other": points},
        name="co_clustering",
    )


def point_estimate(idata: az.InferenceData, loss: str = "vi") -> np.ndarray:
    """Point estimate of the partition minimising a posterior expected loss.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.
    loss : {"vi", "binder"}
        See :func:`inference.partitions.point_partition`.

    Returns
    -------
    np.ndarray of int, shape (N,)
        Cluster labels 0..K-1.
    """
    idata = _check_idata(idata)
    return point_partition(idata.posterior["assignments"].values, loss=loss)
