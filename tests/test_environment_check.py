"""``.ci/check_environment.py``: what a GPU run checks before its suite (every package imports)."""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "check_environment.py"


def _load():
    spec = importlib.util.spec_from_file_location("check_environment", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_environment_check_passes_here_and_names_what_is_missing(monkeypatch, capsys):
    check = _load()
    assert check.main(["pytest"]) == 0
    assert check.main(["no-such-distribution"]) == 1
    assert "no-such-distribution: not installed" in capsys.readouterr().err
    # A module a dependency imports missing (a GPU image lacked arviz's platformdirs, which ArviZ
    # imports since 0.23.3; xarray, which every ArviZ imports, stands in for it here):
    for name in [name for name in sys.modules if name == "arviz" or name.startswith("arviz.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "xarray", None)
    assert any(line.startswith("arviz: import arviz failed") for line in check.problems([]))


def test_a_version_below_pyprojects_floor_is_named():
    check = _load()
    import jax

    assert check._outside(["jax>=0.1", "numpy"], "jax") is None
    assert check._outside(["jax>=99"], "jax") == f"jax: {jax.__version__} installed, pyproject.toml asks for >=99"
    assert check._outside(["numpyro>=99"], "jax") is None  # only the named distribution's specifier counts
