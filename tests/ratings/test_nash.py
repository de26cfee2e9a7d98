import importlib

import numpy as np
import pyspiel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from open_spiel.python.algorithms import nash_averaging
from scipy.optimize import linprog

import metaeval
from metaeval import MetaEvalError
from metaeval.ratings.logit import max_regret
from metaeval.ratings.base import marginals
from metaeval.ratings.nash_zero_sum import max_entropy_nash, optimal_supports
from tests import regression
from tests.conftest import dominant_strategy_game, random_games, rock_paper_scissors


def entropy(p):
    p = p[p > 1e-15]
    return float(-(p * np.log(p)).sum())


def antisymmetric(seed, k):
    row = np.random.default_rng(seed).uniform(-1, 1, (k, k))
    return row - row.T


@pytest.mark.parametrize("seed, k", [(0, 3), (1, 5), (2, 7), (3, 9)])
def test_agent_vs_agent_matches_openspiel(seed, k):
    row = antisymmetric(seed, k)
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(row), "nash")
    _, scores = nash_averaging.nash_averaging(pyspiel.create_matrix_game(row, -row))
    np.testing.assert_allclose(rating.ratings[0], scores.ravel(), atol=1e-6)  # value 0
    np.testing.assert_allclose(rating.ratings[1], scores.ravel(), atol=1e-6)


@pytest.mark.parametrize("seed, agents, tasks", [(0, 4, 3), (1, 6, 5), (2, 3, 8)])
def test_agent_vs_task_matches_openspiel(seed, agents, tasks):
    scores = np.random.default_rng(seed).uniform(0, 1, (agents, tasks))
    scores = (scores - scores.min(0)) / (scores.max(0) - scores.min(0))  # OpenSpiel's normalisation
    (x, y), (agent_scores, task_scores) = nash_averaging.nash_averaging_avt_matrix(scores)
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(scores), "nash")
    value = rating.diagnostics["value"]
    # OpenSpiel reports payoffs against the equilibrium; ours subtract the value.
    np.testing.assert_allclose(rating.ratings[0], agent_scores.ravel() - value, atol=1e-6)
    np.testing.assert_allclose(rating.ratings[1], task_scores.ravel() + value, atol=1e-6)
    # OpenSpiel's interior-point strategies are only ~1e-5 accurate (entropy is flat at
    # its maximum); the ratings above are far less sensitive to that.
    np.testing.assert_allclose(marginals(rating.distribution)[0], x.ravel(), atol=1e-4)
    np.testing.assert_allclose(marginals(rating.distribution)[1], y.ravel(), atol=1e-4)


def test_degenerate_game_gives_the_exact_maximiser():
    """Integer payoffs leave a face of equilibria and entropy is flat at its maximum, so
    interior-point answers (OpenSpiel's included) are off by ~1e-5 here; the dual Newton
    method on the face's largest support gives x = y = (1/2, 0, 0, 1/2, 0, 0, 0)."""
    row = np.array(
        [[0, -1, 0, 0, 1, 0, 1], [1, 0, 0, -1, 0, -2, 1], [0, 0, 0, -1, 0, -2, -2],
         [0, 1, 1, 0, 2, 1, 1], [-1, 0, 0, -2, 0, 0, -1], [0, 2, 2, -1, 0, 0, 1],
         [-1, -1, 2, -1, 1, -1, 0]], dtype=float,
    )
    x, y, value = max_entropy_nash(row)
    np.testing.assert_allclose(x, [0.5, 0, 0, 0.5, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(y, x, atol=1e-12)
    assert value == pytest.approx(0.0, abs=1e-12)
    assert max_regret(np.stack([row, -row]), [x, y]) < 1e-12


def test_clone_invariance_needs_a_unique_equilibrium():
    """Splitting mass over a clone adds x_i log 2 to the entropy, so when a player's
    equilibria form a face the clone tilts the maximiser, and the opponent's ratings move.
    Here every column is optimal; cloning column 0 moves y from (1/2, 1/2) to thirds."""
    game = metaeval.MetaGame.from_matrix([[0.0, 0.0], [0.0, -4.0]])
    np.testing.assert_allclose(metaeval.rate(game, "nash").ratings[0], [0.0, -2.0], atol=1e-9)
    cloned = metaeval.rate(game.add_clone(1, 0), "nash")
    np.testing.assert_allclose(cloned.ratings[0], [0.0, -4.0 / 3.0], atol=1e-9)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(game=random_games(players=(2,), strategies=(2, 5)), data=st.data())
def test_zero_sum_clone_invariance(game, data):
    """Continuous random payoffs: the equilibrium is unique (almost surely)."""
    zero_sum = metaeval.MetaGame.from_matrix(game.payoffs[0])
    player = data.draw(st.integers(0, 1))
    index = data.draw(st.integers(0, zero_sum.shape[player] - 1))
    before = metaeval.rate(zero_sum, "nash")
    after = metaeval.rate(zero_sum.add_clone(player, index), "nash")
    for p in range(2):
        np.testing.assert_allclose(after.ratings[p][: zero_sum.shape[p]], before.ratings[p], atol=1e-7)
    np.testing.assert_allclose(after.ratings[player][-1], before.ratings[player][index], atol=1e-7)
    # the clone shares its original's mass equally
    np.testing.assert_allclose(
        marginals(after.distribution)[player][-1], marginals(after.distribution)[player][index], atol=1e-6
    )


@settings(max_examples=15, deadline=None, derandomize=True)
@given(game=random_games(players=(2, 3), strategies=(2, 5)))
def test_limiting_logit_equilibrium_regret_below_1e6(game):
    rating = metaeval.rate(game, "nash")
    assert rating.diagnostics["equilibrium"] == "limiting logit equilibrium"
    assert rating.diagnostics["max_regret"] < 1e-6
    assert max(r.max() for r in rating.ratings) < 1e-6  # nobody gains by deviating
    for x in marginals(rating.distribution):
        assert np.all(x >= 0) and x.sum() == pytest.approx(1.0)


def test_unique_mixed_equilibrium_closed_form():
    # Row indifferent when 2q = 1 - q (q = 1/3); column indifferent when 1 - p = p (p = 1/2).
    game = metaeval.MetaGame.from_matrix([[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]])
    rating = metaeval.rate(game, "nash")
    np.testing.assert_allclose(marginals(rating.distribution)[0], [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(marginals(rating.distribution)[1], [1 / 3, 2 / 3], atol=1e-12)
    np.testing.assert_allclose(rating.ratings[0], [0.0, 0.0], atol=1e-12)


def test_rock_paper_scissors_and_dominant_strategy():
    rating = metaeval.rate(rock_paper_scissors(), "nash")
    for r in rating.ratings:
        np.testing.assert_allclose(r, 0.0, atol=1e-9)
    assert rating.diagnostics["value"] == pytest.approx(0.0, abs=1e-12)
    rating = metaeval.rate(dominant_strategy_game(), "nash")
    for r in rating.ratings:
        assert np.argmax(r) == 2 and r[2] == pytest.approx(0.0, abs=1e-12)
        assert np.all(r[:2] < -0.5)


def test_three_player_zero_sum_uses_logit_and_is_deterministic():
    payoffs = np.random.default_rng(4).uniform(-1, 1, (3, 3, 3, 3))
    payoffs[2] = -payoffs[0] - payoffs[1]
    game = metaeval.MetaGame(payoffs)
    first, second = metaeval.rate(game, "nash"), metaeval.rate(game, "nash")
    assert first.diagnostics["equilibrium"] == "limiting logit equilibrium"
    for a, b in zip(first.ratings, second.ratings):
        np.testing.assert_array_equal(a, b)


def test_bad_input():
    with pytest.raises(MetaEvalError, match="at least 2 players"):
        metaeval.rate(metaeval.MetaGame(np.zeros((1, 3))), "nash")
    with pytest.raises(MetaEvalError, match="has no option"):
        metaeval.rate(rock_paper_scissors(), "nash", alpha=1)
    from metaeval.ratings.nash import nash

    with pytest.raises(MetaEvalError, match="needs a MetaGame"):
        nash(np.zeros((2, 2, 2)))


def test_an_equilibrium_with_large_regret_is_refused(monkeypatch):
    nash_module = importlib.import_module("metaeval.ratings.nash")

    game = metaeval.MetaGame.from_matrix([[3.0, 0.0], [5.0, 1.0]], [[3.0, 5.0], [0.0, 1.0]])
    uniform = [np.full(2, 0.5), np.full(2, 0.5)]
    monkeypatch.setattr(nash_module, "limiting_logit_equilibrium", lambda payoffs, symmetric=False: uniform)
    with pytest.raises(MetaEvalError, match="max regret 0.75"):
        metaeval.rate(game, "nash")


def test_a_game_where_the_interior_point_solver_is_inaccurate():
    """From the stress corpus: Clarabel ends 'optimal_inaccurate' on this zero-sum game;
    the maximiser has rows 0 and 4, copies, sharing 0.4."""
    row = np.array([[-1, 2], [0, 0], [1, -2], [1, -2], [-1, 2], [2, 0], [0, 0], [0, -1]], dtype=float)
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(row), "nash")
    np.testing.assert_allclose(marginals(rating.distribution)[0], [0.2, 0, 0, 0, 0.2, 0.6, 0, 0], atol=1e-9)
    np.testing.assert_allclose(marginals(rating.distribution)[1], [0.4, 0.6], atol=1e-9)
    assert rating.diagnostics["max_regret"] < 1e-9


# Replicate 172 of rate(MetaGame(np.stack([A, -A]), stderr=np.full((2, 4, 4), 0.3)), "nash",
# bootstrap=200) for A = np.random.default_rng(3).normal(size=(4, 4)). Its row strategy 3
# falls 2.2e-4 of the range short of a best response: with the value slack it could carry
# mass 2.6e-9, next to the support LP's cut at 1e-9, where HiGHS stopped 'Not Set'.
REPLICATE_172 = np.array([
    [2.038292958145078, -2.5893607070776006, 0.5387953696903425, -0.765567805416211],
    [-0.18080654898365778, 0.29938727656102976, -2.3588925212813696, -0.3742491823302428],
    [-0.8299248065462083, 3.086370985928508, -0.025947469075559726, -0.6332803675006224],
    [0.520343479012044, -0.7239547675661776, -1.1447174467176593, -0.5343859904530133],
])


def test_zero_sum_game_with_a_near_best_response_gets_pygambits_equilibrium():
    import pygambit

    reference = pygambit.nash.lp_solve(pygambit.Game.from_arrays(REPLICATE_172, -REPLICATE_172),
                                       rational=False).equilibria[0]
    rating = metaeval.rate(metaeval.MetaGame.from_matrix(REPLICATE_172), "nash")
    mixtures = marginals(rating.distribution)
    for x, player in zip(mixtures, reference.game.players):
        np.testing.assert_allclose(x, [float(reference[s]) for s in player.strategies], atol=1e-9)
    assert mixtures[0][3] == 0.0


def test_perturbed_and_rescaled_zero_sum_games_are_rated():
    rng = np.random.default_rng(0)
    for _ in range(300):
        noise, scale = 10 ** rng.uniform(-12, -3), 10 ** rng.uniform(-6, 6)
        row = scale * (REPLICATE_172 + noise * rng.standard_normal((4, 4)))
        rating = metaeval.rate(metaeval.MetaGame.from_matrix(row), "nash")
        assert rating.diagnostics["max_regret"] <= 1e-9 * rating.diagnostics["payoff_range"]


def test_bootstrap_of_an_ordinary_zero_sum_game_rates_every_replicate():
    payoffs = np.random.default_rng(3).normal(size=(4, 4))
    game = metaeval.MetaGame(np.stack([payoffs, -payoffs]), stderr=np.full((2, 4, 4), 0.3))
    rating = metaeval.rate(game, "nash", bootstrap=200)
    assert rating.diagnostics["bootstrap"]["failed"] == 0
    assert rating.replicates[0].shape == (200, 4)


def test_a_strategy_of_tiny_equilibrium_mass_stays_in_the_support():
    game = regression.load("leduc_adaptive_500_face")
    rating = metaeval.rate(game, "nash")
    x, y = marginals(rating.distribution)
    assert rating.diagnostics["max_regret"] <= 1e-9 * rating.diagnostics["payoff_range"]
    assert max_regret(game.payoffs, [x, y]) <= 1e-9 * rating.diagnostics["payoff_range"]
    assert 0 < x[66] <= 2.1e-8  # the strategy the value needs, at its tiny mass


def largest_masses_and_gaps(row):
    """Per row strategy of the zero-sum game ``row``, by its own LPs: the largest mass it
    carries in a maximin strategy and its largest payoff gap against a minimax strategy."""
    k_row, k_col = row.shape
    options = {"method": "highs-ds", "options": {"primal_feasibility_tolerance": 1e-10}}
    # the value v: max v s.t. A^T x >= v, x in the simplex
    value = -linprog(-np.eye(k_row + 1)[-1], A_ub=np.hstack([-row.T, np.ones((k_col, 1))]), b_ub=np.zeros(k_col),
                     A_eq=[[1.0] * k_row + [0.0]], b_eq=[1], bounds=[(0, None)] * k_row + [(None, None)], **options).fun
    masses = [-linprog(-np.eye(k_row)[i], A_ub=-row.T, b_ub=np.full(k_col, -value), A_eq=np.ones((1, k_row)),
                       b_eq=[1], **options).fun for i in range(k_row)]
    gaps = [value - linprog(row[i], A_ub=row, b_ub=np.full(k_row, value), A_eq=np.ones((1, k_col)), b_eq=[1],
                            **options).fun for i in range(k_row)]
    return np.array(masses), np.array(gaps)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(game=random_games(players=(2,), strategies=(2, 7), integer=True))
def test_optimal_supports_are_those_of_the_strategies_own_lps(game):
    """Small integer payoffs tie often, so the optimal faces are rarely points; whatever the
    face, each strategy carries mass in some equilibrium or loses payoff against all of the
    opponent's, and optimal_supports agrees with one LP per strategy and kind."""
    row = game.payoffs[0]
    rows, columns = optimal_supports(row)
    for support, payoffs in ((rows, row), (columns, -row.T)):
        masses, gaps = largest_masses_and_gaps(payoffs)
        assert np.all(np.minimum(masses, gaps) < 1e-9) and np.all(np.maximum(masses, gaps) > 1e-3)
        np.testing.assert_array_equal(support, masses > gaps)


def test_psro_meta_game_whose_face_needs_a_mass_ratio_of_1e5_gets_the_exact_equilibrium():
    """A sub-game of a leduc_2p PSRO meta-game (payoffs multiples of 1/34,560). The supports
    were read off the cone of optimal pairs with masses up to 1e9 times the smallest, and
    HiGHS ended that LP 'Unbounded' or 'Unknown' at every tolerance. Its equilibrium is
    unique (the square systems of its supports are regular), so pygambit's exact one is the
    maximum-entropy one; a row strategy 4.7e-6 short of a best response stays out of it."""
    import pygambit

    game = regression.load("leduc_2p_psro_search_seed1_iteration110")
    integers = np.round(game.payoffs[0] * 34560).astype(int)
    assert np.array_equal(integers / 34560, game.payoffs[0])
    exact = pygambit.nash.lp_solve(pygambit.Game.from_arrays(integers, -integers), rational=True).equilibria[0]
    rating = metaeval.rate(game, "nash")
    mixtures = marginals(rating.distribution)
    for x, player in zip(mixtures, exact.game.players):
        reference = np.array([float(exact[s]) for s in player.strategies])
        np.testing.assert_array_equal(x > 0, reference > 0)
        np.testing.assert_allclose(x, reference, atol=1e-8)
    face = game.payoffs[0][np.ix_(mixtures[0] > 0, mixtures[1] > 0)]  # A_{S,T}^T x = v, sum x = 1
    assert face.shape == (19, 19) and np.linalg.matrix_rank(np.block([[face.T, -np.ones((19, 1))],
                                                                       [np.ones((1, 19)), 0]])) == 20
    value = float(exact.payoff(list(exact.game.players)[0])) / 34560
    assert rating.diagnostics["value"] == pytest.approx(value, abs=1e-12)
    assert rating.diagnostics["max_regret"] <= 1e-11 * rating.diagnostics["payoff_range"]
    masses, gaps = largest_masses_and_gaps(game.payoffs[0])
    near_best = game.strategy_names[0].index("policy 68")
    assert gaps[near_best] == pytest.approx(4.72e-6, rel=1e-2) and masses[near_best] < 1e-9


# -- symmetric games -----------------------------------------------------------------------
def symmetric_game(rng, players, k):
    """G_p(a) = G_0(a_p, a_-p), with G_0 symmetric in the others' strategies."""
    if players == 2:
        row = rng.uniform(-1, 1, (k, k))
        return np.stack([row, row.T])
    first = rng.uniform(-1, 1, (k, k, k))
    first = (first + first.transpose(0, 2, 1)) / 2
    return np.stack([first, first.transpose(1, 0, 2), first.transpose(1, 2, 0)])


@pytest.mark.parametrize("crash, mixed", [(-10.0, 0.9), (-8.0, 0.875)])
def test_symmetric_chicken_is_rated_at_its_symmetric_equilibrium(crash, mixed):
    """Both pure asymmetric equilibria rate one player -9 (or -7); the symmetric branch
    ends at the mixed equilibrium, where both strategies of both players are rated 0."""
    row = np.array([[0.0, -1.0], [1.0, crash]])
    rating = metaeval.rate(metaeval.MetaGame(np.stack([row, row.T])), "nash")
    for x, values in zip(marginals(rating.distribution), rating.ratings):
        np.testing.assert_allclose(x, [mixed, 1 - mixed], atol=1e-12)
        np.testing.assert_allclose(values, 0.0, atol=1e-12)
    assert rating.diagnostics["equilibrium"] == "limiting logit equilibrium (symmetric branch)"


def test_identical_players_get_identical_ratings():
    """200 random symmetric games: 2 players with 2 to 8 strategies, 3 with 2 to 5."""
    rng = np.random.default_rng(0)
    for players in [2] * 100 + [3] * 100:
        payoffs = symmetric_game(rng, players, int(rng.integers(2, 9 if players == 2 else 6)))
        rating = metaeval.rate(metaeval.MetaGame(payoffs), "nash")
        mixtures = marginals(rating.distribution)
        for values, x in zip(rating.ratings[1:], mixtures[1:]):
            np.testing.assert_allclose(values, rating.ratings[0], atol=1e-12 * np.ptp(payoffs))
            np.testing.assert_allclose(x, mixtures[0], rtol=0, atol=1e-15)


def test_symmetric_branch_ends_where_pygambits_follower_stays_symmetric():
    """pygambit's follower leaves the symmetric branch in about half of these games;
    where it does not, both end at the same equilibrium."""
    from metaeval.ratings.logit import gambit_branch_end
    from metaeval.ratings.nash import well_scaled

    rng = np.random.default_rng(1)
    compared = 0
    for _ in range(30):
        payoffs = symmetric_game(rng, 2, int(rng.integers(2, 9)))
        theirs = gambit_branch_end(well_scaled(payoffs)[0])
        if np.abs(theirs[0] - theirs[1]).max() > 1e-6:
            continue
        compared += 1
        ours = marginals(metaeval.rate(metaeval.MetaGame(payoffs), "nash").distribution)
        np.testing.assert_allclose(ours[0], theirs[0], atol=1e-5)
    assert compared >= 10


# A symmetric game found among random small-integer symmetric 4 x 4 games: its only
# equilibrium (pygambit's vertex enumeration) is x = y = (6, 4, 9, 0) / 19. The unrestricted
# tracer and pygambit's follower both stall at a branch point, at x = y = (0.34, 0.25, 0.19,
# 0.21) with max regret 0.06 x range, and the rater refused the game after 21 s.
UNIQUE_EQUILIBRIUM_GAME = np.array([[-1, 3, 0, 0], [0, -3, 2, 2], [1, 0, 0, -3], [-2, 2, 0, 0]], dtype=float)
UNIQUE_EQUILIBRIUM = np.array([6, 4, 9, 0]) / 19


def test_symmetric_game_with_a_unique_equilibrium_is_rated_at_it():
    import pygambit

    game = pygambit.Game.from_arrays(UNIQUE_EQUILIBRIUM_GAME, UNIQUE_EQUILIBRIUM_GAME.T)
    (only,) = pygambit.nash.enummixed_solve(game, rational=True).equilibria
    for player in game.players:
        np.testing.assert_array_equal([float(only[s]) for s in player.strategies], UNIQUE_EQUILIBRIUM)
    rating = metaeval.rate(metaeval.MetaGame(np.stack([UNIQUE_EQUILIBRIUM_GAME, UNIQUE_EQUILIBRIUM_GAME.T])), "nash")
    for x in marginals(rating.distribution):
        np.testing.assert_allclose(x, UNIQUE_EQUILIBRIUM, atol=1e-12)


def test_where_the_trace_stalls_vertex_enumeration_finds_the_equilibrium(monkeypatch):
    """The unrestricted tracer on the game above, with pygambit's follower failing too: no
    support read off the stalled point, nor any left by dropping its least-played
    strategies, is the equilibrium's; vertex enumeration lists it."""
    from metaeval.ratings import logit
    from metaeval.ratings.nash import well_scaled

    payoffs = well_scaled(np.stack([UNIQUE_EQUILIBRIUM_GAME, UNIQUE_EQUILIBRIUM_GAME.T]))[0]
    with pytest.raises(logit.BranchStalled) as stalled:
        logit.trace_logit_branch(payoffs, logit.TRACE_REGRET)
    assert max_regret(payoffs, stalled.value.strategies) > 0.05

    def fails(payoffs):
        raise MetaEvalError("pygambit's follower failed")

    monkeypatch.setattr(logit, "_gambit_logit", fails)
    for x in logit.limiting_logit_equilibrium(payoffs):
        np.testing.assert_allclose(x, UNIQUE_EQUILIBRIUM, atol=1e-12)


def test_where_the_trace_stalls_dropping_a_little_played_strategy_finds_the_equilibrium(monkeypatch):
    """A stalled point that keeps mass 0.048 on the strategy the equilibrium leaves out:
    every support read off it holds that strategy; dropping it, Newton's method reaches the
    equilibrium (vertex enumeration switched off)."""
    from metaeval.ratings import logit

    reached = 0.952 * UNIQUE_EQUILIBRIUM + 0.048 * np.eye(4)[3]

    def stalls(payoffs, target, symmetric=False):
        raise logit.BranchStalled("the logit path of this game could not be followed (step below 1e-8)",
                                  [reached, reached])

    monkeypatch.setattr(logit, "trace_logit_branch", stalls)
    monkeypatch.setattr(logit, "ENUMERATED_STRATEGIES", 0)
    rating = metaeval.rate(metaeval.MetaGame(np.stack([UNIQUE_EQUILIBRIUM_GAME, UNIQUE_EQUILIBRIUM_GAME.T])), "nash")
    for x in marginals(rating.distribution):
        np.testing.assert_allclose(x, UNIQUE_EQUILIBRIUM, atol=1e-12)
