"""The CLI talks: fast help and errors, defaults and descriptions in every help text,
per-iteration progress (a bar on a terminal, lines otherwise, nothing with --quiet)."""

import argparse
import fcntl
import os
import pty
import re
import resource
import struct
import subprocess
import sys
import termios

import pytest

from metaeval.cli import build_parser

HEAVY = ["ray", "open_spiel", "pyspiel", "scipy", "cvxpy", "pandas", "matplotlib", "jax"]


def cpu_seconds(args) -> tuple[float, subprocess.CompletedProcess]:
    """User + system CPU time of one ``python -m metaeval.cli`` run (not wall time: the
    machine may be busy)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


@pytest.mark.parametrize("args, code", [
    (["--help"], 0), (["psro", "--help"], 0), (["rate", "--help"], 0),
    (["psro", "--iterations", "0", "--out", "x"], 2), (["frobnicate"], 2),
])
def test_help_and_argument_errors_take_under_half_a_second_of_cpu(args, code):
    seconds, done = cpu_seconds(args)
    assert done.returncode == code, done.stderr
    assert seconds < 0.5, f"{args}: {seconds:.2f} s of CPU"


def test_parsing_imports_no_heavy_library():
    script = ("import sys, metaeval.cli; metaeval.cli.build_parser().parse_args(['psro', '--out', 'x']); "
              f"print([m for m in {HEAVY!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def _commands():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_option_is_described_with_its_default(name):
    command = _commands()[name]
    text = " ".join(command.format_help().split())
    for action in command._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{name} {action.dest} has no help"
        if action.default not in (None, False, []):
            shown = ", ".join(action.default) if isinstance(action.default, list) else action.default
            assert f"(default: {shown})" in text, f"{name} {action.dest}: default {action.default!r} not shown"


PSRO = ["psro", "--game", "kuhn_2p", "--solver", "nash", "--iterations", "3"]


def test_psro_prints_one_line_per_iteration_when_stderr_is_not_a_terminal(tmp_path):
    done = subprocess.run([sys.executable, "-m", "metaeval.cli", *PSRO, "--out", str(tmp_path / "a")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = re.findall(r"kuhn_2p jpsro nash seed 0: it (\d)/3, gap ([\d.e+-]+), size (\d)", done.stderr)
    assert [int(i) for i, _, _ in lines] == [1, 2, 3]
    assert float(lines[0][1]) > float(lines[-1][1])  # the gap of the growing population falls
    quiet = subprocess.run([sys.executable, "-m", "metaeval.cli", *PSRO, "--out", str(tmp_path / "b"), "--quiet"],
                           capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == "" and "final CCE gap" in quiet.stdout


def test_psro_shows_a_bar_with_the_gap_on_a_terminal(tmp_path):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column terminal
    process = subprocess.Popen([sys.executable, "-m", "metaeval.cli", *PSRO, "--out", str(tmp_path)],
                               stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    assert process.wait(timeout=300) == 0
    os.close(leader)
    text = shown.decode(errors="replace")
    assert "3/3" in text and re.search(r"gap=[\d.e+-]+", text) and "\r" in text, text  # a bar redrawn in place
    assert not re.search(r"seed 0: it \d/3", text)  # not the lines for logs
