import numpy as np
import pandas as pd
import pytest

from metaeval import MetaEvalError
from metaeval.data import agent_vs_agent_vs_task, agent_vs_task, king_of_the_hill

TABLE = pd.DataFrame({"t1": [10.0, 20.0, 15.0], "t2": [3.0, 1.0, 2.0], "flat": [5.0, 5.0, 5.0]},
                     index=["a", "b", "c"])


def test_agent_vs_task_is_zero_sum_on_normalised_scores():
    game = agent_vs_task(TABLE)
    assert game.is_zero_sum() and game.player_names == ("agent", "task")
    np.testing.assert_allclose(game.payoffs[0], [[0, 1, 0], [1, 0, 0], [0.5, 0.5, 0]])
    raw = agent_vs_task(TABLE, normalise="none")
    np.testing.assert_allclose(raw.payoffs[1], -TABLE.to_numpy())


def test_agent_vs_agent_vs_task_follows_spec_6():
    game = agent_vs_agent_vs_task(TABLE, normalise="none")
    assert game.shape == (3, 3, 3) and game.strategy_names[2] == ("t1", "t2", "flat")
    t = TABLE.to_numpy()
    for a, b, task in np.ndindex(game.shape):
        assert game.payoffs[0][a, b, task] == t[a, task] - t[b, task]
    np.testing.assert_array_equal(game.payoffs[1], -game.payoffs[0])
    np.testing.assert_array_equal(game.payoffs[2], np.abs(game.payoffs[0]))


def test_standard_errors_follow_the_scores():
    stderr = pd.DataFrame(1.0, index=TABLE.index, columns=TABLE.columns)
    stderr.loc["a", "t1"] = np.nan
    two = agent_vs_task(TABLE, stderr=stderr)
    assert two.stderr[0][1, 0] == pytest.approx(1 / 10) and two.stderr[0][0, 0] == 0
    three = agent_vs_agent_vs_task(TABLE, normalise="none", stderr=stderr)
    assert three.stderr[2][1, 2, 0] == pytest.approx(np.sqrt(2))
    assert three.stderr[0][0, 1, 0] == pytest.approx(1.0)
    with pytest.raises(MetaEvalError, match="rank normalisation"):
        agent_vs_task(TABLE, normalise="rank", stderr=stderr)


def test_king_of_the_hill_from_judgements():
    judgements = pd.DataFrame({
        "prompt": ["p1", "p1", "p1", "p1", "p2", "p2", "p2"],
        "model_a": ["x", "x", "y", "x", "x", "z", "y"],
        "model_b": ["y", "y", "z", "z", "y", "x", "z"],
        "winner": ["model_a", "tie", "model_b", "model_a", "model_b", "tie", "model_a"],
    })
    game = king_of_the_hill(judgements)
    assert game.player_names == ("king", "rebel", "prompt") and game.strategy_names[0] == ("x", "y", "z")
    king, rebel, prompt = game.payoffs
    assert king[0, 1, 0] == 0.5 and king[1, 0, 0] == -0.5  # x beat y once, tied once on p1
    assert king[2, 1, 0] == 1.0 and king[0, 2, 1] == 0.0 and king[1, 0, 1] == 1.0
    np.testing.assert_array_equal(np.diagonal(king, axis1=0, axis2=1), 0)
    np.testing.assert_array_equal(np.diagonal(rebel, axis1=0, axis2=1), -1)
    assert rebel[0, 1, 0] == -0.5 and prompt[1, 0, 0] == 0.5
    with pytest.raises(MetaEvalError, match="no judgement of 'x' against 'z' on prompt 'p1'"):
        king_of_the_hill(judgements.drop(index=3))
    with pytest.raises(MetaEvalError, match="unknown winner"):
        king_of_the_hill(judgements.assign(winner="model_c"))
