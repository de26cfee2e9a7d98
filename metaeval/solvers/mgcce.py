"""Maximum Gini coarse correlated equilibrium (MGCCE; Marris et al. 2021, JPSRO).

The MGCCE of a meta-game is the unique solution of the strictly convex quadratic program

    max_sigma  1 - sum_a sigma(a)^2
    s.t.       sum_a sigma(a) (G_p(a'_p, a_-p) - G_p(a)) <= 0   for every player p and a'_p,
               sigma >= 0,  sum_a sigma(a) = 1,

which is the objective and constraint set of OpenSpiel's ``jpsro._mgcce`` (its ``_qp_cce``
with ``epsilon = 0``, ``cost = 1 - x^T x``) on a meta-game whose repeated policies are
listed as separate strategies. OpenSpiel solves it with CVXOPT or OSQP through CVXPY; here
CVXPY hands it to Clarabel, an interior-point solver that reports a checked status.
"""

from __future__ import annotations

import numpy as np

from metaeval.solvers.equilibria import cce_constraints
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame

#: Largest CCE violation accepted after cleaning, per unit of the largest payoff difference.
VIOLATION_TOLERANCE = 1e-6


def mgcce(game: MetaGame) -> np.ndarray:
    """The maximum-Gini CCE of ``game`` as an array ``[K_1..K_N]`` (module docstring).

    Args:
        game: the meta-game.

    Returns:
        The MGCCE.
    """
    import cvxpy as cp  # a second to import: only when this solver runs

    matrix = cce_constraints(game)
    sigma = cp.Variable(matrix.shape[1], nonneg=True)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(sigma)), [matrix @ sigma <= 0, cp.sum(sigma) == 1])
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.SolverError as exc:
        raise MetaEvalError(f"the maximum-Gini CCE solver failed: {exc}") from None
    if problem.status != cp.OPTIMAL or sigma.value is None:
        raise MetaEvalError(f"the maximum-Gini CCE solver ended with status {problem.status!r}")
    masses = np.clip(sigma.value, 0.0, None)
    masses /= masses.sum()
    scale = max(float(np.abs(matrix).max(initial=0.0)), 1.0)
    violation = float((matrix @ masses).max(initial=0.0))
    if violation > VIOLATION_TOLERANCE * scale:
        raise MetaEvalError(f"the maximum-Gini CCE found violates a CCE constraint by {violation:.3g}")
    return masses.reshape(game.shape)
