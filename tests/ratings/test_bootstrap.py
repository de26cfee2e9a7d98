"""Bootstrap intervals, p_top and CI-aware ranks (metaeval.ratings.bootstrap)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import metaeval
from metaeval import MetaEvalError, MetaGame
from metaeval.ratings.bootstrap import Resampler, summarise, with_intervals
from metaeval.ratings.uniform import uniform
from metaeval.ratings.calibration import SMOOTH_ZERO_SUM, coverage, covered


def noisy_game(payoffs, stderr_scale=0.05, seed=0):
    payoffs = np.asarray(payoffs, dtype=float)
    rng = np.random.default_rng(seed)
    return MetaGame(payoffs, stderr=stderr_scale * (1 + rng.random(payoffs.shape)))


def sampled_win_probabilities(probability: np.ndarray, episodes: int, rng):
    """A symmetric win-probability game estimated from ``episodes`` games per pair."""
    k = len(probability)
    upper = np.triu(rng.binomial(episodes, probability) / episodes, 1)
    row = upper + np.tril(1 - upper.T, -1) + 0.5 * np.eye(k)
    stderr = np.sqrt(row * (1 - row) / episodes)
    return MetaGame(np.stack([row, row.T]), stderr=np.stack([stderr, stderr.T]))


# -- resampling ---------------------------------------------------------------------
def test_parametric_uniform_intervals_match_the_closed_form():
    """Uniform ratings are linear, so their bootstrap spread is known exactly."""
    rng = np.random.default_rng(3)
    game = noisy_game(rng.uniform(-1, 1, size=(3, 3, 4, 2)), seed=1)
    rating = metaeval.rate(game, "uniform", bootstrap=4000, seed=0)
    for p, values in enumerate(rating.ratings):
        axes = tuple(q for q in range(3) if q != p)
        count = game.num_joints / game.shape[p]
        sd = np.sqrt((game.stderr[p] ** 2).sum(axis=axes)) / count
        half_width = (rating.intervals[p][:, 1] - rating.intervals[p][:, 0]) / 2
        np.testing.assert_allclose(half_width, 1.959964 * sd, rtol=0.06)
        np.testing.assert_allclose(rating.intervals[p].mean(axis=1), values, atol=0.25 * sd.max())


def test_non_parametric_spread_matches_the_resampled_mean():
    rng = np.random.default_rng(5)
    samples = rng.uniform(-1, 1, size=(2, 3, 3)) + rng.choice([-0.5, 0.5], size=(30, 2, 3, 3))
    game = MetaGame(samples.mean(axis=0))
    rating = metaeval.rate(game, "uniform", bootstrap=4000, seed=1, samples=samples)
    # variance of a resampled mean is the population variance / n; uniform averages 3 joints
    population = samples.var(axis=0) / 30
    sd = np.sqrt(population[0].sum(axis=1)) / 3
    half_width = (rating.intervals[0][:, 1] - rating.intervals[0][:, 0]) / 2
    np.testing.assert_allclose(half_width, 1.959964 * sd, rtol=0.06)
    assert rating.diagnostics["bootstrap"]["resampling"].startswith("non-parametric")


def test_nan_padding_gives_joints_their_own_episode_counts():
    payoffs = np.array([[[1.0, 2.0]], [[-1.0, -2.0]]])  # 2 players, 1 x 2
    samples = np.full((3, 2, 1, 2), np.nan)
    samples[:, :, 0, 0] = [[0.0, 0.0], [1.0, -1.0], [2.0, -2.0]]
    samples[:2, :, 0, 1] = [[1.0, -1.0], [3.0, -3.0]]
    resampler = Resampler(MetaGame(payoffs), samples)
    np.testing.assert_array_equal(resampler.episodes, [[3, 2]])
    for seed in range(20):
        drawn = resampler.draw(np.random.default_rng(seed))
        np.testing.assert_allclose(drawn[0] + drawn[1], 0.0)  # whole episodes redrawn
        assert drawn[0, 0, 1] in (1.0, 2.0, 3.0)  # the mean of 2 draws from {1, 3}


def test_resampling_keeps_zero_sum_and_symmetry():
    rng = np.random.default_rng(0)
    zero_sum = noisy_game(np.stack([m := rng.uniform(-1, 1, (3, 3)), -m]))
    for seed in range(5):
        drawn = Resampler(zero_sum).draw(np.random.default_rng(seed))
        np.testing.assert_allclose(drawn.sum(axis=0), 0.0, atol=1e-15)
        assert not np.allclose(drawn, zero_sum.payoffs)
    win = sampled_win_probabilities(np.full((4, 4), 0.9), 10, rng)
    for seed in range(5):
        drawn = Resampler(win).draw(np.random.default_rng(seed))
        np.testing.assert_allclose(drawn[1], drawn[0].T)
        off = ~np.eye(4, dtype=bool)
        np.testing.assert_allclose((drawn[0] + drawn[0].T)[off], 1.0)
        assert drawn.min() >= 0 and drawn.max() <= 1
    rating = metaeval.rate(win, "elo", bootstrap=20, seed=0, level=0.8, prior=1.0)
    np.testing.assert_allclose(rating.intervals[0], rating.intervals[1])


def test_same_seed_same_result_and_another_seed_differs():
    game = noisy_game(np.random.default_rng(1).uniform(-1, 1, (3, 3, 3, 3)))
    first = metaeval.rate(game, "deviation", bootstrap=12, seed=7, level=0.8)
    again = metaeval.rate(game, "deviation", bootstrap=12, seed=7, level=0.8)
    other = metaeval.rate(game, "deviation", bootstrap=12, seed=8, level=0.8)
    for a, b, c in zip(first.intervals, again.intervals, other.intervals):
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
    assert first.diagnostics["bootstrap"]["seed"] == 7
    np.testing.assert_array_equal(first.ratings[0], metaeval.rate(game, "deviation").ratings[0])


@pytest.mark.parametrize("rater, options", [("payoff", {}), ("alpharank", {"alpha": 2.0}), ("nash", {})])
def test_ray_actors_give_the_in_process_result(ray_session, rater, options):
    game = noisy_game(np.random.default_rng(2).uniform(-1, 1, (3, 3, 3, 3)))
    local = metaeval.rate(game, rater, bootstrap=20, seed=3, level=0.8, **options)
    remote = metaeval.rate(game, rater, bootstrap=20, seed=3, level=0.8, workers=2, **options)
    assert remote.diagnostics["bootstrap"]["workers"] == 2
    assert remote.diagnostics["bootstrap"]["cold_replicates"] == 0  # warm-started on the actors too
    for a, b in zip(local.replicates, remote.replicates):
        np.testing.assert_array_equal(a, b)


# -- summaries -------------------------------------------------------------------------
def test_p_top_and_ci_ranks():
    replicates = [np.array([[3.0, 1.0, 1.0], [3.0, 2.0, 0.0], [1.0, 1.0, 0.5], [2.0, 2.5, 0.0]])]
    intervals, p_top = summarise(replicates, level=0.5)
    np.testing.assert_allclose(p_top[0], [(1 + 1 + 0.5 + 0) / 4, (0 + 0 + 0.5 + 1) / 4, 0.0])
    np.testing.assert_allclose(intervals[0], np.quantile(replicates[0], [0.25, 0.75], axis=0, method="weibull").T)
    game = MetaGame(np.zeros((1, 4)))
    rating = metaeval.Rating("x", game, [np.zeros(4)],
                             intervals=[np.array([[5.0, 6.0], [4.5, 5.5], [1.0, 2.0], [0.0, 4.8]])],
                             p_top=[np.array([0.6, 0.4, 0.0, 0.0])])
    np.testing.assert_array_equal(rating.ci_ranks()[0], [1, 1, 3, 2])
    frame = rating.to_frame()
    assert list(frame.columns) == ["player", "strategy", "rating", "rank", "low", "high", "p_top", "ci_rank"]
    assert frame.ci_rank.tolist() == [1, 1, 3, 2]


def test_a_dominant_strategy_is_top_with_probability_one():
    payoffs = np.zeros((2, 3, 3))
    payoffs[0, 2] = 1.0
    payoffs[1] = -payoffs[0]
    rating = metaeval.rate(noisy_game(payoffs, 0.01), "nash", bootstrap=10, seed=0, level=0.8)
    np.testing.assert_allclose(rating.p_top[0], [0, 0, 1])
    assert rating.ci_ranks()[0].tolist() == [2, 2, 1]
    np.testing.assert_allclose(rating.p_top[1].sum(), 1.0)


# -- bad input -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(bootstrap=1), "bootstrap must be an int of at least 2"),
        (dict(bootstrap=True), "bootstrap must be an int"),
        (dict(bootstrap=10, level=1.0), "level must be"),
        (dict(bootstrap=10, seed=-1), "seed must be"),
        (dict(bootstrap=10, workers=0), "workers must be"),
        (dict(samples=np.zeros((2, 2, 2, 2))), "apply only with bootstrap"),
        (dict(bootstrap=40, samples=np.zeros((2, 2, 3, 2))), r"samples must have shape \[S, 2, 2, 2\]"),
        (dict(bootstrap=40, samples=np.ones((2, 2, 2, 2))), "do not average to the game's payoffs"),
    ],
)
def test_bad_bootstrap_arguments(kwargs, message):
    game = noisy_game(np.zeros((2, 2, 2)))
    with pytest.raises(MetaEvalError, match=message):
        metaeval.rate(game, "uniform", **kwargs)


def test_bad_samples_padding_and_missing_stderr():
    game = MetaGame(np.zeros((2, 1, 1)))
    with pytest.raises(MetaEvalError, match="standard errors"):
        metaeval.rate(game, "uniform", bootstrap=40)
    padded_first = np.array([np.nan, 0.0, 0.0]).reshape(3, 1, 1, 1) * np.ones((3, 2, 1, 1))
    with pytest.raises(MetaEvalError, match="padding must come after"):
        metaeval.rate(game, "uniform", bootstrap=40, samples=padded_first)
    half = np.zeros((2, 2, 1, 1))
    half[0, 0] = np.nan
    with pytest.raises(MetaEvalError, match="every player or be all NaN"):
        metaeval.rate(game, "uniform", bootstrap=40, samples=half)


def test_percentile_bounds_leave_the_nominal_tail_for_few_replicates():
    """The bounds are the (B+1)a-th order statistics: from B = 40 uniform replicates the
    lower 95% bound has mean 0.025 (numpy's default quantile would give ~0.048)."""
    draws = np.random.default_rng(0).random((4000, 40, 1))
    lower = [summarise([values], level=0.95)[0][0][0, 0] for values in draws]
    assert abs(np.mean(lower) - 0.025) < 0.002


# -- coverage ----------------------------------------------------------------------------
# Small simulations that fit the test suite's budget; ``python -m bench.coverage`` runs
# larger ones for every rater.
COVERAGE = {  # rater: (players, strategies, options, runs, replicates)
    "uniform": (3, 3, {}, 30, 100),
    "alpharank": (2, 3, {"alpha": 2.0, "population_size": 10}, 16, 40),
    "deviation": (2, 3, {}, 16, 39),
    "payoff": (2, 3, {}, 16, 39),
}


@pytest.mark.parametrize("rater", sorted(COVERAGE))
def test_intervals_from_sampled_games_cover_the_exact_ratings(rater):
    """Sampled meta-games around known exact payoffs: 95% intervals cover the exact
    ratings close to 95% of the time."""
    players, k, options, runs, replicates = COVERAGE[rater]
    exact = MetaGame(np.random.default_rng(11).uniform(-1, 1, (players, *[k] * players)))
    assert 0.85 <= coverage(exact, rater, runs=runs, replicates=replicates, seed=1, **options) <= 1.0


def test_nash_intervals_cover_the_exact_ratings_where_the_equilibrium_is_stable():
    """Nash averaging on SMOOTH_ZERO_SUM: the off-equilibrium strategies' intervals (the
    equilibrium strategies rate exactly 0, covered by construction) cover at their level
    within 3 binomial standard deviations, at 95% and, from the same replicates, at 50%."""
    exact = MetaGame(np.stack([SMOOTH_ZERO_SUM, -SMOOTH_ZERO_SUM]))
    hits = covered(exact, "nash", runs=30, replicates=40, levels=(0.95, 0.5), seed=1)
    assert hits[:, :, [0, 1, 4, 5]].all()
    off_equilibrium = hits[:, :, [2, 3, 6, 7]].reshape(2, -1)
    for level, share in zip((0.95, 0.5), off_equilibrium.mean(axis=1)):
        assert abs(share - level) <= 3 * np.sqrt(level * (1 - level) / off_equilibrium.shape[1])


def test_too_narrow_intervals_would_fail_the_coverage_check():
    """The check above can fail: intervals at level 0.5 cover about half the time."""
    exact = MetaGame(np.random.default_rng(11).uniform(-1, 1, (3, 3, 3, 3)))
    assert 0.4 <= coverage(exact, "uniform", runs=30, replicates=100, level=0.5, seed=1) <= 0.6


def test_elo_intervals_cover_the_exact_ratings():
    rng = np.random.default_rng(4)
    strength = np.array([0.0, 0.4, 0.8, 1.2])
    probability = 1 / (1 + np.exp(strength[None, :] - strength[:, None]))
    truth = metaeval.rate(MetaGame(np.stack([probability, probability.T])), "elo").ratings[0]
    covered = []
    for run in range(20):
        game = sampled_win_probabilities(probability, 60, rng)
        rating = metaeval.rate(game, "elo", bootstrap=40, seed=run)
        covered.append((rating.intervals[0][:, 0] <= truth) & (truth <= rating.intervals[0][:, 1]))
    assert 0.85 <= np.mean(covered) <= 1.0


# -- failed replicates -------------------------------------------------------------------
def half_game():
    """Payoff 0.5 at player 0's first joint, so that about half the draws exceed it."""
    return noisy_game(np.stack([np.full((3, 3), 0.5), np.zeros((3, 3))]), stderr_scale=0.1)


def refusing_high_draws(game):
    """uniform, refusing a game whose first payoff is above 0.5 (about half the replicates)."""
    if game.payoffs[0, 0, 0] > 0.5:
        raise MetaEvalError("refused on purpose")
    return uniform(game)


def refused_replicates(game, replicates, seed):
    resampler = Resampler(game)
    draws = [resampler.draw(np.random.default_rng(s)) for s in np.random.SeedSequence(seed).spawn(replicates)]
    return [b for b, drawn in enumerate(draws) if drawn[0, 0, 0] > 0.5]


def test_failed_replicates_are_reported_and_the_others_kept():
    game = half_game()
    kept = with_intervals(game, refusing_high_draws, {}, 40, seed=0)
    every = with_intervals(game, uniform, {}, 40, seed=0, warm_start=False)  # from the same tensors
    refused = refused_replicates(game, 40, 0)
    assert 0 < len(refused) < 40
    settings = kept.diagnostics["bootstrap"]
    assert settings["failed"] == len(refused)
    assert settings["failures"] == [(b, "refused on purpose") for b in refused]
    for ours, all_of_them in zip(kept.replicates, every.replicates):
        np.testing.assert_array_equal(ours, np.delete(all_of_them, refused, axis=0))


def test_a_bootstrap_whose_every_replicate_fails_is_refused():
    game = half_game()

    def only_the_game(drawn):
        if drawn is not game:
            raise MetaEvalError("refused on purpose")
        return uniform(drawn)

    with pytest.raises(MetaEvalError, match="every bootstrap replicate failed; replicate 0: refused on purpose"):
        with_intervals(game, only_the_game, {}, 40, seed=0)


def test_the_cli_counts_failed_replicates(tmp_path, capsys, monkeypatch):
    from metaeval.cli import main

    game = half_game()
    game.save(tmp_path / "game.npz")
    monkeypatch.setitem(metaeval.ratings.RATERS, "uniform", refusing_high_draws)
    assert main(["rate", str(tmp_path / "game.npz"), "--rater", "uniform", "--option", "bootstrap=40"]) == 0
    refused = refused_replicates(game, 40, 0)
    assert (f"bootstrap: {len(refused)} of 40 replicates failed and are left out of the intervals "
            f"(first, replicate {refused[0]}: refused on purpose)") in capsys.readouterr().out
# -- relative tolerances: a game's scale changes nothing ---------------------------------
def scaled_games(a):
    """A symmetric zero-sum game whose third strategy is best in every replicate, and a
    general-sum game that is neither symmetric nor zero-sum; both times ``a``."""
    row = np.array([[0.0, -1.0, -3.0], [1.0, 0.0, -2.0], [3.0, 2.0, 0.0]])
    symmetric = MetaGame(a * np.stack([row, -row]), stderr=a * np.full((2, 3, 3), 0.1))
    general = np.random.default_rng(5).uniform(-1, 1, (2, 3, 3))
    return symmetric, MetaGame(a * general, stderr=a * np.full((2, 3, 3), 0.1))


@pytest.mark.parametrize("rater, examples", [("uniform", 25), ("deviation", 8)])
def test_scaling_a_game_leaves_p_top_and_the_structure_checks_unchanged(rater, examples):
    reference = [metaeval.rate(g, rater, bootstrap=50, seed=1) for g in scaled_games(1.0)]

    @given(exponent=st.integers(-300, 300))
    @settings(max_examples=examples, deadline=None)
    def check(exponent):
        for game, base in zip(scaled_games(10.0**exponent), reference):
            assert_scaled_alike(game, base, rater)

    check()


def assert_scaled_alike(game, base, rater):
    """The structure checks and p_top of ``game`` are those of ``base``, the same game at scale 1."""
    resampler, resampler_at_1 = Resampler(game), Resampler(base.game)
    assert (game.is_symmetric(), game.is_zero_sum()) == (base.game.is_symmetric(), base.game.is_zero_sum())
    assert (resampler.symmetric, resampler.constant_sum) == (resampler_at_1.symmetric, resampler_at_1.constant_sum)
    rating = metaeval.rate(game, rater, bootstrap=50, seed=1)
    for mine, theirs in zip(rating.p_top, base.p_top):
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("a", [1e-12, 1e-10])
def test_the_issue_scales_keep_the_top_strategy_and_the_structure(a):
    symmetric, general = scaled_games(a)
    rating = metaeval.rate(symmetric, "uniform", bootstrap=50, seed=1)
    np.testing.assert_array_equal(rating.p_top[0], [0.0, 0.0, 1.0])
    assert not general.is_symmetric() and not general.is_zero_sum()
    assert symmetric.is_symmetric() and symmetric.is_zero_sum()


def test_samples_must_average_to_the_payoffs_at_any_scale():
    game = MetaGame(1e-12 * np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]))
    samples = np.stack([game.payoffs, game.payoffs])
    Resampler(game, samples)  # they do
    with pytest.raises(MetaEvalError, match="do not average"):
        Resampler(game, samples + 1e-13)  # a tenth of the payoffs off
