"""Benchmark: Dirichlet-process Gibbs sampling (Neal's Algorithm 8, m = 3) on scikit-learn's digits.

The CDP model of DM05 (§7.1) — diagonal Gaussian components with Normal–Gamma priors (§5) — on
the 1797 standardised 64-pixel digits, with 8 chains ``vmap``-ped in one jitted call, measured in
chain-sweeps per second (one chain-sweep = every point reassigned once, then every cluster's
parameters redrawn). Two kernels of :mod:`inference.neal` are timed:

* Algorithm 8 as Neal (2000) writes it: m fresh auxiliary components per point;
* Algorithm 8 with the auxiliary components reused between points (Favaro & Teh 2013).

The sequential loop over the points runs in the kernels' default backend (``backend="auto"``:
a numba loop called from the jitted step on CPU, ``lax.scan`` elsewhere); ``--backend xla``
times the ``lax.scan`` path on CPU. The capacity is K_max = 32 slots by default (the chains hold
about 10 clusters; the driver doubles K_max if a chain ever needs more), the setting a user would
pick for this data.

The peer, run in the same process, is a straightforward NumPy implementation of Algorithm 8
(one chain, a Python loop over points, NumPy over the clusters); it runs fewer sweeps. Printed:
each rate and its ratio to the peer.

Run: ``python benchmarks/bench_dp_gibbs.py [--sweeps 20] [--numpy-sweeps 2] [--max-clusters 32]
[--backend auto]``.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from inference import neal
from inference.chains import sample_chains, stack_states
from inference.native import resolve_backend
from zoo.dirichlet.families import normal_gamma

N_CHAINS = 8
N_AUXILIARY = 3
ALPHA = 1.0
# Normal–Gamma prior: mean 0, kappa 1, Gamma(1, 1) precisions (DM05 §5 defaults).
PRIOR_MEAN, PRIOR_KAPPA, PRIOR_SHAPE, PRIOR_RATE = 0.0, 1.0, 1.0, 1.0


def load_standardised_digits() -> tuple[np.ndarray, np.ndarray]:
    digits = load_digits()
    return StandardScaler().fit_transform(digits.data).astype(np.float32), digits.target


# ----------------------------------------------------------------------------------------------
# The NumPy peer
# ----------------------------------------------------------------------------------------------
def _gaussian_log_lik(point: np.ndarray, means: np.ndarray, precisions: np.ndarray) -> np.ndarray:
    return 0.5 * np.sum(np.log(precisions) - np.log(2 * np.pi) - precisions * (point - means) ** 2, axis=-1)


def _draw_base(rng: np.random.Generator, size: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    precisions = rng.gamma(PRIOR_SHAPE, 1.0 / PRIOR_RATE, size=(size, n_features))
    means = rng.normal(PRIOR_MEAN, 1.0 / np.sqrt(PRIOR_KAPPA * precisions))
    return means, precisions


def _draw_posterior(rng: np.random.Generator, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    count = points.shape[0]
    total = points.sum(0)
    kappa_n = PRIOR_KAPPA + count
    mean_n = (PRIOR_KAPPA * PRIOR_MEAN + total) / kappa_n
    sample_mean = total / count
    rate_n = PRIOR_RATE + 0.5 * (((points - sample_mean) ** 2).sum(0) + PRIOR_KAPPA * count * (sample_mean - PRIOR_MEAN) ** 2 / kappa_n)
    precision = rng.gamma(PRIOR_SHAPE + 0.5 * count, 1.0 / rate_n)
    return rng.normal(mean_n, 1.0 / np.sqrt(kappa_n * precision)), precision


def numpy_algorithm_8_sweep(rng, data, labels, counts, means, precisions):
    """One sweep of Neal's Algorithm 8 (m auxiliary components) for one chain, in place."""
    n_points, n_features = data.shape
    log_aux_weight = np.log(ALPHA / N_AUXILIARY)
    for i in range(n_points):
        old = labels[i]
        counts[old] -= 1
        aux_means, aux_precisions = _draw_base(rng, N_AUXILIARY, n_features)
        if counts[old] == 0:  # x_i was alone: its component is the first auxiliary one
            aux_means[0], aux_precisions[0] = means[old], precisions[old]
        active = np.flatnonzero(counts > 0)
        log_weights = np.concatenate(
            [
                np.log(counts[active]) + _gaussian_log_lik(data[i], means[active], precisions[active]),
                log_aux_weight + _gaussian_log_lik(data[i], aux_means, aux_precisions),
            ]
        )
        weights = np.exp(log_weights - log_weights.max())
        choice = np.searchsorted(np.cumsum(weights), rng.random() * weights.sum())
        if choice < active.size:
            new = active[choice]
        else:
            new = np.flatnonzero(counts == 0)[0]
            means[new], precisions[new] = aux_means[choice - active.size], aux_precisions[choice - active.size]
        labels[i] = new
        counts[new] += 1
    for cluster in np.flatnonzero(counts > 0):
        means[cluster], precisions[cluster] = _draw_posterior(rng, data[labels == cluster])


def time_numpy(data: np.ndarray, initial_labels: np.ndarray, n_sweeps: int) -> float:
    rng = np.random.default_rng(0)
    n_points, n_features = data.shape
    data64 = data.astype(np.float64)
    labels = initial_labels.copy()
    counts = np.bincount(labels, minlength=n_points).astype(np.int64)
    means, precisions = _draw_base(rng, n_points, n_features)
    for cluster in np.flatnonzero(counts > 0):
        means[cluster], precisions[cluster] = _draw_posterior(rng, data64[labels == cluster])
    start = time.perf_counter()
    for _ in range(n_sweeps):
        numpy_algorithm_8_sweep(rng, data64, labels, counts, means, precisions)
    return n_sweeps / (time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------
# The JAX kernels
# ----------------------------------------------------------------------------------------------
def time_jax(data: np.ndarray, initial_labels: np.ndarray, n_sweeps: int, max_clusters: int, reuse: bool,
             backend: str):
    family = normal_gamma(data.shape[1], mean=PRIOR_MEAN, kappa=PRIOR_KAPPA, shape=PRIOR_SHAPE, rate=PRIOR_RATE)
    step = neal.build_kernel(family, "auxiliary", n_auxiliary=N_AUXILIARY, reuse_auxiliary=reuse, backend=backend)
    states = stack_states(
        [
            neal.init(jax.random.key(chain), data, family, algorithm="auxiliary", max_clusters=max_clusters,
                      alpha=ALPHA, assignments=initial_labels)
            for chain in range(N_CHAINS)
        ]
    )
    device_data = jnp.asarray(data)
    run = dict(n_warmup=0, n_draws=n_sweeps, draws_per_call=n_sweeps, progress=False)
    warm = sample_chains(jax.random.key(1), step, states, device_data, **run)  # compiles
    timed = sample_chains(jax.random.key(2), step, warm.final_state, device_data, **run)
    n_clusters = timed.samples["n_clusters"][:, -1]
    return N_CHAINS * n_sweeps / timed.seconds, n_clusters, timed.final_state.max_clusters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=20, help="timed sweeps per JAX chain")
    parser.add_argument("--numpy-sweeps", type=int, default=2, help="timed sweeps of the NumPy peer")
    parser.add_argument("--max-clusters", type=int, default=32, help="initial capacity K_max")
    parser.add_argument("--backend", choices=("auto", "xla", "numba"), default="auto",
                        help="where the kernels run their loop over the points")
    args = parser.parse_args()

    data, _ = load_standardised_digits()
    initial_labels = np.random.default_rng(0).integers(0, 10, data.shape[0])
    print(f"digits: {data.shape[0]} points x {data.shape[1]} features, {N_CHAINS} chains, "
          f"m = {N_AUXILIARY}, K_max = {args.max_clusters}, float32, JAX backend {jax.default_backend()}, "
          f"point loop {resolve_backend(args.backend)}")
    numpy_rate = time_numpy(data, initial_labels, args.numpy_sweeps)
    print(f"NumPy peer (1 chain, per-point loop):   {numpy_rate:8.1f} chain-sweeps/s")
    for reuse, label in ((False, "JAX Algorithm 8, fresh auxiliaries: "), (True, "JAX Algorithm 8, reused auxiliaries:")):
        rate, n_clusters, capacity = time_jax(data, initial_labels, args.sweeps, args.max_clusters, reuse, args.backend)
        print(f"{label}  {rate:8.1f} chain-sweeps/s   ratio to NumPy {rate / numpy_rate:6.1f}x   "
              f"(clusters per chain at the end: {n_clusters.tolist()}, K_max {capacity})")
        variant = "reused" if reuse else "fresh"
        print("SUMMARY " + json.dumps({"figure": f"DP Algorithm 8 (m = 3), {variant} auxiliaries, digits, 8 chains",
                                       "value": f"{rate:.1f} chain-sweeps/s ({rate / numpy_rate:.0f}x NumPy)",
                                       "target": ">= 500 chain-sweeps/s" if reuse else "-"}))


if __name__ == "__main__":
    main()
