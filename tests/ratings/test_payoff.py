import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaEvalError
from metaeval.solvers.equilibria import cce_constraints, deviation_gains, mecce
from metaeval.ratings.payoff import payoff
from tests.conftest import dominant_strategy_game, random_games, rock_paper_scissors


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)))
def test_ratings_are_gains_against_the_mecce(game):
    rating = metaeval.rate(game, "payoff")
    np.testing.assert_allclose(rating.distribution, mecce(game), atol=1e-12)
    for p, gains in enumerate(deviation_gains(game, rating.distribution)):
        np.testing.assert_allclose(rating.ratings[p], gains, atol=1e-12)
    # A CCE: no deviation gains more than 1e-7; bounded below like every deviation gain.
    assert rating.diagnostics["cce_violation"] <= 1e-7
    lowest = np.split(cce_constraints(game).min(axis=1), np.cumsum(game.shape)[:-1])
    for p in range(game.num_players):
        assert np.all(rating.ratings[p] <= 1e-7) and np.all(rating.ratings[p] >= lowest[p] - 1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.booleans(), st.floats(-5, 5), st.integers(0, 2**32 - 1))
def test_constant_sum_mecce_is_the_product_of_maximum_entropy_minimax_strategies(rows, columns, integer, total,
                                                                                   seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(-3, 4, size=(rows, columns)).astype(float) if integer else rng.uniform(-1, 1, (rows, columns))
    game = metaeval.MetaGame.from_matrix(scores, total - scores)
    split = metaeval.rate(game, "payoff")
    stored = metaeval.rate(game, "payoff", implicit=False)
    assert ("solver" in split.diagnostics) == (np.ptp(scores) > 0) and "solver" not in stored.diagnostics
    np.testing.assert_allclose(split.distribution, stored.distribution, rtol=0, atol=1e-8)
    for a, b in zip(split.ratings, stored.ratings):
        np.testing.assert_allclose(a, b, rtol=0, atol=10 * split.tolerance)
    assert split.diagnostics["kkt_residual"] <= 1e-9 and split.diagnostics["cce_violation"] <= 1e-9


def test_large_noisy_zero_sum_game_needs_no_cce_matrix(monkeypatch):
    """A noisy zero-sum game (like a sampled league's meta-game): the MECCE leaves joints
    out, so the implicit path would fall back to the stored CCE matrix (300 x 22,500 here);
    the minimax strategies need only the 150 x 150 payoffs."""
    game = metaeval.MetaGame.from_matrix(np.random.default_rng(5).normal(size=(150, 150)))
    monkeypatch.setenv("METAEVAL_MAX_MEMORY", "64M")  # below 8 copies of 300 x 22,500 floats
    rating = metaeval.rate(game, "payoff")
    assert rating.diagnostics["solver"] == "maximum-entropy minimax strategies (constant-sum)"
    for p, gains in enumerate(deviation_gains(game, rating.distribution)):
        np.testing.assert_allclose(rating.ratings[p], gains, atol=1e-12)
        assert 30 < np.count_nonzero(rating.distribution.sum(axis=1 - p)) < 150
    assert rating.diagnostics["cce_violation"] <= 1e-9


def test_rock_paper_scissors_all_equal():
    rating = metaeval.rate(rock_paper_scissors(), "payoff")
    for r in rating.ratings:
        np.testing.assert_allclose(r, 0.0, atol=1e-12)
    assert rating.diagnostics["entropy"] == pytest.approx(np.log(9))


def test_dominant_strategy_rated_top():
    rating = metaeval.rate(dominant_strategy_game(), "payoff")
    for r in rating.ratings:
        assert np.argmax(r) == 2 and np.all(r[2] > np.delete(r, 2) + 1e-6)


def test_diagnostics():
    rating = metaeval.rate(metaeval.MetaGame(np.random.default_rng(2).normal(size=(3, 3, 4, 2))), "payoff")
    assert rating.diagnostics["newton_steps"] >= 1
    assert 0 < rating.diagnostics["entropy"] <= np.log(24)


def test_bad_input():
    with pytest.raises(MetaEvalError, match="payoff ratings need a MetaGame"):
        payoff(np.zeros((2, 2, 2)))
    with pytest.raises(MetaEvalError, match="has no option"):
        metaeval.rate(rock_paper_scissors(), "payoff", temperature=1.0)
