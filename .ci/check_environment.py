"""Check, in seconds, that this interpreter holds every package the library needs, before a long run.

    python .ci/check_environment.py [DISTRIBUTION ...]

Every distribution of ``[project] dependencies`` in pyproject.toml, and those named on the command
line (e.g. ``pytest-xdist hypothesis`` for the suite), must be installed, in a version that
pyproject.toml's specifier admits, and its modules must import; then every module of ``zoo`` and
``inference`` must import. Prints what is missing, too old or broken and exits 1, else prints one
line (with the version of every dependency) and exits 0.

Written for machines whose image was not made from pyproject.toml (a lent GPU's, say). On
2026-12-04 one H200 image lacked arviz's own dependency platformdirs: ``import arviz`` failed inside
59 tests and 14 test files, three minutes into the suite, where this check fails in ten seconds.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import pkgutil
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _outside(specs: list[str], name: str) -> str | None:
    """A line saying that the installed ``name`` is not a version its specifier in ``specs`` admits
    (pyproject's floors were measured: jax 0.8.0 crashes the numba kernels), else None."""
    from packaging.requirements import Requirement  # installed with matplotlib, a dependency

    for spec in specs:
        requirement = Requirement(spec)
        if _normal(requirement.name) == _normal(name) and requirement.specifier:
            installed = metadata.version(name)
            if not requirement.specifier.contains(installed, prereleases=True):
                return f"{name}: {installed} installed, pyproject.toml asks for {requirement.specifier}"
    return None


def _dependencies() -> tuple[list[str], list[str]]:
    """pyproject.toml's ``[project] dependencies``: their specifiers and their distribution names."""
    import tomllib  # Python 3.11 or later

    with open(ROOT / "pyproject.toml", "rb") as file:
        specs = tomllib.load(file)["project"]["dependencies"]
    return specs, [re.match(r"[A-Za-z0-9_.-]+", spec).group(0) for spec in specs]


def problems(extra: list[str]) -> list[str]:
    """One line per distribution or module that is missing or does not import."""
    specs, required = _dependencies()
    modules: dict[str, list[str]] = {}
    for module, distributions in metadata.packages_distributions().items():
        for distribution in distributions:
            modules.setdefault(_normal(distribution), []).append(module)
    found = []
    for name in required + extra:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            found.append(f"{name}: not installed")
            continue
        outside = _outside(specs, name)
        if outside:
            found.append(outside)
            continue
        for module in sorted(m for m in modules.get(_normal(name), []) if not m.startswith("_")):
            try:
                importlib.import_module(module)
            except Exception as error:  # noqa: BLE001 - any failure to import is what this reports
                found.append(f"{name}: import {module} failed: {type(error).__name__}: {error}")
    if found:  # the library's own modules would fail for the same reasons
        return found
    sys.path.insert(0, str(ROOT))
    for package in ("inference", "zoo"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            try:
                importlib.import_module(info.name)
            except Exception as error:  # noqa: BLE001
                found.append(f"{info.name}: {type(error).__name__}: {error}")
    return found


def main(argv: list[str]) -> int:
    found = problems(argv)
    if found:
        print("This environment cannot run the library:", *found, sep="\n  ", file=sys.stderr)
        return 1
    print(f"environment: every package imports (Python {sys.version.split()[0]}, {sys.executable}): "
          + ", ".join(f"{name} {metadata.version(name)}" for name in _dependencies()[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
