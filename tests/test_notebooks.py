"""Every notebook in notebooks/ runs top to bottom (small sizes under CI=true), so none can rot, and
its committed outputs are one whole full-size run that a reader can trust without running it."""

import ast
import os
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors


# ---------------------------------------------------------------------------------------------
# The committed notebooks: read without running anything, so their stored outputs must be whole.
# ---------------------------------------------------------------------------------------------
#: Calls whose value is the point of the call: a pandas table or a string that is shown only as a
#: cell's last expression (elsewhere in a cell its value is thrown away unless displayed).
PURE_METHODS = {"round", "head", "tail", "describe", "sort_values", "to_string", "to_frame", "style",
                "summary", "unstack", "pivot", "pivot_table", "set_index", "reset_index", "format"}
#: Top-level calls that draw a figure (inline figures are stored as image/png outputs).
FIGURE_CALLS = {"subplots", "figure", "imshow"}


def _code_cells(path):
    nbformat = pytest.importorskip("nbformat")
    return [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


def _statements(source):
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines)).body


def _called_name(call):
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_no_cell_throws_away_a_value_it_computes(path):
    # A bare expression before a cell's last statement is computed and dropped: a table meant to be
    # read (`table.round(3)`) never reaches the stored outputs. Wrap it in display().
    dropped = []
    for number, cell in enumerate(_code_cells(path)):
        for statement in _statements(cell.source)[:-1]:
            if not isinstance(statement, ast.Expr):
                continue
            value = statement.value
            if not isinstance(value, ast.Call) or _called_name(value) in PURE_METHODS:
                dropped.append(f"code cell {number}: {ast.unparse(statement)}")
    assert not dropped, f"{path.name}: values computed and thrown away: {dropped}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_stored_outputs_are_one_whole_full_size_run(path):
    # Users read the committed outputs without running anything: they must come from one run, top
    # to bottom, at full size (not CI's small one), without errors, with every figure drawn.
    cells = _code_cells(path)
    counts = [cell.execution_count for cell in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: cells not run once, in order: {counts}"
    outputs = [output for cell in cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.get("output_type") == "error"], f"{path.name}: stored errors"
    assert not any("CI mode" in output.get("text", "") for output in outputs), f"{path.name}: outputs of a CI-size run"
    for number, cell in enumerate(cells):
        draws = any(isinstance(node, ast.Call) and _called_name(node) in FIGURE_CALLS | {"plot_trace"}
                    for statement in _statements(cell.source) if not isinstance(statement, (ast.FunctionDef, ast.ClassDef))
                    for node in ast.walk(statement))
        if draws:
            images = [output for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
            assert images, f"{path.name}: code cell {number} draws a figure but stores none (run with an inline backend)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_the_stored_outputs_line_names_the_run_that_is_stored(path):
    # The first cell says which run the reader sees ("*Stored outputs: full-size run on DATE (...),
    # N s ...*"); the outputs print the run's date and, in their last cell, its seconds. A re-run
    # without updating the line left one notebook naming a run two days and 286 s away from its outputs.
    nbformat = pytest.importorskip("nbformat")
    cells = nbformat.read(path, as_version=4).cells
    prose = "\n".join(cell.source for cell in cells if cell.cell_type == "markdown")
    printed = "\n".join(output.get("text", "") for cell in cells if cell.cell_type == "code"
                        for output in cell.get("outputs", []))
    line = re.search(r"\*Stored outputs: full-size run on (\d{4}-\d\d-\d\d) [^*]*?, (\d[\d,]*) s", prose)
    assert line, f"{path.name}: no '*Stored outputs: full-size run on DATE (...), N s' line"
    assert re.findall(r"(?:run on|Run:) (\d{4}-\d\d-\d\d)", printed) == [line.group(1)], f"{path.name}: another date"
    seconds = re.findall(r"(?:notebook run time: |, )(\d+) s(?: since the first cell)?\n", printed)
    said = line.group(2).replace(",", "")  # "2,156 s" in the prose is 2156 printed
    assert seconds and seconds[-1] == said, f"{path.name}: says {line.group(2)} s, printed {seconds[-1:]}"


def test_the_readme_names_every_notebook():
    """A newcomer finds the notebooks through the README's list: every one of them is named there."""
    readme = (NOTEBOOKS[0].parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Notebooks\n", 1)[1].split("\n## ", 1)[0]
    missing = [path.stem for path in NOTEBOOKS if f"`{path.stem}`" not in section]
    assert not missing, f"README.md's Notebooks section does not name {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_stored_warnings_echo_the_cells_own_lines(path):
    # A warning that a cell raised is stored with its line number in the cell and that line's text
    # ("/tmp/ipykernel_1/2.py:6: MixingWarning: ...\n  irm = ..."). When the cell's source no longer
    # has that text on that line, the source was edited after the run the reader sees: one notebook
    # showed warnings from code it no longer held, advising a setting its cell had since changed.
    header = re.compile(r"^\S*ipykernel\S*\.py:(\d+): \w+: .*\n(.*)$", re.MULTILINE)
    stale = []
    for number, cell in enumerate(_code_cells(path)):
        lines = cell.source.splitlines()
        for output in cell.get("outputs", []):
            if output.get("name") != "stderr":
                continue
            for line, echo in header.findall(output.get("text", "")):
                index = int(line) - 1
                if index >= len(lines) or lines[index].strip() != echo.strip():
                    stale.append(f"code cell {number}, line {line}: {echo.strip()[:60]!r}")
    assert not stale, f"{path.name}: stored warnings name lines the cell no longer holds (re-run it): {stale}"
