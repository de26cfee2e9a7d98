import importlib

import cvxpy as cp
import numpy as np
import pyspiel
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from open_spiel.python.algorithms.nash_averaging import nash_averaging
from scipy.optimize import linprog

import metaeval
from metaeval import MetaEvalError, MetaGame
from metaeval.solvers.equilibria import cce_constraints, deviation_gains
from metaeval.ratings.deviation import (
    CHECK_TOLERANCE, DUAL_TOLERANCE, _Safeguards, constraints_to_freeze, deviation,
)
from tests import regression
from tests.conftest import dominant_strategy_game, random_games, rock_paper_scissors

deviation_module = importlib.import_module("metaeval.ratings.deviation")  # the name is the rater's

TOL = 1e-8


def safeguards_fired(diagnostics):
    return sum(v for k, v in diagnostics.items() if k.startswith("safeguard_"))


def rated(game, **options):
    """Deviation ratings, after checking they are the gains of the returned CCE: to 1e-9,
    or to CHECK_TOLERANCE of the largest payoff difference if a safeguard fired."""
    rating = metaeval.rate(game, "deviation", **options)
    d = rating.diagnostics
    spread = np.abs(cce_constraints(game)).max()
    limit = 1e-9 if safeguards_fired(d) == 0 else CHECK_TOLERANCE * spread
    gains = deviation_gains(game, rating.distribution)
    for p in range(game.num_players):
        np.testing.assert_allclose(rating.ratings[p], gains[p], rtol=0, atol=limit)
    assert d["max_violation"] <= limit
    assert rating.distribution.min() >= 0 and rating.distribution.sum() == pytest.approx(1, abs=1e-12)
    return rating.ratings


def reference_ratings(game):
    """Algorithm 1 without duals: freeze exactly the constraints that are tight on the whole
    optimal face, each found by minimising it over that face (one LP per constraint)."""
    a = cce_constraints(game)
    rows, joints = a.shape
    values = np.zeros(rows)
    frozen = np.zeros(rows, dtype=bool)
    simplex = (np.ones((1, joints)), [1.0])
    while not frozen.all():
        free = ~frozen
        # min t over (sigma, t): A_free sigma - t <= 0, A_frozen sigma = v, sum sigma = 1.
        res = linprog(
            np.r_[np.zeros(joints), 1.0],
            A_ub=np.c_[a[free], -np.ones(free.sum())],
            b_ub=np.zeros(free.sum()),
            A_eq=np.r_[np.c_[a[frozen], np.zeros(frozen.sum())], np.c_[simplex[0], 0.0]],
            b_eq=np.r_[values[frozen], simplex[1]],
            bounds=[(0, None)] * joints + [(None, None)],
            method="highs",
        )
        assert res.status == 0, res.message
        t = res.fun
        tight = []
        for i in np.flatnonzero(free):
            low = linprog(
                a[i],
                A_ub=a[free],
                b_ub=np.full(free.sum(), t + 1e-10),
                A_eq=np.r_[a[frozen], simplex[0]],
                b_eq=np.r_[values[frozen], simplex[1]],
                bounds=[(0, None)] * joints,
                method="highs",
            )
            assert low.status == 0, low.message
            if low.fun >= t - 1e-8:
                tight.append(i)
        assert tight, "some constraint is tight on the whole optimal face"
        values[tight] = t
        frozen[tight] = True
    return np.split(values, np.cumsum(game.shape)[:-1])


def assert_ratings_close(left, right, atol=TOL):
    for a, b in zip(left, right):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol)


@settings(max_examples=25, deadline=None)
@given(random_games(players=(2, 3), strategies=(2, 4), integer=True) | random_games(strategies=(2, 4)))
def test_matches_reference_without_duals(game):
    assert_ratings_close(rated(game), reference_ratings(game), atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)))
def test_bounds(game):
    ratings = rated(game)
    a = cce_constraints(game)
    lowest = np.split(a.min(axis=1), np.cumsum(game.shape)[:-1])
    for p in range(game.num_players):
        assert np.all(ratings[p] <= 1e-9)
        assert np.all(ratings[p] >= lowest[p] - 1e-9)


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)), st.data())
def test_dominance_preserving(game, data):
    p = data.draw(st.integers(0, game.num_players - 1))
    low, high = data.draw(st.lists(st.integers(0, game.shape[p] - 1), min_size=2, max_size=2, unique=True))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    payoffs = np.array(game.payoffs)
    own = np.moveaxis(payoffs[p], p, 0)
    # Weak dominance: at least as good everywhere, equal on about half of the profiles.
    bonus = rng.integers(0, 2, size=own.shape[1:]) * rng.uniform(0, 0.5, size=own.shape[1:])
    own[high] = own[low] + bonus
    ratings = rated(MetaGame(payoffs))
    assert ratings[p][high] >= ratings[p][low] - 1e-9


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)), st.integers(0, 2**32 - 1))
def test_offset_invariant(game, seed):
    rng = np.random.default_rng(seed)
    payoffs = np.array(game.payoffs)
    for p in range(game.num_players):
        shape = tuple(1 if q == p else k for q, k in enumerate(game.shape))
        payoffs[p] += rng.uniform(-5, 5, size=shape)  # b_p(a_-p), constant in a_p
    assert_ratings_close(rated(MetaGame(payoffs)), rated(game))


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)), st.data())
def test_clone_invariant(game, data):
    original = rated(game)
    cloned, sources = game, []
    for _ in range(data.draw(st.integers(1, 3), label="clones")):
        p = data.draw(st.integers(0, game.num_players - 1))
        i = data.draw(st.integers(0, cloned.shape[p] - 1))
        cloned = cloned.add_clone(p, i)
        sources.append((p, i))
    ratings = rated(cloned)
    # Resolve each clone to the original strategy it copies (clones of clones included).
    origin = [list(range(k)) for k in game.shape]
    for p, i in sources:
        origin[p].append(origin[p][i])
    for p in range(game.num_players):
        np.testing.assert_allclose(ratings[p], original[p][origin[p]], rtol=0, atol=TOL)


@settings(max_examples=15, deadline=None)
@given(random_games(strategies=(2, 4)), st.data())
def test_clone_invariant_without_merging(game, data):
    p = data.draw(st.integers(0, game.num_players - 1))
    i = data.draw(st.integers(0, game.shape[p] - 1))
    plain = dict(symmetry=False, merge_duplicates=False)
    ratings = rated(game.add_clone(p, i).add_clone(p, i), **plain)
    original = rated(game, **plain)
    for q in range(game.num_players):
        expected = np.r_[original[q], [original[q][i]] * 2] if q == p else original[q]
        np.testing.assert_allclose(ratings[q], expected, rtol=0, atol=1e-7)


def with_mixture(game, player, weights):
    """The game with a strategy for ``player`` whose payoffs (for everyone) mix its strategies."""
    mixture = np.tensordot(game.payoffs, weights, axes=([1 + player], [0]))
    return MetaGame(np.concatenate([game.payoffs, np.expand_dims(mixture, 1 + player)], axis=1 + player))


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)), st.data())
def test_mixture_is_rated_as_the_mixture_of_ratings(game, data):
    p = data.draw(st.integers(0, game.num_players - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    weights = rng.dirichlet(np.ones(game.shape[p]))
    ratings = rated(with_mixture(game, p, weights))
    assert ratings[p][-1] == pytest.approx(weights @ ratings[p][:-1], abs=TOL)


@settings(max_examples=40, deadline=None)
@given(st.booleans().flatmap(lambda integer: random_games(integer=integer)), st.data())
def test_mixture_of_equally_rated_strategies_changes_no_rating(game, data):
    p = data.draw(st.integers(0, game.num_players - 1))
    original = rated(game)
    levels = np.unique(np.round(original[p], 7))
    level = levels[data.draw(st.integers(0, levels.size - 1))]
    members = np.isclose(original[p], level, rtol=0, atol=1e-7)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    weights = np.zeros(game.shape[p])
    weights[members] = rng.dirichlet(np.ones(members.sum()))
    ratings = rated(with_mixture(game, p, weights))
    for q in range(game.num_players):
        expected = np.r_[original[q], weights @ original[q]] if q == p else original[q]
        np.testing.assert_allclose(ratings[q], expected, rtol=0, atol=TOL)


def test_mixture_across_rating_levels_can_change_ratings():
    """Maths, section 2.1 lists "mixture invariant ... changes no other rating"; Algorithm 1 does not
    have it when the mixed strategies have different ratings (the two tests above are what
    holds). The mixture's gain row is then a convex combination of rows frozen in different
    rounds: it stays above its unfrozen component and becomes a new binding constraint.
    Here player 1 mixes a strategy rated 0 (frozen first) with one rated -0.18; the
    dual-free reference agrees, so this is the algorithm, not the solver."""
    payoffs = np.array([
        [[[-0.4, 0.4], [-0.4, -0.8]], [[0.4, 0.0], [-0.3, 0.4]]],
        [[[0.3, -0.7], [0.3, -0.7]], [[-0.4, -0.1], [-0.7, -1.0]]],
        [[[0.0, 0.5], [0.0, -0.6]], [[0.9, -0.9], [0.3, -0.1]]],
    ])
    game = MetaGame(payoffs)
    before = [[-0.41, -0.18], [0.0, -0.18], [-0.18, -0.945]]
    after = [[-0.434375, -0.16875], [0.0, -0.1875, -0.16875], [-0.16875, -0.9984375]]
    extended = with_mixture(game, 1, np.array([0.1, 0.9]))
    for g, expected in ((game, before), (extended, after)):
        assert_ratings_close(rated(g), expected, atol=1e-9)
        assert_ratings_close(reference_ratings(g), expected, atol=1e-7)


def _column_normalised(matrix):
    """OpenSpiel's Nash averaging rescales each task column to [0, 1]; pass it one that is."""
    low, high = matrix.min(axis=0), matrix.max(axis=0)
    return (matrix - low) / (high - low)


def _optimal_set_is_a_point(scores, value, maximiser):
    """Whether {x in simplex: x^T S >= v} (maximiser) or {y: S y <= v} is a single point."""
    sign_matrix = -scores.T if maximiser else scores
    k = sign_matrix.shape[1]
    spans = []
    for i in range(k):
        ends = []
        for direction in (1.0, -1.0):
            res = linprog(
                direction * np.eye(k)[i],
                A_ub=sign_matrix,
                b_ub=np.full(sign_matrix.shape[0], (-value if maximiser else value) + 1e-9),
                A_eq=np.ones((1, k)),
                b_eq=[1.0],
                bounds=[(0, None)] * k,
                method="highs",
            )
            assert res.status == 0, res.message
            ends.append(direction * res.fun)
        spans.append(ends[1] - ends[0])
    return max(spans) < 1e-6


def _has_unique_nash(scores):
    agents, tasks = scores.shape
    # max v s.t. x^T S >= v: variables (x, v).
    res = linprog(
        np.r_[np.zeros(agents), -1.0],
        A_ub=np.c_[-scores.T, np.ones(tasks)],
        b_ub=np.zeros(tasks),
        A_eq=np.r_[np.ones(agents), 0.0][None],
        b_eq=[1.0],
        bounds=[(0, None)] * agents + [(None, None)],
        method="highs",
    )
    assert res.status == 0, res.message
    value = -res.fun
    return _optimal_set_is_a_point(scores, value, True) and _optimal_set_is_a_point(scores, value, False)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 2**32 - 1))
def test_zero_sum_equals_nash_averaging_up_to_a_constant(agents, tasks, seed):
    scores = _column_normalised(np.random.default_rng(seed).uniform(size=(agents, tasks)))
    # The exact 0s and 1s of normalised columns often make the Nash equilibrium non-unique;
    # there the two methods differ by design (see the next test).
    assume(_has_unique_nash(scores))
    try:
        (agent_nash, task_nash), (agent_avg, task_avg) = nash_averaging(
            pyspiel.create_matrix_game(scores, -scores), a_v_a=False
        )
    except cp.error.SolverError:  # the reference's own Clarabel call failed (e.g. seed 5611, 5 x 4)
        assume(False)
    ratings = rated(MetaGame.from_matrix(scores))
    value = float(agent_nash.ravel() @ scores @ task_nash.ravel())
    np.testing.assert_allclose(ratings[0], agent_avg.ravel() - value, atol=1e-5)
    np.testing.assert_allclose(ratings[1], task_avg.ravel() + value, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 6), st.integers(0, 2**32 - 1))
def test_symmetric_zero_sum_equals_agent_vs_agent_nash_averaging(size, seed):
    upper = np.triu(np.random.default_rng(seed).uniform(-1, 1, size=(size, size)), 1)
    skew = upper - upper.T
    _, avg = nash_averaging(pyspiel.create_matrix_game(skew, -skew), a_v_a=True)
    ratings = rated(MetaGame.from_matrix(skew))  # symmetric game value 0: no offset
    np.testing.assert_allclose(ratings[0], avg.ravel(), atol=1e-5)
    np.testing.assert_array_equal(ratings[0], ratings[1])


def test_zero_sum_with_many_nash_is_stricter_than_nash_averaging():
    """Maths, section 2.1 says "equals Nash averaging up to a constant"; that holds when the Nash
    equilibrium is unique. Here the task player's optimal set is {y0 + y1 = 1/2, y2 = 1/2}:
    Nash averaging takes its max-entropy point y = (1/4, 1/4, 1/2), while the strictest CCE
    picks y0 = 0, the optimal y that hurts the off-equilibrium agent 2 most."""
    scores = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.0, 0.0]])
    (_, task_nash), (agent_avg, task_avg) = nash_averaging(
        pyspiel.create_matrix_game(scores, -scores), a_v_a=False
    )
    np.testing.assert_allclose(task_nash.ravel(), [0.25, 0.25, 0.5], atol=1e-5)
    ratings = rated(MetaGame.from_matrix(scores))
    np.testing.assert_allclose(ratings[0], [0.0, 0.0, -0.5], atol=1e-9)
    np.testing.assert_allclose(agent_avg.ravel() - 0.5, [0.0, 0.0, -0.375], atol=1e-5)
    np.testing.assert_allclose(ratings[1], task_avg.ravel() + 0.5, atol=1e-5)  # agrees here
    assert_ratings_close(ratings, reference_ratings(MetaGame.from_matrix(scores)), atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 7), st.integers(2, 7), st.booleans(), st.floats(-5, 5), st.integers(0, 2**32 - 1))
def test_constant_sum_games_rated_player_by_player_as_by_the_joint_lps(rows, columns, integer, total, seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(-3, 4, size=(rows, columns)).astype(float) if integer else rng.uniform(-1, 1, (rows, columns))
    game = MetaGame.from_matrix(scores, total - scores)
    split = metaeval.rate(game, "deviation")
    assert split.diagnostics["zero_sum"] and split.diagnostics["lp_columns"] <= rows + columns
    joint = rated(game, column_generation=False)
    assert not metaeval.rate(game, "deviation", column_generation=False).diagnostics["zero_sum"]
    assert_ratings_close(rated(game), joint, atol=1e-9)
    assert_ratings_close(joint, reference_ratings(game), atol=1e-7)


def test_noisy_zero_sum_game_is_rated_over_each_players_strategies():
    """A noisy zero-sum game: minimax strategies mixing many strategies, so the joint LP's
    optimal face grows with their product (on a sampled league's 130 x 130 meta-game its
    later rounds took 155 warm re-solves and pricings over all joints); each player's LPs
    hold at most the opponent's K strategies."""
    scores = np.random.default_rng(7).normal(size=(60, 60))
    game = MetaGame.from_matrix(scores)
    rating = metaeval.rate(game, "deviation")
    d = rating.diagnostics
    assert d.get("zero_sum") and d["lp_columns"] <= 120
    gains = deviation_gains(game, rating.distribution)
    for p in range(2):
        np.testing.assert_allclose(rating.ratings[p], gains[p], rtol=0, atol=1e-9)
        assert rating.ratings[p].max() == 0.0 and (rating.ratings[p] > -1e-9).sum() > 15  # a wide minimax support
    assert_ratings_close(rating.ratings, metaeval.rate(game, "deviation", column_generation=True).ratings, atol=1e-9)


def test_rock_paper_scissors_all_equal():
    ratings = rated(rock_paper_scissors())
    for r in ratings:
        np.testing.assert_allclose(r, 0.0, atol=1e-12)


def test_dominant_strategy_rated_top():
    ratings = rated(dominant_strategy_game())
    for r in ratings:
        assert np.argmax(r) == 2 and np.all(r[2] > np.delete(r, 2) + 1e-6)


def test_uniform_is_not_clone_invariant():
    rps = rock_paper_scissors()
    with_clone = rps.add_clone(0, 0)  # a second rock for the row player
    uniform = metaeval.rate(with_clone, "uniform").ratings
    # The column player's paper now beats two of four rows: uniform rewards it.
    assert uniform[1][1] > uniform[1][0] + 0.1
    np.testing.assert_allclose(rated(with_clone)[1], 0.0, atol=1e-12)


def test_freezing_rule_and_safeguard():
    unfrozen = np.array([True, True, False, True])
    gains = np.array([-0.5, -0.2, 0.0, -0.3])
    duals = np.array([0.7, DUAL_TOLERANCE / 2, 0.3, -0.3])
    freeze, fired = constraints_to_freeze(duals, gains, unfrozen)
    assert freeze.tolist() == [True, False, False, True] and not fired
    # No dual above the tolerance: freeze the unfrozen constraint with the largest gain.
    freeze, fired = constraints_to_freeze(np.full(4, 1e-12), gains, unfrozen)
    assert freeze.tolist() == [False, True, False, False] and fired


# A 3-player game with 8 strategies and 0/1 payoffs (bit-packed): highly degenerate; its
# warm re-solves leave unscaled residuals above 1e-10, so rounds are solved again cold.
DEGENERATE_BITS = (
    "678d9f6d51f3761b71225e2e81a50f41c892066f4e1c7001982ec130e0eaaf8290e1a036be3901b65d7b"
    "28f80942f24dab1a5d98aa59014d0f238defdfa86aa839446adf1540df21b6d24a85b62217f6f65d0c47"
    "47f9d33ba27067c6c6ca37738488d6798c1af8642e33806fb9b879cddd93e2fdc20a9c1f1243ca04907d"
    "66ec67bc8eafb0af0c6ee6a2e7399ec91701ffcfe8c28e61d7fc0244843e00637a4b2022d58d30706709"
    "fe6e416ad0d51db0b0c090f2151aaf799332c26a8503d71f"
)


def test_degenerate_game_is_rated_through_a_safeguard(monkeypatch):
    """With every round in the warm model (no optimal face: FACE_JOINTS 0), a safeguard
    fires; on the optimal face (the default) none needs to, and the ratings agree."""
    bits = np.unpackbits(np.frombuffer(bytes.fromhex(DEGENERATE_BITS), dtype=np.uint8))
    game = MetaGame(bits.reshape(3, 8, 8, 8).astype(float))
    on_face = metaeval.rate(game, "deviation")
    assert safeguards_fired(on_face.diagnostics) == 0 and on_face.diagnostics["max_violation"] <= 1e-12
    monkeypatch.setattr(deviation_module, "FACE_JOINTS", 0)
    rating = metaeval.rate(game, "deviation")
    d = rating.diagnostics
    assert safeguards_fired(d) > 0 and d["lp_solves"] > d["rounds"]
    assert d["max_violation"] <= 1e-8
    plain = rated(game, symmetry=False, merge_duplicates=False)
    assert_ratings_close(rating.ratings, plain, atol=1e-8)
    assert_ratings_close(on_face.ratings, plain, atol=1e-8)


def test_sheriff_seed_4_regression_game():
    """The meta-game on which round 9 was once reported infeasible: rated, checked against
    the dual-free reference, and unchanged by rescaling, shifting and relabelling."""
    game = regression.load("sheriff_seed4_iteration178")
    ratings = rated(game)
    assert_ratings_close(ratings, reference_ratings(game), atol=1e-7)
    payoffs = np.array(game.payoffs)
    rng = np.random.default_rng(0)
    for _ in range(5):
        rows, columns = rng.permutation(8), rng.permutation(8)
        permuted = rated(MetaGame(payoffs[:, rows][:, :, columns]))
        assert_ratings_close([permuted[0], permuted[1]], [ratings[0][rows], ratings[1][columns]], atol=1e-8)
    for scale, shift in ((0.1, 0.0), (2.0, 0.0), (1.0, 1.0)):
        changed = rated(MetaGame(scale * payoffs + shift))
        assert_ratings_close([r / scale for r in changed], ratings, atol=1e-8)


def test_kuhn_seed_24_regression_game_is_rated_by_column_generation(monkeypatch):
    """With every round in the warm model, the LPs over every joint fail on this evolved,
    nearly tied meta-game and the column generation retry rates it; on the optimal face
    (the default) the LPs over every joint do. Both are Algorithm 1's (dual-free reference)."""
    game = regression.load("kuhn_3p_seed24_iteration209")
    reference = reference_ratings(game)
    on_face = metaeval.rate(game, "deviation")
    assert on_face.diagnostics["safeguard_column_generation_retries"] == 0
    assert_ratings_close(rated(game), reference, atol=1e-7)
    monkeypatch.setattr(deviation_module, "FACE_JOINTS", 0)
    rating = metaeval.rate(game, "deviation")
    d = rating.diagnostics
    assert d["safeguard_column_generation_retries"] == 1 and d["column_generation"]
    assert_ratings_close(rated(game), reference, atol=1e-7)


def test_lps_failing_from_interior_points_are_solved_again_by_the_simplex(monkeypatch):
    """If the rounds fail after a first LP grown from interior points, the simplex alone
    solves them again (as it does on a nearly tied 3 x 128 game), with the same ratings."""
    game = MetaGame(np.random.default_rng(5).uniform(-1, 1, size=(3, 20, 20, 20)))
    reference = rated(game, column_generation=True)
    monkeypatch.setattr(deviation_module, "INTERIOR_POINT_ROWS", 0)

    def failing(model, pricer):
        raise MetaEvalError("round 49 has no solution")

    monkeypatch.setattr(deviation_module, "_grow_by_interior_point", failing)
    rating = metaeval.rate(game, "deviation", column_generation=True)
    assert rating.diagnostics["safeguard_simplex_retries"] == 1
    assert_ratings_close(rating.ratings, reference, atol=1e-12)


def test_diagnostics():
    game = MetaGame(np.random.default_rng(3).uniform(-1, 1, size=(3, 4, 3, 5)))
    rating = metaeval.rate(game, "deviation")
    d = rating.diagnostics
    assert 1 <= d["rounds"] == d["lp_solves"] <= sum(game.shape)
    assert d["simplex_iterations"] > 0 and safeguards_fired(d) == 0
    assert {k for k in d if k.startswith("safeguard_")} == {
        "safeguard_cold_resolves", "safeguard_looser_tolerances", "safeguard_largest_gain_freezes",
        "safeguard_final_resolves", "safeguard_column_generation_retries", "safeguard_simplex_retries"}
    assert (d["lp_rows"], d["lp_columns"]) == (12, 60)
    assert d["max_violation"] <= 1e-9
    assert rating.distribution.shape == game.shape


def test_bad_input():
    with pytest.raises(MetaEvalError, match="deviation ratings need a MetaGame"):
        deviation(np.zeros((2, 2, 2)))
    with pytest.raises(MetaEvalError, match="has no option"):
        metaeval.rate(rock_paper_scissors(), "deviation", tolerance=1e-3)


def test_inconsistent_frozen_values_need_a_looser_tolerance_or_fail_clearly():
    """Frozen values a hair too strict (as an inaccurate round would leave them): the
    fresh model solves the round at a looser tolerance; far too strict ones are an error."""
    guard = _Safeguards(np.array([[1.0, -1.0], [-1.0, 1.0], [0.5, -0.5]]))
    unfrozen = np.array([False, False, True])
    # gain_1 = -gain_0: gain_0 <= 0.5 and gain_1 <= -0.5 - 1e-9 leave no sigma at 1e-10.
    result = guard.cold_round(unfrozen, np.array([0.5, -0.5 - 1e-9, 0.0]), "a test round")
    assert guard.counts == dict(cold_resolves=1, looser_tolerances=1, largest_gain_freezes=0,
                                final_resolves=0)
    assert result.t == pytest.approx(0.25, abs=1e-8)
    with pytest.raises(MetaEvalError, match="a broken round has no solution.*too ill-conditioned"):
        guard.cold_round(unfrozen, np.array([0.5, -0.6, 0.0]), "a broken round")


def test_a_sigma_that_misses_the_ratings_is_recomputed():
    matrix = np.array([[1.0, -1.0], [-1.0, 1.0]])
    guard = _Safeguards(matrix)
    masses, miss = guard.checked_masses(np.array([0.9, 0.1]), np.zeros(2))  # gains +-0.8
    assert guard.counts["final_resolves"] == 1
    np.testing.assert_allclose(masses, [0.5, 0.5], atol=1e-12) and miss <= 1e-12
    with pytest.raises(MetaEvalError, match="no distribution reproduces"):
        guard.checked_masses(np.array([0.5, 0.5]), np.array([-0.5, -0.5]))
