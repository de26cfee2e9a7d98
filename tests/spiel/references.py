"""Independent references for the OpenSpiel side: OpenSpiel's own per-joint algorithms
and the closed-form Nash equilibria of two-player Kuhn poker."""

import itertools
import zlib

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval.spiel.policies import pyspiel_policies, tabular_policy
from metaeval.spiel.tree import game_tree


def expected_returns(game, policies, joint):
    """``pyspiel.expected_returns`` of one joint profile."""
    profile = [policies[p][i] for p, i in enumerate(joint)]
    return np.array(pyspiel.expected_returns(game.new_initial_state(), profile, -1, True))


def correlation_device(population, sigma, support_only=True):
    """OpenSpiel's correlation device for sigma: (probability, joint tabular policy) pairs."""
    policies = pyspiel_policies(population)
    device = []
    for joint in itertools.product(*(range(k) for k in population.sizes)):
        if sigma[joint] > 0 or not support_only:
            profile = [policies[p][i] for p, i in enumerate(joint)]
            device.append((float(sigma[joint]), pyspiel.to_joint_tabular_policy(profile, True)))
    return device


def cce_dist(game, population, sigma):
    """``pyspiel.cce_dist`` over all players (per-player gains floored at 0, summed)."""
    return pyspiel.cce_dist(game, correlation_device(population, sigma), prob_cut_threshold=0.0)


def jpsro_ce_gains(game, population, sigma):
    """CE gains per player and recommendation, as JPSRO's CE branch computes them:
    ``cce_dist`` of the normalised recommendation slice, times the slice's mass."""
    gains = [np.zeros(k) for k in population.sizes]
    for p, size in enumerate(population.sizes):
        for k in range(size):
            recommended = np.zeros_like(sigma)
            index = tuple(k if q == p else slice(None) for q in range(len(population.sizes)))
            recommended[index] = sigma[index]
            mass = recommended.sum()
            if mass > 0:
                info = cce_dist(game, population, recommended / mass)
                gains[p][k] = mass * info.deviation_incentives[p]
    return gains


def kuhn_nash(game, alpha):
    """Both players' Nash equilibrium policies of two-player Kuhn poker (Kuhn 1950), the
    family indexed by player 0's bluffing probability ``alpha`` in [0, 1/3].

    Cards 0 < 1 < 2 (J, Q, K); action 0 passes/folds, 1 bets/calls. Keys are the
    information-state strings: own card then the public history.
    """
    bet = {  # probability of action 1 at each information state
        "0": alpha, "1": 0.0, "2": 3 * alpha,                   # player 0 opens
        "0pb": 0.0, "1pb": alpha + 1 / 3, "2pb": 1.0,           # player 0 facing a bet
        "0p": 1 / 3, "1p": 0.0, "2p": 1.0,                      # player 1 after a check
        "0b": 0.0, "1b": 1 / 3, "2b": 1.0,                      # player 1 facing a bet
    }
    tree = game_tree(game)
    policies = []
    for p, layout in enumerate(tree.players):
        table = np.array([[1.0 - bet[key], bet[key]] for key in layout.keys])
        policies.append(tabular_policy(layout, table))
    return policies


class HashPolicy(policy_lib.Policy):
    """A non-tabular policy: probabilities computed from the information-state string."""

    def __init__(self, game, salt):
        super().__init__(game, list(range(game.num_players())))
        self.salt = salt

    def action_probabilities(self, state, player_id=None):
        player = state.current_player() if player_id is None else player_id
        actions = state.legal_actions(player)
        key = state.information_state_string(player) + self.salt
        weights = np.array([1 + zlib.crc32(f"{key}/{a}".encode()) % 7 for a in actions], dtype=float)
        return dict(zip(actions, weights / weights.sum()))
