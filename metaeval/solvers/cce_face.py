"""The later rounds of Algorithm 1 (maths, section 2.1) on the optimal face of an earlier one.

Round r of the strictest-CCE LPs ends with an optimum t_r and duals (y, reduced costs d_j
of the joints). By weak duality, every sigma feasible for a later round (all gains at
most t_r, frozen ones at most their values) has sum_j d_j sigma_j <= 0, so it lies in the
round's optimal face

    F = {sigma in the simplex: sigma_j = 0 where d_j > 0,
         A_i sigma = A_i sigma_r where y_i != 0, the other constraints},

and so does every later optimum. On F the later rounds are small: the joints J with
d_j = 0 (tens to hundreds, whatever the game's size), the rows E with y_i != 0, the
affine set
{sigma_J: 1^T sigma = 1, A_E sigma = A_E sigma_r} written sigma = sigma_r + N z with N an
orthonormal basis of the null space of [1; A_E[:, J]]. Each round is an LP in z and t
(sigma_r + N z >= 0), after which the new tight rows and zero joints join E, and the
affine set shrinks.

Why this is also the cure of a numerical failure: the optimal face is often a single
point, or a set on which most gains are constant (king-of-the-hill games: from the first
round on). Solved as LPs over the simplex with frozen rows g_i <= v_i, the later rounds
then have a feasible set of no interior, pinned by bounds that carry the earlier LPs'
rounding; the rounding grew with every frozen row until HiGHS reported them infeasible
(64 x 64 x 100: round 76, even afresh at a tolerance of 1e-7). Here the equalities are
kept exactly, by construction of N, with values read at an actual point sigma_r, and
z = 0 is feasible in every round. A gain constant on the affine set (A_i N = 0) keeps
its value A_i sigma_r in every later round: its rating is that value, read off at once
(constants shared by all feasible points leave the lexicographic order of the sorted
gains, and so Algorithm 1's values, unchanged). Every round adds at least one row that
varies to E, so there are at most dim(null space) + 1 rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from metaeval.solvers import lp

NULL_TOLERANCE = 1e-10
"""Singular values of [1; A_E] below this times the largest span the null space (the
gains of E then move by at most this per unit step, far below CHECK_TOLERANCE)."""
CONSTANT_TOLERANCE = 1e-10
"""A gain whose row of A N has Euclidean norm at most this is constant on the affine set
(it moves by at most sqrt(2) times this over the simplex, N being orthonormal)."""


@dataclass
class FaceRounds:
    """The rounds on the face: values of every row, the final sigma over ``joints``."""

    values: np.ndarray
    joints: np.ndarray
    masses: np.ndarray
    matrix: np.ndarray  # A[:, joints]
    rounds: int
    lp_solves: int
    read_off: int  # rows rated by being constant on the affine set


def _null_space(matrix: np.ndarray) -> np.ndarray:
    if matrix.shape[1] == 0:
        return np.zeros((0, 0))
    return scipy.linalg.null_space(matrix, rcond=NULL_TOLERANCE)


def _round_lp(moves: np.ndarray, gains: np.ndarray, unfrozen: np.ndarray, slack: np.ndarray,
              basis: np.ndarray, masses: np.ndarray):
    """min t over (z, t): (A N z)_i - t <= -g_i (unfrozen i), (A N z)_i <= slack_i
    (frozen i), -N z <= sigma_r; ``moves`` = A N restricted to the rows that vary."""
    rows, dims = moves.shape
    t_column = np.where(unfrozen, -1.0, 0.0)[:, None]
    matrix = sp.vstack([sp.csr_matrix(np.hstack([moves, t_column])),
                        sp.csr_matrix(np.hstack([-basis, np.zeros((len(masses), 1))]))])
    return lp.highs_model(
        matrix,
        costs=np.r_[np.zeros(dims), 1.0],
        col_lower=np.full(dims + 1, -lp.INF),
        col_upper=np.full(dims + 1, lp.INF),
        row_lower=np.full(rows + len(masses), -lp.INF),
        row_upper=np.r_[np.where(unfrozen, -gains, slack), masses],
    )


def face_rounds(columns: np.ndarray, joints: np.ndarray, masses: np.ndarray, equal: np.ndarray,
                values: np.ndarray, unfrozen: np.ndarray, freeze, dual_tolerance: float,
                what: str) -> FaceRounds:
    """Finish Algorithm 1 on the optimal face of a round (module docstring).

    ``columns`` is A[:, joints] for the joints of zero reduced cost, ``masses`` the round's
    sigma on them, ``equal`` the rows with a non-zero dual, ``values``/``unfrozen`` the
    state after the round's freeze (updated in place). ``freeze(duals, gains, unfrozen)``
    picks a round's constraints to freeze (the rule of the first rounds); a dual counts as
    non-zero above ``dual_tolerance``.
    """
    masses = np.clip(masses, 0.0, None)
    masses /= masses.sum()
    equal = np.isin(np.arange(len(values)), equal)
    keep = np.ones(len(joints), dtype=bool)
    rounds = lp_solves = read_off = 0
    while True:
        gains = columns @ masses
        basis = _null_space(np.vstack([np.ones(keep.sum()), columns[equal][:, keep]]))
        moves = columns[:, keep] @ basis
        varies = np.linalg.norm(moves, axis=1) > CONSTANT_TOLERANCE
        constant = unfrozen & ~varies
        values[constant] = gains[constant]
        unfrozen &= varies
        read_off += int(constant.sum())
        if not unfrozen.any():
            break
        rounds += 1
        rows = np.flatnonzero(varies)
        highs = _round_lp(moves[rows], gains[rows], unfrozen[rows],
                          np.clip(values[rows] - gains[rows], 0.0, None), basis, masses[keep])
        lp_solves += lp.solve(highs, f"{what} (round {rounds} on the optimal face)")
        solution = highs.getSolution()
        z, t = np.asarray(solution.col_value[:-1]), float(solution.col_value[-1])
        duals = np.abs(np.asarray(solution.row_dual))
        duals[duals <= dual_tolerance] = 0.0
        row_duals, joint_duals = np.zeros(len(values)), duals[len(rows):]
        row_duals[rows] = duals[: len(rows)]
        moved = masses.copy()
        moved[keep] += basis @ z
        chosen = freeze(row_duals, columns @ moved, unfrozen)
        values[chosen] = t
        unfrozen &= ~chosen
        equal |= row_duals > 0  # tight on the whole new optimal face (the chosen among them)
        equal |= chosen
        zero = np.flatnonzero(keep)[joint_duals > 0]  # sigma_j = 0 on the new face
        keep[zero] = False
        masses = np.where(keep, np.clip(moved, 0.0, None), 0.0)
        masses /= masses.sum()
    return FaceRounds(values, joints, masses, columns, rounds, lp_solves, read_off)
