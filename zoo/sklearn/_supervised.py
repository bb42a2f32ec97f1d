"""Supervised clustering with the Dirichlet process (DM05's SCDP) as a scikit-learn clusterer."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin

from inference._validation import check_choice, check_int, check_real
from zoo.sklearn._base import _check_bool, _validate_features, jax_key
from zoo.sklearn._chains import ChainEstimatorMixin, check_gamma_prior

__all__ = ["SupervisedDPEstimator", "UNLABELLED"]

#: The label of the rows to cluster, as in :mod:`sklearn.semi_supervised`.
UNLABELLED = -1


class SupervisedDPEstimator(ChainEstimatorMixin, ClusterMixin, BaseEstimator):
    """Supervised clustering with the Dirichlet process (SCDP-1, -2 or -3 of DM05), as a scikit-learn
    clusterer of the unlabelled rows.

    ``fit(X, y)`` runs :class:`zoo.dirichlet.supervised.SupervisedDP`: the rows of X whose label in
    ``y`` is -1 (:data:`UNLABELLED`, as in :mod:`sklearn.semi_supervised`) are clustered, the
    others are its training data, each label one training cluster ("publication", DM05 §3). From
    them the model learns which features separate clusters (the precisions of its reference
    types) and how large clusters are, and it clusters the unlabelled rows with what it learned;
    their number of clusters is inferred. The fit is transductive: there is no ``predict`` for new
    rows (fit again with them marked -1). Centre and scale the features (DM05 §5: the priors are set
    for unit scales), e.g. with ``StandardScaler``.

    Labels are integers from 0, or strings: as scikit-learn's ``SelfTrainingClassifier`` takes
    them, string labels come in an array of dtype object (a pandas column of strings is one) in
    which the integer -1 marks the rows to cluster, e.g. ``y = np.asarray(names, dtype=object);
    y[rows_to_cluster] = -1``. An array of dtype str (``<U``), where -1 could only be the string
    "-1", is refused with that advice, and so are missing labels (None, NaN): the rows to cluster
    are marked -1, not left blank. (:class:`zoo.dirichlet.supervised.SupervisedDP` itself takes
    any labels, with the rows to cluster given apart.)

    Parameters
    ----------
    model : {1, 2, 3}, default 1
        SCDP-1 (conjugate), SCDP-2 (prior of the precisions from the spread of the cluster means)
        or SCDP-3 (precisions conditioned on the means, DM05 eq. 3); see
        :class:`zoo.dirichlet.supervised.SupervisedDP`.
    share_clusters : bool, default False
        Whether an unlabelled row may join a training cluster (DM05 §4.1); otherwise the unlabelled
        rows form clusters of their own.
    alpha_prior, alpha_types_prior : (shape, rate) or None, default (1.0, 1.0)
        Gamma priors of the concentrations α^p (clusters) and α^t (reference types), resampled
        every sweep (DM05 App. B); None keeps that concentration at 1.
    prior_variance : float, default 1.0
        σ² of the prior of the cluster means, G0^p (DM05 §5: about 1 for centred, scaled features).
    precision_shape, precision_rate : float, default 1.0, 1.0
        Gamma(shape, rate) prior of the reference types' precisions, G0^t (DM05 §5: Gam(1, 1)).
    n_chains, n_warmup, n_draws : int, default 4, 100, 250
        Chains (from dispersed starts) and their sweeps: ``n_warmup`` discarded, then ``n_draws``
        kept. Four chains of 250, 1,000 draws in all, so that chains that mix can show it: R-hat
        is trusted from a bulk and tail ESS of 400 (Vehtari et al. 2021), which 2 chains of 200
        could reach only with draws better than independent (the defaults until 2026-12-02).
    n_split_merge : int, optional
        Split–merge moves of the unlabelled rows' partition per sweep (default None: as many as the
        training data lead one to expect, :func:`zoo.dirichlet.supervised.auto_split_merge`).
    n_type_split_merge : int, optional
        SCDP-1 and -2: split–merge moves of the reference types per sweep (default None: 5 for
        SCDP-2, 0 for SCDP-1).
    pair_moves : bool, optional
        SCDP-1 and -2: joint moves of each unlabelled row and its nearest unlabelled row (default
        None: on for SCDP-1 and -2, off for SCDP-3).
    n_precision_split_merge : int, optional
        SCDP-3: split–merge moves of the unlabelled rows' partition that propose the precisions
        with it, each followed by a singleton move (default None: 2 for SCDP-3; the other models
        have none). These four settings of the moves are
        :class:`zoo.dirichlet.supervised.SupervisedDP`'s, whose docstrings say where they helped;
        a fit's mixing warning names the one to try.
    init : str or array_like of int, default "dispersed"
        The chains' starting partitions of the unlabelled rows (see
        :meth:`zoo.dirichlet.supervised.SupervisedDP.fit`): ``"dispersed"``, ``"single"``,
        ``"singletons"``, ``"kmeans"``, ``"random"``, or labels of shape (M,) or (n_chains, M) for
        the M unlabelled rows, e.g. ``estimator.fit_.assignments[:, -1]`` to restart each chain
        from its last partition.
    loss : {"vi", "binder"}, default "vi"
        Loss of the point-estimate partition of the unlabelled rows.
    random_state : None, int, numpy generator or JAX key
    time_budget : float, optional
        Seconds; the sampling stops after the call in which they ran out and the estimate is made
        from the draws finished (``fit_.result.completed`` is then False, and a fit with
        ``warm_start=True`` goes on). Spent before the first draw, ``fit`` raises a ``ValueError``
        and the estimator stays unfitted.
    progress : bool, default False
    until_mixed : bool, default False
        Stop the sampling as soon as the chains mix (every label-invariant quantity with R-hat
        ≤ 1.01 and bulk and tail ESS ≥ 400), asked each time the draws have grown by a tenth:
        ``n_draws`` is then the most to draw (give a generous one, with a ``time_budget``). With
        ``warm_start=True`` the draws of every fit so far are asked about.
    warm_start : bool, default False
        Continue the previous fit's chains for ``n_draws`` more draws each (``fit_.resume``) instead
        of starting new ones, and make the estimate from the draws of every fit so far. X, y and the
        settings that make the chains (``model``, ``share_clusters``, the priors, ``n_chains``,
        ``n_warmup`` and the four settings of the moves) must be those of the previous fit;
        ``init`` and ``random_state`` are not used again (the chains go on from where they are, with
        their own keys).

    Attributes
    ----------
    fit_ : SupervisedDPFit — the draws, with ``idata`` (ArviZ), ``summary()`` and ``mixing``
    labels_ : (n_samples,) int array, or object array for string labels
        A labelled row keeps its label. An unlabelled row gets the label of its cluster in the
        point estimate: a new label, from ``max(y) + 1`` up in the order the clusters first occur
        in X (for string labels, the integers from 0 up), or, with ``share_clusters=True``, a
        training label when the draws put the cluster's rows in that training cluster more than
        half of the time.
    n_clusters_ : int — the number of clusters of the unlabelled rows (training ones they joined included)
    alpha_, alpha_types_ : float — posterior means of α^p and α^t

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> centres = rng.normal(0, 3, (4, 2))
    >>> X = np.concatenate([centre + 0.3 * rng.normal(size=(10, 2)) for centre in centres])
    >>> y = np.repeat([0, 1, -1, -1], 10)  # two labelled groups; the last twenty rows to cluster
    >>> estimator = SupervisedDPEstimator(random_state=0)
    >>> labels = estimator.fit_predict(X, y)
    >>> bool((labels[:20] == y[:20]).all()), bool((labels[20:] >= 2).all())  # the labelled rows keep theirs
    (True, True)
    """

    _CHAIN_SETTINGS = ("model", "share_clusters", "alpha_prior", "alpha_types_prior", "prior_variance",
                       "precision_shape", "precision_rate", "n_chains", "n_warmup", "n_split_merge",
                       "n_type_split_merge", "pair_moves", "n_precision_split_merge")
    _WARM_START_CALL = "estimator.set_params(warm_start=True, until_mixed=True).fit(X, y)"

    def __init__(self, model=1, *, share_clusters=False, alpha_prior=(1.0, 1.0), alpha_types_prior=(1.0, 1.0),
                 prior_variance=1.0, precision_shape=1.0, precision_rate=1.0, n_chains=4, n_warmup=100, n_draws=250,
                 n_split_merge=None, n_type_split_merge=None, pair_moves=None, n_precision_split_merge=None,
                 init="dispersed", loss="vi", random_state=None, time_budget=None, progress=False, warm_start=False,
                 until_mixed=False):
        self.model = model
        self.share_clusters = share_clusters
        self.alpha_prior = alpha_prior
        self.alpha_types_prior = alpha_types_prior
        self.prior_variance = prior_variance
        self.precision_shape = precision_shape
        self.precision_rate = precision_rate
        self.n_chains = n_chains
        self.n_warmup = n_warmup
        self.n_draws = n_draws
        self.n_split_merge = n_split_merge
        self.n_type_split_merge = n_type_split_merge
        self.pair_moves = pair_moves
        self.n_precision_split_merge = n_precision_split_merge
        self.init = init
        self.loss = loss
        self.random_state = random_state
        self.time_budget = time_budget
        self.progress = progress
        self.warm_start = warm_start
        self.until_mixed = until_mixed

    def _estimator_calls(self) -> dict[str, str]:
        from zoo.dirichlet.supervised.fit import RESTART_CALL, RESUME_CALL

        return {
            RESUME_CALL: self._WARM_START_CALL,
            RESTART_CALL: "estimator.set_params(init=estimator.fit_.assignments[:, -1]).fit(X, y)",
            "SupervisedDP(..., ": "SupervisedDPEstimator(..., "}

    def _check_params(self) -> tuple[Any, Any, Any]:
        from zoo.dirichlet.supervised import MODELS

        if check_int("model", self.model) not in MODELS:  # an integer: 2.7 is not a model number
            raise ValueError(f"model: must be one of 1, 2, 3, got {self.model!r}")
        _check_bool("share_clusters", self.share_clusters)
        priors = [check_gamma_prior(name, getattr(self, name)) for name in ("alpha_prior", "alpha_types_prior")]
        for name in ("prior_variance", "precision_shape", "precision_rate"):
            check_real(name, getattr(self, name), low=0.0, low_open=True)
        check_int("n_chains", self.n_chains, minimum=1)
        check_int("n_draws", self.n_draws, minimum=1)
        check_int("n_warmup", self.n_warmup, minimum=0)
        check_choice("loss", self.loss, ("vi", "binder"))
        if self.time_budget is not None:
            check_real("time_budget", self.time_budget, low=0.0, low_open=True)
        _check_bool("progress", self.progress)
        _check_bool("warm_start", self.warm_start)
        _check_bool("until_mixed", self.until_mixed)
        return priors[0], priors[1], jax_key(self.random_state)

    def _validate(self, X: Any, y: Any, *, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        """X as floats; y as integers, or as an object array of strings and -1 (see the class docstring),
        with at least one labelled and one unlabelled row."""
        X = _validate_features(self, X, reset=reset)
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        if y is None:
            raise ValueError("y: requires y to be passed, but the target y is None: give the labels of the training "
                             "rows and -1 for the rows to cluster")
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y: expected one label per row of X ({X.shape[0]}), got shape {y.shape}")
        if y.dtype.kind in "US":  # as sklearn.semi_supervised.SelfTrainingClassifier refuses them
            raise ValueError(
                f"y: has dtype {y.dtype} (strings), where the integer -1 cannot mark the rows to cluster: give y "
                "dtype object, with the string labels and the integer -1 for the rows to cluster (y = "
                "np.asarray(labels, dtype=object); y[rows_to_cluster] = -1), as scikit-learn's SelfTrainingClassifier "
                "asks, or encode the labels as integers (sklearn.preprocessing.LabelEncoder) and mark those rows -1")
        if y.dtype.kind == "O":
            y = _object_labels(y)
        if y.dtype.kind == "f":
            missing = np.flatnonzero(np.isnan(y))
            if missing.size:
                raise ValueError(f"y: the label of row {int(missing[0])} is missing (NaN): mark the rows to cluster "
                                 "with -1")
            if np.all(np.isfinite(y)) and np.all(y == np.round(y)):
                y = y.astype(np.int64)
        if y.dtype.kind not in "iuO":
            raise TypeError(f"y: expected integer labels (-1 for the rows to cluster), got dtype {y.dtype}")
        if y.dtype.kind != "O":
            y = y.astype(np.int64)
            if np.any(y < UNLABELLED):
                raise ValueError(f"y: labels are -1 (the rows to cluster) or from 0 up, got {int(y.min())}")
        unlabelled = _unlabelled(y)
        if unlabelled.all():
            raise ValueError("y: no labelled row: SCDP learns from labelled rows (to cluster without labels, use "
                             "DPMixtureEstimator)")
        if not unlabelled.any():
            raise ValueError("y: no row to cluster: mark the rows to cluster with -1")
        return X, y

    def fit(self, X: Any, y: Any) -> "SupervisedDPEstimator":
        """Sample the posterior partition of the unlabelled rows of X (``y == -1``), learning from
        the labelled ones; keep the point estimate in ``labels_``."""
        from zoo.dirichlet.supervised import SupervisedDP

        alpha_prior, alpha_types_prior, key = self._check_params()

        def split(reset: bool) -> tuple[np.ndarray, np.ndarray, Any, np.ndarray]:
            import pandas as pd

            points, labels = self._validate(X, y, reset=reset)
            train = ~_unlabelled(labels)
            # The rows to cluster, named by their labels in X (a DataFrame's index, else their
            # positions), so that the draws' points are X's rows, not positions among the unlabelled.
            names = np.asarray(X.index if isinstance(X, pd.DataFrame) else np.arange(labels.size))[~train]
            return points[train], labels[train], pd.DataFrame(points[~train], index=pd.Index(names)), labels

        def start(data):
            train, train_labels, test, _ = data
            model = SupervisedDP(int(self.model), share_clusters=bool(self.share_clusters), alpha_prior=alpha_prior,
                                 alpha_types_prior=alpha_types_prior, prior_variance=self.prior_variance,
                                 precision_shape=self.precision_shape, precision_rate=self.precision_rate,
                                 n_split_merge=self.n_split_merge, n_type_split_merge=self.n_type_split_merge,
                                 pair_moves=self.pair_moves, n_precision_split_merge=self.n_precision_split_merge)
            return model.fit(train, train_labels, test, key, n_chains=self.n_chains, n_draws=self.n_draws,
                             n_warmup=self.n_warmup,
                             time_budget=self.time_budget, progress=self.progress, init=self.init,
                             until_mixed=bool(self.until_mixed))

        def resume(previous, data):
            train, train_labels, test, _ = data
            return previous.resume(train, train_labels, test, n_draws=self.n_draws, time_budget=self.time_budget,
                                   progress=self.progress, until_mixed=bool(self.until_mixed))

        train, train_labels, _, labels = self._run_chains(split, start, resume)
        self.labels_ = self._labels(labels, np.unique(train_labels))
        self.n_clusters_ = len(set(self.labels_[_unlabelled(labels)].tolist()))
        samples = self.fit_.result.samples
        self.alpha_ = float(np.mean(samples["alpha"]))
        self.alpha_types_ = float(np.mean(samples["alpha_types"]))
        return self

    def fit_predict(self, X: Any, y: Any) -> np.ndarray:
        """``fit(X, y)``, then ``labels_``: y with the clusters of the rows labelled -1 in place."""
        return self.fit(X, y).labels_

    def _labels(self, y: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """``labels_``: y, with the point estimate's clusters in place of the -1s (see the class docstring)."""
        estimate = np.asarray(self.fit_.point_estimate(self.loss))
        assignments = self.fit_.assignments  # (chain, draw, unlabelled row); training slots 0..C-1 first
        labels = y.copy()
        rows = np.flatnonzero(_unlabelled(y))
        # New labels are integers after the largest integer label (-1 included): max(y) + 1 for integer y,
        # 0 up for string labels.
        next_label = max(int(label) for label in y.tolist() if not isinstance(label, str)) + 1
        for cluster in estimate[np.sort(np.unique(estimate, return_index=True)[1])]:  # in order of first occurrence
            members = estimate == cluster
            label = None
            if self.share_clusters:
                slots = assignments[:, :, members].ravel()
                shares = np.bincount(slots[slots < classes.size], minlength=classes.size) / slots.size
                if shares.max() > 0.5:
                    label = classes[int(np.argmax(shares))]
                    label = label.item() if isinstance(label, np.generic) else label  # a Python int or str
            if label is None:
                label, next_label = next_label, next_label + 1
            labels[rows[members]] = label
        return labels

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        return tags


def _unlabelled(y: np.ndarray) -> np.ndarray:
    """Which rows of validated labels are the rows to cluster (the integer -1)."""
    if y.dtype.kind != "O":
        return y == UNLABELLED
    return np.array([not isinstance(label, str) and label == UNLABELLED for label in y.tolist()], dtype=bool)


def _object_labels(y: np.ndarray) -> np.ndarray:
    """Labels of dtype object (strings with -1, as scikit-learn's ``SelfTrainingClassifier`` takes them, or
    numbers): integers if every label is a number, else an object array of strings and the integer -1."""
    values = y.tolist()
    for row, label in enumerate(values):
        try:
            missing = label is None or bool(label != label)
        except TypeError:  # pandas.NA
            missing = True
        if missing:
            raise ValueError(f"y: the label of row {row} is missing (None or NaN): mark the rows to cluster with -1")
    is_number = [isinstance(label, (int, float, np.integer, np.floating)) and not isinstance(label, (bool, np.bool_))
                 for label in values]
    if all(is_number):  # checked as integers by the caller
        integers = all(isinstance(label, (int, np.integer)) for label in values)
        return np.asarray(values, dtype=np.int64 if integers else np.float64)
    labelled = [label for label, number in zip(values, is_number) if not (number and label == UNLABELLED)]
    if not all(isinstance(label, str) for label in labelled):
        kinds = sorted({type(label).__name__ for label in labelled})
        raise TypeError(f"y: labels are integers, or strings with the integer -1 for the rows to cluster; got labels "
                        f"of types {', '.join(kinds)}")
    out = np.empty(len(values), dtype=object)
    out[:] = [UNLABELLED if number else label for label, number in zip(values, is_number)]
    return out
