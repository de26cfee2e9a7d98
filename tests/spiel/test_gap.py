"""Full-game CCE/CE gaps against pyspiel.cce_dist, Nash equilibria of Kuhn poker, and bounds."""

import numpy as np
import pyspiel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import cfr, exploitability

from metaeval import MetaEvalError, games
from metaeval.solvers import equilibria
from metaeval.spiel import gap as gap_module
from metaeval.spiel import (ExactEvaluator, Population, cce_gap, ce_gap, exact_metagame, game_tree,
                            openspiel_best_response)
from tests.spiel.references import cce_dist, correlation_device, jpsro_ce_gains, kuhn_nash


def dirichlet_sigma(sizes, seed, concentration=1.0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(int(np.prod(sizes)), concentration)).reshape(sizes)


def sparse_sigma(sizes, seed, support=4):
    rng = np.random.default_rng(seed)
    flat = np.zeros(int(np.prod(sizes)))
    flat[rng.choice(flat.size, support, replace=False)] = rng.dirichlet(np.ones(support))
    return flat.reshape(sizes)


@pytest.mark.parametrize("name", ["kuhn_3p", "sheriff"])
@pytest.mark.parametrize("make_sigma", [dirichlet_sigma, sparse_sigma])
def test_cce_gap_equals_openspiel_cce_dist(name, make_sigma):
    game = games.load(name)
    pop = Population.random(game, 3, seed=21).replace_random(1, [2], seed=21, kind="deterministic")
    sigma = make_sigma(pop.sizes, seed=3)
    gap = cce_gap(game, pop, sigma)
    reference = cce_dist(game, pop, sigma)
    np.testing.assert_allclose(gap.best_response_values, reference.best_response_values, rtol=0, atol=1e-9)
    np.testing.assert_allclose(gap.on_policy_values, reference.on_policy_values, rtol=0, atol=1e-9)
    np.testing.assert_allclose(gap.per_player, reference.deviation_incentives, rtol=0, atol=1e-9)
    assert gap.total == pytest.approx(reference.dist_value, abs=1e-9)
    assert gap.total > 0.1  # random policies are far from equilibrium: the check has teeth


@pytest.mark.parametrize("name", ["kuhn_3p", "sheriff"])
def test_ce_gap_equals_jpsro_per_recommendation_cce_dist(name):
    game = games.load(name)
    pop = Population.random(game, 2, seed=8)
    sigma = dirichlet_sigma(pop.sizes, seed=1, concentration=0.5)
    gap = ce_gap(game, pop, sigma)
    for ours, theirs in zip(gap.gains, jpsro_ce_gains(game, pop, sigma)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    assert gap.total == pytest.approx(sum(g.sum() for g in gap.gains), abs=1e-12)


def test_best_responses_attain_their_values():
    game = games.load("kuhn_3p")
    pop = Population.random(game, 3, seed=2)
    sigma = dirichlet_sigma(pop.sizes, seed=4)
    gap = cce_gap(game, pop, sigma)
    for p, response in enumerate(gap.best_responses):
        # Player p always plays its best response; opponents follow sigma's marginal.
        lone = Population(game, [[response] if q == p else pop.policies[q] for q in range(3)])
        payoff = exact_metagame(game, lone).payoffs[p]
        value = np.sum(payoff * sigma.sum(axis=p, keepdims=True))
        assert value == pytest.approx(gap.best_response_values[p], abs=1e-12)
        assert set(np.unique(response.action_probability_array)) <= {0.0, 1.0}


@pytest.mark.parametrize("alphas", [(0.0,), (0.0, 1 / 6, 1 / 3)])
def test_mixtures_of_kuhn_nash_equilibria_have_zero_gap(alphas):
    """In a two-player zero-sum game any mixture of equilibrium profiles is a CCE."""
    game = games.load("kuhn_2p")
    equilibria_ = [kuhn_nash(game, alpha) for alpha in alphas]
    pop = Population.random(game, 2, seed=0)
    pop = Population(game, [[*(e[p] for e in equilibria_), *pop.policies[p]] for p in range(2)])
    n = len(alphas)
    sigma = np.zeros(pop.sizes)
    sigma[:n, :n] = dirichlet_sigma((n, n), seed=5)
    gap = cce_gap(game, pop, sigma)
    assert gap.total == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(gap.on_policy_values, [-1 / 18, 1 / 18], atol=1e-12)  # the game's value
    assert ce_gap(game, pop, sigma).total == pytest.approx(0.0, abs=1e-12)
    # Moving mass onto a random policy opens a gap.
    sigma[n, 0], sigma[0, 0] = sigma[0, 0], 0.0
    assert cce_gap(game, pop, sigma).total > 1e-3


def test_point_mass_gap_is_nash_conv_of_a_cfr_policy():
    game = games.load("kuhn_2p")
    solver = cfr.CFRSolver(game)
    for _ in range(60):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()  # one TabularPolicy for both players
    pop = Population(game, [[average], [average]])
    gap = cce_gap(game, pop, np.ones((1, 1)))
    nash_conv = exploitability.nash_conv(game, average)
    assert gap.total == pytest.approx(nash_conv, abs=1e-12)
    assert 0 < gap.total < 0.05  # CFR is close to, not at, an equilibrium


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(["kuhn_3p", "sheriff", "kuhn_2p"]), seed=st.integers(0, 2**16),
       concentration=st.sampled_from([0.05, 1.0]))
def test_gaps_are_nonnegative_and_bound_the_meta_game_gaps(name, seed, concentration):
    game = games.load(name)
    pop = Population.random(game, 3, seed=seed)
    sigma = dirichlet_sigma(pop.sizes, seed, concentration)
    metagame = exact_metagame(game, pop)
    cce, ce = cce_gap(game, pop, sigma), ce_gap(game, pop, sigma)
    assert np.all(cce.per_player >= 0) and np.all(ce.per_player >= 0)
    # Full-game deviations include every meta-game deviation.
    meta_cce = equilibria.deviation_gains(metagame, sigma)
    meta_ce = equilibria.ce_gains(metagame, sigma)
    for p in range(pop.num_players):
        assert cce.best_response_values[p] - cce.on_policy_values[p] >= meta_cce[p].max() - 1e-10
        assert np.all(ce.gains[p] >= meta_ce[p].max(axis=1) - 1e-10)
    # Conditioning on the recommendation can only help the deviator.
    assert np.all(ce.per_player >= cce.per_player - 1e-10)
    assert cce.on_policy_values == pytest.approx(
        [np.sum(sigma * metagame.payoffs[p]) for p in range(pop.num_players)], abs=1e-10
    )


def test_a_shared_evaluator_gives_the_same_gap():
    game = games.load("sheriff")
    pop = Population.random(game, 3, seed=0)
    sigma = dirichlet_sigma(pop.sizes, seed=0)
    evaluator = ExactEvaluator(game)
    evaluator.metagame(pop)
    assert cce_gap(game, pop, sigma, evaluator).total == pytest.approx(cce_gap(game, pop, sigma).total, abs=1e-12)


@pytest.mark.parametrize(
    "sigma, message",
    [
        (np.full((2, 2), 0.25), "joint shape \\(2, 2, 2\\), got \\(2, 2\\)"),
        (np.full((2, 2, 2), 0.25), "must sum to 1, sums to 2"),
        (np.array([-0.5, 1.5, 0, 0, 0, 0, 0, 0]).reshape(2, 2, 2), "finite and non-negative"),
        (np.full((2, 2, 2), np.nan), "finite and non-negative"),
    ],
)
def test_bad_sigma_is_rejected(sigma, message):
    pop = Population.random("kuhn_3p", 2, seed=0)
    with pytest.raises(MetaEvalError, match=message):
        cce_gap("kuhn_3p", pop, sigma)
    with pytest.raises(MetaEvalError, match=message):
        ce_gap("kuhn_3p", pop, sigma)


def test_population_of_another_game_is_rejected():
    pop = Population.random("kuhn_2p", 2, seed=0)
    with pytest.raises(MetaEvalError, match="population is for kuhn_poker\\(players=2\\), not sheriff"):
        cce_gap("sheriff", pop, np.full((2, 2), 0.25))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_openspiel_best_response_is_the_policy_cce_dist_returns(seed):
    game = games.load("kuhn_3p")
    pop = Population.random(game, 3, seed=seed, kind="deterministic")
    sigma = sparse_sigma(pop.sizes, seed=seed, support=3)
    uniform_rows = 0
    for p in range(3):
        ours = openspiel_best_response(game, pop, sigma, p).action_probability_array
        info = pyspiel.cce_dist(game, correlation_device(pop, sigma), p, prob_cut_threshold=0.0)
        theirs = policy_lib.pyspiel_policy_to_python_policy(game, info.best_response_policies[0], players=(p,))
        rows = [theirs.state_lookup[key] for key in game_tree(game).players[p].keys]
        np.testing.assert_array_equal(ours, theirs.action_probability_array[rows])
        uniform_rows += int(np.sum(ours.max(axis=1) < 1))
    assert uniform_rows > 0  # states the opponents never reach are played uniformly, as OpenSpiel does


def test_cutting_the_terminals_into_pieces_changes_the_gaps_by_rounding_only(monkeypatch):
    game = games.load("kuhn_3p")
    pop = Population.random(game, 3, seed=6)
    sigma = dirichlet_sigma(pop.sizes, seed=2)
    whole, whole_ce = cce_gap(game, pop, sigma), ce_gap(game, pop, sigma)
    monkeypatch.setattr(gap_module, "PIECE_TERMINALS", 7)  # 312 terminals: 45 pieces per player
    assert len(gap_module.gap_pieces(game_tree(game), per_recommendation=False)) == 3 * 45
    pieces, pieces_ce = cce_gap(game, pop, sigma), ce_gap(game, pop, sigma)
    np.testing.assert_allclose(pieces.best_response_values, whole.best_response_values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pieces.on_policy_values, whole.on_policy_values, rtol=0, atol=1e-12)
    for ours, theirs in zip(pieces.best_responses, whole.best_responses):
        assert np.array_equal(ours.action_probability_array, theirs.action_probability_array)
    for ours, theirs in zip(pieces_ce.gains, whole_ce.gains):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    assert whole.total > 0.1
