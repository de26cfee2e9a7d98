"""Connecting to Ray: bounded, one-line failures; interrupts and dead drivers leave nothing behind."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from metaeval import MetaEvalError, games, spiel
from metaeval.distributed import reaper, session
from tests.distributed.processes import descendants, describe, listening, still_alive


@pytest.fixture(scope="module")
def kuhn():
    return games.load("kuhn_3p")


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


def _machine_memory():
    (line,) = [line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")]
    return int(line.split()[1]) * 1024


def test_worker_counts_are_checked_against_the_machine(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    most = _machine_memory() // session.WORKER_MEMORY
    session.check_workers(most)
    with pytest.raises(MetaEvalError, match=rf"^{most + 1} Ray workers need about .* of this machine: use at most {most} "):
        session.check_workers(most + 1)
    session.check_workers(most + 1, address="10.0.0.5:6379")  # they would run on that cluster
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    session.check_workers(most + 1)


def test_worker_counts_are_checked_against_the_ray_session_in_use(kuhn, ray_session):
    from metaeval.distributed import build_metagame, current_pool, shutdown

    shutdown()
    resources = ray_session.cluster_resources()
    most = int((resources["memory"] + resources["object_store_memory"]) // session.WORKER_MEMORY)
    session.ensure_ray(workers=most)
    with pytest.raises(MetaEvalError, match=rf"of the Ray session in use: use at most {most}$"):
        build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=most + 1)
    assert current_pool() is None  # refused before any actor was started


@pytest.mark.parametrize("command", ["evolve", "psro", "pbt"])
def test_too_many_workers_are_one_line_before_anything_is_written(command, tmp_path):
    done = subprocess.run([sys.executable, "-m", "metaeval.cli", command, "--workers", "100000", "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("metaeval: error: 100000 Ray workers need about") and "use at most" in done.stderr
    assert not (tmp_path / "run").exists()


def test_loopback_addresses():
    assert [session.is_loopback(a) for a in ("127.0.0.1:6379", "localhost:6379", "ray://127.0.0.2:10001", "[::1]:6379")] \
        == [True] * 4
    assert not any(session.is_loopback(a) for a in ("10.0.0.5:6379", "head-node:6379", "auto", "ray://[2001:db8::1]:1"))


def test_ray_keeps_loopback_hosts_within_keep_loopback():
    from ray._private import services

    rewrite = services.resolve_ip_for_localhost
    with session.keep_loopback():
        assert [services.resolve_ip_for_localhost(h) for h in ("127.0.0.1", "localhost", "10.0.0.5")] \
            == ["127.0.0.1", "127.0.0.1", "10.0.0.5"]
    assert services.resolve_ip_for_localhost is rewrite


def test_the_embedded_ray_is_on_loopback_and_listens_nowhere_else(ray_session):
    """The shared session is started as an embedded one is (``start_embedded``)."""

    @ray_session.remote
    def pid():
        return os.getpid()

    worker = ray_session.get(pid.remote())
    nodes = [n for n in ray_session.nodes() if n["Alive"]]
    assert [n["NodeManagerAddress"] for n in nodes] == ["127.0.0.1"]
    members = [os.getpid(), *reaper.session_processes(session._State.link_dir)]
    assert worker in members and len(members) >= 4  # the driver, GCS, raylet, a worker at least
    sockets = listening(members)
    print(f"{len(sockets)} sockets of {len(members)} processes:", sorted(f"{a}:{port}" for _, a, port in sockets))
    assert sockets and all(address.is_loopback for _, address, _ in sockets), sockets


def test_a_driver_is_noted_with_its_start_time_so_that_a_reused_pid_is_not_taken_for_it():
    me = session._identity(os.getpid())
    assert session._alive(me) and session._alive(str(os.getpid()))  # the id alone: an earlier version's note
    assert not session._alive(f"{os.getpid()} 1")  # the same id, another process
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not session._alive(ended.stdout.strip())


def _session_dirs_of(pid):
    found = []
    for directory in Path(tempfile.gettempdir()).glob(f"{session.SESSION_PREFIX}*"):
        try:
            if int((directory / session.OWNER_FILE).read_text().split()[0]) == pid:
                found.append(directory)
        except (OSError, ValueError, IndexError):
            continue
    return found


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


def _left(processes, directory, seconds):
    """Which of ``processes`` (a snapshot), and of the session's processes, run after up to ``seconds``."""
    return still_alive(processes, seconds), reaper.session_processes(str(directory))


@pytest.mark.cluster  # starts an embedded Ray in a subprocess: about a minute on a loaded machine
def test_sigterm_with_ray_workers_exits_143_and_leaves_nothing(tmp_path):
    process, directory = _start_run(tmp_path / "run")
    tree = descendants(process.pid)
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    err = process.stderr.read()
    assert code == 143 and err.startswith("metaeval: terminated;") and err.count("\n") == 1, err
    assert not directory.exists()
    assert _left(tree, directory, 30) == ([], [])


_DRIVER = """
import sys, time
import ray
from metaeval.distributed.session import ensure_ray
ensure_ray(num_cpus=1, log_dir=sys.argv[1] or None)
ray.get(ray.remote(lambda: 0).remote())
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.cluster
def test_sigkilled_drivers_leave_no_ray_process(tmp_path):
    """kill -9 of a driver with an embedded Ray, 10 times (its logs in a run directory every other
    time): within seconds no process of its session runs (Ray's agents used to outlive it by a
    minute, and the next start missed them)."""
    for attempt in range(10):
        log_dir = str(tmp_path / f"run{attempt}") if attempt % 2 else ""
        process = subprocess.Popen([sys.executable, "-c", _DRIVER, log_dir], stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "ready\n"
        (directory,) = _session_dirs_of(process.pid)
        tree = descendants(process.pid)
        assert len(tree) >= 6, describe(tree)  # GCS, raylet, agents, a worker, the watchdog
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        start = time.perf_counter()
        left = _left(tree, directory, 20)
        assert left == ([], []), (attempt, describe(left[0]), left[1])
        assert not directory.exists()
        print(f"attempt {attempt}: {len(tree)} processes ended {time.perf_counter() - start:.1f} s after kill -9")


@pytest.mark.cluster
def test_a_sigkilled_drivers_session_is_ended_on_the_next_start_if_its_watchdog_died_too(tmp_path):
    out = tmp_path / "run"
    process, directory = _start_run(out)
    tree = descendants(process.pid)
    for watchdog in [pid for pid, _ in tree if "reaper.py" in Path(f"/proc/{pid}/cmdline").read_text()]:
        os.kill(watchdog, signal.SIGKILL)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    time.sleep(2)
    assert directory.exists() and still_alive(tree, 0)  # left behind: Ray's agents, among others
    session.clean_stale_sessions()  # what the next embedded start does first
    assert not directory.exists()
    left = _left(tree, directory, 0)
    assert left == ([], []), (describe(left[0]), left[1])
