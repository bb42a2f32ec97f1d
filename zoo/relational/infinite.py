"""The Infinite Relational Model (IRM; Kemp, Tenenbaum, Griffiths, Yamada & Ueda 2006).

Each domain D is partitioned by a Chinese restaurant process with concentration α_D; every
relation r assigns each block (one cluster per argument) a distribution η over its values, drawn
from a Dirichlet(γ_r) (a Beta(γ_1, γ_0) for a binary relation), and each observed cell draws its
value from the η of its block. Integrating η out gives the collapsed likelihood

    P(y | z, γ) = Π_r Π_blocks B(γ_r + n_block) / B(γ_r),     B(a) = Π_u Γ(a_u) / Γ(Σ_u a_u),

with n_block the counts of each value among the block's observed cells (Kemp et al. 2006 write
the Beta–Bernoulli case). Unobserved cells are left out. A symmetric relation (an undirected
network, :attr:`zoo.relational.data.Relation.symmetric`) is one observation per unordered pair of
individuals, and its blocks are the unordered pairs of clusters {k, l}, one η each: the product
runs over k ≤ l, with n_{kl} the pairs between k and l and n_{kk} the pairs within k. (Until
2026-12-07 both cells of a pair were counted, as two observations in a directed relation; the
pairs within a cluster then counted twice in one block, which over-split: 16 clusters of a
100-node Erdős–Rényi graph with no structure, 15 of a three-block stochastic block model, ARI 0.30;
now 1, and 3 with ARI 1.0; 2 chains × 300 draws each.)

Sampler. Gibbs over the assignments in the style of Neal's (2000) Algorithm 3: individual a
leaves its cluster and rejoins an occupied cluster k with probability ∝ n_k P(y_a | k) or a new one
∝ α_D P(y_a | new), where P(y_a | k) is the ratio of collapsed likelihoods with and without a's
cells in cluster k. For a relation over D × D the cells r(a, a') and r(a', a) of a move together,
so the block (k, k) receives both at once and is scored jointly; for a symmetric one a brings its
pairs once, each to the block {k, l} of its partner's cluster l. Each sweep then resamples every
α_D by Escobar & West's update (:func:`inference.concentration.escobar_west_update`) and every
γ_{r,u} by griddy Gibbs on a log-spaced grid (:data:`HYPER_GRID`, 0.01 to 100) under an
exponential prior discretised on the grid (each point weighted by its cell's prior mass,
:func:`~zoo.relational._infinite_kernel.hyper_log_prior`) — an exact Gibbs update for that
discretised prior. With ``n_split_merge > 0`` each sweep also makes that many split–merge moves
of every domain between the visits and the updates (Jain & Neal 2004, restricted Gibbs launch
states, as Kemp et al. 2006 do; :mod:`zoo.relational._infinite_moves`): a cluster split in two or
two merged at once, accepted by Metropolis–Hastings.

Two implementations of the Gibbs visits compute the same conditionals and draw with the same
uniforms (one per individual and sweep, inverse CDF), so the same key gives the same chain on
both: a ``lax.scan`` per domain (``backend="xla"``, any device) and a compiled numba loop that
XLA runs as a custom call on its own buffers (``backend="numba"``, CPU, see
:mod:`inference.native.relational_gibbs`; it scores only the blocks an individual's cells fall in
and is an order of magnitude faster there). Block counts are integers, so every log Γ is a
look-up in a table of log Γ(γ_u + m) built once per sweep.

State: fixed capacity ``K_max`` per domain with an occupancy count per slot (a slot is active when
its count is positive). If an individual must be able to open a new cluster and no slot is free,
the sweep sets ``overflow`` (sticky); :meth:`InfiniteRelational.sample` then runs that call again,
from the states it started with, at twice the capacity (the sweeps' draws do not depend on the
capacity while it suffices), so a returned result never contains an overflowed chain.

Diagnostics are label-invariant (number of clusters per domain, log joint, α_D, γ_r) and come back
as an ArviZ ``InferenceData``. Relations of arity 1 and 2 are supported; observed self-pairs are not.

This file holds the NumPyro program, the model (its contract: ``sample`` and ``predict_held_out``)
and its result. The rest, one idea a file, everything importable from here:

* ``_infinite_state.py`` — :class:`IRMState`, :class:`IRMInfo`, :func:`init`, the collapsed
  likelihood, the CRP prior and the log joint;
* ``_infinite_conditional.py`` — the conditional of one individual's cluster given the rest
  (taken out, slots scored, put back), shared by the visits and the moves;
* ``_infinite_kernel.py`` — :func:`build_kernel`: the XLA Gibbs visits, the hyperparameter
  updates, and the packing of the state for the visits' numba twin
  (:mod:`inference.native.relational_gibbs`);
* ``_infinite_moves.py`` — the split–merge moves (XLA, on every backend);
* ``_infinite_chains.py`` — chains in jitted calls of sweeps, held-out cases, predictive draws.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from inference import diagnostics
from inference.chains import StopRule
from inference.concentration import GammaPrior
from inference.display import Card, Described, add_mixing, chains_text, made_with, quantity_text
from inference.interrupts import deadline_after
from inference.native.backend import resolve_backend
from inference.partitions import most_probable_draw
from inference.provenance import PROVENANCE_KEYS, check_same_float_width, provenance, warn_if_made_elsewhere
from inference._validation import (arrays_digest, check_bool, check_int, check_key, check_memory, check_one_length,
                                   check_real, check_relation, key_as_data, key_from_data, tree_nbytes, user_stacklevel)
from zoo.relational._infinite_chains import (_draw_predictive, _run_cases, _run_cases_until_mixed, _run_chains_in_calls,
                                            _Settings)
from zoo.relational._infinite_loo import PSISHeldOut, psis_held_out
from zoo.relational._latent_class_fit import STOPPED_BY, _case_weights, _check_hidden, _run_case_calls
from zoo.relational import _infinite_kernel
from zoo.relational._infinite_kernel import _resample_hyper, build_kernel, log_gamma_tables
from zoo.relational._infinite_moves import MOVE_STATISTICS
from zoo.relational._infinite_state import (IRMInfo, IRMState, block_counts, collapsed_log_likelihood, init,
                                            log_crp_prior, log_joint)
from zoo.relational.data import RelationalData, RelationalSchema, check_cells, check_mirrors
from zoo.relational.latent_class import flat_cells

#: Support of every γ_{r,u}: a log-spaced grid (griddy Gibbs, exact for this discretised prior).
HYPER_GRID = _infinite_kernel.HYPER_GRID

#: The call that continues a result's chains until they mix (``n_draws`` the most to add), as its
#: messages name it (the command line names its own).
RESUME_CALL = "result.resume(data, n_draws=..., until_mixed=True)"
#: How the advice for chains that do not mix names more split-merge moves per sweep, and moves
#: for a run without them (the command line names its option).
MORE_MOVES = "more split-merge moves per sweep (n_split_merge)"
MOVES_ON = "split-merge moves (InfiniteRelational(n_split_merge=10))"
ASSIGNMENTS_PREFIX = "assignments_"  # to_inference_data(assignments=True): assignments_<domain>
#: What a run stopped during its warm-up says, when it returns and when it is asked for draws.
NO_DRAWS = f"the run kept no draws: it stopped during its warm-up; {RESUME_CALL} finishes the warm-up and draws"

#: What :meth:`InfiniteRelational.sample` runs given neither ``n_sweeps`` nor ``until_mixed``: 1,000
#: warm-up sweeps, then draws until every label-invariant quantity mixes, at most
#: :data:`UNTIL_MIXED_DRAWS` per chain. The karate club needed 4,800-7,850 draws with Gibbs sweeps
#: alone, 1,900 with ten split-merge moves per sweep, the Florentine families 950 (2026-12-03).
#: Given ``until_mixed=False`` alone: :data:`DEFAULT_DRAWS` draws after the warm-up.
DEFAULT_WARMUP, DEFAULT_DRAWS, UNTIL_MIXED_DRAWS = 1000, 1000, 10_000

#: Pieces of the files above that tests import from here, as before the split.
_IMPORTED_FROM_HERE = (_resample_hyper,)

__all__ = [
    "infinite_relational_program",
    "IRMState",
    "IRMInfo",
    "InfiniteRelational",
    "IRMResult",
    "PSISHeldOut",
    "block_counts",
    "collapsed_log_likelihood",
    "log_joint",
    "init",
    "build_kernel",
    "HYPER_GRID",
    "DEFAULT_WARMUP",
    "DEFAULT_DRAWS",
    "UNTIL_MIXED_DRAWS",
    "log_gamma_tables",
    "log_crp_prior",
]


# ----------------------------------------------------------------------------- the program
def infinite_relational_program(entries, values=None, *, schema: RelationalSchema, concentrations: tuple,
                                hyper: tuple, max_clusters: int):
    """NumPyro program of the IRM with explicit block parameters (for simulation).

    The CRP of each domain is written as a Dirichlet process by stick-breaking, truncated at
    ``max_clusters`` sticks (the last stick takes the remaining mass), so for ``max_clusters``
    at least the domain size it differs from the CRP only by that last stick's mass.

    Parameters
    ----------
    entries : tuple of int arrays (n_observed_r, arity_r), one per relation
    values : tuple of int arrays, optional — observed value codes; omit to simulate
    schema : RelationalSchema
    concentrations : tuple of float — α_D per domain
    hyper : tuple of (|r|,) arrays — Dirichlet parameters γ_r per relation
    max_clusters : int — truncation of the stick-breaking

    Sites
    -----
    ``sticks_{D}`` (plate ``{D}_clusters``), ``cluster_{D}`` (plate D), ``eta_{r}`` (block
    parameters, one plate per argument), ``{r}`` (plate ``{r}_cells``). A symmetric relation
    (``schema.is_symmetric``) draws each unordered pair once, from its cell r(a, b) with a ≤ b and
    the block parameter of the clusters in order, η[min(k, l), max(k, l)]; its cells with a > b are
    masked out of the density (their values copy their mirrors', which a simulation sets).
    """
    clusters = []
    for name, size, alpha in zip(schema.domain_names, schema.domain_sizes, concentrations):
        with numpyro.plate(f"{name}_clusters", max_clusters - 1):
            sticks = numpyro.sample(f"sticks_{name}", dist.Beta(1.0, alpha))
        remaining = jnp.concatenate([jnp.ones(1), jnp.cumprod(1.0 - sticks)])
        weights = jnp.concatenate([sticks, jnp.ones(1)]) * remaining
        with numpyro.plate(name, size):
            clusters.append(numpyro.sample(f"cluster_{name}", dist.Categorical(weights)))
    for relation, (name, domains) in enumerate(zip(schema.relation_names, schema.relation_domains)):
        concentration = jnp.asarray(hyper[relation])
        with numpyro.plate(f"{name}_first", max_clusters, dim=-1 if len(domains) == 1 else -2):
            if len(domains) == 1:
                eta = numpyro.sample(f"eta_{name}", dist.Dirichlet(concentration))
            else:
                with numpyro.plate(f"{name}_second", max_clusters, dim=-1):
                    eta = numpyro.sample(f"eta_{name}", dist.Dirichlet(concentration))
        cells = jnp.asarray(entries[relation])
        block = tuple(clusters[domain][cells[:, position]] for position, domain in enumerate(domains))
        once = jnp.ones(cells.shape[0], bool)
        if schema.is_symmetric(relation):  # each unordered pair once, one parameter per pair of clusters
            block, once = (jnp.minimum(*block), jnp.maximum(*block)), cells[:, 0] <= cells[:, 1]
        with numpyro.plate(f"{name}_cells", cells.shape[0]), handlers.mask(mask=once):
            numpyro.sample(name, dist.Categorical(eta[block]),
                           obs=None if values is None else jnp.asarray(values[relation]))


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class InfiniteRelational:
    """The IRM sampled by collapsed Gibbs with hyperparameter updates, several chains at once.

    Parameters
    ----------
    concentration : float
        Initial α_D of every domain (> 0).
    hyper : float
        Initial γ_{r,u} of every relation and value; must lie on :data:`HYPER_GRID` when
        ``sample_hyper`` (the nearest grid point is used); 1 is a uniform Beta/Dirichlet.
    concentration_prior : GammaPrior
        Gamma(shape, rate) prior of every α_D (Escobar & West).
    hyper_prior_rate : float
        Rate of the exponential prior of every γ_{r,u} (discretised on :data:`HYPER_GRID`; prior
        mean within 5% of 1 / rate for rates between about 0.05 and 5).
    sample_concentration, sample_hyper : bool
        Resample α_D / γ_r after every sweep (otherwise they stay at their initial values).
    max_clusters : int
        Initial capacity K_max of every domain (capped at the domain's size); doubled when a
        chain overflows, and the call of sweeps in which it did run again at the grown capacity
        (held-out cases: the cases' call from their start). Memory is estimated before the run and
        before every growth: a start that cannot fit is refused (a ``ValueError`` naming
        ``max_clusters`` with the figure); a growth that cannot ends the run there, with the
        sweeps finished and a ``RuntimeWarning`` (``stopped_by="capacity"``).
    init_clusters : int
        Individuals start spread uniformly over this many clusters.
    backend : {"auto", "xla", "numba"}
        Implementation of the Gibbs visits (see :func:`build_kernel`); "auto" is numba on the
        CPU backend when numba is installed, else XLA.
    n_split_merge : int
        Split–merge moves of each domain per sweep, after the Gibbs visits (Jain & Neal 2004;
        :mod:`zoo.relational._infinite_moves`); 0 for Gibbs alone. Default 10 (since 2026-12-06;
        0 before, when the command line's default was already 10). Measured on 2 CPU cores, numba,
        4 chains × 4,000 sweeps, seeds 11 and 12 (bulk ESS per second of the whole run):

        ===========  =====  ==========  ============  ==========  ===============
        data         moves  ms / sweep  R-hat(K)      ESS/s of K  ESS/s log joint
        ===========  =====  ==========  ============  ==========  ===============
        karate club  0      5.2, 5.3    1.047, 1.012  9.7, 17     3.2, 9.1
        karate club  10     7.9, 7.1    1.006, 1.005  16, 12      19, 13
        Davis women  0      3.0, 3.0    1.002, 1.003  81, 73      260, 258
        Davis women  10     5.0, 4.9    1.003, 1.003  70, 77      217, 203
        Florentine   0      3.1, 3.4    1.008, 1.005  86, 80      229, 194
        Florentine   10     4.2, 4.2    1.000, 1.001  100, 99     237, 263
        ===========  =====  ==========  ============  ==========  ===============

        On the karate club Gibbs alone does not mix and ten moves do; where Gibbs alone mixes they
        cost up to a fifth of the effective samples per second (Davis) or gain as much
        (Florentine). A move visits every member of the two clusters it touches, with all their
        cells, so on larger data it costs more than the Gibbs sweep: on a 200 × 150 binary matrix
        planted with 8 × 6 blocks, ten moves took a sweep from 19 to 54 ms and changed no R-hat,
        which kept them off by default until runs went on until their chains mix
        (:meth:`sample`'s default), where what counts is the time until they do. Those runs
        (2026-12-06, 4 chains, keys 0 and 1, compiling included) mixed on the karate club after
        1,900 draws per chain with ten moves against 7,850 and 4,800 without (19.1 and 15.6 s
        against 31.9 and 19.4), on the Florentine families after 650 and 950 against 950 and 850,
        and on Davis's women × events after 850 and 650 against 850 and 1,050 (6.4–11.6 s against
        4.8–8.5). On larger data neither need mix: on the first 500-user subset of MovieLens 100k
        in ``notebooks/relational_ratings.ipynb`` (1,618 movies, 2 chains, key 0, until mixed)
        Gibbs alone reached the 10,000-draw limit in 444 s with R-hat 1.14 for the log joint, and
        ten moves per sweep spent a 600-s budget on 6,800 draws (87 against 44 ms per sweep) and
        ended at 1.50, having passed (1.001) at 2,550 draws in a shorter run before a chain found
        another mode; there ``n_split_merge=0`` does the same in half the time.
    split_merge_scans : int
        Restricted Gibbs scans that make each move's launch state (t in Jain & Neal 2004; 0: the
        points in play are put on a side by a fair coin, and one scan from there proposes).

    Examples
    --------
    Two chains with split–merge moves, run until they mix (the default without ``n_sweeps``):

    >>> import jax
    >>> from inference.diagnostics import mixes
    >>> from zoo.relational.data import load_florentine_families
    >>> result = InfiniteRelational(n_split_merge=10).sample(load_florentine_families(), key=jax.random.key(0),
    ...                                                      n_chains=2, progress=False)
    >>> mixes(result.mixing), result.n_clusters["families"].shape[0]
    (True, 2)
    """

    concentration: float = 1.0
    hyper: float = 1.0
    concentration_prior: GammaPrior = field(default_factory=lambda: GammaPrior(1.0, 1.0))
    hyper_prior_rate: float = 1.0
    sample_concentration: bool = True
    sample_hyper: bool = True
    max_clusters: int = 16
    init_clusters: int = 3
    backend: str = "auto"
    n_split_merge: int = 10
    split_merge_scans: int = 1

    def __post_init__(self) -> None:
        resolve_backend(self.backend)  # a bad name, or numba off the CPU, refused here
        for name in ("sample_concentration", "sample_hyper"):
            check_bool(name, getattr(self, name))
        check_real("concentration", self.concentration, low=0.0, low_open=True)
        check_real("hyper", self.hyper, low=0.0, low_open=True)
        if not isinstance(self.concentration_prior, GammaPrior):
            raise TypeError(f"concentration_prior: expected a GammaPrior, got {type(self.concentration_prior).__name__}")
        check_real("concentration_prior.shape", self.concentration_prior.shape, low=0.0, low_open=True)
        check_real("concentration_prior.rate", self.concentration_prior.rate, low=0.0, low_open=True)
        check_real("hyper_prior_rate", self.hyper_prior_rate, low=0.0, low_open=True)
        check_int("max_clusters", self.max_clusters, minimum=1)
        check_int("init_clusters", self.init_clusters, minimum=1)
        check_int("n_split_merge", self.n_split_merge, minimum=0)
        check_int("split_merge_scans", self.split_merge_scans, minimum=0)

    program = staticmethod(infinite_relational_program)

    def check_data(self, data: Any) -> RelationalData:
        """Validate ``data`` (type, arity <= 2, no observed self-pairs)."""
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        for relation in data.relations:
            if relation.arity > 2:
                raise ValueError(f"data: relation {relation.name!r} has arity {relation.arity}; "
                                 "the IRM sampler supports arity 1 and 2")
            if relation.has_self_pairs:
                raise ValueError(f"data: relation {relation.name!r} observes self-pairs r(a, a); mask the diagonal")
        return data

    def _settings(self) -> _Settings:
        hyper = float(self.hyper)
        if self.sample_hyper:
            hyper = float(HYPER_GRID[np.argmin(np.abs(np.log(HYPER_GRID) - np.log(hyper)))])
        return _Settings(
            concentration=float(self.concentration), hyper=hyper,
            concentration_prior=GammaPrior(float(self.concentration_prior.shape), float(self.concentration_prior.rate)),
            hyper_prior_rate=float(self.hyper_prior_rate), sample_concentration=bool(self.sample_concentration),
            sample_hyper=bool(self.sample_hyper), init_clusters=int(self.init_clusters),
            backend=resolve_backend(self.backend), n_split_merge=int(self.n_split_merge),
            split_merge_scans=int(self.split_merge_scans),
        )

    def _capacities(self, schema: RelationalSchema, scale: int) -> tuple[int, ...]:
        return tuple(min(size, self.max_clusters * scale) for size in schema.domain_sizes)

    def _check_memory(self, arrays: Any, schema: RelationalSchema, capacities: tuple[int, ...], n_chains: int,
                      n_kept_sweeps: int, keep_assignments: bool) -> None:
        """Refuse, naming ``max_clusters``, chains at ``capacities`` that memory cannot hold.

        From shapes alone: each chain's state (the block counts grow as the product of the
        capacities of a relation's domains) about four times over while a jitted call steps it,
        and the per-sweep output (the assignments of every kept sweep with ``keep_assignments``).
        Checked at the starting capacities and again before a run at grown ones, since a chain
        that outgrows its capacity is run again with twice it (up to the domains' sizes).
        """
        state = jax.eval_shape(lambda key: init(key, arrays, schema, capacities, concentration=1.0, hyper=1.0,
                                                init_clusters=1), jax.random.key(0))
        per_sweep = 4 * sum(schema.domain_sizes) if keep_assignments else 0
        n_bytes = n_chains * (4 * tree_nbytes(state) + n_kept_sweeps * per_sweep)
        grown = "" if capacities == self._capacities(schema, 1) else ", grown after a chain ran out of capacity"
        check_memory("max_clusters", n_bytes, f"{n_chains} IRM chain(s) at capacities {capacities}{grown}")

    def _grown_capacities(self, arrays: Any, schema: RelationalSchema, capacities: tuple[int, ...], scale: int,
                          n_chains: int, n_kept_sweeps: int, keep_assignments: bool) -> tuple[tuple | None, str]:
        """The capacities at twice ``scale`` for chains that outgrew ``capacities``, and "" — or None
        and the memory check's message where memory cannot hold them."""
        if all(capacity == size for capacity, size in zip(capacities, schema.domain_sizes)):
            raise RuntimeError("overflow reported with every capacity at its domain size")
        bigger = self._capacities(schema, 2 * scale)
        try:
            self._check_memory(arrays, schema, bigger, n_chains, n_kept_sweeps, keep_assignments)
        except ValueError as error:
            return None, str(error)
        return bigger, ""

    def _run(self, runner, keys, data, arrays, hidden_cells, schema, *, scale=1, resume_from=None, **kwargs):
        """Run; a call in which a chain outgrows the capacities runs again with twice them (up to the
        domains' sizes), from the states it started with and with the same keys, and the run goes on.

        ``runner`` (:func:`_run_chains_in_calls`) returns (output, why it stopped, the capacities it
        ended at); ``scale`` is the first run's multiple of ``max_clusters``. With ``resume_from``
        (the chains' states at that scale, the sweep they stopped before) the run continues them.
        Memory is checked before the run (a ``ValueError`` naming ``max_clusters``) and before every
        growth: one it cannot hold ends the run with the sweeps finished, ``stopped_by`` "capacity",
        and a ``RuntimeWarning`` saying so. Returns the output, the capacities and scale it ended at,
        why it stopped, and the first sweep it ran. (Until 2026-12-07 every chain ran again from its
        start after an overflow, and a growth memory could not hold raised the ``ValueError``.)
        """
        settings = self._settings()
        flat = flat_cells(data) if settings["backend"] == "numba" else None
        states, first_sweep = resume_from or (None, 0)
        remaining = kwargs["n_sweeps"] - first_sweep

        def grow(capacities: tuple) -> tuple | None:
            nonlocal scale
            bigger, shortfall = self._grown_capacities(arrays, schema, capacities, scale, len(keys), remaining,
                                                       kwargs["keep_assignments"])
            if bigger is None:
                warnings.warn(f"InfiniteRelational.sample: a chain outgrew capacities {capacities}, and the run "
                              f"stopped there, the sweeps finished before returned (completed=False): {shortfall}",
                              RuntimeWarning, stacklevel=user_stacklevel())
                return None
            scale *= 2
            return bigger

        capacities = self._capacities(schema, scale)
        self._check_memory(arrays, schema, capacities, len(keys), remaining, kwargs["keep_assignments"])
        output, stopped_by, capacities = runner(keys, arrays, flat, hidden_cells, schema=schema,
                                                capacities=capacities, settings=settings, states=states,
                                                first_sweep=first_sweep, grow=grow, **kwargs)
        return output, capacities, scale, stopped_by, first_sweep

    def sample(self, data: RelationalData, key: Any, *, n_chains: int = 4, n_draws: int | None = None,
               n_warmup: int | None = None, n_sweeps: int | None = None, keep_assignments: bool = True,
               sweeps_per_call: int = 50, time_budget: float | None = None, progress: bool = True,
               until_mixed: bool | None = None) -> "IRMResult":
        """Run ``n_chains`` chains of ``n_warmup`` + ``n_draws`` sweeps (``vmap``-ped, in jitted calls of sweeps).

        Parameters
        ----------
        data : RelationalData
        key : jax PRNG key — chain c uses ``jax.random.split(key, n_chains)[c]``; positional or
            ``key=``, as in :meth:`zoo.dirichlet.DPMixture.fit`
        n_chains : int
            Chains run side by side (4 by default).
        n_draws : int, optional
            Draws kept per chain after the warm-up, as in :meth:`zoo.dirichlet.DPMixture.fit` and
            the command line's ``--draws``; with ``until_mixed``, the most to draw. Give this or
            ``n_sweeps``, not both.
        n_warmup : int, optional — sweeps discarded as warm-up (default: :data:`DEFAULT_WARMUP`,
            1,000, but half of ``n_sweeps`` when that is given)
        n_sweeps : int, optional
            Sweeps per chain, the warm-up included (the length's older form; ``n_draws`` counts
            the kept draws alone). Neither given: the run goes on until the chains mix
            (``until_mixed``), :data:`DEFAULT_WARMUP` (1,000) warm-up sweeps and at most
            :data:`UNTIL_MIXED_DRAWS` (10,000) draws per chain, as the command line does (since
            2026-12-05; before, a fixed 2,000 sweeps). Given: exactly that many (unless
            ``until_mixed=True`` ends the run sooner). The defaults measured (2026-12-05, 2 CPU
            cores, 4 chains, keys 0 and 1, compiling included): every quantity passed on the
            Florentine families after 950 and 850 draws (7.1 and 4.2 s), on Davis's women × events
            after 850 and 1,050 (7.3 and 4.9 s), and on the karate club after 7,850 and 4,800 (28.8
            and 16.4 s), all without split–merge moves (ten per sweep, ``n_split_merge``'s default
            since 2026-12-06, need about 1,900 on the karate club). The
            fixed 4 × 2,000 sweeps of before warned on the karate club and in one of two runs on
            Davis's data (R-hat of K 1.010). On MovieLens 100k a sweep of 4 chains takes about
            0.3 s, so a run to the limit takes about an hour: give ``time_budget`` (Ctrl-C too keeps
            the finished sweeps).
        keep_assignments : bool — keep every kept draw's partitions (for co-clustering and ARI)
        sweeps_per_call : int — at most this many sweeps per jitted call (the draws do not depend
            on it). Between calls Ctrl-C is acted on: the first one returns the sweeps finished by
            the end of the current call (``result.completed`` is False, ``result.stopped_by`` is
            ``"interrupted"``); a second one abandons
            the run with ``KeyboardInterrupt``.
        time_budget : float, optional — seconds; the run stops after the call in which they ran
            out, as after Ctrl-C.
        progress : bool — show a tqdm progress bar of the sweeps (a new one when a chain outgrew
            the capacity and the run starts again with twice it).
        until_mixed : bool, optional — end the run as soon as every label-invariant quantity of
            :attr:`IRMResult.mixing` mixes (R-hat ≤ 1.01, bulk and tail ESS ≥ 400), asked after a
            call each time the kept draws have grown by a tenth; ``n_sweeps`` and ``time_budget``
            are then the limits (give generous ones). The draws are those of a run without it, cut
            where it ended. Not given: True when neither ``n_draws`` nor ``n_sweeps`` is given,
            else False.

        Returns
        -------
        IRMResult
            Stopped early (Ctrl-C, ``time_budget``) or not mixing yet, its chains go on with
            :meth:`IRMResult.resume`.

        Warns
        -----
        inference.diagnostics.MixingWarning
            With two or more chains, when a label-invariant quantity does not mix (see
            :meth:`IRMResult.summary`).
        """
        n_chains = check_int("n_chains", n_chains, minimum=1)
        check_one_length(n_draws, n_sweeps)
        no_length = n_sweeps is None and n_draws is None
        until_mixed = check_bool("until_mixed", no_length if until_mixed is None else until_mixed)
        if n_sweeps is None:
            n_warmup = DEFAULT_WARMUP if n_warmup is None else check_int("n_warmup", n_warmup, minimum=0)
            if n_draws is None:
                n_draws = UNTIL_MIXED_DRAWS if until_mixed else DEFAULT_DRAWS
            n_sweeps = n_warmup + check_int("n_draws", n_draws, minimum=1)
        else:
            n_sweeps = check_int("n_sweeps", n_sweeps, minimum=1)
            n_warmup = n_sweeps // 2 if n_warmup is None else check_int("n_warmup", n_warmup, minimum=0,
                                                                          maximum=n_sweeps - 1)
        sweeps_per_call = check_int("sweeps_per_call", sweeps_per_call, minimum=1)
        check_bool("keep_assignments", keep_assignments)
        check_bool("progress", progress)
        deadline = deadline_after(time_budget)
        key = check_key("key", key)
        self.check_data(data)
        arrays = data.to_arrays()
        continuation = _IRMContinuation(self, *key_as_data(key), _relational_digest(arrays), n_chains, n_warmup,
                                        bool(keep_assignments), sweeps_per_call)
        return self._draw(continuation, data, arrays, n_sweeps=n_sweeps, deadline=deadline, progress=progress,
                          until_mixed=until_mixed)

    def _draw(self, continuation: "_IRMContinuation", data: RelationalData, arrays: Any, *, n_sweeps: int,
              deadline: float | None, progress: bool, previous: "IRMResult | None" = None,
              sweeps_per_call: int | None = None, until_mixed: bool = False) -> "IRMResult":
        """Sweeps 0 .. ``n_sweeps`` - 1 of the chains, continuing ``previous`` where it stopped (at its
        capacities) when given: the result :meth:`sample` and :meth:`IRMResult.resume` return.

        A continued chain that outgrows the capacities goes on with twice them, as one longer run
        would have (so the draws stay that run's). With
        ``until_mixed`` the run ends as soon as the draws so far mix (asked as they grow by a
        tenth, :class:`inference.chains.StopRule`).
        """
        start = time.perf_counter()
        schema = data.schema
        c = continuation
        keys = jax.random.split(key_from_data(c.key_data, c.key_impl), c.n_chains)
        hidden_cells = arrays.entries[0][:1]

        def stop_rule(first_sweep: int, capacities: tuple) -> StopRule:
            """Whether the draws mix, for a run from ``first_sweep`` (continuing ``previous`` if > 0)."""
            before = previous if first_sweep else None

            def mixed(so_far: Any) -> bool:
                result = _assemble(c, schema, arrays, so_far, capacities=capacities, scale=c.scale,
                                   stopped_by="n_draws", seconds=0.0, first_sweep=first_sweep, previous=before)
                return diagnostics.mixes_to_stop(result.mixing)  # a constant, after enough draws

            return StopRule(mixed, draws_before=before.log_joint.shape[1] if before is not None else 0)

        common = dict(n_sweeps=n_sweeps, n_warmup=c.n_warmup, relation=0, keep_assignments=c.keep_assignments,
                      sweeps_per_call=sweeps_per_call or c.sweeps_per_call, deadline=deadline, progress=progress,
                      stop_rule=stop_rule if until_mixed else None)
        output, capacities, scale, stopped_by, first_sweep = self._run(
            _run_chains_in_calls, keys, data, arrays, hidden_cells, schema, scale=c.scale,
            resume_from=(previous._final, c.next_sweep) if previous is not None else None, **common)
        seconds = time.perf_counter() - start + (previous.seconds if previous is not None else 0.0)
        if first_sweep == 0:  # a fresh run
            previous = None
        result = _assemble(c, schema, arrays, output, capacities=capacities, scale=scale, stopped_by=stopped_by,
                           seconds=seconds, first_sweep=first_sweep, previous=previous)
        if result.log_joint.shape[1] == 0:  # stopped during warm-up, as DPMixture.fit says
            warnings.warn(f"InfiniteRelational.sample: {NO_DRAWS}", RuntimeWarning, stacklevel=user_stacklevel())
        else:  # one chain too, and too few draws to judge (as DPMixture.fit): its card says what this says
            result._warned = diagnostics.warn_if_not_mixing(result.mixing, stacklevel=user_stacklevel())
        return result

    def predict_held_out(self, data: RelationalData, hidden: Any, *, key: Any, relation: int | str | None = None,
                         n_chains: int = 2, n_sweeps: int | None = None, n_warmup: int | None = None,
                         until_mixed: bool | None = None, cases_per_call: int = 25, time_budget: float | None = None,
                         progress: bool = True, _for_result: bool = False) -> np.ndarray:
        """For each case, sample with that case's cells hidden and average their predictive.

        Parameters
        ----------
        hidden : int array (n_cases, n_hidden) — positions in ``data.relations[relation].entries``,
            -1 for padding (see :meth:`LatentClassRelational.predict_held_out`).
        key : jax PRNG key — case c, chain k uses ``jax.random.split(key, (n_cases, n_chains))[c, k]``
        n_chains : int — chains per case
        n_sweeps : int, optional — sweeps per chain; with ``until_mixed``, the most (default
            :data:`HELD_OUT_UNTIL_MIXED_SWEEPS`, 5,000); given alone, exactly that many
            (``until_mixed=False`` alone: :data:`HELD_OUT_SWEEPS`, 200, the default until 2026-12-06)
        n_warmup : int, optional — sweeps not averaged (default: the first half; with
            ``until_mixed``, the first half of the sweeps run so far, so the warm-up grows with
            the run)
        until_mixed : bool, optional — each case's chains run until they mix (the default when
            ``n_sweeps`` is not given, as for :meth:`sample`), asked about their log joint after
            every segment of sweeps (at most
            :data:`~zoo.relational._infinite_chains.CASE_SEGMENTS` segments): R-hat at most 1.01
            and bulk ESS at least :data:`CASE_ESS_MIN` over the kept sweeps. A case ends where it
            first passes (its prediction averages its sweeps up to there, whatever the other cases
            of its call run after), so the predictions do not depend on ``cases_per_call``; a case
            that does not pass ends after ``n_sweeps`` and counts in the warning. On MovieLens
            (500 users, a fifth of the ratings hidden, 2 chains, 2 cores) one fold passed after
            1,250 sweeps (104 s), and in three folds of five the chains were still apart after
            4,000 (``notebooks/relational_ratings.ipynb``). With Ctrl-C or the time budget the
            cases of the running call end with the sweeps they have, and a ``RuntimeWarning`` says
            how many cases and sweeps.
        cases_per_call : int — at most this many cases' chains per jitted call (cut evenly; on the
            CPU the predictions do not depend on it, bit for bit; on a GPU a batch of another size
            reduces in another order, as for the LRM). A call in which a chain outgrows its
            capacity runs again at twice it (up to the domains' sizes), which later calls keep; a
            chain's draws do not depend on its capacity, so the cases finished before stand (until
            2026-12-08 every case ran again). Where memory cannot hold the grown capacity, the cases
            stop there with a ``RuntimeWarning``, those finished kept. Between calls Ctrl-C is
            acted on: the first one returns the cases finished by the end of the current call, the
            others NaN, with a ``RuntimeWarning`` saying how many were run; a second one abandons
            with ``KeyboardInterrupt``.
        time_budget : float, optional — seconds; the cases stop after the call in which they ran
            out, as after Ctrl-C
        progress : bool — show a tqdm progress bar of the cases, advanced after every call

        Returns
        -------
        (n_cases, n_hidden, |r|) predictive probabilities averaged over chains and kept sweeps (NaN
        rows for padding, and for every cell of a case not run after Ctrl-C or the time budget).

        Warns
        -----
        inference.diagnostics.MixingWarning
            With two or more chains, when the chains of some cases do not agree on the log joint
            (rank-normalised R-hat above :data:`CASE_RHAT_LIMIT`, 1.1), with how many and the median
            and largest R-hat: their predictions average chains in separate modes. On the karate
            club, 2 chains × 200 sweeps (half warm-up) left 49 of 100 cases above 1.1 with Gibbs
            alone and 27 with ten split–merge moves per sweep (``n_split_merge=10``).

        See also
        --------
        IRMResult.predict_held_out : the same predictions from one run on all the data, its draws
            reweighted per case (PSIS), with only the cases it cannot reweight run here.
        """
        n_chains = check_int("n_chains", n_chains, minimum=1)
        if n_sweeps is not None:
            n_sweeps = check_int("n_sweeps", n_sweeps, minimum=1)
        until_mixed = check_bool("until_mixed", n_sweeps is None if until_mixed is None else until_mixed)
        if n_sweeps is None:
            n_sweeps = HELD_OUT_UNTIL_MIXED_SWEEPS if until_mixed else HELD_OUT_SWEEPS
        if n_warmup is not None:
            n_warmup = check_int("n_warmup", n_warmup, minimum=0, maximum=n_sweeps - 1)
        cases_per_call = check_int("cases_per_call", cases_per_call, minimum=1)
        check_bool("progress", progress)
        deadline = deadline_after(time_budget)
        key = check_key("key", key)
        self.check_data(data)
        arrays = data.to_arrays()
        schema = data.schema
        relation = check_relation("relation", relation, tuple(cells.name for cells in data.relations))
        hidden = check_mirrors(_check_hidden(hidden, data.relations[relation].n_observed), arrays, schema, relation)
        keys = jax.random.split(key, (hidden.shape[0], n_chains))
        settings = self._settings()
        flat = flat_cells(data) if settings["backend"] == "numba" else None
        scale = 1

        def run_call(positions, stopping):
            nonlocal scale
            capacities = self._capacities(schema, scale)
            self._check_memory(arrays, schema, capacities, len(positions) * n_chains, 0, False)
            case_hidden = hidden[positions]
            case_arrays = arrays._replace(weights=_case_weights(arrays, case_hidden, relation))
            cells = arrays.entries[relation][jnp.asarray(np.where(case_hidden < 0, 0, case_hidden))]
            while True:  # a call in which a chain outgrows its capacity runs again at twice it
                options = dict(schema=schema, capacities=capacities, settings=settings, n_sweeps=n_sweeps,
                               relation=relation)
                if until_mixed:
                    run = _run_cases_until_mixed(keys[positions], case_arrays, flat, cells, n_warmup=n_warmup,
                                                 mixed=_case_mixes, stopping=stopping, **options)
                    overflow = run is None
                else:
                    warmup = n_sweeps // 2 if n_warmup is None else n_warmup
                    output = _run_cases(keys[positions], case_arrays, flat, cells, n_warmup=warmup,
                                        keep_assignments=False, **options)
                    overflow = np.any(np.asarray(output.final.overflow))
                if not overflow:
                    break
                bigger, shortfall = self._grown_capacities(arrays, schema, capacities, scale,
                                                           len(positions) * n_chains, 0, False)
                if bigger is None:
                    return None, (f"a chain outgrew capacities {capacities} and memory could not hold twice them "
                                  f"({shortfall})")
                scale *= 2
                capacities = bigger
            if until_mixed:
                for position, case_joint in zip(positions, run.log_joint):
                    log_joint[position] = case_joint
                if run.stopped is not None:
                    stopped.append(run.stopped)
                return run.predictive, None
            for position, case_joint in zip(positions, np.asarray(output.info.log_joint)[:, :, warmup:]):
                log_joint[position] = case_joint
            return np.asarray(output.predictive).mean(axis=1), None

        probs = np.full(hidden.shape + (schema.n_values[relation],), np.nan, np.dtype(arrays.weights[0].dtype))
        log_joint = [None] * hidden.shape[0]  # per case: (chains, kept sweeps)
        stopped = []  # (reason, cases, sweeps) of a call whose cases Ctrl-C or the time budget ended unmixed
        _run_case_calls(run_call, probs, cases_per_call, caller="predict_held_out", deadline=deadline,
                        progress=progress)
        if stopped:  # the last call run, whose stopping() ended it
            reason, n_stopped, sweeps = stopped[-1]
            plural = n_stopped > 1
            warnings.warn(f"predict_held_out: {STOPPED_BY[reason]} while {n_stopped} case{'s' if plural else ''} ran "
                          f"{'their' if plural else 'its'} chains until they mix: they ended after {sweeps} "
                          f"sweeps (of at most {n_sweeps}), before they mixed", RuntimeWarning,
                          stacklevel=user_stacklevel())
        finished = np.isfinite(probs.reshape(probs.shape[0], -1)).any(axis=1)  # not stopped, not started over
        log_joint = [case if done else None for case, done in zip(log_joint, finished)]
        _warn_if_cases_do_not_mix(log_joint, n_sweeps=n_sweeps, n_split_merge=self.n_split_merge,
                                  for_result=_for_result, few_hidden=int((hidden >= 0).sum(axis=1).max()) <= 2,
                                  until_mixed=until_mixed)
        probs[hidden < 0] = np.nan
        return probs


#: The most sweeps per chain of a held-out case run until its chains mix, by default
#: (:meth:`InfiniteRelational.predict_held_out`).
HELD_OUT_UNTIL_MIXED_SWEEPS = 5_000
#: Sweeps per chain of a held-out case given ``until_mixed=False`` alone.
HELD_OUT_SWEEPS = 200

#: R-hat of a held-out case's log joint above which its chains are said to sit in separate modes
#: (:meth:`InfiniteRelational.predict_held_out`).
CASE_RHAT_LIMIT = 1.1


#: Bulk ESS of a held-out case's log joint over its kept sweeps that
#: ``InfiniteRelational.predict_held_out(until_mixed=True)`` asks for, with R-hat at most 1.01.
CASE_ESS_MIN = 100


def _case_mixes(log_joint: np.ndarray) -> bool:
    """Whether a held-out case's chains mix: their log joint (chains, kept sweeps) has a
    rank-normalised R-hat of at most :data:`inference.diagnostics.RHAT_MAX` and a bulk ESS of at
    least :data:`CASE_ESS_MIN`, or is one constant over as many draws in all as that ESS would need
    (as :func:`inference.diagnostics.mixes_to_stop` passes a constant)."""
    if log_joint.shape[1] < diagnostics.MIN_DRAWS:
        return False
    if np.ptp(log_joint) == 0:
        return log_joint.size >= CASE_ESS_MIN
    if not diagnostics.rank_split_rhat(log_joint) <= diagnostics.RHAT_MAX:
        return False
    return bool(az.ess(np.asarray(log_joint, float), method="bulk") >= CASE_ESS_MIN)


def _warn_if_cases_do_not_mix(log_joint: Any, *, n_sweeps: int, n_split_merge: int,
                              for_result: bool = False, few_hidden: bool = True, until_mixed: bool = False) -> None:
    """Say (``MixingWarning``) when the chains of held-out cases do not agree on the log joint.

    ``log_joint``: per case (chains, kept draws), None or NaN for the cases not run. With ``few_hidden``
    (leave-one-out: a cell and its mirror at most) the advice names the reweighted draws of one run
    (:meth:`IRMResult.predict_held_out`); ``for_result``: the cases such a result runs again.
    A case counts when the rank-normalised split R-hat of its log joint exceeds :data:`CASE_RHAT_LIMIT`: its prediction
    averages chains in separate modes, so a loss computed from it carries their disagreement.
    The limit is looser than the 1.01 of a final analysis (Vehtari et al. 2021), which a case's
    few hundred draws per chain seldom reach even where the chains do mix. With ``until_mixed``
    (the cases ran until they passed :func:`_case_mixes`, or ``n_sweeps``) a case counts when it
    did not pass.
    """
    run = [np.asarray(case) for case in log_joint if case is not None and not np.isnan(case).any()]
    run = [case for case in run if case.shape[0] >= 2 and case.shape[1] >= diagnostics.MIN_DRAWS]
    if not run:
        return
    rhat = np.array([diagnostics.rank_split_rhat(case) for case in run])
    if until_mixed:
        apart = sum(not _case_mixes(case) for case in run)
        rule = (f"within the sweeps they ran: R-hat of the log joint above {diagnostics.RHAT_MAX} or its bulk ESS "
                f"below {CASE_ESS_MIN}")
        longer = ", the most each case ran until its chains mixed"
    else:
        apart = int(np.sum(rhat > CASE_RHAT_LIMIT))
        rule = f"R-hat of the log joint above {CASE_RHAT_LIMIT}"
        longer = "; or until_mixed=True, each case until its chains mix"
    if not apart:
        return
    moves = "" if n_split_merge else ", or split-merge moves (InfiniteRelational(n_split_merge=10))"
    caller = ("IRMResult.predict_held_out (the cases run again)" if for_result
              else "InfiniteRelational.predict_held_out")
    one_run = "."
    if few_hidden and not for_result:
        one_run = ("; or run the model once on all the data until its chains mix (result = model.sample(data, "
                   "key=...)) and predict from that run (result.predict_held_out, or the result in place of the "
                   "model in leave_one_out_log_loss), which reweights its draws per case and runs again only the "
                   "cases it cannot reweight.")
    warnings.warn(
        f"{caller}: the chains of {apart} of {rhat.size} cases do not mix ({rule}; R-hat median "
        f"{np.median(rhat):.3f}, largest {rhat.max():.3f}; above 1.01 in {int(np.sum(rhat > 1.01))}): their "
        f"predictions average chains in separate modes, and a loss computed from them carries that. Run more "
        f"sweeps per case (n_sweeps, now {n_sweeps}{longer}){moves}{one_run}",
        diagnostics.MixingWarning, stacklevel=user_stacklevel())


def _relational_digest(arrays: Any) -> str:
    """Digest of a :class:`~zoo.relational.data.RelationalArrays` (cells, values, which cells are seen,
    blankets). The IRM reads only whether a cell's weight is positive, so the digest does too: a
    symmetric relation's cells of weight ½ (since 2026-12-07) digest as the 1 of results saved before,
    which therefore still resume."""
    seen = arrays._replace(weights=tuple(np.where(np.asarray(w) > 0, 1, 0).astype(np.asarray(w).dtype)
                                         for w in arrays.weights))
    return arrays_digest(*(np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(seen)))


def _assemble(c: "_IRMContinuation", schema: Any, arrays: Any, output: Any, *, capacities: tuple, scale: int,
              stopped_by: str, seconds: float, first_sweep: int, previous: "IRMResult | None") -> "IRMResult":
    """The result of a run's ``output`` (its sweeps from ``first_sweep`` on), after ``previous``'s draws."""
    output = jax.device_get(output)
    n_run = output.info.log_joint.shape[1]  # fewer than asked after Ctrl-C, the time budget or until_mixed
    warm = min(max(c.n_warmup - first_sweep, 0), n_run)  # warm-up sweeps among those run now
    kept = slice(warm, n_run)
    names = schema.domain_names
    parts = dict(
        n_clusters={name: np.asarray(output.info.n_clusters[:, kept, d]) for d, name in enumerate(names)},
        concentrations={name: np.asarray(output.info.concentrations[:, kept, d]) for d, name in enumerate(names)},
        hyper={name: np.asarray(output.info.hyper[r][:, kept]) for r, name in enumerate(schema.relation_names)},
        log_joint=np.asarray(output.info.log_joint[:, kept]),
        warmup_log_joint=np.asarray(output.info.log_joint[:, :warm]),
        assignments=({name: np.asarray(output.assignments[d][:, kept]) for d, name in enumerate(names)}
                     if c.keep_assignments else None),
        split_merge={name: np.asarray(output.info.moves[:, :, d]) for d, name in enumerate(names)},
    )
    if previous is not None:  # the earlier run's draws first
        parts = jax.tree_util.tree_map(lambda before, now: np.concatenate([before, now], axis=1),
                                       {name: getattr(previous, name) for name in parts}, parts)
    result = IRMResult(schema=schema, capacities=capacities, completed=stopped_by in ("n_draws", "mixed"),
                       stopped_by=stopped_by, seconds=seconds, _arrays=arrays, **parts)
    if previous is not None:
        result.provenance = previous.provenance
    result._final = output.final
    result._continuation = replace(c, next_sweep=first_sweep + n_run, scale=scale)
    return result


@dataclass(frozen=True)
class _IRMContinuation:
    """What :meth:`IRMResult.resume` needs: the model and the chains' key, a digest of the data, the
    run's settings, the sweeps run so far and the multiple of ``max_clusters`` they ran at."""

    model: Any
    key_data: np.ndarray
    key_impl: str | None  # inference._validation.key_as_data
    data_digest: str
    n_chains: int
    n_warmup: int
    keep_assignments: bool
    sweeps_per_call: int
    next_sweep: int = 0
    scale: int = 1


@dataclass(repr=False)
class IRMResult(Described):
    """Draws of an IRM run (after warm-up), as (chain, draw, ...) arrays.

    Attributes
    ----------
    schema : RelationalSchema
    capacities : tuple of int — K_max per domain the run needed
    n_clusters, concentrations : dict domain name → (chain, draw)
    hyper : dict relation name → (chain, draw, |r|)
    log_joint : (chain, draw)
    warmup_log_joint : (chain, n_warmup)
    assignments : dict domain name → (chain, draw, n_D) int, or None
    completed : bool — False when Ctrl-C or the time budget stopped the run: the arrays hold the
        sweeps finished (no draws at all when it came during warm-up)
    stopped_by : str or None — why the run ended (:data:`inference.chains.STOPPED_BY`): ``"n_draws"``
        (every sweep asked for ran), ``"mixed"`` (``until_mixed`` found the chains mixed),
        ``"interrupted"`` (Ctrl-C) or ``"time_budget"``; None in a result built by hand
    seconds : float — wall time of the run, compilation included (after :meth:`resume`, the
        times of the run and its continuations added up); bulk ESS per second divides by it
    split_merge : dict domain name → int (chain, sweep, 4), or None — every sweep's split–merge
        moves of the domain, warm-up included (splits proposed, accepted, merges proposed,
        accepted); :attr:`split_merge_acceptance` sums them
    provenance : dict — what made the draws (versions, JAX backend, CPU), taken when they were
        drawn (:func:`inference.provenance.provenance`); :meth:`to_inference_data` puts it in
        the attributes

    A result returned by :meth:`InfiniteRelational.sample` keeps its chains' last states and can
    be continued with :meth:`resume`.
    """

    schema: RelationalSchema
    capacities: tuple
    n_clusters: dict
    concentrations: dict
    hyper: dict
    log_joint: np.ndarray
    warmup_log_joint: np.ndarray
    assignments: dict | None
    completed: bool = True
    stopped_by: str | None = field(default=None, compare=False)
    seconds: float = field(default=0.0, compare=False)
    split_merge: dict | None = field(default=None, repr=False)
    provenance: dict = field(default_factory=provenance, repr=False, compare=False)
    _arrays: Any = field(default=None, repr=False)
    _warned: bool = field(default=False, repr=False, compare=False)  # whether sample() issued its MixingWarning
    # What resume() needs (None in results built by hand): the chains' last states and the run's record.
    _final: Any = field(default=None, repr=False, compare=False)
    _continuation: _IRMContinuation | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict:
        """The result's fields for pickling, with ``_warned`` reset: the warning was issued to the
        session that made the result, and one whose chains do not mix, loaded in another, warns
        again in :meth:`summary`."""
        return {**self.__dict__, "_warned": False}

    def resume(self, data: RelationalData, *, n_draws: int, sweeps_per_call: int | None = None,
               time_budget: float | None = None, progress: bool = True, until_mixed: bool = False) -> "IRMResult":
        """Continue these chains for ``n_draws`` more kept sweeps each, as one longer run would have.

        For chains that do not mix yet (the :class:`~inference.diagnostics.MixingWarning` of
        :meth:`InfiniteRelational.sample` says "Run more sweeps"), or that Ctrl-C or a
        ``time_budget`` stopped: the chains go on from their last state with the key of the run,
        finishing the warm-up first if it was cut short, and the new draws are appended to these.
        With the same versions, backend, float width and CPU (:mod:`inference.provenance`) and JAX's
        default ``jax_threefry_partitionable``, the result is bit for bit the one
        :meth:`InfiniteRelational.sample` gives for all the sweeps at once (``n_sweeps`` the warm-up
        plus every draw, the same ``n_warmup``); elsewhere the continuation is valid but not those
        bits, and a :class:`~inference.provenance.ProvenanceWarning` says so. A chain that outgrows
        the capacities while continued goes on with twice them, as that longer run would have.

        Parameters
        ----------
        data : RelationalData
            The data of the run (checked against a digest kept by the result).
        n_draws : int
            Kept sweeps to add per chain.
        sweeps_per_call : int, optional
            At most this many sweeps per jitted call (default: the run's; the draws do not depend
            on it). Ctrl-C is acted on between calls, as in :meth:`InfiniteRelational.sample`.
        time_budget : float, optional
            Seconds; the run stops after the call in which they ran out.
        progress : bool
            Show a tqdm progress bar of the sweeps.
        until_mixed : bool
            End as soon as the draws of both runs mix, as :meth:`InfiniteRelational.sample`'s
            ``until_mixed`` (``n_draws`` is then the most to add).

        Returns
        -------
        IRMResult
            Every draw of both runs. This result is unchanged.
        """
        continuation = getattr(self, "_continuation", None)  # results pickled before it have none
        if continuation is None or self._final is None:
            raise ValueError("result: only a result returned by InfiniteRelational.sample or resume() can be resumed "
                             "(this one was built by hand, or restored without what it needs)")
        n_draws = check_int("n_draws", n_draws, minimum=1)
        if sweeps_per_call is not None:
            sweeps_per_call = check_int("sweeps_per_call", sweeps_per_call, minimum=1)
        check_bool("progress", progress)
        until_mixed = check_bool("until_mixed", until_mixed)
        deadline = deadline_after(time_budget)
        model = continuation.model
        check_same_float_width(self.provenance, "result: these chains")
        model.check_data(data)
        arrays = data.to_arrays()
        if data.schema != self.schema or _relational_digest(arrays) != continuation.data_digest:
            raise ValueError("data: not the data these chains were run on (other "
                             + ("cells, values or weights)" if data.schema == self.schema else "domains or relations)"))
        warn_if_made_elsewhere(self.provenance, "result: these chains", saved_word="then", current_word="now",
                               stacklevel=user_stacklevel())
        n_sweeps = max(continuation.next_sweep, continuation.n_warmup) + n_draws
        return model._draw(continuation, data, arrays, n_sweeps=n_sweeps, deadline=deadline, progress=progress,
                           previous=self, sweeps_per_call=sweeps_per_call, until_mixed=until_mixed)

    @property
    def _n_warmup(self) -> int:
        """Warm-up sweeps per chain that the run kept the log joints of (for the card and ArviZ's attrs)."""
        return int(np.shape(self.warmup_log_joint)[1]) if np.ndim(self.warmup_log_joint) == 2 else 0

    def _card(self) -> Card:
        continuation = getattr(self, "_continuation", None)
        card = Card(f"IRMResult of {continuation.model!r}" if continuation is not None else "IRMResult")
        card.add("domains", [f"{name} ({size:,})" for name, size in
                             zip(self.schema.domain_names, self.schema.domain_sizes)])
        card.add("relations", list(self.schema.relation_names))
        n_chains, n_draws = np.shape(self.log_joint)[:2] if np.ndim(self.log_joint) == 2 else (0, 0)
        # A run stopped in its warm-up has run part of it: the card names the warm-up it was to run.
        planned = getattr(continuation, "n_warmup", None) if n_draws == 0 else None
        card.add("chains", chains_text(n_chains=n_chains, n_draws=n_draws,
                                       n_warmup=self._n_warmup if planned is None else planned, thin=1,
                                       seconds=self.seconds, completed=self.completed,
                                       stopped_by=self.stopped_by))
        if n_draws == 0:
            card.add("draws", "none: the run stopped during its warm-up"
                     + (f"; {RESUME_CALL} continues it" if continuation is not None else ""))
        else:
            for name, values in self.n_clusters.items():
                card.add(f"clusters of {name}", quantity_text(values))
            for name, values in (self.concentrations or {}).items():
                card.add(f"α of {name}", quantity_text(values, spec=".3g"))
            card.add("log joint", quantity_text(self.log_joint, spec=",.1f"))
            acceptance = self.split_merge_acceptance
            if len(acceptance):
                card.add("split-merge accepted", [f"{name}: splits {row.splits_rate:.2g}, merges {row.merges_rate:.2g}"
                                                  for name, row in acceptance.iterrows()])
            add_mixing(card, self.mixing)
        card.add("made with", made_with(getattr(self, "provenance", None)))
        card.add("see", ["result.summary()", "result.point_estimate()", "result.map_partition()",
                         "result.predict_proba(cells, relation)",
                         "leave_one_out_log_loss(result, data, key=...)",
                         "result.to_inference_data(assignments=True)"]
                 + ([RESUME_CALL] if continuation is not None else []))
        return card

    @property
    def split_merge_acceptance(self):
        """Per domain, the split–merge moves of the whole run (warm-up included): splits and
        merges proposed and accepted, and the fraction accepted (a ``pandas.DataFrame``; NaN where
        none was proposed). Empty without moves."""
        import pandas as pd

        rows = {}
        for name, counts in (self.split_merge or {}).items():
            total = np.asarray(counts).reshape(-1, len(MOVE_STATISTICS)).sum(axis=0)
            if not total.any():
                continue
            row = dict(zip(MOVE_STATISTICS, total.tolist()))
            for kind in ("splits", "merges"):
                proposed = row[f"{kind}_proposed"]
                row[f"{kind}_rate"] = row[f"{kind}_accepted"] / proposed if proposed else float("nan")
            rows[name] = row
        return pd.DataFrame.from_dict(rows, orient="index")

    def to_inference_data(self, *, assignments: bool = False):
        """ArviZ ``InferenceData`` of the label-invariant quantities (R-hat, ESS apply).

        Its posterior holds ``n_clusters_<domain>``, ``concentration_<domain>``,
        ``hyper_<relation>`` (over ``<relation>_value``) and ``log_joint``; its
        ``warmup_posterior`` the warm-up sweeps' ``log_joint``; its ``sample_stats`` (and
        ``warmup_sample_stats``) every sweep's split–merge moves of each domain,
        ``split_merge_<domain>`` over ``move`` (``MOVE_STATISTICS``), where it made any. With
        ``assignments=True`` the posterior also holds each domain's cluster labels,
        ``assignments_<domain>`` (chain, draw, ``<domain>_individual``): what
        :func:`zoo.io.save_chains` should keep of a run whose clusters are to be read again
        (:meth:`from_inference_data`, the report). The labels are exchangeable, so ArviZ's R-hat
        and ESS of them mean nothing; leave them out of ``az.summary``
        (``var_names=["~assignments"], filter_vars="like"``).
        """
        check_bool("assignments", assignments)
        posterior = {f"n_clusters_{name}": values for name, values in self.n_clusters.items()}
        posterior.update({f"concentration_{name}": values for name, values in self.concentrations.items()})
        posterior.update({f"hyper_{name}": values for name, values in self.hyper.items()})
        posterior["log_joint"] = self.log_joint
        dims = {f"hyper_{name}": [f"{name}_value"] for name in self.hyper}
        if assignments:
            self._check_draws()
            posterior.update({f"{ASSIGNMENTS_PREFIX}{name}": np.asarray(draws, np.int32)
                              for name, draws in self.assignments.items()})
            dims.update({f"{ASSIGNMENTS_PREFIX}{name}": [f"{name}_individual"] for name in self.assignments})
        groups = {"warmup_posterior": {"log_joint": np.asarray(self.warmup_log_joint)}} if self._n_warmup else {}
        n_warmup, n_draws = self._n_warmup, np.shape(self.log_joint)[1]
        moves = {f"split_merge_{name}": np.asarray(counts) for name, counts in (self.split_merge or {}).items()
                 if np.shape(counts)[1] == n_warmup + n_draws}  # every sweep's moves, the warm-up's first
        if moves:
            dims.update({name: ["move"] for name in moves})
            groups["sample_stats"] = {name: counts[:, n_warmup:] for name, counts in moves.items()}
            if n_warmup:
                groups["warmup_sample_stats"] = {name: counts[:, :n_warmup] for name, counts in moves.items()}
        idata = diagnostics.from_dict_in_order(posterior=posterior, dims=dims, coords={"move": list(MOVE_STATISTICS)},
                                               save_warmup=bool(n_warmup), **groups)
        idata.posterior.attrs.update(n_warmup=self._n_warmup, thin=1, completed=int(self.completed),
                                     sampling_seconds=float(self.seconds))  # as DPMixture's and SCDP's
        if self.stopped_by is not None:  # None: built by hand, or pickled before it (the class default)
            idata.posterior.attrs["stopped_by"] = self.stopped_by
        idata.posterior.attrs.update(getattr(self, "provenance", {}))  # none in results pickled before it
        return idata

    @classmethod
    def from_inference_data(cls, idata: Any, data: RelationalData) -> "IRMResult":
        """The result again from :meth:`to_inference_data` ``(assignments=True)``, e.g. the
        ``chains.nc`` that ``python -m zoo fit irm`` writes (:func:`zoo.io.load_chains`), and the
        data it was run on: its summary, partitions, predictions and report as the run's own.

        What the file does not hold is not restored: the chains' last states (continue a run from a
        checkpoint, :func:`zoo.io.save_checkpoint`) and the model.
        """
        if not isinstance(idata, az.InferenceData) or "posterior" not in idata.groups():
            raise TypeError(f"idata: expected an arviz.InferenceData with a posterior, got {type(idata).__name__}")
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        posterior, schema = idata.posterior, data.schema
        wanted = ([f"{kind}_{name}" for name in schema.domain_names
                   for kind in ("n_clusters", "concentration", ASSIGNMENTS_PREFIX.rstrip("_"))]
                  + [f"hyper_{name}" for name in schema.relation_names] + ["log_joint"])
        missing = [name for name in wanted if name not in posterior.data_vars]
        if missing:
            held = ("" if any(str(name).startswith(ASSIGNMENTS_PREFIX) for name in posterior.data_vars) else
                    "; an IRM's chains keep their clusters with to_inference_data(assignments=True)")
            raise ValueError(f"idata: no {', '.join(missing)} in its posterior, so not the chains of an IRM run on "
                             f"data with domains {list(schema.domain_names)} and relations "
                             f"{list(schema.relation_names)}{held}")
        for name, size in zip(schema.domain_names, schema.domain_sizes):
            held = posterior[f"{ASSIGNMENTS_PREFIX}{name}"].shape[-1]
            if held != size:
                raise ValueError(f"data: domain {name!r} has {size} individuals, where the chains clustered {held}")
        for name, size in zip(schema.relation_names, schema.n_values):
            held = posterior[f"hyper_{name}"].shape[-1]
            if held != size:
                raise ValueError(f"data: relation {name!r} has {size} values, where the chains' has {held}")
        values = {name: np.asarray(array.values) for name, array in posterior.data_vars.items()}
        n_chains = values["log_joint"].shape[0]
        warmup = (np.asarray(idata.warmup_posterior["log_joint"].values) if "warmup_posterior" in idata.groups()
                  else np.zeros((n_chains, 0)))
        attrs = posterior.attrs
        moves = {}
        for name in schema.domain_names:  # every sweep's split-merge moves, where the chains kept them
            stats = [getattr(idata, group)[f"split_merge_{name}"].values for group in ("warmup_sample_stats",
                                                                                      "sample_stats")
                     if group in idata.groups() and f"split_merge_{name}" in getattr(idata, group)]
            if stats:
                moves[name] = np.concatenate(stats, axis=1).astype(np.int32)
        assignments = {name: values[f"{ASSIGNMENTS_PREFIX}{name}"].astype(np.int32) for name in schema.domain_names}
        result = cls(schema=schema,
                     capacities=tuple(int(draws.max()) + 1 for draws in assignments.values()),
                     n_clusters={name: values[f"n_clusters_{name}"] for name in schema.domain_names},
                     concentrations={name: values[f"concentration_{name}"] for name in schema.domain_names},
                     hyper={name: values[f"hyper_{name}"] for name in schema.relation_names},
                     log_joint=values["log_joint"], warmup_log_joint=warmup, assignments=assignments,
                     completed=bool(attrs.get("completed", True)), seconds=float(attrs.get("sampling_seconds", 0.0)),
                     stopped_by=diagnostics.stopped_by_attribute(attrs),
                     split_merge=moves or None, _arrays=data.to_arrays())
        result.provenance = {name: str(attrs[name]) for name in PROVENANCE_KEYS if name in attrs}
        return result

    def scalar_quantities(self):
        """The label-invariant quantities as scalars per draw, an ``xarray.Dataset`` with dims
        (chain, draw): ``n_clusters_<domain>``, ``concentration_<domain>``, one
        ``hyper_<relation>[v]`` per value v of a relation, ``log_joint``, and, where the run kept
        its assignments, ``partition_entropy_<domain>`` (the entropy of the domain's cluster sizes,
        :func:`inference.diagnostics.partition_entropy`: chains that hold as many clusters but cut
        the domain differently differ in it) — for :func:`inference.diagnostics.mixing_table`,
        ``az.plot_trace`` or ``az.plot_rank``."""
        import xarray as xr

        scalars = {}
        for name, array in self.to_inference_data().posterior.data_vars.items():
            extra = [dim for dim in array.dims if dim not in ("chain", "draw")]
            if not extra:
                scalars[name] = array
            else:  # hyper_<relation>, over the relation's values: one scalar per value
                scalars.update(diagnostics.scalars_per_value(name, array))
        n_draws = np.shape(self.log_joint)[1] if np.ndim(self.log_joint) == 2 else 0
        for name, draws in (self.assignments or {}).items():
            if n_draws and np.shape(draws)[1] == n_draws:
                scalars[f"partition_entropy_{name}"] = xr.DataArray(
                    diagnostics.partition_entropy(np.asarray(draws)), dims=("chain", "draw"))
        return xr.Dataset(scalars)

    @property
    def mixing(self):
        """Mean, sd, bulk and tail ESS, R-hat and a mixing status of every label-invariant quantity
        (:meth:`scalar_quantities`), without a warning: the table of
        :func:`inference.diagnostics.mixing_table` (R-hat <= 1.01 and ESS >= 400 count as mixed,
        Vehtari et al. 2021)."""
        table = diagnostics.mixing_table(self.scalar_quantities())
        moved = any(np.asarray(counts).any() for counts in (self.split_merge or {}).values())
        more = diagnostics.run_longer(RESUME_CALL if getattr(self, "_continuation", None) is not None else None,
                                      start="Run more sweeps")
        table.attrs["advice"] = (f"{more} with {MORE_MOVES}, or more chains from dispersed starts." if moved else
                                 f"{more} with {MOVES_ON}, or more chains from dispersed starts.")
        return table

    def summary(self):
        """The :attr:`mixing` table, with an :class:`inference.diagnostics.MixingWarning` naming the
        quantities that do not mix, unless :meth:`InfiniteRelational.sample` issued it already when
        it returned this result (the table's ``status`` column says the same).

        One-individual-at-a-time Gibbs sweeps change the number of clusters slowly: on Zachary's
        karate club, 4 chains of 400 sweeps leave R-hat(K) near 1.2, and 4,000 sweeps bring it to
        about 1.01 with a bulk ESS of about 120.
        """
        table = self.mixing
        if not getattr(self, "_warned", False):  # objects restored without __init__ have none
            diagnostics.warn_if_not_mixing(table, stacklevel=user_stacklevel())
        return table

    def _check_draws(self) -> None:
        """A ``ValueError`` for a result without the kept draws that its partitions and predictions use."""
        if self.assignments is None:
            raise ValueError("keep_assignments: the run did not keep the assignments")
        if np.asarray(self.log_joint).shape[-1] == 0:
            raise ValueError(NO_DRAWS)

    def point_estimate(self, loss: str = "vi") -> dict[str, np.ndarray]:
        """Per domain, the partition minimising the posterior expected ``loss`` over every kept draw
        of every chain (:func:`inference.partitions.point_partition`; ``"vi"``, the variation of
        information, or ``"binder"``), as :meth:`zoo.dirichlet.mixture.DPMixtureFit.point_estimate`
        gives for a DP mixture: a summary of all the draws, where :meth:`map_partition` is one of them.

        Returns
        -------
        dict of domain name → (n_D,) int64 labels 0..K-1 in order of first appearance.
        """
        from inference.partitions import point_partition

        self._check_draws()
        return {name: point_partition(draws, loss=loss) for name, draws in self.assignments.items()}

    def map_partition(self) -> dict[str, np.ndarray]:
        """The kept draw with the highest log joint, relabelled 0..K-1 in order of first appearance
        (one draw; :meth:`point_estimate` summarises them all)."""
        self._check_draws()
        chain, draw = most_probable_draw(self.log_joint)
        result = {}
        for name, draws in self.assignments.items():
            labels = draws[chain, draw]
            _, first = np.unique(labels, return_index=True)
            order = np.argsort(first)
            mapping = np.empty(labels.max() + 1, np.int64)
            mapping[np.unique(labels)[order]] = np.arange(order.shape[0])
            result[name] = mapping[labels]
        return result

    def predict_proba(self, cells: Any, relation: int | str | None = None) -> np.ndarray:
        """Predictive probabilities (n_cells, |r|) of cells of a relation (by position or name; may be
        left out where the data hold one), averaged over all kept draws."""
        self._check_draws()
        cells, index = check_cells(cells, relation, self.schema)
        names = self.schema.domain_names
        assignments = tuple(jnp.asarray(self.assignments[name].reshape(-1, self.assignments[name].shape[-1]))
                            for name in names)
        hyper = tuple(jnp.asarray(self.hyper[name].reshape(-1, self.hyper[name].shape[-1]))
                      for name in self.schema.relation_names)
        probs = _draw_predictive(assignments, hyper, self._arrays, jnp.asarray(cells, jnp.int32),
                                 schema=self.schema, capacities=self.capacities, relation=index)
        return np.asarray(probs).mean(axis=0)

    def psis_held_out(self, hidden: Any, relation: int | str | None = None) -> PSISHeldOut:
        """Predictions of held-out cells from these draws, by Pareto-smoothed importance sampling.

        Each case's cells are hidden by reweighting the draws of this run (on all the data) by
        1 / p(y_hidden | z, γ, y_rest), Pareto-smoothed (Vehtari et al. 2024, ArviZ's
        :func:`arviz.psislw`); exact as the draws grow, without a chain per case
        (:mod:`zoo.relational._infinite_loo`). Most use :meth:`predict_held_out`, which runs the
        unreliable cases again; this gives the diagnostics.

        Parameters
        ----------
        hidden : int array (n_cases, n_hidden) — positions in ``data.relations[relation].entries``,
            -1 for padding, as :func:`zoo.relational.evaluation.held_out_cases` makes them
        relation : int or str, optional — by position or name; may be left out where the data hold one

        Returns
        -------
        PSISHeldOut
            ``probs`` (n_cases, n_hidden, |r|), each case's Pareto ``pareto_k`` and relative
            efficiency ``reff``, and ``k_limit`` (min(1 - 1/log10 S, 0.7) for S draws) above which a
            case's estimate is unreliable (``.unreliable``).
        """
        self._check_draws()
        index = check_relation("relation", relation, self.schema.relation_names)
        hidden = _check_hidden(hidden, int(np.shape(self._arrays.entries[index])[0]) - 1)  # less the padding row
        hidden = check_mirrors(hidden, self._arrays, self.schema, index)
        return psis_held_out(self.assignments, self.hyper, self._arrays, hidden, schema=self.schema,
                             capacities=self.capacities, relation=index)

    def predict_held_out(self, data: RelationalData, hidden: Any, *, key: Any = None, relation: int | str | None = None,
                         refit: bool = True, progress: bool = True, **refit_options: Any) -> np.ndarray:
        """Held-out predictions from these draws (PSIS), with the unreliable cases run again.

        The same contract as :meth:`InfiniteRelational.predict_held_out`, so a result can stand for
        its model in :func:`~zoo.relational.evaluation.leave_one_out_log_loss`: one run that mixes
        on all the data, reweighted per case (:meth:`psis_held_out`), instead of new chains for
        every case. The cases whose Pareto k̂ exceeds the limit (their cells sway the posterior
        too much for the reweighting) are predicted by the model's own chains with their cells
        hidden (as ArviZ's ``reloo``), with ``key`` and ``refit_options``.

        Parameters
        ----------
        data : RelationalData — the data of this run (checked against the draws' data)
        hidden : int array (n_cases, n_hidden) — as for :meth:`psis_held_out`
        key : jax PRNG key, optional — for the cases run again (required when there are some)
        relation : int or str, optional — by position or name; may be left out where the data hold one
        refit : bool — run the unreliable cases again (False: keep their PSIS estimate, with a
            ``RuntimeWarning`` counting them)
        progress : bool — progress bar of the cases run again
        **refit_options : passed to :meth:`InfiniteRelational.predict_held_out` for the cases run
            again (``n_chains``, ``n_sweeps``, ``n_warmup``, ``until_mixed``, ``cases_per_call``,
            ``time_budget``; by default each runs until its chains mix)

        Returns
        -------
        (n_cases, n_hidden, |r|) predictive probabilities (NaN rows for padding).

        Warns
        -----
        inference.diagnostics.MixingWarning
            When these chains do not mix: their draws stand for the posterior only as far as
            they explore it.
        RuntimeWarning
            With ``refit=False``, when some cases' k̂ exceeds the limit; and when Ctrl-C or the
            ``time_budget`` stopped the cases run again (those not run keep their reweighted
            predictions).
        """
        refit = check_bool("refit", refit)
        check_bool("progress", progress)
        if key is not None:
            key = check_key("key", key)
        self._check_draws()
        if not isinstance(data, RelationalData):
            raise TypeError(f"data: expected a zoo.relational.RelationalData, got {type(data).__name__}")
        if data.schema != self.schema or _relational_digest(data.to_arrays()) != _relational_digest(self._arrays):
            raise ValueError("data: not the data these draws were run on; the held-out cells are hidden by "
                             "reweighting the draws of a run on all the data")
        index = check_relation("relation", relation, self.schema.relation_names)
        hidden = check_mirrors(_check_hidden(hidden, data.relations[index].n_observed), self._arrays, self.schema,
                                index)
        model = getattr(getattr(self, "_continuation", None), "model", None)
        if refit and model is None:
            raise ValueError("refit: this result does not know its model (built by hand, or restored without it); "
                             "pass refit=False")
        if np.shape(self.log_joint)[0] >= 2 and not diagnostics.mixes(self.mixing):
            warnings.warn("IRMResult.predict_held_out: the chains reweighted do not mix (result.summary() says "
                          "which quantities), so their draws stand for the posterior only as far as they explore "
                          f"it; {RESUME_CALL} runs them further", diagnostics.MixingWarning,
                          stacklevel=user_stacklevel())
        estimate = self.psis_held_out(hidden, index)
        probs = estimate.probs
        unreliable = np.flatnonzero(estimate.unreliable)
        if unreliable.size and not refit:
            warnings.warn(f"IRMResult.predict_held_out: {unreliable.size} of {hidden.shape[0]} cases have a Pareto "
                          f"k above {estimate.k_limit:.2f} (largest {np.nanmax(estimate.pareto_k):.2f}): their "
                          "importance-sampled predictions are unreliable; refit=True runs them again",
                          RuntimeWarning, stacklevel=user_stacklevel())
        elif unreliable.size:
            if key is None:
                raise ValueError(f"key: {unreliable.size} of {hidden.shape[0]} cases have a Pareto k above "
                                 f"{estimate.k_limit:.2f} and are run again, which needs a PRNG key")
            with warnings.catch_warnings():  # the cases not run are not NaN here: the warning below says so
                warnings.filterwarnings("ignore", "predict_held_out: .* the cases not run are NaN", RuntimeWarning)
                again = model.predict_held_out(data, hidden[unreliable], key=key, relation=index,
                                               progress=progress, _for_result=True, **refit_options)
            run = np.isfinite(again[:, 0]).all(axis=-1)  # not stopped by Ctrl-C or the time budget
            probs = probs.copy()
            probs[unreliable[run]] = again[run]
            if not run.all():
                warnings.warn(f"IRMResult.predict_held_out: stopped before {int((~run).sum())} of the "
                              f"{unreliable.size} cases with a Pareto k above {estimate.k_limit:.2f} were run "
                              "again; those keep their importance-sampled predictions, which are unreliable",
                              RuntimeWarning,
                              stacklevel=user_stacklevel())
        return probs
