"""Learners: train a policy for a budget of episodes against opponents drawn from a distribution.

    learner = QLearning()
    distribution = evaluator.opponents(player, "pfsp", member=policy_id)
    opponents = Opponents.from_distribution(evaluator.population.policies, player, distribution)
    values = learner.train(game, player, opponents, episodes, rng)
    policy = learner.policy(game, player, values)      # a read-only TabularPolicy
"""

from metaeval.training.learners.opponents import Opponents
from metaeval.training.learners.qlearning import LEARNERS, QLearning

__all__ = ["LEARNERS", "Opponents", "QLearning"]
