import numpy as np
import pytest

import metaeval
from metaeval import MetaEvalError
from metaeval.ratings.elo import bradley_terry


def win_probability_game(ratings, counts=None):
    ratings = np.asarray(ratings, dtype=float)
    p = 1 / (1 + 10 ** ((ratings[None, :] - ratings[:, None]) / 400))
    return metaeval.MetaGame.from_matrix(p, p.T, counts=counts)


@pytest.mark.parametrize("p", [0.5, 0.64, 0.9, 0.999])
def test_two_player_closed_form(p):
    ratings = bradley_terry([[0, p], [1 - p, 0]])
    assert ratings[0] - ratings[1] == pytest.approx(400 * np.log10(p / (1 - p)), abs=1e-7)
    assert ratings.sum() == pytest.approx(0.0, abs=1e-9)  # gauge: mean 0


def test_recovers_known_ratings_with_and_without_counts():
    truth = np.array([0.0, 120.0, -250.0, 400.0, 35.0])
    truth -= truth.mean()
    counts = np.random.default_rng(0).integers(1, 50, size=(5, 5)).astype(float)
    for game in (win_probability_game(truth), win_probability_game(truth, counts)):
        rating = metaeval.rate(game, "elo")
        np.testing.assert_allclose(rating.ratings[0], truth, atol=1e-6)
        np.testing.assert_array_equal(rating.ratings[0], rating.ratings[1])
        assert rating.diagnostics["gauge"] == "mean 0"


def test_counts_weight_the_games():
    # Inconsistent probabilities: the fit depends on how many games each pair played.
    p = np.array([[0.5, 0.7, 0.2], [0.3, 0.5, 0.6], [0.8, 0.4, 0.5]])
    counts = np.array([[0, 10, 1], [3, 0, 40], [2, 5, 0]], dtype=float)
    game = metaeval.MetaGame.from_matrix(p, p.T, counts=counts)
    expected = bradley_terry((counts + counts.T) * p)
    np.testing.assert_allclose(metaeval.rate(game, "elo").ratings[0], expected, atol=1e-9)
    assert np.abs(expected - metaeval.rate(metaeval.MetaGame.from_matrix(p, p.T), "elo").ratings[0]).max() > 1


def test_mle_gradient_is_zero():
    wins = np.random.default_rng(1).uniform(0, 5, (6, 6))
    theta = bradley_terry(wins) * np.log(10) / 400
    expected = (wins + wins.T) / (1 + np.exp(theta[None, :] - theta[:, None]))
    np.fill_diagonal(expected, 0)
    np.fill_diagonal(wins, 0)
    np.testing.assert_allclose(wins.sum(axis=1), expected.sum(axis=1), atol=1e-8)


def test_rock_paper_scissors_equal_and_dominant_on_top():
    rps = np.array([[0.5, 0.0, 1.0], [1.0, 0.5, 0.0], [0.0, 1.0, 0.5]])
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(rps, rps.T), "elo")
    np.testing.assert_allclose(rating.ratings[0], 0.0, atol=1e-7)
    dominant = np.array([[0.5, 0.3, 0.45], [0.7, 0.5, 0.8], [0.55, 0.2, 0.5]])
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(dominant, dominant.T), "elo")
    assert np.argmax(rating.ratings[0]) == 1


def test_never_losing_needs_a_prior():
    p = np.array([[0.5, 1.0, 1.0], [0.0, 0.5, 0.6], [0.0, 0.4, 0.5]])
    game = metaeval.MetaGame.from_matrix(p, p.T)
    with pytest.raises(MetaEvalError, match="never lose"):
        metaeval.rate(game, "elo")
    rating = metaeval.rate(game, "elo", prior=1.0)
    assert np.all(np.isfinite(rating.ratings[0])) and np.argmax(rating.ratings[0]) == 0


def test_bad_games():
    with pytest.raises(MetaEvalError, match="symmetric 2-player"):
        metaeval.rate(metaeval.MetaGame(np.full((3, 2, 2, 2), 0.5)), "elo")
    with pytest.raises(MetaEvalError, match="symmetric 2-player"):
        metaeval.rate(metaeval.MetaGame(np.full((2, 2, 3), 0.5)), "elo")
    with pytest.raises(MetaEvalError, match="G_0 transposed"):
        metaeval.rate(metaeval.MetaGame.from_matrix([[0.5, 0.3], [0.7, 0.5]]), "elo")
    with pytest.raises(MetaEvalError, match="lie in \\[0, 1\\]"):
        bad = np.array([[0.5, 1.5], [-0.5, 0.5]])
        metaeval.rate(metaeval.MetaGame.from_matrix(bad, bad.T), "elo")
    with pytest.raises(MetaEvalError, match="must be 1"):
        bad = np.array([[0.5, 0.3], [0.3, 0.5]])
        metaeval.rate(metaeval.MetaGame.from_matrix(bad, bad.T), "elo")


def test_bad_wins():
    with pytest.raises(MetaEvalError, match="square"):
        bradley_terry(np.ones((2, 3)))
    with pytest.raises(MetaEvalError, match="non-negative"):
        bradley_terry([[0, -1], [1, 0]])
    with pytest.raises(MetaEvalError, match="prior"):
        bradley_terry([[0, 1], [1, 0]], prior=-1)
    np.testing.assert_array_equal(bradley_terry([[3.0]]), [0.0])
