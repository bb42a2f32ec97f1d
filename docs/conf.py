"""Sphinx configuration of the latentzoo documentation.

Build (offline, warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The model pages, the API reference and the copies of the notebooks are generated from the
code before the sources are read (``docs/_gen.py``); notebooks are rendered from their stored
outputs and never executed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))
sys.path.insert(0, str(DOCS))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import _gen  # noqa: E402

import zoo  # noqa: E402

_gen.write_all(DOCS)

project = "latentzoo"
author = "the latentzoo authors"
copyright = "the latentzoo authors"
release = zoo.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

# The docstrings write set sizes and absolute values as |r|, |S|, |x_i - x_j| (maths notation,
# not reStructuredText substitutions): each stands for itself.
_BARS = ("r", "S", "D", "x_i - x_j", "x_if - x_jf")
rst_prolog = "\n".join(f".. |{text}| replace:: \\|{text}\\|" for text in _BARS) + "\n"

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# Notebooks are shown with the outputs stored in them; the docs build never runs them.
nb_execution_mode = "off"
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

# numpydoc-style docstrings, read by napoleon.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# Parameters and Attributes as field lists whose types are plain text, not cross-references
# (the types name shapes and words such as "shape" that several classes have as attributes).
napoleon_use_param = False
napoleon_custom_sections = [("Attributes", "params_style")]
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autosummary_generate = False

html_theme = "pydata_sphinx_theme"
html_title = "latentzoo"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
