"""What the estimators of Gibbs chains share (:class:`DPMixtureEstimator`,
:class:`SupervisedDPEstimator`): a warm start that continues the previous fit's chains, a
``time_budget`` spent in the warm-up, and the fit's warnings issued as the estimator's."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar

from inference._validation import user_stacklevel

__all__ = ["ChainEstimatorMixin", "check_gamma_prior"]


def check_gamma_prior(name: str, value: Any) -> Any:
    """The ``GammaPrior`` of a (shape, rate) hyperparameter, or None; errors name ``name``."""
    from inference.concentration import gamma_prior

    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name}: expected (shape, rate) or None, got {value!r}")
    try:
        return gamma_prior(*value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{name}: {error}") from None


class ChainEstimatorMixin:
    """Runs a fit's chains for an estimator whose ``fit`` samples (not used directly).

    A subclass names the settings that make its chains (``_CHAIN_SETTINGS``: a warm start goes
    on only with the same ones) and the calls its fits' messages name, each with the estimator's
    own way to do the same (:meth:`_estimator_calls`: the fit's ``resume`` with a warm-started
    fit, ``_WARM_START_CALL``), and calls :meth:`_run_chains` from ``fit``.
    """

    _CHAIN_SETTINGS: ClassVar[tuple[str, ...]] = ()
    _WARM_START_CALL: ClassVar[str] = "estimator.set_params(warm_start=True, until_mixed=True).fit(X)"

    def _estimator_calls(self) -> dict[str, str]:
        """The calls the fit's messages name, each with the estimator's own way to do the same
        (none here: the messages are issued as they are)."""
        return {}

    def _chain_settings(self) -> tuple:
        return tuple(tuple(value) if isinstance(value, list) else value
                     for value in (getattr(self, name) for name in self._CHAIN_SETTINGS))

    def _run_chains(self, validate: Callable[[bool], Any], start: Callable[[Any], Any],
                    resume: Callable[[Any, Any], Any]) -> Any:
        """Validate the data, then start new chains or, under ``warm_start``, continue the previous
        fit's; set ``fit_`` and return the validated data.

        ``validate(reset)`` checks the data (``reset``: whether it may set ``n_features_in_``),
        ``start(data)`` returns a new fit, ``resume(previous, data)`` the previous one continued.
        A fit with no draws (its ``time_budget`` spent in the warm-up) leaves the estimator
        unfitted with a ``ValueError`` and keeps its chains privately, for the next warm start.
        """
        # A fit whose budget ran out in the warm-up keeps its chains here (the estimator itself
        # stays unfitted), so that a warm-started fit can finish the warm-up.
        previous = getattr(self, "fit_", None)
        if previous is None:
            previous = getattr(self, "_unfinished_fit", None)
        warm = bool(self.warm_start and previous is not None)
        if warm:
            fitted = getattr(self, "_fitted_settings", None) or (None,) * len(self._CHAIN_SETTINGS)
            if self._chain_settings() != fitted:
                changed = [name for name, now, then in zip(self._CHAIN_SETTINGS, self._chain_settings(), fitted)
                           if now != then]
                raise ValueError(f"warm_start: the previous fit's chains were made with other {', '.join(changed)}; "
                                 "set warm_start=False to start afresh")
            data = validate(reset=not hasattr(self, "n_features_in_"))
        else:
            data = validate(reset=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fit = resume(previous, data) if warm else start(data)
            except ValueError as error:
                if not warm:
                    raise
                raise ValueError(f"warm_start: {error}; set warm_start=False to start afresh") from None
        if not warm:
            self._fitted_settings = self._chain_settings()
        # The fit's warnings (mixing, no draws yet, tied values), as the estimator's, at the
        # caller's line: their advice to continue the chains names the estimator's way.
        calls = self._estimator_calls()
        for warning in caught:
            message = str(warning.message)
            for call, estimator_call in calls.items():
                message = message.replace(call, estimator_call)
            warnings.warn(warning.category(message), stacklevel=user_stacklevel())
        self._unfinished_fit = None
        if not fit.result.samples:  # nothing to estimate from: left unfitted, as before any fit
            for name in [name for name in vars(self) if name.endswith("_") and not name.startswith("_")]:
                delattr(self, name)
            self._unfinished_fit = fit
            if fit.result.stopped_by == "time_budget":
                raise ValueError(f"time_budget: {self.time_budget} s ran out in the warm-up, before the first draw; "
                                 "give more time or fewer n_warmup sweeps (or fit again with warm_start=True to "
                                 "finish the warm-up)")
            if fit.result.stopped_by == "capacity":  # the RuntimeWarning above gave the figure
                raise MemoryError(f"{type(self).__name__}.fit: stopped in the warm-up, before the first draw: memory "
                                  "could not hold the capacity the chains grew to need (the warning above gave the "
                                  "figure); fewer chains (n_chains) need less")
            raise KeyboardInterrupt(f"{type(self).__name__}.fit: stopped in the warm-up, before the first draw; the "
                                    "sweeps so far are kept: fit again with warm_start=True to finish the warm-up")
        self.fit_ = fit
        return data
