import importlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import metaeval
from metaeval import MetaGame, data
from metaeval.data.simulated import copy_prompts, simulated_judge
from metaeval.errors import MetaEvalError
from metaeval.solvers import king_of_the_hill

payoff_module = importlib.import_module("metaeval.ratings.payoff")  # the package exports the function under that name


def test_recognises_king_of_the_hill_games():
    assert king_of_the_hill.is_king_of_the_hill(simulated_judge(4, 6))
    judgements = pd.DataFrame({"prompt": ["p", "p", "p"], "model_a": ["x", "x", "y"],
                               "model_b": ["y", "z", "z"], "score": [0.5, -1.0, 0.25]})
    assert king_of_the_hill.is_king_of_the_hill(data.king_of_the_hill(judgements))
    payoffs = simulated_judge(4, 6).payoffs.copy()
    payoffs[1, 2, 2, 0] = 0.0  # the rebel no longer loses by copying the king
    assert not king_of_the_hill.is_king_of_the_hill(MetaGame(payoffs))
    assert not king_of_the_hill.is_king_of_the_hill(MetaGame(np.random.default_rng(0).normal(size=(3, 4, 4, 6))))
    assert not king_of_the_hill.is_king_of_the_hill(MetaGame(np.zeros((2, 3, 3))))


def _both_paths(monkeypatch, game, method, **options):
    monkeypatch.setattr(king_of_the_hill, "STRUCTURED_JOINTS", 0)
    structured = metaeval.rate(game, method, **options)
    monkeypatch.setattr(king_of_the_hill, "STRUCTURED_JOINTS", float("inf"))
    return structured, metaeval.rate(game, method, **options)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(models=st.integers(2, 8), prompts=st.integers(1, 40), seed=st.integers(0, 1000))
def test_structured_paths_agree_with_the_full_solvers(models, prompts, seed):
    game = simulated_judge(models, prompts, seed=seed)
    with pytest.MonkeyPatch.context() as patch:
        for method, tolerance in (("payoff", 1e-9), ("nash", 1e-8)):
            structured, full = _both_paths(patch, game, method)
            assert "eliminated" in structured.diagnostics.get("equilibrium", "") or \
                "constraint generation" in structured.diagnostics.get("solver", "") or \
                structured.diagnostics.get("safeguard_full_solver_fallbacks"), method
            for a, b in zip(structured.ratings, full.ratings):
                np.testing.assert_allclose(a, b, rtol=0, atol=tolerance, err_msg=method)


def test_where_constraint_generation_fails_the_full_solver_rates(monkeypatch):
    game = simulated_judge(5, 3, seed=0)
    reference = metaeval.rate(game, "payoff")  # below STRUCTURED_JOINTS: the general solver

    def diverges(_game):
        raise MetaEvalError("the dual's multipliers diverge")

    monkeypatch.setattr(king_of_the_hill, "STRUCTURED_JOINTS", 0)
    monkeypatch.setattr(payoff_module, "max_entropy_cce", diverges)
    rating = metaeval.rate(game, "payoff")
    assert rating.diagnostics["safeguard_full_solver_fallbacks"] == 1 and "solver" not in rating.diagnostics
    for a, b in zip(rating.ratings, reference.ratings):
        np.testing.assert_array_equal(a, b)


def test_large_king_of_the_hill_games_take_the_structured_paths_by_default(monkeypatch):
    game = simulated_judge(4, 10)
    assert not king_of_the_hill.structured(game)
    monkeypatch.setattr(king_of_the_hill, "STRUCTURED_JOINTS", game.num_joints - 1)
    assert king_of_the_hill.structured(game)
    assert metaeval.rate(game, "payoff").diagnostics["solver"].startswith("constraint generation")


@pytest.mark.parametrize("models, prompts, copies", [(10, 60, 40), (12, 600, 300)])
def test_the_prompt_copying_attack_leaves_the_affinity_ratings_unchanged(monkeypatch, models, prompts, copies):
    """Liu et al. (2025, section 5): copies of the prompts the top model does worst on
    sink it under uniform averaging; the affinity-target ratings do not move. At 600
    prompts the nash rater's tracer starts with the prompts substituted (more than
    logit_eliminated.LAST_UNKNOWNS live)."""
    monkeypatch.setattr(king_of_the_hill, "STRUCTURED_JOINTS", 0)
    game = simulated_judge(models, prompts, seed=7)
    top = int(np.argmax(metaeval.rate(game, "uniform").ratings[0]))
    attacked = copy_prompts(game, top, copies, seed=7)
    uniform_change = metaeval.rate(attacked, "uniform").ratings[0] - metaeval.rate(game, "uniform").ratings[0]
    assert uniform_change[top] < -0.05
    for method, tolerance in (("payoff", 1e-9), ("nash", 1e-9)):
        before = metaeval.rate(game, method, target="affinity")
        after = metaeval.rate(attacked, method, target="affinity")
        assert "de-cloned" in after.diagnostics.get("solver", "") or after.diagnostics["decloned_shape"] == game.shape
        np.testing.assert_allclose(after.ratings[0], before.ratings[0], rtol=0, atol=tolerance, err_msg=method)
        np.testing.assert_allclose(after.ratings[2][:prompts], before.ratings[2], rtol=0, atol=tolerance, err_msg=method)
