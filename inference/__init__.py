"""latentzoo inference: tempered EM, incremental EM and Dirichlet-process Gibbs kernels."""

from inference.em import EMResult, tempered_em
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM

__all__ = ["tempered_em", "EMResult", "FixedBeta", "TemperedEM", "DeterministicAnnealing"]
