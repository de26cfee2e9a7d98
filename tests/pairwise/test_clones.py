import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from metaeval import MetaEvalError
from metaeval.pairwise.clones import balanced_votes, clone_lottery, kendall_distance, rater_scores

RUNS = 3000


@pytest.mark.parametrize("producers, copies, votes", [(4, 3, 10), (5, 5, 20)])
def test_example_3_2_win_probabilities(producers, copies, votes):
    # Hays et al., Example 3.2: equal models; producer 1 submits `copies` copies in total.
    theta = pd.Series(0.0, index=[f"p{i}" for i in range(producers)])
    plain = clone_lottery(theta, "p0", copies - 1, votes, runs=RUNS, seed=1).summary()
    corrected = clone_lottery(theta, "p0", copies - 1, votes, runs=RUNS, seed=1, correction="yrwr").summary()
    error = 4 * np.sqrt(0.25 / RUNS)
    assert plain["p_top"] == pytest.approx(copies / (producers + copies - 1), abs=error)
    assert corrected["p_top"] == pytest.approx(1 / producers, abs=error)
    assert plain["p_top_alone"] == pytest.approx(1 / producers, abs=error)


def test_clones_pay_under_plain_ranking_but_not_under_yrwr():
    theta = pd.Series(np.linspace(-0.5, 0.5, 16), index=[f"m{i:02d}" for i in range(16)])
    plain = clone_lottery(theta, "m08", 3, votes=20, runs=300, seed=2)
    corrected = clone_lottery(theta, "m08", 3, votes=20, runs=300, seed=2, correction="yrwr")
    standard_error = plain.gain.std() / np.sqrt(300)
    assert plain.gain.mean() > 1.0 > 6 * standard_error
    assert abs(corrected.gain.mean()) < 0.35


def test_kendall_distance_counts_discordant_pairs():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=9)
    ranks = np.stack([rng.permutation(9) + 1 for _ in range(5)])
    pairs = 9 * 8 / 2
    for row, distance in zip(ranks, kendall_distance(ranks, theta)):
        assert distance == round((1 - kendalltau(-row, theta).statistic) / 2 * pairs)


def test_balanced_votes():
    votes = balanced_votes(np.array([0.0, 1.0, -1.0]), 7, np.random.default_rng(0), runs=4)
    np.testing.assert_array_equal(votes + np.swapaxes(votes, 1, 2), np.broadcast_to(7 * (1 - np.eye(3)), (4, 3, 3)))


def test_any_rater_can_score():
    theta = pd.Series([0.0, 0.5, 1.0], index=["a", "b", "c"])
    by_elo = clone_lottery(theta, "b", 1, votes=30, runs=20, seed=3, scorer=rater_scores("elo"))
    by_bt = clone_lottery(theta, "b", 1, votes=30, runs=20, seed=3)
    np.testing.assert_array_equal(by_elo.gain, by_bt.gain)  # elo = 400/ln(10) x BT: same ranks, same draws
    borda = clone_lottery(theta, "b", 1, votes=30, runs=20, seed=3, scorer="borda")
    assert len(borda.gain) == 20
    with pytest.raises(MetaEvalError, match="unknown scorer"):
        clone_lottery(theta, "b", 1, votes=3, scorer="median")
    with pytest.raises(MetaEvalError, match="not among"):
        clone_lottery(theta, "z", 1, votes=3)
