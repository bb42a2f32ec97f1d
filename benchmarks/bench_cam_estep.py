"""The cluster-abstraction model's E-step (H99 eqs. 11-12): numba, XLA and NumPy, and its bits.

One call of :func:`inference.sparse.path_mixture_stats` with statistics (the E-step of
``ClusterAbstraction.em_step``: untempered scores, tempered posteriors, level and node statistics)
on Reuters (``lda``'s 395 stories × 4,258 words, 60,114 non-zeros) for a complete binary tree of
``--depth`` levels below the root (default 3: 8 clusters, 15 nodes, docs/backends.md's "depth-4 tree"
counting the root), at a tempered β (P^β for the posterior and statistics), in
float32. Timed, in one process: the numba kernel (the CPU's default), the XLA kernel, and a
straightforward NumPy + ``scipy.sparse`` implementation of the same formulas (the peer; its
outputs are checked against the numba kernel's). Milliseconds are medians of ``--repeats`` calls
after a compiling one; ratios are against NumPy.

The numba kernel is then run in fresh processes with ``NUMBA_NUM_THREADS`` set to 1 and to the
number of cores: the milliseconds of each, and the SHA-1 of all four outputs, which must be the
same on any number of threads (its node statistics are added column by column in a second pass
over the cells, in a fixed order, since 2026-11-29; one private copy per thread, added at the end,
had given other bits on 2 threads than on 1).

Run: ``python benchmarks/bench_cam_estep.py [--depth 3] [--beta 0.8] [--repeats 20]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp


def problem(depth: int, beta: float, seed: int = 0, rows: int | None = None, backend: str = "numba"):
    """Reuters' cells (laid out for ``backend``) and CAM parameters for a complete binary tree of ``depth``
    levels: Dirichlet level weights on each path, random column-normalised aspects and their β-th power."""
    import jax.numpy as jnp

    from zoo.datasets import load_reuters
    from zoo.dyadic.cluster_abstraction import ClusterAbstraction

    data = load_reuters()
    if rows is not None:
        data = type(data).from_sparse(data.to_sparse()[:rows])
    model = ClusterAbstraction(depth=depth, backend=backend)
    arrays = model.prepare(data)
    tree = model.tree
    rng = np.random.default_rng(seed)
    n_rows, (n_leaves, n_levels) = data.shape[0], tree.paths.shape
    mask = np.asarray(tree.path_mask)
    weights = rng.dirichlet(np.ones(n_levels), size=(n_rows, n_leaves)).astype(np.float32) * mask
    weights /= weights.sum(axis=2, keepdims=True)
    n_nodes = int(np.asarray(tree.paths).max()) + 1
    aspects = rng.gamma(1.0, size=(data.shape[1], n_nodes)).astype(np.float32)
    aspects /= aspects.sum(axis=0, keepdims=True)
    tempered = (aspects ** np.float32(beta)).astype(np.float32)
    log_prior = np.full(n_leaves, -np.log(n_leaves), np.float32)
    inputs = dict(weights=jnp.asarray(weights), aspects=jnp.asarray(aspects), paths=jnp.asarray(tree.paths),
                  path_mask=jnp.asarray(mask), log_prior=jnp.asarray(log_prior), tempered=jnp.asarray(tempered))
    return data, arrays, inputs


def kernel_call(arrays, inputs, backend: str):
    """A jitted E-step of ``backend`` on these inputs (statistics wanted)."""
    import jax

    from inference.sparse import path_mixture_stats

    @jax.jit
    def step(weights, aspects, tempered, paths, path_mask, log_prior, arrays):
        return path_mixture_stats(weights, aspects, paths, path_mask, log_prior, arrays, tempered_aspects=tempered,
                                  want_stats=True, backend=backend)

    return lambda: step(inputs["weights"], inputs["aspects"], inputs["tempered"], inputs["paths"],
                        inputs["path_mask"], inputs["log_prior"], arrays)


def numpy_estep(counts: sp.csr_matrix, weights, aspects, tempered, paths, path_mask, log_prior):
    """The same E-step in NumPy and scipy.sparse: every cell's K × L path terms at once.

    z_ikα = Σ_ℓ W_iαℓ P_k,path[α,ℓ] (z^β with P^β), scores = Σ_k n_ik log z, posterior =
    softmax(log prior + Σ_k n_ik log z^β), level statistics W_iαℓ Σ_k (n_ik / z^β_ikα) P^β_k,path[α,ℓ],
    node statistics P^β_kν Σ_{i,α,ℓ: path = ν} posterior_iα (n_ik / z^β_ikα) W_iαℓ.
    """
    weights, aspects, tempered = (np.asarray(a, np.float32) for a in (weights, aspects, tempered))
    paths, mask, log_prior = np.asarray(paths), np.asarray(path_mask), np.asarray(log_prior)
    n_rows, n_leaves, n_levels = weights.shape
    coo = counts.tocoo()
    rows, cols, n = coo.row, coo.col, coo.data.astype(np.float32)
    nnz = n.size
    sum_rows = sp.csr_matrix((np.ones(nnz, np.float32), (rows, np.arange(nnz))), shape=(n_rows, nnz))
    w_cells = weights[rows] * mask                                     # (nnz, K, L)
    on_path = np.where(mask, paths, 0)
    p_cells = aspects[cols][:, on_path] * mask                         # (nnz, K, L)
    pb_cells = tempered[cols][:, on_path] * mask
    floor = np.float32(1e-30)
    z = np.maximum((w_cells * p_cells).sum(axis=2), floor)             # (nnz, K)
    zb = np.maximum((w_cells * pb_cells).sum(axis=2), floor)
    scores = sum_rows @ (n[:, None] * np.log(z))
    log_post = log_prior + sum_rows @ (n[:, None] * np.log(zb))
    log_post -= log_post.max(axis=1, keepdims=True)
    posterior = np.exp(log_post)
    posterior /= posterior.sum(axis=1, keepdims=True)
    ratio = n[:, None] / zb                                            # (nnz, K)
    level = (sum_rows @ (ratio[:, :, None] * pb_cells).reshape(nnz, -1)).reshape(weights.shape) * weights * mask
    weighted = (posterior[rows] * ratio)[:, :, None] * w_cells         # (nnz, K, L)
    n_nodes = aspects.shape[1]
    to_node = sp.csr_matrix((mask.ravel().astype(np.float32), (np.arange(mask.size), on_path.ravel())),
                            shape=(mask.size, n_nodes))
    sum_cols = sp.csr_matrix((np.ones(nnz, np.float32), (cols, np.arange(nnz))), shape=(aspects.shape[0], nnz))
    node = tempered * (sum_cols @ (to_node.T @ weighted.reshape(nnz, -1).T).T)
    return scores, posterior, level, node


def _median_ms(call, repeats: int) -> float:
    import jax

    jax.block_until_ready(call())  # compile
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        seconds.append(time.perf_counter() - start)
    return 1e3 * float(np.median(seconds))


def _sha(outputs) -> str:
    digest = hashlib.sha1()
    for leaf in outputs:
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()[:12]


def child(args: argparse.Namespace) -> None:
    """In a process started with NUMBA_NUM_THREADS set: the numba E-step's ms and its bits."""
    _, arrays, inputs = problem(args.depth, args.beta, rows=args.rows)
    call = kernel_call(arrays, inputs, "numba")
    print(json.dumps({"ms": _median_ms(call, args.repeats), "sha": _sha(call())}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=3, help="levels below the root (2**depth clusters)")
    parser.add_argument("--beta", type=float, default=0.8, help="inverse temperature of the posterior and statistics")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per method (medians are reported)")
    parser.add_argument("--rows", type=int, default=None, help="the first ROWS stories only (smoke runs)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0

    import jax

    data, arrays, inputs = problem(args.depth, args.beta, rows=args.rows)
    counts = data.to_sparse()
    print(f"data: Reuters (lda), {counts.shape[0]} x {counts.shape[1]}, nnz = {counts.nnz:,}; complete binary tree, "
          f"depth {args.depth} ({inputs['paths'].shape[0]} clusters, {int(np.asarray(inputs['paths']).max()) + 1} "
          f"nodes), beta = {args.beta}, float32")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
          f"JAX backend {jax.default_backend()}")
    numpy_args = (counts, inputs["weights"], inputs["aspects"], inputs["tempered"], inputs["paths"],
                  inputs["path_mask"], inputs["log_prior"])
    calls = {"numba kernel": kernel_call(arrays, inputs, "numba"), "XLA kernel": kernel_call(arrays, inputs, "xla"),
             "NumPy + scipy.sparse": lambda: numpy_estep(*numpy_args)}
    expected = [np.asarray(leaf) for leaf in calls["numba kernel"]()]
    for name, call in calls.items():
        for label, got, want in zip(("scores", "posterior", "level", "node"), call(), expected):
            # float32 sums of a row's ~150 log terms differ in order between methods: probabilities
            # near 0.02 move by ~1e-4, beyond a relative tolerance, so the posterior's is absolute
            atol = 5e-4 if label == "posterior" else 1e-5 * float(np.abs(want).max())
            np.testing.assert_allclose(np.asarray(got), want, rtol=2e-3, atol=atol,
                                       err_msg=f"{name}: {label} differ from the numba kernel's")
    ms = {name: _median_ms(call, args.repeats) for name, call in calls.items()}
    print(f"\n{'method':<24} {'ms / E-step':>12} {'speed-up vs NumPy':>18}")
    for name, value in ms.items():
        print(f"{name:<24} {value:12.2f} {ms['NumPy + scipy.sparse'] / value:17.1f}x")
    print("(all three give the same statistics within float32 rounding; checked before timing)")

    threads = sorted({1, os.cpu_count() or 1})
    runs = {}
    for count in threads:
        command = [sys.executable, __file__, "--child", "--depth", str(args.depth), "--beta", str(args.beta),
                   "--repeats", str(args.repeats)] + (["--rows", str(args.rows)] if args.rows else [])
        output = subprocess.run(command, check=True, capture_output=True, text=True,
                                env={**os.environ, "NUMBA_NUM_THREADS": str(count)}).stdout
        runs[count] = json.loads(output.strip().splitlines()[-1])
    print(f"\n{'numba threads':<14} {'ms / E-step':>12}  SHA-1 of the outputs")
    for count, run in runs.items():
        print(f"{count:<14} {run['ms']:12.2f}  {run['sha']}")
    same = len({run["sha"] for run in runs.values()}) == 1
    print(f"same bits on {' and '.join(map(str, threads))} threads: {same}")

    print("SUMMARY " + json.dumps({"figure": f"CAM E-step ms, numba vs NumPy (Reuters, depth {args.depth})",
                                   "value": f"{ms['numba kernel']:.1f} ms ({ms['NumPy + scipy.sparse'] / ms['numba kernel']:.1f}x)",
                                   "target": "-"}))
    print("SUMMARY " + json.dumps({"figure": f"CAM E-step numba bits, {' vs '.join(map(str, threads))} threads",
                                   "value": "same" if same else "DIFFERENT", "target": "same"}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
