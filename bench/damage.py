"""Damaged run directories: every file a loop writes, damaged three ways, then resumed.

    python -m bench.damage [--loops evolve,psro,...] [--damages flip,truncate,delete] [--seed 0] [--work DIR]

For each loop a small command runs to ``ITERATIONS`` iterations (the run to damage) and,
in another directory, to one more (the reference, uninterrupted). Then for every file the
first run wrote and every damage (``flip``: the lowest bit of one byte at a seeded
position; ``truncate``: cut to half its length; ``delete``), a copy of the run directory
is damaged and the same command with one more iteration resumes it, in this process. A
case passes when the resume

- recovers: exit status 0, the records (but for ``seconds`` and ``memory``) and the
  ``population.npz`` arrays of every run equal the reference's, and no damaged line is
  left in a log; or
- refuses: exit status 2 and one line on stderr, naming the damaged file.

Anything else fails: a traceback, another exit status, a changed record kept, a refusal
that does not name the file. Prints each failure and the counts of cases (files x
damages x loops), recoveries, refusals and failures; exits 1 if any case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.kills import outcome
from metaeval.cli import main as metaeval
from metaeval.runs import rundir

ITERATIONS = 2
"""Iterations of the run that is damaged; the resume and the reference run one more."""

LOOPS = {
    "evolve": ["evolve", "--game", "kuhn_poker", "--rater", "uniform", "--population", "4"],
    "psro": ["psro", "--game", "kuhn_poker"],
    "psro-dqn": ["psro", "--game", "kuhn_poker", "--oracle", "dqn", "--oracle-episodes", "40"],
    "pbt-qlearning": ["pbt", "--game", "kuhn_poker", "--population", "4", "--episodes-per-step", "20"],
    "pbt-ppo": ["pbt", "--game", "kuhn_poker", "--population", "4", "--episodes-per-step", "16", "--learner", "ppo",
                "--learner-option", "hidden=[8]", "--learner-option", "num_envs=8",
                "--learner-option", "rollout_steps=4"],
    "compare": ["compare", "--game", "kuhn_poker", "--raters", "uniform,deviation", "--seeds", "1",
                "--population", "4"],
}
"""Small commands, without their number of iterations and ``--out``."""

DAMAGES = ("flip", "truncate", "delete")


def command(loop: str, iterations: int, out: Path) -> list[str]:
    steps = "--steps" if LOOPS[loop][0] == "pbt" else "--iterations"
    return [*LOOPS[loop], steps, str(iterations), "--quiet", "--out", str(out)]


def run(argv: list[str]) -> tuple[int | str, str]:
    """``metaeval argv`` in this process: its exit status (or the exception that escaped it,
    as ``"Type: message"``) and its stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = metaeval(argv)
        except BaseException as exc:  # a traceback: the failure this bench looks for
            code = f"{type(exc).__name__}: {exc}"
    return code, err.getvalue()


def damage(path: Path, kind: str, rng: np.random.Generator) -> None:
    """Damage the file at ``path`` in place: ``flip``, ``truncate`` or ``delete``."""
    if kind == "delete":
        path.unlink()
        return
    content = bytearray(path.read_bytes())
    if kind == "truncate":
        del content[len(content) // 2:]
    else:
        content[int(rng.integers(len(content)))] ^= 1
    path.write_bytes(bytes(content))


@dataclass(frozen=True)
class Case:
    loop: str
    file: str  # relative to the run directory
    damage: str
    result: str  # "recovered", "refused" or "failed: why"


def files_of(out: Path) -> list[str]:
    """Every file under ``out``, relative to it."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def resume_case(loop: str, base: Path, reference: dict, name: str, kind: str, work: Path, seed: int) -> Case:
    """Damage ``name`` of a copy of ``base`` by ``kind``, resume it and judge the result."""
    out = work / f"{loop}-{kind}-{name.replace('/', '_')}"
    shutil.copytree(base, out)
    damaged = out / name
    damage(damaged, kind, np.random.default_rng([seed, zlib.crc32(f"{loop}/{name}".encode())]))
    code, err = run(command(loop, ITERATIONS + 1, out))
    lines = err.splitlines()
    if code == 0:
        left = [line for path in out.rglob(rundir.LOG) for line in rundir.read_log(path.parent).damaged]
        result = ("recovered" if outcome(out) == reference and not left
                  else "failed: recovered to other records" if not left else "failed: damaged lines left in a log")
    elif code == 2 and len(lines) == 1 and str(damaged) in lines[0]:
        result = "refused"
    elif code == 2:
        result = f"failed: refused without naming the file in one line: {err.strip()!r}"
    else:
        result = f"failed: exit {code}; stderr ends {lines[-3:]}"
    shutil.rmtree(out)
    return Case(loop, name, kind, result)


def reference_runs(loop: str, work: Path) -> tuple[Path, dict]:
    """A run of ``loop`` to damage (its directory), and the outcome of an uninterrupted run
    with one more iteration (:func:`bench.kills.outcome`)."""
    base, whole = work / f"{loop}-base", work / f"{loop}-reference"
    for out, iterations in ((base, ITERATIONS), (whole, ITERATIONS + 1)):
        code, err = run(command(loop, iterations, out))
        if code != 0:
            raise RuntimeError(f"the {loop} command failed ({code}): {err}")
    return base, outcome(whole)


def loop_cases(loop: str, damages, work: Path, seed: int) -> list[Case]:
    """Every file of a small run of ``loop`` damaged each of ``damages`` ways, resumed."""
    base, reference = reference_runs(loop, work)
    return [resume_case(loop, base, reference, name, kind, work, seed) for name in files_of(base) for kind in damages]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", default=",".join(LOOPS), help="comma-separated, of: " + ", ".join(LOOPS))
    parser.add_argument("--damages", default=",".join(DAMAGES), help="comma-separated, of: " + ", ".join(DAMAGES))
    parser.add_argument("--seed", type=int, default=0, help="seed of the flipped bytes' positions")
    parser.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args(argv)
    loops, damages = args.loops.split(","), args.damages.split(",")
    unknown = sorted({*loops} - set(LOOPS)) + sorted({*damages} - set(DAMAGES))
    if unknown:
        parser.error(f"unknown loop or damage: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        cases = []
        for loop in loops:
            start = time.perf_counter()
            found = loop_cases(loop, damages, Path(scratch), args.seed)
            failed = [case for case in found if case.result.startswith("failed")]
            print(f"{loop}: {len(found)} cases ({len(found) // len(damages)} files x {len(damages)} damages), "
                  f"{sum(c.result == 'recovered' for c in found)} recovered, "
                  f"{sum(c.result == 'refused' for c in found)} refused, {len(failed)} failed "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
            for case in failed:
                print(f"  {case.file} {case.damage}: {case.result}", flush=True)
            cases += found
    failures = sum(case.result.startswith("failed") for case in cases)
    refused = sorted({(case.loop, case.file, case.damage) for case in cases if case.result == "refused"})
    print(f"refused (one line naming the file): {', '.join(f'{l}/{f} {d}' for l, f, d in refused) or 'none'}")
    print(f"total: {len(cases)} cases ({len(loops)} loops), {failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
