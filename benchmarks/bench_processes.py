"""Aspect EM across processes: time per iteration, and what each iteration sends between them.

Starts ``--processes`` Python processes on localhost (``jax.distributed`` with gloo collectives,
one CPU device each); each holds only its contiguous range of rows of a synthetic Zipf count
matrix and fits ``Aspect(K)`` with ``tempered_em(..., devices=jax.devices(), process_local=True)``.
It reports

(a) seconds per EM iteration with 1 process (the whole data, ``devices=None``) and with N
    processes (each its rows), from the difference of a 10- and a 50-iteration fit after
    compilation; both fits must end at the same log-likelihood;
(b) the bytes ``psum``-ed per iteration by the aspect model, 4 K (N_rows + N_cols) + 8 (the
    expected counts n(x_i, c) and n(y_k, c) and two log-likelihood sums), and the seconds of
    one ``psum`` of that size across the processes measured alone.

On one machine the processes share its cores, so (a) is not a speed-up; it is the input, with
(b), of the projection to many hosts in ``docs/benchmarks.md``.

Run: ``python benchmarks/bench_processes.py [--processes 2] [--draws 6e6] [--classes 32]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

N_ROWS, N_COLS = 50_000, 10_000


def synthetic(draws: int):
    """``draws`` Zipf-distributed (row, column) events on 50,000 × 10,000 (duplicates summed)."""
    from zoo.data import CoOccurrence

    rng = np.random.default_rng(0)
    rows = rng.integers(0, N_ROWS, draws)
    cols = rng.zipf(1.3, draws) % N_COLS
    return CoOccurrence(rows, cols, np.ones(draws), (N_ROWS, N_COLS))


def worker(process_id: int, n_processes: int, port: int, draws: int, n_classes: int) -> dict:
    import jax

    if n_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n_processes,
                                   process_id=process_id)
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from inference.em import tempered_em
    from inference.schedules import FixedBeta
    from zoo.data import CoOccurrence
    from zoo.dyadic.aspect import Aspect

    data = synthetic(draws)
    bounds = np.linspace(0, N_ROWS, n_processes + 1).astype(int)
    keep = (data.rows >= bounds[process_id]) & (data.rows < bounds[process_id + 1])
    part = CoOccurrence(data.rows[keep], data.cols[keep], data.counts[keep], data.shape)
    options = dict(key=jax.random.key(0), schedule=FixedBeta(1.0), tol=0.0, segment=10)
    if n_processes > 1:
        options.update(devices=jax.devices(), process_local=True)

    def timed(max_iter):
        start = time.perf_counter()
        fit = tempered_em(Aspect(n_classes), part, max_iter=max_iter, **options)
        return time.perf_counter() - start, fit

    timed(10)  # compilation
    short, _ = timed(10)
    long, fit = timed(50)
    report = dict(process=process_id, nnz=data.nnz, local_nnz=part.nnz, per_iteration_s=(long - short) / 40,
                  log_lik=fit.log_lik)
    if n_processes > 1:
        mesh = Mesh(np.array(jax.devices()), ("blocks",))
        shape = (n_processes, N_ROWS + N_COLS, n_classes)
        stats = jax.make_array_from_process_local_data(NamedSharding(mesh, P("blocks")),
                                                       np.ones((1,) + shape[1:], np.float32), shape)
        psum = jax.jit(jax.shard_map(lambda block: jax.lax.psum(block, "blocks"), mesh=mesh, in_specs=P("blocks"),
                                     out_specs=P("blocks")))
        psum(stats).block_until_ready()
        start = time.perf_counter()
        for _ in range(20):
            summed = psum(stats)
        summed.block_until_ready()
        report["psum_s"] = (time.perf_counter() - start) / 20
        report["psum_bytes"] = int(np.prod(shape[1:])) * jnp.dtype(jnp.float32).itemsize + 8
    return report


def _launch(n_processes: int, draws: int, n_classes: int) -> list[dict]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=root)
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", str(index), "--processes", str(n_processes),
                                 "--port", str(port), "--draws", str(draws), "--classes", str(n_classes)],
                                env=environment, stdout=subprocess.PIPE, text=True)
               for index in range(n_processes)]
    outputs = [worker.communicate(timeout=900)[0] for worker in workers]
    if any(worker.returncode for worker in workers):
        raise RuntimeError(f"a worker failed: return codes {[worker.returncode for worker in workers]}")
    return [json.loads(output.strip().splitlines()[-1]) for output in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--draws", type=float, default=6e6, help="events drawn (non-zeros are fewer: duplicates)")
    parser.add_argument("--classes", type=int, default=32)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    draws = int(args.draws)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.processes, args.port, draws, args.classes)), flush=True)
        return
    single = _launch(1, draws, args.classes)[0]
    several = _launch(args.processes, draws, args.classes)
    assert all(abs(report["log_lik"] - single["log_lik"]) <= 1e-5 * abs(single["log_lik"]) for report in several)
    per_iteration = max(report["per_iteration_s"] for report in several)
    local_nnz = ", ".join(f"{report['local_nnz']:,}" for report in several)
    print(f"nnz {single['nnz']:,}, K = {args.classes}: 1 process {single['per_iteration_s'] * 1e3:.1f} ms per "
          f"iteration; {args.processes} processes ({local_nnz} non-zeros "
          f"each) {per_iteration * 1e3:.1f} ms")
    print(f"psum per iteration: {several[0]['psum_bytes'] / 1e6:.2f} MB, {several[0]['psum_s'] * 1e3:.1f} ms alone")
    for figure, value in [
        (f"aspect EM, {args.processes} processes (gloo, localhost) / 1 process, time per iteration, "
         f"nnz={single['nnz']:,}, K={args.classes}", f"{per_iteration / single['per_iteration_s']:.2f}"),
        (f"psum of the aspect statistics, {several[0]['psum_bytes'] / 1e6:.2f} MB, {args.processes} processes",
         f"{several[0]['psum_s'] * 1e3:.1f} ms"),
    ]:
        print("SUMMARY " + json.dumps({"figure": figure, "value": value, "target": "informational"}))


if __name__ == "__main__":
    main()
