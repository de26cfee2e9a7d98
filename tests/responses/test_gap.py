"""The approximate CCE gap (maths, section 4.1) against the exact one on a game small enough to walk."""

import numpy as np
import pyspiel
import pytest

from metaeval import spiel
from metaeval.errors import MetaEvalError

from metaeval.responses.gap import approximate_cce_gap
from metaeval.responses import PPO, Search

pytest.importorskip("jax")


@pytest.fixture(scope="module")
def kuhn():
    game = pyspiel.load_game("kuhn_poker")
    population = spiel.Population.random(game, size=3, seed=0)
    rng = np.random.default_rng(4)
    sigma = rng.dirichlet(np.ones(9)).reshape(3, 3)
    return game, population, sigma, spiel.cce_gap(game, population, sigma)


def test_a_well_trained_estimate_is_close_below_the_exact_gap(kuhn):
    """With 3,000 training episodes the learned deviations come within 0.15 of the best
    responses, and the exact gap lies at or above the interval's lower end."""
    game, population, sigma, exact = kuhn
    estimate = approximate_cce_gap(game, population.policies, sigma, PPO(), 3000, 4000, np.random.default_rng(0))
    low, high = estimate.interval(0.95)
    assert exact.total >= low
    assert estimate.total > exact.total - 0.15
    assert estimate.per_player == pytest.approx(estimate.deviation_values - estimate.on_policy_values)
    assert np.all(estimate.on_policy_stderr > 0) and estimate.stderr > 0
    assert "at least" in str(estimate) and estimate.approximate


def test_the_on_policy_values_estimate_the_exact_ones(kuhn):
    game, population, sigma, exact = kuhn
    estimate = approximate_cce_gap(game, population.policies, sigma, PPO(), 10, 20000, np.random.default_rng(1))
    assert np.all(np.abs(estimate.on_policy_values - exact.on_policy_values) <= 4 * estimate.on_policy_stderr)


class FirstLegalAction:
    """A 'learner' that ignores its budget and deviates to always taking the first legal action."""

    def train(self, game, player, opponents, episodes, rng):
        return None

    def policy(self, game, player, values):
        def first(state, player_id):
            return {state.legal_actions(player_id)[0]: 1.0}

        return spiel.CallablePolicy(first, game, [player])


def test_terms_are_not_clipped_at_zero(kuhn):
    """A poor deviation is worth less than sigma: its term is negative and stays so in the
    total (clipping would bias the estimate upward)."""
    game, population, sigma, exact = kuhn
    estimate = approximate_cce_gap(game, population.policies, sigma, FirstLegalAction(), 0, 4000,
                                   np.random.default_rng(2))
    assert np.any(estimate.per_player < -4 * np.sqrt(estimate.deviation_stderr**2 + estimate.on_policy_stderr**2))
    assert estimate.total == pytest.approx(estimate.per_player.sum())
    assert estimate.total < exact.total


def test_a_larger_budget_gives_a_larger_estimate(kuhn):
    game, population, sigma, _ = kuhn
    short, long = (approximate_cce_gap(game, population.policies, sigma, PPO(), budget, 4000,
                                       np.random.default_rng(2)) for budget in (10, 3000))
    assert short.total + 3 * short.stderr < long.total - 3 * long.stderr


def test_the_same_seed_gives_the_same_estimate(kuhn):
    game, population, sigma, _ = kuhn
    first, again = (approximate_cce_gap(game, population.policies, sigma, PPO(), 200, 500,
                                        np.random.default_rng(7)) for _ in range(2))
    assert np.array_equal(first.per_player, again.per_player)


def test_the_estimate_says_whether_the_search_walked_the_tree_or_sampled(kuhn):
    """kuhn's 30 terminals per opponent profile fit a budget of 1,000: the search walks the
    tree (the exact best response) unless told to sample; PPO is named as it is."""
    game, population, sigma, _ = kuhn
    names = [approximate_cce_gap(game, population.policies, sigma, responder, 1000, 100,
                                 np.random.default_rng(0)).responder
             for responder in (Search(), Search(exhaustive=False), PPO())]
    assert names == ["search (tree walked)", "search (sampled)", "ppo"]


def test_bad_input_is_a_clear_error(kuhn):
    game, population, sigma, _ = kuhn
    with pytest.raises(MetaEvalError, match="joint shape"):
        approximate_cce_gap(game, population.policies, sigma[:2], PPO(), 10, 100, np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="evaluation_episodes"):
        approximate_cce_gap(game, population.policies, sigma, PPO(), 10, 1, np.random.default_rng(0))


def test_the_evaluator_estimates_the_gap_of_a_game_it_cannot_walk():
    """goofspiel with 8 cards and hidden bids (exact mode refuses it): the Evaluator's exact
    gap is refused in one line, the approximate one is estimated from episodes."""
    import metaeval

    evaluator = metaeval.Evaluator("goofspiel(num_cards=8,imp_info=True)", episodes=20, seed=0)
    for player in range(2):
        for seed in range(2):
            evaluator.add(player, spiel.LazyRandomPolicy(evaluator.game, player, seed))
    sigma = evaluator.meta_distribution("mecce")
    with pytest.raises(MetaEvalError, match="walks the game tree.*approximate_gap"):
        evaluator.gap(sigma)
    estimate = evaluator.approximate_gap(sigma, PPO(), 500, 400, np.random.default_rng(0))
    assert estimate.per_player.shape == (2,) and np.isfinite(estimate.total) and estimate.stderr > 0
    assert estimate.training_episodes == 500 and estimate.evaluation_episodes == 400
