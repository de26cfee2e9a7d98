"""Rating contributions: how much each opponent strategy adds to an equilibrium rating.

For a rating that is a deviation gain against a joint distribution sigma (deviation,
payoff; nash with sigma the product of its equilibrium strategies),

    r_p(a'_p) = sum_a sigma(a) [G_p(a'_p, a_-p) - G_p(a)],

and grouping the joints by opponent q's strategy c splits it exactly:

    c_q(a'_p, c) = sum_{a : a_q = c} sigma(a) [G_p(a'_p, a_-p) - G_p(a)],
    sum_c c_q(a'_p, c) = r_p(a'_p).

With p = agent A and q = the task of the agent-vs-agent-vs-task game this is the maths page's (section 6)
per-task contribution c(m', t). For a product sigma = x_1 x ... x x_N it is
x_q(c) [u_p(a'_p, c, x_-pq) - u_p(c, x_-q)]. Liu et al. (2025, section 4.3) print the
opposite sign, x_q(c) [u_p(c, x_-q) - u_p(a'_p, c, x_-pq)], which sums to -r_p.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.ratings.base import Rating

if TYPE_CHECKING:
    import pandas as pd

EQUILIBRIUM_RATERS = ("deviation", "payoff", "nash")


def joint_distribution(rating: Rating) -> np.ndarray:
    """The rating's distribution as a joint over the game's joints (outer product of
    per-player strategies when it holds one strategy per player).

    Args:
        rating: a rating with a distribution.

    Returns:
        The joint distribution ``[K_1, ..., K_N]``.
    """
    return np.asarray(rating.distribution, dtype=np.float64)


def contributions(rating: Rating, player: int = 0, opponent: int | None = None) -> np.ndarray:
    """``c[a'_p, c]``: opponent strategy c's share of ``player``'s rating of a'_p.

    ``opponent`` defaults to the last player (the task of an evaluation-data game).
    Rows sum to the deviation gains of the rating's distribution, which are the ratings
    (up to the equilibrium solver's tolerance, reported by the raters' diagnostics).

    Args:
        rating: a rating against an equilibrium (deviation, payoff or nash).
        player: the rated player.
        opponent: the player whose strategies contribute.

    Returns:
        The contributions ``[K_player, K_opponent]``.
    """
    if not isinstance(rating, Rating):
        raise MetaEvalError(f"contributions need a Rating, got {type(rating).__name__}")
    if rating.method not in EQUILIBRIUM_RATERS:
        raise MetaEvalError(
            f"contributions are defined for ratings against an equilibrium "
            f"({', '.join(EQUILIBRIUM_RATERS)}), not for {rating.method!r}"
        )
    game = rating.game
    n = game.num_players
    opponent = n - 1 if opponent is None else opponent
    if not (0 <= player < n and 0 <= opponent < n) or player == opponent:
        raise MetaEvalError(f"need two different players of the {n}-player game, got {player} and {opponent}")
    sigma = joint_distribution(rating)
    payoff = game.payoffs[player]
    # sum_{a: a_q = c} sigma(a) G_p(a'_p, a_-p) = sum_{a_-pq} sigma_-p(c, a_-pq) G_p(a'_p, c, a_-pq): one
    # contraction with the opponents' marginal, never the [K_p, K_1, ..., K_N] deviation tensor.
    deviating = payoff * sigma.sum(axis=player, keepdims=True)
    deviating = deviating.sum(axis=tuple(q for q in range(n) if q not in (player, opponent)))
    if opponent < player:
        deviating = deviating.T  # [a'_p, c]
    on_policy = (sigma * payoff).sum(axis=tuple(q for q in range(n) if q != opponent))  # [c]
    return deviating - on_policy[None]


def contribution_frame(rating: Rating, player: int = 0, opponent: int | None = None) -> pd.DataFrame:
    """Long table: strategy, opponent strategy, contribution, rating (one row per pair).

    Args:
        rating: as in [`contributions`][metaeval.ratings.contributions.contributions].
        player: the rated player.
        opponent: the player whose strategies contribute; default: the last.

    Returns:
        The table.
    """
    import pandas as pd  # a tenth of a second to import: only for tables

    opponent = rating.game.num_players - 1 if opponent is None else opponent
    values = contributions(rating, player, opponent)
    names, opponent_names = rating.game.strategy_names[player], rating.game.strategy_names[opponent]
    return pd.DataFrame({
        "strategy": np.repeat(names, len(opponent_names)),
        rating.game.player_names[opponent]: np.tile(opponent_names, len(names)),
        "contribution": values.ravel(),
        "rating": np.repeat(rating.ratings[player], len(opponent_names)),
    })
