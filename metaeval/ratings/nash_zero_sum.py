"""Maximum-entropy Nash equilibrium of a two-player zero-sum game (Balduzzi et al. 2018).

The Nash equilibria of a zero-sum game form a product of polytopes X* x Y* (the players'
maximin strategies), so the maximum-entropy equilibrium maximises each player's entropy
separately.  Each player's value v comes from an exact LP (HiGHS simplex), as the payoff
its maximin strategy guarantees, so that strategy meets the constraints below; then

    max_x  -sum_i x_i log x_i   s.t.  sum_i x_i = 1,  A^T x >= v - delta,

which is the maximum-entropy problem of :mod:`metaeval.solvers.mecce` with the constraint matrix
M = (v - delta) - A^T, solved by the same dual Newton method and safeguards as the MECCE.
The slack delta (1e-12 of max |A|) absorbs the rounding of A^T x.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from metaeval.errors import MetaEvalError
from metaeval.solvers.mecce import max_entropy

VALUE_SLACK = 1e-12


def maximin_value(row_payoffs: np.ndarray) -> float:
    """max_x min_j (x^T A)_j, the row player's value, by the simplex method: the payoff
    min_j (x^T A)_j that the LP's strategy x guarantees."""
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
    strategy = np.maximum(result.x[:-1], 0.0)
    return float((row_payoffs.T @ (strategy / strategy.sum())).min())


def max_entropy_maximin(row_payoffs: np.ndarray, value: float) -> np.ndarray:
    """The maximum-entropy x in {x in simplex : A^T x >= value - slack}."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    slack = VALUE_SLACK * (float(np.abs(row_payoffs).max(initial=0.0)) or 1.0)
    return max_entropy((value - slack) - row_payoffs.T).distribution


def max_entropy_nash(row_payoffs) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, y, v): maximum-entropy equilibrium strategies of the zero-sum game A and its value."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    value = maximin_value(row_payoffs)
    row = max_entropy_maximin(row_payoffs, value)
    column = max_entropy_maximin(-row_payoffs.T, maximin_value(-row_payoffs.T))
    return row, column, value
