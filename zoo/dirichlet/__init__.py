"""Dirichlet-process mixtures (DM05): the CDP and supervised clustering (SCDP-1/2/3).

The classes are imported on first access: ``inference.chains`` imports the component families
from this package, and ``zoo.dirichlet.supervised`` imports ``inference.chains``, so an eager
import here would make the two packages import each other.
"""

from importlib import import_module
from typing import Any

__all__ = ["DPMixture", "SupervisedDP", "normal_gamma", "normal_known_precision", "dirichlet_multinomial",
           "beta_bernoulli", "custom_family", "check_family"]

# The component families too, so that ``from zoo.dirichlet import DPMixture, normal_gamma`` works.
_LOCATIONS = {"DPMixture": "zoo.dirichlet.mixture", "SupervisedDP": "zoo.dirichlet.supervised",
              "normal_gamma": "zoo.dirichlet.families", "normal_known_precision": "zoo.dirichlet.known_precision",
              "dirichlet_multinomial": "zoo.dirichlet.families", "beta_bernoulli": "zoo.dirichlet.families",
              "custom_family": "zoo.dirichlet.families", "check_family": "zoo.dirichlet.family_check"}


def __getattr__(name: str) -> Any:
    if name in _LOCATIONS:
        return getattr(import_module(_LOCATIONS[name]), name)
    raise AttributeError(f"module 'zoo.dirichlet' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The lazily imported names too, so that ``dir()`` and tab completion offer them."""
    return sorted(set(globals()) | set(__all__))
