"""The native package: one backend choice, and every numba kernel module naming its XLA twin and the
test that keeps them equal (the equality tests themselves sit with each family's tests)."""

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import jax
import pytest

import inference.native
from inference.native import KERNEL_MODULES, numba_available, resolve_backend

TESTS = Path(__file__).parent


def _resolve(dotted: str):
    """The object named by a dotted path: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(dotted)


def _section(doc: str, title: str) -> str:
    """The paragraph of ``doc`` that starts with ``title``, with the bullet list that follows it."""
    paragraphs = doc.split("\n\n")
    start = next(index for index, paragraph in enumerate(paragraphs) if paragraph.startswith(title))
    end = start + 1
    while end < len(paragraphs) and paragraphs[end].startswith("* "):
        end += 1
    return "\n\n".join(paragraphs[start:end])


def test_every_kernel_module_is_listed():
    found = {f"inference.native.{info.name}" for info in pkgutil.iter_modules(inference.native.__path__)}
    helpers = {"inference.native.backend", "inference.native.ffi", "inference.native.numba_cache",
               "inference.native.precompile"}
    assert found - helpers == set(KERNEL_MODULES)


@pytest.mark.parametrize("module_name", KERNEL_MODULES)
def test_kernel_module_names_its_xla_twin_and_equality_test(module_name):
    module = importlib.import_module(module_name)
    doc = module.__doc__
    twins = re.findall(r"``((?:inference|zoo)\.[\w.]+)``", _section(doc, "XLA twin"))
    assert twins, f"{module_name}: no XLA twin named"
    for twin in twins:
        assert callable(_resolve(twin)), twin
    tests = re.findall(r"tests/(test_\w+\.py)(?:::(\w+))?", _section(doc, "Equality test"))
    assert tests, f"{module_name}: no equality test named"
    for filename, test_name in tests:
        source = (TESTS / filename).read_text()
        assert not test_name or f"def {test_name}(" in source, f"{filename}::{test_name}"
    for name in module.__all__:
        assert hasattr(module, name), name
    # Every handler is listed by its target name, so that precompile finds it.
    handlers = {name for name in vars(module) if re.fullmatch(r"_\w+_f(32|64)", name)}
    assert handlers and handlers == {handler.__name__ for handler in module.HANDLERS.values()}, module_name
    assert all(name.startswith("latentzoo_") and name.endswith(("_float32", "_float64")) for name in module.HANDLERS)


def test_auto_is_numba_on_the_cpu_when_available(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert resolve_backend("auto") == ("numba" if numba_available() else "xla")
    assert resolve_backend("xla") == "xla"


def test_numba_off_the_cpu_and_unknown_names_are_refused(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert resolve_backend("auto") == "xla"
    assert resolve_backend("xla") == "xla"
    if numba_available():
        with pytest.raises(ValueError, match="^backend: the numba kernels are CPU custom calls, but JAX runs on 'gpu'"):
            resolve_backend("numba")
    for bad in ("gpu", "", None, 3, ["numba"]):
        with pytest.raises(ValueError, match="^backend: must be 'auto', 'xla' or 'numba'"):
            resolve_backend(bad)


def test_a_jaxlib_too_old_for_the_numba_kernels_turns_them_off_with_the_reason(monkeypatch):
    # jaxlib 0.5.0-0.8.0 crashed the interpreter when a numba kernel registered (2026-12-04): auto
    # must choose XLA there, and an explicit "numba" must say why it is refused, before anything runs.
    from inference.native import backend

    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    monkeypatch.delenv("LATENTZOO_DISABLE_NUMBA", raising=False)
    monkeypatch.setattr(backend, "_jaxlib_version", lambda: (0, 8, 0))
    backend.numba_available.cache_clear()
    try:
        assert not numba_available()
        assert resolve_backend("auto") == "xla"
        if importlib.util.find_spec("numba") is not None:
            with pytest.raises(ValueError, match=r"^backend: 'numba' requested but numba is unusable with jaxlib "
                                                 r"0\.8\.0: its kernels need jaxlib 0\.8\.1 or later"):
                resolve_backend("numba")
    finally:
        monkeypatch.undo()
        backend.numba_available.cache_clear()
    assert backend._jaxlib_version() >= backend.MIN_JAXLIB_FOR_NUMBA  # pyproject.toml's floor holds here


@pytest.mark.numba
def test_precompile_compiles_and_registers_every_handler(capsys):
    from inference.native.ffi import _registered
    from inference.native.precompile import main, precompile, targets

    names = [name for _, name in targets()]
    every = [name for module in KERNEL_MODULES for name in importlib.import_module(module).HANDLERS]
    assert sorted(names) == sorted(every) and len(set(names)) == len(names)
    float32 = {name for name in names if name.endswith("_float32")}
    assert {name for _, name in targets(("float32",))} == float32 and len(float32) == len(names) // 2
    assert main(["--real", "float32"]) == 0  # loads from numba's cache what the suite's start compiled
    printed = capsys.readouterr().out.splitlines()
    assert {line.split()[-1] for line in printed[:-1]} == float32
    assert printed[-1].startswith(f"{len(float32)} kernels in ")
    assert float32 <= set(_registered)
    # The same through a pool of spawned processes, as the suite's start and --workers use it.
    assert set(precompile("float32", workers=2)) == float32


def test_precompile_refuses_bad_arguments():
    from inference.native.precompile import precompile

    for bad in ("float16", ("float32", "int32"), ["bfloat16"]):
        with pytest.raises(ValueError, match="^real_dtypes: expected a subset of"):
            precompile(bad)
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="^workers: expected a positive integer"):
            precompile(workers=bad)


def _save_after_barrier(cache_dir, base, key, data, barrier, locked):
    """In a spawned process: save one cache entry at the same moment as another process, with numba's
    index write slowed down so that the two saves overlap (a slow disk, or a busy machine)."""
    import time

    from numba.core import caching

    from inference.native.numba_cache import lock_cache_saves

    if locked:
        lock_cache_saves()
    save_index = caching.IndexDataCacheFile._save_index

    def slow_save_index(self, overloads):
        time.sleep(0.3)
        save_index(self, overloads)

    caching.IndexDataCacheFile._save_index = slow_save_index
    barrier.wait()
    caching.IndexDataCacheFile(cache_dir, base, "stamp").save(key, data)


@pytest.mark.numba
def test_cache_saves_of_two_processes_at_once_keep_each_signature_with_its_code(tmp_path):
    # Two processes saving two signatures of one function at once: without the lock both took data
    # file number 1, and the index mapped one signature to the other's code (the TypingError of
    # 2026-11-29, see inference.native.numba_cache). With it, each signature loads its own data.
    import multiprocessing

    from numba.core import caching

    context = multiprocessing.get_context("spawn")
    for round_index in range(2):
        base = f"kernel-{round_index}"
        barrier = context.Barrier(2)
        workers = [context.Process(target=_save_after_barrier,
                                   args=(str(tmp_path), base, f"signature {i}", f"code {i}", barrier, True))
                   for i in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
            assert worker.exitcode == 0
        cache_file = caching.IndexDataCacheFile(str(tmp_path), base, "stamp")
        assert [cache_file.load(f"signature {i}") for i in range(2)] == ["code 0", "code 1"]
