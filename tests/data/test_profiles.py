import numpy as np
import pandas as pd
import pytest

from metaeval import MetaEvalError
from metaeval.data import Profile, agent_vs_agent_vs_task, agent_vs_task


def test_each_task_votes_and_missing_agents_are_left_out():
    table = pd.DataFrame({"t1": [3.0, 1.0, 2.0], "t2": [np.nan, 5.0, 4.0], "t3": [1.0, 1.0, 1.0]},
                         index=["a", "b", "c"])
    profile = Profile.from_table(table)
    assert profile.votes == ((0, 2, 1), (1, 2)) and profile.dropped == 1  # t3 has no preference
    np.testing.assert_array_equal(profile.preferences(), [[0, 1, 1], [0, 0, 1], [0, 1, 0]])


def test_ties_are_broken_by_the_seed_the_same_way_every_time():
    values = np.array([[1.0, 1.0, 1.0, 0.0]] * 30)
    first = Profile.from_values(values, list("abcd"), seed=3)
    assert first.votes == Profile.from_values(values, list("abcd"), seed=3).votes
    assert first.tie_seed == 3 and all(v[-1] == 3 for v in first.votes)
    assert len({v[:3] for v in first.votes}) > 1  # tied alternatives in varying orders
    assert first.votes != Profile.from_values(values, list("abcd"), seed=4).votes


def test_games_give_the_same_votes_as_the_table():
    table = pd.DataFrame(np.random.default_rng(0).normal(size=(4, 5)), index=list("wxyz"))
    from_table = Profile.from_table(table)
    assert Profile.from_game(agent_vs_task(table)).votes == from_table.votes
    # In the 3-player game each (agent B, task) voter ranks agent A like the task does.
    three = Profile.from_game(agent_vs_agent_vs_task(table))
    assert set(three.votes) == set(from_table.votes) and len(three.votes) == 4 * 5


def test_bad_profiles():
    with pytest.raises(MetaEvalError, match="unknown alternative"):
        Profile.from_rankings([["a", "b"]], alternatives=["a"])
    with pytest.raises(MetaEvalError, match="positive integers"):
        Profile.from_rankings([["a", "b"]], weights=[0.5])
    with pytest.raises(MetaEvalError, match="at least one vote"):
        Profile.from_values([[1.0, 1.0]], ["a", "b"])
