"""Adaptive episode allocation (metaeval.spiel.adaptive)."""

import numpy as np
import pytest

import metaeval
from metaeval import MetaEvalError, MetaGame, games, spiel
from metaeval.spiel.adaptive import (EpisodeStreams, adaptive_metagame, allocate, sensitivity, squared_norms, stein,
                                    uncertain_edges)
from metaeval.spiel.population import random_policies


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


def test_joints_played_in_shards_add_what_playing_them_one_by_one_adds(kuhn):
    game, population = kuhn
    joints = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]])
    by_shards, one_by_one = (EpisodeStreams(game, population, seed=5) for _ in range(2))
    for episodes in ([3, 1, 2], [2, 5, 1]):  # the second batch continues each joint's stream
        by_shards.play_joints(joints, np.array(episodes))
        for joint, count in zip(joints, episodes):
            one_by_one.play(joint, count)
    for field in ("counts", "sums", "products"):
        assert getattr(by_shards, field).tobytes() == getattr(one_by_one, field).tobytes(), field
    assert by_shards.counts.sum() == 14


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


@pytest.fixture(scope="module")
def one_noisy_row():
    """Matching pennies: row policies pure, pure and uniform, column policies pure, so only
    the three joints of the uniform row policy have noisy returns (variance 1)."""
    game = games.load("matrix_mp")
    rows = random_policies(game, 0, [0, 1], 0, "deterministic") + random_policies(game, 0, [2], 0, "uniform")
    population = spiel.Population(game, [rows, random_policies(game, 1, [0, 1, 2], 0, "deterministic")])
    return game, population, spiel.exact_metagame(game, population)


def test_covariance_sees_zero_sum_returns(one_noisy_row):
    game, population, _ = one_noisy_row
    streams = EpisodeStreams(game, population, seed=0)
    returns = {joint: np.concatenate([streams.play(joint, 20), streams.play(joint, 30)]) for joint in np.ndindex(3, 3)}
    covariance = streams.covariance()
    for joint, sample in returns.items():
        np.testing.assert_allclose(covariance[joint], np.cov(sample.T) / 50, atol=1e-12)
    np.testing.assert_array_equal(covariance[:2], 0.0)
    assert np.all(covariance[2, :, 0, 1] < 0)  # the returns are (x, -x), x = +-1


def test_factored_estimates_pool_as_the_estimates_themselves():
    """Rounds' Stein estimates kept as factors (replicates x ratings, replicates x joints)
    give the squared norms of the summed [ratings, joints, players] estimates."""
    rng = np.random.default_rng(4)
    game = MetaGame(rng.uniform(-1, 1, (2, 3, 4)), stderr=rng.uniform(0.1, 0.3, (2, 3, 4)))
    parts = [stein(game, metaeval.RATERS["payoff"], {}, 6, rng).scaled(rng.uniform(1, 3, (3, 4))) for _ in range(3)]
    summed = sum(np.tensordot(part.centred, part.draws, axes=(0, 0)) for part in parts)  # [R, 3, 4, N]
    assert summed.shape == (7, 3, 4, 2)
    explicit = np.maximum(((summed / 3) ** 2).sum(axis=(0, -1)) - sum(part.noise for part in parts) / 9, 0.0)
    np.testing.assert_allclose(squared_norms(parts, 3), explicit, rtol=1e-12, atol=1e-15)
    assert explicit.max() > 0


def test_stein_draws_keep_a_zero_sum_game_zero_sum(one_noisy_row):
    _, _, exact = one_noisy_row
    covariance = np.zeros((3, 3, 2, 2))
    covariance[2] = np.array([[1.0, -1.0], [-1.0, 1.0]]) / 50

    def zero_sum_only(game):
        assert np.abs(game.payoffs.sum(axis=0)).max() < 1e-9
        return metaeval.RATERS["uniform"](game)

    weights = sensitivity(exact, zero_sum_only, {}, 64, np.random.default_rng(0), covariance)
    assert weights[:2].max() == 0 and weights[2].min() > 0


def mean_squared_error(history, exact, rater):
    return float(np.mean((np.concatenate(rater(history[-1].metagame).ratings)
                          - np.concatenate(rater(exact).ratings)) ** 2))


def test_variance_rule_spends_on_the_noisy_joints_and_needs_fewer_episodes(one_noisy_row):
    game, population, exact = one_noisy_row
    rater = metaeval.RATERS["uniform"]
    errors = {"uniform": [], "variance": []}
    for seed in range(12):
        uniform = adaptive_metagame(game, population, 1800, rater, rule="uniform", rounds=4, seed=seed)
        variance = adaptive_metagame(game, population, 1080, rater, rule="variance", rounds=4, replicates=16,
                                     seed=seed)
        assert variance[-1].metagame.counts[2].sum() > 0.85 * 1080
        errors["uniform"].append(mean_squared_error(uniform, exact, rater))
        errors["variance"].append(mean_squared_error(variance, exact, rater))
    # 60% of the budget, placed where the noise is, beats the whole budget spread evenly
    assert np.mean(errors["variance"]) < np.mean(errors["uniform"])


def test_uncertain_edges_skip_resolved_edges_and_exact_ties():
    payoffs = np.zeros((2, 2, 2))
    payoffs[0] = [[0.0, 5.0], [0.1, 0.0]]  # row player's edges: (0,0)-(1,0) close, (0,1)-(1,1) far apart
    variance = np.zeros((2, 2, 2))
    variance[0, :, 0] = 0.01  # only the close edge is noisy; column player's edges are exact ties
    covariance = np.zeros((2, 2, 2, 2))
    covariance[..., 0, 0] = variance[0]
    weight = uncertain_edges(payoffs, covariance, np.full((2, 2), 100), 1.96)
    np.testing.assert_allclose(weight, [[0.5, 0.0], [0.5, 0.0]])
    covariance[..., 0, 0] = 1e-4 * variance[0]  # 0.1 apart with a standard error of 0.0014: resolved
    np.testing.assert_array_equal(uncertain_edges(payoffs, covariance, np.full((2, 2), 100), 1.96), 0.0)


@pytest.mark.parametrize("rule", ["variance", "response_graph"])
def test_budget_is_spent_and_runs_are_reproducible(kuhn, rule):
    game, population = kuhn
    rater = metaeval.RATERS["payoff"]
    uniform = adaptive_metagame(game, population, 400, rater, rule="uniform", initial=4, rounds=3, seed=1)
    assert [c.episodes for c in uniform] == [32, 154, 277, 400]
    np.testing.assert_array_equal(uniform[-1].metagame.counts, 50)
    first = adaptive_metagame(game, population, 400, rater, rule=rule, initial=4, rounds=3, replicates=8, seed=1)
    again = adaptive_metagame(game, population, 400, rater, rule=rule, initial=4, rounds=3, replicates=8, seed=1)
    assert [c.episodes for c in first] == [32, 154, 277, 400]
    np.testing.assert_array_equal(first[-1].metagame.counts, again[-1].metagame.counts)
    np.testing.assert_array_equal(first[-1].metagame.payoffs, again[-1].metagame.payoffs)
    assert not np.array_equal(first[-1].metagame.counts, uniform[-1].metagame.counts)


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(rule="greedy"), "rule must be"), (dict(budget=10), "budget must be"), (dict(initial=1), "initial must be"),
     (dict(workers=0, budget=200), "workers must be")],
)
def test_bad_arguments(kuhn, kwargs, message):
    game, population = kuhn
    arguments = dict(budget=100, rater=metaeval.RATERS["uniform"]) | kwargs
    with pytest.raises(MetaEvalError, match=message):
        adaptive_metagame(game, population, **arguments)
