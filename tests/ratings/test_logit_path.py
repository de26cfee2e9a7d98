"""The logit-branch tracer against pygambit's path follower, which it replaces (and falls back on)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaeval
from metaeval.ratings import logit
from metaeval.ratings.base import marginals
from metaeval.ratings.logit import STALLED_REGRET, TRACE_REGRET, BranchStalled, max_regret, trace_logit_branch
from metaeval.ratings.nash import well_scaled
from tests import regression

# (seed, shape): generic games, 2 to 4 players. Seeds 4 and 47 end on another branch
# unless steps whose tangent orientation flips are rejected and corrector steps are chords.
GAMES = [(1, (4, 5)), (14, (6, 6)), (2, (2, 3, 4)), (4, (4, 4, 4)), (47, (5, 5, 5)),
         (7, (5, 5, 5)), (5, (2, 2, 2, 3)), (13, (2, 2, 2, 3))]


def scaled_game(seed, shape):
    return well_scaled(np.random.default_rng(seed).uniform(-1, 1, size=(len(shape), *shape)))[0]


@pytest.mark.parametrize("seed, shape", GAMES)
def test_traced_end_point_is_pygambits(seed, shape):
    payoffs = scaled_game(seed, shape)
    ours = trace_logit_branch(payoffs, TRACE_REGRET)
    assert max_regret(payoffs, ours) <= TRACE_REGRET * np.ptp(payoffs)
    for mine, theirs in zip(ours, logit.gambit_branch_end(payoffs)):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)


def through_pygambit(monkeypatch):
    """Make the tracer give up, so that the rater falls back on pygambit's follower."""
    def gives_up(payoffs, target, symmetric=False):
        raise metaeval.MetaEvalError("the logit path of this game could not be followed (step below 1e-8)")

    monkeypatch.setattr(logit, "trace_logit_branch", gives_up)


@pytest.mark.parametrize("seed, shape", GAMES)
def test_nash_ratings_do_not_depend_on_the_tracer(monkeypatch, seed, shape):
    game = metaeval.MetaGame(np.random.default_rng(seed).uniform(-1, 1, size=(len(shape), *shape)))
    rating = metaeval.rate(game, "nash")
    through_pygambit(monkeypatch)
    expected = metaeval.rate(game, "nash")
    for mine, theirs in zip(rating.ratings, expected.ratings):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)


def test_a_16_per_player_game_is_rated_as_through_pygambit(monkeypatch):
    game = metaeval.MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 16, 16, 16)))
    rating = metaeval.rate(game, "nash")
    through_pygambit(monkeypatch)
    expected = metaeval.rate(game, "nash")
    for mine, theirs in zip(rating.ratings, expected.ratings):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)
    assert rating.diagnostics["max_regret"] <= 1e-12


def test_a_meta_game_where_pygambits_follower_does_not_end():
    """pygambit's follower reaches a max regret of 1e-7 x range on this game in 0.1 s and
    then crawls without end towards 1e-8; the tracer ends at its 1e-7 point."""
    import pygambit

    game = regression.load("kuhn_3p_best_response_seed1_iteration41")
    rating = metaeval.rate(game, "nash")
    assert rating.diagnostics["max_regret"] <= 1e-12
    payoffs = well_scaled(game.payoffs)[0]
    gambit = pygambit.Game.from_arrays(*payoffs)
    profile = pygambit.nash.logit_solve(gambit, maxregret=1e-7).equilibria[0]
    for mine, player in zip(trace_logit_branch(payoffs, TRACE_REGRET), gambit.players):
        np.testing.assert_allclose(mine, [float(profile[s]) for s in player.strategies], atol=1e-6)
    for mine, expected in zip(marginals(rating.distribution), [[0.2, 0, 0, 0, 0.3, 0.2, 0.3, 0],
                                                    [0.4, 0, 0.4, 0.05, 0, 0.05, 0.05, 0.05],
                                                    [0, 0, 0, 0, 0.5, 0, 0, 0.5]]):
        np.testing.assert_allclose(mine, expected, atol=1e-12)


def test_a_meta_game_where_the_tracer_stalls_just_short_of_its_target():
    """The tracer's steps fall below 1e-8 at a max regret of 1.2e-8 x range, where pygambit's
    follower does not end either; the point reached is refined to an exact equilibrium, the
    one pygambit's follower approaches (it reaches 1e-7 x range in 0.2 s)."""
    import pygambit

    game = regression.load("kuhn_3p_best_response_seed6_iteration228")
    payoffs = well_scaled(game.payoffs)[0]
    with pytest.raises(BranchStalled, match="step below 1e-8") as stalled:
        trace_logit_branch(payoffs, TRACE_REGRET)
    regret = max_regret(payoffs, stalled.value.strategies) / np.ptp(payoffs)
    assert TRACE_REGRET < regret < STALLED_REGRET
    rating = metaeval.rate(game, "nash")
    assert rating.diagnostics["max_regret"] <= 1e-15
    gambit = pygambit.Game.from_arrays(*payoffs)
    profile = pygambit.nash.logit_solve(gambit, maxregret=1e-7).equilibria[0]
    for mine, player in zip(marginals(rating.distribution), gambit.players):
        np.testing.assert_allclose(mine, [float(profile[s]) for s in player.strategies], atol=1e-5)
    np.testing.assert_allclose(marginals(rating.distribution)[0], [0, 1 / 6, 1 / 6, 0, 1 / 6, 1 / 2, 0, 0], atol=1e-12)


def test_pygambits_follower_is_stopped_at_its_time_limit(monkeypatch):
    through_pygambit(monkeypatch)
    monkeypatch.setattr(logit, "GAMBIT_SECONDS", 0.01)
    game = metaeval.MetaGame(np.random.default_rng(0).uniform(-1, 1, size=(3, 4, 4, 4)))
    with pytest.raises(metaeval.MetaEvalError, match="did not end within 0.01 s"):
        metaeval.rate(game, "nash")


def test_pygambits_errors_reach_the_caller():
    with pytest.raises(metaeval.MetaEvalError, match=r"could not be followed \(pygambit: Invalid value\)"):
        logit._gambit_logit(np.full((2, 2, 2), np.nan))


def profile_of(seed, shape):
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.full(k, 0.5)) for k in shape]


def cross_by_einsum(payoff, x, p, q):
    """d G_p(i, x_-p) / d x_q(j) spelled out: one einsum over every other player's strategy."""
    letters = "abcdefgh"[: len(x)]
    operands = [payoff] + [x[r] for r in range(len(x)) if r not in (p, q)]
    inputs = [letters] + [letters[r] for r in range(len(x)) if r not in (p, q)]
    return np.einsum(",".join(inputs) + "->" + letters[p] + letters[q], *operands)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1),
       shape=st.lists(st.integers(1, 5), min_size=2, max_size=5).map(tuple),
       scale=st.sampled_from([1e-9, 1.0, 1e9]), tied=st.booleans())
def test_cross_payoffs_by_halving_match_the_einsum(seed, shape, scale, tied):
    """The Jacobian's contractions, shared on a binary tree, against one einsum per pair;
    payoffs nearly tied (integers plus 1e-12 noise) or badly scaled."""
    rng = np.random.default_rng(seed)
    payoffs = rng.integers(-2, 3, size=(len(shape), *shape)) + 1e-12 * rng.uniform(size=(len(shape), *shape)) \
        if tied else rng.uniform(-1, 1, size=(len(shape), *shape))
    payoffs = scale * payoffs
    x = profile_of(seed, shape)
    for p in range(len(shape)):
        cross = logit._all_cross_payoffs(payoffs[p], x, p)
        assert sorted(cross) == [q for q in range(len(shape)) if q != p]
        for q, matrix in cross.items():
            np.testing.assert_allclose(matrix, cross_by_einsum(payoffs[p], x, p, q), rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_allclose(logit._payoff_from(cross, x), logit.payoff_against(payoffs, x, p),
                                   rtol=1e-12, atol=1e-12 * scale)
        others = [operand for r in range(len(x)) if r != p for operand in (x[r], [r])]
        np.testing.assert_allclose(logit.payoff_against(payoffs, x, p),
                                   np.einsum(payoffs[p], list(range(len(x))), *others, [p]),
                                   rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("seed, shape", GAMES)
def test_regret_read_off_the_branch_is_the_regret_there(monkeypatch, seed, shape):
    """The tracer skips max_regret's passes over the tensor until the regret read off the
    branch equations is near its target; at the point where it stops the two agree."""
    payoffs = scaled_game(seed, shape)
    original, last = logit._branch_regret, {}

    def spy(v, offsets):
        last["args"] = v, offsets
        return original(v, offsets)

    monkeypatch.setattr(logit, "_branch_regret", spy)
    for target in (1e-3, TRACE_REGRET):
        x = trace_logit_branch(payoffs, target)
        assert abs(original(*last["args"]) - max_regret(payoffs, x)) <= 1e-3 * target * np.ptp(payoffs)
