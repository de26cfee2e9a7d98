"""Elo ratings: a batch Bradley-Terry fit on base 10 with scale 400 (SPEC 2, `elo`).

P(i beats j) = 1 / (1 + 10^((r_j - r_i) / 400)).  The maximum-likelihood ratings of a
matrix of (possibly fractional) wins are unique up to a common shift when the "i has
beaten j" graph is strongly connected; we fix the gauge by mean(r) = 0.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csgraph
from scipy.special import expit, log_expit

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating

SCALE = 400.0 / np.log(10.0)  # Elo points per natural-log odds unit
GAME_TOLERANCE = 1e-9


def bradley_terry(wins, prior: float = 0.0) -> np.ndarray:
    """Elo ratings (mean 0) maximising sum_ij W_ij log P(i beats j) (Bradley & Terry 1952).

    Args:
        wins: square array, ``wins[i, j]`` = (weighted) number of wins of i over j; the
            diagonal is ignored.
        prior: virtual games added between every pair, half won by each side; any
            ``prior > 0`` makes the estimate exist even when someone never lost.
    """
    wins = np.array(wins, dtype=np.float64)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1] or wins.shape[0] < 1:
        raise MetaEvalError(f"wins must be a square matrix, got shape {wins.shape}")
    if not np.all(np.isfinite(wins)) or np.any(wins < 0):
        raise MetaEvalError("wins must be finite and non-negative")
    if not prior >= 0 or not np.isfinite(prior):
        raise MetaEvalError(f"prior must be a finite number >= 0, got {prior}")
    k = len(wins)
    np.fill_diagonal(wins, 0.0)
    wins += (prior / 2) * (1 - np.eye(k))
    if k > 1:
        connected, _ = csgraph.connected_components(wins > 0, directed=True, connection="strong")
        if connected > 1:
            raise MetaEvalError(
                "Bradley-Terry ratings do not exist: some strategies never lose (or never win) "
                "against another group; pass prior > 0 to regularise"
            )
    games = wins + wins.T
    theta = _newton(wins, games)
    return SCALE * (theta - theta.mean())


def _newton(wins: np.ndarray, games: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Maximise the (concave) log-likelihood in natural-log units, gauge-penalised to mean 0.

    Hand-written Newton rather than ``scipy.optimize.minimize``: its trust-region methods
    stop near a gradient of 1e-10 because they need a measurable drop in the objective,
    which rounding hides; here a step is also accepted when it shrinks the gradient.
    """
    k = len(wins)

    def objective(theta):
        diff = theta[:, None] - theta[None, :]
        mean = theta.mean()
        value = -np.sum(wins * log_expit(diff)) + 0.5 * k * mean**2
        gradient = -(wins - games * expit(diff)).sum(axis=1) + mean  # expected minus actual wins
        return value, gradient

    def hessian(theta):
        diff = theta[:, None] - theta[None, :]
        weight = games * expit(diff) * expit(-diff)
        return np.diag(weight.sum(axis=1)) - weight + 1.0 / k  # + 1/k: the gauge penalty

    tolerance = 1e-12 * max(1.0, games.max())
    theta = np.zeros(k)
    value, gradient = objective(theta)
    for _ in range(iterations):
        if np.abs(gradient).max() <= tolerance:
            return theta
        step = np.linalg.solve(hessian(theta), -gradient)
        length = 1.0
        while True:
            new_value, new_gradient = objective(theta + length * step)
            decreased = new_value <= value + 1e-4 * length * (gradient @ step)
            if decreased or np.abs(new_gradient).max() < np.abs(gradient).max() or length < 1e-10:
                break
            length /= 2
        theta, value, gradient = theta + length * step, new_value, new_gradient
    raise MetaEvalError(
        f"Bradley-Terry fit did not converge: gradient {np.abs(gradient).max():.3g} after {iterations} Newton steps"
    )


def elo(game: MetaGame, prior: float = 0.0) -> Rating:
    """Elo ratings of a symmetric 2-player game of win probabilities G_0[i, j] = P(i beats j).

    Each ordered pair (i, j) counts ``game.counts[i, j]`` games (1 without counts), so i's
    wins over j are ``(n_ij + n_ji) G_0[i, j]``.  Both players get the same ratings.
    """
    _check_win_probability_game(game)
    probability = game.payoffs[0]
    games = np.ones(game.shape) if game.counts is None else game.counts
    wins = (games + games.T) * probability
    ratings = bradley_terry(wins, prior=prior)
    diagnostics = {"gauge": "mean 0", "base": 10, "scale": 400, "prior": prior}
    return Rating("elo", game, [ratings, ratings.copy()], None, diagnostics)


def _check_win_probability_game(game: MetaGame) -> None:
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"elo needs a MetaGame, got {type(game).__name__}")
    if game.num_players != 2 or game.shape[0] != game.shape[1]:
        raise MetaEvalError(
            f"elo needs a symmetric 2-player game of win probabilities; got {game!r}"
        )
    row, column = game.payoffs
    if not np.allclose(column, row.T, rtol=0, atol=GAME_TOLERANCE):
        raise MetaEvalError("elo needs a symmetric game: the column payoffs must be G_0 transposed")
    if np.any(row < -GAME_TOLERANCE) or np.any(row > 1 + GAME_TOLERANCE):
        raise MetaEvalError("elo needs win probabilities: every payoff must lie in [0, 1]")
    off_diagonal = ~np.eye(len(row), dtype=bool)
    if not np.allclose((row + row.T)[off_diagonal], 1.0, rtol=0, atol=GAME_TOLERANCE):
        raise MetaEvalError(
            "elo needs win probabilities: G_0[i, j] + G_0[j, i] must be 1 for i != j"
        )
