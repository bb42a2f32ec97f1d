"""The examples in the docstrings of ``zoo`` and ``inference`` run and print what they show.

Found by reading the sources (no module is imported to collect them), one test per module, run by
:mod:`doctest` with its default options. No example may raise a ``MixingWarning`` or a
``TiedValuesWarning``: a user who copies it sees its warnings.
"""

import doctest
import importlib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _modules_with_examples() -> list[str]:
    names = []
    for package in ("inference", "zoo"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_examples_are_found():
    assert len(MODULES) >= 20 and "zoo.registry" in MODULES and "zoo.sklearn._supervised" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    tests = [test for test in doctest.DocTestFinder().find(module, name) if test.examples]
    assert tests, f"{name}: no examples found"
    runner = doctest.DocTestRunner()
    report: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for test in tests:
            runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    # An example copied into a notebook shows its warnings: none may say that its chains do not mix
    # or that its data are tied, which would teach the pattern the warnings are there to stop.
    ours = [f"{warning.category.__name__}: {warning.message}" for warning in caught
            if warning.category.__name__ in ("MixingWarning", "TiedValuesWarning")]
    assert not ours, "\n".join(ours)
