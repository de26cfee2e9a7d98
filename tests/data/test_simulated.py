import numpy as np
import pytest

from metaeval import MetaEvalError
from metaeval.data.games import king_of_the_hill_game
from metaeval.data.simulated import copy_prompts, simulated_judge
from metaeval.game import MetaGame
from metaeval.solvers.king_of_the_hill import is_king_of_the_hill


def test_the_simulated_judge_builds_a_seeded_king_of_the_hill_game():
    game = simulated_judge(models=5, prompts=7, seed=3)
    assert game.shape == (5, 5, 7) and game.player_names == ("king", "rebel", "prompt")
    assert is_king_of_the_hill(game)
    king = game.payoffs[0]
    np.testing.assert_array_equal(king, -king.transpose(1, 0, 2))
    assert np.abs(king).max() < 1 and np.abs(king).max() > 0.5
    np.testing.assert_array_equal(simulated_judge(models=5, prompts=7, seed=3).payoffs, game.payoffs)
    assert not np.array_equal(simulated_judge(models=5, prompts=7, seed=4).payoffs, game.payoffs)


def test_the_attack_appends_copies_of_the_prompts_the_model_does_worst_on():
    game = simulated_judge(models=6, prompts=20, seed=0)
    attacked = copy_prompts(game, model=2, copies=30, sharpness=10.0, seed=1)
    assert attacked.shape == (6, 6, 50)
    np.testing.assert_array_equal(attacked.payoffs[..., :20], game.payoffs)
    mean = game.payoffs[0][2].mean(axis=0)
    copied = [int(name.split()[0][1:]) for name in attacked.strategy_names[2][20:]]
    for column, original in enumerate(copied, start=20):
        np.testing.assert_array_equal(attacked.payoffs[..., column], game.payoffs[..., original])
    # Drawn from softmax(-10 u_bar): mostly prompts where model 2 does worse than on average.
    assert np.mean(mean[copied]) < mean.mean()
    assert copy_prompts(game, 2, 30, seed=1).strategy_names == attacked.strategy_names


@pytest.mark.parametrize("call, message", [
    (lambda: simulated_judge(models=1), "at least 2 models"),
    (lambda: simulated_judge(prompts=0), "prompts must be a positive integer"),
    (lambda: simulated_judge(noise=-1.0), "noise must be >= 0"),
    (lambda: copy_prompts(simulated_judge(3, 4), model=3, copies=1), "no model 3"),
    (lambda: copy_prompts(simulated_judge(3, 4), model=0, copies=-1), "copies must be a non-negative integer"),
    (lambda: copy_prompts(MetaGame(np.zeros((2, 2, 2))), model=0, copies=1), "3 players"),
    (lambda: king_of_the_hill_game(np.zeros((2, 3, 4))), r"shape \[models, models, prompts\]"),
])
def test_bad_input_gets_a_one_line_error(call, message):
    with pytest.raises(MetaEvalError, match=message) as error:
        call()
    assert "\n" not in str(error.value)
