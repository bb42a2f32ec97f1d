"""The documentation site builds with warnings as errors (docs/, ``pip install -e ".[docs]"``).

One build of the whole site into a temporary folder: every docstring of every public module
through autodoc and napoleon, the model pages generated from the registry, the notebooks from
their stored outputs (never executed). Skipped where the ``docs`` extras are not installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.registry import MODEL_NAMES

DOCS = Path(__file__).resolve().parents[1] / "docs"
MISSING = [name for name in ("sphinx", "pydata_sphinx_theme", "myst_nb")
           if importlib.util.find_spec(name) is None]

pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"docs extras not installed ({', '.join(MISSING)}): pip install -e '.[docs]'"
)


def test_docs_build_without_warnings(tmp_path):
    html = tmp_path / "html"
    completed = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(html)],
        capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-5000:]
    pages = ["index.html", "getting_started.html", "engines/neal.html", "long_runs.html", "new_variant.html",
             "report.html", "benchmarks.html", "api/inference.em.tempered_em.html", "notebooks/new_model_variant.html"]
    pages += [f"models/{name}.html" for name in MODEL_NAMES]
    missing = [page for page in pages if not (html / page).is_file()]
    assert not missing, missing
