"""The aspect model's XLA E-step with fixed-order sums against XLA's scatter-adds, on this backend.

On a GPU or TPU XLA's float scatter-adds are atomic, so their order (and the last bits of the
statistics) changes from call to call; ``inference.segments`` sums in an order fixed by the shapes
instead. This prints, per number of non-zeros (Zipf columns, 20 cells per row, K = 64):
milliseconds per E-step (rows, columns and log-likelihood) for both, whether two calls gave the
same bits, the ratio (target ≤ 1.5x on an accelerator) and the log-log slope of the fixed-order
time against nnz (target ≤ 1.1). On the CPU the scatter is sequential, repeatable and the default;
the fixed-order path is measured there only for completeness.

Then one whole EM iteration of the aspect model (``Aspect.em_step``, jitted: E-step, the β = 1
log-likelihood and the M-step) at β = 1 and at a tempered β = 0.8 (which costs a second product per
cell), with this backend's default sums (fixed order off the CPU), against the target of 0.5 s at
1e8 non-zeros on one H100, and its distance from the memory-bandwidth floor where the device's
bandwidth is known: the two passes over the cells (rows, then columns) each gather a K-row of both
factors per cell, 2 × 2 × nnz × K × 4 bytes.

Run: ``python benchmarks/bench_estep_order.py [--nnz 1e6 1e7 1e8] [--classes 64]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def synthetic_arrays(nnz: int, seed: int = 0):
    """DyadicArrays of ``nnz`` cells built directly (no CoOccurrence: 1e8 cells stay cheap)."""
    import jax.numpy as jnp

    from zoo.data import DyadicArrays

    rng = np.random.default_rng(seed)
    n_rows, n_cols = max(nnz // 20, 10), max(min(nnz // 10, 200_000), 10)
    rows = np.sort(rng.integers(0, n_rows, nnz)).astype(np.int32)
    cols = np.minimum(np.minimum(rng.zipf(1.1, nnz) - 1, n_cols - 1) ^ rng.integers(0, 2, nnz), n_cols - 1)
    cols = cols.astype(np.int32)
    counts = rng.integers(1, 4, nnz).astype(np.float32)
    order = np.argsort(cols, kind="stable")
    arrays = (rows, cols, counts, np.searchsorted(rows, np.arange(n_rows + 1)).astype(np.int32),
              np.bincount(rows, counts, n_rows).astype(np.float32), np.bincount(cols, counts, n_cols).astype(np.float32),
              np.searchsorted(cols[order], np.arange(n_cols + 1)).astype(np.int32), rows[order], counts[order])
    return DyadicArrays(*(jnp.asarray(array) for array in arrays))


def _timed(step, *args, repeats: int = 3):
    """(min seconds of ``repeats`` calls after a first, compiling one; whether every leaf of a later
    call equals the first bit for bit; the first call's output)."""
    import jax

    first = jax.block_until_ready(step(*args))
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        again = jax.block_until_ready(step(*args))
        seconds.append(time.perf_counter() - start)
    same = all(bool((x == y).all()) for x, y in zip(jax.tree.leaves(first), jax.tree.leaves(again)))
    return min(seconds), same, first


def time_e_step(data, n_classes: int, ordered: bool, repeats: int = 3):
    import jax
    import jax.numpy as jnp

    import inference.sparse as sparse

    rng = np.random.default_rng(1)
    A = jnp.asarray(rng.random((data.row_sums.shape[0], n_classes)), jnp.float32)
    B = jnp.asarray(rng.random((data.col_sums.shape[0], n_classes)), jnp.float32)
    original = sparse.scatter_is_ordered
    sparse.scatter_is_ordered = lambda: not ordered
    try:
        step = jax.jit(lambda A, B, data: tuple(sparse.cell_stats(A, B, data, backend="xla"))[:3])
        jax.block_until_ready(step(A, B, data))  # traced (and compiled) with the order asked for
    finally:
        sparse.scatter_is_ordered = original
    return _timed(step, A, B, data, repeats=repeats)


# Peak memory bandwidth (bytes/s) of devices whose figure we know, by JAX's device_kind.
BANDWIDTH = {"NVIDIA H100 80GB HBM3": 3.35e12, "NVIDIA H200": 4.8e12}


def time_em_step(data, n_classes: int, betas: tuple[float, ...] = (1.0, 0.8), repeats: int = 3):
    """(seconds, same bits) of a jitted ``Aspect.em_step`` at each β of ``betas`` (one compilation:
    β is an argument)."""
    import jax

    from zoo.dyadic import Aspect

    model = Aspect(n_classes=n_classes, backend="xla")
    params = model.init_params(jax.random.key(0), data)
    step = jax.jit(model.em_step)
    return [_timed(step, params, data, beta, repeats=repeats)[:2] for beta in betas]


def main(argv=None) -> int:
    import jax

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nnz", nargs="*", type=float, default=[1e5, 1e6])
    parser.add_argument("--classes", type=int, default=64)
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    print(f"backend {jax.default_backend()}, device {device.device_kind}, JAX {jax.__version__}")
    print(f"{'nnz':>12} {'fixed ms':>9} {'repeats':>8} {'scatter ms':>10} {'repeats':>8} {'ratio':>6} {'max rel diff':>12}")
    sizes, fixed_times, ratios, em_rows = [], [], [], []
    for nnz in (int(n) for n in args.nnz):
        data = synthetic_arrays(nnz)
        fixed, fixed_same, fixed_out = time_e_step(data, args.classes, ordered=True)
        scatter, scatter_same, scatter_out = time_e_step(data, args.classes, ordered=False)
        diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))
                   for a, b in zip(scatter_out, fixed_out))
        print(f"{nnz:>12,} {fixed * 1e3:>9.2f} {str(fixed_same):>8} {scatter * 1e3:>10.2f} {str(scatter_same):>8} "
              f"{fixed / scatter:>6.2f} {diff:>12.1e}", flush=True)
        sizes.append(nnz), fixed_times.append(fixed), ratios.append(fixed / scatter)
        (one, one_same), (tempered, tempered_same) = time_em_step(data, args.classes)
        em_rows.append((nnz, one, one_same, tempered, tempered_same))
        del data
    slope = float(np.polyfit(np.log(sizes), np.log(fixed_times), 1)[0]) if len(sizes) > 1 else float("nan")
    print(f"log-log slope of the fixed-order time: {slope:.2f}")
    bandwidth = BANDWIDTH.get(device.device_kind)
    print(f"\nwhole EM iteration (Aspect.em_step, K = {args.classes}, this backend's default sums)")
    print(f"{'nnz':>12} {'beta=1 ms':>10} {'repeats':>8} {'beta=0.8 ms':>12} {'repeats':>8} {'floor ms':>9} {'x floor':>8}")
    for nnz, one, one_same, tempered, tempered_same in em_rows:
        floor = 2 * 2 * nnz * args.classes * 4 / bandwidth if bandwidth else float("nan")
        print(f"{nnz:>12,} {one * 1e3:>10.2f} {str(one_same):>8} {tempered * 1e3:>12.2f} {str(tempered_same):>8} "
              f"{floor * 1e3:>9.2f} {one / floor:>8.1f}", flush=True)
    where = f"{jax.default_backend()} ({device.device_kind})"
    print("SUMMARY " + json.dumps({"figure": f"fixed-order / scatter E-step time, K={args.classes}, nnz={sizes[-1]:,}, "
                                             f"{where}", "value": f"{ratios[-1]:.2f}x",
                                   "target": "<= 1.5x on an accelerator"}))
    print("SUMMARY " + json.dumps({"figure": f"fixed-order E-step time vs nnz ({sizes[0]:,}-{sizes[-1]:,}), log-log slope, "
                                             f"{where}", "value": f"{slope:.2f}", "target": "<= 1.1"}))
    nnz, one, _, tempered, _ = em_rows[-1]
    print("SUMMARY " + json.dumps({"figure": f"aspect EM iteration (beta = 1 / 0.8), K={args.classes}, nnz={nnz:,}, {where}",
                                   "value": f"{one:.3f} s / {tempered:.3f} s",
                                   "target": "< 0.5 s at 1e8 non-zeros on one H100"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
