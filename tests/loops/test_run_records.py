"""Run directories that say exactly what made them (issue 27, defects 3, 4, 5, 10, 11, 17):
what psro, pbt, evolve, compare and the study record, refuse and recover."""

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from bench import kills
from metaeval import MetaEvalError, spiel
from metaeval.training import oracles
from metaeval.runs import rundir
from metaeval.cli import main
from metaeval.loops.evolve import EvolveConfig, Evolution, evolve
from metaeval.loops.pbt import PBT, PBTConfig, pbt
from metaeval.loops.psro import PSRO, PSROConfig, psro
from tests.conftest import without_timings

PSRO_SMALL = PSROConfig(game="kuhn_2p", solver="nash", iterations=4, seed=2)
PBT_SMALL = PBTConfig(game="kuhn_3p", steps=4, interval=2, population=4, episodes_per_step=30, seed=3)


def snapshot(path):
    """Every file under ``path`` with its bytes (to show that nothing was written)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def one_line_error(capsys, args, message):
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("metaeval: error: ") and err.count("\n") == 1, err
    assert message in err, err
    return err


# -- 3: a custom oracle is recorded as such, and a resume that cannot reproduce it is refused
def drawn_best_response(evaluator, player, sigma, rng):
    """A custom oracle (the built-in jpsro under another name)."""
    return oracles.jpsro(evaluator, player, sigma, rng)


def test_a_custom_oracle_is_recorded_by_name_and_a_resume_with_another_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    psro(replace(PSRO_SMALL, iterations=2), out=out, oracle=drawn_best_response, progress=False)
    settings = rundir.read_json(out / rundir.CONFIG)["settings"]
    assert settings["oracle"] == f"{__name__}.drawn_best_response" and settings["custom_oracle"] is True
    before = snapshot(out)
    one_line_error(capsys, ["psro", "--game", "kuhn_2p", "--solver", "nash", "--iterations", "4", "--seed", "2",
                            "--out", out], "different oracle")
    with pytest.raises(MetaEvalError, match="different oracle"):
        PSRO(PSRO_SMALL, out=out, oracle=lambda *args: None)
    assert snapshot(out) == before
    resumed = psro(PSRO_SMALL, out=out, oracle=drawn_best_response, progress=False)  # the same oracle resumes
    assert len(resumed) == 4 and len(rundir.read_records(out)) == 4
    assert PSRO.title_of(rundir.read_json(out / rundir.CONFIG)["settings"]).startswith(
        f"kuhn_2p, custom oracle {__name__}.drawn_best_response")
    assert main(["plot", str(out)]) == 0


# -- 4: population.npz is the population the last record rates
def saved_ids(out):
    population = spiel.Population.load(out / "population.npz")
    return [list(ids) for ids in population.ids]


@pytest.mark.parametrize("loop", ["psro", "pbt", "evolve"])
def test_the_saved_population_is_the_one_the_last_record_rates(tmp_path, loop):
    if loop == "psro":
        records = psro(PSRO_SMALL, out=tmp_path, progress=False)
        assert saved_ids(tmp_path) != [ids + added for ids, added in  # the oracles' last policies are not in it
                                       zip(records[-1]["policy_ids"], records[-1]["added"])]
    elif loop == "pbt":
        records = pbt(PBT_SMALL, out=tmp_path, progress=False)
        assert "discarded" in records[-1]  # the last step exploited: its replacements are not in it
    else:
        records = evolve(EvolveConfig(game="kuhn_3p", rater="uniform", iterations=2, population=4), out=tmp_path,
                         progress=False)
    assert saved_ids(tmp_path) == records[-1]["policy_ids"]
    # and so after a resume that has nothing left to run
    (tmp_path / "population.npz").unlink()
    {"psro": lambda: psro(PSRO_SMALL, out=tmp_path, progress=False),
     "pbt": lambda: pbt(PBT_SMALL, out=tmp_path, progress=False),
     "evolve": lambda: evolve(EvolveConfig(game="kuhn_3p", rater="uniform", iterations=2, population=4),
                              out=tmp_path, progress=False)}[loop]()
    assert saved_ids(tmp_path) == records[-1]["policy_ids"]


def test_the_saved_psro_population_has_the_recorded_exploitability(tmp_path):
    from metaeval.training.evaluator import Evaluator

    records = psro(PSRO_SMALL, out=tmp_path, progress=False)
    evaluator = Evaluator("kuhn_2p", population=spiel.Population.load(tmp_path / "population.npz"))
    assert evaluator.exploitability() == pytest.approx(records[-1]["exploitability"], abs=1e-12)


# -- 5: a rater that cannot rate the game is refused before anything is written
def test_pbt_refuses_a_rater_that_cannot_rate_the_game_before_writing(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["pbt", "--game", "leduc_2p", "--steps", "2", "--interval", "1", "--population", "4",
            "--episodes-per-step", "5", "--out", out]
    one_line_error(capsys, [*args, "--rater", "elo"], "rater 'elo' cannot rate the meta-games of leduc")
    assert not out.exists()
    one_line_error(capsys, [*args[:-2], "--rater", "alpharank", "--option", "alpha=-1", "--out", out], "alpha")
    assert not out.exists()


def test_psro_refuses_a_pruning_rater_that_cannot_rate_the_game(tmp_path):
    with pytest.raises(MetaEvalError, match="rater 'elo' cannot rate"):
        PSRO(replace(PSRO_SMALL, cap=2, prune_by="elo"), out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


# -- 10: --out refuses a directory that holds someone's files, and an empty path
@pytest.mark.parametrize("command", [
    ["psro", "--game", "kuhn_2p", "--iterations", "1"],
    ["pbt", "--steps", "1", "--population", "4", "--episodes-per-step", "5"],
    ["evolve", "--iterations", "1", "--population", "4"],
    ["compare", "--raters", "uniform", "--seeds", "1", "--iterations", "1", "--population", "4"],
])
def test_a_directory_holding_no_run_is_not_overwritten(tmp_path, capsys, command):
    (tmp_path / "summary.csv").write_text("precious\n")
    one_line_error(capsys, [*command, "--out", tmp_path], "is not empty and holds no metaeval run")
    assert snapshot(tmp_path) == {"summary.csv": b"precious\n"}
    one_line_error(capsys, [*command, "--out", ""], "an empty path")
    one_line_error(capsys, [*command, "--out", " "], "an empty path")


def test_an_empty_directory_or_one_holding_only_ray_logs_is_used(tmp_path):
    (tmp_path / rundir.RAY_LOGS).mkdir()
    run = rundir.RunDirectory.open(tmp_path, "test", settings={}, result_settings={})
    run.close()


# -- 11: one writer per run directory; no duplicate runs; workers die with their parent
def test_a_second_writer_is_refused_while_the_first_holds_the_directory(tmp_path):
    first = PSRO(PSRO_SMALL, out=tmp_path)
    first.step()  # creates and locks the directory
    before = snapshot(tmp_path)
    with pytest.raises(MetaEvalError, match="in use"):
        PSRO(PSRO_SMALL, out=tmp_path)
    with pytest.raises(MetaEvalError, match="in use"):
        PBT(PBT_SMALL, out=tmp_path)  # refused before its kind is even read
    assert snapshot(tmp_path) == before
    first.run(progress=False)  # releases it at the end
    assert len(psro(PSRO_SMALL, out=tmp_path, progress=False)) == 4


def test_a_second_writer_that_began_on_a_fresh_directory_is_refused(tmp_path):
    out = tmp_path / "run"
    first, second, late = (PSRO(replace(PSRO_SMALL, seed=seed), out=out) for seed in (2, 5, 6))  # all see no run
    first.step()
    with pytest.raises(MetaEvalError, match="in use"):
        second.step()
    first.run(progress=False)
    with pytest.raises(MetaEvalError, match="began a run in .* meanwhile"):
        late.step()
    assert [r["iteration"] for r in rundir.read_records(out)] == [0, 1, 2, 3]
    assert rundir.read_json(out / rundir.CONFIG)["settings"]["seed"] == 2


def test_two_processes_on_one_directory_one_refused_in_one_line(tmp_path):
    out = tmp_path / "run"
    argv = [*kills.COMMANDS["pbt"], "--steps", "100000", "--out", str(out)]  # runs until stopped
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not (out / rundir.LOG).exists():
        assert first.poll() is None, first.stderr.read()
        time.sleep(0.02)
    second = subprocess.run([*argv[:-2], "--seed", "1", "--out", str(out)], capture_output=True, text=True)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 143
    assert second.returncode == 2 and second.stderr.count("\n") == 1 and "in use" in second.stderr, second.stderr
    config = rundir.read_json(out / rundir.CONFIG)
    assert config["settings"]["seed"] == 0 and len(config["sessions"]) == 1
    records = rundir.read_records(out)
    assert [r["iteration"] for r in records] == list(range(len(records)))


def test_compare_refuses_duplicate_raters_before_writing(tmp_path, capsys):
    one_line_error(capsys, ["compare", "--raters", "uniform,uniform", "--seeds", "1", "--iterations", "1",
                            "--out", tmp_path / "cmp"], "the raters of a comparison must differ: uniform given twice")
    assert not (tmp_path / "cmp").exists()


def test_pool_workers_die_with_their_parent_even_by_sigkill():
    # A parent that starts a worker the compare way and then sleeps; the test kills the parent.
    script = ("import multiprocessing, os, sys, time\n"
              "from metaeval.loops.compare import _worker_signals\n"
              "with multiprocessing.Pool(1, initializer=_worker_signals, initargs=(os.getpid(),)) as pool:\n"
              "    print(pool.apply(os.getpid), flush=True)\n"
              "    time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    started, _, _ = select.select([parent.stdout], [], [], 120)
    if not started:
        kill_with_children(parent)
        pytest.fail("the pool's worker did not start")
    worker = int(parent.stdout.readline())
    assert kills.alive(worker)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while kills.alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    assert not kills.alive(worker)


def test_sigkill_of_compare_ends_its_workers_and_a_rerun_recovers(tmp_path):
    out = tmp_path / "cmp"
    argv = [*kills.COMMANDS["compare"], "--out", str(out)]
    # runs long enough that a surviving worker would go on writing for minutes
    parent = subprocess.Popen([*argv, "--iterations", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = set()
    while not list(out.glob("*/seed*/" + rundir.LOG)) or len(workers) < 2:
        assert parent.poll() is None
        workers |= kills.descendants(parent.pid)
        time.sleep(0.02)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while any(map(kills.alive, workers)) and time.time() < deadline:
        time.sleep(0.05)
    orphans = [pid for pid in workers if kills.alive(pid)]
    for pid in orphans:  # workers of the comparison this test started
        os.kill(pid, signal.SIGKILL)
    assert not orphans
    rerun = subprocess.run(argv, capture_output=True, text=True)  # 5 iterations: resumes, is not told of damage
    assert rerun.returncode == 0, rerun.stderr
    assert all(len(rundir.read_records(run)) >= 5 for run in out.glob("*/seed*"))


def kill_with_children(process):
    """SIGKILL a process this test started and its descendants."""
    for pid in [*kills.descendants(process.pid), process.pid]:
        os.kill(pid, signal.SIGKILL)
    process.wait()


def test_sigterm_ends_the_study_and_its_workers(tmp_path):
    out = tmp_path / "study"
    argv = [sys.executable, "-m", "metaeval.loops.study", "raters", "--games", "kuhn_3p", "--replacements", "random",
            "--seeds", "2", "--iterations", "200", "--jobs", "2", "--out", str(out)]
    study = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    workers = set()
    while len(workers) < 2:
        assert study.poll() is None, study.stderr.read()
        workers |= kills.descendants(study.pid)
        time.sleep(0.05)
    study.send_signal(signal.SIGTERM)
    code = study.wait(timeout=60)
    deadline = time.time() + 10
    while any(map(kills.alive, workers)) and time.time() < deadline:
        time.sleep(0.05)
    orphans = [pid for pid in workers if kills.alive(pid)]
    for pid in orphans:  # workers of the study this test started
        os.kill(pid, signal.SIGKILL)
    assert not orphans
    err = study.stderr.read()
    assert code == 143 and err.startswith("metaeval: terminated;") and err.count("\n") == 1, err


@pytest.mark.parametrize("loop", ["psro", "pbt", "compare", "study"])
def test_sigkill_at_random_points_then_resume_gives_the_uninterrupted_records(tmp_path, loop):
    """Three kills (``python -m bench.kills`` makes 20 per loop); no orphan, same records."""
    tally = kills.kill_trials(loop, 3, tmp_path, np.random.default_rng(7), per_trial=3)
    assert tally.problems == [] and tally.differing == []
    assert tally.kills == 3 and tally.orphans == 0


# -- 17: records are checked against their recomputation; damaged logs recover
def run_loop(loop, out, steps=None):
    if loop == "psro":
        return psro(PSRO_SMALL if steps is None else replace(PSRO_SMALL, iterations=steps), out=out, progress=False)
    return pbt(PBT_SMALL if steps is None else replace(PBT_SMALL, steps=steps), out=out, progress=False)


@pytest.mark.parametrize("loop", ["psro", "pbt"])
def test_an_edited_record_is_detected_when_the_checkpoint_is_gone(tmp_path, loop):
    """A record edited with its checksum made anew (what no damage does) is still caught by its recomputation."""
    run_loop(loop, tmp_path, steps=3)
    lines = (tmp_path / rundir.LOG).read_text().splitlines(keepends=True)
    edited = json.loads(lines[1])
    edited["cce_gap"] = 123
    (tmp_path / rundir.LOG).write_text(lines[0] + rundir.record_line(edited) + "".join(lines[2:]))
    (tmp_path / rundir.STATE).unlink()
    with pytest.raises(MetaEvalError, match="iteration 1 recomputed differs from its record"):
        run_loop(loop, tmp_path)
    assert rundir.read_records(tmp_path)[1]["cce_gap"] == 123  # kept for the user to see, not used


@pytest.mark.parametrize("loop", ["psro", "pbt"])
@pytest.mark.parametrize("damage", ["garbage", "truncate", "delete_state"])
def test_a_damaged_log_recovers_as_evolve_does(tmp_path, loop, damage, caplog):
    reference = without_timings(json.loads(json.dumps(run_loop(loop, tmp_path / "whole"))))
    out = tmp_path / "run"
    run_loop(loop, out, steps=3)
    log = out / rundir.LOG
    lines = log.read_text().splitlines(keepends=True)
    if damage == "garbage":  # one damaged line where a record was
        log.write_text(lines[0] + "garbage\n" + "".join(lines[2:]))
    elif damage == "truncate":  # cut in the middle of the second record
        log.write_text(lines[0] + lines[1][:40])
    else:
        (out / rundir.STATE).unlink()
    with caplog.at_level("WARNING", logger="metaeval"):
        records = run_loop(loop, out)
    if damage != "delete_state":
        assert "restarts from iteration 0" in caplog.text
    assert without_timings(records) == reference
    assert without_timings(rundir.read_records(out)) == reference
    assert [json.loads(line)["iteration"] for line in log.read_text().splitlines()] == list(range(4))
    assert saved_ids(out) == reference[-1]["policy_ids"]
