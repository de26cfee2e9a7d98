import numpy as np
import pandas as pd
import pytest

from metaeval import MetaEvalError
from metaeval.data import tables


def test_agent_vs_task_is_zero_sum_on_normalised_scores():
    table = pd.DataFrame({"t1": [10.0, 20.0, 15.0], "t2": [3.0, 1.0, 2.0], "flat": [5.0, 5.0, 5.0]},
                         index=["a", "b", "c"])
    game = tables.agent_vs_task(table)
    assert game.is_zero_sum() and game.player_names == ("agent", "task")
    np.testing.assert_allclose(game.payoffs[0][:, 0], [0.0, 1.0, 0.5])
    np.testing.assert_allclose(game.payoffs[0][:, 1], [1.0, 0.0, 0.5])
    np.testing.assert_allclose(game.payoffs[0][:, 2], 0.0)
    raw = tables.agent_vs_task(table, normalised=False)
    np.testing.assert_allclose(raw.payoffs[1], -table.to_numpy())


@pytest.mark.parametrize(
    "text, message",
    [
        ("agent,t1\na,1\nb,x\n", "must be numeric"),
        ("agent,t1\na,1\nb,\n", "missing scores"),
        ("agent\na\nb\n", "at least one task column"),
    ],
)
def test_bad_tables(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(MetaEvalError, match=message):
        tables.read_scores(path)
