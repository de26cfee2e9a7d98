"""Exact best responses in the full game, read off the CCE gap computation (SPEC 4).

The gap of sigma already finds, for every player, the pure best response to the
opponents' joint marginal of sigma (:func:`metaeval.spiel.cce_gap`); the evaluator caches
it per sigma, so a loop asking each player in turn walks the tree once per sigma (OpenSpiel's
tie-break takes one pass of its own per player).
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.meta_solvers import marginals, product_distribution


TIE_BREAKS = ("first", "openspiel")
"""How :func:`jpsro` chooses among tied best actions."""


def jpsro(evaluator, player: int, sigma, rng: np.random.Generator | None = None, tie_break: str = "first"):
    """JPSRO's CCE oracle: the best response to the opponents' joint marginal of sigma.

    Several pure best responses often tie. ``tie_break="first"`` (default) takes the gap's
    pure best response: at every state the lowest legal action with the best value in
    floating point. ``"openspiel"`` takes the one OpenSpiel's ``jpsro`` adds
    (:meth:`metaeval.Evaluator.openspiel_best_response`: sigma's masses below 1e-8
    dropped, uniform at states the opponents never reach, ties within 1e-9 to the lowest
    action), so a run holds the same populations as ``jpsro.run_loop``. It is not the
    default because it converges more slowly: on kuhn_3p with mgcce its gap is 0.048 at
    iteration 8, the default's 5e-11 (README, "PSRO and JPSRO").
    """
    if tie_break == "openspiel":
        return evaluator.openspiel_best_response(player, sigma)
    if tie_break != "first":
        raise MetaEvalError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    return evaluator.gap(sigma).best_responses[player]


def psro(evaluator, player: int, sigma, rng: np.random.Generator | None = None):
    """PSRO's oracle: the best response to the opponents playing their marginals of sigma
    independently (for a product sigma, such as a Nash mixture, the same as :func:`jpsro`)."""
    independent = product_distribution(marginals(np.asarray(sigma, dtype=np.float64)))
    return evaluator.gap(independent).best_responses[player]
