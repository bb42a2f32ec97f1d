"""Resident-memory readings of the current process, for the benchmarks' peak-memory figures.

``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is not usable for a child process on Linux: the
high-water mark survives ``fork``/``exec``, so a child started from a large parent reports the
parent's peak. ``/proc/self/status`` has this process's own figures: ``VmHWM`` (peak resident set
size since ``exec``) and ``VmRSS`` (current). Elsewhere ``ru_maxrss`` is the fallback.
"""

from __future__ import annotations

import resource
import sys


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def peak_rss_bytes() -> int:
    """Peak resident set size of this process since it started, in bytes."""
    kib = _status_kib("VmHWM")
    return _maxrss_bytes() if kib is None else kib * 1024


def current_rss_bytes() -> int:
    """Resident set size of this process now, in bytes."""
    kib = _status_kib("VmRSS")
    return _maxrss_bytes() if kib is None else kib * 1024
