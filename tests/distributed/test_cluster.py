"""A real two-node Ray cluster on this machine: `ray start --head` plus a second node.

Both nodes are started with ``--block`` by the test and stopped by terminating
those two processes by id (``ray stop`` would stop every Ray on the machine). Both
are on the loopback address (``--node-ip-address=127.0.0.1``, which ``ray start``
keeps only within ``keep_loopback``), and the drivers join at 127.0.0.1. The
cluster uses token authentication with its own token, so the driver must find it.
Run with ``make cluster-test`` (about a minute).
"""

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.distributed.processes import describe, descendants, listening, still_alive

pytestmark = pytest.mark.cluster

RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
       "from metaeval.distributed.session import keep_loopback; sys.argv[0] = 'ray'\nwith keep_loopback(): main()"]
DRIVER = """
import json, sys
import ray
from metaeval import spiel
from metaeval.distributed import build_metagame, shutdown
from metaeval.distributed.session import ensure_ray

ensure_ray(sys.argv[1])
nodes = [n for n in ray.nodes() if n["Alive"]]
pop = spiel.Population.random("kuhn_3p", 4, seed=0)
remote = build_metagame("kuhn_3p", pop, mode="sampled", episodes=200, workers=2, seed=3, address=sys.argv[1])
local = build_metagame("kuhn_3p", pop, mode="sampled", episodes=200, workers=1, seed=3)
shutdown()
print(json.dumps({"nodes": len(nodes), "same": bool((remote.payoffs == local.payoffs).all())}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_text(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def cluster():
    temp = tempfile.mkdtemp(prefix="mec-")  # short: Ray's socket paths must stay under 108 bytes
    token = os.path.join(temp, "token")
    Path(token).write_text("metaeval-cluster-test-token-0123456789abcdef")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token}
    env.pop("RAY_ADDRESS", None)
    port, client_port = free_port(), free_port()
    common = ["--block", "--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--temp-dir", temp,
              "--disable-usage-stats", "--dashboard-host", "127.0.0.1"]
    # Ray Client's server needs the client extra (grpcio); without it, test_ray_client_address is skipped.
    client = ["--ray-client-server-port", str(client_port)] if importlib.util.find_spec("grpc") else []
    started = []
    try:
        started.append(subprocess.Popen(
            [*RAY, "start", "--head", "--port", str(port), *client, "--include-dashboard", "false", *common],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        address = f"127.0.0.1:{port}"
        _wait_for_nodes(address, 1, env)
        started.append(subprocess.Popen([*RAY, "start", "--address", address, *common], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True))
        _wait_for_nodes(address, 2, env)
        yield {"address": address, "client": f"ray://127.0.0.1:{client_port}", "token": token, "temp": temp,
               "nodes": [process.pid for process in started]}
    finally:
        tree = [child for process in started for child in descendants(process.pid)]
        for process in reversed(started):  # by process id, never `ray stop`
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        deadline = time.time() + 30
        while processes_naming(temp) and time.time() < deadline:
            time.sleep(0.5)
        left = processes_naming(temp)
        lingering = still_alive(tree, max(0.0, deadline - time.time()))  # Ray's agents may outlive their raylet
        for pid, _ in still_alive(lingering, 0):  # still the processes the nodes started
            os.kill(pid, signal.SIGKILL)
        if lingering:
            print(f"killed {len(lingering)} processes of the test cluster left after its nodes stopped:",
                  describe(lingering))
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray processes of the test cluster still running: {left}"


def _wait_for_nodes(address, count, env, seconds=120):
    probe = (f"import ray; from metaeval.distributed.session import ensure_ray; ensure_ray({address!r}); "
             "print(sum(n['Alive'] for n in ray.nodes()))")
    deadline = time.time() + seconds
    while time.time() < deadline:
        result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip().splitlines()[-1:] == [str(count)]:
            return
        time.sleep(1)
    raise AssertionError(f"the test cluster did not reach {count} node(s)")


def test_both_nodes_are_on_loopback_and_listen_nowhere_else(cluster):
    probe = (f"import json, ray; from metaeval.distributed.session import ensure_ray; ensure_ray({cluster['address']!r}); "
             "print(json.dumps([n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']]))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                            env=driver_env(RAY_AUTH_TOKEN_PATH=cluster["token"]))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ["127.0.0.1", "127.0.0.1"]
    members = set(cluster["nodes"]).union(pid for node in cluster["nodes"] for pid, _ in descendants(node))
    sockets = listening(members)
    print(f"{len(sockets)} sockets of {len(members)} processes of the two nodes:",
          sorted(f"{a}:{port}" for _, a, port in sockets))
    assert len(members) >= 4 and all(address.is_loopback for _, address, _ in sockets), sockets


def driver_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    return {**env, **extra}


def test_two_nodes_build_the_same_metagame_as_in_process(cluster):
    """No RAY_AUTH_MODE in the driver: the token named by RAY_AUTH_TOKEN_PATH is found and used."""
    result = subprocess.run([sys.executable, "-c", DRIVER, cluster["address"]], capture_output=True, text=True,
                            env=driver_env(RAY_AUTH_TOKEN_PATH=cluster["token"]), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"nodes": 2, "same": True}


def test_the_population_loop_on_the_cluster_equals_the_in_process_loop(cluster, tmp_path):
    args = ["evolve", "--game", "kuhn_3p", "--rater", "deviation", "--iterations", "3", "--population", "4",
            "--mode", "sampled", "--episodes", "100", "--seed", "2"]
    command = [sys.executable, "-m", "metaeval.cli", *args]
    env = driver_env(RAY_AUTH_TOKEN_PATH=cluster["token"])
    start = time.perf_counter()
    on_cluster = subprocess.run([*command, "--workers", "2", "--address", cluster["address"], "--out",
                                 str(tmp_path / "cluster")], env=env, capture_output=True, text=True, timeout=300)
    cluster_seconds = time.perf_counter() - start
    assert on_cluster.returncode == 0, on_cluster.stderr[-2000:]
    subprocess.run([*command, "--out", str(tmp_path / "local")], env=env, check=True, capture_output=True)

    def records(name):
        lines = (tmp_path / name / "iterations.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in lines]

    assert records("cluster") == records("local")
    print(f"3 sampled iterations on the 2-node cluster: {cluster_seconds:.1f} s")


def test_ray_client_address(cluster):
    pytest.importorskip("grpc")
    result = subprocess.run([sys.executable, "-c", DRIVER, cluster["client"]], capture_output=True, text=True,
                            env=driver_env(RAY_AUTH_TOKEN_PATH=cluster["token"]), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["same"]


def test_a_wrong_token_is_one_line(cluster, tmp_path):
    wrong = tmp_path / "token"
    wrong.write_text("not-the-cluster-token-0000000000000000000000")
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "evolve", "--workers", "2", "--address", cluster["address"],
         "--iterations", "1", "--out", str(tmp_path / "run")],
        env=driver_env(RAY_AUTH_TOKEN_PATH=str(wrong)), capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith("metaeval: error: ") and result.stderr.count("\n") == 1, (seconds, result.stderr)
    assert "the cluster's token" in result.stderr
    print(f"wrong token refused in {seconds:.1f} s: {result.stderr.strip()}")
