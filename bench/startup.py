"""Start-up: the CPU seconds each ``metaeval`` command spends before its work starts.

``python -m bench.startup [--repeats R]``

A command's start is the CPU time (user + system, from the operating system's account of
the finished child process) of ``metaeval COMMAND ...`` run with ``METAEVAL_EXIT_BEFORE_WORK``
set: Python starts, the arguments are parsed and checked, the command's modules are
imported, its settings are checked (a loop's game is loaded) and the command exits where
its work would start (the first iteration, the rating, the bootstrap, reading a run to
draw). Every command runs with its defaults, and with placeholder paths for its required
arguments (a run directory that does not exist, an input file that is never read). The
commands are those of the CLI's parser. Beside them, measured in the same run: ``python -c
pass`` (the interpreter alone) and ``python -c "import metaeval"``. Each is run ``R`` times
in turn; the table gives the minimum and median CPU seconds and the median against
``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from metaeval.cli import EXIT_BEFORE_WORK, build_parser

#: The console script's own code: ``metaeval ARGS`` is this with ARGS after it.
METAEVAL = "import sys; from metaeval.cli import main; sys.exit(main())"


def commands() -> dict[str, argparse.ArgumentParser]:
    """The CLI's subcommands by name, from its parser."""
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def start_arguments(command: str, where: Path) -> list[str]:
    """``command`` with a placeholder path under ``where`` for each of its required arguments."""
    arguments = [command]
    for action in commands()[command]._actions:
        if not action.option_strings:
            arguments.append(str(where / action.dest))
        elif action.required:
            arguments += [action.option_strings[-1], str(where / action.dest)]
    return arguments


def cpu_seconds(argv: list[str], env: dict | None = None) -> float:
    """CPU seconds (user + system) of the child process ``argv``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    finished = subprocess.run(argv, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {finished.returncode}: {finished.stderr.strip()}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cases(where: Path) -> dict[str, list[str]]:
    """What is timed: the two references, then every command up to its work."""
    python = sys.executable
    runs = {"python -c pass": [python, "-c", "pass"],
            'python -c "import metaeval"': [python, "-c", "import metaeval"]}
    for command in commands():
        runs[f"metaeval {command}"] = [python, "-c", METAEVAL, *start_arguments(command, where)]
    return runs


def measure(repeats: int) -> dict[str, list[float]]:
    """CPU seconds of each case, ``repeats`` times, the cases taken in turn each round."""
    env = {**os.environ, EXIT_BEFORE_WORK: "1"}
    with tempfile.TemporaryDirectory() as where:
        runs = cases(Path(where))
        seconds = {name: [] for name in runs}
        for _ in range(repeats):
            for name, argv in runs.items():
                seconds[name].append(cpu_seconds(argv, env))
    return seconds


def table(seconds: dict[str, list[float]]) -> str:
    """A Markdown table: min and median CPU seconds, and the median against ``python -c pass``."""
    reference = statistics.median(seconds["python -c pass"])
    lines = ["| process, up to its work | CPU s, min | CPU s, median | median / `python -c pass` |",
             "|---|---:|---:|---:|"]
    for name, values in seconds.items():
        median = statistics.median(values)
        lines.append(f"| `{name}` | {min(values):.2f} | {median:.2f} | {median / reference:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each process")
    args = parser.parse_args(argv)
    seconds = measure(args.repeats)
    print(f"{args.repeats} runs of each, {os.cpu_count()} CPUs")
    print(table(seconds))


if __name__ == "__main__":
    main()
