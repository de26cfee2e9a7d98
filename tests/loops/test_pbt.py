import json

import numpy as np
import pytest

from metaeval import MetaEvalError
from metaeval.runs import rundir
from metaeval.cli import main
from metaeval.loops.pbt import PBT, PBTConfig, pbt
from tests.conftest import without_timings

SMALL = dict(game="kuhn_3p", steps=4, interval=2, population=4, episodes_per_step=30, seed=3)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pbt")
    return out, pbt(PBTConfig(**SMALL), out=out, progress=False)


def test_exploits_copy_the_top_quarter_over_the_lowest_rated_quarter(small_run):
    out, records = small_run
    assert [r["iteration"] for r in records] == [0, 1, 2, 3]
    assert ["parents" in r for r in records] == [False, True, False, True]  # every 2nd step
    for record in records:
        assert record["cce_gap"] == pytest.approx(sum(record["cce_gap_per_player"]))
        if "parents" not in record:
            continue
        for ids, ratings, low, parents, added in zip(record["policy_ids"], record["ratings"],
                                                     record["discarded"], record["parents"], record["added"]):
            rating = dict(zip(ids, np.round(ratings, 9)))
            assert len(low) == len(parents) == len(added) == 1  # a quarter of 4
            assert rating[low[0]] == min(rating.values())
            assert rating[parents[0]] == max(rating.values())
            assert not set(added) & set(ids)
    # Every member trains each step, so every policy id is new at the next step.
    for before, after in zip(records, records[1:]):
        for p in range(3):
            assert not set(before["policy_ids"][p]) & set(after["policy_ids"][p])
    assert rundir.read_records(out) == json.loads(json.dumps(records))
    for name in ["config.json", "summary.csv", "population.npz", "cce_gap.png", "payoff.png"]:
        assert (out / name).stat().st_size > 0


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, small_run):
    _, uninterrupted = small_run
    pbt(PBTConfig(**{**SMALL, "steps": 1}), out=tmp_path, progress=False)
    # A step past the checkpoint whose log line landed but whose checkpoint did not.
    killed = PBT(PBTConfig(**SMALL), out=tmp_path)
    killed.run_dir = None
    logged = killed.step()
    with open(tmp_path / "iterations.jsonl", "a") as f:
        f.write(rundir.record_line(logged))
    resumed = pbt(PBTConfig(**SMALL), out=tmp_path, progress=False)
    assert without_timings(resumed) == without_timings(json.loads(json.dumps(uninterrupted)))
    assert rundir.read_records(tmp_path)[1] == json.loads(json.dumps(logged))  # kept, not rewritten
    assert len(rundir.read_json(tmp_path / "config.json")["sessions"]) == 2


def test_ray_workers_train_the_same_members(ray_session, small_run):
    _, one_worker = small_run
    two_workers = pbt(PBTConfig(**{**SMALL, "steps": 1, "workers": 2}), progress=False)
    assert without_timings(two_workers) == without_timings(json.loads(json.dumps(one_worker[:1])))


def test_trained_members_beat_their_untrained_start():
    """One step of 500 episodes against the uniform mixture of random-start members lowers
    the MECCE's full-game CCE gap well below the untrained population's."""
    run = PBT(PBTConfig(**{**SMALL, "episodes_per_step": 500, "matchmaking": "uniform"}))
    untrained = run.evaluator.gap(run.evaluator.meta_distribution("mecce")).total
    trained = run.step()["cce_gap"]
    assert trained < 0.8 * untrained


@pytest.mark.parametrize("change, message", [
    (dict(matchmaking="elo"), "matchmaking rule"), (dict(learner="a2c"), "unknown learner"),
    (dict(interval=0), "interval"), (dict(population=3), "population"),
    (dict(learner_options={"alpha": 1}), "learner"), (dict(mutation_scale=2.0), "mutation scale"),
])
def test_bad_settings_are_refused(change, message):
    with pytest.raises(MetaEvalError, match=message):
        PBTConfig(**{**SMALL, **change})


def test_cli_runs_and_refuses_another_runs_directory(tmp_path, capsys):
    args = ["pbt", "--game", "kuhn_3p", "--steps", "1", "--population", "4", "--episodes-per-step", "20"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert "final CCE gap" in capsys.readouterr().out
    assert main([*args, "--rater", "uniform", "--out", str(tmp_path)]) == 2
    assert "different rater" in capsys.readouterr().err
