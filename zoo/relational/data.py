"""Relational data: object domains, relations over them with categorical values, and a mask.

CP §1: a relational domain is a collection of object domains O = {O_1, ..., O_m} and relations
r : D_1 × ... × D_k → {v_1, ..., v_|r|} over them. A :class:`Relation` stores its *observed*
ground instances only, as a list of cells (one row of ``entries`` per cell, one index per
argument) with a value code in ``0 .. |r| - 1``; every cell that is not listed is unobserved,
"missing at random" (CP §2), so a mask is implicit in the list. A :class:`RelationalData` holds
the domains (:class:`Domain`: a name, a size, optional labels of the individuals) and its
relations, and checks that they agree.

Constructors: :meth:`RelationalData.from_adjacency` (dense matrix, NaN or a mask for missing
cells), :meth:`RelationalData.from_networkx` (binary, weighted → categorical, or thresholded;
one domain or two for a bipartite graph), :meth:`RelationalData.from_table` (pandas rows of
subject, object, value) and :meth:`RelationalData.from_ratings` (ratings thresholded at their
global mean, CP §3). :func:`read_ucinet_dl` reads UCINET DL files (full-matrix and edge-list
formats). Loaders of networks and ratings that ship offline: :func:`load_karate_club`,
:func:`load_davis_southern_women`, :func:`load_florentine_families` (networkx) and
:func:`load_movielens_100k` (the MovieLens 100k ratings bundled in the ``recbole`` package).

The reader and the loaders are in ``_readers.py``; their names are importable from here.

Self-pairs. When a relation's arguments come from the same domain (a social network), the
diagonal cells r(a, a) are structurally missing: the constructors leave them unobserved unless
asked otherwise, and the models refuse observed self-pairs.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np

from inference._validation import (as_float_array, as_index_array, check_bool, check_choice, check_int, check_real,
                                 check_relation, numbers_array, user_stacklevel)

__all__ = [
    "Domain",
    "Relation",
    "RelationalData",
    "RelationalSchema",
    "RelationalArrays",
    "read_ucinet_dl",
    "load_karate_club",
    "load_davis_southern_women",
    "load_florentine_families",
    "load_movielens_100k",
]


def _check_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name}: expected a non-empty string, got {value!r}")
    return value


def _check_rows(name: str, value: Any) -> None:
    """Refuse a nested list or tuple whose rows differ in length (NumPy cannot make it an array),
    naming ``name`` and the first row that differs from row 0."""
    if not isinstance(value, (list, tuple)) or not value:
        return
    lengths = [f"{len(row)} value{'' if len(row) == 1 else 's'}" if isinstance(row, (list, tuple)) or np.ndim(row) > 0
               else "a single number" for row in value]
    differs = [index for index, length in enumerate(lengths) if length != lengths[0]]
    if differs:  # (a flat list has rows of one value each: its shape is checked later)
        raise ValueError(f"{name}: rows of different lengths (row 0 has {lengths[0]}, row {differs[0]} has "
                         f"{lengths[differs[0]]}); give every row one value per column, NaN for a missing cell")


def _as_array(name: str, value: Any) -> np.ndarray:
    """``numbers_array(value)``, with ragged or otherwise unreadable input refused by ``name``."""
    _check_rows(name, value)
    try:
        return numbers_array(value)
    except ValueError as error:  # deeper raggedness, e.g. [[0, [1]], [1, 0]]
        raise ValueError(f"{name}: cannot be read as an array of numbers ({error})") from None


def _frame_labels(matrix: Any) -> tuple[list | None, list | None] | None:
    """The row and column labels of a pandas DataFrame, each None where it is pandas' default
    ``RangeIndex`` (0, 1, ...); None for anything that is not a DataFrame."""
    if not type(matrix).__module__.startswith("pandas"):
        return None
    import pandas as pd

    if not isinstance(matrix, pd.DataFrame):
        return None
    return tuple(None if isinstance(index, pd.RangeIndex) else list(index)  # type: ignore[return-value]
                 for index in (matrix.index, matrix.columns))


def _labels_of_frame(frame_labels: tuple[list | None, list | None], one_domain: bool) -> Any:
    """The ``labels`` argument of :meth:`RelationalData.from_adjacency` that a DataFrame's index and
    columns (``frame_labels``, from :func:`_frame_labels`) give, for one domain or two."""
    index, columns = frame_labels
    if not one_domain:
        return None if index is None and columns is None else (index, columns)
    if index is not None and columns is not None and index != columns:
        position = next(position for position, (row, column) in enumerate(zip(index, columns)) if row != column)
        raise ValueError(f"matrix: the DataFrame's index and columns differ (at position {position}: index "
                         f"{index[position]!r:.40}, columns {columns[position]!r:.40}), but a relation over one "
                         "domain has one list of individuals; put the columns in the index's order "
                         "(frame[frame.index]) or pass labels=")
    return index if index is not None else columns


def _check_distinct_columns(columns: Sequence[tuple[str, Any]]) -> None:
    """Refuse two arguments of a table constructor that name the same column, naming the later one."""
    for position, (argument, column) in enumerate(columns):
        for earlier, earlier_column in columns[:position]:
            if column == earlier_column:
                raise ValueError(f"{argument}: the same column as {earlier} ({column!r}); {earlier} and {argument} "
                                 "each need a column of their own")


def _labels(name: str, labels: Sequence[Any] | None, size: int) -> tuple | None:
    if labels is None:
        return None
    if isinstance(labels, (str, bytes)):
        raise TypeError(f"{name}: expected a sequence of labels, got a string")
    labels = tuple(labels)
    if len(labels) != size:
        raise ValueError(f"{name}: expected {size} labels, got {len(labels)}")
    return labels


class RelationalSchema(NamedTuple):
    """Static description of relational data (hashable: a ``jit`` static argument).

    Attributes
    ----------
    domain_names : tuple of str
    domain_sizes : tuple of int
    relation_names : tuple of str
    relation_domains : tuple of tuple of int
        For each relation, the index (into the domains) of each argument's domain.
    n_values : tuple of int
        |r| of each relation.
    symmetric : tuple of bool
        Whether each relation is symmetric (:attr:`Relation.symmetric`); empty: none is.
    """

    domain_names: tuple
    domain_sizes: tuple
    relation_names: tuple
    relation_domains: tuple
    n_values: tuple
    symmetric: tuple = ()

    def is_symmetric(self, relation: int) -> bool:
        """Whether ``relation`` is symmetric: its models see each unordered pair once."""
        return bool(self.symmetric) and bool(self.symmetric[relation])

    def incidences(self, domain: int) -> tuple[tuple[int, int], ...]:
        """(relation, position) pairs at which individuals of ``domain`` appear."""
        return tuple(
            (relation, position)
            for relation, domains in enumerate(self.relation_domains)
            for position, member in enumerate(domains)
            if member == domain
        )


class RelationalArrays(NamedTuple):
    """Device arrays of the observed cells, one entry per relation in each tuple.

    Every relation's cell list ends with one padding row (index ``n_observed``) of weight 0, so
    fixed-width tables can point at it.

    Attributes
    ----------
    entries : tuple of int32 arrays, shape (n_observed + 1, arity)
    values : tuple of int32 arrays, shape (n_observed + 1,)
    weights : tuple of float arrays, shape (n_observed + 1,)
        Each cell's weight in the likelihood: 1 for a cell the model sees, ½ for each cell of a
        symmetric relation (its two cells r(a, b) and r(b, a) are one observation of the pair),
        0 for the padding row and for hidden (held-out) cells. The latent-class model weighs its
        sums by them; the IRM only asks which are positive.
    blankets : tuple (per relation) of tuples (per argument position) of int32 arrays,
        shape (domain size, max degree): for individual a, the positions in ``entries`` of the
        cells with a at that argument (its Markov blanket, CP §2), padded with ``n_observed``.
    """

    entries: tuple
    values: tuple
    weights: tuple
    blankets: tuple


@dataclass(frozen=True, eq=False)
class Domain:
    """A set of individuals, e.g. users, movies or the members of a club.

    Parameters
    ----------
    name : str
        Domain name; it names the plate of the class variables in the programs.
    size : int
        Number of individuals (>= 1).
    labels : sequence, optional
        Names of the individuals, one per individual.
    """

    name: str
    size: int
    labels: tuple | None = field(default=None)

    def __post_init__(self) -> None:
        _check_name("name", self.name)
        object.__setattr__(self, "size", check_int("size", self.size, minimum=1))
        object.__setattr__(self, "labels", _labels("labels", self.labels, self.size))

    def __repr__(self) -> str:
        return f"Domain({self.name!r}, size={self.size})"


@dataclass(frozen=True, eq=False)
class Relation:
    """The observed cells of one relation r : D_1 × ... × D_k → {v_1, ..., v_|r|} (CP §1).

    Parameters
    ----------
    name : str
    domains : tuple of str, length k
        Names of the argument domains (may repeat, e.g. ``("people", "people")``).
    shape : tuple of int, length k
        Sizes of the argument domains.
    entries : array_like of int, shape (n_observed, k)
        One observed cell per row; cells not listed are missing at random.
    values : array_like of int, shape (n_observed,)
        Value code of each observed cell, in ``0 .. n_values - 1``.
    value_labels : sequence, length n_values >= 2
        The declared values v_1, ..., v_|r| (e.g. ``(0, 1)`` or ``(False, True)``).
    symmetric : bool
        Binary relations over one domain only: r(a, b) = r(b, a) and both cells are observed
        or missing together (an undirected network). The IRM counts each unordered pair once,
        with one parameter per unordered pair of clusters (:mod:`zoo.relational.infinite`); the
        latent-class model sees both cells; held-out evaluation removes a cell together with its
        mirror.

    Cells are stored sorted in row-major order; duplicates are an error.
    """

    name: str
    domains: tuple[str, ...]
    shape: tuple[int, ...]
    entries: np.ndarray
    values: np.ndarray
    value_labels: tuple = (0, 1)
    symmetric: bool = False

    def __post_init__(self) -> None:
        _check_name("name", self.name)
        if isinstance(self.domains, str) or not isinstance(self.domains, (tuple, list)) or not self.domains:
            raise ValueError(f"domains: expected a non-empty tuple of domain names, got {self.domains!r}")
        domains = tuple(_check_name("domains", domain) for domain in self.domains)
        arity = len(domains)
        if not isinstance(self.shape, (tuple, list)) or len(self.shape) != arity:
            raise ValueError(f"shape: expected {arity} sizes (one per argument), got {self.shape!r}")
        shape = tuple(check_int("shape", size, minimum=1) for size in self.shape)
        value_labels = (tuple(self.value_labels) if isinstance(self.value_labels, (tuple, list, np.ndarray))
                        else None)
        if value_labels is None or len(value_labels) < 2:
            raise ValueError(f"value_labels: a relation needs at least 2 declared values, got {self.value_labels!r}")
        if len(set(value_labels)) != len(value_labels):
            raise ValueError(f"value_labels: repeated values in {value_labels!r}")
        entries = np.asarray(self.entries)
        if entries.ndim == 1 and arity == 1:
            entries = entries[:, None]
        if entries.ndim != 2 or entries.shape[1] != arity:
            raise ValueError(f"entries: expected shape (n_observed, {arity}), got {entries.shape}")
        if entries.shape[0] == 0:
            raise ValueError(f"entries: relation {self.name!r} has no observed cells (all missing)")
        columns = [
            as_index_array("entries", entries[:, position], upper=shape[position])
            for position in range(arity)
        ]
        entries = np.stack(columns, axis=1)
        values = as_index_array("values", self.values, upper=None)
        if values.shape[0] != entries.shape[0]:
            raise ValueError(f"values: expected {entries.shape[0]} values (one per entry), got {values.shape[0]}")
        if values.max() >= len(value_labels):
            raise ValueError(
                f"values: code {int(values.max())} outside the {len(value_labels)} declared values {value_labels!r}"
            )
        flat = np.ravel_multi_index(tuple(entries.T), shape)
        order = np.argsort(flat, kind="stable")
        flat = flat[order]
        if flat.shape[0] > 1 and (flat[1:] == flat[:-1]).any():
            duplicate = entries[order][1:][flat[1:] == flat[:-1]][0]
            raise ValueError(f"entries: cell {tuple(int(i) for i in duplicate)} is listed twice")
        entries = entries[order].astype(np.int32)
        values = values[order].astype(np.int32)
        symmetric = check_bool("symmetric", self.symmetric)
        if symmetric:
            if arity != 2 or domains[0] != domains[1]:
                raise ValueError("symmetric: only a binary relation over one domain can be symmetric")
            mirror = np.ravel_multi_index((entries[:, 1], entries[:, 0]), shape)
            position = np.searchsorted(flat, mirror)
            found = (position < flat.shape[0]) & (flat[np.minimum(position, flat.shape[0] - 1)] == mirror)
            if not found.all() or (values[np.minimum(position, flat.shape[0] - 1)] != values).any():
                raise ValueError("symmetric: the observed cells are not symmetric (r(a, b) must equal r(b, a))")
        object.__setattr__(self, "domains", domains)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "value_labels", value_labels)
        object.__setattr__(self, "symmetric", symmetric)

    # ------------------------------------------------------------------ views
    @property
    def arity(self) -> int:
        """k, the number of arguments."""
        return len(self.domains)

    @property
    def n_values(self) -> int:
        """|r|, the number of declared values."""
        return len(self.value_labels)

    @property
    def n_observed(self) -> int:
        """Number of observed cells."""
        return int(self.entries.shape[0])

    @property
    def has_self_pairs(self) -> bool:
        """Whether some observed cell repeats an individual of one domain, e.g. r(a, a)."""
        for first in range(self.arity):
            for second in range(first + 1, self.arity):
                if self.domains[first] == self.domains[second] and (
                    self.entries[:, first] == self.entries[:, second]
                ).any():
                    return True
        return False

    def mask(self) -> np.ndarray:
        """Boolean array of ``shape``, True where the cell is observed."""
        observed = np.zeros(self.shape, dtype=bool)
        observed[tuple(self.entries.T)] = True
        return observed

    def to_dense(self) -> np.ndarray:
        """Value codes as a float array of ``shape`` with NaN for missing cells."""
        dense = np.full(self.shape, np.nan)
        dense[tuple(self.entries.T)] = self.values
        return dense

    def mirror_index(self) -> np.ndarray:
        """For a symmetric relation, the position of each cell's mirror r(b, a) in ``entries``."""
        if not self.symmetric:
            raise ValueError(f"relation: {self.name!r} is not symmetric")
        flat = np.ravel_multi_index(tuple(self.entries.T), self.shape)
        mirror = np.ravel_multi_index((self.entries[:, 1], self.entries[:, 0]), self.shape)
        return np.searchsorted(flat, mirror)

    def select(self, keep: Any) -> "Relation":
        """The relation restricted to the observed cells where ``keep`` (bool, (n_observed,)) is True."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n_observed,):
            raise ValueError(f"keep: expected a boolean array of shape ({self.n_observed},), got {keep.shape}")
        return Relation(self.name, self.domains, self.shape, self.entries[keep], self.values[keep],
                        self.value_labels, self.symmetric)

    def __repr__(self) -> str:
        cells = int(np.prod(self.shape))
        return (
            f"Relation({self.name!r}: {' × '.join(self.domains)} → {self.value_labels!r}, "
            f"observed {self.n_observed}/{cells})"
        )


@dataclass(frozen=True, eq=False)
class RelationalData:
    """Object domains and the observed relations over them (CP §1–2).

    Parameters
    ----------
    domains : sequence of Domain
        Unique names.
    relations : sequence of Relation
        Each relation's argument domains must be among ``domains`` with matching sizes.

    Examples
    --------
    >>> data = RelationalData.from_adjacency([[0, 1, 0], [1, 0, 1], [0, 1, 0]], domains="people")
    >>> data.relations[0].n_observed  # the diagonal is missing
    6
    """

    domains: tuple[Domain, ...]
    relations: tuple[Relation, ...]

    def __post_init__(self) -> None:
        if isinstance(self.domains, Domain):
            domains = (self.domains,)
        elif isinstance(self.domains, (tuple, list)):
            domains = tuple(self.domains)
        else:
            raise TypeError(f"domains: expected a Domain or a sequence of Domains, got {type(self.domains).__name__}")
        if not domains:
            raise ValueError("domains: at least one domain is needed")
        for domain in domains:
            if not isinstance(domain, Domain):
                raise TypeError(f"domains: expected Domain objects, got {type(domain).__name__}")
        names = [domain.name for domain in domains]
        if len(set(names)) != len(names):
            raise ValueError(f"domains: repeated domain names in {names}")
        if isinstance(self.relations, Relation):
            relations = (self.relations,)
        elif isinstance(self.relations, Iterable) and not isinstance(self.relations, (str, bytes)):
            relations = tuple(self.relations)
        else:
            raise TypeError(f"relations: expected a Relation or a sequence of Relations, got "
                            f"{type(self.relations).__name__}")
        if not relations:
            raise ValueError("relations: at least one relation is needed")
        sizes = {domain.name: domain.size for domain in domains}
        relation_names = []
        for relation in relations:
            if not isinstance(relation, Relation):
                raise TypeError(f"relations: expected Relation objects, got {type(relation).__name__}")
            for domain_name in relation.domains:
                if domain_name not in sizes:
                    raise ValueError(f"relations: relation {relation.name!r} uses unknown domain {domain_name!r}")
            expected = tuple(sizes[name] for name in relation.domains)
            if relation.shape != expected:
                raise ValueError(
                    f"relations: relation {relation.name!r} has shape {relation.shape} but its domains "
                    f"{relation.domains} have sizes {expected}"
                )
            relation_names.append(relation.name)
        if len(set(relation_names)) != len(relation_names):
            raise ValueError(f"relations: repeated relation names in {relation_names}")
        object.__setattr__(self, "domains", domains)
        object.__setattr__(self, "relations", relations)

    # ------------------------------------------------------------------ look-ups
    @property
    def domain_names(self) -> tuple[str, ...]:
        return tuple(domain.name for domain in self.domains)

    @property
    def relation_names(self) -> tuple[str, ...]:
        return tuple(relation.name for relation in self.relations)

    def domain(self, name: str) -> Domain:
        """The domain called ``name``."""
        for domain in self.domains:
            if domain.name == name:
                return domain
        raise ValueError(f"name: no domain {name!r} (domains: {self.domain_names})")

    def relation(self, name: str | None = None) -> Relation:
        """The relation called ``name`` (the only one when ``name`` is omitted)."""
        if name is None:
            if len(self.relations) != 1:
                raise ValueError(f"name: the data have {len(self.relations)} relations; name one of {self.relation_names}")
            return self.relations[0]
        for relation in self.relations:
            if relation.name == name:
                return relation
        raise ValueError(f"name: no relation {name!r} (relations: {self.relation_names})")

    def cells(self, labelled: Any, relation: int | str | None = None) -> np.ndarray:
        """The cells (n_cells, arity) of ``relation`` (by position or name; may be left out where
        the data hold one) whose individuals are given by their labels, as int64 indices, for a
        fit's ``predict_proba``: ``result.predict_proba(data.cells([("Medici", "Strozzi")]))``.

        >>> data = RelationalData.from_adjacency([[0, 1, 0], [1, 0, 1], [0, 1, 0]], domains="people",
        ...                                      labels=["ann", "bob", "cy"])
        >>> data.cells([("ann", "cy"), ("cy", "bob")]).tolist()
        [[0, 2], [2, 1]]
        """
        index = check_relation("relation", relation, self.relation_names)
        domains = [self.domain(name) for name in self.relations[index].domains]
        if isinstance(labelled, (str, bytes)) or not isinstance(labelled, Iterable):
            raise TypeError(f"labelled: expected a sequence of cells, each a tuple of {len(domains)} labels, got "
                            f"{type(labelled).__name__}")
        rows = [tuple(cell) if isinstance(cell, (list, tuple)) else (cell,) for cell in labelled]
        lookups = []
        for domain in domains:
            if domain.labels is None:
                raise ValueError(f"labelled: the domain {domain.name!r} has no labels; give its individuals by "
                                 "index (0 to size - 1)")
            lookups.append({label: position for position, label in enumerate(domain.labels)})
        result = np.zeros((len(rows), len(domains)), np.int64)
        for row, cell in enumerate(rows):
            if len(cell) != len(domains):
                raise ValueError(f"labelled: cell {row} has {len(cell)} labels, not {len(domains)} (the relation's "
                                 f"domains: {', '.join(domain.name for domain in domains)})")
            for position, (label, lookup, domain) in enumerate(zip(cell, lookups, domains)):
                if label not in lookup:
                    raise ValueError(f"labelled: cell {row} names {label!r:.40}, not an individual of domain "
                                     f"{domain.name!r}")
                result[row, position] = lookup[label]
        return result

    def relation_index(self, name: str | None = None) -> int:
        """Position of relation ``name`` in ``relations``."""
        return self.relations.index(self.relation(name))

    def domain_index(self, name: str) -> int:
        """Position of domain ``name`` in ``domains``."""
        return self.domains.index(self.domain(name))

    @property
    def n_observed(self) -> int:
        """Observed cells over all relations."""
        return sum(relation.n_observed for relation in self.relations)

    @property
    def total(self) -> int:
        """Observed cells over all relations (the divisor of per-observation log-likelihoods)."""
        return self.n_observed

    @property
    def schema(self) -> RelationalSchema:
        """The static :class:`RelationalSchema` of these data."""
        index = {domain.name: position for position, domain in enumerate(self.domains)}
        return RelationalSchema(
            domain_names=self.domain_names,
            domain_sizes=tuple(domain.size for domain in self.domains),
            relation_names=self.relation_names,
            relation_domains=tuple(tuple(index[name] for name in relation.domains) for relation in self.relations),
            n_values=tuple(relation.n_values for relation in self.relations),
            symmetric=tuple(bool(relation.symmetric) for relation in self.relations),
        )

    def to_arrays(self, dtype: Any = None) -> RelationalArrays:
        """Device arrays for the kernels (see :class:`RelationalArrays`).

        Parameters
        ----------
        dtype : dtype, optional
            Float dtype of the weights; JAX's default float when omitted.
        """
        import jax.numpy as jnp

        float_dtype = jnp.zeros((), dtype=dtype if dtype is not None else float).dtype
        entries, values, weights, blankets = [], [], [], []
        for relation in self.relations:
            n_observed = relation.n_observed
            padded = np.concatenate([relation.entries, np.zeros((1, relation.arity), np.int32)])
            entries.append(jnp.asarray(padded, jnp.int32))
            values.append(jnp.asarray(np.concatenate([relation.values, [0]]), jnp.int32))
            share = 0.5 if relation.symmetric else 1.0  # a symmetric relation's pair is one observation
            weights.append(jnp.asarray(np.concatenate([np.full(n_observed, share), [0.0]]), float_dtype))
            per_position = []
            for position in range(relation.arity):
                members = relation.entries[:, position]
                size = relation.shape[position]
                order = np.argsort(members, kind="stable")
                degree = np.bincount(members, minlength=size)
                starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
                width = max(int(degree.max()), 1)
                table = np.full((size, width), n_observed, np.int32)
                slot = np.arange(n_observed) - starts[members[order]]
                table[members[order], slot] = order
                per_position.append(jnp.asarray(table))
            blankets.append(tuple(per_position))
        return RelationalArrays(tuple(entries), tuple(values), tuple(weights), tuple(blankets))

    def replace_relation(self, relation: Relation) -> "RelationalData":
        """The same data with the relation of the same name replaced by ``relation``."""
        if not isinstance(relation, Relation):
            raise TypeError(f"relation: expected a Relation, got {type(relation).__name__}")
        index = self.relation_index(relation.name)
        relations = self.relations[:index] + (relation,) + self.relations[index + 1:]
        return RelationalData(self.domains, relations)

    @classmethod
    def combine(cls, *datasets: "RelationalData") -> "RelationalData":
        """The relations of several datasets in one, their domains matched by name and their
        individuals by label: several relations over one set of people (friendship from a network,
        advice from a table), or a relation and an attribute, each built by its own constructor.

        Each constructor numbers individuals its own way (``from_networkx`` in the graph's node order,
        ``from_table`` in sorted order), so relations cannot be put together by position: combined
        here, a domain's individuals are those of its first dataset followed by any new labels of
        the others, in order of appearance, and each relation's cells are renumbered to them; an
        individual missing from one relation has no observed cell of it (missing at random, CP §1).
        A domain unlabelled in some dataset must be unlabelled in all and of one size (then the
        positions match). Relation names must differ.

        >>> import networkx as nx, pandas as pd
        >>> friends = RelationalData.from_networkx(nx.Graph([("zoe", "amy"), ("amy", "bob")]), domains="people",
        ...                                       relation="friend")
        >>> advice = RelationalData.from_table(pd.DataFrame({"who": ["zoe", "bob"], "whom": ["amy", "zoe"],
        ...                                                  "asks": [1, 0]}), subject="who", object="whom",
        ...                                    value="asks", domains=("people", "people"))
        >>> both = RelationalData.combine(friends, advice)
        >>> both.domain("people").labels, both.relation_names
        (('zoe', 'amy', 'bob'), ('friend', 'asks'))
        >>> both.cells([("zoe", "amy")], relation="asks").tolist()
        [[0, 1]]
        """
        if not datasets:
            raise ValueError("datasets: give at least one RelationalData")
        for position, data in enumerate(datasets):
            if not isinstance(data, RelationalData):
                raise TypeError(f"datasets: argument {position} is a {type(data).__name__}, not a RelationalData")
        order: dict[str, list] = {}  # each domain's labels (or None: unlabelled) in the combined order
        sizes: dict[str, int] = {}
        for position, data in enumerate(datasets):
            for domain in data.domains:
                if domain.name not in order:
                    order[domain.name] = None if domain.labels is None else list(domain.labels)
                    sizes[domain.name] = domain.size
                elif (order[domain.name] is None) != (domain.labels is None):
                    raise ValueError(f"datasets: domain {domain.name!r} is labelled in some datasets and not in "
                                     f"argument {position}: its individuals cannot be matched")
                elif domain.labels is None:
                    if domain.size != sizes[domain.name]:
                        raise ValueError(f"datasets: unlabelled domain {domain.name!r} has {sizes[domain.name]} "
                                         f"individuals in one dataset and {domain.size} in argument {position}; "
                                         "label them to match them by name")
                else:
                    known = set(order[domain.name])
                    if not known.intersection(domain.labels):
                        _warn_no_shared_labels(domain, known, position)
                    order[domain.name].extend(label for label in domain.labels if label not in known)
        index = {name: None if labels is None else {label: i for i, label in enumerate(labels)}
                 for name, labels in order.items()}
        domains = tuple(Domain(name, sizes[name] if labels is None else len(labels),
                               None if labels is None else tuple(labels)) for name, labels in order.items())
        relations = []
        for data in datasets:
            for relation in data.relations:
                entries = np.array(relation.entries, np.int64)
                for argument, name in enumerate(relation.domains):
                    labels = data.domain(name).labels
                    if labels is not None:
                        entries[:, argument] = np.array([index[name][label] for label in labels])[entries[:, argument]]
                shape = tuple(domain.size for name in relation.domains for domain in domains if domain.name == name)
                relations.append(Relation(relation.name, relation.domains, shape, entries, relation.values,
                                          relation.value_labels, relation.symmetric))
        names = [relation.name for relation in relations]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"datasets: relation names {repeated} appear in more than one dataset; name each "
                             "relation once (the constructors' relation= argument)")
        return cls(domains, tuple(relations))

    def __repr__(self) -> str:
        domains = ", ".join(f"{domain.name}: {domain.size}" for domain in self.domains)
        relations = "; ".join(repr(relation) for relation in self.relations)
        return f"RelationalData(domains {{{domains}}}; {relations})"

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_adjacency(
        cls,
        matrix: Any,
        *,
        mask: Any = None,
        domains: str | Sequence[str] | None = None,
        relation: str = "r",
        values: Sequence[Any] | None = None,
        labels: Sequence[Sequence[Any] | None] | Sequence[Any] | None = None,
        diagonal: str = "missing",
        symmetric: bool | None = None,
    ) -> "RelationalData":
        """One relation from a dense matrix; NaN (or ``mask == False``) marks missing cells.

        Every distinct value of the observed cells is one category of the relation (CP §1): the
        models do not see that 0.5 lies between 0.4 and 0.6. Warns (``UserWarning``) when, with
        ``values`` not given, the observed cells hold values that are not whole numbers or more
        than 10 distinct values (a weighted network, say), and when they all hold one value.

        Parameters
        ----------
        matrix : array_like of numbers, shape (n_rows, n_cols)
            Observed values; NaN means missing. A pandas DataFrame's index and columns label the
            individuals (see ``labels``).
        mask : array_like of bool, shape (n_rows, n_cols), optional
            True where observed (combined with the NaNs).
        domains : str or (str, str), optional
            One name: the matrix is square over one domain (a network). Two names: rows and
            columns are different domains (they may also be equal names for a square matrix).
            Default ``("rows", "cols")``, two domains; a square matrix equal to its transpose then
            warns (``UserWarning``), since an undirected network read so has each individual twice,
            in two partitions, each pair twice and the diagonal observed: give it one name.
        relation : str
            Name of the relation.
        values : sequence of numbers, optional
            Declared values v_1, ..., v_|r|; default: the sorted distinct observed values, or
            (0, 1) when the matrix is binary.
        labels : sequence, or pair of sequences, optional
            Labels of the individuals: one sequence for one domain, a pair for two. Default, for
            a pandas DataFrame: its index labels the rows and its columns label the columns,
            unless they are pandas' default 0, 1, ... (a ``RangeIndex``). Over one domain, an
            index and columns that both hold labels must be equal, in the same order.
        diagonal : {"missing", "observed"}
            For a relation over one domain, whether the self-pairs r(a, a) are observed.
        symmetric : bool, optional
            Mark an undirected relation over one domain; default: detected (one domain and
            the observed matrix equals its transpose).
        """
        data = cls._read_adjacency(matrix, mask=mask, domains=("rows", "cols") if domains is None else domains,
                                   relation=relation, values=values, labels=labels, diagonal=diagonal,
                                   symmetric=symmetric)
        built = data.relations[0]
        if domains is None and len(data.domains) == 2 and _is_symmetric_square(built, data.domains):
            warnings.warn("matrix: square and equal to its transpose, read as a relation between two domains, "
                          "'rows' and 'cols' (each individual twice, in two partitions; each pair twice; the "
                          "diagonal observed): for an undirected network give its one domain a name, "
                          "domains='nodes'; name two, domains=('rows', 'cols'), to keep them",
                          UserWarning, stacklevel=user_stacklevel())
        _warn_if_one_value(built, "matrix")
        if values is None:
            _warn_if_many_values(built, "matrix", "for a binary relation (a link or not), threshold the matrix "
                                 "first, e.g. from_adjacency(matrix > 0, mask=~np.isnan(matrix)); to keep the "
                                 "categories, declare them with values=[...]")
        return data

    @classmethod
    def _read_adjacency(cls, matrix: Any, *, mask: Any, domains: str | Sequence[str], relation: str,
                        values: Sequence[Any] | None, labels: Any, diagonal: str,
                        symmetric: bool | None) -> "RelationalData":
        """:meth:`from_adjacency` without its warnings, which :meth:`from_networkx` gives in its own terms."""
        relation = _check_name("relation", relation)
        if symmetric is not None:
            symmetric = check_bool("symmetric", symmetric)
        frame_labels = _frame_labels(matrix)
        dense = _as_array("matrix", matrix)  # scipy.sparse densified, pandas' nullable columns as float
        if dense.dtype == object or not (np.issubdtype(dense.dtype, np.number) or dense.dtype == bool):
            raise TypeError(f"matrix: expected numbers, got dtype {dense.dtype}")
        if np.issubdtype(dense.dtype, np.complexfloating):
            raise TypeError("matrix: complex values are not supported")
        dense = dense.astype(np.float64)
        if dense.ndim != 2:
            raise ValueError(f"matrix: expected 2 dimensions, got shape {dense.shape}")
        if dense.size == 0:
            raise ValueError("matrix: is empty")
        if np.isinf(dense).any():
            raise ValueError("matrix: contains infinite values")
        observed = ~np.isnan(dense)
        if mask is not None:
            _check_rows("mask", mask)
            try:
                mask_array = np.asarray(mask)
            except ValueError as error:  # deeper raggedness
                raise ValueError(f"mask: cannot be read as an array ({error})") from None
            if mask_array.shape != dense.shape:
                raise ValueError(f"mask: expected shape {dense.shape}, got {mask_array.shape}")
            if mask_array.dtype != bool and not np.isin(mask_array, (0, 1)).all():
                raise ValueError("mask: expected booleans (True = observed)")
            observed &= mask_array.astype(bool)
        if not isinstance(domains, (str, tuple, list)):
            raise TypeError(f"domains: expected one name or two, got {type(domains).__name__}")
        domain_names = (domains,) if isinstance(domains, str) else tuple(domains)
        if len(domain_names) not in (1, 2):
            raise ValueError(f"domains: expected one name or two, got {domains!r}")
        for domain_name in domain_names:
            _check_name("domains", domain_name)
        one_domain = len(domain_names) == 1 or domain_names[0] == domain_names[1]
        if one_domain and dense.shape[0] != dense.shape[1]:
            raise ValueError(f"matrix: a relation over one domain needs a square matrix, got shape {dense.shape}")
        if labels is None and frame_labels is not None:
            labels = _labels_of_frame(frame_labels, one_domain)
        diagonal = check_choice("diagonal", diagonal, ("missing", "observed"))
        if one_domain and diagonal == "missing":
            if dense.shape[0] == 1:
                raise ValueError("matrix: a relation over one domain (a network) needs at least 2 individuals, got "
                                 "a 1 × 1 matrix: its only cell is the self-pair r(a, a), which is not observed "
                                 "(diagonal='missing')")
            on_diagonal = np.diagonal(observed) & (np.nan_to_num(np.diagonal(dense)) != 0)
            if on_diagonal.any():  # as from_networkx says of self-loops
                warnings.warn(f"matrix: {int(on_diagonal.sum())} non-zero self-pair"
                              f"{'s' if on_diagonal.sum() > 1 else ''} r(a, a) on the diagonal "
                              f"{'are' if on_diagonal.sum() > 1 else 'is'} left out: a relation over one domain "
                              "leaves the diagonal missing (diagonal='missing'); diagonal='observed' keeps it",
                              UserWarning, stacklevel=user_stacklevel())
            np.fill_diagonal(observed, False)
        if not observed.any():
            raise ValueError("matrix: every cell is missing")
        rows, cols = np.nonzero(observed)
        cell_values = dense[rows, cols]
        declared = _declared_values("values", values, cell_values)
        codes = _encode("matrix", cell_values, declared)
        if one_domain:
            name = domain_names[0]
            domain_list = [Domain(name, dense.shape[0], _labels("labels", labels, dense.shape[0]))]
            relation_domains = (name, name)
            if symmetric is None:
                symmetric = bool(np.array_equal(observed, observed.T)
                                 and np.array_equal(np.where(observed, dense, 0), np.where(observed, dense, 0).T))
        else:
            pair = (None, None) if labels is None else tuple(labels)
            if len(pair) != 2 or any(isinstance(part, (str, bytes)) or (part is not None and np.ndim(part) != 1)
                                     for part in pair):
                raise ValueError(f"labels: a relation between two domains takes a pair (labels of {domain_names[0]}, "
                                 f"labels of {domain_names[1]}), each a sequence, got {labels!r:.80}")
            row_labels, col_labels = pair
            domain_list = [
                Domain(domain_names[0], dense.shape[0], _labels("labels", row_labels, dense.shape[0])),
                Domain(domain_names[1], dense.shape[1], _labels("labels", col_labels, dense.shape[1])),
            ]
            relation_domains = domain_names
            if symmetric:
                raise ValueError("symmetric: only a relation over one domain can be symmetric")
            symmetric = False
        built = Relation(relation, relation_domains, dense.shape, np.stack([rows, cols], axis=1), codes,
                         tuple(declared), bool(symmetric))
        return cls(tuple(domain_list), (built,))

    @classmethod
    def from_networkx(
        cls,
        graph: Any,
        *,
        weight: str | None = None,
        threshold: float | None = None,
        rows: Sequence[Any] | None = None,
        cols: Sequence[Any] | None = None,
        domains: str | Sequence[str] | None = None,
        relation: str = "edge",
    ) -> "RelationalData":
        """One relation from a networkx graph: every pair of nodes is observed (edge or not).

        Parameters
        ----------
        graph : networkx.Graph or DiGraph
        weight : str, optional
            Edge attribute holding a weight. Without ``threshold`` the weights become
            categorical values (absent edges have weight 0); with ``threshold`` the relation is
            binary, 1 where weight > threshold. An edge whose weight is NaN is a missing cell
            (unknown), with or without ``threshold``. Without ``weight`` the relation is binary
            (edge present or not).
        threshold : float, optional
        rows, cols : sequences of nodes, optional
            Give both for a two-domain (bipartite) relation ``rows × cols``, e.g. women × events.
            Otherwise the relation is over the graph's nodes (diagonal missing), symmetric for
            an undirected graph.
            The two lists share no node, and list each node once.
        domains : str or (str, str), optional
            Domain name(s); default ``"nodes"`` or ``("rows", "cols")``.
        relation : str

        Warns (``UserWarning``) when the relation's cells all hold one value (a graph without
        edges, say), when the graph's self-loops are left out (the diagonal is missing), and when ``weight`` without ``threshold`` gives weights that are not whole
        numbers or more than 10 distinct values, each of which becomes a category.
        """
        import networkx as nx

        if not isinstance(graph, nx.Graph):
            raise TypeError(f"graph: expected a networkx graph, got {type(graph).__name__}")
        if graph.number_of_nodes() == 0:
            raise ValueError("graph: has no nodes")
        if graph.is_multigraph():
            raise ValueError("graph: multigraphs are not supported; collapse parallel edges first")
        if threshold is not None:
            threshold = check_real("threshold", threshold)
            if weight is None:
                raise ValueError("threshold: needs weight= (the edge attribute to threshold)")
        if weight is not None:
            missing = [edge for edge in graph.edges(data=True) if weight not in edge[2]]
            if missing:
                raise ValueError(f"weight: edge {missing[0][:2]} has no attribute {weight!r}")
            for first, second, attributes in graph.edges(data=True):
                try:  # as networkx reads it
                    number = float(attributes[weight])
                except (TypeError, ValueError):
                    number = None
                if number is None or np.isinf(number):
                    raise ValueError(f"weight: edge {(first, second)!r} has {weight!r} = {attributes[weight]!r:.40}, "
                                     "not a finite number")
        if (rows is None) != (cols is None):
            raise ValueError("rows: give both rows and cols for a bipartite relation, or neither")
        if rows is not None:
            row_nodes, col_nodes = list(rows), list(cols)
            for name, nodes in (("rows", row_nodes), ("cols", col_nodes)):
                if not nodes:
                    raise ValueError(f"{name}: is empty")
                absent = [node for node in nodes if node not in graph]
                if absent:
                    raise ValueError(f"{name}: node {absent[0]!r} is not in the graph")
                seen: set = set()
                for node in nodes:
                    if node in seen:
                        raise ValueError(f"{name}: node {node!r} is listed twice")
                    seen.add(node)
            row_set = set(row_nodes)
            shared = [node for node in col_nodes if node in row_set]
            if shared:
                raise ValueError(f"cols: node {shared[0]!r} is also in rows; rows and cols are the two sides of a "
                                 "bipartite relation rows × cols and share no node (leave both out for a relation "
                                 "over all the graph's nodes)")
            if isinstance(domains, str):
                raise ValueError(f"domains: rows and cols are two domains; give two names, got {domains!r}")
            matrix = nx.to_numpy_array(graph, nodelist=row_nodes + col_nodes, weight=weight, nonedge=0.0)
            block = matrix[: len(row_nodes), len(row_nodes):]
            if weight is None:
                block = (block > 0).astype(float)
            names = ("rows", "cols") if domains is None else domains
            labels = (row_nodes, col_nodes)
        else:
            if graph.number_of_nodes() == 1:
                raise ValueError(f"graph: a network needs at least 2 nodes (its cells are the pairs of distinct "
                                 f"nodes), got only node {next(iter(graph.nodes))!r:.40}")
            nodes = list(graph.nodes)
            sides = {attributes.get("bipartite") for _, attributes in graph.nodes(data=True)}
            if len(sides) == 2 and None not in sides:  # networkx's mark of a two-mode graph (Davis's women)
                warnings.warn("graph: its nodes carry networkx's 'bipartite' attribute, of two values: read as one "
                              "domain, every pair of nodes is a cell, those within a side as observed non-links; "
                              "rows=..., cols=... (the nodes of each side) read it as a relation rows × cols",
                              UserWarning, stacklevel=user_stacklevel())
            loops = nx.number_of_selfloops(graph)
            if loops:  # the relation is over pairs of distinct nodes: say what is left out
                warnings.warn(f"graph: its {loops} self-loop{'s' if loops > 1 else ''} (e.g. node "
                              f"{next(nx.nodes_with_selfloops(graph))!r:.40}) {'are' if loops > 1 else 'is'} left out: "
                              "the relation's cells are the pairs of distinct nodes (the diagonal is missing); "
                              "from_adjacency(..., diagonal='observed') observes the self-pairs",
                              UserWarning, stacklevel=user_stacklevel())
            block = nx.to_numpy_array(graph, nodelist=nodes, weight=weight, nonedge=0.0)
            if weight is None:
                block = (block > 0).astype(float)
            names = "nodes" if domains is None else domains
            labels = nodes
        if threshold is not None:  # NaN (an edge of unknown weight) stays missing
            block = np.where(np.isnan(block), np.nan, (block > threshold).astype(float))
            values = (0, 1)
        elif weight is None:
            values = (0, 1)
        else:
            values = None
        data = cls._read_adjacency(block, mask=None, domains=names, relation=relation, values=values, labels=labels,
                                   diagonal="missing", symmetric=None)
        built = data.relations[0]
        _warn_if_one_value(built, "graph", hint=None)
        if values is None:
            _warn_if_many_values(built, "weight", "for a binary relation, give threshold= (1 where the weight exceeds "
                                 "it), or leave weight out (1 where there is an edge)",
                                 held=f"the edge weights {weight!r} (0 between nodes without an edge) take")
        return data

    @classmethod
    def from_table(
        cls,
        frame: Any,
        *,
        subject: str,
        object: str,
        value: str,
        domains: Sequence[str] | None = None,
        relation: str | None = None,
        values: Sequence[Any] | None = None,
    ) -> "RelationalData":
        """One binary-argument relation from a pandas table of (subject, object, value) rows.

        Subjects and objects become the individuals of two domains (sorted labels); each row is
        one observed cell, and a row whose value is missing (NaN, None) is an unobserved cell, left
        out as the cells no row lists. A cell listed in two rows is an error naming both. With
        ``domains`` naming one domain twice, subjects and objects share one domain.

        Warns (``UserWarning``) when every observed cell holds one value: an edge list of the
        links present only, whose absent links are no row, leaves the models nothing to learn;
        give the absent links a row with value 0 (or read the list with ``zoo.cli.read_network``,
        which observes every pair of nodes).

        Parameters
        ----------
        frame : pandas.DataFrame
        subject, object, value : str
            Column names.
        domains : (str, str), optional
            Default: the subject and object column names.
        relation : str, optional
            Default: the value column name.
        values : sequence, optional
            Declared values; default the sorted distinct values of the column.
        """
        data = cls._read_table(frame, subject=subject, object=object, value=value, domains=domains,
                               relation=relation, values=values)
        _warn_if_one_value(data.relations[0], "frame")
        return data

    @classmethod
    def _read_table(cls, frame: Any, *, subject: str, object: str, value: str, domains: Sequence[str] | None,
                    relation: str | None, values: Sequence[Any] | None) -> "RelationalData":
        """:meth:`from_table` without its warning about one value, which :meth:`from_ratings` gives
        in its own terms."""
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}")
        columns = (("subject", subject), ("object", object), ("value", value))
        for argument, column in columns:
            if column not in frame.columns:
                raise ValueError(f"{argument}: column {column!r} not in frame (columns: {list(frame.columns)})")
        _check_distinct_columns(columns)
        if relation is not None:
            _check_name("relation", relation)
        elif not (isinstance(value, str) and value):
            raise TypeError(f"relation: the default relation name is the value column, {value!r}, which is not a "
                            "non-empty string; give relation=")
        if len(frame) == 0:
            raise ValueError("frame: is empty")
        if frame[[subject, object]].isna().any().any():
            raise ValueError("frame: subject or object labels contain missing values")
        table = frame[frame[value].notna()]
        if len(table) == 0:
            raise ValueError("value: every value is missing")
        if domains is None:
            domain_names = (subject, object)
            if not all(isinstance(name, str) and name for name in domain_names):
                raise TypeError(f"domains: the default domain names are the subject and object columns, {subject!r} "
                                f"and {object!r}, which are not both non-empty strings; give domains=(name, name)")
        elif isinstance(domains, (str, tuple, list)):
            domain_names = (domains,) if isinstance(domains, str) else tuple(domains)
        else:
            raise TypeError(f"domains: expected two domain names, got {type(domains).__name__}")
        if len(domain_names) != 2:
            raise ValueError(f"domains: expected two domain names, got {domains!r}")
        for domain_name in domain_names:
            _check_name("domains", domain_name)
        if domain_names[0] == domain_names[1]:
            codes, uniques = pd.factorize(pd.concat([table[subject], table[object]]), sort=True)
            subject_codes, object_codes = codes[: len(table)], codes[len(table):]
            domain_list = (Domain(domain_names[0], len(uniques), list(uniques)),)
            shape = (len(uniques), len(uniques))
        else:
            subject_codes, subject_labels = pd.factorize(table[subject], sort=True)
            object_codes, object_labels = pd.factorize(table[object], sort=True)
            domain_list = (
                Domain(domain_names[0], len(subject_labels), list(subject_labels)),
                Domain(domain_names[1], len(object_labels), list(object_labels)),
            )
            shape = (len(subject_labels), len(object_labels))
        cells = np.stack([subject_codes, object_codes], axis=1)
        repeated = pd.DataFrame(cells).duplicated(keep=False).to_numpy()
        if repeated.any():
            first = cells[repeated][0]
            positions = np.flatnonzero(repeated & (cells == first).all(axis=1))
            rows = table.index[positions].tolist()  # the frame's index labels
            where = table.iloc[positions[0]][[subject, object]].tolist()
            raise ValueError(f"frame: the cell ({where[0]!r}, {where[1]!r}) is listed in rows {rows[0]!r} and "
                             f"{rows[1]!r} (one row per cell; aggregate repeated ones first, e.g. "
                             f"frame.groupby([{subject!r}, {object!r}], as_index=False)[{value!r}].max())")
        raw = table[value].to_numpy()
        declared = _declared_values("values", values, raw)
        codes = _encode("value", raw, declared)
        built = Relation(value if relation is None else relation, domain_names, shape, cells, codes, tuple(declared))
        return cls(domain_list, (built,))

    @classmethod
    def from_ratings(
        cls,
        frame: Any,
        *,
        user: str,
        item: str,
        rating: str,
        threshold: float | str = "mean",
        domains: Sequence[str] = ("users", "items"),
        relation: str = "likes",
    ) -> "RelationalData":
        """Binary ``likes(user, item)`` from ratings, 1 where rating > threshold (CP §3).

        Parameters
        ----------
        frame : pandas.DataFrame
            One row per rating.
        user, item, rating : str
            Column names.
        threshold : float or "mean"
            ``"mean"``: the global mean rating, as CP §3 ("thresholded to be binary values by
            the global mean"). Warns (``UserWarning``) when every rating falls on one side of it.

        Rows whose rating is missing are unobserved cells; a (user, item) pair rated twice is an
        error naming both rows (:meth:`from_table`).
        """
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}")
        columns = (("user", user), ("item", item), ("rating", rating))
        for argument, column in columns:
            if column not in frame.columns:
                raise ValueError(f"{argument}: column {column!r} not in frame (columns: {list(frame.columns)})")
        _check_distinct_columns(columns)
        ratings = as_float_array("rating", frame[rating].dropna().to_numpy(), ndim=1)
        if isinstance(threshold, str):
            check_choice("threshold", threshold, ("mean",))
            cut = float(ratings.mean())
        else:
            cut = check_real("threshold", threshold)
        table = frame[frame[rating].notna()].copy()
        table["__likes__"] = (table[rating].to_numpy(dtype=float) > cut).astype(int)
        if table["__likes__"].nunique() == 1:
            side = "above" if table["__likes__"].iloc[0] else "at or below"
            warnings.warn(f"threshold: every rating is {side} {cut:g} (ratings {ratings.min():g} to "
                          f"{ratings.max():g}), "
                          f"so every observed cell of {relation!r} holds one value and the models have nothing to tell "
                          "individuals apart by", UserWarning, stacklevel=user_stacklevel())
        return cls._read_table(table, subject=user, object=item, value="__likes__", domains=domains,
                               relation=relation, values=(0, 1))


def check_cells(cells: Any, relation: Any, schema: RelationalSchema) -> tuple[np.ndarray, int]:
    """``cells`` as an (n_cells, arity) int64 array of a relation's individuals, and the relation's index.

    ``ValueError``/``TypeError`` naming ``relation`` or ``cells``: a relation that does not exist, cells
    that are not integer indices (labels are mapped to indices with the domain's ``labels``), of
    another arity, out of their domain's range, or self-pairs r(a, a), which the models do not model.
    """
    index = check_relation("relation", relation, tuple(schema.relation_names))
    domains = schema.relation_domains[index]
    array = np.asarray(cells)
    if array.dtype == bool or array.dtype.kind not in "iuf":
        raise TypeError(f"cells: expected integer indices of individuals, got dtype {array.dtype} (cells given by "
                        "their individuals' labels: data.cells(labelled))")
    if array.ndim != 2 or array.shape[1] != len(domains):
        raise ValueError(f"cells: expected shape (n_cells, {len(domains)}), got {array.shape}")
    if array.dtype.kind == "f":
        if not np.isfinite(array).all() or (array != np.round(array)).any():
            raise ValueError("cells: indices must be whole numbers")
    array = array.astype(np.int64)
    for position, domain in enumerate(domains):
        column = array[:, position]
        if column.size and (column.min() < 0 or column.max() >= schema.domain_sizes[domain]):
            raise ValueError(f"cells: column {position} out of range for domain {schema.domain_names[domain]!r} "
                             f"(0 to {schema.domain_sizes[domain] - 1})")
    if len(domains) == 2 and domains[0] == domains[1] and (array[:, 0] == array[:, 1]).any():
        row = int(np.flatnonzero(array[:, 0] == array[:, 1])[0])
        raise ValueError(f"cells: row {row} is a self-pair r(a, a), which the models do not model")
    return array, index


def check_mirrors(hidden: np.ndarray, arrays: Any, schema: RelationalSchema, relation: int) -> np.ndarray:
    """``hidden`` (checked positions) unchanged, or a ``ValueError`` naming it when ``relation`` is
    symmetric and a case hides a cell without its mirror: the models count each pair once, from both
    cells, so a pair half hidden would still be seen (``held_out_cases`` and ``fold_cases`` of
    :mod:`zoo.relational.evaluation` hide both)."""
    if not schema.is_symmetric(relation):
        return hidden
    entries = np.asarray(arrays.entries[relation])
    size = int(entries.max()) + 1
    cells = entries[np.where(hidden >= 0, hidden, 0)]
    codes = np.where(hidden >= 0, cells[..., 0] * size + cells[..., 1], -1)
    mirrors = np.where(hidden >= 0, cells[..., 1] * size + cells[..., 0], -1)
    half = np.flatnonzero((np.sort(codes, axis=1) != np.sort(mirrors, axis=1)).any(axis=1))
    if half.size:
        case = int(half[0])
        raise ValueError(f"hidden: {schema.relation_names[relation]!r} is symmetric, and case {case} hides a cell "
                         "without its mirror r(b, a); hide both (zoo.relational.evaluation.held_out_cases and "
                         "fold_cases do)")
    return hidden


#: What :func:`_warn_if_one_value` advises by default: the cells of one value may be a list of the links present only.
_UNLISTED_HINT = ("if the absent links (or other values) are not listed, give them as observed cells (an edge list: "
                  "zoo.cli.read_network or RelationalData.from_networkx observe every pair of nodes)")


def _is_symmetric_square(relation: Relation, domains: Sequence[Domain]) -> bool:
    """Whether a relation between two domains of one size holds r(b, a) = r(a, b) for every observed
    cell (a, b), and those cells alone: a network's matrix read as two domains."""
    size = domains[0].size
    if domains[1].size != size:
        return False
    entries, values = np.asarray(relation.entries, np.int64), np.asarray(relation.values)
    forward, backward = entries[:, 0] * size + entries[:, 1], entries[:, 1] * size + entries[:, 0]
    by_forward, by_backward = np.argsort(forward), np.argsort(backward)
    return bool(np.array_equal(forward[by_forward], backward[by_backward])
                and np.array_equal(values[by_forward], values[by_backward]))


def _warn_if_one_value(relation: Relation, argument: str, hint: str | None = _UNLISTED_HINT) -> None:
    """Warn, naming ``argument``, when every observed cell of ``relation`` holds the same value;
    ``hint``, when given, ends the message."""
    held = np.unique(relation.values)
    if held.size == 1:
        label = relation.value_labels[int(held[0])]
        warnings.warn(f"{argument}: every observed cell of relation {relation.name!r} holds {label!r}, so the models "
                      f"have nothing to tell individuals apart by" + (f"; {hint}" if hint else ""),
                      UserWarning, stacklevel=user_stacklevel())


def _warn_no_shared_labels(domain: "Domain", known: set, position: int) -> None:
    """``RelationalData.combine``'s warning for a domain of argument ``position`` none of whose labels
    are among the ``known`` ones of the datasets before it: its individuals become new ones."""
    alike = sorted({str(label) for label in domain.labels} & {str(label) for label in known})
    why = (f"; their labels differ in type (e.g. {next(label for label in known if str(label) == alike[0])!r} and "
           f"{next(label for label in domain.labels if str(label) == alike[0])!r})" if alike else "")
    warnings.warn(f"datasets: domain {domain.name!r} of argument {position} shares none of its {domain.size} "
                  f"labels with the datasets before it{why}: its individuals are added as new ones, and the "
                  f"combined domain has {len(known) + domain.size}; give the same individuals the same labels",
                  UserWarning, stacklevel=user_stacklevel())


def _warn_if_many_values(relation: Relation, argument: str, advice: str, held: str = "the observed cells hold") -> None:
    """Warn, naming ``argument``, when ``relation`` has values that are not whole numbers or more than
    10 of them (weights, measurements), each of which is a category of its own; ``held`` says what
    holds the values, ``advice`` what to do."""
    if np.unique(relation.values).size < 2:  # one value: _warn_if_one_value's case
        return
    fractional = [value for value in relation.value_labels
                  if isinstance(value, numbers.Real) and not float(value).is_integer()]
    if not fractional and relation.n_values <= 10:
        return
    which = f", some not whole numbers (e.g. {float(fractional[0]):g})" if fractional else ""
    warnings.warn(f"{argument}: {held} {relation.n_values} distinct values{which}; each one becomes a category of "
                  f"relation {relation.name!r}, unrelated to the others (the models do not see that one value is "
                  f"near another); {advice}", UserWarning, stacklevel=user_stacklevel())


def _declared_values(name: str, values: Sequence[Any] | None, observed: np.ndarray) -> list:
    if values is None:
        held = set(np.asarray(observed).tolist())
        if not all(isinstance(value, numbers.Real) for value in held):  # labels: "yes"/"no", "ally"/"enemy", ...
            try:
                distinct = sorted(held)
            except TypeError:  # labels of several types: some order, the same every time
                distinct = sorted(held, key=lambda value: (type(value).__name__, repr(value)))
            if len(distinct) < 2:
                raise ValueError(f"{name}: every cell holds {distinct[0]!r}; give the values a cell can take "
                                 f"({name}=[...]), so that the others are known")
            return distinct
        distinct = sorted(held)
        if set(distinct) <= {0, 1}:
            distinct = [0, 1]
        if len(distinct) < 2:
            distinct = sorted(set(distinct) | {0, 1})
        return [int(value) if float(value).is_integer() else value for value in distinct]
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name}: expected a sequence of values, got a string")
    return list(values)


def _encode(name: str, raw: np.ndarray, declared: Sequence[Any]) -> np.ndarray:
    lookup = {value: code for code, value in enumerate(declared)}
    codes = np.empty(len(raw), dtype=np.int64)
    for index, value in enumerate(np.asarray(raw).tolist()):
        code = lookup.get(value)
        if code is None:
            raise ValueError(f"{name}: value {value!r} is not among the declared values {tuple(declared)!r}")
        codes[index] = code
    return codes


# The UCINET DL reader and the loaders live in their own file; their names stay importable from here.
from zoo.relational._readers import (load_davis_southern_women, load_florentine_families,  # noqa: E402
                                     load_karate_club, load_movielens_100k, read_ucinet_dl)
