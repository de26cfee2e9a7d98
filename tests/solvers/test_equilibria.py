import numpy as np
import pytest
from hypothesis import given, settings

from metaeval import MetaEvalError, MetaGame
from metaeval.solvers import equilibria as eq
from tests.conftest import random_games, rock_paper_scissors


def brute_force_gains(game, sigma):
    gains = []
    for p in range(game.num_players):
        row = []
        for dev in range(game.shape[p]):
            total = 0.0
            for a in game.joint_profiles():
                b = list(a)
                b[p] = dev
                total += sigma[a] * (game.payoffs[p][tuple(b)] - game.payoffs[p][a])
            row.append(total)
        gains.append(np.array(row))
    return gains


@settings(max_examples=40, deadline=None)
@given(random_games())
def test_gains_match_brute_force_and_constraint_matrix(game):
    rng = np.random.default_rng(game.num_joints)
    sigma = rng.dirichlet(np.ones(game.num_joints)).reshape(game.shape)
    gains = eq.deviation_gains(game, sigma)
    for fast, slow in zip(gains, brute_force_gains(game, sigma)):
        np.testing.assert_allclose(fast, slow, atol=1e-12)
    np.testing.assert_allclose(eq.cce_constraints(game) @ sigma.ravel(), np.concatenate(gains), atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(random_games())
def test_cce_constraint_stack_holds_each_game_s_deviation_payoffs(game):
    """Row (p, a'_p) of each matrix is player p's deviation payoffs to a'_p, bit for bit."""
    stack = np.stack([game.payoffs, -game.payoffs[::-1]])
    matrices = eq.cce_constraint_stack(stack)
    for payoffs, matrix in zip(stack, matrices):
        drawn = MetaGame(payoffs)
        rows = [eq.deviation_payoffs(drawn, p).reshape(drawn.shape[p], -1) for p in range(drawn.num_players)]
        np.testing.assert_array_equal(matrix, np.concatenate(rows))
    np.testing.assert_array_equal(eq.cce_constraints(game), matrices[0])


def test_uniform_is_a_cce_of_rps_and_pure_profile_is_not():
    rps = rock_paper_scissors()
    assert eq.cce_gap(rps, np.full((3, 3), 1 / 9)) == pytest.approx(0, abs=1e-15)
    pure = np.zeros((3, 3))
    pure[0, 0] = 1
    # rock vs rock: each player gains 1 by switching to paper.
    assert eq.cce_gap(rps, pure) == pytest.approx(2.0)
    assert eq.ce_gap(rps, pure) == pytest.approx(2.0)


def test_ce_gap_at_least_cce_gap_on_random_games(rng):
    for _ in range(20):
        g = MetaGame(rng.normal(size=(3, 3, 2, 4)))
        sigma = rng.dirichlet(np.ones(g.num_joints)).reshape(g.shape)
        assert eq.ce_gap(g, sigma) >= eq.cce_gap(g, sigma) - 1e-12


def test_bad_sigma_rejected():
    rps = rock_paper_scissors()
    with pytest.raises(MetaEvalError, match="joint shape"):
        eq.deviation_gains(rps, np.ones(9) / 9)
    with pytest.raises(MetaEvalError, match="sum to 1"):
        eq.deviation_gains(rps, np.ones((3, 3)))
