"""Elo ratings: a batch Bradley-Terry fit on base 10 with scale 400 (maths, section 2, `elo`).

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
from metaeval.runs.threads import one_blas_thread

SCALE = 400.0 / np.log(10.0)  # Elo points per natural-log odds unit
GAME_TOLERANCE = 1e-9
NEWTON_TOLERANCE = 1e-12
"""Largest accepted gradient entry, in units of the largest (weighted) win count."""
RANK_TOLERANCE = 1e-9 * SCALE
"""Elo points: scores closer than this (far below the fit's own precision) are tied."""


def bradley_terry(wins, prior: float = 0.0) -> np.ndarray:
    """Elo ratings (mean 0) maximising sum_ij W_ij log P(i beats j) (Bradley & Terry 1952).

    Args:
        wins: square array, ``wins[i, j]`` = (weighted) number of wins of i over j; the
            diagonal is ignored.
        prior: virtual games added between every pair, half won by each side; any
            ``prior > 0`` makes the estimate exist even when someone never lost.

    Returns:
        The ratings ``[K]``, base 10, scale 400, mean 0.
    """
    wins = np.array(wins, dtype=np.float64)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1] or wins.shape[0] < 1:
        raise MetaEvalError(f"wins must be a square matrix, got shape {wins.shape}")
    if not np.all(np.isfinite(wins)) or np.any(wins < 0):
        raise MetaEvalError("wins must be finite and non-negative")
    if not prior >= 0 or not np.isfinite(prior):
        raise MetaEvalError(f"prior must be a finite number >= 0, got {prior}")
    wins = with_prior(wins, prior)
    if len(wins) > 1:
        connected, _ = csgraph.connected_components(wins > 0, directed=True, connection="strong")
        if connected > 1:
            raise MetaEvalError(
                "Bradley-Terry ratings do not exist: some strategies never lose (or never win) "
                "against another group; pass prior > 0 to regularise"
            )
    return SCALE * fit_batch(wins[None])[0]


def with_prior(wins: np.ndarray, prior: float) -> np.ndarray:
    """``wins`` (or a stack of them) with a zero diagonal and ``prior / 2`` virtual wins per ordered pair."""
    k = wins.shape[-1]
    return np.where(np.eye(k, dtype=bool), 0.0, wins + prior / 2)


def fit_batch(wins: np.ndarray, start: np.ndarray | None = None, iterations: int = 200) -> np.ndarray:
    """Bradley-Terry MLEs in natural-log units, mean 0, of a stack of win matrices ``[B, k, k]``.

    Every matrix must have a zero diagonal and a strongly connected "has beaten" graph
    (``bradley_terry`` checks that).  ``start`` (``[B, k]`` or ``[k]``) warm-starts the
    iteration, e.g. bootstrap rounds from the full-data estimate.
    """
    # The likelihood is homogeneous in the wins, so its maximiser ignores a common weight:
    # each matrix is divided by its largest entry, and the Newton tolerance is relative.
    largest = wins.max(axis=(1, 2), keepdims=True)
    wins = wins / np.where(largest > 0, largest, 1.0)
    games = wins + np.swapaxes(wins, 1, 2)
    theta = np.zeros(wins.shape[:2]) if start is None else np.broadcast_to(start, wins.shape[:2]).copy()
    # One BLAS thread: on many small solves, BLAS threads spend more time synchronising
    # than computing (30x slower on a loaded 2-core machine).
    with one_blas_thread():
        return _newton(wins, games, theta, iterations)


def _gradient(theta, wins, games):
    """Gradient of the gauge-penalised negative log-likelihood, and P(i beats j)."""
    probability = expit(theta[:, :, None] - theta[:, None, :])
    gradient = -(wins - games * probability).sum(axis=2) + theta.mean(axis=1)[:, None]  # expected minus actual wins
    return gradient, probability


def _value(theta, wins):
    """Negative log-likelihood plus the gauge penalty k/2 mean(theta)^2."""
    k = theta.shape[1]
    diff = theta[:, :, None] - theta[:, None, :]
    return -np.einsum("bij,bij->b", wins, log_expit(diff)) + 0.5 * k * theta.mean(axis=1) ** 2


def _newton(wins, games, theta, iterations):
    """Damped Newton on every problem of the batch at once (batched LU solves).

    Hand-written rather than ``scipy.optimize.minimize``: its trust-region methods stop
    near a gradient of 1e-10 because they need a measurable drop in the objective, which
    rounding hides; here a step is accepted when it shrinks the gradient, or else passes
    an Armijo test (the likelihood is computed only then).  Batching the bootstrap rounds
    turns their thousand small solves into a few large array passes.
    """
    k = theta.shape[1]
    tolerance = NEWTON_TOLERANCE
    gradient, probability = _gradient(theta, wins, games)
    for _ in range(iterations):
        todo = np.flatnonzero(np.abs(gradient).max(axis=1) > tolerance)
        if len(todo) == 0:
            return theta - theta.mean(axis=1, keepdims=True)
        w, g, p = wins[todo], games[todo], probability[todo]
        weight = g * p * (1 - p)
        hessian = -weight + 1.0 / k  # + 1/k: the gauge penalty
        hessian[:, np.arange(k), np.arange(k)] += weight.sum(axis=2)
        step = np.linalg.solve(hessian, -gradient[todo][:, :, None])[:, :, 0]
        slope = np.einsum("bi,bi->b", gradient[todo], step)
        old_size = np.abs(gradient[todo]).max(axis=1)
        length = np.ones(len(todo))
        pending = np.arange(len(todo))
        value = None
        while len(pending):
            rows = todo[pending]
            trial = theta[rows] + length[pending, None] * step[pending]
            trial_gradient, trial_p = _gradient(trial, w[pending], g[pending])
            accepted = (np.abs(trial_gradient).max(axis=1) < old_size[pending]) | (length[pending] < 1e-10)
            if not accepted.all():
                if value is None:
                    value = _value(theta[todo], w)
                armijo = _value(trial, w[pending]) <= value[pending] + 1e-4 * length[pending] * slope[pending]
                accepted |= armijo
            done = pending[accepted]
            theta[todo[done]] = trial[accepted]
            gradient[todo[done]], probability[todo[done]] = trial_gradient[accepted], trial_p[accepted]
            pending = pending[~accepted]
            length[pending] /= 2
    raise MetaEvalError(
        f"Bradley-Terry fit did not converge: gradient {np.abs(gradient).max():.3g} after {iterations} Newton steps"
    )


def elo(game: MetaGame, prior: float = 0.0) -> Rating:
    """Elo ratings of a symmetric 2-player game of win probabilities G_0[i, j] = P(i beats j).

    Each ordered pair (i, j) counts ``game.counts[i, j]`` games (1 without counts), so i's
    wins over j are ``(n_ij + n_ji) G_0[i, j]``.  Both players get the same ratings.

    Args:
        game: a symmetric 2-player game whose ``payoffs[0][i, j]`` is the probability that i
            beats j (such as [`metaeval.pairwise.to_metagame`][metaeval.pairwise.to_metagame] makes).
        prior: virtual games between every pair, half won by each side (as in
            [`bradley_terry`][metaeval.ratings.elo.bradley_terry]).

    Returns:
        The Rating (base 10, scale 400, mean 0), the same for both players.
    """
    _check_win_probability_game(game)
    probability = game.payoffs[0]
    games = np.ones(game.shape) if game.counts is None else game.counts
    wins = (games + games.T) * probability
    ratings = bradley_terry(wins, prior=prior)
    diagnostics = {"gauge": "mean 0", "base": 10, "scale": 400, "prior": prior}
    return Rating("elo", game, [ratings, ratings.copy()], None, diagnostics, tolerance=RANK_TOLERANCE)


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
