"""A command's start (its arguments parsed and checked, its modules imported) loads none of
the heavy libraries: each comes with the work that needs it. ``bench.startup`` times it."""

import os
import subprocess
import sys

import pytest

from bench import startup

HEAVY = ("cvxpy", "jax", "flax", "optax", "pandas", "matplotlib", "ray")


@pytest.mark.parametrize("command", sorted(startup.commands()))
def test_a_command_starts_without_the_heavy_libraries(command, tmp_path):
    arguments = startup.start_arguments(command, tmp_path)
    script = (
        "import os, sys\n"
        "from metaeval import cli\n"
        "os.environ[cli.EXIT_BEFORE_WORK] = '1'\n"
        "try:\n"
        f"    cli.main({arguments!r})\n"
        "except SystemExit as stop:\n"  # where its work would start
        f"    print(stop.code, [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "0 []", done.stdout + done.stderr


def test_the_start_ends_where_the_work_would_start(tmp_path):
    """Under the variable, a loop stops before its first iteration: its run directory is never made."""
    out = tmp_path / "run"
    env = {**os.environ, "METAEVAL_EXIT_BEFORE_WORK": "1"}
    done = subprocess.run([sys.executable, "-c", startup.METAEVAL, "evolve", "--game", "kuhn_2p", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert (done.returncode, done.stdout, out.exists()) == (0, "", False), done.stderr
