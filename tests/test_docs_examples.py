"""The code of the documentation's how-to pages runs and prints what its comments say.

Every ```python block of a page is run in a fresh namespace, in a temporary folder, one block
after the other; a line ``print(...)  # TEXT`` must print ``TEXT``.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = ["long_runs.md"]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
EXPECTED = re.compile(r"^\s*print\(.*\)\s+# (.+)$")


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_and_prints_what_it_says(page, tmp_path, monkeypatch):
    blocks = BLOCK.findall((DOCS / page).read_text())
    assert blocks, f"{page}: no python code"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: the mixing warnings are expected
        for block in blocks:
            exec(compile(block, f"{page}:python", "exec"), namespace)
    expected = [match.group(1).strip() for block in blocks for line in block.splitlines()
                if (match := EXPECTED.match(line))]
    assert printed.getvalue().splitlines() == expected
