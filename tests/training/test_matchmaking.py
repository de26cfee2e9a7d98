import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaEvalError, spiel
from metaeval.training import matchmaking
from metaeval.responses import Opponents
from tests.conftest import random_games

RULES = ["uniform", "pfsp", "nash", "mecce", "deviation"]


def assert_distribution_over_members(distribution, sizes, player):
    assert distribution.shape == tuple(k for q, k in enumerate(sizes) if q != player)
    assert np.all(distribution >= 0)
    assert distribution.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.fixture(scope="module")
def evaluator():
    ev = metaeval.Evaluator("kuhn_3p")
    rng = np.random.default_rng(3)
    for p in range(3):
        for _ in range(3 + p):  # unequal sizes, so a wrong axis would show
            ev.add(p, spiel.random_policy(ev.game, p, rng))
    return ev


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_is_a_distribution_over_existing_members(evaluator, rule):
    for player in range(3):
        for member in [None, *evaluator.ids[player]]:
            distribution = evaluator.opponents(player, rule, member=member)
            assert_distribution_over_members(distribution, evaluator.sizes, player)
            opponents = Opponents.from_distribution(evaluator.population.policies, player, distribution)
            for profile in opponents.profiles:
                for q, policy in enumerate(profile):
                    assert (policy is None) == (q == player)
                    assert q == player or any(policy is pi for pi in evaluator.population.policies[q])


@pytest.mark.parametrize("solver", ["nash", "mecce", "deviation"])
def test_solver_rules_are_the_meta_distribution_conditioned_on_the_member(evaluator, solver):
    sigma = evaluator.meta_distribution(solver)
    for member_index, member in enumerate(evaluator.ids[1]):
        row = sigma[:, member_index, :]
        expected = row / row.sum() if row.sum() > 0 else sigma.sum(axis=1)
        np.testing.assert_allclose(evaluator.opponents(1, solver, member=member), expected, atol=1e-12)
    np.testing.assert_allclose(evaluator.opponents(1, solver), sigma.sum(axis=1), atol=1e-12)


def test_pfsp_weights_opponents_the_member_loses_to_more():
    # Row player's member 0 beats column 0 (payoff 1), draws column 1, loses to column 2;
    # member 1 beats every column.
    row = np.array([[1.0, 0.0, -1.0], [1.0, 1.0, 1.0]])
    game = metaeval.MetaGame.from_matrix(row, -row)
    weights = matchmaking.pfsp(game, 0, (-1, 1), member=0)
    np.testing.assert_allclose(weights, np.array([0.0, 0.25, 1.0]) / 1.25)  # (1 - x)^2, x = 1, 1/2, 0
    flat = matchmaking.pfsp(game, 0, (-1, 1), member=0, exponent=1)
    np.testing.assert_allclose(flat, np.array([0.0, 0.5, 1.0]) / 1.5)
    # A member that beats everyone gets uniform opponents rather than no distribution.
    np.testing.assert_allclose(matchmaking.pfsp(game, 0, (-1, 1), member=1), [1 / 3] * 3)


@settings(max_examples=40, deadline=None)
@given(random_games(players=(2, 3), strategies=(2, 4)), st.data())
def test_pfsp_orders_opponents_by_how_much_the_member_loses(game, data):
    player = data.draw(st.integers(0, game.num_players - 1))
    member = data.draw(st.integers(0, game.shape[player] - 1))
    weights = matchmaking.pfsp(game, player, (-1, 1), member=member).ravel()
    payoffs = np.moveaxis(game.payoffs[player], player, 0)[member].ravel()
    assert_distribution_over_members(weights.reshape(matchmaking.opponent_shape(game.shape, player)),
                                     game.shape, player)
    lower, higher = np.argmin(payoffs), np.argmax(payoffs)
    if payoffs[higher] > payoffs[lower]:
        assert weights[lower] > weights[higher]
    order = np.argsort(payoffs, kind="stable")
    assert np.all(np.diff(weights[order]) <= 1e-15)


def test_conditional_falls_back_to_the_marginal_for_a_member_without_mass():
    game = metaeval.MetaGame(np.zeros((2, 2, 3)))
    sigma = np.array([[0.2, 0.3, 0.5], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(matchmaking.conditional(game, 0, sigma, member=0), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(matchmaking.conditional(game, 0, sigma, member=1), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(matchmaking.conditional(game, 1, sigma, member=2), [1.0, 0.0])


def test_bad_rules_and_members_are_refused(evaluator):
    with pytest.raises(MetaEvalError, match="matchmaking rule"):
        evaluator.opponents(0, "elo")
    with pytest.raises(MetaEvalError, match="no policy with id"):
        evaluator.opponents(0, "pfsp", member=99)
    with pytest.raises(MetaEvalError, match="exponent"):
        evaluator.opponents(0, "pfsp", exponent=0)
    with pytest.raises(MetaEvalError, match="sigma of shape"):
        matchmaking.conditional(evaluator.metagame(), 0, np.ones((2, 2)))
