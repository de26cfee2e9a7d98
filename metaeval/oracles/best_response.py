"""Exact best responses in the full game, read off the CCE gap computation (SPEC 4).

The gap of sigma already finds, for every player, the pure best response to the
opponents' joint marginal of sigma (:func:`metaeval.spiel.cce_gap`); the evaluator caches
it per sigma, so a loop asking each player in turn walks the tree once per sigma.
"""

from __future__ import annotations

import numpy as np

from metaeval.meta_solvers import marginals, product_distribution


def jpsro(evaluator, player: int, sigma, rng: np.random.Generator | None = None):
    """JPSRO's CCE oracle: the best response to the opponents' joint marginal of sigma."""
    return evaluator.gap(sigma).best_responses[player]


def psro(evaluator, player: int, sigma, rng: np.random.Generator | None = None):
    """PSRO's oracle: the best response to the opponents playing their marginals of sigma
    independently (for a product sigma, such as a Nash mixture, the same as :func:`jpsro`)."""
    independent = product_distribution(marginals(np.asarray(sigma, dtype=np.float64)))
    return evaluator.gap(independent).best_responses[player]
