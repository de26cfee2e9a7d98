import choix
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import metaeval
from metaeval import MetaEvalError, pairwise
from scipy.sparse.csgraph import connected_components

from metaeval.pairwise.bradley_terry import ci_ranks, fit, resample, strongly_connected
from metaeval.ratings.elo import SCALE, bradley_terry as bt_matrix
from tests.pairwise.references import arena_bootstrap, arena_mle, simulated_battles

TRUTH = np.array([-250.0, -120.0, -40.0, 0.0, 60.0, 150.0, 200.0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_choix(seed):
    battles = simulated_battles(TRUTH, 1500, seed)
    ours = pairwise.bradley_terry(battles)["score"]
    # choix has no ties: a decisive battle counts twice, a tie once each way (the same likelihood).
    index = {m: i for i, m in enumerate(sorted(ours.index))}
    data = []
    for a, b, w in battles[["model_a", "model_b", "winner"]].itertuples(index=False):
        i, j = index[a], index[b]
        data += [(i, j), (i, j)] if w == "model_a" else [(j, i), (j, i)] if w == "model_b" else [(i, j), (j, i)]
    reference = choix.ilsr_pairwise(len(index), data, alpha=0.0, tol=1e-12, max_iter=10_000)
    np.testing.assert_allclose(ours[sorted(index)].to_numpy(), SCALE * reference, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_the_arena_logistic_regression(seed):
    battles = simulated_battles(TRUTH, 1500, seed)
    ours = pairwise.bradley_terry(battles)["score"]
    exact = (arena_mle(battles, C=np.inf, tol=1e-12, max_iter=10_000) - 1000)[ours.index]
    assert (ours - exact).abs().max() < 2e-5
    # What is left is the logistic regression's stopping rule: ours is the sharper stationary point.
    assert likelihood_gradient(battles, ours) < likelihood_gradient(battles, exact) / 10
    # The published defaults (L2 penalty C=1, tol 1e-4) shrink the scores a little.
    published = arena_mle(battles) - 1000
    assert 1e-6 < (ours - published[ours.index]).abs().max() < 2.0


def likelihood_gradient(battles, scores):
    counts = pairwise.count_battles(battles)
    wins = counts.wins()
    theta = scores[list(counts.models)].to_numpy() / SCALE
    expected = (wins + wins.T) / (1 + np.exp(theta[None, :] - theta[:, None]))
    return np.abs((wins - expected).sum(axis=1)).max()


def test_strongly_connected_agrees_with_one_search_per_matrix():
    rng = np.random.default_rng(0)
    stack = (rng.random((40, 6, 6)) < 0.25) * (1 - np.eye(6))
    expected = [connected_components(m, directed=True, connection="strong")[0] == 1 for m in stack]
    np.testing.assert_array_equal(strongly_connected(stack), expected)
    assert 0 < sum(expected) < 40


def test_bootstrap_rounds_are_refits_of_resampled_battles():
    counts = pairwise.count_battles(simulated_battles(TRUTH, 800, 3))
    _, samples = fit(counts, bootstrap=7, seed=5)
    draws = resample(counts, 7, np.random.default_rng(np.random.SeedSequence(5).spawn(1)[0]))
    for row, draw in zip(samples, draws):
        np.testing.assert_allclose(row, bt_matrix(counts.wins(draw)), atol=1e-8)
        assert draw.sum() == counts.count.sum()


def test_bootstrap_spread_matches_the_arena_row_resampling():
    battles = simulated_battles(TRUTH, 1200, 4)
    ours = pairwise.bradley_terry(battles, bootstrap=300, seed=0)
    arena = arena_bootstrap(battles, 40, 0, C=np.inf, tol=1e-10, max_iter=1000)
    ours_width = (ours["upper"] - ours["lower"]) / (2 * 1.96)
    ratio = ours_width / arena.std()[ours.index]
    assert ratio.between(0.75, 1.3).all(), ratio


def test_bootstrap_intervals_cover_the_truth_at_about_the_nominal_rate():
    truth = np.array([-150.0, -60.0, 0.0, 40.0, 170.0])
    covered = []
    for seed in range(100):
        battles = simulated_battles(truth, 1500, 100 + seed, tie_rate=0.0)  # ties would shrink the fit
        frame = pairwise.bradley_terry(battles, bootstrap=200, seed=seed)
        centred = pd.Series(truth - truth.mean(), index=[f"m{i:03d}" for i in range(5)])[frame.index]
        covered.append(((frame["lower"] <= centred) & (centred <= frame["upper"])).to_numpy())
    rate = np.mean(covered)
    assert 0.9 <= rate <= 0.98, rate


def test_anchor_shifts_scores_and_bounds_by_one_constant():
    battles = simulated_battles(TRUTH, 1000, 6)
    plain = pairwise.bradley_terry(battles, bootstrap=50, seed=1)
    for model, value in [("m000", 1000.0), ("m005", 1200.0)]:
        anchored = pairwise.bradley_terry(battles, bootstrap=50, seed=1, anchor=(model, value))
        assert anchored.at[model, "score"] == pytest.approx(value)
        shift = anchored["score"] - plain["score"]
        for column in ("lower", "upper"):
            np.testing.assert_allclose(anchored[column] - plain[column], shift, atol=1e-9)
        np.testing.assert_array_equal(anchored["rank"], plain["rank"])
    assert plain["score"].mean() == pytest.approx(0.0, abs=1e-9)


def test_row_order_workers_and_seed():
    battles = simulated_battles(TRUTH, 1000, 7)
    first = pairwise.bradley_terry(battles, bootstrap=120, seed=3, workers=1)
    shuffled = battles.sample(frac=1.0, random_state=0)
    pd.testing.assert_frame_equal(first, pairwise.bradley_terry(shuffled, bootstrap=120, seed=3, workers=2))
    other = pairwise.bradley_terry(battles, bootstrap=120, seed=4)
    assert not np.allclose(first["lower"], other["lower"])
    assert first.attrs["seed"] == 3 and first.attrs["bootstrap"] == 120


def test_weights_count_like_repeated_rows():
    battles = simulated_battles(TRUTH, 300, 8)
    weighted = battles.assign(weight=np.where(np.arange(300) % 3 == 0, 2.0, 1.0))
    repeated = pd.concat([battles, battles.iloc[::3]])
    pd.testing.assert_series_equal(
        pairwise.bradley_terry(weighted)["score"], pairwise.bradley_terry(repeated)["score"], atol=1e-8
    )


def test_ci_ranks():
    ranks = ci_ranks([3.0, 2.0, 1.0, 0.0], [2.5, 1.0, 0.8, -1.0], [3.5, 2.6, 1.2, 0.7])
    np.testing.assert_array_equal(ranks, [1, 1, 2, 4])  # model 3 lies below every other interval
    np.testing.assert_array_equal(ci_ranks([1.0, 3.0, 3.0], *[[np.nan] * 3] * 2), [3, 1, 1])


def test_never_lost_and_disconnected_groups_are_reported():
    rows = [("a", "b", "model_a"), ("a", "c", "model_a"), ("b", "c", "model_a"), ("c", "b", "model_a")]
    battles = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
    with pytest.raises(MetaEvalError, match=r"2 strongly connected components.*never lost: a"):
        pairwise.bradley_terry(battles)
    regularised = pairwise.bradley_terry(battles, prior=1.0)
    assert regularised.index[0] == "a" and np.isfinite(regularised["score"]).all()
    islands = pd.DataFrame([("a", "b", "model_a"), ("b", "a", "model_a"), ("c", "d", "tie")],
                           columns=["model_a", "model_b", "winner"])
    assert pairwise.components(pairwise.count_battles(islands).wins(), ("a", "b", "c", "d")) == [["a", "b"], ["c", "d"]]
    with pytest.raises(MetaEvalError, match="2 strongly connected"):
        pairwise.bradley_terry(islands)


def test_to_metagame_lets_every_rater_apply():
    battles = simulated_battles(TRUTH[:4], 400, 9)
    game = pairwise.to_metagame(battles)
    assert game.is_symmetric() and game.shape == (4, 4)
    np.testing.assert_allclose(
        metaeval.rate(game, "elo").ratings[0], pairwise.bradley_terry(battles)["score"].sort_index(), atol=1e-8
    )
    assert np.all(game.stderr[0][~np.eye(4, dtype=bool)] > 0)
    metaeval.rate(game, "nash")
    sparse = pairwise.to_metagame(pd.DataFrame([("a", "b", "tie"), ("b", "c", "model_b")], columns=["model_a", "model_b", "winner"]))
    assert sparse.payoffs[0][0, 2] == 0.5 and sparse.counts[0, 2] == 0 and sparse.payoffs[0][2, 1] == 1.0


def test_bad_battles(tmp_path):
    good = pd.DataFrame([("a", "b", "model_a")], columns=["model_a", "model_b", "winner"])
    with pytest.raises(MetaEvalError, match="missing winner"):
        pairwise.bradley_terry(good.drop(columns="winner"))
    with pytest.raises(MetaEvalError, match="'draw'"):
        pairwise.bradley_terry(good.assign(winner="draw"))
    with pytest.raises(MetaEvalError, match="against itself"):
        pairwise.bradley_terry(good.assign(model_b="a"))
    with pytest.raises(MetaEvalError, match="weight"):
        pairwise.bradley_terry(good.assign(weight=-1.0))
    with pytest.raises(MetaEvalError, match="bootstrap"):
        pairwise.bradley_terry(good, bootstrap=-1)
    with pytest.raises(MetaEvalError, match="anchor"):
        pairwise.bradley_terry(good, prior=1, anchor=("z", 0.0))
    with pytest.raises(MetaEvalError, match="cannot read"):
        pairwise.bradley_terry(tmp_path / "missing.csv")
    with pytest.raises(MetaEvalError, match="several owners"):
        pairwise.count_battles(pd.concat([good, good]).assign(owner_a=["x", "y"], owner_b="z"))
    path = tmp_path / "battles.csv"
    good.assign(owner_a="x", owner_b="y").to_csv(path, index=False)
    assert pairwise.bradley_terry(path, prior=1)["owner"].to_dict() == {"a": "x", "b": "y"}


@given(weight_exponent=st.integers(-300, 300), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_a_common_battle_weight_leaves_the_scores_unchanged(weight_exponent, seed):
    battles = simulated_battles(TRUTH, 400, seed)
    plain = pairwise.bradley_terry(battles)["score"]
    weighted = pairwise.bradley_terry(battles.assign(weight=10.0**weight_exponent))["score"]
    np.testing.assert_allclose(weighted[plain.index], plain, rtol=0, atol=1e-9 * np.ptp(plain))


@pytest.mark.parametrize("weight", [1e-300, 1e-15, 1e-12, 1e15, 1e300])
def test_the_issue_weights_leave_the_scores_unchanged(weight):
    battles = simulated_battles(TRUTH, 1500, 0)
    plain = pairwise.bradley_terry(battles)["score"]
    weighted = pairwise.bradley_terry(battles.assign(weight=weight))["score"]
    np.testing.assert_allclose(weighted[plain.index], plain, rtol=0, atol=1e-9 * np.ptp(plain))
