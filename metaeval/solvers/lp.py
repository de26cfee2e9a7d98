"""Linear programs solved by HiGHS in place: build once, change bounds, re-solve warm.

HiGHS keeps its simplex basis between ``run()`` calls when only bounds change, so a
sequence of related LPs costs a few pivots each instead of a fresh solve.
"""

from __future__ import annotations

from collections.abc import Callable

import highspy
import numpy as np
import scipy.sparse as sp

from metaeval.errors import MetaEvalError

INF = highspy.kHighsInf

# Tighter than HiGHS's 1e-7 defaults: callers compare LP values to 1e-9. On highly
# degenerate models (0/1 payoffs, many frozen constraints) an ill-conditioned basis can
# leave residuals of ~1e-9 that HiGHS then reports as infeasible; solve() relaxes the
# tolerances a hundredfold at a time, up to the defaults, before giving up.
FEASIBILITY_TOLERANCE = 1e-10
LOOSEST_TOLERANCE = 1e-7


def highs_model(
    matrix: sp.spmatrix,
    costs: np.ndarray,
    col_lower: np.ndarray,
    col_upper: np.ndarray,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
) -> highspy.Highs:
    """A silent HiGHS instance holding ``min costs @ x, row_lower <= matrix x <= row_upper``."""
    matrix = sp.csc_matrix(matrix)
    lp = highspy.HighsLp()
    lp.num_row_, lp.num_col_ = matrix.shape
    lp.col_cost_ = np.asarray(costs, dtype=np.float64)
    lp.col_lower_ = np.asarray(col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = matrix.data.astype(np.float64)
    highs = highspy.Highs()
    highs.silent()
    _set_tolerance(highs, FEASIBILITY_TOLERANCE)
    check(highs.passModel(lp), highs, "passModel")
    return highs


def _set_tolerance(highs: highspy.Highs, tolerance: float) -> None:
    highs.setOptionValue("primal_feasibility_tolerance", tolerance)
    highs.setOptionValue("dual_feasibility_tolerance", tolerance)


def run(highs: highspy.Highs) -> bool:
    """Run HiGHS once (warm from its current basis); whether it proved an optimum."""
    highs.run()
    return highs.getModelStatus() == highspy.HighsModelStatus.kOptimal


def solve(highs: highspy.Highs, what: str) -> int:
    """Run HiGHS (warm from its current basis) to a proven optimum; return the runs taken.

    A run that stops short of an optimum is repeated with tolerances a hundred times
    looser (kept for later solves of the same model), up to LOOSEST_TOLERANCE; then once
    by the interior-point method with crossover to a basic optimum, which does not follow
    the simplex path that lost its way (the deviation LPs of a 300-agent 3-player table
    need it at one round).
    """
    tolerance = highs.getOptionValue("primal_feasibility_tolerance")[1]
    runs = 0
    while True:
        runs += 1
        if run(highs):
            return runs
        if tolerance >= LOOSEST_TOLERANCE:
            break
        tolerance = min(100 * tolerance, LOOSEST_TOLERANCE)
        _set_tolerance(highs, tolerance)
    status = highs.getModelStatus()
    highs.setOptionValue("solver", "ipm")
    highs.setOptionValue("run_crossover", "on")
    try:
        if run(highs):
            return runs + 1
    finally:
        highs.setOptionValue("solver", "choose")
    raise MetaEvalError(
        f"HiGHS did not solve {what}: model status {highs.modelStatusToString(status)!r} "
        f"at feasibility tolerance {tolerance:g}, nor by the interior-point method "
        f"({highs.modelStatusToString(highs.getModelStatus())!r})"
    )


def solve_afresh(build: Callable[[], highspy.Highs], what: str) -> highspy.Highs:
    """The model ``build()`` makes, solved to a proven optimum; each retry on a new model.

    Tolerances from FEASIBILITY_TOLERANCE to LOOSEST_TOLERANCE, each with presolve and then
    without: HiGHS 1.14 ends some small, degenerate LPs 'Unknown' or 'Not Set' at one
    setting and solves them at another, and a warm retry keeps the failed state.
    """
    tried = []
    for tolerance in (FEASIBILITY_TOLERANCE, 1e-9, 1e-8, LOOSEST_TOLERANCE):
        for presolve in ("choose", "off"):
            highs = build()
            _set_tolerance(highs, tolerance)
            highs.setOptionValue("presolve", presolve)
            if run(highs):
                return highs
            tried.append(f"{highs.modelStatusToString(highs.getModelStatus())!r} at {tolerance:g}, presolve {presolve}")
    raise MetaEvalError(f"HiGHS did not solve {what}: {'; '.join(tried)}")


def check(status: highspy.HighsStatus, highs: highspy.Highs, call: str) -> None:
    """Raise if a HiGHS call (model change) returned an error status."""
    if status == highspy.HighsStatus.kError:
        raise MetaEvalError(
            f"HiGHS rejected {call} (model status {highs.modelStatusToString(highs.getModelStatus())!r})"
        )
