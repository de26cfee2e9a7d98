"""SIGKILL at random points, resume, compare: the run-directory guarantees of psro, pbt,
compare and the study, checked from outside the process.

    python -m bench.kills [--kills 20] [--loops psro,pbt,compare,study] [--seed 0] [--work DIR]

For each loop a small command is run once uninterrupted (the reference). Then, trial by
trial, the same command is started in a fresh directory and killed with SIGKILL at a
random time (drawn from the seeded generator, up to the reference's wall time) up to five
times, each time started again on the same directory, and finally run to the end. After
every kill the process's descendants (pool workers) must be gone within seconds (an
orphan is counted, then killed); at the end the records must equal the reference's bit
for bit, but for wall-clock ``seconds``. Then two writers on one directory: the same
command started twice at once on a fresh directory, and a second command (another seed)
started on a directory a first one is writing: each time exactly one finishes (with the
reference's records) and the other is refused with one line and exit status 2 (the first
is stopped with SIGSTOP while the second runs, so that it is still writing).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from metaeval.runs import rundir

STUDY = [sys.executable, "-m", "metaeval.loops.study", "raters", "--games", "kuhn_3p", "--replacements", "random",
         "--seeds", "2", "--iterations", "3", "--jobs", "2"]
METAEVAL = [sys.executable, "-m", "metaeval.cli"]
COMMANDS = {
    "psro": [*METAEVAL, "psro", "--game", "kuhn_3p", "--solver", "mgcce", "--iterations", "6", "--cap", "4",
             "--prune-by", "uniform"],
    "pbt": [*METAEVAL, "pbt", "--game", "kuhn_3p", "--steps", "6", "--interval", "2", "--population", "4",
            "--episodes-per-step", "100"],
    "compare": [*METAEVAL, "compare", "--game", "kuhn_3p", "--raters", "uniform,deviation", "--seeds", "2",
                "--iterations", "5", "--population", "4", "--jobs", "2"],
    "study": STUDY,
}
"""Small commands, each without its ``--out`` (and ``--seed``, added for the second writer)."""


def command(loop: str, out: Path, seed: int | None = None) -> list[str]:
    seeds = [] if seed is None else ["--seed", str(seed)] if loop in ("psro", "pbt") else []
    return [*COMMANDS[loop], *seeds, "--out", str(out)]


def _runs(out: Path) -> list[Path]:
    """The run directories in ``out`` (itself, or a comparison's or study's runs)."""
    return sorted(path.parent for path in out.rglob(rundir.CONFIG) if (path.parent / rundir.LOG).exists())


def outcome(out: Path) -> dict:
    """Everything a run leaves that does not depend on wall-clock time: every run's records
    without ``seconds``, its ``population.npz`` arrays, and the study's records without
    their ``seconds`` column."""
    result = {}
    for run in _runs(out):
        name = str(run.relative_to(out))
        result[name] = [rundir.without_timings(r) for r in rundir.read_records(run)]
        with np.load(run / "population.npz") as data:
            result[f"{name}/population"] = {key: data[key].tolist() for key in data.files}
    for record in sorted(out.rglob("seed*.csv.gz")):
        lines = gzip.decompress(record.read_bytes()).decode().splitlines()
        keep = [i for i, column in enumerate(lines[0].split(",")) if column != "seconds"]
        result[str(record.relative_to(out))] = [[cells[i] for i in keep] for cells in (line.split(",") for line in lines)]
    return result


def descendants(pid: int) -> set[int]:
    """Every living descendant of ``pid`` (from /proc)."""
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = {int(c) for c in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += children - found
            found |= children
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Tally:
    kills: int = 0
    orphans: int = 0
    trials: int = 0
    differing: list[str] = field(default_factory=list)
    writer_checks: int = 0
    writer_failures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def kill_after(process: subprocess.Popen, seconds: float, tally: Tally) -> bool:
    """SIGKILL ``process`` after ``seconds`` unless it ended first; count orphans (and end
    them). Returns whether it was killed."""
    deadline = time.monotonic() + seconds
    family: set[int] = set()
    while time.monotonic() < deadline and process.poll() is None:
        family |= descendants(process.pid)
        time.sleep(0.01)
    if process.poll() is not None:
        return False
    family |= descendants(process.pid)
    process.send_signal(signal.SIGKILL)  # only the process this script started
    process.wait()
    tally.kills += 1
    end = time.monotonic() + 10
    while any(alive(pid) for pid in family) and time.monotonic() < end:
        time.sleep(0.05)
    orphans = [pid for pid in family if alive(pid)]
    tally.orphans += len(orphans)
    for pid in orphans:  # descendants of the process this script started
        os.kill(pid, signal.SIGKILL)
    return True


def finish(argv: list[str], tally: Tally, what: str) -> bool:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        tally.problems.append(f"{what}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
    return result.returncode == 0


def kill_trials(loop: str, kills: int, work: Path, rng: np.random.Generator, per_trial: int = 5) -> Tally:
    """Trials of up to ``per_trial`` kills each until ``kills`` kills were made."""
    tally = Tally()
    reference = work / f"{loop}-reference"
    start = time.monotonic()
    if not finish(command(loop, reference), tally, f"{loop} reference"):
        return tally
    wall = time.monotonic() - start
    expected = outcome(reference)
    while tally.kills < kills and tally.trials < 4 * kills:
        tally.trials += 1
        out = work / f"{loop}-trial{tally.trials}"
        for _ in range(min(per_trial, kills - tally.kills)):
            kill_after(_start(command(loop, out)), float(rng.uniform(0, wall)), tally)
        if finish(command(loop, out), tally, f"{loop} trial {tally.trials}") and outcome(out) != expected:
            tally.differing.append(str(out))
    return tally


def _refused_in_one_line(process: subprocess.Popen) -> bool:
    err = process.stderr.read()
    return process.returncode == 2 and err.count("\n") == 1 and " error: " in err


def two_writers(loop: str, work: Path, tally: Tally) -> None:
    """Two writers at once on a fresh directory, and a second writer (another seed) on a
    directory being written: one finishes with the reference's records, the other is refused."""
    expected = outcome(work / f"{loop}-reference")
    together = work / f"{loop}-together"
    first, second = _start(command(loop, together)), _start(command(loop, together))
    codes = sorted([first.wait(), second.wait()])
    refused = [p for p in (first, second) if p.returncode == 2]
    tally.writer_checks += 1
    if codes != [0, 2] or not _refused_in_one_line(refused[0]) or outcome(together) != expected:
        tally.writer_failures.append(f"{loop} started twice at once: exit statuses {codes}")
    running = work / f"{loop}-running"
    first = _start(command(loop, running))
    while not any(running.rglob(rundir.LOG)) and first.poll() is None:
        time.sleep(0.02)
    first.send_signal(signal.SIGSTOP)  # holds its lock, frozen, until the second writer has ended
    second = _start(command(loop, running, seed=1))
    second.wait()
    first.send_signal(signal.SIGCONT)
    first.wait()
    tally.writer_checks += 1
    if first.returncode != 0 or not _refused_in_one_line(second) or outcome(running) != expected:
        tally.writer_failures.append(f"{loop} second writer on a running directory: exit statuses "
                                     f"{first.returncode} and {second.returncode}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs per loop")
    parser.add_argument("--loops", default=",".join(COMMANDS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=None, help="where the runs go (default: a new temporary directory)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="kills-"))
    rng = np.random.default_rng(args.seed)
    print("| loop | kills | trials | orphans | runs differing | two-writer checks failed | other problems |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for loop in args.loops.split(","):
        start = time.monotonic()
        tally = kill_trials(loop, args.kills, work, rng)
        two_writers(loop, work, tally)
        problems = "; ".join(tally.problems + tally.differing + tally.writer_failures) or "none"
        print(f"| {loop} | {tally.kills} | {tally.trials} | {tally.orphans} | {len(tally.differing)} | "
              f"{len(tally.writer_failures)} of {tally.writer_checks} | {problems} |"
              f" <!-- {time.monotonic() - start:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
