"""Command line, run in-process: `list`, and `fit` on MatrixMarket, LDA-C and CSV files."""

import re

import jax
import numpy as np
import pandas as pd
import pytest

from inference.schedules import FixedBeta, TemperedEM
from zoo.__main__ import main
from zoo.cli import CHAIN_MODELS, RELATIONAL_EM_MODELS, read_network
from zoo.data import CoOccurrence
from zoo.datasets import write_ldac, write_matrix_market
from zoo.io import chains_settings, load_chains, load_result, read_metadata
from zoo.registry import MODEL_NAMES
from zoo.relational.infinite import IRMResult
from zoo.report import report_html
from zoo.sklearn import ESTIMATORS

COUNTS = CoOccurrence.from_dense(np.random.default_rng(0).poisson(1.2, size=(24, 10)))
# The same settings in every fit, so the compiled EM loop is reused across tests.
FIT_OPTIONS = ["--classes", "3", "--max-iter", "40", "--seed", "1", "--quiet"]


def test_list_prints_every_model(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in MODEL_NAMES:
        (line,) = [line for line in lines if line.split() and line.split()[0] == name]
        assert (" fit " in line) == (name in ESTIMATORS or name in CHAIN_MODELS or name in RELATIONAL_EM_MODELS)
    printed = "\n".join(lines)
    assert "[counts]" in printed and "[features]" in printed and "[relational]" in printed


def test_describe_prints_a_card(capsys):
    assert main(["describe", "acm"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("one-sided\n") and "H99 eqs. 5-7" in printed
    assert main(["describe", "one-side"]) == 1
    assert "name: no model 'one-side'" in capsys.readouterr().err


@pytest.mark.parametrize("writer, filename", [(write_matrix_market, "counts.mtx"), (write_ldac, "counts.ldac")])
def test_fit_writes_a_result_and_a_report(tmp_path, capsys, writer, filename):
    writer(tmp_path / filename, COUNTS)
    out = tmp_path / "fit"
    assert main(["fit", "aspect", str(tmp_path / filename), *FIT_OPTIONS, "--schedule", "em", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'result.npz'}" in printed and f"wrote {out / 'report.html'}" in printed
    result = load_result(out / "result.npz")
    assert result.model.n_classes == 3
    assert result.params.row_given_class.shape == COUNTS.shape[:1] + (3,)
    metadata = read_metadata(out / "result.npz")
    assert metadata["schedule"] == FixedBeta(1.0)
    assert metadata["settings"]["data file"].endswith(filename)
    assert "python -m zoo fit aspect" in metadata["settings"]["command"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert f"aspect on {filename}" in report and "data:image/png;base64," in report


def test_tempered_fit_of_a_csv_edge_list_with_a_progress_bar(tmp_path, capsys):
    rows, cols = np.repeat(COUNTS.rows, COUNTS.counts.astype(int)), np.repeat(COUNTS.cols, COUNTS.counts.astype(int))
    lines = ["source,target"] + [f"doc{row},word{col}" for row, col in zip(rows, cols)]
    (tmp_path / "edges.csv").write_text("\n".join(lines) + "\n")
    options = [option for option in FIT_OPTIONS if option != "--quiet"]
    assert main(["fit", "aspect", str(tmp_path / "edges.csv"), *options, "--valid-fraction", "0.2",
                 "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "EM:" in captured.err  # tqdm's bar
    assert "best validation perplexity" in captured.out
    result = load_result(tmp_path / "out" / "result.npz")
    assert np.isfinite(result.history["valid_perplexity"]).all()
    assert read_metadata(tmp_path / "out" / "result.npz")["schedule"] == TemperedEM()
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    # The classes' top columns and rows under their names in the file.
    assert re.search(r"word\d+", report) and re.search(r"doc\d+", report)
    labels = pd.read_csv(tmp_path / "out" / "labels.csv")  # each document's likeliest aspect, by name
    assert list(labels.columns) == ["row", "aspect"] and labels["row"].str.startswith("doc").all()
    np.testing.assert_array_equal(labels["aspect"], np.argmax(np.asarray(result.params.class_given_row()), axis=1))


def test_a_fit_whose_validation_tokens_all_have_probability_zero_says_so(tmp_path, capsys):
    # Every document has a word of its own, seen once: held out, it has probability 0 under every
    # iterate, so no validation perplexity is finite and the summary says why instead of hiding it.
    lines = ["source,target"] + [f"doc{doc},{word}" for doc in range(12) for word in ("a", "b", "c", f"own{doc}")]
    (tmp_path / "edges.csv").write_text("\n".join(lines) + "\n")
    assert main(["fit", "aspect", str(tmp_path / "edges.csv"), "--classes", "2", "--valid-fraction", "0.5",
                 "--max-iter", "20", "--quiet", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "validation perplexity inf at every iterate (held-out tokens of probability 0; --floor or " \
           "--prior-count gives them some), training log-likelihood" in printed, printed
    # The fit's warning follows what the run did, once, its advice in the command's options.
    warning = [line for line in printed.splitlines() if line.startswith("RuntimeWarning: tempered_em: every")]
    assert len(warning) == 1 and "Give --floor (e.g. 1e-6)" in warning[0] and "--prior-count > 0" in warning[0]
    assert "floor=" not in printed and "prior_count" not in printed


@pytest.mark.parametrize("model", ["one-sided", "two-sided", "cam"])
def test_default_schedule_is_the_models_own_and_the_clusters_are_written(tmp_path, capsys, model):
    # The one-sided model anneals up from a low beta (its default_schedule): plain TemperedEM kept
    # its first iterate on Reuters, worse than predicting by word frequency. The cluster-abstraction
    # model does too, here on a balanced tree of 3 leaves (--classes 3, not a power of 2).
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)
    out = tmp_path / model
    assert main(["fit", model, str(tmp_path / "counts.mtx"), *FIT_OPTIONS, "--prior-count", "0.5",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = load_result(out / "result.npz")
    metadata = read_metadata(out / "result.npz")
    assert metadata["schedule"] == (TemperedEM() if model == "two-sided" else result.model.default_schedule())
    assert metadata["settings"]["schedule"] == "auto" and metadata["settings"]["prior count"] == 0.5
    assert result.model.prior_count == 0.5 and np.isfinite(result.history["valid_perplexity"]).any()
    labels = pd.read_csv(out / "labels.csv")
    assigned = result.params.row_assignments() if model == "two-sided" else result.params.assignments()
    np.testing.assert_array_equal(labels["cluster"], np.asarray(assigned))
    np.testing.assert_array_equal(labels["row"], np.arange(COUNTS.shape[0]))
    assert f"wrote {out / 'labels.csv'}" in printed
    if model == "two-sided":
        columns = pd.read_csv(out / "column_labels.csv")
        np.testing.assert_array_equal(columns["cluster"], np.asarray(result.params.col_assignments()))


def test_a_time_budget_keeps_the_fit_so_far(tmp_path, capsys):
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)
    out = tmp_path / "cut"
    assert main(["fit", "aspect", str(tmp_path / "counts.mtx"), *FIT_OPTIONS, "--schedule", "em",
                 "--time-budget", "1e-9", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "(time_budget)" in printed
    assert re.search(r"ConvergenceWarning: aspect: EM stopped after \d+ iterations \(--time-budget 1e-09 s "
                     r"ran out\) .*\(a larger --time-budget fits longer\)", printed), printed
    assert "warm_start" not in printed and "time_budget=" not in printed
    assert load_result(out / "result.npz").stopped_by == "time_budget"
    assert read_metadata(out / "result.npz")["settings"]["time budget"] == 1e-9


def test_gaussian_mixture_fits_the_rows_as_feature_vectors(tmp_path):
    write_matrix_market(tmp_path / "points.mtx", COUNTS)
    assert main(["fit", "gaussian-mixture", str(tmp_path / "points.mtx"), *FIT_OPTIONS, "--schedule", "em",
                 "--out", str(tmp_path / "gmm")]) == 0
    result = load_result(tmp_path / "gmm" / "result.npz")
    assert result.params.locs.shape == (3, COUNTS.n_cols)
    assert len(pd.read_csv(tmp_path / "gmm" / "labels.csv")) == COUNTS.n_rows  # each row's component
    assert main(["fit", "gaussian-mixture", str(tmp_path / "points.mtx"), "--prior-count", "1"]) == 1


def test_gaussian_mixture_fits_a_table_of_points_as_the_dp_mixtures_read_it(tmp_path, capsys):
    # A CSV table (a row per point, a column per feature) was read as an edge list: "source: column
    # 'source' not in the file". Now as the DP mixtures read it, standardised unless --no-standardize.
    from sklearn.metrics import adjusted_rand_score

    truth = _blobs_table(tmp_path / "blobs.csv")
    out = tmp_path / "gmm"
    assert main(["fit", "gaussian-mixture", str(tmp_path / "blobs.csv"), "--id-column", "point", "--label-column",
                 "blob", *FIT_OPTIONS, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("gaussian-mixture: 36 rows x 6 features, standardised: x0, x1, x2, x3, x4, x5")
    labels = pd.read_csv(out / "labels.csv")
    assert list(labels.columns) == ["row", "cluster"] and list(labels["row"][:2]) == ["p0", "p1"]
    assert adjusted_rand_score(truth, labels["cluster"]) == 1.0
    assert load_result(out / "result.npz").params.locs.shape == (3, 6)


def test_format_option_and_unknown_extensions(tmp_path, capsys):
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)
    (tmp_path / "counts.mtx").rename(tmp_path / "counts.txt")
    assert main(["fit", "aspect", str(tmp_path / "counts.txt"), *FIT_OPTIONS, "--schedule", "em",
                 "--format", "mtx", "--out", str(tmp_path / "out")]) == 0
    assert main(["fit", "aspect", str(tmp_path / "counts.txt"), "--out", str(tmp_path / "out")]) == 1
    assert "DATAFILE: cannot tell the format" in capsys.readouterr().err


@pytest.mark.parametrize("options, message", [
    (["--classes", "0"], "--classes (n_classes): must be >= 1"),
    (["--valid-fraction", "1.5"], "--valid-fraction (valid_fraction): must be in"),
    (["--max-iter", "0"], "--max-iter (max_iter): must be >= 1"),
    (["--restarts", "0"], "--restarts (n_restarts): must be >= 1"),
    (["--time-budget", "-1"], "--time-budget (time_budget): must be in (0.0, inf), got -1.0"),
    (["--prior-count", "-1"], "--prior-count (prior_count): must be in [0.0, inf), got -1.0"),
    (["--floor", "2"], "--floor (floor): must be in (0.0, 1.0), got 2.0"),
])
def test_bad_options_are_reported_without_a_traceback(tmp_path, capsys, options, message):
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)
    assert main(["fit", "aspect", str(tmp_path / "counts.mtx"), *options, "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("python -m zoo fit: error: ") and message in error


def _blobs_table(path):
    """Three blobs of 12 points in 6-D, with row names and the blobs' labels: far enough apart for
    CDP's unit-precision clusters on the standardised features (the distance adds up over the
    features) and spread enough that the partition moves (with a spread of 0.3 every chain held one
    partition: nothing to assess; with 1.5, the spread until 2026-12-05, so did the Normal-Gamma
    mixture's chains once Algorithm 3 became its default sampler, whose collapsed log joint is
    constant while the partition is)."""
    rng = np.random.default_rng(0)
    truth = np.repeat([0, 1, 2], 12)
    points = 5.0 * rng.normal(size=(3, 6))[truth] + 2.0 * rng.normal(size=(36, 6))
    lines = ["point," + ",".join(f"x{column}" for column in range(6)) + ",blob"] + [
        f"p{index}," + ",".join(f"{value:.4f}" for value in point) + f",b{label}"
        for index, (point, label) in enumerate(zip(points, truth))]
    path.write_text("\n".join(lines) + "\n")
    return truth


@pytest.mark.parametrize("model", ["dp-mixture", "cdp"])
def test_dp_mixtures_fit_a_table_until_the_chains_mix(tmp_path, capsys, model):
    truth = _blobs_table(tmp_path / "blobs.csv")
    out = tmp_path / model
    assert main(["fit", model, str(tmp_path / "blobs.csv"), "--id-column", "point", "--label-column", "blob",
                 "--chains", "2", "--warmup", "20", "--seed", "1", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{model}: 36 rows x 6 features from blobs.csv")
    assert "point estimate: 3 clusters" in printed and "against blob: F 1.000" in printed
    assert "Chains mix:" in printed  # by default the run goes on until they do
    for name in ("chains.nc", "labels.csv", "report.html"):
        assert f"wrote {out / name}" in printed
    labels = (out / "labels.csv").read_text().splitlines()
    assert labels[0] == "point,cluster" and len(labels) == 37 and labels[1].startswith("p0,")
    clusters = np.array([int(line.split(",")[1]) for line in labels[1:]])
    assert all(np.unique(clusters[truth == blob]).size == 1 for blob in range(3))
    idata = load_chains(out / "chains.nc")
    n_draws = idata.posterior.sizes["draw"]
    assert 200 <= n_draws < 4000  # two chains need 200 draws each for a bulk ESS of 400
    settings = chains_settings(idata)["settings"]
    assert settings["command"].startswith(f"python -m zoo fit {model}") and settings["chains"] == 2
    assert f"{model} on blobs.csv" in (out / "report.html").read_text(encoding="utf-8")


def test_dp_mixture_with_fixed_draws_says_what_to_run_longer_with(tmp_path, capsys):
    _blobs_table(tmp_path / "blobs.csv")
    assert main(["fit", "dp-mixture", str(tmp_path / "blobs.csv"), "--id-column", "point", "--label-column", "blob",
                 "--chains", "2", "--warmup", "20", "--draws", "30", "--no-standardize", "--quiet",
                 "--out", str(tmp_path / "short")]) == 0
    printed = capsys.readouterr().out
    assert "2 chains x 30 draws" in printed and "(a larger --draws)" in printed and "fit.resume" not in printed
    assert load_chains(tmp_path / "short" / "chains.nc").posterior.sizes["draw"] == 30


def test_rows_too_many_for_a_point_estimate_get_the_most_probable_draw(tmp_path, capsys, monkeypatch):
    import inference.partitions
    import zoo.dirichlet.supervised.fit  # noqa: F401  imported before the patch, which its own import would keep

    _blobs_table(tmp_path / "blobs.csv")
    shortfall = "a point estimate of 36 points needs about 1 TiB, more than the 1 GiB of host memory"
    monkeypatch.setattr(inference.partitions, "point_partition_shortfall", lambda n_points: shortfall)
    monkeypatch.setattr(inference.partitions, "point_partition", lambda *args, **kwargs: pytest.fail("estimated"))
    out = tmp_path / "large"
    assert main(["fit", "dp-mixture", str(tmp_path / "blobs.csv"), "--id-column", "point", "--label-column", "blob",
                 "--chains", "2", "--warmup", "20", "--draws", "30", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"the most probable draw goes to labels.csv, not the point estimate: {shortfall}" in printed
    assert "the most probable draw:" in printed and f"wrote {out / 'labels.csv'}" in printed
    idata = load_chains(out / "chains.nc")
    log_joint = idata.sample_stats["log_joint"].values
    chain, draw = np.unravel_index(np.argmax(log_joint), log_joint.shape)
    best = idata.posterior["assignments"].values[chain, draw]
    clusters = np.array([int(line.split(",")[1]) for line in (out / "labels.csv").read_text().splitlines()[1:]])
    assert len(clusters) == 36 and (clusters[:, None] == clusters[None, :]).tolist() == (
        best[:, None] == best[None, :]).tolist()


def test_chain_options_choose_the_sampler_and_its_moves(tmp_path, capsys):
    _blobs_table(tmp_path / "blobs.csv")
    for model, options, expected in (
            ("dp-mixture", ["--sampler", "auxiliary", "--split-merge", "3"], "algorithm='auxiliary', n_split_merge=3"),
            ("cdp", ["--sampler", "subcluster"], "algorithm='subcluster'")):
        out = tmp_path / model
        assert main(["fit", model, str(tmp_path / "blobs.csv"), "--id-column", "point", "--label-column", "blob",
                     "--chains", "2", "--warmup", "5", "--draws", "10", "--quiet", "--out", str(out)] + options) == 0
        settings = chains_settings(load_chains(out / "chains.nc"))["settings"]
        assert expected in settings["model"], settings["model"]
    capsys.readouterr()


def test_chains_advice_names_the_command_lines_options():
    # The fits' advice names Python's settings; the command line prints and reports its options.
    import arviz as az

    from inference.diagnostics import mixing_table, mixing_verdict
    from inference.neal import ALGORITHMS
    from zoo.cli import DP_SAMPLERS, _command_line_calls

    calls = _command_line_calls()
    # Four chains that hold K apart and log joints far apart: the generic advice for DP mixtures.
    n_clusters = np.repeat(np.array([[9], [10], [11], [10]]), 100, axis=1) + (np.arange(100) % 7 == 0)
    log_joint = np.random.default_rng(0).normal(size=(4, 100)) + 50.0 * np.arange(4)[:, None]
    verdict = mixing_verdict(mixing_table(az.from_dict(posterior={"n_clusters": n_clusters,
                                                                  "log_joint": log_joint})))
    for call, option in calls.items():
        verdict = verdict.replace(call, option)
    assert ("more split-merge moves per sweep (a larger --split-merge), the sub-cluster sampler (--sampler "
            "subcluster) or more chains") in verdict, verdict
    assert all("--" in option or "in Python: " in option for option in calls.values()), calls
    assert set(DP_SAMPLERS) == {*ALGORITHMS, "subcluster"}  # --sampler offers every DPMixture algorithm


def test_supervised_models_cluster_the_unlabelled_rows_until_the_chains_mix(tmp_path, capsys):
    truth = _blobs_table(tmp_path / "blobs.csv")
    # Training rows: the first half of blobs 0 and 1, labelled; the other rows are the test rows. Every
    # row's blob is also in a column of true classes, which is not a feature and scores the test rows.
    lines = (tmp_path / "blobs.csv").read_text().splitlines()
    is_train = np.isin(truth, [0, 1]) & (np.arange(36) % 12 < 6)
    (tmp_path / "table.csv").write_text("\n".join(
        [lines[0] + ",true_blob"] + [(line if train else line.rsplit(",", 1)[0] + ",") + f",{blob}"
                                     for line, train, blob in zip(lines[1:], is_train, truth)]) + "\n")
    out = tmp_path / "scdp"
    assert main(["fit", "scdp-1", str(tmp_path / "table.csv"), "--id-column", "point", "--label-column", "blob",
                 "--truth-column", "true_blob", "--chains", "2", "--warmup", "20", "--seed", "1", "--quiet",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("scdp-1: 36 rows x 6 features (12 training, 24 test) from table.csv")
    assert "point estimate: 3 clusters" in printed and "Chains mix:" in printed, printed
    assert "against true_blob (24 test rows): F 1.000, VI 0.000" in printed, printed
    labels = (out / "labels.csv").read_text().splitlines()
    assert labels[0] == "point,cluster" and len(labels) == 25  # the test rows alone
    names = [line.split(",")[0] for line in labels[1:]]
    assert names == [f"p{index}" for index in np.flatnonzero(~is_train)]
    clusters = np.array([int(line.split(",")[1]) for line in labels[1:]])
    test_truth = truth[~is_train]
    assert all(np.unique(clusters[test_truth == blob]).size == 1 for blob in range(3))
    settings = chains_settings(load_chains(out / "chains.nc"))["settings"]
    assert settings["warm-up sweeps"] == 20 and settings["draws"] == "until the chains mix"
    # The report shows the clusters of labels.csv: the test rows, named by their ids.
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Clusters of the points</h2>" in report and "for the partition given" in report
    assert sorted(map(int, re.findall(r"(\d+) members</span>", report))) == sorted(np.bincount(clusters).tolist())
    assert f"<td>{names[0]}</td>" in report  # a test row, by its id
    # Without --id-column each test row is named by its position in the file (pandas' index), to join on.
    table = pd.read_csv(tmp_path / "table.csv").drop(columns="point")
    table.to_csv(tmp_path / "no_ids.csv", index=False)
    assert main(["fit", "scdp-1", str(tmp_path / "no_ids.csv"), "--label-column", "blob", "--chains", "2",
                 "--warmup", "10", "--draws", "20", "--quiet", "--out", str(tmp_path / "no_ids")]) == 0
    capsys.readouterr()
    positions = pd.read_csv(tmp_path / "no_ids" / "labels.csv")
    assert list(positions.columns) == ["row", "cluster"]
    np.testing.assert_array_equal(positions["row"], np.flatnonzero(~is_train))
    assert table.loc[positions["row"], "blob"].isna().all()  # the test rows: no label


@pytest.mark.parametrize("model, table, options, message", [
    ("dp-mixture", "a,b,name\n1,2,x\n3,4,y\n", [], "DATAFILE: column(s) 'name' of t.csv are not numbers"),
    ("dp-mixture", "a,b,name\n1,2,x\n3,,y\n", ["--id-column", "name"],
     "DATAFILE: 1 row(s) of t.csv have missing or infinite values (the first: row 2, column 'b')"),
    ("dp-mixture", "a,b\n1,2\n", ["--id-column", "nme"], "--id-column: no column 'nme' in t.csv (columns: a, b)"),
    ("dp-mixture", "a,b\n1,2\n", ["--label-column", "a", "--id-column", "a"],
     "--label-column: 'a' is also the --id-column"),
    ("dp-mixture", "name\nx\n", ["--id-column", "name"], "DATAFILE: t.csv has no feature column or no row"),
    ("dp-mixture", "a,b\n1,2\n3,4\n", ["--chains", "0"], "--chains: must be >= 1, got 0"),
    ("dp-mixture", "a,b\n1,2\n3,4\n", ["--draws", "0"], "--draws: must be >= 1, got 0"),
    ("dp-mixture", "a,b\n1,2\n3,4\n", ["--processes", "2"], "--processes: dp-mixture is fitted in one process"),
    ("scdp-1", "a,b\n1,2\n3,4\n", [], "--label-column: the supervised models need a column"),
    ("scdp-2", "a,b,pub\n1,2,x\n3,4,y\n", ["--label-column", "pub"],
     "--label-column: 'pub' of t.csv has every row labelled; label the training rows"),
    ("scdp-3", "a,b,pub\n1,2,\n3,4,\n", ["--label-column", "pub"], "--label-column: 'pub' of t.csv has no row"),
    ("dp-mixture", "a,b,c\n1,2,x\n", ["--truth-column", "c"],
     "--truth-column: only for scdp-1, scdp-2, scdp-3; dp-mixture scores its point estimate against --label-column"),
    ("scdp-1", "a,b,pub\n1,2,x\n3,4,\n", ["--label-column", "pub", "--truth-column", "tt"],
     "--truth-column: no column 'tt' in t.csv"),
    ("scdp-1", "a,b,pub\n1,2,x\n3,4,\n", ["--label-column", "pub", "--truth-column", "pub"],
     "--truth-column: 'pub' is also the --label-column"),
    ("scdp-1", "a,b,pub,t\n1,2,x,x\n3,4,,\n", ["--label-column", "pub", "--truth-column", "t"],
     "--truth-column: 1 test row(s) have no class in 't' (the first: row 2)"),
    ("irm", "a,b\nx,y\n", [], "--source: no column 'source' in t.csv (columns: a, b)"),
    ("irm", "source,target\nx,y\nz,\n", [], "DATAFILE: line 3 of t.csv lacks a source or a target"),
    ("irm", "source,target\nx,x\n", [], "DATAFILE: t.csv names fewer than two nodes"),
    ("irm", "source,target\nx,y\n", ["--split-merge", "-1"], "--split-merge: must be >= 0, got -1"),
    ("scdp-1", "a,b,pub\n1,2,x\n3,4,\n", ["--label-column", "pub", "--sampler", "auxiliary"],
     "--sampler: only for dp-mixture, cdp, not scdp-1"),
    ("scdp-3", "a,b,pub\n1,2,x\n3,4,\n", ["--label-column", "pub", "--type-split-merge", "2"],
     "--type-split-merge: only for scdp-1, scdp-2, not scdp-3"),
    ("dp-mixture", "a,b\n1,2\n3,4\n", ["--precision-rate", "0.5"],
     "--precision-rate: only for scdp-1, scdp-2, scdp-3, not dp-mixture"),
    ("scdp-2", "a,b,pub\n1,2,x\n3,4,\n", ["--label-column", "pub", "--precision-shape", "0"],
     "--precision-shape (precision_shape): must be in (0.0, inf), got 0.0"),
    ("dp-mixture", "a,b\n1,2\n3,4\n", ["--sampler", "subcluster", "--split-merge", "3"],
     "--sampler (algorithm): 'subcluster' makes its own splits and merges"),
])
def test_bad_data_files_and_chain_options_are_reported_without_a_traceback(tmp_path, capsys, model, table, options,
                                                                         message):
    (tmp_path / "t.csv").write_text(table)
    assert main(["fit", model, str(tmp_path / "t.csv"), *options, "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("python -m zoo fit: error: ") and message in error, error


def _two_cliques(path):
    """Two cliques of six people joined by one link, as a CSV edge list (every link once)."""
    groups = [[f"a{index}" for index in range(6)], [f"b{index}" for index in range(6)]]
    links = [(group[i], group[j]) for group in groups for i in range(6) for j in range(i + 1, 6)] + [("a0", "b0")]
    path.write_text("who,whom\n" + "".join(f"{a},{b}\n" for a, b in links))


def test_irm_fits_an_edge_list_until_the_chains_mix(tmp_path, capsys):
    _two_cliques(tmp_path / "links.csv")
    out = tmp_path / "irm"
    assert main(["fit", "irm", str(tmp_path / "links.csv"), "--source", "who", "--target", "whom", "--chains", "2",
                 "--warmup", "50", "--seed", "0", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("irm: 12 nodes, 31 links from links.csv") and "Chains mix:" in printed, printed
    assert "the most probable draw: " in printed
    labels = (out / "labels.csv").read_text().splitlines()
    assert labels[0] == "node,cluster" and len(labels) == 13
    cluster = dict(line.split(",") for line in labels[1:])
    # Each clique's members together, apart from the other's (a0 and b0, linked across, may stand alone).
    members = [{cluster[f"{group}{index}"] for index in range(1, 6)} for group in "ab"]
    assert len(members[0]) == len(members[1]) == 1 and members[0] != members[1]
    idata = load_chains(out / "chains.nc")
    assert 200 <= idata.posterior.sizes["draw"] < 10_000
    assert chains_settings(idata)["settings"]["network"] == "undirected, 12 nodes, 31 links"
    # The report shows the clusters of labels.csv, the nodes named, and the relation's blocks.
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Clusters of the nodes" in report and "b4" in report and "relation edge" in report
    # chains.nc keeps every draw's clusters: with the network, the result and its report again.
    network = read_network(tmp_path / "links.csv", source="who", target="whom")
    again = dict(zip(map(str, network.domains[0].labels),
                     IRMResult.from_inference_data(idata, network).map_partition()["nodes"]))
    assert {node: str(label) for node, label in again.items()} == cluster
    assert "Clusters of the nodes" in report_html(idata, data=network)
    # Too short to mix: the command's advice names --draws, and the report too, with the IRM's own moves
    # by their option.
    assert main(["fit", "irm", str(tmp_path / "links.csv"), "--source", "who", "--target", "whom", "--chains", "2",
                 "--warmup", "10", "--draws", "20", "--quiet", "--out", str(tmp_path / "short")]) == 0
    assert "Run more sweeps (a larger --draws), or again" in capsys.readouterr().out
    report = (tmp_path / "short" / "report.html").read_text(encoding="utf-8")
    assert "more split-merge moves per sweep (a larger --split-merge)" in report and "(a larger --draws)" in report
    assert "(n_split_merge)" not in report and "result.resume" not in report and "sub-cluster" not in report


def test_the_latent_class_relational_model_fits_an_edge_list_by_incremental_em(tmp_path, capsys):
    """``fit lrm`` (CP): restarts of incremental EM on the network, the best kept; each node's class
    and its probability, the classes' link probabilities, and a report that names the nodes."""
    _two_cliques(tmp_path / "links.csv")
    out = tmp_path / "lrm"
    assert main(["fit", "lrm", str(tmp_path / "links.csv"), "--source", "who", "--target", "whom", "--seed", "0",
                 "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("latent-class-relational: 12 nodes, 31 links from links.csv\n10 restarts, the best ")
    assert "classes of 6, 6 nodes" in printed, printed
    labels = pd.read_csv(out / "labels.csv")
    assert list(labels.columns) == ["node", "class", "probability"] and len(labels) == 12
    cluster = dict(zip(labels.node, labels["class"]))
    assert {cluster[f"a{index}"] for index in range(6)} != {cluster[f"b{index}"] for index in range(6)}
    assert len({cluster[f"a{index}"] for index in range(6)}) == 1 and (labels.probability > 0.5).all()
    blocks = pd.read_csv(out / "blocks.csv")
    assert list(blocks.columns) == ["source_class", "target_class", "link_probability"] and len(blocks) == 4
    within = blocks.link_probability[blocks.source_class == blocks.target_class]
    across = blocks.link_probability[blocks.source_class != blocks.target_class]
    assert within.min() > 0.8 and across.max() < 0.1, blocks
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Classes of the nodes" in report and "a3" in report and "relation edge" in report
    assert "undirected, 12 nodes, 31 links" in report
    # The fit itself, loaded back as the LRMResult whose classes labels.csv holds.
    assert f"wrote {out / 'result.npz'}" in printed
    fitted = load_result(out / "result.npz")
    np.testing.assert_array_equal(fitted.classes()["nodes"], labels["class"])
    np.testing.assert_allclose(np.asarray(fitted.params.relation_probs[0])[..., 1].ravel(), blocks.link_probability,
                               rtol=1e-6)
    assert fitted.predict_proba([[0, 1]]).shape == (1, 2)
    assert read_metadata(out / "result.npz")["settings"]["restarts"] == 10
    # Three classes, given: the option is the model's n_classes.
    assert main(["fit", "lrm", str(tmp_path / "links.csv"), "--source", "who", "--target", "whom", "--classes", "3",
                 "--restarts", "2", "--max-iter", "5", "--quiet", "--out", str(tmp_path / "three")]) == 0
    assert "2 restarts" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "three" / "blocks.csv").shape[0] == 9
    # Continued from its result.npz: the classes come from the file, one run goes on from its class
    # posteriors (the passes LatentClassRelational.fit(init=...) makes), and the file says so.
    three = load_result(tmp_path / "three" / "result.npz")
    continued = tmp_path / "continued"
    assert main(["fit", "lrm", str(tmp_path / "links.csv"), "--source", "who", "--target", "whom", "--init",
                 str(tmp_path / "three" / "result.npz"), "--max-iter", "4", "--quiet", "--out", str(continued)]) == 0
    assert "continued from result.npz by " in capsys.readouterr().out
    again = load_result(continued / "result.npz")
    network = read_network(tmp_path / "links.csv", source="who", target="whom")
    alone = three.model.fit(network, key=jax.random.key(0), init=three, max_passes=4)
    assert again.restart_scores.shape == (1,) and again.model == three.model
    np.testing.assert_array_equal(again.history["objective"], alone.history["objective"])
    assert read_metadata(continued / "result.npz")["settings"]["continued from"] == str(
        (tmp_path / "three" / "result.npz").resolve())
    # Not the classes or the data the file was fitted with, or more restarts: named.
    (tmp_path / "fewer.csv").write_text("\n".join((tmp_path / "links.csv").read_text().splitlines()[:8]) + "\n")
    for datafile, options, message in (
            ("links.csv", ["--classes", "2"], r"--classes: '.*result.npz' holds \(3,\) classes per domain, not \(2,\)"),
            ("fewer.csv", [], r"--init: '.*result.npz' is a fit to data of domains \{'nodes': 12\}, not to fewer.csv"),
            ("links.csv", ["--restarts", "3"], "--restarts: a fit continued from --init runs one restart, got 3"),
            ("links.csv", ["--init", str(tmp_path / "none.npz")], "--init: no file '.*none.npz'")):
        assert main(["fit", "lrm", str(tmp_path / datafile), "--source", "who", "--target", "whom", "--init",
                     str(tmp_path / "three" / "result.npz"), *options, "--out", str(tmp_path / "x")]) == 1
        assert re.search(message, capsys.readouterr().err), message


@pytest.mark.parametrize("model, options, message", [
    ("lrm", ["--draws", "5"], "--draws: for the Gibbs chains and feature tables, not latent-class-relational"),
    ("lrm", ["--chains", "2"], "--chains: for the Gibbs chains and feature tables, not latent-class-relational"),
    ("lrm", ["--valid-fraction", "0.2"], "--valid-fraction: not for latent-class-relational"),
    ("lrm", ["--schedule", "em"], "--schedule: latent-class-relational runs incremental EM at β = 1"),
    ("lrm", ["--format", "mtx"], "--format: latent-class-relational reads a CSV edge list, not mtx"),
    ("lrm", ["--classes", "0"], "--classes: must be >= 1, got 0"),
    ("lrm", ["--prior-count", "-1"], "--prior-count (prior_count): "),
    ("lrm", ["--processes", "2"], "--processes: latent-class-relational is fitted in one process"),
    ("irm", ["--classes", "3"], "--classes: for the EM models, not irm, whose chains sample their clusters"),
    ("cdp", ["--restarts", "3"], "--restarts: for the EM models, not cdp"),
    ("cdp", ["--rating", "stars"], "--rating: for the relational models, not cdp"),
    ("dp-mixture", ["--directed"], "--directed: for the relational models' edge lists, not dp-mixture"),
    ("aspect", ["--draws", "3"], "--draws: for the Gibbs chains, not aspect"),
    ("aspect", ["--chains", "3"], "--chains: for the Gibbs chains, not aspect"),
    ("aspect", ["--rating", "stars"], "--rating: for the relational models, not aspect"),
    ("aspect", ["--init", "result.npz"], "--init: continues a latent-class-relational fit, not aspect"),
    ("cdp", ["--schedule", "em"], "--schedule: for the EM models, not cdp, whose chains sample at β = 1"),
    ("aspect", ["--source", "who", "--target", "whom", "--valid-fraction", "0.999"],
     "--valid-fraction (valid_fraction): splitting 31 tokens left an empty training or validation part; use more "
     "data, another --valid-fraction or --schedule em"),
    ("irm", ["--init", "result.npz"], "--init: continues a latent-class-relational fit, not irm (the chains continue"),
    ("lrm", ["--threshold", "2"], "--threshold: only with --rating (a table of ratings, not an edge list)"),
    ("irm", ["--rating", "stars", "--directed"], "--directed: ratings go from a --source to a --target"),
    ("lrm", ["--rating", "stars", "--source", "who", "--target", "who"],
     "--target: the ratings' items need a column of their own, not --source's 'who'"),
    ("lrm", ["--rating", "stars", "--source", "who", "--target", "whom"], "--rating: no column 'stars' in links.csv"),
    ("lrm", ["--rating", "whom", "--source", "who", "--target", "who2"], "--target: no column 'who2' in links.csv"),
    ("irm", ["--rating", "whom", "--source", "who", "--target", "whom"],
     "--rating: line 2 of links.csv has 'a1' in 'whom', not a number"),
])
def test_options_a_model_has_no_use_for_are_refused(tmp_path, capsys, model, options, message):
    _two_cliques(tmp_path / "links.csv")
    assert main(["fit", model, str(tmp_path / "links.csv"), *options, "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("python -m zoo fit: error: ") and message in error, error


def _ratings(path):
    """Ten users who rate eight films: the even users like the even films and dislike the odd ones,
    the odd users the other way round; a third of the pairs unrated."""
    rng = np.random.default_rng(0)
    lines = ["user,film,stars"] + [
        f"user{user},film{film},{(5 if user % 2 == film % 2 else 1) - rng.integers(0, 2)}"
        for user in range(10) for film in range(8) if (user + film) % 3]
    path.write_text("\n".join(lines) + "\n")


def test_relational_models_fit_a_table_of_ratings_as_likes_above_the_mean(tmp_path, capsys):
    """--rating: CP §3's likes(user, film), 1 where the rating is above the mean rating, over two
    domains named after the columns; only the rated pairs are observed."""
    _ratings(tmp_path / "ratings.csv")
    options = [str(tmp_path / "ratings.csv"), "--source", "user", "--target", "film", "--rating", "stars", "--quiet"]
    assert main(["fit", "lrm", *options, "--out", str(tmp_path / "lrm")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("latent-class-relational: user (10) x film (8), 53 ratings, 27 above the mean rating "
                              "from ratings.csv\n"), printed
    assert "classes of 5, 5 in user; classes of 4, 4 in film" in printed
    labels = pd.read_csv(tmp_path / "lrm" / "labels.csv")
    assert list(labels.columns) == ["domain", "individual", "class", "probability"] and len(labels) == 18
    users = labels[labels.domain == "user"].set_index("individual")["class"]
    assert users[[f"user{index}" for index in range(0, 10, 2)]].nunique() == 1 != users.nunique()
    blocks = pd.read_csv(tmp_path / "lrm" / "blocks.csv")
    assert list(blocks.columns) == ["user_class", "film_class", "likes_probability"]
    likes = np.sort(blocks.likes_probability)
    assert likes[1] < 0.1 and likes[2] > 0.9, blocks  # each user class likes one film class
    assert "user (10) x film (8), 53 ratings" in (tmp_path / "lrm" / "report.html").read_text(encoding="utf-8")
    # The IRM on the same table, and a threshold given.
    assert main(["fit", "irm", *options, "--threshold", "3", "--chains", "2", "--warmup", "20", "--draws", "30",
                 "--out", str(tmp_path / "irm")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("irm: user (10) x film (8), 53 ratings, 27 above 3 from ratings.csv"), printed
    assert "clusters of the user; " in printed and " clusters of the film; " in printed
    labels = pd.read_csv(tmp_path / "irm" / "labels.csv")
    assert list(labels.columns) == ["domain", "individual", "cluster"] and list(labels.domain).count("film") == 8
    assert chains_settings(load_chains(tmp_path / "irm" / "chains.nc"))["settings"]["ratings"].startswith(
        "user (10) x film (8)")


def test_missing_files_and_unknown_models(tmp_path, capsys):
    assert main(["fit", "aspect", str(tmp_path / "missing.mtx")]) == 1
    assert "DATAFILE:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "no-such-model", str(tmp_path / "missing.mtx")])
    assert "invalid choice: no model 'no-such-model' in the zoo" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "aspect_alternating", str(tmp_path / "missing.mtx")])
    assert "'aspect_alternating' (aspect-alternating) is in the zoo but has no fit command" in capsys.readouterr().err


def test_fit_takes_the_registrys_aliases(tmp_path, capsys):
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)
    out = tmp_path / "fit"
    assert main(["fit", "PLSA", str(tmp_path / "counts.mtx"), *FIT_OPTIONS, "--schedule", "em", "--out", str(out)]) == 0
    assert load_result(out / "result.npz").model.n_classes == 3
    assert "aspect on counts.mtx" in (out / "report.html").read_text(encoding="utf-8")


def test_demo_explains_why_plain_em_perplexity_explodes(capsys):
    from zoo.demo import run_demo

    results = run_demo(n_classes=4, n_restarts=1)
    printed = capsys.readouterr().out
    assert "Why: EM keeps raising the TRAINING likelihood" in printed and "have P(word | story) = 0" in printed
    assert results["test_perplexity_tempered"] <= results["test_perplexity_beta_1_early_stopped"] * 1.01


def test_a_negative_seed_is_refused_by_the_parser(tmp_path, capsys):
    # scikit-learn's random_state refused it later, naming random_state, which the command has not.
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "aspect", str(tmp_path / "counts.mtx"), "--seed", "-1"])
    assert exit_info.value.code == 2
    assert "argument --seed: expected a whole number >= 0, got -1" in capsys.readouterr().err


def test_scdp_takes_the_prior_of_the_precisions_from_options(tmp_path, capsys):
    # SupervisedDP's precision_shape and precision_rate, which its warning about a prior that outweighs
    # the training publications advises, as --precision-shape and --precision-rate.
    rng = np.random.default_rng(0)
    centres = np.repeat(np.arange(6) * 4.0, 4)
    rows = ["x,y,pub"] + [f"{x:.3f},{y:.3f},{'p' + str(index // 4) if index < 12 else ''}" for index, (x, y) in
                          enumerate(zip(centres + 0.05 * rng.normal(size=24), rng.normal(size=24)))]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    options = ["--label-column", "pub", "--chains", "1", "--warmup", "2", "--draws", "3", "--quiet"]
    assert main(["fit", "scdp-1", str(tmp_path / "t.csv"), *options, "--out", str(tmp_path / "default")]) == 0
    printed = capsys.readouterr().out
    assert "PrecisionPriorWarning: scdp-1: the prior of the precisions" in printed, printed
    assert re.search(r"--precision-rate \d", printed) and "precision_rate" not in printed, printed
    assert main(["fit", "scdp-1", str(tmp_path / "t.csv"), *options, "--precision-shape", "2", "--precision-rate",
                 "0.01", "--out", str(tmp_path / "given")]) == 0
    assert "PrecisionPriorWarning" not in capsys.readouterr().out
    model = chains_settings(load_chains(tmp_path / "given" / "chains.nc"))["settings"]["model"]
    assert "precision_shape=2.0" in model and "precision_rate=0.01" in model, model
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    helped = capsys.readouterr().out
    assert "--precision-shape A" in helped and "--precision-rate B" in helped


def test_errors_and_warnings_name_what_the_command_line_user_typed(tmp_path, capsys):
    from zoo.cli import _in_option_terms

    # Too many classes for the rows (or, two-sided, the columns): --classes, not the data (X).
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)  # 24 rows x 10 columns
    for model, classes, message in (("two-sided", "30", "--classes: 30 classes for the 24 rows of DATAFILE; every "
                                     "class needs a row to start from (give --classes 24 or fewer)"),
                                    ("two-sided", "12", "--classes: 12 column classes for the 10 columns of DATAFILE"),
                                    ("one-sided", "30", "--classes: 30 classes for the 24 rows of DATAFILE")):
        assert main(["fit", model, str(tmp_path / "counts.mtx"), "--classes", classes, "--out", str(tmp_path)]) == 1
        assert capsys.readouterr().err.startswith(f"python -m zoo fit: error: {message}")
    # An empty or unreadable DATAFILE, named as typed; the edge list's columns by their options.
    (tmp_path / "empty.csv").write_text("source,target\n")
    (tmp_path / "blank.ldac").write_text("")
    (tmp_path / "blank.csv").write_text("")
    for path, options, message in ((tmp_path / "empty.csv", [], f"DATAFILE: {str(tmp_path / 'empty.csv')!r} is empty"),
                                   (tmp_path / "blank.ldac", [], f"DATAFILE: {str(tmp_path / 'blank.ldac')!r} contains "
                                    "no documents"),
                                   (tmp_path / "blank.csv", [], f"DATAFILE: {str(tmp_path / 'blank.csv')!r} is not a "
                                    "readable CSV file"),
                                   (tmp_path / "empty.csv", ["--weight", "n"], "--weight: column 'n' not in the file")):
        assert main(["fit", "aspect", str(path), *options, "--out", str(tmp_path)]) == 1
        assert capsys.readouterr().err.startswith(f"python -m zoo fit: error: {message}")
    # Warnings name the MODEL and the options, not the estimator and its arguments.
    assert main(["fit", "one-sided", str(tmp_path / "counts.mtx"), *FIT_OPTIONS[:2], "--max-iter", "2", "--quiet",
                 "--schedule", "em", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "ConvergenceWarning: one-sided: EM stopped at --max-iter 2 before converging" in printed, printed
    assert "Estimator" not in printed
    empty_classes = ("OneSidedEstimator: 1 of the 3 classes holds no row of the fitted data (every row is most "
                     "probable under the others); more restarts (n_restarts, now 1; the best is kept) may find a fit")
    assert _in_option_terms(empty_classes) == ("one-sided: 1 of the 3 classes holds no row of the fitted data (every "
                                               "row is most probable under the others); more restarts (--restarts, "
                                               "now 1; the best is kept) may find a fit")
    assert _in_option_terms("ClusterAbstractionEstimator: fitting Aspect(n_classes=4) with n_restarts=4") == \
        "cam: fitting Aspect(n_classes=4) with --restarts 4"  # a model's repr keeps its arguments



def _ctrl_c_after_calls(monkeypatch, module, name, n_calls):
    """Ctrl-C (SIGINT to this process, as a user's) once the chains' ``n_calls``-th jitted call,
    ``module.name``, has finished: ``inference.interrupts.DeferredInterrupt`` defers it to the end of
    that call (the IRM's and ``inference.chains.sample_chains``), which is kept."""
    import signal

    original, calls = getattr(module, name), []

    def call_then_ctrl_c(*args, **kwargs):
        output = original(*args, **kwargs)
        calls.append(None)
        if len(calls) == n_calls:
            signal.raise_signal(signal.SIGINT)
        return output

    monkeypatch.setattr(module, name, call_then_ctrl_c)


def test_an_em_fit_interrupted_by_ctrl_c_writes_what_finished_and_exits_with_130(tmp_path, capsys, monkeypatch):
    # The EM commands wrote their files after Ctrl-C and exited with 0, as if the fit had run its course.
    import signal

    import inference.em

    original = inference.em._run_segments

    def ctrl_c_after_the_first_segment(advance, states, **options):
        calls = []

        def advance_then_ctrl_c(*args, **kwargs):
            output = advance(*args, **kwargs)
            calls.append(None)
            if len(calls) == 1:
                signal.raise_signal(signal.SIGINT)
            return output

        return original(advance_then_ctrl_c, states, **options)

    monkeypatch.setattr(inference.em, "_run_segments", ctrl_c_after_the_first_segment)
    write_matrix_market(tmp_path / "counts.mtx", COUNTS)
    out = tmp_path / "fit"
    assert main(["fit", "aspect", str(tmp_path / "counts.mtx"), *FIT_OPTIONS, "--schedule", "em",
                 "--out", str(out)]) == 130
    printed = capsys.readouterr().out
    assert "(interrupted)" in printed and f"wrote {out / 'result.npz'}" in printed
    assert load_result(out / "result.npz").stopped_by == "interrupted"


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # of the resumed
def test_irm_stopped_in_its_warm_up_keeps_it_and_names_what_stopped_it(tmp_path, capsys, monkeypatch):
    # Ctrl-C and a spent --time-budget in the warm-up leave no draws: the chains so far are written
    # (fit.pkl: the fit and its data, to resume from Python), the cause named, Ctrl-C exiting with 130.
    import pickle

    import zoo.relational._infinite_chains as infinite_chains

    _two_cliques(tmp_path / "links.csv")
    # 130 sweeps in 3 calls of 44 (at most 50 each): the first call ends within the 120 warm-up sweeps.
    command = ["fit", "irm", str(tmp_path / "links.csv"), "--source", "who", "--target", "whom", "--chains", "2",
               "--warmup", "120", "--draws", "10", "--quiet"]
    budget = "stopped by the time budget (--time-budget 1e-09 s)"
    again = {1: " with a larger --time-budget or fewer --warmup sweeps", 130: ""}  # by the exit status
    for cause, options, status in ((budget, ["--time-budget", "1e-9"], 1), ("interrupted by Ctrl-C", [], 130)):
        out = tmp_path / ("budget" if options else "ctrl-c")
        with monkeypatch.context() as patch:
            if not options:
                _ctrl_c_after_calls(patch, infinite_chains, "_advance_chains", 1)
            assert main([*command, *options, "--out", str(out)]) == status
        captured = capsys.readouterr()
        assert captured.err == (
            f"python -m zoo fit: {cause} in the warm-up, after 44 of its 120 sweeps, before the first draw: no draws, "
            f"labels or report to write. {out / 'fit.pkl'} keeps the chains and their data: in Python, fit, data = "
            f"pickle.load(open({str(out / 'fit.pkl')!r}, 'rb')); fit.resume(*data, n_draws=10) finishes the warm-up "
            f"and draws. Or run the command again{again[status]}.\n"), captured.err
        assert captured.out == f"irm: 12 nodes, 31 links from links.csv\nwrote {out / 'fit.pkl'}\n", captured.out
        assert sorted(path.name for path in out.iterdir()) == ["fit.pkl"]
    with open(out / "fit.pkl", "rb") as file:
        fit, data = pickle.load(file)
    resumed = fit.resume(*data, n_draws=10, progress=False)
    assert resumed.completed and resumed.log_joint.shape == (2, 10) and resumed.warmup_log_joint.shape == (2, 120)


@pytest.mark.filterwarnings("ignore::inference.diagnostics.MixingWarning")  # of the resumed
def test_dp_mixture_interrupted_by_ctrl_c_says_so_and_exits_with_130(tmp_path, capsys, monkeypatch):
    import pickle

    import inference.chains

    _blobs_table(tmp_path / "blobs.csv")
    # 20 warm-up sweeps and 30 draws, 10 a call: calls 1-2 warm up, 3-5 draw.
    command = ["fit", "dp-mixture", str(tmp_path / "blobs.csv"), "--id-column", "point", "--label-column", "blob",
               "--chains", "2", "--warmup", "20", "--draws", "30", "--quiet"]
    # In the warm-up (after the first call): its sweeps kept for fit.resume.
    with monkeypatch.context() as patch:
        _ctrl_c_after_calls(patch, inference.chains, "_run_calls_jit", 1)
        assert main([*command, "--out", str(tmp_path / "warm-up")]) == 130
    captured = capsys.readouterr()
    assert captured.err.startswith("python -m zoo fit: interrupted by Ctrl-C in the warm-up, after 10 of its 20 "
                                   "sweeps, before the first draw") and captured.err.endswith("again.\n"), captured.err
    assert "time budget" not in captured.err and "RuntimeWarning" not in captured.out, captured
    with open(tmp_path / "warm-up" / "fit.pkl", "rb") as file:
        fit, data = pickle.load(file)
    assert fit.result.next_sweep == 10 and fit.resume(*data, n_draws=10, progress=False).result.n_draws == 10
    # After the warm-up (after the third call): its draws written, the cause named.
    out = tmp_path / "drawn"
    with monkeypatch.context() as patch:
        _ctrl_c_after_calls(patch, inference.chains, "_run_calls_jit", 3)
        assert main([*command, "--out", str(out)]) == 130
    printed = capsys.readouterr().out
    assert "2 chains x 10 draws, interrupted by Ctrl-C; point estimate:" in printed, printed
    assert "time budget" not in printed and f"wrote {out / 'labels.csv'}" in printed
    assert load_chains(out / "chains.nc").posterior.sizes["draw"] == 10
    # The chains stopped can go on: fit.pkl keeps them (only chains.nc, which cannot, was written before).
    assert (f"wrote {out / 'fit.pkl'} (the chains and their data; in Python, fit, data = pickle.load(open("
            f"{str(out / 'fit.pkl')!r}, 'rb')); fit.resume(*data, n_draws=30) continues them)\n") in printed, printed
    with open(out / "fit.pkl", "rb") as file:
        fit, data = pickle.load(file)
    assert fit.result.stopped_by == "interrupted"
    assert fit.resume(*data, n_draws=20, progress=False).result.n_draws == 30
    # Ctrl-C where no fit can stop cleanly (here, reading the table): abandoned, without a traceback.
    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr("zoo.cli.read_table", ctrl_c)
        assert main([*command, "--out", str(tmp_path / "abandoned")]) == 130
    assert capsys.readouterr().err.startswith("python -m zoo fit: interrupted by Ctrl-C where the run could not stop")


def test_an_edge_list_of_numbered_nodes_keeps_them_in_numeric_order(tmp_path):
    # Sorted as text, the karate club's members came 0, 1, 10, 11, ... in labels.csv.
    pd.DataFrame({"source": [0, 2, 10, 1], "target": [1, 10, 9, 2]}).to_csv(tmp_path / "links.csv", index=False)
    assert read_network(tmp_path / "links.csv").domains[0].labels == (0, 1, 2, 9, 10)
    pd.DataFrame({"source": ["b", "a"], "target": ["10", "9"]}).to_csv(tmp_path / "names.csv", index=False)
    assert read_network(tmp_path / "names.csv").domains[0].labels == (9, 10, "a", "b")  # pandas reads 9, 10


def test_an_edge_list_whose_sides_share_no_node_warns_that_it_may_be_two_mode(tmp_path):
    import warnings

    import networkx as nx

    graph = nx.davis_southern_women_graph()
    pd.DataFrame(list(graph.edges), columns=["woman", "event"]).to_csv(tmp_path / "davis.csv", index=False)
    with pytest.warns(UserWarning, match=r"^DATAFILE: the woman and event columns of davis.csv share no node: if "
                                         r"it is a two-mode network \(18 × 14 nodes"):
        read_network(tmp_path / "davis.csv", source="woman", target="event")
    pd.DataFrame({"source": [0, 0, 0], "target": [1, 2, 3]}).to_csv(tmp_path / "star.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a star's hub, alone on its side: not two modes
        read_network(tmp_path / "star.csv")
