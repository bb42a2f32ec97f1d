"""Growing a cluster-abstraction tree by deterministic annealing (H99 §3 footnote 2, Rose et al.
1990): :func:`anneal_tree` raises β step by step, tries to split every leaf into two slightly
perturbed copies and keeps the splits whose copies move apart. The model it fits is
:class:`zoo.dyadic.cluster_abstraction.ClusterAbstraction`, which re-exports these names."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from inference._validation import check_bool, check_choice, check_int, check_key, check_real
from inference.display import Card, Described, params_text, stopped_text
from inference.interrupts import DeferredInterrupt, deadline_after, stop_reason
from inference.native.backend import resolve_backend
from inference.jit import jit
from zoo.data import CoOccurrence, DyadicArrays, as_numpy_rng, not_co_occurrence
from zoo.dyadic.cluster_abstraction import CAMParams, ClusterAbstraction, Tree

__all__ = ["GrownTree", "anneal_tree"]


# ----------------------------------------------------------------------------- growth by annealing
@partial(jit, static_argnames=("model", "max_iter"))
def _run_em(model: ClusterAbstraction, params: CAMParams, arrays: DyadicArrays, beta: Any, tol: Any, max_iter: int):
    """EM at fixed β until the relative change of the log-likelihood falls below ``tol``."""

    def cond(state):
        _, iteration, previous, current = state
        change = jnp.abs(current - previous)
        return (iteration < max_iter) & ~((iteration > 1) & (change <= tol * jnp.abs(current)))

    def body(state):
        params, iteration, _, current = state
        new_params, log_lik = model.em_step(params, arrays, beta)
        return new_params, iteration + 1, current, log_lik

    dtype = arrays.counts.dtype
    start = (params, jnp.asarray(0, jnp.int32), jnp.asarray(-jnp.inf, dtype), jnp.asarray(-jnp.inf, dtype))
    params, iterations, _, log_lik = jax.lax.while_loop(cond, body, start)
    return params, iterations, log_lik


def _split_params(
    tree: Tree, params: CAMParams, leaves: Sequence[int], generator: np.random.Generator, perturbation: float
) -> tuple[Tree, CAMParams, list[tuple[int, int]]]:
    """Give each of ``leaves`` two children whose aspects are ±perturbed copies of the leaf's.

    The leaf becomes an inner node keeping its aspect; its cluster prior, posterior and the weight
    of its own level are shared equally by the children, so the likelihood hardly changes. Returns
    the new tree, its parameters and the (leaf index, leaf index) pairs of the new siblings.
    """
    new_tree = tree.split(leaves)
    old_leaf_index = {node: index for index, node in enumerate(tree.leaves)}
    new_leaf_index = {node: index for index, node in enumerate(new_tree.leaves)}
    old_levels = tree.levels
    dtype = np.asarray(params.cluster_prior).dtype
    col_given_node = np.asarray(params.col_given_node, np.float64)
    old_weights = np.asarray(params.level_weights, np.float64)
    old_prior = np.asarray(params.cluster_prior, np.float64)
    old_posterior = np.asarray(params.cluster_posterior, np.float64)
    n_rows, n_cols = old_weights.shape[0], col_given_node.shape[0]
    new_nodes = np.zeros((n_cols, new_tree.n_nodes))
    new_nodes[:, : tree.n_nodes] = col_given_node
    weights = np.zeros((n_rows, new_tree.n_leaves, new_tree.n_levels))
    prior = np.zeros(new_tree.n_leaves)
    posterior = np.zeros((n_rows, new_tree.n_leaves))
    for node in new_tree.leaves:
        if node < tree.n_nodes:  # a leaf that was not split
            source, target = old_leaf_index[node], new_leaf_index[node]
            weights[:, target, : tree.n_levels] = old_weights[:, source]
            prior[target], posterior[:, target] = old_prior[source], old_posterior[:, source]
    pairs = []
    for leaf in leaves:
        source = old_leaf_index[leaf]
        level = old_levels[leaf]
        noise = perturbation * generator.standard_normal(n_cols)
        children = [node for node in range(tree.n_nodes, new_tree.n_nodes) if new_tree.parents[node] == leaf]
        for sign, child in zip((1.0, -1.0), children):
            aspect = col_given_node[:, leaf] * np.exp(sign * noise)
            new_nodes[:, child] = aspect / aspect.sum()
            target = new_leaf_index[child]
            weights[:, target, :level] = old_weights[:, source, :level]
            weights[:, target, level] = old_weights[:, source, level] / 2
            weights[:, target, level + 1] = old_weights[:, source, level] / 2
            prior[target] = old_prior[source] / 2
            posterior[:, target] = old_posterior[:, source] / 2
        pairs.append((new_leaf_index[children[0]], new_leaf_index[children[1]]))
    new_params = CAMParams(
        cluster_prior=jnp.asarray(prior, dtype),
        col_given_node=jnp.asarray(new_nodes, dtype),
        level_weights=jnp.asarray(weights, dtype),
        row_marginal=params.row_marginal,
        cluster_posterior=jnp.asarray(posterior, dtype),
    )
    return new_tree, new_params, pairs


def _sibling_separation(params: CAMParams, pair: tuple[int, int]) -> float:
    """How differently two sibling clusters claim the rows, in [0, 1].

    Σ_i n_i |P{c(x_i) = c_1} − P{c(x_i) = c_2}| / Σ_i n_i (P{c(x_i) = c_1} + P{c(x_i) = c_2}), with
    n_i ∝ P(x_i): 0 for copies that still describe the same rows (merged), 1 for copies that
    share no row (separated).
    """
    posterior = np.asarray(params.cluster_posterior, np.float64)
    weights = np.asarray(params.row_marginal, np.float64)
    first, second = posterior[:, pair[0]], posterior[:, pair[1]]
    total = float(weights @ (first + second))
    return float(weights @ np.abs(first - second)) / total if total > 0 else 0.0


def _count(number: int, noun: str) -> str:
    """``"1 split"``, ``"2 splits"``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _copies_hold_rows(params: CAMParams, pair: tuple[int, int]) -> bool:
    """Whether each copy of a split holds at least half a row of posterior mass, Σ_i P{c(x_i) = c}
    ≥ 1/2. A copy without it has taken no rows: an empty cluster, whose separation from its
    sibling (:func:`_sibling_separation`) is nevertheless 1."""
    mass = np.asarray(params.cluster_posterior, np.float64).sum(axis=0)
    return all(mass[copy] >= 0.5 for copy in pair)


@dataclass(repr=False)
class GrownTree(Described):
    """Result of :func:`anneal_tree`.

    Attributes
    ----------
    model : ClusterAbstraction on the grown tree
    params : CAMParams kept (the level of lowest validation perplexity, or the last level)
    beta : float — inverse temperature of the kept parameters
    history : pandas.DataFrame, one row per β level: ``beta``, ``n_leaves``, ``log_lik``
        (training, β = 1 objective), ``valid_perplexity`` (inf with validation tokens of
        probability 0), ``valid_zero_tokens``, ``n_tried``, ``n_split``, ``n_iter``
    stopped_by : str — "beta_stop" (every level run), "interrupted" (Ctrl-C) or "time_budget":
        the levels finished are kept, and the tree is the best (or last) of them

    ``grown.perplexity(test)`` scores held-out tokens as an EM result's ``perplexity`` does, and
    :func:`zoo.io.save_result` / :func:`zoo.io.load_result` save and load a grown tree.
    """

    model: ClusterAbstraction
    params: CAMParams
    beta: float
    history: Any
    stopped_by: str = "beta_stop"

    @property
    def tree(self) -> Tree:
        return self.model.tree

    def _card(self) -> Card:
        card = Card(f"GrownTree: a cluster-abstraction tree of {self.tree.n_leaves} leaves (anneal_tree)")
        card.add("tree", f"depth {self.tree.depth}, kept at β = {self.beta:.4g}; {stopped_text(self.stopped_by)}")
        history = self.history
        if history is not None and len(history):
            card.add("levels", f"{len(history)} β levels, {int(history['n_iter'].sum()):,} EM iterations, "
                               f"{_count(int(history['n_split'].sum()), 'split')} kept of "
                               f"{int(history['n_tried'].sum())} tried")
            perplexity = np.asarray(history["valid_perplexity"], np.float64)
            if not np.isnan(perplexity).all():
                best = int(np.nanargmin(perplexity))
                card.add("valid perplexity", f"{perplexity[best]:.6g} (lowest; β = {history['beta'].iloc[best]:.4g}, "
                                             f"{int(history['n_leaves'].iloc[best])} leaves)")
        card.add("parameters", params_text(self.params))
        card.add("see", ["grown.perplexity(test)", "grown.tree", "grown.history", "grown.params", "grown.model"])
        return card

    def heldout_log_likelihood(self, data: CoOccurrence, *, floor: float | None = None) -> float:
        """Σ n log P(y|x) of held-out counts under the kept tree (rows and columns of the fitted data),
        in float64: -inf when some tokens have probability 0 (with a warning), unless ``floor``
        scores them at max(P(y|x), floor) (:meth:`ClusterAbstraction.heldout_evaluation`)."""
        return self.model.heldout_evaluation(self.params, data, floor=floor).log_lik

    def perplexity(self, data: CoOccurrence, *, floor: float | None = None) -> float:
        """Held-out perplexity exp(-l), l = Σ n log P(y|x) / Σ n (H99 §5), of the kept tree, as
        :meth:`inference.em.EMResult.perplexity` gives it for a fit of fixed shape (and
        :func:`zoo.dyadic.predictive.perplexity` of ``grown.model`` and ``grown.params``)."""
        return float(self.model.heldout_evaluation(self.params, data, floor=floor).perplexity)

    def _check_loaded(self) -> None:
        """Called by :func:`zoo.io.load_result` on a tree rebuilt from a file: a ``ValueError``
        unless its parts agree (the parameters with the model's tree, β in (0, 1], a known
        ``stopped_by``, a history table); the parameters go back onto JAX arrays."""
        import pandas as pd

        if not isinstance(self.model, ClusterAbstraction) or not isinstance(self.model.tree, Tree):
            raise ValueError(f"the model is {self.model!r:.60}, not a ClusterAbstraction with its tree")
        if not isinstance(self.params, CAMParams):
            raise ValueError(f"the parameters are {type(self.params).__name__}, not CAMParams")
        params = CAMParams(*(jnp.asarray(leaf) for leaf in self.params))
        self.model.check_params(params)
        object.__setattr__(self, "params", params)
        if isinstance(self.beta, bool) or not isinstance(self.beta, (int, float)) or not 0.0 < self.beta <= 1.0:
            raise ValueError(f"beta {self.beta!r:.20} is not an inverse temperature in (0, 1]")
        if self.stopped_by not in ("beta_stop", "interrupted", "time_budget"):
            raise ValueError(f"stopped_by {self.stopped_by!r:.30} is not beta_stop, interrupted or time_budget")
        if not isinstance(self.history, pd.DataFrame):
            raise ValueError(f"the history is {type(self.history).__name__}, not a table (pandas.DataFrame)")


def anneal_tree(
    data: CoOccurrence,
    *,
    key: Any,
    max_leaves: int,
    valid: CoOccurrence | None = None,
    beta_start: float = 0.05,
    beta_growth: float = 1.25,
    beta_stop: float = 1.0,
    perturbation: float = 0.05,
    split_threshold: float = 0.5,
    max_iter_per_level: int = 200,
    tol: float = 1e-6,
    keep: str = "best",
    backend: str = "auto",
    prior_count: float = 0.0,
    time_budget: float | None = None,
    progress: bool = False,
) -> GrownTree:
    """Grow a CAM tree by deterministic annealing (H99 §3 footnote 2, Rose et al. 1990).

    Start with a single node at β = ``beta_start``. At every β level: run EM to convergence;
    then duplicate every leaf (while fewer than ``max_leaves``) into two children with aspects
    perturbed by ±``perturbation`` (log scale) and run EM again at the same β. Below a critical
    β the copies are pulled back together and claim the same rows; past it they separate and
    divide the rows between them (a phase transition). A split is kept when the copies'
    separation — the token-weighted share of their posterior mass on which they disagree —
    exceeds ``split_threshold`` and each copy holds half a row of posterior mass or more; the kept
    splits are redone from the level's converged parameters and EM is run once more, and a split
    whose copy is left with no rows there is left out and the others redone. Then
    β ← ``beta_growth``·β, until β reaches ``beta_stop``.

    Parameters
    ----------
    data : CoOccurrence
        Training counts (rows are clustered).
    key : JAX PRNG key
        Randomness of the start and of the perturbations.
    max_leaves : int
        Upper bound on the number of clusters (≥ 1, at most the number of rows).
    valid : CoOccurrence, optional
        Held-out counts (same shape); their perplexity is recorded at every β level: inf when
        some of their tokens have probability 0 (counted in the history's ``valid_zero_tokens``),
        and levels are compared by (tokens of probability 0, perplexity of the others), as in
        :func:`inference.em.tempered_em`.
    beta_start, beta_growth, beta_stop : float
        The annealing schedule, 0 < beta_start ≤ beta_stop ≤ 1 and beta_growth > 1.
    perturbation : float
        Log-scale standard deviation of the noise that separates the copies of a leaf (> 0).
    split_threshold : float in (0, 1)
        Separation of the copies (0: same rows, 1: disjoint rows) above which a split is kept.
    max_iter_per_level : int
        EM iterations per run at one β.
    tol : float
        Relative change of the log-likelihood at which a run has converged.
    keep : {"best", "last"}
        Return the β level with the lowest validation perplexity ("best", the default when
        ``valid`` is given) or the tree reached at ``beta_stop`` ("last", always without
        ``valid``).
    backend : {"auto", "xla", "numba"}
    prior_count : float ≥ 0
        MAP-EM pseudo-counts of every model on the path (:class:`ClusterAbstraction`): with
        c > 0 no prediction P(y|x) is 0. Default 0: H99's EM.
    time_budget : float, optional
        Seconds; the growth stops after the β level in which they ran out.
    progress : bool
        Show a tqdm progress bar of the β levels.

    Ctrl-C is acted on between β levels (:class:`inference.interrupts.DeferredInterrupt`): the
    level under way is finished, and the tree is chosen among the levels run, as at the end
    (``stopped_by`` says why it stopped); a second Ctrl-C abandons with ``KeyboardInterrupt``.

    Returns
    -------
    GrownTree
    """
    import pandas as pd
    from tqdm.auto import tqdm

    if not isinstance(data, CoOccurrence):
        raise not_co_occurrence("data", data)
    max_leaves = check_int("max_leaves", max_leaves, minimum=1)
    if max_leaves > data.n_rows:
        raise ValueError(f"max_leaves: {max_leaves} clusters for only {data.n_rows} rows")
    beta_start = check_real("beta_start", beta_start, low=0.0, high=1.0, low_open=True)
    beta_stop = check_real("beta_stop", beta_stop, low=beta_start, high=1.0)
    beta_growth = check_real("beta_growth", beta_growth, low=1.0, low_open=True)
    perturbation = check_real("perturbation", perturbation, low=0.0, low_open=True)
    split_threshold = check_real("split_threshold", split_threshold, low=0.0, high=1.0, low_open=True, high_open=True)
    max_iter_per_level = check_int("max_iter_per_level", max_iter_per_level, minimum=1)
    tol = check_real("tol", tol, low=0.0)
    prior_count = check_real("prior_count", prior_count, low=0.0)
    check_choice("keep", keep, ("best", "last"))
    check_bool("progress", progress)
    deadline = deadline_after(time_budget)
    resolve_backend(backend)  # a bad name, or numba off the CPU, refused here
    if valid is not None:
        if not isinstance(valid, CoOccurrence):
            raise not_co_occurrence("valid", valid)
        if valid.shape != data.shape:
            raise ValueError(f"valid: shape {valid.shape} differs from data shape {data.shape}")
    key = check_key("key", key)
    key_init, key_perturb = jax.random.split(key)
    generator = as_numpy_rng(key_perturb, "key")

    arrays = data.to_arrays()
    valid_arrays = valid.to_arrays() if valid is not None else None
    dtype = arrays.counts.dtype
    model = ClusterAbstraction(tree=Tree.single(), backend=backend, prior_count=prior_count)
    params = model.init_params(key_init, arrays)
    tol_array = jnp.asarray(tol, dtype)

    def run(model, params, beta):
        params, n_iter, log_lik = _run_em(model, params, arrays, jnp.asarray(beta, dtype), tol_array,
                                          max_iter_per_level)
        return params, int(n_iter), float(log_lik)

    records = []
    best = None
    levels = [beta_start]  # the β schedule: β ← beta_growth·β until beta_stop
    while levels[-1] < beta_stop:
        levels.append(min(beta_stop, levels[-1] * beta_growth))
    stopped_by = "beta_stop"
    bar = tqdm(total=len(levels), disable=not progress, unit="level", desc="annealing")
    with DeferredInterrupt() as interrupt, bar:
        for level, beta in enumerate(levels):
            params, n_iter, log_lik = run(model, params, beta)
            n_tried = n_split = 0
            room = max_leaves - model.n_classes
            if room > 0:
                # Try the heaviest leaves first when there is no room to split them all.
                masses = np.asarray(params.cluster_prior)
                candidates = [model.tree.leaves[i] for i in np.argsort(-masses, kind="stable")[:room]]
                n_tried = len(candidates)
                trial_tree, trial_params, pairs = _split_params(model.tree, params, candidates, generator,
                                                                perturbation)
                trial_model = ClusterAbstraction(tree=trial_tree, backend=backend, prior_count=prior_count)
                trial_params, trial_iter, _ = run(trial_model, trial_params, beta)
                n_iter += trial_iter
                kept = [leaf for leaf, pair in zip(candidates, pairs)
                        if _sibling_separation(trial_params, pair) > split_threshold
                        and _copies_hold_rows(trial_params, pair)]
                # The kept splits are redone alone from the level's parameters, where a copy can end
                # with no rows. Such splits are left out and the rest redone, until every copy holds
                # rows (or no split is left, and the tree stays as it was).
                while kept:
                    new_tree, new_params, new_pairs = _split_params(model.tree, params, kept, generator, perturbation)
                    new_model = ClusterAbstraction(tree=new_tree, backend=backend, prior_count=prior_count)
                    new_params, extra_iter, new_log_lik = run(new_model, new_params, beta)
                    n_iter += extra_iter
                    held = [leaf for leaf, pair in zip(kept, new_pairs) if _copies_hold_rows(new_params, pair)]
                    if len(held) == len(kept):
                        model, params, log_lik = new_model, new_params, new_log_lik
                        break
                    kept = held
                n_split = len(kept)
            valid_perplexity = n_zero = float("nan")
            if valid_arrays is not None:
                # Tokens of probability 0 counted, not floored; levels compared by (count, others' perplexity).
                heldout, n_zero = (float(value) for value in model.heldout_log_lik_and_zeros(params, valid_arrays))
                rest = float(np.exp(-heldout / (valid.total - n_zero))) if valid.total > n_zero else math.inf
                valid_perplexity = math.inf if n_zero > 0 else rest
                if best is None or (n_zero, rest) < best[0]:
                    best = ((n_zero, rest), model, params, beta)
            records.append({"beta": beta, "n_leaves": model.n_classes, "log_lik": log_lik,
                            "valid_perplexity": valid_perplexity, "valid_zero_tokens": n_zero, "n_tried": n_tried,
                            "n_split": n_split, "n_iter": n_iter})
            bar.update()
            reason = stop_reason(interrupt, deadline) if level + 1 < len(levels) else None
            if reason is not None:
                stopped_by = reason
                break
    history = pd.DataFrame.from_records(records)
    if best is not None and keep == "best":
        _, model, params, beta = best
    return GrownTree(model=model, params=params, beta=float(beta), history=history, stopped_by=stopped_by)
