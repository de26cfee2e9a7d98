import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import metaeval
from metaeval import MetaEvalError, MetaGame
from metaeval.solvers.equilibria import cce_constraints, deviation_gains, mecce
from metaeval.solvers import mecce as mecce_module
from metaeval.solvers.mecce import largest_support, max_entropy
from bench import scale
from tests import regression
from tests.conftest import dominant_strategy_game, random_games, rock_paper_scissors


def entropy(sigma):
    support = sigma[sigma > 0]
    return float(-(support * np.log(support)).sum())


def vertex_cce(game, seed):
    """A CCE maximising a random linear objective: a vertex of the CCE polytope."""
    a = cce_constraints(game)
    res = linprog(
        np.random.default_rng(seed).normal(size=a.shape[1]),
        A_ub=a,
        b_ub=np.zeros(a.shape[0]),
        A_eq=np.ones((1, a.shape[1])),
        b_eq=[1.0],
        bounds=[(0, None)] * a.shape[1],
        method="highs",
    )
    assert res.status == 0, res.message
    return np.clip(res.x, 0, None).reshape(game.shape) / np.clip(res.x, 0, None).sum()


any_game = st.booleans().flatmap(lambda integer: random_games(integer=integer))


@settings(max_examples=60, deadline=None)
@given(any_game)
def test_is_a_cce_to_1e_7(game):
    sigma = mecce(game)
    assert sigma.shape == game.shape
    assert sigma.min() >= 0 and sigma.sum() == pytest.approx(1.0, abs=1e-12)
    assert max(g.max() for g in deviation_gains(game, sigma)) <= 1e-7


@settings(max_examples=30, deadline=None)
@given(any_game, st.integers(0, 2**32 - 1))
def test_entropy_beats_other_cces_and_mixtures_toward_them(game, seed):
    best = mecce(game)
    others = [vertex_cce(game, seed), metaeval.rate(game, "deviation").distribution]
    for other in others:
        assert max(g.max() for g in deviation_gains(game, other)) <= 1e-7
        # Mixtures are CCEs too; small steps probe first-order optimality.
        for step in (1e-4, 1e-2, 0.5, 1.0):
            assert entropy(best) >= entropy((1 - step) * best + step * other) - 1e-12


def test_rock_paper_scissors_is_uniform():
    np.testing.assert_allclose(mecce(rock_paper_scissors()), np.full((3, 3), 1 / 9), atol=1e-12)


def test_strictly_dominant_profile_is_the_only_cce():
    expected = np.zeros((3, 3))
    expected[2, 2] = 1.0
    np.testing.assert_allclose(mecce(dominant_strategy_game()), expected, atol=1e-9)


def test_single_joint_cce_found_without_running_multipliers_to_infinity():
    # Only (1, 0) is a CCE, but one of its gain rows is nearly flat (0.0056 on a joint
    # carrying a fifth of the mass): a dual Newton method on all joints stalls here.
    game = MetaGame([[[-0.68, 0.63], [-0.25, -0.91]], [[-0.12, -0.95], [-0.78, -0.79]]])
    a = cce_constraints(game)
    np.testing.assert_array_equal(largest_support(a), [False, False, True, False])
    np.testing.assert_allclose(mecce(game), [[0.0, 0.0], [1.0, 0.0]], atol=1e-15)


def test_largest_support_is_the_union_of_cce_supports():
    a = cce_constraints(dominant_strategy_game())
    assert np.flatnonzero(largest_support(a)).tolist() == [8]
    assert largest_support(cce_constraints(rock_paper_scissors())).all()
    # Only the even mix of joints 0 and 2 is feasible: joint 1 never carries mass.
    m = np.array([[1.0, 1.0, -1.0], [-1.0, 1.0, 1.0]])
    assert largest_support(m).tolist() == [True, False, True]


def test_game_without_incentives_gives_uniform():
    np.testing.assert_allclose(mecce(MetaGame(np.ones((3, 2, 3, 2)))), np.full((2, 3, 2), 1 / 12))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", [(2, 3, 3), (2, 2, 4), (3, 2, 2, 3)])
def test_agrees_with_exponential_cone_program(shape, seed):
    rng = np.random.default_rng(seed)
    payoffs = rng.integers(-2, 3, size=shape).astype(float) if seed % 2 else rng.uniform(-1, 1, size=shape)
    game = MetaGame(payoffs)
    a = cce_constraints(game)
    x = cp.Variable(a.shape[1], nonneg=True)
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(x))), [cp.sum(x) == 1, a @ x <= 0])
    problem.solve(solver=cp.CLARABEL)
    assert problem.status == cp.OPTIMAL
    sigma = mecce(game).ravel()
    # Clarabel stops ~1e-8 inside the feasible set's boundary; -x log x magnifies that
    # near zero, so entropies agree to ~1e-5 when the MECCE excludes some joints.
    assert entropy(sigma) == pytest.approx(problem.value, abs=1e-5)
    np.testing.assert_allclose(sigma, x.value, atol=1e-4)


def test_scale_free():
    game = MetaGame(np.random.default_rng(5).uniform(-1, 1, size=(3, 3, 2, 3)))
    np.testing.assert_allclose(mecce(MetaGame(game.payoffs * 1e6)), mecce(game), atol=1e-9)


def test_infeasible_system_is_a_clear_error():
    with pytest.raises(MetaEvalError, match="feasible set is empty"):
        max_entropy(np.array([[1.0, 2.0]]))  # sigma >= 0, sum 1 and sigma_0 + 2 sigma_1 <= 0


def test_stalled_newton_restarts_from_the_exponential_cone_multipliers(monkeypatch):
    game = MetaGame(np.random.default_rng(7).uniform(-1, 1, size=(3, 3, 3, 2)))
    expected = max_entropy(cce_constraints(game))
    assert expected.safeguards == {"damped_newton_continuations": 0, "exponential_cone_starts": 0}
    newton = mecce_module._newton
    # Newton from zero and damped Newton "stall" at once; from any other start Newton runs.
    monkeypatch.setattr(mecce_module, "_newton", lambda m, start: (
        (mecce_module._evaluate(m, start), 0) if not start.any() else newton(m, start)))
    monkeypatch.setattr(mecce_module, "_damped_newton", lambda m, point: (point, 0))
    solution = max_entropy(cce_constraints(game))
    assert solution.safeguards == {"damped_newton_continuations": 1, "exponential_cone_starts": 1}
    assert solution.kkt_residual <= mecce_module.FAILURE_TOLERANCE
    np.testing.assert_allclose(solution.distribution, expected.distribution, atol=1e-9)



def test_nearly_flat_valley_is_followed_to_the_maximum():
    """The kuhn_3p seed-5 game: Newton stops at KKT 5.6e-7, 5e-3 above the dual minimum,
    because the joints that curve the valley carry ~1e-20 mass; damped Newton goes on.
    Certified by weak duality: a feasible sigma whose entropy meets the dual bound."""
    game = regression.load("kuhn_3p_seed5_iteration92")
    constraints = cce_constraints(game)
    solution = max_entropy(constraints)
    assert solution.safeguards["damped_newton_continuations"] == 1
    assert solution.safeguards["exponential_cone_starts"] == 0
    sigma = solution.distribution
    assert (constraints @ sigma).max() <= 1e-12 * np.abs(constraints).max()
    assert entropy(sigma) == pytest.approx(solution.dual_bound, abs=1e-10)
    assert solution.dual_bound < 0.4212  # the point where plain Newton stopped has f = 0.42514


@pytest.mark.parametrize("seed", range(8))
def test_damped_newton_alone_reaches_the_newton_optimum(monkeypatch, seed):
    shape = (3, 3, 3, 2) if seed % 2 else (2, 4, 3)
    game = MetaGame(np.random.default_rng(seed).integers(-2, 3, size=shape).astype(float))
    expected = max_entropy(cce_constraints(game))
    # Newton from zero "stalls" at once, so damped Newton does all the work.
    monkeypatch.setattr(mecce_module, "_newton", lambda m, start: (mecce_module._evaluate(m, start), 0))
    solution = max_entropy(cce_constraints(game))
    assert solution.safeguards["exponential_cone_starts"] == 0
    assert solution.kkt_residual <= mecce_module.GRADIENT_TOLERANCE
    np.testing.assert_allclose(solution.distribution, expected.distribution, atol=1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(any_game)
def test_newton_on_every_joint_first_gives_the_support_lp_answer(game):
    # Large games try Newton on every joint before the largest-support LP; forcing that
    # route on small games, many with joints outside every CCE, must not change sigma.
    expected = max_entropy(cce_constraints(game)).distribution
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mecce_module, "NEWTON_FIRST_JOINTS", 0)
        np.testing.assert_allclose(max_entropy(cce_constraints(game)).distribution, expected, atol=1e-9)


def test_support_lp_runs_only_when_some_joint_loses_its_mass(monkeypatch):
    monkeypatch.setattr(mecce_module, "NEWTON_FIRST_JOINTS", 0)
    calls = []
    support_lp = mecce_module._support_lp  # every support LP, over all joints or priced
    monkeypatch.setattr(mecce_module, "_support_lp", lambda m: calls.append(m.shape) or support_lp(m))
    mixed = MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 8, 8, 8)))
    assert max_entropy(cce_constraints(mixed)).distribution.min() > 0
    assert calls == []
    sigma = max_entropy(cce_constraints(dominant_strategy_game())).distribution
    assert calls and np.count_nonzero(sigma) == 1


@pytest.mark.parametrize("game, support_size", [
    (scale.dominated_game(16, 3, copies=1), 1),
    (scale.dominated_game(16, 4, copies=2), 2**3),
    (scale.tied_game(16, 5), 2 * 16**2),
], ids=["one-copy", "two-copies", "tied"])
def test_large_games_find_the_support_without_the_lp_over_every_joint(monkeypatch, game, support_size):
    # 4,096 joints, above NEWTON_FIRST_JOINTS; every CCE plays only the dominant copies or
    # player 0's best replies (see bench.scale), and some CCE plays all of them.
    constraints = cce_constraints(game)
    columns = []
    support_lp = mecce_module._support_lp
    monkeypatch.setattr(mecce_module, "_support_lp", lambda m: columns.append(m.shape[1]) or support_lp(m))
    scaled = max_entropy(constraints)
    assert columns and max(columns) < constraints.shape[1] // 2
    columns.clear()
    monkeypatch.setattr(mecce_module, "NEWTON_FIRST_JOINTS", 10**9)
    everywhere = max_entropy(constraints)
    assert columns == [constraints.shape[1]]
    np.testing.assert_array_equal(scaled.distribution > 0, everywhere.distribution > 0)
    np.testing.assert_array_equal(scaled.distribution, everywhere.distribution)
    assert (constraints @ scaled.distribution).max() <= 1e-12 * np.abs(constraints).max()
    assert entropy(scaled.distribution) == pytest.approx(scaled.dual_bound, abs=1e-10)
    assert np.count_nonzero(scaled.distribution) == support_size


def test_support_beyond_any_part_of_the_support_is_the_rest_of_it():
    """_support_beyond needs only that some CCE is positive on ``inside``; in this game every
    distribution on the 2 x 2 x 2 block of dominant copies is a CCE, so any part will do."""
    game = scale.dominated_game(8, 6, copies=2)
    constraints = cce_constraints(game)
    block = largest_support(constraints)
    assert block.sum() == 8
    rng = np.random.default_rng(0)
    for size in (1, 3, 7):
        inside = np.zeros_like(block)
        inside[rng.choice(np.flatnonzero(block), size, replace=False)] = True
        np.testing.assert_array_equal(mecce_module._support_beyond(constraints, inside), block & ~inside)


def test_constraint_rows_drop_zero_and_repeated_rows_keeping_order():
    m = np.array([[1.0, -0.0], [0.0, 0.0], [2.0, 1.0], [1.0, 0.0], [-0.0, 0.0], [2.0, 1.0]])
    np.testing.assert_array_equal(mecce_module._constraint_rows(m), [[1.0, 0.0], [2.0, 1.0]])


def test_support_lp_does_not_count_joints_that_only_its_tolerance_admits():
    """Agent57 replicate 10, the task player's maximin face: on the unbounded cone HiGHS
    counted every task; only 4 carry mass, each confirmed by a normalised LP."""
    from metaeval.ratings.nash import well_scaled
    from metaeval.ratings.nash_zero_sum import maximin_value

    payoffs = well_scaled(regression.load("agent57_bootstrap_replicate10").payoffs)[0][0]
    face = maximin_value(-payoffs.T) + payoffs  # A y <= v for the task player's y
    support = largest_support(face / np.abs(face).max())
    for task in range(face.shape[1]):
        best = linprog(-np.eye(face.shape[1])[task], A_ub=face, b_ub=np.full(len(face), 1e-12),
                       A_eq=np.ones((1, face.shape[1])), b_eq=[1], method="highs",
                       options={"primal_feasibility_tolerance": 1e-10})
        assert (-best.fun > 1e-9) == support[task]
    assert support.sum() == 4
