"""latentzoo: latent-class models for dyadic and relational data (the models).

Subpackages: :mod:`zoo.dyadic` (aspect, clustering models), :mod:`zoo.dirichlet` (Dirichlet-process
mixtures), :mod:`zoo.relational`; modules :mod:`zoo.data` (validated data containers and splits),
:mod:`zoo.datasets` (bundled data and file formats), :mod:`zoo.metrics` (clustering metrics),
:mod:`zoo.baselines` (reference partitions), :mod:`zoo.finite_mixture` (Gaussian mixture),
:mod:`zoo.registry` (every model by name, with its paper, equations and engines).
"""

from zoo.baselines import coarse_partition, fine_partition
from zoo.data import CoOccurrence
from zoo.finite_mixture import GaussianMixture
from zoo.metrics import (
    adjusted_rand_index,
    cluster_edit_distance,
    clustering_scores,
    normalized_edit_score,
    normalized_variation_of_information,
    pairwise_precision_recall_f,
    rand_index,
    variation_of_information,
)
from zoo.registry import MODEL_NAMES, ModelCard, describe, get_model, list_models

__all__ = [
    "CoOccurrence",
    "GaussianMixture",
    "rand_index",
    "adjusted_rand_index",
    "pairwise_precision_recall_f",
    "cluster_edit_distance",
    "normalized_edit_score",
    "variation_of_information",
    "normalized_variation_of_information",
    "clustering_scores",
    "coarse_partition",
    "fine_partition",
    "list_models",
    "get_model",
    "describe",
    "ModelCard",
    "MODEL_NAMES",
]
__version__ = "0.1.0"
