"""Matchmaking: whom a player's members train against, as a distribution over opponent profiles.

Every rule returns an array of the meta-game's shape without the player's axis,
``[K_q for q != player]``: the probability of each joint profile of the other players'
members. ``member`` is the index of the training member within the player's population;
``None`` means the player's population as a whole (its members weighted uniformly).

- [`uniform`][metaeval.training.matchmaking.uniform]: every opponent profile equally likely.
- [`conditional`][metaeval.training.matchmaking.conditional]: ``sigma(member, .) / sum sigma(member, .)``, the conditional of a
  joint meta-distribution (Nash, MECCE, the deviation rating's CCE, ...) given that the
  player plays ``member``; the opponents' marginal of sigma when ``member`` is ``None``
  or has no mass under sigma.
- [`pfsp`][metaeval.training.matchmaking.pfsp]: prioritised fictitious self-play (Vinyals et al. 2019, AlphaStar league):
  ``w(j) = f(x_j)``, ``x_j`` the member's probability of beating profile j, with
  ``f_hard(x) = (1 - x)^exponent``, normalised; uniform when every weight is 0.
  ``x_j`` is the member's expected payoff against j rescaled from the game's utility
  range ``[lo, hi]`` to [0, 1]: ``(G_p(member, j) - lo) / (hi - lo)``, which is the win
  probability in a game paying +1 for a win and -1 for a loss.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame

RULES = ("uniform", "pfsp", "conditional")


def _check(metagame: MetaGame, player: int, member: int | None) -> None:
    if not 0 <= player < metagame.num_players:
        raise MetaEvalError(f"no player {player!r} in a {metagame.num_players}-player meta-game")
    if member is not None and not 0 <= member < metagame.shape[player]:
        raise MetaEvalError(f"player {player} has {metagame.shape[player]} members, no index {member!r}")


def opponent_shape(shape, player: int) -> tuple[int, ...]:
    """The meta-game's shape without ``player``'s axis."""
    return tuple(k for q, k in enumerate(shape) if q != player)


def uniform(metagame: MetaGame, player: int, member: int | None = None) -> np.ndarray:
    """Every joint profile of the other players' members equally likely.

    Args:
        metagame: the meta-game.
        player: the player who trains.
        member: unused (every member gets the same distribution).

    Returns:
        The distribution over the other players' joint profiles.
    """
    _check(metagame, player, member)
    shape = opponent_shape(metagame.shape, player)
    return np.full(shape, 1.0 / np.prod(shape))


def conditional(metagame: MetaGame, player: int, sigma, member: int | None = None) -> np.ndarray:
    """The conditional of ``sigma [K_1..K_N]`` on the player playing ``member`` (its
    opponents' marginal when ``member`` is None or never played under sigma).

    Args:
        metagame: the meta-game.
        player: the player who trains.
        sigma: a joint distribution of the meta-game's shape.
        member: the index of the member who trains (None: the whole population).

    Returns:
        The distribution over the other players' joint profiles.
    """
    _check(metagame, player, member)
    sigma = np.asarray(sigma, dtype=np.float64)
    if sigma.shape != metagame.shape:
        raise MetaEvalError(f"sigma of shape {sigma.shape} does not fit the meta-game {metagame.shape}")
    slices = np.moveaxis(sigma, player, 0)
    if member is not None and slices[member].sum() > 0:
        weights = slices[member]
    else:
        weights = slices.sum(axis=0)
    return weights / weights.sum()


def win_probability(metagame: MetaGame, player: int, member: int | None, utility_range) -> np.ndarray:
    """``x_j`` of [`pfsp`][metaeval.training.matchmaking.pfsp]: payoff against each opponent profile rescaled to [0, 1].

    Args:
        metagame: the meta-game.
        player: the player who trains.
        member: the index of the member who trains (None: the population's mean payoff).
        utility_range: the game's ``(min, max)`` payoff.

    Returns:
        ``x`` per opponent profile.
    """
    _check(metagame, player, member)
    lo, hi = (float(u) for u in utility_range)
    if not hi > lo:
        raise MetaEvalError(f"the utility range must have lo < hi, got {utility_range!r}")
    payoffs = np.moveaxis(metagame.payoffs[player], player, 0)
    payoffs = payoffs.mean(axis=0) if member is None else payoffs[member]
    return np.clip((payoffs - lo) / (hi - lo), 0.0, 1.0)


def pfsp(metagame: MetaGame, player: int, utility_range, member: int | None = None,
         exponent: float = 2.0) -> np.ndarray:
    """Prioritised fictitious self-play: weight ``(1 - x)^exponent`` per opponent profile,
    ``x`` the member's win probability against it (see the module docstring).

    Args:
        metagame: the meta-game.
        player: the player who trains.
        utility_range: the game's ``(min, max)`` payoff, mapped to [0, 1].
        member: the index of the member who trains (None: the population's mean payoff).
        exponent: the weight's exponent, > 0.

    Returns:
        The distribution over the other players' joint profiles.
    """
    if not exponent > 0:
        raise MetaEvalError(f"the pfsp exponent must be positive, got {exponent!r}")
    weights = (1.0 - win_probability(metagame, player, member, utility_range)) ** exponent
    total = weights.sum()
    return weights / total if total > 0 else uniform(metagame, player, member)


def profiles(distribution: np.ndarray, player: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The support of an opponent distribution as full joint index tuples (the player's own
    entry is -1) and their probabilities, in row-major order."""
    distribution = np.asarray(distribution)
    support = np.argwhere(distribution > 0)
    joints = [tuple(int(i) for i in np.insert(row, player, -1)) for row in support]
    return joints, distribution[tuple(support.T)]
