"""The limiting logit equilibrium of a 3-player game traced with its last player eliminated.

On the logit branch every player plays x_q = softmax(lambda G_q(., x_-q)), and G_q(., x_-q)
does not depend on x_q: given the others' strategies and lambda, a player's strategy is
explicit. So the last player's unknowns can be substituted away, and the branch traced in
(y_0, y_1, lambda) alone (y = log x): its projection, one to one, of the curve that
:func:`metaeval.ratings.logit.trace_logit_branch` follows in all unknowns. Its Jacobian
adds, by the chain rule, the effect of x_0, x_1 and lambda through x_2:

    dx_2 = (diag x_2 - x_2 x_2^T) (lambda dg + g dlambda),   g = G_2(., x_0, x_1),

and the determinant keeps its sign along the branch (the full Jacobian's is the reduced
one's times that of the eliminated block, which is positive), so branch switches are
detected as before.

Why: in the king-of-the-hill game of 64 models and 2,000 prompts the full tracer solves a
dense 2,129-unknown system at every step (an LU of 6 GFLOP); eliminated, the system has
129 unknowns and a step costs a few contractions of the payoff tensors, O(joints). At
64 x 64 x 500 a rating took 5.4 CPU seconds this way and 8.2 with the full tracer
(bench.scale_koth); at 2,000 prompts the contractions (about 15 passes over the payoff
tensors a step) dominate and neither way rates in a minute. The end point is refined and
checked exactly as the full tracer's (:func:`metaeval.ratings.logit._refined`).
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.ratings import logit
from metaeval.runs.threads import one_blas_thread


def _last(payoffs, x0, x1, lam):
    """(g, x_2, dg/dx_1 transposed [K1, K2]): the last player's payoffs against x_0, x_1
    and its logit response."""
    g2 = payoffs[2]
    b1 = (x0 @ g2.reshape(len(x0), -1)).reshape(g2.shape[1:])
    g = x1 @ b1
    x2 = np.exp(lam * (g - g.max()))
    return g, x2 / x2.sum(), b1


def _values(payoffs, x0, x1, lam):
    """The contractions of one point: g, x_2, each model player's payoffs and their
    partial derivatives (module docstring)."""
    g0, g1, _ = payoffs
    g, x2, b1 = _last(payoffs, x0, x1, lam)
    c02 = np.matmul(x1, g0)  # [K0, K2]: dV_0/dx_2
    c12 = (x0 @ g1.reshape(len(x0), -1)).reshape(g1.shape[1:])  # [K1, K2]: dV_1/dx_2
    return g, x2, b1, c02, c12


def _equations(payoffs, v, offsets, jacobian=True):
    """Residuals of the branch equations of players 0 and 1 (logit's ``_branch_equations``)
    with x_2 substituted, and their Jacobian in v = (y_0, y_1, lambda) (spare zero last row)."""
    n = offsets[-1]
    lam = v[n]
    x0, x1 = np.exp(v[: offsets[1]]), np.exp(v[offsets[1] : n])
    g, x2, b1, c02, c12 = _values(payoffs, x0, x1, lam)
    values = [c02 @ x2, c12 @ x2]
    residual = np.empty(n)
    for p, x in enumerate((x0, x1)):
        first, stop = offsets[p], offsets[p + 1]
        residual[first] = x.sum() - 1.0
        residual[first + 1 : stop] = v[first + 1 : stop] - v[first] - lam * (values[p][1:] - values[p][0])
    if not jacobian:
        return residual, None
    g0, g1, _ = payoffs
    b0 = np.matmul(x1, payoffs[2])  # [K0, K2]: dg/dx_0, transposed
    # d V_p / d(lambda g) through x_2: C (diag x_2 - x_2 x_2^T), C = dV_p/dx_2.
    through = [c * x2 - np.outer(c @ x2, x2) for c in (c02, c12)]
    direct = [(g0 @ x2), (g1 @ x2).T]  # dV_0/dx_1 [K0, K1], dV_1/dx_0 [K1, K0]
    derivatives = np.zeros((n + 1, n + 1))
    for p, x in enumerate((x0, x1)):
        first, stop = offsets[p], offsets[p + 1]
        rest = slice(first + 1, stop)
        derivatives[first, first:stop] = x
        derivatives[rest, rest] = np.eye(stop - first - 1)
        derivatives[rest, first] = -1.0
        by_x = [lam * through[p] @ b0.T, lam * through[p] @ b1.T]  # dV_p/dx_0, dV_p/dx_1 through x_2
        by_x[1 - p] = by_x[1 - p] + direct[p]
        for q, (xq, d) in enumerate(zip((x0, x1), by_x)):
            derivatives[rest, offsets[q] : offsets[q + 1]] -= lam * (d[1:] - d[0]) * xq
        by_lam = through[p] @ g
        derivatives[rest, n] = -(values[p][1:] - values[p][0]) - lam * (by_lam[1:] - by_lam[0])
    return residual, derivatives


def _profile(payoffs, v, offsets):
    n = offsets[-1]
    x0, x1 = np.exp(v[: offsets[1]]), np.exp(v[offsets[1] : n])
    return [x0, x1, _last(payoffs, x0, x1, v[n])[1]]  # one contraction, not _values' three


def trace_eliminated_branch(payoffs: np.ndarray, target: float) -> list[np.ndarray]:
    """The principal logit branch of a 3-player game, traced in the unknowns of players 0
    and 1 (module docstring) by the predictor-corrector steps and step control of
    :func:`metaeval.ratings.logit.trace_logit_branch`, until the max regret is at most
    ``target`` times the payoff range. Raises logit.BranchStalled as that does."""
    if payoffs.shape[0] != 3:
        raise MetaEvalError(f"the eliminated tracer needs a 3-player game, got {payoffs.shape[0]} players")
    sizes = payoffs.shape[1:3]
    offsets = np.cumsum([0, *sizes])
    goal = target * float(np.ptp(payoffs))
    v = np.concatenate([np.full(k, -np.log(k)) for k in sizes] + [[0.0]])
    x = _profile(payoffs, v, offsets)
    with one_blas_thread():
        tangent, orientation = logit._tangent(payoffs, v, np.eye(len(v))[-1], offsets, _equations)[:2]
        step = logit._FIRST_STEP
        for _ in range(logit._MAX_STEPS):
            if logit.max_regret(payoffs, x) <= goal:
                return x
            point, new_tangent, slow_down = logit._step(payoffs, v + step * tangent, tangent, orientation,
                                                        offsets, _equations)
            near_end = logit._branch_regret(v, offsets) <= 2 * goal  # read off players 0 and 1
            step = logit.next_step(step, slow_down, point is not None, near_end)
            if point is None:
                if step < logit._MIN_STEP:
                    raise logit.BranchStalled("the logit path of this game could not be followed (step below 1e-8)", x)
                continue
            v, tangent = point, new_tangent
            x = _profile(payoffs, v, offsets)
    raise logit.BranchStalled(f"the logit path of this game did not end within {logit._MAX_STEPS} steps", x)


def limiting_logit_equilibrium(payoffs: np.ndarray) -> list[np.ndarray]:
    """The LLE of a 3-player game (as :func:`metaeval.ratings.logit.limiting_logit_equilibrium`,
    without pygambit's follower as a fallback, which cannot follow games this large)."""
    try:
        reached = trace_eliminated_branch(payoffs, logit.TRACE_REGRET)
    except logit.BranchStalled as stalled:
        reached = stalled.strategies
        if logit.max_regret(payoffs, reached) > logit.STALLED_REGRET * float(np.ptp(payoffs)):
            raise
    with one_blas_thread():
        strategies = logit._refined(payoffs, reached, False)
        if logit.max_regret(payoffs, strategies) > logit.STALLED_REGRET * float(np.ptp(payoffs)):
            strategies = logit._nearest_equilibrium(payoffs, reached, False) or strategies
    return [x.copy() for x in strategies]
