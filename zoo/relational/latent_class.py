"""Latent-class relational models (LRM) fitted by incremental EM (CP §1–2, Fig. 1).

Every individual a of a domain D has a latent class h_D(a) ∈ {1, ..., g_D} with prior
θ_{h_D} = P(h_D = g) (CP §1), and every observed cell of a relation r : D_1 × D_2 → {v_1, ...}
has the classes of its arguments as parents: P(r(a, b) = u | h) = θ_r[h_{D_1}(a), h_{D_2}(b), u]
(shared by all cells of r). Unobserved cells are omitted (missing at random, CP §2).

Incremental EM (CP §2, Neal & Hinton 1998). The exact posterior over all classes is intractable,
so q(h) = Π_a q_a(h(a)) is kept fully factorised and EM climbs the free energy

    F(q, θ) = E_q[log P(y, h | θ)] + Σ_a H(q_a)  <=  L(θ) = log P(y | θ)          (CP eq. 2)

one individual at a time. The partial E-step (CP eq. 4) recomputes q_a from a's Markov blanket —
the observed cells it takes part in and the current q of their other arguments — with everyone
else fixed; the M-step (CP eqs. 5–6) re-estimates θ_r[g, u] = N(r = u ∧ H = g) / N(H = g) from
expected counts whose case weights are w_j = Π_i q_{a_i}(g_i), updated incrementally by the change
q_a^new - q_a^old. Each partial step maximises F over one coordinate, so F never decreases at
β = 1, which Neal & Hinton's convergence argument needs. Two remarks on the paper's formulas:

* The coordinate maximiser of F is q_a(g) ∝ θ_{h_D}[g] exp(Σ_j E_{q}[log θ_r[y_j, g, h(b_j)]]),
  the mean-field form of the blanket marginal in eq. 4 (the expectation is over the blanket's
  latent variables, as eq. 4's sum says, taken inside the logarithm).
* CP eq. 3 sums the prior and entropy terms of each individual once per observed cell it takes
  part in; the bound tracked here counts them once per individual, which makes it a true lower
  bound on L(θ) (eq. 2 with factorised q) — the quantity the tests compare with the exact
  log-likelihood.

Tempering (as in the other EM models, H99 §4) raises the likelihood term of the E-step to β:
q_a(g) ∝ θ_{h_D}[g] exp(β Σ_j ...). With ``prior_count`` c > 0 the M-step is the MAP estimate
under symmetric Dirichlet(1 + c) priors (θ ∝ N + c) and the tracked ``objective`` is
F + c Σ log θ; with c = 0 it is CP's maximum-likelihood M-step and ``objective`` = F.

Batch passes and several devices. The incremental pass visits individuals one after another, so
it cannot be split over devices. :func:`batch_pass` is the full-batch alternative used by
``tempered_em(model.bind(data, update="batch"), ..., devices=n)``: domain after domain, every
q_a of the domain is recomputed at once from the same blanket sums (CP eq. 4, mean-field form)
and θ re-estimated (CP eq. 5). The blanket sums and the expected counts are sums over observed
cells, so with the cells split over devices each device sums its block and a ``psum`` adds them
up: the sharded pass equals the single-device one up to rounding. Between two different domains
the update of a whole domain is an exact block coordinate step on F (F never decreases at
β = 1); for a relation of a domain with itself (a social network) the individuals of the domain
are updated simultaneously from the previous q, which is not guaranteed to increase F.

This file holds the NumPyro program and the model (its fitting contract: ``fit``,
``predict_held_out`` and, through ``bind``, the :class:`inference.em.EMModel` protocol), and its
result. The rest reads in this order, one idea a file, everything importable from here:

* ``_latent_class_state.py`` — the parameters, the sufficient statistics, the M-step, the free energy;
* ``_latent_class_passes.py`` — the incremental E-step (one pass = a ``lax.scan`` over the
  individuals of each domain, :func:`iem_pass`, or its numba twin
  :mod:`inference.native.relational_em` on the flat list of cells of ``_flat_cells.py``) and the
  full-batch pass (:func:`batch_pass`);
* ``_latent_class_fit.py`` — the fit (passes in a ``lax.while_loop`` in jitted calls, restarts
  ``vmap``-ped), held-out cases, prediction of cells and the exact log-likelihood by enumeration.

Symmetric relations (an undirected network, ``Relation.symmetric``): r(a, b) and r(b, a) are one
observation of the pair {a, b}, with one θ_r[{g, h}] per unordered pair of classes. Each of the
two cells weighs ½ in every sum over cells (``RelationalArrays.weights``), so a's blanket (CP
eq. 4) sees each of its pairs once, the counts N_r stay symmetric and so does θ_r; the M-step
gives each unordered block one Dirichlet(1 + c) prior (c/2 at each of (g, h) and (h, g) off the
diagonal). Counting both cells in full, as before 2026-12-07, weighed an undirected network's
evidence twice against the class weights.

Relations of arity 1 and 2 are supported; observed self-pairs r(a, a) are not.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from inference import em
from inference.display import Card, Described, made_with, scores_text, stopped_text
from inference.interrupts import deadline_after
from inference.processes import process_max
from inference.provenance import provenance
from inference.native.backend import resolve_backend
from inference._validation import (check_bool, check_choice, check_distributions, check_int, check_key, check_memory,
                                   check_params_like, check_real, check_relation, tree_nbytes, user_stacklevel)
from zoo.relational._latent_class_fit import (_advance_restarts, _case_weights, _check_hidden, _continued_state,
                                              _fit_cases, _heldout_log_lik, _init_params, _run_case_calls, _run_passes,
                                              _start_restarts, exact_log_likelihood, predict_proba)
from zoo.relational._flat_cells import FlatCells, flat_cells
from zoo.relational._latent_class_passes import (_blanket_message, _domain_scores, _message_score, _sharded_cells,
                                                 batch_pass, iem_pass)
from zoo.relational._latent_class_state import (LRMInfo, LRMParams, LRMStats, _free_energy_from_stats, _reduce,
                                                _safe_log, _statistics, free_energy, m_step, sufficient_statistics)
from zoo.relational.data import RelationalArrays, RelationalData, RelationalSchema, check_cells, check_mirrors

#: Pieces of the files above that other modules and tests import from here, as before the split.
_IMPORTED_FROM_HERE = (_blanket_message, _domain_scores, _message_score, _safe_log)

__all__ = [
    "latent_class_program",
    "LRMParams",
    "LRMStats",
    "LRMInfo",
    "LatentClassRelational",
    "LRMResult",
    "ClassesAlikeWarning",
    "ALIKE_TOLERANCE",
    "sufficient_statistics",
    "m_step",
    "free_energy",
    "iem_pass",
    "batch_pass",
    "predict_proba",
    "exact_log_likelihood",
]


# ----------------------------------------------------------------------------- the program
def latent_class_program(entries, values=None, *, schema: RelationalSchema, n_classes: tuple[int, ...]):
    """NumPyro program of the LRM (CP Fig. 1): an enumerated class per individual.

    Parameters
    ----------
    entries : tuple of int arrays, one per relation, shape (n_observed_r, arity_r)
        The cells of each relation to observe (or to simulate).
    values : tuple of int arrays, shape (n_observed_r,), optional
        Observed value codes; omit to simulate.
    schema : RelationalSchema
    n_classes : tuple of int
        g_D for every domain.

    Sites
    -----
    ``class_weights_{D}`` (g_D,) and ``relation_probs_{r}`` (g_{D_1}, ..., g_{D_k}, |r|) are params
    on the simplex (last axis); ``class_{D}`` is the class of every individual, in the plate named
    after the domain D; ``{r}`` are the cells of relation r, in the plate ``{r}_cells``. A symmetric
    relation (``schema.is_symmetric``, an undirected network) draws each unordered pair once, from
    its cell r(a, b) with a < b and the block of the classes in order, θ_r[min(g, h), max(g, h)];
    its cells with a > b are masked out of the density (their values copy their mirrors').
    """
    classes = []
    for domain, (name, size) in enumerate(zip(schema.domain_names, schema.domain_sizes)):
        n_domain_classes = n_classes[domain]
        weights = numpyro.param(
            f"class_weights_{name}", jnp.full((n_domain_classes,), 1.0 / n_domain_classes),
            constraint=dist.constraints.simplex,
        )
        with numpyro.plate(name, size):
            classes.append(
                numpyro.sample(f"class_{name}", dist.Categorical(weights), infer={"enumerate": "parallel"})
            )
    for relation, (name, domains, n_values) in enumerate(
        zip(schema.relation_names, schema.relation_domains, schema.n_values)
    ):
        shape = tuple(n_classes[domain] for domain in domains) + (n_values,)
        probs = numpyro.param(
            f"relation_probs_{name}", jnp.full(shape, 1.0 / n_values), constraint=dist.constraints.simplex
        )
        cells = jnp.asarray(entries[relation])
        parents = tuple(classes[domain][..., cells[:, position]] for position, domain in enumerate(domains))
        once = jnp.ones(cells.shape[0], bool)
        if schema.is_symmetric(relation):  # each unordered pair once, one θ per unordered pair of classes
            parents, once = (jnp.minimum(*parents), jnp.maximum(*parents)), cells[:, 0] < cells[:, 1]
        with numpyro.plate(f"{name}_cells", cells.shape[0]), handlers.mask(mask=once):
            numpyro.sample(name, dist.Categorical(probs[parents]),
                           obs=None if values is None else jnp.asarray(values[relation]))


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class LatentClassRelational:
    """Latent-class relational model with fixed numbers of classes, fitted by incremental EM.

    Parameters
    ----------
    n_classes : int or dict
        g_D, the same for every domain (an int, e.g. 2 for CP's iEM(2)) or per domain name.
    prior_count : float
        Dirichlet pseudo-count c added to the expected counts in the M-step (0: CP's maximum
        likelihood; the default 1 keeps held-out predictions away from 0 and 1).
    backend : {"auto", "xla", "numba"}
        Implementation of the pass over individuals (:func:`iem_pass`); "auto" is numba on the
        CPU backend when numba is installed, else XLA.
    starts : {"seeded", "random"}
        How each restart starts. "seeded" (the default since 2026-12-05): each domain's individuals
        clustered by k-means (k-means++ seeds, Lloyd iterations) on random sketches of their cells,
        their class probabilities put mostly on their cluster, then an M-step; "random" (CP §3, and
        the library until then): class probabilities drawn from Dirichlet(1, ..., 1). Random starts
        can all end at incremental EM's symmetric fixed point, where the classes tell no one apart,
        even on data with plain groups; :meth:`fit` then runs as many seeded ones
        (``docs/engines/incremental_em.md`` has the figures).

    Examples
    --------
    >>> import jax
    >>> from zoo.relational.data import load_karate_club
    >>> result = LatentClassRelational(2).fit(load_karate_club(), key=jax.random.key(0), n_restarts=2, max_passes=20)
    >>> result.params.relation_probs[0].shape
    (2, 2, 2)
    """

    n_classes: int | dict = 2
    prior_count: float = 1.0
    backend: str = "auto"
    starts: str = "seeded"

    #: The fields of :class:`LRMParams` that are distributions, and the axis each sums to 1 along
    #: (``init=`` of :func:`inference.em.tempered_em` is checked against it).
    probability_axes: ClassVar[dict] = {"class_weights": -1, "relation_probs": -1, "responsibilities": -1}

    def __post_init__(self) -> None:
        resolve_backend(self.backend)  # a bad name, or numba off the CPU, refused here
        if isinstance(self.n_classes, dict):
            if not self.n_classes:
                raise ValueError("n_classes: the dict is empty")
            for name, value in self.n_classes.items():
                check_int(f"n_classes[{name!r}]", value, minimum=1)
            object.__setattr__(self, "n_classes", tuple(sorted(self.n_classes.items())))
        elif isinstance(self.n_classes, tuple):  # the (name, K) pairs a dict becomes (the form repr shows)
            if not self.n_classes or not all(isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                                             for pair in self.n_classes):
                raise TypeError(f"n_classes: expected an int, or a dict of ints by domain name such as "
                                f"{{'people': 3}}, got {self.n_classes!r:.60}")
            for name, value in self.n_classes:
                check_int(f"n_classes[{name!r}]", value, minimum=1)
        else:
            check_int("n_classes", self.n_classes, minimum=1)
        check_real("prior_count", self.prior_count, low=0.0)
        check_choice("starts", self.starts, ("seeded", "random"))

    program = staticmethod(latent_class_program)

    # ---------------------------------------------------------------- data
    def classes_for(self, schema: RelationalSchema) -> tuple[int, ...]:
        """g_D for each domain of ``schema``."""
        if isinstance(self.n_classes, tuple):
            given = dict(self.n_classes)
            unknown = set(given) - set(schema.domain_names)
            if unknown:
                raise ValueError(f"n_classes: unknown domains {sorted(unknown)} (domains: {schema.domain_names})")
            missing = [name for name in schema.domain_names if name not in given]
            if missing:
                raise ValueError(f"n_classes: no number of classes for domains {missing}")
            return tuple(int(given[name]) for name in schema.domain_names)
        return tuple(int(self.n_classes) for _ in schema.domain_names)

    def check_data(self, data: Any) -> RelationalData:
        """Validate ``data`` for this model (type, arity <= 2, no observed self-pairs)."""
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        for relation in data.relations:
            if relation.arity > 2:
                raise ValueError(f"data: relation {relation.name!r} has arity {relation.arity}; "
                                 "the models support arity 1 and 2")
            if relation.has_self_pairs:
                raise ValueError(f"data: relation {relation.name!r} observes self-pairs r(a, a); mask the diagonal")
        return data

    def prepare(self, data: RelationalData) -> tuple[RelationalArrays, FlatCells | None]:
        """Validate ``data`` and return its device arrays (and the numba pass's cell list)."""
        self.check_data(data)
        backend = resolve_backend(self.backend)
        return data.to_arrays(), (flat_cells(data) if backend == "numba" else None)

    # ---------------------------------------------------------------- EM protocol (inference.em)
    def bind(self, data: RelationalData, *, update: str = "incremental") -> "BoundLatentClassRelational":
        """This model with the schema of ``data`` attached, for :func:`inference.em.tempered_em`.

        ``update`` picks the EM iteration: "incremental" (:func:`iem_pass`) or "batch"
        (:func:`batch_pass`, which can also run on several devices: ``tempered_em(...,
        devices=n)``).
        """
        self.check_data(data)
        return BoundLatentClassRelational(self.n_classes, self.prior_count, self.backend, self.starts, data.schema,
                                          update)

    def _check_memory(self, key: Any, arrays: RelationalArrays, schema: RelationalSchema, n_fits: int) -> None:
        """Refuse class counts whose fits cannot fit in memory (from the start's shapes, traced).

        The responsibilities and block tables alone are counted first, in Python integers, so that
        class counts beyond any memory (and beyond JAX's int32 shapes) are refused before tracing.
        """
        classes = self.classes_for(schema)
        floor = sum(size * classes[d] for d, size in enumerate(schema.domain_sizes))
        floor += sum(math.prod(classes[d] for d in domains) * n_values
                     for domains, n_values in zip(schema.relation_domains, schema.n_values))
        itemsize = jnp.dtype(jnp.result_type(float)).itemsize
        check_memory("n_classes", 4 * n_fits * itemsize * floor, f"{n_fits} fit(s) of {self!r}")
        start = jax.eval_shape(partial(_init_params, schema=schema, n_classes=classes,
                                       prior_count=float(self.prior_count)), key, arrays)
        # Each fit holds the parameters, the new iterate and their statistics (about 4 copies).
        check_memory("n_classes", 4 * n_fits * tree_nbytes(start), f"{n_fits} fit(s) of {self!r}")

    # ---------------------------------------------------------------- fitting
    def _checked_init(self, init: Any, schema: RelationalSchema, dtype: Any) -> LRMParams:
        """``init`` (an LRMResult or its params) checked against this model on ``schema``, as ``dtype``."""
        if isinstance(init, LRMResult):
            if init.schema != schema:
                raise ValueError(f"init: fitted to data of schema {init.schema}, not this data's {schema}")
            init = init.params
        if not (isinstance(init, LRMParams) and all(isinstance(part, tuple) for part in init)):
            raise TypeError(f"init: expected an LRMResult or LRMParams, got {type(init).__name__}")
        n_classes = self.classes_for(schema)
        _check_params("init", init, n_classes, schema)
        return jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf, dtype), init)

    def fit(
        self,
        data: RelationalData,
        *,
        key: Any,
        n_restarts: int | None = None,
        max_passes: int = 200,
        tol: float = 1e-6,
        beta: float = 1.0,
        passes_per_call: int = 25,
        time_budget: float | None = None,
        progress: bool = False,
        init: Any = None,
    ) -> "LRMResult":
        """Fit by incremental EM with restarts (CP §3 uses 10, random), keeping the best.

        Parameters
        ----------
        data : RelationalData
        key : jax PRNG key
            Restart r starts from ``jax.random.split(key, n_restarts)[r]``.
        n_restarts : int, default 10 (1 with ``init``)
            Independent starts (the model's ``starts``), run in parallel with ``vmap``. With
            ``starts="random"``, when every one of them ends with some domain's classes alike
            (incremental EM's symmetric fixed point, which random starts reach even on data with
            plain groups), as many more run from seeded starts (restarts ``n_restarts`` to
            ``2 n_restarts - 1``, keys from ``jax.random.fold_in(key, 1)``), and the best objective
            of all is kept. A :class:`ClassesAlikeWarning` says when the kept fit tells no one apart.
        max_passes : int
            Cap on passes over all individuals.
        tol : float
            Stop when the objective changes by less than ``tol`` relative.
        beta : float in (0, 1]
            Inverse temperature of the E-step's likelihood term.
        passes_per_call : int
            Passes per jitted call (the result does not depend on it). Between calls Ctrl-C is
            acted on: the first one returns the passes finished by the end of the current call
            (``result.stopped_by == "interrupted"``); a second one abandons the fit with
            ``KeyboardInterrupt``.
        time_budget : float, optional
            Seconds; the passes stop after the call in which they ran out, keeping those finished
            (``result.stopped_by == "time_budget"``).
        progress : bool
            Show a tqdm progress bar of the passes (off by default: a fit usually takes seconds).
        init : LRMResult or LRMParams, optional
            Continue a fit (one stopped by ``max_passes``, a time budget or Ctrl-C, or one loaded
            with :func:`zoo.io.load_result`) on the same data: one run from its class posteriors
            q_a (the kept restart's), which are all that a pass starts from, so the passes are those
            that restart would have made had it gone on (``key`` is not used; the history counts the
            new passes only). Of a fit of several restarts only the kept one goes on; another might
            have ended best had they all gone on.

        Returns
        -------
        LRMResult
        """
        if init is not None and n_restarts not in (None, 1):
            raise ValueError(f"n_restarts: one run continues init, got n_restarts={n_restarts!r}")
        n_restarts = check_int("n_restarts", 10 if n_restarts is None else n_restarts, minimum=1)
        max_passes = check_int("max_passes", max_passes, minimum=1)
        tol = check_real("tol", tol, low=0.0)
        beta = check_real("beta", beta, low=0.0, high=1.0, low_open=True)
        passes_per_call = check_int("passes_per_call", passes_per_call, minimum=1)
        check_bool("progress", progress)
        deadline = deadline_after(time_budget)
        key = check_key("key", key)
        arrays, flat = self.prepare(data)
        schema = data.schema
        n_classes = self.classes_for(schema)
        self._check_memory(key, arrays, schema, n_restarts)
        _warn_if_more_classes_than_individuals(schema, n_classes)
        dtype = arrays.weights[0].dtype
        keys = jax.random.split(key, n_restarts)
        beta, tol, prior_count = (jnp.asarray(value, dtype) for value in (beta, tol, self.prior_count))
        seeded = self.starts == "seeded" or init is not None  # a continued fit makes no more starts
        if init is None:
            states = _start_restarts(keys, arrays, prior_count, schema=schema, n_classes=n_classes,
                                     max_passes=max_passes, seeded=seeded)
        else:
            states = _continued_state(self._checked_init(init, schema, dtype), max_passes)
        backend = resolve_backend(self.backend)

        def advance(states, stop_at):
            return _advance_restarts(states, arrays, flat, beta, tol, prior_count, jnp.asarray(stop_at, jnp.int32),
                                     schema=schema, backend=backend)

        states, stopped_by = _run_passes(advance, states, max_passes=max_passes, passes_per_call=passes_per_call,
                                         deadline=deadline, progress=progress)
        states = jax.device_get(states)
        final, best = _best_restart(states)
        if not seeded and stopped_by in ("converged", "max_passes") and _alike_domains(
                states.params.responsibilities, best, n_classes):
            # Every random start fell into the symmetric fixed point: as many again from the data's own
            # clusters (k-means on sketches of each individual's cells), the best objective of all kept.
            more = _start_restarts(jax.random.split(jax.random.fold_in(key, 1), n_restarts), arrays, prior_count,
                                   schema=schema, n_classes=n_classes, max_passes=max_passes, seeded=True)
            more, stopped_by = _run_passes(advance, more, max_passes=max_passes, passes_per_call=passes_per_call,
                                           deadline=deadline, progress=progress)
            states = jax.tree_util.tree_map(lambda first, second: np.concatenate([first, np.asarray(second)]),
                                            states, jax.device_get(more))
            final, best = _best_restart(states)
        n_passes = np.asarray(states.n_passes)
        params = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[best]), states.params)
        _warn_if_classes_alike(states.params.responsibilities, best, schema, n_classes)
        return LRMResult(
            model=self,
            schema=schema,
            params=params,
            history={"bound": np.asarray(states.bound[best][: n_passes[best]]),
                     "objective": np.asarray(states.objective[best][: n_passes[best]])},
            restart_scores=final,
            best_restart=best,
            n_passes=int(n_passes[best]),
            converged=bool(states.done[best]),
            stopped_by=stopped_by,
        )

    def predict_held_out(self, data: RelationalData, hidden: Any, *, key: Any, relation: int | str | None = None,
                         n_restarts: int = 10, max_passes: int = 200, tol: float = 1e-6,
                         cases_per_call: int = 25, time_budget: float | None = None,
                         progress: bool = True) -> np.ndarray:
        """Fit once per case with that case's cells hidden and predict them (cases ``vmap``-ped).

        Parameters
        ----------
        data : RelationalData
        hidden : int array, shape (n_cases, n_hidden)
            Positions (into ``data.relations[relation].entries``) of the cells hidden in each
            case; -1 pads cases with fewer cells. A case of a symmetric relation hides each cell
            with its mirror r(b, a) (``ValueError`` otherwise: the pair would still be seen).
        key : jax PRNG key
            Case c, restart k uses ``jax.random.split(key, (n_cases, n_restarts))[c, k]``.
        relation : int or str, optional
            The relation the cells belong to, by position or name; may be left out where the data
            hold one.
        n_restarts, max_passes, tol
            As in :meth:`fit`, for every case.
        cases_per_call : int
            At most this many cases' fits per jitted call (cut evenly; on the CPU the predictions
            do not depend on it, bit for bit; on a GPU they agree within float32 rounding, since
            XLA reduces a batch of another size in another order, and the same value gives the
            same bits). Between calls Ctrl-C is acted on: the first one returns the cases
            finished by the end of the current call, the others NaN, with a ``RuntimeWarning``
            saying how many were run; a second one abandons with ``KeyboardInterrupt``.
        time_budget : float, optional
            Seconds; the cases stop after the call in which they ran out, as after Ctrl-C (the
            cases not run are NaN, and a ``RuntimeWarning`` says how many were run).
        progress : bool
            Show a tqdm progress bar of the cases, advanced after every call.

        Returns
        -------
        (n_cases, n_hidden, |r|) array of predictive probabilities (NaN rows for padding, and for
        every cell of a case not run after Ctrl-C or the time budget).
        """
        n_restarts = check_int("n_restarts", n_restarts, minimum=1)
        max_passes = check_int("max_passes", max_passes, minimum=1)
        tol = check_real("tol", tol, low=0.0)
        cases_per_call = check_int("cases_per_call", cases_per_call, minimum=1)
        check_bool("progress", progress)
        deadline = deadline_after(time_budget)
        key = check_key("key", key)
        arrays, flat = self.prepare(data)
        schema = data.schema
        relation = check_relation("relation", relation, tuple(cells.name for cells in data.relations))
        hidden = check_mirrors(_check_hidden(hidden, data.relations[relation].n_observed), arrays, schema, relation)
        n_cases = hidden.shape[0]
        self._check_memory(key, arrays, schema, n_restarts * min(n_cases, cases_per_call))
        _warn_if_more_classes_than_individuals(schema, self.classes_for(schema))
        keys = jax.random.split(key, (n_cases, n_restarts))
        dtype = arrays.weights[0].dtype
        beta, tol, prior_count = (jnp.asarray(value, dtype) for value in (1.0, tol, self.prior_count))
        fit_options = dict(schema=schema, n_classes=self.classes_for(schema), max_passes=max_passes,
                           backend=resolve_backend(self.backend), seeded=self.starts == "seeded")

        def run_call(positions, stopping):  # one call of EM runs cannot end early
            case_hidden = hidden[positions]
            case_arrays = arrays._replace(weights=_case_weights(arrays, case_hidden, relation))
            params = _fit_cases(keys[positions], case_arrays, flat, beta, tol, prior_count, **fit_options)
            cells = arrays.entries[relation][jnp.asarray(np.where(case_hidden < 0, 0, case_hidden))]
            predict = jax.vmap(lambda case_params, case_cells: predict_proba(case_params, relation, case_cells, schema))
            return predict(params, cells), None

        probs = np.full(hidden.shape + (schema.n_values[relation],), np.nan, np.dtype(dtype))
        _run_case_calls(run_call, probs, cases_per_call, caller="predict_held_out", deadline=deadline,
                        progress=progress)
        probs[hidden < 0] = np.nan
        return probs


@dataclass(frozen=True)
class BoundLatentClassRelational(LatentClassRelational):
    """An LRM bound to one schema: the :class:`inference.em.EMModel` protocol.

    ``em_step`` is one incremental-EM pass (or, with ``update="batch"``, one :func:`batch_pass`)
    at inverse temperature β (so :func:`tempered_em`'s schedules, e.g. Hofmann's tempered EM on
    validation cells, apply), ``log_likelihood`` the free energy and ``heldout_log_lik``
    Σ log P(y_j) of held-out cells of known individuals. Batch passes can be split over devices
    (``prepare_sharded``; the sums over cells take a ``reduce``).
    """

    schema: RelationalSchema | None = field(default=None)
    update: str = "incremental"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("update", self.update, ("incremental", "batch"))

    def prepare(self, data: RelationalData) -> tuple[RelationalArrays, FlatCells | None]:
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        if data.schema != self.schema:
            raise ValueError("data: its domains and relations differ from the bound schema")
        return super().prepare(data)

    def prepare_sharded(self, data: RelationalData, n_shards: int, *,
                        process_local: bool = False) -> tuple[RelationalArrays, None]:
        """The observed cells of every relation cut into ``n_shards`` blocks (leading axis).

        Only batch passes (``update="batch"``) can be split: the incremental pass visits the
        individuals one after another. ``process_local``: ``data`` holds this process's part of
        the observed cells (any part, the domains whole; e.g. ``data.replace_relation(
        relation.select(keep))``) and the blocks are this process's, padded to the longest of any
        process (:func:`inference.processes.process_max`), so the blocks of all processes hold
        every cell once. Every process must call it.
        """
        if self.update != "batch":
            raise ValueError("devices: incremental EM visits individuals one at a time and cannot be split over "
                             "devices; bind the data with update='batch'")
        n_shards = check_int("n_shards", n_shards, minimum=1)
        arrays, _ = self.prepare(data)
        block_sizes = None
        if process_local:
            block_sizes = tuple(process_max(-(-cells.shape[0] // n_shards)) for cells in arrays.entries)
        return _sharded_cells(arrays, n_shards, block_sizes), None

    def init_params(self, rng_key: Any, arrays: tuple) -> LRMParams:
        return _init_params(rng_key, arrays[0], schema=self.schema, n_classes=self.classes_for(self.schema),
                            prior_count=float(self.prior_count), seeded=self.starts == "seeded")

    def em_step(self, params: LRMParams, arrays: tuple, beta: Any, reduce: Any = None) -> tuple[LRMParams, Any]:
        """One pass; returns (new params, objective F + c Σ log θ of ``params``)."""
        cells, flat = arrays
        prior_count = float(self.prior_count)
        start = _free_energy_from_stats(params, _statistics(params.responsibilities, cells, self.schema, reduce),
                                        prior_count, self.schema.symmetric).objective
        if self.update == "batch":
            new_params, _ = batch_pass(params, cells, beta, schema=self.schema, prior_count=prior_count,
                                       reduce=reduce)
        else:
            new_params, _ = iem_pass(params, cells, beta, schema=self.schema, prior_count=prior_count,
                                     flat=flat, backend=resolve_backend(self.backend))
        return new_params, start

    def log_likelihood(self, params: LRMParams, arrays: tuple, reduce: Any = None) -> Any:
        stats = _statistics(params.responsibilities, arrays[0], self.schema, reduce)
        return _free_energy_from_stats(params, stats, float(self.prior_count), self.schema.symmetric).bound

    def heldout_log_lik(self, params: LRMParams, arrays: tuple, reduce: Any = None) -> Any:
        return _reduce(reduce, _heldout_log_lik(params, arrays[0], self.schema))


#: Largest spread of an individual's class probabilities around its domain's mean for which the
#: domain's classes count as alike (:class:`ClassesAlikeWarning`), as a fraction of the mean
#: probability 1/g of a domain of g classes: 0.05 for two classes, 0.02 for five. A fixed 0.01 missed
#: random starts that all stopped near incremental EM's symmetric fixed point on three planted
#: blocks of ten (five classes: spread 0.013, every link probability 0.27 to 0.28, all in one class).
ALIKE_TOLERANCE = 0.1


class ClassesAlikeWarning(em.ClassesAlikeWarning):
    """The best restart's latent classes of some domain tell no individual apart (a kind of
    :class:`inference.em.ClassesAlikeWarning`, the EM models' own, so that one filter takes both)."""


def _best_restart(states: Any) -> tuple[np.ndarray, int]:
    """The restarts' final objectives and the index of the best finite one."""
    n_passes = np.asarray(states.n_passes)
    final = np.asarray(states.objective)[np.arange(len(n_passes)), np.maximum(n_passes - 1, 0)]
    return final, int(np.nanargmax(np.where(np.isfinite(final), final, -np.inf)))


def _alike_domains(responsibilities: tuple, best: int, n_classes: tuple[int, ...]) -> list[int]:
    """The domains (of more than one class) whose classes the restart ``best`` does not tell apart."""
    return [domain for domain, (q, g) in enumerate(zip(responsibilities, n_classes))
            if g > 1 and _alike(np.asarray(q))[best]]


def _alike(responsibilities: np.ndarray) -> np.ndarray:
    """(restarts,) whether every individual's class probabilities lie within ALIKE_TOLERANCE / g of
    their mean, for g classes (the last axis)."""
    spread = np.abs(responsibilities - responsibilities.mean(axis=-2, keepdims=True)).max(axis=(-2, -1))
    return spread < ALIKE_TOLERANCE / responsibilities.shape[-1]


def _warn_if_more_classes_than_individuals(schema: RelationalSchema, n_classes: tuple[int, ...]) -> None:
    """A ``UserWarning`` naming each domain given more classes than it has individuals."""
    crowded = [f"{name!r} ({classes} classes, {size} individuals)"
               for name, size, classes in zip(schema.domain_names, schema.domain_sizes, n_classes) if classes > size]
    if crowded:
        warnings.warn(f"n_classes: more classes than individuals in {'domain' if len(crowded) == 1 else 'domains'} "
                      f"{' and '.join(crowded)}; no more classes than individuals can each be some individual's most "
                      "probable class, so the others describe no one and only slow the fit: give fewer classes",
                      UserWarning, stacklevel=user_stacklevel())


def _warn_if_classes_alike(responsibilities: tuple, best: int, schema: RelationalSchema,
                           n_classes: tuple[int, ...]) -> None:
    """A :class:`ClassesAlikeWarning` naming the domains whose classes the best restart does not tell apart.

    Incremental EM has a fixed point where every individual of a domain has the same class
    probabilities, so that the classes' relation probabilities are alike too; starts drawn at random,
    soft (Dirichlet) or hard (random partitions), fall into it on data whose groups are plain: 40 × 25
    cells planted in two blocks (link probability 0.8 within, 0.1 across) ended there in all 10
    restarts of 3 keys either way (2026-12-05), where InfiniteRelational recovered the blocks. When
    every random start ends there, :meth:`LatentClassRelational.fit` runs as many seeded from the
    data (k-means of sketches of each individual's cells), which found those blocks; this warning is
    for fits whose best restart, of either kind, still tells no one apart.
    """
    alike = [(schema.domain_names[domain], int(_alike(np.asarray(responsibilities[domain])).sum()))
             for domain in _alike_domains(responsibilities, best, n_classes)]
    if not alike:
        return
    n_restarts = np.asarray(responsibilities[0]).shape[0]
    names = ", ".join(f"{name!r} (in {count} of {n_restarts} restarts)" for name, count in alike)
    warnings.warn(
        f"The best restart's classes are alike in {'domain' if len(alike) == 1 else 'domains'} {names}: every "
        f"individual's class probabilities lie within {ALIKE_TOLERANCE:g} / g of their domain's mean (g classes), "
        "so those classes "
        "tell no one apart. Either the data hold no such groups, or every start, random or seeded from the "
        "data's own clusters, fell into incremental EM's symmetric fixed point; InfiniteRelational's Gibbs "
        "chains, which do not have it, can tell which (compare the two by held-out log-loss).",
        ClassesAlikeWarning, stacklevel=3)


def _check_params(name: str, params: LRMParams, n_classes: tuple[int, ...], schema: RelationalSchema) -> None:
    """A ``ValueError``/``TypeError`` naming ``name`` and the field unless ``params`` are an LRM's of
    ``n_classes`` classes per domain on ``schema``: its shapes, finite floats
    (:func:`~inference._validation.check_params_like`), and each distribution along the last axis a
    probability vector (:func:`~inference._validation.check_distributions`), as ``tempered_em``
    checks its ``init``."""
    def shapes(*shape):
        return jax.ShapeDtypeStruct(shape, jnp.result_type(float))

    expected = LRMParams(
        tuple(shapes(classes) for classes in n_classes),
        tuple(shapes(*(n_classes[domain] for domain in domains), values)
              for domains, values in zip(schema.relation_domains, schema.n_values)),
        tuple(shapes(size, classes) for size, classes in zip(schema.domain_sizes, n_classes)))
    check_params_like(name, params, expected)
    check_distributions(name, params, LatentClassRelational.probability_axes)


@dataclass(repr=False)
class LRMResult(Described):
    """A fitted LRM.

    Attributes
    ----------
    model : LatentClassRelational
    schema : RelationalSchema
    params : LRMParams — the best restart's parameters and class posteriors
    history : dict — ``bound`` and ``objective`` per pass of the best restart
    restart_scores : (n_restarts,), or (2 n_restarts,) when seeded starts ran (see
        :meth:`LatentClassRelational.fit`) — final objective of every restart
    best_restart, n_passes : int
    converged : bool
    stopped_by : str — "converged" (every restart), "max_passes", "interrupted" (Ctrl-C) or
        "time_budget" (the finished passes are kept)
    provenance : dict — what made the fit (versions, JAX's backend, float width, the CPU compiled
        for; :func:`inference.provenance.provenance`), taken when it was fitted
    """

    model: Any
    schema: RelationalSchema
    params: LRMParams
    history: dict
    restart_scores: np.ndarray
    best_restart: int
    n_passes: int
    converged: bool
    stopped_by: str = "converged"
    provenance: dict = field(default_factory=provenance, repr=False, compare=False)

    def _card(self) -> Card:
        card = Card(f"LRMResult of {self.model!r}")
        classes = [np.shape(resp)[1] for resp in self.params.responsibilities]
        card.add("domains", [f"{name} ({size:,} individuals, {k} classes)" for name, size, k
                             in zip(self.schema.domain_names, self.schema.domain_sizes, classes)])
        card.add("relations", list(self.schema.relation_names))
        card.add("fit", f"{self.n_passes:,} pass{'es' if self.n_passes != 1 else ''} of the kept restart, "
                        f"{stopped_text(self.stopped_by)}")
        if np.size(self.restart_scores) > 1:
            card.add("restarts", f"best {self.best_restart} of {np.size(self.restart_scores)} by their objective "
                                 f"({scores_text(self.restart_scores, ',.2f')})")
        for name in ("objective", "bound"):
            values = (self.history or {}).get(name)
            if values is not None and len(values):
                card.add(name, f"{float(values[-1]):,.1f} after the last pass")
        if self.stopped_by != "converged":
            card.add("continue", "result.model.fit(data, key=key, init=result): the passes its kept restart would "
                                 "have made next")
        card.add("made with", made_with(self.provenance))
        card.add("see", ["result.classes()", "result.predict_proba(cells, relation)", "result.history_dataset()",
                         "result.params"])
        return card

    def _check_loaded(self) -> None:
        """Called by :func:`zoo.io.load_result` on a result rebuilt from a file: a ``ValueError``
        unless its parts agree (the parameters' shapes with the schema and the model's classes, the
        history with the passes, the best restart with the scores); the parameters go back onto
        JAX arrays, as :meth:`LatentClassRelational.fit` gives them."""
        if not isinstance(self.model, LatentClassRelational):
            raise ValueError(f"the model is {self.model!r:.60}, not a LatentClassRelational")
        # Its settings checked as the constructor checks them (the file restored them without it).
        LatentClassRelational(**{setting.name: getattr(self.model, setting.name)
                                 for setting in fields(self.model) if setting.init})
        if not (isinstance(self.provenance, dict) and all(isinstance(key, str) and isinstance(value, str)
                                                          for key, value in self.provenance.items())):
            raise ValueError(f"the provenance is {self.provenance!r:.60}, not a dict of strings")
        schema = self.schema
        if not (isinstance(schema, RelationalSchema) and all(isinstance(part, tuple) for part in schema)
                and len(schema.domain_names) == len(schema.domain_sizes)
                and len(schema.relation_names) == len(schema.relation_domains) == len(schema.n_values)):
            raise ValueError(f"the schema {schema!r:.80} is not a RelationalSchema of matching parts")
        params = self.params
        if not (isinstance(params, LRMParams) and all(isinstance(part, tuple) for part in params)):
            raise ValueError(f"the parameters are {type(params).__name__}, not an LRMParams of tuples")
        n_classes = self.model.classes_for(schema)
        _check_params("params", params, n_classes, schema)
        scores = np.asarray(self.restart_scores)
        counts = (self.best_restart, self.n_passes)
        if not all(isinstance(count, int) and not isinstance(count, bool) for count in counts):
            raise ValueError(f"best_restart {self.best_restart!r:.20} and n_passes {self.n_passes!r:.20} are not "
                             "both whole numbers")
        if scores.ndim != 1 or not 0 <= self.best_restart < scores.shape[0]:
            raise ValueError(f"best_restart {self.best_restart!r:.20} is not an index of the {scores.shape} restart "
                             "scores")
        if not (self.n_passes >= 0 and isinstance(self.converged, bool)):
            raise ValueError(f"n_passes {self.n_passes!r:.20} or converged {self.converged!r:.20} is not a count "
                             "and a truth value")
        if self.stopped_by not in ("converged", "max_passes", "interrupted", "time_budget"):
            raise ValueError(f"stopped_by is {self.stopped_by!r:.30}")
        if not (isinstance(self.history, dict) and all(np.shape(values) == (self.n_passes,)
                                                       for values in self.history.values())):
            raise ValueError(f"the history does not hold one value per pass ({self.n_passes})")
        self.params = jax.tree_util.tree_map(jnp.asarray, params)

    def classes(self) -> dict[str, np.ndarray]:
        """The most probable class of every individual, by domain name."""
        return {name: np.asarray(jnp.argmax(resp, axis=1))
                for name, resp in zip(self.schema.domain_names, self.params.responsibilities)}

    def predict_proba(self, cells: Any, relation: int | str | None = None) -> np.ndarray:
        """Predictive probabilities (n_cells, |r|) of the cells (n_cells, arity) of a relation (by
        position or name; may be left out where the data hold one)."""
        cells, index = check_cells(cells, relation, self.schema)
        return np.asarray(predict_proba(self.params, index, jnp.asarray(cells, jnp.int32), self.schema))

    def history_dataset(self):
        """The history as an ``xarray.Dataset`` over passes."""
        import xarray as xr

        return xr.Dataset({name: ("pass", values) for name, values in self.history.items()},
                          coords={"pass": np.arange(self.n_passes)})
