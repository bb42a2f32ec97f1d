"""One call from a fitted model to a self-contained HTML report.

:func:`write_report` accepts

* an :class:`inference.em.EMResult` (or a fitted estimator of :mod:`zoo.sklearn`, whose
  ``result_`` is used): a summary table (model, β, iterations, how the fit stopped, restart
  scores) beside the EM history — training log-likelihood, validation perplexity and β per
  iteration, the kept iteration marked. The aspect, one-sided and two-sided models are then shown
  as Hofmann, Puzicha and Jordan (1999, H99) show them in their Fig. 1: one card per latent class
  with its prior and its most probable column labels (words) and their probabilities, computed
  by :func:`class_profiles` from the parameters and the labels of the data (``data``'s
  ``row_names`` / ``col_names``, or ``row_names`` / ``col_names`` given directly, or the
  ``feature_names_in_`` of an estimator fitted on a ``pandas.DataFrame``; without labels the
  cards name rows and columns by their indices); the two-sided model's association π_νμ is a
  table. Parameter arrays that nothing summarises (the cluster-abstraction and Gaussian-mixture
  parameters, for example) are drawn as bars (vectors) and heat maps (matrices, at most
  :data:`MAX_HEATMAP_SIDE` rows and columns);
* a :class:`zoo.relational.latent_class.LRMResult` (Chiang and Poole's latent-class relational
  model, fitted by incremental EM): the same summary and restarts beside the kept restart's
  objective and bound per pass; one card per class of every domain with its prior θ_h and its
  members (the individuals whose most probable class it is) by their posterior q_a(h), named by the
  domains' labels when ``data`` (the fitted ``RelationalData``) is given; and each relation's θ_r as heat maps of the probability of its
  values given the argument classes;
* an ArviZ ``InferenceData`` of Gibbs chains (e.g. from :func:`inference.diagnostics.to_inference_data`,
  or a :class:`zoo.dirichlet.mixture.DPMixtureFit`, or a fitted ``DPMixtureEstimator`` or
  ``SupervisedDPEstimator``):
  R-hat, ESS and mixing status of the label-invariant quantities (every scalar-per-draw variable
  of the ``posterior`` and ``sample_stats`` groups: number of clusters, α, log joint) under a
  computed verdict on whether the chains mix (:func:`inference.diagnostics.mixing_table` and
  :func:`inference.diagnostics.mixing_verdict`), trace and rank plots of those that vary, and
  the posterior co-clustering heat map (:func:`inference.partitions.co_clustering`)
  of the cluster assignments, rows ordered by average linkage so that clusters show as blocks,
  beside the posterior of the number of clusters; with ``data``, the features of the clustered
  points, the clusters of the point estimate (or of ``partition``) follow: each cluster's mean of
  every feature in standard deviations of all the points, as a heat map, and a card per cluster
  listing its members (``row_names``) by how often the kept draws put them with the others;
* a :class:`zoo.relational.infinite.IRMResult`: its chains' diagnostics as above, then the clusters
  of every domain in the kept draw of highest log joint (:meth:`~zoo.relational.infinite.IRMResult.map_partition`)
  as cards by decreasing share, each member with how often the kept draws of all chains put it with
  the cluster's other members, named by ``data`` (the fitted ``RelationalData``) when given, and
  each relation's block probabilities in that draw, (γ_u + n_u) / (Σγ + n), as heat maps. So
  does an IRM's ``InferenceData`` with its clusters (``to_inference_data(assignments=True)``, the
  ``chains.nc`` of ``python -m zoo fit irm``) given with ``data``, the network it was run on
  (:meth:`~zoo.relational.infinite.IRMResult.from_inference_data`).

Figures are drawn on ``matplotlib.figure.Figure`` objects with the Agg canvas (pyplot is never
touched, so nothing is shown and no backend is changed) and embedded as base64 PNG, so the file
needs nothing else to open. The page is laid out on a two-column grid: figures come in pairs, and a
figure without a partner is drawn twice as wide and spans the row, so no figure stands beside an
empty half of the page.
"""

from __future__ import annotations

import base64
import html
import io
import os
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np

from inference._validation import as_float_array, check_int, check_real
from inference.display import stopped_text
from inference.em import EMResult
from zoo.data import CoOccurrence, not_co_occurrence
from zoo.dyadic.aspect import AspectParams
from zoo.dyadic.one_sided import OneSidedParams
from zoo.dyadic.two_sided import TwoSidedParams
from zoo.relational._infinite_state import block_counts
from zoo.relational.data import RelationalData
from zoo.relational.infinite import NO_DRAWS, IRMResult
from zoo.relational.latent_class import LRMResult

__all__ = [
    "write_report",
    "report_html",
    "history_figure",
    "parameter_figures",
    "chains_sections",
    "class_profiles",
    "top_labels",
    "TopLabels",
    "ClassProfile",
    "ProfileGroup",
    "MAX_HEATMAP_SIDE",
    "MAX_CO_CLUSTERING_POINTS",
    "N_TOP_LABELS",
]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; overflow-wrap: anywhere; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; } td, th { border: 1px solid #ccc; padding: .25em .6em; }
td, th { overflow-wrap: anywhere; }
table.dataframe { display: block; max-width: 100%; overflow-x: auto; }
th { background: #f3f3f3; text-align: left; } img { max-width: 100%; } .note { color: #666; font-size: .9em; }
.verdict { font-weight: 600; padding: .5em .8em; border-left: 5px solid; }
.verdict.mixing { color: #1b5e20; background: #e8f5e9; border-color: #2e7d32; }
.verdict.not-mixing { color: #8e1b1b; background: #fdecea; border-color: #c62828; }
.verdict.undecided { color: #7a4f01; background: #fff8e1; border-color: #f9a825; }
.row { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 1em 2em; align-items: start; }
.row > * { min-width: 0; } .row > .wide { grid-column: 1 / -1; }
figure { margin: 0 0 1em; } figure img { display: block; width: 100%; height: auto; }
figcaption { color: #666; font-size: .9em; }
.classes { display: grid; grid-template-columns: repeat(auto-fit, minmax(230px, 1fr)); gap: .8em; margin-bottom: 1.5em; }
.class-card { border: 1px solid #ccc; border-radius: 4px; padding: .3em .7em; }
.class-card h3 { font-size: 1em; margin: .3em 0; } .class-card .prior { font-weight: normal; color: #444; }
table.top { width: 100%; margin: .2em 0 .6em; font-size: .9em; }
table.top caption { text-align: left; color: #666; font-size: .9em; }
table.top td { border: none; padding: .05em .3em; }
table.top td.p { text-align: right; font-variant-numeric: tabular-nums; width: 3.5em; }
table.top td.bar { width: 30%; } table.top td.bar span { display: block; height: .7em; background: #4c72b0; }
@media (max-width: 760px) { .row { grid-template-columns: minmax(0, 1fr); } }
"""

#: Largest number of rows (or columns) of a parameter array drawn as a heat map.
MAX_HEATMAP_SIDE = 60
#: Largest number of points whose co-clustering matrix is drawn.
MAX_CO_CLUSTERING_POINTS = 1500
#: Rank plots in one row of the report's figure (more quantities take more rows).
RANK_PANELS_PER_ROW = 4
#: Standard deviations at which the colours of the clusters' mean features saturate.
CLUSTER_MEAN_LIMIT = 3.0
#: Labels listed per class and side in the class cards (H99 Fig. 1 lists 10 words per aspect).
N_TOP_LABELS = 10
#: Widths (inches) of a figure in one column of the page grid and of one that spans the row.
_HALF_WIDTH, _FULL_WIDTH = 6.0, 12.0
_DPI = 90


def _new_figure(width: float, height: float):
    check_real("width", width, low=0.0, low_open=True)  # inches; matplotlib's own error names neither
    check_real("height", height, low=0.0, low_open=True)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _image(figure: Any, alt: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def _figure(figure: Any, alt: str, caption: str = "", *, wide: bool = False) -> str:
    """One grid cell: the embedded figure and its caption (HTML, not escaped)."""
    caption = f"<figcaption>{caption}</figcaption>" if caption else ""
    wide_class = ' class="wide"' if wide else ""
    return f"<figure{wide_class}>{_image(figure, alt)}{caption}</figure>"


def _row(cells: Sequence[str]) -> str:
    return '<div class="row">' + "".join(cells) + "</div>"


def _table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(str(name))}</th><td>{html.escape(str(value))}</td></tr>" for name, value in rows
    )
    return f"<table>{cells}</table>"


# ----------------------------------------------------------------------------- EM results
def history_figure(result: EMResult, *, width: float = _HALF_WIDTH) -> Any:
    """Figure with the training log-likelihood, validation perplexity and β per iteration.

    The iteration whose parameters were kept (``result.best_iteration``) is marked by a dashed
    line. Returns a ``matplotlib.figure.Figure`` ``width`` inches wide.
    """
    if not isinstance(result, EMResult):
        raise TypeError(f"result: expected an inference.em.EMResult, got {type(result).__name__}")
    return _history_panels(result.history, [("log_lik", "training log-likelihood (β = 1)"),
                                            ("valid_perplexity", "validation perplexity"), ("beta", "β")],
                           "iteration", width, marked=result.best_iteration)


def _history_panels(history: dict, panels: list[tuple[str, str]], step: str, width: float,
                    marked: int = -1) -> Any:
    """One panel per recorded quantity of ``history`` (name, axis label) against its ``step``, the
    step ``marked`` (the kept iteration) as a dashed line."""
    panels = [(name, label) for name, label in panels
              if name in (history or {}) and np.isfinite(np.asarray(history[name], np.float64)).any()]
    figure = _new_figure(width, 1.9 * max(len(panels), 1))
    axes = figure.subplots(max(len(panels), 1), 1, sharex=True, squeeze=False)[:, 0]
    for axis, (name, label) in zip(axes, panels):
        values = np.asarray(history[name], np.float64)
        axis.plot(np.arange(values.shape[0]), values, marker="." if values.shape[0] < 60 else None)
        axis.set_ylabel(label, fontsize=8)
        if 0 <= marked < values.shape[0]:
            axis.axvline(marked, color="tab:red", linestyle="--", linewidth=1)
    axes[-1].set_xlabel(step)
    if not panels:
        axes[0].text(0.5, 0.5, f"no {step}{'es' if step.endswith('s') else 's'} recorded", ha="center", va="center")
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


def _parameter_items(params: Any) -> list[tuple[str, Any]]:
    if hasattr(params, "_fields"):
        return [(name, getattr(params, name)) for name in params._fields]
    if isinstance(params, dict):
        return list(params.items())
    raise TypeError(f"params: expected a NamedTuple or dict of arrays, got {type(params).__name__}")


def _parameter_height(leaf: Any) -> float:
    """Natural height (inches) of a parameter's picture: 2 for bars, 1 + 0.12 per row for heat maps."""
    shape = np.shape(leaf)
    return 2.0 if len(shape) <= 1 else min(1.0 + 0.12 * min(shape[-2], MAX_HEATMAP_SIDE), 7.0)


def _parameter_figure(name: str, leaf: Any, width: float, height: float | None = None) -> Any:
    from matplotlib.ticker import MaxNLocator

    values = np.asarray(leaf, np.float64)
    caption = f"{name}, shape {values.shape}"
    figure = _new_figure(width, _parameter_height(values) if height is None else height)
    axis = figure.subplots()
    if values.ndim > 2:
        values = values.reshape((-1,) + values.shape[-2:]).mean(axis=0)
        caption += ", averaged over the leading axes"
    if values.ndim <= 1:
        values = np.atleast_1d(values)
        axis.bar(np.arange(values.shape[0]), values)
        axis.set_xlabel("index")
    else:
        values, note = _heatmap_view(values)
        caption += f" ({note})" if note else ""
        image = axis.imshow(values, aspect="auto", interpolation="nearest", cmap="viridis")
        figure.colorbar(image, ax=axis)
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_title(caption, fontsize=9)
    return figure


def parameter_figures(params: Any, *, width: float = _HALF_WIDTH) -> list[tuple[str, Any]]:
    """(name, Figure) for every non-empty parameter array: bars for vectors, heat maps for matrices.

    Arrays with more than two axes are shown averaged over their leading axes; matrices with more
    than :data:`MAX_HEATMAP_SIDE` rows (columns) show the rows (columns) with the largest totals.
    """
    return [(name, _parameter_figure(name, leaf, width)) for name, leaf in _parameter_items(params)
            if np.size(leaf)]


# ----------------------------------------------------------------------------- classes and their labels
class TopLabels(NamedTuple):
    """The most probable objects of one side of the data under one class, most probable first.

    Attributes
    ----------
    heading : str — what is listed, e.g. ``"columns, P(y|c)"``
    labels : tuple of str — the objects' labels (their indices where the data have none)
    probabilities : (n,) ndarray — their probabilities, decreasing; n ≤ the number asked for, as
        objects of probability 0 are not listed
    """

    heading: str
    labels: tuple
    probabilities: np.ndarray


class ClassProfile(NamedTuple):
    """One latent class as H99 Fig. 1 lists it: its prior and its most probable labels.

    Attributes
    ----------
    title : str — e.g. ``"class 2"``, ``"row cluster 1"``
    index : int — the class's index in the parameter arrays
    prior : float — its prior probability
    n_members : int or None — for clustering models, the objects (with counts) whose most probable
        cluster it is; None for the aspect model, whose classes belong to tokens, not objects
    top : tuple of TopLabels
    """

    title: str
    index: int
    prior: float
    n_members: int | None
    top: tuple


class ProfileGroup(NamedTuple):
    """The classes of one kind (the aspects, the row clusters, ...), by decreasing prior.

    Attributes
    ----------
    title : str — the section heading
    note : str — how the probabilities are computed (plain text)
    prior_symbol : str — e.g. ``"P(c)"``
    classes : tuple of ClassProfile
    """

    title: str
    note: str
    prior_symbol: str
    classes: tuple

    def to_frame(self) -> Any:
        """The classes as a pandas DataFrame: one row per class (by decreasing prior), its prior, its
        members (clustering models) and, per list, its labels joined by commas."""
        import pandas as pd

        rows = []
        for profile in self.classes:
            row = {self.prior_symbol: profile.prior}
            if profile.n_members is not None:
                row["members"] = profile.n_members
            row.update({top.heading: ", ".join(map(str, top.labels)) for top in profile.top})
            rows.append(row)
        return pd.DataFrame(rows, index=pd.Index([profile.title for profile in self.classes], name=self.title))

    def __repr__(self) -> str:
        lines = [self.title]
        for profile in self.classes:
            members = ("" if profile.n_members is None else
                       f", {profile.n_members} member{'s' if profile.n_members != 1 else ''}")
            lines.append(f"  {profile.title}: {self.prior_symbol} = {profile.prior:.3f}{members}")
            lines.extend(f"    {top.heading}: {', '.join(map(str, top.labels))}" for top in profile.top)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return f"<p><b>{html.escape(self.title)}</b></p>" + self.to_frame().to_html(float_format="{:.3f}".format)


#: Parameter fields that :func:`class_profiles` summarises, by parameter type: the report draws no
#: picture of them.
_PROFILED_FIELDS = {
    AspectParams: ("class_prior", "row_given_class", "col_given_class"),
    OneSidedParams: ("class_prior", "feature_given_class", "object_marginal", "cluster_posterior"),
    TwoSidedParams: ("row_class_prior", "col_class_prior", "association", "row_posterior", "col_posterior",
                     "row_marginal", "col_marginal"),
}


def _label_tuple(name: str, names: Any, size: int) -> tuple | None:
    """The labels as strings, checked against the fitted model's number of rows or columns."""
    if names is None:
        return None
    if isinstance(names, (str, bytes)):
        raise TypeError(f"{name}: expected a sequence of labels, got a single string")
    names = tuple(str(label) for label in names)
    if len(names) != size:
        side = "rows" if name.startswith("row") else "columns"
        raise ValueError(f"{name}: {len(names)} labels for the {size} {side} of the fitted model")
    return names


def top_labels(probabilities: Any, names: Sequence[Any] | None = None, *, n_top: int = N_TOP_LABELS,
               heading: str = "", fallback: str = "item") -> TopLabels:
    """The ``n_top`` most probable entries of a distribution, with their labels.

    Parameters
    ----------
    probabilities : (n,) array — e.g. one column of P(y|c)
    names : sequence of n labels, optional — without it, entry i is labelled ``f"{fallback} {i}"``
    n_top : int — at most this many entries; those of probability 0 are left out
    heading : str — stored as ``TopLabels.heading``
    fallback : str — the word before the index of an unlabelled entry

    Examples
    --------
    >>> top_labels([0.1, 0.6, 0.0, 0.3], ["a", "b", "c", "d"], n_top=3).labels
    ('b', 'd', 'a')
    >>> top_labels([0.5, 0.0, 0.5], fallback="column").labels
    ('column 0', 'column 2')
    """
    values = as_float_array("probabilities", probabilities, ndim=1, nonnegative=True)  # NaN named, not dropped
    n_top = check_int("n_top", n_top, minimum=1)
    if names is not None and len(names) != values.shape[0]:
        raise ValueError(f"names: {len(names)} labels for {values.shape[0]} probabilities")
    order = np.argsort(-values, kind="stable")[:n_top]
    order = order[values[order] > 0]
    labels = tuple(str(names[i]) if names is not None else f"{fallback} {i}" for i in order)
    return TopLabels(heading, labels, values[order])


def _normalised_columns(matrix: np.ndarray) -> np.ndarray:
    totals = matrix.sum(axis=0, keepdims=True)
    return np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)


def _members(marginal: np.ndarray, posterior: np.ndarray) -> np.ndarray:
    """P(object | cluster) ∝ P(object) P{c(object) = cluster}, shape (n_objects, K)."""
    return _normalised_columns(marginal[:, None] * posterior)


def _member_counts(marginal: np.ndarray, posterior: np.ndarray) -> np.ndarray:
    """Objects with counts whose most probable cluster is each cluster, shape (K,)."""
    return np.bincount(posterior[marginal > 0].argmax(axis=1), minlength=posterior.shape[1])


def _group(title: str, note: str, prior_symbol: str, name: str, prior: np.ndarray,
           lists: Sequence[tuple[str, np.ndarray, tuple | None, str]], n_top: int,
           counts: np.ndarray | None = None) -> ProfileGroup:
    """Cards by decreasing prior; ``lists`` holds (heading, (n, K) probabilities, labels, fallback)."""
    classes = []
    for index in np.argsort(-prior, kind="stable"):
        top = tuple(top_labels(matrix[:, index], labels, n_top=n_top, heading=heading, fallback=fallback)
                    for heading, matrix, labels, fallback in lists)
        classes.append(ClassProfile(f"{name} {index}", int(index), float(prior[index]),
                                    None if counts is None else int(counts[index]), top))
    return ProfileGroup(title, note, prior_symbol, tuple(classes))


def class_profiles(result: EMResult, *, row_names: Sequence[Any] | None = None,
                   col_names: Sequence[Any] | None = None, n_top: int = N_TOP_LABELS) -> list[ProfileGroup]:
    """Each latent class's prior and most probable row and column labels (H99 Fig. 1).

    * Aspect model (H99 eq. 2): per class c, P(c) and the columns of largest P(y|c); with
      ``row_names`` also the rows of largest P(x|c).
    * One-sided clustering (H99 eqs. 5–7): per cluster, P(c), the features (the other side) of
      largest P(y|c), and the members of largest P(x|c) ∝ P(x) P{c(x) = c}.
    * Two-sided clustering (H99 eqs. 8–10): per row cluster ν, P(ν), its members by
      P(x|ν) ∝ P(x) P{c(x) = ν} and the columns it predicts, P(y|ν) = Σ_μ (π_νμ / π^x_ν) P(y|μ);
      the same for the column clusters.

    Parameters
    ----------
    result : EMResult — a fit of any model; models other than these three give ``[]``
    row_names, col_names : sequences of labels, optional — the data's ``row_names`` and
        ``col_names``; without them objects are named by their index (``"row 3"``, ``"column 7"``)
    n_top : int — labels listed per class and side

    Returns
    -------
    list of ProfileGroup: one for the aspect and one-sided models, two (rows, columns) for the
    two-sided model.
    """
    if not isinstance(result, EMResult):
        raise TypeError(f"result: expected an inference.em.EMResult, got {type(result).__name__}")
    n_top = check_int("n_top", n_top, minimum=1)
    params = result.params
    if isinstance(params, AspectParams):
        row_given_class = np.asarray(params.row_given_class, np.float64)
        col_given_class = np.asarray(params.col_given_class, np.float64)
        row_names = _label_tuple("row_names", row_names, row_given_class.shape[0])
        col_names = _label_tuple("col_names", col_names, col_given_class.shape[0])
        lists = [("columns, P(y|c)", col_given_class, col_names, "column")]
        if row_names is not None:
            lists.append(("rows, P(x|c)", row_given_class, row_names, "row"))
        note = ("Each latent class (aspect) c with its prior P(c) and the columns y it makes most probable, "
                "P(y|c)" + (", and the rows x, P(x|c)" if row_names is not None else "")
                + " (H99 eq. 2, shown as in H99 Fig. 1).")
        return [_group("Aspects", note, "P(c)", "class", np.asarray(params.class_prior, np.float64), lists, n_top)]
    if isinstance(params, OneSidedParams):
        by_rows = getattr(result.model, "side", "rows") == "rows"
        posterior = np.asarray(params.cluster_posterior, np.float64)
        marginal = np.asarray(params.object_marginal, np.float64)
        features = np.asarray(params.feature_given_class, np.float64)
        sizes = (posterior.shape[0], features.shape[0]) if by_rows else (features.shape[0], posterior.shape[0])
        row_names = _label_tuple("row_names", row_names, sizes[0])
        col_names = _label_tuple("col_names", col_names, sizes[1])
        objects, other = ("rows", "columns") if by_rows else ("columns", "rows")
        lists = [
            (f"{other}, P({'y' if by_rows else 'x'}|c)", features, col_names if by_rows else row_names, other[:-1]),
            (f"members, P({'x' if by_rows else 'y'}|c)", _members(marginal, posterior),
             row_names if by_rows else col_names, objects[:-1]),
        ]
        note = (f"Each cluster c of the {objects} with its prior P(c), the {other} it makes most probable and its "
                f"members, weighted by P(object) P{{c(object) = c}} (H99 eqs. 5–7). 'members' counts the "
                f"{objects} whose most probable cluster it is.")
        return [_group(f"Clusters of the {objects}", note, "P(c)", "cluster", np.asarray(params.class_prior, np.float64),
                       lists, n_top, _member_counts(marginal, posterior))]
    if isinstance(params, TwoSidedParams):
        row_posterior = np.asarray(params.row_posterior, np.float64)
        col_posterior = np.asarray(params.col_posterior, np.float64)
        row_marginal = np.asarray(params.row_marginal, np.float64)
        col_marginal = np.asarray(params.col_marginal, np.float64)
        association = np.asarray(params.association, np.float64)
        row_names = _label_tuple("row_names", row_names, row_posterior.shape[0])
        col_names = _label_tuple("col_names", col_names, col_posterior.shape[0])
        rows_given_cluster = _members(row_marginal, row_posterior)
        cols_given_cluster = _members(col_marginal, col_posterior)
        # P(y|ν) = Σ_μ P(μ|ν) P(y|μ) with P(μ|ν) = π_νμ / π^x_ν (H99 eq. 9), and symmetrically
        cols_given_row_cluster = cols_given_cluster @ _normalised_columns(association.T)
        rows_given_col_cluster = rows_given_cluster @ _normalised_columns(association)
        note = ("Each row cluster ν with its prior P(ν), its members by P(x|ν) ∝ P(x) P{c(x) = ν}, and the "
                "columns it predicts, P(y|ν) = Σ_μ (π_νμ / π^x_ν) P(y|μ) (H99 eqs. 8–10); the column clusters "
                "likewise. 'members' counts the objects whose most probable cluster it is.")
        return [
            _group("Row clusters", note, "P(ν)", "row cluster", np.asarray(params.row_class_prior, np.float64),
                   [("members, P(x|ν)", rows_given_cluster, row_names, "row"),
                    ("columns, P(y|ν)", cols_given_row_cluster, col_names, "column")],
                   n_top, _member_counts(row_marginal, row_posterior)),
            _group("Column clusters", "", "P(μ)", "column cluster", np.asarray(params.col_class_prior, np.float64),
                   [("members, P(y|μ)", cols_given_cluster, col_names, "column"),
                    ("rows, P(x|μ)", rows_given_col_cluster, row_names, "row")],
                   n_top, _member_counts(col_marginal, col_posterior)),
        ]
    return []


def _profiles_html(groups: list[ProfileGroup]) -> str:
    sections = []
    for group in groups:
        cards = []
        for profile in group.classes:
            members = ("" if profile.n_members is None else
                       f", {profile.n_members} member{'s' if profile.n_members != 1 else ''}")
            tables = []
            for top in profile.top:
                largest = float(top.probabilities[0]) if top.probabilities.size else 1.0
                rows = "".join(
                    f'<tr><td>{html.escape(label)}</td><td class="p">{probability:.3f}</td>'
                    f'<td class="bar"><span style="width: {100.0 * probability / largest:.0f}%"></span></td></tr>'
                    for label, probability in zip(top.labels, top.probabilities)
                )
                caption = top.heading
                if top.heading.startswith("members") and profile.n_members is not None \
                        and len(top.labels) < profile.n_members:  # a list cut at n_top says so
                    caption += f" (the first {len(top.labels)} of {profile.n_members})"
                tables.append(f'<table class="top"><caption>{html.escape(caption)}</caption>{rows}</table>')
            cards.append(
                f'<div class="class-card" data-class="{profile.index}"><h3>{html.escape(profile.title)} '
                f'<span class="prior">{html.escape(group.prior_symbol)} = {profile.prior:.3f}{members}</span></h3>'
                + "".join(tables) + "</div>"
            )
        note = f'<p class="note">{html.escape(group.note)}</p>' if group.note else ""
        sections.append(f"<h2>{html.escape(group.title)}</h2>{note}" + '<div class="classes">' + "".join(cards)
                        + "</div>")
    return "\n".join(sections)


def _association_html(params: TwoSidedParams) -> str:
    """The two-sided model's π_νμ and c_νμ = π_νμ / (π^x_ν π^y_μ) as a shaded table (H99 eq. 9)."""
    association = np.asarray(params.association, np.float64)
    ratio = np.asarray(params.association_ratio(), np.float64)
    largest = association.max() if association.size and association.max() > 0 else 1.0
    header = "".join(f"<th>column cluster {index}</th>" for index in range(association.shape[1]))
    body = "".join(
        f"<tr><th>row cluster {row}</th>" + "".join(
            f'<td style="background: rgba(76, 114, 176, {0.6 * association[row, col] / largest:.2f})">'
            f"{association[row, col]:.3f} ({ratio[row, col]:.2f})</td>" for col in range(association.shape[1]))
        + "</tr>" for row in range(association.shape[0])
    )
    return ("<h2>Association of the row and column clusters</h2>"
            f'<table class="association"><tr><th></th>{header}</tr>{body}</table>'
            '<p class="note">Each cell: π_νμ, the share of the tokens between row cluster ν and column cluster μ, '
            "and in brackets c_νμ = π_νμ / (π^x_ν π^y_μ), above 1 where the two clusters co-occur more often "
            "than independent clusters would (H99 eq. 9).</p>")


def _fit_summary(rows: list[tuple[str, Any]], result: Any, settings: dict[str, Any] | None, score: str,
                 note: str) -> str:
    """The "Fit" table (``rows``, then the settings and what made the fit) and the restarts' scores."""
    rows = [*rows, *((str(name), value) for name, value in (settings or {}).items()),
            *((str(name), value) for name, value in (getattr(result, "provenance", None) or {}).items())]
    scores = np.atleast_1d(np.asarray(result.restart_scores, np.float64))
    restart_rows = "".join(f"<tr><td>{index}</td><td>{value:.6g}</td></tr>" for index, value in enumerate(scores))
    return ("<div><h2>Fit</h2>" + _table(rows) + f"<h2>Restarts</h2><table><tr><th>restart</th><th>{score}</th></tr>"
            + restart_rows + f'</table><p class="note">{note}</p></div>')


def _em_sections(result: EMResult, settings: dict[str, Any] | None, row_names: Any, col_names: Any) -> list[str]:
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
    kept_log_lik = getattr(result, "log_lik", np.nan)
    if np.isfinite(kept_log_lik):
        rows.append(("training log-likelihood of the kept parameters", f"{kept_log_lik:.6g}"))
    elif log_lik.size and np.isfinite(log_lik).any():  # a result saved before it was kept
        rows.append(("training log-likelihood at the last E-step", f"{log_lik[np.isfinite(log_lik)][-1]:.6g}"))
    if perplexity.size and np.isfinite(perplexity).any():
        rows.append(("best validation perplexity", f"{np.nanmin(perplexity):.6g}"))
    summary = _fit_summary(rows, result, settings, "score", "Validation perplexity (lower is better) with validation "
                           "data, else the training log-likelihood of each restart's kept parameters (higher is "
                           "better).")
    history_cell = ("<div><h2>History</h2>"
                    + _figure(history_figure(result), "EM history", "Dashed line: the iteration whose parameters "
                              "were kept.") + "</div>")
    sections = [_row([summary, history_cell])]
    groups = class_profiles(result, row_names=row_names, col_names=col_names)
    if groups:
        sections.append(_profiles_html(groups))
    if isinstance(result.params, TwoSidedParams):
        sections.append(_association_html(result.params))
    profiled = _PROFILED_FIELDS.get(type(result.params), ())
    remaining = [(name, leaf) for name, leaf in _parameter_items(result.params)
                 if name not in profiled and np.size(leaf)]
    if remaining:
        # vectors (bars) first, then matrices: figures pair with their own kind, a pair is drawn at one
        # height, and a last figure without a partner is drawn twice as wide across the row
        remaining.sort(key=lambda item: np.ndim(item[1]) > 1)
        cells = []
        for start in range(0, len(remaining), 2):
            pair = remaining[start:start + 2]
            height = max(_parameter_height(leaf) for _, leaf in pair)
            width = _HALF_WIDTH if len(pair) == 2 else _FULL_WIDTH
            cells.extend(_figure(_parameter_figure(name, leaf, width, height), name, wide=len(pair) == 1)
                         for name, leaf in pair)
        sections.append("<h2>Parameters</h2>" + _row(cells))
    return sections


# ----------------------------------------------------------------------------- latent-class relational models
def _lrm_history_figure(result: LRMResult, *, width: float = _HALF_WIDTH) -> Any:
    """The kept restart's objective and bound per pass of incremental EM (CP §2)."""
    return _history_panels(result.history, [("objective", "objective"), ("bound", "bound")], "pass", width)


def _lrm_profiles(result: LRMResult, names: dict[str, tuple | None], n_top: int = N_TOP_LABELS) -> list[ProfileGroup]:
    """Per domain, each class's prior θ_h and the individuals of largest posterior q_a(h) (CP eq. 4)."""
    groups = []
    for domain, weights, responsibilities in zip(result.schema.domain_names, result.params.class_weights,
                                                 result.params.responsibilities):
        posterior = np.asarray(responsibilities, np.float64)
        most_probable = posterior.argmax(axis=1)
        counts = np.bincount(most_probable, minlength=posterior.shape[1])
        # A class lists its members (the individuals whose most probable class it is), surest first.
        members = np.where(most_probable[:, None] == np.arange(posterior.shape[1]), posterior, 0.0)
        note = (f"Each class h of the {domain} with its prior θ_h (CP eq. 5) and its members, the individuals a "
                "whose most probable class it is, by their posterior q_a(h) (CP eq. 4).")
        groups.append(_group(f"Classes of the {domain}", note, "θ_h", "class", np.asarray(weights, np.float64),
                             [("members, q_a(h)", members, names.get(domain), domain)], n_top, counts))
    return groups


def _relation_figure(schema: Any, probs: Any, index: int, value_labels: tuple | None, width: float,
                     kind: str = "class") -> tuple[Any, str]:
    """The probabilities ``probs`` of one relation's values given its arguments' classes (an LRM's
    θ_r, CP eq. 5) or clusters (an IRM's blocks) as heat maps, and the caption: a binary relation
    (arity 2) as the probability of its second value given the two argument classes (one map per
    value, at most four, when it has more than two values); a unary one as classes × values."""
    from matplotlib.ticker import MaxNLocator

    probs = np.asarray(probs, np.float64)
    domains = [schema.domain_names[d] for d in schema.relation_domains[index]]
    n_values = probs.shape[-1]
    labels = tuple(value_labels) if value_labels is not None else tuple(range(n_values))
    caption = f"relation {schema.relation_names[index]}"
    if probs.ndim == 2:  # unary: classes x values, the values named on the x axis
        panels = [(probs, f"P(value | {kind} of the {domains[0]})", f"{domains[0]} {kind}", "value")]
    else:
        shown = [1] if n_values == 2 else list(range(min(n_values, 4)))
        panels = [(probs[:, :, value], f"P({labels[value]} | {kind}es)" if kind == "class" else
                   f"P({labels[value]} | {kind}s)", f"{domains[0]} {kind}", f"{domains[1]} {kind}")
                  for value in shown]
        if n_values > 4:
            caption += f", the first 4 of its {n_values} values"
    figure = _new_figure(width, min(1.4 + 0.25 * max(panel.shape[0] for panel, *_ in panels), 6.0))
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for axis, (values, title, ylabel, xlabel) in zip(axes, panels):
        image = axis.imshow(values, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0.0, vmax=1.0)
        for (row, col), value in (np.ndenumerate(values) if values.size <= 64 else ()):
            axis.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=9,
                      color="white" if value < 0.6 else "black")
        axis.set_title(title, fontsize=9)
        axis.set_ylabel(ylabel, fontsize=8)
        axis.set_xlabel(xlabel, fontsize=8)
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        if probs.ndim == 2:
            axis.set_xticks(np.arange(n_values), [str(label) for label in labels])
        else:
            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.colorbar(image, ax=list(axes))
    return figure, caption


def _lrm_sections(result: LRMResult, settings: dict[str, Any] | None, data: Any) -> list[str]:
    """Fit, restarts and history; each domain's classes; each relation's θ_r (CP §1–2)."""
    schema = result.schema
    names = {domain.name: domain.labels for domain in data.domains} if data is not None else {}
    history = result.history or {}
    rows = [("model", repr(result.model)),
            ("domains", "; ".join(f"{name}: {size:,} individuals, {np.shape(weights)[0]} classes"
                                  for name, size, weights in zip(schema.domain_names, schema.domain_sizes,
                                                                 result.params.class_weights))),
            ("relations", ", ".join(schema.relation_names)),
            ("passes of the kept restart", result.n_passes),
            ("stopped by", stopped_text(result.stopped_by)),
            ("converged", result.converged),
            ("restarts", f"{np.size(result.restart_scores)} (best: {result.best_restart})")]
    for name in ("objective", "bound"):
        values = np.asarray(history.get(name, []), np.float64)
        if values.size and np.isfinite(values[-1]):
            rows.append((f"{name} after the last pass", f"{values[-1]:.6g}"))
    summary = _fit_summary(rows, result, settings, "objective", "The objective of each restart after its last pass "
                           "(higher is better): the best is kept.")
    history_cell = ("<div><h2>History</h2>" + _figure(_lrm_history_figure(result), "incremental EM history",
                                                      "The kept restart's objective and bound per pass over "
                                                      "the individuals (CP §2).") + "</div>")
    sections = [_row([summary, history_cell]), _profiles_html(_lrm_profiles(result, names))]
    value_labels = {relation.name: tuple(relation.value_labels) for relation in data.relations} if data is not None \
        else {}
    cells = []
    for index, name in enumerate(schema.relation_names):
        figure, caption = _relation_figure(schema, result.params.relation_probs[index], index, value_labels.get(name),
                                           _FULL_WIDTH)
        cells.append(_figure(figure, caption, html.escape(caption) + ": θ_r, the probability of each value of a "
                             "cell given its arguments' classes (CP eq. 5).", wide=True))
    sections.append("<h2>Relations</h2>" + _row(cells))
    return sections


# ----------------------------------------------------------------------------- infinite relational models
#: Labels of kept draws × individuals compared at once when the IRM's cards measure how often a
#: member is with its cluster (memory, not the result, depends on it).
_COMPANION_BLOCK = 4_000_000


def _companions(draws: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """For each individual, the mean over ``draws`` (M, n) of the share of the other members of its
    cluster in ``labels`` (n,) that are in its cluster in the draw; for a cluster of one, the share
    of draws in which it is alone. O(M n) time, in blocks of draws."""
    n = labels.shape[0]
    n_labels = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=n_labels)
    own = sizes[labels]
    total = np.zeros(n)
    width = int(draws.max()) + 1
    rows = max(1, _COMPANION_BLOCK // max(n, n_labels * width))  # per draw: n labels, a table of n_labels × width
    for first in range(0, draws.shape[0], rows):
        block = draws[first:first + rows].astype(np.int64)
        offsets = np.arange(block.shape[0])[:, None]
        in_draw = offsets * width + block  # (rows, n): i's cluster in its draw, numbered across the block
        pair = (offsets * n_labels + labels[None, :]) * width + block  # and with i's cluster in labels
        together = np.bincount(pair.ravel(), minlength=block.shape[0] * n_labels * width)[pair]  # i included
        alone = np.bincount(in_draw.ravel(), minlength=block.shape[0] * width)[in_draw] == 1
        total += np.where(own > 1, (together - 1) / np.maximum(own - 1, 1), alone).sum(axis=0)
    return total / draws.shape[0]


def _cluster_group(title: str, chosen: str, objects: str, draws: np.ndarray, labels: np.ndarray,
                   names: tuple | None, fallback: str, n_top: int = N_TOP_LABELS) -> ProfileGroup:
    """Cards of the clusters of ``labels`` (n,), by share of the ``objects``, each listing its members
    by how often ``draws`` (M, n) keep them with its other members (:func:`_companions`)."""
    sizes = np.bincount(labels)
    members = np.where(labels[:, None] == np.arange(sizes.size), _companions(draws, labels)[:, None], 0.0)
    note = (f"The clusters of {chosen}, each with its share of the {objects} and its members, by how often the "
            f"{draws.shape[0]:,} kept draws of all chains put them with the cluster's other members (the mean share "
            "of those in the same cluster; a cluster of one: the share of draws in which it is alone).")
    return _group(title, note, "share", "cluster", sizes / labels.size,
                  [("members, with the others", members, names, fallback)], n_top, sizes)


def _irm_profiles(result: Any, partitions: dict[str, np.ndarray], names: dict[str, tuple | None]
                  ) -> list[ProfileGroup]:
    """Per domain, the clusters of the draw of highest log joint, each with its share of the domain
    and its members by how often the kept draws put them with the cluster's other members."""
    return [_cluster_group(f"Clusters of the {domain}", f"the {domain} in the kept draw of highest log joint (the "
                           "partition of labels.csv on the command line)", "individuals",
                           np.asarray(result.assignments[domain]).reshape(-1, labels.size), labels,
                           names.get(domain), domain)
            for domain, labels in partitions.items()]


def _irm_blocks(result: Any, partitions: dict[str, np.ndarray], index: int, chain: int, draw: int) -> np.ndarray:
    """One relation's (γ_u + n_block,u) / (Σγ + n_block) for every block of ``partitions`` (the IRM's
    predictive of a cell, Kemp et al. 2006), with the hyperparameters γ of draw (``chain``, ``draw``).
    The counts are the model's (``block_counts``: a symmetric relation's pairs once each)."""
    schema = result.schema
    gamma = np.asarray(result.hyper[schema.relation_names[index]][chain, draw], np.float64)
    assignments = tuple(jnp.asarray(partitions[name], jnp.int32) for name in schema.domain_names)
    capacities = tuple(int(partitions[name].max()) + 1 for name in schema.domain_names)
    counts = np.asarray(block_counts(assignments, result._arrays, schema, capacities)[index], np.float64)
    mass = counts + gamma
    return mass / mass.sum(axis=-1, keepdims=True)


def _irm_sections(result: Any, data: Any) -> list[str]:
    """The clusters of every domain and each relation's blocks in the kept draw of highest log joint."""
    if not result.assignments or np.size(result.log_joint) == 0:
        return ["<h2>Clusters</h2><p>The run kept no assignments (keep_assignments=False, or no draws), so no "
                "clusters are shown.</p>"]
    schema = result.schema
    names = {domain.name: domain.labels for domain in data.domains} if data is not None else {}
    partitions = result.map_partition()
    sections = [_profiles_html(_irm_profiles(result, partitions, names))]
    if result._arrays is None:  # a result built by hand keeps no cells
        return sections
    from inference.partitions import most_probable_draw

    chain, draw = most_probable_draw(result.log_joint)  # the draw map_partition() reads
    value_labels = {relation.name: tuple(relation.value_labels) for relation in data.relations} if data is not None \
        else {}
    cells = []
    for index, name in enumerate(schema.relation_names):
        figure, caption = _relation_figure(schema, _irm_blocks(result, partitions, index, chain, draw), index,
                                           value_labels.get(name), _FULL_WIDTH, kind="cluster")
        cells.append(_figure(figure, caption, html.escape(caption) + ": the probability of each value of a cell "
                             "given its arguments' clusters in that draw, (γ_u + n_u) / (Σγ + n) over the block's "
                             "observed cells n with the draw's hyperparameters γ.", wide=True))
    sections.append("<h2>Relations</h2>" + _row(cells))
    return sections


# ----------------------------------------------------------------------------- Gibbs chains
def _scalar_variables(idata: Any) -> Any:
    """The label-invariant view: every numeric (chain, draw) variable of posterior and sample_stats,
    one scalar per value of a variable over the values of a relation (a dimension
    ``<relation>_value``: an IRM's ``hyper_<relation>``, named ``hyper_<relation>[v]`` as the IRM's
    own mixing table names them), and ``partition_entropy_<domain>`` of each domain's cluster labels
    ``assignments_<domain>`` (an IRM's, as its own table has them)."""
    import arviz as az
    import xarray as xr

    from inference.diagnostics import partition_entropy, scalars_per_value

    variables = {}
    for group in ("posterior", "sample_stats"):
        if group not in idata.groups():
            continue
        dataset = getattr(idata, group)
        for name, array in dataset.data_vars.items():
            if not (np.issubdtype(array.dtype, np.number) and array.size) or name in variables:
                continue
            extra = [dim for dim in array.dims if dim not in ("chain", "draw")]
            if set(array.dims) >= {"chain", "draw"} and not extra:
                variables[name] = array
            elif len(extra) == 1 and str(extra[0]).endswith("_value") and len(array.dims) == 3:
                variables.update(scalars_per_value(str(name), array))
    for name, array in (idata.posterior.data_vars.items() if "posterior" in idata.groups() else ()):
        domain = str(name).removeprefix("assignments_")
        if (domain != name and array.ndim == 3 and array.dims[:2] == ("chain", "draw") and array.size
                and np.issubdtype(array.dtype, np.integer) and f"partition_entropy_{domain}" not in variables):
            variables[f"partition_entropy_{domain}"] = xr.DataArray(partition_entropy(array.values),
                                                                   dims=("chain", "draw"))
    return az.InferenceData(posterior=xr.Dataset(variables)) if variables else None


def _assignments(idata: Any) -> Any:
    """The cluster-assignment draws (chain, draw, points), if the posterior has them."""
    posterior = idata.posterior
    if "assignments" in posterior:
        return posterior["assignments"]
    labels = [array for array in posterior.data_vars.values()
              if array.ndim == 3 and np.issubdtype(array.dtype, np.integer)]
    return labels[0] if len(labels) == 1 else None  # several (an IRM's domains): the report's IRM sections


def _block_order(matrix: np.ndarray) -> np.ndarray:
    """Leaf order of an average-linkage tree on 1 - P(c_i = c_j): clusters become diagonal blocks."""
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    if matrix.shape[0] < 3:
        return np.arange(matrix.shape[0])
    distances = squareform(np.clip(1.0 - matrix, 0.0, 1.0), checks=False)
    return leaves_list(linkage(distances, method="average"))


def chains_sections(idata: Any, advice: str | None = None, *, table: Any = None,
                    quantities: Any = None, calls: dict[str, str] | None = None) -> list[str]:
    """HTML sections for Gibbs chains: mixing verdict and diagnostics, trace and rank plots, co-clustering.

    The verdict is :func:`inference.diagnostics.mixing_verdict` of ``table`` (by default the
    table of :func:`inference.diagnostics.mixing_table` of every numeric (chain, draw) variable),
    shown in green when every quantity is "ok" or "constant", in red when some quantity does not
    mix ("not mixing", "stuck", "chains disagree") and in amber otherwise (R-hat passes with too
    few effective draws, or mixing cannot be judged); ``advice`` replaces its closing advice for
    the Dirichlet-process samplers (as a fit's ``mixing.attrs["advice"]`` does). A fit's report
    passes the fit's own ``mixing`` table, so that the report and the fit's warning judge the same
    quantities, and ``quantities`` (an ``xarray.Dataset`` of (chain, draw) scalars) where the fit
    keeps its quantities otherwise than as scalars, as the IRM's ``scalar_quantities()``. The
    verdict names the reader's ways in place of the calls and settings that are ``calls``' keys
    (an estimator's warm start, the command line's options).
    Constant quantities keep their row in the table but are left out of the trace and rank plots,
    as are quantities with non-finite draws.
    """
    import arviz as az
    from matplotlib.ticker import MaxNLocator

    from inference.diagnostics import (NOT_MIXING_STATUSES, PASSING_STATUSES, mixing_table, mixing_verdict,
                                       rhat_text)
    from inference.partitions import co_clustering

    if not isinstance(idata, az.InferenceData):
        raise TypeError(f"idata: expected an arviz.InferenceData, got {type(idata).__name__}")
    if "posterior" not in idata.groups():
        raise ValueError("idata: has no posterior group")
    posterior = idata.posterior
    if posterior.sizes.get("draw", 1) == 0:
        raise ValueError("idata: holds no draws (chains stopped before their first draw have nothing to report)")
    rows = [("chains", posterior.sizes.get("chain", 1)), ("draws per chain", posterior.sizes.get("draw", 0))]
    rows.extend((str(name), value) for name, value in posterior.attrs.items()
                if isinstance(value, (int, float, str, np.number)) and not str(name).startswith("latentzoo"))
    sections = ["<h2>Chains</h2>" + _table(rows)]
    view = _scalar_variables(idata) if quantities is None else az.InferenceData(posterior=quantities)
    names: list[str] = []
    if view is not None or table is not None:
        table = mixing_table(view) if table is None else table.copy()
        if advice:
            table.attrs["advice"] = advice
        statuses = table["status"].astype(str)
        # Green only where something was assessed: every quantity constant leaves it undecided (amber).
        verdict_class = ("mixing" if statuses.isin(PASSING_STATUSES).all() and (statuses == "ok").any() else
                         "not-mixing" if statuses.isin(NOT_MIXING_STATUSES).any() else "undecided")
        verdict = mixing_verdict(table)
        for call, reader_call in (calls or {}).items():
            verdict = verdict.replace(call, reader_call)
        sections.append(
            "<h2>Label-invariant diagnostics</h2>"
            + f'<p class="verdict {verdict_class}">{html.escape(verdict)}</p>'
            + table.to_html(float_format=lambda value: f"{value:.4g}", na_rep="n/a",
                            formatters={"r_hat": lambda value: "n/a" if np.isnan(value) else rhat_text(
                                value, table.attrs.get("rhat_max", 1.01))})
            + '<p class="note">Cluster labels are exchangeable, so R-hat and ESS are reported for '
            "label-invariant quantities only. Rank-normalised split R-hat and bulk and tail ESS; "
            f"chains mix when R-hat &lt;= {table.attrs['rhat_max']:g} and both ESS &gt;= "
            f"{table.attrs['ess_min']:g} (Vehtari et al. 2021). Constant quantities have no R-hat or "
            "ESS and are not plotted.</p>"
        )
        names = [name for name, status in table["status"].items()
                 if status not in ("constant", "not finite") and view is not None and name in view.posterior]
    if names:
        with warnings.catch_warnings():
            # ArviZ's own use of a deprecated matplotlib helper.
            warnings.simplefilter("ignore", category=DeprecationWarning)
            # A chain stuck at one value has no density to draw; the table above names it ("stuck").
            warnings.filterwarnings("ignore", message="Your data appears to have a single value", category=UserWarning)
            trace = _new_figure(_FULL_WIDTH, 2.0 * len(names))
            axes = trace.subplots(len(names), 2, squeeze=False)
            az.plot_trace(view, var_names=names, axes=axes, show=False)
            sections.append("<h2>Trace plots</h2>" + _figure(trace, "trace plots"))
            if view.posterior.sizes.get("chain", 1) > 1:
                # At most four panels a row, so that the quantities' names do not run into each other.
                n_rows = -(-len(names) // RANK_PANELS_PER_ROW)
                n_columns = min(len(names), RANK_PANELS_PER_ROW)
                rank = _new_figure(_FULL_WIDTH, 2.6 * n_rows)
                rank_axes = rank.subplots(n_rows, n_columns, squeeze=False).ravel()
                for unused in rank_axes[len(names):]:
                    unused.set_axis_off()
                az.plot_rank(view, var_names=names, ax=rank_axes[:len(names)], show=False)
                for axis in rank_axes[:len(names)]:
                    axis.title.set_fontsize(9)
                sections.append("<h2>Rank plots</h2>" + _figure(
                    rank, "rank plots", "One histogram per chain of the ranks of its draws among all chains' "
                    "draws; the verdict above is computed from R-hat and ESS."))
    assignments = _assignments(idata)
    if assignments is not None:
        n_points = assignments.shape[-1]
        if n_points > MAX_CO_CLUSTERING_POINTS:
            sections.append(f"<h2>Co-clustering</h2><p>{n_points} points: the matrix is not drawn "
                            f"(limit {MAX_CO_CLUSTERING_POINTS}).</p>")
        else:
            draws = np.asarray(assignments.values).reshape(-1, n_points)
            matrix = co_clustering(draws)
            order = _block_order(matrix)
            figure = _new_figure(_FULL_WIDTH, 5.0)
            heat_axis, count_axis = figure.subplots(1, 2, width_ratios=[1.25, 1.0])
            image = heat_axis.imshow(matrix[np.ix_(order, order)], vmin=0.0, vmax=1.0, cmap="Greys",
                                     interpolation="nearest")
            figure.colorbar(image, ax=heat_axis, label="P(c_i = c_j)")
            heat_axis.set_title(f"posterior co-clustering of {n_points} points (average-linkage order)",
                                fontsize=9)
            sorted_draws = np.sort(draws, axis=1)
            n_clusters = 1 + np.count_nonzero(np.diff(sorted_draws, axis=1), axis=1)
            values, counts = np.unique(n_clusters, return_counts=True)
            count_axis.bar(values, counts / n_clusters.size, width=0.8)
            count_axis.xaxis.set_major_locator(MaxNLocator(integer=True))
            count_axis.set_xlabel("number of clusters")
            count_axis.set_ylabel("posterior probability")
            count_axis.set_title(f"number of clusters in the {n_clusters.size} draws of all chains", fontsize=9)
            sections.append("<h2>Co-clustering</h2>" + _figure(figure, "co-clustering heat map"))
    return sections


def _kept_partition(idata: Any, partition: Any, n_points: int) -> tuple[np.ndarray, str]:
    """The partition the clusters section shows, and how it was chosen: ``partition`` as given, else
    the point estimate (VI) where its O(N²) matrices fit in memory, else the draw of highest log joint."""
    from inference.diagnostics import point_estimate
    from inference.partitions import most_probable_draw, point_partition_shortfall

    if partition is not None:
        labels = np.asarray(partition)
        if labels.shape != (n_points,) or labels.dtype.kind not in "iu" or labels.min() < 0:
            raise ValueError(f"partition: expected {n_points} non-negative integer labels (one per clustered point), "
                             f"got an array of {labels.dtype} and shape {labels.shape}")
        return np.unique(labels, return_inverse=True)[1], "the partition given"
    if point_partition_shortfall(n_points) is None:
        return point_estimate(idata), "the point estimate (least posterior expected variation of information, by its lower bound)"
    chain, draw = most_probable_draw(idata.sample_stats["log_joint"])
    labels = np.asarray(_assignments(idata)[chain, draw])
    return np.unique(labels, return_inverse=True)[1], "the draw of highest log joint (a point estimate would not fit)"


def _fitted_features(fitted: Any) -> tuple[int | None, tuple[str, ...] | None]:
    """The number of features a DP or SCDP fit (or its estimator) was fitted on, and their names (a
    DataFrame's string column names); None for what it does not say (chains alone, e.g. loaded)."""
    if hasattr(fitted, "n_features_in_"):  # a fitted zoo.sklearn estimator
        names = getattr(fitted, "feature_names_in_", None)
        return int(fitted.n_features_in_), None if names is None else tuple(map(str, names))
    fitted = getattr(fitted, "fit_", fitted)
    continuation = getattr(fitted, "_continuation", None)
    names = getattr(continuation, "feature_names", None)
    shape = getattr(continuation, "data_shape", None)  # a DPMixtureFit's data
    means = getattr(getattr(getattr(fitted, "result", None), "final_state", None), "means", None)  # (..., D)
    if shape is not None and len(shape) == 2:
        return int(shape[1]), names
    if names is not None:
        return len(names), names
    if means is not None and np.ndim(means) >= 1:
        return int(np.shape(means)[-1]), names
    return None, names


def _clusters_sections(idata: Any, data: Any, col_names: Any, row_names: Any, partition: Any,
                       n_features: int | None = None, fitted_names: tuple[str, ...] | None = None) -> list[str]:
    """The clustered points' clusters: a heat map of each cluster's mean of every feature, in standard
    deviations of all the points from their mean, and a card per cluster whose members are listed by
    how often the draws keep them with the others. ``data`` must have the fit's ``n_features`` columns
    (a DataFrame's are matched to ``fitted_names`` by name) and a row per clustered point; a DataFrame's
    index, unless the default 0, 1, ..., names the points where ``row_names`` is not given."""
    import pandas as pd

    from inference._validation import in_fitted_order
    from inference._validation import row_names as index_names

    assignments = _assignments(idata)
    if assignments is None:
        raise ValueError("data: these chains keep no cluster assignments to show the data's clusters by")
    n_points = assignments.shape[-1]
    if isinstance(data, pd.DataFrame):
        data = in_fitted_order("data", data, fitted_names)
        col_names = list(map(str, data.columns)) if col_names is None else col_names
        row_names = index_names(data) if row_names is None else row_names
        data = data.to_numpy()
    features = as_float_array("data", data, ndim=2)
    if n_features is not None and features.shape[1] != n_features:
        raise ValueError(f"data: {features.shape[1]} columns, where the fit has {n_features} features (give the "
                         "clustered points' features, the columns the fit was given)")
    if features.shape[0] != n_points:
        raise ValueError(f"data: {features.shape[0]} rows, where the chains clustered {n_points} points (give the "
                         "clustered points' features, one row each)")
    columns = _label_tuple("col_names", col_names, features.shape[1]) or tuple(f"feature {index}" for index in
                                                                               range(features.shape[1]))
    names = _label_tuple("row_names", row_names, n_points)
    labels, chosen = _kept_partition(idata, partition, n_points)
    sizes = np.bincount(labels)
    spread = features.std(axis=0)
    scaled = (features - features.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    means = np.stack([scaled[labels == cluster].mean(axis=0) for cluster in range(sizes.size)])
    order = np.argsort(-sizes, kind="stable")[:MAX_HEATMAP_SIDE]
    shown = np.sort(np.argsort(-means.std(axis=0), kind="stable")[:MAX_HEATMAP_SIDE])
    values = means[np.ix_(order, shown)]
    # Colours saturate at CLUSTER_MEAN_LIMIT sd, so that a few outlying clusters leave the others visible.
    largest = float(np.abs(values).max())
    limit = min(max(largest, 1e-12), CLUSTER_MEAN_LIMIT)
    figure = _new_figure(_FULL_WIDTH, min(1.6 + 0.22 * order.size, 12.0))
    axis = figure.subplots()
    image = axis.imshow(values, aspect="auto", interpolation="nearest", cmap="RdBu_r", vmin=-limit, vmax=limit)
    axis.set_yticks(np.arange(order.size), [f"cluster {cluster} ({sizes[cluster]})" for cluster in order], fontsize=7)
    axis.set_xticks(np.arange(shown.size), [columns[index] for index in shown], rotation=90, fontsize=7)
    figure.colorbar(image, ax=axis, label="mean (sd of all points)", extend="both" if largest > limit else "neither")
    caption = (f"Each cluster's mean of every feature, in standard deviations of all {n_points:,} points from their "
               f"mean, for {chosen}; clusters by size" + (f" (the {order.size} largest of {sizes.size})"
                                                          if order.size < sizes.size else "")
               + (f", the {shown.size} features whose cluster means differ most" if shown.size < len(columns) else "")
               + (f"; colours saturate at ±{CLUSTER_MEAN_LIMIT:g} sd (the largest mean is {largest:.1f} sd from 0)"
                  if largest > limit else "") + ".")
    group = _cluster_group("Members of the clusters", chosen, "points",
                           np.asarray(assignments.values).reshape(-1, n_points), labels, names, "point")
    return ["<h2>Clusters of the points</h2>" + _figure(figure, "cluster means", html.escape(caption), wide=True),
            _profiles_html([group])]


# ----------------------------------------------------------------------------- the report
def report_html(fitted: Any, *, title: str | None = None, settings: dict[str, Any] | None = None,
                data: Any = None, row_names: Sequence[Any] | None = None,
                col_names: Sequence[Any] | None = None, calls: dict[str, str] | None = None,
                partition: Any = None) -> str:
    """The report of ``fitted`` as one HTML string (see :func:`write_report`)."""
    import arviz as az
    import pandas as pd

    chains = (isinstance(fitted, az.InferenceData) or hasattr(fitted, "fit_")
              or isinstance(getattr(fitted, "idata", None), az.InferenceData))
    if partition is not None and not (chains and data is not None):
        raise ValueError("partition: only with data, for the clusters of a DP or SCDP fit's points")
    for name, names in (("row_names", row_names), ("col_names", col_names)):
        if chains and data is None and names is not None:  # nothing to name: say so rather than drop them
            raise ValueError(f"{name}: Gibbs chains' report names only the rows and features of data (the clustered "
                             "points' features), which was not given")

    if isinstance(fitted, az.InferenceData) and isinstance(data, RelationalData):  # an IRM's chains, e.g. loaded
        fitted = IRMResult.from_inference_data(fitted, data)
    if isinstance(fitted, (LRMResult, IRMResult)):  # relational data: the domains' labels name the individuals
        if data is not None and not isinstance(data, RelationalData):
            raise TypeError(f"data: an {type(fitted).__name__}'s report takes the fitted "
                            f"zoo.relational.RelationalData, got {type(data).__name__}")
        if data is not None and (data.schema.domain_names, data.schema.domain_sizes) != (
                fitted.schema.domain_names, fitted.schema.domain_sizes):
            raise ValueError("data: its domains are not those of the fit "
                             f"({dict(zip(data.schema.domain_names, data.schema.domain_sizes))} against "
                             f"{dict(zip(fitted.schema.domain_names, fitted.schema.domain_sizes))})")
    elif data is not None and not isinstance(data, CoOccurrence) and not chains:
        raise not_co_occurrence("data", data)
    if col_names is None and getattr(fitted, "feature_names_in_", None) is not None:  # fitted on a DataFrame
        col_names = list(fitted.feature_names_in_)
    if hasattr(fitted, "result_") and isinstance(getattr(fitted, "result_"), EMResult):
        fitted = fitted.result_
    if calls is not None and not (isinstance(calls, dict)
                                  and all(isinstance(item, str) for pair in calls.items() for item in pair)):
        raise TypeError(f"calls: expected a dict of str to str, got {type(calls).__name__}")
    n_features, fitted_names = _fitted_features(fitted) if chains and data is not None else (None, None)
    estimator_calls: dict[str, str] = {}
    if hasattr(fitted, "fit_"):  # a fitted zoo.sklearn.DPMixtureEstimator or SupervisedDPEstimator
        # whose advice names the estimator's ways (a warm-started fit) instead of the fit's calls
        estimator_calls = fitted._estimator_calls() if hasattr(fitted, "_estimator_calls") else {}
        fitted = fitted.fit_
    # A fit's own mixing table: the quantities its warning judges, and its advice for its sampler
    # (SupervisedDPFit's names what SCDP offers, the IRM's its split-merge moves), naming the call
    # that continues its chains (an estimator's: a warm-started fit).
    table, quantities, irm = None, None, None
    made_by = getattr(getattr(fitted, "_continuation", None), "model", None)  # a fit's model, for the title
    if isinstance(getattr(fitted, "idata", None), az.InferenceData):  # e.g. zoo.dirichlet.mixture.DPMixtureFit
        table = getattr(fitted, "mixing", None)
        fitted = fitted.idata
    elif callable(getattr(fitted, "to_inference_data", None)) and hasattr(fitted, "scalar_quantities"):
        # zoo.relational.IRMResult: its relations' hyperparameters are judged value by value
        if np.shape(fitted.log_joint)[-1] == 0:  # stopped during its warm-up: as a DP fit's idata says
            raise ValueError(f"fitted: {NO_DRAWS}")
        table, quantities, irm = fitted.mixing, fitted.scalar_quantities(), fitted
        fitted = fitted.to_inference_data()
    if not isinstance(table, pd.DataFrame):
        table = None
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings: expected a dict, got {type(settings).__name__}")
    if isinstance(fitted, EMResult):
        sections = _em_sections(fitted, settings, row_names if row_names is not None else getattr(data, "row_names", None),
                                col_names if col_names is not None else getattr(data, "col_names", None))
        default_title = f"EM fit: {type(fitted.model).__name__}"
    elif isinstance(fitted, LRMResult):
        sections = _lrm_sections(fitted, settings, data)
        default_title = f"Incremental EM fit: {type(fitted.model).__name__}"
    elif isinstance(fitted, az.InferenceData):
        sections = chains_sections(fitted, table=table, quantities=quantities,
                                   calls=estimator_calls | (calls or {}))
        if irm is not None:
            sections += _irm_sections(irm, data)
        elif data is not None:  # the clustered points' features
            sections += _clusters_sections(fitted, data, col_names, row_names, partition, n_features, fitted_names)
        if settings:
            sections.insert(0, "<h2>Settings</h2>" + _table(list(settings.items())))
        default_title = "Gibbs chains" + ("" if made_by is None else f": {made_by!r}")
    else:
        raise TypeError(
            f"fitted: expected an inference.em.EMResult, a fitted zoo.sklearn estimator, a DPMixtureFit, an "
            f"IRMResult, an LRMResult or an arviz.InferenceData, got {type(fitted).__name__}"
        )
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title: expected a string, got {type(title).__name__}")
    heading = html.escape(title if title is not None else default_title)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{heading}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{heading}</h1><p class=\"note\">latentzoo report, {stamp}</p>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


def write_report(path: str | os.PathLike, fitted: Any, *, title: str | None = None,
                 settings: dict[str, Any] | None = None, data: Any = None,
                 row_names: Sequence[Any] | None = None, col_names: Sequence[Any] | None = None,
                 calls: dict[str, str] | None = None, partition: Any = None) -> Path:
    """Write a self-contained HTML report of an EM fit or of Gibbs chains.

    Parameters
    ----------
    path : str or PathLike
        Destination file (conventionally ``.html``); its folder is made if it does not exist.
    fitted : EMResult, zoo.sklearn estimator, DPMixtureFit, SupervisedDPFit, IRMResult, LRMResult or InferenceData
    title : str, optional
    settings : dict, optional
        Extra name/value rows for the summary table (e.g. the command line's options).
    data : zoo.data.CoOccurrence, zoo.relational.RelationalData or array_like (N, D), optional
        The fitted data (or any data of the same shape): its ``row_names`` and ``col_names`` label
        the classes' most probable rows and columns (see :func:`class_profiles`); for an
        ``LRMResult`` or an ``IRMResult`` the fitted ``RelationalData``, whose domains' labels
        name the individuals and whose relations' ``value_labels`` name the values; for a DP or
        SCDP fit (or its estimator, or chains whose posterior holds assignments) the features of
        the N clustered points (an SCDP fit's test points), which add the clusters' mean features
        and their members to the report: one row per clustered point and the fit's columns, else
        a ``ValueError`` naming ``data``. A ``pandas.DataFrame`` names its columns (matched by name
        to those of a fit on a DataFrame, as the fit's ``resume`` matches them) and, unless its
        index is the default 0, 1, ..., its rows by its index.
    row_names, col_names : sequence, optional
        Labels of the rows and columns, taking precedence over ``data``'s. Without any labels
        (nor an estimator's ``feature_names_in_`` for the columns) objects are named by index.
    calls : dict of str to str, optional
        Gibbs chains: the calls and settings that the mixing advice names (such as
        ``zoo.dirichlet.mixture.RESUME_CALL``), each with the reader's way to do the same, as the
        command line gives its options (a fitted estimator's are its own).
    partition : array_like of int (N,), optional
        With ``data`` for a DP or SCDP fit: the partition whose clusters the report shows (default:
        the point estimate, or the draw of highest log joint where the point estimate's O(N²)
        matrices would not fit in memory; the command line passes the one of ``labels.csv``).

    Returns
    -------
    pathlib.Path of the written file.

    Examples
    --------
    >>> import jax, tempfile
    >>> from inference.em import tempered_em
    >>> from zoo.dyadic.aspect import Aspect
    >>> data = CoOccurrence.from_dense([[4, 3, 0, 0], [5, 2, 0, 1], [0, 0, 6, 3], [0, 1, 4, 5]],
    ...                                col_names=["apple", "pear", "gene", "cell"])
    >>> result = tempered_em(Aspect(2), data, key=jax.random.key(0), max_iter=100)
    >>> path = write_report(Path(tempfile.mkdtemp()) / "aspect.html", result, data=data)
    >>> "apple" in path.read_text(encoding="utf-8")
    True
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    if Path(path).is_dir():
        raise ValueError(f"path: {str(path)!r} is a folder; give a file name in it, such as "
                         f"{str(Path(path) / 'report.html')!r}")
    document = report_html(fitted, title=title, settings=settings, data=data, row_names=row_names,
                           col_names=col_names, calls=calls, partition=partition)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document, encoding="utf-8")
    return path
