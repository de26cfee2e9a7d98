"""Uniform rating: mean payoff against uniformly mixing opponents (maths, section 2, `uniform`)."""

from __future__ import annotations

import numpy as np

from metaeval.game import MetaGame
from metaeval.ratings.base import Rating, homogeneous, product_distribution

ROUNDING_TOLERANCE = 64 * np.finfo(np.float64).eps
"""A mean's rounding, relative to the largest |payoff|: closer ratings are tied."""


@homogeneous()
def uniform(game: MetaGame) -> Rating:
    """r_p(a_p) = mean over a_-p of G_p(a_p, a_-p).

    Args:
        game: the meta-game.

    Returns:
        The Rating; its ``distribution`` is the uniform joint.
    """
    ratings = []
    for p in range(game.num_players):
        others = tuple(1 + q for q in range(game.num_players) if q != p)
        ratings.append(game.payoffs[p].mean(axis=tuple(a - 1 for a in others)))
    marginals = [np.full(k, 1.0 / k) for k in game.shape]
    tolerance = ROUNDING_TOLERANCE * float(np.abs(game.payoffs).max())
    return Rating("uniform", game, ratings, distribution=product_distribution(marginals), tolerance=tolerance)
