"""EM across processes: ``jax.distributed`` on localhost with gloo collectives, one CPU device each.

Every process passes only its own rows (a ``CoOccurrence`` of them with the global shape) to
``tempered_em(..., devices=jax.devices(), process_local=True)``; each must get the fit of the
whole data in one process (same tolerance as the 8-device tests of ``test_sharding.py``); a time
budget spent in one process stops them all after the same segment. Then they start a last fit
during which the last process dies: the others must fail with an error
that says so within a time limit, not hang. The 2-process run takes about 40 s on 2 cores; the
4-process one is marked slow, and so is the check of the one-sided, two-sided and CAM models
(from a start given to every process). ``python -m zoo fit ... --processes 2`` on per-process
MatrixMarket files gives the one-process fit of the whole file. Gibbs chains spread over the
processes' devices (``sample_chains(devices=jax.devices())``, every process passing all the
initial states or, ``process_local=True``, only its own) give every process the draws of the
one-process run, bit for bit, and stop together when one process runs out of time.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest

from inference.em import tempered_em
from inference.schedules import FixedBeta
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect

HEARTBEAT_S = 10  # jax.distributed's timeout for a silent process (default 100 s)

WORKER = textwrap.dedent(
    """
    import json, os, sys, threading, time
    process_id, n_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n_processes,
                               process_id=process_id, heartbeat_timeout_seconds=int(sys.argv[5]))
    import numpy as np
    sys.path.insert(0, os.getcwd())
    from tests.test_processes import own_rows, problem
    from inference.em import tempered_em
    from zoo.dyadic.aspect import Aspect

    train, valid, options = problem()
    own_train, own_valid = (own_rows(part, process_id, n_processes) for part in (train, valid))
    fit = tempered_em(Aspect(4), own_train, valid=own_valid, key=jax.random.key(3), devices=jax.devices(),
                      process_local=True, **options)
    np.savez(os.path.join(out, f"fit-{process_id}.npz"), n_iter=fit.n_iter, beta=fit.beta,
             **fit.params._asdict(), **{"history_" + name: values for name, values in fit.history.items()})

    # Only process 0 runs out of time: every process stops after the same segment, saying why.
    cut = tempered_em(Aspect(4), own_train, valid=own_valid, key=jax.random.key(3), devices=jax.devices(),
                      process_local=True, segment=4, time_budget=1e-9 if process_id == 0 else None, **options)
    with open(os.path.join(out, f"cut-{process_id}.json"), "w") as file:
        json.dump([cut.stopped_by, cut.n_iter], file)

    # A last fit, the same but endless, until the last process dies in it.
    if process_id == n_processes - 1:
        def die():
            with open(os.path.join(out, "died"), "w") as file:
                json.dump(time.time(), file)
            os._exit(7)
        threading.Timer(2.0, die).start()
    tempered_em(Aspect(4), own_train, valid=own_valid, key=jax.random.key(3), devices=jax.devices(),
                process_local=True, **dict(options, max_iter=10**6))  # compiled already: it iterates at once
    """
)


def problem():
    """60 × 80 Poisson counts (one empty row) split into training and validation tokens, and the fit's options."""
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.5, size=(60, 80))
    counts[7] = 0
    train, valid = CoOccurrence.from_dense(counts).split_tokens([0.85, 0.15], rng=1)
    return train, valid, dict(schedule=FixedBeta(0.9), n_restarts=2, max_iter=12, tol=0.0)


def own_rows(data: CoOccurrence, process_id: int, n_processes: int) -> CoOccurrence:
    """The cells of process ``process_id`` 's contiguous range of rows, with the global shape."""
    bounds = np.linspace(0, data.n_rows, n_processes + 1).astype(int)
    keep = (data.rows >= bounds[process_id]) & (data.rows < bounds[process_id + 1])
    return CoOccurrence(data.rows[keep], data.cols[keep], data.counts[keep], data.shape)


def _worker_environment() -> dict:
    """This process's environment for a worker, with XLA_FLAGS cut down to the compiler's
    optimisation level: no host-device count (a worker is one device), and the level the
    one-process runs made here were compiled at, so that the workers' bits are theirs
    (tests/conftest.py)."""
    environment = dict(os.environ)
    flags = [flag for flag in environment.pop("XLA_FLAGS", "").split()
             if flag.startswith("--xla_backend_optimization_level")]
    if flags:
        environment["XLA_FLAGS"] = " ".join(flags)
    return environment


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _launch(n_processes: int, out, timeout: float) -> dict:
    """Start the workers; wait for all of them (killing any left after ``timeout``)."""
    environment = _worker_environment()
    environment["JAX_PLATFORMS"] = "cpu"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    port = _free_port()
    logs = [open(out / f"log-{index}.txt", "w+") for index in range(n_processes)]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(index), str(n_processes), str(port), str(out),
                                 str(HEARTBEAT_S)], cwd=root, env=environment, stdout=log, stderr=log)
               for index, log in enumerate(logs)]
    deadline = time.time() + timeout
    ended = [None] * n_processes
    while any(end is None for end in ended) and time.time() < deadline:
        for index, worker in enumerate(workers):
            if ended[index] is None and worker.poll() is not None:
                ended[index] = time.time()
        time.sleep(0.1)
    for worker in workers:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    texts = []
    for log in logs:
        log.seek(0)
        texts.append(log.read())
        log.close()
    died = json.loads((out / "died").read_text()) if (out / "died").exists() else None
    return {"codes": [worker.returncode for worker in workers], "ended": ended, "died": died, "logs": texts}


def _check(run: dict, out, n_processes: int) -> None:
    for index in range(n_processes):
        assert (out / f"fit-{index}.npz").exists(), run["logs"][index][-3000:]
    train, valid, options = problem()
    whole = tempered_em(Aspect(4), train, valid=valid, key=jax.random.key(3), **options)
    for index in range(n_processes):
        fit = np.load(out / f"fit-{index}.npz")
        assert int(fit["n_iter"]) == whole.n_iter > 1
        np.testing.assert_allclose(fit["history_log_lik"], whole.history["log_lik"], rtol=1e-10)
        np.testing.assert_allclose(fit["history_valid_perplexity"], whole.history["valid_perplexity"], atol=1e-9)
        for name, value in whole.params._asdict().items():
            np.testing.assert_allclose(fit[name], np.asarray(value), atol=1e-9, err_msg=name)

    # A time budget spent in process 0 alone stopped every process after the first segment.
    for index in range(n_processes):
        assert json.loads((out / f"cut-{index}.json").read_text()) == ["time_budget", 4], run["logs"][index][-3000:]

    # The last process died in the last fit; every other one failed soon after, saying why.
    assert run["died"] is not None and run["codes"][-1] == 7
    for index in range(n_processes - 1):
        assert run["codes"][index] not in (0, None), run["logs"][index][-3000:]
        assert run["ended"][index] - run["died"] < 3 * HEARTBEAT_S
        assert ("another process died" in run["logs"][index]
                or "another task died" in run["logs"][index]), run["logs"][index][-3000:]


def test_two_processes_fit_their_rows_as_one_process_fits_the_whole(tmp_path, x64):
    run = _launch(2, tmp_path, timeout=150)
    _check(run, tmp_path, 2)


@pytest.mark.slow
def test_four_processes_fit_their_rows_as_one_process_fits_the_whole(tmp_path, x64):
    run = _launch(4, tmp_path, timeout=400)
    _check(run, tmp_path, 4)


def test_process_local_in_one_process_is_the_plain_fit_and_needs_devices(x64):
    train, valid, options = problem()
    plain = tempered_em(Aspect(4), train, valid=valid, key=jax.random.key(3), **options)
    local = tempered_em(Aspect(4), train, valid=valid, key=jax.random.key(3), devices=1, process_local=True, **options)
    np.testing.assert_allclose(local.history["log_lik"], plain.history["log_lik"], rtol=1e-12)
    with pytest.raises(ValueError, match="^process_local: needs devices"):
        tempered_em(Aspect(4), train, key=jax.random.key(3), process_local=True)
    with pytest.raises(TypeError, match="^process_local"):
        tempered_em(Aspect(4), train, key=jax.random.key(3), devices=1, process_local="yes")


def test_command_line_fit_over_two_processes_reading_their_own_files(tmp_path):
    """``python -m zoo fit ... --processes 2`` on per-process MatrixMarket files equals the one-process fit."""
    import scipy.io
    import scipy.sparse as sp

    from zoo.cli import main

    train, _, _ = problem()
    whole = train.to_sparse()
    bounds = np.linspace(0, whole.shape[0], 3).astype(int)
    for index in range(2):
        part = sp.lil_matrix(whole.shape)
        part[bounds[index]:bounds[index + 1]] = whole[bounds[index]:bounds[index + 1]]
        scipy.io.mmwrite(tmp_path / f"part-{index}.mtx", sp.csr_matrix(part))
    scipy.io.mmwrite(tmp_path / "whole.mtx", whole)
    options = ["--classes", "3", "--schedule", "em", "--max-iter", "8", "--quiet"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = _worker_environment()
    done = subprocess.run([sys.executable, "-m", "zoo", "fit", "aspect", str(tmp_path / "part-{process}.mtx"),
                           "--processes", "2", "--out", str(tmp_path / "several"), *options],
                          cwd=root, env=environment, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in process 0 of 2" in done.stdout
    assert main(["fit", "aspect", str(tmp_path / "whole.mtx"), "--out", str(tmp_path / "one"), *options]) == 0
    several, one = (np.load(tmp_path / name / "result.npz", allow_pickle=True) for name in ("several", "one"))
    assert several["history/log_lik"].shape == (8,)
    np.testing.assert_allclose(several["history/log_lik"], one["history/log_lik"], rtol=1e-5)
    np.testing.assert_allclose(several["params/col_given_class"], one["params/col_given_class"], atol=1e-5)


def test_command_line_fit_over_two_processes_reading_their_own_csv_edge_lists(tmp_path):
    """CSV parts carry only their own names: the processes exchange names (not cells) and index their
    cells into the sorted union, so the fit equals the one-process fit of all the lines."""
    from zoo.cli import main

    train, _, _ = problem()
    rows, cols, counts = train.rows, train.cols, train.counts.astype(int)
    lines = np.repeat(np.arange(rows.size), counts)
    halves = np.linspace(0, train.n_rows, 3).astype(int)
    for index in range(2):
        mine = lines[(rows[lines] >= halves[index]) & (rows[lines] < halves[index + 1])]
        text = "source,target\n" + "".join(f"doc{rows[i]},word{cols[i]}\n" for i in mine)
        (tmp_path / f"part-{index}.csv").write_text(text)
    (tmp_path / "whole.csv").write_text("source,target\n" + "".join(f"doc{rows[i]},word{cols[i]}\n" for i in lines))
    options = ["--classes", "3", "--schedule", "em", "--max-iter", "8", "--quiet"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = _worker_environment()
    done = subprocess.run([sys.executable, "-m", "zoo", "fit", "aspect", str(tmp_path / "part-{process}.csv"),
                           "--processes", "2", "--out", str(tmp_path / "several"), *options],
                          cwd=root, env=environment, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert main(["fit", "aspect", str(tmp_path / "whole.csv"), "--out", str(tmp_path / "one"), *options]) == 0
    several, one = (np.load(tmp_path / name / "result.npz", allow_pickle=True) for name in ("several", "one"))
    assert several["params/col_given_class"].shape == one["params/col_given_class"].shape
    np.testing.assert_allclose(several["history/log_lik"], one["history/log_lik"], rtol=1e-5)
    np.testing.assert_allclose(several["params/col_given_class"], one["params/col_given_class"], atol=1e-5)


OTHER_MODELS_WORKER = textwrap.dedent(
    """
    import os, sys
    process_id, n_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n_processes,
                               process_id=process_id)
    import numpy as np
    sys.path.insert(0, os.getcwd())
    from tests.test_processes import OTHER_MODELS, own_rows, problem
    from inference.em import tempered_em

    train, valid, options = problem()
    for name, model in OTHER_MODELS.items():
        # Their random starts read the data: the same start (drawn here from the whole data) on every side.
        start = model.init_params(jax.random.key(5), model.prepare(train))
        own_train, own_valid = (own_rows(part, process_id, n_processes) for part in (train, valid))
        fit = tempered_em(model, own_train, valid=own_valid, key=jax.random.key(3), devices=jax.devices(),
                          process_local=True, init=start, **dict(options, n_restarts=1))
        np.savez(os.path.join(out, f"{name}-{process_id}.npz"), n_iter=fit.n_iter, log_lik=fit.history["log_lik"],
                 *jax.tree_util.tree_leaves(fit.params))
    """
)


def _other_models():
    from zoo.dyadic.cluster_abstraction import ClusterAbstraction
    from zoo.dyadic.one_sided import OneSided
    from zoo.dyadic.two_sided import TwoSided

    return {"scm": TwoSided(3, 4), "acm-rows": OneSided(3), "cam": ClusterAbstraction(depth=2)}


OTHER_MODELS = _other_models()


@pytest.mark.slow
def test_two_processes_fit_the_other_dyadic_models_as_one_process(tmp_path, x64):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = _worker_environment()
    environment["JAX_PLATFORMS"] = "cpu"
    port = str(_free_port())
    workers = [subprocess.Popen([sys.executable, "-c", OTHER_MODELS_WORKER, str(index), "2", port, str(tmp_path)],
                                cwd=root, env=environment, stderr=subprocess.PIPE, text=True) for index in range(2)]
    errors = [worker.communicate(timeout=400)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], errors[0][-3000:] + errors[1][-3000:]
    train, valid, options = problem()
    for name, model in OTHER_MODELS.items():
        start = model.init_params(jax.random.key(5), model.prepare(train))
        whole = tempered_em(model, train, valid=valid, key=jax.random.key(3), init=start, **dict(options, n_restarts=1))
        for index in range(2):
            fit = np.load(tmp_path / f"{name}-{index}.npz")
            assert int(fit["n_iter"]) == whole.n_iter > 1, name
            np.testing.assert_allclose(fit["log_lik"], whole.history["log_lik"], rtol=1e-10, err_msg=name)
            for position, value in enumerate(jax.tree_util.tree_leaves(whole.params)):
                np.testing.assert_allclose(fit[f"arr_{position}"], np.asarray(value), atol=1e-9, err_msg=name)


CHAINS_WORKER = textwrap.dedent(
    """
    import os, sys
    process_id, n_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n_processes,
                               process_id=process_id)
    import numpy as np
    sys.path.insert(0, os.getcwd())
    from tests.test_processes import chains_problem, save_chains
    from inference.chains import sample_chains

    step, states, observations, options = chains_problem()
    # Every process passes all the initial states and keeps its chains ...
    run = sample_chains(jax.random.key(5), step, states, observations, devices=jax.devices(), **options)
    save_chains(os.path.join(out, f"all-{process_id}.npz"), run)
    # ... or only the chains of its own devices.
    n_own = len(jax.tree_util.tree_leaves(states)[0]) // n_processes
    own = jax.tree_util.tree_map(lambda leaf: leaf[process_id * n_own:(process_id + 1) * n_own], states)
    run = sample_chains(jax.random.key(5), step, own, observations, devices=jax.devices(), process_local=True,
                        **options)
    save_chains(os.path.join(out, f"own-{process_id}.npz"), run)
    # Process 0 alone runs out of time after the first call: every process stops there.
    budget = dict(time_budget=1e-9) if process_id == 0 else {}
    run = sample_chains(jax.random.key(5), step, states, observations, devices=jax.devices(), **options, **budget)
    save_chains(os.path.join(out, f"budget-{process_id}.npz"), run)
    """
)


REFERENCE_WORKER = textwrap.dedent(
    """
    import os, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, os.getcwd())
    from tests.test_processes import save_reference_chains

    save_reference_chains(sys.argv[1])
    """
)


def chains_problem():
    """8 collapsed-Gibbs chains of a DP mixture of 6 points, capacity 3 (outgrown), and the run's options."""
    from inference import neal
    from inference.chains import stack_states
    from zoo.dirichlet.families import normal_gamma

    family = normal_gamma(1, kappa=0.2)
    observations = np.array([[-6.0], [-6.3], [0.1], [-0.2], [6.2], [5.9]])
    step = neal.build_kernel(family, "collapsed")
    states = stack_states([neal.init(jax.random.key(chain), observations, family, algorithm="collapsed",
                                     max_clusters=3, alpha=1.0) for chain in range(8)])
    return step, states, observations, dict(n_warmup=4, n_draws=8, draws_per_call=4, progress=False)


def save_reference_chains(path) -> None:
    """The one-process run of :func:`chains_problem` that every process must match, saved to ``path``."""
    from inference.chains import sample_chains

    step, states, observations, options = chains_problem()
    save_chains(path, sample_chains(jax.random.key(5), step, states, observations, **options))


def save_chains(path: str, run) -> None:
    """A chain run's draws, final states and counters, as one ``.npz`` file."""
    leaves = {f"final_{position}": np.asarray(leaf)
              for position, leaf in enumerate(jax.tree_util.tree_leaves(run.final_state))}
    np.savez(path, next_sweep=run.next_sweep, completed=run.completed,
             max_clusters=int(run.final_state.max_clusters), **leaves,
             **{f"samples_{name}": value for name, value in run.samples.items()})


def _sample_over_processes(n_processes: int, tmp_path, timeout: float) -> None:
    environment = _worker_environment()
    environment["JAX_PLATFORMS"] = "cpu"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    port = str(_free_port())
    workers = [subprocess.Popen([sys.executable, "-c", CHAINS_WORKER, str(index), str(n_processes), port,
                                 str(tmp_path)], cwd=root, env=environment, stderr=subprocess.PIPE, text=True)
               for index in range(n_processes)]
    try:
        errors = [worker.communicate(timeout=timeout)[1] for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [worker.returncode for worker in workers] == [0] * n_processes, "\n".join(error[-2000:] for error in errors)

    if jax.default_backend() == "cpu":
        save_reference_chains(tmp_path / "one.npz")
    else:
        # The workers run on the CPU (gloo collectives), whose kernels (numba) are not this backend's:
        # the one-process run they must match bit for bit is made on the CPU too.
        reference = subprocess.run([sys.executable, "-c", REFERENCE_WORKER, str(tmp_path / "one.npz")], cwd=root,
                                   env=environment, capture_output=True, text=True, timeout=timeout)
        assert reference.returncode == 0, reference.stderr[-2000:]
    expected = np.load(tmp_path / "one.npz")
    assert int(expected["max_clusters"]) > 3  # the capacity grew, across the processes too
    for name in ("all", "own"):
        for index in range(n_processes):
            got = np.load(tmp_path / f"{name}-{index}.npz")
            assert sorted(got.files) == sorted(expected.files), (name, index)
            for key in expected.files:  # the same draws, bit for bit, on every process
                np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{name}-{index}: {key}")
    for index in range(n_processes):
        stopped = np.load(tmp_path / f"budget-{index}.npz")
        assert not stopped["completed"] and int(stopped["next_sweep"]) == 4  # the warm-up call only


def test_two_processes_sample_the_chains_of_one_process(tmp_path, x64):
    _sample_over_processes(2, tmp_path, timeout=200)


@pytest.mark.slow
def test_four_processes_sample_the_chains_of_one_process(tmp_path, x64):
    _sample_over_processes(4, tmp_path, timeout=400)


def test_process_local_chains_in_one_process_are_the_plain_chains_and_need_devices():
    from inference.chains import sample_chains

    step, states, observations, options = chains_problem()
    plain = sample_chains(jax.random.key(5), step, states, observations, **options)
    local = sample_chains(jax.random.key(5), step, states, observations, devices=1, process_local=True, **options)
    for name, values in plain.samples.items():
        np.testing.assert_array_equal(local.samples[name], values, err_msg=name)
    with pytest.raises(ValueError, match="^process_local: needs devices"):
        sample_chains(jax.random.key(5), step, states, observations, process_local=True, **options)
    with pytest.raises(TypeError, match="^process_local"):
        sample_chains(jax.random.key(5), step, states, observations, devices=1, process_local=1, **options)


GENERIC_WORKER = textwrap.dedent(
    """
    import os, sys
    process_id, n_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n_processes,
                               process_id=process_id)
    import numpy as np
    sys.path.insert(0, os.getcwd())
    from tests.test_processes import generic_problems
    from inference.em import tempered_em

    for name, (model, train, valid, own, options) in generic_problems().items():
        if name == "lrm":  # its random start reads the data: the same start (from the whole data) everywhere
            options = dict(options, init=model.init_params(jax.random.key(5), model.prepare(train)))
        fit = tempered_em(model, own(train, process_id, n_processes), valid=own(valid, process_id, n_processes),
                          key=jax.random.key(3), devices=jax.devices(), process_local=True, **options)
        np.savez(os.path.join(out, f"{name}-{process_id}.npz"), n_iter=fit.n_iter, log_lik=fit.history["log_lik"],
                 valid=fit.history["valid_perplexity"], *jax.tree_util.tree_leaves(fit.params))
    """
)


def _repeated_mixture(points, n_classes):
    """Two-class Gaussian mixture of points observed ``points.shape[1]`` times each (nested plate)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    weights = numpyro.param("weights", jnp.ones(n_classes) / n_classes, constraint=dist.constraints.simplex)
    locs = numpyro.param("locs", jnp.linspace(-1.0, 1.0, n_classes))
    with numpyro.plate("points", points.shape[0], dim=-2):
        c = numpyro.sample("c", dist.Categorical(weights), infer={"enumerate": "parallel"})
        with numpyro.plate("repeats", points.shape[1], dim=-1):
            numpyro.sample("x", dist.Normal(locs[c], 1.0), obs=points)


def _own_points(points: np.ndarray, process_id: int, n_processes: int) -> np.ndarray:
    bounds = np.linspace(0, len(points), n_processes + 1).astype(int)
    return points[bounds[process_id]:bounds[process_id + 1]]


def _own_people(data, process_id: int, n_processes: int):
    """The observed cells of process ``process_id`` 's range of people (first domain), domains whole."""
    relation = data.relations[0]
    bounds = np.linspace(0, relation.shape[0], n_processes + 1).astype(int)
    people = relation.entries[:, 0]
    return data.replace_relation(relation.select((people >= bounds[process_id]) & (people < bounds[process_id + 1])))


def generic_problems() -> dict:
    """Generic EM on a NumPyro program (43 points, 3 repeats) and the LRM's batch passes (30 × 20,
    20% missing, a fifth of the observed cells held out): model, training and validation data, the
    function that takes a process's part, and the fit's options."""
    from inference.enumerated import EnumeratedEM
    from inference.schedules import FixedBeta
    from zoo.relational.data import RelationalData
    from zoo.relational.latent_class import LatentClassRelational

    rng = np.random.default_rng(0)
    centres = np.where(rng.random(43) < 0.5, -1.5, 1.5)
    points = centres[:, None] + rng.normal(size=(43, 3))
    generic = EnumeratedEM(_repeated_mixture, static_kwargs=(("n_classes", 2),), max_plate_nesting=2,
                           m_step_iters=10, data_plate="points")
    matrix = (rng.random((30, 20)) < 0.3).astype(float)
    matrix[rng.random((30, 20)) < 0.2] = np.nan
    relational = RelationalData.from_adjacency(matrix, domains=("people", "items"))
    held_out = rng.random(relational.relations[0].n_observed) < 0.2
    train, valid = (relational.replace_relation(relational.relations[0].select(keep))
                    for keep in (~held_out, held_out))
    lrm = LatentClassRelational(2).bind(relational, update="batch")
    options = dict(schedule=FixedBeta(0.9), max_iter=6, tol=0.0)
    return {"generic": (generic, points[:37], points[37:], _own_points, dict(options, max_iter=4)),
            "lrm": (lrm, train, valid, _own_people, options)}


def test_two_processes_fit_generic_em_and_the_lrm_as_one_process(tmp_path, x64):
    """EnumeratedEM and the LRM (batch passes) fitted by 2 processes from their own observations
    equal the one-process fit (rtol 1e-10 on the history, 1e-9 on the parameters); the LRM from a
    start given to every process, since its random start reads the data (process 0's part)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = _worker_environment()
    environment["JAX_PLATFORMS"] = "cpu"
    port = str(_free_port())
    workers = [subprocess.Popen([sys.executable, "-c", GENERIC_WORKER, str(index), "2", port, str(tmp_path)],
                                cwd=root, env=environment, stderr=subprocess.PIPE, text=True) for index in range(2)]
    try:
        errors = [worker.communicate(timeout=300)[1] for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [worker.returncode for worker in workers] == [0, 0], errors[0][-3000:] + errors[1][-3000:]
    for name, (model, train, valid, _, options) in generic_problems().items():
        if name == "lrm":
            options = dict(options, init=model.init_params(jax.random.key(5), model.prepare(train)))
        whole = tempered_em(model, train, valid=valid, key=jax.random.key(3), **options)
        for index in range(2):
            fit = np.load(tmp_path / f"{name}-{index}.npz")
            assert int(fit["n_iter"]) == whole.n_iter > 1, name
            np.testing.assert_allclose(fit["log_lik"], whole.history["log_lik"], rtol=1e-10, err_msg=name)
            np.testing.assert_allclose(fit["valid"], whole.history["valid_perplexity"], rtol=1e-10, err_msg=name)
            for position, value in enumerate(jax.tree_util.tree_leaves(whole.params)):
                np.testing.assert_allclose(fit[f"arr_{position}"], np.asarray(value), atol=1e-9, err_msg=name)
