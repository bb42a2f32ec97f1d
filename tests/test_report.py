"""HTML reports: generated from EM results and from Gibbs chains, self-contained, with the right numbers."""

import base64
import html
import re
import struct
import sys

import arviz as az
import jax
import numpy as np
import pytest

from inference.diagnostics import mixing_table, mixing_verdict
from inference.em import tempered_em
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect
from zoo.report import MAX_HEATMAP_SIDE, history_figure, parameter_figures, report_html, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _images(document: str) -> list[bytes]:
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', document)]


def _assert_self_contained(document: str) -> None:
    assert document.startswith("<!DOCTYPE html>")
    assert "http://" not in document and "https://" not in document
    assert not re.search(r'src="(?!data:)', document)  # every image is embedded
    assert all(image.startswith(PNG_MAGIC) for image in _images(document))


@pytest.fixture(scope="module")
def tempered_result():
    data = CoOccurrence.from_dense(np.random.default_rng(0).poisson(1.5, size=(25, 70)))
    train, valid = data.split_tokens([0.8, 0.2], rng=1)
    return tempered_em(Aspect(3, backend="xla"), train, key=jax.random.key(0), valid=valid, n_restarts=2,
                       max_iter=80)


def test_em_report_shows_history_parameters_and_summary(tmp_path, tempered_result):
    path = write_report(tmp_path / "report.html", tempered_result, title="Aspect <test>",
                        settings={"data file": "counts.mtx"})
    document = path.read_text(encoding="utf-8")
    _assert_self_contained(document)
    assert "<h1>Aspect &lt;test&gt;</h1>" in document  # the title is escaped
    images = _images(document)
    assert len(images) == 1 + 3  # the history and one picture per parameter array
    for heading in ("Fit", "Restarts", "History", "Parameters"):
        assert f"<h2>{heading}</h2>" in document
    assert f"{tempered_result.beta:.4g}" in document
    assert f"<td>{tempered_result.stopped_by}</td>" in document
    assert f"{np.nanmin(tempered_result.history['valid_perplexity']):.6g}" in document
    assert "counts.mtx" in document
    for score in tempered_result.restart_scores:
        assert f"{score:.6g}" in document


def test_history_figure_has_one_panel_per_recorded_quantity(tempered_result):
    figure = history_figure(tempered_result)
    labels = [axis.get_ylabel() for axis in figure.axes]
    assert labels == ["training log-likelihood (β = 1)", "validation perplexity", "β"]
    line = figure.axes[0].lines[0]
    np.testing.assert_array_equal(line.get_ydata(), tempered_result.history["log_lik"])
    marker = figure.axes[0].lines[1]  # the dashed line at the kept iteration
    assert marker.get_xdata()[0] == tempered_result.best_iteration


def test_large_parameter_matrices_are_cut_to_their_largest_rows(tempered_result):
    figures = dict(parameter_figures(tempered_result.params))
    image = figures["col_given_class"].axes[0].images[0].get_array()
    assert image.shape == (MAX_HEATMAP_SIDE, 3)
    values = np.asarray(tempered_result.params.col_given_class, np.float64)
    kept = np.sort(np.argsort(-values.sum(axis=1), kind="stable")[:MAX_HEATMAP_SIDE])
    np.testing.assert_allclose(np.asarray(image), values[kept])


def _chains(seed=0, n_chains=3, n_draws=60, n_points=9):
    """Chains whose assignments put points 0-4 and 5-8 together, with label switching; point 0 is
    alone in the first 10 draws of every chain (so the number of clusters varies)."""
    rng = np.random.default_rng(seed)
    blocks = np.repeat([0, 1], [5, n_points - 5])
    relabel = rng.integers(0, 2, size=(n_chains, n_draws, 1))
    assignments = np.where(relabel == 1, 1 - blocks, blocks)
    assignments[:, :10, 0] = 2  # point 0 is on its own for a few draws
    return az.from_dict(
        posterior={"assignments": assignments, "alpha": rng.gamma(2.0, size=(n_chains, n_draws))},
        sample_stats={"n_clusters": np.array([[len(set(draw)) for draw in chain] for chain in assignments]),
                      "log_joint": rng.normal(size=(n_chains, n_draws))},
        dims={"assignments": ["points"]},
    )


def test_chains_report_has_label_invariant_diagnostics_and_co_clustering(tmp_path):
    idata = _chains()
    document = write_report(tmp_path / "chains.html", idata).read_text(encoding="utf-8")
    _assert_self_contained(document)
    for heading in ("Chains", "Label-invariant diagnostics", "Trace plots", "Rank plots", "Co-clustering"):
        assert f"<h2>{heading}</h2>" in document
    assert len(_images(document)) == 3
    view = az.InferenceData(posterior=idata.posterior[["alpha"]].merge(idata.sample_stats))
    table = mixing_table(view)
    for column in ("r_hat", "ess_bulk", "ess_tail"):
        assert f"<td>{table.loc['alpha', column]:.4g}</td>" in document
    np.testing.assert_allclose(table.loc["alpha", "r_hat"], az.rhat(idata)["alpha"].values)
    # 3 chains of 60 draws: far too few for ESS >= 400, and the verdict says so
    assert '<p class="verdict not-mixing">' + html.escape(mixing_verdict(table)) + "</p>" in document
    assert "Chains do NOT mix:" in document and "Uniform ranks" not in document
    assert "<td>not mixing</td>" in document
    for name in ("alpha", "n_clusters", "log_joint"):
        assert f"<th>{name}</th>" in document
    assert "<th>assignments" not in document  # labels are exchangeable: no R-hat for them


def _png_height(image: bytes) -> int:
    return struct.unpack(">II", image[16:24])[1]  # the IHDR chunk: width, height


def _iid_chains(n_chains=4, n_draws=400, seed=1, **stuck):
    """Independent draws of every quantity (they mix), except those given as (chain, draw) arrays."""
    rng = np.random.default_rng(seed)
    assignments = rng.integers(0, 3, size=(n_chains, n_draws, 6))
    sample_stats = {"n_clusters": np.array([[len(set(draw)) for draw in chain] for chain in assignments]),
                    "log_joint": rng.normal(size=(n_chains, n_draws))}
    return az.from_dict(
        posterior={"assignments": assignments, "alpha": np.full((n_chains, n_draws), 1.5)},
        sample_stats=sample_stats | stuck,
        dims={"assignments": ["points"]},
    )


def test_chains_report_says_whether_chains_mix():
    mixing = report_html(_iid_chains())
    verdict = ("Chains mix: R-hat &lt;= 1.01 and bulk and tail ESS &gt;= 400 for n_clusters, log_joint "
               "(alpha is constant).")
    assert f'<p class="verdict mixing">{verdict}</p>' in mixing
    assert mixing.index(verdict) < mixing.index('<table border="1" class="dataframe">')  # above the table
    assert ".verdict.mixing" in mixing and ".verdict.not-mixing" in mixing  # green and red styles
    # the constant α keeps its row, marked, without R-hat or ESS, and is not plotted
    assert re.search(r"<th>alpha</th>\s*<td>1.5</td>\s*<td>0</td>(\s*<td>n/a</td>){3}\s*<td>constant</td>", mixing)
    trace = _images(mixing)[0]
    assert _png_height(trace) == 2 * 2.0 * 90  # two rows of panels: n_clusters and log_joint
    disagree = np.repeat(np.array([[9], [10], [11], [10]]), 400, axis=1)
    drift = np.cumsum(np.random.default_rng(2).normal(size=(4, 400)), axis=1)
    stuck = report_html(_iid_chains(n_clusters=disagree, log_joint=drift))
    assert '<p class="verdict not-mixing">Chains do NOT mix: n_clusters (chains disagree: values by chain ' \
           "9, 10, 11, 10), log_joint (not mixing: R-hat " in stuck
    assert "Run longer, with more split-merge moves per sweep, the sub-cluster sampler or more chains" in stuck
    assert "<td>chains disagree</td>" in stuck and "<td>inf</td>" in stuck and "<td>NaN</td>" not in stuck
    one = report_html(_iid_chains(n_chains=1, n_draws=1000))
    assert '<p class="verdict mixing">The chain mixes: split R-hat &lt;= 1.01' in one
    assert "<h2>Rank plots</h2>" not in one


def test_report_accepts_a_fitted_estimator_and_rejects_other_objects(tempered_result):
    from zoo.sklearn import AspectEstimator

    estimator = AspectEstimator(n_classes=3)
    estimator.result_ = tempered_result  # what fit leaves behind
    assert "EM fit: Aspect" in report_html(estimator)
    with pytest.raises(TypeError, match="^fitted:"):
        report_html({"params": 1})
    with pytest.raises(TypeError, match="^settings:"):
        report_html(tempered_result, settings=[1])
    with pytest.raises(TypeError, match="^path:"):
        write_report(None, tempered_result)


def test_reports_leave_pyplot_alone(tmp_path, tempered_result):
    # other tests in the same process may have left figures open: compare before and after
    pyplot = sys.modules.get("matplotlib.pyplot")
    before = pyplot.get_fignums() if pyplot is not None else []
    write_report(tmp_path / "a.html", tempered_result)
    write_report(tmp_path / "b.html", _chains())
    if "matplotlib.pyplot" in sys.modules:
        assert sys.modules["matplotlib.pyplot"].get_fignums() == before
