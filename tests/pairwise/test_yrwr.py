import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaEvalError
from metaeval.pairwise import local_yrwr, owner_order_ranks, yrwr


@st.composite
def owned_scores(draw, max_models=12):
    """Raw scores, true qualities and a random split of the models among owners."""
    k = draw(st.integers(1, max_models))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    names = [f"m{i}" for i in range(k)]
    owner = rng.integers(0, draw(st.integers(1, 4)), k)
    truth = pd.Series(rng.normal(size=k), index=names)
    raw = pd.Series(rng.normal(size=k) * draw(st.sampled_from([0.1, 1.0, 5.0])), index=names)
    order = rng.permutation(k)
    rankings = {f"o{o}": [names[i] for i in order if owner[i] == o] for o in np.unique(owner)}
    return raw, truth, rankings


def truthful(rankings, truth):
    return {o: sorted(models, key=lambda m: -truth[m]) for o, models in rankings.items()}


def test_prefix_minimum_example():
    raw = pd.Series({"a": 0.3, "b": 0.5, "c": 0.1, "x": 0.9})
    corrected = yrwr(raw, {"k": ["a", "b", "c"]})
    assert corrected.to_dict() == {"a": 0.3, "b": 0.3, "c": 0.1, "x": 0.9}


@settings(max_examples=60, deadline=None)
@given(owned_scores())
def test_invariants(case):
    raw, truth, rankings = case
    corrected = yrwr(raw, rankings)
    assert (corrected <= raw).all()  # never raises a score
    pd.testing.assert_series_equal(yrwr(corrected, rankings), corrected)  # idempotent
    for models in rankings.values():
        values = corrected[models].to_numpy()
        assert np.all(np.diff(values) <= 0)  # monotone down the owner's list
        assert values.max() == raw[models[0]]  # the owner's best is its top-listed model's raw score
    respecting = pd.Series(raw.to_numpy(), index=raw.index)
    for models in rankings.values():
        respecting[models] = np.sort(raw[models].to_numpy())[::-1]
    pd.testing.assert_series_equal(yrwr(respecting, rankings), respecting)  # already in order: unchanged


@settings(max_examples=60, deadline=None)
@given(owned_scores())
def test_one_lipschitz_towards_the_truth_when_owners_rank_truthfully(case):
    raw, truth, rankings = case
    rankings = truthful(rankings, truth)
    pd.testing.assert_series_equal(yrwr(truth, rankings), truth)  # the truth is a fixed point
    assert (yrwr(raw, rankings) - truth).abs().max() <= (raw - truth).abs().max() + 1e-12
    other = raw + np.random.default_rng(0).normal(size=len(raw))
    assert (yrwr(raw, rankings) - yrwr(other, rankings)).abs().max() <= (raw - other).abs().max() + 1e-12


def test_uncertainty_aware_variant_only_binds_overlapping_intervals():
    raw = pd.Series({"a": 1.0, "b": 3.0, "c": 0.2})
    lower = pd.Series({"a": 0.8, "b": 2.5, "c": 0.0})
    upper = pd.Series({"a": 1.2, "b": 3.5, "c": 0.9})
    # b's interval is clear of a's, so the owner's claim a > b is overridden by the data.
    assert yrwr(raw, {"k": ["a", "b", "c"]}, intervals=(lower, upper)).to_dict() == {"a": 1.0, "b": 3.0, "c": 0.2}
    upper["a"] = 2.6  # now they overlap: b is capped at a
    frame = pd.DataFrame({"lower": lower, "upper": upper})
    assert yrwr(raw, {"k": ["a", "b", "c"]}, intervals=frame).to_dict() == {"a": 1.0, "b": 1.0, "c": 0.2}
    wide = (raw - 10, raw + 10)  # everything overlaps: plain yrwr
    pd.testing.assert_series_equal(yrwr(raw, {"k": ["b", "a", "c"]}, intervals=wide), yrwr(raw, {"k": ["b", "a", "c"]}))


def test_local_variant_ignores_models_off_the_board():
    # Example 4.3: closed model A above open model B; on the open board B is not capped by A.
    raw = pd.Series({"A": 0.1, "B": 0.4, "C": 0.3})
    rankings = {"k": ["A", "B"], "other": ["C"]}
    boards = local_yrwr(raw, rankings, {"all": ["A", "B", "C"], "open": ["B", "C"]})
    assert boards["all"].to_dict() == {"A": 0.1, "B": 0.1, "C": 0.3}
    assert boards["open"].to_dict() == {"B": 0.4, "C": 0.3}
    with pytest.raises(MetaEvalError, match="without scores"):
        local_yrwr(raw, rankings, {"x": ["Z"]})


def test_owner_order_breaks_ties():
    scores = pd.Series({"a": 1.0, "b": 1.0, "c": 2.0})
    assert owner_order_ranks(scores, {"k": ["b", "a"]}).to_dict() == {"a": 3, "b": 2, "c": 1}


def test_rate_with_yrwr_correction():
    p = np.array([[0.5, 0.6, 0.3], [0.4, 0.5, 0.45], [0.7, 0.55, 0.5]])
    game = metaeval.MetaGame.from_matrix(p, p.T, strategy_names=[["x1", "x2", "y"]] * 2)
    plain = metaeval.rate(game, "elo")
    corrected = metaeval.rate(game, "elo", correction="yrwr", owner_rankings={"X": ["x2", "x1"]})
    expected = yrwr(pd.Series(plain.ratings[0], index=["x1", "x2", "y"]), {"X": ["x2", "x1"]})
    np.testing.assert_array_equal(corrected.ratings[0], expected.to_numpy())
    np.testing.assert_array_equal(corrected.diagnostics["uncorrected"][0], plain.ratings[0])
    assert corrected.ratings[0][0] < plain.ratings[0][0] and corrected.diagnostics["correction"] == "yrwr"
    table = metaeval.MetaGame.from_matrix([[0.2, 0.9], [0.8, 0.1]], strategy_names=[["a1", "a2"], ["t1", "t2"]])
    rated = metaeval.rate(table, "uniform", correction="yrwr", owner_rankings={"A": ["a1", "a2"]})
    np.testing.assert_array_equal(rated.ratings[1], metaeval.rate(table, "uniform").ratings[1])  # tasks untouched
    with pytest.raises(MetaEvalError, match="go together"):
        metaeval.rate(game, "elo", correction="yrwr")
    with pytest.raises(MetaEvalError, match="unknown correction"):
        metaeval.rate(game, "elo", correction="isotonic", owner_rankings={})


def test_bad_input():
    raw = pd.Series({"a": 1.0, "b": 2.0})
    with pytest.raises(MetaEvalError, match="listed twice"):
        yrwr(raw, {"k": ["a"], "j": ["a"]})
    with pytest.raises(MetaEvalError, match="without scores"):
        yrwr(raw, {"k": ["a", "z"]})
    with pytest.raises(MetaEvalError, match="Series"):
        yrwr({"a": 1.0}, {})
    with pytest.raises(MetaEvalError, match="finite"):
        yrwr(pd.Series({"a": np.nan}), {})
    with pytest.raises(MetaEvalError, match="list of models"):
        yrwr(raw, {"k": "ab"})
    with pytest.raises(MetaEvalError, match="lower > upper"):
        yrwr(raw, {"k": ["a", "b"]}, intervals=(raw + 1, raw))
