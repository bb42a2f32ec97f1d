"""Pages written at build time from the code: the model zoo, the API reference, the notebooks.

Called by ``conf.py`` before Sphinx reads the sources. Every generated folder is removed and
written again, so a model taken out of the registry or a module renamed leaves no stale page;
the folders are ignored by git (``.gitignore``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import shutil
from pathlib import Path

PACKAGES = ("zoo", "inference")


def _fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def _table(rows: list[tuple[str, str]]) -> str:
    """An rst list-table (cells may hold inline markup)."""
    lines = [".. list-table::", "   :widths: 20 80", ""]
    for label, value in rows:
        lines.append(f"   * - {label}")
        lines.append(f"     - {value}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The model zoo, from zoo.registry
# ---------------------------------------------------------------------------------------------

def write_model_pages(docs: Path) -> list[str]:
    """One page per registered model: its card, its class and program, the module's equations."""
    from zoo.registry import MODEL_NAMES, describe

    folder = _fresh(docs / "models")
    names = []
    for name in MODEL_NAMES:
        card = describe(name)
        module = card.class_path.rpartition(".")[0]
        settings = dict(card.fixed) | dict(card.settings)
        rows = [
            ("class", f":class:`{card.class_path}`"),
            ("program", f":func:`{card.program_path}`" if card.program_path else "-"),
            ("paper", card.paper),
            ("equations", card.equations),
            ("latent structure", card.latent_structure),
            ("engines", "; ".join(card.engines)),
            ("data", card.data),
            ("default settings",
             ", ".join(f"``{key}={value!r}``" for key, value in settings.items()) or "-"),
            ("aliases", ", ".join(f"``{alias}``" for alias in card.aliases) or "-"),
            ("``python -m zoo fit``", "yes" if card.cli_fit else "no"),
        ]
        title = f"{name}: {card.summary}"
        page = [
            title,
            "=" * len(title),
            "",
            f"Generated from ``zoo.registry.describe({name!r})``; build it with "
            f"``zoo.get_model({name!r}, ...)``.",
            "",
            "Card",
            "----",
            "",
            _table(rows),
            "",
            f"Model and equations (:mod:`{module}`)",
            "-" * (len(module) + 30),
            "",
            f".. automodule:: {module}",
            "   :no-index:",
            "",
        ]
        (folder / f"{name}.rst").write_text("\n".join(page), encoding="utf-8")
        names.append(name)

    overview = [
        "The model zoo",
        "=============",
        "",
        "Every model registered in :mod:`zoo.registry`, in the order of :func:`zoo.list_models`. "
        "Each page shows the model's card (:class:`zoo.registry.ModelCard`) and its module's "
        "docstring, which states the model's equations with the paper's equation numbers. "
        "``python -m zoo list`` and ``python -m zoo describe NAME`` print the same cards.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 20 50 30",
        "",
        "   * - model",
        "     - summary",
        "     - equations",
    ]
    for name in names:
        card = describe(name)
        overview += [f"   * - :doc:`{name}`", f"     - {card.summary}", f"     - {card.equations}"]
    overview += ["", ".. toctree::", "   :hidden:", ""] + [f"   {name}" for name in names] + [""]
    (folder / "index.rst").write_text("\n".join(overview), encoding="utf-8")
    return names


# ---------------------------------------------------------------------------------------------
# The API reference: one page per public module, one per public object
# ---------------------------------------------------------------------------------------------

def _public_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


def _defines(module, name: str) -> bool:
    """Whether ``module`` itself defines ``name`` (not only imports it)."""
    obj = getattr(module, name)
    home = getattr(obj, "__module__", None)
    if (inspect.isclass(obj) or callable(obj)) and isinstance(home, str):
        return home == module.__name__
    source = inspect.getsource(module)
    return re.search(rf"^{re.escape(name)}\s*(:[^=\n]*)?=", source, re.MULTILINE) is not None


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def write_api_pages(docs: Path) -> None:
    """``api/<module>.rst`` for every public module, ``api/<module>.<name>.rst`` per object.

    An object gets its own page under the module that defines it; a package that re-exports it
    links to that page. Objects of private modules (``inference.neal._kernel``) that a public
    module re-exports, and data no public module defines (``inference.neal.ALGORITHMS``, defined
    in ``inference.neal._state``), are documented under the most specific public module that
    lists them (``zoo.dyadic.cluster_abstraction.anneal_tree`` rather than ``zoo.dyadic.anneal_tree``),
    the first of those if several are equally specific.
    """
    folder = _fresh(docs / "api")
    modules = _public_modules()
    home: dict[int, str] = {}
    for modname in modules:
        module = importlib.import_module(modname)
        for name in getattr(module, "__all__", ()):
            if _defines(module, name):
                home.setdefault(id(getattr(module, name)), f"{modname}.{name}")
    listed: dict[int, list[str]] = {}
    for modname in modules:
        module = importlib.import_module(modname)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            owner = getattr(obj, "__module__", "") or ""
            private = owner.split(".")[0] in PACKAGES and any(part.startswith("_") for part in owner.split("."))
            if id(obj) not in home and (private or _kind(obj) == "data"):
                listed.setdefault(id(obj), []).append(f"{modname}.{name}")
    for key, names in listed.items():  # the most specific module, where the object was before its file was split
        home[key] = max(names, key=lambda full: full.count("."))

    for modname in modules:
        module = importlib.import_module(modname)
        own, linked = [], []
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            target = home.get(id(obj))
            if target == f"{modname}.{name}":
                own.append((name, obj))
            elif target is not None:
                linked.append((name, target, obj))
        title = f"``{modname}``"
        page = [title, "=" * len(title), "", f".. automodule:: {modname}", ""]
        if own:
            page += ["Contents", "--------", "", ".. autosummary::", ""]
            page += [f"   {name}" for name, _ in own]
            page += ["", ".. toctree::", "   :hidden:", ""]
            page += [f"   {modname}.{name}" for name, _ in own]
            page += [""]
        if linked:
            page += ["Re-exported here", "----------------", ""]
            page += [f"* :py:obj:`{name} <{target}>` (``{target}``)" for name, target, _ in linked]
            page += [""]
        submodules = [other for other in modules if other.rpartition(".")[0] == modname]
        if submodules:
            page += ["Modules", "-------", "", ".. autosummary::", ""]
            page += [f"   {other[len(modname) + 1:]}" for other in submodules]
            page += ["", ".. toctree::", "   :hidden:", ""] + [f"   {other}" for other in submodules] + [""]
        (folder / f"{modname}.rst").write_text("\n".join(page), encoding="utf-8")

        for name, obj in own:
            full = f"{modname}.{name}"
            kind = _kind(obj)
            directive = {"class": "autoclass", "exception": "autoexception",
                         "function": "autofunction", "data": "autodata"}[kind]
            lines = [full, "=" * len(full), "", f".. currentmodule:: {modname}", "",
                     f".. {directive}:: {name}"]
            if kind in ("class", "exception"):
                lines += ["   :members:"]
            (folder / f"{full}.rst").write_text("\n".join(lines) + "\n", encoding="utf-8")

    index = ["API reference", "=============", "",
             "Generated from the docstrings of every public module of the two packages: "
             ":mod:`zoo` (what is modelled and measured) and :mod:`inference` (how models are "
             "fitted). A package page lists the objects it re-exports with links to where they are "
             "documented.", "",
             ".. toctree::", "   :maxdepth: 1", "", "   zoo", "   inference", ""]
    (folder / "index.rst").write_text("\n".join(index), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# The notebooks, copied with their stored outputs (never executed here)
# ---------------------------------------------------------------------------------------------

def copy_notebooks(docs: Path) -> list[str]:
    """Copy ``notebooks/*.ipynb`` next to the sources (Sphinx reads only its source folder)."""
    folder = _fresh(docs / "notebooks")
    names = []
    for notebook in sorted((docs.parent / "notebooks").glob("*.ipynb")):
        shutil.copy2(notebook, folder / notebook.name)
        names.append(notebook.stem)
    return names


def write_all(docs: Path) -> None:
    write_model_pages(docs)
    write_api_pages(docs)
    copy_notebooks(docs)
