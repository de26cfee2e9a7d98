"""Adaptive allocation with its episodes played on the meta-game builds' Ray actors."""

import numpy as np
import pytest

import metaeval
from metaeval import games, spiel
from metaeval.spiel.adaptive import adaptive_metagame
from metaeval.spiel.mlp import MLPPolicy


def kuhn():
    game = games.load("kuhn_3p")
    return game, spiel.Population.random(game, size=2, seed=0), metaeval.RATERS["payoff"]


def leduc():
    game = games.load("leduc_poker")
    policies = [[MLPPolicy(game, player, seed=10 * player + i) for i in range(3)] for player in range(2)]
    return game, spiel.Population(game, policies), "nash"


@pytest.mark.parametrize("population", [kuhn, leduc])
@pytest.mark.parametrize("rule", ["variance", "response_graph"])
def test_same_seed_same_allocations_and_estimates_on_ray_and_in_process(ray_session, population, rule):
    game, population, rater = population()
    budget = 8 * int(np.prod(population.sizes))
    runs = [adaptive_metagame(game, population, budget, rater, rule=rule, initial=2, rounds=3, replicates=4, seed=3,
                              workers=workers) for workers in (2, 1)]
    on_ray, local = ([c.metagame for c in run] for run in runs)
    assert [c.episodes for c in runs[0]] == [c.episodes for c in runs[1]]
    assert runs[0][-1].episodes == budget
    for ray_estimate, local_estimate in zip(on_ray, local, strict=True):
        assert np.array_equal(ray_estimate.counts, local_estimate.counts)
        assert ray_estimate.payoffs.tobytes() == local_estimate.payoffs.tobytes()
        assert ray_estimate.stderr.tobytes() == local_estimate.stderr.tobytes()
    assert len(np.unique(local[-1].counts)) > 1  # the rule did allocate unevenly
