"""How the aspect model's EM cost grows: time per iteration vs nnz, peak memory, sharding.

(a) seconds per EM iteration at K = 64 for nnz from 1e5 to 1e7 (Zipf-distributed synthetic
    counts, 20 non-zeros per row on average) and the log-log slope of time against nnz
    (linear cost: slope ≈ 1);
(b) peak resident memory of a fit at the largest size, in a fresh process, against the budget
    2 × nnz × K × 4 bytes;
(c) the same fit on 8 host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``,
    data-parallel EM with ``shard_map``) against one device, in a fresh process each, both with
    the default (numba) E-step; the 8 devices share the machine's cores.

Run: ``python benchmarks/bench_scaling.py [--max-nnz 1e7] [--classes 64]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from _memory import current_rss_bytes, peak_rss_bytes


def synthetic(nnz: int, seed: int = 0):
    from zoo.data import CoOccurrence

    rng = np.random.default_rng(seed)
    n_rows = max(nnz // 20, 10)
    n_cols = max(min(nnz // 10, 200_000), 10)
    rows = rng.integers(0, n_rows, nnz)
    cols = np.minimum(rng.zipf(1.1, nnz) - 1, n_cols - 1) ^ rng.integers(0, 2, nnz)
    cols = np.minimum(cols, n_cols - 1)
    return CoOccurrence(rows, cols, rng.integers(1, 4, nnz).astype(float), (n_rows, n_cols))


def seconds_per_iteration(data, n_classes: int, devices=None, short: int = 2, long: int = 5,
                          backend: str = "auto") -> float:
    import jax

    from inference.em import tempered_em
    from inference.schedules import FixedBeta
    from zoo.dyadic.aspect import Aspect

    model = Aspect(n_classes, backend=backend)

    def run(n_iter):
        start = time.perf_counter()
        tempered_em(model, data, key=jax.random.key(0), schedule=FixedBeta(1.0), max_iter=n_iter, tol=0.0,
                    devices=devices)
        return time.perf_counter() - start

    run(short), run(long)  # compile both
    return (run(long) - run(short)) / (long - short)


def child(mode: str, nnz: int, n_classes: int) -> None:
    import jax  # noqa: F401  (imported before the baseline is taken)
    import numba  # noqa: F401

    import inference.em  # noqa: F401

    data = synthetic(nnz)
    baseline = current_rss_bytes()
    if mode == "memory":
        seconds = seconds_per_iteration(data, n_classes, short=1, long=2)
    else:
        import jax

        devices = len(jax.devices()) if mode == "sharded" else None
        seconds = seconds_per_iteration(data, n_classes, devices=devices)
    peak = peak_rss_bytes()
    print(json.dumps({"seconds": seconds, "peak_bytes": peak, "baseline_bytes": baseline, "nnz": data.nnz}))


def in_child(mode: str, nnz: int, n_classes: int, env: dict | None = None) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--nnz", str(nnz), "--classes", str(n_classes)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=dict(os.environ, **(env or {})))
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--max-nnz", type=float, default=1e7)
    parser.add_argument("--child", choices=["time", "memory", "sharded"], help=argparse.SUPPRESS)
    parser.add_argument("--nnz", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.nnz, args.classes)
        return

    import jax

    sizes = [int(n) for n in np.geomspace(1e5, args.max_nnz, 5)]
    print(f"aspect EM, K = {args.classes}, JAX backend {jax.default_backend()}, {os.cpu_count()} cores, float32")
    print(f"\n(a) {'nnz':>12} {'s / iteration':>14}")
    times, actual = [], []
    for nnz in sizes:
        result = in_child("time", nnz, args.classes)
        times.append(result["seconds"])
        actual.append(result["nnz"])
        print(f"    {result['nnz']:12,d} {result['seconds']:14.4f}")
    slope = np.polyfit(np.log(actual), np.log(times), 1)[0]
    print(f"    log-log slope of time against nnz: {slope:.2f}  (target ≤ 1.1)")
    print("SUMMARY " + json.dumps({"figure": f"aspect EM time vs nnz ({actual[0]:,}–{actual[-1]:,}), log-log slope",
                                   "value": f"{slope:.2f}", "target": "<= 1.1"}))

    largest = sizes[-1]
    memory = in_child("memory", largest, args.classes)
    budget = 2 * memory["nnz"] * args.classes * 4
    growth = memory["peak_bytes"] - memory["baseline_bytes"]
    print(f"\n(b) nnz = {memory['nnz']:,}: peak RSS {memory['peak_bytes'] / 2**30:.2f} GiB, of which the fit "
          f"added {growth / 2**30:.2f} GiB over the process with data loaded "
          f"({memory['baseline_bytes'] / 2**30:.2f} GiB); budget 2 × nnz × K × 4 B = {budget / 2**30:.2f} GiB; "
          f"ratio (peak) {memory['peak_bytes'] / budget:.2f}, (added) {growth / budget:.2f}")
    print("SUMMARY " + json.dumps({"figure": f"peak RSS / (2 × nnz × K × 4 B) at nnz={memory['nnz']:,}, K={args.classes}",
                                   "value": f"{memory['peak_bytes'] / budget:.2f}", "target": "<= 1"}))

    middle = sizes[len(sizes) // 2]
    flags = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    single = in_child("time", middle, args.classes)
    sharded = in_child("sharded", middle, args.classes, env=flags)
    print(f"\n(c) nnz = {middle:,}: one device {single['seconds']:.4f} s / iteration, 8 host devices "
          f"{sharded['seconds']:.4f} s / iteration; ratio sharded / single {sharded['seconds'] / single['seconds']:.2f}"
          f" (host devices share the same {os.cpu_count()} cores)")
    print("SUMMARY " + json.dumps({"figure": f"sharded (8 host devices) / single-device time per iteration, nnz={middle:,}",
                                   "value": f"{sharded['seconds'] / single['seconds']:.2f}", "target": "informational"}))


if __name__ == "__main__":
    main()
