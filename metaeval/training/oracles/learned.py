"""The learned oracle: a policy trained for a fixed budget against opponents drawn from sigma."""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.training import matchmaking
from metaeval.responses import Opponents, QLearning
from metaeval.training.meta_solvers import marginals, product_distribution

TARGETS = ("jpsro", "psro")
"""Whom a learned oracle responds to: the opponents' joint marginal of sigma (JPSRO), or the
product of their marginals (PSRO)."""


def learned(learner=None, episodes: int = 2000, target: str = "jpsro"):
    """An oracle that trains ``learner`` (default: [`metaeval.responses.QLearning`][metaeval.responses.qlearning.QLearning];
    [`DQN`][metaeval.responses.dqn.DQN] and [`PPO`][metaeval.responses.ppo.PPO] are
    the RL best responses for games too large to walk) from scratch for ``episodes``
    episodes against opponents drawn from sigma, and returns its policy: for
    ``target="jpsro"`` their joint marginal (JPSRO's CCE oracle), for ``"psro"`` the
    product of their marginals (PSRO)."""
    learner = QLearning() if learner is None else learner
    if target not in TARGETS:
        raise MetaEvalError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")

    def oracle(evaluator, player: int, sigma, rng: np.random.Generator):
        sigma = np.asarray(sigma, dtype=np.float64)
        if target == "psro":
            sigma = product_distribution(marginals(sigma))
        distribution = matchmaking.conditional(evaluator.metagame(), player, sigma)
        opponents = Opponents.from_distribution(evaluator.population.policies, player, distribution)
        values = learner.train(evaluator.game, player, opponents, episodes, rng)
        return learner.policy(evaluator.game, player, values)

    return oracle
