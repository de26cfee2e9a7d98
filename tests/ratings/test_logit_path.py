"""The logit-branch tracer against pygambit's path follower, which it replaces (and falls back on)."""

import numpy as np
import pytest

import metaeval
from metaeval.ratings import logit
from metaeval.ratings.logit import TRACE_REGRET, max_regret, trace_logit_branch
from metaeval.ratings.nash import well_scaled
from tests import regression

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


def through_pygambit(monkeypatch):
    """Make the tracer give up, so that the rater falls back on pygambit's follower."""
    def gives_up(payoffs, target):
        raise metaeval.MetaEvalError("the logit path of this game could not be followed (step below 1e-8)")

    monkeypatch.setattr(logit, "trace_logit_branch", gives_up)


@pytest.mark.parametrize("seed, shape", GAMES)
def test_nash_ratings_do_not_depend_on_the_tracer(monkeypatch, seed, shape):
    game = metaeval.MetaGame(np.random.default_rng(seed).uniform(-1, 1, size=(len(shape), *shape)))
    rating = metaeval.rate(game, "nash")
    through_pygambit(monkeypatch)
    expected = metaeval.rate(game, "nash")
    for mine, theirs in zip(rating.ratings, expected.ratings):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)


def test_a_16_per_player_game_is_rated_as_through_pygambit(monkeypatch):
    game = metaeval.MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 16, 16, 16)))
    rating = metaeval.rate(game, "nash")
    through_pygambit(monkeypatch)
    expected = metaeval.rate(game, "nash")
    for mine, theirs in zip(rating.ratings, expected.ratings):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)
    assert rating.diagnostics["max_regret"] <= 1e-12


def test_a_meta_game_where_pygambits_follower_does_not_end():
    """pygambit's follower reaches a max regret of 1e-7 x range on this game in 0.1 s and
    then crawls without end towards 1e-8; the tracer ends at its 1e-7 point."""
    import pygambit

    game = regression.load("kuhn_3p_best_response_seed1_iteration41")
    rating = metaeval.rate(game, "nash")
    assert rating.diagnostics["max_regret"] <= 1e-12
    payoffs = well_scaled(game.payoffs)[0]
    gambit = pygambit.Game.from_arrays(*payoffs)
    profile = pygambit.nash.logit_solve(gambit, maxregret=1e-7).equilibria[0]
    for mine, player in zip(trace_logit_branch(payoffs, TRACE_REGRET), gambit.players):
        np.testing.assert_allclose(mine, [float(profile[s]) for s in player.strategies], atol=1e-6)
    for mine, expected in zip(rating.distribution, [[0.2, 0, 0, 0, 0.3, 0.2, 0.3, 0],
                                                    [0.4, 0, 0.4, 0.05, 0, 0.05, 0.05, 0.05],
                                                    [0, 0, 0, 0, 0.5, 0, 0, 0.5]]):
        np.testing.assert_allclose(mine, expected, atol=1e-12)
