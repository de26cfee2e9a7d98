import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval import MetaGame
from metaeval.solvers.equilibria import deviation_gains
from metaeval.solvers.reduction import copied_strategies, interchangeable_players, joint_orbits, quantise, reduce_cce
from tests.conftest import dominant_strategy_game, rock_paper_scissors


def _payoff_draw(rng, shape, integer):
    return rng.integers(-3, 4, size=shape).astype(float) if integer else rng.uniform(-1, 1, size=shape)


def symmetric_two_player(rng, k, integer):
    row = _payoff_draw(rng, (k, k), integer)
    return MetaGame.from_matrix(row, row.T.copy())


def symmetric_three_player(rng, k, integer):
    """G_p(a) = u(a_p, opponents) with u symmetric in the two opponents."""
    base = _payoff_draw(rng, (k, k, k), integer)
    u = base + base.transpose(0, 2, 1)
    return MetaGame(np.stack([u, u.transpose(1, 0, 2), u.transpose(1, 2, 0)]))


def agent_agent_task(rng, models, tasks, integer):
    """Maths, section 6: G_A = T(m_A, t) - T(m_B, t), G_B = -G_A, G_T = |G_A|; A and B interchangeable."""
    table = _payoff_draw(rng, (models, tasks), integer)
    a = table[:, None, :] - table[None, :, :]
    return MetaGame(np.stack([a, -a, np.abs(a)]))


@st.composite
def games_with_symmetry(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    integer = draw(st.booleans())
    kind = draw(st.sampled_from(["two", "three", "agent-agent-task"]))
    k = draw(st.integers(2, 5))
    if kind == "two":
        game, classes = symmetric_two_player(rng, k, integer), [[0, 1]]
    elif kind == "three":
        game, classes = symmetric_three_player(rng, min(k, 4), integer), [[0, 1, 2]]
    else:
        game, classes = agent_agent_task(rng, min(k, 4), draw(st.integers(1, 4)), integer), [[0, 1], [2]]
    # Clone a strategy for every player of its class, which keeps the symmetry.
    if draw(st.booleans()):
        members = classes[draw(st.integers(0, len(classes) - 1))]
        index = draw(st.integers(0, game.shape[members[0]] - 1))
        for p in members:
            game = game.add_clone(p, index)
    return game, classes


@settings(max_examples=40, deadline=None)
@given(games_with_symmetry())
def test_reduction_is_exact(case):
    game, classes = case
    reduced = metaeval.rate(game, "deviation")
    full = metaeval.rate(game, "deviation", symmetry=False, merge_duplicates=False)
    found = reduced.diagnostics["player_classes"]
    # Degenerate draws (an all-equal table, say) may be more symmetric than constructed.
    assert all(any(set(c) <= set(f) for f in found) for c in classes)
    assert reduced.diagnostics["lp_columns"] < full.diagnostics["lp_columns"]
    for mine, plain in zip(reduced.ratings, full.ratings):
        np.testing.assert_allclose(mine, plain, rtol=0, atol=1e-8)
    for members in found:
        for p in members[1:]:
            np.testing.assert_array_equal(reduced.ratings[p], reduced.ratings[members[0]])
    for rating in (reduced, full):
        for p, gains in enumerate(deviation_gains(game, rating.distribution)):
            np.testing.assert_allclose(rating.ratings[p], gains, rtol=0, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(games_with_symmetry(), st.integers(0, 2**32 - 1))
def test_reduced_rows_are_the_gains_of_the_expanded_distribution(case, seed):
    game, _ = case
    reduced = reduce_cce(game)
    masses = np.random.default_rng(seed).dirichlet(np.ones(reduced.matrix.shape[1]))
    sigma = reduced.expand(masses, game.shape)
    assert sigma.sum() == pytest.approx(1.0, abs=1e-12) and sigma.min() >= 0
    gains = np.concatenate(deviation_gains(game, sigma))
    np.testing.assert_allclose(gains, reduced.scale * (reduced.matrix @ masses)[reduced.row_of], atol=1e-12)


def test_player_classes():
    rng = np.random.default_rng(0)
    assert interchangeable_players(rock_paper_scissors()) == [[0, 1]]
    assert interchangeable_players(dominant_strategy_game()) == [[0, 1]]
    assert interchangeable_players(MetaGame(rng.normal(size=(3, 3, 3, 3)))) == [[0], [1], [2]]
    assert interchangeable_players(symmetric_three_player(rng, 3, False)) == [[0, 1, 2]]
    assert interchangeable_players(agent_agent_task(rng, 4, 3, False)) == [[0, 1], [2]]
    # Different strategy counts can never be swapped.
    assert interchangeable_players(MetaGame(np.zeros((2, 2, 3)))) == [[0], [1]]
    # Players 0 and 2 interchangeable, 1 not: G_1 depends on which of them plays what.
    u = rng.normal(size=(2, 2, 2))
    u = u + u.transpose(0, 2, 1)
    v = rng.normal(size=(2, 2, 2))
    v = v + v.transpose(2, 1, 0)
    game = MetaGame(np.stack([u.transpose(0, 1, 2), v, u.transpose(2, 1, 0)]))
    assert interchangeable_players(game) == [[0, 2], [1]]


def test_orbit_counts():
    assert np.unique(joint_orbits((3, 3), [[0, 1]])).size == 6
    assert np.unique(joint_orbits((4, 4, 4), [[0, 1, 2]])).size == 20
    assert np.unique(joint_orbits((3, 3, 2), [[0, 1], [2]])).size == 12
    assert np.unique(joint_orbits((3, 3), [[0], [1]])).size == 9


def test_quantise_makes_rounding_noise_equal():
    assert 0.1 + 0.2 != 0.3 and quantise(np.array(0.1 + 0.2)) == quantise(np.array(0.3))
    assert np.signbit(quantise(np.array(-1e-17))) == np.False_


def test_clones_merge_rows_and_columns():
    rps = rock_paper_scissors()
    plain = reduce_cce(rps, symmetry=False)
    cloned = reduce_cce(rps.add_clone(0, 1).add_clone(1, 2), symmetry=False)
    np.testing.assert_array_equal(cloned.matrix, plain.matrix)
    assert cloned.row_of[3] == cloned.row_of[1]  # the clone's deviation row is paper's


def test_copied_strategies_are_copies_for_every_player():
    """A copy pays every player alike; a strategy paying only its own player alike is not one."""
    rng = np.random.default_rng(4)
    payoffs = rng.uniform(-1, 1, size=(3, 3, 2, 4))
    payoffs = np.concatenate([payoffs, payoffs[:, [1]]], axis=1)  # player 0's strategy 3 copies 1
    payoffs = np.concatenate([payoffs, payoffs[:, :, :, [0, 0]]], axis=3)  # player 2's 4 and 5 copy 0
    payoffs[0, :, :, 2] = payoffs[0, :, :, 1]  # player 2's strategy 2 pays player 0 as 1 does, not player 1
    labels = copied_strategies(MetaGame(payoffs))
    assert [label.tolist() for label in labels] == [[0, 1, 2, 1], [0, 1], [0, 1, 2, 3, 0, 0]]
    negative = payoffs.copy()
    negative[:, 0] = 0.0
    negative[:, 2] = -0.0
    assert copied_strategies(MetaGame(negative))[0].tolist() == [0, 1, 0, 1]
