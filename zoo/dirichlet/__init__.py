"""Dirichlet-process mixtures (DM05): the CDP and supervised clustering (SCDP-1/2/3)."""

from zoo.dirichlet.mixture import DPMixture
from zoo.dirichlet.supervised import SupervisedDP

__all__ = ["DPMixture", "SupervisedDP"]
