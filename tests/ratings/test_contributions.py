import numpy as np
import pandas as pd
import pytest

import metaeval
from metaeval.ratings.base import marginals
from metaeval import MetaEvalError, data
from metaeval.ratings.contributions import contribution_frame, contributions
from metaeval.ratings.logit import payoff_against

TABLE = pd.DataFrame(np.random.default_rng(5).uniform(size=(5, 6)), index=list("abcde"))


def test_per_task_contributions_of_the_deviation_rating_follow_spec_6():
    game = data.agent_vs_agent_vs_task(TABLE)
    rating = metaeval.rate(game, "deviation")
    values = contributions(rating)
    sigma, g_a = rating.distribution, game.payoffs[0]
    for m, t in np.ndindex(values.shape):
        by_hand = sum(sigma[a, b, t] * (g_a[m, b, t] - g_a[a, b, t]) for a in range(5) for b in range(5))
        assert values[m, t] == pytest.approx(by_hand, abs=1e-14)
    np.testing.assert_allclose(values.sum(axis=1), rating.ratings[0], rtol=0, atol=1e-9)
    frame = contribution_frame(rating)
    assert list(frame.columns) == ["strategy", "task", "contribution", "rating"] and len(frame) == 30


@pytest.mark.parametrize("method", ["payoff", "nash"])
def test_contributions_sum_to_the_rating_for_every_opponent(method):
    game = metaeval.MetaGame(np.random.default_rng(2).normal(size=(3, 3, 4, 2)))
    rating = metaeval.rate(game, method)
    for player in range(3):
        for opponent in set(range(3)) - {player}:
            values = contributions(rating, player, opponent)
            assert values.shape == (game.shape[player], game.shape[opponent])
            np.testing.assert_allclose(values.sum(axis=1), rating.ratings[player], rtol=0, atol=1e-9)


def test_product_form_is_the_corrected_formula_of_the_reevaluating_paper():
    """x_q(c) [u_p(a', c, x_-pq) - u_p(c, x_-q)] (the paper prints the opposite sign)."""
    game = metaeval.MetaGame(np.random.default_rng(3).normal(size=(3, 3, 3, 3)))
    rating = metaeval.rate(game, "nash")
    x = marginals(rating.distribution)
    values = contributions(rating, player=0, opponent=1)
    for c in range(3):
        pinned = [x[0], np.eye(3)[c], x[2]]
        deviate = payoff_against(game.payoffs, pinned, 0)
        expected = x[1][c] * (deviate - deviate @ x[0])
        np.testing.assert_allclose(values[:, c], expected, atol=1e-12)


def test_only_equilibrium_ratings_have_contributions():
    game = data.agent_vs_task(TABLE)
    with pytest.raises(MetaEvalError, match="not for 'uniform'"):
        contributions(metaeval.rate(game, "uniform"))
    with pytest.raises(MetaEvalError, match="two different players"):
        contributions(metaeval.rate(game, "deviation"), player=1, opponent=1)
