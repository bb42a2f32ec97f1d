"""latentzoo inference: tempered EM, incremental EM and Dirichlet-process Gibbs kernels."""

from inference.concentration import (
    GammaPrior,
    escobar_west_multi_group_update,
    escobar_west_update,
    expected_n_clusters,
    gamma_prior,
    variance_n_clusters,
)
from inference.em import EMResult, device_mesh, tempered_em
from inference.interrupts import DeferredInterrupt
from inference.enumerated import EnumeratedEM, ProgramData, ShardedProgramArgs, enumerated_log_likelihood
from inference.partitions import (
    co_clustering,
    expected_binder_loss,
    expected_variation_of_information,
    expected_vi_lower_bound,
    point_partition,
)
from inference.schedules import DeterministicAnnealing, FixedBeta, TemperedEM

__all__ = [
    "tempered_em",
    "EMResult",
    "device_mesh",
    "DeferredInterrupt",
    "ShardedProgramArgs",
    "FixedBeta",
    "TemperedEM",
    "DeterministicAnnealing",
    "EnumeratedEM",
    "ProgramData",
    "enumerated_log_likelihood",
    "GammaPrior",
    "gamma_prior",
    "escobar_west_update",
    "escobar_west_multi_group_update",
    "expected_n_clusters",
    "variance_n_clusters",
    "co_clustering",
    "point_partition",
    "expected_binder_loss",
    "expected_vi_lower_bound",
    "expected_variation_of_information",
]
