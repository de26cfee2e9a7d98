"""Algorithm 1's later rounds on the first round's optimal face give the warm rounds' ratings."""

import importlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval.data.simulated import simulated_judge
from tests.conftest import random_games
from tests.ratings.test_deviation import assert_ratings_close

deviation_module = importlib.import_module("metaeval.ratings.deviation")  # the name is the rater's


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)))
def test_face_rounds_agree_with_warm_rounds(game):
    on_face = metaeval.rate(game, "deviation")
    with_face = on_face.diagnostics
    deviation_module.FACE_JOINTS, kept = 0, deviation_module.FACE_JOINTS
    try:
        warm = metaeval.rate(game, "deviation")
    finally:
        deviation_module.FACE_JOINTS = kept
    assert warm.diagnostics["face_rounds"] == 0 and warm.diagnostics["read_off"] == 0
    assert_ratings_close(on_face.ratings, warm.ratings, atol=max(1e-8, 2 * warm.diagnostics["max_violation"]))
    assert with_face["rounds"] <= warm.diagnostics["rounds"]


def test_a_point_face_is_read_off(monkeypatch):
    """8 x 8 x 20 king of the hill: the first LP's optimum is the only point of its face,
    every gain not frozen by it is read there (no further LP), and they are the ratings
    the warm rounds reach one round at a time."""
    game = simulated_judge(8, 20, seed=0)
    rating = metaeval.rate(game, "deviation", column_generation=True)
    d = rating.diagnostics
    assert d["rounds"] == 1 and d["face_rounds"] == 0 and d["read_off"] > 0
    monkeypatch.setattr(deviation_module, "FACE_JOINTS", 0)
    warm = metaeval.rate(game, "deviation", column_generation=True)
    assert warm.diagnostics["rounds"] > d["read_off"] / 2
    assert_ratings_close(rating.ratings, warm.ratings, atol=max(1e-9, 2 * warm.diagnostics["max_violation"]))
