"""Every relation's cells in one list: the input of the numba loops of the LRM and the IRM
(:mod:`inference.native.relational_em`, :mod:`inference.native.relational_gibbs`), built on the host."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from zoo.relational.data import RelationalData

__all__ = ["FlatCells", "flat_cells"]


class FlatCells(NamedTuple):
    """All relations' cells in one list, for the numba loops (arity 1 gets a virtual second argument).

    Individuals are numbered globally, domain after domain; index ``n_individuals`` is a virtual
    individual with one class whose q is 1, the second argument of unary relations.

    Attributes
    ----------
    first, second : int32 (n_cells,) — global individual of each argument
    values, relation : int32 (n_cells,)
    item_start : int32 (n_individuals + 1,) — CSR pointer into the items of every individual
    item_cell, item_position : int32 (n_items,) — the cell and the argument position of each item
    """

    first: Any
    second: Any
    values: Any
    relation: Any
    item_start: Any
    item_cell: Any
    item_position: Any


def flat_cells(data: RelationalData) -> FlatCells:
    """Build :class:`FlatCells` from validated data (host side)."""
    schema = data.schema
    offsets = np.concatenate([[0], np.cumsum(schema.domain_sizes)])
    virtual = int(offsets[-1])
    first, second, values, relation_ids = [], [], [], []
    for index, (relation, domains) in enumerate(zip(data.relations, schema.relation_domains)):
        first.append(relation.entries[:, 0] + offsets[domains[0]])
        second.append(relation.entries[:, 1] + offsets[domains[1]] if len(domains) == 2
                      else np.full(relation.n_observed, virtual))
        values.append(relation.values)
        relation_ids.append(np.full(relation.n_observed, index))
    first, second = np.concatenate(first), np.concatenate(second)
    owners = np.concatenate([first, second])
    positions = np.repeat([0, 1], first.shape[0])
    cells = np.tile(np.arange(first.shape[0]), 2)
    real = owners < virtual
    owners, positions, cells = owners[real], positions[real], cells[real]
    order = np.argsort(owners, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(owners, minlength=virtual))])
    as32 = lambda array: jnp.asarray(np.asarray(array, np.int32))  # noqa: E731
    return FlatCells(as32(first), as32(second), as32(np.concatenate(values)), as32(np.concatenate(relation_ids)),
                     as32(start), as32(cells[order]), as32(positions[order]))
