import numpy as np
import pandas as pd

from metaeval import pairwise


def test_win_loss_tie_counts_per_pair():
    battles = pd.DataFrame(
        [("b", "a", "model_a"), ("a", "b", "model_a"), ("a", "b", "tie (bothbad)"), ("c", "a", "model_b"), ("a", "b", "tie")],
        columns=["model_a", "model_b", "winner"],
    ).assign(weight=[1.0, 2.0, 1.0, 1.0, 1.0])
    counts = pairwise.count_battles(battles)
    assert counts.models == ("a", "b", "c")
    assert counts.table().to_dict("records") == [
        {"model": "a", "opponent": "b", "wins": 2.0, "losses": 1.0, "ties": 2.0},
        {"model": "a", "opponent": "c", "wins": 1.0, "losses": 0.0, "ties": 0.0},
    ]
    np.testing.assert_array_equal(counts.wins(), [[0, 3, 1], [2, 0, 0], [0, 0, 0]])
    stacked = counts.wins(np.stack([counts.count, 2 * counts.count]))
    np.testing.assert_array_equal(stacked[1], 2 * counts.wins())
