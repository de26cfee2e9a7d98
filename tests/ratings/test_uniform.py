import numpy as np
import pytest

import metaeval
from metaeval import MetaEvalError
from tests.conftest import dominant_strategy_game, rock_paper_scissors


def test_uniform_is_mean_payoff(rng):
    g = metaeval.MetaGame(rng.normal(size=(3, 2, 3, 4)))
    r = metaeval.rate(g, "uniform")
    np.testing.assert_allclose(r.ratings[1], g.payoffs[1].mean(axis=(0, 2)))
    np.testing.assert_allclose(r.ratings[2], g.payoffs[2].mean(axis=(0, 1)))


def test_rps_all_equal_and_dominant_on_top():
    r = metaeval.rate(rock_paper_scissors(), "uniform")
    np.testing.assert_allclose(r.ratings[0], 0)
    r = metaeval.rate(dominant_strategy_game(), "uniform")
    assert all(np.argmax(x) == 2 for x in r.ratings)


def test_frame_and_ranking():
    r = metaeval.rate(dominant_strategy_game(), "uniform")
    frame = r.to_frame()
    assert list(frame.columns) == ["player", "strategy", "rating", "rank"]
    assert len(frame) == 6 and frame.loc[frame.strategy == "p0s2", "rank"].item() == 1
    assert r.ranking(0)[0] == "p0s2"


def test_unknown_rater_and_option():
    with pytest.raises(MetaEvalError, match="unknown rater 'best'"):
        metaeval.rate(rock_paper_scissors(), "best")
    with pytest.raises(MetaEvalError, match="has no option"):
        metaeval.rate(rock_paper_scissors(), "uniform", alpha=3)
    with pytest.raises(MetaEvalError, match="needs a MetaGame"):
        metaeval.rate(np.zeros((2, 2, 2)), "uniform")
