"""One call from a fitted model to a self-contained HTML report.

:func:`write_report` accepts

* an :class:`inference.em.EMResult` (or a fitted estimator of :mod:`zoo.sklearn`, whose
  ``result_`` is used): a summary table (model, β, iterations, how the fit stopped, restart
  scores), the EM history — training log-likelihood, validation perplexity and β per iteration,
  the kept iteration marked — and a picture of every parameter array;
* an ArviZ ``InferenceData`` of Gibbs chains (e.g. from :func:`inference.diagnostics.to_inference_data`,
  or a :class:`zoo.dirichlet.mixture.DPMixtureFit`, or a fitted ``DPMixtureEstimator``):
  R-hat, ESS and mixing status of the label-invariant quantities (every scalar-per-draw variable
  of the ``posterior`` and ``sample_stats`` groups: number of clusters, α, log joint) under a
  computed verdict on whether the chains mix (:func:`inference.diagnostics.mixing_table` and
  :func:`inference.diagnostics.mixing_verdict`), trace and rank plots of those that vary, and
  the posterior co-clustering heat map (:func:`inference.partitions.co_clustering`)
  of the cluster assignments, rows ordered by average linkage so that clusters show as blocks.

Figures are drawn on ``matplotlib.figure.Figure`` objects with the Agg canvas (pyplot is never
touched, so nothing is shown and no backend is changed) and embedded as base64 PNG, so the file
needs nothing else to open.
"""

from __future__ import annotations

import base64
import html
import io
import os
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from inference.em import EMResult

__all__ = ["write_report", "report_html", "history_figure", "parameter_figures", "chains_sections"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; } td, th { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f3f3f3; text-align: left; } img { max-width: 100%; } .note { color: #666; font-size: .9em; }
.verdict { font-weight: 600; padding: .5em .8em; border-left: 5px solid; }
.verdict.mixing { color: #1b5e20; background: #e8f5e9; border-color: #2e7d32; }
.verdict.not-mixing { color: #8e1b1b; background: #fdecea; border-color: #c62828; }
"""

#: Largest number of rows (or columns) of a parameter array drawn as a heat map.
MAX_HEATMAP_SIDE = 60
#: Largest number of points whose co-clustering matrix is drawn.
MAX_CO_CLUSTERING_POINTS = 1500


def _new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _image(figure: Any, alt: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def _table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(str(name))}</th><td>{html.escape(str(value))}</td></tr>" for name, value in rows
    )
    return f"<table>{cells}</table>"


# ----------------------------------------------------------------------------- EM results
def history_figure(result: EMResult) -> Any:
    """Figure with the training log-likelihood, validation perplexity and β per iteration.

    The iteration whose parameters were kept (``result.best_iteration``) is marked by a dashed
    line. Returns a ``matplotlib.figure.Figure``.
    """
    if not isinstance(result, EMResult):
        raise TypeError(f"result: expected an inference.em.EMResult, got {type(result).__name__}")
    history = result.history
    panels = [("log_lik", "training log-likelihood (β = 1)"), ("valid_perplexity", "validation perplexity"),
              ("beta", "β")]
    panels = [(name, label) for name, label in panels
              if name in history and np.isfinite(np.asarray(history[name], np.float64)).any()]
    figure = _new_figure(6.5, 1.9 * max(len(panels), 1))
    axes = figure.subplots(max(len(panels), 1), 1, sharex=True, squeeze=False)[:, 0]
    for axis, (name, label) in zip(axes, panels):
        values = np.asarray(history[name], np.float64)
        axis.plot(np.arange(values.shape[0]), values, marker="." if values.shape[0] < 60 else None)
        axis.set_ylabel(label, fontsize=8)
        if 0 <= result.best_iteration < values.shape[0]:
            axis.axvline(result.best_iteration, color="tab:red", linestyle="--", linewidth=1)
    axes[-1].set_xlabel("iteration")
    if not panels:
        axes[0].text(0.5, 0.5, "no iterations recorded", ha="center", va="center")
    return figure


def _heatmap_view(values: np.ndarray) -> tuple[np.ndarray, str]:
    """At most MAX_HEATMAP_SIDE rows and columns: those with the largest totals, in order."""
    note = ""
    for axis in (0, 1):
        if values.shape[axis] > MAX_HEATMAP_SIDE:
            totals = np.abs(values).sum(axis=1 - axis)
            keep = np.sort(np.argsort(-totals, kind="stable")[:MAX_HEATMAP_SIDE])
            values = np.take(values, keep, axis=axis)
            note += f" {'rows' if axis == 0 else 'columns'}: the {MAX_HEATMAP_SIDE} largest;"
    return values, note.strip(" ;")


def parameter_figures(params: Any) -> list[tuple[str, Any]]:
    """(name, Figure) for every parameter array: bars for vectors, heat maps for matrices.

    Arrays with more than two axes are shown averaged over their leading axes.
    """
    if hasattr(params, "_fields"):
        items = [(name, getattr(params, name)) for name in params._fields]
    elif isinstance(params, dict):
        items = list(params.items())
    else:
        raise TypeError(f"params: expected a NamedTuple or dict of arrays, got {type(params).__name__}")
    figures = []
    for name, leaf in items:
        values = np.asarray(leaf, np.float64)
        if values.size == 0:
            continue
        caption = f"{name}, shape {values.shape}"
        if values.ndim > 2:
            values = values.reshape((-1,) + values.shape[-2:]).mean(axis=0)
            caption += ", averaged over the leading axes"
        if values.ndim <= 1:
            values = np.atleast_1d(values)
            figure = _new_figure(6.0, 2.0)
            axis = figure.subplots()
            axis.bar(np.arange(values.shape[0]), values)
            axis.set_xlabel("index")
        else:
            values, note = _heatmap_view(values)
            caption += f" ({note})" if note else ""
            figure = _new_figure(6.0, min(1.0 + 0.12 * values.shape[0], 7.0))
            axis = figure.subplots()
            image = axis.imshow(values, aspect="auto", interpolation="nearest", cmap="viridis")
            figure.colorbar(image, ax=axis)
        axis.set_title(caption, fontsize=9)
        figures.append((name, figure))
    return figures


def _em_sections(result: EMResult, settings: dict[str, Any] | None) -> list[str]:
    history = result.history
    log_lik = np.asarray(history.get("log_lik", []), np.float64)
    perplexity = np.asarray(history.get("valid_perplexity", []), np.float64)
    rows = [
        ("model", repr(result.model)),
        ("β of the kept parameters", f"{result.beta:.4g}"),
        ("iterations", result.n_iter),
        ("kept iteration", result.best_iteration),
        ("stopped by", result.stopped_by),
        ("converged", result.converged),
        ("restarts", f"{np.size(result.restart_scores)} (best: {result.best_restart})"),
    ]
    if log_lik.size and np.isfinite(log_lik).any():
        rows.append(("final training log-likelihood", f"{log_lik[np.isfinite(log_lik)][-1]:.6g}"))
    if perplexity.size and np.isfinite(perplexity).any():
        rows.append(("best validation perplexity", f"{np.nanmin(perplexity):.6g}"))
    rows.extend((str(name), value) for name, value in (settings or {}).items())
    sections = ["<h2>Fit</h2>" + _table(rows)]
    scores = np.atleast_1d(np.asarray(result.restart_scores, np.float64))
    restart_rows = "".join(f"<tr><td>{index}</td><td>{score:.6g}</td></tr>" for index, score in enumerate(scores))
    sections.append("<h2>Restarts</h2><table><tr><th>restart</th><th>score</th></tr>" + restart_rows + "</table>"
                    '<p class="note">Validation perplexity (lower is better) with validation data, '
                    "else the final training log-likelihood (higher is better).</p>")
    sections.append("<h2>History</h2>" + _image(history_figure(result), "EM history")
                    + '<p class="note">Dashed line: the iteration whose parameters were kept.</p>')
    pictures = "".join(_image(figure, name) for name, figure in parameter_figures(result.params))
    sections.append("<h2>Parameters</h2>" + pictures)
    return sections


# ----------------------------------------------------------------------------- Gibbs chains
def _scalar_variables(idata: Any) -> Any:
    """The label-invariant view: every numeric (chain, draw) variable of posterior and sample_stats."""
    import arviz as az
    import xarray as xr

    variables = {}
    for group in ("posterior", "sample_stats"):
        if group not in idata.groups():
            continue
        dataset = getattr(idata, group)
        for name, array in dataset.data_vars.items():
            if set(array.dims) == {"chain", "draw"} and np.issubdtype(array.dtype, np.number) \
                    and array.size and name not in variables:
                variables[name] = array
    return az.InferenceData(posterior=xr.Dataset(variables)) if variables else None


def _assignments(idata: Any) -> Any:
    """The cluster-assignment draws (chain, draw, points), if the posterior has them."""
    posterior = idata.posterior
    if "assignments" in posterior:
        return posterior["assignments"]
    for array in posterior.data_vars.values():
        if array.ndim == 3 and np.issubdtype(array.dtype, np.integer):
            return array
    return None


def _block_order(matrix: np.ndarray) -> np.ndarray:
    """Leaf order of an average-linkage tree on 1 - P(c_i = c_j): clusters become diagonal blocks."""
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    if matrix.shape[0] < 3:
        return np.arange(matrix.shape[0])
    distances = squareform(np.clip(1.0 - matrix, 0.0, 1.0), checks=False)
    return leaves_list(linkage(distances, method="average"))


def chains_sections(idata: Any) -> list[str]:
    """HTML sections for Gibbs chains: mixing verdict and diagnostics, trace and rank plots, co-clustering.

    The verdict is :func:`inference.diagnostics.mixing_verdict` of the table of
    :func:`inference.diagnostics.mixing_table`, shown in green when every quantity is "ok" or
    "constant" and in red otherwise. Constant quantities keep their row in the table but are left
    out of the trace and rank plots, as are quantities with non-finite draws.
    """
    import arviz as az

    from inference.diagnostics import mixing_table, mixing_verdict
    from inference.partitions import co_clustering

    if not isinstance(idata, az.InferenceData):
        raise TypeError(f"idata: expected an arviz.InferenceData, got {type(idata).__name__}")
    if "posterior" not in idata.groups():
        raise ValueError("idata: has no posterior group")
    posterior = idata.posterior
    rows = [("chains", posterior.sizes.get("chain", 1)), ("draws per chain", posterior.sizes.get("draw", 0))]
    rows.extend((str(name), value) for name, value in posterior.attrs.items()
                if isinstance(value, (int, float, str, np.number)) and not str(name).startswith("latentzoo"))
    sections = ["<h2>Chains</h2>" + _table(rows)]
    view = _scalar_variables(idata)
    names: list[str] = []
    if view is not None:
        table = mixing_table(view)
        mixing = bool(table["status"].isin(("ok", "constant")).all())
        sections.append(
            "<h2>Label-invariant diagnostics</h2>"
            + f'<p class="verdict {"mixing" if mixing else "not-mixing"}">{html.escape(mixing_verdict(table))}</p>'
            + table.to_html(float_format=lambda value: f"{value:.4g}", na_rep="n/a")
            + '<p class="note">Cluster labels are exchangeable, so R-hat and ESS are reported for '
            "label-invariant quantities only. Rank-normalised split R-hat and bulk and tail ESS; "
            f"chains mix when R-hat &lt;= {table.attrs['rhat_max']:g} and both ESS &gt;= "
            f"{table.attrs['ess_min']:g} (Vehtari et al. 2021). Constant quantities have no R-hat or "
            "ESS and are not plotted.</p>"
        )
        names = [name for name, status in table["status"].items() if status not in ("constant", "not finite")]
    if names:
        with warnings.catch_warnings():  # ArviZ's own use of a deprecated matplotlib helper
            warnings.simplefilter("ignore", category=DeprecationWarning)
            trace = _new_figure(9.0, 2.0 * len(names))
            axes = trace.subplots(len(names), 2, squeeze=False)
            az.plot_trace(view, var_names=names, axes=axes, show=False)
            sections.append("<h2>Trace plots</h2>" + _image(trace, "trace plots"))
            if view.posterior.sizes.get("chain", 1) > 1:
                rank = _new_figure(4.0 * len(names), 2.6)
                rank_axes = rank.subplots(1, len(names), squeeze=False)[0]
                az.plot_rank(view, var_names=names, ax=rank_axes, show=False)
                sections.append("<h2>Rank plots</h2>" + _image(rank, "rank plots")
                                + '<p class="note">One histogram per chain of the ranks of its draws among '
                                "all chains' draws; the verdict above is computed from R-hat and ESS.</p>")
    assignments = _assignments(idata)
    if assignments is not None:
        n_points = assignments.shape[-1]
        if n_points > MAX_CO_CLUSTERING_POINTS:
            sections.append(f"<h2>Co-clustering</h2><p>{n_points} points: the matrix is not drawn "
                            f"(limit {MAX_CO_CLUSTERING_POINTS}).</p>")
        else:
            matrix = co_clustering(np.asarray(assignments.values).reshape(-1, n_points))
            order = _block_order(matrix)
            figure = _new_figure(5.5, 4.8)
            axis = figure.subplots()
            image = axis.imshow(matrix[np.ix_(order, order)], vmin=0.0, vmax=1.0, cmap="Greys",
                                interpolation="nearest")
            figure.colorbar(image, ax=axis, label="P(c_i = c_j)")
            axis.set_title(f"posterior co-clustering of {n_points} points (average-linkage order)", fontsize=9)
            sections.append("<h2>Co-clustering</h2>" + _image(figure, "co-clustering heat map"))
    return sections


# ----------------------------------------------------------------------------- the report
def report_html(fitted: Any, *, title: str | None = None, settings: dict[str, Any] | None = None) -> str:
    """The report of ``fitted`` as one HTML string (see :func:`write_report`)."""
    import arviz as az

    if hasattr(fitted, "result_") and isinstance(getattr(fitted, "result_"), EMResult):
        fitted = fitted.result_
    if hasattr(fitted, "fit_"):  # a fitted zoo.sklearn.DPMixtureEstimator
        fitted = fitted.fit_
    if isinstance(getattr(fitted, "idata", None), az.InferenceData):  # e.g. zoo.dirichlet.mixture.DPMixtureFit
        fitted = fitted.idata
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings: expected a dict, got {type(settings).__name__}")
    if isinstance(fitted, EMResult):
        sections = _em_sections(fitted, settings)
        default_title = f"EM fit: {type(fitted.model).__name__}"
    elif isinstance(fitted, az.InferenceData):
        sections = chains_sections(fitted)
        if settings:
            sections.insert(0, "<h2>Settings</h2>" + _table(list(settings.items())))
        default_title = "Gibbs chains"
    else:
        raise TypeError(
            f"fitted: expected an inference.em.EMResult, a fitted zoo.sklearn estimator, a DPMixtureFit "
            f"or an arviz.InferenceData, got {type(fitted).__name__}"
        )
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title: expected a string, got {type(title).__name__}")
    heading = html.escape(title if title is not None else default_title)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{heading}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{heading}</h1><p class=\"note\">latentzoo report, {stamp}</p>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


def write_report(path: str | os.PathLike, fitted: Any, *, title: str | None = None,
                 settings: dict[str, Any] | None = None) -> Path:
    """Write a self-contained HTML report of an EM fit or of Gibbs chains.

    Parameters
    ----------
    path : str or PathLike
        Destination file (conventionally ``.html``).
    fitted : EMResult, fitted zoo.sklearn estimator, or arviz.InferenceData
    title : str, optional
    settings : dict, optional
        Extra name/value rows for the summary table (e.g. the command line's options).

    Returns
    -------
    pathlib.Path of the written file.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    document = report_html(fitted, title=title, settings=settings)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document, encoding="utf-8")
    return path
