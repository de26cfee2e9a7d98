import numpy as np
import pandas as pd
import pytest

from metaeval import MetaEvalError
from metaeval.data import tables


def test_read_wide_table_either_orientation_with_a_source_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("# Source: somewhere\ngame,x,y\ng1,1,2\ng2,3,\n")
    by_columns = tables.read_scores(path, agents="columns")
    assert list(by_columns.index) == ["x", "y"] and list(by_columns.columns) == ["g1", "g2"]
    assert np.isnan(by_columns.loc["y", "g2"])
    assert tables.read_scores(path).shape == (2, 2)


def test_long_table_gives_scores_and_spreads():
    frame = pd.DataFrame({"game": ["g1", "g1", "g2", "g2"], "agent": ["b", "a", "b", "a"],
                          "score": [1.0, 2.0, 3.0, 4.0], "std": [0.5, None, 0.1, 0.2]})
    scores, spreads = tables.from_long(frame)
    assert list(scores.index) == ["b", "a"] and list(scores.columns) == ["g1", "g2"]
    assert scores.loc["a", "g2"] == 4.0 and np.isnan(spreads.loc["a", "g1"])
    with pytest.raises(MetaEvalError, match="more than one score"):
        tables.from_long(pd.concat([frame, frame.iloc[:1]]))


@pytest.mark.parametrize("name, shape", [("atari_rainbow_table6", (8, 54)), ("atari_agent57", (8, 57))])
def test_published_tables_ship_with_the_package(name, shape):
    scores, spreads = tables.load_table(name, spread=True)
    assert scores.shape == shape == spreads.shape and not scores.isna().any().any()
    assert "et al." in tables.source_line(name)


def test_agent57_spreads_are_the_published_ones():
    scores, spreads = tables.load_table("atari_agent57", spread=True)
    assert scores.loc["agent57", "alien"] == 297638.17 and spreads.loc["agent57", "alien"] == 37054.55
    assert spreads.loc["human"].isna().all() and spreads.loc["random"].isna().all()


def test_missing_cells_are_refused_or_dropped_as_asked():
    table = pd.DataFrame({"t1": [1.0, np.nan], "t2": [2.0, 3.0]}, index=["a", "b"])
    with pytest.raises(MetaEvalError, match="agent 'b' on task 't1'"):
        tables.complete(table)
    assert list(tables.complete(table, "drop_tasks")[0].columns) == ["t2"]
    assert list(tables.complete(table, "drop_agents")[0].index) == ["a"]


def test_normalisations():
    table = pd.DataFrame({"t": [10.0, 30.0, 20.0, 20.0], "flat": [1.0] * 4}, index=list("abcd"))
    minmax, scale = tables.normalise(table, "minmax")
    np.testing.assert_allclose(minmax["t"], [0, 1, 0.5, 0.5])
    np.testing.assert_allclose(minmax["flat"], 0)
    assert scale["t"] == 1 / 20
    ranks, _ = tables.normalise(table, "rank")
    np.testing.assert_allclose(ranks["t"], [0, 1, 0.5, 0.5])
    assert tables.normalise(table, "none")[0] is table


@pytest.mark.parametrize(
    "text, message",
    [
        ("agent,t1\na,1\nb,x\n", "must be numeric"),
        ("agent\na\nb\n", "at least one more column"),
        ("agent,t1\na,1\na,2\n", "repeated names in the first column: a"),
    ],
)
def test_bad_tables(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(MetaEvalError, match=message):
        tables.read_scores(path)


@pytest.mark.parametrize("agents", ["rows", "columns"])
@pytest.mark.parametrize("text, repeated", [
    ("name,t1,t1,t2\nA,1,2,3\nB,4,5,6\n", "header: t1"),
    ("name,t1,t2\nA,1,2\nA,3,4\nB,5,6\n", "first column: A"),
])
def test_repeated_names_are_refused_in_either_layout(tmp_path, agents, text, repeated):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(MetaEvalError, match=f"repeated names in the {repeated}$"):
        tables.read_scores(path, agents=agents)


def test_names_are_data_not_comments_nor_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("# source line\nagent,F#,1.10,1.1\nA#x,1,2,3\n1.10,4,5,6\n1.1,7,8,9\nNA,0,0,0\n")
    table = tables.read_scores(path)
    assert list(table.index) == ["A#x", "1.10", "1.1", "NA"] and list(table.columns) == ["F#", "1.10", "1.1"]
    assert table.loc["A#x", "F#"] == 1 and table.loc["1.1", "1.1"] == 9
    long = tmp_path / "long.csv"
    long.write_text("game,agent,score\ng#1,1.10,1\ng#1,1.1,2\n2,1.10,3\n2.0,1.1,4\n")
    scores, _ = tables.read_long(long)
    assert list(scores.index) == ["1.10", "1.1"] and list(scores.columns) == ["g#1", "2", "2.0"]
    with pytest.raises(MetaEvalError, match="repeated names in the header: score"):
        long.write_text("game,agent,score,score\ng,a,1,2\n")
        tables.read_long(long)
