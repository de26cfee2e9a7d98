"""Nash rating: payoff against a uniquely selected Nash equilibrium x (SPEC 2, `nash`).

    r_p(a_p) = G_p(a_p, x_-p) - G_p(x)

Two-player zero-sum games use the maximum-entropy equilibrium (Nash averaging,
Balduzzi et al. 2018), which splits mass evenly over copies of a strategy, so the
ratings are clone invariant.  Every other game uses the limiting logit equilibrium
(Marris et al. 2022).  Every rating is <= 0 up to the equilibrium's max regret, which
the diagnostics report.
"""

from __future__ import annotations

import time

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating
from metaeval.ratings.logit import limiting_logit_equilibrium, max_regret, payoff_against
from metaeval.ratings.nash_zero_sum import max_entropy_nash


REGRET_TOLERANCE = 1e-6
"""Largest accepted max regret of the selected equilibrium, per unit of payoff range."""


def nash(game: MetaGame, target: str = "uniform", kernel_variance: float | None = None) -> Rating:
    """Rate every strategy by its payoff against the selected equilibrium, minus its value.

    ``target="affinity"`` selects the equilibrium with the clone-invariant affinity-entropy
    target instead (Liu et al. 2025; metaeval.ratings.affinity).
    """
    if target != "uniform":
        from metaeval.ratings.affinity import nash_with_target

        return nash_with_target(game, target, kernel_variance)
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"nash needs a MetaGame, got {type(game).__name__}")
    if game.num_players < 2:
        raise MetaEvalError("nash needs a game of at least 2 players")
    start = time.perf_counter()
    diagnostics = {}
    if game.num_players == 2 and game.is_zero_sum():
        row, column, value = max_entropy_nash(game.payoffs[0])
        strategies = [row, column]
        diagnostics.update(equilibrium="maximum-entropy Nash (zero-sum)", value=value)
    else:
        strategies = limiting_logit_equilibrium(game.payoffs)
        diagnostics["equilibrium"] = "limiting logit equilibrium"
    ratings = []
    for p, x in enumerate(strategies):
        values = payoff_against(game.payoffs, strategies, p)
        ratings.append(values - values @ x)
    regret = max_regret(game.payoffs, strategies)
    tolerance = REGRET_TOLERANCE * max(1.0, float(np.ptp(game.payoffs)))
    if regret > tolerance:
        raise MetaEvalError(
            f"the {diagnostics['equilibrium']} found has max regret {regret:.3g}, above the "
            f"accepted {tolerance:.3g}; the ratings would not be against an equilibrium"
        )
    diagnostics.update(max_regret=regret, seconds=time.perf_counter() - start)
    return Rating("nash", game, ratings, strategies, diagnostics)
