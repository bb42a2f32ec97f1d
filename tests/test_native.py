"""The native package: one backend choice, and every numba kernel module naming its XLA twin and the
test that keeps them equal (the equality tests themselves sit with each family's tests)."""

import importlib
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
    assert found - {"inference.native.backend", "inference.native.ffi"} == set(KERNEL_MODULES)


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
