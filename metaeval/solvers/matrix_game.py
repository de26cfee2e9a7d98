"""An interior point for min_{sigma in simplex} max_i (A sigma)_i, with dense A.

The first LP of the strictest CCE (metaeval.solvers.cce_first_round) is this matrix
game over working sets of rows and joints. Its columns are dense, so every simplex pivot
costs a pass over A: at 3 x 192 the working LP reaches 554 rows x 1,878 joints and the
simplex needs about 10,000 pivots over the rounds of row and column generation. An
interior point needs some twenty Newton steps, each one product A D A^T and one
Cholesky factorisation of rows x rows, and lands near the centre of the optimal face:
close enough to name the optimal basis, from which the simplex proves the optimum in a
few pivots.

With B = A + c (c = 1 + max |A|, so B >= 1) the game's value is v + c > 0, and x =
sigma / (v + c), w = y / (v + c) solve the symmetric pair

    max 1^T x  s.t.  B x + z = 1,        min 1^T w  s.t.  B^T w - u = 1,
                     x, z >= 0                            w, u >= 0,

solved here by Mehrotra's predictor-corrector on the normal equations
(B diag(x/u) B^T + diag(z/w)) dw = r. Written here rather than taken from HiGHS, whose
interior point (IPX) treats the matrix as sparse: on a random dense 554 x 1,878 game it
took 2.1 CPU s with its crossover (its dual simplex 8.4 s), this 0.3 s, both on one BLAS
thread (the simplex then finishes from the basis this names).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.blas

from metaeval.runs.threads import one_blas_thread

STEP_FRACTION = 0.995
"""Share of the longest step to the boundary taken each iteration."""
REGULARISATION = (1e-14, 1e-12, 1e-10)
"""Multiples of the largest diagonal entry added, in turn, to normal equations that are
not numerically positive definite (added once, cumulatively)."""


@dataclass
class GameSolution:
    """An approximate optimum (the iterate of smallest residuals and duality gap): value
    v, sigma over the columns, y over the rows, and whether it met the tolerance."""

    value: float
    sigma: np.ndarray
    y: np.ndarray
    converged: bool


def _longest_step(values: np.ndarray, steps: np.ndarray) -> float:
    falling = steps < 0
    return float(min(1.0, (-values[falling] / steps[falling]).min())) if falling.any() else 1.0


def _cholesky(normal: np.ndarray):
    """Cholesky factor of the normal equations, regularised by up to REGULARISATION of
    their largest diagonal entry where round-off makes them indefinite (near the optimum
    the scaling diag(x/u) spans thirty orders of magnitude); None if that does not help."""
    diagonal = np.diag_indices(len(normal))
    scale = float(normal[diagonal].max())
    for shift in (0.0, *REGULARISATION):
        if shift:
            normal[diagonal] += shift * scale
        try:
            return scipy.linalg.cho_factor(normal, lower=False, check_finite=False)
        except scipy.linalg.LinAlgError:
            continue
    return None


def solve_matrix_game(matrix: np.ndarray, tolerance: float = 1e-9, max_iterations: int = 60) -> GameSolution:
    """min_sigma max_i (A sigma)_i and the maximising row mixture y, to ``tolerance``
    (residuals and duality gap relative to the shifted game, whose entries are at least 1).

    Round-off in the normal equations can stall the residuals above the tolerance (or
    make them lose definiteness, which ends the steps): ``converged`` is then False and
    the best iterate is returned. BLAS runs on one thread: on the shared 2-core machine
    a second thread's spinning took 3 x 192's deviation rating from 5.7 to 46 CPU s.
    """
    with one_blas_thread():
        return _newton_steps(matrix, tolerance, max_iterations)


def _newton_steps(matrix: np.ndarray, tolerance: float, max_iterations: int) -> GameSolution:
    shift = 1.0 + float(np.abs(matrix).max(initial=0.0))
    b = matrix + shift
    rows, columns = b.shape
    x, w = np.full(columns, 1.0 / columns), np.full(rows, 1.0 / rows)  # infeasible start
    z = np.maximum(1.0 - b @ x, 1.0)
    u = np.maximum(b.T @ w - 1.0, 1.0)
    best = (np.inf, x, w)
    for _ in range(max_iterations):
        primal, dual = 1.0 - b @ x - z, 1.0 - b.T @ w + u
        error = max(np.abs(primal).max(), np.abs(dual).max(), abs(x.sum() - w.sum()) / (1.0 + x.sum()))
        if error < best[0]:
            best = (error, x.copy(), w.copy())
        if error <= tolerance:
            break
        normal = scipy.linalg.blas.dsyrk(1.0, (b * np.sqrt(x / u)).T, trans=1)  # upper triangle
        normal[np.diag_indices(rows)] += z / w
        factor = _cholesky(normal)
        if factor is None:
            break

        def newton(target_xu, target_zw):
            dw = scipy.linalg.cho_solve(factor, b @ ((target_xu + x * dual) / u) + target_zw / w - primal,
                                        check_finite=False)
            du = b.T @ dw - dual
            return (target_xu - x * du) / u, (target_zw - z * dw) / w, dw, du

        dx, dz, dw, du = newton(-x * u, -z * w)  # predictor: the affine step
        to_primal = min(_longest_step(x, dx), _longest_step(z, dz))
        to_dual = min(_longest_step(w, dw), _longest_step(u, du))
        mu = (x @ u + z @ w) / (rows + columns)
        affine = ((x + to_primal * dx) @ (u + to_dual * du) + (z + to_primal * dz) @ (w + to_dual * dw)) / (rows + columns)
        centring = (affine / mu) ** 3 * mu
        dx, dz, dw, du = newton(centring - x * u - dx * du, centring - z * w - dz * dw)  # corrector
        to_primal = STEP_FRACTION * min(_longest_step(x, dx), _longest_step(z, dz))
        to_dual = STEP_FRACTION * min(_longest_step(w, dw), _longest_step(u, du))
        x += to_primal * dx
        z += to_primal * dz
        w += to_dual * dw
        u += to_dual * du
    error, x, w = best
    return GameSolution(1.0 / x.sum() - shift, x / x.sum(), w / w.sum(), error <= tolerance)
