"""Rating.distribution has one type: a NumPy array of the game's shape, or None."""

import numpy as np
import pytest

import metaeval
from metaeval.ratings.base import Rating, marginals

WINS = np.array([[0.5, 0.7, 0.2], [0.3, 0.5, 0.6], [0.8, 0.4, 0.5]])


@pytest.mark.parametrize("method", sorted(metaeval.RATERS))
def test_every_raters_distribution_is_a_joint_array_or_none(method):
    game = metaeval.MetaGame.from_matrix(WINS, WINS.T)  # symmetric win probabilities: every rater applies
    sigma = metaeval.rate(game, method).distribution
    if sigma is not None:
        assert isinstance(sigma, np.ndarray) and sigma.shape == game.shape
        assert np.all(sigma >= -1e-12) and sigma.sum() == pytest.approx(1.0)


def test_per_player_mixtures_are_kept_as_their_product():
    rps = metaeval.MetaGame.from_matrix([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    sigma = metaeval.rate(rps, "nash").distribution
    np.testing.assert_allclose(sigma, np.full((3, 3), 1 / 9), atol=1e-9)
    np.testing.assert_allclose(marginals(sigma)[0], [1 / 3] * 3, atol=1e-9)


def test_a_rating_refuses_a_distribution_of_another_type():
    game = metaeval.MetaGame.from_matrix([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(metaeval.MetaEvalError, match="array of the game's shape"):
        Rating("nash", game, [np.zeros(2), np.zeros(2)], [np.full(2, 0.5), np.full(2, 0.5)])
