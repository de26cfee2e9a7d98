"""The OpenSpiel side: policies (tabular and batched), populations, exact and sampled
meta-games (episodes in lock-step), full-game CCE gap.

    from metaeval import games, spiel
    game = games.load("kuhn_3p")
    pop = spiel.Population.random(game, size=8, seed=0)
    mg = spiel.exact_metagame(game, pop)        # MetaGame [3, 8, 8, 8]
    gap = spiel.cce_gap(game, pop, sigma)       # gap.total, gap.per_player

Policies that are not tables, for games too large to enumerate (sampled mode):
``spiel.CallablePolicy(fn)`` (``fn(state, player)`` -> probabilities),
``spiel.LazyRandomPolicy(game, player, seed)``; ``spiel.snapshot(policy)`` copies one.
"""

from metaeval.spiel.adapters import CallablePolicy, LazyRandomPolicy
from metaeval.spiel.batched import BatchedPolicy, as_batched, observation_kind
from metaeval.spiel.exact import ExactEvaluator, exact_metagame
from metaeval.spiel.gap import CCEGap, CEGap, cce_gap, ce_gap, openspiel_best_response
from metaeval.spiel.lockstep import play_episodes
from metaeval.spiel.policies import KINDS, policy_table, pyspiel_policies, random_policy
from metaeval.spiel.population import Population
from metaeval.spiel.mode import MODES, resolve_mode
from metaeval.spiel.sampled import joint_seed, joint_seeds, sample_joints, sampled_metagame
from metaeval.spiel.snapshot import snapshot
from metaeval.spiel.tree import GameTree, game_tree

__all__ = [
    "BatchedPolicy",
    "CCEGap",
    "CallablePolicy",
    "CEGap",
    "ExactEvaluator",
    "GameTree",
    "KINDS",
    "LazyRandomPolicy",
    "MODES",
    "Population",
    "as_batched",
    "cce_gap",
    "ce_gap",
    "exact_metagame",
    "game_tree",
    "joint_seed",
    "joint_seeds",
    "observation_kind",
    "openspiel_best_response",
    "play_episodes",
    "policy_table",
    "pyspiel_policies",
    "random_policy",
    "resolve_mode",
    "sample_joints",
    "sampled_metagame",
    "snapshot",
]
