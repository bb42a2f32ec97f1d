"""Held-out log-loss of relational models, following CP §3.

* :func:`leave_one_out_log_loss` — social networks: up to 200 observed cells are drawn at random;
  for each, the model is fitted with that cell hidden and scored on it (for an undirected network
  the mirror cell r(b, a) is hidden too, so the answer does not leak). Mean ± standard error over
  the cases.
* :func:`cross_validated_log_loss` — ratings: the observed cells are split into 5 folds; each
  fold is predicted by a model fitted on the other four. Mean ± standard error over the folds.

Log-loss is -log P(true value), in bits by default (``base=2``): CP's tables are consistent with
bits (an uninformed binary prediction scores 1.0, which is where their IRM column sits). A model
is anything with ``predict_held_out(data, hidden, *, key, relation, **options)`` returning the
predictive probabilities of the hidden cells, case by case, such as
:class:`~zoo.relational.latent_class.LatentClassRelational` and
:class:`~zoo.relational.infinite.InfiniteRelational`; their cases run ``vmap``-ped in jitted calls
of ``cases_per_call`` cases (an option passed through).

A fitted :class:`~zoo.relational.infinite.IRMResult` is such a model too: its ``predict_held_out``
reweights the draws of its run on all the data per case (Pareto-smoothed importance sampling,
:mod:`zoo.relational._infinite_loo`) instead of running chains for every case, and runs again, with
the IRM's own chains, only the cases whose Pareto k̂ says the reweighting cannot be trusted. On
Davis's women × events (200 cases) that took 1 s against 664 s for 4 chains × 1,000 sweeps per
case, and the two losses differ by 0.003 bits (0.6575 and 0.6600). Leave-one-out is where it
serves: a fold of cross-validation hides too many cells for the reweighting, and every fold is run
again.

Ctrl-C and ``time_budget`` (an option passed through, in seconds): the models act on them between
calls of cases, and the cases they did not run come back NaN (with a ``RuntimeWarning`` saying how
many were run). The estimates here are then over the cases (leave-one-out) or folds
(cross-validation) finished, with a ``RuntimeWarning`` that says so: ``losses`` holds one entry for
each and ``n_cells`` counts their cells. A second Ctrl-C abandons with ``KeyboardInterrupt``.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

from inference._validation import (check_int, check_key, check_model, check_real, check_relation,
                                   user_stacklevel)
from zoo.data import as_numpy_rng
from zoo.relational.data import RelationalData

__all__ = ["LogLoss", "held_out_cases", "fold_cases", "leave_one_out_log_loss", "cross_validated_log_loss"]


class LogLoss(NamedTuple):
    """A held-out log-loss estimate.

    Attributes
    ----------
    mean : float
    standard_error : float — over cases (leave-one-out) or folds (cross-validation)
    losses : np.ndarray — per case, or per fold
    n_cells : int — cells scored
    """

    mean: float
    standard_error: float
    losses: np.ndarray
    n_cells: int

    def __str__(self) -> str:
        return f"{self.mean:.4f} ± {self.standard_error:.4f}"


def _relation_index(data: RelationalData, relation: int | str | None) -> int:
    if not isinstance(data, RelationalData):
        raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
    return check_relation("relation", relation, tuple(cells.name for cells in data.relations))


def _scorable(data: RelationalData, relation: int) -> np.ndarray:
    """Positions of the cells to draw cases from (one of each mirror pair when symmetric)."""
    cells = data.relations[relation]
    if cells.symmetric:
        return np.flatnonzero(cells.entries[:, 0] < cells.entries[:, 1])
    return np.arange(cells.n_observed)


def held_out_cases(data: RelationalData, *, relation: int | str | None = None, max_cases: int = 200,
                   rng: Any = 0) -> np.ndarray:
    """Leave-one-out cases: (n_cases, 1 or 2) positions; the first is scored, the second its mirror."""
    index = _relation_index(data, relation)
    max_cases = check_int("max_cases", max_cases, minimum=1)
    candidates = _scorable(data, index)
    generator = as_numpy_rng(rng)
    chosen = np.sort(generator.choice(candidates, size=min(max_cases, candidates.shape[0]), replace=False))
    cells = data.relations[index]
    if cells.symmetric:
        return np.stack([chosen, cells.mirror_index()[chosen]], axis=1)
    return chosen[:, None]


def fold_cases(data: RelationalData, *, relation: int | str | None = None, n_folds: int = 5, rng: Any = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """Cross-validation folds: ``hidden`` (n_folds, width) positions padded with -1, and ``scored`` (bool)."""
    index = _relation_index(data, relation)
    candidates = _scorable(data, index)
    n_folds = check_int("n_folds", n_folds, minimum=2, maximum=candidates.shape[0])
    generator = as_numpy_rng(rng)
    folds = np.array_split(generator.permutation(candidates), n_folds)
    cells = data.relations[index]
    groups = []
    for fold in folds:
        fold = np.sort(fold)
        groups.append((np.concatenate([fold, cells.mirror_index()[fold]]) if cells.symmetric else fold,
                       fold.shape[0]))
    width = max(group.shape[0] for group, _ in groups)
    hidden = np.full((n_folds, width), -1, np.int64)
    scored = np.zeros((n_folds, width), bool)
    for row, (group, n_scored) in enumerate(groups):
        hidden[row, : group.shape[0]] = group
        scored[row, :n_scored] = True
    return hidden, scored


def _losses(data: RelationalData, relation: int, hidden: np.ndarray, probs: np.ndarray, base: float) -> np.ndarray:
    truth = data.relations[relation].values[np.where(hidden < 0, 0, hidden)]
    chosen = np.take_along_axis(probs, truth[..., None], axis=-1)[..., 0]
    return -np.log(np.maximum(chosen, np.finfo(np.float64).tiny)) / np.log(base)


def _finished(probs: np.ndarray, caller: str) -> np.ndarray:
    """The cases a model ran: all but a trailing block whose first cell (never padding) is all NaN.

    Such a block is what a model stopped early (Ctrl-C, ``time_budget``) leaves; it is dropped with
    a ``RuntimeWarning``. NaN elsewhere (or in every case) is kept and makes the loss NaN.
    """
    not_run = np.isnan(probs[:, 0]).all(axis=-1)
    n_cases = not_run.shape[0]
    n_run = n_cases - int(np.argmin(not_run[::-1])) if not not_run.all() else n_cases
    if n_run < n_cases:
        warnings.warn(f"{caller}: the estimate is over the {n_run} of {n_cases} cases the model ran "
                      "(stopped early)", RuntimeWarning, stacklevel=user_stacklevel())
    return np.arange(n_cases) < n_run


def _check_held_out_model(model: Any, caller: str) -> Any:
    """``model`` if it has ``predict_held_out``; a fit result that has none (an ``LRMResult``) is
    refused with a ``TypeError`` that names its type and says to pass the model that made it."""
    inner = getattr(model, "model", None)
    if (not isinstance(model, type) and not callable(getattr(model, "predict_held_out", None))
            and callable(getattr(inner, "predict_held_out", None))):
        raise TypeError(f"model: got a fit result ({type(model).__name__}), which has no predict_held_out; "
                        f"{caller} fits the model anew for each case, with its cells hidden, so pass the model "
                        f"itself, result.model (a {type(inner).__name__})")
    return check_model("model", model, ("predict_held_out",), "LatentClassRelational(n_classes=4)")


def _standard_error(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / np.sqrt(values.shape[0])) if values.shape[0] > 1 else float("nan")


def leave_one_out_log_loss(model: Any, data: RelationalData, *, key: Any, relation: int | str | None = None,
                           max_cases: int = 200, base: float = 2.0, rng: Any = 0, **options: Any) -> LogLoss:
    """Leave-one-out log-loss over up to ``max_cases`` observed cells (CP §3, Table 1).

    Parameters
    ----------
    model : LatentClassRelational, InfiniteRelational, a fitted IRMResult (its draws reweighted per
        case, see the module docstring) or anything with ``predict_held_out``; a fitted LRMResult
        is not one (it has no draws to reweight): pass its ``result.model``
    data : RelationalData
    key : jax PRNG key — randomness of the fits
    relation : int or str, optional — by position or name; may be left out where the data hold one
    max_cases : int — CP: 200
    base : float — logarithm base (2: bits)
    rng : seed or Generator — which cells are drawn
    **options : passed to ``model.predict_held_out`` (e.g. ``n_restarts``, ``n_sweeps``,
        ``cases_per_call``, ``time_budget``, ``progress``)

    After Ctrl-C or a spent ``time_budget`` the estimate is over the cases finished (module
    docstring).
    """
    model = _check_held_out_model(model, "leave_one_out_log_loss")
    key = check_key("key", key)
    base = check_real("base", base, low=1.0, low_open=True)
    index = _relation_index(data, relation)
    hidden = held_out_cases(data, relation=index, max_cases=max_cases, rng=rng)
    probs = model.predict_held_out(data, hidden, key=key, relation=index, **options)
    finished = _finished(probs, "leave_one_out_log_loss")
    losses = _losses(data, index, hidden[finished, :1], probs[finished, :1], base)[:, 0]
    return LogLoss(float(losses.mean()), _standard_error(losses), losses, int(losses.shape[0]))


def cross_validated_log_loss(model: Any, data: RelationalData, *, key: Any, relation: int | str | None = None,
                             n_folds: int = 5, base: float = 2.0, rng: Any = 0, **options: Any) -> LogLoss:
    """k-fold cross-validated log-loss (CP §3, Table 2: 5 folds of the ratings).

    The mean is over all scored cells; the standard error is over the folds' mean losses.
    ``**options`` are passed to ``model.predict_held_out``; after Ctrl-C or a spent ``time_budget``
    the estimate is over the folds finished (module docstring).
    """
    model = _check_held_out_model(model, "cross_validated_log_loss")
    key = check_key("key", key)
    base = check_real("base", base, low=1.0, low_open=True)
    index = _relation_index(data, relation)
    hidden, scored = fold_cases(data, relation=index, n_folds=n_folds, rng=rng)
    probs = model.predict_held_out(data, hidden, key=key, relation=index, **options)
    finished = _finished(probs, "cross_validated_log_loss")
    hidden, scored = hidden[finished], scored[finished]
    losses = _losses(data, index, hidden, probs[finished], base)
    fold_means = np.array([losses[row][scored[row]].mean() for row in range(hidden.shape[0])])
    mean = float(losses[scored].mean())
    return LogLoss(mean, _standard_error(fold_means), fold_means, int(scored.sum()))
