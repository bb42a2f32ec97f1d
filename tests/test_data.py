"""Co-occurrence data: constructors agree, validation names the argument, splits conserve counts."""
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from zoo.data import CoOccurrence, as_numpy_rng

DENSE = np.array([[2, 0, 1, 0], [0, 3, 0, 0], [1, 0, 0, 4]], dtype=float)


def test_constructors_agree():
    from_dense = CoOccurrence.from_dense(DENSE)
    from_sparse = CoOccurrence.from_sparse(sp.csr_matrix(DENSE))
    rows, cols = np.nonzero(DENSE)
    frame = pd.DataFrame({"doc": rows, "word": cols, "n": DENSE[rows, cols]})
    from_frame = CoOccurrence.from_dataframe(frame, row="doc", col="word", count="n")
    pairs = np.repeat(np.stack([rows, cols], 1), DENSE[rows, cols].astype(int), axis=0)
    from_pairs = CoOccurrence.from_pairs(pairs, shape=DENSE.shape)
    for data in (from_dense, from_sparse, from_frame, from_pairs):
        np.testing.assert_array_equal(data.to_dense(), DENSE)
    assert from_dense.total == DENSE.sum() and from_dense.nnz == 5


def test_dataframe_labels_become_names():
    frame = pd.DataFrame({"user": ["b", "a", "a"], "item": ["x", "y", "x"]})
    data = CoOccurrence.from_dataframe(frame, row="user", col="item")
    assert data.row_names == ("a", "b") and data.col_names == ("x", "y")
    np.testing.assert_array_equal(data.to_dense(), [[1, 1], [1, 0]])


def test_duplicates_are_summed_and_weights_allowed():
    data = CoOccurrence.from_pairs([[0, 1], [0, 1], [1, 0]], weights=[0.5, 0.25, 2.0])
    np.testing.assert_allclose(data.to_dense(), [[0, 0.75], [2.0, 0]])
    assert not data.is_integer


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: CoOccurrence.from_dense([[1, -1]]), "matrix"),
        (lambda: CoOccurrence.from_dense([[1, np.nan]]), "matrix"),
        (lambda: CoOccurrence.from_dense([[1, np.inf]]), "matrix"),
        (lambda: CoOccurrence.from_dense(np.zeros((2, 2))), "counts"),
        (lambda: CoOccurrence.from_dense(np.ones(3)), "matrix"),
        (lambda: CoOccurrence.from_pairs([[0, 5]], shape=(2, 2)), "pairs"),
        (lambda: CoOccurrence.from_pairs([[0, -1]]), "pairs"),
        (lambda: CoOccurrence.from_pairs([[0, 1]], weights=[1, 2]), "weights"),
        (lambda: CoOccurrence([0, 1], [0], [1, 1], (2, 2)), "counts"),
        (lambda: CoOccurrence([0], [0], [1], (0, 2)), "shape[0]"),
        (lambda: CoOccurrence.from_dense([[1, 2]], row_names=["a", "b"]), "row_names"),
        (lambda: CoOccurrence.from_dense([[1, 2]]).split_tokens([0.5, 0.4], rng=0), "fractions"),
        (lambda: CoOccurrence.from_dense([[1, 2]]).split_tokens([1.5, -0.5], rng=0), "fractions"),
    ],
)
def test_bad_input_names_the_argument(build, argument):
    with pytest.raises(ValueError, match=f"^{re.escape(argument)}"):
        build()


def test_counts_beyond_the_working_float_are_refused_before_any_fit(x64):
    import jax.numpy as jnp

    tiny = CoOccurrence.from_dense(DENSE * 1e-40)  # lost in float32 sums: NaN parameters, or numpy's All-NaN error
    with pytest.raises(ValueError, match=r"^counts: the smallest count 1e-40 is too near the smallest float32 number"):
        tiny.to_arrays(jnp.float32)
    with pytest.raises(ValueError, match="^counts: the smallest count"):
        tiny.to_sharded_arrays(2, jnp.float32)
    tiny.to_arrays(jnp.float64)  # float64 holds them
    huge = CoOccurrence.from_dense(DENSE * 1e305)
    with pytest.raises(ValueError, match=r"^counts: total .* overflows float64 arithmetic .*; rescale the counts$"):
        huge.to_arrays(jnp.float64)  # no advice to enable the float64 it already has


def test_names_from_a_dataframe_and_names_that_are_not_a_sequence():
    frame = pd.DataFrame(DENSE, index=["d1", "d2", "d3"], columns=list("abcd"))
    named = CoOccurrence.from_dense(frame)
    assert named.row_names == ("d1", "d2", "d3") and named.col_names == ("a", "b", "c", "d")
    assert CoOccurrence.from_dense(pd.DataFrame(DENSE)).row_names is None  # pandas' 0, 1, ... name nothing
    assert CoOccurrence.from_dense(frame, row_names=["x", "y", "z"]).row_names == ("x", "y", "z")
    for names in (4, "abcd"):  # a string is not four names
        with pytest.raises(TypeError, match="^col_names: expected a sequence of 4 names"):
            CoOccurrence.from_dense(DENSE, col_names=names)
    with pytest.raises(TypeError, match="^matrix: a scipy.sparse csr_matrix; use CoOccurrence.from_sparse"):
        CoOccurrence.from_dense(sp.csr_matrix(DENSE))


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match="^matrix"):
        CoOccurrence.from_sparse(DENSE)
    with pytest.raises(TypeError, match="^frame"):
        CoOccurrence.from_dataframe(DENSE, row="a", col="b")
    with pytest.raises(TypeError, match="^rng"):
        as_numpy_rng("seed")
    # The constructor itself takes the COO arrays; given a matrix it names the one that takes that.
    with pytest.raises(TypeError, match=r"^cols, counts, shape: missing .*CoOccurrence.from_sparse"):
        CoOccurrence(sp.csr_matrix(DENSE))
    with pytest.raises(TypeError, match=r"^cols, counts, shape: missing .*CoOccurrence.from_dense"):
        CoOccurrence(DENSE)
    with pytest.raises(TypeError, match=r"^shape: missing \(the CoOccurrence constructor takes the COO arrays"):
        CoOccurrence([0], [1], [2.0])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=12, max_size=12),
    st.floats(0.05, 0.9),
    st.integers(0, 2**31 - 1),
)
def test_token_split_conserves_every_event(cells, fraction, seed):
    counts = np.asarray(cells, dtype=float).reshape(3, 4)
    counts[0, 0] += 1  # never empty
    data = CoOccurrence.from_dense(counts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a tiny fraction may leave a part empty: said below
        parts = data.split_tokens([fraction, 1 - fraction], rng=seed)
    total = sum(part.to_dense() for part in parts if part is not None)
    np.testing.assert_array_equal(total, counts)
    for part in parts:
        assert part is None or (part.shape == data.shape and part.is_integer)


def test_token_split_proportions_and_real_weights():
    rng = np.random.default_rng(3)
    counts = rng.poisson(3.0, size=(40, 50)).astype(float) + 0.5
    data = CoOccurrence.from_dense(counts)
    train, valid, test = data.split_tokens([0.8, 0.1, 0.1], rng=7)
    np.testing.assert_allclose(train.to_dense() + valid.to_dense() + test.to_dense(), counts)
    assert abs(train.total / data.total - 0.8) < 0.02
    again = data.split_tokens([0.8, 0.1, 0.1], rng=7)[0]
    np.testing.assert_array_equal(again.to_dense(), train.to_dense())


def test_row_split_partitions_rows():
    rng = np.random.default_rng(0)
    data = CoOccurrence.from_dense(rng.poisson(2.0, size=(30, 8)) + 1)
    (train, train_rows), (test, test_rows) = data.split_rows([0.7, 0.3], rng=1)
    assert sorted(np.concatenate([train_rows, test_rows]).tolist()) == list(range(30))
    np.testing.assert_array_equal(test.to_dense(), data.to_dense()[test_rows])


def test_device_arrays_are_csr_ordered():
    data = CoOccurrence.from_dense(DENSE)
    arrays = data.to_arrays()
    assert arrays.shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(arrays.indptr), [0, 2, 3, 64])
    np.testing.assert_array_equal(np.asarray(data.to_arrays(pad=False).indptr), [0, 2, 3, 5])
    np.testing.assert_allclose(np.asarray(arrays.row_sums), DENSE.sum(1))
    assert data.transpose().shape == (4, 3)


def _cells_by_column(rows, cols, counts):
    order = np.lexsort((rows, cols))
    return rows[order], cols[order], counts[order]


@pytest.mark.parametrize("pad", [True, False])
def test_device_arrays_hold_the_same_cells_in_csc_order(pad):
    rng = np.random.default_rng(4)
    dense = rng.poisson(0.7, (9, 13)) * (rng.random((9, 13)) < 0.6)
    dense[:, 5] = 0  # an empty column
    arrays = CoOccurrence.from_dense(dense).to_arrays(pad=pad)
    rows, cols, counts = (np.asarray(a) for a in (arrays.rows, arrays.cols, arrays.counts))
    col_indptr = np.asarray(arrays.col_indptr)
    assert col_indptr.shape == (14,) and col_indptr[-1] == rows.shape[0]
    col_of_cell = np.repeat(np.arange(13), np.diff(col_indptr))
    expected = _cells_by_column(rows, cols, counts)
    np.testing.assert_array_equal(np.asarray(arrays.col_rows), expected[0])
    np.testing.assert_array_equal(col_of_cell, expected[1])
    np.testing.assert_array_equal(np.asarray(arrays.col_counts), expected[2])
    np.testing.assert_allclose(np.bincount(col_of_cell, np.asarray(arrays.col_counts), 13), dense.sum(0))


def test_sharded_blocks_hold_their_own_cells_in_csc_order():
    rng = np.random.default_rng(5)
    dense = rng.poisson(0.7, (12, 7))
    blocks = CoOccurrence.from_dense(dense).to_sharded_arrays(3)
    total = np.zeros(7)
    for b in range(3):
        rows, cols, counts = (np.asarray(a[b]) for a in (blocks.rows, blocks.cols, blocks.counts))
        col_of_cell = np.repeat(np.arange(7), np.diff(np.asarray(blocks.col_indptr[b])))
        expected = _cells_by_column(rows, cols, counts)
        np.testing.assert_array_equal(np.asarray(blocks.col_rows[b]), expected[0])
        np.testing.assert_array_equal(col_of_cell, expected[1])
        total += np.bincount(col_of_cell, np.asarray(blocks.col_counts[b]), 7)
    np.testing.assert_allclose(total, dense.sum(0))


def test_pandas_nullable_columns_and_sparse_matrices_are_read_as_numbers():
    # convert_dtypes() gives Int64 / Float64 / boolean columns, whose np.asarray is of dtype object.
    from inference._validation import as_float_array
    from zoo.relational import RelationalData

    nullable = pd.DataFrame(DENSE).convert_dtypes()
    assert str(nullable.dtypes.iloc[0]) == "Int64"
    np.testing.assert_array_equal(CoOccurrence.from_dense(nullable).to_dense(), DENSE)
    np.testing.assert_array_equal(as_float_array("data", nullable[1]), DENSE[:, 1])
    with pytest.raises(ValueError, match="^data: contains NaN"):  # a missing value is named, not a dtype
        as_float_array("data", nullable.astype("Float64").mask(nullable == 3))
    np.testing.assert_array_equal(as_float_array("data", sp.csr_matrix(DENSE)), DENSE)
    links = (DENSE > 0).astype(int)
    expected = RelationalData.from_adjacency(links)
    for matrix in (sp.csr_matrix(links), pd.DataFrame(links).convert_dtypes()):
        relation = RelationalData.from_adjacency(matrix).relations[0]
        assert repr(relation) == repr(expected.relations[0])
        np.testing.assert_array_equal(relation.entries, expected.relations[0].entries)
        np.testing.assert_array_equal(relation.values, expected.relations[0].values)
    with pytest.raises(TypeError, match="^matrix: expected numbers"):
        RelationalData.from_adjacency(pd.DataFrame([["a", "b"], ["c", "d"]]))
    # A masked array's mask was dropped: its masked entries are missing cells, or named where none may be.
    masked = np.ma.masked_array(links, mask=np.eye(*links.shape, dtype=bool))
    relation = RelationalData.from_adjacency(masked).relations[0]
    assert relation.entries.shape[0] == links.size - 3
    with pytest.raises(ValueError, match="^matrix: contains NaN"):
        CoOccurrence.from_dense(np.ma.masked_array(DENSE, mask=DENSE == 0))


def test_non_numeric_columns_of_a_dataframe_are_named():
    from inference._validation import as_float_array

    frame = pd.DataFrame(DENSE, columns=["a", "b", "c", "d"])
    with pytest.raises(TypeError, match=r"^data: expected numbers, got dtype object \(non-numeric column: "
                                        r"'kind' \(object\)\)$"):
        as_float_array("data", frame.assign(kind=["x", "y", "z"]))
    many = frame.assign(**{f"text{i}": ["x", "y", "z"] for i in range(4)}).astype({"text1": "category"})
    with pytest.raises(TypeError, match=r"^data: expected numbers, got dtype object \(non-numeric columns: "
                                        r"'text0' \(object\), 'text1' \(category\), 'text2' \(object\), "
                                        r"\.\.\. \(4 in all\)\)$"):
        as_float_array("data", many)
    with pytest.raises(TypeError, match=r"^data: expected numbers, got dtype <U1$"):  # an array: no columns to name
        as_float_array("data", np.array([["x", "y"]]))


def test_dataframes_are_put_in_the_order_of_the_fitted_feature_names():
    from inference._validation import feature_names, in_fitted_order

    frame = pd.DataFrame(DENSE, columns=["a", "b", "c", "d"])
    fitted = feature_names(frame)
    assert fitted == ("a", "b", "c", "d")
    assert feature_names(DENSE) is None and feature_names(pd.DataFrame(DENSE)) is None  # numbered columns
    assert feature_names(pd.DataFrame(DENSE, columns=["a", "b", 2, "d"])) is None  # as scikit-learn: all strings
    assert feature_names(frame["a"]) is None  # a Series has no columns
    np.testing.assert_array_equal(in_fitted_order("x", frame[["d", "b", "a", "c"]], fitted).to_numpy(), DENSE)
    assert list(in_fitted_order("x", frame[["d", "b", "a", "c"]], fitted).columns) == list(fitted)
    for by_position in (DENSE[:, ::-1], pd.DataFrame(DENSE[:, ::-1])):  # no feature names: taken as given
        assert in_fitted_order("x", by_position, fitted) is by_position
    assert in_fitted_order("x", frame, None) is frame  # a fit without feature names
    with pytest.raises(ValueError, match=r"^x: its column names are not the feature names of the fit \(missing "
                                         r"'c'; unexpected 'e'\); those of the fit are 'a', 'b', 'c', 'd'$"):
        in_fitted_order("x", frame.rename(columns={"c": "e"}), fitted)
    with pytest.raises(ValueError, match=r"^x: .*\(missing 'd'\); those of train_features are"):
        in_fitted_order("x", frame[["a", "b", "c"]], fitted, "train_features")
    with pytest.raises(ValueError, match=r"^x: .*\(repeated 'a'\)"):
        in_fitted_order("x", frame[["a", "a", "b", "c", "d"]], fitted)
    wide = [f"f{i}" for i in range(7)]
    with pytest.raises(ValueError, match=r"^x: .*; unexpected 'f0', 'f1', 'f2', 'f3', 'f4', \.\.\. \(7 in all\)\)"):
        in_fitted_order("x", pd.DataFrame(np.zeros((1, 7)), columns=wide), ("a",))


@pytest.mark.parametrize("given, constructor", [
    (sp.csr_matrix(DENSE), "from_sparse(data)"), (DENSE, "from_dense(data)"),
    (pd.DataFrame(DENSE), "from_dataframe(data, row=..., col=...)")])
def test_a_matrix_where_co_occurrences_are_needed_is_told_how_to_make_them(given, constructor):
    import jax

    from inference import tempered_em
    from zoo.dyadic import Aspect, ClusterAbstraction, OneSided, TwoSided

    for model in (Aspect(2), OneSided(2), TwoSided(2, 2), ClusterAbstraction(depth=1)):
        with pytest.raises(TypeError, match=rf"^data: expected a zoo.data.CoOccurrence, got {type(given).__name__} "
                                            rf"\(.*CoOccurrence.{re.escape(constructor)}"):
            tempered_em(model, given, key=jax.random.key(0))


def test_a_part_that_receives_no_events_is_said():
    data = CoOccurrence.from_dense([[1.0, 0.0], [0.0, 1.0]])
    with pytest.warns(UserWarning, match=r"^fractions: part 1 \(probability 0.001\) received none of the 2 events"):
        train, valid = data.split_tokens([0.999, 0.001], rng=0)
    assert valid is None and train.total == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a part asked to be empty is not news
        assert data.split_tokens([1.0, 0.0], rng=0)[1] is None


def test_token_lists_are_counted_by_from_tokens_and_refused_by_from_pairs_naming_it():
    documents = [["b", "a", "b"], [], ["c", "a"]]
    data = CoOccurrence.from_tokens(documents, row_names=["x", "y", "z"])
    assert data.col_names == ("a", "b", "c") and data.row_names == ("x", "y", "z")
    np.testing.assert_array_equal(data.to_dense(), [[1, 2, 0], [0, 0, 0], [1, 0, 1]])
    for pairs in ([["the", "cat", "sat"], ["a", "dog"]], [["the", "cat"], ["a", "dog"]]):
        with pytest.raises(ValueError, match=r"^pairs: .*CoOccurrence\.from_tokens\(documents\)"):
            CoOccurrence.from_pairs(pairs)
    with pytest.raises(TypeError, match=r"^documents\[0\]: is a string, not a list of tokens; split it first"):
        CoOccurrence.from_tokens(["the cat sat"])
    with pytest.raises(ValueError, match="^documents: hold no tokens"):
        CoOccurrence.from_tokens([[], []])
