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


def test_categorical_model_columns_count_as_their_text():
    # categories in different orders per column, an unused one, and a non-text category
    text = pd.DataFrame({"model_a": ["b", "1", "a", "b"], "model_b": ["a", "b", "1", "1"],
                         "winner": ["model_a", "tie", "model_b", "model_a"]})
    categorical = text.assign(
        model_a=pd.Categorical(["b", 1, "a", "b"], categories=["b", "unused", 1, "a"]),
        model_b=pd.Categorical(text["model_b"], categories=["1", "b", "a"]),
    )
    ours, expected = pairwise.count_battles(categorical), pairwise.count_battles(text)
    assert ours.models == expected.models == ("1", "a", "b")
    for field in ("a", "b", "outcome", "weight", "count"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(expected, field))
