"""Deviation ratings: CCE deviation gains under the strictest CCE (SPEC 2.1, Algorithm 1).

Marris, Liu, Gemp, Piliouras, Lanctot (2025), "Deviation Ratings". Each round solves

    min_{sigma in simplex, t} t   s.t.  delta_i(sigma) <= t   (unfrozen i),
                                        delta_i(sigma) == v_i (frozen i),

and freezes, at value t, every unfrozen constraint with a non-zero dual.

One HiGHS model serves every round. Each deviation gain has its own column
``g_i = (A sigma)_i`` (an equality row) and a cap row ``g_i - t <= 0``. Freezing i sets
the upper bound of g_i to t and makes its cap row free: bound changes only, so the
previous optimal basis stays valid and each round is a short warm re-solve.

A frozen constraint is tight at every optimum of its round, i.e. everywhere on the set
{all gains <= t} that later rounds search, so the bound g_i <= t already forces
g_i == t. The one-sided bound states the same thing without asking the solver to meet
an equality whose right-hand side carries an earlier LP's rounding: after many freezes
the remaining face is thin, and fixed equalities then become "infeasible" at 1e-9.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from metaeval import budget, lp
from metaeval.equilibria import deviation_gains
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating
from metaeval.reduction import reduce_cce

# A cap row counts as active when |dual| > DUAL_TOLERANCE. The cap duals of a round are
# convex weights (dual feasibility of the free column t makes them sum to 1), so their
# largest is at least 1 / #unfrozen: a true active set is far above this tolerance, while
# simplex round-off on a zero dual (~1e-16) is far below it. A missed small dual only
# costs a round: the next LP finds the same t and freezes the constraint then.
DUAL_TOLERANCE = 1e-9


@dataclass
class StrictestCCE:
    """Algorithm 1's output on a (reduced) constraint matrix."""

    values: np.ndarray  # frozen value of every row
    masses: np.ndarray  # the final LP's distribution over columns
    rounds: int
    lp_solves: int  # rounds plus re-solves at looser tolerances
    feasibility_tolerance: float  # HiGHS's tolerance at the end
    simplex_iterations: int
    safeguard_freezes: int


def constraints_to_freeze(
    duals: np.ndarray, gains: np.ndarray, unfrozen: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Mask of unfrozen constraints to freeze this round, and whether the safeguard fired.

    Active = |dual| > DUAL_TOLERANCE. Safeguard: should no unfrozen dual pass (possible
    only if the solver's duals are wrong, see DUAL_TOLERANCE), freeze the unfrozen
    constraint with the largest gain, which equals t at the LP's optimum, so every round
    still makes progress.
    """
    active = unfrozen & (np.abs(duals) > DUAL_TOLERANCE)
    if active.any():
        return active, False
    active = np.zeros_like(unfrozen)
    active[np.argmax(np.where(unfrozen, gains, -np.inf))] = True
    return active, True


def strictest_cce(matrix: np.ndarray) -> StrictestCCE:
    """Algorithm 1 on ``matrix`` (rows: deviations, columns: joints), warm-started HiGHS."""
    rows, columns = matrix.shape
    budget.check(3 * 16 * matrix.size, f"the deviation-rating LP ({rows} x {columns})")  # 3 copies of 16-byte nonzeros
    # Columns: sigma (columns), g (rows), t.  Rows: simplex, g definitions, caps.
    sigma_part = sp.vstack(
        [sp.csr_matrix(np.ones((1, columns))), sp.csr_matrix(matrix), sp.csr_matrix((rows, columns))]
    )
    identity = sp.identity(rows, format="csr")
    g_part = sp.vstack([sp.csr_matrix((1, rows)), -identity, identity])
    t_part = sp.csr_matrix(np.concatenate([np.zeros(1 + rows), -np.ones(rows)])[:, None])
    cap = 1 + rows + np.arange(rows)
    gain_col = columns + np.arange(rows)
    highs = lp.highs_model(
        sp.hstack([sigma_part, g_part, t_part]),
        costs=np.concatenate([np.zeros(columns + rows), [1.0]]),
        col_lower=np.concatenate([np.zeros(columns), np.full(rows + 1, -lp.INF)]),
        col_upper=np.full(columns + rows + 1, lp.INF),
        row_lower=np.concatenate([[1.0], np.zeros(rows), np.full(rows, -lp.INF)]),
        row_upper=np.concatenate([[1.0], np.zeros(2 * rows)]),
    )
    # Presolve would be skipped on warm starts anyway, and it slows the first solve here.
    highs.setOptionValue("presolve", "off")

    values = np.zeros(rows)
    unfrozen = np.ones(rows, dtype=bool)
    rounds = solves = iterations = safeguards = 0
    while unfrozen.any():
        solves += lp.solve(highs, f"round {rounds + 1} of the deviation-rating LPs")
        rounds += 1
        iterations += highs.getInfo().simplex_iteration_count
        solution = highs.getSolution()
        t = highs.getInfo().objective_function_value
        column_values = np.asarray(solution.col_value)
        freeze, fired = constraints_to_freeze(
            np.asarray(solution.row_dual)[cap], column_values[gain_col], unfrozen
        )
        safeguards += fired
        chosen = np.flatnonzero(freeze)
        values[chosen] = t
        unfrozen &= ~freeze
        # Freeze at the LP's t, not at each g's own value: constraints frozen together get
        # exactly equal ratings, and the current sigma meets the new bounds, so the next
        # round starts primal feasible.
        columns_to_cap = gain_col[chosen].astype(np.int32)
        no_floor, cap_at_t = np.full(chosen.size, -lp.INF), np.full(chosen.size, t)
        status = highs.changeColsBounds(chosen.size, columns_to_cap, no_floor, cap_at_t)
        lp.check(status, highs, "changeColsBounds")
        for row in cap[chosen]:
            lp.check(highs.changeRowBounds(int(row), -lp.INF, lp.INF), highs, "changeRowBounds")
        # The previous optimum stays primal feasible after a freeze: primal simplex
        # continues from it, where dual simplex would first repair dual feasibility.
        highs.setOptionValue("simplex_strategy", 4)
    masses = np.clip(column_values[:columns], 0.0, None)
    tolerance = highs.getOptionValue("primal_feasibility_tolerance")[1]
    return StrictestCCE(values, masses / masses.sum(), rounds, solves, tolerance, iterations, safeguards)


def deviation(game: MetaGame, symmetry: bool = True, merge_duplicates: bool = True) -> Rating:
    """CCE deviation ratings r_p(a'_p) = delta_p(a'_p; sigma*) (SPEC 2.1; Marris et al. 2025, eq. 3a).

    Args:
        game: the meta-game.
        symmetry: fold interchangeable players into one (exact; see metaeval.reduction).
        merge_duplicates: merge identical constraint rows and joint columns (exact).

    Returns a Rating whose ``distribution`` is the strictest CCE sigma* found, and whose
    diagnostics hold ``rounds``, ``lp_solves`` (one warm re-solve per round, plus any
    at looser tolerances, see metaeval.lp), ``feasibility_tolerance``,
    ``simplex_iterations``, ``safeguard_freezes``, the LP size and ``max_violation``, the
    largest |delta(sigma*) - rating| over all constraints in payoff units.
    """
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"deviation ratings need a MetaGame, got {type(game).__name__}")
    reduced = reduce_cce(game, symmetry=symmetry, merge_duplicates=merge_duplicates)
    result = strictest_cce(reduced.matrix)
    sigma = reduced.expand(result.masses, game.shape)
    flat = reduced.scale * result.values[reduced.row_of]
    bounds = np.cumsum(game.shape)[:-1]
    ratings = np.split(flat, bounds)
    gains = np.concatenate(deviation_gains(game, sigma))
    diagnostics = {
        "rounds": result.rounds,
        "lp_solves": result.lp_solves,
        "feasibility_tolerance": result.feasibility_tolerance,
        "simplex_iterations": result.simplex_iterations,
        "safeguard_freezes": result.safeguard_freezes,
        "lp_rows": reduced.matrix.shape[0],
        "lp_columns": reduced.matrix.shape[1],
        "player_classes": reduced.classes,
        "max_violation": float(np.abs(gains - flat).max()),
    }
    return Rating("deviation", game, ratings, distribution=sigma, diagnostics=diagnostics)
