import pandas as pd
import pytest

import metaeval
from metaeval import MetaEvalError
from metaeval.runs import rundir
from metaeval.cli import main
from metaeval.loops.compare import FAILURES, compare, load_comparison
from metaeval.loops.evolve import EvolveConfig


@pytest.fixture
def flaky_rater(monkeypatch):
    """A rater 'flaky' (uniform ratings) that raises on its first call while armed."""
    state = {"armed": True}

    def flaky(game):
        if state["armed"]:
            state["armed"] = False
            raise MetaEvalError("flaky rater failed on purpose")
        return metaeval.rate(game, "uniform")

    monkeypatch.setitem(metaeval.RATERS, "flaky", flaky)
    return state


def test_a_failing_run_is_recorded_and_retried(tmp_path, flaky_rater, capsys):
    base = EvolveConfig(game="kuhn_3p", iterations=2)
    out = tmp_path / "cmp"
    # Runs go in order (uniform, 0), (uniform, 1), (flaky, 0), (flaky, 1): (flaky, 0) fails.
    comparison, final, failures = compare(base, ["uniform", "flaky"], [0, 1], out, progress=False)

    assert failures[["rater", "seed"]].values.tolist() == [["flaky", 0]]
    assert "flaky rater failed on purpose" in failures.error[0]
    assert "run flaky seed 0 failed" in capsys.readouterr().err
    on_disk = pd.read_csv(out / FAILURES)
    assert on_disk[["rater", "seed"]].values.tolist() == [["flaky", 0]]
    assert on_disk.run_directory[0] == str(out / "flaky" / "seed0")
    # The other three runs finished and are tabulated and plotted.
    assert sorted(set(zip(comparison.rater, comparison.seed))) == [("flaky", 1), ("uniform", 0), ("uniform", 1)]
    assert final.set_index("rater").seeds.to_dict() == {"flaky": 1, "uniform": 2}
    assert (out / "comparison.csv").exists() and (out / "cce_gap.png").exists()
    assert len(rundir.read_records(out / "flaky" / "seed1")) == 2
    assert len(load_comparison(out)[0]["flaky"]) == 1  # re-plotting skips the failed run

    # Rerunning retries the failed run only; finished runs are resumed as they are.
    finished = (out / "uniform" / "seed0" / rundir.CONFIG).read_text()
    comparison, final, failures = compare(base, ["uniform", "flaky"], [0, 1], out, progress=False)
    assert failures.empty and not (out / FAILURES).exists()
    assert final.set_index("rater").seeds.to_dict() == {"flaky": 2, "uniform": 2}
    assert len(rundir.read_records(out / "flaky" / "seed0")) == 2
    assert len(comparison) == 4 * 2


def test_cli_exit_status_is_non_zero_when_a_run_failed(tmp_path, flaky_rater, capsys):
    args = ["compare", "--game", "kuhn_3p", "--raters", "flaky,uniform", "--seeds", "1",
            "--iterations", "1", "--out", str(tmp_path / "cmp")]
    assert main(args) == 1
    assert "1 of 2 runs failed" in capsys.readouterr().err
    assert main(args) == 0


def test_every_run_failing_is_a_clear_error(tmp_path, monkeypatch):
    def broken(game):
        raise MetaEvalError("always fails")

    monkeypatch.setitem(metaeval.RATERS, "broken", broken)
    with pytest.raises(MetaEvalError, match="every run of the comparison failed"):
        compare(EvolveConfig(game="kuhn_3p", iterations=1), ["broken"], [0], tmp_path, progress=False)
    assert pd.read_csv(tmp_path / FAILURES).error[0] == "MetaEvalError: always fails"


def test_parallel_runs_are_yielded_as_they_end_and_compared_in_the_order_asked(tmp_path):
    from metaeval.loops.compare import run_all

    slow, quick = EvolveConfig(game="kuhn_3p", iterations=60), EvolveConfig(game="kuhn_3p", iterations=1, seed=1)
    ended = [config for config, _ in run_all([slow, quick], tmp_path, jobs=2, progress=False, desc="")]
    assert ended == [quick, slow]  # the quick run is not held back behind the slow one
    comparison, _, _ = compare(EvolveConfig(game="sheriff", iterations=2), ["deviation", "uniform"], [1, 0],
                               tmp_path / "cmp", jobs=2, progress=False)
    assert list(dict.fromkeys(zip(comparison.rater, comparison.seed))) == [
        ("deviation", 1), ("deviation", 0), ("uniform", 1), ("uniform", 0)]
