import numpy as np
import pandas as pd
import pytest

import metaeval
from metaeval import MetaEvalError
from metaeval.data.matches import match_results


def three_player_log(seed=0, games=600):
    rng = np.random.default_rng(seed)
    seats = [["a", "b"], ["c", "d", "e"], ["f", "g"]]
    rows = []
    for _ in range(games):
        agents = tuple(rng.choice(s) for s in seats)
        rows.append({"agents": agents, "scores": tuple(rng.normal(size=3) + [len(x) for x in agents])})
    return pd.DataFrame(rows)


def test_means_counts_and_standard_errors():
    log = three_player_log()
    game = match_results(log, roles=["dealer", "left", "right"])
    assert game.shape == (2, 3, 2) and game.player_names == ("dealer", "left", "right")
    assert game.counts.sum() == len(log)
    chosen = log[log["agents"] == ("b", "e", "f")]
    returns = np.array(chosen["scores"].tolist())
    joint = (1, 2, 0)
    assert game.counts[joint] == len(chosen)
    np.testing.assert_allclose(game.payoffs[(slice(None), *joint)], returns.mean(axis=0))
    np.testing.assert_allclose(game.stderr[(slice(None), *joint)], returns.std(axis=0, ddof=1) / np.sqrt(len(chosen)))
    frame = metaeval.rate(game, "deviation").to_frame()  # any game-theoretic rater, per role
    assert set(frame["player"]) == {"dealer", "left", "right"}


def test_unplayed_profiles():
    log = pd.DataFrame({"agents": [("x", "y"), ("z", "y"), ("x", "w")], "scores": [(1, -1), (0.5, -0.5), (2, -2)]})
    with pytest.raises(MetaEvalError, match="1 of 4 joint profiles unplayed.*z, w"):
        match_results(log)
    game = match_results(log, fill=0.0)
    assert game.counts[1, 0] == 0 and game.payoffs[0][1, 0] == 0.0 and game.stderr[0][0, 0] == 0.0


def test_bad_logs():
    with pytest.raises(MetaEvalError, match="missing scores"):
        match_results(pd.DataFrame({"agents": [("a", "b")]}))
    with pytest.raises(MetaEvalError, match="row 1"):
        match_results(pd.DataFrame({"agents": [("a", "b"), ("a", "b", "c")], "scores": [(1, 0), (1, 0)]}))
    with pytest.raises(MetaEvalError, match="numbers"):
        match_results(pd.DataFrame({"agents": [("a", "b")], "scores": [("won", "lost")]}))
    with pytest.raises(MetaEvalError, match="no rows"):
        match_results(pd.DataFrame({"agents": [], "scores": []}))
