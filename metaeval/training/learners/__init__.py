"""Learners: train a policy for a budget of episodes against opponents drawn from a distribution.

    learner = QLearning()                              # or DQN(), PPO(): JAX networks
    distribution = evaluator.opponents(player, "pfsp", member=policy_id)
    opponents = Opponents.from_distribution(evaluator.population.policies, player, distribution)
    values = learner.train(game, player, opponents, episodes, rng)
    policy = learner.policy(game, player, values)      # a TabularPolicy, or an MLPPolicy

Q-learning keeps a value table on the game tree (games small enough to enumerate); DQN and
PPO keep network weights and never walk the tree, stepping many episodes in lock-step
(:mod:`metaeval.training.learners.episodes`).
"""

from metaeval.training.learners.dqn import DQN
from metaeval.training.learners.opponents import Opponents
from metaeval.training.learners.ppo import PPO
from metaeval.training.learners.qlearning import QLearning

LEARNERS = {"qlearning": QLearning, "dqn": DQN, "ppo": PPO}

__all__ = ["DQN", "LEARNERS", "Opponents", "PPO", "QLearning"]
