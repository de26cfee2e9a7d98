import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import best_response as openspiel_best_response
from open_spiel.python.algorithms import policy_aggregator

import metaeval
from metaeval import games, spiel
from metaeval.training import oracles
from metaeval.loops.evolve import EvolveConfig, evolve
from metaeval.training.meta_solvers import marginals


def evaluator_with(game, per_player, seed):
    rng = np.random.default_rng(seed)
    evaluator = metaeval.Evaluator(game)
    for p in range(game.num_players()):
        for _ in range(per_player):
            evaluator.add(p, spiel.random_policy(game, p, rng))
    return evaluator


def value_against(game, player, response, opponents_joint):
    """E u_player when ``player`` plays ``response`` and the others a correlated mixture
    ``[(probability, [policies per player])]``, by OpenSpiel's expected_returns."""
    total = 0.0
    for probability, joint in opponents_joint:
        profile = list(joint)
        profile[player] = response
        pyspiel_profile = [policy_lib.python_policy_to_pyspiel_policy(pi) for pi in profile]
        joint_policy = pyspiel.to_joint_tabular_policy(pyspiel_profile, True)
        total += probability * pyspiel.expected_returns(game.new_initial_state(), joint_policy, -1, True)[player]
    return total


def test_jpsro_oracle_is_a_best_response_to_the_opponents_joint_marginal():
    game = games.load("kuhn_3p")
    evaluator = evaluator_with(game, 2, seed=0)
    sigma = np.random.default_rng(1).dirichlet(np.ones(8)).reshape(2, 2, 2)
    population = evaluator.population
    joints = [(sigma[j], [population.policies[p][j[p]] for p in range(3)]) for j in np.ndindex(sigma.shape)]
    for player in range(3):
        response = oracles.jpsro(evaluator, player, sigma, np.random.default_rng(0))
        mu = [(probability, policy_lib.python_policy_to_pyspiel_policy(
               policy_lib.merge_tabular_policies([j[q] for q in range(3)], game)))
              for probability, j in joints]
        reference = pyspiel.cce_dist(game, mu, player, prob_cut_threshold=0.0)
        ours = value_against(game, player, response, joints)
        assert ours == pytest.approx(reference.best_response_values[0], abs=1e-9)


def test_psro_oracle_is_a_best_response_to_the_product_of_marginals():
    game = games.load("kuhn_3p")
    evaluator = evaluator_with(game, 2, seed=2)
    sigma = np.random.default_rng(3).dirichlet(np.ones(8)).reshape(2, 2, 2)  # correlated
    population = evaluator.population
    mixtures = marginals(sigma)
    aggregated = policy_aggregator.PolicyAggregator(game).aggregate(
        range(3), [list(player) for player in population.policies], mixtures)
    for player in range(3):
        response = oracles.psro(evaluator, player, sigma, np.random.default_rng(0))
        reference = openspiel_best_response.BestResponsePolicy(game, player, aggregated)
        value = reference.value(game.new_initial_state())
        independent = [(np.prod([mixtures[q][j[q]] for q in range(3) if q != player]),
                        [population.policies[q][j[q]] for q in range(3)])
                       for j in np.ndindex(sigma.shape) if j[player] == 0]
        assert value_against(game, player, response, independent) == pytest.approx(value, abs=1e-9)


def test_random_and_hook_oracles_have_the_same_shape():
    game = games.load("kuhn_2p")
    evaluator = evaluator_with(game, 1, seed=4)
    sigma = np.ones((1, 1))
    drawn = oracles.random(evaluator, 1, sigma, np.random.default_rng(7))
    hooked = oracles.from_new_policy(lambda g, p, rng: spiel.random_policy(g, p, rng))(
        evaluator, 1, sigma, np.random.default_rng(7))
    np.testing.assert_array_equal(drawn.action_probability_array, hooked.action_probability_array)
    assert evaluator.add(1, drawn) == 1


@pytest.mark.parametrize("game, rater, seed, iterations", [
    ("sheriff", "uniform", 0, 20), ("kuhn_3p", "deviation", 0, 20), ("sheriff", "uniform", 29, 24)])
def test_a_best_response_loop_does_not_depend_on_rounding_noise_in_sigma(monkeypatch, game, rater, seed,
                                                                          iterations):
    """Actions tied in exact arithmetic do not go to whichever rounding favours: with the
    loop's MECCE moved by a relative 1e-14 (as another build of the linear algebra moves
    it), the loop adds the same best responses. (When the lowest action with the best value
    in floating point was taken, the first two runs took other best responses from
    iteration 7 (sheriff) and 10 (kuhn_3p) on; with the tolerance scaled by the values
    rather than by the terminals' weights, the third from iteration 20, where player 1's
    values cancel to rounding residue.)"""
    config = EvolveConfig(game=game, rater=rater, replace="best-response", iterations=iterations, seed=seed)
    unperturbed = evolve(config, out=None, progress=False)
    meta_distribution = metaeval.Evaluator.meta_distribution

    def perturbed(self, solver="uniform", **options):
        sigma = meta_distribution(self, solver, **options)
        noise = 1 + 1e-14 * np.random.default_rng(sigma.size).standard_normal(sigma.shape)
        return sigma * noise / (sigma * noise).sum()

    monkeypatch.setattr(metaeval.Evaluator, "meta_distribution", perturbed)
    moved = evolve(config, out=None, progress=False)
    assert [r["mecce_payoff"] for r in moved] != [r["mecce_payoff"] for r in unperturbed]  # the noise is there
    for a, b in zip(unperturbed, moved):
        assert a["policy_ids"] == b["policy_ids"] and a["discarded"] == b["discarded"]
        np.testing.assert_array_equal(a["mean_payoff"], b["mean_payoff"])  # the same populations
        assert b["cce_gap"] == pytest.approx(a["cce_gap"], abs=1e-9)


def deterministic_evaluator(game, per_player, seed):
    """An evaluator of deterministic policies: they leave states unreached, so best actions tie."""
    rng = np.random.default_rng(seed)
    evaluator = metaeval.Evaluator(game)
    for p in range(game.num_players()):
        for _ in range(per_player):
            evaluator.add(p, spiel.random_policy(game, p, rng, "deterministic"))
    return evaluator


def test_drawn_best_responses_attain_the_value_and_draw_uniformly_among_tied_actions():
    game = games.load("kuhn_3p")
    evaluator = deterministic_evaluator(game, 2, seed=5)
    population = evaluator.population
    sigma = np.random.default_rng(6).dirichlet(np.ones(8)).reshape(2, 2, 2)
    gap = evaluator.gap(sigma)
    player, draws = 1, 400
    responses = [evaluator.best_response(player, sigma, np.random.default_rng(seed)) for seed in range(draws)]
    tables = np.array([r.action_probability_array for r in responses])
    distinct = np.unique(tables, axis=0, return_index=True)[1]
    assert len(distinct) > 1  # ties to draw from
    for index in distinct[:5]:
        lone = spiel.Population(game, [[responses[index]] if q == player else population.policies[q]
                                       for q in range(3)])
        payoff = spiel.exact_metagame(game, lone).payoffs[player]
        assert np.sum(payoff * sigma.sum(axis=player, keepdims=True)) == pytest.approx(
            gap.best_response_values[player], abs=1e-12)
    best = gap.best_actions[player]
    counts = tables.sum(axis=0)  # per state and action: how often drawn
    assert not counts[~best].any()  # only best actions are drawn
    expected = np.broadcast_to(draws / best.sum(axis=1, keepdims=True), best.shape)
    assert np.all(np.abs(counts - expected)[best] < 5 * np.sqrt(expected[best]))  # uniformly
    np.testing.assert_array_equal(
        evaluator.best_response(player, sigma, np.random.default_rng(3)).action_probability_array, tables[3])
    with pytest.raises(metaeval.MetaEvalError, match="rng"):
        evaluator.best_response(player, sigma, None)


def test_best_actions_tie_within_the_tolerance_not_by_rounding(monkeypatch):
    """Sheriff with deterministic policies: moving sigma by a relative 1e-14 leaves the best
    actions as they are; taking ties in floating point (tolerance 0) it moves them in several of 20."""
    game = games.load("sheriff")

    def moved_best_actions(seed):
        evaluator = deterministic_evaluator(game, 2, seed)
        sigma = np.random.default_rng(seed).dirichlet(np.ones(4)).reshape(2, 2)
        noise = 1 + 1e-14 * np.random.default_rng(11).standard_normal(sigma.shape)
        exact, moved = evaluator.gap(sigma), evaluator.gap(sigma * noise / (sigma * noise).sum())
        return sum(not np.array_equal(a, b) for a, b in zip(exact.best_actions, moved.best_actions))

    assert sum(map(moved_best_actions, range(20))) == 0
    monkeypatch.setattr(spiel.gap, "TIE_TOLERANCE", 0.0)
    assert sum(map(moved_best_actions, range(20))) > 0
