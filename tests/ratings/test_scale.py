"""Ratings of ``a * game + b`` for a from 1e-8 to 1e8: every tolerance is relative.

Which raters, and why:
- deviation, payoff, nash rate payoff differences: ratings(a G + b) = a ratings(G);
- uniform is a mean payoff: ratings(a G + b) = a ratings(G) + b;
- alpharank's ratings are probabilities and alpha multiplies payoff differences, so it is
  not scale-equivariant by definition: ratings(a G + b, alpha) = ratings(G, a alpha), and
  at alpha = inf the ratings do not change at all;
- elo is left out: it takes win probabilities, which a and b would not keep in [0, 1].
"""

import math

import numpy as np
import pytest

import metaeval
from metaeval import MetaGame
from tests import regression

SCALES = [1e-8, 1e-4, 1.0, 1e4, 1e8]


def issue_game():
    """The issue's 3-player game: the third standard_normal((3, 4, 4, 4)) of seed 0."""
    rng = np.random.default_rng(0)
    for _ in range(2):
        rng.standard_normal((3, 4, 4, 4))
    return MetaGame(rng.standard_normal((3, 4, 4, 4)))


GAMES = {
    "sheriff seed 4": lambda: regression.load("sheriff_seed4_iteration178"),
    "3-player normal": issue_game,
    "integer ties": lambda: MetaGame(np.random.default_rng(1).integers(-2, 3, (3, 3, 3, 3)).astype(float)),
    "zero-sum": lambda: MetaGame.from_matrix(np.random.default_rng(2).uniform(-1, 1, (4, 5))),
}


def spread(game):
    return float(np.ptp(game.payoffs))


def assert_scaled(scaled, base, a, b, game, rtol=1e-7):
    for mine, theirs in zip(scaled, base):
        np.testing.assert_allclose(mine, a * theirs + b, rtol=0, atol=rtol * a * spread(game))


@pytest.mark.parametrize("name", GAMES)
@pytest.mark.parametrize("rater", ["deviation", "payoff", "nash", "uniform"])
def test_ratings_scale_with_the_game(rater, name):
    game = GAMES[name]()
    base = metaeval.rate(game, rater).ratings
    offset_rated = rater == "uniform"
    for a in SCALES:
        b = 7.0 * a  # an offset of the payoffs' own size: its rounding is the input's
        scaled = metaeval.rate(MetaGame(a * game.payoffs + b), rater).ratings
        assert_scaled(scaled, base, a, b if offset_rated else 0.0, game)


@pytest.mark.parametrize("name", ["sheriff seed 4", "3-player normal"])
def test_alpharank_scale_is_a_change_of_alpha(name):
    game = GAMES[name]()
    for a in SCALES:
        shifted = MetaGame(a * game.payoffs + 7.0 * a)
        for alpha in (1.0, 100.0):
            scaled = metaeval.rate(shifted, "alpharank", alpha=alpha / a).ratings
            base = metaeval.rate(game, "alpharank", alpha=alpha).ratings
            for mine, theirs in zip(scaled, base):
                np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-9)
        scaled = metaeval.rate(shifted, "alpharank", alpha=math.inf).ratings
        for mine, theirs in zip(scaled, metaeval.rate(game, "alpharank", alpha=math.inf).ratings):
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("size", [1.0, 1e3, 1e6, 1e10, 1e16])
def test_a_unique_equilibrium_survives_huge_payoffs(size):
    """[[0, S], [1, 0]] / [[0, 1], [-S, 0]]: column 1 is strictly dominant (by 1 and by S)
    and row 0 answers it, so (0, 1) is the only CCE; nash used to lose it from S = 1e6
    and to raise a solver error at 1e16."""
    game = MetaGame([[[0, size], [1, 0]], [[0, 1], [-size, 0]]])
    rating = metaeval.rate(game, "nash")
    np.testing.assert_allclose(rating.distribution, [[0, 1], [0, 0]], atol=1e-12)
    np.testing.assert_allclose(rating.ratings[0], [0, -size], rtol=1e-12)
    np.testing.assert_allclose(rating.ratings[1], [-1, 0], atol=1e-15 * size + 1e-12)
    rating = metaeval.rate(game, "deviation")
    expected = np.zeros((2, 2))
    expected[0, 1] = 1.0
    np.testing.assert_allclose(rating.distribution, expected, atol=1e-12)
    np.testing.assert_allclose(rating.ratings[0], [0, -size], rtol=1e-9)


def test_nash_on_a_tiny_scaled_game_is_an_equilibrium():
    """The issue's game times 1e-6 used to be rated against a profile with max regret
    0.177 of the payoff range; the regret is now bounded relative to the range."""
    game = MetaGame(issue_game().payoffs * 1e-6)
    rating = metaeval.rate(game, "nash")
    assert rating.diagnostics["max_regret"] <= 1e-6 * spread(game)
    assert max(r.max() for r in rating.ratings) <= 1e-6 * spread(game)


def test_single_population_alpharank_checks_symmetry_relative_to_the_range():
    row = np.random.default_rng(3).uniform(-1, 1, (4, 4))
    symmetric = MetaGame.from_matrix(row, row.T)
    lopsided = MetaGame.from_matrix(row, row.T + 1e-6)  # asymmetric by 1e-6 of the range
    for a in (1e-8, 1e8):
        scaled = metaeval.rate(MetaGame(a * symmetric.payoffs), "alpharank", alpha=1 / a,
                               single_population=True).ratings
        base = metaeval.rate(symmetric, "alpharank", alpha=1.0, single_population=True).ratings
        np.testing.assert_allclose(scaled[0], base[0], rtol=0, atol=1e-12)
        with pytest.raises(metaeval.MetaEvalError, match="symmetric 2-player game"):
            metaeval.rate(MetaGame(a * lopsided.payoffs), "alpharank", single_population=True)


HOMOGENEOUS = ["deviation", "payoff", "nash", "uniform"]


def extreme_game(players):
    """A game whose payoffs fill [-1, 1] (so payoff differences reach 2)."""
    payoffs = np.random.default_rng(players).uniform(-1, 1, (players, *[3] * players))
    payoffs /= np.abs(payoffs).max()
    payoffs[0].flat[0], payoffs[0].flat[-1] = -1.0, 1.0
    return MetaGame(payoffs)


@pytest.mark.parametrize("rater", HOMOGENEOUS)
@pytest.mark.parametrize("players", [2, 3])
@pytest.mark.parametrize("a", [1e-300, 1e300, 9e307])
def test_extreme_payoffs_are_rated_at_unit_scale(rater, players, a):
    """At |payoffs| near 9e307 payoff differences overflow: deviation gave NaN or ratings off
    by 1.4 relative, uniform -inf, nash numpy's "array must not contain infs"."""
    game = extreme_game(players)
    base = metaeval.rate(game, rater)
    with np.errstate(over="raise", invalid="raise"):  # no overflow, no invalid operation anywhere
        rating = metaeval.rate(MetaGame(a * game.payoffs), rater)
    for mine, theirs in zip(rating.ratings, base.ratings):
        np.testing.assert_allclose(mine / a, theirs, rtol=0, atol=1e-7 * spread(game))
    assert rating.tolerance == pytest.approx(a * base.tolerance, rel=0.01)
    assert rating.to_frame()["rank"].tolist() == base.to_frame()["rank"].tolist()


def test_ratings_beyond_the_largest_float_are_refused_not_nan():
    # Player 0's second strategy loses 1.8e308 against the only CCE: not a float.
    game = MetaGame([[[9e307], [-9e307]], [[0.0], [0.0]]])
    for rater in ("deviation", "payoff", "nash"):
        with pytest.raises(metaeval.MetaEvalError, match="exceed the largest float"):
            metaeval.rate(game, rater)
    np.testing.assert_allclose(metaeval.rate(game, "uniform").ratings[0], [9e307, -9e307])


def test_cli_rates_a_saved_game_near_the_largest_float(tmp_path, capsys):
    from metaeval.cli import main

    game = extreme_game(3)
    MetaGame(9e307 * game.payoffs).save(tmp_path / "huge.npz")
    assert main(["rate", str(tmp_path / "huge.npz"), "--rater", "deviation"]) == 0
    printed = [float(line.split()[3]) for line in capsys.readouterr().out.splitlines()[1:-1]]
    expected = np.concatenate(metaeval.rate(game, "deviation").ratings)
    np.testing.assert_allclose(np.array(printed) / 9e307, expected, rtol=0, atol=1e-5)
