"""Shared fixtures: float64 on demand, and small CPU-friendly settings.

``LATENTZOO_X64=1 python -m pytest`` runs the whole suite with float64 as JAX's default.

XLA compiles the suite's programs with LLVM's optimisation level 0 (``TEST_XLA_FLAG``) unless
``LATENTZOO_TEST_XLA_OPT=default`` or ``XLA_FLAGS`` already sets ``--xla_backend_optimization_level``.
Compiling is most of the suite's time: a sub-cluster fit of 45 points in 2-D spent 16 s of its
21 s compiling, and 8 s at level 0. The full suite went from 1,722 s to 1,117 s on 2 cores
(2026-11-28). The programs compute the same values, but not always the same bits (the last bit
of a float64 log joint can differ between levels), so the suite compares runs made at one level
and its subprocesses inherit it. Turning XLA's newer CPU fusion emitters off as well
(``--xla_cpu_use_fusion_emitters=false``) was measured and not kept (2026-12-03, 2 cores, the
numba kernels already cached): the 69 tests among the 80 slowest of both runs took 1,313 s
instead of 1,613 (less compiling), but all the tests 1,153 s instead of 1,110 (programs
that run long ran slower: the sub-cluster exactness tests 22 s instead of 13, 40 instead of 31),
and a test of the same bits across call sizes failed (held-out predictions, tests/test_robustness.py).
JAX's persistent compilation cache, shared by the workers, notebook kernels and subprocesses of one
run (``JAX_COMPILATION_CACHE_DIR`` set to an empty directory, programs compiled in 0.2 s or more
kept), was measured and not kept either (2026-12-03, 2 cores, numba kernels cached): 1,616 s
against 1,588 s without it. Some tests gained (the digits DP notebook 31 → 21 s), as many lost to
writing the cache (the supervised digits notebook 87 → 103 s), and the programs the suite compiles
twice are few.

Under pytest-xdist the controller compiles every numba kernel once, before the workers start
(``pytest_configure`` below), instead of each worker compiling the ones it needs at the same
time: on a fresh checkout the full suite went from 1,351 s to 1,105 s on 2 cores (2026-11-28),
the precompiling's 5 minutes included. The workers take tests as pytest-xdist's default
``--dist load`` hands them out: ``--dist loadfile`` (a module's tests on one worker) took 1,668 s
and ``--dist worksteal`` 1,716 s, against 1,110 s with ``load`` (2026-12-03, the numba kernels
already cached). Three workers on the 2 cores (``-n 3``) were no faster: 1,566 s, against 1,414-1,634 s
in five runs with ``-n 2`` the same day (2026-12-06, an Intel Xeon, a fresh checkout each
time, so the 200 s of precompiling included). Nor does a lower numba optimisation level shorten the
precompiling much: the 12 float32 kernels took 95 s with ``NUMBA_OPT=0`` and 108-109 s at levels 1
and 2 (2 processes; the slowest kernels, the IRM's and the supervised DP's moves and sweeps, 21-32 s
each at every level), so the time goes to numba's typing, not to LLVM.
"""

import os

TEST_XLA_FLAG = "--xla_backend_optimization_level=0"
if (os.environ.get("LATENTZOO_TEST_XLA_OPT", "") != "default"
        and "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", "")):
    # Read by XLA when JAX first starts a backend, which nothing has done yet (this runs before any test module).
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAG}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402

if os.environ.get("LATENTZOO_X64", "") not in ("", "0"):
    jax.config.update("jax_enable_x64", True)


@pytest.fixture
def x64():
    """Run one test with float64 enabled, restoring the previous setting afterwards."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


# ---------------------------------------------------------------------------- numba off the CPU
# The numba kernels are CPU custom calls; on a GPU or TPU backend every model refuses
# backend="numba" (tested by the refusal tests, which run everywhere). Tests that exercise the
# kernels themselves, marked ``numba`` or parametrized with backend="numba", skip there.
def _uses_numba(item) -> bool:
    if item.get_closest_marker("numba") is not None:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(isinstance(value, str) and value == "numba" for value in params.values()) or any(
        isinstance(value, tuple) and "numba" in value for value in params.values())


def pytest_collection_modifyitems(config, items):
    from inference.native import numba_available

    backend = jax.default_backend()
    if backend == "cpu" and numba_available():
        return
    # LATENTZOO_DISABLE_NUMBA=1 on a CPU runs what a GPU runs: every default backend resolves to XLA.
    why = f"JAX runs on {backend!r}" if backend != "cpu" else "numba is off (LATENTZOO_DISABLE_NUMBA) or missing"
    skip = pytest.mark.skip(reason=f"exercises the CPU-only numba kernels; {why}")
    for item in items:
        if _uses_numba(item):
            item.add_marker(skip)


# ------------------------------------------------------------------- numba kernels, compiled once
# Under pytest-xdist every worker needs the same numba kernels, and on a fresh checkout (CI) each
# worker compiled each kernel itself, at the same time as the others. Before the workers start,
# the controller compiles every kernel once into numba's disk cache, one kernel per worker process
# at a time (inference.native.precompile); the workers then load them. LATENTZOO_TEST_PRECOMPILE=0
# turns it off.
def _xdist_workers(config) -> int:
    requested = getattr(config.option, "numprocesses", None)
    if requested in ("auto", "logical"):
        return os.cpu_count() or 1
    return requested if isinstance(requested, int) else 0


def pytest_configure(config):
    if (hasattr(config, "workerinput") or _xdist_workers(config) < 2 or config.option.collectonly
            or os.environ.get("LATENTZOO_TEST_PRECOMPILE", "") == "0"):
        return
    import time

    from inference.native import numba_available

    if jax.default_backend() != "cpu" or not numba_available():
        return
    from inference.native.precompile import precompile

    start = time.perf_counter()
    try:
        seconds = precompile(workers=min(_xdist_workers(config), os.cpu_count() or 1))
    except Exception as error:  # the tests that need a kernel then compile it and fail with its error
        config._latentzoo_precompiled = f"numba kernels: precompiling failed ({type(error).__name__}: {error})"
    else:
        config._latentzoo_precompiled = (f"numba kernels: {len(seconds)} compiled or loaded from numba's cache "
                                         f"in {time.perf_counter() - start:.0f} s before the workers started")


def pytest_sessionstart(session):
    line = getattr(session.config, "_latentzoo_precompiled", None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None:
        reporter.write_line(line)  # shown under -q too, unlike a report header


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    Every compiled XLA:CPU program keeps its machine code in memory mappings until JAX's caches
    let go of it. One xdist worker runs hundreds of modules (the classified misuse fuzz alone
    compiles enough programs to add about 7,500 mappings), and a process that reaches the kernel's
    limit (vm.max_map_count, 65,530 by default) can no longer map the code of a new program. Workers
    died inside XLA's compiler (segfault or abort) in two full runs after that fuzz was added, and
    this is the likely cause (not proven). Modules rarely share programs, so clearing between
    them costs little.
    """
    yield
    jax.clear_caches()
