"""The mutation oracle: a perturbed copy of one of the player's top-rated policies."""

from __future__ import annotations

import math

import numpy as np

from metaeval.training.mutation import perturb_policy
from metaeval.training.selection import rank_order
from metaeval.spiel.policies import tabular_policy
from metaeval.spiel.tree import game_tree


def mutate(rating, fraction: float = 0.25, scale: float = 0.25):
    """An oracle that copies a policy drawn uniformly from the player's top-rated
    ``fraction`` (at least one) under ``rating`` (a rating of the evaluator's current
    meta-game) and perturbs its table ([`metaeval.training.mutation.perturb_policy`][metaeval.training.mutation.perturb_policy])."""

    def oracle(evaluator, player: int, sigma, rng: np.random.Generator):
        ratings = rating.ratings[player]
        top = rank_order(ratings, rng)[0][::-1][: max(1, math.floor(fraction * len(ratings)))]
        parent = evaluator.policy(player, evaluator.ids[player][int(top[rng.integers(len(top))])])
        layout = game_tree(evaluator.game).players[player]
        return tabular_policy(layout, perturb_policy(layout, parent.action_probability_array, rng, scale))

    return oracle
