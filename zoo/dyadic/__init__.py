"""Mixture models for dyadic co-occurrence data (H99, HP98): aspect, one-sided, two-sided, CAM."""

from zoo.dyadic.aspect import Aspect, AspectParams
from zoo.dyadic.cluster_abstraction import ClusterAbstraction, Tree, anneal_tree
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.two_sided import TwoSided

__all__ = ["Aspect", "AspectParams", "OneSided", "TwoSided", "ClusterAbstraction", "Tree", "anneal_tree"]
