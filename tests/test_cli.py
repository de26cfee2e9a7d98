import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import metaeval
from metaeval import data
from tests.conftest import without_timings
from metaeval import rundir
from metaeval.cli import main


def metaeval_command(*args):
    return [sys.executable, "-m", "metaeval.cli", *map(str, args)]


@pytest.mark.parametrize(
    "args, message",
    [
        (["evolve", "--game", "no_such_game", "--out", "{tmp}/a"], "no_such_game"),
        (["evolve", "--rater", "best", "--out", "{tmp}/a"], "unknown rater 'best'"),
        (["evolve", "--population", "3", "--out", "{tmp}/a"], "population must be at least 4"),
        (["evolve", "--discard-fraction", "1.5", "--out", "{tmp}/a"], "strictly between 0 and 1"),
        (["evolve", "--out", "{tmp}/file/sub"], "not writable"),
        (["compare", "--raters", "uniform,best", "--out", "{tmp}/c"], "unknown rater 'best'"),
        (["evolve", "--iterations", "0", "--out", "{tmp}/a"], "must be positive"),
        (["rate", "{tmp}/missing.npz"], "no such file"),
        (["plot", "{tmp}"], "not a run directory"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_error(tmp_path, capsys, args, message):
    (tmp_path / "file").write_text("a file, not a directory")
    code = main([a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("metaeval: error: ") and err.count("\n") == 1
    assert message in err


def test_rate_saved_game_and_csv_table(tmp_path, capsys):
    rps = metaeval.MetaGame.from_matrix([[0, -1, 1], [1, 0, -1], [-1, 1, 0]],
                                        strategy_names=[["R", "P", "S"]] * 2)
    rps.save(tmp_path / "rps.npz")
    assert main(["rate", str(tmp_path / "rps.npz"), "--rater", "uniform"]) == 0
    out = capsys.readouterr().out
    assert "rating" in out and out.count("\n") == 7
    (tmp_path / "scores.csv").write_text("agent,t1,t2\na,1,0\nb,0,1\nc,0,0\n")
    assert main(["rate", str(tmp_path / "scores.csv"), "--rater", "uniform"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: float(line.split()[2]) for line in out.splitlines()[1:-1]}
    assert lines == {"a": pytest.approx(0.5), "b": pytest.approx(0.5), "c": pytest.approx(0.0)}
    assert (tmp_path / "scores_2p_uniform.png").stat().st_size > 0


def test_rate_a_table_as_a_three_player_game(tmp_path, capsys):
    """Agents ranked by their deviation ratings, and the chart of per-task contributions."""
    (tmp_path / "scores.csv").write_text("# a source line\ngame,x,y,z\ng1,3,2,1\ng2,1,3,2\ng3,2,1,3\ng4,3,1,2\n")
    plot = tmp_path / "chart.png"
    assert main(["rate", str(tmp_path / "scores.csv"), "--layout", "columns", "--game", "3p",
                 "--rater", "deviation", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["rank", "agent", "rating"] and out[-1] == f"plot: {plot}"
    expected = metaeval.rate(data.agent_vs_agent_vs_task(data.read_scores(tmp_path / "scores.csv", agents="columns")),
                             "deviation").ratings[0]
    ranked = [line.split() for line in out[1:-1]]
    assert [float(r[2]) for r in ranked] == pytest.approx(sorted(expected, reverse=True), abs=1e-6)
    assert plot.stat().st_size > 0 and not list(tmp_path.glob(".*.tmp"))
    assert main(["rate", str(tmp_path / "scores.csv"), "--game", "4p"]) == 2
    assert "invalid choice: '4p'" in capsys.readouterr().err


def test_evolve_then_plot(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["evolve", "--game", "kuhn_3p", "--rater", "uniform", "--iterations", "2", "--out", str(out)]) == 0
    (out / "cce_gap.png").unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "cce_gap.png").stat().st_size > 0


def test_compare_writes_one_comparison(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "--game", "kuhn_3p", "--raters", "uniform,deviation", "--seeds", "2",
                 "--iterations", "2", "--jobs", "2", "--out", str(out)])
    assert code == 0
    final = (out / "final.csv").read_text().splitlines()
    assert final[0].startswith("rater,mean,std") and len(final) == 3
    comparison = (out / "comparison.csv").read_text().splitlines()
    assert len(comparison) == 1 + 2 * 2 * 2
    assert (out / "deviation" / "seed1" / "iterations.jsonl").exists()
    assert (out / "paired.csv").read_text().startswith("rater,baseline,mean")
    (out / "payoff.png").unlink()
    assert main(["plot", str(out)]) == 0 and (out / "payoff.png").exists()


def test_sigkill_mid_run_then_resume_equals_uninterrupted(tmp_path):
    args = ["evolve", "--game", "kuhn_3p", "--rater", "deviation", "--iterations", "12", "--seed", "5"]
    whole = tmp_path / "whole"
    subprocess.run(metaeval_command(*args, "--out", whole), check=True, capture_output=True)

    killed = tmp_path / "killed"
    process = subprocess.Popen(metaeval_command(*args, "--out", killed), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while len(rundir.read_records(killed)) < 3 and time.time() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done = len(rundir.read_records(killed))
    assert 3 <= done < 12, "the run must be killed part-way"

    subprocess.run(metaeval_command(*args, "--out", killed), check=True, capture_output=True)
    assert without_timings(rundir.read_records(killed)) == without_timings(rundir.read_records(whole))
    a = np.load(whole / "population.npz")
    b = np.load(killed / "population.npz")
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
