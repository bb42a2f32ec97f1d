"""Dirichlet-process mixtures (DM05): the CDP and supervised clustering (SCDP-1/2/3).

The classes are imported on first access: ``inference.chains`` imports the component families
from this package, and ``zoo.dirichlet.supervised`` imports ``inference.chains``, so an eager
import here would make the two packages import each other.
"""

from importlib import import_module
from typing import Any

__all__ = ["DPMixture", "SupervisedDP"]

_LOCATIONS = {"DPMixture": "zoo.dirichlet.mixture", "SupervisedDP": "zoo.dirichlet.supervised"}


def __getattr__(name: str) -> Any:
    if name in _LOCATIONS:
        return getattr(import_module(_LOCATIONS[name]), name)
    raise AttributeError(f"module 'zoo.dirichlet' has no attribute {name!r}")
