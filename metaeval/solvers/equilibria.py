"""Equilibrium quantities on a meta-game: CCE constraints, deviation gains, gaps.

Notation of the maths page, section 1: ``G[p][a]`` is player p's payoff at joint ``a`` and
``sigma`` a joint distribution of shape ``[K_1, ..., K_N]``.
"""

from __future__ import annotations

import numpy as np

from metaeval.runs import budget
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers.mecce import max_entropy


#: How far below 0 an entry of sigma, and how far from 1 its sum, may be (rounding).
SIGMA_TOLERANCE = 1e-6


def check_distribution(game: MetaGame, sigma, atol: float = SIGMA_TOLERANCE) -> np.ndarray:
    """``sigma`` as a float array over the game's joints, or a clear error if it is not one.

    Args:
        game: the meta-game.
        sigma: a joint distribution over the game's joints ``[K_1, ..., K_N]``.
        atol: how far below 0 an entry, and the sum from 1, may be.

    Returns:
        ``sigma`` as a float array.

    Raises:
        MetaEvalError: ``sigma`` is not a distribution over the joints.
    """
    return check_joint_distribution(sigma, game.shape, "game", atol)


def check_joint_distribution(sigma, shape, owner: str, atol: float = SIGMA_TOLERANCE) -> np.ndarray:
    """``sigma`` as a float array of ``shape`` that is a probability distribution, or an
    error naming ``owner`` (what the joints belong to: a game, a population).

    Args:
        sigma: the candidate distribution.
        shape: the joints' shape.
        owner: what the joints belong to, for the message.
        atol: how far below 0 an entry, and the sum from 1, may be.

    Returns:
        ``sigma`` as a float array.

    Raises:
        MetaEvalError: ``sigma`` is not a distribution of that shape.
    """
    sigma = np.asarray(sigma, dtype=np.float64)
    shape = tuple(shape)
    if sigma.shape != shape:
        raise MetaEvalError(f"sigma must have the {owner}'s joint shape {shape}, got {sigma.shape}")
    if not np.all(np.isfinite(sigma)) or np.any(sigma < -atol):
        raise MetaEvalError("sigma must be finite and non-negative")
    if abs(sigma.sum() - 1.0) > atol:
        raise MetaEvalError(f"sigma must sum to 1, sums to {sigma.sum():.12g}")
    return sigma


def deviation_payoffs(game: MetaGame, player: int) -> np.ndarray:
    """D[a', a] = G_p(a'_p, a_-p) - G_p(a): shape ``[K_p, K_1, ..., K_N]``.

    Row a' is the CCE deviation to a'_p (Marris et al. 2025, eq. 3a, per joint).

    Args:
        game: the meta-game.
        player: the player who deviates.

    Returns:
        D.
    """
    payoff = game.payoffs[player]
    k = game.shape[player]
    budget.check_joints(game.shape, 2 * k, f"player {player}'s deviation payoffs")
    # G_p(a'_p, a_-p) broadcast over a_p: index a' along a new leading axis.
    deviated = np.stack([np.take(payoff, [i], axis=player) for i in range(k)])
    return np.broadcast_to(deviated, (k, *game.shape)) - payoff[None]


def cce_constraints(game: MetaGame) -> np.ndarray:
    """The CCE matrix A, rows (p, a'_p) in player order, columns joints in C order.

    sigma is an eps-CCE iff ``A @ sigma.ravel() <= eps`` (maths, section 1).

    Args:
        game: the meta-game.

    Returns:
        A ``[sum_p K_p, prod_p K_p]``.
    """
    budget.check_joints(game.shape, sum(game.shape), "the CCE constraint matrix")
    return cce_constraint_stack(game.payoffs[None])[0]


def cce_constraint_stack(payoffs: np.ndarray) -> np.ndarray:
    """The CCE matrices of a stack of payoff tensors, each as
    [`cce_constraints`][metaeval.solvers.equilibria.cce_constraints] forms it, written in
    place: no copy beyond the result.

    Args:
        payoffs: the payoff tensors ``[B, N, K_1, ..., K_N]``.

    Returns:
        A ``[B, sum_p K_p, prod_p K_p]``.
    """
    count, shape = len(payoffs), payoffs.shape[2:]
    matrices = np.empty((count, sum(shape), int(np.prod(shape))))
    start = 0
    for p, k in enumerate(shape):
        own = np.moveaxis(payoffs[:, p], 1 + p, 1)[:, None]  # [B, 1, K_p(a_p), rest]
        block = matrices[:, start : start + k].reshape(count, k, *shape)  # [B, a'_p, K_1, ..., K_N]
        np.subtract(np.swapaxes(own, 1, 2), own, out=np.moveaxis(block, 2 + p, 2))  # G_p(a'_p, a_-p) - G_p(a)
        start += k
    return matrices


def deviation_gains(game: MetaGame, sigma) -> list[np.ndarray]:
    """delta_p(a'_p; sigma) for every player and deviation, one array per player.

    Computed from the opponents' marginal of sigma, never forming the CCE matrix.

    Args:
        game: the meta-game.
        sigma: a joint distribution over the game's joints ``[K_1, ..., K_N]``.

    Returns:
        The gains ``[K_p]``, one array per player.
    """
    sigma = check_distribution(game, sigma)
    gains = []
    for p in range(game.num_players):
        payoff = game.payoffs[p]
        gains.append(against(payoff, sigma.sum(axis=p), p) - float(np.vdot(sigma, payoff)))
    return gains


def against(payoff: np.ndarray, opponents: np.ndarray, p: int) -> np.ndarray:
    """sum_{a_-p} payoff(a'_p, a_-p) opponents(a_-p) for every a'_p: player p's expected
    payoff of each strategy against the opponents' joint distribution ``opponents``
    (``[K_q for q != p]``). Read as stored, [before, K_p, after] against [before, after]:
    np.tensordot's transposed copy of the payoffs took 10 times longer at 7 x 12.

    Args:
        payoff: player p's payoffs ``[K_1, ..., K_N]``.
        opponents: the other players' joint distribution, their axes in order.
        p: the player.

    Returns:
        The expected payoffs ``[K_p]``.
    """
    before = int(np.prod(payoff.shape[:p]))
    stacked = payoff.reshape(before, payoff.shape[p], -1)
    return np.einsum("bac,bc->a", stacked, opponents.reshape(before, -1))


def cce_gap(game: MetaGame, sigma) -> float:
    """Sum over players of the best coarse-correlated deviation gain, floored at 0.

    Args:
        game: the meta-game.
        sigma: a joint distribution over the game's joints ``[K_1, ..., K_N]``.

    Returns:
        The gap.
    """
    return float(sum(max(0.0, g.max()) for g in deviation_gains(game, sigma)))


def ce_gains(game: MetaGame, sigma) -> list[np.ndarray]:
    """CE gains: ``gains[p][a_p, a'_p] = sum_{a_-p} sigma(a) (G_p(a'_p, a_-p) - G_p(a))``.

    Args:
        game: the meta-game.
        sigma: a joint distribution over the game's joints ``[K_1, ..., K_N]``.

    Returns:
        The gains ``[K_p, K_p]``, one array per player.
    """
    sigma = check_distribution(game, sigma)
    gains = []
    for p in range(game.num_players):
        d = np.moveaxis(deviation_payoffs(game, p) * sigma[None], 1 + p, 0)  # [K_p(a_p), K_p(a'), ...]
        gains.append(d.reshape(d.shape[0], d.shape[1], -1).sum(axis=2))
    return gains


def ce_gap(game: MetaGame, sigma) -> float:
    """Sum over players and recommendations of the best correlated deviation gain (floored at 0).

    Args:
        game: the meta-game.
        sigma: a joint distribution over the game's joints ``[K_1, ..., K_N]``.

    Returns:
        The gap.
    """
    return float(sum(np.maximum(g.max(axis=1), 0.0).sum() for g in ce_gains(game, sigma)))


def mecce(game: MetaGame) -> np.ndarray:
    """The maximum-entropy CCE, shape ``[K_1, ..., K_N]`` (maths, section 2.2; Marris et al. 2022).

    Its CCE constraints hold to ~1e-13 of the largest payoff difference; MetaEvalError if
    the dual solver cannot reach 1e-9.

    Args:
        game: the meta-game.

    Returns:
        The MECCE.
    """
    return max_entropy(cce_constraints(game)).distribution.reshape(game.shape)
