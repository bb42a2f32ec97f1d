"""Mixture models for dyadic co-occurrence data (H99, HP98)."""

from zoo.dyadic.aspect import Aspect, AspectParams

__all__ = ["Aspect", "AspectParams"]
