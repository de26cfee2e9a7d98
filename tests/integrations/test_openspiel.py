"""metaeval inside OpenSpiel's own psro_v2, jpsro and CFR loops (the examples, checked)."""

import warnings
from types import SimpleNamespace

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import cfr, expected_game_score, jpsro

import metaeval
from examples import openspiel_loops
from metaeval.integrations import openspiel
from metaeval.training import meta_solvers


def test_psro_v2_plays_the_metaeval_meta_strategy_on_kuhn_3p(monkeypatch):
    solvers = []
    original = openspiel.psro_v2.PSROSolver.iteration
    monkeypatch.setattr(openspiel.psro_v2.PSROSolver, "iteration",
                        lambda self, seed=None: (solvers.append(self), original(self, seed))[1])
    history = openspiel_loops.psro_v2_with_metaeval_meta_strategy(iterations=3)
    solver = solvers[-1]
    assert [len(p) for p in solver.get_policies()] == [4, 4, 4]
    assert len(history) == 3 and history[0] > history[-1]
    # What psro_v2 plays is the marginals of the deviation rater's CCE on its own meta-game.
    game = metaeval.MetaGame(np.stack(solver.get_meta_game()))
    sigma = metaeval.rate(game, "deviation").distribution
    for played, expected in zip(solver.get_meta_strategies(), meta_solvers.marginals(sigma)):
        np.testing.assert_allclose(played, expected, atol=1e-9)
    np.testing.assert_allclose(solver.get_and_update_non_marginalized_meta_strategies(), sigma, atol=1e-9)


def test_psro_v2_with_an_exact_metagame_reaches_nash_on_kuhn_2p():
    history = openspiel_loops.psro_v2_with_exact_metagame(iterations=8)
    assert history[0] > 0.5 and history[-1] < 1e-6  # OpenSpiel's exploitability.nash_conv


def test_the_exact_metagame_is_openspiels_expected_returns():
    game = pyspiel.load_game("kuhn_poker")
    from open_spiel.python.algorithms.psro_v2 import best_response_oracle

    oracle = best_response_oracle.BestResponseOracle(game=game, best_response_backend="py")
    solver = openspiel.PSROSolver(game, oracle, training_strategy_selector="probabilistic",
                                  meta_strategy_method=openspiel.meta_strategy("uniform"))
    solver.iteration()
    solver.iteration()
    policies, meta_games = solver.get_policies(), solver.get_meta_game()
    assert meta_games[0].shape == (3, 3)
    for i in range(3):
        for j in range(3):
            value = expected_game_score.policy_value(game.new_initial_state(), [policies[0][i], policies[1][j]])
            np.testing.assert_allclose([meta_games[0][i, j], meta_games[1][i, j]], value, atol=1e-12)


def test_jpsro_runs_with_metaeval_meta_solvers_and_its_gap_falls():
    gaps = openspiel_loops.jpsro_with_metaeval_meta_solvers(iterations=8)
    assert len(gaps) == 9 and gaps[0] > 1.0 and gaps[-1] < 0.1


def test_jpsro_meta_solver_counts_repeated_policies_as_copies():
    rng = np.random.default_rng(0)
    payoffs = rng.normal(size=(2, 2, 3))
    solve = openspiel.jpsro_meta_solver("mecce")
    sigma, _ = solve(payoffs, [[2, 1], [1, 1, 3]])
    expanded = np.repeat(np.repeat(payoffs, [2, 1], axis=1), [1, 1, 3], axis=2)
    full = meta_solvers.solve(metaeval.MetaGame(expanded), "mecce")
    np.testing.assert_allclose(sigma, np.add.reduceat(np.add.reduceat(full, [0, 2], axis=0), [0, 1, 2], axis=1))
    unique, _ = solve(payoffs, [[2, 1], [1, 1, 3]], ignore_repeats=True)
    np.testing.assert_allclose(unique, meta_solvers.solve(metaeval.MetaGame(payoffs), "mecce"))
    assert "metaeval_mecce" == openspiel.register_jpsro("mecce") and "metaeval_mecce" in jpsro.FLAG_TO_FUNC


def test_jpsro_meta_solver_gives_a_policy_found_0_times_no_mass_and_checks_the_counts():
    payoffs = np.random.default_rng(1).normal(size=(2, 2, 3))
    solve = openspiel.jpsro_meta_solver("mecce")
    sigma, _ = solve(payoffs, [[1, 0], [2, 1, 1]])
    assert sigma.sum() == pytest.approx(1.0) and not sigma[1].any()
    without, _ = solve(payoffs[:, :1], [[1], [2, 1, 1]])
    np.testing.assert_allclose(sigma[:1], without)
    for repeats, message in [([[1, 1], [1, 1]], r"player 1 has repeat counts of shape \(2,\) for 3 policies"),
                             ([[1, 1]], "1 lists of repeat counts for a 2-player meta-game"),
                             ([[0, 0], [1, 1, 1]], "player 0's repeat counts must be non-negative integers, not all 0"),
                             ([[1, 1], [1, -1, 1]], "player 1's repeat counts must be non-negative integers")]:
        with pytest.raises(metaeval.MetaEvalError, match=message):
            solve(payoffs, repeats)


def test_cfr_checkpoints_are_copies_with_distinct_ratings():
    rating = openspiel_loops.cfr_checkpoints(iterations=32)
    for values in rating.ratings:  # checkpoints 1, 2, 4, ..., 32: later ones rate higher
        assert len(values) == 6 and np.all(np.diff(values) > 1e-4)
    # Kept without copying, CFR's average policy is one object: every "checkpoint" is the last.
    game = pyspiel.load_game("kuhn_poker")
    solver = cfr.CFRSolver(game)
    live = []
    for _ in range(3):
        solver.evaluate_and_update_policy()
        live.append(solver.average_policy())
    assert live[0] is live[-1]


def test_an_identical_checkpoint_is_warned_about():
    game = pyspiel.load_game("kuhn_poker")
    solver, checkpoints = cfr.CFRSolver(game), openspiel.Checkpoints(game)
    solver.evaluate_and_update_policy()
    checkpoints.add(solver, name="first")
    with pytest.warns(UserWarning, match="'again' is identical to 'first'"):
        checkpoints.add(solver, name="again")
    solver.evaluate_and_update_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoints.add(solver, name="later")


def test_unknown_method_names_fail_clearly():
    with pytest.raises(metaeval.MetaEvalError, match="unknown meta-solver or rater 'nope'"):
        openspiel.meta_strategy("nope")
    with pytest.raises(metaeval.MetaEvalError, match="unknown meta-solver or rater"):
        openspiel.register_jpsro("nope")
    with pytest.raises(metaeval.MetaEvalError, match="gives no distribution"):
        wins = np.array([[0.5, 0.7], [0.3, 0.5]])
        openspiel.distribution(metaeval.MetaGame.from_matrix(wins, wins.T), "elo")


def test_a_sampled_metagame_comes_from_metaevals_batched_builder_within_its_errors():
    from open_spiel.python.algorithms.psro_v2 import best_response_oracle

    game = pyspiel.load_game("kuhn_poker")
    oracle = best_response_oracle.BestResponseOracle(game=game, best_response_backend="py")
    sampled = openspiel.PSROSolver(game, oracle, mode="sampled", episodes=2000, seed=3,
                                   training_strategy_selector="probabilistic",
                                   meta_strategy_method=openspiel.meta_strategy("uniform"))
    sampled.iteration()
    metagame = sampled.evaluator.metagame()
    assert metagame.counts is not None and np.all(metagame.counts == 2000)
    exact = openspiel.Evaluator(game)
    for player, policies in enumerate(sampled.get_policies()):
        for policy in policies:
            exact.add(player, policy)
    error = np.abs(np.stack(sampled.get_meta_game()) - exact.metagame().payoffs)
    assert np.all(error <= 5 * metagame.stderr + 1e-12) and error.max() > 0  # sampled, and within its errors


@pytest.mark.parametrize("source, shown", [(42, "got 42"), (None, "got None")])
def test_a_checkpoint_of_what_is_no_policy_is_refused_in_one_line(source, shown):
    checkpoints = openspiel.Checkpoints(pyspiel.load_game("kuhn_poker"))
    with pytest.raises(metaeval.MetaEvalError, match=f"^Checkpoints.add needs a solver .*; {shown}$"):
        checkpoints.add(source)
    assert checkpoints.names == []


def test_a_meta_strategy_is_checked_when_made_not_in_the_loop():
    with pytest.raises(metaeval.MetaEvalError, match="^the elo rater gives no distribution to play"):
        openspiel.meta_strategy("elo")
    with pytest.raises(metaeval.MetaEvalError, match="^meta-solver 'nash' has no option\\(s\\) foo$"):
        openspiel.meta_strategy("nash", foo=1)
    with pytest.raises(metaeval.MetaEvalError, match="^rater 'alpharank' has no option\\(s\\) foo; it accepts alpha"):
        openspiel.meta_strategy("alpharank", foo=1)  # a meta-solver handing its options to the rater
    with pytest.raises(metaeval.MetaEvalError, match="^meta-strategy alpharank\\(alpha=-1\\) plays on no meta-game"):
        openspiel.meta_strategy("alpharank", alpha=-1)
    with pytest.raises(metaeval.MetaEvalError, match="^meta-solver 'mecce' has no option\\(s\\) foo$"):
        openspiel.register_jpsro("mecce", foo=1)
    with pytest.warns(UserWarning, match="^meta-strategy alpharank\\(single_population=True\\) cannot play on "
                                         "2-player general-sum or 3-player meta-games \\(single_population"):
        symmetric_only = openspiel.meta_strategy("alpharank", single_population=True)
    rps = np.array([[0.0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    solver = SimpleNamespace(get_meta_game=lambda: [rps, rps.T])  # symmetric: it plays there
    np.testing.assert_allclose(symmetric_only(solver), [[1 / 3] * 3] * 2, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in (*meta_solvers.SOLVERS, "payoff", "maximal_lotteries"):
            openspiel.meta_strategy(method)
