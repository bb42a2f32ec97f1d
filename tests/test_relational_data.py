"""Relational data: constructors, UCINET DL reader, offline loaders, device arrays, bad input."""
import importlib.metadata
import re
import warnings

import jax
import networkx as nx
import numpy as np
import pandas as pd
import pytest

from zoo.relational.data import (
    Domain,
    Relation,
    RelationalData,
    check_cells,
    load_davis_southern_women,
    load_florentine_families,
    load_karate_club,
    load_movielens_100k,
    read_ucinet_dl,
)


def test_adjacency_with_nan_and_mask_keeps_only_observed_cells():
    matrix = np.array([[0, 1, np.nan], [1, 0, 0]], dtype=float)
    mask = np.array([[True, True, True], [False, True, True]])
    data = RelationalData.from_adjacency(matrix, mask=mask, domains=("people", "clubs"))
    relation = data.relation()
    assert relation.n_observed == 4
    dense = relation.to_dense()
    assert np.isnan(dense[0, 2]) and np.isnan(dense[1, 0])
    np.testing.assert_array_equal(dense[0, :2], [0, 1])
    assert relation.value_labels == (0, 1)
    assert [domain.size for domain in data.domains] == [2, 3]


def test_one_domain_network_masks_the_diagonal_and_detects_symmetry():
    adjacency = np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    data = RelationalData.from_adjacency(adjacency, domains="nodes")
    relation = data.relation()
    assert relation.n_observed == 6 and relation.symmetric and not relation.has_self_pairs
    mirror = relation.mirror_index()
    np.testing.assert_array_equal(relation.entries[mirror], relation.entries[:, ::-1])
    directed = RelationalData.from_adjacency(np.triu(adjacency), domains="nodes").relation()
    assert not directed.symmetric
    with_diagonal = RelationalData.from_adjacency(adjacency, domains="nodes", diagonal="observed").relation()
    assert with_diagonal.n_observed == 9 and with_diagonal.has_self_pairs


def test_declared_values_become_categorical_codes():
    data = RelationalData.from_adjacency([[2, 5], [5, 9]], domains=("a", "b"), values=[2, 5, 7, 9])
    relation = data.relation()
    assert relation.n_values == 4
    np.testing.assert_array_equal(relation.to_dense(), [[0, 1], [1, 3]])


def test_networkx_binary_weighted_thresholded_and_bipartite():
    graph = nx.Graph()
    graph.add_edge("a", "b", weight=3)
    graph.add_edge("b", "c", weight=1)
    graph.add_node("d")
    binary = RelationalData.from_networkx(graph).relation()
    assert binary.n_observed == 12 and binary.values.sum() == 4 and binary.symmetric
    weighted = RelationalData.from_networkx(graph, weight="weight").relation()
    assert weighted.value_labels == (0, 1, 3)
    thresholded = RelationalData.from_networkx(graph, weight="weight", threshold=2).relation()
    assert thresholded.values.sum() == 2
    bipartite = RelationalData.from_networkx(graph, rows=["a", "c"], cols=["b", "d"], domains=("x", "y"))
    np.testing.assert_array_equal(bipartite.relation().to_dense(), [[1, 0], [1, 0]])
    directed = nx.DiGraph([(0, 1)])
    assert not RelationalData.from_networkx(directed).relation().symmetric
    # An edge of unknown (NaN) weight is a missing cell, thresholded or not (thresholded, it was a 0: no link).
    graph.add_edge("c", "d", weight=float("nan"))
    for threshold in (None, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the weights as categories
            unknown = RelationalData.from_networkx(graph, weight="weight", threshold=threshold).relation()
        assert unknown.n_observed == 10 and unknown.symmetric, threshold


def test_table_and_ratings_thresholded_at_the_global_mean():
    frame = pd.DataFrame({"user": ["u1", "u1", "u2", "u3"], "item": ["i1", "i2", "i1", "i2"],
                          "rating": [5, 1, 4, 3]})
    data = RelationalData.from_ratings(frame, user="user", item="item", rating="rating")
    relation = data.relation()
    mean = frame.rating.mean()  # 3.25: ratings 5 and 4 are "likes"
    assert relation.values.sum() == int((frame.rating > mean).sum()) == 2
    assert data.domain("users").labels == ("u1", "u2", "u3")
    table = RelationalData.from_table(frame, subject="user", object="item", value="rating")
    assert table.relation().value_labels == (1, 3, 4, 5)
    shared = RelationalData.from_table(pd.DataFrame({"a": ["x", "y"], "b": ["y", "z"], "v": [1, 0]}),
                                       subject="a", object="b", value="v", domains=("people", "people"))
    assert shared.domains[0].size == 3 and shared.relation().shape == (3, 3)


def test_table_of_text_values_without_values_declared():
    frame = pd.DataFrame({"s": ["a", "b", "a"], "o": ["b", "c", "c"], "v": ["yes", "no", "yes"]})
    relation = RelationalData.from_table(frame, subject="s", object="o", value="v").relation()
    assert relation.value_labels == ("no", "yes")  # sorted, as numbers are
    np.testing.assert_array_equal(relation.to_dense(), [[1, 1], [np.nan, 0]])  # s (a, b) × o (b, c)


def test_table_rows_missing_repeated_or_of_one_value():
    frame = pd.DataFrame({"a": ["x", "x", "y", "z"], "b": ["p", "q", "p", "q"], "v": [1, 0, None, 1]})
    data = RelationalData.from_table(frame, subject="a", object="b", value="v")
    assert data.relation().n_observed == 3  # the row without a value is an unobserved cell
    assert np.isnan(data.relation().to_dense()[1, 0])
    repeated = pd.concat([frame, frame.iloc[[1]]])  # ("x", "q") again, with index label 1
    with pytest.raises(ValueError, match=re.escape("frame: the cell ('x', 'q') is listed in rows 1 and 1 ")):
        RelationalData.from_table(repeated, subject="a", object="b", value="v")
    positives = pd.DataFrame({"a": ["x", "y"], "b": ["p", "q"], "v": [1, 1]})  # an edge list of links present
    with pytest.warns(UserWarning, match="^frame: every observed cell of relation 'v' holds 1"):
        RelationalData.from_table(positives, subject="a", object="b", value="v")
    with pytest.warns(UserWarning, match="^matrix: every observed cell"):
        RelationalData.from_adjacency(np.ones((3, 3)), domains="people")
    ratings = pd.DataFrame({"user": [1, 2], "item": [1, 2], "rating": [3, 4]})
    with pytest.warns(UserWarning, match=r"^threshold: every rating is at or below 5 \(ratings 3 to 4\)") as caught:
        RelationalData.from_ratings(ratings, user="user", item="item", rating="rating", threshold=5)
    assert len(caught) == 1  # from_table's own warning is not said again


def test_ucinet_full_matrix_with_labels_missing_cells_and_two_matrices(tmp_path):
    path = tmp_path / "friends.dat"
    path.write_text(
        "DL N=3 NM=2\nFORMAT = FULLMATRIX\nLABELS:\nann,bob,\"carl d\"\nMATRIX LABELS:\nlikes, helps\nDATA:\n"
        "0 1 .\n1 0 0\n0 1 0\n"
        "0 0 1\n1 0 1\n0 0 0\n"
    )
    data = read_ucinet_dl(path)
    assert data.relation_names == ("likes", "helps")
    assert data.domains[0].labels == ("ann", "bob", "carl d")
    likes = data.relation("likes")
    assert likes.n_observed == 5  # 6 off-diagonal cells, one missing
    assert likes.to_dense()[1, 0] == 1 and likes.to_dense()[1, 2] == 0 and np.isnan(likes.to_dense()[1, 1])
    assert likes.to_dense()[0, 1] == 1 and np.isnan(likes.to_dense()[0, 2])
    assert data.relation("helps").values.sum() == 3


def test_ucinet_edge_list_and_rectangular_matrix(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("dl n=4 format=edgelist1\nlabels embedded\ndata:\na b\nb c 2\nd a\n")
    with pytest.raises(ValueError, match="^path"):
        read_ucinet_dl(edges)
    edges.write_text("dl n=4 format=edgelist1\nlabels:\na b c d\ndata:\na b\nb c 2\n4 1\n")
    relation = read_ucinet_dl(edges).relation()
    dense = relation.to_dense()
    assert dense[0, 1] == 1 and dense[3, 0] == 1 and relation.value_labels == (0, 1, 2)
    # A valued matrix warns in the file's terms (path), not those of from_adjacency, which the user did not call.
    valued = tmp_path / "valued.dl"
    valued.write_text("DL N=3\nDATA:\n0 0.5 1.25\n0.5 0 2.5\n1.25 2.5 0\n")
    with pytest.warns(UserWarning, match=r"^path: the file's matrix 'valued' holds 3 distinct values, some not whole "
                                         r"numbers \(e.g. 0.5\).*declare the categories with values="):
        read_ucinet_dl(valued)
    assert relation.to_dense()[1, 2] == 2  # code of value 2
    rectangular = tmp_path / "rect.dl"
    rectangular.write_text("DL NR=2, NC=3\nROW LABELS:\nw1 w2\nCOLUMN LABELS:\ne1 e2 e3\nDATA:\n1 0 1\n0 1 1\n")
    data = read_ucinet_dl(rectangular, domains=("women", "events"))
    assert data.relation().shape == (2, 3) and data.relation().n_observed == 6
    assert data.domain("events").labels == ("e1", "e2", "e3")


def test_offline_networks():
    karate = load_karate_club()
    assert karate.relation().values.sum() == 2 * 78 and karate.relation().n_observed == 34 * 33
    weighted = load_karate_club(weighted=True).relation()
    assert weighted.n_values > 2 and (weighted.values > 0).sum() == 2 * 78
    davis = load_davis_southern_women()
    assert davis.relation().shape == (18, 14) and davis.relation().values.sum() == 89
    florentine = load_florentine_families()
    assert florentine.relation().values.sum() == 2 * 20


def test_movielens_from_recbole():
    try:
        importlib.metadata.distribution("recbole")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("recbole (which bundles MovieLens 100k) is not installed")
    frame = load_movielens_100k(as_frame=True)
    assert len(frame) == 100_000
    data = load_movielens_100k()
    relation = data.relation()
    assert relation.shape == (943, 1682) and relation.n_observed == 100_000
    assert relation.values.sum() == int((frame.rating > frame.rating.mean()).sum())


def test_device_arrays_list_every_individuals_blanket():
    data = RelationalData.from_adjacency([[0, 1, np.nan], [1, np.nan, 0]], domains=("a", "b"))
    arrays = data.to_arrays()
    relation = data.relation()
    for position, size in enumerate(relation.shape):
        table = np.asarray(arrays.blankets[0][position])
        for individual in range(size):
            listed = sorted(cell for cell in table[individual] if cell < relation.n_observed)
            expected = sorted(np.flatnonzero(relation.entries[:, position] == individual))
            assert listed == expected
    assert float(arrays.weights[0][-1]) == 0.0


def _relation(**overrides):
    settings = dict(name="r", domains=("a", "b"), shape=(2, 2), entries=[[0, 0], [1, 1]], values=[0, 1])
    settings.update(overrides)
    return Relation(**settings)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: _relation(values=[0, 2]), "values"),
        (lambda: _relation(entries=[[0, 0], [2, 1]]), "entries"),
        (lambda: _relation(entries=[[0, 0], [0, 0]]), "entries"),
        (lambda: _relation(entries=np.zeros((0, 2), int), values=[]), "entries"),
        (lambda: _relation(shape=(2,)), "shape"),
        (lambda: _relation(value_labels=(1,)), "value_labels"),
        (lambda: _relation(symmetric=True), "symmetric"),
        (lambda: RelationalData((Domain("a", 2), Domain("b", 3)), (_relation(),)), "relations"),
        (lambda: RelationalData((Domain("a", 2),), (_relation(),)), "relations"),
        (lambda: RelationalData.from_adjacency([[0, 3], [1, 0]], domains=("a", "b"), values=[0, 1]), "matrix"),
        (lambda: RelationalData.from_adjacency([[np.nan, np.nan]], domains=("a", "b")), "matrix"),
        (lambda: RelationalData.from_adjacency([[0, 1], [1, 0]], domains="a", mask=np.zeros((3, 3))), "mask"),
        (lambda: RelationalData.from_adjacency([[0, 1, 1]], domains="a"), "matrix"),
        (lambda: RelationalData.from_adjacency([[0, np.inf]], domains=("a", "b")), "matrix"),
        (lambda: Domain("a", 0), "size"),
        (lambda: Domain("a", 2, labels=["x"]), "labels"),
        (lambda: RelationalData.from_networkx(nx.Graph([(0, 1)]), threshold=1.0), "threshold"),
        (lambda: RelationalData.from_networkx(nx.Graph([(0, 1)]), weight="w"), "weight"),
        (lambda: RelationalData.from_ratings(pd.DataFrame({"u": [1], "i": [1], "x": [1]}), user="u", item="i",
                                             rating="r"), "rating"),
        (lambda: RelationalData.from_ratings(pd.DataFrame({"u": [1], "i": [1], "r": [1]}), user="u", item="i",
                                             rating="r", threshold="median"), "threshold"),
        (lambda: RelationalData.from_ratings(pd.DataFrame({"u": [1], "i": [1], "r": [1]}), user="usr", item="i",
                                             rating="r"), "user: column 'usr' not in frame (columns: ['u', 'i', 'r'])"),
        (lambda: RelationalData.from_ratings(pd.DataFrame({"u": [1], "i": [1], "r": [1]}), user="u", item="it",
                                             rating="r"), "item"),
        (lambda: check_cells([[0, 3]], 0, _karate_schema()), "cells: column 1 out of range for domain 'members'"),
        (lambda: check_cells([[-1, 0]], 0, _karate_schema()), "cells: column 0 out of range"),
        (lambda: check_cells([[0, 1], [2, 2]], 0, _karate_schema()), "cells: row 1 is a self-pair"),
        (lambda: check_cells([[0.5, 1]], 0, _karate_schema()), "cells: indices must be whole numbers"),
        (lambda: check_cells([[0, 1, 2]], 0, _karate_schema()), "cells: expected shape (n_cells, 2)"),
        (lambda: check_cells([[0, 1]], "likes", _karate_schema()), "relation: no relation 'likes'"),
        (lambda: check_cells([[0, 1]], 1, _karate_schema()), "relation"),
        (lambda: RelationalData.from_adjacency([[0, 1, 1], [1, 0, 1]], domains=("a", "b"), labels=list("abcde")),
         "labels: a relation between two domains takes a pair"),
        (lambda: RelationalData.from_table(pd.DataFrame({"s": ["a", "b"], "o": ["b", "c"], "v": ["yes", "yes"]}),
                                           subject="s", object="o", value="v"), "values: every cell holds 'yes'"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        call()


def _karate_schema():
    """Three members and one relation over them (friends)."""
    return RelationalData.from_adjacency([[0, 1, 0], [1, 0, 1], [0, 1, 0]], domains="members", relation="friends").schema


def test_wrong_kinds_raise_type_errors():
    with pytest.raises(TypeError, match="^cells: expected integer indices"):
        check_cells([["Mr Hi", "Officer"]], 0, _karate_schema())
    with pytest.raises(TypeError, match="^cells: expected integer indices"):
        check_cells([[True, False]], 0, _karate_schema())
    with pytest.raises(TypeError, match="^graph"):
        RelationalData.from_networkx(np.eye(2))
    with pytest.raises(TypeError, match="^frame"):
        RelationalData.from_table({"a": [1]}, subject="a", object="a", value="a")
    with pytest.raises(TypeError, match="^matrix"):
        RelationalData.from_adjacency([["x", "y"]], domains=("a", "b"))


def test_ragged_rows_are_named_before_numpy_reads_them():
    # NumPy's "setting an array element with a sequence ... inhomogeneous shape" was all the user saw.
    with pytest.raises(ValueError, match=r"^matrix: rows of different lengths \(row 0 has 2 values, row 1 has 1 "
                                         r"value\); give every row one value per column, NaN for a missing cell$"):
        RelationalData.from_adjacency([[0, 1], [1]])
    with pytest.raises(ValueError, match=r"^matrix: rows of different lengths \(row 0 has 2 values, row 1 has a "
                                         r"single number\)"):
        RelationalData.from_adjacency([[0, 1], 1])
    with pytest.raises(ValueError, match=r"^matrix: cannot be read as an array of numbers"):
        RelationalData.from_adjacency([[0, [1]], [1, 0]])
    with pytest.raises(ValueError, match=r"^mask: rows of different lengths \(row 0 has 2 values, row 1 has 1 value\)"):
        RelationalData.from_adjacency(np.eye(2), domains=("a", "b"), mask=[[True, True], [True]])


def test_relations_that_are_not_a_sequence_are_named():
    with pytest.raises(TypeError, match="^relations: expected a Relation or a sequence of Relations, got NoneType$"):
        RelationalData([Domain("p", 2)], None)
    with pytest.raises(TypeError, match="^relations: expected a Relation or a sequence of Relations, got str$"):
        RelationalData([Domain("p", 2)], "r")


def test_bipartite_rows_and_cols_share_no_node_and_repeat_none():
    path = nx.path_graph(3)
    with pytest.raises(ValueError, match=r"^cols: node 1 is also in rows; rows and cols are the two sides of a "
                                         r"bipartite relation"):
        RelationalData.from_networkx(path, rows=[0, 1], cols=[1, 2])
    with pytest.raises(ValueError, match="^rows: node 0 is listed twice$"):
        RelationalData.from_networkx(path, rows=[0, 0], cols=[1, 2])
    with pytest.raises(ValueError, match="^cols: is empty$"):
        RelationalData.from_networkx(path, rows=[0, 2], cols=[])
    with pytest.raises(ValueError, match="^domains: rows and cols are two domains; give two names, got 'people'$"):
        RelationalData.from_networkx(path, rows=[0, 2], cols=[1], domains="people")


def test_weights_that_are_not_numbers_are_named_with_their_edge():
    with pytest.raises(ValueError, match=r"^weight: edge \(0, 1\) has 'w' = 'a', not a finite number$"):
        RelationalData.from_networkx(nx.Graph([(0, 1, {"w": "a"})]), weight="w")
    with pytest.raises(ValueError, match=r"^weight: edge \(1, 2\) has 'w' = inf, not a finite number$"):
        RelationalData.from_networkx(nx.Graph([(0, 1, {"w": 1}), (1, 2, {"w": float("inf")})]), weight="w")
    # A number written as text is read as networkx reads it, as before.
    text = RelationalData.from_networkx(nx.Graph([(0, 1, {"w": "2"}), (1, 2, {"w": 1})]), weight="w")
    assert text.relation().value_labels == (0, 1, 2)


def test_many_valued_matrices_warn_that_each_value_is_a_category():
    weights = np.random.default_rng(0).random((6, 6)).round(2)
    with pytest.warns(UserWarning, match=r"^matrix: the observed cells hold 30 distinct values, some not whole numbers "
                                         r"\(e\.g\. 0\.\d+\); each one becomes a category of relation 'r'.*"
                                         r"from_adjacency\(matrix > 0, mask=~np\.isnan\(matrix\)\)") as caught:
        relation = RelationalData.from_adjacency(weights).relation()
    assert relation.n_values == 30  # the result itself is unchanged
    assert len(caught) == 1 and caught[0].filename == __file__
    with pytest.warns(UserWarning, match=r"^matrix: the observed cells hold 12 distinct values; each one"):
        RelationalData.from_adjacency(np.arange(16).reshape(4, 4), domains="p")
    graph = nx.Graph([(node, node + 1, {"w": node / 2}) for node in range(1, 5)])
    with pytest.warns(UserWarning, match=r"^weight: the edge weights 'w' \(0 between nodes without an edge\) take 5 "
                                         r"distinct values, .*give threshold= .*or leave weight out") as caught:
        RelationalData.from_networkx(graph, weight="w")
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RelationalData.from_adjacency(weights, values=sorted(set(weights.ravel().tolist())))  # declared: deliberate
        RelationalData.from_networkx(graph, weight="w", threshold=1.0)
        RelationalData.from_adjacency(np.arange(9).reshape(3, 3) % 4, domains="p")  # a few whole numbers
        load_karate_club(weighted=True)  # 8 whole numbers


def test_a_dataframes_index_and_columns_label_the_individuals():
    links = [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    named = pd.DataFrame(links, index=list("abc"), columns=list("abc"))
    assert RelationalData.from_adjacency(named, domains="p").domains[0].labels == ("a", "b", "c")
    assert RelationalData.from_adjacency(named, domains="p", labels=list("xyz")).domains[0].labels == ("x", "y", "z")
    header_only = pd.DataFrame(links, columns=list("abc"))  # e.g. read_csv of a matrix with a header row
    assert RelationalData.from_adjacency(header_only, domains="p").domains[0].labels == ("a", "b", "c")
    assert RelationalData.from_adjacency(pd.DataFrame(links), domains="p").domains[0].labels is None
    rows = pd.DataFrame(links, index=["u1", "u2", "u3"], columns=["f1", "f2", "f3"])
    two = RelationalData.from_adjacency(rows, domains=("users", "films"))
    assert [domain.labels for domain in two.domains] == [("u1", "u2", "u3"), ("f1", "f2", "f3")]
    only_rows = RelationalData.from_adjacency(pd.DataFrame(links, index=["u1", "u2", "u3"]), domains=("u", "f"))
    assert [domain.labels for domain in only_rows.domains] == [("u1", "u2", "u3"), None]
    with pytest.raises(ValueError, match=r"^matrix: the DataFrame's index and columns differ \(at position 0: index "
                                         r"'a', columns 'c'\), but a relation over one domain has one list"):
        RelationalData.from_adjacency(pd.DataFrame(links, index=list("abc"), columns=list("cba")), domains="p")


def test_the_edge_list_warning_names_read_network_with_its_module():
    positives = pd.DataFrame({"a": ["x", "y"], "b": ["p", "q"], "link": [1, 1]})
    with pytest.warns(UserWarning, match=r"^frame: .*\(an edge list: zoo\.cli\.read_network or "
                                         r"RelationalData\.from_networkx observe every pair of nodes\)$"):
        RelationalData.from_table(positives, subject="a", object="b", value="link")


def test_one_column_for_two_arguments_is_named():
    frame = pd.DataFrame({"u": ["a", "b", "a"], "v": ["b", "a", "a"], "r": [1, 0, 1]})
    with pytest.raises(ValueError, match=r"^object: the same column as subject \('u'\); subject and object each need "
                                         r"a column of their own$"):
        RelationalData.from_table(frame, subject="u", object="u", value="r")
    with pytest.raises(ValueError, match=r"^value: the same column as object \('v'\)"):
        RelationalData.from_table(frame, subject="u", object="v", value="v")
    with pytest.raises(ValueError, match=r"^item: the same column as user \('u'\); user and item each need"):
        RelationalData.from_ratings(frame, user="u", item="u", rating="r")


def test_a_network_of_one_node_is_refused_naming_what_the_user_passed():
    with pytest.raises(ValueError, match=r"^graph: a network needs at least 2 nodes \(its cells are the pairs of "
                                         r"distinct nodes\), got only node 0$"):
        RelationalData.from_networkx(nx.empty_graph(1))
    with pytest.raises(ValueError, match=r"^matrix: a relation over one domain \(a network\) needs at least 2 "
                                         r"individuals, got a 1 × 1 matrix"):
        RelationalData.from_adjacency([[1]], domains="p")
    with pytest.warns(UserWarning, match="^matrix: every observed cell of relation 'r' holds 1"):  # two domains: fine
        assert RelationalData.from_adjacency([[1]], domains=("a", "b")).relation().n_observed == 1


def test_names_are_checked_under_the_argument_that_gives_them():
    with pytest.raises(TypeError, match="^domains: expected a non-empty string, got ''$"):
        RelationalData.from_adjacency(np.eye(2), domains="")
    with pytest.raises(TypeError, match="^domains: expected a non-empty string, got 3$"):
        RelationalData.from_adjacency(np.eye(2), domains=("a", 3))
    with pytest.raises(TypeError, match="^relation: expected a non-empty string, got 5$"):
        RelationalData.from_adjacency(np.eye(2), relation=5)
    with pytest.raises(TypeError, match="^relation: expected a non-empty string, got ''$"):
        RelationalData.from_networkx(nx.path_graph(3), relation="")
    frame = pd.DataFrame({"s": ["a", "b"], "o": ["b", "c"], "v": [1, 0]})
    with pytest.raises(TypeError, match="^relation: expected a non-empty string, got 5$"):
        RelationalData.from_table(frame, subject="s", object="o", value="v", relation=5)
    with pytest.raises(TypeError, match="^domains: expected a non-empty string, got ''$"):
        RelationalData.from_table(frame, subject="s", object="o", value="v", domains=("", "o"))
    numbered = pd.DataFrame({0: ["a", "b"], 1: ["b", "c"], 2: [1, 0]})
    with pytest.raises(TypeError, match=r"^domains: the default domain names are the subject and object columns, 0 "
                                        r"and 1, which are not both non-empty strings; give domains=\(name, name\)$"):
        RelationalData.from_table(numbered, subject=0, object=1, value=2, relation="r")
    with pytest.raises(TypeError, match=r"^relation: the default relation name is the value column, 2, which"):
        RelationalData.from_table(numbered, subject=0, object=1, value=2, domains=("a", "b"))


def test_cells_are_given_by_their_individuals_labels():
    # A fit predicts cells of indices; data.cells turns labels into them, naming what it cannot find.
    from zoo.relational import LatentClassRelational

    data = load_florentine_families()
    labels = data.domains[0].labels
    cells = data.cells([(labels[3], labels[7]), [labels[0], labels[1]]])
    assert cells.tolist() == [[3, 7], [0, 1]] and cells.dtype == np.int64
    assert data.cells([(labels[3], labels[7])], relation="marriage").tolist() == [[3, 7]]
    result = LatentClassRelational(2).fit(data, key=jax.random.key(0), n_restarts=1, max_passes=3)
    np.testing.assert_array_equal(result.predict_proba(cells), result.predict_proba([[3, 7], [0, 1]]))
    with pytest.raises(ValueError, match=r"^labelled: cell 1 names 'Nobody', not an individual of domain 'families'"):
        data.cells([(labels[0], labels[1]), (labels[0], "Nobody")])
    with pytest.raises(ValueError, match=r"^labelled: cell 0 has 3 labels, not 2 \(the relation's domains: families, "
                                         r"families\)"):
        data.cells([(labels[0], labels[1], labels[2])])
    with pytest.raises(TypeError, match=r"^labelled: expected a sequence of cells"):
        data.cells("Medici")
    with pytest.raises(ValueError, match=r"^labelled: the domain 'p' has no labels"):
        RelationalData.from_adjacency([[0, 1], [1, 0]], domains="p").cells([(0, 1)])
    with pytest.raises(TypeError, match=r"^cells: expected integer indices .*data.cells\(labelled\)"):
        result.predict_proba([(labels[0], labels[1])])


def test_datasets_built_apart_combine_their_relations_by_the_individuals_labels():
    # from_networkx numbers people in the graph's order, from_table in sorted order: put side by side by
    # position (RelationalData(friends.domains, (friends' relation, advice's))) zoe's advice went to amy.
    graph = nx.Graph([("zoe", "amy"), ("amy", "bob"), ("bob", "cat"), ("cat", "dan")])
    friends = RelationalData.from_networkx(graph, domains="people", relation="friend")
    ties = pd.DataFrame({"who": ["zoe", "bob", "cat", "eve"], "whom": ["amy", "dan", "zoe", "amy"],
                         "asks": [1, 1, 0, 1]})
    advice = RelationalData.from_table(ties, subject="who", object="whom", value="asks", domains=("people", "people"))
    assert friends.domain("people").labels != advice.domain("people").labels[:5]
    smokes = RelationalData(Domain("people", 2, ("dan", "zoe")),
                            Relation("smokes", ("people",), (2,), [[0], [1]], [1, 0]))
    both = RelationalData.combine(friends, advice, smokes)
    people = both.domain("people").labels
    assert people == ("zoe", "amy", "bob", "cat", "dan", "eve")  # the network's order, then eve of the table
    assert both.relation_names == ("friend", "asks", "smokes")

    def observed(data, name):
        relation, labels = data.relation(name), data.domain("people").labels
        return {tuple(labels[i] for i in cell): int(value) for cell, value in zip(relation.entries, relation.values)}

    assert observed(both, "asks") == observed(advice, "asks") == {
        ("zoe", "amy"): 1, ("bob", "dan"): 1, ("cat", "zoe"): 0, ("eve", "amy"): 1}
    assert observed(both, "smokes") == {("dan",): 1, ("zoe",): 0}
    friend = observed(both, "friend")
    assert friend == observed(friends, "friend") and friend[("zoe", "amy")] == 1 and friend[("zoe", "bob")] == 0
    assert both.relation("friend").symmetric and both.relation("friend").shape == (6, 6)
    assert not any("eve" in cell for cell in friend)  # eve is in no friendship cell: missing, not absent
    # What cannot be matched, and relations named twice, are refused by name.
    unlabelled = RelationalData.from_adjacency(np.eye(3), domains="people", relation="other")
    with pytest.raises(ValueError, match="domain 'people' is labelled in some datasets and not in argument 1"):
        RelationalData.combine(friends, unlabelled)
    with pytest.raises(ValueError, match=r"unlabelled domain 'people' has 3 individuals .* and 4 in argument 1"):
        RelationalData.combine(unlabelled, RelationalData.from_adjacency(np.eye(4), domains="people"))
    with pytest.raises(ValueError, match=r"relation names \['friend'\] appear in more than one"):
        RelationalData.combine(friends, friends)
    with pytest.raises(TypeError, match="argument 1 is a DataFrame"):
        RelationalData.combine(friends, ties)
    with pytest.raises(ValueError, match="at least one"):
        RelationalData.combine()


def test_a_graphs_self_loops_left_out_are_said_to_be():
    graph = nx.karate_club_graph()
    graph.add_edges_from([(0, 0), (5, 5)])
    with pytest.warns(UserWarning, match=r"graph: its 2 self-loops \(e.g. node 0\) are left out"):
        data = RelationalData.from_networkx(graph)
    assert not data.relation().has_self_pairs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RelationalData.from_networkx(nx.karate_club_graph())


def test_a_matrixs_non_zero_diagonal_left_out_is_said_to_be():
    # A square matrix's diagonal was dropped in silence for a relation over one domain.
    matrix = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]], float)
    with pytest.warns(UserWarning, match=r"^matrix: 2 non-zero self-pairs r\(a, a\) on the diagonal are left out"):
        data = RelationalData.from_adjacency(matrix, domains="nodes")
    assert data.relation().n_observed == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.fill_diagonal(matrix, 0)
        RelationalData.from_adjacency(matrix, domains="nodes")
        RelationalData.from_adjacency(np.eye(3), domains="nodes", diagonal="observed")


def test_combining_a_domain_whose_labels_match_none_of_the_others_warns():
    # Karate's members are numbered 0-33; a table read with string ids doubled the domain in silence.
    table = pd.DataFrame({"who": ["0", "1"], "whom": ["2", "3"], "asks": [1, 0]})
    advice = RelationalData.from_table(table, subject="who", object="whom", value="asks",
                                       domains=("members", "members"))
    with pytest.warns(UserWarning, match=r"^datasets: domain 'members' of argument 1 shares none of its 4 labels "
                                         r"with the datasets before it; their labels differ in type "
                                         r"\(e.g. 0 and '0'\)"):
        both = RelationalData.combine(load_karate_club(), advice)
    assert both.domain("members").size == 38
    same = RelationalData.from_table(table.astype({"who": int, "whom": int}), subject="who", object="whom",
                                     value="asks", domains=("members", "members"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RelationalData.combine(load_karate_club(), same).domain("members").size == 34


def test_a_two_mode_graph_read_as_one_domain_warns():
    # Davis's women and events as one network made every pair within a side an observed non-link, in silence.
    graph = nx.davis_southern_women_graph()
    with pytest.warns(UserWarning, match=r"^graph: its nodes carry networkx's 'bipartite' attribute, of two values"):
        RelationalData.from_networkx(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RelationalData.from_networkx(graph, rows=graph.graph["top"], cols=graph.graph["bottom"])


def test_a_networks_matrix_read_as_two_domains_by_default_warns():
    # An undirected network's adjacency matrix given without domains was read as rows × cols, in silence:
    # each person in two partitions, each pair twice, the diagonal observed (a 300-node network's IRM
    # then ran two partitions of 90,000 cells where one of 44,850 pairs was meant).
    adjacency = np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    with pytest.warns(UserWarning, match=r"^matrix: square and equal to its transpose, read as a relation between "
                                         r"two domains, 'rows' and 'cols' .* domains='nodes'"):
        data = RelationalData.from_adjacency(adjacency)
    assert data.schema.domain_names == ("rows", "cols") and data.relation().n_observed == 9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RelationalData.from_adjacency(adjacency, domains=("rows", "cols"))  # named: meant
        RelationalData.from_adjacency(adjacency, domains="nodes")
        RelationalData.from_adjacency(np.triu(adjacency))  # directed
        one_way = adjacency.astype(float)
        one_way[0, 1] = np.nan  # (1, 0) observed without its mirror
        RelationalData.from_adjacency(one_way)
        RelationalData.from_adjacency(adjacency[:, :2])  # not square
    with pytest.warns(UserWarning, match=r"^matrix: square and equal to its transpose"):  # missing cells mirrored
        RelationalData.from_adjacency(np.where(np.eye(3) > 0, np.nan, adjacency))
