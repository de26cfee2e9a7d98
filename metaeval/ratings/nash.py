"""Nash rating: payoff against a uniquely selected Nash equilibrium x (maths, section 2, `nash`).

    r_p(a_p) = G_p(a_p, x_-p) - G_p(x)

Two-player zero-sum games use the maximum-entropy equilibrium (Nash averaging,
Balduzzi et al. 2018), which splits mass evenly over copies of a strategy, so the
ratings are clone invariant.  Every other game uses the limiting logit equilibrium
(Marris et al. 2022); in a symmetric game (players identical up to relabelling, within
SYMMETRY_TOLERANCE of the payoff range) that of the symmetric branch, a symmetric
equilibrium, so identical players get identical ratings
(`metaeval.ratings.logit.limiting_logit_equilibrium`); in a large king-of-the-hill
game the branch is traced with the prompt player eliminated
([`metaeval.ratings.logit_eliminated`][metaeval.ratings.logit_eliminated]).  Every rating is <= 0 up
to the equilibrium's max regret, which the diagnostics report.
"""

from __future__ import annotations

import time

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating, homogeneous, product_distribution
from metaeval.ratings import logit_eliminated
from metaeval.ratings.logit import limiting_logit_equilibrium, max_regret, payoff_against
from metaeval.solvers import king_of_the_hill
from metaeval.ratings.nash_zero_sum import max_entropy_nash


REGRET_TOLERANCE = 1e-6
"""Largest accepted max regret of the selected equilibrium, per unit of payoff range."""

ZERO_SUM_TOLERANCE = 1e-9
"""Players' payoffs summing to a constant within this fraction of the range: zero-sum."""

SYMMETRY_TOLERANCE = 1e-9
"""Players' payoffs equal up to relabelling players within this fraction of the range: symmetric."""


def well_scaled(payoffs: np.ndarray) -> tuple[np.ndarray, float]:
    """``(G_p - mean G_p) / s`` and the payoff range s = max_p (max G_p - min G_p).

    Nash equilibria and logit QREs are unchanged by a constant per player and by one
    common positive factor, so the solvers see payoffs of range 1 whatever the user's
    units; constant-sum games become zero-sum. s is 0 for a constant game.
    """
    axes = tuple(range(1, payoffs.ndim))
    centred = payoffs - payoffs.mean(axis=axes, keepdims=True)
    spread = float(max(np.ptp(g) for g in payoffs))
    return (centred / spread if spread > 0 else centred), spread


@homogeneous("payoff_range", "value", "max_regret")
def nash(game: MetaGame, target: str = "uniform", kernel_variance: float | None = None) -> Rating:
    """Rate every strategy by its payoff against the selected equilibrium, minus its value.

    The solvers see `well_scaled` payoffs, so the ratings of ``a * game + b`` are
    ``a`` times those of ``game``; the max regret is accepted up to REGRET_TOLERANCE times
    the payoff range. ``target="affinity"`` selects the equilibrium with the
    clone-invariant affinity-entropy target instead (Liu et al. 2025;
    metaeval.ratings.affinity).

    Args:
        game: the meta-game (at least 2 players).
        target: ``"uniform"``, or ``"affinity"`` for the clone-invariant selection.
        kernel_variance: with ``target="affinity"``: None, the only kernel it supports.

    Returns:
        The Rating; its ``distribution`` is the product of the equilibrium's mixtures.
    """
    if target != "uniform":
        from metaeval.ratings.affinity import nash_with_target

        return nash_with_target(game, target, kernel_variance)
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"nash needs a MetaGame, got {type(game).__name__}")
    if game.num_players < 2:
        raise MetaEvalError("nash needs a game of at least 2 players")
    start = time.perf_counter()
    payoffs, spread = well_scaled(game.payoffs)
    selection = equilibrium_selection(game, payoffs, spread)
    diagnostics = {"payoff_range": spread, "equilibrium": selection}
    if selection == CONSTANT:  # every profile is an equilibrium; the logit path stays at uniform
        strategies = [np.full(k, 1.0 / k) for k in game.shape]
    elif selection == ZERO_SUM:
        row, column, value = max_entropy_nash(payoffs[0])
        strategies = [row, column]
        diagnostics.update(value=value * spread + float(game.payoffs[0].mean()))
    elif selection == KING_OF_THE_HILL:
        strategies = logit_eliminated.limiting_logit_equilibrium(payoffs)
    else:
        strategies = limiting_logit_equilibrium(payoffs, symmetric=selection == SYMMETRIC)
    return rated_against(game, payoffs, spread, strategies, diagnostics, start)


CONSTANT = "uniform (constant game)"
ZERO_SUM = "maximum-entropy Nash (zero-sum)"
KING_OF_THE_HILL = "limiting logit equilibrium (traced with the prompt player eliminated)"
SYMMETRIC = "limiting logit equilibrium (symmetric branch)"
LOGIT = "limiting logit equilibrium"


def equilibrium_selection(game: MetaGame, payoffs: np.ndarray, spread: float) -> str:
    """The equilibrium `nash` selects in ``game`` (module docstring), named as its
    diagnostics name it: CONSTANT, ZERO_SUM, KING_OF_THE_HILL, SYMMETRIC or LOGIT.

    Args:
        game: the meta-game.
        payoffs: its `well_scaled` payoffs.
        spread: its payoff range.

    Returns:
        The selection's name.
    """
    if spread == 0:
        return CONSTANT
    if game.num_players == 2 and np.abs(payoffs.sum(axis=0)).max() <= ZERO_SUM_TOLERANCE:
        return ZERO_SUM
    if king_of_the_hill.structured(game):
        return KING_OF_THE_HILL
    if MetaGame(payoffs).is_symmetric(rtol=SYMMETRY_TOLERANCE):
        return SYMMETRIC
    return LOGIT


def rated_against(game: MetaGame, payoffs: np.ndarray, spread: float, strategies: list[np.ndarray],
                  diagnostics: dict, start: float) -> Rating:
    """The nash Rating of ``game`` against the equilibrium ``strategies`` of its
    `well_scaled` ``payoffs``, refused where its max regret exceeds REGRET_TOLERANCE times
    the payoff range.

    Args:
        game: the meta-game.
        payoffs: its `well_scaled` payoffs.
        spread: its payoff range.
        strategies: the selected equilibrium, one mixed strategy per player.
        diagnostics: the diagnostics so far, its name (`equilibrium_selection`) under
            ``"equilibrium"``.
        start: the ``time.perf_counter()`` at which the rating started.

    Returns:
        The Rating.
    """
    ratings = []
    for p, x in enumerate(strategies):
        values = payoff_against(payoffs, strategies, p)
        ratings.append(spread * (values - values @ x))
    regret = spread * max_regret(payoffs, strategies)
    tolerance = REGRET_TOLERANCE * spread
    if regret > tolerance:
        raise MetaEvalError(
            f"the {diagnostics['equilibrium']} found has max regret {regret:.3g}, above the "
            f"accepted {tolerance:.3g} ({REGRET_TOLERANCE:g} of the payoff range); the ratings "
            "would not be against an equilibrium"
        )
    diagnostics.update(max_regret=regret, seconds=time.perf_counter() - start)
    # A strategy's rating is exact only up to the accepted regret: closer ratings are tied.
    return Rating("nash", game, ratings, product_distribution(strategies), diagnostics, tolerance=tolerance)
