"""Tune PBT with a game-theoretic fitness: the shared Evaluator's rounds, snapshots and
state on disk (in-process), and an experiment whose driver is killed and restored (Ray Tune)."""

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib

from metaeval import games, spiel
from metaeval.errors import MetaEvalError
from metaeval.integrations.tune import (METRIC, POOL_METRIC, ROUND, Fitness, SharedEvaluator, content_hash,
                                        ppo_trainable, shared_evaluator, synchronous_pbt)

ROOT = Path(__file__).resolve().parents[2]


def policies_of(game, seed):
    rng = np.random.default_rng(seed)
    return [spiel.random_policy(game, p, rng) for p in range(game.num_players())]


def complete_round(shared, r, reports):
    """Every trial's report of round ``r``, sent concurrently as trials do; their metrics."""
    async def all_reports():
        return await asyncio.gather(*(shared.report(trial, r, policies) for trial, policies in reports.items()))

    return dict(zip(reports, asyncio.run(all_reports())))


def test_a_round_rates_every_trial_once_all_have_reported(tmp_path):
    game = games.load("kuhn_2p")
    fitness = Fitness(game="kuhn_2p", trials=3, rank=True, exploitability=True)
    shared = SharedEvaluator(fitness, tmp_path)
    metrics = complete_round(shared, 0, {f"t{i}": policies_of(game, i) for i in range(3)})
    ev = shared.evaluator
    rating = ev.rate("deviation")
    for slot, trial in enumerate(["t0", "t1", "t2"]):
        assert metrics[trial][METRIC] == pytest.approx(np.mean([r[slot] for r in rating.ratings]))
        assert 0 <= metrics[trial][POOL_METRIC] <= 1
        assert metrics[trial]["exploitability"] == pytest.approx(ev.exploitability())
    assert sorted(m["metaeval_rank"] for m in metrics.values()) == [1, 2, 3]
    best = max(metrics, key=lambda t: metrics[t][METRIC])
    assert metrics[best]["metaeval_rank"] == 1
    assert all(set(m) <= {METRIC, POOL_METRIC, "metaeval_round", "metaeval_rank", "exploitability"}
               for m in metrics.values())  # flat keys, numbers only


def test_snapshots_stay_what_was_reported_when_the_live_policy_changes(tmp_path):
    game = games.load("kuhn_2p")
    shared = SharedEvaluator(Fitness(game="kuhn_2p", trials=2), tmp_path)
    live = [policy_lib.TabularPolicy(game, players=[p]) for p in range(2)]
    complete_round(shared, 0, {"a": live, "b": policies_of(game, 1)})
    before = [list(h) for h in shared.rounds[0]["hashes"]]
    stored = [content_hash(pi) for pi in (shared.evaluator.population.policies[0][0],)]
    live[0].action_probability_array[:] = 0.0  # the trial keeps training its own object
    live[0].action_probability_array[:, 0] = 1.0
    assert [content_hash(pi) for pi in (shared.evaluator.population.policies[0][0],)] == stored
    assert shared.rounds[0]["hashes"] == before
    metrics = complete_round(shared, 1, {"a": live, "b": policies_of(game, 1)})
    assert shared.rounds[1]["hashes"][0][0] != before[0][0]  # the changed policy is a new snapshot
    assert shared.rounds[1]["hashes"][1][1] == before[1][1]  # the unchanged one hashes the same
    assert set(metrics) == {"a", "b"}


def test_a_restarted_evaluator_resumes_from_its_directory(tmp_path):
    game = games.load("kuhn_2p")
    fitness = Fitness(game="kuhn_2p", trials=2)
    first = SharedEvaluator(fitness, tmp_path)
    for r in range(2):
        complete_round(first, r, {"a": policies_of(game, 2 * r), "b": policies_of(game, 2 * r + 1)})
    again = SharedEvaluator(fitness, tmp_path)
    assert again.rounds == {r: json.loads(json.dumps(record)) for r, record in first.rounds.items()}
    for a, b in zip(again.evaluator.built_metagame.payoffs, first.evaluator.built_metagame.payoffs):
        np.testing.assert_array_equal(a, b)
    repeated = complete_round(again, 1, {"a": policies_of(game, 9), "b": policies_of(game, 8)})
    assert repeated == first.rounds[1]["metrics"]  # a repeated round gets the recorded answer
    slot, seed, opponents = asyncio.run(again.opponents("b", 0))  # an earlier round's pool
    assert (slot, seed) == (1, 0) and len(opponents) == 2
    with pytest.raises(MetaEvalError, match="other settings"):
        SharedEvaluator(Fitness(game="kuhn_2p", trials=2, rater="nash"), tmp_path)


@pytest.mark.parametrize("settings, message", [
    (dict(trials=1), "at least 2 trials"),
    (dict(trials=2, rater="best"), "unknown rater 'best'"),
    (dict(trials=2, matchmaking="strongest"), "unknown matchmaking 'strongest'"),
])
def test_bad_settings_are_one_line_errors(settings, message):
    with pytest.raises(MetaEvalError, match=message):
        Fitness(game="kuhn_2p", **settings)


RUN = """
import json, sys
from examples.tune_pbt import run_experiment
stop = None if sys.argv[2] == "none" else int(sys.argv[2])
state = run_experiment(sys.argv[1], game="kuhn_poker", iterations=4, episodes=40, num_cpus=2, name="restore",
                       mutated_rates=[2e-3], stop_driver_at=stop)
json.dump(state, open(sys.argv[3], "w"))
"""


def experiment(out, stop, state):
    return subprocess.run([sys.executable, "-c", RUN, str(out), stop, str(state)], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800)


def by_slot(state):
    """Per round: the population's hashes and the metrics in slot order (trial ids differ between experiments)."""
    return {int(r): (record["hashes"], [record["metrics"][trial] for trial in state["slots"]])
            for r, record in state["rounds"].items()}


@pytest.mark.cluster  # SIGKILL of a driver with embedded Ray, as the other such tests (make cluster-test)
def test_a_killed_and_restored_experiment_equals_an_uninterrupted_one(tmp_path):
    pytest.importorskip("ray.tune")
    done = experiment(tmp_path / "whole", "none", tmp_path / "whole.json")
    assert done.returncode == 0, done.stderr[-3000:]
    killed = experiment(tmp_path / "killed", "2", tmp_path / "unused.json")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    rounds = json.loads((tmp_path / "killed" / "restore" / "metaeval" / "rounds.json").read_text())["rounds"]
    assert 2 <= max(map(int, rounds)) < 4  # killed mid-experiment
    resumed = experiment(tmp_path / "killed", "none", tmp_path / "resumed.json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole, restored = (json.loads((tmp_path / name).read_text()) for name in ("whole.json", "resumed.json"))
    assert sorted(by_slot(whole)) == sorted(by_slot(restored)) == list(range(5))
    assert by_slot(restored) == by_slot(whole)
    assert restored["payoffs"] == whole["payoffs"]


def iteration_ahead_pbt(**options):
    """Synchronous PBT whose exploit restores the copying trial's Tune iteration count one past
    the round of the checkpoint it copies. Tune's exploit pairs the copied trial's last
    checkpoint with its last result, and restores the count from that result: nothing makes
    them of the same iteration, and when they were not, a run hung."""
    from ray.train._internal.checkpoint_manager import _TrainingResult

    scheduler = synchronous_pbt(**options)

    class IterationAhead(type(scheduler)):
        def _exploit(self, tune_controller, trial, trial_to_clone):
            super()._exploit(tune_controller, trial, trial_to_clone)
            manager = trial.run_metadata.checkpoint_manager
            copied = manager.latest_checkpoint_result
            ahead = {**copied.metrics, "training_iteration": copied.metrics["training_iteration"] + 1}
            manager._latest_checkpoint_result = _TrainingResult(checkpoint=copied.checkpoint, metrics=ahead)

    scheduler.__class__ = IterationAhead
    return scheduler


def two_trials_of_kuhn(ray_session, tmp_path, name: str, scheduler, **config):
    """Two trials of metaeval's PPO trainable on kuhn_poker under ``scheduler``, stopped at round 3
    (a run that hangs ends at Tune's time budget, with an error); their results and the shared
    Evaluator's state."""
    from ray import tune

    actor = shared_evaluator(Fitness(game="kuhn_poker", trials=2, timeout=60), tmp_path / "metaeval",
                             name=f"metaeval-{name}")
    tuner = tune.Tuner(
        tune.with_resources(ppo_trainable, {"cpu": 0.5}),
        param_space={"game": "kuhn_poker", "episodes": 10, "seed": tune.grid_search([0, 1]),
                     "metaeval_evaluator": f"metaeval-{name}", **config},
        tune_config=tune.TuneConfig(scheduler=scheduler, time_budget_s=300),
        run_config=tune.RunConfig(name=name, storage_path=str(tmp_path), verbose=0, stop={ROUND: 3}))
    try:
        results = tuner.fit()
        state = ray_session.get(actor.state.remote())
    finally:
        ray_session.kill(actor)
    assert not results.errors, results.errors
    return results, state


def test_a_trial_whose_iteration_count_is_ahead_of_its_round_reports_every_round(ray_session, tmp_path):
    """A trial that copied a checkpoint resumes with Tune's iteration count past its round:
    timed and stopped by the round, it reports the last round too, and no round waits for a
    trial that has stopped."""
    pbt = iteration_ahead_pbt(metric=METRIC, mode="max", perturbation_interval=1, quantile_fraction=0.5,
                               hyperparam_mutations={"learning_rate": [1e-3, 2e-3]})
    results, state = two_trials_of_kuhn(ray_session, tmp_path, "ahead", pbt)
    assert sorted(state["rounds"]) == [0, 1, 2, 3]
    assert [result.metrics[ROUND] for result in results] == [3, 3]
    assert any(result.metrics["training_iteration"] > result.metrics[ROUND] for result in results)  # it did copy


def test_the_approximate_gap_is_reported_when_asked(tmp_path):
    game = games.load("kuhn_2p")
    shared = SharedEvaluator(Fitness(game="kuhn_2p", trials=2, approximate_gap=200), tmp_path)
    metrics = complete_round(shared, 0, {"a": policies_of(game, 0), "b": policies_of(game, 1)})
    values = {m["approximate_cce_gap"] for m in metrics.values()}
    assert len(values) == 1 and np.isfinite(values.pop())


def test_pb2_exploits_and_explores_on_the_rating(ray_session, tmp_path):
    """Tune's PB2 (a Gaussian-process explore) reads the same flat metric, timed and stopped by
    the round and synchronous (ratings compare within a round): every round completes, and the
    copied trial gets a learning rate of PB2's choosing."""
    from ray.tune.schedulers.pb2 import PB2

    pb2 = PB2(time_attr=ROUND, metric=METRIC, mode="max", perturbation_interval=1, quantile_fraction=0.5,
              hyperparam_bounds={"learning_rate": [1e-4, 1e-2]}, synch=True)
    results, state = two_trials_of_kuhn(ray_session, tmp_path, "pb2", pb2, learning_rate=1e-3)
    assert sorted(state["rounds"]) == [0, 1, 2, 3]
    assert [result.metrics[ROUND] for result in results] == [3, 3]
    assert any(result.config["learning_rate"] != 1e-3 for result in results)  # PB2 explored
    assert all(1e-4 <= result.config["learning_rate"] <= 1e-2 for result in results)
