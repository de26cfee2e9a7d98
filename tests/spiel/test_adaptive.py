"""Adaptive episode allocation (metaeval.spiel.adaptive)."""

import numpy as np
import pytest

import metaeval
from metaeval import MetaEvalError, MetaGame, games, spiel
from metaeval.spiel.adaptive import EpisodeStreams, adaptive_metagame, allocate, sensitivity


@pytest.fixture(scope="module")
def kuhn():
    game = games.load("kuhn_3p")
    return game, spiel.Population.random(game, size=2, seed=0)


def test_streams_match_sampled_metagame_whatever_the_batching(kuhn):
    game, population = kuhn
    streams = EpisodeStreams(game, population, seed=5)
    for joint in np.ndindex(2, 2, 2):
        streams.play(joint, 3)
        streams.play(joint, 7)
    estimate = streams.metagame()
    reference = spiel.sampled_metagame(game, population, episodes=10, seed=5)
    np.testing.assert_allclose(estimate.payoffs, reference.payoffs, atol=1e-12)
    np.testing.assert_allclose(estimate.stderr, reference.stderr, atol=1e-12)
    np.testing.assert_array_equal(estimate.counts, reference.counts)


def test_allocate_spends_exactly_and_follows_the_shortfall():
    counts = np.array([[10, 0], [5, 5]])
    given = allocate(np.array([[10.0, 20.0], [10.0, 5.0]]), counts, 12)
    assert given.sum() == 12
    np.testing.assert_array_equal(given, [[0, 10], [2, 0]])
    np.testing.assert_array_equal(allocate(np.zeros((2, 2)), counts, 5).sum(), 5)


def test_sensitivity_finds_the_only_noisy_entry():
    rng = np.random.default_rng(0)
    stderr = np.zeros((2, 3, 3))
    stderr[0, 1, 2] = 0.3
    game = MetaGame(rng.uniform(-1, 1, (2, 3, 3)), stderr=stderr)
    weights = sensitivity(game, metaeval.RATERS["uniform"], {}, 200, rng)
    assert np.argmax(weights) == np.ravel_multi_index((1, 2), (3, 3))
    # uniform ratings: d r_0(1) / d G_0(1, 2) = 1/3, so the weight is (0.3 / 3)^2
    np.testing.assert_allclose(weights[1, 2], (0.3 / 3) ** 2, rtol=0.3)


def test_budget_is_spent_and_runs_are_reproducible(kuhn):
    game, population = kuhn
    rater = metaeval.RATERS["payoff"]
    uniform = adaptive_metagame(game, population, 400, rater, rule="uniform", rounds=3, seed=1)
    assert [c.episodes for c in uniform] == [32, 154, 277, 400]
    np.testing.assert_array_equal(uniform[-1].metagame.counts, 50)
    first = adaptive_metagame(game, population, 400, rater, rounds=3, replicates=8, seed=1)
    again = adaptive_metagame(game, population, 400, rater, rounds=3, replicates=8, seed=1)
    assert first[-1].episodes == 400
    np.testing.assert_array_equal(first[-1].metagame.counts, again[-1].metagame.counts)
    np.testing.assert_array_equal(first[-1].metagame.payoffs, again[-1].metagame.payoffs)
    assert not np.array_equal(first[-1].metagame.counts, uniform[-1].metagame.counts)


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(rule="greedy"), "rule must be"), (dict(budget=10), "budget must be"), (dict(initial=1), "initial must be")],
)
def test_bad_arguments(kuhn, kwargs, message):
    game, population = kuhn
    arguments = dict(budget=100, rater=metaeval.RATERS["uniform"]) | kwargs
    with pytest.raises(MetaEvalError, match=message):
        adaptive_metagame(game, population, **arguments)
