"""``python -m bench.rl_oracle`` at a tiny size: metaeval's PSRO with the DQN oracle on leduc_2p,
and OpenSpiel's psro_v2 + rl_oracle beside it when the ``bench-openspiel-rl`` extra is installed."""

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("jax")

from bench import rl_oracle  # noqa: E402
from metaeval.spiel.mlp import MLPPolicy  # noqa: E402


def openspiel_exploitability(game, policies, probabilities):
    """OpenSpiel's own measure: the mixture by PolicyAggregator, then exploitability."""
    from open_spiel.python.algorithms import exploitability, policy_aggregator

    mixture = policy_aggregator.PolicyAggregator(game).aggregate([0, 1], policies, probabilities)
    return exploitability.exploitability(game, mixture)


def test_the_bench_measure_is_openspiels_exploitability():
    from metaeval import games

    game = games.load("leduc_2p")
    policies = [[MLPPolicy(game, p, seed=seed, output=output) for seed, output in ((1, "softmax"), (2, "greedy"))]
                for p in range(2)]
    probabilities = [[0.3, 0.7], [0.6, 0.4]]
    measure = rl_oracle.Exploitability()
    # the networks compute in float32, a state at a time or in batches: equal to float32's precision
    assert measure(policies, probabilities) == pytest.approx(
        openspiel_exploitability(game, policies, probabilities), abs=1e-6)
    # a later call with one more policy per player reuses the tables of those it has met
    policies = [[*member, MLPPolicy(game, p, seed=3)] for p, member in enumerate(policies)]
    probabilities = [[0.2, 0.0, 0.8], [0.1, 0.5, 0.4]]
    assert measure(policies, probabilities) == pytest.approx(
        openspiel_exploitability(game, policies, probabilities), abs=1e-6)


def test_the_bench_runs_both_sides_at_a_tiny_size(tmp_path):
    sides = "metaeval,openspiel" if rl_oracle.openspiel_available() else "metaeval"
    rl_oracle.main(["--seeds", "1", "--iterations", "3", "--episodes", "20", "--sims", "2", "--sides", sides,
                    "--parallel", "2", "--out", str(tmp_path)])
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert set(runs.side) == set(sides.split(",")) and (tmp_path / "exploitability.png").stat().st_size > 0
    for _, frame in runs.groupby("side"):
        assert list(frame.iteration) == [0, 1, 2]
        assert frame.wall_seconds.is_monotonic_increasing and (frame.cpu_seconds > 0).all()
        assert ((frame.exploitability > 0) & (frame.exploitability <= 13)).all()  # leduc's payoffs are within 13
    ours = runs[runs.side == "metaeval"]
    assert np.allclose(ours.exploitability, ours.own_exploitability, atol=1e-9)  # the loop's own record agrees
    # the first population is one uniform policy per player: leduc's uniform exploitability
    assert ours.exploitability.iloc[0] == pytest.approx(2.3736111111, abs=1e-9)
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert "metaeval exploitability" in summary and len(summary) == 3


def test_both_sides_learn_on_one_schedule():
    if not rl_oracle.openspiel_available():
        pytest.skip("needs the bench-openspiel-rl extra")
    import pyspiel
    from open_spiel.python import rl_environment

    from metaeval.responses import DQN

    schedule = {**rl_oracle.SCHEDULE, "batch_size": 8, "min_replay": 8, "transitions_per_update": 1}
    ours, episodes = DQN(**schedule), 300
    env = rl_environment.Environment(pyspiel.load_game("leduc_poker"))
    sizes = {"state_representation_size": env.observation_spec()["info_state"][0],
             "num_actions": env.action_spec()["num_actions"]}
    agents = [rl_oracle.dqn_policy_class()(env, p, **sizes, **rl_oracle.openspiel_dqn(schedule, episodes, 0))
              for p in range(2)]
    theirs = agents[0]._policy
    assert (theirs._layer_sizes, theirs._batch_size, theirs._min_buffer_size_to_learn, theirs._replay_buffer_capacity) \
        == (list(ours.hidden), ours.batch_size, ours.min_replay, ours.replay_capacity)
    assert theirs._update_target_network_every == ours.target_every * theirs._learn_every
    steps_per_episode = rl_oracle.DECISIONS_PER_EPISODE + 1  # a step per decision and one at the end
    for fraction in (0.0, 0.25, 0.5, 1.0):
        assert float(theirs.epsilon_schedule(fraction * episodes * steps_per_episode)) \
            == pytest.approx(ours._epsilon(fraction), abs=1e-6)
    # a step every 2 (OpenSpiel's own DQN learns before its first transition and fails there)
    for _ in range(20):
        time_step = env.reset()
        while not time_step.last():
            time_step = env.step([agents[time_step.observations["current_player"]].step(time_step).action])
        for agent in agents:
            agent.step(time_step)
    assert theirs._learn_every == 2 and theirs.loss is not None
