"""Supervised clustering with the Dirichlet process (DM05: Daumé & Marcu, 2005, §3–§5).

Generative story (DM05 §3.2, eq. 1, Fig. 1), Gaussian parameterisation of §5:

    α^p ~ Gamma, α^t ~ Gamma                 (or fixed)
    c_n ~ CRP(α^p)                            publication (cluster) of reference n
    d_n ~ CRP(α^t)                            reference type of reference n, shared by all clusters
    p_k ~ G0^p = Normal(0, σ² I)              mean of publication k
    t_l ~ G0^t = Π_f Gamma(a_f, b_f)          diagonal precision of reference type l (rate b)
    r_n | c_n, d_n ~ Normal(p_{c_n}, diag(t_{d_n})^{-1})

Training references have observed clusters c_n; test references do not. The reference types
are learned from all references, so the training partition teaches the model which features
matter (high precision) and which do not. DM05 §4.1 offers two options for the test clusters:
``share_clusters=True`` lets a test reference join a training publication (one CRP over all
references); ``share_clusters=False`` gives the test references a CRP of their own (same α^p).

Three variants (DM05 §5, §7.1):

* **SCDP-1** (``model=1``): conjugate updates of DM05 Fig. 2 — Neal (2000) Algorithm 2 on both
  indicator sets, with means and precisions redrawn from their conditional posteriors.
* **SCDP-2** (``model=2``): as SCDP-1, but before each sweep the Gamma prior of the precisions is
  re-set from the spread of the current publication means (DM05 §5.1): per feature f, with
  v_k = (p_kf - p̄_f)² over the active publications, the prior mean a·s is half the mean of v_k
  and its variance a·s² the variance of v_k (s = 1 / b the scale). This is DM05's heuristic,
  not a hierarchical prior: the chain targets a moving prior.
* **SCDP-3** (``model=3``): the precisions are conditioned on the means (DM05 §5.2, eq. 3, λ = 1,
  publications ordered by size; ||p_j - p_k||²_t is measured under the type's covariance t⁻¹, see
  :func:`.conditionals._log_conditioning`), a non-conjugate model: indicator updates by Neal's Algorithm 8 with
  M = 8 auxiliary draws from the base measures (DM05 §4.2); the means by exact Gibbs (their
  conditional is Gaussian) and the precisions by Metropolis steps on log t, where DM05 use
  independence samplers with base-measure proposals (never accepted in many dimensions).

Every sweep of every variant starts with split–merge moves of the test partition
(:mod:`inference.split_merge`: sequentially allocated splits, Dahl 2003; Jain & Neal 2004, and
merges of the pairs of publications whose merge would raise the posterior most;
``n_split_merge``, by default one per two test publications that the training data lead one to
expect, at least 10, :func:`zoo.dirichlet.supervised.fit.auto_split_merge`): without them a
chain started with the test references in one publication kept them there, however far apart
the groups were.

SCDP-3 also splits and merges test publications together with the reference types' precisions
(:mod:`.precision_moves`; ``n_precision_split_merge``, 2 per sweep by default): eq. 3 ties the
cost of a new publication to the precisions, which the partition itself sets, so a chain can hold a
partition and precisions that keep every fixed-precision split too dear. As many singleton moves
follow them (one test reference split off alone, or a singleton merged back), for the references
that a feature's precision isolates once they stand alone.

SCDP-1 and -2 also redraw, once per sweep for each test reference, the publications and the
common type of it and its nearest test reference jointly, together or apart, when the two share
a type (``pair_moves``, on by default; :func:`zoo.dirichlet.supervised.sweep_xla._pair_move`): a
close pair that is either a publication of its own or part of a larger one with a type of larger
variances, or split between two wrong publications, otherwise changes only through a state where
one of them has left.

SCDP-1 and -2 can also move the reference-type partition by split–merge moves (all references,
the precisions integrated given the means; ``n_type_split_merge``, five per sweep by default for
SCDP-2, none for SCDP-1):
one-reference updates open a type only from one reference's residual, so in many dimensions a
chain otherwise keeps the number of types its first sweeps gave it (see :func:`build_kernel`
for the data where they helped and where they did not).

α^p and α^t are resampled every sweep by the Escobar–West update in the multi-group form of DM05
App. B (groups: the training and the test references when clusters are not shared).

Two layers (DESIGN.md): :func:`supervised_program` is the NumPyro program (stick-breaking
truncation, enumerated indicators) used to simulate data; :func:`build_kernel` / :func:`init`
are the BlackJAX-style Gibbs kernel that :class:`SupervisedDP` runs on many chains with
:func:`inference.chains.sample_chains`.

Distances instead of coordinates (DM05 §7.2, footnote 5): :func:`embed_distances` turns one
matrix of pairwise distances per feature into coordinates using only the distances (the Gram
matrix -½ J D² J, which is how footnote 5 computes distances between means); for Euclidean
distances of centred coordinates it returns the coordinates themselves (up to sign, which the
model ignores), so the partition posterior is the same.

Modules: :mod:`.program` (the NumPyro program), :mod:`.state` (state, data, info, initial
state), :mod:`.conditionals` (densities, parameter updates, log joint), :mod:`.sweep_xla` (the
assignment sweep; its numba twin is :mod:`inference.native.supervised_sweep`), :mod:`.split_merge`
(moves of the test partition), :mod:`.precision_moves` (SCDP-3's moves with precisions),
:mod:`.kernel` (the step), :mod:`.distances` (DM05 §7.2) and :mod:`.fit` (:class:`SupervisedDP`).
"""

from zoo.dirichlet.supervised.distances import embed_distances
from zoo.dirichlet.supervised.fit import SupervisedDP, SupervisedDPFit, auto_split_merge
from zoo.dirichlet.supervised.kernel import build_kernel
from zoo.dirichlet.supervised.program import supervised_program
from zoo.dirichlet.supervised.state import (MODELS, nearest_partners, SupervisedData, SupervisedInfo, SupervisedState, init,
                                            record_supervised)

__all__ = [
    "MODELS",
    "SupervisedState",
    "SupervisedInfo",
    "SupervisedData",
    "supervised_program",
    "init",
    "build_kernel",
    "record_supervised",
    "embed_distances",
    "SupervisedDP",
    "SupervisedDPFit",
    "auto_split_merge",
    "nearest_partners",
]
