"""The exact best response, with the responders' interface: a tree walk (games small enough to enumerate).

The opponents' profiles become a population with one placeholder policy for the responder
and sigma the profiles' probabilities; the best response to that correlated mixture is read
off the full-game CCE gap's backward pass (`metaeval.spiel.gap`,
`metaeval.spiel.best_response`). The episode budget is not used: nothing is sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.responses.opponents import Opponents
from metaeval.spiel.gap import cce_gap
from metaeval.spiel.population import Population


@dataclass(frozen=True)
class ExactValues:
    """The exact best response's value and its pure policy."""

    value: float
    response: policy_lib.TabularPolicy


def correlated_population(game, player: int, opponents: Opponents) -> tuple[Population, np.ndarray]:
    """A population and a joint distribution ``[1, K_q..]`` equal to ``opponents`` for ``player``
    (its own single policy a uniform placeholder).

    Args:
        game: the game.
        player: the player who responds.
        opponents: the opponents' distribution.

    Returns:
        The population and the joint distribution.
    """
    members = [[] for _ in range(game.num_players())]
    index: list[dict[int, int]] = [{} for _ in members]
    joints = []
    for profile in opponents.profiles:
        joint = []
        for q, policy in enumerate(profile):
            if q == player:
                joint.append(0)
                continue
            if id(policy) not in index[q]:
                index[q][id(policy)] = len(members[q])
                members[q].append(policy)
            joint.append(index[q][id(policy)])
        joints.append(tuple(joint))
    members[player] = [policy_lib.UniformRandomPolicy(game)]
    sigma = np.zeros([len(m) for m in members])
    for joint, probability in zip(joints, opponents.probabilities):
        sigma[joint] += probability
    return Population(game, members), sigma


@dataclass(frozen=True)
class Exact:
    """The exact best response to the opponents' correlated mixture (a tree walk)."""

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values=None) -> ExactValues:
        game = games.load(game)
        population, sigma = correlated_population(game, player, opponents)
        gap = cce_gap(game, population, sigma)
        return ExactValues(float(gap.best_response_values[player]), gap.best_responses[player])

    def policy(self, game, player: int, values: ExactValues) -> policy_lib.TabularPolicy:
        return values.response
