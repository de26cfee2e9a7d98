"""The logit branches of a batch of games, traced in lock-step.

Bootstrap replicates of one game have payoff tensors of the same shape, so their
principal logit branches (`metaeval.ratings.logit.trace_logit_branch`) are traced
together: every step of the predictor-corrector is taken on the whole batch at once,
one numpy call doing every branch's branch equations, Jacobian, tangent and corrector
step, each branch keeping its own step length, acceptance, orientation and stop, and
leaving the batch when it ends. The equations, the step control and its tolerances are
`trace_logit_branch`'s, so each branch follows the path its own tracer follows, up to
rounding (the sums are taken in another order, and the chord corrector multiplies by
the predicted point's inverse instead of solving with its LU factors). On a small game
(24 strategies over 512 joints) a step of one branch costs more in Python and numpy's
calls than in arithmetic: a step of 50 branches cost about four times a step of one
(0.83 CPU ms against 0.22 on a 3-player goofspiel meta-game), the inverses the larger
part of what grows with the branches.

A branch ends where its own tracer's end test holds: the max regret read off the branch
within twice the target, then `logit.max_regret` (the single tracer's test, on that
game's tensor) at most the target. A branch whose steps fall below the tracer's
smallest step, that runs past its step limit, or whose end fails the single test, has
no end here: the caller traces it alone, as without the batch (its fallbacks included).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dgetrf, dgetri

from metaeval.ratings import logit
from metaeval.ratings.logit import (_CORRECTOR_TOLERANCE, _END_ACCELERATION, _ETA, _FIRST_STEP, _MAX_ACCELERATION,
                                    _MAX_CONTRACTION, _MAX_CORRECTOR_STEPS, _MAX_DISTANCE, _MAX_STEPS, _MIN_STEP,
                                    _NOMINAL_CONTRACTION, _NOMINAL_DISTANCE)
from metaeval.runs.threads import one_blas_thread


class _Branches:
    """The branch equations of a batch of games ``[B, N, K_1..K_N]`` (`logit._branch_equations`,
    every game's at once) at the unknowns ``v = (y, lambda)`` ``[B, n + 1]``, every
    player's rows in one array; the residuals of some games of the batch, ``rows`` (an
    index or a slice), alone.

    Each contraction is one batched matrix-vector product: for every pair of players
    p != q, player p's tensor is stored with the axes (p, q, the others in order), and
    contracted with the Kronecker product of the others' strategies (to dG_p / dx_q), or
    of q's and theirs (to G_p(., x_-p), q the first opponent)."""

    def __init__(self, payoffs: np.ndarray):
        count, players, *sizes = payoffs.shape
        self.offsets = np.cumsum([0, *sizes])
        n = self.offsets[-1]
        self.owner = np.repeat(np.arange(players), sizes)  # the player of each unknown y
        self.firsts = self.offsets[:-1]
        self.blocks = [slice(self.offsets[p], self.offsets[p + 1]) for p in range(players)]  # each player's unknowns
        self.first_of = self.firsts[self.owner]  # each unknown's reference strategy 0
        self.template = np.zeros((n, n))  # the Jacobian's entries in y that do not depend on v
        rest = np.setdiff1d(np.arange(n), self.firsts)
        self.template[rest, rest] = 1.0
        self.template[rest, self.first_of[rest]] = -1.0
        self.others = {(p, q): [r for r in range(players) if r not in (p, q)] for p in range(players)
                       for q in range(players) if q != p}
        self.tensors = {(p, q): np.ascontiguousarray(payoffs[:, p].transpose(0, 1 + p, 1 + q, *(1 + r for r in others)))
                        .reshape(count, sizes[p], sizes[q], -1) for (p, q), others in self.others.items()}
        self.opponent = [1 if p == 0 else 0 for p in range(players)]  # the first opponent q of each player

    def keep(self, rows: np.ndarray) -> None:
        """Drop every game of the batch but ``rows`` (a mask)."""
        self.tensors = {pair: tensor[rows] for pair, tensor in self.tensors.items()}

    def values(self, rows, x: np.ndarray) -> np.ndarray:
        """Every G_p(., x_-p) ``[B, n]`` at x = exp(y) ``[B, n]``."""
        values = np.empty_like(x)
        strategies = [x[:, block] for block in self.blocks]
        for p, block in enumerate(self.blocks):
            q = self.opponent[p]
            tensor = self.tensors[p, q][rows]
            against = _kron([strategies[q]] + [strategies[r] for r in self.others[p, q]])
            values[:, block] = (tensor.reshape(len(tensor), tensor.shape[1], -1) @ against[:, :, None])[:, :, 0]
        return values

    def residuals(self, rows, v: np.ndarray, x=None, values=None) -> np.ndarray:
        """H(v) ``[B, n]``; ``x`` = exp(y) and ``values`` (`values`) where known."""
        n = self.offsets[-1]
        x = np.exp(v[:, :n]) if x is None else x
        values = self.values(rows, x) if values is None else values
        residual = v[:, :n] - v[:, self.first_of] - v[:, n:] * (values - values[:, self.first_of])
        residual[:, self.firsts] = np.add.reduceat(x, self.firsts, axis=1) - 1.0
        return residual

    def jacobian(self, v: np.ndarray, previous: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(H(v), [J(v); previous]) of every game of the batch: the residuals and the
        Jacobian with ``previous`` as its last row."""
        n = self.offsets[-1]
        x = np.exp(v[:, :n])
        strategies = [x[:, block] for block in self.blocks]
        cross = np.zeros((len(v), n, n))  # d G_p(i, x_-p) / d x_q(j) in the blocks p != q
        for (p, q), others in self.others.items():
            tensor = self.tensors[p, q]
            against = _kron([strategies[r] for r in others])
            products = tensor.reshape(len(tensor), -1, tensor.shape[3]) @ against[:, :, None]
            cross[:, self.blocks[p], self.blocks[q]] = products.reshape(tensor.shape[:3])
        values = np.empty_like(x)
        for p, block in enumerate(self.blocks):  # G_p(., x_-p) from the first opponent's block, as logit._payoff_from
            q = self.opponent[p]
            values[:, block] = (cross[:, block, self.blocks[q]] @ strategies[q][:, :, None])[:, :, 0]
        for first, block in zip(self.firsts, self.blocks):  # as (lambda (cross_i - cross_0)) x_q in logit._branch_equations
            cross[:, block] -= cross[:, first, None]
        cross *= v[:, n, None, None]
        cross *= x[:, None, :]
        jacobian = np.empty((len(v), n + 1, n + 1))
        np.subtract(self.template, cross, out=jacobian[:, :n, :n])
        jacobian[:, self.firsts, :n] = np.where(self.owner == np.arange(len(self.blocks))[:, None], x[:, None, :], 0.0)
        jacobian[:, :n, n] = -(values - values[:, self.first_of])
        jacobian[:, self.firsts, n] = 0.0
        jacobian[:, n] = previous
        return self.residuals(slice(None), v, x, values), jacobian


def trace_logit_branches(payoffs: np.ndarray, target: float) -> list[list[np.ndarray] | None]:
    """Each game's point on its principal logit branch at max regret ``target`` times its
    payoff range, as `logit.trace_logit_branch` ends there, or None where it has none
    here (module docstring).

    Args:
        payoffs: the games ``[B, N, K_1, ..., K_N]``, each as the tracer takes it.

    Returns:
        Per game, one mixed strategy per player, or None.
    """
    count = len(payoffs)
    branches = _Branches(payoffs)
    n = branches.offsets[-1]
    goal = target * np.ptp(payoffs.reshape(count, -1), axis=1)
    v = np.tile(np.concatenate([np.full(k, -np.log(k)) for k in payoffs.shape[2:]] + [[0.0]]), (count, 1))
    last = np.zeros((count, n + 1))
    last[:, n] = 1.0
    ended: list = [None] * count
    with one_blas_thread(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        traced = np.arange(count)  # the games whose branches are still traced
        orientation, _, start = _inverses(branches.jacobian(v, last)[1])  # regular at lambda = 0
        tangent = _tangents(start)
        step = np.full(count, _FIRST_STEP)
        for _ in range(_MAX_STEPS):
            near_end = _branch_regret(branches, v) <= 2 * goal
            if near_end.any():
                near = np.flatnonzero(near_end)
                x = np.exp(v[near, :n])
                values = branches.values(near, x)
                best = np.maximum.reduceat(values, branches.firsts, axis=1)[:, branches.owner]
                regret = np.add.reduceat(x * (best - values), branches.firsts, axis=1).max(axis=1)  # logit.max_regret
                finished = regret <= goal[near]
                for i in np.flatnonzero(finished):
                    ended[traced[near[i]]] = [x[i, block] for block in branches.blocks]
                going = np.ones(len(traced), dtype=bool)
                going[near[finished]] = False
                traced, v, tangent, orientation, step, goal, near_end = (
                    a[going] for a in (traced, v, tangent, orientation, step, goal, near_end))
                branches.keep(going)
            if not len(traced):
                break
            point, new_tangent, slow_down = _steps(branches, v + step[:, None] * tangent, tangent, orientation)
            accepted = ~np.isnan(point[:, 0])
            most = np.where(near_end, _END_ACCELERATION, _MAX_ACCELERATION)
            step = np.where(accepted, step / np.minimum(np.maximum(slow_down, 1 / most), most), step / 2)
            v[accepted], tangent[accepted] = point[accepted], new_tangent[accepted]
            going = accepted | (step >= _MIN_STEP)  # a rejected step below the smallest: stalled
            if not going.all():
                traced, v, tangent, orientation, step, goal = (
                    a[going] for a in (traced, v, tangent, orientation, step, goal))
                branches.keep(going)
    for b, x in enumerate(ended):  # the single tracer's end test, on each game's own tensor
        if x is not None and not logit.max_regret(payoffs[b], x) <= target * float(np.ptp(payoffs[b])):
            ended[b] = None
    return ended


def _kron(strategies: list[np.ndarray]) -> np.ndarray:
    """The Kronecker products ``[B, prod K]`` of the strategies ``[B, K]`` (ones ``[1, 1]`` for none)."""
    if not strategies:
        return np.ones((1, 1))
    product = strategies[0]
    for x in strategies[1:]:
        product = (product[:, :, None] * x[:, None, :]).reshape(len(x), -1)
    return product


def _branch_regret(branches: _Branches, v: np.ndarray) -> np.ndarray:
    """`logit._branch_regret` of every branch."""
    n = branches.offsets[-1]
    y, lam = v[:, :n], v[:, n]
    gaps = np.maximum.reduceat(y, branches.firsts, axis=1) - np.add.reduceat(np.exp(y) * y, branches.firsts, axis=1)
    return np.where(lam > 0, gaps.max(axis=1) / np.where(lam > 0, lam, 1.0), np.inf)


def _inverses(jacobian: np.ndarray, orientation=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sign of the determinant of each [J; previous] ``[B, m, m]`` (0 where singular or
    not finite), the rows whose sign is ``orientation`` (every regular one where None) and
    their inverses ``[R, m, m]``: each matrix factored once by LAPACK's getrf and inverted
    from its factors by getri (numpy's batched slogdet and inv factor it twice, and
    solve for the inverse's columns from scratch: 11.4 µs a 25 x 25 matrix against 9.1)."""
    count, size = len(jacobian), jacobian.shape[1]
    finite = np.flatnonzero(np.isfinite(jacobian).all(axis=(1, 2)))
    factors, diagonals, pivots = {}, np.ones((count, size)), np.zeros((count, size), dtype=np.int32)
    for b in finite:  # the transposes: Fortran order without a copy, the same determinant
        lu, rows, _ = dgetrf(jacobian[b].T)
        factors[b] = lu, rows
        diagonals[b], pivots[b] = lu.diagonal(), rows
    swaps = np.count_nonzero(pivots[finite] != np.arange(size), axis=1)
    sign = np.zeros(count)
    sign[finite] = np.sign(diagonals[finite]).prod(axis=1) * (-1.0) ** swaps
    rows = np.flatnonzero(sign != 0 if orientation is None else sign == orientation)
    inverses = np.empty((len(rows), size, size))
    for i, b in enumerate(rows):
        inverses[i] = dgetri(*factors[b])[0].T
    return sign, rows, inverses


def _tangents(inverse: np.ndarray) -> np.ndarray:
    """The unit tangents t with [J; previous] t = e_last, as `logit._tangent` computes
    them, from the inverses ``[B, m, m]`` of [J; previous]."""
    t = inverse[:, :, -1]
    return t / np.linalg.norm(t, axis=1, keepdims=True)


def _steps(branches: _Branches, predicted, tangent, orientation):
    """`logit._step` of every branch from its predicted point: (points, tangents,
    decelerations f), a point's row NaN where the step is rejected. The corrector's
    chord steps are products with the predicted point's inverse."""
    count, size = predicted.shape
    point = np.full((count, size), np.nan)
    slow_down = np.zeros(count)
    residual, jacobian = branches.jacobian(predicted, tangent)
    finite = np.isfinite(residual).all(axis=1)[:, None, None]
    active, inverse = _inverses(np.where(finite, jacobian, np.nan), orientation)[1:]
    new_tangent = np.full((count, size), np.nan)
    new_tangent[active] = _tangents(inverse)
    v, previous = predicted[active], None
    residual, inverse = residual[active], inverse[:, :, :-1]
    for iteration in range(_MAX_CORRECTOR_STEPS):
        if not len(active):
            break
        delta = -(inverse @ residual[:, :, None])[:, :, 0]
        distance = np.sqrt((delta * delta).sum(axis=1))  # np.linalg.norm's sum, without its checks
        going = distance < _MAX_DISTANCE
        if iteration == 0:  # every branch's first corrector step
            slow_down[active] = np.sqrt(distance / _NOMINAL_DISTANCE)
        else:
            contraction = distance / (previous + _CORRECTOR_TOLERANCE * _ETA)
            going &= contraction <= _MAX_CONTRACTION
            slow_down[active] = np.maximum(slow_down[active], np.sqrt(contraction / _NOMINAL_CONTRACTION))
        v, previous = v + delta, distance
        done = going & (distance <= _CORRECTOR_TOLERANCE)
        point[active[done]] = v[done]
        going &= ~done
        if not going.all():
            active, v, previous, inverse = active[going], v[going], previous[going], inverse[going]
        if len(active):  # every branch's tensors read in place, without a gathered copy
            residual = branches.residuals(active if len(active) < count else slice(None), v)
    return point, new_tangent, slow_down
