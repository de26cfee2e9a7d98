"""Every numeric option of every command, given a negative, zero, huge, NaN, infinite or
non-numeric value: a one-line error (exit 2) or a start of the work, within seconds and
within the memory budget; never a traceback.

The options are read from the parsers themselves (``metaeval.cli`` and the study's), so a
new option is fuzzed without touching this file. The loops' iterations are replaced by a
sentinel: a value that passes validation reaches the work and stops there, so every case
returns at once; what is checked is everything before it (parsing, configs, budgets).
"""

import argparse
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from metaeval import cli
from metaeval.loops import study
from tests.test_cli import MEASURED

VALUES = ["-1", "0", "1e300", "99999999999999999999", "nan", "inf", "abc"]
BUDGET = 256 << 20
"""The budget the cases run under (METAEVAL_MAX_MEMORY), and the most any may allocate."""
SECONDS = 20
"""A case still running after this long hangs (each takes well under a second unloaded)."""


class Reached(Exception):
    """Raised where the work begins: the arguments passed every check before it."""


def stop(*args, **kwargs):
    raise Reached


def subcommands(parser):
    """``{name: subparser}`` of an argparse parser."""
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def numeric_options(parser) -> list[str]:
    """The options whose value is parsed as a number."""
    found = []
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or action.type is None or action.choices:
            continue
        try:
            number = isinstance(action.type("1"), (int, float))
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            number = False
        if number:
            found.append(action.option_strings[-1])
    return found


def base_arguments(tmp_path, program: str, command: str) -> list[str]:
    """The arguments a command needs besides the fuzzed option."""
    if command == "rate":
        path = tmp_path / "scores.csv"
        pd.DataFrame(np.eye(3), index=list("abc"), columns=list("xyz")).to_csv(path)
        return [str(path), "--rater", "uniform", "--plot", str(tmp_path / "chart.png")]
    if command == "battles":
        path = tmp_path / "battles.csv"
        pd.DataFrame({"model_a": ["a", "b", "c", "a"], "model_b": ["b", "c", "a", "c"],
                      "winner": ["model_a", "model_a", "model_a", "model_b"]}).to_csv(path, index=False)
        return [str(path), "--prior", "1"]
    if command == "plot":
        return [str(tmp_path)]
    extra = ["--records", str(tmp_path / "records")] if command == "check" else []
    return [*extra, "--out", str(tmp_path / "out")]


PROGRAMS = {"metaeval": (cli.build_parser, cli.main), "study": (study.build_parser, study.main)}
CASES = [(program, command, option)
         for program, (build, _) in PROGRAMS.items()
         for command, parser in subcommands(build()).items()
         for option in numeric_options(parser) or [None]]
# Option values passed to raters and learners (``--option``, ``--learner-option``).
CASES += [("metaeval", "rate", "--option alpha="), ("metaeval", "rate", "--option population_size="),
          ("metaeval", "pbt", "--learner-option step_size="), ("metaeval", "pbt", "--learner-option epsilon=")]


def test_every_command_and_numeric_option_is_covered():
    commands = {(program, command) for program, command, _ in CASES}
    assert commands == {("metaeval", c) for c in ("evolve", "compare", "psro", "pbt", "rate", "battles", "plot")} | {
        ("study", c) for c in ("raters", "check", "pbt-vs-random")}
    options = {(command, option) for _, command, option in CASES}
    assert {("psro", "--max-memory"), ("pbt", "--max-memory"), ("battles", "--bootstrap"), ("compare", "--jobs"),
            ("raters", "--jobs"), ("pbt-vs-random", "--seeds"), ("evolve", "--discard-fraction")} <= options


@pytest.fixture
def work_stops_at_once(monkeypatch):
    from metaeval.distributed import session
    from metaeval.loops import compare, evolve, pbt, psro

    for loop in (evolve.Evolution, psro.PSRO, pbt.PBT):
        monkeypatch.setattr(loop, "step", stop)
    monkeypatch.setattr(compare, "run_all", stop)
    monkeypatch.setattr(study, "run_all", stop)
    monkeypatch.setattr(session, "ensure_ray", stop)
    monkeypatch.setenv("METAEVAL_MAX_MEMORY", str(BUDGET))


def _alarm(signum, frame):
    raise TimeoutError(f"no answer within {SECONDS} s")


@pytest.mark.parametrize("program, command, option", CASES)
def test_numeric_option_values(tmp_path, capsys, work_stops_at_once, program, command, option):
    _, entry = PROGRAMS[program]
    base = base_arguments(tmp_path, program, command)
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for value in VALUES if option else [None]:
            if option is None:
                fuzzed = []
            elif option.endswith("="):
                name, key = option.split()
                fuzzed = [name, key + value]
            else:
                fuzzed = [option, value]
            argv = [command, *base, *fuzzed]
            tracemalloc.start()
            start = time.perf_counter()
            signal.alarm(SECONDS)
            try:
                code = entry(argv)
            except Reached:
                code = "reached"
            except SystemExit as exit:
                code = exit.code or 0
            finally:
                signal.alarm(0)
                seconds = time.perf_counter() - start
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            err = capsys.readouterr().err
            case = f"{program} {' '.join(argv)}"
            assert code in (0, 2, "reached"), f"{case}: exit {code}, {err}"
            if code == 2:
                assert err.startswith("metaeval: error: ") and err.count("\n") == 1, f"{case}: {err}"
            assert "Traceback" not in err, case
            assert peak < BUDGET, f"{case}: allocated {peak / 2**20:.0f} MiB"
            assert seconds < SECONDS, case
    finally:
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("argv", [
    ["evolve", "--population", "99999999999999999999", "--out", "{tmp}/e"],
    ["psro", "--iterations", "nan", "--out", "{tmp}/p"],
    ["pbt", "--population", "100000", "--out", "{tmp}/b"],
    ["battles", "{tmp}/missing.csv", "--bootstrap", "-1"],
    ["compare", "--seeds", "99999999999999999999", "--out", "{tmp}/c"],
])
def test_a_sample_in_a_fresh_process(tmp_path, argv):
    """The same in a child process: exit 2, one line, little memory, nothing written."""
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    result = subprocess.run([sys.executable, "-c", MEASURED, *argv], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("metaeval: error: "), result.stderr
    assert result.stderr.count("\n") == 1
    assert int(result.stdout.split()[0]) < 1 << 20  # peak resident KiB
    assert list(tmp_path.iterdir()) == []
