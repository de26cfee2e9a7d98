"""Deviation ratings of king-of-the-hill games (Liu et al. 2025) of a simulated judge.

After the first LP of Algorithm 1 their optimal face is small and most gains are
constant on it; the later rounds run there (metaeval.solvers.cce_face). Solved as LPs
over the simplex, those rounds had a feasible set without interior, pinned by frozen
bounds carrying the earlier rounds' rounding, and at 64 x 64 x 100 HiGHS reported one
infeasible even afresh at a tolerance of 1e-7.
"""

import importlib

import numpy as np
import pytest

import metaeval
from metaeval.data.simulated import copy_prompts, simulated_judge
from metaeval.solvers.equilibria import deviation_gains
from tests.ratings.test_deviation import assert_ratings_close, rated, reference_ratings, safeguards_fired

deviation_module = importlib.import_module("metaeval.ratings.deviation")  # the name is the rater's


def checked(game):
    """Deviation ratings, after checking they are the gains of the returned CCE to 1e-12 of
    the payoff range (without the CCE matrix, too big for these games)."""
    rating = metaeval.rate(game, "deviation")
    assert rating.distribution.min() >= 0 and rating.distribution.sum() == pytest.approx(1, abs=1e-12)
    gains = deviation_gains(game, rating.distribution)
    assert_ratings_close(rating.ratings, gains, atol=1e-12 * game.payoff_range())
    return rating


def test_64_models_100_prompts_regression():
    """The game of the failure: rated, with no safeguard, to rounding."""
    game = simulated_judge(64, 100, seed=0)
    d = checked(game).diagnostics
    assert d["column_generation"] and safeguards_fired(d) == 0
    assert d["face_rounds"] >= 1 and d["read_off"] > 0  # the face is not one point here


def test_safeguards_no_longer_fire_on_moderate_games():
    """24 x 24 x 30, seed 3: every round in the warm model needed cold re-solves and
    looser tolerances, leaving ratings accurate to 2.4e-8 only."""
    game = simulated_judge(24, 30, seed=3)
    assert safeguards_fired(checked(game).diagnostics) == 0


@pytest.mark.parametrize("models, prompts, seed", [(4, 10, 0), (4, 10, 2), (5, 12, 0), (6, 10, 0), (6, 10, 2)])
def test_small_games_match_the_dual_free_reference(models, prompts, seed):
    game = simulated_judge(models, prompts, seed=seed)
    ratings = rated(game)
    assert_ratings_close(ratings, reference_ratings(game), atol=1e-7)
    assert_ratings_close(rated(game, column_generation=True), ratings, atol=1e-9)


@pytest.mark.parametrize("models, prompts, seed", [(8, 50, 0), (16, 30, 1), (32, 40, 2)])
def test_the_face_agrees_with_every_round_in_the_warm_model(monkeypatch, models, prompts, seed):
    """Where the warm rounds still succeed, both give the same ratings (to their accuracy)."""
    game = simulated_judge(models, prompts, seed=seed)
    on_face = checked(game).ratings
    monkeypatch.setattr(deviation_module, "FACE_JOINTS", 0)
    warm = metaeval.rate(game, "deviation")
    assert warm.diagnostics["face_rounds"] == 0
    assert_ratings_close(on_face, warm.ratings, atol=max(1e-9, 2 * warm.diagnostics["max_violation"]))


@pytest.mark.parametrize("models, prompts, seed", [(8, 20, 0), (32, 40, 1), (64, 100, 0)])
def test_prompt_copying_attack_changes_nothing(models, prompts, seed):
    """Copies of prompts (Liu et al. 2025, section 5) are clones: every original rating is
    unchanged and each copy gets its original's rating."""
    game = simulated_judge(models, prompts, seed=seed)
    top = int(np.argmax(metaeval.rate(game, "uniform").ratings[0]))
    attacked = copy_prompts(game, top, prompts // 2, 10.0, seed)
    before, rating = checked(game).ratings, checked(attacked)
    after = rating.ratings
    if rating.diagnostics["column_generation"]:  # smaller games merge duplicate joints instead
        assert rating.diagnostics["merged_copies"] == prompts // 2
    assert_ratings_close(after[:2], before[:2], atol=1e-9)
    np.testing.assert_allclose(after[2][:prompts], before[2], rtol=0, atol=1e-9)
    names = attacked.strategy_names[2]
    originals = [names.index(name.split(" (copy")[0]) for name in names[prompts:]]
    np.testing.assert_allclose(after[2][prompts:], after[2][originals], rtol=0, atol=1e-9)


def test_copies_left_unmerged_change_nothing_either():
    """Without merging copies, the attacked game's duplicate joints all sit on the optimal
    face; the ratings are the same."""
    game = copy_prompts(simulated_judge(16, 30, seed=2), 0, 15, 10.0, 2)
    merged = checked(game)
    unmerged = metaeval.rate(game, "deviation", merge_duplicates=False)
    assert unmerged.diagnostics["merged_copies"] == 0
    assert_ratings_close(unmerged.ratings, merged.ratings, atol=1e-9)
