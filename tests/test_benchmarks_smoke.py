"""Smoke tests of the benchmark scripts (tiny sizes; the published figures come from run_all.py)."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str):
    if name not in sys.modules:  # registered first: the script defines dataclasses
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]  # a failed import is not left half-made for the next test
            raise
    return sys.modules[name]


@pytest.mark.slow  # about 20 s on 2 cores, mostly compilation
def test_bench_dp_mixing_quick(capsys, monkeypatch):
    bench = _load("bench_dp_mixing")
    families = []
    original = bench.make_model
    monkeypatch.setattr(bench, "make_model", lambda *args, **kwargs: families.append(kwargs.get("family"))
                        or original(*args, **kwargs))
    # The simulated data set only (the digits path differs in its data and starts; compiling a
    # second data set would double the time): about 15 s on a busy 2-core CPU, mostly compilation.
    code = bench.main(["--quick", "--samplers", "alg3", "--datasets", "simulated", "--sim-budget", "0.5",
                       "--sim-points", "500"])
    out = capsys.readouterr().out
    assert code == 0, out
    summaries = [json.loads(line[len("SUMMARY "):]) for line in out.splitlines() if line.startswith("SUMMARY ")]
    assert len(summaries) == 2  # one sampler and scikit-learn
    assert all({"figure", "value", "target"} <= set(entry) for entry in summaries)
    assert "Algorithm 3 (collapsed)" in out and "FAILED" not in out
    # The simulated clusters have different scales: learned (Normal-Gamma) precisions, whatever
    # --family says of the digits (its identity default once reached this data set too).
    # (None: available_samplers' probe of each sampler, with the default family)
    assert [family for family in families if family is not None] == ["normal-gamma"]
    assert "Normal-Gamma components" in out


def test_bench_dp_mixing_diagnostics():
    bench = _load("bench_dp_mixing")
    mixed = np.random.default_rng(0).normal(size=(4, 200))
    ok, r_k, r_lj = bench.converged(mixed, mixed)
    assert ok and r_k < 1.01 and r_lj < 1.01
    stuck = mixed + 10.0 * np.arange(4)[:, None]
    assert not bench.converged(stuck, stuck)[0]
    assert not bench.converged(mixed[:, :10], mixed[:, :10])[0]  # too few draws kept
    assert np.isnan(bench.bulk_ess(np.ones((4, 50)))) and np.isnan(bench.rhat(np.ones((4, 50))))


def test_bench_dp_mixing_digits_helpers():
    bench = _load("bench_dp_mixing")
    data = np.random.default_rng(0).normal(size=(120, 3)).astype(np.float32)
    starts, names = bench.dispersed_starts(data, 4)
    assert starts.shape == (4, 120) and names[0] == "one cluster"
    assert [np.unique(row).size for row in starts] == [1, 10, 20, 50]
    run = bench.Run(seconds=[1.0, 2.0, 4.0], draws=[50, 100, 200])
    draws = np.random.default_rng(1).normal(size=(4, 200))
    run.n_clusters = [np.round(draws[:, :50]), np.round(draws[:, 50:100]), np.round(draws[:, 100:])]
    run.log_joint = [draws[:, :50], draws[:, 50:100], draws[:, 100:]]
    np.testing.assert_allclose(run.draw_times()[[0, 49, 50, 199]], [0.02, 1.0, 1.02, 4.0])
    assert np.isnan(bench.digits_report(run)["rhat_entropy"])  # no partitions recorded
    # Chain c's entropy sits at c (different cuts): its R-hat says so whatever K and the log joint do.
    run.entropy = [draws[:, a:b] * 0.01 + np.arange(4)[:, None] for a, b in ((0, 50), (50, 100), (100, 200))]
    report = bench.digits_report(run)
    assert report["rhat_entropy"] > 2
    assert report["draws"] == 200 and np.isclose(report["sweep_ms"], 20.0)
    assert 200 < report["ess_lj"] * 2.0 < 800  # 400 independent draws kept, sampled in the last 2 s


@pytest.mark.slow  # compiles SCDP-1 with and without pair moves
def test_bench_scdp_mixing_runs(capsys):
    _load("bench_scdp_mixing").main(["--sweeps", "40", "--keys", "0"])
    out = capsys.readouterr().out
    assert out.count("key 0:") == 2 and "pair moves on / off" in out


def test_bench_estep_order_quick(capsys):
    bench = _load("bench_estep_order")
    assert bench.main(["--nnz", "500", "2000", "--classes", "4"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().replace(",", "").split(" ")[0].isdigit()]
    # two E-step rows, then two EM-iteration rows; both repeat their bits (E-step: the fixed order;
    # EM iteration: this backend's default sums, and at β = 1 and 0.8)
    assert len(rows) == 4 and all(row[2] == "True" for row in rows[:2])
    assert all(row[2] == "True" and row[4] == "True" for row in rows[2:])
    assert sum(line.startswith("SUMMARY ") for line in out.splitlines()) == 3


def test_bench_cam_estep_numpy_peer_computes_the_kernels_estep():
    bench = _load("bench_cam_estep")
    data, arrays, inputs = bench.problem(depth=2, beta=0.7, rows=25, backend="xla")  # any JAX backend
    expected = bench.kernel_call(arrays, inputs, "xla")()
    got = bench.numpy_estep(data.to_sparse(), inputs["weights"], inputs["aspects"], inputs["tempered"],
                            inputs["paths"], inputs["path_mask"], inputs["log_prior"])
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(mine, np.asarray(theirs), rtol=1e-4, atol=1e-6 * float(np.abs(theirs).max()))


@pytest.mark.slow  # two child processes, each compiling the E-step
def test_bench_cam_estep_quick(capsys):
    assert _load("bench_cam_estep").main(["--rows", "40", "--depth", "2", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "same bits on" in out and ": True" in out
    assert sum(line.startswith("SUMMARY ") for line in out.splitlines()) == 2


def test_run_all_only_keeps_the_other_benchmarks():
    run_all = _load("run_all")
    previous = ("# Benchmark results\n\nMeasured 2026-01-01 on a test machine.\n\n"
                "| benchmark | figure | value | target |\n|---|---|---|---|\n"
                "| bench_a | a figure | 1.0 | - |\n| bench_b | b figure | 2.0 | - |\n| bench_b | b second | 3.0 | - |\n\n"
                "## Full output\n\n### bench_a\n\n`python a` (1 s)\n\n```\nSUMMARY a\n```\n\n"
                "### bench_b\n\n`python b` (2 s)\n\n```\nSUMMARY b\n```\n")
    new_rows = {"bench_b": ["| bench_b | b figure | 9.0 | - |"]}
    new_sections = {"bench_b": "Measured 2026-02-02 on another machine.\n\n`python b` (5 s)\n\n```\nnew b\n```"}
    kept, rows, sections = run_all.merge_reports(previous, new_rows, new_sections)
    assert kept == ["bench_a"]
    assert rows == {"bench_a": ["| bench_a | a figure | 1.0 | - |"], "bench_b": new_rows["bench_b"]}
    # The kept section carries the date of the report it came from; the new one its own.
    assert sections["bench_a"].startswith("Measured 2026-01-01 on a test machine.\n\n`python a`")
    assert sections["bench_b"] == new_sections["bench_b"]
    report = "# Benchmark results\n\n" + run_all.render("Measured now.", rows, sections, "## Full output")
    assert run_all.report_parts(report) == (rows, sections)  # a merged report merges again unchanged
    assert "SUMMARY b" not in report and "new b" in report and "SUMMARY a" in report


def test_bench_partitions_peer_computes_the_same_co_clustering():
    from inference.partitions import co_clustering

    bench = _load("bench_partitions")
    draws = np.random.default_rng(2).integers(0, 5, size=(3, 40, 30))
    draws[:, 1::2] = draws[:, ::2]  # repeated draws: the peer counts them by multiplicity too
    np.testing.assert_array_equal(bench.numpy_co_clustering(draws, elements=600), co_clustering(draws))


@pytest.mark.slow  # about 15 s on 2 cores: a short digits chain, then the summaries
def test_bench_partitions_quick(capsys):
    code = _load("bench_partitions").main(["--quick"])
    out = capsys.readouterr().out
    assert code == 0, out
    summaries = [json.loads(line[len("SUMMARY "):]) for line in out.splitlines() if line.startswith("SUMMARY ")]
    assert len(summaries) == 2 and "DIFFERENT" not in summaries[0]["value"]
    assert "same matrix: True" in out
