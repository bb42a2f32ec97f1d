"""What made a fit: library versions, JAX's backend, float width and the CPU compiled for.

The same key gives the same draws (and the same EM iterates) only with the same versions, the
same JAX backend, the same float width and, on the CPU, a CPU of the same kind: XLA and numba
compile for the CPU they find, so float sums can round differently on another one and a chain
that meets a near-tie take another path (docs/backends.md, "What holds where"). Every fit records
:func:`provenance` when it runs — :class:`inference.chains.ChainResult` and
:class:`inference.em.EMResult` carry it, ``InferenceData`` holds it in ``posterior.attrs``, and
:mod:`zoo.io` writes it into saved results and checkpoints — so that a stored fit can be told apart
from a re-run that differs. :func:`provenance_differences` says which of these a saved fit and
this process do not share; :func:`zoo.io.load_checkpoint` warns with a :class:`ProvenanceWarning`
when they differ, since the continued chains are then not bit for bit those of one uninterrupted
run.
"""

from __future__ import annotations

import importlib.metadata
from typing import Mapping

import jax

from inference.native.backend import host_cpu_name

__all__ = ["provenance", "provenance_differences", "warn_if_made_elsewhere", "check_same_float_width",
           "ProvenanceWarning", "PROVENANCE_KEYS"]

#: The keys of :func:`provenance`, in the order it gives them.
PROVENANCE_KEYS = ("inference_library", "inference_library_version", "jax_version", "jaxlib_version",
                   "numba_version", "jax_backend", "jax_enable_x64", "host_cpu")


class ProvenanceWarning(UserWarning):
    """A saved fit was made with other versions, another backend, float width or CPU than this
    process has, so continuing or repeating it here need not give the same bits."""


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def provenance() -> dict[str, str]:
    """What this process would make a fit's draws with, as attributes for ``InferenceData``.

    Keys (:data:`PROVENANCE_KEYS`), all strings: ``inference_library`` ("latentzoo"),
    ``inference_library_version``, ``jax_version``, ``jaxlib_version``, ``numba_version``
    ("not installed" without it), ``jax_backend`` ("cpu", "gpu", "tpu"), ``jax_enable_x64``
    ("true" or "false") and ``host_cpu`` (LLVM's name for the CPU, see
    :func:`inference.native.backend.host_cpu_name`).
    """
    return {
        "inference_library": "latentzoo",
        "inference_library_version": _version("latentzoo"),
        "jax_version": jax.__version__,
        "jaxlib_version": _version("jaxlib"),
        "numba_version": _version("numba"),
        "jax_backend": jax.default_backend(),
        "jax_enable_x64": str(bool(jax.config.jax_enable_x64)).lower(),
        "host_cpu": host_cpu_name(),
    }


def provenance_differences(saved: Mapping[str, str], current: Mapping[str, str] | None = None
                           ) -> dict[str, tuple[str | None, str | None]]:
    """The keys of :data:`PROVENANCE_KEYS` on which ``saved`` and ``current`` (default: this
    process's :func:`provenance`) differ, each with its two values (``None`` where one lacks the
    key). Empty when they agree."""
    for name, value in (("saved", saved), ("current", current)):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"{name}: expected a mapping of provenance keys to strings "
                            f"(inference.provenance.provenance()), got {type(value).__name__}")
    if saved is None:
        raise TypeError("saved: expected a mapping of provenance keys to strings, got None")
    current = provenance() if current is None else current
    return {key: (saved.get(key), current.get(key)) for key in PROVENANCE_KEYS
            if saved.get(key) != current.get(key)}


def warn_if_made_elsewhere(made_by: Mapping[str, str] | None, subject: str, *, saved_word: str = "there",
                           current_word: str = "here", stacklevel: int = 2) -> None:
    """Issue a :class:`ProvenanceWarning` when ``made_by`` (a saved fit's provenance; nothing when
    ``None`` or empty) differs from this process's: "``subject`` were drawn elsewhere (KEY SAVED
    ``saved_word``, CURRENT ``current_word``; ...)", and that continued here they are valid draws
    but not bit for bit one run's."""
    import warnings

    if not made_by:
        return
    differences = provenance_differences(made_by)
    if differences:
        listed = "; ".join(f"{key} {saved!r} {saved_word}, {current!r} {current_word}"
                           for key, (saved, current) in differences.items())
        warnings.warn(f"{subject} were drawn elsewhere ({listed}). Continued here they are valid draws, but not bit "
                      "for bit those of one uninterrupted run: XLA and numba round differently with other versions, "
                      "backends, float widths or CPUs (docs/backends.md, \"What holds where\").", ProvenanceWarning,
                      stacklevel=stacklevel + 1)


def check_same_float_width(made_by: Mapping[str, str] | None, subject: str) -> None:
    """A ``ValueError`` when ``made_by`` (a saved fit's provenance) was drawn at another float width
    (``jax_enable_x64``) than this process runs: its chains' states are of that width, and continued
    here they would meet data and programs of the other (an error about "other values" in the data,
    or a JAX type error, before 2026-12-07). Nothing is checked where ``made_by`` lacks the key.

    >>> here = str(jax.config.jax_enable_x64).lower()
    >>> check_same_float_width({"jax_enable_x64": here}, "fit: these chains")  # this session's width
    >>> other = {"true": "false", "false": "true"}[here]
    >>> check_same_float_width({"jax_enable_x64": other}, "fit: these chains")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: fit: these chains were drawn with jax_enable_x64 ... states) and this session runs with ...
    """
    saved = (made_by or {}).get("jax_enable_x64")
    current = str(bool(jax.config.jax_enable_x64)).lower()
    if saved is None or saved == current:
        return
    wide = saved == "true"
    width = "float64" if wide else "float32"
    raise ValueError(f"{subject} were drawn with jax_enable_x64 {saved} ({width} states) and "
                     f"this session runs with {current}: continue them in a session of their width, "
                     f'jax.config.update("jax_enable_x64", {wide}) before any JAX array is made (or '
                     f"JAX_ENABLE_X64={int(wide)} in the environment)")
