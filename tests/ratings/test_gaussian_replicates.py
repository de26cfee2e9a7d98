"""Uniform replicates drawn from their Gaussian law (metaeval.ratings.gaussian_replicates)."""

import numpy as np
import pytest

from metaeval import MetaGame
from metaeval.ratings import RATERS
from metaeval.ratings.bootstrap import Resampler, with_intervals
from metaeval.ratings.gaussian_replicates import GaussianReplicates, uniform_covariance
from metaeval.ratings.warm import _uniform


class UnitNormals:
    """A generator whose k-th ``standard_normal`` call returns the k-th unit tensor."""

    def __init__(self):
        self.calls = 0

    def standard_normal(self, shape):
        unit = np.zeros(int(np.prod(shape)))
        unit[self.calls] = 1.0
        self.calls += 1
        return unit.reshape(shape)


def covariance_of_draws(resampler) -> np.ndarray:
    """The exact covariance of the uniform ratings of the resampler's draws: the draws are
    linear in the normals, so their k-th column is the draw from the k-th unit tensor."""
    normals = UnitNormals()
    point = _uniform(resampler.game.payoffs)
    size = resampler.game.payoffs.size if not resampler.symmetric else resampler.game.payoffs[0].size
    columns = np.stack([_uniform(resampler.draw(normals)) - point for _ in range(size)], axis=1)
    return columns @ columns.T


def game_of(kind: str) -> MetaGame:
    rng = np.random.default_rng(5)
    shape = {"general": (3, 3, 4, 5), "constant-sum 3": (3, 3, 4, 5), "constant-sum 2": (2, 4, 6),
             "symmetric": (2, 5, 5), "symmetric constant-sum": (2, 5, 5)}[kind]
    payoffs = rng.uniform(-1, 1, shape)
    stderr = rng.uniform(0.01, 0.2, shape)
    if kind.startswith("constant-sum"):
        payoffs[-1] = 1.0 - payoffs[:-1].sum(axis=0)
    if kind == "symmetric":
        payoffs[1], stderr[1] = payoffs[0].T, stderr[0].T
    if kind == "symmetric constant-sum":
        payoffs[0] -= payoffs[0].T
        payoffs[1], stderr[1] = payoffs[0].T, stderr[0].T
    return MetaGame(payoffs, stderr=stderr)


@pytest.mark.parametrize("kind", ["general", "constant-sum 3", "constant-sum 2", "symmetric",
                                  "symmetric constant-sum"])
def test_the_covariance_is_that_of_the_drawn_tensors(kind):
    resampler = Resampler(game_of(kind))
    assert (resampler.constant_sum, resampler.symmetric) == ("constant-sum" in kind, "symmetric" in kind)
    exact = covariance_of_draws(resampler)
    covariance, scale = uniform_covariance(resampler)
    assert covariance.ndim == (2 if resampler.constant_sum or resampler.symmetric else 1)  # else its diagonal
    full = covariance if covariance.ndim == 2 else np.diag(covariance)
    np.testing.assert_allclose(full * scale**2, exact, rtol=0, atol=1e-15)
    factor = GaussianReplicates.of(RATERS["uniform"], RATERS["uniform"](resampler.game), resampler).factor
    factor = factor if factor.ndim == 2 else np.diag(factor)
    np.testing.assert_allclose(factor @ factor.T, exact, rtol=0, atol=1e-15)


def test_an_extreme_scale_of_standard_errors_keeps_the_covariance():
    resampler = Resampler(game_of("constant-sum 3"))
    game = resampler.game
    huge = MetaGame(game.payoffs, stderr=game.stderr * 2.0**600)
    factor = GaussianReplicates.of(RATERS["uniform"], RATERS["uniform"](huge), Resampler(huge)).factor
    assert np.all(np.isfinite(factor))
    covariance, scale = uniform_covariance(resampler)
    np.testing.assert_allclose((factor / 2.0**600) @ (factor / 2.0**600).T, covariance * scale**2, rtol=0, atol=1e-15)


def test_uniform_bootstrap_draws_ratings_and_matches_the_tensors_in_law():
    game = game_of("constant-sum 3")
    rater = RATERS["uniform"]
    fast = with_intervals(game, rater, {}, 4000, seed=1, progress=False)
    slow = with_intervals(game, rater, {}, 4000, seed=1, progress=False, warm_start=False)
    assert fast.diagnostics["bootstrap"]["drawn"] == "ratings (their Gaussian law)"
    assert slow.diagnostics["bootstrap"]["drawn"] == "payoff tensors"
    again = with_intervals(game, rater, {}, 4000, seed=1, progress=False)
    np.testing.assert_array_equal(np.concatenate(again.replicates, axis=1), np.concatenate(fast.replicates, axis=1))
    fast_values, slow_values = (np.concatenate(r.replicates, axis=1) for r in (fast, slow))
    covariance, scale = uniform_covariance(Resampler(game))
    spread = scale * np.sqrt(np.diag(covariance))
    # 4,000 replicates: means within 4 standard errors of the mean, spreads within 5%
    assert np.all(np.abs(fast_values.mean(axis=0) - slow_values.mean(axis=0)) < 4 * spread * np.sqrt(2 / 4000))
    np.testing.assert_allclose(fast_values.std(axis=0), slow_values.std(axis=0), rtol=0.05)


def test_win_probability_and_episode_bootstraps_draw_tensors():
    row = np.array([[0.5, 0.7, 0.2], [0.3, 0.5, 0.6], [0.8, 0.4, 0.5]])
    stderr = np.full((3, 3), 0.05)
    win = MetaGame(np.stack([row, row.T]), stderr=np.stack([stderr, stderr.T]))
    rating = with_intervals(win, RATERS["uniform"], {}, 40, progress=False)
    assert rating.diagnostics["bootstrap"]["drawn"] == "payoff tensors"
    cold = with_intervals(win, RATERS["uniform"], {}, 40, progress=False, warm_start=False)
    np.testing.assert_array_equal(np.concatenate(rating.replicates), np.concatenate(cold.replicates))
    samples = np.stack([win.payoffs + 0.1, win.payoffs - 0.1])
    episodes = with_intervals(win, RATERS["uniform"], {}, 40, samples=samples, progress=False)
    assert episodes.diagnostics["bootstrap"]["drawn"] == "payoff tensors"
    assert GaussianReplicates.of(RATERS["payoff"], RATERS["payoff"](win), Resampler(win)) is None


def test_a_dense_covariance_above_its_limit_draws_tensors(monkeypatch):
    from metaeval.ratings import gaussian_replicates

    monkeypatch.setattr(gaussian_replicates, "DENSE_MAX_RATINGS", 10)  # 12 ratings below
    drawn = {kind: with_intervals(game_of(kind), RATERS["uniform"], {}, 40, progress=False)
             .diagnostics["bootstrap"]["drawn"] for kind in ("general", "constant-sum 3")}
    assert drawn == {"general": "ratings (their Gaussian law)", "constant-sum 3": "payoff tensors"}
