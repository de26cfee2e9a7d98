"""The CCE constraint matrix A as a source of columns: stored, or implicit in a game.

Column generation (the deviation-rating LPs of large games) needs two things of A
(rows: deviations (p, a'_p); columns: joints a): the columns of a few joints, and
A^T y over every joint, to price the joints outside the LP. For a payoff tensor G both
follow without forming A, which has sum_p K_p x prod_p K_p entries (400 MB at 3 x 64):

    (A^T y)(a) = sum_p [ sum_{a'} y_{p,a'} G_p(a', a_-p)  -  (sum_{a'} y_{p,a'}) G_p(a) ],

one contraction of y_p with G_p along player p's axis per player, O(N prod_p K_p) work.
"""

from __future__ import annotations

import numpy as np

from metaeval.game import MetaGame
from metaeval.solvers.reduction import quantise


class StoredColumns:
    """Columns of an explicit matrix (the reduced CCE system of small games)."""

    def __init__(self, matrix: np.ndarray):
        self.matrix = matrix
        self.num_rows, self.num_columns = matrix.shape

    def columns(self, joints: np.ndarray) -> np.ndarray:
        return self.matrix[:, joints]

    def price(self, y: np.ndarray) -> np.ndarray:
        """A^T y over every column."""
        return y @ self.matrix


class GameColumns:
    """Columns of a game's CCE matrix computed from its payoffs, in units of ``scale``.

    ``scale`` is the largest |A| entry, the largest payoff difference any player can make
    by deviating; payoffs are divided by it and quantised as in metaeval.solvers.reduction, so
    the LPs see entries of size at most 1 whatever the user's units.
    """

    def __init__(self, game: MetaGame):
        payoffs = game.payoffs
        spreads = [np.ptp(payoffs[p], axis=p).max() for p in range(game.num_players)]
        self.scale = float(max(spreads)) or 1.0
        self.payoffs = quantise(payoffs / self.scale)
        self.shape = game.shape
        self.starts = np.concatenate([[0], np.cumsum(self.shape)])
        self.num_rows, self.num_columns = int(self.starts[-1]), game.num_joints

    def columns(self, joints: np.ndarray) -> np.ndarray:
        """A[:, joints] as a dense [rows, len(joints)] array."""
        index = np.unravel_index(joints, self.shape)
        blocks = []
        for p, payoff in enumerate(self.payoffs):
            others = tuple(i for q, i in enumerate(index) if q != p)
            deviated = np.moveaxis(payoff, p, 0)[(slice(None), *others)]  # G_p(a', a_-p)
            blocks.append(deviated - payoff[index][None])
        return np.concatenate(blocks)

    def price(self, y: np.ndarray) -> np.ndarray:
        """A^T y over every joint (C order), by the contraction in the module docstring."""
        total = np.zeros(self.shape)
        for p, payoff in enumerate(self.payoffs):
            weights = y[self.starts[p] : self.starts[p + 1]]
            deviated = np.tensordot(weights, payoff, axes=([0], [p]))
            total += np.expand_dims(deviated, p) - weights.sum() * payoff
        return total.ravel()

    def least_tempted_joint(self) -> int:
        """The joint whose largest deviation gain is smallest: a pure joint nearest a CCE."""
        largest = np.full(self.shape, -np.inf)
        for p, payoff in enumerate(self.payoffs):
            largest = np.maximum(largest, payoff.max(axis=p, keepdims=True) - payoff)
        return int(np.argmin(largest))
