"""State, data and per-sweep information of the supervised-clustering Gibbs kernel, and its
initial state.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from inference.chains import CapacityError
from inference.concentration import GammaPrior
from inference._validation import (as_float_array, as_index_array, as_label_codes, check_int, check_real,
                                   feature_names, in_fitted_order)

__all__ = ["MODELS", "SupervisedData", "SupervisedState", "SupervisedInfo", "init", "nearest_partners",
           "record_supervised"]


MODELS = (1, 2, 3)


# Bits of SupervisedState.overflow: which capacity a sweep ran out of.
_CLUSTER_OVERFLOW = 1
_TYPE_OVERFLOW = 2


class SupervisedData(NamedTuple):
    """Data of one supervised-clustering problem (passed to the kernel, never closed over).

    Attributes
    ----------
    features : jax.Array (N + M, D)
        Training references first, then test references.
    train_labels : jax.Array int32 (N,)
        Training clusters, labels 0..K_train - 1 (every label used).
    partners : jax.Array int32 (M,), optional
        For each test reference, the index (among all N + M references) of the test reference
        its pair moves pair it with: :func:`nearest_partners` of the features, which
        :meth:`SupervisedDP.fit` supplies. None: the step computes them from the features every
        sweep (the same pairs up to rounding, at M² D operations a sweep).
    """

    features: jax.Array
    train_labels: jax.Array
    partners: jax.Array | None = None

    @property
    def n_train(self) -> int:
        """Number of training references N."""
        return self.train_labels.shape[0]


def nearest_partners(features: Any, n_train: int) -> np.ndarray:
    """Nearest other test reference of each test reference, by Euclidean distance: the pairs of
    the kernel's pair moves (:func:`zoo.dirichlet.supervised.sweep_xla._pair_move`).

    The pairs depend on the data alone, never on the chain's state, so a pair move is a Gibbs
    update of a fixed block. Distances are computed as ``|a|² - 2 a·b + |b|²`` in float64, so among
    references at exactly equal distances (duplicate records) the rounding picks one, the same
    one for the same data.

    Parameters
    ----------
    features : array_like (N + M, D)
        Training references first, then test references.
    n_train : int
        N.

    Returns
    -------
    numpy.ndarray of int32 (M,)
        Indices into ``features`` (N + the test position of the partner); a lone test reference
        is its own partner, which no pair move moves.

    >>> nearest_partners([[9.0], [0.0], [0.9], [3.0]], n_train=1)
    array([2, 1, 2], dtype=int32)
    """
    test = np.asarray(features, np.float64)[n_train:]
    n_test = test.shape[0]
    partners = np.arange(n_test)
    if n_test >= 2:
        squares = np.einsum("nd,nd->n", test, test)
        for start in range(0, n_test, 2048):  # blocks of rows: memory 2,048 × M
            block = test[start:start + 2048]
            distances = squares[start:start + 2048, None] - 2.0 * block @ test.T + squares[None, :]
            distances[np.arange(block.shape[0]), np.arange(start, start + block.shape[0])] = np.inf
            partners[start:start + 2048] = np.argmin(distances, axis=1)
    return (n_train + partners).astype(np.int32)


def _nearest_partners_in_graph(features: jax.Array, n_train: int) -> jax.Array:
    """:func:`nearest_partners` inside a traced step (data given without ``partners``)."""
    test = features[n_train:]
    squares = jnp.sum(test * test, axis=-1)
    distances = squares[:, None] - 2.0 * test @ test.T + squares[None, :]
    distances = jnp.where(jnp.eye(test.shape[0], dtype=bool), jnp.inf, distances)
    return (n_train + jnp.argmin(distances, axis=1)).astype(jnp.int32)


class SupervisedState(NamedTuple):
    """Gibbs state: two partitions with fixed capacities and their parameters.

    Attributes
    ----------
    clusters : int32 (N + M,)
        Publication slot of every reference; training references keep slots 0..K_train - 1.
    cluster_counts : int32 (K_max,)
        References per publication slot.
    means : (K_max, D)
        Publication means p_k (arbitrary in empty slots).
    types : int32 (N + M,)
        Reference-type slot of every reference.
    type_counts : int32 (L_max,)
        References per type slot.
    precisions : (L_max, D)
        Diagonal precisions t_l (arbitrary in empty slots).
    alpha, alpha_types : scalar
        Concentrations α^p and α^t.
    precision_shape, precision_rate : (D,)
        Current Gamma prior of the precisions (fixed for SCDP-1 and -3, re-set by SCDP-2).
    overflow : int32 scalar
        Sticky bit mask, 0 when all is well: bit 1 (publications) or bit 2 (reference types)
        is set when a sweep needed more slots than the capacity, or opened more publications or
        types than its supply of fresh draws, which grows with the capacity. The chain driver
        then re-runs the sweeps from the last good state with that capacity doubled
        (:meth:`grow_after_overflow`).
    """

    clusters: jax.Array
    cluster_counts: jax.Array
    means: jax.Array
    types: jax.Array
    type_counts: jax.Array
    precisions: jax.Array
    alpha: jax.Array
    alpha_types: jax.Array
    precision_shape: jax.Array
    precision_rate: jax.Array
    overflow: jax.Array

    def grow_after_overflow(self, overflowed: SupervisedState) -> SupervisedState:
        """This state (the last one without overflow) with the capacity that ``overflowed`` ran
        out of doubled, at most one slot per reference; called by
        :func:`inference.chains.sample_chains`, which then re-runs the failed sweeps.

        Empty slots are not part of the chain's state (a new publication or type takes fresh
        parameters), so adding them changes nothing but the room to open new ones. Works on a
        single state or a batch of chains (leading axes).

        Raises
        ------
        CapacityError
            When the capacity that overflowed already has one slot per reference.
        """
        flags = int(np.bitwise_or.reduce(np.asarray(overflowed.overflow).ravel()))
        n_points = self.clusters.shape[-1]
        n_slots, n_type_slots = self.cluster_counts.shape[-1], self.type_counts.shape[-1]
        grow_clusters = bool(flags & _CLUSTER_OVERFLOW)
        grow_types = bool(flags & _TYPE_OVERFLOW)
        if (grow_clusters and n_slots >= n_points) or (grow_types and n_type_slots >= n_points):
            raise CapacityError(
                "a supervised DP chain needed a new publication or reference type with one slot per "
                "reference already; this should not happen, please report it"
            )
        state = self
        if grow_clusters:
            extra = min(2 * n_slots, n_points) - n_slots
            state = state._replace(cluster_counts=_pad_slots(state.cluster_counts, extra, 0),
                                   means=_pad_slots(state.means, extra, 0.0, axis=-2))
        if grow_types:
            extra = min(2 * n_type_slots, n_points) - n_type_slots
            state = state._replace(type_counts=_pad_slots(state.type_counts, extra, 0),
                                   precisions=_pad_slots(state.precisions, extra, 1.0, axis=-2))
        return state


def _pad_slots(array: jax.Array, extra: int, value: float, axis: int = -1) -> jax.Array:
    """``array`` with ``extra`` slots of ``value`` appended along ``axis``."""
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, extra)
    return jnp.pad(array, widths, constant_values=value)


class SupervisedInfo(NamedTuple):
    """Label-invariant per-sweep diagnostics.

    Attributes
    ----------
    n_clusters : int32
        Distinct publications among the test references.
    n_types : int32
        Occupied reference types.
    log_joint : scalar
        log p(c, d, p, t, r | α^p, α^t) after the sweep.
    alpha, alpha_types : scalar
        Concentrations after the sweep.
    overflow : int32
        Overflow bit mask of the state after this sweep (see :class:`SupervisedState`).
    split_merge_accepted : int32
        Split–merge moves of the test partition accepted in this sweep (of ``n_split_merge``, plus
        SCDP-3's ``n_precision_split_merge``).
    type_split_merge_accepted : int32
        Split–merge moves of the reference-type partition accepted in this sweep (of
        ``n_type_split_merge``).
    """

    n_clusters: jax.Array
    n_types: jax.Array
    log_joint: jax.Array
    alpha: jax.Array
    alpha_types: jax.Array
    overflow: jax.Array
    split_merge_accepted: jax.Array
    type_split_merge_accepted: jax.Array


class _Config(NamedTuple):
    model: int
    share_clusters: bool
    prior_variance: float
    precision_shape: float
    precision_rate: float
    alpha_prior: GammaPrior | None
    alpha_types_prior: GammaPrior | None
    n_auxiliary: int
    n_split_merge: int
    n_precision_steps: int
    backend: str
    n_type_split_merge: int
    n_precision_split_merge: int
    pair_moves: bool


class _Carry(NamedTuple):
    clusters: jax.Array
    cluster_counts: jax.Array
    means: jax.Array
    types: jax.Array
    type_counts: jax.Array
    precisions: jax.Array
    overflow: jax.Array


def _check_problem(
    train_features: Any, train_labels: Any, test_features: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    train = as_float_array("train_features", train_features, ndim=2)
    # A DataFrame of test features is matched to a DataFrame of training features by column name.
    test_features = in_fitted_order("test_features", test_features, feature_names(train_features), "train_features")
    test = as_float_array("test_features", test_features, ndim=2)
    if train.shape[1] != test.shape[1]:
        raise ValueError(
            f"test_features: expected {train.shape[1]} features like train_features, got {test.shape[1]}"
        )
    codes = as_label_codes("train_labels", train_labels)
    if codes.shape[0] != train.shape[0]:
        raise ValueError(
            f"train_labels: expected one label per training point ({train.shape[0]}), got shape {codes.shape}"
        )
    return train, codes, test


def init(
    rng_key: jax.Array,
    train_features: Any,
    train_labels: Any,
    test_features: Any,
    *,
    max_test_clusters: int = 64,
    max_types: int = 16,
    alpha: float = 1.0,
    alpha_types: float = 1.0,
    precision_shape: float = 1.0,
    precision_rate: float = 1.0,
    test_clusters: Any = None,
) -> SupervisedState:
    """Initial state: training publications from the labels, test references in
    ``min(max_test_clusters, M)`` random publications (or ``test_clusters``), means at the
    cluster averages, and one reference type whose precisions match the spread of the references
    within those publications.

    The precisions start at the Gamma(a, b) prior updated by the pooled spread within the
    starting publications, t_f = (a + (N + M - K) / 2) / (b + W_f / 2), with W_f the sum of
    squared deviations from the publication averages along feature f and K the publications
    (N + M - K degrees of freedom: every publication a singleton gives the prior mean a / b).
    A start of unit precisions on data whose spread within publications is far from 1 lost the
    starting partition in its first sweep: on the record-linkage coordinates of
    ``notebooks/record_linkage.ipynb`` (variance about 0.15 per coordinate) a start at a fitted
    chain's 88 test publications held 38 after one SCDP-1 sweep (20 with its split–merge moves);
    with these precisions, 94 (93).

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key for the random test partition.
    train_features : array_like (N, D)
    train_labels : array_like (N,)
        Any hashable labels; recoded to 0..K_train - 1 in sorted order.
    test_features : array_like (M, D)
        As a DataFrame after a DataFrame of ``train_features`` with string column names, matched
        to those by name (reordered to their order; other names are a ``ValueError``).
    max_test_clusters : int
        Publication slots for the test references (capacity beyond the K_train training slots).
    max_types : int
        Reference-type slots L_max.
    alpha, alpha_types : float
        Initial concentrations.
    precision_shape, precision_rate : float
        Gamma prior of the precisions (a, rate b).
    test_clusters : array_like of int (M,), optional
        Initial test partition (labels < max_test_clusters).

    Returns
    -------
    SupervisedState
    """
    train, labels, test = _check_problem(train_features, train_labels, test_features)
    max_test_clusters = check_int("max_test_clusters", max_test_clusters, minimum=1)
    max_types = check_int("max_types", max_types, minimum=1)
    alpha = check_real("alpha", alpha, low=0.0, low_open=True)
    alpha_types = check_real("alpha_types", alpha_types, low=0.0, low_open=True)
    n_train_clusters = int(labels.max()) + 1
    n_test, n_features = test.shape
    if test_clusters is None:
        test_labels = np.asarray(jax.random.randint(rng_key, (n_test,), 0, min(max_test_clusters, n_test)))
    else:
        test_labels = as_index_array("test_clusters", test_clusters, upper=max_test_clusters)
        if test_labels.shape[0] != n_test:
            raise ValueError(f"test_clusters: expected {n_test} labels, got {test_labels.shape[0]}")
    clusters = np.concatenate([labels, n_train_clusters + test_labels]).astype(np.int32)
    n_slots = n_train_clusters + max_test_clusters
    features = np.concatenate([train, test])
    counts = np.bincount(clusters, minlength=n_slots)
    sums = np.zeros((n_slots, n_features))
    np.add.at(sums, clusters, features)
    means = sums / np.maximum(counts, 1)[:, None]
    dtype = jnp.result_type(float)
    precision_shape = check_real("precision_shape", precision_shape, low=0.0, low_open=True)
    precision_rate = check_real("precision_rate", precision_rate, low=0.0, low_open=True)
    n_points = features.shape[0]
    within = ((features - means[clusters]) ** 2).sum(axis=0)
    degrees = n_points - np.count_nonzero(counts)
    info = np.finfo(dtype)
    start_precisions = np.clip((precision_shape + degrees / 2) / (precision_rate + within / 2),
                               np.sqrt(info.tiny), np.sqrt(info.max))
    type_counts = np.zeros(max_types, np.int32)
    type_counts[0] = n_points
    return SupervisedState(
        clusters=jnp.asarray(clusters, jnp.int32),
        cluster_counts=jnp.asarray(counts, jnp.int32),
        means=jnp.asarray(means, dtype),
        types=jnp.zeros(n_points, jnp.int32),
        type_counts=jnp.asarray(type_counts),
        precisions=jnp.ones((max_types, n_features), dtype).at[0].set(jnp.asarray(start_precisions, dtype)),
        alpha=jnp.asarray(alpha, dtype),
        alpha_types=jnp.asarray(alpha_types, dtype),
        precision_shape=jnp.full((n_features,), precision_shape, dtype),
        precision_rate=jnp.full((n_features,), precision_rate, dtype),
        overflow=jnp.zeros((), jnp.int32),
    )


@lru_cache(maxsize=None)
def record_supervised(n_train: int):
    """Recorder for :func:`inference.chains.sample_chains`: test partition and diagnostics.

    The same object is returned for the same ``n_train``, so repeated fits reuse the compiled
    sampler (the recorder is a static argument of the jitted driver).
    """
    return partial(_record, n_train)


def _record(n_train: int, state: SupervisedState, info: SupervisedInfo) -> dict[str, jax.Array]:
    return {
        "assignments": state.clusters[n_train:],
        "alpha": info.alpha,
        "alpha_types": info.alpha_types,
        "n_clusters": info.n_clusters,
        "n_types": info.n_types,
        "log_joint": info.log_joint,
        "split_merge_accepted": info.split_merge_accepted,
        "type_split_merge_accepted": info.type_split_merge_accepted,
    }
