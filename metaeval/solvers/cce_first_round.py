"""The first LP of Algorithm 1 (maths, section 2.1) over working sets of rows and joints.

    min_{sigma in simplex, t} t   s.t.  A_i sigma <= t  for every deviation i.

Of a king-of-the-hill game with 2,000 prompts, A has 2,128 rows and 8.2M joints; at the
optimum a few dozen rows are tight and a few dozen joints carry mass. The model holds
a set R of rows (caps A_i sigma - t <= 0) and a set J of joints: rows whose gain at the
optimum exceeds t enter (constraint generation; the gains of every row over J are one
product with the stored columns A[:, J]), then joints of negative reduced cost priced
with the duals of R, zero elsewhere (column generation). When neither enters, the duals
are feasible for the whole LP and the optimum is the full LP's. HiGHS keeps its basis:
new rows enter with basic slacks (dual simplex continues), new joints nonbasic at zero
(primal simplex continues). At 64 x 64 x 2,000 the LP ends with 389 rows and 1,684
joints; in the warm model of metaeval.ratings.deviation, which holds every row twice
(2 x 2,128 + 1 rows), the same round took 14 CPU s against 3.5 for the whole rating now.

Every column is dense, so every pivot is a pass over the working LP. With many rows (3 x
192: 554 rows, 1,878 joints) the re-solves after each entry took some 1,500 pivots and
the simplex most of the rating; there the working sets first grow from interior points
(metaeval.solvers.matrix_game), and `set_basis_near` starts the simplex from the basis
the last one names.
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from metaeval.runs import budget
from metaeval.solvers import lp

ENTERING_ROWS = 64
"""At most this many rows enter per round of constraint generation (the largest gains)."""


class FirstRoundModel:
    """HiGHS model of the first LP over rows ``rows`` and joints ``joints`` of a column source."""

    def __init__(self, source, joints: np.ndarray):
        self.source, self.joints = source, np.asarray(joints)
        budget.check(16 * source.num_rows * len(self.joints), f"the first deviation-rating LP's columns "
                     f"({source.num_rows} x {len(self.joints)})")
        self.matrix = source.columns(self.joints)  # every row, joints J
        start = self.matrix @ np.full(len(self.joints), 1.0 / len(self.joints))
        self.rows = np.sort(np.argsort(-start)[:ENTERING_ROWS])
        count = len(self.joints)
        self.highs = lp.highs_model(
            sp.vstack([sp.csr_matrix(np.r_[np.ones(count), 0.0][None]),
                       sp.csr_matrix(np.hstack([self.matrix[self.rows], -np.ones((len(self.rows), 1))]))]),
            costs=np.r_[np.zeros(count), 1.0],
            col_lower=np.r_[np.zeros(count), -lp.INF],
            col_upper=np.full(count + 1, lp.INF),
            row_lower=np.r_[1.0, np.full(len(self.rows), -lp.INF)],
            row_upper=np.r_[1.0, np.zeros(len(self.rows))],
        )
        self.highs.setOptionValue("presolve", "off")  # skipped on warm starts anyway
        self.sigma_col, self.t_col = np.arange(count), count
        self.iterations = 0

    def solve(self, what: str) -> tuple[float, np.ndarray, np.ndarray, float, int]:
        """(t, sigma over J, duals y over every row (zero outside R), simplex dual, runs)."""
        runs = lp.solve(self.highs, what)
        self.iterations += self.highs.getInfo().simplex_iteration_count
        solution = self.highs.getSolution()
        values, row_duals = np.asarray(solution.col_value), np.asarray(solution.row_dual)
        duals = np.zeros(self.source.num_rows)
        duals[self.rows] = row_duals[1:]
        masses = np.clip(values[self.sigma_col], 0.0, None)
        return float(values[self.t_col]), masses / masses.sum(), duals, float(row_duals[0]), runs

    def violated(self, gains: np.ndarray, t: float, tolerance: float) -> np.ndarray:
        """Rows outside R whose gain exceeds t + tolerance: the largest ENTERING_ROWS."""
        outside = np.ones(len(gains), dtype=bool)
        outside[self.rows] = False
        candidates = np.flatnonzero(outside & (gains > t + tolerance))
        return np.sort(candidates[np.argsort(-gains[candidates])[:ENTERING_ROWS]])

    def add_rows(self, rows: np.ndarray) -> None:
        """Append the caps of ``rows`` (their slacks basic: the basis stays valid)."""
        entries = sp.csr_matrix(self._row_block(rows))
        lp.check(self.highs.addRows(len(rows), np.full(len(rows), -lp.INF), np.zeros(len(rows)), entries.nnz,
                                    entries.indptr[:-1].astype(np.int32), entries.indices.astype(np.int32),
                                    entries.data), self.highs, "addRows")
        self.rows = np.concatenate([self.rows, rows])

    def add_joints(self, joints: np.ndarray) -> None:
        """Append the sigma columns of ``joints`` (at 0, nonbasic: the basis stays valid)."""
        block = self.source.columns(joints)
        entries = sp.csc_matrix(np.vstack([np.ones((1, len(joints))), block[self.rows]]))
        start = self.highs.getNumCol()
        lp.check(self.highs.addCols(len(joints), np.zeros(len(joints)), np.zeros(len(joints)),
                                    np.full(len(joints), lp.INF), entries.nnz,
                                    entries.indptr[:-1].astype(np.int32), entries.indices.astype(np.int32),
                                    entries.data), self.highs, "addCols")
        self.sigma_col = np.concatenate([self.sigma_col, start + np.arange(len(joints))])
        self.joints = np.concatenate([self.joints, joints])
        self.matrix = np.hstack([self.matrix, block])

    def set_basis_near(self, masses: np.ndarray, duals: np.ndarray, value: float) -> None:
        """Start the simplex from the basis an approximate optimum names (masses over the
        model's joints, duals y >= 0 over its rows R, value t; metaeval.solvers.matrix_game).

        Basic: t and, of the joints and cap slacks, as many as there are rows of R, ranked
        by how far each is from its bound against its complementary dual (sigma_j - d_j,
        slack_i - y_i, with reduced costs d_j = y^T A_j - t). A singular pick is repaired
        by HiGHS with slacks; the simplex then proves the optimum from there."""
        reduced = duals @ self.matrix[self.rows] - value
        slacks = value - self.matrix[self.rows] @ masses
        scores = np.r_[masses - reduced, slacks - duals]
        basic = np.zeros(len(scores), dtype=bool)
        basic[np.argsort(-scores, kind="stable")[: len(self.rows)]] = True
        status = highspy.HighsBasisStatus
        columns = np.full(self.highs.getNumCol(), status.kBasic)
        columns[self.sigma_col] = np.where(basic[: len(self.joints)], status.kBasic, status.kLower)
        basis = highspy.HighsBasis()
        basis.col_status = columns.tolist()
        basis.row_status = [status.kLower] + np.where(basic[len(self.joints):], status.kBasic, status.kUpper).tolist()
        basis.valid = True
        lp.check(self.highs.setBasis(basis), self.highs, "setBasis")

    def _row_block(self, rows: np.ndarray) -> np.ndarray:
        """The caps' coefficients over the model's columns (sigma's, in their order, and t)."""
        block = np.zeros((len(rows), self.highs.getNumCol()))
        block[:, self.sigma_col] = self.matrix[rows]
        block[:, self.t_col] = -1.0
        return block
