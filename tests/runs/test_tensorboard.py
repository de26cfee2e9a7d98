"""--tensorboard: every loop's records, read back with TensorBoard's own event reader."""

import sys

import numpy as np
import pytest

from metaeval.cli import main
from metaeval.loops.evolve import Evolution, EvolveConfig
from metaeval.runs import rundir
from metaeval.runs.tensorboard import scalars

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def read_events(path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files of ``path``, as TensorBoard shows it: (step, value) by key."""
    reader = event_accumulator.EventAccumulator(str(path), size_guidance={event_accumulator.SCALARS: 0})
    reader.Reload()
    return {key: [(event.step, event.value) for event in reader.Scalars(key)] for key in reader.Tags()["scalars"]}


def assert_events_match(path, records):
    """The event files of ``path`` hold exactly the numbers of ``records`` (to float32), one per iteration."""
    expected = {}
    for record in records:
        for key, value in scalars(record).items():
            expected.setdefault(key, []).append((record["iteration"], value))
    events = read_events(path)
    assert set(events) == set(expected)
    for key, points in expected.items():
        assert [step for step, _ in events[key]] == [step for step, _ in points], key
        np.testing.assert_allclose([v for _, v in events[key]], [v for _, v in points], rtol=1e-6, atol=1e-30,
                                   err_msg=key)


def test_scalars_flatten_records_under_their_keys():
    record = {"iteration": 3, "cce_gap": 0.5, "seconds": {"total": 2.0, "build": 1}, "ratings": [[1.0, 2.0], [3.0]],
              "approximate_cce_gap": None, "responder": "ppo", "stopped": True}
    assert scalars(record) == {"iteration": 3.0, "cce_gap": 0.5, "seconds/total": 2.0, "seconds/build": 1.0,
                               "ratings/0/0": 1.0, "ratings/0/1": 2.0, "ratings/1/0": 3.0}


@pytest.mark.parametrize("command", [
    ["evolve", "--game", "kuhn_poker", "--iterations", "3", "--population", "4"],
    ["psro", "--game", "kuhn_2p", "--solver", "nash", "--iterations", "3"],
    ["pbt", "--game", "kuhn_poker", "--steps", "3", "--population", "4", "--episodes-per-step", "50"],
])
def test_every_loop_writes_its_records_as_events(tmp_path, command):
    out, board = tmp_path / "run", tmp_path / "board"
    assert main([*command, "--out", str(out), "--tensorboard", str(board), "--quiet"]) == 0
    records = rundir.read_records(out)
    assert len(records) == 3
    assert_events_match(board, records)


def test_compare_writes_one_event_run_per_rater_and_seed(tmp_path):
    out, board = tmp_path / "c", tmp_path / "board"
    assert main(["compare", "--game", "kuhn_poker", "--raters", "uniform,deviation", "--seeds", "2",
                 "--iterations", "2", "--population", "4", "--out", str(out), "--tensorboard", str(board),
                 "--quiet"]) == 0
    for rater in ("uniform", "deviation"):
        for seed in (0, 1):
            assert_events_match(board / rater / f"seed{seed}", rundir.read_records(out / rater / f"seed{seed}"))


def test_a_resumed_run_replaces_the_events_of_the_iterations_it_recomputes(tmp_path):
    """A session killed after logging events past its last checkpoint leaves events that the
    resumed session recomputes: TensorBoard must show the recomputed ones, once per step."""
    from tensorboardX import SummaryWriter

    out, board = tmp_path / "run", tmp_path / "board"
    config = EvolveConfig(game="kuhn_poker", iterations=4, population=4, rater="deviation")
    first = Evolution(config, out=out, tensorboard=board)
    first.step()
    first.step()
    first.close()
    stale = SummaryWriter(str(board))  # what a killed session wrote past its checkpoint
    for step in (2, 3):
        stale.add_scalar("cce_gap", 99.0, global_step=step)
    stale.close()
    records = Evolution(config, out=out, tensorboard=board).run(progress=False)
    assert [r["iteration"] for r in records] == [0, 1, 2, 3]
    assert_events_match(board, records)


def test_a_missing_tensorboardx_is_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    out = tmp_path / "run"
    code = main(["evolve", "--game", "kuhn_poker", "--iterations", "2", "--population", "4", "--out", str(out),
                 "--tensorboard", str(tmp_path / "board"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert err.count("\n") == 0 and "tensorboardX" in err and "metaeval[tensorboard]" in err
    assert not out.exists()
