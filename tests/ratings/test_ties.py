"""Ranks share ties within each rater's accuracy (``Rating.tolerance``), for every rater
and in every output that shows ranks: the shipped Atari tables, whose Nash and payoff
ratings put several agents at 0 up to rounding (1e-13), are the issue's examples."""

import itertools
from importlib import resources

import numpy as np
import pandas as pd
import pytest

import metaeval
from metaeval import MetaGame, data
from metaeval.cli import main
from metaeval.pairwise.bradley_terry import bradley_terry
from metaeval.ratings import RATERS
from tests.pairwise.references import simulated_battles

TABLES = ["atari_rainbow_table6", "atari_agent57"]
GAMES = {"2p": data.agent_vs_task, "3p": data.agent_vs_agent_vs_task}


def assert_ties_share_ranks(values, ranks, tolerance):
    """Ratings apart by far less than the tolerance share a rank; ratings apart by more
    than it do not."""
    assert tolerance > 0
    for i, j in itertools.combinations(range(len(values)), 2):
        gap = abs(values[i] - values[j])
        if gap <= tolerance / 100:
            assert ranks[i] == ranks[j], (values[i], values[j], tolerance)
        elif gap > tolerance:
            assert ranks[i] != ranks[j]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("players", GAMES)
# elo needs win probabilities; kemeny_young's integer scores share the voting raters' rule
# and take 40 s here (an integer program over the 54 to 57 tasks of the task player).
@pytest.mark.parametrize("rater", sorted(set(RATERS) - {"elo", "kemeny_young"}))
def test_shipped_atari_tables_tied_agents_share_ranks_under_every_rater(table, players, rater):
    game = GAMES[players](data.load_table(table))
    rating = metaeval.rate(game, rater)
    frame = rating.to_frame()
    assert frame.attrs["rank_tolerance"] == rating.tolerance
    for p, name in enumerate(game.player_names):
        ranks = frame[frame.player == name]["rank"].to_numpy()
        np.testing.assert_array_equal(ranks, rating.ranks(p))
        assert_ties_share_ranks(rating.ratings[p], ranks, rating.tolerance)


@pytest.mark.parametrize("table, players, rater, tied", [
    # The issue's cases: a four-way Nash tie at 0 (ratings 1.1e-14 ... -1.3e-14) ranked 1 to 4,
    # the same in the 3-player payoff ratings, and Agent57's four-way Nash tie.
    ("atari_rainbow_table6", "2p", "nash", ["a3c", "dueling-ddqn", "distrib-dqn", "rainbow"]),
    ("atari_rainbow_table6", "3p", "payoff", ["distrib-dqn", "rainbow"]),
    ("atari_agent57", "2p", "nash", ["agent57", "r2d2(bandit)", "muzero", "ngu"]),
])
def test_the_issue_ties_share_the_first_rank(table, players, rater, tied):
    rating = metaeval.rate(GAMES[players](data.load_table(table)), rater)
    values = dict(zip(rating.game.strategy_names[0], rating.ratings[0]))
    assert max(abs(values[a]) for a in tied) < 1e-11  # zero up to rounding
    ranks = dict(zip(rating.game.strategy_names[0], rating.ranks(0)))
    assert {ranks[a] for a in tied} == {1}
    assert sorted(ranks.values())[len(tied)] == len(tied) + 1  # the next agent is ranked after all of them


def test_cli_rate_shares_ranks_of_the_shipped_table_and_says_so(capsys):
    path = resources.files("metaeval.data") / "published" / "atari_rainbow_table6.csv"
    with resources.as_file(path) as file:
        assert main(["rate", str(file), "--layout", "columns", "--game", "2p", "--rater", "nash",
                     "--plot", "/dev/null"]) == 0
    out = capsys.readouterr().out.splitlines()
    ranks = {line.split()[1]: int(line.split()[0]) for line in out[1:-2]}
    assert [a for a, r in ranks.items() if r == 1] == ["a3c", "distrib-dqn", "dueling-ddqn", "rainbow"]
    assert out[-2] == "ranks: ratings within 1e-06 of each other (nash's accuracy) share a rank"


def test_interval_ranks_and_top_share_ties_within_the_tolerance():
    game = MetaGame(np.zeros((1, 3)))
    intervals = [np.array([[1.0, 1.0], [1.0 - 1e-13, 1.0 - 1e-13], [0.0, 0.5]])]
    rating = metaeval.Rating("x", game, [np.array([1.0, 1.0 - 1e-13, 0.2])], intervals=intervals,
                             p_top=[np.zeros(3)], tolerance=1e-9)
    np.testing.assert_array_equal(rating.ranks(0), [1, 1, 3])
    np.testing.assert_array_equal(rating.ci_ranks()[0], [1, 1, 3])


def test_battle_scores_tied_within_the_fit_precision_share_a_rank():
    # Three copies of one model, each with that model's record in a different order: their
    # scores are equal up to rounding (1e-15 apart), and were ranked 2, 3, 3.
    base = simulated_battles(np.array([0.0, 50.0, 120.0]), 300, 1)
    copies = []
    for k, copy in enumerate(["x1", "x2", "x3"]):
        battles = base.replace({"m001": copy})
        copies.append(battles[(battles.model_a == copy) | (battles.model_b == copy)].sample(frac=1, random_state=k))
    others = base[(base.model_a != "m001") & (base.model_b != "m001")]
    frame = bradley_terry(pd.concat([*copies, others]))
    assert frame.loc[["x1", "x2", "x3"], "score"].agg(np.ptp) < 1e-12
    assert frame["rank"].to_dict() == {"m002": 1, "x1": 2, "x2": 2, "x3": 2, "m000": 5}
