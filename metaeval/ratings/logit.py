"""Limiting logit equilibrium (LLE): the end of the principal branch of logit QREs.

McKelvey & Palfrey's logit quantal-response equilibria x(lambda) start at the uniform
profile (lambda = 0) and, along the principal branch, converge to a Nash equilibrium as
lambda -> infinity; that limit selects one equilibrium of any game (Marris et al. 2022).
pygambit's path follower (``logit_solve``) traces the branch; we stop it at a max regret
of ``TRACE_REGRET`` times the payoff range (tighter targets make it crawl: 1e-12 did not
finish in minutes on a 3 x 8 game), then refine the end point by Newton's method on the
equilibrium conditions over its support S:

    G_p(i, x_-p) = w_p  for i in S_p,     sum_{i in S_p} x_p(i) = 1,

whose solution near the traced point is the branch's limit.  A refined point counts only
if its strategies are probabilities and its regret is below the traced one's (else the
traced point is returned). Where
payoff ties give a continuum of equilibria, supports read off the traced point can also
reach other exact equilibria of the same component (the king-of-the-hill game of Liu et
al. 2025: the prompt player is indifferent at the limit, and dropping its near-tied
prompts is exact too); of the refined points of lowest regret, the one nearest the
traced point is returned.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError

TRACE_REGRET = 1e-8
SUPPORT_THRESHOLDS = (1e-6, 1e-4, 1e-8)
# Supports can also be read off the payoffs: the strategies within this gap of a best
# response (payoffs of range 1). Where a strategy is dominated only by a margin far below
# the range, the path ends with mass still on it; its payoff gap still shows it is out.
BEST_RESPONSE_GAPS = (1e-12, 1e-10)


def limiting_logit_equilibrium(payoffs: np.ndarray) -> list[np.ndarray]:
    """One mixed strategy per player: the LLE of the game ``payoffs[N, K_1..K_N]``."""
    # Imported here: pygambit is only needed for this solver.
    import pygambit

    game = pygambit.Game.from_arrays(*payoffs)
    try:
        traced = pygambit.nash.logit_solve(game, maxregret=TRACE_REGRET).equilibria
    except (RuntimeError, ValueError) as exc:
        raise MetaEvalError(f"the logit path of this game could not be followed (pygambit: {exc})") from None
    if not traced:
        raise MetaEvalError("logit path following (pygambit) returned no equilibrium")
    profile = traced[0]
    strategies = [
        np.array([float(profile[s]) for s in player.strategies]) for player in game.players
    ]
    traced_regret = max_regret(payoffs, strategies)
    supports = [[np.flatnonzero(x > threshold) for x in strategies] for threshold in SUPPORT_THRESHOLDS]
    supports += [_near_best_responses(payoffs, strategies, gap) for gap in BEST_RESPONSE_GAPS]
    candidates = []
    for support in supports:
        refined = _refine(payoffs, strategies, support)
        if refined is not None and (regret := max_regret(payoffs, refined)) < traced_regret:
            candidates.append((refined, regret))
    if not candidates:
        return strategies
    lowest = min(regret for _, regret in candidates)
    return min((x for x, regret in candidates if regret == lowest),
               key=lambda x: max(np.abs(a - b).max() for a, b in zip(x, strategies)))


def payoff_against(payoffs: np.ndarray, strategies, player: int) -> np.ndarray:
    """G_p(a_p, x_-p) for every pure strategy a_p of ``player``."""
    values = payoffs[player]
    for q in reversed(range(len(strategies))):
        if q != player:
            values = np.tensordot(values, strategies[q], axes=([q], [0]))
    return values


def max_regret(payoffs: np.ndarray, strategies) -> float:
    """max_p [max_a G_p(a, x_-p) - G_p(x)], the largest gain from a unilateral deviation,
    summed as x_p @ (max - G_p(., x_-p)): nonnegative terms, exactly 0 on exact ties."""
    gains = []
    for p, x in enumerate(strategies):
        values = payoff_against(payoffs, strategies, p)
        gains.append(x @ (values.max() - values))
    return float(max(gains))


def _near_best_responses(payoffs, strategies, gap):
    """Per player, the strategies whose payoff against the others is within gap of the best."""
    supports = []
    for p in range(len(strategies)):
        values = payoff_against(payoffs, strategies, p)
        supports.append(np.flatnonzero(values >= values.max() - gap))
    return supports


def _refine(payoffs, strategies, supports, iterations=50):
    """Newton's method on the equations of the given supports, started from the strategies
    renormalised there; None when it leaves the simplex or fails."""
    if any(len(s) == 0 for s in supports):
        return None
    local = payoffs[(slice(None), *np.ix_(*supports))]
    sizes = [len(s) for s in supports]
    offsets = np.cumsum([0, *sizes])
    num_players = len(sizes)
    x = []
    for p, support in enumerate(supports):
        mass = strategies[p][support]
        x.append(mass / mass.sum() if mass.sum() > 0 else np.full(len(support), 1.0 / len(support)))
    w = np.array([payoff_against(local, x, p) @ x[p] for p in range(num_players)])
    for _ in range(iterations):
        residual, jacobian = _equations(local, x, w, offsets)
        if np.abs(residual).max() < 1e-14:
            break
        step = np.linalg.lstsq(jacobian, -residual, rcond=None)[0]
        x = [x[p] + step[offsets[p] : offsets[p + 1]] for p in range(num_players)]
        w = w + step[offsets[-1] :]
    else:
        return None
    if any(np.any(xp < -1e-12) for xp in x):
        return None
    refined = [np.zeros_like(s) for s in strategies]
    for p, support in enumerate(supports):
        refined[p][support] = np.maximum(x[p], 0.0) / np.maximum(x[p], 0.0).sum()
    return refined


def _equations(local, x, w, offsets):
    """Residuals [G_p(i, x_-p) - w_p; sum x_p - 1] and their Jacobian in (x, w)."""
    num_players = len(x)
    n = offsets[-1]
    residual = np.zeros(n + num_players)
    jacobian = np.zeros((n + num_players, n + num_players))
    for p in range(num_players):
        rows = slice(offsets[p], offsets[p + 1])
        residual[rows] = payoff_against(local, x, p) - w[p]
        jacobian[rows, n + p] = -1.0
        residual[n + p] = x[p].sum() - 1.0
        jacobian[n + p, rows] = 1.0
        for q in range(num_players):
            if q != p:
                jacobian[rows, offsets[q] : offsets[q + 1]] = _cross_payoffs(local[p], x, p, q)
    return residual, jacobian


def _cross_payoffs(payoff, x, p, q):
    """d G_p(i, x_-p) / d x_q(j): the payoff tensor contracted with every player but p and q."""
    values = payoff
    for r in reversed(range(len(x))):
        if r not in (p, q):
            values = np.tensordot(values, x[r], axes=([r], [0]))
    return values if p < q else values.T
