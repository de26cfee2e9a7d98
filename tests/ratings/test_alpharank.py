import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaEvalError
from metaeval.solvers import markov
from metaeval.ratings.alpharank import _joint_profiles, alpharank, alpharank_sweep, log_fixation
from tests.conftest import dominant_strategy_game, rock_paper_scissors
from tests.solvers.markov_reference import gth_stationary
from open_spiel.python.egt import alpharank as openspiel_alpharank


def random_game(seed, shape):
    rng = np.random.default_rng(seed)
    return metaeval.MetaGame(rng.uniform(-1, 1, size=(len(shape), *shape)))


# Parameters where OpenSpiel's dense eigendecomposition is itself accurate: at larger
# alpha * m its chains are nearly reducible and it either raises ("Expected 1 stationary
# distribution") or drifts (5e-6 off the exact answer in one 3x3x2 game at alpha=5, m=50).
OPENSPIEL_CASES = [
    ((3, 3), 0.5, 2),
    ((4, 2), 2.0, 5),
    ((2, 3, 2), 0.1, 50),
    ((3, 3, 3), 1.0, 10),
    ((2, 2, 2, 2), 0.3, 20),
]


@pytest.mark.parametrize("shape, alpha, m", OPENSPIEL_CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_openspiel_multipopulation(shape, alpha, m, seed):
    game = random_game(seed, shape)
    _, _, expected, _, _ = openspiel_alpharank.compute(list(game.payoffs), m=m, alpha=alpha)
    rating = alpharank(game, alpha=alpha, population_size=m)
    np.testing.assert_allclose(rating.distribution.ravel(), expected, atol=1e-9)
    assert rating.diagnostics["residual"] < 1e-12


@pytest.mark.parametrize("eps", [0.01, 0.2])
@pytest.mark.parametrize("shape", [(3, 4), (3, 2, 3)])
def test_infinite_alpha_matches_openspiel(shape, eps):
    game = random_game(5, shape)
    _, _, expected, _, _ = openspiel_alpharank.compute(
        list(game.payoffs), use_inf_alpha=True, inf_alpha_eps=eps
    )
    rating = alpharank(game, alpha=math.inf, inf_alpha_eps=eps)
    np.testing.assert_allclose(rating.distribution.ravel(), expected, atol=1e-9)


def test_infinite_alpha_treats_equal_payoffs_as_ties():
    game = metaeval.MetaGame.from_matrix(np.round(np.random.default_rng(2).uniform(-1, 1, (4, 4))))
    _, _, expected, _, _ = openspiel_alpharank.compute(list(game.payoffs), use_inf_alpha=True)
    np.testing.assert_allclose(alpharank(game, alpha=math.inf).distribution.ravel(), expected, atol=1e-9)


@pytest.mark.parametrize("alpha", [0.5, 10.0, math.inf])
@pytest.mark.parametrize("antisymmetric", [False, True])
def test_single_population_matches_openspiel_one_table(alpha, antisymmetric):
    rng = np.random.default_rng(3)
    row = rng.uniform(-1, 1, (5, 5))
    if antisymmetric:
        row = row - row.T  # constant-sum: OpenSpiel takes its closed-form branch
    game = metaeval.MetaGame.from_matrix(row, row.T)
    kwargs = {"use_inf_alpha": True} if math.isinf(alpha) else {"alpha": alpha, "m": 50}
    _, _, expected, _, _ = openspiel_alpharank.compute([row], **kwargs)
    rating = alpharank(game, alpha=alpha, single_population=True)
    np.testing.assert_allclose(rating.ratings[0], expected, atol=1e-9)
    np.testing.assert_array_equal(rating.ratings[0], rating.ratings[1])
    assert rating.diagnostics["model"] == "single-population"


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    shape=st.sampled_from([(2, 2), (3, 4), (5, 3), (2, 2, 2), (3, 2, 3), (3, 3, 3)]),
    alpha=st.sampled_from([0.01, 1.0, 10.0, 100.0, 1e4]),
    m=st.sampled_from([2, 10, 50]),
    ties=st.booleans(),
)
def test_exact_at_any_alpha_against_log_space_gth(seed, shape, alpha, m, ties):
    """Large alpha makes the chain nearly reducible (couplings like exp(-49 * 1e4))."""
    game = random_game(seed, shape)
    if ties:
        game = metaeval.MetaGame(np.round(game.payoffs * 2))
    n, source, target, gain = _joint_profiles(game)
    expected = gth_stationary(n, source, target, log_fixation(gain, alpha, m))
    rating = alpharank(game, alpha=alpha, population_size=m)
    np.testing.assert_allclose(rating.distribution.ravel(), expected, atol=1e-10)


def test_iterative_solver_path_matches_openspiel(monkeypatch):
    monkeypatch.setattr(markov, "DENSE_MAX", 4)  # what 32^3 profiles would use
    game = random_game(4, (3, 3, 3))
    _, _, expected, _, _ = openspiel_alpharank.compute(list(game.payoffs), m=10, alpha=1.0)
    np.testing.assert_allclose(
        alpharank(game, alpha=1.0, population_size=10).distribution.ravel(), expected, atol=1e-9
    )


def test_two_strict_equilibria_at_huge_alpha():
    # Coordination game: both (0, 0) and (1, 1) are strict equilibria, and leaving (1, 1)
    # costs more (payoff 2) than leaving (0, 0) (payoff 1); at huge alpha all mass sits
    # on the harder-to-leave profile, which OpenSpiel cannot resolve.
    game = metaeval.MetaGame.from_matrix([[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.0], [0.0, 2.0]])
    rating = alpharank(game, alpha=1000.0)
    np.testing.assert_allclose(rating.distribution, [[0, 0], [0, 1]], atol=1e-12)
    assert rating.diagnostics["aggregation_levels"] >= 2


def test_fixation_probability_closed_form_and_limits():
    alpha, m = 2.0, 7
    gain = np.array([-0.3, 0.2, 5.0])
    u = alpha * gain
    np.testing.assert_allclose(
        np.exp(log_fixation(gain, alpha, m)), (1 - np.exp(-u)) / (1 - np.exp(-m * u)), rtol=1e-12
    )
    np.testing.assert_allclose(np.exp(log_fixation(np.array([-1e-300, 0.0, 1e-300]), alpha, m)), 1 / m)
    # Far beyond exp's range: log rho = -(m - 1) alpha |gain| + log(1 - e^-u) - log(1 - e^-mu).
    np.testing.assert_allclose(log_fixation(np.array([-1e3]), 1e3, 50), -49e6)


def test_rock_paper_scissors_uniform_and_dominant_on_top():
    rating = metaeval.rate(rock_paper_scissors(), "alpharank", alpha=1.0)
    for marginal in rating.ratings:
        np.testing.assert_allclose(marginal, 1 / 3, atol=1e-12)
    rating = metaeval.rate(dominant_strategy_game(), "alpharank")
    assert all(np.argmax(r) == 2 for r in rating.ratings)


def test_not_clone_invariant():
    """Cloning rock changes every original strategy's mass (unlike deviation ratings)."""
    game = rock_paper_scissors()
    before = alpharank(game, alpha=1.0).ratings[0]
    after = alpharank(game.add_clone(0, 0), alpha=1.0).ratings[0]
    assert abs(after[:3].sum() - 1.0) > 0.05  # the clone took mass
    assert np.abs(after[:3] - before).max() > 0.01
    assert np.abs(after[1] - before[1]) > 0.01  # even paper's mass moved


def test_sweep_matches_single_calls_and_alpha_zero_is_uniform():
    game = random_game(9, (3, 2, 4))
    alphas = [0.0, 0.5, 5.0, math.inf]
    sweep = alpharank_sweep(game, alphas, population_size=10)
    assert [s.shape for s in sweep] == [(4, 3), (4, 2), (4, 4)]
    for row, alpha in enumerate(alphas):
        single = alpharank(game, alpha=alpha, population_size=10).ratings
        for p in range(3):
            np.testing.assert_allclose(sweep[p][row], single[p], atol=1e-14)
    for p, k in enumerate(game.shape):
        np.testing.assert_allclose(sweep[p][0], 1 / k, atol=1e-12)


def test_rating_contents():
    game = random_game(1, (3, 4))
    rating = metaeval.rate(game, "alpharank", alpha=2.0, population_size=5)
    assert rating.method == "alpharank" and rating.distribution.shape == (3, 4)
    np.testing.assert_allclose(rating.ratings[0], rating.distribution.sum(axis=1))
    np.testing.assert_allclose(rating.ratings[1], rating.distribution.sum(axis=0))
    assert rating.diagnostics["num_states"] == 12 and rating.diagnostics["population_size"] == 5


def test_bad_input():
    game = random_game(0, (2, 3))
    with pytest.raises(MetaEvalError, match="alpha must be >= 0"):
        alpharank(game, alpha=-1.0)
    with pytest.raises(MetaEvalError, match="alpha must be >= 0"):
        alpharank(game, alpha=float("nan"))
    with pytest.raises(MetaEvalError, match="alpha must be a number"):
        alpharank(game, alpha="big")
    for bad in (1, 2.5, True):
        with pytest.raises(MetaEvalError, match="population_size must be an integer >= 2"):
            alpharank(game, population_size=bad)
    for bad in (0.0, 1.0):
        with pytest.raises(MetaEvalError, match="inf_alpha_eps"):
            alpharank(game, alpha=math.inf, inf_alpha_eps=bad)
    with pytest.raises(MetaEvalError, match="symmetric 2-player"):
        alpharank(game, single_population=True)
    with pytest.raises(MetaEvalError, match="symmetric 2-player"):
        alpharank(random_game(0, (2, 2, 2)), single_population=True)
    with pytest.raises(MetaEvalError, match="non-empty"):
        alpharank_sweep(game, [])
    with pytest.raises(MetaEvalError, match="needs a MetaGame"):
        alpharank(np.zeros((2, 2, 2)))


# -- the non-local selection model (Han et al. 2013) ------------------------------------
def han_2013_game():
    """The payoffs of OpenSpiel's alpharank_test.test_stationary_distribution (Han et al. 2013)."""
    r, t, p, s, delta, eps = 1.0, 2.0, 0.0, -1.0, 4.0, 0.25
    row = np.array([[r - eps / 2, r - eps, 0, s + delta - eps, r - eps], [r, r, s, s, s], [0, t, p, p, p],
                    [t - delta, t, p, p, p], [r, t, p, p, p]])
    return metaeval.MetaGame.from_matrix(row, row.T)


def test_non_local_selection_gives_openspiels_published_example():
    rating = alpharank(han_2013_game(), alpha=0.1, population_size=20, single_population=True,
                       local_selection=False)
    # OpenSpiel's expected values (checked there to 4 decimals).
    np.testing.assert_allclose(rating.ratings[0], [0.40966787, 0.07959841, 0.20506998, 0.08505983, 0.2206039],
                               atol=5e-9)
    assert rating.diagnostics["selection"] == "non-local (Han et al. 2013)"
    local = alpharank(han_2013_game(), alpha=0.1, population_size=20, single_population=True)
    assert np.abs(local.ratings[0] - rating.ratings[0]).max() > 0.01  # a different model


@pytest.mark.parametrize("k, alpha, m", [(3, 0.5, 10), (4, 2.0, 5), (5, 0.1, 50), (3, 1.0, 2)])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("constant_sum", [False, True])
def test_non_local_selection_matches_openspiel(k, alpha, m, seed, constant_sum):
    row = np.random.default_rng(seed).uniform(-1, 1, (k, k))
    if constant_sum:
        row = row - row.T  # OpenSpiel takes its closed form for constant-sum games
    game = metaeval.MetaGame.from_matrix(row, row.T)
    _, _, expected, _, _ = openspiel_alpharank.compute([row], m=m, alpha=alpha, use_local_selection_model=False)
    rating = alpharank(game, alpha=alpha, population_size=m, single_population=True, local_selection=False)
    np.testing.assert_allclose(rating.ratings[0], expected, atol=1e-9)


def test_non_local_selection_is_stable_at_large_alpha_and_refuses_what_it_does_not_define():
    game = han_2013_game()
    pi = alpharank(game, alpha=1e4, population_size=50, single_population=True, local_selection=False).ratings[0]
    assert np.all(np.isfinite(pi)) and abs(pi.sum() - 1) < 1e-12
    with pytest.raises(MetaEvalError, match="pass single_population=True"):
        alpharank(game, local_selection=False)
    with pytest.raises(MetaEvalError, match="finite alpha"):
        alpharank(game, alpha=math.inf, single_population=True, local_selection=False)


def test_large_chains_take_the_line_path_with_the_same_answer(monkeypatch):
    module = importlib.import_module("metaeval.ratings.alpharank")  # the package re-exports the function
    game = random_game(7, (5, 4, 6))
    expected = {alpha: alpharank(game, alpha=alpha) for alpha in (100.0, math.inf)}
    sweep = alpharank_sweep(game, [1.0, 100.0])
    assert expected[100.0].diagnostics["chain"] == "sparse"
    monkeypatch.setattr(module, "LINE_MIN_SWITCHES", 0)
    for alpha, rating in expected.items():
        lines = alpharank(game, alpha=alpha)
        assert lines.diagnostics["chain"] == "matrix-free lines"
        np.testing.assert_allclose(lines.distribution, rating.distribution, atol=1e-12)
    for mine, theirs in zip(alpharank_sweep(game, [1.0, 100.0]), sweep):
        np.testing.assert_allclose(mine, theirs, atol=1e-12)
    for bad in ({"alpha": -1.0}, {"population_size": 1}, {"alpha": math.inf, "inf_alpha_eps": 0.0}):
        with pytest.raises(MetaEvalError, match="alpha|population_size"):
            alpharank(game, **bad)
