"""HTML reports: generated from EM results and from Gibbs chains, self-contained, with the right numbers."""

import base64
import html
import re
import struct
import sys
import warnings

import arviz as az
import jax
import numpy as np
import pytest

from inference.diagnostics import from_dict_in_order, mixing_table, mixing_verdict, rhat_text
from inference.em import EMResult, tempered_em
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.one_sided import OneSided
from zoo.metrics import adjusted_rand_index
from zoo.report import (MAX_HEATMAP_SIDE, class_profiles, history_figure, parameter_figures, report_html, top_labels,
                         write_report)

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
    assert len(images) == 1  # the history; the parameters are the class cards, not heat maps
    for heading in ("Fit", "Restarts", "History", "Aspects"):
        assert f"<h2>{heading}</h2>" in document
    assert "<h2>Parameters</h2>" not in document and "largest" not in document
    assert f"<th>host_cpu</th><td>{tempered_result.provenance['host_cpu']}</td>" in document  # what made the fit
    # one card per class, by decreasing prior, the columns named by index as the data have no labels
    priors = np.asarray(tempered_result.params.class_prior)
    assert re.findall(r'<div class="class-card" data-class="(\d)">', document) == [
        str(index) for index in np.argsort(-priors, kind="stable")]
    for index, prior in enumerate(priors):
        assert f'data-class="{index}"><h3>class {index} <span class="prior">P(c) = {prior:.3f}</span>' in document
    top_column = int(np.argmax(tempered_result.params.col_given_class[:, 0]))
    assert re.search(rf'data-class="0">.*?<td>column {top_column}</td>', document)
    assert "rows, P(x|c)" not in document  # unlabelled rows are not listed
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
    for column in ("ess_bulk", "ess_tail"):
        assert f"<td>{table.loc['alpha', column]:.4g}</td>" in document
    assert f"<td>{rhat_text(table.loc['alpha', 'r_hat'])}</td>" in document  # never 1.01 for a failing 1.0100x
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
    return from_dict_in_order(  # in this order with any ArviZ (before 0.23 from_dict sorted them)
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
    assert "Run longer, or again with more split-merge moves per sweep, the sub-cluster sampler or more chains" in stuck
    assert "<td>chains disagree</td>" in stuck and "<td>inf</td>" in stuck and "<td>NaN</td>" not in stuck
    # A reader's own ways in place of the calls and settings the advice names (the command line's options).
    told = report_html(_iid_chains(n_clusters=disagree, log_joint=drift),
                       calls={"the sub-cluster sampler": "the sub-cluster sampler (--sampler subcluster)"})
    assert "per sweep, the sub-cluster sampler (--sampler subcluster) or more chains" in told
    with pytest.raises(TypeError, match="^calls: expected a dict of str to str"):
        report_html(_iid_chains(), calls={"the sub-cluster sampler": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a chain stuck at one real value: plotted without ArviZ's warning
        held = report_html(_iid_chains(log_joint=np.where(np.arange(4)[:, None] == 1, -521.1, drift)))
    assert "log_joint (stuck: chain 1 at -521.1 never moves" in held
    short = report_html(_iid_chains(n_draws=60))  # R-hat passes; 240 draws cannot give an ESS of 400
    assert '<p class="verdict undecided">Too few effective draws to rely on R-hat' in short
    assert "the chains hold 240 draws in all, so no ESS can reach 400" in short and ".verdict.undecided" in short
    one = report_html(_iid_chains(n_chains=1, n_draws=1000))
    assert '<p class="verdict mixing">The chain mixes: split R-hat &lt;= 1.01' in one
    assert "<h2>Rank plots</h2>" not in one
    # Every quantity held one value in all chains: nothing was assessed, so amber, not green.
    frozen = report_html(_iid_chains(n_clusters=np.full((4, 400), 2), log_joint=np.full((4, 400), -641.3)))
    assert '<p class="verdict undecided">Nothing to assess: alpha, n_clusters, log_joint held one value' in frozen


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_a_fits_report_judges_what_the_fit_judges_and_names_its_calls():
    # The report of a fit gives the fit's own mixing table and verdict: an IRM run's relation
    # hyperparameters value by value (the report left them out, and called undecided what the
    # run's warning called not mixing), and a DP fit's advice with the call that continues it.
    from zoo.dirichlet import DPMixture
    from zoo.dirichlet.families import normal_gamma
    from zoo.relational import InfiniteRelational, load_florentine_families

    irm = InfiniteRelational().sample(load_florentine_families(), jax.random.key(0), n_chains=2, n_draws=40,
                                      n_warmup=10, progress=False)
    dp = DPMixture(normal_gamma(2)).fit(np.random.default_rng(0).normal(size=(30, 2)), jax.random.key(0),
                                        n_chains=2, n_warmup=10, n_draws=40, progress=False)
    for fit in (irm, dp):
        document = report_html(fit)
        assert '">' + html.escape(mixing_verdict(fit.mixing)) + "</p>" in document
        for name in fit.mixing.index:
            assert f"<th>{html.escape(name)}</th>" in document
    assert "hyper_marriage[0]" in irm.mixing.index
    # Its title names the model that drew the chains; chains alone say only what they are.
    assert "<h1>Gibbs chains: DPMixture(normal_gamma(2)" in report_html(dp)
    assert "<h1>Gibbs chains: InfiniteRelational(" in report_html(irm)
    assert "<h1>Gibbs chains</h1>" in report_html(dp.idata)
    assert "fit.resume(data, n_draws=..., until_mixed=True) continues these chains" in report_html(dp)
    # The IRM's chains as ArviZ data (a saved chains.nc), without the network: the same quantities judged.
    document = report_html(irm.to_inference_data(assignments=True))
    for name in irm.mixing.index:
        assert f"<th>{html.escape(name)}</th>" in document
    assert mixing_verdict(irm.mixing).split(":")[0] in document


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_an_irm_report_shows_the_clusters_and_blocks_of_its_best_draw(tmp_path, monkeypatch):
    """An IRMResult's report adds, below the chains' diagnostics, each domain's clusters in the kept
    draw of highest log joint (its members named by the data, each with how often the draws put it
    with the others) and each relation's block probabilities in that draw, (γ_u + n_u) / (Σγ + n)."""
    from inference.partitions import most_probable_draw
    from zoo import report
    from zoo.relational import InfiniteRelational, RelationalData
    from zoo.report import _companions, _irm_blocks

    rng = np.random.default_rng(1)
    groups = np.repeat([0, 1, 2], 6)
    links = (groups[:, None] == groups[None, :]) & (rng.random((18, 18)) < 0.9)
    links = np.triu(links, 1)
    adjacency = (links | links.T).astype(float)
    data = RelationalData.from_adjacency(adjacency, domains="people", relation="knows",
                                         labels=[f"person {index}" for index in range(18)])
    result = InfiniteRelational().sample(data, jax.random.key(0), n_chains=2, n_draws=60, n_warmup=60,
                                         progress=False)
    document = write_report(tmp_path / "irm.html", result, data=data).read_text()
    _assert_self_contained(document)
    partition = result.map_partition()["people"]
    assert adjusted_rand_index(groups, partition) == 1.0
    assert "<h2>Clusters of the people</h2>" in document and "person 17" in document
    assert sorted(map(int, re.findall(r"(\d+) members</span>", document))) == [6, 6, 6]
    assert "relation knows" in document and "<h2>Label-invariant diagnostics</h2>" in document
    # The blocks: planted links within the groups, none between them.
    chain, draw = most_probable_draw(result.log_joint)
    blocks = _irm_blocks(result, result.map_partition(), 0, chain, draw)[..., 1]
    assert blocks.shape == (3, 3) and np.diag(blocks).min() > 0.7 and (blocks + np.eye(3)).min() < 0.1
    gamma = result.hyper["knows"][chain, draw]
    first = np.flatnonzero(partition == 0)
    within = adjacency[np.ix_(first, first)][np.triu_indices(6, 1)]  # each pair once, as the model counts it
    assert blocks[0, 0] == pytest.approx((within.sum() + gamma[1]) / (within.size + gamma.sum()))
    second = np.flatnonzero(partition == 1)
    between = adjacency[np.ix_(first, second)]  # 36 pairs, once each
    assert blocks[0, 1] == blocks[1, 0] == pytest.approx((between.sum() + gamma[1]) / (between.size + gamma.sum()))
    # How often the draws put each member with its cluster's others: by hand on a small case.
    draws, labels = rng.integers(0, 3, (40, 7)), np.array([0, 0, 0, 1, 1, 2, 1])
    expected = [np.mean([np.mean([draw[j] == draw[i] for j in range(7) if labels[j] == labels[i] and j != i])
                         for draw in draws]) if (labels == labels[i]).sum() > 1
                else np.mean([(draw == draw[i]).sum() == 1 for draw in draws]) for i in range(7)]
    np.testing.assert_allclose(_companions(draws, labels), expected)
    monkeypatch.setattr(report, "_COMPANION_BLOCK", 30)  # three draws a block: the same shares
    np.testing.assert_allclose(_companions(draws, labels), expected)
    # Without the data the individuals are numbered; other data is refused, named.
    assert "people 17" in report_html(result)
    with pytest.raises(TypeError, match="data: an IRMResult's report takes the fitted zoo.relational.RelationalData"):
        report_html(result, data=CoOccurrence.from_dense(np.ones((18, 18))))


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # short chains
def test_a_dp_report_given_the_data_shows_each_clusters_mean_features_and_members(tmp_path):
    """With the clustered points' features, a DP fit's report adds the clusters of its point estimate
    (or of the partition given): each cluster's mean of every feature, in sd of all points, and its
    members named, with how often the draws keep them with the others."""
    import pandas as pd

    from zoo.dirichlet import DPMixture
    from zoo.dirichlet.families import normal_gamma
    from zoo.sklearn import DPMixtureEstimator

    rng = np.random.default_rng(2)
    points = np.concatenate([rng.normal(-4.0, 0.5, (12, 2)), rng.normal(4.0, 0.5, (8, 2))])
    table = pd.DataFrame(points, columns=["height", "weight"])
    names = [f"animal {index}" for index in range(20)]
    fit = DPMixture(normal_gamma(2)).fit(points, jax.random.key(0), n_chains=2, n_warmup=20, n_draws=60,
                                         progress=False)
    document = write_report(tmp_path / "dp.html", fit, data=table, row_names=names).read_text()
    _assert_self_contained(document)
    assert "<h2>Clusters of the points</h2>" in document and "for the point estimate" in document
    assert sorted(map(int, re.findall(r"(\d+) members</span>", document))) == [8, 12]
    assert "animal 19" in document and "Members of the clusters" in document
    assert len(_images(document)) == len(_images(report_html(fit))) + 1  # the cluster means
    # A partition given is the one shown; its size and the data's rows are checked, named.
    given = np.repeat([5, 7], 10)
    assert sorted(map(int, re.findall(r"(\d+) members</span>", report_html(fit, data=points, partition=given)))) \
        == [10, 10]
    with pytest.raises(ValueError, match="^partition: expected 20 non-negative integer labels"):
        report_html(fit, data=points, partition=given[:5])
    with pytest.raises(ValueError, match="^partition: only with data"):
        report_html(fit, partition=given)
    with pytest.raises(ValueError, match="^data: 19 rows, where the chains clustered 20 points"):
        report_html(fit, data=points[1:])
    with pytest.raises(ValueError, match="^row_names: 3 labels"):
        report_html(fit, data=points, row_names=names[:3])
    with pytest.raises(ValueError, match="^col_names: Gibbs chains' report names only the rows and features of data"):
        report_html(fit, col_names=["height", "weight"])
    # An estimator fitted on the table: its own chains, the same section.
    estimator = DPMixtureEstimator(n_chains=2, n_warmup=20, n_draws=40, random_state=0).fit(table)
    assert "<h2>Clusters of the points</h2>" in report_html(estimator, data=table)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # a few draws
def test_the_data_of_a_chains_report_must_have_the_fits_columns_and_its_index_names_the_rows():
    import pandas as pd

    from zoo.dirichlet import DPMixture, SupervisedDP
    from zoo.dirichlet.families import normal_gamma
    from zoo.sklearn import DPMixtureEstimator

    rng = np.random.default_rng(3)
    train, test = rng.normal(size=(12, 3)), rng.normal(size=(6, 3))
    columns = ["height", "weight", "age"]
    index = pd.Index([f"person {row}" for row in range(6)], name="person")
    table = pd.DataFrame(test, columns=columns, index=index)
    scdp = SupervisedDP(1).fit(pd.DataFrame(train, columns=columns), np.repeat([0, 1, 2], 4), table,
                               jax.random.key(0), n_chains=1, n_draws=4, n_warmup=2, progress=False)
    dp = DPMixture(normal_gamma(3)).fit(test, jax.random.key(0), n_chains=1, n_draws=4, n_warmup=2, progress=False)
    estimator = DPMixtureEstimator(n_chains=1, n_warmup=2, n_draws=4, random_state=0).fit(test)
    for fitted in (scdp, dp, estimator):
        with pytest.raises(ValueError, match=r"^data: 2 columns, where the fit has 3 features"):
            report_html(fitted, data=test[:, :2])
    with pytest.raises(ValueError, match=r"^data: its column names are not the feature names of the fit \(missing "
                                         r"'age'; unexpected 'year'\)"):
        report_html(scdp, data=table.rename(columns={"age": "year"}))
    # A DataFrame's index names the points, unless row_names does; its columns are matched by name.
    assert "person 5" in report_html(scdp, data=table[columns[::-1]])
    named = report_html(scdp, data=table, row_names=[f"record {row}" for row in range(6)])
    assert "record 5" in named and "person 5" not in named
    assert "person 5" not in report_html(dp, data=table.reset_index(drop=True))  # the default index: by position


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


def test_chains_without_draws_and_a_folder_for_the_file_are_named(tmp_path, tempered_result):
    from zoo.relational import InfiniteRelational
    from zoo.relational.data import load_florentine_families

    with pytest.raises(ValueError, match=r"^path: '.*' is a folder; give a file name in it, such as '.*report.html'"):
        write_report(tmp_path, tempered_result)
    # An IRM stopped during its warm-up kept the warm-up and no draws: said so, as a DP fit's report does,
    # where ArviZ's trace plot failed on the empty draws.
    stopped = InfiniteRelational().sample(load_florentine_families(), jax.random.key(0), n_chains=2, n_warmup=50,
                                          n_draws=10, time_budget=1e-9, progress=False)
    assert np.shape(stopped.log_joint)[-1] == 0
    with pytest.raises(ValueError, match=r"^fitted: the run kept no draws: it stopped during its warm-up; "
                                         r"result.resume\(data"):
        write_report(tmp_path / "irm.html", stopped)
    empty = az.from_dict(posterior={"alpha": np.zeros((2, 0))})
    with pytest.raises(ValueError, match=r"^idata: holds no draws"):
        report_html(empty)


def test_reports_leave_pyplot_alone(tmp_path, tempered_result):
    # other tests in the same process may have left figures open: compare before and after
    pyplot = sys.modules.get("matplotlib.pyplot")
    before = pyplot.get_fignums() if pyplot is not None else []
    write_report(tmp_path / "a.html", tempered_result)
    write_report(tmp_path / "b.html", _chains())
    if "matplotlib.pyplot" in sys.modules:
        assert sys.modules["matplotlib.pyplot"].get_fignums() == before


# ----------------------------------------------------------------------------- classes and their labels
FRUIT = ("apple", "pear", "plum", "fig", "kiwi", "lime")
SCIENCE = ("gene", "cell", "protein", "enzyme", "virus", "tissue")


@pytest.fixture(scope="module")
def planted():
    """30 documents of fruit words and 30 of science words (rows 0-29 and 30-59), over 12 filler words."""
    rng = np.random.default_rng(3)
    words = FRUIT + SCIENCE + tuple(f"filler{index}" for index in range(12))
    counts = rng.poisson(0.2, size=(60, len(words)))
    counts[:30, :6] += rng.poisson(3.0, size=(30, 6))
    counts[30:, 6:12] += rng.poisson(3.0, size=(30, 6))
    return CoOccurrence.from_dense(counts, row_names=[f"doc{index}" for index in range(60)], col_names=words)


def _cards(document: str) -> dict[int, str]:
    return {int(index): card for index, card in
            re.findall(r'<div class="class-card" data-class="(\d+)">(.*?)</div>', document, flags=re.S)}


def _listed(card: str, heading: str) -> list[str]:
    # a member list cut at n_top says so after its heading: "(the first 10 of 30)"
    table = re.search(rf"<caption>{re.escape(html.escape(heading))}( \(the first \d+ of \d+\))?</caption>(.*?)</table>",
                      card, flags=re.S)
    return re.findall(r"<tr><td>([^<]*)</td>", table.group(2))


def _planted_topic(labels) -> set:
    """Which planted vocabulary the 6 first labels are, or the labels themselves if neither."""
    first = set(labels[:6])
    return {"fruit"} if first == set(FRUIT) else {"science"} if first == set(SCIENCE) else first


def test_aspect_report_lists_the_planted_words_of_each_class(planted):
    result = tempered_em(Aspect(2, backend="xla"), planted, key=jax.random.key(0), max_iter=100)
    document = report_html(result, data=planted)
    cards = _cards(document)
    assert len(cards) == 2
    topics = [_planted_topic(_listed(card, "columns, P(y|c)")) for card in cards.values()]
    assert sorted(map(tuple, topics)) == [("fruit",), ("science",)]
    for index, card in cards.items():
        words = _listed(card, "columns, P(y|c)")
        assert len(words) == 10  # N_TOP_LABELS, then the fillers
        documents = {int(name[3:]) for name in _listed(card, "rows, P(x|c)")}  # the rows are labelled too
        fruit = _planted_topic(words) == {"fruit"}
        assert documents <= (set(range(30)) if fruit else set(range(30, 60)))
        column = np.asarray(result.params.col_given_class)[:, index]
        assert f"<td>{words[0]}</td><td class=\"p\">{column.max():.3f}</td>" in card
    # the profile behind the cards: words by decreasing P(y|c), and the same with labels given directly
    (group,) = class_profiles(result, col_names=planted.col_names)
    top = group.classes[0].top[0]
    assert np.all(np.diff(top.probabilities) <= 0) and len(group.classes[0].top) == 1  # rows unlabelled
    assert report_html(result, col_names=planted.col_names).count("<td>apple</td>") == 1


@pytest.mark.parametrize("side", ["rows", "cols"])
def test_one_sided_report_lists_features_and_members_of_each_cluster(planted, side):
    result = tempered_em(OneSided(2, side=side, backend="xla"), planted, key=jax.random.key(1), max_iter=100)
    cards = _cards(report_html(result, data=planted))
    assert len(cards) == 2
    for card in cards.values():
        if side == "rows":  # documents clustered: the words are the features, the documents the members
            words, members = _listed(card, "columns, P(y|c)"), _listed(card, "members, P(x|c)")
            fruit = _planted_topic(words) == {"fruit"}
            assert _planted_topic(words) in ({"fruit"}, {"science"})
            assert {int(name[3:]) for name in members} <= (set(range(30)) if fruit else set(range(30, 60)))
            assert re.search(r"P\(c\) = 0\.5\d\d, 30 members|P\(c\) = 0\.4\d\d, 30 members", card)
        else:  # words clustered: the documents are the features, the words the members
            documents, words = _listed(card, "rows, P(x|c)"), _listed(card, "members, P(y|c)")
            planted_words = {"apple", "gene"} & set(words[:6])
            assert len(planted_words) == 1
            fruit = planted_words == {"apple"}
            assert {int(name[3:]) for name in documents} <= (set(range(30)) if fruit else set(range(30, 60)))


def test_two_sided_profiles_follow_the_association():
    from zoo.dyadic.two_sided import TwoSided, TwoSidedParams

    # rows 0-1 in row cluster 0, row 2 in 1; columns 0 and 2 in column cluster 0, column 1 in 1;
    # row cluster 0 goes with column cluster 1 and row cluster 1 with column cluster 0
    params = TwoSidedParams(
        row_class_prior=np.array([0.6, 0.4]), col_class_prior=np.array([0.3, 0.7]),
        association=np.array([[0.1, 0.5], [0.3, 0.1]]),
        row_posterior=np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]),
        col_posterior=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]),
        row_marginal=np.array([0.5, 0.3, 0.2]), col_marginal=np.array([0.25, 0.5, 0.25]),
    )
    result = EMResult(model=TwoSided(2, 2), params=params, beta=1.0, history={}, restart_scores=np.array([0.0]),
                      best_restart=0, n_iter=0, converged=True, best_iteration=0)
    rows, cols = class_profiles(result, row_names=["a", "b", "c"], col_names=["x", "y", "z"])
    assert [profile.title for profile in rows.classes] == ["row cluster 0", "row cluster 1"]
    assert [profile.title for profile in cols.classes] == ["column cluster 1", "column cluster 0"]  # by prior
    members, columns = rows.classes[0].top
    assert members.labels == ("a", "b") and rows.classes[0].n_members == 2
    np.testing.assert_allclose(members.probabilities, [0.5, 0.27] / np.float64(0.77))
    # P(y|ν=0) = (1/6) P(y|μ=0) + (5/6) P(y|μ=1), with P(y|μ=0) = (x: 1/2, z: 1/2) and P(y|μ=1) = (y: 1)
    assert columns.labels == ("y", "x", "z")
    np.testing.assert_allclose(columns.probabilities, [5 / 6, 1 / 12, 1 / 12])
    # Read without the report: printed, as a table, and named in the fit's summary.
    assert repr(rows).splitlines()[:4] == [rows.title, "  row cluster 0: P(ν) = 0.600, 2 members",
                                           "    members, P(x|ν): a, b", "    columns, P(y|ν): y, x, z"]
    frame = rows.to_frame()
    assert list(frame.index) == ["row cluster 0", "row cluster 1"] and frame.loc["row cluster 0", "members"] == 2
    assert frame.loc["row cluster 0", "columns, P(y|ν)"] == "y, x, z" and "<table" in rows._repr_html_()
    assert "zoo.report.class_profiles(result, col_names=data.col_names)" in repr(result)
    document = report_html(result, col_names=["x", "y", "z"])
    assert "<h2>Row clusters</h2>" in document and "<h2>Column clusters</h2>" in document
    assert "<td>row 0</td>" in document  # unlabelled rows are named by their index
    # the association as a table: π_νμ and c_νμ = π_νμ / (π^x_ν π^y_μ); no heat map is drawn
    assert "<h2>Association of the row and column clusters</h2>" in document
    assert f"0.500 ({0.5 / (0.6 * 0.6):.2f})</td>" in document
    assert not _images(document)[1:]


def test_class_labels_are_checked(planted, tempered_result):
    with pytest.raises(ValueError, match="^row_names: 60 labels for the 25 rows of the fitted model"):
        report_html(tempered_result, data=planted)
    with pytest.raises(ValueError, match="^col_names: 24 labels for the 70 columns of the fitted model"):
        report_html(tempered_result, col_names=planted.col_names)
    with pytest.raises(ValueError, match="^row_names: 2 labels for the 25"):
        report_html(tempered_result, row_names=["a", "b"])
    with pytest.raises(TypeError, match="^data:"):
        report_html(tempered_result, data=np.ones((25, 70)))
    with pytest.raises(TypeError, match="^col_names:"):
        report_html(tempered_result, col_names="abc")
    assert top_labels([0.2, 0.0, 0.5], ["a", "b", "c"], n_top=5).labels == ("c", "a")
    # NaN was dropped in silence, n_top=-1 gave one label, a matrix was flattened.
    for bad, error, name in [([0.2, np.nan], ValueError, "probabilities"), ([[0.2, 0.1]], ValueError, "probabilities"),
                             ([0.2, -0.1], ValueError, "probabilities")]:
        with pytest.raises(error, match=f"^{name}"):
            top_labels(bad)
    with pytest.raises(ValueError, match="^n_top"):
        top_labels([0.2, 0.5], n_top=-1)
    from zoo.report import _new_figure  # every figure's size (history_figure's width=, ...)

    with pytest.raises(ValueError, match="^width"):
        _new_figure(-1.0, 2.0)
    with pytest.raises(ValueError, match="^n_top"):
        class_profiles(tempered_result, n_top=0)


def test_estimator_fitted_on_a_data_frame_labels_the_columns(tempered_result):
    from zoo.sklearn import AspectEstimator

    estimator = AspectEstimator(n_classes=3)
    estimator.result_ = tempered_result
    estimator.feature_names_in_ = np.array([f"word{index}" for index in range(70)], dtype=object)
    top = int(np.argmax(tempered_result.params.col_given_class[:, 0]))
    assert re.search(rf'data-class="0">.*?<td>word{top}</td>', report_html(estimator), flags=re.S)


def test_figures_come_in_pairs_and_a_lone_one_spans_the_row():
    from zoo.dyadic.cluster_abstraction import ClusterAbstraction

    counts = np.random.default_rng(4).poisson(1.0, size=(12, 10))
    result = tempered_em(ClusterAbstraction(depth=2, backend="xla"), CoOccurrence.from_dense(counts),
                         key=jax.random.key(0), max_iter=3)
    document = report_html(result)
    parameters = document[document.index("<h2>Parameters</h2>"):]
    figures = re.findall(r'<figure( class="wide")?><img alt="([^"]+)" src="data:image/png;base64,([^"]+)"',
                         parameters)
    # 5 arrays, none summarised: the vectors paired, then the matrices
    assert [name for _, name, _ in figures] == ["cluster_prior", "row_marginal", "col_given_node", "level_weights",
                                                "cluster_posterior"]
    sizes = [struct.unpack(">II", base64.b64decode(data)[16:24]) for _, _, data in figures]
    assert [bool(wide) for wide, _, _ in figures] == [False] * 4 + [True]
    assert [width for width, _ in sizes] == [6 * 90] * 4 + [12 * 90]  # the lone last one is twice as wide
    assert sizes[0][1] == sizes[1][1] == 2 * 90  # two bar charts
    assert sizes[2][1] == sizes[3][1] == round((1 + 0.12 * 10) * 90)  # drawn at the height of the taller
    # the history shares its row with the fit table
    assert re.search(r'<div class="row"><div><h2>Fit</h2>.*?</div><div><h2>History</h2><figure><img', document,
                     flags=re.S)


def test_latent_class_relational_report_names_the_individuals_and_shows_each_relation(tmp_path):
    """An LRMResult (CP): fit summary and restarts, each domain's classes with their members named by
    the data's labels, and each relation's θ_r drawn: a relation of three values as three heat maps,
    a unary one as classes × values."""
    from zoo.relational import LatentClassRelational, RelationalData
    from zoo.relational.data import Relation

    rng = np.random.default_rng(0)
    users, items = np.repeat([0, 1], 6), np.repeat([0, 1, 2], 4)
    ratings = np.where(users[:, None] == (items[None, :] % 2), 2, 0) + (rng.random((12, 12)) < 0.1)
    data = RelationalData.from_adjacency(np.minimum(ratings, 2).astype(float), domains=("users", "films"),
                                         relation="rates", values=(0, 1, 2),
                                         labels=([f"user {index}" for index in range(12)],
                                                 [f"film {index}" for index in range(12)]))
    # and a unary relation: each user's age group
    age = Relation("age", ("users",), (12,), np.arange(12)[:, None], users, value_labels=("young", "old"))
    data = RelationalData(data.domains, (*data.relations, age))
    result = LatentClassRelational({"users": 2, "films": 3}).fit(data, key=jax.random.key(0), n_restarts=3)
    document = write_report(tmp_path / "lrm.html", result, data=data, settings={"command": "fit"}).read_text()
    _assert_self_contained(document)
    assert "<h1>Incremental EM fit: LatentClassRelational</h1>" in document
    assert "Classes of the users" in document and "Classes of the films" in document
    assert "user 7" in document and "film 11" in document and "relation rates" in document
    # A class's members, listed at most ten: a list cut short says so.
    from zoo.relational import load_karate_club
    from zoo.report import report_html

    karate = load_karate_club()
    page = report_html(LatentClassRelational(2).fit(karate, key=jax.random.key(0)), data=karate)
    assert "<caption>members, q_a(h) (the first 10 of 29)</caption>" in page
    members = re.findall(r"(\d+) members</span>", document)
    assert sorted(map(int, members[:2])) == [6, 6] and sum(map(int, members[2:])) == 12
    assert len(re.findall(r"<tr><td>\d</td><td>-?[\d.]+</td></tr>", document)) == 3  # one row per restart
    assert "relation age" in document
    assert len(_images(document)) == 3  # the history, and each relation's θ_r (three values in one figure)
    # Without the data the individuals are numbered; data of other domains is refused.
    assert "users 7" in report_html(result)
    with pytest.raises(ValueError, match="data: its domains are not those of the fit"):
        report_html(result, data=RelationalData.from_adjacency([[0, 1, 0], [1, 0, 0], [0, 0, 0]], domains="people"))
    with pytest.raises(TypeError, match="data: an LRMResult's report takes the fitted zoo.relational.RelationalData"):
        report_html(result, data=CoOccurrence.from_dense(np.ones((12, 12))))
