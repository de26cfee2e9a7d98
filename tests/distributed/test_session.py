"""Connecting to Ray: bounded, one-line failures; interrupts and dead drivers leave nothing behind."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from metaeval import MetaEvalError
from metaeval.distributed import session


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_address_is_one_line_in_seconds(tmp_path):
    # In a process of its own, as a user runs it: a Ray session another test left open
    # in this process would be used instead of the address.
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "metaeval.cli", "evolve", "--workers", "2", "--address", address,
                           "--iterations", "1", "--out", str(tmp_path / "r")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot reach the Ray cluster at '{address}': Connection refused" in done.stderr
    assert time.perf_counter() - start < 30
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("address, message", [
    ("no-such-host.invalid:6379", "unknown host 'no-such-host.invalid'"),
    ("localhost", "is not host:port"),
])
def test_bad_addresses(address, message):
    with pytest.raises(MetaEvalError, match=message):
        session.check_reachable(address, timeout=5)


def test_ray_client_without_its_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "grpc", None)  # as if grpcio were not installed
    with pytest.raises(MetaEvalError, match=r"uses Ray Client, which is not installed: pip install 'metaeval\[client\]'"):
        session.check_reachable("ray://127.0.0.1:10001")


def _session_dirs_of(pid):
    found = []
    for directory in Path(tempfile.gettempdir()).glob(f"{session.SESSION_PREFIX}*"):
        try:
            if int((directory / session.OWNER_FILE).read_text()) == pid:
                found.append(directory)
        except (OSError, ValueError):
            continue
    return found


def _processes_naming(text):
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _names(p, text)]


def _names(entry, text):
    try:
        return text in (entry / "cmdline").read_text(errors="replace")
    except OSError:
        return False


def _start_run(out):
    command = [sys.executable, "-m", "metaeval.cli", "evolve", "--game", "kuhn_3p", "--rater", "uniform",
               "--population", "4", "--iterations", "500", "--workers", "2", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while not (out / "iterations.jsonl").exists():
        assert process.poll() is None and time.time() < deadline, process.stderr.read()
        time.sleep(0.1)
    (directory,) = _session_dirs_of(process.pid)
    return process, directory


@pytest.mark.cluster  # starts an embedded Ray in a subprocess: about a minute on a loaded machine
def test_sigterm_with_ray_workers_exits_143_and_leaves_nothing(tmp_path):
    process, directory = _start_run(tmp_path / "run")
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    err = process.stderr.read()
    assert code == 143 and err.startswith("metaeval: terminated;") and err.count("\n") == 1, err
    assert not directory.exists()
    deadline = time.time() + 30
    while _processes_naming(str(directory)) and time.time() < deadline:
        time.sleep(0.5)
    assert not _processes_naming(str(directory))


@pytest.mark.cluster
def test_a_sigkilled_drivers_session_is_cleaned_up_on_the_next_start(tmp_path):
    process, directory = _start_run(tmp_path / "run")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert directory.exists()  # left behind by the dead driver
    session.clean_stale_sessions()  # what the next embedded start does first
    assert not directory.exists() and not _processes_naming(str(directory))
