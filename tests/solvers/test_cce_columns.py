"""The CCE matrix implicit in a game: its contractions equal the stored matrix's, and the
maximum-entropy dual solved through them gives the MECCE of the stored matrix."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaGame
from metaeval.errors import MetaEvalError
from metaeval.solvers.cce_columns import GameColumns
from metaeval.solvers.equilibria import cce_constraints
from metaeval.solvers.mecce import FAILURE_TOLERANCE, max_entropy, max_entropy_implicit
from tests.conftest import random_games

from bench import scale


@st.composite
def scaled_games(draw):
    """Random games of 2 to 4 players (1 to 4 strategies), uniform or small-integer
    payoffs, some nearly tied (a strategy copied with a 1e-9 shift), scaled by 1e-6 to 1e6."""
    game = draw(random_games(players=(2, 3, 4), strategies=(1, 4), integer=draw(st.booleans())))
    payoffs = game.payoffs.copy()
    if draw(st.booleans()) and game.shape[0] > 1:
        payoffs[:, 1] = payoffs[:, 0] + 1e-9  # player 0's strategy 1 nearly ties strategy 0
    return MetaGame(payoffs * 10.0 ** draw(st.sampled_from([-6, 0, 6])))


@settings(max_examples=40, deadline=None)
@given(scaled_games(), st.integers(0, 2**31 - 1))
def test_contractions_equal_the_stored_matrix(game, seed):
    source = GameColumns(game)
    matrix = cce_constraints(game) / source.scale
    sigma = np.random.default_rng(seed).dirichlet(np.ones(game.num_joints))
    np.testing.assert_allclose(source.gains(sigma), matrix @ sigma, rtol=0, atol=1e-13)
    exact = (matrix * sigma) @ matrix.T
    np.testing.assert_allclose(source.second_moments(sigma, dtype=np.float64), exact, rtol=0, atol=1e-13)
    np.testing.assert_allclose(source.second_moments(sigma), exact, rtol=0, atol=1e-5)  # float32
    free = np.arange(source.num_rows) % 2 == 0
    np.testing.assert_allclose(source.covariance(sigma, free),
                               exact[np.ix_(free, free)] - np.outer(matrix[free] @ sigma, matrix[free] @ sigma),
                               rtol=0, atol=1e-13)
    centred = matrix - matrix.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(source.gram(), centred @ centred.T, rtol=0, atol=1e-12 * game.num_joints)


def _same_mecce(game, implicit, dense):
    np.testing.assert_allclose(implicit.distribution, dense.distribution, rtol=0, atol=1e-8)
    tolerance = FAILURE_TOLERANCE * game.payoff_range()
    for a, b in zip(implicit.ratings, dense.ratings):
        np.testing.assert_allclose(a, b, rtol=0, atol=10 * tolerance)


@settings(max_examples=40, deadline=None)
@given(scaled_games())
def test_implicit_mecce_is_the_stored_matrix_mecce(game):
    implicit = metaeval.rate(game, "payoff", implicit=True)
    dense = metaeval.rate(game, "payoff", implicit=False)
    _same_mecce(game, implicit, dense)
    assert implicit.diagnostics["kkt_residual"] <= FAILURE_TOLERANCE


@pytest.mark.parametrize("shape", [(3, 12, 12, 12), (4, 7, 7, 7, 7), (5, 4, 4, 4, 4, 4), (2, 60, 70)])
def test_implicit_mecce_of_larger_games(shape):
    """Above NEWTON_FIRST_JOINTS joints the implicit path is the default; same MECCE."""
    game = MetaGame(np.random.default_rng(sum(shape)).uniform(-1, 1, size=shape))
    implicit = metaeval.rate(game, "payoff")
    assert implicit.diagnostics["safeguard_dense_fallbacks"] == 0
    _same_mecce(game, implicit, metaeval.rate(game, "payoff", implicit=False))


def test_joints_outside_the_support_fall_back_to_the_stored_matrix():
    """Every CCE of the dominated game plays only the 8 joints of the copies: Newton on
    every joint cannot reach a positive KKT point, so the stored matrix's LPs decide."""
    game = scale.dominated_game(16, 4, copies=2)
    implicit = metaeval.rate(game, "payoff")
    assert implicit.diagnostics["safeguard_dense_fallbacks"] == 1
    assert np.count_nonzero(implicit.distribution) == 8
    _same_mecce(game, implicit, metaeval.rate(game, "payoff", implicit=False))


def test_fallback_beyond_the_memory_budget_is_refused(monkeypatch):
    """The implicit path needs no CCE matrix; its fallback does, and the budget refuses
    it in one line."""
    game = scale.dominated_game(16, 4, copies=2)
    monkeypatch.setenv("METAEVAL_MAX_MEMORY", "1M")
    with pytest.raises(MetaEvalError, match="its stored 48 x 4096 constraint matrix .* over the memory budget"):
        max_entropy_implicit(GameColumns(game), lambda: cce_constraints(game))
    # The copies the solve makes count: a budget that holds the matrix once refuses too.
    monkeypatch.setenv("METAEVAL_MAX_MEMORY", str(2 * 48 * 4096 * 8))
    with pytest.raises(MetaEvalError, match="8 copies of it at once.* over the memory budget"):
        metaeval.rate(game, "payoff")
    random = MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 16, 16, 16)))
    assert metaeval.rate(random, "payoff").diagnostics["safeguard_dense_fallbacks"] == 0


def test_implicit_equals_max_entropy_of_the_matrix():
    game = MetaGame(np.random.default_rng(7).uniform(-1, 1, size=(3, 5, 6, 4)))
    source = GameColumns(game)
    implicit = max_entropy_implicit(source, lambda: cce_constraints(game))
    dense = max_entropy(cce_constraints(game))
    np.testing.assert_allclose(implicit.distribution, dense.distribution, rtol=0, atol=1e-12)
    assert implicit.dual_bound == pytest.approx(dense.dual_bound, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(scaled_games())
def test_deviation_by_pricing_the_payoffs_is_the_full_lp(game):
    """Column generation priced by contractions of the (centred) payoffs gives the
    ratings of the LPs over every joint of the reduced system, to the raters' tolerance."""
    generated = metaeval.rate(game, "deviation", column_generation=True)
    full = metaeval.rate(game, "deviation", column_generation=False)
    for a, b in zip(generated.ratings, full.ratings):
        np.testing.assert_allclose(a, b, rtol=0, atol=max(generated.tolerance, full.tolerance))
    assert generated.diagnostics["max_violation"] <= generated.tolerance


def test_price_into_a_kept_array():
    game = MetaGame(np.random.default_rng(2).uniform(-1, 1, size=(3, 4, 5, 3)))
    source = GameColumns(game)
    matrix = cce_constraints(game) / source.scale
    out = np.full(game.num_joints, np.nan)
    for seed in range(2):  # the second call reuses the scratch array
        y = np.random.default_rng(seed).standard_normal(source.num_rows)
        assert source.price(y, out=out) is not None
        np.testing.assert_allclose(out, y @ matrix, rtol=0, atol=1e-13)
