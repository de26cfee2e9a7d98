"""Bootstrap replicates of uniform ratings drawn from their exact law, without payoff tensors.

Under the parametric bootstrap a replicate's payoffs are ``G* = G + noise``, the noise
linear in standard normals (`metaeval.ratings.bootstrap.Resampler`), and uniform ratings
are linear in the payoffs: their replicates are exactly Gaussian, with mean the point
rating and a covariance C of marginal sums of squared standard errors. Player p's
rating of strategy i averages the M_p = (joints / K_p) joints where p plays i, so:

- independent noise: ``Var r_p(i) = sum_{a_p = i} s_p(a)^2 / M_p^2``, no covariances;
- constant sum (N players, the last one's noise minus the others'): for p < N - 1 as
  above, ``Var r_last(j) = sum_{p < N-1} sum_{a_last = j} s_p(a)^2 / M_last^2`` and
  ``Cov(r_p(i), r_last(j)) = -sum_{a_p = i, a_last = j} s_p(a)^2 / (M_p M_last)``;
- symmetric 2-player (player 1's noise player 0's transposed): both players' ratings
  are the same vector, of variance ``sum_j s_0(i, j)^2 / K^2``; also constant sum
  (antisymmetric noise): ``sum_{j != i} s_0(i, j)^2 / K^2`` and covariance
  ``-s_0(i, k) s_0(k, i) / K^2``.

The B replicates are ``r + z L^T`` with ``C = L L^T`` (L diagonal for independent
noise, else from an eigendecomposition: C is singular in constant-sum games) and z
standard normal ``[B, sum_p K_p]`` from one generator seeded by the bootstrap's seed:
O(joints) once and O(B (sum_p K_p)^2) (O((sum_p K_p)^3) once more where C is not
diagonal, so above DENSE_MAX_RATINGS ratings the tensors are drawn), where drawing B
tensors costs O(B joints). The replicates' law is the one the tensors give;
the draws are not the same. Win-probability games (clipped to [0, 1]) and the
non-parametric bootstrap are not Gaussian: their tensors are drawn.
"""

from __future__ import annotations

import numpy as np

from metaeval.ratings.base import Rating
from metaeval.runs.threads import one_blas_thread


#: Most ratings whose covariance, if not diagonal, is factored (an O(n^3) eigendecomposition,
#: 1.2 CPU s at 2,048 ratings, where drawing 100 tensors of 2 x 1,024 x 1,024 took 3.7 s);
#: above it the payoff tensors are drawn (module docstring).
DENSE_MAX_RATINGS = 2048


class GaussianReplicates:
    """Replicates ``mean + z L^T`` of a rating that is Gaussian under the bootstrap.

    Args:
        mean: the point ratings, every player's concatenated.
        factor: L, with ``L L^T`` their covariance; a vector where that is diagonal (L's diagonal).
    """

    def __init__(self, mean: np.ndarray, factor: np.ndarray):
        self.mean, self.factor = mean, factor

    @classmethod
    def of(cls, rater, rating: Rating, resampler) -> "GaussianReplicates | None":
        """The replicates of a rating under a resampler's draws.

        Args:
            rater: the rater function.
            rating: its point rating of the resampler's game.
            resampler: the `metaeval.ratings.bootstrap.Resampler` of the bootstrap.

        Returns:
            The GaussianReplicates, or None unless the rater is uniform and the draws are
            Gaussian with a covariance it factors (module docstring).
        """
        from metaeval.ratings.uniform import uniform

        if rater is not uniform or resampler.samples is not None or resampler.win_probability:
            return None
        if (resampler.symmetric or resampler.constant_sum) and sum(resampler.game.shape) > DENSE_MAX_RATINGS:
            return None
        covariance, scale = uniform_covariance(resampler)
        if covariance.ndim == 1:
            return cls(np.concatenate(rating.ratings), np.sqrt(covariance) * scale)
        with one_blas_thread():  # threaded, it took 0.3 CPU s at 192 ratings on a busy 2-core machine, 6 ms alone
            values, vectors = np.linalg.eigh(covariance)
        return cls(np.concatenate(rating.ratings), vectors * (np.sqrt(np.clip(values, 0.0, None)) * scale))

    def draw(self, rng: np.random.Generator, replicates: int) -> np.ndarray:
        """Replicate ratings, every player's concatenated.

        Args:
            rng: the generator the draw uses.
            replicates: how many to draw.

        Returns:
            The ratings ``[replicates, sum_p K_p]``.
        """
        normals = rng.standard_normal((replicates, len(self.mean)))
        if self.factor.ndim == 1:
            return self.mean + normals * self.factor
        with one_blas_thread():
            return self.mean + normals @ self.factor.T


def uniform_covariance(resampler) -> tuple[np.ndarray, float]:
    """The covariance of the uniform ratings of a resampler's parametric draws (module docstring).

    Args:
        resampler: a parametric `metaeval.ratings.bootstrap.Resampler`.

    Returns:
        The covariance ``[sum_p K_p, sum_p K_p]`` divided by ``scale**2`` (where the noise is
        independent, its diagonal ``[sum_p K_p]``; the rest is 0), and ``scale``, the largest
        standard error, so that squares neither overflow nor underflow.
    """
    game = resampler.game
    shape, players, joints = game.shape, game.num_players, game.num_joints
    scale = float(game.stderr.max()) or 1.0
    variance = (game.stderr / scale) ** 2
    if resampler.symmetric:
        row = variance[0].copy()
        block = np.diag(row.sum(axis=1))
        if resampler.constant_sum:  # antisymmetric noise: the diagonal's cancels, (i, k) and (k, i) share theirs
            np.fill_diagonal(row, 0.0)
            block = np.diag(row.sum(axis=1)) - np.sqrt(row * row.T)  # s(i, k) s(k, i) off the diagonal
        return np.tile(block / shape[0] ** 2, (2, 2)), scale
    counts = [joints // k for k in shape]  # M_p
    diagonals = [_marginal(variance[p], [p]) / counts[p] ** 2 for p in range(players)]
    if not resampler.constant_sum:
        return np.concatenate(diagonals), scale
    last = players - 1
    offsets = np.concatenate([[0], np.cumsum(shape)])
    covariance = np.zeros((offsets[-1], offsets[-1]))
    for p in range(last):
        block = slice(offsets[p], offsets[p + 1])
        covariance[block, block] = np.diag(diagonals[p])
        pair = _marginal(variance[p], [p, last]) / (counts[p] * counts[last])
        covariance[block, offsets[last]:] = -pair
        covariance[offsets[last]:, block] = -pair.T
        covariance[offsets[last]:, offsets[last]:] += np.diag(pair.sum(axis=0)) * counts[p] / counts[last]
    return covariance, scale


def _marginal(values: np.ndarray, keep: list[int]) -> np.ndarray:
    """Sums of ``values`` over every axis but ``keep`` (in increasing order)."""
    return values.sum(axis=tuple(q for q in range(values.ndim) if q not in keep))
