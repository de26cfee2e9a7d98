"""The first LP of Algorithm 1 over working rows and joints equals the LP over all of them."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings

import metaeval
from metaeval.data.simulated import simulated_judge
from metaeval.solvers.cce_columns import GameColumns
from tests.conftest import random_games
from tests.solvers.test_matrix_game import game_value

deviation_module = importlib.import_module("metaeval.ratings.deviation")  # the name is the rater's


def full_first_lp(source):
    """min t s.t. A sigma <= t over every row and joint: the value of the matrix game over them."""
    return game_value(source.columns(np.arange(source.num_columns)))


def first_round(game):
    source = GameColumns(game)
    pricer = deviation_module._Pricer(source)
    return source, *deviation_module._first_round(source, np.array([source.least_tempted_joint()]), pricer)


@settings(max_examples=30, deadline=None)
@given(random_games(players=(2, 3), strategies=(2, 5)) | random_games(players=(2, 3), strategies=(2, 4), integer=True))
def test_first_round_is_the_full_lp(game):
    source, result, model, _ = first_round(game)
    assert abs(result.t - full_first_lp(source)) <= 1e-9
    assert np.all(model.matrix @ result.masses <= result.t + 1e-9)  # every row, not only R's


def test_king_of_the_hill_needs_few_rows_and_joints():
    game = simulated_judge(16, 60, seed=1)
    source, result, model, priced = first_round(game)
    assert abs(result.t - full_first_lp(source)) <= 1e-9
    assert len(model.rows) < source.num_rows and len(model.joints) < source.num_columns / 10
    assert priced == len(model.joints) - 1


@settings(max_examples=30, deadline=None)
@given(random_games(players=(2, 3), strategies=(2, 5)) | random_games(players=(2, 3), strategies=(2, 4), integer=True))
def test_first_round_grown_from_interior_points_is_the_full_lp(game):
    """The working sets grown from interior points (used above INTERIOR_POINT_ROWS rows,
    here on every game) still end at the full LP's optimum, proved by the simplex."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(deviation_module, "INTERIOR_POINT_ROWS", 0)
        source, result, model, _ = first_round(game)
    assert abs(result.t - full_first_lp(source)) <= 1e-9
    assert np.all(model.matrix @ result.masses <= result.t + 1e-9)


def test_interior_points_spare_the_simplex_its_pivots():
    """At 3 x 24 the simplex re-solves take hundreds of pivots; from the basis the last
    interior point names, the simplex proves the optimum in a handful."""
    game = metaeval.MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 24, 24, 24)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(deviation_module, "INTERIOR_POINT_ROWS", 0)
        source, grown, grown_model, _ = first_round(game)
    _, simplex, simplex_model, _ = first_round(game)
    assert abs(grown.t - simplex.t) <= 1e-12
    assert simplex_model.iterations > 200 and grown_model.iterations < 20
