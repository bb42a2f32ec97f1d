"""Ctrl-C that keeps the finished work: act on SIGINT between jitted calls, not inside one.

A long computation run as one jitted call loses everything when Ctrl-C raises
``KeyboardInterrupt`` in it, and a call that donates its inputs leaves only deleted buffers
behind. The drivers of this library therefore cut their work into calls (EM segments, chain
sweeps, passes of the relational fit, held-out cases) and run the loop over calls inside
:class:`DeferredInterrupt`: the first Ctrl-C is remembered, the loop looks at
``interrupt.requested`` after each finished call and stops there, returning what was finished.
A second Ctrl-C abandons the work at once with ``KeyboardInterrupt``. A time budget is acted on
at the same place: :func:`deadline_after` turns it into the ``time.perf_counter()`` value after
which the loop stops, and :func:`stop_reason` says after a call whether to stop and why.

Example::

    with DeferredInterrupt() as interrupt:
        for piece in pieces:
            results.append(run_one_call(piece))  # never cut short by the first Ctrl-C
            if interrupt.requested:
                break                            # return the finished part
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from inference._validation import check_real

__all__ = ["DeferredInterrupt", "deadline_after", "stop_reason"]


def deadline_after(time_budget: Any) -> float | None:
    """``time.perf_counter()`` at which work of ``time_budget`` seconds stops (None: no budget).

    ``time_budget`` must be a positive number of seconds or None (``ValueError`` or ``TypeError``
    naming ``time_budget`` otherwise).
    """
    if time_budget is None:
        return None
    return time.perf_counter() + check_real("time_budget", time_budget, low=0.0, low_open=True)


def stop_reason(interrupt: "DeferredInterrupt", deadline: float | None) -> str | None:
    """Why a loop over calls stops after the call just finished: ``"interrupted"`` (Ctrl-C),
    ``"time_budget"`` (``deadline``, from :func:`deadline_after`, has passed) or None (go on)."""
    if interrupt.requested:
        return "interrupted"
    if deadline is not None and time.perf_counter() > deadline:
        return "time_budget"
    return None


class DeferredInterrupt:
    """A context in which the first Ctrl-C (SIGINT) sets ``requested`` instead of raising.

    Inside the context the first SIGINT only sets ``requested = True``; the caller checks it
    between calls and stops after the current one. A second SIGINT restores the previous
    handler and raises ``KeyboardInterrupt`` at once (the work is abandoned). Leaving the
    context restores the previous handler. Signal handlers can only be set from the main
    thread, where Python delivers SIGINT; elsewhere (and where the previous handler was set
    outside Python) the context changes nothing and ``requested`` stays False.

    Attributes
    ----------
    requested : bool
        Whether Ctrl-C was pressed since the context was entered.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> "DeferredInterrupt":
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if previous is not None:  # None: a handler set outside Python, which could not be restored
                self._previous = previous
                signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc_info: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
