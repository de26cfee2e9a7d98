"""Best responses: a policy of one player against opponents drawn from a distribution.

Every responder has the same two calls:

    from metaeval.responses import RESPONDERS, Opponents
    responder = RESPONDERS["search"]()                 # or Search(), PPO(), DQN(), QLearning(), Exact()
    opponents = Opponents.from_distribution(policies, player, distribution)
    values = responder.train(game, player, opponents, episodes, rng)
    policy = responder.policy(game, player, values)

- ``exact`` ([`Exact`][metaeval.responses.exact.Exact]): the tree walk; the best response itself, on games small
  enough to enumerate.
- ``search`` ([`Search`][metaeval.responses.search.Search]): simulates the game against the known opponent policies and
  estimates the value of every visited information state of the responder; no tree walk,
  exact in the limit of many episodes.
- ``rollout`` ([`Rollout`][metaeval.responses.rollout.Rollout]): simulates the game against the known opponent
  policies too, and fits a network's action values to forked rollouts: for games whose
  information states are too many for the search's table.
- ``qlearning`` (a value table on the tree), ``dqn`` and ``ppo`` (networks; no tree walk):
  learn by trial against opponents they only meet through episodes.

The oracles ([`metaeval.training.oracles`][metaeval.training.oracles]) and the approximate CCE gap
([`metaeval.responses.gap`][metaeval.responses.gap]) take any of them.
"""

from metaeval.responses.dqn import DQN
from metaeval.responses.exact import Exact
from metaeval.responses.opponents import Opponents
from metaeval.responses.ppo import PPO
from metaeval.responses.qlearning import QLearning
from metaeval.responses.rollout import Rollout
from metaeval.responses.search import Search

LEARNED = {"qlearning": QLearning, "dqn": DQN, "ppo": PPO}
"""Responders learned by trial, with hyper-parameters (what population-based training trains)."""

RESPONDERS = {**LEARNED, "search": Search, "rollout": Rollout, "exact": Exact}
"""Every responder by name."""

__all__ = ["DQN", "Exact", "LEARNED", "Opponents", "PPO", "QLearning", "RESPONDERS", "Rollout", "Search"]
