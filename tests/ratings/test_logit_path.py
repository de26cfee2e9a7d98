"""The logit-branch tracer used above PATH_JOINTS joints against pygambit's, which it replaces there."""

import numpy as np
import pytest

import metaeval
from metaeval.ratings import logit
from metaeval.ratings.logit import TRACE_REGRET, max_regret, trace_logit_branch
from metaeval.ratings.nash import well_scaled

# (seed, shape): generic games, 2 to 4 players. Seeds 4 and 47 end on another branch
# unless steps whose tangent orientation flips are rejected and corrector steps are chords.
GAMES = [(1, (4, 5)), (14, (6, 6)), (2, (2, 3, 4)), (4, (4, 4, 4)), (47, (5, 5, 5)),
         (7, (5, 5, 5)), (5, (2, 2, 2, 3)), (13, (2, 2, 2, 3))]


def scaled_game(seed, shape):
    return well_scaled(np.random.default_rng(seed).uniform(-1, 1, size=(len(shape), *shape)))[0]


@pytest.mark.parametrize("seed, shape", GAMES)
def test_traced_end_point_is_pygambits(seed, shape):
    payoffs = scaled_game(seed, shape)
    ours = trace_logit_branch(payoffs, TRACE_REGRET)
    assert max_regret(payoffs, ours) <= TRACE_REGRET * np.ptp(payoffs)
    for mine, theirs in zip(ours, logit._gambit_logit(payoffs)):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)


@pytest.mark.parametrize("seed, shape", GAMES)
def test_nash_ratings_do_not_depend_on_the_tracer(monkeypatch, seed, shape):
    game = metaeval.MetaGame(np.random.default_rng(seed).uniform(-1, 1, size=(len(shape), *shape)))
    expected = metaeval.rate(game, "nash")
    monkeypatch.setattr(logit, "PATH_JOINTS", 0)
    rating = metaeval.rate(game, "nash")
    for mine, theirs in zip(rating.ratings, expected.ratings):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)


def test_a_16_per_player_game_is_traced_here_and_rated_as_through_pygambit(monkeypatch):
    game = metaeval.MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 16, 16, 16)))
    assert game.num_joints > logit.PATH_JOINTS
    rating = metaeval.rate(game, "nash")
    monkeypatch.setattr(logit, "PATH_JOINTS", game.num_joints)
    expected = metaeval.rate(game, "nash")
    for mine, theirs in zip(rating.ratings, expected.ratings):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)
    assert rating.diagnostics["max_regret"] <= 1e-12
