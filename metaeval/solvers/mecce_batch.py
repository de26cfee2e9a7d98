"""The maximum-entropy duals of a batch of stored systems, by projected Newton in lock-step.

Bootstrap replicates of one game have constraint matrices of the same shape and
multipliers near the point's, so their duals (`metaeval.solvers.mecce`) are solved
together: every step of `mecce`'s projected Newton (Bertsekas 1982) is taken on the
whole batch at once, each system keeping its own free multipliers and its own
backtracking step, and leaving the batch when it stops. A small dual (24 multipliers over
512 joints on a 3-player game of 8 strategies each) costs Newton less arithmetic than
Python, so a step of the batch costs little more than a step of one system.

`mecce`'s Newton turns into steepest descent along directions where the dual is linear
(null vectors of the free rows' centred Gram matrix); here the Newton step solves the
free block of the Hessian directly, which is the same step where there are none (a
Gram matrix of full rank has none, nor has any of its principal blocks: their
eigenvalues interlace). The caller checks that on the rated game
(`has_linear_directions`). A system that stops above GRADIENT_TOLERANCE or with some
joint's mass below _FULL_SUPPORT_MASS / joints is reported uncertified, and so is every
system of a batch whose free block turns out singular; a certified one is a KKT point
with every joint's mass positive, the system's maximum-entropy sigma, as
`mecce.max_entropy_from` certifies it.
"""

from __future__ import annotations

import numpy as np

from metaeval.runs.threads import one_blas_thread
from metaeval.solvers.mecce import (_ARMIJO, _FULL_SUPPORT_MASS, _MAX_HALVINGS, GRADIENT_TOLERANCE, MAX_ITERATIONS,
                                    _Dense, _linear_directions)


def has_linear_directions(matrix: np.ndarray) -> bool:
    """Whether the dual of a stored system is linear along some direction (a rank-deficient
    centred Gram matrix, as `mecce` tests it): zero or repeated rows, clones.

    Args:
        matrix: the system ``[R, J]``, scaled as `mecce.scaled_matrix` scales it.

    Returns:
        Whether it has such directions.
    """
    return _linear_directions(_Dense(matrix).gram(), np.ones(len(matrix), dtype=bool))[1].shape[1] > 0


class _Points:
    """Duals' values, sigmas and gradients at multipliers ``lam`` ``[B, R]``, for systems ``[B, R, J]``."""

    def __init__(self, matrices: np.ndarray, lam: np.ndarray):
        logits = -(lam[:, None, :] @ matrices)[:, 0]
        top = logits.max(axis=1, keepdims=True)
        sigma = np.exp(logits - top)
        total = sigma.sum(axis=1, keepdims=True)
        self.lam, self.sigma = lam, sigma / total
        self.value = (top + np.log(total))[:, 0]
        self.gradient = -(matrices @ self.sigma[:, :, None])[:, :, 0]

    def residual(self) -> np.ndarray:
        """Each system's largest projected-gradient entry (`mecce._Point.residual`)."""
        projected = np.where(self.lam > 0, self.gradient, np.minimum(self.gradient, 0.0))
        return np.abs(projected).max(axis=1, initial=0.0)

    def take(self, other: "_Points", rows: np.ndarray) -> None:
        """Replace the systems ``rows`` (a mask) by ``other``'s."""
        for name in ("lam", "sigma", "value", "gradient"):
            getattr(self, name)[rows] = getattr(other, name)[rows]

    def keep(self, rows: np.ndarray) -> None:
        """Drop every system but ``rows`` (indices or a mask)."""
        for name in ("lam", "sigma", "value", "gradient"):
            setattr(self, name, getattr(self, name)[rows])


def max_entropy_batch(matrices: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each system's maximum-entropy sigma, by Newton from its start (module docstring).

    Args:
        matrices: the systems ``[B, R, J]``, each scaled as `mecce.scaled_matrix` scales it.
        starts: the multipliers each starts from ``[B, R]``.

    Returns:
        The sigmas ``[B, J]`` and which of them are certified ``[B]``.
    """
    with one_blas_thread():
        point = _Points(matrices, np.array(starts, dtype=np.float64))
        sigma, residual = point.sigma.copy(), point.residual()
        alive = np.flatnonzero(residual > GRADIENT_TOLERANCE)  # the systems still in the batch
        point.keep(alive)
        matrices = matrices[alive]
        for _ in range(MAX_ITERATIONS):
            if not len(alive):
                break
            try:
                direction = _directions(matrices, point)
            except np.linalg.LinAlgError:  # a singular free block: rank-deficient after all
                break
            moved = _line_search(matrices, point, direction)
            residual[alive] = point.residual()
            sigma[alive] = point.sigma
            going = moved & (residual[alive] > GRADIENT_TOLERANCE)
            if not going.all():
                alive, matrices = alive[going], matrices[going]
                point.keep(going)
    full = sigma.min(axis=1) * sigma.shape[1] >= _FULL_SUPPORT_MASS
    return sigma, (residual <= GRADIENT_TOLERANCE) & full


def _directions(matrices: np.ndarray, point: _Points) -> np.ndarray:
    """Each system's projected Newton direction (`mecce._newton_direction` where the dual
    has no linear direction): held multipliers go to zero, free ones take the Newton step
    on the free block of the Hessian; every step is capped at doubling the largest
    multiplier (plus 10)."""
    lam, gradient = point.lam, point.gradient
    reach = np.abs(lam - np.maximum(lam - gradient, 0.0)).max(axis=1, keepdims=True)
    free = ~((lam <= np.minimum(1e-3, reach)) & (gradient > 0))  # mecce._free_multipliers
    mean = -gradient
    hessian = (matrices * point.sigma[:, None, :]) @ matrices.transpose(0, 2, 1) - mean[:, :, None] * mean[:, None, :]
    hessian = np.where(free[:, :, None] & free[:, None, :], hessian, 0.0)
    rows = np.arange(lam.shape[1])
    hessian[:, rows, rows] += ~free  # the identity on held rows
    newton = np.linalg.solve(hessian, np.where(free, -gradient, 0.0)[:, :, None])[:, :, 0]
    direction = np.where(free, newton, -lam)
    limit = 10.0 + lam.max(axis=1, initial=0.0)
    longest = np.abs(direction).max(axis=1, initial=0.0)
    return direction * np.minimum(1.0, limit / np.maximum(longest, limit))[:, None]


def _line_search(matrices: np.ndarray, point: _Points, direction: np.ndarray) -> np.ndarray:
    """Backtrack every system along its projected arc (`mecce._line_search`), each with its
    own step, and move ``point`` to the accepted candidates. Returns which moved."""
    noise = 16 * np.finfo(float).eps * (1.0 + np.abs(point.value) + point.lam.sum(axis=1))
    residual = point.residual()
    step = np.ones(len(direction))
    pending = np.ones(len(direction), dtype=bool)
    for _ in range(_MAX_HALVINGS):
        if not pending.any():
            break
        candidate = _Points(matrices, np.maximum(point.lam + step[:, None] * direction, 0.0))
        decrease = np.einsum("br,br->b", point.gradient, candidate.lam - point.lam)
        armijo = (decrease < 0) & (candidate.value <= point.value + _ARMIJO * decrease)
        flat = (candidate.value <= point.value + noise) & (candidate.residual() <= residual / 2)
        accepted = pending & (armijo | flat)
        point.take(candidate, accepted)
        pending &= ~accepted
        step = np.where(pending, step / 2, step)
    return ~pending
