"""Maximum-entropy Nash equilibrium of a two-player zero-sum game (Balduzzi et al. 2018).

The Nash equilibria of a zero-sum game form a product of polytopes X* x Y* (the players'
maximin strategies), so the maximum-entropy equilibrium maximises each player's entropy
separately.  The value v comes from an exact LP (HiGHS simplex); then, per player,

    max_x  -sum_i x_i log x_i   s.t.  sum_i x_i = 1,  A^T x >= v - delta

as an exponential-cone program (CVXPY + Clarabel).  The slack delta (1e-9 of the payoff
scale) keeps the problem feasible when the LP's value is a hair above the true one.

Entropy is flat at its maximum (a step e changes it by O(e^2)), so an interior-point
solution is only accurate to about the square root of the solver's tolerance.  It is
polished by Newton's method on the optimality conditions restricted to the support S and
the active constraints J it found, where x_S = softmax(A_SJ lambda) and A_SJ^T x_S = v
(Lagrange conditions of the maximum-entropy problem with J as equalities); the polished
point replaces the interior-point one only if it is feasible and satisfies the KKT
conditions (checked by a small LP, since the multipliers need not be unique).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from metaeval.errors import MetaEvalError

VALUE_SLACK = 1e-9
ACTIVE_TOL = 1e-7  # support entries and constraint slacks below this count as zero


def zero_sum_value(row_payoffs: np.ndarray) -> float:
    """max_x min_j (x^T A)_j, the row player's value, by the simplex method."""
    k_row, k_col = row_payoffs.shape
    objective = np.zeros(k_row + 1)
    objective[-1] = -1.0  # maximise v
    result = linprog(
        objective,
        A_ub=np.hstack([-row_payoffs.T, np.ones((k_col, 1))]),  # v - (A^T x)_j <= 0
        b_ub=np.zeros(k_col),
        A_eq=np.hstack([np.ones((1, k_row)), np.zeros((1, 1))]),
        b_eq=[1.0],
        bounds=[(0, None)] * k_row + [(None, None)],
        method="highs-ds",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if result.status != 0:
        raise MetaEvalError(f"zero-sum value LP failed: {result.message}")
    return float(result.x[-1])


def max_entropy_maximin(row_payoffs: np.ndarray, value: float) -> np.ndarray:
    """The maximum-entropy x in {x in simplex : A^T x >= value - slack}."""
    # Imported here: CVXPY takes seconds to import and only this solver needs it.
    import cvxpy as cp

    scale = max(1.0, float(np.abs(row_payoffs).max()))
    x = cp.Variable(row_payoffs.shape[0])
    problem = cp.Problem(
        cp.Maximize(cp.sum(cp.entr(x))),
        [cp.sum(x) == 1, row_payoffs.T / scale @ x >= value / scale - VALUE_SLACK],
    )
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError as exc:
        raise MetaEvalError(f"maximum-entropy Nash: the entropy program failed: {exc}") from None
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or x.value is None:
        raise MetaEvalError(f"maximum-entropy Nash: the entropy program ended {problem.status}")
    strategy = np.maximum(np.asarray(x.value, dtype=np.float64), 0.0)
    strategy /= strategy.sum()
    polished = _polish(row_payoffs / scale, value / scale, strategy)
    if polished is not None:
        return polished
    if problem.status != cp.OPTIMAL:
        # An inaccurate interior point is kept only once the polish has proven the optimum.
        raise MetaEvalError("maximum-entropy Nash: the entropy program ended inaccurate and its "
                            "point could not be confirmed as the maximiser")
    return strategy


def _polish(payoffs: np.ndarray, value: float, guess: np.ndarray) -> np.ndarray | None:
    """The maximiser on the guess's support with its active constraints as equalities.

    Starts from the constraints within ACTIVE_TOL of binding.  The result is optimal when
    it is feasible and the KKT conditions hold: log x_S = A_SJ lambda + c with lambda >= 0
    (an LP feasibility check, since lambda is not unique).  Otherwise the constraint with
    the most negative Newton multiplier was not binding after all: release it and retry.
    None when nothing is left to release.
    """
    support = guess > ACTIVE_TOL
    active = np.flatnonzero(payoffs.T @ guess - value < ACTIVE_TOL)
    while True:
        local = payoffs[np.ix_(support, active)]
        solved = _newton_on_face(local, value)
        if solved is None:
            return None
        x_s, multipliers = solved
        strategy = np.zeros_like(guess)
        strategy[support] = x_s
        if np.all(payoffs.T @ strategy >= value - VALUE_SLACK) and _nonnegative_multipliers(local, x_s):
            return strategy
        if len(multipliers) == 0 or multipliers.min() >= 0:
            return None
        active = np.delete(active, np.argmin(multipliers))


def _nonnegative_multipliers(local: np.ndarray, x_s: np.ndarray) -> bool:
    """Whether log x_S = A_SJ lambda + c 1 has a solution with lambda >= 0."""
    if local.shape[1] == 0:
        return bool(np.ptp(np.log(x_s)) < 1e-9)
    result = linprog(
        np.zeros(local.shape[1] + 1),
        A_eq=np.hstack([local, np.ones((len(x_s), 1))]),
        b_eq=np.log(x_s),
        bounds=[(0, None)] * local.shape[1] + [(None, None)],
        method="highs",
    )
    return result.status == 0


def _newton_on_face(local: np.ndarray, value: float):
    """(x, lambda) with x = softmax(A lambda) and A^T x = v, by Newton on the convex dual
    log-sum-exp(A lambda) - v sum(lambda); None if it does not converge."""

    def softmax(multipliers):
        logits = local @ multipliers
        weights = np.exp(logits - logits.max())
        return weights / weights.sum()

    def dual(multipliers):
        logits = local @ multipliers
        return logits.max() + np.log(np.exp(logits - logits.max()).sum()) - value * multipliers.sum()

    def gradient_at(multipliers):
        return local.T @ softmax(multipliers) - value

    multipliers = np.zeros(local.shape[1])
    gradient = gradient_at(multipliers)
    for _ in range(50):  # the LP's value is exact only to ~1e-11, so no tighter target
        if gradient.size == 0 or np.abs(gradient).max() < 1e-11:
            return softmax(multipliers), multipliers
        x_s = softmax(multipliers)
        hessian = local.T @ (np.diag(x_s) - np.outer(x_s, x_s)) @ local
        step = np.linalg.lstsq(hessian, -gradient, rcond=None)[0]
        length, current = 1.0, dual(multipliers)
        while True:  # Armijo, or any step that shrinks the gradient (rounding hides decrease)
            new_gradient = gradient_at(multipliers + length * step)
            if dual(multipliers + length * step) <= current + 1e-4 * length * (gradient @ step):
                break
            if np.abs(new_gradient).max() < np.abs(gradient).max():
                break
            length /= 2
            if length < 1e-12:
                return None
        multipliers, gradient = multipliers + length * step, new_gradient
    if np.abs(gradient).max() > VALUE_SLACK:
        return None
    return softmax(multipliers), multipliers


def max_entropy_nash(row_payoffs) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, y, v): maximum-entropy equilibrium strategies of the zero-sum game A and its value."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    value = zero_sum_value(row_payoffs)
    row = max_entropy_maximin(row_payoffs, value)
    column = max_entropy_maximin(-row_payoffs.T, -value)
    return row, column, value
