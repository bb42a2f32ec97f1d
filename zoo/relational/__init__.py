"""Relational models: latent-class relational models (incremental EM) and the infinite relational model.

The public names are listed below (``__all__``). The package, one idea a file:

* ``data`` — domains, relations, schemas and their device arrays; the UCINET DL reader and the
  loaders in ``_readers``;
* ``latent_class`` — the LRM's NumPyro program, the model (fit, held-out prediction, the EM
  protocol) and its result; its parameters, statistics and M-step in ``_latent_class_state``, its
  XLA passes in ``_latent_class_passes``, the fit's driver in ``_latent_class_fit``;
* ``infinite`` — the IRM's program, the model (sampling, held-out prediction) and its result; its
  state in ``_infinite_state``, the XLA sweep (``build_kernel``) in ``_infinite_kernel``, the
  chains' driver in ``_infinite_chains``;
* the numba twins of the LRM's pass and the IRM's sweep are engine code,
  :mod:`inference.native.relational_em` and :mod:`inference.native.relational_gibbs`, fed by the
  flat list of cells of ``_flat_cells``;
* ``evaluation`` — leave-one-out and cross-validated log-loss of either model.
"""

from zoo.relational.data import (
    Domain,
    Relation,
    RelationalArrays,
    RelationalData,
    RelationalSchema,
    load_davis_southern_women,
    load_florentine_families,
    load_karate_club,
    load_movielens_100k,
    read_ucinet_dl,
)
from zoo.relational.evaluation import (
    LogLoss,
    cross_validated_log_loss,
    fold_cases,
    held_out_cases,
    leave_one_out_log_loss,
)
from zoo.relational.infinite import InfiniteRelational, IRMResult, infinite_relational_program
from zoo.relational.latent_class import LatentClassRelational, LRMParams, LRMResult, latent_class_program

__all__ = [
    "Domain",
    "Relation",
    "RelationalArrays",
    "RelationalData",
    "RelationalSchema",
    "read_ucinet_dl",
    "load_karate_club",
    "load_davis_southern_women",
    "load_florentine_families",
    "load_movielens_100k",
    "LatentClassRelational",
    "LRMParams",
    "LRMResult",
    "latent_class_program",
    "InfiniteRelational",
    "IRMResult",
    "infinite_relational_program",
    "LogLoss",
    "held_out_cases",
    "fold_cases",
    "leave_one_out_log_loss",
    "cross_validated_log_loss",
]
