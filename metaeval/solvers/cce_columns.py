"""The CCE constraint matrix A as a source of columns: stored, or implicit in a game.

Column generation (the deviation-rating LPs of large games) needs two things of A
(rows: deviations (p, a'_p); columns: joints a): the columns of a few joints, and
A^T y over every joint, to price the joints outside the LP. For a payoff tensor G both
follow without forming A, which has sum_p K_p x prod_p K_p entries (400 MB at 3 x 64):

    (A^T y)(a) = sum_p [ sum_{a'} y_{p,a'} G_p(a', a_-p)  -  (sum_{a'} y_{p,a'}) G_p(a) ],

one contraction of y_p with G_p along player p's axis per player, O(N prod_p K_p) work.
The maximum-entropy dual (metaeval.solvers.mecce) needs, besides A^T y, the gains A sigma
(through the opponents' marginals, O(N prod_p K_p)) and the second moments
A diag(sigma) A^T, whose blocks are contractions of G_p, G_q and sigma: with
D_p(a', a) = U_p(a', a_-p) - G_p(a), U_p(a', a_-p) = G_p(a', a_-p),

    E[D_p(a') D_q(b')] = E[U_p(a') U_q(b')] - E[U_p(a') G_q] - E[G_p U_q(b')] + E[G_p G_q].

E[U_p U_q] is a weighted Gram matrix of player p's slices for p == q and, for p != q,
sum_r U_p[r] sigma[r] U_q[r] over the joints r of the other players (a batch of K x K
products): O(N^2 K prod_p K_p) work in all, never the sum_p K_p x prod_p K_p matrix.
"""

from __future__ import annotations

import numpy as np

from metaeval.game import MetaGame
from metaeval.runs import budget
from metaeval.solvers.equilibria import against
from metaeval.solvers.reduction import quantise


class StoredColumns:
    """Columns of an explicit matrix (the reduced CCE system of small games)."""

    def __init__(self, matrix: np.ndarray):
        self.matrix = matrix
        self.num_rows, self.num_columns = matrix.shape

    def columns(self, joints: np.ndarray) -> np.ndarray:
        return self.matrix[:, joints]

    def price(self, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """A^T y over every column (into ``out`` if given)."""
        return np.matmul(y, self.matrix, out=out)


class GameColumns:
    """Columns of a game's CCE matrix computed from its payoffs, in units of ``scale``.

    ``scale`` is the largest |A| entry, the largest payoff difference any player can make
    by deviating; payoffs are divided by it and quantised as in metaeval.solvers.reduction, so
    the LPs see entries of size at most 1 whatever the user's units. Each G_p is first
    centred along its own axis (minus its mean over a_p, a function of a_-p, which leaves A
    unchanged): then |G_p| <= 1 too, and the products of `second_moments` do not
    cancel whatever the payoffs' offset (a player's payoffs 1e9 times another's spread
    would otherwise leave nothing of them in float32, and little in float64).
    """

    def __init__(self, game: MetaGame):
        payoffs = game.payoffs
        spreads = [np.ptp(payoffs[p], axis=p).max() for p in range(game.num_players)]
        self.scale = float(max(spreads)) or 1.0
        self.payoffs = np.empty(payoffs.shape)  # filled player by player: no list of temporaries to stack
        for p, (payoff, centred) in enumerate(zip(payoffs, self.payoffs)):
            np.subtract(payoff, payoff.mean(axis=p, keepdims=True), out=centred)
            centred /= self.scale
            quantise(centred, out=centred)
        self.shape = game.shape
        self.starts = np.concatenate([[0], np.cumsum(self.shape)])
        self.num_rows, self.num_columns = int(self.starts[-1]), game.num_joints

    def columns(self, joints: np.ndarray) -> np.ndarray:
        """A[:, joints] as a dense [rows, len(joints)] array."""
        index = np.unravel_index(joints, self.shape)
        blocks = []
        for p, payoff in enumerate(self.payoffs):
            others = tuple(i for q, i in enumerate(index) if q != p)
            deviated = np.moveaxis(payoff, p, 0)[(slice(None), *others)]  # G_p(a', a_-p)
            blocks.append(deviated - payoff[index][None])
        return np.concatenate(blocks)

    def price(self, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """A^T y over every joint (C order, into ``out`` if given), by the contraction in
        the module docstring.

        Each contraction is a matrix-vector product on G_p as stored ([before, K_p, after]),
        never a transposed copy (2 to 3 times faster than np.tensordot, which copies); the
        other terms accumulate in place. In float64: reduced costs are compared with
        PRICING_TOLERANCE (1e-9) and the maximum-entropy logits set the dual's value; a
        float32 pass, measured at 4 x 32 and 3 x 128, saved little once the copies had gone.
        The scratch array is kept between calls: fresh 134 MB arrays at 4 x 64 cost as much
        system time in page faults as the arithmetic."""
        total = (np.empty(self.num_columns) if out is None else out).reshape(self.shape)
        if getattr(self, "_scratch", None) is None:
            self._scratch = np.empty(self.shape)
        scratch = self._scratch
        for p, payoff in enumerate(self.payoffs):
            weights = y[self.starts[p] : self.starts[p + 1]]
            before, size = int(np.prod(self.shape[:p])), self.shape[p]
            stacked = payoff.reshape(before, size, -1)
            if before == 1:
                deviated = weights @ stacked[0]
            elif stacked.shape[2] == 1:
                deviated = stacked[:, :, 0] @ weights
            else:
                deviated = weights @ stacked  # [before, after]: one product per slice
            np.multiply(payoff, -weights.sum(), out=scratch if p else total)  # -Y_p G_p(a)
            if p:
                total += scratch
            total += deviated.reshape(self.shape[:p] + (1,) + self.shape[p + 1:])
        return total.reshape(-1)

    def least_tempted_joint(self) -> int:
        """The joint whose largest deviation gain is smallest: a pure joint nearest a CCE."""
        largest = np.full(self.shape, -np.inf)
        for p, payoff in enumerate(self.payoffs):
            largest = np.maximum(largest, payoff.max(axis=p, keepdims=True) - payoff)
        return int(np.argmin(largest))

    def gains(self, masses: np.ndarray) -> np.ndarray:
        """A sigma: every deviation gain under ``masses`` (C order), from the opponents'
        marginals (float64: the dual's KKT residual is judged on them, to 1e-13)."""
        sigma = masses.reshape(self.shape)
        return np.concatenate([against(payoff, sigma.sum(axis=p), p) - float(np.vdot(sigma, payoff))
                               for p, payoff in enumerate(self.payoffs)])

    def second_moments(self, masses: np.ndarray, free: np.ndarray | None = None,
                       dtype=np.float32) -> np.ndarray:
        """A diag(sigma) A^T by the contractions of the module docstring, rows ``free``.

        In float32 by default: there it only shapes the Newton step of the maximum-entropy
        dual, whose fixed point is set by the float64 gains; a step from a Hessian accurate
        to about 1e-5 (four terms of size at most 1, sums over many joints) still contracts
        the error ten-thousandfold, and float32 halves the memory traffic of these O(N^2 K prod K) contractions. float64
        where small eigenvalues matter (`covariance`, `gram`)."""
        sigma = masses.reshape(self.shape).astype(dtype)
        uniform = masses.min() == masses.max()
        payoffs = self.payoffs if dtype == np.float64 else self._payoffs32()
        n = len(self.shape)
        blocks = [slice(self.starts[p], self.starts[p + 1]) for p in range(n)]
        moments = np.zeros((self.num_rows, self.num_rows))
        weighted = sigma * payoffs  # [q, a]: sigma G_q
        for p in range(n):
            slices = self._deviated(payoffs, p).reshape(-1, self.shape[p])  # U_p: [a_-p, a']
            # E[U_p(a') G_q] for every q: U_p against the marginals of sigma G_q over a_p.
            cross = slices.T @ _summed(weighted, p + 1).reshape(n, -1).T
            for q in range(n):
                moments[blocks[p], blocks[q]] -= cross[:, q, None]
                moments[blocks[q], blocks[p]] -= cross[None, :, q]
                if q >= p:  # E[G_p G_q], symmetric
                    both = float(np.vdot(weighted[q], payoffs[p]))
                    moments[blocks[p], blocks[q]] += both
                    if q > p:
                        moments[blocks[q], blocks[p]] += both
            moments[blocks[p], blocks[p]] += (slices.T * _summed(sigma, p).ravel()) @ slices
        del weighted
        for q in range(1, n):
            spread = None if uniform else _last(sigma, q)  # sigma, a_q last
            for p in range(q):
                block = (float(masses[0]) * self._summed_block(payoffs, p, q) if uniform
                         else self._opponent_block(payoffs, spread, p, q))
                moments[blocks[p], blocks[q]] += block
                moments[blocks[q], blocks[p]] += block.T
        return moments if free is None else moments[np.ix_(free, free)]

    def covariance(self, masses: np.ndarray, free: np.ndarray | None = None) -> np.ndarray:
        """A diag(sigma) A^T - (A sigma)(A sigma)^T, rows ``free``, in float64: the damped
        Newton of the maximum-entropy dual works on its smallest eigenvalues."""
        gains = self.gains(masses)
        moments = self.second_moments(masses, dtype=np.float64) - np.outer(gains, gains)
        return moments if free is None else moments[np.ix_(free, free)]

    def gram(self) -> np.ndarray:
        """C C^T of the row-centred A: the number of joints times the covariance under the
        uniform distribution (float64: its null space, the dual's flat directions, is cut
        at 1e-12 of its scale)."""
        uniform = np.full(self.num_columns, 1.0 / self.num_columns)
        return self.num_columns * self.covariance(uniform)

    def _payoffs32(self) -> np.ndarray:
        """The payoffs in float32, made once (half the float64 payoffs' memory), and each
        player's with its own axis last (`_deviated`): the same again."""
        if not hasattr(self, "_float32"):
            budget.check_joints(self.shape, len(self.shape), "the float32 payoffs of the CCE second moments")
            self._float32 = self.payoffs.astype(np.float32)
            self._float32_last = [_last(payoff, p) for p, payoff in enumerate(self._float32)]
        return self._float32

    def _deviated(self, payoffs, p: int) -> np.ndarray:
        """U_p(a', a_-p) as ``[a_-p..., a']`` in C order: player p's payoffs with its own axis
        last, kept for float32, made for float64 (the rarer damped Newton and Gram matrix).
        Each opponents' block reads it this way without a transposed copy per step."""
        if payoffs is getattr(self, "_float32", None):
            return self._float32_last[p]
        return _last(payoffs[p], p)

    @staticmethod
    def _summed_block(payoffs, p: int, q: int) -> np.ndarray:
        """`_opponent_block` under a constant sigma, over sigma (p < q): U_p does not depend
        on a_p nor U_q on a_q, so the sum over (a_p, a_q) factors into one product of the
        sums sum_{a_q} U_p(a'; a_q, r) and sum_{a_p} U_q(b'; a_p, r) over the other players'
        joints r. `gram` needs it: at 7 x 7 the batched K x K products took twice a
        float32 Newton step's second moments."""
        left = np.moveaxis(payoffs[p].sum(axis=q), p, 0)
        right = np.moveaxis(payoffs[q].sum(axis=p), q - 1, 0)
        return left.reshape(len(left), -1) @ right.reshape(len(right), -1).T

    def _opponent_block(self, payoffs, spread, p: int, q: int) -> np.ndarray:
        """E[U_p(a') U_q(b')] = sum_{a_p, a_q, r} U_p(a'; a_q, r) sigma(a_p, a_q, r) U_q(b'; a_p, r)
        (p < q): batched K x K products over the other players' joints r, then one product
        over (r, a_p). ``spread`` is sigma with a_q last, so every K x K matrix has a unit
        stride and is read where it lies (3 to 4 times faster at 7 x 12 than transposed
        copies of U_p, U_q and sigma per pair).

        The batched products write Z(a'; a_p, r) = sum_{a_q} U_p(a'; a_q, r) sigma(a_p, a_q, r)
        into an array ordered like U_q ([a_-q..., a'], prod_{x != q} K_x K_p entries), so the
        product with U_q over (r, a_p) is one matrix product."""
        n = len(self.shape)
        left = self._deviated(payoffs, q)  # [a_-q..., b']
        entries = left.size // self.shape[q] * self.shape[p]
        budget.check(entries * left.itemsize, f"an opponents' block of the CCE second moments ({entries:,} entries)")
        mixed = np.empty(left.shape[:-1] + (self.shape[p],), dtype=left.dtype)  # [a_-q..., a']
        deviated_p = np.moveaxis(self._deviated(payoffs, p), -1, p)  # natural axes, a' unit stride
        np.matmul(np.moveaxis(np.moveaxis(spread, -1, q), (p, q), (-2, -1)),  # [r..., a_p, a_q]
                  np.moveaxis(deviated_p, (q, p), (-2, -1)),  # [r..., a_q, a']
                  out=np.moveaxis(mixed, (p, n - 1), (-2, -1)))  # [r..., a_p, a']
        return mixed.reshape(-1, self.shape[p]).T @ left.reshape(-1, self.shape[q])


def _summed(array: np.ndarray, axis: int) -> np.ndarray:
    """``array`` summed over ``axis``; over the last one by a matrix-vector product (numpy's
    sums of short contiguous rows took 8 times longer than over another axis at 7 x 12)."""
    if axis < array.ndim - 1:
        return array.sum(axis=axis)
    size = array.shape[-1]
    return (array.reshape(-1, size) @ np.ones(size, dtype=array.dtype)).reshape(array.shape[:-1])


def _last(array: np.ndarray, axis: int) -> np.ndarray:
    """``array`` with ``axis`` moved last, in C order (no copy if it is last already)."""
    return np.ascontiguousarray(np.moveaxis(array, axis, -1))
