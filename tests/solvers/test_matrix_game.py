"""The interior point of a matrix game: its value, sigma and y are the LP's optimum."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from metaeval.solvers.matrix_game import solve_matrix_game


def game_value(matrix):
    """min_sigma max_i (A sigma)_i by scipy's HiGHS."""
    rows, columns = matrix.shape
    res = linprog(np.r_[np.zeros(columns), 1.0], A_ub=np.c_[matrix, -np.ones(rows)], b_ub=np.zeros(rows),
                  A_eq=np.r_[np.ones(columns), 0.0][None], b_eq=[1.0],
                  bounds=[(0, None)] * columns + [(None, None)], method="highs")
    assert res.status == 0
    return res.fun


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 80), st.integers(0, 2**32 - 1), st.booleans())
def test_interior_point_is_optimal(rows, columns, seed, integer):
    rng = np.random.default_rng(seed)
    matrix = rng.integers(-3, 4, size=(rows, columns)) / 3.0 if integer else rng.uniform(-1, 1, size=(rows, columns))
    game = solve_matrix_game(matrix)
    assert game.converged
    assert abs(game.value - game_value(matrix)) <= 1e-8
    assert game.sigma.min() >= 0 and game.y.min() >= 0
    assert abs(game.sigma.sum() - 1) <= 1e-12 and abs(game.y.sum() - 1) <= 1e-12
    assert (matrix @ game.sigma).max() <= game.value + 1e-8  # no row gains more than the value
    assert (game.y @ matrix).min() >= game.value - 1e-8  # no joint escapes the row mixture


def test_a_stalled_interior_point_says_so():
    game = solve_matrix_game(np.random.default_rng(0).uniform(-1, 1, size=(30, 60)), max_iterations=3)
    assert not game.converged and game.sigma.min() >= 0
