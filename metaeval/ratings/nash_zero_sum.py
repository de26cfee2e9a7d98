"""Maximum-entropy Nash equilibrium of a two-player zero-sum game (Balduzzi et al. 2018).

The Nash equilibria of a zero-sum game form a product of polytopes X* x Y* (the players'
maximin strategies), so the maximum-entropy equilibrium maximises each player's entropy
separately.  Each player's value v comes from an exact LP (HiGHS simplex), as the payoff
its maximin strategy guarantees, so that strategy meets the constraints below; then, over
the strategies S that some maximin strategy plays (`optimal_supports`),

    max_x  -sum_i x_i log x_i   s.t.  sum_{i in S} x_i = 1,  A_S^T x >= v - delta,

which is the maximum-entropy problem of [`metaeval.solvers.mecce`][metaeval.solvers.mecce] with the constraint matrix
M = (v - delta) - A_S^T, solved by the same dual Newton method and safeguards as the MECCE.
The slack delta (1e-12 of max |A|) absorbs the rounding of A^T x.

Why S first: the slack widens X* into a polytope in which *every* strategy i can carry
mass up to about delta / g_i, g_i its payoff gap against the opponent's equilibrium. On
all strategies, the largest-support LP of [`metaeval.solvers.mecce.largest_support`][metaeval.solvers.mecce.largest_support] would
have to cut that continuum at its resolution 1 / SUPPORT_RATIO = 1e-9, i.e. at gaps near
delta * 1e9 = 1e-3 of the range, which are common; a strategy near that cut puts the LP's
optimum at its cap, in a basis holding the widened face's block, whose smallest singular
value is delta (1.3e-12 on a bootstrap replicate of a 4 x 4 game), and HiGHS stops there
'Not Set' at every tolerance. The supports of the exact face X* x Y* are combinatorial,
with no slack to resolve; on S every strategy carries real mass, so the slack only
absorbs rounding.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.solvers.mecce import largest_support, max_entropy

VALUE_SLACK = 1e-12


def maximin_value(row_payoffs: np.ndarray) -> float:
    """max_x min_j (x^T A)_j, the row player's value, by the simplex method: the payoff
    min_j (x^T A)_j that the LP's strategy x guarantees."""
    from scipy.optimize import linprog  # a fifth of a second to import: only for this LP

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


def optimal_supports(row_payoffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns): the strategies that some maximin strategy of each player plays,
    the largest supports of X* and Y*.

    The optimal pairs are the cone {(x, y, u) >= 0 : u <= (B^T x)_j, (B y)_i <= u,
    sum x = sum y} for B = A shifted to positive entries (the same equilibria, a positive
    value u / sum x): weak duality forces u = x^T B y / sum x, the value. It has no slack,
    so [`metaeval.solvers.mecce.largest_support`][metaeval.solvers.mecce.largest_support] reads its supports off exactly.
    """
    k_row, k_col = row_payoffs.shape
    shifted = row_payoffs - row_payoffs.min() + 1.0
    shifted /= shifted.max()
    cone = np.block([
        [-shifted.T, np.zeros((k_col, k_col)), np.ones((k_col, 1))],
        [np.zeros((k_row, k_row)), shifted, -np.ones((k_row, 1))],
        [np.ones((1, k_row)), -np.ones((1, k_col)), np.zeros((1, 1))],
        [-np.ones((1, k_row)), np.ones((1, k_col)), np.zeros((1, 1))],
    ])
    support = largest_support(cone)
    rows, columns = support[:k_row], support[k_row : k_row + k_col]
    if not rows.any() or not columns.any():
        raise MetaEvalError("the zero-sum game's optimal face came out empty (HiGHS)")
    return rows, columns


def max_entropy_maximin(row_payoffs: np.ndarray, value: float, support: np.ndarray | None = None) -> np.ndarray:
    """The maximum-entropy x in {x in simplex : A^T x >= value - slack}, on ``support``
    (default `optimal_supports`' rows), zero elsewhere."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    if support is None:
        support = optimal_supports(row_payoffs)[0]
    slack = VALUE_SLACK * (float(np.abs(row_payoffs).max(initial=0.0)) or 1.0)
    strategy = np.zeros(len(row_payoffs))
    strategy[support] = max_entropy((value - slack) - row_payoffs[support].T).distribution
    return strategy


def max_entropy_nash(row_payoffs) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, y, v): maximum-entropy equilibrium strategies of the zero-sum game A and its value."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    rows, columns = optimal_supports(row_payoffs)
    value = maximin_value(row_payoffs)
    row = max_entropy_maximin(row_payoffs, value, rows)
    column = max_entropy_maximin(-row_payoffs.T, maximin_value(-row_payoffs.T), columns)
    return row, column, value
