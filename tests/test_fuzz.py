"""Fuzzing every public constructor and fit function with bad input.

Each generated case must be rejected with a ``ValueError`` or ``TypeError`` whose message starts
with the name of the offending argument, raised before any JAX code runs (no frame of the
traceback lies inside ``jax``). Every case is counted; each test checks that it ran the number of
cases it declares (derandomised, so stable), and the last test that the declared numbers sum to at
least 1,000 — which holds however pytest-xdist spreads the tests. Bad input fails fast, so the whole
file takes seconds. Gaps found in modules owned by others are kept as strict xfails.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import functools
import io
import json
import math
import os
import re
import signal
import tempfile
import traceback
import zipfile
from pathlib import Path
from typing import Any, Callable

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference import concentration, diagnostics, neal, partitions
from inference.chains import ChainResult, sample_chains
from inference.components import sample_log_gamma
from inference.em import EMResult, tempered_em
from inference.enumerated import EnumeratedEM
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM
from zoo import baselines, cli, metrics, registry
from zoo.data import CoOccurrence, as_numpy_rng
from zoo.datasets import read_edge_list, read_ldac, read_matrix_market
from zoo.dyadic.aspect import Aspect, AspectParams
from zoo.dyadic.cluster_abstraction import ClusterAbstraction, anneal_tree
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.two_sided import TwoSided
from zoo.finite_mixture import GaussianMixture, gaussian_mixture_program
from zoo.io import load_chains, load_checkpoint, load_result, save_chains, save_checkpoint, save_result
from zoo.dirichlet.families import beta_bernoulli, dirichlet_multinomial, normal_gamma
from zoo.dirichlet.known_precision import normal_known_precision
from zoo.dirichlet.mixture import INITS as DP_INITS, DPMixture, stick_breaking_weights
from zoo.dirichlet.supervised import SupervisedDP
from zoo.dirichlet.ties import tied_features
from zoo.relational.data import Domain, RelationalData, Relation
from zoo.relational.evaluation import cross_validated_log_loss, fold_cases, held_out_cases, leave_one_out_log_loss
from zoo.relational.infinite import InfiniteRelational, init as irm_init
from zoo.relational.latent_class import LatentClassRelational, LRMParams, LRMResult
from zoo.report import write_report
from zoo.sklearn import (AspectEstimator, ClusterAbstractionEstimator, DPMixtureEstimator, GaussianMixtureEstimator,
                         SupervisedDPEstimator,
                         OneSidedEstimator, TwoSidedEstimator, jax_key, make_schedule)

CASES = {"count": 0}
#: Cases each fuzz test is known to run (derandomised, so the numbers are stable); each test checks
#: its own number, so the total holds however the tests are spread over pytest-xdist workers.
MINIMA: dict[str, int] = {}
MINIMUM_CASES = 1000
# Derandomised: the same cases every run, so a failure is reproducible and the count is stable.
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _inside_jax(filename: str) -> bool:
    parts = Path(filename).parts
    return "jax" in parts or "jaxlib" in parts


def rejects(call: Callable[[], Any], *names: str) -> None:
    """``call()`` raises ValueError/TypeError starting with one of ``names``, outside JAX."""
    CASES["count"] += 1
    try:
        result = call()
    except (ValueError, TypeError) as error:
        message = str(error)
        assert message.startswith(names), f"message {message!r} does not start with {names}"
        inside = [frame.filename for frame in traceback.extract_tb(error.__traceback__) if _inside_jax(frame.filename)]
        assert not inside, f"{message!r} was raised inside JAX ({inside[-1]})"
        return
    pytest.fail(f"bad input accepted (expected an error naming {names}); returned {result!r:.200}")


def beyond_working_range(magnitude: float) -> bool:
    """Whether ``magnitude`` comes within a factor 1e4 of the largest float of the working dtype.

    Some fuzzed values only overflow float32 arithmetic (counts of 1e38, features of 1e20 whose
    squares the M-step sums): under x64 they are legitimate data. They lie many orders of
    magnitude from either boundary, so the exact headroom the library keeps does not matter.
    """
    return magnitude > float(np.finfo(jnp.result_type(float)).max) / 1e4


def accepts_in_working_range(call: Callable[[], Any]) -> None:
    """``call()`` fits data that is valid in the working dtype (one counted case): finite parameters."""
    CASES["count"] += 1
    result = call()
    leaves = jax.tree_util.tree_leaves(result.params)
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in leaves), f"non-finite fit {result!r:.200}"


def counted(minimum: int) -> Callable:
    """Decorate a hypothesis test: record that it runs at least ``minimum`` cases, and check it."""
    def decorate(test: Callable) -> Callable:
        MINIMA[test.__name__] = minimum

        def run_and_count() -> None:
            before = CASES["count"]
            test()
            assert CASES["count"] - before >= minimum, f"{test.__name__} ran {CASES['count'] - before} cases"

        run_and_count.__name__, run_and_count.__doc__ = test.__name__, test.__doc__
        return run_and_count
    return decorate


def corrupt(valid: dict[str, Any], bad: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """(argument name, keyword arguments) with exactly one argument replaced by a bad value."""
    names = sorted(bad)
    return st.sampled_from(names).flatmap(lambda name: bad[name].map(lambda value: (name, {**valid, name: value})))


# ----------------------------------------------------------------------------- bad values
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
NOT_NUMBERS = st.sampled_from(["1.0", None, b"1", [1.0, 2.0], {"value": 1}, 1 + 2j, object()])
NOT_INTEGERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.sampled_from(["3", None, [3], 3 + 0j, object()])
)


def ints_below(minimum: int) -> st.SearchStrategy:
    return st.one_of(st.integers(max_value=minimum - 1), NOT_INTEGERS)


def ints_outside(minimum: int, maximum: int) -> st.SearchStrategy:
    return st.one_of(st.integers(max_value=minimum - 1), st.integers(min_value=maximum + 1), NOT_INTEGERS)


def reals_below(low: float, *, open_: bool = False) -> st.SearchStrategy:
    below = st.floats(max_value=low, exclude_max=not open_, allow_nan=False, allow_infinity=False)
    return st.one_of(below, NON_FINITE, NOT_NUMBERS)


def reals_outside(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> st.SearchStrategy:
    below = st.floats(max_value=low, exclude_max=not low_open, allow_nan=False, allow_infinity=False)
    above = st.floats(min_value=high, exclude_min=not high_open, allow_nan=False, allow_infinity=False)
    return st.one_of(below, above, NON_FINITE, NOT_NUMBERS)


def not_one_of(choices: tuple[str, ...]) -> st.SearchStrategy:
    return st.one_of(st.text(max_size=8).filter(lambda text: text not in choices), st.sampled_from([None, 1, b"xla"]))


def bad_counts(shape: tuple[int, ...]) -> st.SearchStrategy:
    """Arrays of the given shape whose entries are not non-negative finite numbers (one poisoned
    entry, or a wrong dtype), or arrays with one axis too many."""
    size = int(np.prod(shape))
    poison = st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -1e-9])
    return st.one_of(
        st.tuples(st.integers(0, size - 1), poison).map(
            lambda spec: np.where(np.arange(size) == spec[0], spec[1], 1.0).reshape(shape)),
        st.just(np.full(shape, "1")),
        st.just(np.full(shape, 1 + 1j)),
        st.just(np.full(shape, {"count": 1}, dtype=object)),
        st.just(np.ones(shape + (2,))),
    )


def bad_index_vectors(length: int, upper: int) -> st.SearchStrategy:
    """Vectors of ``length`` indices outside [0, upper) or not whole numbers."""
    return st.one_of(
        st.tuples(st.integers(0, length - 1),
                  st.one_of(st.integers(-10**6, -1), st.integers(upper, upper + 10**6))).map(
            lambda spec: np.where(np.arange(length) == spec[0], spec[1], 0)),
        st.just(np.full(length, 0.5)),
        st.just(np.array([np.nan] * length)),
        st.just(np.array(["0"] * length)),
        st.just(np.zeros((length, 2), int)),
    )


BAD_LABELS = st.one_of(
    st.sampled_from([None, "abc", b"abc", 3, 2.5]),
    st.just(np.zeros((2, 3))),
    st.just([]),
    st.just(np.array([])),
    st.just([1, None, 2]),
    st.just([1.0, math.nan, 2.0]),
    st.just([[1], [2], [3]]),
)


# ----------------------------------------------------------------------------- data containers
COO_VALID = {"rows": np.array([0, 1, 1]), "cols": np.array([1, 0, 2]), "counts": np.array([1.0, 2.0, 3.0]),
             "shape": (2, 3)}
SHAPES = st.one_of(
    st.sampled_from([None, "2x3", 6, (2,), (2, 3, 1), [2.5, 3], (0, 3), (2, -1), (True, 3), (2, None)]),
    st.tuples(st.integers(max_value=0), st.integers(1, 5)),
)


@counted(120)
@settings(FUZZ, max_examples=120)
@given(corrupt(COO_VALID, {
    "rows": bad_index_vectors(3, 2), "cols": bad_index_vectors(3, 3), "counts": bad_counts((3,)),
    "shape": SHAPES,
}))
def test_co_occurrence_constructor(case):
    name, kwargs = case
    names = (name, "counts") if name in ("rows", "cols") else (name,)  # length mismatches name counts
    rejects(lambda: CoOccurrence(**kwargs), *names)


@counted(40)
@settings(FUZZ, max_examples=60)
@given(st.one_of(
    bad_counts((2, 3)),
    st.sampled_from([np.zeros((2, 3)), np.zeros((0, 3)), np.ones(4), np.ones((2, 2, 2)), "matrix", None]),
))
def test_co_occurrence_from_dense(matrix):
    rejects(lambda: CoOccurrence.from_dense(matrix), "matrix", "counts")


@counted(8)
@settings(FUZZ, max_examples=40)
@given(st.one_of(
    st.sampled_from([-1.0, math.nan, math.inf]).map(lambda value: sp.csr_matrix(np.array([[1.0, value], [0.0, 2.0]]))),
    st.sampled_from([np.ones((2, 2)), [[1, 2]], None, "sparse", sp.csr_matrix((2, 3))]),
))
def test_co_occurrence_from_sparse(matrix):
    rejects(lambda: CoOccurrence.from_sparse(matrix), "matrix", "counts")


@counted(26)
@settings(FUZZ, max_examples=60)
@given(corrupt({"pairs": np.array([[0, 1], [1, 0]]), "weights": None, "shape": None}, {
    "pairs": st.sampled_from([np.zeros((0, 2), int), np.array([0, 1]), np.array([[0, 1, 2]]), np.array([[-1, 0]]),
                              np.array([[0.5, 1.0]]), np.array([["a", "b"]]), np.array([[np.nan, 0.0]])]),
    "weights": bad_counts((2,)),
    "shape": st.sampled_from([(1, 1), (2,), "2x2", (0, 2), (2, 2.5)]),
}))
def test_co_occurrence_from_pairs(case):
    name, kwargs = case
    rejects(lambda: CoOccurrence.from_pairs(kwargs["pairs"], weights=kwargs["weights"], shape=kwargs["shape"]),
            name, "pairs")


FRAME = pd.DataFrame({"doc": ["a", "b", "b"], "word": ["x", "y", "x"], "n": [1.0, 2.0, 3.0]})


@counted(9)
@settings(FUZZ, max_examples=40)
@given(st.sampled_from([
    ("frame", dict(frame=FRAME.to_dict(), row="doc", col="word")),
    ("frame", dict(frame=FRAME.iloc[:0], row="doc", col="word")),
    ("frame", dict(frame=FRAME.assign(doc=["a", None, "b"]), row="doc", col="word")),
    ("row", dict(frame=FRAME, row="missing", col="word")),
    ("col", dict(frame=FRAME, row="doc", col="missing")),
    ("count", dict(frame=FRAME, row="doc", col="word", count="missing")),
    ("count", dict(frame=FRAME.assign(n=[1.0, -2.0, 3.0]), row="doc", col="word", count="n")),
    ("count", dict(frame=FRAME.assign(n=[1.0, np.nan, 3.0]), row="doc", col="word", count="n")),
    ("count", dict(frame=FRAME.assign(n=["1", "2", "3"]), row="doc", col="word", count="n")),
]))
def test_co_occurrence_from_dataframe(case):
    name, kwargs = case
    rejects(lambda: CoOccurrence.from_dataframe(**kwargs), name)


DATA = CoOccurrence.from_dense(np.arange(12).reshape(4, 3) % 5)
BAD_FRACTIONS = st.one_of(
    st.sampled_from([[1.0], [0.5, 0.6], [0.5, -0.5, 1.0], [math.nan, 1.0], [], [[0.5, 0.5]], "0.5,0.5", None,
                     [0.2, math.inf]]),
    st.lists(st.floats(0.01, 0.4), min_size=2, max_size=4),  # never sums to 1 exactly
)
BAD_RNG = st.sampled_from([-1, "seed", 1.5, None, True, [1, 2], object()])


@counted(80)
@settings(FUZZ, max_examples=80)
@given(st.booleans(), corrupt({"fractions": [0.5, 0.5], "rng": 0}, {"fractions": BAD_FRACTIONS, "rng": BAD_RNG}))
def test_splits(by_rows, case):
    name, kwargs = case
    split = DATA.split_rows if by_rows else DATA.split_tokens
    rejects(lambda: split(kwargs["fractions"], rng=kwargs["rng"]), name)


@counted(30)
@settings(FUZZ, max_examples=30)
@given(st.one_of(
    st.sampled_from([("row_indices", "select_rows", [5]), ("row_indices", "select_rows", [-1]),
                     ("row_indices", "select_rows", [0.5]), ("row_indices", "select_rows", "0"),
                     ("counts", "with_counts", np.full(DATA.nnz, -1.0)), ("counts", "with_counts", np.zeros(DATA.nnz)),
                     ("counts", "with_counts", np.ones(DATA.nnz + 1))]),
    ints_below(1).map(lambda value: ("n_shards", "to_sharded_arrays", value)),
))
def test_co_occurrence_methods(case):
    name, method, value = case
    rejects(lambda: getattr(DATA, method)(value), name)


@counted(7)
@settings(FUZZ, max_examples=20)
@given(BAD_RNG)
def test_as_numpy_rng(value):
    rejects(lambda: as_numpy_rng(value), "rng")


# ----------------------------------------------------------------------------- schedules and models
@counted(150)
@settings(FUZZ, max_examples=150)
@given(st.one_of(
    corrupt({}, {"beta": reals_outside(0.0, 1.0, low_open=True), "patience": ints_below(1),
                 "min_improvement": reals_below(0.0)}).map(lambda case: (FixedBeta, case)),
    corrupt({}, {"eta": reals_outside(0.0, 1.0, low_open=True, high_open=True),
                 "beta_min": reals_outside(0.0, 1.0, low_open=True), "patience": ints_below(1),
                 "min_improvement": reals_below(0.0)}).map(lambda case: (TemperedEM, case)),
    corrupt({}, {"beta_start": reals_outside(0.0, 1.0, low_open=True), "growth": reals_below(1.0, open_=True),
                 "max_iter_per_level": ints_below(1)}).map(lambda case: (DeterministicAnnealing, case)),
))
def test_schedules(case):
    schedule, (name, kwargs) = case
    rejects(lambda: schedule(**kwargs), name)


@counted(100)
@settings(FUZZ, max_examples=100)
@given(st.one_of(
    corrupt({"n_classes": 2}, {"n_classes": ints_below(1), "update": not_one_of(("simultaneous", "alternating")),
                               "backend": not_one_of(("auto", "xla", "numba"))}).map(lambda case: (Aspect, case)),
    corrupt({"n_classes": 2}, {"n_classes": ints_below(1), "variance_floor": reals_below(0.0, open_=True)}).map(
        lambda case: (GaussianMixture, case)),
    corrupt({"program": gaussian_mixture_program}, {
        "program": st.sampled_from([None, 3, "program"]), "max_plate_nesting": ints_below(0),
        "learning_rate": reals_below(0.0, open_=True), "m_step_iters": ints_below(1),
        "init_scale": reals_below(0.0), "static_kwargs": st.sampled_from([3, (("a",),), "abc"]),
    }).map(lambda case: (EnumeratedEM, case)),
))
def test_model_constructors(case):
    model, (name, kwargs) = case
    rejects(lambda: model(**kwargs), name)


ASPECT = Aspect(2, backend="xla")
ASPECT_PARAMS = AspectParams(jnp.full((2,), 0.5), jnp.full((4, 2), 0.25), jnp.full((3, 2), 1.0 / 3.0))


@counted(60)
@settings(FUZZ, max_examples=60)
@given(corrupt({"data": DATA, "n_iter": 5, "beta": 1.0}, {
    "data": st.sampled_from([DATA.to_dense(), None, "data", CoOccurrence.from_dense(np.ones((2, 4)))]),
    "n_iter": ints_below(1),
    "beta": reals_outside(0.0, 1.0, low_open=True),
}))
def test_aspect_fold_in(case):
    name, kwargs = case
    rejects(lambda: ASPECT.fold_in(ASPECT_PARAMS, kwargs["data"], n_iter=kwargs["n_iter"], beta=kwargs["beta"]), name)


TRAIN, VALID = DATA.split_tokens([0.7, 0.3], rng=0)
EM_VALID = {"model": ASPECT, "data": TRAIN, "key": jax.random.key(0), "valid": None, "schedule": None,
            "n_restarts": 1, "max_iter": 5, "tol": 1e-6, "init": None, "devices": None, "time_budget": None,
            "segment": 25}


@counted(150)
@settings(FUZZ, max_examples=150)
@given(st.one_of(
    corrupt(EM_VALID, {
        "n_restarts": ints_below(1), "max_iter": ints_below(1), "tol": reals_below(0.0), "segment": ints_below(1),
        "time_budget": reals_below(0.0).filter(lambda value: value is not None),
        "schedule": st.sampled_from(["tempered", 1.0, FixedBeta, object()]),
        "key": st.just(None),
        "data": st.sampled_from([DATA.to_dense(), None, [[1, 2]], "counts",
                                 CoOccurrence.from_dense([[1e38, 1.0], [1.0, 1e38]])]),
        "valid": st.sampled_from([CoOccurrence.from_dense(np.ones((2, 2)))]),
        "devices": st.sampled_from([True, 0, -1, 10_000, [], "cpu", ["cpu"], 2.5]),
    }),
    st.just(("valid", {**EM_VALID, "schedule": TemperedEM()})),  # tempered EM needs validation data
    st.just(("n_restarts", {**EM_VALID, "init": ASPECT_PARAMS, "n_restarts": 2})),
))
def test_tempered_em(case):
    name, kwargs = case
    data = kwargs["data"]
    if name == "data" and isinstance(data, CoOccurrence) and not beyond_working_range(data.total):
        accepts_in_working_range(lambda: tempered_em(**kwargs))  # 1e38 counts are valid float64 data
        return
    names = (name, "counts") if name == "data" else (name,)  # counts beyond the float32 range
    rejects(lambda: tempered_em(**kwargs), *names)


@counted(50)
@settings(FUZZ, max_examples=50)
@given(st.one_of(
    bad_counts((4, 2)).filter(lambda values: values.dtype.kind != "f" or values.ndim != 2 or not np.isfinite(values).all()
                              ).map(lambda values: ("data", values)),
    st.sampled_from([1e20, -1e30, 1e300]).map(lambda big: ("big", big)),
    st.sampled_from([("data", np.ones(5)), ("data", np.ones((0, 2))), ("data", "points"), ("data", None),
                     ("n_classes", np.ones((1, 2)))]),
))
def test_gaussian_mixture_data(case):
    name, points = case
    if name == "big":
        # One feature value whose square the M-step sums: it overflows float32 and, beyond about
        # 1e152, float64 too; below that it is valid float64 data.
        name, big, points = "data", points, np.array([[0.0, 1.0], [points, 2.0], [1.0, 3.0]])
        if not beyond_working_range(big * big):
            accepts_in_working_range(lambda: tempered_em(GaussianMixture(2), points, key=jax.random.key(0),
                                                         max_iter=3))
            return
    rejects(lambda: tempered_em(GaussianMixture(2), points, key=jax.random.key(0), max_iter=3), name)


# ----------------------------------------------------------------------------- readers
READER_DIR = Path(tempfile.mkdtemp(prefix="latentzoo-fuzz-"))
MTX_HEADER = "%%MatrixMarket matrix coordinate real general\n2 3 2\n"


def _write(name: str, text: str) -> Path:
    path = READER_DIR / name
    path.write_text(text)
    return path


@counted(19)
@settings(FUZZ, max_examples=40)
@given(st.one_of(
    st.sampled_from(["-1", "nan", "inf", "-inf"]).map(lambda value: ("mtx", MTX_HEADER + f"1 1 {value}\n2 3 1\n")),
    st.sampled_from(["", "not a matrix\n", MTX_HEADER + "3 1 1\n1 2 1\n", MTX_HEADER + "1 1 x\n2 2 1\n",
                     "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 0\n"]).map(lambda text: ("mtx", text)),
    st.sampled_from(["2 0:1 1:x\n", "1 -1:2\n", "3 0:1\n", "1 0:-2\n", "1 0:nan\n", "1 5:1\n", "abc\n", "",
                     "1 0:1:2\n", "1.5 0:1\n"]).map(lambda text: ("ldac", text)),
))
def test_count_file_readers(case):
    fmt, text = case
    CASES["files"] = CASES.get("files", 0) + 1
    path = _write(f"case{CASES['files']}.{fmt}", text)
    reader = read_matrix_market if fmt == "mtx" else lambda path: read_ldac(path, n_cols=3)
    rejects(lambda: reader(path), "path")


@counted(15)
@settings(FUZZ, max_examples=30)
@given(st.sampled_from([read_matrix_market, read_ldac, read_edge_list]),
       st.sampled_from([None, 3, 2.5, ["a.mtx"], b"\x00"]))
def test_reader_paths(reader, path):
    rejects(lambda: reader(path), "path")


@counted(20)
@settings(FUZZ, max_examples=20)
@given(ints_below(1).filter(lambda value: value is not None))
def test_ldac_vocabulary_size(n_cols):
    path = _write("valid.ldac", "2 0:1 2:3\n1 1:2\n")
    rejects(lambda: read_ldac(path, n_cols=n_cols), "n_cols")


@counted(8)
@settings(FUZZ, max_examples=30)
@given(st.sampled_from([
    ("source,target\n", {}, "path"),
    ("a,b\nx,y\n", {}, "source"),
    ("source,b\nx,y\n", {}, "target"),
    ("source,target\nx,y\n", {"weight": "w"}, "weight"),
    ("source,target,w\nx,y,-1\n", {"weight": "w"}, "weight"),
    ("source,target,w\nx,y,nan\n", {"weight": "w"}, "weight"),
    ("source,target,w\nx,y,abc\n", {"weight": "w"}, "weight"),
    ("source,target\nx,\n", {}, "path"),
]))
def test_edge_list_reader(case):
    text, options, name = case
    CASES["files"] = CASES.get("files", 0) + 1
    path = _write(f"case{CASES['files']}.csv", text)
    rejects(lambda: read_edge_list(path, **options), name)


# ----------------------------------------------------------------------------- estimators
X_COUNTS = np.arange(12, dtype=float).reshape(4, 3) % 5
BAD_X = st.one_of(
    bad_counts((4, 3)),
    st.sampled_from([np.ones(5), np.ones((0, 3)), np.ones((2, 2, 2)), "X", None, [[1, 2], [3]], [["1", "2"]]]),
)
CONSTANT_FEATURE = np.column_stack([np.arange(8.0), np.ones(8)])  # no spread for the variance floor


@counted(120)
@settings(FUZZ, max_examples=120)
@given(st.sampled_from([AspectEstimator, GaussianMixtureEstimator]), st.one_of(
    BAD_X.map(lambda X: ("X", {}, X)),
    corrupt({}, {
        "n_classes": ints_below(1), "schedule": st.sampled_from(["fast", None, 1, FixedBeta]),
        "valid_fraction": reals_outside(0.0, 1.0, low_open=True, high_open=True), "n_restarts": ints_below(1),
        "max_iter": ints_below(1), "tol": reals_below(0.0), "random_state": st.sampled_from([-1, "seed", 1.5, [1]]),
        "warm_start": st.sampled_from(["yes", None, 1]), "progress": st.sampled_from(["yes", None, 1]),
        "time_budget": reals_below(0.0).filter(lambda value: value is not None),
    }).map(lambda case: (case[0], case[1], X_COUNTS)),
))
def test_estimators(estimator, case):
    name, params, X = case
    if estimator is GaussianMixtureEstimator and name == "X" and isinstance(X, np.ndarray) and X.dtype.kind == "f" \
            and X.ndim == 2 and np.isfinite(X).all():
        X = CONSTANT_FEATURE  # negative values are fine for features: give it a constant feature instead
    rejects(lambda: estimator(**params).fit(X), name)


@counted(6)
@settings(FUZZ, max_examples=20)
@given(st.sampled_from(["tempered ", "EM", 3, None, [], TemperedEM]))
def test_make_schedule(value):
    rejects(lambda: make_schedule(value), "schedule")


@counted(7)
@settings(FUZZ, max_examples=20)
@given(st.sampled_from([-1, "1", 2.5, True, [0], jnp.zeros(2), 2**40]))
def test_jax_key(value):
    rejects(lambda: jax_key(value), "random_state")


# ----------------------------------------------------------------------------- metrics and partitions
METRICS = [metrics.rand_index, metrics.adjusted_rand_index, metrics.pairwise_precision_recall_f,
           metrics.cluster_edit_distance, metrics.normalized_edit_score, metrics.variation_of_information,
           metrics.normalized_variation_of_information, metrics.clustering_scores]


@counted(160)
@settings(FUZZ, max_examples=160)
@given(st.sampled_from(METRICS), st.booleans(), st.one_of(BAD_LABELS.map(lambda labels: ("bad", labels)),
                                                          st.just(("length", [0, 1]))))
def test_clustering_metrics(metric, first, case):
    kind, labels = case
    good = [0, 0, 1]
    arguments = (labels, good) if first else (good, labels)
    names = ("labels_true", "labels_pred") if kind == "length" else ("labels_true" if first else "labels_pred",)
    rejects(lambda: metric(*arguments), *names)


@counted(40)
@settings(FUZZ, max_examples=40)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=8), st.lists(st.integers(-2, 3), min_size=2, max_size=8))
def test_metrics_on_any_valid_labels_are_finite(labels_true, labels_pred):
    size = min(len(labels_true), len(labels_pred))
    CASES["count"] += 1
    scores = metrics.clustering_scores(labels_true[:size], labels_pred[:size])
    assert all(np.isfinite(value) for value in scores.values()), scores


BAD_ASSIGNMENTS = st.sampled_from([np.array([[0.5, 1.0]]), np.array([[np.nan, 0.0]]), np.array([]), "labels", None,
                                   np.array([["a", "b"]]), 3, [[0, 1], [1]], np.array([[0.0, 1e300]])])


@counted(60)
@settings(FUZZ, max_examples=60)
@given(st.one_of(
    BAD_ASSIGNMENTS.map(lambda value: ("assignments", lambda: partitions.co_clustering(value))),
    BAD_ASSIGNMENTS.map(lambda value: ("assignments", lambda: partitions.point_partition(value))),
    not_one_of(("vi", "binder")).map(lambda loss: ("loss", lambda: partitions.point_partition([[0, 1]], loss=loss))),
    ints_below(1).map(lambda value: ("n_points", lambda: partitions.point_partition_shortfall(value))),
    st.sampled_from([
        ("co_clustering_matrix", lambda: partitions.expected_binder_loss([0, 1], np.eye(3))),
        ("co_clustering_matrix", lambda: partitions.expected_vi_lower_bound([0, 1], np.full((2, 2), np.nan))),
        ("labels", lambda: partitions.expected_binder_loss([0.5, 1], np.eye(2))),
        ("labels", lambda: partitions.expected_variation_of_information([0, 1, 2], [[0, 1]])),
    ]),
))
def test_partitions(case):
    name, call = case
    rejects(call, name, "assignments")


NOT_DRAWS = st.sampled_from([None, "draws", [1.0, 2.0], [[1.0, 2.0], [1.0]], np.zeros((2, 3)), np.zeros((2, 4, 1)),
                             np.array([[0.0, 1.0, np.nan, 2.0]]), np.array([["a", "b", "c", "d"]]), 3.0])
NOT_FEATURES = st.sampled_from([None, "x", 3.0, [1.0, 2.0], [[1.0], [1.0, 2.0]], np.array([[np.nan, 1.0]]),
                                np.array([["a"]]), np.zeros((2, 2, 2))])
NOT_STICKS = st.sampled_from([None, "v", 0.5, np.array(0.3), [0.5, 1.5], [-0.1], [[0.2, np.nan]]])


@counted(25)
@settings(FUZZ, max_examples=40)
@given(st.one_of(
    NOT_DRAWS.map(lambda value: ("values", lambda: diagnostics.rank_split_rhat(value))),
    NOT_FEATURES.map(lambda value: ("data", lambda: tied_features(value))),
    st.one_of(NON_FINITE, st.sampled_from([0.0, -0.5, 1.5, "half", None, True])).map(
        lambda share: ("share", lambda: tied_features(np.zeros((3, 2)), share=share))),
    NOT_STICKS.map(lambda value: ("fractions", lambda: stick_breaking_weights(value))),
))
def test_diagnostic_helpers(case):
    name, call = case
    rejects(call, name)


# ----------------------------------------------------------------------------- concentration
PRIOR = concentration.gamma_prior(1.0, 1.0)
KEY = jax.random.key(0)


@counted(150)
@settings(FUZZ, max_examples=150)
@given(st.one_of(
    corrupt({"shape": 1.0, "rate": 1.0}, {"shape": reals_below(0.0), "rate": reals_below(0.0)}).map(
        lambda case: (case[0], lambda: concentration.gamma_prior(**case[1]))),
    corrupt({"alpha": 1.0, "n_clusters": 2, "n_points": 5, "prior": PRIOR}, {
        "alpha": reals_below(0.0), "n_clusters": ints_outside(1, 5), "n_points": ints_below(0),
        "prior": st.sampled_from([(1.0, 1.0), None, concentration.GammaPrior(-1.0, 1.0),
                                  concentration.GammaPrior(1.0, math.nan)]),
    }).map(lambda case: (case[0], lambda: concentration.escobar_west_update(KEY, **case[1]))),
    corrupt({"alpha": 1.0, "n_clusters": 2, "group_sizes": [3, 2], "prior": PRIOR}, {
        "alpha": reals_below(0.0), "n_clusters": ints_outside(2, 5),
        "group_sizes": st.sampled_from([[], [-1, 2], [1.5, 2], [[1, 2]], "3", None]),
        "prior": st.sampled_from([None, {"shape": 1.0}]),
    }).map(lambda case: (case[0], lambda: concentration.escobar_west_multi_group_update(KEY, **case[1]))),
    st.sampled_from([concentration.expected_n_clusters, concentration.variance_n_clusters]).flatmap(
        lambda function: corrupt({"alpha": 1.0, "n_points": 4}, {
            "alpha": st.one_of(st.floats(max_value=0.0), NON_FINITE,  # arrays of valid α are allowed here
                               st.sampled_from(["1.0", None, {"value": 1}, 1 + 2j, [1.0, -1.0], [math.nan]])),
            "n_points": st.one_of(ints_below(0), st.just([1, -1]), st.just([0.5])),
        }).map(lambda case: (case[0], lambda: function(**case[1])))),
))
def test_concentration(case):
    name, call = case
    rejects(call, name)


# ----------------------------------------------------------------------------- relational and DP models
@counted(40)
@settings(FUZZ, max_examples=40)
@given(corrupt({"name": "people", "size": 3, "labels": None}, {
    "name": st.sampled_from(["", None, 3, b"people"]),
    "size": ints_below(1),
    "labels": st.sampled_from([["a"], "abc", ["a", "b", "c", "d"]]),
}))
def test_relational_domain(case):
    name, kwargs = case
    rejects(lambda: Domain(**kwargs), name)


RELATION_VALID = {"name": "likes", "domains": ("people", "people"), "shape": (3, 3),
                  "entries": np.array([[0, 1], [1, 2]]), "values": np.array([1, 0])}


@counted(22)
@settings(FUZZ, max_examples=60)
@given(corrupt(RELATION_VALID, {
    "name": st.sampled_from(["", None, 3]),
    "domains": st.sampled_from([(), None, ("people",), ("people", 3)]),
    "shape": st.sampled_from([(3,), (3, 0), (3, 2.5), None]),
    "entries": st.sampled_from([np.zeros((0, 2), int), np.array([[0, 3], [1, 2]]), np.array([[0, -1], [1, 2]]),
                                np.array([[0.5, 1], [1, 2]]), np.array([0, 1]), np.array([[0, 1], [0, 1]])]),
    "values": st.sampled_from([np.array([1]), np.array([1, 2]), np.array([1, -1]), np.array([0.5, 1.0]),
                               np.array([1, np.nan])]),
}))
def test_relational_relation(case):
    name, kwargs = case
    names = (name, "shape") if name == "domains" else (name,)  # one size per domain
    rejects(lambda: Relation(**kwargs), *names)


@counted(11)
@settings(FUZZ, max_examples=40)
@given(st.one_of(
    st.sampled_from([np.array([[0.0, np.inf], [1.0, 0.0]]), np.zeros((0, 0)), np.ones(3), "matrix", None,
                     np.array([["a", "b"], ["c", "d"]])]).map(lambda value: ("matrix", {"matrix": value})),
    st.sampled_from([np.ones((3, 3), bool), np.full((2, 2), 0.5), np.full((2, 2), "yes")]).map(
        lambda mask: ("mask", {"matrix": np.eye(2), "mask": mask})),
    st.sampled_from([(), ("a", "b", "c")]).map(lambda domains: ("domains", {"matrix": np.eye(2), "domains": domains})),
))
def test_relational_from_adjacency(case):
    name, kwargs = case
    rejects(lambda: RelationalData.from_adjacency(**kwargs), name)


@counted(60)
@settings(FUZZ, max_examples=60)
@given(st.one_of(
    corrupt({}, {"n_classes": st.one_of(ints_below(1), st.just({}), st.just({"people": 0})),
                 "prior_count": reals_below(0.0), "backend": not_one_of(("auto", "xla", "numba"))}).map(
        lambda case: (LatentClassRelational, case)),
    corrupt({}, {"concentration": reals_below(0.0), "hyper": reals_below(0.0), "hyper_prior_rate": reals_below(0.0),
                 "max_clusters": ints_below(1), "init_clusters": ints_below(1),
                 "concentration_prior": st.sampled_from([None, (1.0, 1.0), concentration.GammaPrior(-1.0, 1.0)]),
                 "backend": not_one_of(("auto", "xla", "numba"))}).map(lambda case: (InfiniteRelational, case)),
))
def test_relational_models(case):
    model, (name, kwargs) = case
    rejects(lambda: model(**kwargs), name)


@counted(30)
@settings(FUZZ, max_examples=30)
@given(st.one_of(
    ints_below(1).map(lambda value: ("n_points", lambda: baselines.coarse_partition(value))),
    ints_below(1).map(lambda value: ("n_points", lambda: baselines.fine_partition(value))),
    st.sampled_from([
        ("test_features", lambda: baselines.kmeans_partition(np.array([[np.nan, 1.0]]), 1)),
        ("test_features", lambda: baselines.kmeans_partition(np.ones(3), 1)),
        ("n_clusters", lambda: baselines.kmeans_partition(np.ones((3, 2)), 4)),
        ("n_clusters", lambda: baselines.kmeans_partition(np.ones((3, 2)), 0)),
        ("n_init", lambda: baselines.kmeans_partition(np.ones((3, 2)), 1, n_init=0)),
    ]),
))
def test_baselines(case):
    name, call = case
    rejects(call, name)


# ----------------------------------------------------------------------------- save, load, report
@counted(6)
@settings(FUZZ, max_examples=20)
@given(st.sampled_from([
    ("result", lambda: save_result(READER_DIR / "x.npz", {"params": 1})),
    ("path", lambda: save_result(3, None)),
    ("path", lambda: load_result(None)),
    ("path", lambda: load_result(_write("plain.npz", "not an archive"))),
    ("fitted", lambda: write_report(READER_DIR / "x.html", [1, 2])),
    ("path", lambda: write_report(None, None)),
]))
def test_io_and_report(case):
    name, call = case
    rejects(call, name, "result")


# ----------------------------------------------------------------------------- models and starting points
SAVED_RESULT = EMResult(model=ASPECT, params=ASPECT_PARAMS, beta=1.0, history={"log_lik": np.arange(3.0)},
                        restart_scores=np.array([1.0]), best_restart=0, n_iter=3, converged=False, best_iteration=2,
                        _shape=(4, 3))
NOT_MODELS = st.one_of(
    st.text(max_size=8), st.integers(), st.floats(), st.none(),
    st.sampled_from([Aspect, LatentClassRelational, GaussianMixture, AspectEstimator(2), GaussianMixtureEstimator(2),
                     np.ones(3), {"n_classes": 2}, [ASPECT], (ASPECT,), object(), tempered_em, ASPECT_PARAMS]),
)


@counted(120)
@settings(FUZZ, max_examples=120)
@given(st.sampled_from(["tempered_em", "leave_one_out_log_loss", "cross_validated_log_loss"]), NOT_MODELS)
def test_not_a_model(entry_point, model):
    call = {
        "tempered_em": lambda: tempered_em(model, TRAIN, key=KEY, max_iter=2),
        "leave_one_out_log_loss": lambda: leave_one_out_log_loss(model, RELATIONAL, key=KEY),
        "cross_validated_log_loss": lambda: cross_validated_log_loss(model, RELATIONAL, key=KEY),
    }[entry_point]
    rejects(call, "model")


def _aspect_params(n_classes: int, n_rows: int, n_cols: int) -> AspectParams:
    return AspectParams(jnp.full((n_classes,), 1.0 / n_classes), jnp.full((n_rows, n_classes), 1.0 / n_rows),
                        jnp.full((n_cols, n_classes), 1.0 / n_cols))


def _poisoned(spec: tuple[int, int, float]) -> AspectParams:
    field, position, value = spec
    leaf = np.array(ASPECT_PARAMS[field])
    leaf.flat[position % leaf.size] = value
    return ASPECT_PARAMS._replace(**{ASPECT_PARAMS._fields[field]: leaf})


BAD_STARTS = st.one_of(
    st.text(max_size=8), st.integers(), st.floats(),
    st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 5)).filter(lambda sizes: sizes != (2, 4, 3)).map(
        lambda sizes: _aspect_params(*sizes)),
    st.tuples(st.integers(0, 2), st.integers(0, 11), NON_FINITE).map(_poisoned),
    st.integers(0, 2).flatmap(lambda field: st.sampled_from([
        np.zeros(np.shape(ASPECT_PARAMS[field]), int), np.full(np.shape(ASPECT_PARAMS[field]), "0.5"),
        None, "0.5", np.ones(np.shape(ASPECT_PARAMS[field]), complex)]).map(
        lambda leaf: ASPECT_PARAMS._replace(**{ASPECT_PARAMS._fields[field]: leaf}))),
    st.sampled_from([
        "random", b"random", np.ones(3), np.ones((4, 2)), {"class_prior": np.ones(2)}, ASPECT_PARAMS._asdict(),
        [ASPECT_PARAMS], tuple(ASPECT_PARAMS), AspectParams, Aspect, ASPECT, SAVED_RESULT,
        GaussianMixture(2).init_params(KEY, np.ones((4, 3))),
    ]),
)


@counted(200)
@settings(FUZZ, max_examples=200)
@given(BAD_STARTS)
def test_bad_starting_parameters(init):
    rejects(lambda: tempered_em(ASPECT, DATA, key=KEY, init=init, max_iter=2), "init")


# ----------------------------------------------------------------------------- types
RELATIONAL = RelationalData.from_adjacency((np.arange(16).reshape(4, 4) % 3 == 0).astype(int))
POINTS = np.array([[0.0, 1.0], [0.5, 1.5], [4.0, 5.0], [4.5, 5.5]])
ESTIMATORS = [AspectEstimator(2), GaussianMixtureEstimator(2), OneSidedEstimator(2), TwoSidedEstimator(2, n_col_classes=2),
              ClusterAbstractionEstimator(depth=1), DPMixtureEstimator()]
def _poison_object_array(position: int, value: Any) -> np.ndarray:
    """The counts as an object array (as pandas gives) with one entry that is not a real number."""
    values = X_COUNTS.astype(object)
    values[np.unravel_index(position, values.shape)] = value
    return values


NOT_REAL_NUMBERS = st.one_of(
    st.sampled_from(["datetime64[s]", "datetime64[D]", "timedelta64[ms]", "complex64", "complex128", "U4", "S4"]).map(
        lambda dtype: X_COUNTS.astype(dtype)),
    st.tuples(st.integers(0, 11), st.sampled_from([None, "1", b"1", 1 + 1j, datetime.date(2020, 1, 1), [1.0], True,
                                                   {"count": 1}])).map(lambda spec: _poison_object_array(*spec)),
)


@counted(120)
@settings(FUZZ, max_examples=120)
@given(st.sampled_from(range(len(ESTIMATORS))), NOT_REAL_NUMBERS)
def test_estimators_refuse_values_that_are_not_real_numbers(which, X):
    rejects(lambda: ESTIMATORS[which].fit(X), "X")


MISSING_LABELS = st.tuples(st.integers(0, 3), st.sampled_from([None, math.nan, np.nan, float("nan")]),
                           st.sampled_from([[0, 1, 0, 1], ["a", "b", "a", "b"], [0.5, 1.5, 0.5, 1.5]])).map(
    lambda spec: [spec[1] if index == spec[0] else label for index, label in enumerate(spec[2])])


@counted(50)
@settings(FUZZ, max_examples=60)
@given(st.one_of(MISSING_LABELS, st.sampled_from([[[0], [1], [0], [1]], np.zeros((4, 1)), [],
                                                  "abcd", None, np.array([1 + 1j] * 4), [{}, {}, {}, {}]])))
def test_supervised_training_labels(labels):
    rejects(lambda: SupervisedDP().fit(POINTS, labels, POINTS, key=KEY, n_sweeps=2), "train_labels")


@counted(50)
@settings(FUZZ, max_examples=50)
@given(MISSING_LABELS, st.booleans())
def test_metric_labels_with_missing_entries(labels, first):
    arguments = (labels, [0, 1, 0, 1]) if first else ([0, 1, 0, 1], labels)
    rejects(lambda: metrics.adjusted_rand_index(*arguments), "labels_true" if first else "labels_pred")


# None is the only relation of RELATIONAL (and refused, named, on data of several: test_latent_class.py).
BAD_RELATIONS = st.one_of(st.integers().filter(lambda index: index != 0), st.text(max_size=4).filter(lambda name: name != "r"),
                          st.floats(), st.sampled_from([True, [0], (0,), b"r", np.array([0])]))
RELATION_CALLS = {
    "leave_one_out_log_loss": lambda relation: leave_one_out_log_loss(LatentClassRelational(2), RELATIONAL, key=KEY,
                                                                      relation=relation),
    "cross_validated_log_loss": lambda relation: cross_validated_log_loss(LatentClassRelational(2), RELATIONAL,
                                                                          key=KEY, relation=relation),
    "held_out_cases": lambda relation: held_out_cases(RELATIONAL, relation=relation),
    "fold_cases": lambda relation: fold_cases(RELATIONAL, relation=relation),
    "LatentClassRelational.predict_held_out": lambda relation: LatentClassRelational(2).predict_held_out(
        RELATIONAL, np.array([[0]]), key=KEY, relation=relation),
    "InfiniteRelational.predict_held_out": lambda relation: InfiniteRelational().predict_held_out(
        RELATIONAL, np.array([[0]]), key=KEY, relation=relation, n_sweeps=2),
}


@counted(120)
@settings(FUZZ, max_examples=120)
@given(st.sampled_from(sorted(RELATION_CALLS)), BAD_RELATIONS)
def test_relation_index(entry_point, relation):
    rejects(lambda: RELATION_CALLS[entry_point](relation), "relation")


@counted(27)
@settings(FUZZ, max_examples=40)
@given(st.sampled_from([DATA.to_dense(), np.ones((4, 3)), [[1, 2, 3]], "valid", 3, RELATIONAL, sp.csr_matrix(np.ones((4, 3))),
                        CoOccurrence.from_dense(np.ones((2, 2))), CoOccurrence.from_dense(np.ones((3, 4)))]),
       st.sampled_from([None, TemperedEM(), FixedBeta(1.0)]))
def test_validation_data(valid, schedule):
    rejects(lambda: tempered_em(ASPECT, TRAIN, key=KEY, valid=valid, schedule=schedule, max_iter=2), "valid")


# ----------------------------------------------------------------------------- complex numbers
#: (constructor, argument) pairs of real or integer settings; a complex number with a zero
#: imaginary part converts to float silently, so each must be refused by type.
NUMERIC_SETTINGS = [
    (FixedBeta, "beta"), (FixedBeta, "min_improvement"), (TemperedEM, "eta"), (TemperedEM, "beta_min"),
    (TemperedEM, "min_improvement"), (DeterministicAnnealing, "beta_start"), (DeterministicAnnealing, "growth"),
    (Aspect, "n_classes"), (Aspect, "prior_count"), (GaussianMixture, "n_classes"), (GaussianMixture, "variance_floor"),
    (LatentClassRelational, "n_classes"), (LatentClassRelational, "prior_count"), (InfiniteRelational, "concentration"),
    (InfiniteRelational, "hyper"), (InfiniteRelational, "max_clusters"), (SupervisedDP, "model"),
    (SupervisedDP, "alpha"), (SupervisedDP, "prior_variance"), (SupervisedDP, "precision_rate"),
    (ClusterAbstraction, "depth"), (ClusterAbstraction, "prior_count"),
]
COMPLEX = st.one_of(st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
                    st.sampled_from([1 + 0j, np.complex64(1), np.complex128(0.5), np.array(1 + 0j)]))


@counted(120)
@settings(FUZZ, max_examples=120)
@given(st.sampled_from(NUMERIC_SETTINGS), COMPLEX)
def test_complex_numbers_as_settings(setting, value):
    constructor, name = setting
    defaults = {Aspect: {"n_classes": 2}, GaussianMixture: {"n_classes": 2}}.get(constructor, {})
    rejects(lambda: constructor(**{**defaults, name: value}), name)


@counted(60)
@settings(FUZZ, max_examples=60)
@given(st.sampled_from(["n_restarts", "max_iter", "tol", "segment", "time_budget"]), COMPLEX)
def test_complex_numbers_as_fit_settings(name, value):
    rejects(lambda: tempered_em(**{**EM_VALID, name: value}), name)


# ----------------------------------------------------------------------------- sizes that cannot fit
#: Sizes whose estimated memory exceeds that of any machine (terabytes and more), so that the
#: cases are refused wherever the tests run, before anything is allocated.
HUGE = st.integers(10**12, 10**15)
SIZE_CALLS = st.one_of(
    HUGE.map(lambda size: ("model", lambda: tempered_em(Aspect(size), DATA, key=KEY, max_iter=2))),
    HUGE.map(lambda size: ("model", lambda: tempered_em(ASPECT, DATA, key=KEY, n_restarts=size, max_iter=2))),
    st.integers(40, 10**30).map(lambda depth: ("depth", lambda: ClusterAbstraction(depth=depth))),
    st.tuples(st.integers(3, 10), st.integers(10**5, 10**9)).map(
        lambda shape: ("depth", lambda: ClusterAbstraction(depth=shape[0], branching=shape[1]))),
    HUGE.map(lambda size: ("n_leaves", lambda: ClusterAbstraction(n_leaves=size))),
    st.integers(10**7, 10**12).map(lambda size: ("n_classes", lambda: LatentClassRelational(size).fit(RELATIONAL, key=KEY))),
    st.integers(10**7, 10**12).map(lambda size: ("n_classes", lambda: LatentClassRelational(size).predict_held_out(
        RELATIONAL, np.array([[0]]), key=KEY))),
    st.integers(10**11, 10**14).map(lambda size: ("max_clusters", lambda: DPMixture(
        normal_gamma(2), max_clusters=size, algorithm="collapsed", n_split_merge=0).fit(POINTS, KEY, progress=False))),
)


@counted(150)
@settings(FUZZ, max_examples=150)
@given(SIZE_CALLS)
def test_sizes_that_cannot_fit(case):
    name, call = case
    rejects(call, name)


def test_the_memory_limit_can_be_set(monkeypatch):
    monkeypatch.setenv("LATENTZOO_MEMORY_LIMIT", "100")  # bytes: less than the smallest fit needs
    rejects(lambda: tempered_em(ASPECT, DATA, key=KEY, max_iter=2), "model")
    rejects(lambda: ClusterAbstraction(depth=3), "depth")
    for value in ("lots", "-1", "0", "nan"):
        monkeypatch.setenv("LATENTZOO_MEMORY_LIMIT", value)
        rejects(lambda: ClusterAbstraction(depth=3), "LATENTZOO_MEMORY_LIMIT")


# ----------------------------------------------------------------------------- damaged files
def _members(archive: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        return {name: opened.read(name) for name in opened.namelist()}


def _zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy(values: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, values, allow_pickle=True)  # an object array becomes a pickle the loaders must refuse
    return buffer.getvalue()


def _with_metadata(archive: bytes, change: Callable[[dict], Any]) -> bytes:
    members = _members(archive)
    metadata = json.loads(str(np.load(io.BytesIO(members["metadata.npy"]))))
    change(metadata)
    members["metadata.npy"] = _npy(np.asarray(json.dumps(metadata)))
    return _zipped(members)


def _with_member(archive: bytes, name: str, values: Any) -> bytes:
    members = _members(archive)
    if values is None:
        del members[name]
    else:
        members[name] = _npy(values)
    return _zipped(members)


RESULT_BYTES = save_result(READER_DIR / "saved.npz", SAVED_RESULT).read_bytes()
CHAIN_STATE = {"labels": jnp.zeros((2, 3), jnp.int32), "weights": jnp.ones((2, 3))}
CHECKPOINT_BYTES = save_checkpoint(READER_DIR / "saved-chains.npz", ChainResult(
    samples={}, final_state=CHAIN_STATE, n_warmup=0, thin=1, completed=True, seconds=0.0, next_sweep=4),
    jax.random.key(0)).read_bytes()
NOT_AN_ARRAY = st.sampled_from([np.array(["a", "b"]), np.array([b"ab"]), np.array(True, dtype=object)])
#: Metadata entries each file needs, and values of them that a loader must refuse.
RESULT_METADATA = {
    "format": [None, "other", 1], "version": [None, 2, "1"],
    "model": ["x", None, 3, [1], {"a": 1}, {"dataclass": "os:system", "fields": {}},
              {"dataclass": "zoo.dyadic.aspect:Aspect", "fields": {}}, {"function": "zoo.io:save_result"}],
    "params": ["x", None, 3, {"fields": "abc"}, {"fields": [1]}, {"fields": ["class_prior"]},
               {"namedtuple": "os:path", "fields": ["class_prior"]},
               {"namedtuple": "zoo.dyadic.aspect:AspectParams", "fields": ["class_prior"]}],
    "beta": [None, "1", 0, -1, 2, math.nan, True], "n_iter": [None, "3", -1, 1.5, True],
    "best_restart": [None, -1, 1, "0", 0.0], "best_iteration": [None, -2, "1", 1.5],
    "converged": [None, "yes", 1], "stopped_by": [None, "x", 1], "history": ["log_lik", None, [1], ["missing"]],
}
CHECKPOINT_METADATA = {
    "format": [None, "latentzoo-em-result"], "version": [None, 2],
    "leaves": ["x", None, [1], ["['labels']"], []], "next_sweep": [None, -1, "1", 1.5], "thin": [None, 0, "1"],
    "n_draws": [-1, "x", 1.5], "key_impl": [1, [1], "no such generator", "rbg"],
}
OPTIONAL = ("n_draws", "key_impl")


def damaged(archive: bytes, metadata: dict[str, list], arrays: list[str], bad_arrays: dict[str, list]
            ) -> st.SearchStrategy:
    """(how, file bytes): emptied, truncated, overwritten, a metadata entry removed or changed, an
    array removed or replaced — every one a file its loader must refuse."""
    entries = sorted(metadata)
    return st.one_of(
        st.integers(0, len(archive) - 1).map(lambda size: ("truncated", archive[:size])),
        st.binary(min_size=0, max_size=64).map(lambda noise: ("noise", noise)),
        st.sampled_from([name for name in entries if name not in OPTIONAL]).map(
            lambda name: ("dropped " + name, _with_metadata(archive, lambda document: document.pop(name)))),
        st.sampled_from(entries).flatmap(lambda name: st.sampled_from(metadata[name]).map(
            lambda value: (f"{name}={value!r}", _with_metadata(archive, lambda document: document.update({name: value})))
        )),
        st.sampled_from(arrays + ["metadata.npy"]).map(lambda name: ("removed " + name, _with_member(archive, name, None))),
        st.sampled_from(sorted(bad_arrays)).flatmap(lambda name: st.one_of(NOT_AN_ARRAY, st.sampled_from(
            bad_arrays[name])).map(lambda values: (f"{name} replaced", _with_member(archive, name, values)))),
    )


def _write_bytes(data: bytes, suffix: str) -> Path:
    CASES["files"] = CASES.get("files", 0) + 1
    path = READER_DIR / f"damaged{CASES['files']}{suffix}"
    path.write_bytes(data)
    return path


def rejects_file(load: Callable[[Path], Any], data: bytes, suffix: str = ".npz", names: tuple[str, ...] = ("path",)
                 ) -> None:
    """``load(path)`` of damaged ``data`` raises a ValueError that starts with one of ``names`` and
    names the file."""
    path = _write_bytes(data, suffix)
    rejects(lambda: load(path), *names)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load(path)


RESULT_ARRAYS = ["params/class_prior.npy", "params/row_given_class.npy", "history/log_lik.npy", "restart_scores.npy"]


@counted(200)
@settings(FUZZ, max_examples=200)
@given(damaged(RESULT_BYTES, RESULT_METADATA, RESULT_ARRAYS, {
    "history/log_lik.npy": [np.zeros((3, 1)), np.array(1.0)], "restart_scores.npy": [np.zeros((1, 1)), np.zeros(0)],
    # parameters of another shape than the model's for the stored data shape (4, 3)
    "params/class_prior.npy": [np.full(3, 1 / 3), np.full((2, 1), 0.5), np.array(1.0)],
    "params/row_given_class.npy": [np.full((5, 2), 0.2), np.full((4, 3), 0.25), np.full((2, 4), 0.5)],
    "metadata.npy": [np.asarray(b"{}"), np.asarray(3.0), np.asarray(["{}"])],
}))
def test_damaged_result_files(case):
    _, data = case
    rejects_file(load_result, data)


@counted(150)
@settings(FUZZ, max_examples=150)
@given(damaged(CHECKPOINT_BYTES, CHECKPOINT_METADATA, ["state/0.npy", "state/1.npy", "key.npy"], {
    "state/0.npy": [np.zeros((2, 3)), np.zeros(2, np.int32), np.zeros((3, 3), np.int32), np.zeros((2, 2), np.int32)],
    "state/1.npy": [np.zeros((2, 3), np.int32), np.ones((2, 2)), np.ones((1, 3))],
    "key.npy": [np.zeros(2), np.zeros(3, np.uint32), np.zeros((2, 2), np.uint32), np.zeros((), np.uint32)],
}))
def test_damaged_chain_checkpoints(case):
    how, data = case
    names = ("path", "like") if how.startswith("leaves=") else ("path",)  # the file or the template is wrong
    rejects_file(lambda path: load_checkpoint(path, like=CHAIN_STATE), data, names=names)


SAVED_LRM = LRMResult(model=LatentClassRelational(2), schema=RELATIONAL.schema,
                      params=LRMParams((np.full(2, 0.5), np.full(2, 0.5)), (np.full((2, 2, 2), 0.5),),
                                       (np.full((4, 2), 0.5), np.full((4, 2), 0.5))),
                      history={"bound": np.arange(3.0), "objective": np.arange(3.0)},
                      restart_scores=np.array([1.0, 0.5]), best_restart=0, n_passes=3, converged=True)
LRM_BYTES = save_result(READER_DIR / "saved-lrm.npz", SAVED_LRM).read_bytes()


def _lrm_entry(**changes: Any) -> dict:
    """The saved LRM's ``result`` entry with some of its fields replaced (JSON values)."""
    document = json.loads(str(np.load(io.BytesIO(_members(LRM_BYTES)["metadata.npy"]))))["result"]
    return {**document, "fields": {**document["fields"], **changes}}


def _lrm_model(**changes: Any) -> dict:
    model = _lrm_entry()["fields"]["model"]
    return {**model, "fields": {**model["fields"], **changes}}


LRM_METADATA = {
    "format": [None, "latentzoo-em-result", 1], "version": [None, 2],
    "result": [None, "x", 3, {"dataclass": "os:system", "fields": {}},
               {"dataclass": "zoo.relational.latent_class:LatentClassRelational", "fields": {}},
               {"dataclass": "zoo.relational.latent_class:LRMResult", "fields": {}},
               _lrm_entry(best_restart=2), _lrm_entry(best_restart=True), _lrm_entry(n_passes=4),
               _lrm_entry(stopped_by="finished"), _lrm_entry(converged=1), _lrm_entry(provenance=3),
               _lrm_entry(model="x"), _lrm_entry(model=_lrm_model(n_classes=0)),
               _lrm_entry(model=_lrm_model(prior_count=-1.0)), _lrm_entry(model=_lrm_model(n_classes=3)),
               _lrm_entry(schema={"tuple": []}), _lrm_entry(params={"dict": {}}),
               _lrm_entry(history={"dict": {"bound": 1}}), _lrm_entry(restart_scores={"array": "arrays/99"})],
}
#: The saved LRM's arrays, in the order its fields hold them: θ_h of the rows and the columns, θ_r, q of the
#: rows and the columns, the bound, the objective, the scores.
LRM_ARRAYS = [f"arrays/{index}.npy" for index in range(8)]


@counted(150)
@settings(FUZZ, max_examples=150)
@given(damaged(LRM_BYTES, LRM_METADATA, LRM_ARRAYS, {
    "arrays/0.npy": [np.full(3, 1 / 3), np.array([np.nan, 1.0]), np.array([0.2, 0.2]), np.array([-0.5, 1.5])],
    "arrays/2.npy": [np.full((2, 2), 0.5), np.full((2, 2, 2), np.inf), np.full((3, 2, 2), 0.5)],
    "arrays/4.npy": [np.full((5, 2), 0.5), np.full((4, 2), 0.7), np.full((4,), 1.0)],
    "arrays/5.npy": [np.zeros(2), np.zeros((3, 1))], "arrays/7.npy": [np.zeros(0), np.zeros((2, 1))],
}))
def test_damaged_latent_class_relational_files(case):
    _, data = case
    rejects_file(load_result, data)


def test_the_undamaged_latent_class_relational_file_loads():
    # so that each damaged one above is refused for its damage
    loaded = load_result(_write_bytes(LRM_BYTES, ".npz"))
    np.testing.assert_array_equal(loaded.params.responsibilities[1], SAVED_LRM.params.responsibilities[1])


@counted(60)
@settings(FUZZ, max_examples=60)
@given(st.sampled_from([("result", RESULT_BYTES), ("checkpoint", CHECKPOINT_BYTES), ("result", LRM_BYTES)]),
       st.integers(0, 10**6), st.integers(0, 7))
def test_flipped_bits_are_refused_or_harmless(which, position, bit):
    # The archive's checksums catch a flipped bit in any array; flips in fields that nothing
    # reads (a member's time stamp) may load, and then give back exactly what was saved.
    kind, archive = which
    position %= len(archive)
    data = bytearray(archive)
    data[position] ^= 1 << bit
    path = _write_bytes(bytes(data), ".npz")
    load = load_result if kind == "result" else lambda path: load_checkpoint(path, like=CHAIN_STATE)
    CASES["count"] += 1
    try:
        loaded = load(path)
    except ValueError as error:
        assert str(error).startswith("path") and str(path) in str(error), error
        return
    saved = load(_write_bytes(archive, ".npz"))
    for before, after in zip(_contents(saved), _contents(loaded), strict=True):
        np.testing.assert_array_equal(before, after)


def _contents(loaded: Any) -> list[Any]:
    """What a loaded result or checkpoint holds, as NumPy arrays and plain values."""
    if isinstance(loaded, EMResult):
        loaded = (loaded.params, loaded.history, loaded.restart_scores, loaded.beta, loaded.n_iter,
                  loaded.best_restart, loaded.converged, loaded.best_iteration, loaded.stopped_by, loaded.model)
    if isinstance(loaded, LRMResult):
        loaded = (loaded.params, loaded.history, loaded.restart_scores, loaded.best_restart, loaded.n_passes,
                  loaded.converged, loaded.stopped_by, loaded.model, tuple(loaded.schema), loaded.provenance)
    is_key = lambda leaf: isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)  # noqa: E731
    return [np.asarray(jax.random.key_data(leaf)) if is_key(leaf) else np.asarray(leaf)
            for leaf in jax.tree_util.tree_leaves(loaded)]


CHAINS_BYTES = save_chains(READER_DIR / "saved-chains.nc", az.from_dict(posterior={"x": np.zeros((2, 5))})).read_bytes()


@counted(30)
@settings(FUZZ, max_examples=30)
@given(st.one_of(st.integers(0, len(CHAINS_BYTES) - 1).map(lambda size: CHAINS_BYTES[:size]),
                 st.binary(max_size=64)))
def test_damaged_chain_files(data):
    rejects_file(load_chains, data, ".nc")


def test_gaps_found_by_fuzzing_are_closed():
    # Each was once a JAX or NumPy error instead of a named ValueError/TypeError.
    closed = {
        "domains": lambda: RelationalData.from_adjacency(np.eye(2), domains=3),
        "value_labels": lambda: Relation(**RELATION_VALID, value_labels=5),
        "sample_hyper": lambda: InfiniteRelational(sample_hyper="no"),
        "sample_concentration": lambda: InfiniteRelational(sample_concentration=2),
        "rng_key": lambda: concentration.escobar_west_update(None, 1.0, 2, 5, PRIOR),
        "key": lambda: SupervisedDP().fit(np.ones((2, 2)), [0, 1], np.ones((2, 2)), key=None, n_sweeps=2),
        "normalize": lambda: metrics.cluster_edit_distance([0, 1], [0, 1], normalize="yes"),
    }
    for name, call in closed.items():
        rejects(call, name)
    rejects(lambda: RelationalData(domains=None, relations=()), "domains")
    rejects(lambda: concentration.escobar_west_multi_group_update(None, 1.0, 2, [3, 2], PRIOR), "rng_key")


def test_a_constant_feature_gets_an_absolute_variance_floor():
    result = tempered_em(GaussianMixture(2), CONSTANT_FEATURE, key=KEY, max_iter=3)
    for leaf in jax.tree_util.tree_leaves(result.params):
        assert np.isfinite(np.asarray(leaf)).all()


# ----------------------------------------------------------------------------- PRNG keys
#: Every public entry point that takes randomness, called with ``key`` (named as it is there).
KEY_ENTRY_POINTS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "tempered_em": ("key", lambda key: tempered_em(ASPECT, TRAIN, key=key, max_iter=2)),
    "LatentClassRelational.fit": ("key", lambda key: LatentClassRelational(2).fit(RELATIONAL, key=key)),
    "LatentClassRelational.predict_held_out": (
        "key", lambda key: LatentClassRelational(2).predict_held_out(RELATIONAL, np.array([[0]]), key=key)),
    "InfiniteRelational.sample": ("key", lambda key: InfiniteRelational().sample(RELATIONAL, key=key, n_sweeps=2)),
    "InfiniteRelational.predict_held_out": (
        "key", lambda key: InfiniteRelational().predict_held_out(RELATIONAL, np.array([[0]]), key=key, n_sweeps=2)),
    "leave_one_out_log_loss": ("key", lambda key: leave_one_out_log_loss(LatentClassRelational(2), RELATIONAL, key=key)),
    "cross_validated_log_loss": (
        "key", lambda key: cross_validated_log_loss(LatentClassRelational(2), RELATIONAL, key=key)),
    "DPMixture.fit": ("key", lambda key: DPMixture(normal_gamma(2)).fit(POINTS, key, n_draws=2, progress=False)),
    "SupervisedDP.fit": ("key", lambda key: SupervisedDP().fit(POINTS[:2], [0, 1], POINTS[2:], key=key, n_sweeps=2)),
    "SupervisedDP.fit_distances": (
        "key", lambda key: SupervisedDP().fit_distances(np.ones((1, 4, 4)) - np.eye(4), [0, 1], key=key)),
    "sample_chains": ("rng_key", lambda key: sample_chains(key, lambda *args: args, {"x": jnp.zeros((2, 1))}, None)),
    "cdp_partition": ("key", lambda key: baselines.cdp_partition(POINTS, key=key)),
    "anneal_tree": ("key", lambda key: anneal_tree(DATA, key=key, max_leaves=2)),
    "escobar_west_update": ("rng_key", lambda key: concentration.escobar_west_update(key, 1.0, 2, 5, PRIOR)),
    "AspectEstimator.fit": ("random_state", lambda key: AspectEstimator(2, random_state=key).fit(X_COUNTS)),
    # Kernel-level entry points (called by the drivers above, and by users who build their own).
    "inference.neal.init": ("rng_key", lambda key: neal.init(key, POINTS, normal_gamma(2), max_clusters=2, alpha=1.0)),
    "sample_log_gamma": ("rng_key", lambda key: sample_log_gamma(key, 2.0, (3,))),
    "zoo.relational.infinite.init": ("rng_key", lambda key: irm_init(
        key, RELATIONAL.to_arrays(), RELATIONAL.schema, (2,), concentration=1.0, hyper=1.0, init_clusters=2)),
}
BAD_KEYS = st.one_of(
    st.integers(), st.floats(), st.text(max_size=4), st.booleans(),
    st.sampled_from([
        None, [0, 1], (0, 1), {"key": 0}, b"\x00\x01", np.zeros(2, np.uint32), np.array(0), np.zeros((), np.uint32),
        jnp.zeros(2), jnp.zeros(2, jnp.int32), jnp.zeros(3, jnp.uint32), jnp.asarray(0, jnp.uint32),
        jax.random.split(jax.random.key(0), 2), jax.random.split(jax.random.key(0), (2, 2)),
        jax.random.split(jax.random.PRNGKey(0), 2), jax.random.key_data(jax.random.key(0))[None],
    ]),
)


@counted(240)
@settings(FUZZ, max_examples=240)
@given(st.sampled_from(sorted(KEY_ENTRY_POINTS)), BAD_KEYS)
def test_prng_keys(entry_point, key):
    name, call = KEY_ENTRY_POINTS[entry_point]
    if name == "random_state" and not isinstance(key, jax.Array):
        key = jnp.zeros(2)  # seeds are valid random_state values (scikit-learn's convention): a non-key JAX array
    rejects(lambda: call(key), name)


def test_one_key_of_either_kind_is_accepted():
    for key in (jax.random.key(3), jax.random.PRNGKey(3)):
        CASES["count"] += 1
        assert np.isfinite(tempered_em(ASPECT, TRAIN, key=key, max_iter=2).history["log_lik"]).all()


# ----------------------------------------------------------------------------- starts of the relational model
LRM = LatentClassRelational(2, backend="xla")
LRM_BOUND = LRM.bind(RELATIONAL)
LRM_START = LRM_BOUND.init_params(KEY, LRM_BOUND.prepare(RELATIONAL))


def _lrm_start_with(field: int, change: Callable[[np.ndarray], np.ndarray]) -> Any:
    part = LRM_START[field]
    return LRM_START._replace(**{LRM_START._fields[field]: (change(np.array(part[0])),) + tuple(part[1:])})


def _poison_entry(values: np.ndarray, position: int, value: float) -> np.ndarray:
    values = values.copy()
    values.flat[position % values.size] = value
    return values


BAD_LRM_STARTS = st.tuples(st.integers(0, 2), st.one_of(
    # a negative probability, the rest of its distribution unchanged
    st.tuples(st.integers(0, 100), st.floats(-10.0, -1e-3)).map(
        lambda spec: lambda values: _poison_entry(values, *spec)),
    # every distribution scaled off 1
    st.one_of(st.floats(0.0, 0.99), st.floats(1.01, 100.0)).map(lambda scale: lambda values: values * scale),
    # one entry moved off its distribution's sum
    st.tuples(st.integers(0, 100), st.floats(0.01, 10.0)).map(
        lambda spec: lambda values: _poison_entry(values, spec[0], values.flat[spec[0] % values.size] + spec[1])),
    st.tuples(st.integers(0, 100), NON_FINITE).map(lambda spec: lambda values: _poison_entry(values, *spec)),
    # another shape: a class more or fewer, an individual more, one axis too many
    st.sampled_from([lambda values: np.concatenate([values, values[..., :1]], axis=-1) / 2,
                     lambda values: values[..., :1] / values[..., :1],
                     lambda values: np.concatenate([values, values[:1]], axis=0),
                     lambda values: values[None]]),
)).map(lambda spec: _lrm_start_with(*spec))


@counted(120)
@settings(FUZZ, max_examples=120)
@given(BAD_LRM_STARTS)
def test_bad_starts_of_the_latent_class_model(init):
    rejects(lambda: tempered_em(LRM_BOUND, RELATIONAL, key=KEY, init=init, max_iter=2), "init")


def test_a_valid_start_of_the_latent_class_model_is_accepted():
    CASES["count"] += 1
    assert tempered_em(LRM_BOUND, RELATIONAL, key=KEY, init=LRM_START, max_iter=2).n_iter == 2


@counted(80)
@settings(FUZZ, max_examples=80)
@given(st.one_of(
    ints_below(1).map(lambda value: ("passes_per_call", lambda: LRM.fit(RELATIONAL, key=KEY, passes_per_call=value))),
    ints_below(1).map(lambda value: ("sweeps_per_call", lambda: InfiniteRelational().sample(
        RELATIONAL, key=KEY, n_sweeps=2, sweeps_per_call=value))),
    st.one_of(ints_below(1), NOT_INTEGERS).map(lambda value: ("cases_per_call", lambda: LRM.predict_held_out(
        RELATIONAL, [[0]], key=KEY, max_passes=2, cases_per_call=value))),
    st.one_of(ints_below(1), NOT_INTEGERS).map(lambda value: ("cases_per_call", lambda: InfiniteRelational(
        ).predict_held_out(RELATIONAL, [[0]], key=KEY, n_sweeps=2, cases_per_call=value))),
    st.one_of(ints_below(1), NOT_INTEGERS).map(lambda value: ("cases_per_call", lambda: leave_one_out_log_loss(
        LRM, RELATIONAL, key=KEY, max_passes=2, cases_per_call=value))),
))
def test_calls_per_segment_of_the_relational_models(case):
    name, call = case
    rejects(call, name)


# ----------------------------------------------------------------------------- starts of the other EM models
#: (model, data, start) of every EM model of the zoo: the start is the model's own for ``KEY``.
EM_STARTS = {
    name: (model, data, model.init_params(KEY, model.prepare(data)))
    for name, model, data in [
        ("aspect", Aspect(2, backend="xla"), DATA),
        ("one-sided", OneSided(2, backend="xla"), DATA),
        ("one-sided columns", OneSided(2, side="cols", backend="xla"), DATA),
        ("two-sided", TwoSided(2, 2, backend="xla"), DATA),
        ("cluster abstraction", ClusterAbstraction(depth=1, backend="xla"), DATA),
        ("gaussian mixture", GaussianMixture(2), POINTS),
        # Generic EM: the declarations come from the program's param constraints (a dict start).
        ("gaussian mixture program", EnumeratedEM(gaussian_mixture_program, static_kwargs={"n_classes": 2},
                                                  m_step_iters=5), POINTS),
    ]
}


def _fields_of(start: Any) -> list[str]:
    return list(start._fields) if hasattr(start, "_fields") else sorted(start)


def _start_with(start: Any, field: str, change: Callable[[np.ndarray], np.ndarray]) -> Any:
    if isinstance(start, dict):
        return {**start, field: change(np.array(start[field]))}
    return start._replace(**{field: change(np.array(getattr(start, field)))})


#: Changes that take a field off its constraint, by kind of field: probabilities (a distribution
#: along an axis), positive values (scales) and any finite values (locations).
NEGATIVE_ENTRY = st.tuples(st.integers(0, 100), st.floats(-10.0, -1e-3)).map(
    lambda spec: lambda values: _poison_entry(values, *spec))
NON_FINITE_ENTRY = st.tuples(st.integers(0, 100), NON_FINITE).map(
    lambda spec: lambda values: _poison_entry(values, *spec))
ANOTHER_SHAPE = st.sampled_from([lambda values: np.concatenate([values, values[..., :1]], axis=-1) / 2,
                                 lambda values: np.ones_like(values[..., :1]),
                                 lambda values: np.concatenate([values, values[:1]], axis=0),
                                 lambda values: values[None]])
FIELD_CHANGES = {
    "probabilities": st.one_of(
        NEGATIVE_ENTRY,
        st.one_of(st.floats(0.0, 0.99), st.floats(1.01, 100.0)).map(lambda scale: lambda values: values * scale),
        st.tuples(st.integers(0, 100), st.floats(0.01, 10.0)).map(
            lambda spec: lambda values: _poison_entry(values, spec[0], values.flat[spec[0] % values.size] + spec[1])),
        NON_FINITE_ENTRY, ANOTHER_SHAPE),
    "positive": st.one_of(NEGATIVE_ENTRY, st.integers(0, 100).map(lambda at: lambda values: _poison_entry(values, at, 0.0)),
                          NON_FINITE_ENTRY, ANOTHER_SHAPE),
    "finite": st.one_of(NON_FINITE_ENTRY, ANOTHER_SHAPE),
}


def _field_kind(model: Any, field: str) -> str:
    if field in getattr(model, "probability_axes", {}):
        return "probabilities"
    return "positive" if field in getattr(model, "positive_fields", ()) else "finite"


def _bad_starts_of(name: str) -> st.SearchStrategy:
    model, _, start = EM_STARTS[name]
    off_constraint = st.sampled_from(_fields_of(start)).flatmap(
        lambda field: FIELD_CHANGES[_field_kind(model, field)].map(lambda change: _start_with(start, field, change)))
    other_models = st.sampled_from([other for key, (_, _, other) in EM_STARTS.items() if key != name])
    return st.one_of(off_constraint, other_models)


def test_every_em_model_declares_its_constraints():
    # Every field of every EM model's parameters is a distribution, positive, or free by declaration:
    # the fields left free are exactly these.
    free = {name: [field for field in _fields_of(start) if _field_kind(model, field) == "finite"]
            for name, (model, _, start) in EM_STARTS.items()}
    assert free == {name: (["locs"] if name.startswith("gaussian mixture") else []) for name in EM_STARTS}


@counted(350)
@settings(FUZZ, max_examples=350)
@given(st.sampled_from(sorted(EM_STARTS)).flatmap(lambda name: st.tuples(st.just(name), _bad_starts_of(name))))
def test_bad_starts_of_every_em_model(case):
    name, init = case
    model, data, _ = EM_STARTS[name]
    rejects(lambda: tempered_em(model, data, key=KEY, init=init, max_iter=2), "init")


@pytest.mark.parametrize("name", sorted(EM_STARTS))
def test_valid_starts_of_every_em_model_are_accepted(name):
    # The model's own start, and the parameters of a fit (resuming it).
    model, data, start = EM_STARTS[name]
    for init in (start, tempered_em(model, data, key=KEY, max_iter=20).params):
        CASES["count"] += 1
        assert tempered_em(model, data, key=KEY, init=init, max_iter=2).n_iter == 2


def test_at_least_a_thousand_cases():
    assert sum(MINIMA.values()) >= MINIMUM_CASES, MINIMA


# ----------------------------------------------------------------------------- one classified fuzz of every entry point
# The tests above each fail at their first bad case. This one draws misuses across every public
# entry point from one table, classifies every outcome and reports the counts by class, so that a
# run shows the whole picture: a clean ValueError/TypeError (FileNotFoundError for a file that is
# not there) naming the argument (raised outside
# JAX) passes; an error naming something else, one raised inside JAX, any other exception, a hang
# (no answer within HANG_SECONDS), a NaN result or a call that accepts the misuse all fail.
# LATENTZOO_FUZZ_CASES sets the number of cases (default 1,000; larger runs for a search).
N_CLASSIFIED = int(os.environ.get("LATENTZOO_FUZZ_CASES", "1000"))
HANG_SECONDS = 60
OUTCOMES: collections.Counter = collections.Counter()
EXAMPLES: dict[str, list[str]] = collections.defaultdict(list)


class _Hang(BaseException):
    """Raised by the alarm when a case runs past HANG_SECONDS."""


def _on_alarm(signum, frame):
    raise _Hang()


def classify(call: Callable[[], Any], names: tuple[str, ...]) -> str:
    """The class of the outcome of ``call()``, a misuse whose error should name one of ``names``."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_SECONDS)
    try:
        result = call()
    except _Hang:
        return "hang"
    except (ValueError, TypeError, FileNotFoundError) as error:  # a missing file: Python's own convention
        if any(_inside_jax(frame.filename) for frame in traceback.extract_tb(error.__traceback__)):
            return "JAX-internal traceback"
        return "pass" if str(error).startswith(names) else "error not naming the argument"
    except Exception as error:  # noqa: BLE001 - every other exception is a failure class of its own
        return f"other exception ({type(error).__name__})"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(result)
              if isinstance(leaf, (np.ndarray, jax.Array, float))]
    if any(np.issubdtype(leaf.dtype, np.floating) and np.isnan(leaf).any() for leaf in leaves):
        return "NaN result"
    return "silent acceptance"


def _cli(argv: list[str]) -> int:
    """``python -m zoo`` with ``argv``: its exit status, or its error message as a ValueError."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = cli.main(argv)
        except SystemExit as exit_:  # argparse
            status = exit_.code
    if status not in (0, None):
        message = errors.getvalue().strip().splitlines()[-1] if errors.getvalue().strip() else ""
        option = message.split("error: ", 1)[-1]
        raise ValueError(option if option else f"exit status {status} without a message")
    return status


CLI_DATA = _write("cli.mtx", MTX_HEADER + "1 1 2\n2 3 1\n")
@functools.cache
def _resumable_fit():
    """A short DP fit of POINTS (made once, on first use) for DPMixtureFit.resume's misuses."""
    return DPMixture(normal_gamma(2), max_clusters=4).fit(POINTS, KEY, n_chains=1, n_warmup=0, n_draws=2,
                                                          progress=False)


@functools.cache
def _resumable_irm_result():
    """A short IRM run (made once, on first use) for IRMResult.resume's misuses."""
    return InfiniteRelational().sample(RELATIONAL, key=KEY, n_sweeps=2, n_chains=1)


@functools.cache
def _resumable_supervised_fit():
    """A short SCDP fit (made once, on first use) for SupervisedDPFit.resume's misuses."""
    return SupervisedDP().fit(POINTS[:2], [0, 1], POINTS[2:], key=KEY, n_sweeps=2, n_chains=1, progress=False)


BAD_POSITIVE_INT = ints_below(1)
BAD_COUNT = ints_below(0)
BAD_POSITIVE_REAL = reals_below(0.0, open_=True)
BAD_BOOL = st.sampled_from(["yes", None, 2, 1.5, [True]])
BAD_POINTS = st.one_of(bad_counts((4, 2)).filter(lambda values: values.dtype.kind != "f" or values.ndim != 2
                                                 or not np.isfinite(values).all()),
                       st.sampled_from([np.ones(4), np.ones((0, 2)), "points", None, [[1.0], [2.0, 3.0]],
                                        np.array(["2020-01-01"] * 8, "datetime64[D]").reshape(4, 2)]))
# New points to score: any number of rows of the data's width, finite numbers.
BAD_NEW_POINTS = st.sampled_from([np.ones(2), np.ones((0, 2)), np.ones((3, 3)), "points", None, [[1.0], [2.0, 3.0]],
                                  [[np.nan, 1.0]], [[np.inf, 0.0]], np.array([[1 + 1j, 0.0]]),
                                  np.array(["2020-01-01"] * 2, "datetime64[D]").reshape(1, 2)])
BAD_HYPER = st.one_of(BAD_POSITIVE_REAL, st.sampled_from([1e-45, 1e-40, 1e-30, 1e30, 1e38, 1e300, [1.0, 1.0, 1.0]]))
BAD_PATHS = st.sampled_from([None, 3, "", "/no/such/file.npz", str(READER_DIR), READER_DIR / "missing.npz"])
HIDDEN = np.array([[0]])
SAVED = {"result": READER_DIR / "classified-result.npz", "checkpoint": READER_DIR / "classified-checkpoint.npz",
         "chains": READER_DIR / "classified-chains.nc"}
for _kind, _bytes in (("result", RESULT_BYTES), ("checkpoint", CHECKPOINT_BYTES), ("chains", CHAINS_BYTES)):
    SAVED[_kind].write_bytes(_bytes)
CORRUPTED = st.sampled_from(["truncated", "empty", "garbage"]).map(
    lambda how: lambda data: data[: len(data) // 2] if how == "truncated" else b"" if how == "empty" else b"\x00" * 64)


def _damaged_file(kind: str) -> st.SearchStrategy:
    data = SAVED[kind].read_bytes()
    return st.one_of(BAD_PATHS, CORRUPTED.map(lambda damage: _write_bytes(damage(data), SAVED[kind].suffix)))


def _known_model(name: Any) -> bool:
    """Whether the registry knows ``name`` (its aliases too, e.g. 'scm')."""
    try:
        registry.describe(name)
    except (ValueError, TypeError):
        return False
    return True


def _em(kwargs: dict) -> Any:
    return tempered_em(**kwargs)


#: entry point -> (call(kwargs), valid kwargs, {argument: bad values}, {argument: names its error may start with}).
ENTRY_POINTS: dict[str, tuple[Callable[[dict], Any], dict, dict[str, st.SearchStrategy], dict[str, tuple]]] = {
    "tempered_em": (_em, {**EM_VALID, "max_iter": 2}, {
        "model": NOT_MODELS, "key": BAD_KEYS, "n_restarts": BAD_POSITIVE_INT, "max_iter": BAD_POSITIVE_INT,
        "tol": reals_below(0.0), "segment": BAD_POSITIVE_INT, "init": BAD_STARTS,
        "schedule": st.sampled_from(["tempered", 1.0, FixedBeta, object()]),
        "data": st.sampled_from([DATA.to_dense(), None, [[1, 2]], "counts", RELATIONAL]),
        "valid": st.sampled_from([DATA.to_dense(), "valid", 3, CoOccurrence.from_dense(np.ones((2, 2)))]),
        "time_budget": reals_below(0.0, open_=True).filter(lambda value: value is not None),
    }, {"data": ("data", "counts"), "model": ("model",)}),
    "Aspect": (lambda kwargs: Aspect(**kwargs), {"n_classes": 2}, {
        "n_classes": BAD_POSITIVE_INT, "backend": not_one_of(("auto", "xla", "numba")),
        "update": not_one_of(("simultaneous", "alternating"))}, {}),
    "OneSided": (lambda kwargs: OneSided(**kwargs), {"n_classes": 2}, {
        "n_classes": BAD_POSITIVE_INT, "side": not_one_of(("rows", "cols")),
        "prior_count": reals_below(0.0)}, {}),
    "TwoSided": (lambda kwargs: TwoSided(**kwargs), {"n_row_classes": 2, "n_col_classes": 2}, {
        "n_row_classes": BAD_POSITIVE_INT,
        "n_col_classes": BAD_POSITIVE_INT.filter(lambda value: value is not None), "prior_count": reals_below(0.0)}, {}),
    "ClusterAbstraction": (lambda kwargs: ClusterAbstraction(**kwargs), {"depth": 1}, {
        "depth": BAD_POSITIVE_INT.filter(lambda value: value is not None), "branching": ints_below(2),
        "prior_count": reals_below(0.0)}, {}),
    "GaussianMixture": (lambda kwargs: GaussianMixture(**kwargs), {"n_classes": 2}, {
        "n_classes": BAD_POSITIVE_INT, "variance_floor": BAD_POSITIVE_REAL}, {}),
    "GaussianMixture.fit": (lambda kwargs: tempered_em(GaussianMixture(2), kwargs["data"], key=KEY, max_iter=2,
                                                       init=kwargs["init"]),
                            {"data": POINTS, "init": None}, {
        "data": BAD_POINTS,
        "init": st.sampled_from([1e-45, 1e-40, 0.0, -1.0, math.inf, 1e300]).map(lambda scale: EM_STARTS[
            "gaussian mixture"][2]._replace(scales=np.full((2, 2), scale)))}, {}),
    "LatentClassRelational.fit": (lambda kwargs: LatentClassRelational(2).fit(**kwargs),
                                  {"data": RELATIONAL, "key": KEY, "n_restarts": 1, "max_passes": 2}, {
        "data": st.sampled_from([DATA, None, np.ones((4, 4)), "data"]), "key": BAD_KEYS,
        "n_restarts": BAD_POSITIVE_INT, "max_passes": BAD_POSITIVE_INT,
        "passes_per_call": BAD_POSITIVE_INT, "progress": BAD_BOOL,
        "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None)}, {}),
    "LatentClassRelational.predict_held_out": (
        lambda kwargs: LatentClassRelational(2).predict_held_out(**kwargs),
        {"data": RELATIONAL, "hidden": HIDDEN, "key": KEY, "max_passes": 2, "relation": 0}, {
            "hidden": bad_index_vectors(1, 10**6).map(lambda values: values[None]), "key": BAD_KEYS,
            "relation": BAD_RELATIONS, "cases_per_call": BAD_POSITIVE_INT, "max_passes": BAD_POSITIVE_INT,
            "progress": BAD_BOOL, "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None)}, {}),
    "InfiniteRelational": (lambda kwargs: InfiniteRelational(**kwargs), {}, {
        "concentration": BAD_POSITIVE_REAL, "hyper": BAD_POSITIVE_REAL, "max_clusters": BAD_POSITIVE_INT,
        "init_clusters": BAD_POSITIVE_INT, "sample_hyper": BAD_BOOL, "backend": not_one_of(("auto", "xla", "numba"))},
        {}),
    "InfiniteRelational.sample": (lambda kwargs: InfiniteRelational().sample(**kwargs),
                                  {"data": RELATIONAL, "key": KEY, "n_sweeps": 2, "n_chains": 1}, {
        # n_sweeps=None and until_mixed=None are the defaults (until the chains mix, 10,000 draws at most).
        "data": st.sampled_from([DATA, None, np.ones((4, 4))]), "key": BAD_KEYS,
        "n_sweeps": BAD_POSITIVE_INT.filter(lambda value: value is not None),
        "n_chains": BAD_POSITIVE_INT, "n_warmup": st.one_of(BAD_COUNT.filter(lambda value: value is not None), st.integers(2, 100)),
        "sweeps_per_call": BAD_POSITIVE_INT, "keep_assignments": BAD_BOOL, "progress": BAD_BOOL,
        "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None),
        "until_mixed": BAD_BOOL.filter(lambda value: value is not None)}, {}),
    "IRMResult.resume": (lambda kwargs: _resumable_irm_result().resume(**kwargs), {"data": RELATIONAL, "n_draws": 2}, {
        "data": st.sampled_from([DATA, None, np.ones((4, 4))]), "n_draws": BAD_POSITIVE_INT,
        "sweeps_per_call": BAD_POSITIVE_INT.filter(lambda value: value is not None),  # None: the fit's own
        "progress": BAD_BOOL, "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None),
        "until_mixed": BAD_BOOL}, {}),
    "InfiniteRelational.predict_held_out": (
        lambda kwargs: InfiniteRelational().predict_held_out(**kwargs),
        {"data": RELATIONAL, "hidden": HIDDEN, "key": KEY, "n_sweeps": 2, "relation": 0}, {
            "hidden": bad_index_vectors(1, 10**6).map(lambda values: values[None]), "key": BAD_KEYS,
            # n_sweeps=None and until_mixed=None are the defaults (until the chains mix, 5,000 sweeps at most).
            "relation": BAD_RELATIONS, "n_sweeps": BAD_POSITIVE_INT.filter(lambda value: value is not None),
            "progress": BAD_BOOL, "until_mixed": BAD_BOOL.filter(lambda value: value is not None),
            "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None)}, {}),
    "leave_one_out_log_loss": (lambda kwargs: leave_one_out_log_loss(**kwargs),
                               {"model": LRM, "data": RELATIONAL, "key": KEY, "max_cases": 2, "max_passes": 2}, {
        "model": NOT_MODELS, "key": BAD_KEYS, "max_cases": BAD_POSITIVE_INT, "relation": BAD_RELATIONS,
        "base": st.one_of(reals_below(1.0, open_=True), st.just(1.0))}, {}),
    "cross_validated_log_loss": (lambda kwargs: cross_validated_log_loss(**kwargs),
                                 {"model": LRM, "data": RELATIONAL, "key": KEY, "max_passes": 2}, {
        "model": NOT_MODELS, "key": BAD_KEYS, "n_folds": ints_below(2), "relation": BAD_RELATIONS}, {}),
    "DPMixture": (lambda kwargs: DPMixture(**kwargs), {"family": normal_gamma(2)}, {
        "family": st.sampled_from([None, "normal_gamma", normal_gamma, 3]), "alpha": BAD_POSITIVE_REAL,
        # None is the default (Algorithm 3 where the family has a marginal likelihood, else 8).
        "algorithm": not_one_of(("auxiliary", "conjugate", "collapsed", "subcluster")).filter(
            lambda value: value is not None),
        "n_auxiliary": BAD_POSITIVE_INT, "max_clusters": st.one_of(BAD_POSITIVE_INT, st.just(2**40)),
        "on_overflow": not_one_of(("grow", "raise")),
        "n_split_merge": BAD_COUNT.filter(lambda value: value is not None), "split_merge_scans": BAD_COUNT}, {}),
    "DPMixture.fit": (lambda kwargs: DPMixture(normal_gamma(2), max_clusters=4).fit(**kwargs),
                      {"data": POINTS, "key": KEY, "n_chains": 1, "n_warmup": 0, "n_draws": 2, "progress": False}, {
        "data": BAD_POINTS, "key": BAD_KEYS, "n_chains": BAD_POSITIVE_INT, "n_warmup": BAD_COUNT,
        # n_draws=None and until_mixed=None are the defaults (until the chains mix, 10,000 draws at most).
        "n_draws": BAD_POSITIVE_INT.filter(lambda value: value is not None), "thin": BAD_POSITIVE_INT,
        "draws_per_call": BAD_POSITIVE_INT,
        # Labels are any whole numbers >= 0 (only their equalities count): negative or fractional ones are not.
        "init": st.one_of(not_one_of(DP_INITS),
                          bad_index_vectors(4, 10**9).filter(
                              lambda labels: labels.dtype.kind != "i" or not (labels >= 10**9).any())),
        "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None),
        "until_mixed": BAD_BOOL.filter(lambda value: value is not None)}, {}),
    # Five features: NOT_NUMBERS' list of two values and BAD_HYPER's of three are the wrong length.
    "DPMixtureFit.resume": (lambda kwargs: _resumable_fit().resume(**kwargs),
                            {"data": POINTS, "n_draws": 2, "progress": False}, {
        "data": BAD_POINTS, "n_draws": BAD_POSITIVE_INT, "draws_per_call": BAD_POSITIVE_INT,
        "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None), "until_mixed": BAD_BOOL}, {}),
    "DPMixtureFit.log_predictive_density": (lambda kwargs: _resumable_fit().log_predictive_density(**kwargs),
                                            {"data": POINTS, "new_points": POINTS[:2]}, {
        "data": BAD_POINTS, "new_points": BAD_NEW_POINTS, "by_chain": BAD_BOOL}, {}),
    "DPMixtureFit.loo": (lambda kwargs: _resumable_fit().loo(**kwargs), {"data": POINTS}, {
        "data": BAD_POINTS, "refit": BAD_BOOL, "key": BAD_KEYS.filter(lambda value: value is not None)}, {}),
    # refit=False: the short run's one draw leaves every case above the k limit, and the cases run again are
    # InfiniteRelational.predict_held_out's own (fuzzed above).
    "IRMResult.predict_held_out": (
        lambda kwargs: _resumable_irm_result().predict_held_out(**kwargs),
        {"data": RELATIONAL, "hidden": HIDDEN, "key": KEY, "relation": 0, "refit": False, "progress": False}, {
            "data": st.sampled_from([DATA, None, np.ones((4, 4)), RelationalData.from_adjacency(np.eye(4)[::-1])]),
            "hidden": bad_index_vectors(1, 10**6).map(lambda values: values[None]),
            "key": BAD_KEYS.filter(lambda value: value is not None), "relation": BAD_RELATIONS, "refit": BAD_BOOL,
            "progress": BAD_BOOL}, {}),
    "IRMResult.psis_held_out": (lambda kwargs: _resumable_irm_result().psis_held_out(**kwargs),
                                {"hidden": HIDDEN, "relation": 0}, {
        "hidden": bad_index_vectors(1, 10**6).map(lambda values: values[None]), "relation": BAD_RELATIONS}, {}),
    "SupervisedDPFit.resume": (lambda kwargs: _resumable_supervised_fit().resume(**kwargs),
                               {"train_features": POINTS[:2], "train_labels": [0, 1], "test_features": POINTS[2:],
                                "n_draws": 2, "progress": False}, {
        "train_features": BAD_POINTS, "test_features": BAD_POINTS, "train_labels": BAD_LABELS,
        "n_draws": BAD_POSITIVE_INT, "draws_per_call": BAD_POSITIVE_INT,
        "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None), "until_mixed": BAD_BOOL}, {}),
    "normal_gamma": (lambda kwargs: normal_gamma(**kwargs), {"n_features": 5}, {
        "n_features": BAD_POSITIVE_INT, "kappa": BAD_HYPER, "shape": BAD_HYPER, "rate": BAD_HYPER,
        "mean": st.one_of(NON_FINITE, NOT_NUMBERS, st.sampled_from([1e30, -1e38, [0.0, 0.0, 0.0]]))}, {}),
    "dirichlet_multinomial": (lambda kwargs: dirichlet_multinomial(**kwargs), {"n_features": 5}, {
        "n_features": BAD_POSITIVE_INT, "concentration": BAD_HYPER,
        "total_count": BAD_COUNT}, {}),
    "beta_bernoulli": (lambda kwargs: beta_bernoulli(**kwargs), {"n_features": 5}, {
        "n_features": BAD_POSITIVE_INT, "a": BAD_HYPER, "b": BAD_HYPER}, {}),
    "normal_known_precision": (lambda kwargs: normal_known_precision(**kwargs), {"n_features": 5}, {
        "n_features": BAD_POSITIVE_INT, "precision": BAD_HYPER, "prior_variance": BAD_HYPER,
        "mean": st.one_of(NON_FINITE, NOT_NUMBERS, st.sampled_from([1e30, -1e38, [0.0, 0.0, 0.0]]))}, {}),
    "SupervisedDP": (lambda kwargs: SupervisedDP(**kwargs), {}, {
        "alpha": BAD_POSITIVE_REAL, "alpha_types": BAD_POSITIVE_REAL, "max_test_clusters": BAD_POSITIVE_INT,
        "max_types": BAD_POSITIVE_INT, "n_auxiliary": BAD_POSITIVE_INT,
        # None is the default of both counts (resolved from the data and from the model).
        "n_split_merge": BAD_COUNT.filter(lambda value: value is not None),
        "n_precision_split_merge": BAD_COUNT.filter(lambda value: value is not None),
        "model": st.sampled_from([0, 4, "one", None, 1.5]),
        "prior_variance": BAD_POSITIVE_REAL, "precision_shape": BAD_POSITIVE_REAL, "precision_rate": BAD_POSITIVE_REAL,
        "backend": not_one_of(("auto", "xla", "numba")), "pair_moves": st.sampled_from(["yes", 1, 0.5, [True]])}, {}),
    "SupervisedDP.fit": (lambda kwargs: SupervisedDP().fit(**kwargs),
                         {"train_features": POINTS[:2], "train_labels": [0, 1], "test_features": POINTS[2:],
                          "key": KEY, "n_sweeps": 2, "n_chains": 1, "progress": False}, {
        "train_features": BAD_POINTS, "test_features": BAD_POINTS, "train_labels": BAD_LABELS, "key": BAD_KEYS,
        # n_sweeps=None and until_mixed=None are the defaults (until the chains mix, 4,000 draws at most).
        "n_sweeps": BAD_POSITIVE_INT.filter(lambda value: value is not None), "n_chains": BAD_POSITIVE_INT,
        "thin": BAD_POSITIVE_INT, "draws_per_call": BAD_POSITIVE_INT,
        "until_mixed": BAD_BOOL.filter(lambda value: value is not None)}, {}),
    "load_result": (lambda kwargs: load_result(**kwargs), {"path": SAVED["result"]},
                    {"path": _damaged_file("result")}, {}),
    "load_checkpoint": (lambda kwargs: load_checkpoint(**kwargs), {"path": SAVED["checkpoint"], "like": CHAIN_STATE},
                        {"path": _damaged_file("checkpoint"),
                         "like": st.sampled_from([None, 3, {"labels": jnp.zeros((2, 3), jnp.int32)},
                                                  {"labels": jnp.zeros((2, 4), jnp.int32), "weights": jnp.ones((2, 3))}])},
                        {"like": ("like", "path")}),
    "load_chains": (lambda kwargs: load_chains(**kwargs), {"path": SAVED["chains"]},
                    {"path": _damaged_file("chains")}, {}),
    "python -m zoo": (lambda kwargs: _cli(["fit", str(kwargs["model"]), str(kwargs["datafile"]), "--classes",
                                           str(kwargs["classes"]), "--max-iter", str(kwargs["max_iter"]),
                                           "--valid-fraction", str(kwargs["valid_fraction"]), "--quiet", "--out",
                                           str(READER_DIR / "cli-out")]),
                      {"model": "aspect", "datafile": CLI_DATA, "classes": 2, "max_iter": 2, "valid_fraction": 0.3}, {
        "model": not_one_of(("aspect", "one-sided", "two-sided", "cam", "gaussian-mixture", "dp-mixture")),
        "datafile": st.sampled_from([READER_DIR / "none.mtx", READER_DIR, _write("bad.mtx", "garbage\n")]),
        "classes": st.one_of(st.integers(max_value=0), st.sampled_from(["two", "1.5", ""])),
        "max_iter": st.one_of(st.integers(max_value=0), st.sampled_from(["x", "2.5"])),
        "valid_fraction": st.one_of(st.floats(max_value=0.0, allow_nan=False), st.floats(min_value=1.0),
                                    st.sampled_from(["nan", "x"]))},
                      {"model": ("argument MODEL",), "datafile": ("DATAFILE", "path", "datafile", "[Errno"),
                       "classes": ("argument --classes", "--classes (n_classes)"),
                       "max_iter": ("argument --max-iter", "--max-iter (max_iter)"),
                       "valid_fraction": ("argument --valid-fraction", "--valid-fraction (valid_fraction)")}),
    "zoo.cli.read_data": (lambda kwargs: cli.read_data(**kwargs), {"path": CLI_DATA, "fmt": None}, {
        "path": st.sampled_from([None, 3, READER_DIR / "none.mtx", READER_DIR]),
        "fmt": not_one_of(("mtx", "ldac", "csv")).filter(lambda value: value is not None)},
        {"path": ("path", "DATAFILE"), "fmt": ("fmt", "--format")}),
    "inference.neal.init": (lambda kwargs: neal.init(**kwargs),
                            {"rng_key": KEY, "data": POINTS, "family": normal_gamma(2), "max_clusters": 2,
                             "alpha": 1.0}, {
        "rng_key": BAD_KEYS, "data": BAD_POINTS, "family": st.sampled_from([None, "family", normal_gamma]),
        "max_clusters": BAD_POSITIVE_INT, "alpha": BAD_POSITIVE_REAL,
        "algorithm": not_one_of(("auxiliary", "conjugate", "collapsed"))}, {}),
    "inference.neal.build_kernel": (lambda kwargs: neal.build_kernel(**kwargs), {"family": normal_gamma(2)}, {
        "family": st.sampled_from([None, "family", normal_gamma]),
        "algorithm": not_one_of(("auxiliary", "conjugate", "collapsed")), "n_auxiliary": BAD_POSITIVE_INT,
        "n_split_merge": BAD_COUNT, "split_merge_scans": BAD_COUNT, "backend": not_one_of(("auto", "xla", "numba"))},
        {}),
    "sample_chains": (lambda kwargs: sample_chains(**kwargs),
                      {"rng_key": KEY, "step": lambda key, state, data: (state, {}), "init_states": {"x": jnp.zeros((2, 1))},
                       "data": None, "n_warmup": 0, "n_draws": 1, "progress": False, "record": lambda state, info: state}, {
        "rng_key": BAD_KEYS, "step": st.sampled_from([None, "step", 3]), "n_warmup": BAD_COUNT,
        "n_draws": BAD_POSITIVE_INT, "thin": BAD_POSITIVE_INT, "draws_per_call": BAD_POSITIVE_INT,
        "on_overflow": not_one_of(("grow", "raise")), "first_sweep": BAD_COUNT,
        "init_states": st.sampled_from([{"x": jnp.zeros(())}, {"x": jnp.zeros((2, 1)), "y": jnp.zeros((3, 1))}])}, {}),
    "escobar_west_update": (lambda kwargs: concentration.escobar_west_update(**kwargs),
                            {"rng_key": KEY, "alpha": 1.0, "n_clusters": 2, "n_points": 5, "prior": PRIOR}, {
        "rng_key": BAD_KEYS, "alpha": BAD_POSITIVE_REAL, "prior": st.sampled_from([None, (1.0, 1.0), 3]),
        "n_points": BAD_COUNT, "n_clusters": st.one_of(BAD_COUNT, st.integers(6, 100))},
        {"n_points": ("n_points", "n_clusters")}),  # n_points = 0 (a prior draw) with 2 clusters: the pair
    "point_partition": (lambda kwargs: partitions.point_partition(**kwargs),
                        {"assignments": np.zeros((3, 4), int), "loss": "vi"}, {
        "assignments": st.sampled_from([None, "abc", np.zeros(()), np.full((3, 4), 0.5), np.full((3, 4), np.nan),
                                        np.zeros((0, 4)), np.zeros((3, 0))]), "loss": not_one_of(("vi", "binder"))}, {}),
    "anneal_tree": (lambda kwargs: anneal_tree(**kwargs), {"data": DATA, "key": KEY, "max_leaves": 2}, {
        "data": st.sampled_from([None, DATA.to_dense(), "data"]), "key": BAD_KEYS, "max_leaves": ints_below(2),
        "progress": BAD_BOOL, "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None)}, {}),
    "kmeans_partition": (lambda kwargs: baselines.kmeans_partition(**kwargs),
                         {"test_features": POINTS, "n_clusters": 2}, {
        "test_features": BAD_POINTS, "n_clusters": st.one_of(BAD_POSITIVE_INT, st.integers(5, 100))}, {}),
    "cdp_partition": (lambda kwargs: baselines.cdp_partition(**kwargs),
                      {"test_features": POINTS, "key": KEY, "n_chains": 1, "n_warmup": 1, "n_draws": 1}, {
        "test_features": BAD_POINTS, "key": BAD_KEYS, "n_chains": BAD_POSITIVE_INT,
        "prior_variance": BAD_POSITIVE_REAL,
        "n_split_merge": BAD_COUNT.filter(lambda value: value is not None)}, {}),  # None: DPMixture's default
    "get_model": (lambda kwargs: registry.get_model(**kwargs), {"name": "aspect"}, {
        "name": not_one_of(tuple(registry.MODEL_NAMES)).filter(lambda name: not _known_model(name))}, {}),
    "describe": (lambda kwargs: registry.describe(**kwargs), {"name": "aspect"}, {
        "name": st.sampled_from([None, 3, "no such model", ""])}, {}),
    "CoOccurrence": (lambda kwargs: CoOccurrence(**kwargs), COO_VALID, {
        "rows": bad_index_vectors(3, 2), "cols": bad_index_vectors(3, 3), "counts": bad_counts((3,)), "shape": SHAPES},
        {"rows": ("rows", "counts"), "cols": ("cols", "counts")}),
}
for _estimator in ESTIMATORS:
    ENTRY_POINTS[f"{type(_estimator).__name__}.fit"] = (
        lambda kwargs, estimator=_estimator: __import__("sklearn").base.clone(estimator).set_params(
            **{key: value for key, value in kwargs.items() if key != "X"}).fit(kwargs["X"]),
        {"X": POINTS if isinstance(_estimator, (GaussianMixtureEstimator, DPMixtureEstimator)) else X_COUNTS}, {
            "X": NOT_REAL_NUMBERS, "random_state": st.sampled_from([-1, "seed", 1.5, [1]]),
            **{name: bad for name, bad in {
                "n_classes": BAD_POSITIVE_INT, "depth": BAD_POSITIVE_INT.filter(lambda value: value is not None),
                "max_iter": BAD_POSITIVE_INT, "tol": reals_below(0.0), "alpha": BAD_POSITIVE_REAL,
                "n_draws": BAD_POSITIVE_INT, "n_chains": BAD_POSITIVE_INT, "until_mixed": BAD_BOOL,
                "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None)}.items()
               if name in _estimator.get_params()}},
        {})
# Supervised clustering: y labels the training rows and marks the rows to cluster with -1.
ENTRY_POINTS["SupervisedDPEstimator.fit"] = (
    lambda kwargs: SupervisedDPEstimator(**{key: value for key, value in kwargs.items() if key not in ("X", "y")}).fit(
        kwargs["X"], kwargs["y"]),
    {"X": POINTS, "y": [0, 1, -1, -1]}, {
        "X": st.sampled_from([POINTS.astype("U4"), POINTS.astype(complex), np.full((4, 2), np.nan), POINTS[:, :, None]]),
        "y": st.sampled_from([None, [0, 1, 2, 3], [-1, -1, -1, -1], [0, -2, -1, -1], ["a", "b", "-1", "-1"],
                              [[0], [1], [-1], [-1]], [0, 1, -1], [0.5, 1, -1, -1], np.array([0, 1, -1, np.nan])]),
        "model": st.sampled_from([0, 4, 1.5, "1", None]), "share_clusters": st.sampled_from([1, "yes", None]),
        "alpha_prior": st.sampled_from([(0.0, 1.0), (1.0,), 1.0, "gamma"]), "n_chains": BAD_POSITIVE_INT,
        "n_draws": BAD_POSITIVE_INT, "random_state": st.sampled_from([-1, "seed", 1.5, [1]]),
        "n_split_merge": BAD_COUNT.filter(lambda value: value is not None),  # None: the automatic count
        "pair_moves": BAD_BOOL.filter(lambda value: value is not None),  # None: by the model
        "n_precision_split_merge": BAD_COUNT.filter(lambda value: value is not None),  # None: by the model
        "prior_variance": BAD_POSITIVE_REAL, "precision_shape": BAD_POSITIVE_REAL, "precision_rate": BAD_POSITIVE_REAL,
        "time_budget": BAD_POSITIVE_REAL.filter(lambda value: value is not None), "until_mixed": BAD_BOOL},
    {})
for _metric in METRICS:
    ENTRY_POINTS[f"metrics.{_metric.__name__}"] = (
        lambda kwargs, metric=_metric: metric(**kwargs), {"labels_true": [0, 0, 1], "labels_pred": [0, 1, 1]},
        {"labels_true": BAD_LABELS, "labels_pred": st.one_of(BAD_LABELS, st.just([0, 1]))},
        {"labels_pred": ("labels_pred", "labels_true")})


def _misuse(entry: str) -> st.SearchStrategy:
    call, valid, bad, names = ENTRY_POINTS[entry]
    return corrupt(valid, bad).map(lambda case: (entry, case[0], names.get(case[0], (case[0],)),
                                                 partial_call(call, case[1])))


def partial_call(call: Callable[[dict], Any], kwargs: dict) -> Callable[[], Any]:
    bound = lambda: call(kwargs)  # noqa: E731
    bound.kwargs = kwargs
    return bound


@settings(FUZZ, max_examples=N_CLASSIFIED)
@given(st.sampled_from(sorted(ENTRY_POINTS)).flatmap(_misuse))
def _classified_cases(case):
    entry, argument, names, call = case
    outcome = classify(call, names)
    OUTCOMES[outcome] += 1
    OUTCOMES[f"entry point {entry}"] += 1
    if outcome != "pass" and len(EXAMPLES[outcome]) < 5:
        value = getattr(call, "kwargs", {}).get(argument, "?")
        EXAMPLES[outcome].append(f"{entry}({argument}={value!r:.80})")


def test_classified_misuses_of_every_entry_point():
    OUTCOMES.clear()
    EXAMPLES.clear()
    _classified_cases()
    n_cases = sum(count for outcome, count in OUTCOMES.items() if not outcome.startswith("entry point"))
    failures = {outcome: count for outcome, count in OUTCOMES.items()
                if outcome != "pass" and not outcome.startswith("entry point")}
    reached = {outcome[len("entry point "):] for outcome in OUTCOMES if outcome.startswith("entry point")}
    print(f"\n{n_cases} misuses over {len(reached)} entry points: {OUTCOMES['pass']} refused cleanly; failures "
          f"by class: {failures or 'none'}; examples: {dict(EXAMPLES)}")
    CASES["count"] += n_cases
    assert n_cases >= min(N_CLASSIFIED, MINIMUM_CASES)
    assert reached == set(ENTRY_POINTS), sorted(set(ENTRY_POINTS) - reached)
    assert not failures, (failures, dict(EXAMPLES))
