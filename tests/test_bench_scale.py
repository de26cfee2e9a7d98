"""``python -m bench.scale --polarix`` at a tiny size: polarix timed on a first and a second
call, and every ratio column the rater's CPU seconds over polarix's."""

import json
import sys

import numpy as np
import pytest

from bench import scale


def test_polarix_is_timed_twice_and_the_ratios_are_cpu_over_polarix_cpu(tmp_path, capsys):
    pytest.importorskip("polarix")
    records = tmp_path / "records.jsonl"
    scale.main(["--shapes", "3x4", "--raters", "payoff", "--polarix", "--json", str(records), "--limit", "600"])
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("rater"))
    assert "wall s" in header and "CPU s/polarix CPU s" in header and "CPU s/polarix warm CPU s" in header
    polarix, payoff = (json.loads(line) for line in records.read_text().splitlines())
    assert polarix["status"] == payoff["status"] == "ok"
    assert polarix["warm_seconds"] > 0 and polarix["warm_cpu_seconds"] > 0
    rows = {line[:15].strip(): line for line in lines[lines.index(header) + 1:]}  # the label column
    assert list(rows) == ["polarix", "polarix warm", "payoff"]
    ratios = rows["payoff"].split("  ok;")[0].split()[-2:]
    expected = [payoff["cpu_seconds"] / max(polarix[key], 1e-9) for key in ("cpu_seconds", "warm_cpu_seconds")]
    assert [float(r) for r in ratios] == pytest.approx(expected, rel=5e-3)


def test_a_run_over_its_cpu_limit_is_killed(capsys):
    """A child that spends more CPU seconds than ``--cpu-limit`` (its imports alone do) is
    killed whatever its wall time."""
    scale.main(["--shapes", "3x4", "--raters", "payoff", "--cpu-limit", "0.01", "--limit", "600"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("payoff"))
    assert "killed (over 0.01 CPU s)" in row


def test_a_child_that_prints_more_than_a_pipe_holds_finishes_and_is_read():
    """A child's output goes to files: 1 MB on stderr before its JSON line does not block it."""
    child = "import sys, json; sys.stderr.write('x' * 1_000_000); print(json.dumps({'status': 'ok'}))"
    assert scale.run_limited([sys.executable, "-c", child], limit=60, memory_limit_gib=4) == {"status": "ok"}


def test_nashs_full_solver_is_its_tracer_in_float64(monkeypatch, capsys):
    """``--full`` runs nash with every pass over the payoffs in float64 (no float32 copies),
    the default with them where `logit_mixed` applies (here to any size)."""
    from metaeval.ratings import logit_mixed

    monkeypatch.setattr(logit_mixed, "MIXED_SIZE", 0)
    made = []
    original = logit_mixed.MixedEquations.__init__
    monkeypatch.setattr(logit_mixed.MixedEquations, "__init__", lambda self, payoffs: made.append(1) or original(self, payoffs))
    ratings = {}
    for rater in ("nash", "nash:full"):
        made.clear()
        scale.child(rater, 3, 4, 0)
        ratings[rater] = json.loads(capsys.readouterr().out.splitlines()[-1])["ratings"]
        assert bool(made) == (rater == "nash")
    np.testing.assert_allclose(sum(ratings["nash"], []), sum(ratings["nash:full"], []), rtol=0, atol=1e-12)
