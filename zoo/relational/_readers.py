"""Reading relational data: the UCINET DL reader and the loaders of networks and ratings that ship
offline (networkx's karate club, Davis's southern women and the Florentine families; MovieLens 100k
from the ``recbole`` package). They build :class:`zoo.relational.data.RelationalData`, and
:mod:`zoo.relational.data` re-exports them."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from inference._validation import check_int
from zoo.relational.data import RelationalData, _warn_if_many_values, _warn_if_one_value

__all__ = ["read_ucinet_dl", "load_karate_club", "load_davis_southern_women", "load_florentine_families",
           "load_movielens_100k"]


# ---------------------------------------------------------------------------------- UCINET DL
def read_ucinet_dl(
    path: str | os.PathLike,
    *,
    domains: str | Sequence[str] | None = None,
    diagonal: str = "missing",
    values: Sequence[Any] | None = None,
) -> RelationalData:
    """Read a UCINET DL file: full-matrix or edge-list format, one or several matrices.

    Supported header: ``DL N=n`` (square, one domain) or ``DL NR=r NC=c`` (two domains),
    optional ``NM=m`` (m matrices = m relations), ``FORMAT = FULLMATRIX`` (default) or
    ``EDGELIST1`` (lines ``i j [value]``, 1-based indices or labels; absent pairs are 0), label
    sections ``LABELS:``, ``ROW LABELS:``, ``COLUMN LABELS:``, ``MATRIX LABELS:`` (separated by
    commas, spaces or new lines, optionally quoted), ``LABELS EMBEDDED`` and ``DATA:``. In full
    matrices a ``.`` marks a missing cell. Keywords are case-insensitive.

    Parameters
    ----------
    path : path-like
    domains : str or (str, str), optional
        Domain names; default ``"nodes"`` (square) or ``("rows", "cols")``.
    diagonal : {"missing", "observed"}
        Whether the self-pairs of a square network are observed.
    values : sequence, optional
        Declared values of every relation; default the distinct values found (0/1 for binary).
    """
    text = Path(path).read_text()
    tokens_text = re.split(r"(?i)\bdata\s*:", text, maxsplit=1)
    if len(tokens_text) != 2:
        raise ValueError("path: not a UCINET DL file (no DATA: section)")
    header, body = tokens_text
    if not re.match(r"(?is)\s*dl\b", header):
        raise ValueError("path: not a UCINET DL file (it must start with DL)")
    header = re.sub(r"(?is)^\s*dl\b", "", header, count=1)
    settings: dict[str, str] = {}
    for key, value in re.findall(r"(?i)\b(nr|nc|nm|n|format)\s*=\s*([A-Za-z0-9_]+)", header):
        settings[key.lower()] = value.lower()
    embedded = re.search(r"(?i)labels\s+embedded", header) is not None
    sections = _dl_label_sections(header)
    if "n" in settings:
        n_rows = n_cols = check_int("path: N", int(settings["n"]), minimum=1)
        square = True
    elif "nr" in settings and "nc" in settings:
        n_rows = check_int("path: NR", int(settings["nr"]), minimum=1)
        n_cols = check_int("path: NC", int(settings["nc"]), minimum=1)
        square = False
    else:
        raise ValueError("path: the DL header gives neither N= nor NR= and NC=")
    n_matrices = int(settings.get("nm", "1"))
    layout = settings.get("format", "fullmatrix")
    if layout in ("fm", "fullmatrix"):
        layout = "fullmatrix"
    if layout not in ("fullmatrix", "edgelist1"):
        raise ValueError(f"path: DL format {layout!r} is not supported (FULLMATRIX, EDGELIST1)")
    row_labels = sections.get("row labels") or sections.get("labels")
    col_labels = sections.get("column labels") or sections.get("col labels") or sections.get("labels")
    matrix_labels = sections.get("matrix labels")
    matrices: list[np.ndarray] = []
    if layout == "fullmatrix":
        lines = [line for line in body.splitlines() if line.strip()]
        if embedded:
            col_labels = _dl_split(lines[0])
            lines = lines[1:]
        rows_read: list[list[str]] = []
        embedded_rows: list[str] = []
        for line in lines:
            parts = _dl_split(line)
            if embedded:
                embedded_rows.append(parts[0])
                parts = parts[1:]
            rows_read.append(parts)
        flat = [cell for row in rows_read for cell in row]
        expected = n_matrices * n_rows * n_cols
        if len(flat) != expected:
            raise ValueError(f"path: expected {expected} matrix cells in DATA, found {len(flat)}")
        numbers = np.array([np.nan if cell in (".", "NA", "na") else float(cell) for cell in flat])
        matrices = list(numbers.reshape(n_matrices, n_rows, n_cols))
        if embedded:
            row_labels = embedded_rows[:n_rows]
    else:
        index_of_row = {label: i for i, label in enumerate(row_labels or [])}
        index_of_col = {label: i for i, label in enumerate(col_labels or [])}
        current = np.zeros((n_rows, n_cols))
        for line in body.splitlines():
            parts = _dl_split(line)
            if not parts:
                continue
            if re.fullmatch(r"(?i)!", parts[0]):
                matrices.append(current)
                current = np.zeros((n_rows, n_cols))
                continue
            if len(parts) not in (2, 3):
                raise ValueError(f"path: edge-list line {line.strip()!r} needs 2 or 3 fields")
            row = _dl_index(parts[0], index_of_row, n_rows, embedded)
            col = _dl_index(parts[1], index_of_col, n_cols, embedded)
            current[row, col] = float(parts[2]) if len(parts) == 3 else 1.0
        matrices.append(current)
        if len(matrices) != n_matrices:
            raise ValueError(f"path: expected {n_matrices} matrices, found {len(matrices)}")
    if row_labels is not None and len(row_labels) != n_rows:
        raise ValueError(f"path: {len(row_labels)} row labels for {n_rows} rows")
    if col_labels is not None and len(col_labels) != n_cols:
        raise ValueError(f"path: {len(col_labels)} column labels for {n_cols} columns")
    relation_names = matrix_labels or ([Path(path).stem] if n_matrices == 1 else
                                       [f"{Path(path).stem}{index + 1}" for index in range(n_matrices)])
    if square:
        names = domains if domains is not None else "nodes"
        labels = row_labels
    else:
        names = domains if domains is not None else ("rows", "cols")
        labels = (row_labels, col_labels)
    combined: RelationalData | None = None
    relations = []
    for name, matrix in zip(relation_names, matrices):
        single = RelationalData._read_adjacency(matrix, mask=None, domains=names, relation=name, values=values,
                                                labels=labels, diagonal=diagonal, symmetric=None)
        _warn_if_one_value(single.relations[0], "path")  # in the file's terms, not from_adjacency's
        if values is None:
            _warn_if_many_values(single.relations[0], "path", "declare the categories with values=[...], or build a "
                                 "binary relation with RelationalData.from_adjacency(matrix > 0)",
                                 held=f"the file's matrix {name!r} holds")
        combined = single
        relations.append(single.relations[0])
    return RelationalData(combined.domains, tuple(relations))


def _dl_split(line: str) -> list[str]:
    lexer = shlex.shlex(line.replace(",", " "), posix=True)
    lexer.whitespace_split = True
    return list(lexer)


def _dl_label_sections(header: str) -> dict[str, list[str]]:
    pattern = re.compile(r"(?i)\b(row labels|column labels|col labels|matrix labels|labels)\s*:")
    matches = list(pattern.finditer(header))
    sections = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(header)
        chunk = header[match.end(): end]
        chunk = re.split(r"(?i)\b(format\s*=|labels\s+embedded)", chunk)[0]
        sections[match.group(1).lower()] = _dl_split(chunk.replace("\n", " "))
    return sections


def _dl_index(token: str, lookup: dict, size: int, embedded: bool) -> int:
    if token in lookup:
        return lookup[token]
    if embedded and not token.isdigit():
        raise ValueError(f"path: label {token!r} is not among the declared labels")
    index = int(token) - 1
    if not 0 <= index < size:
        raise ValueError(f"path: index {token} out of range 1..{size}")
    return index


# ---------------------------------------------------------------------------------- loaders
def load_karate_club(*, weighted: bool = False) -> RelationalData:
    """Zachary's karate club (34 members) from networkx.

    ``weighted=False``: binary friendship (UCINET ZACHE). ``weighted=True``: the number of
    contexts in which two members interacted (the 'weight' edge attribute, UCINET ZACHC) as a
    categorical relation with values 0..7.
    """
    import networkx as nx

    graph = nx.karate_club_graph()
    if weighted:
        return RelationalData.from_networkx(graph, weight="weight", domains="members", relation="interactions")
    return RelationalData.from_networkx(graph, domains="members", relation="friends")


def load_davis_southern_women() -> RelationalData:
    """Davis's southern women: 18 women × 14 social events, attended or not (networkx)."""
    import networkx as nx

    graph = nx.davis_southern_women_graph()
    return RelationalData.from_networkx(graph, rows=graph.graph["top"], cols=graph.graph["bottom"],
                                        domains=("women", "events"), relation="attended")


def load_florentine_families() -> RelationalData:
    """Padgett's Florentine families: marriage ties between 15 families (networkx)."""
    import networkx as nx

    return RelationalData.from_networkx(nx.florentine_families_graph(), domains="families", relation="marriage")


def _recbole_file(name: str) -> Path:
    try:
        files = importlib.metadata.files("recbole") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if str(entry).endswith(f"dataset_example/ml-100k/{name}"):
            return Path(entry.locate())
    raise FileNotFoundError(
        f"{name} not found: MovieLens 100k ships with the recbole package; install the files with "
        "`pip install --no-deps recbole` (no other dependency is needed)"
    )


def load_movielens_100k(*, as_frame: bool = False, threshold: float | str = "mean") -> Any:
    """MovieLens 100k (943 users × 1,682 movies, 100,000 ratings 1–5), bundled with ``recbole``.

    Parameters
    ----------
    as_frame : bool
        Return the raw ratings as a pandas DataFrame (columns user, item, rating, timestamp).
    threshold : float or "mean"
        Threshold of :meth:`RelationalData.from_ratings` (CP §3 uses the global mean).

    Returns
    -------
    RelationalData with ``likes: users × items → {0, 1}``, or the DataFrame.
    """
    import pandas as pd

    frame = pd.read_csv(_recbole_file("ml-100k.inter"), sep="\t")
    frame.columns = ["user", "item", "rating", "timestamp"]
    if as_frame:
        return frame
    return RelationalData.from_ratings(frame, user="user", item="item", rating="rating", threshold=threshold)
