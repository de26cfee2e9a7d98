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
mass up to about delta / g_i, g_i its payoff gap against the opponent's equilibrium, and
a largest-support LP on all strategies would have to cut that continuum somewhere (gaps
near 1e-3 of the range at a mass ratio of 1e9, which are common; HiGHS stopped 'Not Set'
there on a bootstrap replicate of a 4 x 4 game). The supports of the exact face X* x Y*
are combinatorial, with no slack to resolve; on S every strategy carries real mass, so the
slack only absorbs rounding.

How S: every strategy either carries mass in some equilibrium or loses payoff against
every equilibrium strategy of the opponent (Goldman and Tucker 1956), and one LP over
normalised strategies finds both kinds of evidence at once (`optimal_supports`). Reading S
off the cone of optimal pairs with the masses capped at a ratio of 1e9 instead asks for
constraints met to 1e-10 by masses up to 1e9: on a PSRO meta-game of leduc_2p whose face
needs a mass ratio of 1.7e5 (a strategy that carries at most 4.4e-6 in any equilibrium)
HiGHS ended that LP 'Unbounded' or 'Unknown' at every tolerance.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from metaeval.errors import MetaEvalError
from metaeval.runs import budget
from metaeval.solvers import lp
from metaeval.solvers.mecce import MaxEntropy, max_entropy

VALUE_SLACK = 1e-12


def maximin_value(row_payoffs: np.ndarray) -> float:
    """max_x min_j (x^T A)_j, the row player's value, by the simplex method: the payoff
    min_j (x^T A)_j that the LP's strategy x guarantees."""
    return maximin(row_payoffs)[0]


def maximin(row_payoffs: np.ndarray) -> tuple[float, np.ndarray]:
    """`maximin_value` and the simplex's maximin strategy x that guarantees it."""
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
    strategy /= strategy.sum()
    return float((row_payoffs.T @ strategy).min()), strategy


def optimal_supports(
    row_payoffs: np.ndarray, values: tuple[float, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns): the strategies that some maximin strategy of each player plays,
    the largest supports of X* and Y*.

    X* x Y* holds a strictly complementary pair (Goldman and Tucker 1956): x in X*, y in Y*
    such that every row i has x_i > 0 or a gap g_i = v - (A y)_i > 0, and every column j
    has y_j > 0 or a gap h_j = (A^T x)_j - v > 0. By complementary slackness the rows with
    a gap carry no mass in any equilibrium, so such a pair shows both largest supports.
    One LP finds one, for A scaled to a payoff range of 1 and the value v as each player's
    maximin strategy guarantees it (``values``: `maximin_value` of A and minus that of -A^T,
    computed if not given):

        max t  s.t.  x in X*, y in Y*,  x_i + g_i >= t,  y_j + h_j >= t.

    Its optimum t is positive; at it each strategy has one of its two numbers at least t
    and the other zero up to rounding, and the larger one decides. Every number is a
    probability or a payoff gap of range 1, so the LP is well scaled.
    """
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    k_row, k_col = row_payoffs.shape
    spread = float(np.ptp(row_payoffs))
    if spread == 0:  # a constant game: every strategy is optimal
        return np.ones(k_row, dtype=bool), np.ones(k_col, dtype=bool)
    budget.check(3 * 16 * 4 * k_row * k_col, f"the optimal-support LP of the zero-sum game ({k_row} x {k_col})")
    if values is None:
        values = maximin_value(row_payoffs), -maximin_value(-row_payoffs.T)
    payoffs, (row_value, column_value) = row_payoffs / spread, np.divide(values, spread)
    matrix = sp.bmat([  # over (x, y, t)
        [payoffs.T, None, None],  # A^T x >= v
        [None, payoffs, None],  # A y <= v
        [np.ones((1, k_row)), None, None],
        [None, np.ones((1, k_col)), None],
        [sp.identity(k_row), -payoffs, -np.ones((k_row, 1))],  # x_i + g_i - t >= 0
        [payoffs.T, sp.identity(k_col), -np.ones((k_col, 1))],  # y_j + h_j - t >= 0
    ])
    inf, variables = lp.INF, k_row + k_col + 1
    lower = np.concatenate([np.full(k_col, row_value), np.full(k_row, -inf), [1.0, 1.0],
                            np.full(k_row, -column_value), np.full(k_col, row_value)])
    upper = np.concatenate([np.full(k_col, inf), np.full(k_row, column_value), [1.0, 1.0],
                            np.full(k_row + k_col, inf)])
    costs = np.zeros(variables)
    costs[-1] = -1.0  # maximise t
    highs = lp.solve_afresh(
        lambda: lp.highs_model(matrix, costs, np.zeros(variables), np.full(variables, inf), lower, upper),
        "the optimal-support LP of the zero-sum game",
    )
    solution = np.asarray(highs.getSolution().col_value)
    row, column = solution[:k_row], solution[k_row : k_row + k_col]
    rows = row > column_value - payoffs @ column
    columns = column > payoffs.T @ row - row_value
    if not rows.any() or not columns.any():
        raise MetaEvalError("the zero-sum game's optimal face came out empty (HiGHS)")
    return rows, columns


def max_entropy_maximin(row_payoffs: np.ndarray, value: float, support: np.ndarray | None = None) -> np.ndarray:
    """The maximum-entropy x in {x in simplex : A^T x >= value - slack}, on ``support``
    (default `optimal_supports`' rows), zero elsewhere."""
    return _max_entropy_maximin_solved(row_payoffs, value, support)[0]


def _max_entropy_maximin_solved(row_payoffs, value, support=None) -> tuple[np.ndarray, MaxEntropy]:
    """`max_entropy_maximin`'s strategy and the maximum-entropy solution it came from."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    if support is None:
        support = optimal_supports(row_payoffs)[0]
    slack = VALUE_SLACK * (float(np.abs(row_payoffs).max(initial=0.0)) or 1.0)
    strategy = np.zeros(len(row_payoffs))
    solution = max_entropy((value - slack) - row_payoffs[support].T)
    strategy[support] = solution.distribution
    return strategy, solution


def max_entropy_nash(row_payoffs) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, y, v): maximum-entropy equilibrium strategies of the zero-sum game A and its value."""
    return max_entropy_nash_solved(row_payoffs)[:3]


def max_entropy_nash_solved(row_payoffs) -> tuple[np.ndarray, np.ndarray, float, list[MaxEntropy]]:
    """`max_entropy_nash` and each player's maximum-entropy solution (Newton steps, KKT residual)."""
    row_payoffs = np.asarray(row_payoffs, dtype=np.float64)
    (value, row_vertex), (loss, column_vertex) = maximin(row_payoffs), maximin(-row_payoffs.T)
    rows, columns = optimal_supports(row_payoffs, (value, -loss))
    row, row_solution = _on_face(row_payoffs, value, rows, row_vertex)
    column, column_solution = _on_face(-row_payoffs.T, loss, columns, column_vertex)
    return row, column, value, [row_solution, column_solution]


def _on_face(payoffs, value, support, vertex) -> tuple[np.ndarray, MaxEntropy]:
    """`_max_entropy_maximin_solved` on ``support``, widened by the strategies the simplex's
    maximin strategy ``vertex`` plays where ``support`` alone cannot guarantee ``value``.

    A strategy that carries mass in some equilibrium, but no more than about
    `optimal_supports`' LP tolerance, can be read there as losing (a sampled 500 x 500
    leduc meta-game had one of at most 2e-8, without which the value falls by 1.6e-10,
    ten times the slack); ``vertex`` guarantees the value and plays only strategies of X*.
    """
    try:
        return _max_entropy_maximin_solved(payoffs, value, support)
    except MetaEvalError:
        widened = support | (vertex > 0)
        if (widened == support).all():
            raise
        return _max_entropy_maximin_solved(payoffs, value, widened)
