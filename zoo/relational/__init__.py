"""Relational models: latent-class relational models (incremental EM) and the infinite relational model."""

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
