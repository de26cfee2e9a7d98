"""Maximum-entropy distribution on ``{sigma in simplex : M sigma <= 0}``, through its dual.

Maths, section 2.2: the dual of ``max H(sigma) s.t. M sigma <= 0, sum(sigma) = 1`` is

    min_{lambda >= 0} f(lambda) = log sum_a exp(-(M^T lambda)_a),

with sigma(lambda) = softmax(-M^T lambda), gradient -M sigma and Hessian
Cov_sigma(M columns). With M the CCE matrix this is the MECCE (Marris et al. 2022).

Two steps. An LP finds the largest support of any feasible sigma, on which the optimum is
strictly positive, so finite optimal multipliers exist there. Then a projected Newton
method minimises f over the multipliers of that restricted problem.

Above NEWTON_FIRST_JOINTS joints the LP (two columns per joint) costs far more than Newton,
and well-mixed games have full support, so Newton runs on every joint first. sigma(lambda)
is positive everywhere, so a KKT point of the dual on all joints is the maximum itself and
every joint is in the largest support. If Newton does not reach one within
_NEWTON_FIRST_ITERATIONS steps with every joint's mass at least _FULL_SUPPORT_MASS / joints
(mass driven towards zero means joints outside the largest support), the joints that keep
that mass are a guess of the support, and the support is found exactly from a part of the
guess known to lie in it (_newton_first): the remaining joints enter an LP whose rows are
only the certificates u >= 0, u^T M >= 0 that the known part leaves (_support_beyond),
priced in by column generation (_priced_support). On 3-player games of 64 strategies each
(192 x 262,144) the LP over every joint took 60 CPU seconds and 7 GB; these take seconds.

On evolved, nearly tied populations the optimum can sit at the end of a long, almost flat
valley: sigma puts ~1e-20 on joints that alone give the valley its curvature, the Hessian's
smallest eigenvalues drown in rounding, and Newton stops with a small gradient far from the
optimum (a kuhn_3p meta-game: KKT residual 5.6e-7, f 5e-3 above its minimum). A damped
(Levenberg-Marquardt) Newton continues from there: its steps (H + mu I) d = -g follow the
gradient along directions whose curvature is lost and Newton's elsewhere.

Why Newton written out here rather than SciPy's L-BFGS-B: the dual has only sum_p K_p
variables, so an exact Newton step costs one small linear solve and converges
quadratically to a KKT residual ~1e-13. L-BFGS-B's line search compares values of f and
stalls once f changes by less than its rounding (gradient ~1e-8), and its many tiny BLAS
calls are slowed a hundredfold by OpenBLAS threads on a small, busy machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from metaeval.runs import budget
from metaeval.solvers import lp
from metaeval.errors import MetaEvalError
from metaeval.runs.threads import one_blas_thread

# Stop when the projected gradient (the largest KKT residual, in units of max|M|) is
# below GRADIENT_TOLERANCE; fail if no step can reduce it further while it is still
# above FAILURE_TOLERANCE.
GRADIENT_TOLERANCE = 1e-13
FAILURE_TOLERANCE = 1e-9
MAX_ITERATIONS = 200
_ARMIJO = 1e-4
_MAX_HALVINGS = 60
# Damping of the Levenberg-Marquardt safeguard, relative to the Hessian's largest eigenvalue.
_DAMPING_START = 1e-6
_DAMPING_RANGE = (1e-30, 1e10)
# Eigenvalues of the centred Gram matrix below this fraction of its scale count as zero
# (singular values of the centred M below 1e-6 of its scale).
_RANK_RTOL = 1e-12
# Largest ratio of two joints' masses that the support LP resolves (see largest_support).
SUPPORT_RATIO = 1e9
NEWTON_FIRST_JOINTS = 2048
_NEWTON_FIRST_ITERATIONS = 30
_FULL_SUPPORT_MASS = 1e-6
STORED_COPIES = 8
"""Copies of a stored constraint matrix alive at once while `max_entropy` solves it (the
matrix, its rescaled copy, its constraining rows, the products of Newton's second
moments): 6.5 to 7.3 times the matrix's bytes were measured at peak."""
# Column generation of the support LP (_priced_support): a column enters when its reduced
# cost is below -PRICING_TOLERANCE, at most _ENTERING of them a round.
PRICING_TOLERANCE = 1e-9
_ENTERING = 1024


@dataclass
class MaxEntropy:
    """The solution and how it was reached."""

    distribution: np.ndarray
    iterations: int
    kkt_residual: float  # largest projected-gradient entry, in units of max|M|
    # f at the final multipliers: by weak duality no sigma meeting the constraints has a
    # larger entropy, so entropy(distribution) close to it certifies the maximum.
    dual_bound: float
    safeguards: dict  # how often each fallback of max_entropy fired


@dataclass
class _Point:
    lam: np.ndarray
    value: float
    sigma: np.ndarray
    gradient: np.ndarray

    @property
    def residual(self) -> float:
        """Largest entry of the projected gradient: zero exactly at the dual optimum."""
        projected = np.where(self.lam > 0, self.gradient, np.minimum(self.gradient, 0.0))
        return float(np.abs(projected).max(initial=0.0))


class _Dense:
    """The constraint matrix M as Newton uses it, stored. The same methods without M in
    memory: `metaeval.solvers.cce_columns.GameColumns` (M the CCE matrix of a game)."""

    def __init__(self, matrix: np.ndarray):
        self.matrix = matrix
        self.num_rows = matrix.shape[0]

    def price(self, lam: np.ndarray) -> np.ndarray:
        """M^T lambda."""
        return lam @ self.matrix

    def gains(self, sigma: np.ndarray) -> np.ndarray:
        """M sigma."""
        return self.matrix @ sigma

    def second_moments(self, sigma: np.ndarray, free: np.ndarray) -> np.ndarray:
        """sum_a sigma_a m_a m_a^T over the rows ``free``."""
        rows = self.matrix[free]
        return (rows * sigma) @ rows.T

    def covariance(self, sigma: np.ndarray, free: np.ndarray) -> np.ndarray:
        """The centred sum_a sigma_a (m_a - mean)(m_a - mean)^T, free of the cancellation
        of E[m m^T] - mean mean^T."""
        centred = self.matrix[free] - (self.matrix[free] @ sigma)[:, None]
        return (centred * sigma) @ centred.T

    def gram(self) -> np.ndarray:
        """C C^T for the row-centred C = M - row means; the Gram matrix of any set F of rows
        is its [F, F] block. A product of R x R size, unlike a QR of the long C^T, whose
        threaded LAPACK call is erratic on small, busy machines."""
        centred = self.matrix - self.matrix.mean(axis=1, keepdims=True)
        return centred @ centred.T


def _evaluate(system, lam: np.ndarray) -> _Point:
    """f, sigma and the gradient at lambda, with the log-sum-exp shifted by its maximum."""
    logits = system.price(lam)
    np.negative(logits, out=logits)
    top = logits.max()
    logits -= top
    sigma = np.exp(logits, out=logits)
    total = sigma.sum()
    sigma /= total
    return _Point(lam, float(top + np.log(total)), sigma, -system.gains(sigma))


def _linear_directions(gram: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases (curved, linear) of the free multipliers' space.

    Along v with v^T M constant over all joints, f is exactly linear (clones; integer
    payoffs where a combination of one player's deviations is constant). These are the
    null vectors of the free rows' centred Gram matrix: unweighted, so they do not depend
    on sigma, unlike the Hessian. The Gram matrix carries rounding of order eps * |C|^2,
    so the cut-off is relative to the whole matrix, not to the free rows.
    """
    curvature, basis = np.linalg.eigh(gram[np.ix_(free, free)])
    linear = curvature <= _RANK_RTOL * max(float(np.abs(gram).max(initial=0.0)), np.finfo(float).tiny)
    return basis[:, ~linear], basis[:, linear]


def _to_first_bound(lam: np.ndarray, step: np.ndarray, near_zero: np.ndarray) -> float:
    """Largest s keeping lam + s * step >= 0 on the multipliers not already near zero.

    Along a linear direction sigma does not change and f falls at a constant rate, so its
    minimiser is the first bound hit; multipliers already near zero are left to projection.
    """
    blocking = ~near_zero & (step < 0)
    return float(np.min(lam[blocking] / -step[blocking])) if blocking.any() else 1.0


def _newton_direction(system, gram: np.ndarray, point: _Point, bases: dict) -> np.ndarray:
    """Projected Newton direction (Bertsekas 1982) on the free multipliers;
    those near zero whose gradient pushes them there go straight to zero. Along directions
    where f is linear it is steepest descent, scaled to reach the first multiplier bound.

    ``bases`` caches _linear_directions per free set, which rarely changes."""
    lam, gradient = point.lam, point.gradient
    near_zero, free = _free_multipliers(point)
    direction = -lam * ~free
    key = free.tobytes()
    if key not in bases:
        bases[key] = _linear_directions(gram, free)
    curved, linear = bases[key]
    mean = -gradient[free]
    hessian = system.second_moments(point.sigma, free) - np.outer(mean, mean)
    reduced = curved.T @ hessian @ curved
    newton = np.linalg.lstsq(reduced, -(curved.T @ gradient[free]), rcond=None)[0]
    direction[free] = curved @ newton
    slope = linear.T @ gradient[free]
    # Opposite constraints (an implicit equality) give linear directions of zero slope,
    # whose rounding must not be scaled up to a bound.
    if np.abs(slope).max(initial=0.0) > GRADIENT_TOLERANCE:
        descent = -linear @ slope
        direction[free] += _to_first_bound(lam[free], descent, near_zero[free]) * descent
    # Where sigma has left the joints that give a direction its curvature, the Newton step
    # along it is huge; cap every step at doubling the largest multiplier (plus 10).
    limit = 10.0 + float(lam.max(initial=0.0))
    longest = float(np.abs(direction).max(initial=0.0))
    return direction * (limit / longest) if longest > limit else direction


def _line_search(system, point: _Point, direction: np.ndarray) -> _Point | None:
    """Backtrack along the projected arc max(lambda + s d, 0) until f drops (Armijo), or,
    once f is flat to rounding, until the KKT residual at least halves.

    The logits -M^T lambda sum terms up to |lambda|_1 (max|M| is 1), so f carries
    rounding of order eps * (|f| + |lambda|_1): large multipliers make f noisy."""
    noise = 16 * np.finfo(float).eps * (1.0 + abs(point.value) + float(point.lam.sum()))
    step = 1.0
    for _ in range(_MAX_HALVINGS):
        candidate = _evaluate(system, np.maximum(point.lam + step * direction, 0.0))
        decrease = point.gradient @ (candidate.lam - point.lam)
        if decrease < 0 and candidate.value <= point.value + _ARMIJO * decrease:
            return candidate
        if candidate.value <= point.value + noise and candidate.residual <= point.residual / 2:
            return candidate
        step /= 2
    return None


def largest_support(matrix: np.ndarray) -> np.ndarray:
    """Joints that carry mass in some sigma >= 0 with ``matrix @ sigma <= 0``.

    One LP on the cone {x >= 0 : matrix x <= 0}: maximise sum(y) with 0 <= y <= 1 and
    y <= x. Scaling x up, y_j reaches 1 exactly for every joint in some solution's support.
    x is capped at SUPPORT_RATIO: the LP's feasibility tolerance is absolute, so on an
    unbounded cone the solver could take x so large that a joint violating the constraints
    counts as feasible (seen on an Agent57 bootstrap replicate: 57 joints where 4 are
    feasible, or status 'Not Set'). A joint whose mass can be at most 1/SUPPORT_RATIO of
    another's counts as outside the support, at the solvers' precision.

    Args:
        matrix: the constraint matrix ``[rows, joints]``.

    Returns:
        A boolean mask ``[joints]``.
    """
    return _support_lp(matrix)[0]


def _support_lp(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(support, lambda) of [`largest_support`][metaeval.solvers.mecce.largest_support]'s LP, lambda >= 0 the multipliers of
    ``matrix x <= 0``: a column j added to the LP (x_j, y_j and row y_j <= x_j) could raise
    its optimum only if (matrix^T lambda)_j < 1."""
    rows, joints = matrix.shape
    budget.check(3 * 16 * matrix.size, f"the MECCE support LP ({rows} x {joints})")  # 3 copies of 16-byte nonzeros
    identity = sp.identity(joints, format="csr")
    cone = sp.hstack([sp.csr_matrix(matrix), sp.csr_matrix((rows, joints))])  # matrix x <= 0
    below = sp.hstack([-identity, identity])  # y - x <= 0
    highs = lp.solve_afresh(lambda: lp.highs_model(
        sp.vstack([cone, below]),
        costs=np.concatenate([np.zeros(joints), -np.ones(joints)]),
        col_lower=np.zeros(2 * joints),
        col_upper=np.concatenate([np.full(joints, SUPPORT_RATIO), np.ones(joints)]),
        row_lower=np.full(rows + joints, -lp.INF),
        row_upper=np.zeros(rows + joints),
    ), "the largest-support LP of the maximum-entropy problem")
    solution = highs.getSolution()
    return np.asarray(solution.col_value)[joints:] > 0.5, -np.asarray(solution.row_dual)[:rows]


def _priced_support(cone: np.ndarray, slacks: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """The columns j of ``candidates`` in the largest support of {(x, s) >= 0 :
    cone x + slacks s = 0}, by column generation on [`largest_support`][metaeval.solvers.mecce.largest_support]'s LP (each
    equality as two inequalities, multipliers lambda+ and lambda-).

    The LP holds the slack columns and the candidates priced in, at most _ENTERING a
    round, while some candidate outside it has (cone^T (lambda+ - lambda-))_j below
    1 - PRICING_TOLERANCE (see _support_lp): one product with ``cone`` a round. Then its
    optimum is that of the LP over every candidate, whose support is the largest one."""
    working = np.empty(0, dtype=np.int64)
    while True:
        block = np.hstack([cone[:, working], slacks])
        support, multipliers = _support_lp(np.vstack([block, -block]))
        priced = (multipliers[: len(cone)] - multipliers[len(cone):]) @ cone
        priced[~candidates] = np.inf
        priced[working] = np.inf
        entering = np.flatnonzero(priced < 1 - PRICING_TOLERANCE)
        if not entering.size:
            break
        if entering.size > _ENTERING:
            entering = entering[np.argpartition(priced[entering], _ENTERING)[:_ENTERING]]
        working = np.union1d(working, entering)
    everywhere = np.zeros(cone.shape[1], dtype=bool)
    everywhere[working] = support[: working.size]
    return everywhere


def _newton(system, start: np.ndarray, max_iterations: int = MAX_ITERATIONS) -> tuple[_Point, int]:
    """Projected Newton on the dual of ``system`` (a `_Dense` or its implicit twin)
    from ``start`` until the KKT residual is below GRADIENT_TOLERANCE, ``max_iterations``
    pass, or no step improves (the rounding floor)."""
    point = _evaluate(system, start)
    iterations = 0
    gram = system.gram()
    bases: dict = {}
    while point.residual > GRADIENT_TOLERANCE and iterations < max_iterations:
        iterations += 1
        better = _line_search(system, point, _newton_direction(system, gram, point, bases))
        if better is None:
            break
        point = better
    return point, iterations


def _free_multipliers(point: _Point) -> tuple[np.ndarray, np.ndarray]:
    """(near zero, free): the multipliers near zero whose gradient pushes them there are
    held at zero, the others are free (the projection of Bertsekas 1982)."""
    lam, gradient = point.lam, point.gradient
    near_zero = lam <= min(1e-3, float(np.abs(lam - np.maximum(lam - gradient, 0.0)).max()))
    return near_zero, ~(near_zero & (gradient > 0))


def _damped_newton(system, point: _Point) -> tuple[_Point, int]:
    """Levenberg-Marquardt from ``point``: d = -(H + mu I)^-1 g on the free multipliers
    (held ones go to zero), mu divided by 10 after a step that lowers f (or, with f flat to
    rounding, the KKT residual) and multiplied by 10 after one that does not. The Hessian is
    the centred covariance sum_a sigma_a (m_a - mean)(m_a - mean)^T, free of the
    cancellation of E[m m^T] - mean mean^T."""
    iterations, damping = 0, None
    while point.residual > GRADIENT_TOLERANCE and iterations < MAX_ITERATIONS:
        iterations += 1
        free = _free_multipliers(point)[1]
        curvature, basis = np.linalg.eigh(system.covariance(point.sigma, free))
        curvature = np.maximum(curvature, 0.0)
        scale = float(curvature.max(initial=0.0)) or 1.0
        if damping is None:
            damping = _DAMPING_START * scale
        along = basis.T @ point.gradient[free]
        noise = 16 * np.finfo(float).eps * (1.0 + abs(point.value) + float(point.lam.sum()))
        while True:
            direction = -point.lam * ~free
            direction[free] = -basis @ (along / (curvature + damping))
            candidate = _evaluate(system, np.maximum(point.lam + direction, 0.0))
            lower = candidate.value < point.value - noise
            if lower or (candidate.value <= point.value + noise and candidate.residual < point.residual):
                point, damping = candidate, max(damping / 10, _DAMPING_RANGE[0] * scale)
                break
            damping *= 10
            if damping > _DAMPING_RANGE[1] * scale:
                return point, iterations
    return point, iterations


def _exponential_cone_multipliers(matrix: np.ndarray) -> np.ndarray | None:
    """The multipliers of ``M sigma <= 0`` in the primal program, solved by Clarabel
    (CVXPY): an interior-point start near the dual optimum; None if it fails."""
    import cvxpy as cp  # seconds to import; only this safeguard needs it

    sigma = cp.Variable(matrix.shape[1], nonneg=True)
    constraint = matrix @ sigma <= 0
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(sigma))), [cp.sum(sigma) == 1, constraint])
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError:
        return None
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or constraint.dual_value is None:
        return None
    return np.maximum(np.asarray(constraint.dual_value, dtype=np.float64), 0.0)


def max_entropy(matrix: np.ndarray) -> MaxEntropy:
    """argmax_sigma H(sigma) s.t. ``matrix @ sigma <= 0``, sigma in the simplex (maths, section 2.2).

    ``matrix`` is rescaled to unit max |entry| internally, so every tolerance is relative
    to the largest payoff difference. Safeguards, counted in ``safeguards``: should Newton
    from zero stop above GRADIENT_TOLERANCE, damped Newton continues from where it stopped
    (``damped_newton_continuations``); should that still be above FAILURE_TOLERANCE, Newton
    restarts from the multipliers of the primal exponential-cone program, solved by
    Clarabel (``exponential_cone_starts``). Raises MetaEvalError if the KKT residual is
    still above FAILURE_TOLERANCE.

    BLAS runs on one thread: on a busy 2-core machine, threaded products of the 192 x
    262,144 constraint matrix of a 64^3 game made the solve 6 times slower (30 s, not 5 s).

    Args:
        matrix: the constraint matrix ``[rows, joints]``.

    Returns:
        The solution and how it was reached.
    """
    check_stored(*np.shape(matrix))
    with one_blas_thread():
        return _max_entropy(matrix)


def check_stored(rows: int, joints: int) -> None:
    """Refuse, through the memory budget, `max_entropy` of a stored ``rows x joints`` matrix.

    Args:
        rows: the constraint matrix's rows.
        joints: its columns, one per joint strategy.
    """
    budget.check(STORED_COPIES * budget.FLOAT * rows * joints,
                 f"the maximum-entropy CCE over its stored {rows} x {joints} constraint matrix "
                 f"({STORED_COPIES} copies of it at once)")


def max_entropy_implicit(system, dense) -> MaxEntropy:
    """[`max_entropy`][metaeval.solvers.mecce.max_entropy] of the constraint matrix M that ``system`` computes with
    (`metaeval.solvers.cce_columns.GameColumns`: the CCE matrix of a game, entries
    at most 1), without storing M.

    Newton, then damped Newton, run on every joint through the system's contractions
    (memory O(prod K), not O(sum K prod K)). sigma(lambda) is positive everywhere, so a
    KKT point to FAILURE_TOLERANCE at which every joint keeps at least
    _FULL_SUPPORT_MASS / joints is the maximum itself, as in `_newton_first`.
    Otherwise the largest support is needed, which only the LPs over the stored matrix
    find: the result is ``max_entropy(dense())`` (``dense_fallbacks`` counts it), which the
    memory budget refuses for games beyond reach.

    Args:
        system: the column source of M.
        dense: a function returning M stored, for the fallback.

    Returns:
        As [`max_entropy`][metaeval.solvers.mecce.max_entropy].
    """
    with one_blas_thread():
        point, iterations = _newton(system, np.zeros(system.num_rows))
        damped = point.residual > GRADIENT_TOLERANCE
        if damped:
            point, steps = _damped_newton(system, point)
            iterations += steps
    full = point.sigma.min() * len(point.sigma) >= _FULL_SUPPORT_MASS
    if point.residual <= FAILURE_TOLERANCE and full:
        safeguards = {"damped_newton_continuations": int(damped), "exponential_cone_starts": 0,
                      "dense_fallbacks": 0}
        return MaxEntropy(point.sigma, iterations, point.residual, point.value, safeguards)
    check_stored(system.num_rows, system.num_columns)
    solution = max_entropy(dense())
    solution.safeguards["dense_fallbacks"] = 1
    return solution


def max_entropy_from(system, start: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The maximum-entropy sigma of ``system`` and its multipliers, by Newton from the
    multipliers of a nearby problem (a bootstrap replicate starts from the rated game's).

    A KKT point at which every joint keeps mass is the maximum itself (the entropy is
    strictly concave), the one `max_entropy` and `max_entropy_implicit` find.

    Args:
        system: `metaeval.solvers.cce_columns.GameColumns`, or a `scaled_matrix`.
        start: the multipliers Newton starts from, one per row.

    Returns:
        ``(sigma, multipliers)``, or None unless Newton reaches GRADIENT_TOLERANCE with
        every joint's mass at least _FULL_SUPPORT_MASS / joints.
    """
    with one_blas_thread():
        point, _ = _newton(system, start)
    if point.residual > GRADIENT_TOLERANCE or point.sigma.min() * len(point.sigma) < _FULL_SUPPORT_MASS:
        return None
    return point.sigma, point.lam


def scaled_matrix(matrix: np.ndarray) -> _Dense:
    """A stored constraint matrix as Newton uses it: rescaled to unit max |entry|.

    Args:
        matrix: the constraint matrix ``[rows, joints]``.

    Returns:
        The system `max_entropy_from` takes.
    """
    return _Dense(matrix / (float(np.abs(matrix).max(initial=0.0)) or 1.0))


def _max_entropy(matrix: np.ndarray) -> MaxEntropy:
    """[`max_entropy`][metaeval.solvers.mecce.max_entropy]."""
    matrix = np.asarray(matrix, dtype=np.float64)
    scale = float(np.abs(matrix).max(initial=0.0)) or 1.0
    matrix = matrix / scale
    safeguards = {"damped_newton_continuations": 0, "exponential_cone_starts": 0}
    first = _newton_first(matrix) if matrix.shape[1] > NEWTON_FIRST_JOINTS else None
    if first is not None:
        support, restricted, point, iterations = first
    else:
        support = largest_support(matrix)
        if not support.any():
            raise MetaEvalError("no distribution satisfies the constraints: the feasible set is empty")
        # The maximum-entropy sigma lies in the relative interior of the feasible set, so it
        # is positive exactly on the largest support; there finite optimal multipliers exist
        # (the constraints are linear and the entropy is differentiable at sigma > 0),
        # whereas on all joints they would run to infinity to drive excluded joints' mass to
        # zero.
        restricted = _constraint_rows(matrix if support.all() else matrix[:, support])
        point, iterations = _newton(_Dense(restricted), np.zeros(restricted.shape[0]))
    if point.residual > GRADIENT_TOLERANCE:
        safeguards["damped_newton_continuations"] += 1
        point, steps = _damped_newton(_Dense(restricted), point)
        iterations += steps
    if point.residual > FAILURE_TOLERANCE:
        safeguards["exponential_cone_starts"] += 1
        start = _exponential_cone_multipliers(restricted)
        if start is not None:
            retry, steps = _newton(_Dense(restricted), start)
            iterations += steps
            if retry.residual < point.residual:
                point = retry
    if point.residual > FAILURE_TOLERANCE:
        raise MetaEvalError(
            f"maximum-entropy dual did not converge: KKT residual {point.residual:.3g} "
            f"(relative to the largest payoff difference, accepted {FAILURE_TOLERANCE:g}) after "
            f"{iterations} Newton steps, including a restart from the exponential-cone program's "
            "multipliers"
        )
    distribution = np.zeros(support.size)
    distribution[support] = point.sigma
    return MaxEntropy(distribution, iterations, point.residual, point.value, safeguards)


def _newton_first(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, _Point, int] | None:
    """(support, rows, point, iterations) found without the support LP over every joint,
    or None if that LP must decide.

    Newton runs on every joint (see the module docstring). If some joint's mass falls
    below _FULL_SUPPORT_MASS / joints, the others are a guess G of the largest support.
    A part I of G certainly lies in it: G itself if Newton on G reaches a KKT point at
    which every joint keeps mass (then sigma is feasible and positive on G), else the
    largest support of the LP restricted to G's columns. _support_beyond then adds the
    rest of the largest support, exactly, whatever the guess; Newton runs on it as after
    the LP over every joint.
    """
    def newton_on(joints):
        rows = _constraint_rows(matrix if joints.all() else matrix[:, joints])
        point, iterations = _newton(_Dense(rows), np.zeros(rows.shape[0]), _NEWTON_FIRST_ITERATIONS)
        full = point.sigma.min() * len(point.sigma) >= _FULL_SUPPORT_MASS
        return rows, point, iterations, point.residual <= GRADIENT_TOLERANCE and full

    everything = np.ones(matrix.shape[1], dtype=bool)
    rows, point, iterations, converged = newton_on(everything)
    if converged:
        return everything, rows, point, iterations
    guess = point.sigma * len(point.sigma) >= _FULL_SUPPORT_MASS
    if guess.all() or not guess.any():
        return None
    rows, point, iterations, converged = newton_on(guess)
    inside = guess.copy()
    if not converged:
        inside[guess] = largest_support(matrix[:, guess])
    if not inside.any():
        return None
    support = inside | _support_beyond(matrix, inside)
    if converged and np.array_equal(support, guess):
        return guess, rows, point, iterations
    rows = _constraint_rows(matrix if support.all() else matrix[:, support])
    return (support, rows, *_newton(_Dense(rows), np.zeros(rows.shape[0])))


def _support_beyond(matrix: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """The joints outside ``inside`` in the largest support of {x >= 0 : M x <= 0}, given
    that some feasible sigma is positive on every joint inside.

    x = t sigma + d, t large, shows that such an x with x_j > 0 exists iff some d, free
    inside and >= 0 outside, has d_j > 0 and M d + s = 0 for a slack s >= 0. A d_in exists
    iff N (M_out d_out + s) = 0, for N an orthonormal basis of the left null space of
    M_in (u^T M_in = 0, where the certificates u >= 0, u^T M >= 0 of joints outside every
    support live). So the answer is the largest support, over d_out, of the cone
    {(d_out, s) >= 0 : N M_out d_out + N s = 0}: an LP with 2 dim(N) rows, few when M_in
    has nearly full row rank, whose joints are priced in by column generation.
    """
    if inside.all():
        return ~inside
    rows = _constraint_rows(matrix)
    within = rows[:, inside]
    curvature, basis = np.linalg.eigh(within @ within.T)
    null = basis[:, curvature <= _RANK_RTOL * max(float(curvature.max()), np.finfo(float).tiny)].T
    if not null.size:
        return ~inside
    cone = null @ rows
    scale = max(float(cone.max()), -float(cone.min()), float(np.abs(null).max()))  # no |cone| copy
    return _priced_support(np.divide(cone, scale, out=cone), null / scale, ~inside)


def _constraint_rows(matrix: np.ndarray) -> np.ndarray:
    """The rows that constrain, in their order: all-zero rows (deviations of one-strategy
    players) constrain nothing and duplicate rows (clones) repeat a constraint; dropping
    them removes needless flat directions of the dual. Rows are grouped by a hash of their
    bytes (-0.0 made 0.0) and compared exactly within a group, which unlike
    np.unique(axis=0) stays fast for rows of 262,144 joints."""
    kept: list[int] = []
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(matrix):
        if row.any():
            group = groups.setdefault(hash((row + 0.0).tobytes()), [])
            if not any(np.array_equal(matrix[j], row) for j in group):
                group.append(i)
                kept.append(i)
    return matrix[kept]
