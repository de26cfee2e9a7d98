"""The matrix-free line products against the stored alpha-Rank chain, entry for entry."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import metaeval
from metaeval import MetaEvalError
from metaeval.ratings.alpharank import TIE_TOLERANCE, _joint_profiles, line_rates, log_fixation
from metaeval.solvers import line_rates as line_rates_module


def game_of(kind, seed, shape):
    payoffs = np.random.default_rng(seed).uniform(-1, 1, size=(len(shape), *shape))
    if kind == "ties":  # many exact ties along every line
        payoffs = np.round(payoffs * 2) / 2
    elif kind == "large":
        payoffs = payoffs * 1e6
    elif kind == "narrow":  # a range of 2e-7 around 3: gains far below the far-field delta
        payoffs = 3 + 1e-7 * payoffs
    return metaeval.MetaGame(payoffs)


def stored_rates(game, alpha, m, eps=0.01):
    """N[s, s'] = rate / largest rate, from the explicit switches alpha-Rank stores."""
    n, source, target, gain = _joint_profiles(game)
    if math.isinf(alpha):
        tie = np.abs(gain) <= TIE_TOLERANCE * np.ptp(game.payoffs)
        log_rate = np.where(tie, np.log(0.5), np.where(gain > 0, np.log1p(-eps), np.log(eps)))
    else:
        log_rate = log_fixation(gain, alpha, m)
    return sp.csr_matrix((np.exp(log_rate - log_rate.max()), (source, target)), shape=(n, n))


@pytest.mark.parametrize("kind", ["random", "ties", "large", "narrow"])
@pytest.mark.parametrize("alpha, m", [(100.0, 50), (1.0, 10), (0.05, 3), (1e4, 50), (30.0, 1000), (0.0, 5),
                                      (math.inf, 50)])
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 5), (3, 3, 2, 3)])
def test_products_equal_the_stored_chain(kind, alpha, m, shape):
    game = game_of(kind, 1, shape)
    rates, stored = line_rates(game, alpha, m, 0.01), stored_rates(game, alpha, m)
    x = np.random.default_rng(2).random(game.num_joints)
    for mine, expected in [(rates.transpose_product(x), stored.T @ x), (rates.product(x), stored @ x)]:
        np.testing.assert_allclose(mine, expected, rtol=1e-12, atol=1e-300)
    targets, log_rate = rates.row(7)
    row = stored.getrow(7).toarray().ravel()
    np.testing.assert_allclose(np.exp(log_rate), row[targets], rtol=1e-12)
    assert sorted(targets) == sorted(stored.getrow(7).indices)  # every move, underflowed or not


@pytest.mark.parametrize("chunk", [1, 9, 20])
def test_products_gathered_in_blocks_of_lines_equal_the_stored_chain(monkeypatch, chunk):
    # Blocks of one line, and of a few lines with a shorter last block (9 and 20 profiles
    # over lines of 4, 3 and 5): every profile is gathered and scattered exactly once.
    monkeypatch.setattr(line_rates_module, "_CHUNK_PROFILES", chunk)
    game = game_of("ties", 3, (4, 3, 5))
    rates, stored = line_rates(game, 5.0, 50, 0.01), stored_rates(game, 5.0, 50)
    x = np.random.default_rng(4).random(game.num_joints)
    np.testing.assert_allclose(rates.transpose_product(x), stored.T @ x, rtol=1e-12)
    np.testing.assert_allclose(rates.product(x), stored @ x, rtol=1e-12)


@pytest.mark.parametrize("fraction", [0.0, 2.0])
@pytest.mark.parametrize("kind", ["random", "ties", "narrow"])
def test_near_ties_stored_for_every_pair_or_by_position_equal_the_stored_chain(monkeypatch, fraction, kind):
    # Fraction 0: every offset with a near pair stores its corrections for all its pairs;
    # 2: none does, each near pair is stored with its position.
    monkeypatch.setattr(line_rates_module, "_DENSE_FRACTION", fraction)
    game = game_of(kind, 5, (6, 4, 5))
    rates, stored = line_rates(game, 100.0, 50, 0.01), stored_rates(game, 100.0, 50)
    positions = [position for _, _, near in rates.lines for _, position, _, _ in near]
    assert positions and all((position is None) == (fraction == 0.0) for position in positions)
    x = np.random.default_rng(6).random(game.num_joints)
    np.testing.assert_allclose(rates.transpose_product(x), stored.T @ x, rtol=1e-12)
    np.testing.assert_allclose(rates.product(x), stored @ x, rtol=1e-12)


def test_ties_and_the_removable_singularity_are_corrected_exactly():
    # Payoffs 0, 0, 1e-9 and 1 along every line: rho(0) = 1/m and rho(1e-9) ~ 1/m, where the
    # far formula 1 - exp(-alpha d) gives 0 and 1e-7.
    f = np.array([0.0, 0.0, 1e-9, 1.0])
    game = metaeval.MetaGame.from_matrix(np.tile(f[:, None], (1, 4)), np.tile(f[None, ::-1], (4, 1)))
    rates, stored = line_rates(game, 100.0, 50, 0.01), stored_rates(game, 100.0, 50)
    ones = np.ones(game.num_joints)
    np.testing.assert_allclose(rates.product(ones), stored @ ones, rtol=1e-13)
    np.testing.assert_allclose(rates.transpose_product(ones), stored.T @ ones, rtol=1e-13)


def test_no_overflow_at_huge_alpha():
    game = game_of("random", 3, (6, 5))
    rates = line_rates(game, 1e6, 50, 0.01)
    y = rates.transpose_product(np.ones(game.num_joints))
    assert np.all(np.isfinite(y)) and y.max() > 0
    np.testing.assert_allclose(y, stored_rates(game, 1e6, 50).T @ np.ones(game.num_joints), rtol=1e-12)


def test_the_budget_refuses_in_one_line(monkeypatch):
    monkeypatch.setenv("METAEVAL_MAX_MEMORY", "64K")
    with pytest.raises(MetaEvalError, match=r"^the alpha-Rank chain of MetaGame\(players=3.*over the memory budget"):
        line_rates(game_of("random", 0, (16, 16, 16)), 100.0, 50, 0.01)


def test_near_ties_are_priced_before_they_are_stored(monkeypatch):
    # Every player's payoff ignores its own strategy: every move is a tie, K^2 corrections a line.
    rng = np.random.default_rng(0)
    payoffs = np.stack([np.broadcast_to(rng.uniform(size=np.delete([24, 24, 24], p)).reshape(
        [1 if q == p else 24 for q in range(3)]), (24, 24, 24)) for p in range(3)])
    monkeypatch.setenv("METAEVAL_MAX_MEMORY", "3M")  # the sorted lines fit, their corrections not
    with pytest.raises(MetaEvalError, match="moves between nearly tied payoffs"):
        line_rates(metaeval.MetaGame(payoffs), 100.0, 50, 0.01)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("alpha, m", [(100.0, 50), (1.0, 10), (0.05, 3)])
def test_sweep_inverts_the_players_up_moves_in_turn(transpose, alpha, m):
    """sweep(y) = M^-1 y for M = T_1 D^-1 T_2 D^-1 T_3, T_p = D - U_p: U_p player p's up moves
    between free profiles at their far-expansion rates, identity rows off the free ones."""
    game = game_of("random", 5, (4, 3, 5))
    rates = line_rates(game, alpha, m, 0.01)
    rng = np.random.default_rng(6)
    free = rng.random(rates.n) < 0.8
    diagonal = np.where(free, rates.product(np.ones(rates.n)) + rng.random(rates.n), 1.0)
    coords = np.array(np.unravel_index(np.arange(rates.n), rates.shape))
    scale = np.diag(diagonal)
    system = np.eye(rates.n)
    for p, f in enumerate(game.payoffs):
        f = f.reshape(-1)
        others = np.delete(coords, p, axis=0)
        line = (others[:, :, None] == others[:, None, :]).all(axis=0) & free[:, None] & free[None, :]
        gain = f[None, :] - f[:, None]  # the move s -> s' gains f(s') - f(s)
        up = np.where(line & (gain > 0), line_rates_module._far(rates.up, np.maximum(gain, 0)) * rates.unit, 0.0)
        move = scale - (up.T if transpose else up)
        system = system @ (move if p == 0 else np.linalg.solve(scale, move))
    y = rng.random(rates.n)
    sweep = rates.sweep(diagonal, free, transpose)
    np.testing.assert_allclose(sweep(y), np.linalg.solve(system, y), rtol=1e-10)
    np.testing.assert_allclose(sweep(y), sweep(y.copy()), rtol=0)  # the buffers keep nothing between calls
