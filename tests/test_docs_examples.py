"""The code of the README and of the documentation's how-to pages runs and gives what its comments say.

Every ```python block of a page is run in a temporary folder, one block after the other, statement
by statement: the README's blocks each in a fresh namespace, as a newcomer copies one of them (a block
that forgot an import it shares with the one before failed there, not here), a how-to page's in one
namespace, as a reader goes through it. A line ``print(...)  # TEXT`` must print ``TEXT``; an
expression whose comment starts with numbers, ``result.beta, result.perplexity(test)  # (0.656,
1203.9); ...``, must give those numbers when rounded to the decimals shown.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["docs/long_runs.md", "docs/new_variant.md", "README.md"]
#: Pages whose blocks each stand alone.
SELF_CONTAINED = {"README.md"}
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
EXPECTED = re.compile(r"^\s*print\(.*\)\s+# (.+)$")
#: A comment that starts with a number or a parenthesised tuple of numbers: what the expression gives.
CLAIM = re.compile(r"#\s*(\((?:\s*-?[\d,]*\.?\d+\s*,)+\s*-?[\d,]*\.?\d+\s*\)|-?[\d,]*\.?\d+)(?![\w.])")


def _claims(block: str, statement: ast.stmt) -> list[str] | None:
    """The numbers the comment of an expression statement claims, as written (None: no claim)."""
    if not isinstance(statement, ast.Expr) or (isinstance(statement.value, ast.Call)
                                               and getattr(statement.value.func, "id", "") == "print"):
        return None
    line = block.splitlines()[statement.end_lineno - 1]
    match = CLAIM.search(line[statement.end_col_offset:])
    return None if match is None else re.findall(r"-?[\d,]*\.?\d+", match.group(1))


def _as_written(value: float, written: str) -> str:
    decimals = len(written.split(".")[1]) if "." in written else 0
    return f"{value:,.{decimals}f}" if "," in written else f"{value:.{decimals}f}"


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_and_gives_what_it_says(page, tmp_path, monkeypatch):
    blocks = BLOCK.findall((ROOT / page).read_text())
    assert blocks, f"{page}: no python code"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    printed = io.StringIO()
    claims = []
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: the mixing warnings are expected
        for block in blocks:
            if page in SELF_CONTAINED:
                namespace = {"__name__": "__docs__"}
            for statement in ast.parse(block).body:
                source = ast.get_source_segment(block, statement)
                written = _claims(block, statement)
                if written is None:
                    exec(compile(ast.Module([statement], []), f"{page}:python", "exec"), namespace)
                    continue
                value = eval(compile(ast.Expression(statement.value), f"{page}:python", "eval"), namespace)
                values = value if isinstance(value, tuple) else (value,)
                assert len(values) == len(written), (source, value)
                claims.append((source, [_as_written(float(v), w) for v, w in zip(values, written)], written))
    expected = [match.group(1).strip() for block in blocks for line in block.splitlines()
                if (match := EXPECTED.match(line))]
    assert printed.getvalue().splitlines() == expected
    for source, got, written in claims:
        assert got == written, f"{page}: {source} gives {got}, its comment says {written}"
    if page == "README.md":
        assert claims, "the README's example claims no figure any more: keep this test's check or drop it"
