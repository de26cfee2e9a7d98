"""Deviation ratings by column generation: the same ratings as the LPs over every joint."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaGame
from metaeval.solvers.cce_columns import GameColumns, StoredColumns
from metaeval.solvers.equilibria import cce_constraints
from metaeval.ratings.deviation import COLUMN_GENERATION_JOINTS, strictest_cce
from tests import regression
from tests.conftest import random_games
from tests.ratings.test_deviation import assert_ratings_close, rated

deviation_module = importlib.import_module("metaeval.ratings.deviation")  # the name is the rater's


@settings(max_examples=30, deadline=None)
@given(random_games(players=(2, 3), strategies=(2, 5)), st.integers(0, 2**31 - 1))
def test_game_columns_are_the_cce_matrix(game, seed):
    """Columns and pricing computed from the payoffs equal the stored CCE matrix's."""
    source = GameColumns(game)
    matrix = cce_constraints(game) / source.scale
    rng = np.random.default_rng(seed)
    joints = rng.choice(game.num_joints, size=min(5, game.num_joints), replace=False)
    np.testing.assert_allclose(source.columns(joints), matrix[:, joints], rtol=0, atol=1e-13)
    y = rng.standard_normal(source.num_rows)
    np.testing.assert_allclose(source.price(y), y @ matrix, rtol=0, atol=1e-12)
    assert np.abs(matrix).max() == 1.0 or np.abs(matrix).max() == 0.0


@settings(max_examples=40, deadline=None)
@given(random_games(players=(2, 3, 4), strategies=(2, 4), integer=True)
       | random_games(players=(2, 3), strategies=(2, 6)))
def test_column_generation_gives_the_full_lp_ratings(game):
    generated = rated(game, column_generation=True)
    full = rated(game, column_generation=False)
    assert_ratings_close(generated, full, atol=1e-8)


@settings(max_examples=30, deadline=None)
@given(random_games(players=(2, 3), strategies=(2, 4), integer=True) | random_games(players=(2, 3), strategies=(2, 6)))
def test_interior_point_start_gives_the_full_lp_ratings(game):
    """The first LP's working sets grown from interior points (on every game here, not
    only above INTERIOR_POINT_ROWS deviations) change no rating."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(deviation_module, "INTERIOR_POINT_ROWS", 0)
        generated = rated(game, column_generation=True)
    assert_ratings_close(generated, rated(game, column_generation=False), atol=1e-8)


def test_column_generation_on_a_stored_matrix_from_one_joint():
    """strictest_cce grows any column source from a single joint to the full optimum."""
    game = MetaGame(np.random.default_rng(5).uniform(-1, 1, size=(3, 5, 5, 5)))
    matrix = cce_constraints(game) / np.abs(cce_constraints(game)).max()
    everything = strictest_cce(StoredColumns(matrix))
    grown = strictest_cce(StoredColumns(matrix), joints=[0])
    np.testing.assert_allclose(grown.values, everything.values, rtol=0, atol=1e-10)
    assert grown.priced_joints > 0 and grown.lp_joints < matrix.shape[1]


def test_regression_game_by_column_generation():
    game = regression.load("sheriff_seed4_iteration178")
    assert_ratings_close(rated(game, column_generation=True), rated(game), atol=1e-8)


def test_large_games_use_column_generation_by_default():
    k = int(np.ceil(COLUMN_GENERATION_JOINTS ** (1 / 3))) + 1
    game = MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, k, k, k)))
    rating = metaeval.rate(game, "deviation")
    d = rating.diagnostics
    assert d["column_generation"] and d["lp_columns"] < game.num_joints
    assert d["max_violation"] <= 1e-9
    small = metaeval.rate(MetaGame(game.payoffs[:, :4, :4, :4]), "deviation")
    assert not small.diagnostics["column_generation"]
