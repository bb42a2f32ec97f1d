"""Bundled data loads offline; file formats round-trip."""

import re

import numpy as np
import pytest

from zoo.data import CoOccurrence
from zoo.datasets import (
    load_20newsgroups,
    load_reuters,
    read_edge_list,
    read_ldac,
    read_matrix_market,
    write_ldac,
    write_matrix_market,
)

COUNTS = np.array([[2, 0, 1.0], [0, 0, 0], [1, 4, 0]])


def test_reuters_ships_with_lda():
    data = load_reuters()
    assert data.shape == (395, 4258)
    assert data.col_names[:3] == ("church", "pope", "years")
    assert data.is_integer and data.total > 80_000


def test_20newsgroups_from_orange_text():
    pytest.importorskip("pandas")
    try:
        data, labels = load_20newsgroups("train", max_docs=300)
    except FileNotFoundError as error:
        pytest.skip(str(error))
    assert data.n_rows == labels.shape[0] <= 300
    assert len(set(labels)) > 5 and data.col_names is not None


@pytest.mark.parametrize("read", [read_matrix_market, read_ldac, read_edge_list])
def test_a_path_that_is_not_a_file_is_named(read, tmp_path):
    # Python's own error said "[Errno 2] No such file or directory: ..." without the argument's name.
    for path in (tmp_path / "missing.txt", tmp_path):
        with pytest.raises(FileNotFoundError, match=rf"^path: {re.escape(repr(str(path)))} is not a file"):
            read(path)


def test_matrix_market_round_trip(tmp_path):
    data = CoOccurrence.from_dense(COUNTS)
    write_matrix_market(tmp_path / "x.mtx", data)
    np.testing.assert_array_equal(read_matrix_market(tmp_path / "x.mtx").to_dense(), COUNTS)


def test_ldac_round_trip_keeps_empty_documents(tmp_path):
    data = CoOccurrence.from_dense(COUNTS)
    write_ldac(tmp_path / "x.ldac", data)
    assert (tmp_path / "x.ldac").read_text().splitlines() == ["2 0:2 2:1", "0", "2 0:1 1:4"]
    back = read_ldac(tmp_path / "x.ldac", vocabulary=["a", "b", "c"])
    np.testing.assert_array_equal(back.to_dense(), COUNTS)
    assert back.col_names == ("a", "b", "c")


def test_ldac_errors_name_the_file(tmp_path):
    (tmp_path / "bad.ldac").write_text("3 0:1 1:2\n")
    with pytest.raises(ValueError, match="^path"):
        read_ldac(tmp_path / "bad.ldac")


def test_edge_list_csv(tmp_path):
    (tmp_path / "edges.csv").write_text("src,dst,w\nann,bob,2\nann,cat,1\nbob,cat,0.5\nann,bob,1\n")
    data = read_edge_list(tmp_path / "edges.csv", source="src", target="dst", weight="w")
    assert data.row_names == ("ann", "bob") and data.col_names == ("bob", "cat")
    np.testing.assert_allclose(data.to_dense(), [[3, 1], [0, 0.5]])
