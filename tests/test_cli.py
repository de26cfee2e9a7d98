import json
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
from metaeval.runs import rundir
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
        (["evolve", "--out", "{tmp}/file/sub"], "is not a writable directory"),
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
    assert "rating" in out and out.count("\n") == 8 and out.splitlines()[-1].startswith("ranks: ratings within")
    (tmp_path / "scores.csv").write_text("agent,t1,t2\na,1,0\nb,0,1\nc,0,0\n")
    assert main(["rate", str(tmp_path / "scores.csv"), "--rater", "uniform"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: float(line.split()[2]) for line in out.splitlines()[1:-2]}
    assert lines == {"a": pytest.approx(0.5), "b": pytest.approx(0.5), "c": pytest.approx(0.0)}
    assert (tmp_path / "scores_2p_uniform.png").stat().st_size > 0


def test_rate_a_table_as_a_three_player_game(tmp_path, capsys):
    """Agents ranked by their deviation ratings, and the chart of per-task contributions."""
    (tmp_path / "scores.csv").write_text("# a source line\ngame,x,y,z\ng1,3,2,1\ng2,1,3,2\ng3,2,1,3\ng4,3,1,2\n")
    plot = tmp_path / "chart.png"
    assert main(["rate", str(tmp_path / "scores.csv"), "--layout", "columns", "--game", "3p",
                 "--rater", "deviation", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["rank", "agent", "rating"] and out[-1] == f"plots: {plot}"
    expected = metaeval.rate(data.agent_vs_agent_vs_task(data.read_scores(tmp_path / "scores.csv", agents="columns")),
                             "deviation").ratings[0]
    ranked = [line.split() for line in out[1:-2]]
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


def _one_line_error(capsys, args, message):
    capsys.readouterr()  # only this command's output: earlier runs reported their progress
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("metaeval: error: ") and err.count("\n") == 1, err
    assert message in err


def test_evolve_and_compare_refuse_each_others_directories_and_write_nothing(tmp_path, capsys):
    quick = ["--iterations", "1", "--population", "4"]
    run, comparison = tmp_path / "run", tmp_path / "cmp"
    assert main(["evolve", "--rater", "uniform", *quick, "--out", str(run)]) == 0
    assert main(["compare", "--game", "kuhn_3p", "--raters", "uniform", "--seeds", "1", *quick,
                 "--out", str(comparison)]) == 0
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    _one_line_error(capsys, ["compare", "--raters", "uniform", "--seeds", "1", *quick, "--out", run],
                    "holds a 'evolve' run, not 'compare'")
    _one_line_error(capsys, ["evolve", *quick, "--out", comparison], "holds a 'compare' run, not 'evolve'")
    _one_line_error(capsys, ["compare", "--game", "sheriff", "--raters", "uniform", "--seeds", "1", *quick,
                             "--out", comparison], "different game")
    # a run inside the comparison that conflicts stops the whole command before any write
    _one_line_error(capsys, ["compare", "--raters", "uniform", "--seeds", "1", *quick, "--option", "x=1",
                             "--out", comparison], "has no option(s) x")
    after = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert after == before
    assert main(["plot", str(comparison)]) == 0


def test_plot_of_hand_edited_files_is_a_clear_error_or_skips_bad_records(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["evolve", "--rater", "uniform", "--iterations", "2", "--population", "4", "--out", str(run)]) == 0
    lines = (run / "iterations.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    del record["mean_payoff"]
    (run / "iterations.jsonl").write_text(lines[0] + "\n" + json.dumps(record) + "\n")
    assert main(["plot", str(run)]) == 0  # draws the valid record
    config = rundir.read_json(run / "config.json")
    del config["settings"]["rater"]  # with its checksum made anew, as a config of another metaeval
    rundir.write_json(run / "config.json", config)
    _one_line_error(capsys, ["plot", run], "lacks rater")
    _one_line_error(capsys, ["evolve", "--rater", "uniform", "--iterations", "2", "--population", "4",
                             "--out", run], "lacks rater")


# Prints the child's peak resident memory (KiB) and CPU seconds: the work it did, whatever
# else the machine is running (its wall time doubles on a loaded machine).
# Peak resident KiB from VmHWM, the high-water mark of this program's own memory: ru_maxrss
# would also count the forked copy of the test process from before exec (Linux keeps the
# larger of the two), so a test process grown past 1 GiB made every child look as large.
MEASURED = ("import os, re, sys; from metaeval.cli import main; code = main(sys.argv[1:]); "
            "peak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
            "times = os.times(); print(peak, times.user + times.system); sys.exit(code)")


@pytest.mark.parametrize("args, message", [
    (["--game", "chess", "--mode", "exact"], "enumerating chess() (at least"),  # auto would sample it
    (["--population", "2000"], "2000 x 2000 x 2000 policies (8e+09 joints) needs about"),
])
def test_work_that_cannot_fit_is_refused_in_seconds_with_little_memory(tmp_path, args, message):
    result = subprocess.run([sys.executable, "-c", MEASURED, "evolve", *args, "--out", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "over the memory budget of 4 GiB" in result.stderr
    peak_kib, cpu_seconds = result.stdout.split()
    assert int(peak_kib) < 1 << 20  # below 1 GiB
    assert float(cpu_seconds) < 10  # importing the package is most of it
    assert not (tmp_path / "run").exists()


def test_max_memory_option(tmp_path, capsys):
    _one_line_error(capsys, ["evolve", "--max-memory", "1K", "--out", tmp_path / "a"], "memory budget of 1 KiB")
    _one_line_error(capsys, ["evolve", "--max-memory", "lots", "--out", tmp_path / "a"], "a memory size is")


def _children(pid):
    try:
        return {int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()}
    except OSError:
        return set()


def _wait_for(predicate, seconds=120):
    deadline = time.time() + seconds
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_sigint_stops_a_parallel_compare_at_once(tmp_path):
    out = tmp_path / "cmp"
    process = subprocess.Popen(
        metaeval_command("compare", "--game", "kuhn_3p", "--raters", "uniform,nash,alpharank,deviation",
                         "--seeds", "3", "--iterations", "200", "--population", "4", "--jobs", "2", "--out", out),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # As from an interactive shell: a test process that ignores SIGINT (as after a test
        # of the workers' signal set-up) would pass SIG_IGN on to the command.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for(lambda: any(out.glob("*/seed*/iterations.jsonl")))
    workers = _children(process.pid)
    started = len(list(out.glob("*/seed*/config.json")))
    start = time.perf_counter()
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=60)
    seconds = time.perf_counter() - start
    err = process.stderr.read()
    assert code == 130 and err.startswith("metaeval: interrupted;") and err.count("\n") == 1, err
    assert seconds < 5
    assert len(list(out.glob("*/seed*/config.json"))) <= started + 2  # at most the runs in flight
    assert not list(out.glob("*/seed*/population.npz"))  # no run went on to finish
    assert workers and not any(os.path.exists(f"/proc/{pid}") for pid in workers)
