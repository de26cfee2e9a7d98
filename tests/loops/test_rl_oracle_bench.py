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
