import importlib

import numpy as np
import pyspiel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python.algorithms import nash_averaging

import metaeval
from metaeval import MetaEvalError
from metaeval.ratings.logit import max_regret
from metaeval.ratings.base import marginals
from metaeval.ratings.nash_zero_sum import max_entropy_nash
from tests.conftest import dominant_strategy_game, random_games, rock_paper_scissors


def entropy(p):
    p = p[p > 1e-15]
    return float(-(p * np.log(p)).sum())


def antisymmetric(seed, k):
    row = np.random.default_rng(seed).uniform(-1, 1, (k, k))
    return row - row.T


@pytest.mark.parametrize("seed, k", [(0, 3), (1, 5), (2, 7), (3, 9)])
def test_agent_vs_agent_matches_openspiel(seed, k):
    row = antisymmetric(seed, k)
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(row), "nash")
    _, scores = nash_averaging.nash_averaging(pyspiel.create_matrix_game(row, -row))
    np.testing.assert_allclose(rating.ratings[0], scores.ravel(), atol=1e-6)  # value 0
    np.testing.assert_allclose(rating.ratings[1], scores.ravel(), atol=1e-6)


@pytest.mark.parametrize("seed, agents, tasks", [(0, 4, 3), (1, 6, 5), (2, 3, 8)])
def test_agent_vs_task_matches_openspiel(seed, agents, tasks):
    scores = np.random.default_rng(seed).uniform(0, 1, (agents, tasks))
    scores = (scores - scores.min(0)) / (scores.max(0) - scores.min(0))  # OpenSpiel's normalisation
    (x, y), (agent_scores, task_scores) = nash_averaging.nash_averaging_avt_matrix(scores)
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(scores), "nash")
    value = rating.diagnostics["value"]
    # OpenSpiel reports payoffs against the equilibrium; ours subtract the value.
    np.testing.assert_allclose(rating.ratings[0], agent_scores.ravel() - value, atol=1e-6)
    np.testing.assert_allclose(rating.ratings[1], task_scores.ravel() + value, atol=1e-6)
    # OpenSpiel's interior-point strategies are only ~1e-5 accurate (entropy is flat at
    # its maximum); the ratings above are far less sensitive to that.
    np.testing.assert_allclose(marginals(rating.distribution)[0], x.ravel(), atol=1e-4)
    np.testing.assert_allclose(marginals(rating.distribution)[1], y.ravel(), atol=1e-4)


def test_degenerate_game_gives_the_exact_maximiser():
    """Integer payoffs leave a face of equilibria and entropy is flat at its maximum, so
    interior-point answers (OpenSpiel's included) are off by ~1e-5 here; the dual Newton
    method on the face's largest support gives x = y = (1/2, 0, 0, 1/2, 0, 0, 0)."""
    row = np.array(
        [[0, -1, 0, 0, 1, 0, 1], [1, 0, 0, -1, 0, -2, 1], [0, 0, 0, -1, 0, -2, -2],
         [0, 1, 1, 0, 2, 1, 1], [-1, 0, 0, -2, 0, 0, -1], [0, 2, 2, -1, 0, 0, 1],
         [-1, -1, 2, -1, 1, -1, 0]], dtype=float,
    )
    x, y, value = max_entropy_nash(row)
    np.testing.assert_allclose(x, [0.5, 0, 0, 0.5, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(y, x, atol=1e-12)
    assert value == pytest.approx(0.0, abs=1e-12)
    assert max_regret(np.stack([row, -row]), [x, y]) < 1e-12


def test_clone_invariance_needs_a_unique_equilibrium():
    """Splitting mass over a clone adds x_i log 2 to the entropy, so when a player's
    equilibria form a face the clone tilts the maximiser, and the opponent's ratings move.
    Here every column is optimal; cloning column 0 moves y from (1/2, 1/2) to thirds."""
    game = metaeval.MetaGame.from_matrix([[0.0, 0.0], [0.0, -4.0]])
    np.testing.assert_allclose(metaeval.rate(game, "nash").ratings[0], [0.0, -2.0], atol=1e-9)
    cloned = metaeval.rate(game.add_clone(1, 0), "nash")
    np.testing.assert_allclose(cloned.ratings[0], [0.0, -4.0 / 3.0], atol=1e-9)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(game=random_games(players=(2,), strategies=(2, 5)), data=st.data())
def test_zero_sum_clone_invariance(game, data):
    """Continuous random payoffs: the equilibrium is unique (almost surely)."""
    zero_sum = metaeval.MetaGame.from_matrix(game.payoffs[0])
    player = data.draw(st.integers(0, 1))
    index = data.draw(st.integers(0, zero_sum.shape[player] - 1))
    before = metaeval.rate(zero_sum, "nash")
    after = metaeval.rate(zero_sum.add_clone(player, index), "nash")
    for p in range(2):
        np.testing.assert_allclose(after.ratings[p][: zero_sum.shape[p]], before.ratings[p], atol=1e-7)
    np.testing.assert_allclose(after.ratings[player][-1], before.ratings[player][index], atol=1e-7)
    # the clone shares its original's mass equally
    np.testing.assert_allclose(
        marginals(after.distribution)[player][-1], marginals(after.distribution)[player][index], atol=1e-6
    )


@settings(max_examples=15, deadline=None, derandomize=True)
@given(game=random_games(players=(2, 3), strategies=(2, 5)))
def test_limiting_logit_equilibrium_regret_below_1e6(game):
    rating = metaeval.rate(game, "nash")
    assert rating.diagnostics["equilibrium"] == "limiting logit equilibrium"
    assert rating.diagnostics["max_regret"] < 1e-6
    assert max(r.max() for r in rating.ratings) < 1e-6  # nobody gains by deviating
    for x in marginals(rating.distribution):
        assert np.all(x >= 0) and x.sum() == pytest.approx(1.0)


def test_unique_mixed_equilibrium_closed_form():
    # Row indifferent when 2q = 1 - q (q = 1/3); column indifferent when 1 - p = p (p = 1/2).
    game = metaeval.MetaGame.from_matrix([[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]])
    rating = metaeval.rate(game, "nash")
    np.testing.assert_allclose(marginals(rating.distribution)[0], [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(marginals(rating.distribution)[1], [1 / 3, 2 / 3], atol=1e-12)
    np.testing.assert_allclose(rating.ratings[0], [0.0, 0.0], atol=1e-12)


def test_rock_paper_scissors_and_dominant_strategy():
    rating = metaeval.rate(rock_paper_scissors(), "nash")
    for r in rating.ratings:
        np.testing.assert_allclose(r, 0.0, atol=1e-9)
    assert rating.diagnostics["value"] == pytest.approx(0.0, abs=1e-12)
    rating = metaeval.rate(dominant_strategy_game(), "nash")
    for r in rating.ratings:
        assert np.argmax(r) == 2 and r[2] == pytest.approx(0.0, abs=1e-12)
        assert np.all(r[:2] < -0.5)


def test_three_player_zero_sum_uses_logit_and_is_deterministic():
    payoffs = np.random.default_rng(4).uniform(-1, 1, (3, 3, 3, 3))
    payoffs[2] = -payoffs[0] - payoffs[1]
    game = metaeval.MetaGame(payoffs)
    first, second = metaeval.rate(game, "nash"), metaeval.rate(game, "nash")
    assert first.diagnostics["equilibrium"] == "limiting logit equilibrium"
    for a, b in zip(first.ratings, second.ratings):
        np.testing.assert_array_equal(a, b)


def test_bad_input():
    with pytest.raises(MetaEvalError, match="at least 2 players"):
        metaeval.rate(metaeval.MetaGame(np.zeros((1, 3))), "nash")
    with pytest.raises(MetaEvalError, match="has no option"):
        metaeval.rate(rock_paper_scissors(), "nash", alpha=1)
    from metaeval.ratings.nash import nash

    with pytest.raises(MetaEvalError, match="needs a MetaGame"):
        nash(np.zeros((2, 2, 2)))


def test_an_equilibrium_with_large_regret_is_refused(monkeypatch):
    nash_module = importlib.import_module("metaeval.ratings.nash")

    game = metaeval.MetaGame.from_matrix([[3.0, 0.0], [5.0, 1.0]], [[3.0, 5.0], [0.0, 1.0]])
    uniform = [np.full(2, 0.5), np.full(2, 0.5)]
    monkeypatch.setattr(nash_module, "limiting_logit_equilibrium", lambda payoffs: uniform)
    with pytest.raises(MetaEvalError, match="max regret 0.75"):
        metaeval.rate(game, "nash")


def test_a_game_where_the_interior_point_solver_is_inaccurate():
    """From the stress corpus: Clarabel ends 'optimal_inaccurate' on this zero-sum game;
    the maximiser has rows 0 and 4, copies, sharing 0.4."""
    row = np.array([[-1, 2], [0, 0], [1, -2], [1, -2], [-1, 2], [2, 0], [0, 0], [0, -1]], dtype=float)
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(row), "nash")
    np.testing.assert_allclose(marginals(rating.distribution)[0], [0.2, 0, 0, 0, 0.2, 0.6, 0, 0], atol=1e-9)
    np.testing.assert_allclose(marginals(rating.distribution)[1], [0.4, 0.6], atol=1e-9)
    assert rating.diagnostics["max_regret"] < 1e-9
