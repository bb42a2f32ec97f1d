"""Seconds per incremental-EM pass (LRM) and per Gibbs sweep (IRM) against straightforward NumPy, in one process.

Data: the MovieLens 100k ``likes(user, item)`` relation (943 × 1,682, 100,000 observed cells,
ratings thresholded at the global mean, CP §3) when ``recbole`` is installed, otherwise a planted
block relation of the same shape and number of cells. Both sides run the same algorithm from the
same starting point:

* iEM with g = 4 classes per domain: one pass = for every user, then every item, the partial
  E-step from its Markov blanket, the incremental statistics and the M-step (CP eqs. 4–6). NumPy:
  a Python loop over individuals with vectorised work per individual. Ours: the jitted
  :func:`zoo.relational.latent_class.iem_pass` (numba backend, and the XLA ``lax.scan`` backend).
* IRM: one collapsed Gibbs sweep over users and items with α and γ fixed (the part both sides
  share). NumPy: a Python loop over individuals scoring the occupied clusters (plus one new) with
  ``scipy.special.gammaln``. Ours: the jitted kernel of :func:`zoo.relational.infinite.build_kernel`
  at capacity 32 per domain (numba and XLA backends), one chain and 4 chains vmapped (time per
  chain-sweep).

Times are medians of repeated calls after a warm-up call (compilation excluded).

Run: ``python benchmarks/bench_relational.py [--repeats 5]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from scipy.special import gammaln


def load() -> tuple:
    from zoo.relational.data import Domain, Relation, RelationalData, load_movielens_100k

    try:
        return load_movielens_100k(), "MovieLens 100k likes (recbole)"
    except FileNotFoundError:
        rng = np.random.default_rng(0)
        n_users, n_items, n_cells = 943, 1682, 100_000
        flat = rng.choice(n_users * n_items, n_cells, replace=False)
        cells = np.stack(np.unravel_index(flat, (n_users, n_items)), axis=1)
        users, items = rng.integers(0, 4, n_users), rng.integers(0, 4, n_items)
        probs = rng.uniform(0.1, 0.9, (4, 4))
        values = (rng.random(n_cells) < probs[users[cells[:, 0]], items[cells[:, 1]]]).astype(int)
        domains = (Domain("users", n_users), Domain("items", n_items))
        relation = Relation("likes", ("users", "items"), (n_users, n_items), cells, values)
        return RelationalData(domains, (relation,)), "planted blocks (recbole not installed)"


def timed(function, repeats: int) -> float:
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ----------------------------------------------------------------------------- NumPy iEM pass
def numpy_iem_pass(q_users, q_items, cells, values, n_values, prior_count):
    """CP eqs. 4–6, one individual at a time, written directly in NumPy."""
    q_users, q_items = q_users.copy(), q_items.copy()
    onehot = np.eye(n_values)[values]

    def normalise(counts):
        mass = np.maximum(counts, 0.0) + prior_count
        return mass / mass.sum(axis=-1, keepdims=True)

    counts = np.einsum("jg,jh,ju->ghu", q_users[cells[:, 0]], q_items[cells[:, 1]], onehot)
    class_counts = [q_users.sum(0), q_items.sum(0)]
    log_theta = np.log(normalise(counts))
    log_pi = [np.log(normalise(c)) for c in class_counts]
    for position, own, other in ((0, q_users, q_items), (1, q_items, q_users)):
        order = np.argsort(cells[:, position], kind="stable")
        starts = np.searchsorted(cells[order, position], np.arange(own.shape[0] + 1))
        for individual in range(own.shape[0]):
            mine = order[starts[individual]: starts[individual + 1]]
            message = other[cells[mine, 1 - position]].T @ onehot[mine]
            if position == 0:
                score = log_pi[0] + np.einsum("gou,ou->g", log_theta, message)
            else:
                score = log_pi[1] + np.einsum("ogu,ou->g", log_theta, message)
            new = np.exp(score - score.max())
            new /= new.sum()
            delta = new - own[individual]
            if position == 0:
                counts += delta[:, None, None] * message[None]
            else:
                counts += message[:, None, :] * delta[None, :, None]
            class_counts[position] += delta
            log_theta = np.log(normalise(counts))
            log_pi[position] = np.log(normalise(class_counts[position]))
            own[individual] = new
    return q_users, q_items


# ----------------------------------------------------------------------------- NumPy IRM sweep
def numpy_irm_sweep(rng, assignments, cells, values, n_values, alpha, hyper, capacity):
    """Collapsed Gibbs (Neal 2000 Algorithm 3) over users then items, directly in NumPy."""
    z = [assignments[0].copy(), assignments[1].copy()]
    counts = np.zeros((capacity, capacity, n_values))
    np.add.at(counts, (z[0][cells[:, 0]], z[1][cells[:, 1]], values), 1)
    sizes = [np.bincount(z[0], minlength=capacity), np.bincount(z[1], minlength=capacity)]

    def log_b(n):
        return gammaln(hyper + n).sum(-1) - gammaln(hyper.sum() + n.sum(-1))

    for position in (0, 1):
        order = np.argsort(cells[:, position], kind="stable")
        starts = np.searchsorted(cells[order, position], np.arange(z[position].shape[0] + 1))
        table = counts if position == 0 else counts.transpose(1, 0, 2)  # a view: updates reach counts
        for individual in range(z[position].shape[0]):
            mine = order[starts[individual]: starts[individual + 1]]
            added = np.zeros((capacity, n_values))
            np.add.at(added, (z[1 - position][cells[mine, 1 - position]], values[mine]), 1)
            old = z[position][individual]
            table[old] -= added
            sizes[position][old] -= 1
            occupied = np.flatnonzero(sizes[position] > 0)
            free = np.flatnonzero(sizes[position] == 0)
            candidates = np.concatenate([occupied, free[:1]])
            columns = np.flatnonzero(sizes[1 - position] > 0)
            rows = table[candidates][:, columns]
            log_like = (log_b(rows + added[columns]) - log_b(rows)).sum(axis=1)
            log_prior = np.log(np.concatenate([sizes[position][occupied], [alpha]])[: candidates.shape[0]])
            weights = np.exp(log_prior + log_like - (log_prior + log_like).max())
            new = candidates[rng.choice(candidates.shape[0], p=weights / weights.sum())]
            table[new] += added
            sizes[position][new] += 1
            z[position][individual] = new
    return z


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()

    import jax

    from inference.concentration import GammaPrior
    from zoo.relational import infinite, latent_class

    data, source = load()
    relation = data.relation()
    cells, values = relation.entries.astype(np.int64), relation.values.astype(np.int64)
    print(f"data: {source}; {relation.shape[0]} × {relation.shape[1]}, {relation.n_observed} observed cells")
    print(f"jax {jax.__version__} on {jax.default_backend()}; repeats {arguments.repeats} (median seconds)")

    # ---------------------------------------------------------------- iEM pass, g = 4
    n_classes = 4
    arrays, schema, flat = data.to_arrays(), data.schema, latent_class.flat_cells(data)
    params = latent_class._init_params(jax.random.key(0), arrays, schema=schema, n_classes=(4, 4), prior_count=1.0)
    q_users, q_items = (np.asarray(resp, np.float64) for resp in params.responsibilities)
    numpy_seconds = timed(lambda: numpy_iem_pass(q_users, q_items, cells, values, relation.n_values, 1.0),
                          max(1, arguments.repeats // 2))
    print(f"\niEM pass (g = {n_classes} per domain)")
    print(f"  numpy (loop over individuals)   {numpy_seconds:8.4f} s")
    one_pass = jax.jit(latent_class.iem_pass, static_argnames=("schema", "backend"))
    iem_speedups = {}
    for backend in ("numba", "xla"):
        def run(backend=backend):
            out = one_pass(params, arrays, 1.0, schema=schema, prior_count=1.0, flat=flat, backend=backend)
            jax.block_until_ready(out)

        seconds = timed(run, arguments.repeats)
        iem_speedups[backend] = numpy_seconds / seconds
        print(f"  latentzoo iem_pass[{backend:5s}]       {seconds:8.4f} s   speed-up ×{numpy_seconds / seconds:6.1f}")

    # ---------------------------------------------------------------- IRM sweep
    capacity = 32
    state = infinite.init(jax.random.key(1), arrays, schema, (capacity, capacity), concentration=1.0, hyper=1.0,
                          init_clusters=10)
    start = [np.asarray(assigned) for assigned in state.assignments]
    rng = np.random.default_rng(0)
    numpy_seconds = timed(lambda: numpy_irm_sweep(rng, start, cells, values, relation.n_values, 1.0,
                                                  np.ones(relation.n_values), capacity),
                          max(1, arguments.repeats // 2))
    print(f"\nIRM collapsed Gibbs sweep (capacity {capacity} per domain, α and γ fixed)")
    print(f"  numpy (loop over individuals)            {numpy_seconds:8.4f} s")
    n_chains = 4
    states = jax.vmap(lambda key: infinite.init(key, arrays, schema, (capacity, capacity), concentration=1.0,
                                                hyper=1.0, init_clusters=10))(jax.random.split(jax.random.key(3),
                                                                                               n_chains))
    keys = jax.random.split(jax.random.key(4), n_chains)
    irm_speedups = {}
    for backend in ("numba", "xla"):
        step = infinite.build_kernel(schema, (capacity, capacity), concentration_prior=GammaPrior(1.0, 1.0),
                                     hyper_prior_rate=1.0, sample_concentration=False, sample_hyper=False,
                                     backend=backend)
        single = jax.jit(step)
        seconds = timed(lambda: jax.block_until_ready(single(jax.random.key(2), state, arrays, flat)),
                        arguments.repeats)
        print(f"  latentzoo sweep[{backend:5s}], 1 chain          {seconds:8.4f} s   "
              f"speed-up ×{numpy_seconds / seconds:6.1f}")
        batched = jax.jit(jax.vmap(step, in_axes=(0, 0, None, None)))
        seconds = timed(lambda: jax.block_until_ready(batched(keys, states, arrays, flat)),
                        arguments.repeats) / n_chains
        print(f"  latentzoo sweep[{backend:5s}], {n_chains} chains vmapped {seconds:8.4f} s per chain   "
              f"speed-up ×{numpy_seconds / seconds:6.1f}")
        irm_speedups[backend] = numpy_seconds / seconds
    cells_label = f"{relation.n_observed:,} cells"
    print("SUMMARY " + json.dumps({"figure": f"iEM pass (g=4) vs NumPy loop, {cells_label} (numba backend)",
                                   "value": f"{iem_speedups['numba']:.1f}x faster", "target": ">= 10x"}))
    print("SUMMARY " + json.dumps({"figure": f"IRM Gibbs sweep vs NumPy loop, {cells_label} (numba, per chain)",
                                   "value": f"{irm_speedups['numba']:.1f}x faster", "target": ">= 10x"}))

if __name__ == "__main__":
    main()
