"""Gibbs kernels for Dirichlet-process mixtures: Neal (2000) Algorithms 2, 3 and 8.

The state holds the partition of N points as cluster *slots* in a fixed capacity
``max_clusters`` (K_max): ``counts[k]`` is the number of points in slot k and the slot is active
when the count is positive. Fixed shapes let one sweep (a ``lax.scan`` over the points) be
jit-compiled once and ``vmap``-ped over chains.

Algorithms (Neal 2000; DM05 §4 uses 2 and 8):

* ``"collapsed"`` — Algorithm 3: component parameters integrated out; a point joins cluster k
  with probability ∝ n_{-i,k} p(x_i | x_{k,-i}) or a new cluster ∝ α ∫ F(x_i | φ) dG0(φ).
* ``"conjugate"`` — Algorithm 2 (DM05 §4.1, Figure 2, eq. 2): explicit parameters; joining k is
  ∝ n_{-i,k} F(x_i | φ_k), a new cluster ∝ α ∫ F(x_i | φ) dG0(φ), whose φ is then drawn from
  its posterior given x_i; after the sweep every φ_k is redrawn from its posterior.
* ``"auxiliary"`` — Algorithm 8 (DM05 §4.2) with m auxiliary components drawn from G0: joining k
  is ∝ n_{-i,k} F(x_i | φ_k), auxiliary j ∝ (α / m) F(x_i | φ_j); when x_i was alone its own φ is
  the first auxiliary component. After the sweep φ_k is redrawn from its posterior when the family
  has one, otherwise updated by an independence Metropolis–Hastings sampler with G0 proposals
  (DM05 §4.2).

Speed. Everything that does not depend on the current partition is computed in bulk before the
scan: point features, the candidate components (Algorithm 2's posterior draws, Algorithm 8's
auxiliary draws), their log-likelihoods, the prior predictive of every point, and one uniform per
point. Each point update is then one (K_max, F) × (F,) product for the built-in families (see
:mod:`zoo.dirichlet.families`), an inverse-CDF draw with that single uniform and a few writes.
With ``reuse_auxiliary=True`` (Favaro & Teh 2013) Algorithm 8 keeps its auxiliary components from
one point to the next, so it needs about one draw from G0 per new cluster instead of m per point.
On CPU the sequential loop of Algorithms 2 and 8 runs by default as a numba kernel called through
an XLA custom call (``backend=`` of :func:`build_kernel`; the chains of a ``vmap`` become one call
spread over numba's threads): inside XLA's while loop each point update costs a few
microseconds of per-operation overhead, in numba a fraction of one. It scores a point only
against the clusters and the candidates it may join, and draws with the same uniform as the XLA
path, so both give the same chain (up to floating-point rounding).

Split–merge. ``n_split_merge > 0`` adds that many Metropolis–Hastings split–merge moves after
each sweep (:mod:`inference.split_merge`: sequentially allocated splits, Dahl 2003, after Jain &
Neal 2004, and merges whose pair of clusters is chosen by how much the merge would raise the
posterior). The moves work on the partition with the parameters integrated out, so they need the
family's marginal likelihoods; Algorithms 2 and 8 redraw every φ from its posterior right after
them. One-point-at-a-time Gibbs needs many sweeps to move a whole group of points between
clusters, and cannot open a cluster whose points are far from G0's typical draws; a split or
merge does it in one step.

Capacity. When a point must open a new cluster and every slot is taken, ``overflow`` is set (in
the step's info, and sticky in the state) and the step returns the partition it started from:
the sweep was not an exact Gibbs sweep and is dropped. :func:`grow_capacity` pads a state to a
larger capacity; :func:`inference.chains.sample_chains` does this automatically and re-runs the
sweeps with the same keys. Random draws are indexed by slot, point or draw number (JAX's
partitionable Threefry makes a longer leading axis extend the same values) and each point uses
one uniform, so a sweep's outcome does not depend on the capacity (up to floating-point
rounding) and the re-run continues the same chain.

Log joint (per step, for diagnostics): log p(x, z | α) with the parameters integrated out when the
family has marginal likelihoods (comparable across the three algorithms), else
log p(z | α) + Σ_i log F(x_i | φ_{z_i}) + Σ_k log G0(φ_k) (the last term when the family has a
base density).

Layout. One idea per file; this package lists what is public.

* ``_state.py`` — :class:`GibbsState`, :class:`GibbsInfo`, :func:`init`, :func:`grow_capacity`,
  :func:`log_crp_prior`, :func:`cluster_stats` and the log joint;
* ``_kernel.py`` — :func:`build_kernel` and the step it returns (sweep, split–merge moves,
  parameters, α);
* ``_sweeps.py`` — the XLA sweeps of Algorithms 2, 3 and 8 (``lax.scan`` over the points);
* :mod:`inference.native.neal_sweeps` — their numba twins for Algorithms 2 and 8 and the
  callbacks into them (with the engine's other native kernels);
* ``_slots.py`` — the inverse-CDF draw and the per-slot row operations the sweeps share.
"""

from inference.neal._kernel import build_kernel
from inference.neal._state import (
    ALGORITHMS,
    GibbsInfo,
    GibbsState,
    cluster_stats,
    grow_capacity,
    init,
    log_crp_prior,
)

__all__ = [
    "ALGORITHMS",
    "GibbsState",
    "GibbsInfo",
    "init",
    "build_kernel",
    "grow_capacity",
    "log_crp_prior",
    "cluster_stats",
]
