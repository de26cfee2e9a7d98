"""The matrix-free line solver against exact references: log-space GTH on the stored chain,
the sparse solver, and OpenSpiel's alpha-Rank."""

import math

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from open_spiel.python.egt import alpharank as openspiel_alpharank

import metaeval
from metaeval.ratings.alpharank import _joint_profiles, line_rates, log_fixation
from metaeval.solvers import line_markov, markov
from metaeval.solvers.line_markov import line_stationary_distribution
from tests.solvers.markov_reference import gth_stationary
from tests.solvers.test_line_rates import game_of


def stored_log_rates(game, alpha, m, eps=0.01):
    n, source, target, gain = _joint_profiles(game)
    if math.isinf(alpha):
        tie = np.abs(gain) <= 1e-12 * np.ptp(game.payoffs)
        return n, source, target, np.where(tie, np.log(0.5), np.where(gain > 0, np.log1p(-eps), np.log(eps)))
    return n, source, target, log_fixation(gain, alpha, m)


CASES = [(kind, alpha, m) for kind in ("random", "ties", "large", "narrow")
         for alpha, m in ((100.0, 50), (1.0, 10), (5.0, 50), (1e4, 50), (30.0, 1000), (0.0, 4), (math.inf, 50))]


@pytest.mark.parametrize("kind, alpha, m", CASES)
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 2), (3, 3, 3), (2, 2, 2, 2)])
def test_matches_log_space_gth(kind, alpha, m, shape):
    for seed in range(3):
        game = game_of(kind, seed, shape)
        expected = gth_stationary(*stored_log_rates(game, alpha, m))
        pi, info = line_stationary_distribution(line_rates(game, alpha, m, 0.01))
        np.testing.assert_allclose(pi, expected, atol=1e-10)
        assert info["residual"] < 1e-12


def test_matches_the_sparse_solver_on_larger_games_with_several_classes(monkeypatch):
    classes = set()
    for shape in [(8, 8, 8), (12, 12, 12), (6, 6, 6, 6), (4, 4, 4, 4, 4)]:
        for seed in range(4):
            for kind in ("random", "ties"):
                game = game_of(kind, seed, shape)
                expected, _ = markov.stationary_distribution(*stored_log_rates(game, 100.0, 50))
                pi, info = line_stationary_distribution(line_rates(game, 100.0, 50, 0.01))
                np.testing.assert_allclose(pi, expected, atol=1e-10)
                classes.add(info["classes"])
    assert 1 in classes and max(classes) >= 2  # both the single class and aggregation


def test_a_cycle_class_beside_a_strict_equilibrium():
    # Strategies 0 and 1 play matching pennies (a 4-profile cycle); (2, 2) is a strict
    # equilibrium; leaving either costs more than 1: two closed classes, one of 4 profiles.
    row = np.array([[1.0, -1.0, -3.0], [-1.0, 1.0, -3.0], [-2.0, -2.0, 3.0]])
    column = np.array([[-1.0, 1.0, -2.0], [1.0, -1.0, -2.0], [-3.0, -3.0, 3.0]])
    game = metaeval.MetaGame.from_matrix(row, column)
    for alpha in (3.0, 30.0):
        expected = gth_stationary(*stored_log_rates(game, alpha, 20))
        rates = line_rates(game, alpha, 20, 0.01)
        classes = line_markov._sink_classes(rates, line_markov._strong_gain(rates))
        assert sorted(np.bincount(classes[classes >= 0])) == [1, 4]
        pi, info = line_stationary_distribution(rates)
        np.testing.assert_allclose(pi, expected, atol=1e-10)
        assert info["levels"] >= 2


def test_the_last_class_from_the_others_equals_its_own_solve(monkeypatch):
    """k metastable classes cost k - 1 absorption solves (the last class's probabilities are
    one minus the others'); the stationary distribution equals the one with every class solved."""
    absorption_solves = []
    tiered = line_markov._tiered

    def counted(rates, transpose, *args):
        absorption_solves.append(not transpose)  # absorption systems are the forward ones
        return tiered(rates, transpose, *args)

    monkeypatch.setattr(line_markov, "_tiered", counted)
    for seed, num_classes in ((2, 2), (7, 3), (10, 3), (14, 3)):  # 4 x 16 random games
        rates = line_rates(game_of("random", seed, (16,) * 4), 100.0, 50, 0.01)
        absorption_solves.clear()
        pi, info = line_stationary_distribution(rates)
        assert info["classes"] == num_classes and sum(absorption_solves) == num_classes - 1
        with monkeypatch.context() as every_class_solved:
            every_class_solved.setattr(line_markov, "COMPLEMENT_SHARE", 2.0)  # no share qualifies
            absorption_solves.clear()
            expected, _ = line_stationary_distribution(rates)
            assert sum(absorption_solves) == num_classes
        # class masses reach 1e-120 here: compared relatively
        np.testing.assert_allclose(pi, expected, rtol=1e-11, atol=1e-250)


@pytest.mark.parametrize("shape, alpha, m", [((3, 3), 0.5, 2), ((2, 3, 2), 0.1, 50), ((3, 3, 3), 1.0, 10),
                                              ((2, 2, 2, 2), 0.3, 20)])
def test_matches_openspiel(shape, alpha, m):
    game = game_of("random", 0, shape)
    _, _, expected, _, _ = openspiel_alpharank.compute(list(game.payoffs), m=m, alpha=alpha)
    pi, _ = line_stationary_distribution(line_rates(game, alpha, m, 0.01))
    np.testing.assert_allclose(pi, expected, atol=1e-9)


def test_krylov_path_matches_and_needs_no_gmres(monkeypatch):
    """Systems above DENSE_MAX are solved by BiCGSTAB from the preconditioner's guess: from zero it broke
    down on the anchor's few moves and fell back to GMRES, whose 100 restart vectors of the
    chain's size (13 GiB at 4 x 64) do not fit."""
    monkeypatch.setattr(markov, "DENSE_MAX", 4)

    def no_gmres(*args, **kwargs):
        raise AssertionError("GMRES fallback")

    monkeypatch.setattr(spla, "gmres", no_gmres)
    for seed in range(3):
        game = game_of("random", seed, (6, 6, 6, 6))
        expected = markov.stationary_distribution(*stored_log_rates(game, 100.0, 50))[0]
        np.testing.assert_allclose(line_stationary_distribution(line_rates(game, 100.0, 50, 0.01))[0],
                                   expected, atol=1e-10)


def test_line_sweeps_halve_the_products_and_keep_the_distribution(monkeypatch):
    """Krylov solves preconditioned by line sweeps take at most 55% of the products Jacobi's
    take, on chains of one to three classes, and give the same masses (relative 1e-12)."""
    from metaeval.solvers import line_rates as line_rates_module

    products = []
    apply = line_rates_module.LineRates._apply

    def counted(self, x, transpose):
        products.append(1)
        return apply(self, x, transpose)

    monkeypatch.setattr(line_rates_module.LineRates, "_apply", counted)
    classes = set()
    for seed in range(4):
        game = game_of("random", seed, (6, 6, 6, 6))
        products.clear()
        pi, info = line_stationary_distribution(line_rates(game, 100.0, 50, 0.01))
        swept = len(products)
        with monkeypatch.context() as jacobi:
            jacobi.setattr(line_markov._Off, "sweep", None, raising=False)  # Jacobi preconditioning
            products.clear()
            expected, _ = line_stationary_distribution(line_rates(game, 100.0, 50, 0.01))
        assert swept <= 0.55 * len(products)
        np.testing.assert_allclose(pi, expected, rtol=1e-12, atol=1e-250)
        classes.add(info["classes"])
    assert classes == {1, 2, 3}


def test_too_many_classes_are_refused_in_one_line():
    # A 70-strategy coordination game: 70 strict equilibria, each its own closed class.
    payoffs = np.eye(70) + np.random.default_rng(0).uniform(0, 0.01, (70, 70))
    game = metaeval.MetaGame.from_matrix(payoffs, payoffs)
    with pytest.raises(metaeval.MetaEvalError, match=f"more than {line_markov.MAX_CLASSES} metastable classes"):
        line_stationary_distribution(line_rates(game, 100.0, 50, 0.01))
