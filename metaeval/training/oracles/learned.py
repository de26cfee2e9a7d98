"""The learned oracle: a policy trained for a fixed budget against opponents drawn from sigma."""

from __future__ import annotations

import numpy as np

from metaeval.training import matchmaking
from metaeval.training.learners import Opponents, QLearning


def learned(learner=None, episodes: int = 2000):
    """An oracle that trains ``learner`` (default: :class:`metaeval.training.learners.QLearning`) from
    scratch for ``episodes`` episodes against the opponents' joint marginal of sigma, and
    returns its policy."""
    learner = QLearning() if learner is None else learner

    def oracle(evaluator, player: int, sigma, rng: np.random.Generator):
        distribution = matchmaking.conditional(evaluator.metagame(), player, sigma)
        opponents = Opponents.from_distribution(evaluator.population.policies, player, distribution)
        values = learner.train(evaluator.game, player, opponents, episodes, rng)
        return learner.policy(evaluator.game, player, values)

    return oracle
