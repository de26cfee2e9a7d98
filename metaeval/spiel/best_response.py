"""Best responses by one backward pass over a player's information states.

Given terminal weights ``w [Z, M]`` (M independent problems, e.g. one per
recommendation), the value of a sequence (I, a) of player p is the weight of the
terminals it ends plus the values of the states that follow it; a state's value
is the best of its legal sequences. With perfect recall this maximises
``sum_z w(z) reach_p(z; pi')`` over all pure policies pi' of p, which is the best
response to whatever produced the weights (maths, section 4).

Hand-written rather than OpenSpiel's ``TabularBestResponse``: that one walks an
auxiliary game with a chance branch per joint profile of the correlation device,
so its cost grows with the support of sigma; here sigma enters only through the
weights, and the pass is vectorised per depth level and over the M problems.
"""

from __future__ import annotations

import numpy as np

from metaeval.spiel.tree import GameTree


def best_response(tree: GameTree, player: int, weights: np.ndarray,
                  tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Best-response values ``[M]`` and chosen actions ``[S, M]`` for weights ``[Z, M]``:
    at every state the lowest of its best actions (`backward_pass`), ties within
    ``tolerance * sum_z |w(z)|``."""
    weights = np.asarray(weights, dtype=np.float64)
    slack = tolerance * np.abs(weights).sum(axis=0)
    values, best = backward_pass(tree, player, sequence_weights(tree, player, weights), slack)
    return values, best.argmax(axis=1)


def sequence_weights(tree: GameTree, player: int, weights: np.ndarray, start: int = 0) -> np.ndarray:
    """``[S*A + 1, M]``: per sequence of ``player``, the summed weights (in terminal order) of
    the terminals it ends, from weights ``[z, M]`` of the terminals ``start .. start + z``."""
    num_states, num_actions = tree.players[player].legal.shape
    values = np.zeros((num_states * num_actions + 1, weights.shape[1]))
    np.add.at(values, tree.last_sequence[player][start : start + len(weights)], weights)
    return values


def backward_pass(tree: GameTree, player: int, values: np.ndarray,
                  slack: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Best-response values ``[M]`` and best actions ``[S, A, M]`` from the terminals' weights
    per sequence ``values [S*A + 1, M]`` (`sequence_weights`; overwritten).

    A state's best actions are its legal actions whose value is within ``slack`` (per
    problem, in absolute terms) of the state's best. With a slack well above the rounding
    of the values, e.g. a small fraction of the terminals' total absolute weight, actions
    tied in exact arithmetic are all best, whatever the rounding. Any choice among them at
    every state is a best response (up to the slack at each state; exactly, where the ties
    are exact), since a state's value is its best action's whichever is played below.
    """
    layout = tree.players[player]
    num_states, num_actions = layout.legal.shape
    best_actions = np.zeros((num_states, num_actions, values.shape[1]), dtype=bool)
    for rows in reversed(layout.levels):
        q = values[:-1].reshape(num_states, num_actions, -1)[rows]
        q = np.where(layout.legal[rows][:, :, None], q, -np.inf)
        best = q.max(axis=1)
        best_actions[rows] = q >= (best - slack)[:, None, :]
        np.add.at(values, layout.parent[rows], best)
    return values[-1], best_actions


def reached_states(tree: GameTree, player: int, reach: np.ndarray) -> np.ndarray:
    """``[S]`` whether each of ``player``'s states precedes a terminal of positive ``reach [Z]``
    (e.g. chance times the opponents' reach): the states other players and chance can reach."""
    layout = tree.players[player]
    num_states, num_actions = layout.legal.shape
    below = np.zeros(num_states * num_actions + 1)
    np.add.at(below, tree.last_sequence[player], np.asarray(reach, dtype=np.float64) > 0)
    for rows in reversed(layout.levels):
        np.add.at(below, layout.parent[rows], below[:-1].reshape(num_states, num_actions)[rows].sum(axis=1))
    return below[:-1].reshape(num_states, num_actions).sum(axis=1) > 0


def pure_table(tree: GameTree, player: int, choices: np.ndarray) -> np.ndarray:
    """The ``[S, A]`` table of the pure policy playing ``choices [S]``."""
    layout = tree.players[player]
    table = np.zeros(layout.legal.shape)
    table[np.arange(len(choices)), choices] = 1.0
    return table


def drawn_choices(best_actions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[S]``: at every state one of its ``best_actions [S, A]``, uniformly at random (the
    best action with the highest of keys drawn from ``rng``, one per state and action)."""
    keys = rng.random(best_actions.shape)
    return np.where(best_actions, keys, -1.0).argmax(axis=1)
