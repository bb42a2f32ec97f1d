"""scikit-learn estimators for the zoo's models.

Each EM estimator wraps one zoo model and :func:`inference.em.tempered_em` behind the usual
``fit`` / ``transform`` / ``predict`` / ``score`` interface, so the models drop into pipelines,
grid searches and cross-validation:

* ``fit(X)`` — X is an (n_samples, n_features) array or ``scipy.sparse`` matrix. For the dyadic
  models it holds counts n(x_i, y_k) (rows are the objects x, e.g. documents; columns the objects
  y, e.g. words); for the Gaussian mixture it holds feature vectors.
* ``transform(X)`` — class posteriors of the rows of X, shape (n_samples, n_classes). New rows
  are *folded in* with the fitted class-conditional distributions held fixed (H99 §2.4, §5).
* ``predict(X)`` — the most probable class of each row.
* ``score(X)`` — mean log-likelihood per observation: for counts, Σ n log P(y|x) / Σ n with the
  folded-in P(c|x) (the negative log of the perplexity, H99 §5); for features, the mean log
  density of the points. Higher is better. For counts it rewards more classes (the fold-in sees
  the tokens it scores), so choose the number of classes by ``completion_score(X)`` instead (each
  row's tokens split, P(c|x) folded in from one part, the other scored): ``GridSearchCV(estimator,
  {"n_classes": [...]}, scoring=completion_scorer)``.

Tokens of probability 0 (count data). A maximum-likelihood fit can give a token of X
P(y|x) = 0; the count estimators do not hide it under a floor, as :func:`zoo.dyadic.predictive.heldout_evaluation`
does not: ``score`` is then -inf and ``perplexity`` inf, with a
:class:`zoo.dyadic.predictive.ZeroProbabilityWarning` saying how many tokens, unless the
hyperparameter ``floor`` scores every token at max(P(y|x), floor) (also in the fit's validation,
as ``tempered_em(..., floor=)``) or ``prior_count > 0`` fits by MAP-EM so that no prediction is 0.
``heldout_evaluation(X)`` returns the count with the log-likelihood.

Hyperparameters common to all estimators: ``schedule`` ("em" for β = 1, "tempered" for
Hofmann's tempered EM with β chosen on an internal validation split of ``valid_fraction`` of the
tokens (or rows), "auto" for the model's own schedule on such a split (annealing up for the
one-sided and cluster-abstraction models, tempered EM for the others), "annealing" for
deterministic annealing, or a schedule object from
:mod:`inference.schedules`), ``n_restarts``, ``max_iter``, ``tol``, ``random_state`` (an int
seed becomes ``jax.random.key(seed)``), ``warm_start`` (continue from the previous fit's
parameters through ``tempered_em(..., init=...)``), ``time_budget`` and ``progress``. After ``fit``
the :class:`inference.em.EMResult` is ``result_`` (save it with :func:`zoo.io.save_result`, turn
it into a report with :func:`zoo.report.write_report`).

Adding a model is one small subclass of :class:`EMEstimator` (``_build_model``,
``_posterior`` and ``_predictive_factors``) plus one entry in :data:`ESTIMATORS`.

Where things are: ``_base.py`` (:class:`EMEstimator`, the schedule names, :func:`jax_key`,
:func:`make_schedule`), ``_dyadic.py`` (the aspect, one-sided, two-sided and cluster-abstraction
estimators of count data), ``_mixture.py`` (the Gaussian mixture and the Dirichlet-process
mixture of feature vectors), ``_supervised.py`` (supervised clustering with the Dirichlet process,
DM05's SCDP: ``fit(X, y)`` clusters the rows labelled -1, learning from the others), ``_chains.py``
(what the two estimators of Gibbs chains share: warm starts that continue the chains, a
``time_budget`` spent in the warm-up); this file lists what is public.
"""

from __future__ import annotations

from typing import Any

from sklearn.base import ClusterMixin

from zoo.sklearn._base import SCHEDULES, EMEstimator, EmptyClassesWarning, completion_scorer, jax_key, make_schedule
from zoo.sklearn._dyadic import (AspectEstimator, ClusterAbstractionEstimator, OneSidedEstimator,
                                 TwoSidedEstimator)
from zoo.sklearn._mixture import DP_FAMILIES, DPMixtureEstimator, GaussianMixtureEstimator
from zoo.sklearn._supervised import UNLABELLED, SupervisedDPEstimator

__all__ = [
    "EMEstimator",
    "AspectEstimator",
    "OneSidedEstimator",
    "TwoSidedEstimator",
    "ClusterAbstractionEstimator",
    "GaussianMixtureEstimator",
    "DPMixtureEstimator",
    "SupervisedDPEstimator",
    "UNLABELLED",
    "DP_FAMILIES",
    "ESTIMATORS",
    "SCHEDULES",
    "completion_scorer",
    "EmptyClassesWarning",
    "jax_key",
    "make_schedule",
    "expected_failed_checks",
]


#: Estimators by the model names of ``python -m zoo fit MODEL``.
ESTIMATORS: dict[str, type[EMEstimator]] = {
    "aspect": AspectEstimator,
    "one-sided": OneSidedEstimator,
    "two-sided": TwoSidedEstimator,
    "cam": ClusterAbstractionEstimator,
    "gaussian-mixture": GaussianMixtureEstimator,
}


#: scikit-learn's checks (1.6 and later) that fit SupervisedDPEstimator with every row of y labelled.
_SCDP_LABELLED_CHECKS = (
    "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
    "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_complex_data", "check_dtype_object",
    "check_pipeline_consistency", "check_estimators_nan_inf", "check_estimator_sparse_tag",
    "check_estimator_sparse_array", "check_estimator_sparse_matrix", "check_estimators_pickle",
    "check_f_contiguous_array_estimator", "check_clustering", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_fit2d_1sample", "check_fit2d_1feature", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
)


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """scikit-learn checks that do not apply to ``estimator``, with the reason.

    For ``sklearn.utils.estimator_checks.parametrize_with_checks(...,
    expected_failed_checks=expected_failed_checks)``.
    """
    failures: dict[str, str] = {}
    if isinstance(estimator, SupervisedDPEstimator):
        # scikit-learn's checks give y a label for every row (or none); SCDP clusters the rows
        # labelled -1 and refuses a y without one ("y: no row to cluster"), before the check's point.
        reason = ("SCDP clusters the rows of y labelled -1 (UNLABELLED) and learns from the others; the check "
                  "labels every row, or passes no y, and the fit refuses it as it would a user's")
        failures.update(dict.fromkeys(_SCDP_LABELLED_CHECKS, reason))
    if isinstance(estimator, ClusterMixin) and getattr(estimator, "_count_data", False):
        failures["check_clustering"] = (
            "check_clustering fits standardised Gaussian blobs with negative values, which are not "
            "counts; the count models reject them (tags.input_tags.positive_only)"
        )
    return failures
