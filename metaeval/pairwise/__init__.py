"""Pairwise evaluation data: battles, Bradley-Terry with intervals, YRWR, product of experts."""

from metaeval.pairwise.audit import Audit, audit
from metaeval.pairwise.battles import components, count_battles, covariates, inverse_propensity, read_battles, to_metagame
from metaeval.pairwise.bradley_terry import bradley_terry
from metaeval.pairwise.clones import clone_lottery
from metaeval.pairwise.poe import ComparisonPlanner, gaussian_poe, soft_bradley_terry
from metaeval.pairwise.yrwr import local_yrwr, owner_order_ranks, yrwr

__all__ = [
    "Audit", "audit", "covariates", "inverse_propensity", "ComparisonPlanner", "bradley_terry", "clone_lottery", "gaussian_poe", "soft_bradley_terry", "components", "count_battles", "local_yrwr", "owner_order_ranks", "read_battles",
    "to_metagame", "yrwr",
]
