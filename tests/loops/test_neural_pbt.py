"""PBT with neural members (DQN, PPO) and evolve's learned network replacements: seeded,
resumed bit for bit, exploit copies weights that then train on their own, bad options refused."""

import json

import numpy as np
import pytest

from metaeval import MetaEvalError
from metaeval.cli import main
from metaeval.loops.evolve import EvolveConfig, Evolution
from metaeval.loops.pbt import PBT, PBTConfig, pbt
from metaeval.spiel.mlp import MLPPolicy
from metaeval.responses import DQN, PPO, Opponents, dqn, ppo
from metaeval.responses.gap import describe
from tests.conftest import without_timings

pytest.importorskip("jax")

SMALL = dict(game="kuhn_poker", learner="ppo", steps=3, interval=2, population=4, episodes_per_step=32, seed=5,
             mode="sampled", episodes=20, learner_options={"hidden": [8], "num_envs": 8, "rollout_steps": 4},
             approximate_gap=32, approximate_gap_episodes=20)


def weights(run: PBT) -> list:
    """Every member's weights, player by player."""
    return [[member.values for member in player] for player in run.members]


def same_weights(a: list, b: list) -> bool:
    """Whether two players-by-members lists of weights are equal, bit for bit."""
    from flax.traverse_util import flatten_dict

    pairs = [(flatten_dict(x), flatten_dict(y)) for pa, pb in zip(a, b) for x, y in zip(pa, pb)]
    return all(x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for x, y in pairs)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    out = tmp_path_factory.mktemp("neural-pbt")
    run = PBT(PBTConfig(**SMALL), out=out)
    return out, run.run(progress=False), weights(run)


def test_neural_pbt_runs_end_to_end_and_a_same_seed_rerun_has_the_same_weights(straight):
    out, records, trained = straight
    assert [r["iteration"] for r in records] == [0, 1, 2]
    assert "parents" in records[1] and "parents" not in records[0]
    for record in records:
        assert record["cce_gap"] is None and record["approximate_cce_gap"] is not None  # sampled mode
        assert len(record["hyperparameters"]) == 2 and set(record["hyperparameters"][0][0]) == {
            "learning_rate", "entropy_coef"}
    for name in ["summary.csv", "population.npz", "cce_gap.png", "payoff.png"]:
        assert (out / name).stat().st_size > 0
    rerun = PBT(PBTConfig(**SMALL))
    rerun.run(progress=False)
    assert same_weights(weights(rerun), trained)
    other = PBT(PBTConfig(**{**SMALL, "seed": 6, "steps": 1}))
    other.run(progress=False)
    assert not same_weights(weights(other), trained)


def test_a_resumed_neural_run_equals_an_uninterrupted_one(tmp_path, straight):
    _, records, trained = straight
    pbt(PBTConfig(**{**SMALL, "steps": 2}), out=tmp_path, progress=False)  # stopped after the exploit
    resumed = PBT(PBTConfig(**SMALL), out=tmp_path)
    assert resumed.step_index == 2
    assert without_timings(resumed.run(progress=False)) == without_timings(json.loads(json.dumps(records)))
    assert same_weights(weights(resumed), trained)


def test_exploit_copies_weights_and_perturbs_hyperparameters_then_the_copy_trains_on_its_own():
    run = PBT(PBTConfig(**{**SMALL, "interval": 1, "mutation_scale": 0.2}))
    record = run.step()
    for p in range(2):
        ids = record["policy_ids"][p]
        low, parent = ids.index(record["discarded"][p][0]), ids.index(record["parents"][p][0])
        child, source = run.members[p][low], run.members[p][parent]
        assert same_weights([[child.values]], [[source.values]])
        for name in ("learning_rate", "entropy_coef"):
            ratio = getattr(child.learner, name) / getattr(source.learner, name)
            assert ratio == pytest.approx(0.8) or ratio == pytest.approx(1.2)
        assert not np.shares_memory(child.values["actor"]["Dense_0"]["kernel"],  # a copy of the parent's
                                    source.values["actor"]["Dense_0"]["kernel"])
    run.step()
    for p in range(2):
        ids = record["policy_ids"][p]
        low, parent = ids.index(record["discarded"][p][0]), ids.index(record["parents"][p][0])
        assert not same_weights([[run.members[p][low].values]], [[run.members[p][parent].values]])


def test_dqn_members_explore_their_learning_rate_and_qlearning_members_their_values():
    run = PBT(PBTConfig(**{**SMALL, "learner": "dqn", "steps": 1, "learner_options": {"hidden": [8]}}))
    rates = {m.learner.learning_rate for player in run.members for m in player}
    assert len(rates) == 8 and all(0.5e-3 <= rate <= 2e-3 for rate in rates)  # around DQN's 1e-3
    tabular = PBT(PBTConfig(game="kuhn_poker", population=4, steps=1, episodes_per_step=10))
    assert {m.learner.step_size for player in tabular.members for m in player} == {0.1}


@pytest.mark.parametrize("change, message", [
    (dict(learner_options={"learning_rate": -1.0}), "PPO's learning_rate is out of range"),
    (dict(learner_options={"alpha": 1}), "bad options for learner 'ppo'"),
    (dict(learner="dqn", learner_options={"num_envs": 0}), "DQN's num_envs must be a positive int"),
    (dict(learner="a2c"), "unknown learner 'a2c'"),
    (dict(mutation_scale=1.0), r"mutation scale must lie in \[0, 1\) for ppo"),
    (dict(approximate_gap_learner="qlearning"), "approximate_gap_learner must be one of dqn, ppo"),
])
def test_bad_learner_settings_are_refused_in_one_line(change, message):
    with pytest.raises(MetaEvalError, match=message) as error:
        PBTConfig(**{**SMALL, **change})
    assert "\n" not in str(error.value)


def test_cli_refuses_bad_learner_options_with_exit_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["pbt", "--game", "kuhn_poker", "--learner", "dqn", "--learner-option", "learning_rate=0",
            "--steps", "1", "--population", "4", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "DQN's learning_rate is out of range" in err
    assert not out.exists()


def test_evolve_replaces_with_dqn_networks_on_the_command_line(tmp_path, capsys):
    args = ["evolve", "--game", "kuhn_poker", "--mode", "sampled", "--episodes", "20", "--iterations", "2",
            "--population", "4", "--replace", "learned", "--learner", "dqn", "--learner-episodes", "64",
            "--approximate-gap", "64", "--approximate-gap-episodes", "20", "--out", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    settings = json.loads((tmp_path / "config.json").read_text())["settings"]
    assert (settings["replace"], settings["learner"]) == ("learned", "dqn")
    records = [json.loads(line) for line in (tmp_path / "iterations.jsonl").read_text().splitlines()]
    assert all(r["approximate_cce_gap"] is not None for r in records)
    last = records[-1]  # the command's last line reads the last record's estimate as a bound
    assert last["approximate_cce_gap_responder"] == "ppo"  # the default responder of the gap
    assert "approximate gap: " + describe(last["approximate_cce_gap_estimate"], last["approximate_cce_gap_stderr"],
                                          "ppo") in out
    run = Evolution(EvolveConfig(game="kuhn_poker", mode="sampled", episodes=20, iterations=1, population=4,
                                 replace="learned", learner="dqn", learner_episodes=64))
    record = run.step()
    added = [run.evaluator.population.policies[p][run.evaluator.ids[p].index(record["added"][p][0])]
             for p in range(2)]
    assert all(isinstance(policy, MLPPolicy) and policy.output == "greedy" for policy in added)
    with pytest.raises(MetaEvalError, match="'learned' with learner dqn or ppo"):
        EvolveConfig(game="goofspiel(num_cards=8,imp_info=True)", replace="learned")


@pytest.mark.parametrize("learner, module", [(PPO, ppo), (DQN, dqn)])
def test_members_with_their_own_hyperparameters_share_one_compiled_update(learner, module):
    """The explored hyper-parameters are inputs of the compiled update, not constants of it:
    a member with a new learning rate (or entropy coefficient) compiles nothing new."""
    from metaeval import games, spiel

    game = games.load("kuhn_poker")
    opponents = Opponents([(None, spiel.population.lazy_random_policy(game, 1, np.random.default_rng(0)))], [1.0])
    compiled = []
    for rate in (1e-3, 2e-3, 3e-3):
        options = {"hidden": (8,), "learning_rate": rate, "num_envs": 4}
        if learner is PPO:
            options["entropy_coef"] = rate
        else:
            options.update(min_replay=8, batch_size=8)
        learner(**options).train(game, 0, opponents, 8, np.random.default_rng(0))
        compiled.append(module._jitted.cache_info().currsize)
    assert compiled[0] == compiled[-1]


def test_ray_workers_train_neural_members_as_one_process_does(ray_session):
    config = {**SMALL, "steps": 1, "approximate_gap": 0}
    alone, parallel = PBT(PBTConfig(**config)), PBT(PBTConfig(**config, workers=2))
    assert without_timings(parallel.run(progress=False)) == without_timings(alone.run(progress=False))
    assert same_weights(weights(parallel), weights(alone))
