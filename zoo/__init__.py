"""latentzoo: latent-class models for dyadic and relational data (the models).

Subpackages: :mod:`zoo.dyadic` (aspect, clustering models), :mod:`zoo.dirichlet` (Dirichlet-process
mixtures), :mod:`zoo.relational`; modules :mod:`zoo.data` (validated data containers and splits),
:mod:`zoo.datasets` (bundled data and file formats), :mod:`zoo.metrics` (clustering metrics).
"""

from zoo.data import CoOccurrence

__all__ = ["CoOccurrence"]
__version__ = "0.1.0"
