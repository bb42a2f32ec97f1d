"""Held-out predictions of the IRM from the draws of one run on all the data (PSIS).

Hiding a few cells G of a relation changes the posterior little, so instead of running new chains
with G hidden (:meth:`InfiniteRelational.predict_held_out`, one set of chains per case), the draws
(z_s, γ_s) of one run on all the data can be reweighted towards the posterior without G. With the
block parameters integrated out,

    p(z, γ | y₋G) ∝ p(z, γ | y) / p(y_G | z, γ, y₋G),

so the predictive of a hidden cell c is the importance-weighted average over the draws

    p(y_c = u | y₋G) = Σ_s w_s p(y_c = u | z_s, γ_s, y₋G),    w_s ∝ 1 / p(y_G | z_s, γ_s, y₋G),

exact as the draws grow (Gelfand, Dey & Chang 1992; one cell per case is leave-one-out). Both
factors are ratios of the collapsed likelihood (Kemp et al. 2006): with N the value counts of a
block over all observed cells and M those of G's cells in it,

    p(y_G | z, γ, y₋G) = Π_blocks B(γ + N_block) / B(γ + N_block - M_block),
    p(y_c = u | z, γ, y₋G) = (γ_u + N_bu - M_bu) / (Σγ + N_b - M_b)    (b the block of c).

The raw weights can have a heavy tail when a case's cells sway the posterior (a lone tie of an
individual), so they are Pareto-smoothed (PSIS, Vehtari, Simpson, Gelman, Yao & Gabry 2024, by
ArviZ's :func:`arviz.psislw`), whose tail shape k̂ says when the estimate cannot be trusted: above
min(1 - 1/log10 S, 0.7) for S draws. :meth:`IRMResult.predict_held_out` runs those cases again
with their own chains, as ArviZ's ``reloo`` does for PyMC and Stan models.

Two ways to run fewer cases again, or run them for less, were measured and not built (2026-12-06,
2 cores; ``InfiniteRelational(n_split_merge=10).sample(data, key=jax.random.key(0))`` and the
cases of ``held_out_cases(data, max_cases=200)``, each a pair's tie in both directions; prototype
scripts not kept):

- *Integrating out the cluster of one individual of the case* (Rao-Blackwellised weights): the
  draws reweighted by 1 / p(y_G | z₋ₑ, γ, y₋G), with z_e summed over its conditional given z₋ₑ,
  e the individual of the pair with fewer ties, so that the draws stand for p(z₋ₑ | y₋G). On the
  Florentine families (4 × 650 draws) 11 of 105 cases were above k̂ 0.7 instead of 18 (median
  k̂ 0.30 against 0.43), but 5 rose above it; on the 12 it brought below, its losses were as far
  from those of the cases' own chains as the plain estimate's (mean difference 0.075 and 0.071
  bits), and where both k̂ were below 0.3 the two estimates agreed within 0.007 bits on average.
  On the karate club (4 × 1,900 draws) 56 of 200 cases instead of 67 (largest k̂ 3.4 against 7.5).
  A sixth to two fifths fewer cases run again, for a Gibbs conditional of the individual per case
  and draw, and no better predictions.
- *Starting the cases' chains from draws of the run on all the data* instead of dispersed starts:
  the 18 Florentine cases above k̂ 0.7 took 23.6 s and 7,584 case-sweeps against 21.6 s and 7,268
  from dispersed starts. Their length is set by the bulk ESS the rule asks for (100 over the later
  half), not by the warm-up. (The two runs' mean losses over those 18 cases, 1.451 and 1.413 bits,
  show the Monte Carlo error of chains of that length.)
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from inference.jit import jit
from zoo.relational._infinite_state import block_counts, symmetrised
from zoo.relational.data import RelationalArrays, RelationalSchema


class PSISHeldOut(NamedTuple):
    """Held-out predictions of an IRM run's draws by Pareto-smoothed importance sampling.

    Attributes
    ----------
    probs : (n_cases, n_hidden, |r|) — each hidden cell's predictive given the cells not hidden
        in its case (NaN rows for padding)
    pareto_k : (n_cases,) — the Pareto shape k̂ of each case's importance weights
    reff : (n_cases,) — relative efficiency of the draws for each case (bulk ESS of its
        likelihood over the number of draws), which sets PSIS's tail length
    k_limit : float — min(1 - 1/log10 S, 0.7) for the S draws: above it a case's estimate is
        unreliable (Vehtari et al. 2024, §3)
    """

    probs: np.ndarray
    pareto_k: np.ndarray
    reff: np.ndarray
    k_limit: float

    @property
    def unreliable(self) -> np.ndarray:
        """Cases whose k̂ exceeds :attr:`k_limit` (a bool array)."""
        return ~(self.pareto_k <= self.k_limit)


def pareto_k_limit(n_draws: int) -> float:
    """min(1 - 1/log10 S, 0.7): the k̂ above which PSIS with S draws is unreliable (Vehtari et al. 2024)."""
    return float(min(1.0 - 1.0 / np.log10(n_draws), 0.7)) if n_draws > 10 else 0.0


def _log_gamma_ratio(top: Any, removed: Any) -> Any:
    """log Γ(top) - log Γ(top - removed), exact as log(top - 1) for the common ``removed == 1``."""
    return jnp.where(removed == 1, jnp.log(jnp.maximum(top - 1.0, 1e-300)),
                     gammaln(top) - gammaln(jnp.maximum(top - removed, 1e-300)))


def _case_blocks(assignments: tuple, cells: Any, schema: RelationalSchema, relation: int) -> tuple:
    domains = schema.relation_domains[relation]
    return tuple(assignments[domain][cells[..., position]] for position, domain in enumerate(domains))


def _one_draw(assignments: tuple, hyper: tuple, arrays: RelationalArrays, cells: Any, values: Any, valid: Any, *,
              schema: RelationalSchema, capacities: tuple, relation: int) -> tuple[Any, Any]:
    """For one draw: log p(y_G | z, γ, y₋G) per case (C,), and every hidden cell's predictive (C, m, |r|)."""
    counts = block_counts(assignments, arrays, schema, capacities)[relation]
    gamma = hyper[relation]
    dtype = gamma.dtype
    block = _case_blocks(assignments, cells, schema, relation)  # each (C, m)

    counted = valid
    if schema.is_symmetric(relation):  # each unordered pair once (the case hides a cell with its mirror)
        counted = valid & (cells[..., 0] <= cells[..., 1])

    def hidden_counts(case_block, case_values, case_counted):  # M of one case: its cells' counts per block
        once = jnp.zeros(counts.shape, jnp.int32).at[case_block + (case_values,)].add(case_counted.astype(jnp.int32))
        return symmetrised(once) if schema.is_symmetric(relation) else once

    removed = jax.vmap(hidden_counts)(block, values, counted)  # (C, K..., |r|)
    cases = jnp.arange(cells.shape[0])[:, None]
    full_row = counts[block].astype(dtype)  # (C, m, |r|): N of each hidden cell's block
    removed_row = removed[(cases,) + block].astype(dtype)  # (C, m, |r|): M of the same block, same case
    value_full = jnp.take_along_axis(full_row, values[..., None], axis=-1)[..., 0]
    value_removed = jnp.take_along_axis(removed_row, values[..., None], axis=-1)[..., 0]
    block_full, block_removed = full_row.sum(-1), removed_row.sum(-1)
    # Σ over blocks and values of log Γ ratios, one hidden cell at a time: each (block, value) group of
    # M cells contributes its ratio once, so every member adds 1/M of it (and 1/M_b of the block total's).
    per_value = _log_gamma_ratio(gamma[values] + value_full, value_removed) / jnp.maximum(value_removed, 1.0)
    per_block = _log_gamma_ratio(gamma.sum() + block_full, block_removed) / jnp.maximum(block_removed, 1.0)
    log_likelihood = jnp.sum(jnp.where(counted, per_value - per_block, 0.0), axis=1)
    mass = gamma + full_row - removed_row
    predictive = mass / mass.sum(-1, keepdims=True)
    return log_likelihood, predictive


_STATIC = ("schema", "capacities", "relation")


@partial(jit, static_argnames=_STATIC)
def _case_log_likelihoods(assignments, hyper, arrays, cells, values, valid, **static):
    """(S, C) log p(y_G | z_s, γ_s, y₋G) over the draws."""
    return jax.lax.map(lambda draw: _one_draw(*draw, arrays, cells, values, valid, **static)[0],
                       (assignments, hyper))


@partial(jit, static_argnames=_STATIC)
def _weighted_predictive(assignments, hyper, weights, arrays, cells, values, valid, **static):
    """(C, m, |r|) Σ_s w_sc p(y_c = u | z_s, γ_s, y₋G) for normalised weights (S, C)."""
    def add(total, draw):
        draw_assignments, draw_hyper, draw_weights = draw
        predictive = _one_draw(draw_assignments, draw_hyper, arrays, cells, values, valid, **static)[1]
        return total + draw_weights[:, None, None] * predictive, None

    n_values = static["schema"].n_values[static["relation"]]
    return jax.lax.scan(add, jnp.zeros(cells.shape[:2] + (n_values,), weights.dtype), (assignments, hyper, weights))[0]


def psis_held_out(assignments: dict, hyper: dict, arrays: RelationalArrays, hidden: np.ndarray, *,
                  schema: RelationalSchema, capacities: tuple, relation: int) -> PSISHeldOut:
    """PSIS predictions of the ``hidden`` cells (n_cases, m; -1 padding) of ``relation`` from draws.

    ``assignments`` per domain (chain, draw, n_D) and ``hyper`` per relation (chain, draw, |r|) are
    draws of the posterior given every observed cell of ``arrays``.
    """
    import arviz as az

    names = schema.domain_names
    n_chains, n_draws = np.shape(assignments[names[0]])[:2]
    flat_assignments = tuple(jnp.asarray(np.reshape(assignments[name], (n_chains * n_draws, -1)), jnp.int32)
                             for name in names)
    dtype = arrays.weights[relation].dtype
    flat_hyper = tuple(jnp.asarray(np.reshape(hyper[name], (n_chains * n_draws, -1)), dtype)
                       for name in schema.relation_names)
    valid = hidden >= 0
    positions = np.where(valid, hidden, 0)
    cells = jnp.asarray(np.asarray(arrays.entries[relation])[positions], jnp.int32)
    values = jnp.asarray(np.asarray(arrays.values[relation])[positions], jnp.int32)
    static = dict(schema=schema, capacities=tuple(capacities), relation=relation)
    log_likelihood = np.asarray(_case_log_likelihoods(flat_assignments, flat_hyper, arrays, cells, values,
                                                      jnp.asarray(valid), **static), np.float64).T  # (C, S)
    likelihood = np.exp(log_likelihood - log_likelihood.max(axis=1, keepdims=True))
    by_chain = likelihood.reshape(-1, n_chains, n_draws)
    reff = np.array([_relative_efficiency(case) for case in by_chain])
    smoothed = np.empty_like(log_likelihood)
    pareto_k = np.empty(log_likelihood.shape[0])
    with np.errstate(over="ignore"):  # the tail fit's weights of negligible candidates overflow to 0, harmlessly
        for case in range(log_likelihood.shape[0]):
            smoothed[case], pareto_k[case] = az.psislw(-log_likelihood[case], reff=reff[case])
    weights = np.exp(smoothed - smoothed.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    probs = np.asarray(_weighted_predictive(flat_assignments, flat_hyper, jnp.asarray(weights.T, dtype), arrays,
                                            cells, values, jnp.asarray(valid), **static), np.float64)
    probs[~valid] = np.nan
    return PSISHeldOut(probs, pareto_k, reff, pareto_k_limit(n_chains * n_draws))


def _relative_efficiency(likelihood: np.ndarray) -> float:
    """Bulk ESS of a case's likelihood over the draws (chain, draw), in (0, 1]; 1 when it is constant."""
    import arviz as az

    if np.ptp(likelihood) == 0 or likelihood.shape[1] < 4:
        return 1.0
    ess = float(az.ess(likelihood, method="mean"))
    return float(np.clip(ess / likelihood.size, 1e-3, 1.0)) if np.isfinite(ess) else 1.0
