"""Exact best responses in the full game, read off the CCE gap computation (maths, section 4).

The gap of sigma already finds, for every player, the best actions at each state against
the opponents' joint marginal of sigma ([`metaeval.spiel.cce_gap`][metaeval.spiel.cce_gap]); the evaluator
caches it per sigma, so a loop asking each player in turn walks the tree once per sigma and
then only draws among tied actions (OpenSpiel's tie-break takes one pass of its own per
player).
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.training.meta_solvers import marginals, product_distribution


TIE_BREAKS = ("drawn", "openspiel")
"""How [`jpsro`][metaeval.training.oracles.jpsro] chooses among tied best actions."""


def jpsro(evaluator, player: int, sigma, rng: np.random.Generator, tie_break: str = "drawn"):
    """JPSRO's CCE oracle: the best response to the opponents' joint marginal of sigma.

    Several pure best responses often tie. ``tie_break="drawn"`` (default) draws among
    them with ``rng``: at every state uniformly among the actions within 1e-9 of the best
    ([`metaeval.Evaluator.best_response`][metaeval.training.evaluator.Evaluator.best_response]). ``"openspiel"`` takes the one OpenSpiel's
    ``jpsro`` adds ([`metaeval.Evaluator.openspiel_best_response`][metaeval.training.evaluator.Evaluator.openspiel_best_response]: sigma's masses
    below 1e-8 dropped, uniform at states the opponents never reach, ties within 1e-9 to
    the lowest action), so a run holds the same populations as ``jpsro.run_loop``. It is
    not the default: it is one fixed choice, the same at every call, and on kuhn_3p with
    mgcce it settles no sooner (README, "PSRO and JPSRO").

    Args:
        evaluator: the loop's [`Evaluator`][metaeval.training.evaluator.Evaluator].
        player: the player who gets a new policy.
        sigma: a joint distribution over the population, of the meta-game's shape.
        rng: the generator that draws among tied actions.
        tie_break: ``"drawn"`` or ``"openspiel"``.

    Returns:
        The new policy.
    """
    if tie_break == "openspiel":
        return evaluator.openspiel_best_response(player, sigma)
    if tie_break != "drawn":
        raise MetaEvalError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    return evaluator.best_response(player, sigma, rng)


def psro(evaluator, player: int, sigma, rng: np.random.Generator):
    """PSRO's oracle: the best response to the opponents playing their marginals of sigma
    independently (for a product sigma, such as a Nash mixture, the same as [`jpsro`][metaeval.training.oracles.jpsro]),
    drawn among tied ones as [`jpsro`][metaeval.training.oracles.jpsro] does.

    Args:
        evaluator: the loop's [`Evaluator`][metaeval.training.evaluator.Evaluator].
        player: the player who gets a new policy.
        sigma: a joint distribution over the population, of the meta-game's shape.
        rng: the generator that draws among tied actions.

    Returns:
        The new policy.
    """
    independent = product_distribution(marginals(np.asarray(sigma, dtype=np.float64)))
    return evaluator.best_response(player, independent, rng)
