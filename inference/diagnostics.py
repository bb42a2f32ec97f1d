"""Dirichlet-process chains as ArviZ ``InferenceData``, with label-invariant diagnostics.

Cluster labels are exchangeable — relabelling the clusters of a draw gives an equally probable
draw — so R-hat and ESS of the labels themselves mean nothing. Convergence is judged on
label-invariant quantities: the number of clusters K, the concentration α, the log joint
density (DESIGN.md, "Dimensions and ArviZ") and the entropy of the cluster sizes
(:func:`partition_entropy`), which tells apart chains that agree on K and on the log joint but cut
the data differently; the partition itself is summarised by the posterior co-clustering matrix
and a point estimate (:mod:`inference.partitions`).

Layout of :func:`to_inference_data`:

* ``posterior``: ``assignments`` (chain, draw, points), ``alpha`` (chain, draw);
* ``sample_stats``: ``n_clusters``, ``log_joint`` and ``partition_entropy`` (chain, draw);
* attributes of ``posterior``: warm-up sweeps, thinning, whether the run completed and why it
  stopped (``stopped_by``, :func:`stopped_by_attribute`), seconds, and :func:`provenance` (library
  versions, JAX's backend, float64 or not, the CPU compiled for).

Whether chains mix is judged by :func:`mixing_table`, which labels every scalar quantity with a
status word (see :data:`MIXING_STATUSES`), by :func:`mixing_verdict`, which turns that table into
one sentence, and by :func:`warn_if_not_mixing`, which issues a :class:`MixingWarning`. The
thresholds default to those of Vehtari et al. (2021): rank-normalised split R-hat at most 1.01,
and bulk and tail effective sample sizes of at least 400 (100 per chain for four chains).

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021). Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC. *Bayesian
Analysis* 16(2), 667-718.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import arviz as az
import jax
import numpy as np
import pandas as pd
import xarray as xr
from scipy import special, stats

from inference.chains import STOPPED_BY, ChainResult
from inference.partitions import co_clustering, point_partition
from inference.provenance import provenance
from inference._validation import check_bool

__all__ = [
    "to_inference_data",
    "stopped_by_attribute",
    "from_dict_in_order",
    "rank_split_rhat",
    "provenance",
    "label_invariant",
    "without_fixed_concentrations",
    "summary",
    "mixing_table",
    "mixing_verdict",
    "warn_if_not_mixing",
    "MixingWarning",
    "MIXING_STATUSES",
    "PASSING_STATUSES",
    "mixes",
    "mixes_to_stop",
    "scalars_per_value",
    "NOT_MIXING_STATUSES",
    "RHAT_MAX",
    "RHAT_APART",
    "HEIGHT_ESS_MIN",
    "equal_height_advice",
    "run_longer",
    "EQUAL_HEIGHT_MEASURED",
    "ESS_MIN",
    "MIN_DRAWS",
    "co_clustering_matrix",
    "point_estimate",
    "partition_entropy",
]

LABEL_INVARIANT = ("n_clusters", "alpha", "log_joint", "partition_entropy")

#: Largest rank-normalised split R-hat of chains that mix (Vehtari et al. 2021, section 4.1).
RHAT_MAX = 1.01
#: Smallest bulk and tail effective sample size of chains that mix (Vehtari et al. 2021, 100 per chain for 4 chains).
ESS_MIN = 400
#: Fewest draws per chain with which split R-hat and ESS are computed (two per half chain, as in ArviZ).
MIN_DRAWS = 4

#: The status words of :func:`mixing_table` and what they mean. "ok" and "constant" pass; the
#: others make :func:`mixing_verdict` say the chains do not mix (or cannot be judged) and
#: :func:`warn_if_not_mixing` issue a :class:`MixingWarning`.
MIXING_STATUSES = {
    "ok": "R-hat <= rhat_max and bulk and tail ESS >= ess_min",
    "constant": "the same value in every draw of every chain (e.g. a fixed α); R-hat and ESS not computed",
    "chains disagree": "constant within every chain, but not the same in all chains: no chain moves; "
                       "R-hat is inf and ESS 0",
    "stuck": "constant within some chains while others move, and R-hat or ESS fails",
    "few effective draws": "R-hat <= rhat_max, but bulk or tail ESS < ess_min: too few effective draws to rely "
                           "on that R-hat (nor on the quantity's mean)",
    "not mixing": "R-hat > rhat_max",
    "too few draws": f"fewer than {MIN_DRAWS} draws per chain: nothing can be judged",
    "not finite": "some draws are NaN or infinite: nothing can be judged",
}
#: The statuses that pass: :func:`warn_if_not_mixing` is silent when every quantity has one.
PASSING_STATUSES = ("ok", "constant")
#: The statuses of quantities whose chains do not mix: :func:`mixing_verdict` then says "do NOT mix"
#: (the others that fail, "few effective draws", "too few draws" and "not finite", leave it undecided).
NOT_MIXING_STATUSES = ("chains disagree", "stuck", "not mixing")


class MixingWarning(UserWarning):
    """Chains of a label-invariant quantity do not mix (see :func:`mixing_table`)."""


def no_draws_message(result: ChainResult, continue_with: str | None = None) -> str:
    """What to say of chains stopped before their first draw (Ctrl-C, a time budget or a memory stop
    during warm-up): there is nothing to summarise, but the warm-up is not lost. ``continue_with``
    names the call that continues it (default: :func:`inference.chains.sample_chains`'s)."""
    continue_with = continue_with or ("inference.chains.sample_chains(key, step, result.final_state, data, "
                                      "first_sweep=result.next_sweep)")
    why = {"interrupted": " (Ctrl-C)", "time_budget": " (the time budget ran out)",
           "capacity": " (memory could not hold the grown capacity)"}.get(result.stopped_by, "")
    return (f"the chains stopped{why} after {result.next_sweep} sweeps, before their first draw: there are no draws "
            f"to summarise, but the warm-up is kept in result.final_state; continue it with {continue_with}")


def _check_result(result: Any) -> ChainResult:
    if not isinstance(result, ChainResult):
        raise TypeError(f"result: expected a ChainResult, got {type(result).__name__}")
    missing = {"assignments", "alpha", "n_clusters", "log_joint"} - set(result.samples)
    if missing:
        raise ValueError(f"result: has no draws of {sorted(missing)}"
                         + (f"; {no_draws_message(result)}" if not result.samples else ""))
    return result


def partition_entropy(assignments: Any) -> np.ndarray:
    """Entropy of the cluster sizes of each draw: -Σ_c (n_c / N) log(n_c / N), in nats.

    Label-invariant (relabelling the clusters permutes the sizes) but, unlike K, it depends on how
    the points are shared out: chains that hold the same number of clusters in different cuts of
    the data (measured on scikit-learn's digits, DM05's CDP: four chains at K 40-43 whose log
    joints agree within 13 nats have entropies 3.22-3.30 with within-chain sds of 0.01-0.02) have
    different entropies. 0 for one cluster, log N for N singletons.

    Parameters
    ----------
    assignments : int array (..., points)
        Cluster labels (any non-negative integers) of each draw, e.g. (chain, draw, points).

    Returns
    -------
    numpy.ndarray
        float64 entropies with the leading shape of ``assignments``.
    """
    labels = np.asarray(assignments)
    if labels.ndim < 1 or labels.shape[-1] == 0 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"assignments: expected integer labels of shape (..., points), got {labels.dtype} "
                         f"{labels.shape}")
    if labels.min() < 0:
        raise ValueError("assignments: cluster labels must be non-negative")
    lead, n_points = labels.shape[:-1], labels.shape[-1]
    rows = labels.reshape(-1, n_points)
    width = int(rows.max()) + 1
    entropy = np.empty(rows.shape[0])
    # Blocks of draws, so that the int64 copy stays near 10^7 labels (a 100,000-point fit keeps
    # thousands of draws).
    block = max(1, 10_000_000 // max(n_points, width))
    for first in range(0, rows.shape[0], block):
        part = rows[first:first + block].astype(np.int64)
        counts = np.bincount((part + width * np.arange(part.shape[0])[:, None]).ravel(),
                             minlength=part.shape[0] * width).reshape(part.shape[0], width)
        # entr(p) = -p log p, 0 at p = 0; the maximum turns one cluster's -0.0 into 0.0.
        entropy[first:first + block] = np.maximum(special.entr(counts / n_points).sum(axis=1), 0.0)
    return entropy.reshape(lead)


def to_inference_data(result: ChainResult, *, point_names: Sequence[Any] | None = None) -> az.InferenceData:
    """Convert Dirichlet-process chains to ``arviz.InferenceData``.

    Parameters
    ----------
    result : ChainResult
        Output of :func:`inference.chains.sample_chains` recorded with
        :func:`inference.chains.record_gibbs`.
    point_names : sequence, optional
        Coordinates of the ``points`` dimension (default 0..N-1).

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior`` and ``sample_stats`` (see the module docstring). Its
        :func:`provenance` is the one ``result`` took when its chains were sampled
        (``ChainResult.provenance``), wherever it is converted; a ``ChainResult`` without one
        (built by hand) gets this process's.

    Raises
    ------
    ValueError
        If the result holds no draws, or ``point_names`` has the wrong length.
    """
    result = _check_result(result)
    assignments = np.asarray(result.samples["assignments"])
    n_points = assignments.shape[-1]
    if point_names is None:
        point_names = np.arange(n_points)
    elif len(point_names) != n_points:
        raise ValueError(f"point_names: expected {n_points} names, got {len(point_names)}")
    idata = from_dict_in_order(
        posterior={"assignments": assignments, "alpha": np.asarray(result.samples["alpha"])},
        sample_stats={
            "n_clusters": np.asarray(result.samples["n_clusters"]),
            "log_joint": np.asarray(result.samples["log_joint"]),
            "partition_entropy": partition_entropy(assignments),
        },
        coords={"points": list(point_names)},
        dims={"assignments": ["points"]},
    )
    idata.posterior.attrs.update(
        n_warmup=result.n_warmup,
        thin=result.thin,
        completed=int(result.completed),
        sampling_seconds=result.seconds,
        **({} if result.stopped_by is None else {"stopped_by": result.stopped_by}),
        **(result.provenance or provenance()),
    )
    return idata


def stopped_by_attribute(attrs: Any) -> str | None:
    """Why saved chains stopped, from the ``stopped_by`` attribute of their ``posterior``
    (:attr:`inference.chains.ChainResult.stopped_by`, which :func:`to_inference_data` and the fits'
    ``idata`` keep); None where the file has none (written before it was kept, or by hand).

    Raises
    ------
    ValueError
        If the attribute is not one of :data:`inference.chains.STOPPED_BY`.
    """
    value = attrs.get("stopped_by")
    if value is None:
        return None
    if str(value) not in STOPPED_BY:
        raise ValueError(f"idata: the posterior's attribute stopped_by is {str(value)!r:.40}, not one of {STOPPED_BY}")
    return str(value)


def _check_idata(idata: Any) -> az.InferenceData:
    if not isinstance(idata, az.InferenceData):
        raise TypeError(f"idata: expected an arviz.InferenceData, got {type(idata).__name__}")
    if "posterior" not in idata.groups() or "assignments" not in idata.posterior:
        raise ValueError("idata: needs a posterior group with 'assignments' (see to_inference_data)")
    return idata


def label_invariant(idata: az.InferenceData, *, keep_fixed: bool = False) -> az.InferenceData:
    """The label-invariant quantities K, α, log joint and partition entropy in one ``posterior`` group.

    ArviZ's plots and diagnostics read the ``posterior`` group, so this view is what to pass to
    ``az.plot_trace``, ``az.plot_rank``, ``az.rhat``, ``az.ess`` or ``az.summary`` (given the
    whole ``InferenceData``, they would judge the ``assignments``, whose labels are exchangeable:
    their R-hat says nothing of mixing).

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`, or a supervised DP fit's ``idata``.
    keep_fixed : bool
        Keep a concentration held fixed (see below), as :func:`summary` does to list it.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` with variables ``n_clusters``, ``alpha``, ``log_joint`` and
        ``partition_entropy`` (computed from ``assignments`` when ``sample_stats`` lacks it, as in
        an ``InferenceData`` saved before it was recorded), then every other numeric scalar per
        draw of ``sample_stats`` and ``posterior`` (a supervised DP fit's ``n_types`` and
        ``alpha_types``), with the attributes of ``idata.posterior`` (warm-up, thinning,
        provenance). A concentration held fixed (``alpha`` or ``alpha_types`` with one value in
        every draw of every chain) is left out: it was not sampled, its R-hat is undefined, and
        ``az.summary`` and ``az.rhat`` would warn of a division by zero for it. :func:`summary`
        still lists it, as ``constant``.
    """
    idata = _check_idata(idata)
    keep_fixed = check_bool("keep_fixed", keep_fixed)
    stats_group = idata.sample_stats
    if "partition_entropy" in stats_group:
        entropy = stats_group["partition_entropy"]
    else:
        entropy = xr.DataArray(partition_entropy(idata.posterior["assignments"].values), dims=("chain", "draw"),
                               coords={"chain": stats_group["chain"], "draw": stats_group["draw"]})
    variables = {
        "n_clusters": stats_group["n_clusters"],
        "alpha": idata.posterior["alpha"],
        "log_joint": stats_group["log_joint"],
        "partition_entropy": entropy,
    }
    for group in (stats_group, idata.posterior):
        variables |= {name: array for name, array in group.data_vars.items()
                      if name not in variables and set(array.dims) == {"chain", "draw"}
                      and np.issubdtype(array.dtype, np.number)}
    return az.InferenceData(posterior=xr.Dataset(variables if keep_fixed else without_fixed_concentrations(variables),
                                                 attrs=dict(idata.posterior.attrs)))


def without_fixed_concentrations(variables: dict) -> dict:
    """``variables`` (name: array of draws) without ``alpha`` and ``alpha_types`` where they hold one
    value in every draw of every chain: a concentration held fixed, not sampled."""
    def fixed(values) -> bool:
        values = np.asarray(values)
        return values.size > 0 and bool(np.all(values == values.flat[0]))

    return {name: array for name, array in variables.items()
            if not (name in ("alpha", "alpha_types") and fixed(array.values))}


def summary(
    idata: az.InferenceData, *, rhat_max: float = RHAT_MAX, ess_min: float = ESS_MIN, warn: bool = True
) -> pd.DataFrame:
    """Mean, sd, ESS, R-hat and mixing status of K, α, the log joint and the partition entropy, with a warning.

    The table of :func:`mixing_table` for the label-invariant view (:func:`label_invariant`). A
    quantity that is constant in every draw (α when it is not resampled) keeps its row with status
    ``"constant"`` and no R-hat or ESS.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.
    rhat_max, ess_min : float
        Thresholds, see :func:`mixing_table` (defaults from Vehtari et al. 2021).
    warn : bool
        Issue a :class:`MixingWarning` naming the quantities that do not mix.

    Returns
    -------
    pandas.DataFrame
        One row per label-invariant quantity (``n_clusters``, ``alpha``, ``log_joint``,
        ``partition_entropy``); columns ``mean``, ``sd``, ``ess_bulk``, ``ess_tail``, ``r_hat``,
        ``status``.

    Warns
    -----
    MixingWarning
        If ``warn`` and some quantity does not mix (see :func:`warn_if_not_mixing`).
    """
    table = mixing_table(label_invariant(idata, keep_fixed=True), rhat_max=rhat_max, ess_min=ess_min)
    if warn:
        warn_if_not_mixing(table, stacklevel=2)
    return table


def scalars_per_value(name: str, array: xr.DataArray) -> dict[str, xr.DataArray]:
    """The (chain, draw) scalars of a variable over one more dimension, one per value of it, named
    ``name[v]`` (an IRM's ``hyper_<relation>`` over the relation's values), for the mixing table."""
    (extra,) = [dim for dim in array.dims if dim not in ("chain", "draw")]
    return {f"{name}[{value}]": array.isel({extra: value}, drop=True) for value in range(array.sizes[extra])}


def from_dict_in_order(**groups: Any) -> az.InferenceData:
    """``az.from_dict(**groups)`` with each group's variables in the order of its dict.

    ArviZ before 0.23 sorted them by name (its dm-tree flattening), so the mixing tables and the
    report's verdicts listed ``log_joint`` before ``n_clusters`` there and after it here. Keyword
    arguments that are not groups (``coords``, ``dims``, ...) pass through. The arrays are
    (chain, draw, ...) by construction, so ArviZ's guess that more chains than draws means
    transposed arrays (a ``UserWarning`` for a run stopped after few draws) is not shown.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="More chains .* than draws", category=UserWarning)
        idata = az.from_dict(**groups)
    return az.InferenceData(**{group: idata[group][list(groups[group])] for group in idata.groups()})


def _scalar_dataset(posterior: Any, var_names: Sequence[str] | None) -> xr.Dataset:
    if isinstance(posterior, az.InferenceData):
        if "posterior" not in posterior.groups():
            raise ValueError("posterior: the InferenceData has no posterior group")
        posterior = posterior.posterior
    if not isinstance(posterior, xr.Dataset):
        raise TypeError(
            f"posterior: expected an xarray.Dataset or an arviz.InferenceData, got {type(posterior).__name__}"
        )
    if var_names is None:
        var_names = list(posterior.data_vars)
    elif isinstance(var_names, str) or not all(isinstance(name, str) for name in var_names):
        raise TypeError("var_names: expected a sequence of variable names")
    missing = [name for name in var_names if name not in posterior.data_vars]
    if missing:
        raise ValueError(f"var_names: no variables {missing} in {sorted(map(str, posterior.data_vars))}")
    for name in var_names:
        array = posterior[name]
        if set(array.dims) != {"chain", "draw"}:
            raise ValueError(
                f"posterior: variable {name!r} has dims {array.dims}; expected the scalar dims ('chain', 'draw') "
                "(cluster labels are not label-invariant: see label_invariant)"
            )
        if not (np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)):
            raise ValueError(f"posterior: variable {name!r} is not numeric (dtype {array.dtype})")
    return posterior[list(var_names)]


def rank_split_rhat(values: np.ndarray) -> float:
    """Rank-normalised split R-hat of ``values`` (chains, draws), max of bulk and folded (Vehtari et
    al. 2021, eqs. 4-5).

    The same computation as ``az.rhat(values, method="rank")``, but also for a single chain, whose
    two halves are then compared (ArviZ returns NaN for fewer than two chains). ``values`` needs at
    least 4 draws per chain (two halves of two) and no NaN; infinite values have ranks like any other.
    """
    if values is None or isinstance(values, (str, bytes)):
        raise TypeError(f"values: expected an array of numbers (chains, draws), got {type(values).__name__}")
    try:
        values = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"values: expected an array of numbers (chains, draws) ({error})") from None
    if values.ndim != 2 or values.shape[1] < 4:
        raise ValueError(f"values: expected shape (chains, draws) with at least 4 draws, got shape {values.shape}")
    if np.isnan(values).any():
        raise ValueError("values: contains NaN")
    half = values.shape[1] // 2
    split = np.concatenate([values[:, :half], values[:, values.shape[1] - half:]], axis=0)

    def rhat(array: np.ndarray) -> float:
        ranks = stats.rankdata(array, method="average").reshape(array.shape)
        z = stats.norm.ppf((ranks - 3 / 8) / (array.size + 1 / 4))
        n_draws = z.shape[1]
        between = n_draws * np.var(z.mean(axis=1), ddof=1)
        within = np.mean(np.var(z, axis=1, ddof=1))
        return float(np.sqrt((between / within + n_draws - 1) / n_draws))

    return max(rhat(split), rhat(np.abs(split - np.median(split))))


def _format_value(value: float) -> str:
    value = float(value)
    return f"{value:.0f}" if value.is_integer() else f"{value:.4g}"


def mixing_table(
    posterior: xr.Dataset | az.InferenceData,
    *,
    rhat_max: float = RHAT_MAX,
    ess_min: float = ESS_MIN,
    var_names: Sequence[str] | None = None,
) -> pd.DataFrame:
    """R-hat, ESS and a mixing status for each scalar quantity of some chains.

    Rank-normalised split R-hat (``az.rhat``) and bulk and tail effective sample sizes
    (``az.ess``) of Vehtari et al. (2021), and one status word per quantity
    (:data:`MIXING_STATUSES`), checked in this order:

    * ``"too few draws"``: fewer than :data:`MIN_DRAWS` draws per chain;
    * ``"not finite"``: some draw is NaN or infinite;
    * ``"constant"``: the same value in every draw of every chain (e.g. a fixed α). The row is
      kept; ``r_hat``, ``ess_bulk`` and ``ess_tail`` are NaN, since they are not defined;
    * ``"chains disagree"``: (two or more chains) constant within every chain, but not the same
      in all chains: no chain ever moved, so the draws say nothing about the posterior beyond
      where each chain was started. ``r_hat`` is ``inf`` (the within-chain variance is zero and
      the between-chain variance is not), and ``ess_bulk`` and ``ess_tail`` are 0 — where
      ``az.rhat`` gives NaN or values near 1e8 and ``az.ess`` about the number of chains
      (the same ``inf`` and 0 are reported whenever every half chain is constant);
    * ``"ok"``: ``r_hat <= rhat_max``, ``ess_bulk >= ess_min`` and ``ess_tail >= ess_min``;
    * ``"stuck"``: otherwise, if some chains are constant while others move;
    * ``"few effective draws"``: otherwise, if ``r_hat <= rhat_max`` (so bulk or tail ESS is
      below ``ess_min``): the R-hat passes, but Vehtari et al. (2021) ask for ``ess_min``
      effective draws before it is relied on, so the chains are not yet known to mix. With
      fewer than ``ess_min`` draws in all no ESS can reach it (unless the draws are
      anti-correlated);
    * ``"not mixing"``: otherwise (``r_hat > rhat_max``).

    With a single chain the split R-hat compares its two halves (ArviZ itself needs two chains);
    "chains disagree" and "stuck" need two chains, and a single constant chain is ``"constant"``.

    Parameters
    ----------
    posterior : xarray.Dataset or arviz.InferenceData
        Scalar label-invariant quantities with dims (chain, draw), e.g. ``n_clusters``, ``alpha``,
        ``log_joint``; of an ``InferenceData`` its ``posterior`` group is read (see
        :func:`label_invariant`).
    rhat_max : float
        Largest R-hat of chains that mix (default 1.01, Vehtari et al. 2021).
    ess_min : float
        Smallest bulk and tail ESS of chains that mix (default 400, Vehtari et al. 2021).
    var_names : sequence of str, optional
        Quantities to assess, in this order (default: every variable).

    Returns
    -------
    pandas.DataFrame
        One row per quantity, indexed by name, with columns ``mean``, ``sd`` (over all chains and
        draws, ``ddof=1``), ``ess_bulk``, ``ess_tail``, ``r_hat`` and ``status``. ``attrs`` holds
        ``n_chains``, ``n_draws``, ``rhat_max``, ``ess_min``, ``chain_constants`` (for each
        quantity with a chain that never moves: per chain, its constant value or None),
        ``means_by_chain`` (with two or more chains, each finite quantity's mean in each chain) and
        ``log_joint_by_chain`` (its entry for ``log_joint``, or None), which
        :func:`mixing_verdict` reads.

    Raises
    ------
    TypeError
        If ``posterior`` is neither a Dataset nor an InferenceData, or ``var_names`` is not a
        sequence of names.
    ValueError
        If a variable is missing or not numeric with dims (chain, draw), or a threshold is not
        positive.
    """
    dataset = _scalar_dataset(posterior, var_names)
    for name, value in (("rhat_max", rhat_max), ("ess_min", ess_min)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value > 0:
            raise ValueError(f"{name}: expected a positive number, got {value!r}")
    n_chains = int(dataset.sizes.get("chain", 0))
    n_draws = int(dataset.sizes.get("draw", 0))
    rows: dict[str, dict[str, Any]] = {}
    chain_constants: dict[str, list[float | None]] = {}
    for name in dataset.data_vars:
        values = np.asarray(dataset[name].transpose("chain", "draw").values, dtype=np.float64)
        row: dict[str, Any] = {"mean": np.nan, "sd": np.nan, "ess_bulk": np.nan, "ess_tail": np.nan,
                               "r_hat": np.nan}
        finite = bool(np.isfinite(values).all())
        if values.size:
            with np.errstate(all="ignore"):
                row["mean"] = float(np.mean(values))
                row["sd"] = float(np.std(values, ddof=1)) if values.size > 1 else np.nan
        constant_chains = [finite and bool(np.all(chain == chain[0])) for chain in values] if n_draws else []
        if n_draws < MIN_DRAWS:
            status = "too few draws"
        elif not finite:
            status = "not finite"
        elif np.all(values == values.flat[0]):
            status = "constant"
        elif n_chains > 1 and all(constant_chains):
            status = "chains disagree"
            row.update(r_hat=np.inf, ess_bulk=0.0, ess_tail=0.0)
        else:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                r_hat = az.rhat(values, method="rank") if n_chains > 1 else rank_split_rhat(values)
                ess_bulk = az.ess(values, method="bulk")
                ess_tail = az.ess(values, method="tail")
            half = n_draws // 2
            halves = np.concatenate([values[:, :half], values[:, n_draws - half:]], axis=0)
            if np.all(halves == halves[:, :1]) or not np.isfinite(r_hat):
                # Every half chain is constant: the within-chain variance is zero, so R-hat is
                # infinite (ArviZ gives NaN, or 1e8 and more from rounding) and there is no information.
                r_hat, ess_bulk, ess_tail = np.inf, 0.0, 0.0
            row.update(
                r_hat=float(r_hat),
                ess_bulk=float(ess_bulk) if np.isfinite(ess_bulk) else 0.0,
                ess_tail=float(ess_tail) if np.isfinite(ess_tail) else 0.0,
            )
            if row["r_hat"] <= rhat_max and row["ess_bulk"] >= ess_min and row["ess_tail"] >= ess_min:
                status = "ok"
            elif n_chains > 1 and any(constant_chains):
                status = "stuck"
            elif row["r_hat"] <= rhat_max:
                status = "few effective draws"
            else:
                status = "not mixing"
        if status in ("chains disagree", "stuck"):
            chain_constants[str(name)] = [float(chain[0]) if flag else None
                                          for chain, flag in zip(values, constant_chains)]
        row["status"] = status
        rows[str(name)] = row
    table = pd.DataFrame.from_dict(rows, orient="index",
                                   columns=["mean", "sd", "ess_bulk", "ess_tail", "r_hat", "status"])
    table = table.astype({column: np.float64 for column in ("mean", "sd", "ess_bulk", "ess_tail", "r_hat")})
    means_by_chain: dict[str, list[float]] = {}
    if n_chains > 1 and n_draws:
        for name in dataset.data_vars:
            by_chain = np.asarray(dataset[name].transpose("chain", "draw").values, np.float64).mean(axis=1)
            if np.isfinite(by_chain).all():
                means_by_chain[str(name)] = [float(value) for value in by_chain]
    table.attrs.update(n_chains=n_chains, n_draws=n_draws, rhat_max=float(rhat_max), ess_min=float(ess_min),
                       chain_constants=chain_constants, means_by_chain=means_by_chain,
                       log_joint_by_chain=means_by_chain.get("log_joint"))
    return table


#: R-hat above which the chains clearly hold different partitions (the "equal height" advice of
#: :func:`mixing_verdict`); between ``rhat_max`` and this, running longer is the advice. The same
#: yardstick tells whether they agree on the log joint (:func:`equal_height_advice`).
RHAT_APART = 1.1
#: Bulk ESS of the log joint below which :func:`equal_height_advice` does not take the chains'
#: agreement on it as evidence (a quarter of :data:`ESS_MIN`): with fewer effective draws its R-hat and
#: the chains' means are too rough to say the chains reach one height. The chains of
#: ``notebooks/dp_mixture_digits.ipynb`` (4 × 2,000 draws: log joint R-hat 1.024, bulk ESS 120; K's
#: 2.56 and 5) pass; those of the standardised iris data after 25 draws each (R-hat 1.179, bulk ESS 22),
#: which, continued, mixed at 565 draws per chain, do not.
HEIGHT_ESS_MIN = 100


def _log_joint_gap(table: pd.DataFrame) -> tuple[np.ndarray, float, float] | None:
    """(mean log joint by chain, their range, the log joint's sd) when two or more chains have them."""
    by_chain = table.attrs.get("log_joint_by_chain")
    if not by_chain or "log_joint" not in table.index:
        return None
    by_chain = np.asarray(by_chain)
    spread = float(table.loc["log_joint", "sd"]) if np.isfinite(table.loc["log_joint", "sd"]) else 0.0
    return by_chain, float(by_chain.max() - by_chain.min()), spread


def _chain_means_differ(table: pd.DataFrame, name: str) -> bool:
    """Whether the chains' means of ``name`` span more than half its sd over all draws (True when
    the table keeps no means by chain)."""
    means = table.attrs.get("means_by_chain", {}).get(name)
    if not means:
        return True
    sd = float(table.loc[name, "sd"])
    return float(np.ptp(means)) > 0.5 * sd if np.isfinite(sd) else True


def _chain_list(chains: list[int]) -> str:
    """'chain 1', 'chains 0 and 2', 'chains 0, 2 and 3'."""
    if len(chains) == 1:
        return f"chain {chains[0]}"
    return f"chains {', '.join(str(chain) for chain in chains[:-1])} and {chains[-1]}"


def _separate_modes(table: pd.DataFrame) -> str:
    """A sentence on chains whose mean log joint differ by more than their own spread, or ''.

    The chains within that distance (at least 10 nats) of the best form its mode; when two or more
    do, within 10 nats of each other, the sentence says that they agree and which chains sit below
    them (one chain lagging in a lower mode reads otherwise as if no chain had found the best one).
    """
    gap = _log_joint_gap(table)
    if gap is None or table.loc["log_joint", "status"] in PASSING_STATUSES:
        return ""
    by_chain, gap, spread = gap
    if gap < 10.0 or gap < spread:
        return ""
    best = int(np.argmax(by_chain))
    sentence = f" The chains sit in separate modes: mean log joint by chain {', '.join(f'{v:.0f}' for v in by_chain)}; "
    top = [chain for chain, value in enumerate(by_chain) if by_chain[best] - value < max(10.0, spread)]
    within = max(float(by_chain[top].max() - by_chain[top].min()), 1.0)
    if len(top) == 1 or within >= 10.0:
        return sentence + f"chain {best} is {gap:.0f} nats above the lowest, so the others have not found its mode."
    below = [chain for chain in range(len(by_chain)) if chain not in top]
    depths = [f"{by_chain[top].mean() - by_chain[chain]:.0f}" for chain in below]
    return sentence + (f"{_chain_list(top)} agree within {within:.0f} nat{'s' if within >= 1.5 else ''}, and "
                       f"{_chain_list(below)} {'sits' if len(below) == 1 else 'sit'} {' and '.join(depths)} nats "
                       f"below them, so {'it has' if len(below) == 1 else 'they have'} not found their mode.")


#: What :func:`equal_height_advice` says was measured, unless a sampler gives its own.
EQUAL_HEIGHT_MEASURED = (
    "Where this was measured (benchmarks/README.md: the digits, scikit-learn's breast-cancer data), neither more "
    "sweeps nor more split-merge moves nor the sub-cluster sampler joined such chains."
)


def equal_height_advice(table: pd.DataFrame, *, measured: str = EQUAL_HEIGHT_MEASURED) -> str:
    """The advice for chains that agree on the log joint but hold different partitions, or ''.

    That is: two or more chains whose mean log joints lie within 10 nats or within the log
    joint's sd (no "separate modes" sentence in :func:`mixing_verdict`), while the number of
    clusters or the entropy of their sizes moves in every chain but has R-hat above
    :data:`RHAT_APART`. On the digits and on scikit-learn's breast-cancer data such chains stayed
    apart in runs eight times longer, with five times the split–merge moves, with restricted-Gibbs
    launch states and with the sub-cluster sampler (``benchmarks/README.md``), so the advice to run
    longer would mislead.

    Short runs look the same (each chain still near its start, the log joint's sd wide), and for
    them running longer is the advice, so the log joint itself must bear the claim out; the advice
    is given only when also

    * the log joint's R-hat is at most :data:`RHAT_APART`: the chains agree on the height by the
      yardstick by which they differ in K;
    * its bulk ESS is at least :data:`HEIGHT_ESS_MIN`: enough effective draws for that R-hat and
      the chains' mean log joints to mean something;
    * the chains hold at least the table's ``ess_min`` draws in all: in a shorter run no quantity
      can reach the ESS the table asks for, so that K has not yet moved between the chains says
      nothing of whether more sweeps would move it.

    The standardised iris data after 25 draws per chain (``normal_gamma(4)``, key 4: log joint
    R-hat 1.179, bulk ESS 22; K's R-hat 1.20, chain means 3.2–3.7) met the first conditions but not
    these, and, continued, mixed at 565 draws per chain; the digits' chains of
    ``notebooks/dp_mixture_digits.ipynb`` (4 × 2,000 draws, log joint R-hat 1.024 and bulk ESS 120)
    and SCDP-1's on FEBRL's records (R-hat 1.011, bulk ESS 1,267) meet them.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`mixing_table` (its ``means_by_chain`` and ``log_joint_by_chain`` attributes).
    measured : str
        The sentence saying what was tried on such chains and did not join them (default
        :data:`EQUAL_HEIGHT_MEASURED`, for :class:`zoo.dirichlet.DPMixture`'s samplers); a sampler
        with other moves gives its own, as :class:`zoo.dirichlet.supervised.SupervisedDP` does.
    """
    table = _check_table(table)
    if not isinstance(measured, str):
        raise TypeError(f"measured: expected a str, got {type(measured).__name__}")
    gap = _log_joint_gap(table)  # None unless two or more chains have finite mean log joints
    if gap is None:
        return ""
    by_chain, gap, spread = gap
    if gap >= 10.0 and gap >= spread:
        return ""
    # Only chains that move ("not mixing"): chains that never moved ("chains disagree", "stuck") say
    # nothing of what a move would find, and longer runs with more moves are still the advice.
    # And only where the chains' means differ: a split R-hat above RHAT_APART with chains of one mean
    # is a drift within each chain (short runs), for which running longer is the advice.
    apart = [name for name in ("n_clusters", "partition_entropy")
             if name in table.index and table.loc[name, "status"] == "not mixing"
             and float(table.loc[name, "r_hat"]) > RHAT_APART and _chain_means_differ(table, name)]
    if not apart or not _log_joint_bears_out(table):
        return ""
    means = table.attrs.get("means_by_chain", {})
    k_by_chain = means.get("n_clusters")
    k_text = (" (mean number of clusters by chain " + ", ".join(f"{value:.1f}" for value in k_by_chain) + ")"
              if k_by_chain else "")
    what = {"n_clusters": "the number of clusters", "partition_entropy": "the sizes of the clusters"}
    heights = ", ".join(f"{value:.0f}" for value in by_chain)
    return (f"The chains reach the same height (mean log joint by chain {heights}: {gap:.0f} nats apart, "
            f"sd {spread:.0f}) but differ in {' and in '.join(what[name] for name in apart)}: they hold "
            "different partitions of about equal posterior probability, which a split or merge of one cluster "
            f"seldom connects. {measured} Read the spread between chains{k_text} as part of the posterior's "
            "uncertainty, run more chains from dispersed starts to see how wide it is, and report it.")


def _log_joint_bears_out(table: pd.DataFrame) -> bool:
    """Whether the log joint of ``table`` is evidence that its chains reach one height (see
    :func:`equal_height_advice`): R-hat at most :data:`RHAT_APART`, bulk ESS at least
    :data:`HEIGHT_ESS_MIN`, and at least ``ess_min`` draws in all. NaN (a constant log joint) is not."""
    row = table.loc["log_joint"]
    n_chains, n_draws = table.attrs.get("n_chains"), table.attrs.get("n_draws")
    if not n_chains or not n_draws or int(n_chains) * int(n_draws) < table.attrs.get("ess_min", ESS_MIN):
        return False
    return bool(float(row["r_hat"]) <= RHAT_APART and float(row["ess_bulk"]) >= HEIGHT_ESS_MIN)


def _check_table(table: Any) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table: expected a pandas.DataFrame from mixing_table, got {type(table).__name__}")
    missing = {"status", "r_hat", "ess_bulk", "ess_tail"} - set(table.columns)
    if missing:
        raise ValueError(f"table: has no columns {sorted(missing)} (is it from mixing_table?)")
    return table


def rhat_text(rhat: float, rhat_max: float = RHAT_MAX) -> str:
    """R-hat to three decimals (``1.012``), with as many more as it takes not to print a value above
    ``rhat_max`` as ``rhat_max`` itself (1.0100313 as ``1.01003``, not ``1.01``, when 1.01 passes)."""
    if np.isinf(rhat):
        return "inf"
    if not np.isfinite(rhat) or rhat >= 10:
        return f"{rhat:.3g}"
    for decimals in range(3, 10):
        text = f"{rhat:.{decimals}f}"
        if (float(text) > rhat_max) == (rhat > rhat_max):
            break
    return text.rstrip("0").rstrip(".")


def _problem(name: str, row: pd.Series, table: pd.DataFrame) -> str:
    """``name (status: details)`` for a quantity that fails."""
    status = row["status"]
    ess_min = table.attrs.get("ess_min", ESS_MIN)
    constants = table.attrs.get("chain_constants", {}).get(name)
    if status == "chains disagree":
        details = "values by chain " + ", ".join(_format_value(value) for value in constants) if constants else ""
    elif status == "too few draws":
        n_draws = table.attrs.get("n_draws")
        details = (f"{n_draws} per chain, " if n_draws is not None else "") + f"need {MIN_DRAWS}"
    elif status == "not finite":
        details = "NaN or infinite draws"
    else:
        parts = []
        if constants:
            stuck = [(chain, value) for chain, value in enumerate(constants) if value is not None]
            parts.append(("chain " if len(stuck) == 1 else "chains ")
                         + ", ".join(f"{chain} at {_format_value(value)}" for chain, value in stuck)
                         + " never move" + ("s" if len(stuck) == 1 else ""))
        parts.append(f"R-hat {rhat_text(row['r_hat'], table.attrs.get('rhat_max', RHAT_MAX))}")
        parts.append(f"bulk ESS {row['ess_bulk']:.0f}")
        if row["ess_tail"] < ess_min:
            parts.append(f"tail ESS {row['ess_tail']:.0f}")
        details = ", ".join(parts)
    return f"{name} ({status}{': ' + details if details else ''})"


#: How :func:`mixing_verdict`'s advice names the moves a DP mixture's chains can add (the command
#: line names its options for them).
MORE_MOVES = "more split-merge moves per sweep"
SUBCLUSTER_SAMPLER = "the sub-cluster sampler"


def run_longer(continue_with: str | None, start: str = "Run longer") -> str:
    """The opening of the advice to run longer, naming the call that continues the chains:
    ``"Run longer (fit.resume(data, n_draws=...) continues these chains), or again"``, to be
    followed by " with more moves ..."; ``"Run longer, or again"`` when ``continue_with`` is None (a
    result that cannot be continued: run it again, longer)."""
    return f"{start} ({continue_with} continues these chains), or again" if continue_with else f"{start}, or again"


def mixing_verdict(table: pd.DataFrame) -> str:
    """One sentence saying whether the chains of :func:`mixing_table` mix, and which quantities do not.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`mixing_table` (or :func:`summary`).

    Returns
    -------
    str
        ``"Chains mix: R-hat <= 1.01 and bulk and tail ESS >= 400 for n_clusters, log_joint
        (alpha is constant)."`` when every quantity is ``"ok"`` or ``"constant"``; else e.g.
        ``"Chains do NOT mix: n_clusters (chains disagree: values by chain 9, 10, 11, 10),
        log_joint (not mixing: R-hat 1.35, bulk ESS 23). The chains sit in separate modes: ...
        Run longer, or again with ..."`` (the sentence on modes when the chains' mean log joints differ by more
        than 10 nats and than the pooled standard deviation); ``"Too few effective draws to rely on
        R-hat, though it is <= 1.01 for every quantity assessed: log_joint (few effective draws:
        R-hat 0.999, bulk ESS 354). Vehtari et al. (2021) ask for ... ; the chains hold 400 draws in
        all, so no ESS can reach 400. Draw more ..."`` when no quantity fails R-hat but some
        fall short of the ESS; or ``"Mixing cannot
        be judged: ..."`` when the only problems are too few draws or non-finite values. With a
        single chain the sentence speaks of the chain and of split R-hat. The closing advice is
        written for the Dirichlet-process samplers: to run longer (naming the call that continues
        the chains when ``table.attrs["continue_with"]`` gives it, as the fits of
        :class:`zoo.dirichlet.DPMixture` do), with more moves or chains; or,
        when the chains agree on the log joint (means within 10 nats or within its sd, and a log
        joint that bears that out: R-hat at most :data:`RHAT_APART`, bulk ESS at least
        :data:`HEIGHT_ESS_MIN`, ``ess_min`` draws in all) while the number of clusters or the
        entropy of their sizes moves in every chain but has R-hat above :data:`RHAT_APART`, that
        they hold different partitions of about equal probability, which longer runs did not join
        where this was measured, and that their spread is to be reported
        (:func:`equal_height_advice`).
        A sampler without their moves sets its own advice in ``table.attrs["advice"]`` (as
        :class:`zoo.relational.IRMResult` does).

    Raises
    ------
    TypeError, ValueError
        If ``table`` is not a table of :func:`mixing_table`.
    """
    table = _check_table(table)
    single = table.attrs.get("n_chains") == 1
    subject = "The chain" if single else "Chains"
    rhat = "split R-hat" if single else "R-hat"
    rhat_max = table.attrs.get("rhat_max", RHAT_MAX)
    ess_min = table.attrs.get("ess_min", ESS_MIN)
    statuses = table["status"].astype(str)
    names = [str(name) for name in table.index]
    failing = [name for name, status in zip(names, statuses) if status not in PASSING_STATUSES]
    constant = [name for name, status in zip(names, statuses) if status == "constant"]
    if not failing:
        assessed = [name for name, status in zip(names, statuses) if status == "ok"]
        if not assessed:
            if not constant:
                return "Nothing to assess: no quantities."
            held = f"{', '.join(constant)} held one value in every draw of {'the chain' if single else 'every chain'}"
            if single:
                return (f"Nothing to assess: {held}. One chain cannot tell a posterior concentrated on one state "
                        "from a chain that cannot leave it: run several chains from dispersed starts.")
            if table.attrs.get("one_start"):
                return (f"Mixing cannot be judged: {held}, the same in all chains, which all started from one "
                        "partition: chains that never leave a shared start agree whatever the posterior. Run them "
                        'from dispersed starts (init="dispersed", the default).')
            return (f"Nothing to assess: {held}, the same in all chains. Chains from dispersed starts that agree "
                    "so are what a posterior concentrated on one state gives, but R-hat and ESS are not defined: "
                    "more draws would show any move.")
        sentence = (f"{subject} {'mixes' if single else 'mix'}: {rhat} <= {rhat_max:g} and bulk and tail "
                    f"ESS >= {ess_min:g} for {', '.join(assessed)}")
        if constant:
            sentence += f" ({', '.join(constant)} {'is' if len(constant) == 1 else 'are'} constant)"
        return sentence + "."
    problems = ", ".join(_problem(name, table.loc[name], table) for name in failing)
    not_mixing = any(status in NOT_MIXING_STATUSES for status in statuses)
    if not not_mixing and any(status == "few effective draws" for status in statuses):
        n_chains, n_draws = table.attrs.get("n_chains"), table.attrs.get("n_draws")
        total = ""
        if n_chains and n_draws:
            in_all = int(n_chains) * int(n_draws)
            total = f"; {'the chain holds' if single else 'the chains hold'} {in_all:,} draws in all" + (
                f", so no ESS can reach {ess_min:g}" if in_all < ess_min else "")
        return (f"Too few effective draws to rely on {rhat}, though it is <= {rhat_max:g} for every quantity "
                f"assessed: {problems}. Vehtari et al. (2021) ask for bulk and tail ESS >= {ess_min:g} before "
                f"trusting R-hat{total}. {run_longer(table.attrs.get('continue_with'), 'Draw more')} with more "
                "chains.")
    if not_mixing:
        longer = run_longer(table.attrs.get("continue_with"))
        advice = table.attrs.get("advice") or equal_height_advice(table) or (
            f"{longer} with {MORE_MOVES} or {SUBCLUSTER_SAMPLER}, and check with several chains from dispersed "
            "starts." if single else
            f"{longer} with {MORE_MOVES}, {SUBCLUSTER_SAMPLER} or more chains from dispersed starts.")
        return f"{subject} {'does' if single else 'do'} NOT mix: {problems}.{_separate_modes(table)} {advice}"
    return f"Mixing cannot be judged: {problems}."


def mixes(table: pd.DataFrame) -> bool:
    """Whether every quantity of ``table`` mixes: each status is ``"ok"`` or ``"constant"``
    (:data:`PASSING_STATUSES`), the test of :func:`warn_if_not_mixing` (the fits' ``until_mixed``
    asks :func:`mixes_to_stop`, which wants enough draws before a constant ends a run). Not when
    every quantity is constant and ``table.attrs["one_start"]`` says the chains all started from one
    partition (``init="single"``, or one array of labels for every chain): chains that never left a
    shared start agree whatever the posterior (two Gaussian blobs, four chains from one cluster with
    α = 0.001 and no split–merge moves: K 1 and one log joint in every draw, 396 nats below where
    dispersed starts go, and "Nothing to assess" until 2026-12-07).

    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(4, 1000))
    >>> mixes(mixing_table(az.from_dict(posterior={"x": draws})))
    True
    >>> mixes(mixing_table(az.from_dict(posterior={"x": draws + np.arange(4)[:, None]})))
    False
    """
    statuses = _check_table(table)["status"].astype(str)
    if table.attrs.get("one_start") and len(statuses) and statuses.eq("constant").all():
        return False
    return bool(statuses.isin(PASSING_STATUSES).all())


def mixes_to_stop(table: pd.DataFrame) -> bool:
    """Whether ``until_mixed`` may end a run on ``table``: :func:`mixes`, and, where some quantity
    passes by being ``"constant"``, the chains hold at least the table's ``ess_min`` draws in all.

    A constant has no R-hat or ESS to wait for, so :func:`mixes` passes it at once; but a few
    draws in which nothing moved do not show a posterior concentrated on one state. The
    sub-cluster sampler on three clusters of 30 points far apart (``normal_gamma(2)``, key 1) held
    one partition (K 3, one log joint, one entropy) in the first 20 draws of all four chains and
    ended the run there, at the first question, silent; K moves from the 33rd draw on (3 and 4 in
    150 draws). Asking for as many draws as an ESS of ``ess_min`` (400) needs (100 per chain for
    four chains) lets a posterior that is concentrated still end the run, a little later, and one
    that moves show it. Quantities that are ``"ok"`` need no more: their ESS is already at least
    ``ess_min``.

    The rule of the until-mixed runs of :class:`zoo.dirichlet.DPMixture` and
    :class:`zoo.dirichlet.supervised.SupervisedDP` (their ``_when_mixed``).

    >>> import numpy as np
    >>> constant = {"n_clusters": np.full((4, 20), 3)}
    >>> table = mixing_table(az.from_dict(posterior=constant))
    >>> mixes(table), mixes_to_stop(table)
    (True, False)
    >>> mixes_to_stop(mixing_table(az.from_dict(posterior={"n_clusters": np.full((4, 100), 3)})))
    True
    """
    table = _check_table(table)
    if not mixes(table):
        return False
    if not table["status"].astype(str).eq("constant").any():
        return True
    n_chains, n_draws = table.attrs.get("n_chains"), table.attrs.get("n_draws")
    return bool(n_chains and n_draws and int(n_chains) * int(n_draws) >= table.attrs.get("ess_min", ESS_MIN))


def warn_if_not_mixing(table: pd.DataFrame, *, stacklevel: int = 2) -> bool:
    """Issue a :class:`MixingWarning` if some quantity of ``table`` does not mix.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`mixing_table` (or :func:`summary`).
    stacklevel : int
        As for :func:`warnings.warn`, counted from the caller of this function: 1 points the warning
        at the line calling ``warn_if_not_mixing``, 2 (default) at the caller of that function.

    Returns
    -------
    bool
        Whether a warning was issued: some status is neither ``"ok"`` nor ``"constant"``.

    Warns
    -----
    MixingWarning
        With the sentence of :func:`mixing_verdict`, which names the quantities that fail.
    """
    table = _check_table(table)
    if isinstance(stacklevel, bool) or not isinstance(stacklevel, int) or stacklevel < 1:
        raise ValueError(f"stacklevel: expected an integer >= 1, got {stacklevel!r}")
    if mixes(table):
        return False
    warnings.warn(mixing_verdict(table), MixingWarning, stacklevel=stacklevel + 1)
    return True


def co_clustering_matrix(idata: az.InferenceData) -> xr.DataArray:
    """Posterior co-clustering probabilities P(c_i = c_j | data) over all chains and draws.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.

    Returns
    -------
    xarray.DataArray, shape (points, points)
        Symmetric with unit diagonal; dims ``points`` and ``points_other``.
    """
    idata = _check_idata(idata)
    assignments = idata.posterior["assignments"]
    matrix = co_clustering(assignments.values)
    points = assignments.coords["points"].values
    return xr.DataArray(
        matrix,
        dims=("points", "points_other"),
        coords={"points": points, "points_other": points},
        name="co_clustering",
    )


def point_estimate(idata: az.InferenceData, loss: str = "vi") -> np.ndarray:
    """Point estimate of the partition minimising a posterior expected loss.

    Parameters
    ----------
    idata : arviz.InferenceData
        From :func:`to_inference_data`.
    loss : {"vi", "binder"}
        See :func:`inference.partitions.point_partition`.

    Returns
    -------
    np.ndarray of int, shape (N,)
        Cluster labels 0..K-1.
    """
    idata = _check_idata(idata)
    return point_partition(idata.posterior["assignments"].values, loss=loss)
