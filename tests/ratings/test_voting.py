import numpy as np
import pandas as pd
import pytest

import metaeval
from metaeval import data
from metaeval.solvers import social_choice
from metaeval.ratings.voting import VOTING_RATERS

TABLE = pd.DataFrame(np.random.default_rng(1).normal(size=(5, 7)), index=list("abcde"))


def test_every_method_is_registered():
    assert set(social_choice.METHODS) <= set(metaeval.RATERS)
    assert set(VOTING_RATERS) == set(social_choice.METHODS)


@pytest.mark.parametrize("method", social_choice.METHODS)
def test_rating_a_table_game_elects_the_agents_by_the_tasks_votes(method):
    game = data.agent_vs_task(TABLE)
    rating = metaeval.rate(game, method, tie_seed=2)
    election = social_choice.elect(data.Profile.from_table(TABLE, seed=2), method)
    np.testing.assert_array_equal(rating.ratings[0], election.scores)
    assert rating.diagnostics["ranking"][0] == election.ranked_names()
    assert rating.diagnostics["tie_seed"] == 2 and len(rating.ratings[1]) == TABLE.shape[1]


def test_options_reach_the_method():
    game = data.agent_vs_task(TABLE)
    assert metaeval.rate(game, "approval", k=2).ratings[0].sum() == 2 * TABLE.shape[1]
    assert metaeval.rate(game, "stv", num_winners=1).diagnostics["details"][0]["winners"].__len__() == 1
    with pytest.raises(metaeval.MetaEvalError, match="player 'task'.*above the limit"):
        metaeval.rate(game, "kemeny_young", max_alternatives=6)
