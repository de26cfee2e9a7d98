"""Benchmarks and examples start Ray only through metaeval's loopback session."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def ray_init_calls(path: Path) -> list[int]:
    """Lines of ``path`` that call ``ray.init`` (however ``ray`` was imported)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "init"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "ray"]


def test_no_bench_or_example_calls_ray_init():
    calls = {str(path.relative_to(ROOT)): lines for folder in ("bench", "examples")
             for path in sorted((ROOT / folder).rglob("*.py")) if (lines := ray_init_calls(path))}
    assert calls == {}, f"start Ray with metaeval.distributed.session.start_embedded instead: {calls}"


CHECK_SAMPLED = """
import ray
from bench.sampled import start_ray
from metaeval.distributed.session import stop_embedded
address = start_ray()
try:
    print(address, *sorted({node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}))
finally:
    stop_embedded()
"""


def test_the_sampled_bench_starts_ray_on_loopback():
    pytest.importorskip("ray")
    result = subprocess.run([sys.executable, "-c", CHECK_SAMPLED], capture_output=True, text=True, timeout=300,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr
    address, *nodes = result.stdout.split()
    assert address.startswith("127.0.0.1:") and nodes == ["127.0.0.1"], result.stdout
