"""Summaries of a partition's draws: the co-clustering matrix and the point estimate, on real chains.

The draws are DM05's CDP on scikit-learn's digits (1,797 images, features centred and scaled;
Gaussians of identity precision, α ~ Gamma(1, 1), Neal's Algorithm 3 with its default
split–merge moves, 4 chains from the default starts), the model and data of
``notebooks/dp_mixture_digits.ipynb``. From the same draws, in one process:

* :func:`inference.partitions.co_clustering`, against the peer: the straightforward NumPy
  computation, Σ_d Z_d Z_dᵀ over every distinct draw's one-hot matrix Z_d (float32 matrix
  products, BLAS on every core, chunks of draws), checked to give the same matrix;
* :func:`inference.partitions.point_partition` with each loss, beside the seconds the sampler
  took for the draws it summarises;
* how many distinct clusters the draws hold against their clusters in all: the co-clustering
  and the ranking of the draws cost O(N² M) for M distinct clusters.

Run: ``python benchmarks/bench_partitions.py [--draws 2000] [--points 1797] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import platform
import os
import time

import numpy as np


def sample_draws(n_points: int, n_chains: int, n_warmup: int, n_draws: int, seed: int = 0):
    """(chain, draw, point) assignments of the digits CDP, and the seconds the sampler took."""
    import jax
    from sklearn.datasets import load_digits

    from inference.concentration import gamma_prior
    from zoo.dirichlet import DPMixture
    from zoo.dirichlet.known_precision import normal_known_precision

    digits = load_digits().data[:n_points]
    scale = digits.std(axis=0)
    data = (digits - digits.mean(axis=0)) / np.where(scale == 0, 1.0, scale)
    model = DPMixture(normal_known_precision(data.shape[1], precision=1.0, mean=0.0, prior_variance=1.0),
                      alpha_prior=gamma_prior(1.0, 1.0), algorithm="collapsed", max_clusters=64)
    start = time.perf_counter()
    fit = model.fit(data, jax.random.key(seed), n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws,
                    until_mixed=False, progress=False)
    return np.asarray(fit.result.samples["assignments"]), time.perf_counter() - start


def numpy_co_clustering(draws: np.ndarray, elements: int = 1 << 24) -> np.ndarray:
    """The peer: Σ_d Z_d Z_dᵀ / D over the distinct draws (counted by multiplicity), one-hot Z_d."""
    flat = draws.reshape(-1, draws.shape[-1])
    unique, counts = np.unique(flat, axis=0, return_counts=True)
    n_points = flat.shape[1]
    n_labels = int(unique.max()) + 1
    total = np.zeros((n_points, n_points), np.float32)
    chunk = max(1, elements // (n_points * n_labels))
    eye = np.eye(n_labels, dtype=np.float32)
    for first in range(0, len(unique), chunk):
        one_hot = eye[unique[first:first + chunk]]  # (chunk, N, K)
        weighted = one_hot * counts[first:first + chunk, None, None].astype(np.float32)
        z = one_hot.transpose(1, 0, 2).reshape(n_points, -1)
        total += weighted.transpose(1, 0, 2).reshape(n_points, -1) @ z.T
    return total.astype(np.float64) / flat.shape[0]


def timed(call):
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=1797, help="the first N digits (default all 1,797)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--draws", type=int, default=2000, help="draws per chain (default 2,000)")
    parser.add_argument("--quick", action="store_true", help="300 digits, 2 chains x 100 draws (a smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.points, args.chains, args.warmup, args.draws = 300, 2, 20, 100

    import jax

    from inference import partitions

    print(f"{platform.machine()}, {os.cpu_count()} cores, JAX {jax.__version__} ({jax.default_backend()})")
    draws, sample_seconds = sample_draws(args.points, args.chains, args.warmup, args.draws)
    n_draws = draws.shape[0] * draws.shape[1]
    print(f"digits CDP: {args.points:,} points, {args.chains} chains x ({args.warmup} + {args.draws}) sweeps "
          f"in {sample_seconds:.1f} s (compiling included)")

    unique, counts, _ = partitions._unique_draws(draws)
    clusters = partitions._distinct_clusters(unique, counts)
    n_clusters = int((clusters.of >= 0).sum(axis=1) @ counts)
    print(f"{n_draws:,} draws, {len(unique):,} distinct; {n_clusters:,} clusters in all, {len(clusters.draw):,} "
          f"distinct ({n_clusters / len(clusters.draw):.1f} draws hold each on average)")

    _, first_seconds = timed(lambda: partitions.co_clustering(draws))  # compiling its chunk's program
    ours, ours_seconds = timed(lambda: partitions.co_clustering(draws))
    peer, peer_seconds = timed(lambda: numpy_co_clustering(draws))
    same = bool(np.array_equal(ours, peer))
    print(f"\n{'co-clustering':<40} {'s':>8}")
    print(f"{'inference.partitions.co_clustering':<40} {ours_seconds:8.2f}  (first call {first_seconds:.2f})")
    print(f"{'NumPy one-hot products (the peer)':<40} {peer_seconds:8.2f}")
    print(f"same matrix: {same}; ratio {peer_seconds / ours_seconds:.1f}x")

    seconds = {}
    for loss in ("vi", "binder"):  # first calls: compiling included, as a user meets them
        estimate, seconds[loss] = timed(lambda: partitions.point_partition(draws, loss=loss))
        print(f"point_partition(loss={loss!r}): {seconds[loss]:.1f} s, {len(np.unique(estimate))} clusters "
              f"({100 * seconds[loss] / sample_seconds:.0f}% of the sampling's time)")

    print("SUMMARY " + json.dumps({
        "figure": f"co-clustering of {n_draws:,} digits CDP draws, s vs NumPy one-hot products",
        "value": f"{ours_seconds:.1f} s ({peer_seconds / ours_seconds:.1f}x)" + ("" if same else ", DIFFERENT"),
        "target": "same matrix"}))
    print("SUMMARY " + json.dumps({
        "figure": f"point estimate (VI) of {n_draws:,} digits CDP draws, s vs the sampling's s",
        "value": f"{seconds['vi']:.1f} s vs {sample_seconds:.0f} s", "target": "-"}))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
