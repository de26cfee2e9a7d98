"""Where Nash averaging's bootstrap intervals lose coverage, one cause at a time.

    python -m bench.coverage_nash [--part quantiles|support|smooth|all] [runs ...]

``runs`` are the numbers of sampled games of the parts run, in the order quantiles,
support, smooth (default 2000 200 2000). Sampled games are drawn as in
``bench.coverage`` (``sampled_around``: two-point noise ±0.4 per episode, generator
seeded 1), and run r's replicates are the payoff tensors that
``metaeval.rate(game, "nash", bootstrap=B, seed=r)`` rates; the first B of a larger
bootstrap are the same, so one set of draws serves every B. Coverage counts 95%
intervals of the strategies outside the exact equilibrium's support: those inside
rate exactly 0 and are covered by construction.

While the equilibrium of a 2-player zero-sum game keeps its support, nash's ratings
solve the equalizer equations on that support (``on_support``): a smooth function of
the payoffs, computed without the solver, and linear for a pure saddle point.

- ``quantiles``: the near-tie game of ``bench.coverage`` (a pure saddle point at
  (0, 0)), rated on that saddle, A[i, 0] - A[0, 0] and A[0, 0] - A[0, j], so support
  changes play no part. Coverage of the intervals from numpy's default quantile
  ("linear") and from ``percentile_interval`` (the (B+1)a-th order statistics,
  "weibull") for B = 40, 100, 2000, at 640 episodes per joint and at 40, where the
  means of two-point noise lie on a lattice.
- ``support``: the same game at 40 episodes, B = 100. Nash's intervals
  (``metaeval.rate``) against those of its saddle piece on the same replicates, and a
  bias-corrected (BC) percentile interval; how often the sampled game and the
  replicates leave the saddle; the replicates' mean bias and the intervals' mean
  width. Then how often the saddle moves at 160 and 640 episodes (1,000 replicates
  a game, no solver).
- ``smooth``: ``SMOOTH_ZERO_SUM`` at 40 episodes, B = 100, rated on its support
  {0, 1} x {0, 1}, over all runs and the first 30; nash itself on the first 30 (the
  draws of ``bench.coverage --runs 30 --replicates 100``); how often the support
  changes, also on the first 30 games x 40 replicates (the test suite's draws).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import norm

import metaeval
from bench.coverage import exact_game
from metaeval.ratings.bootstrap import Resampler, percentile_interval
from metaeval.ratings.calibration import sampled_around
from metaeval.ratings.base import marginals

LEVEL, SPREAD, EPISODES, REPLICATES = 0.95, 0.4, 40, 100
TOLERANCE = 1e-9
NEAR_TIE, SADDLE = exact_game("nash-near-tie", (2, 3, 3)), ([0], [0])
SMOOTH, SMOOTH_SUPPORT = exact_game("nash", (2, 4, 4)), ([0, 1], [0, 1])
TAIL = (1 - LEVEL) / 2
RULES = {  # name: bounds [2, K] from replicates [B, K]
    "numpy default (linear)": lambda values: np.quantile(values, [TAIL, 1 - TAIL], axis=0),
    "(B+1)a-th (weibull)": lambda values: percentile_interval(values, LEVEL),
}


def replicate_draws(game: metaeval.MetaGame, replicates: int, seed: int) -> np.ndarray:
    """``[B, 2, K, L]``: the tensors ``metaeval.rate(game, ..., bootstrap=B, seed=seed)`` rates."""
    resampler = Resampler(game)
    children = np.random.SeedSequence(seed).spawn(replicates)
    return np.array([resampler.draw(np.random.default_rng(child)) for child in children])


def equalizer(payoffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mix of the columns of square ``payoffs [..., s, s]`` on which every row pays
    the same, and that payoff."""
    s = payoffs.shape[-1]
    system = np.zeros((*payoffs.shape[:-2], s + 1, s + 1))
    system[..., :s, :s], system[..., :s, s], system[..., s, :s] = payoffs, -1.0, 1.0
    solution = np.linalg.solve(system, np.eye(s + 1)[s])
    return solution[..., :s], solution[..., s]


def on_support(payoffs: np.ndarray, rows, cols) -> tuple[np.ndarray, np.ndarray]:
    """Nash ratings ``[..., K + L]`` of zero-sum ``payoffs [..., 2, K, L]`` for an equilibrium
    on ``rows`` x ``cols``, and whether that is an equilibrium (mixes >= 0, no better reply)."""
    row_payoffs = payoffs[..., 0, :, :]
    core = row_payoffs[..., rows, :][..., cols]
    y, value = equalizer(core)
    x, _ = equalizer(np.swapaxes(core, -1, -2))
    ratings = np.concatenate([
        np.einsum("...ks,...s->...k", row_payoffs[..., cols], y) - value[..., None],
        value[..., None] - np.einsum("...s,...sl->...l", x, row_payoffs[..., rows, :]),
    ], axis=-1)
    holds = (x >= 0).all(-1) & (y >= 0).all(-1) & (ratings <= TOLERANCE).all(-1)
    return ratings, holds


def covers(bounds: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return (bounds[0] - TOLERANCE <= truth) & (truth <= bounds[1] + TOLERANCE)


def bias_corrected(values: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """BC percentile bounds ``[2, K]`` (Efron & Tibshirani 1993, sec. 14.3): the tails move
    by twice the normal score of the share of replicates below the estimate."""
    below = (values < estimate - TOLERANCE).mean(0) + 0.5 * (np.abs(values - estimate) <= TOLERANCE).mean(0)
    shift = norm.ppf(np.clip(below, 1 / len(values), 1 - 1 / len(values)))
    tails = norm.cdf(2 * shift[:, None] + norm.ppf([TAIL, 1 - TAIL]))
    return np.array([np.quantile(v, t, method="weibull") for v, t in zip(values.T, tails)]).T


def exact_nash(exact: metaeval.MetaGame) -> tuple[np.ndarray, np.ndarray]:
    """The exact ratings and the mask of strategies outside the equilibrium's support."""
    rating = metaeval.rate(exact, "nash")
    return np.concatenate(rating.ratings), np.concatenate([x <= 1e-6 for x in marginals(rating.distribution)])


def nash_bootstrap(game: metaeval.MetaGame, run: int):
    """Nash's point ratings, replicates ``[B, K + L]`` and interval bounds ``[2, K + L]``."""
    rating = metaeval.rate(game, "nash", bootstrap=REPLICATES, seed=run)
    return (np.concatenate(rating.ratings), np.concatenate(rating.replicates, axis=1),
            np.concatenate(rating.intervals).T)


def quantiles(runs: int) -> None:
    truth, outside = exact_nash(NEAR_TIE)
    sweep = (40, 100, 2000)
    print(f"near-tie game rated on its saddle, {runs} runs x {outside.sum()} off-equilibrium strategies")
    print(f"{'episodes':>8} {'B':>5}  {'rule':<23} {'coverage':>8}")
    for episodes in (640, EPISODES):
        rng, hits = np.random.default_rng(1), {}
        for run in range(runs):
            game = sampled_around(NEAR_TIE, episodes, SPREAD, rng)
            values = on_support(replicate_draws(game, max(sweep), run), *SADDLE)[0]
            for b in sweep:
                for name, rule in RULES.items():
                    hits.setdefault((b, name), []).append(covers(rule(values[:b]), truth)[outside])
        for (b, name), hit in hits.items():
            print(f"{episodes:>8} {b:>5}  {name:<23} {np.mean(hit):>8.3f}", flush=True)


def paired_run(game: metaeval.MetaGame, run: int, truth: np.ndarray) -> dict:
    """One sampled game: nash and its saddle piece on the same replicates."""
    estimate, values, bounds = nash_bootstrap(game, run)
    saddle, kept = on_support(replicate_draws(game, REPLICATES, run), *SADDLE)
    saddle_bounds = percentile_interval(saddle, LEVEL)
    return {
        "nash": covers(bounds, truth), "saddle piece": covers(saddle_bounds, truth),
        "nash, BC": covers(bias_corrected(values, estimate), truth),
        "game moved": not on_support(game.payoffs, *SADDLE)[1], "replicates moved": ~kept,
        "nash differs": np.abs(values - saddle).max(1) > 1e-6, "bias": values.mean(0) - truth,
        "nash width": np.diff(bounds, axis=0)[0], "saddle piece width": np.diff(saddle_bounds, axis=0)[0],
    }


def saddle_moves(episodes: int, runs: int, replicates: int) -> tuple[float, float]:
    """Shares of sampled games and of their replicates whose (0, 0) is no saddle point."""
    rng, games, draws = np.random.default_rng(1), [], []
    for run in range(runs):
        game = sampled_around(NEAR_TIE, episodes, SPREAD, rng)
        games.append(not on_support(game.payoffs, *SADDLE)[1])
        draws.append(~on_support(replicate_draws(game, replicates, run), *SADDLE)[1])
    return float(np.mean(games)), float(np.mean(draws))


def support(runs: int) -> None:
    truth, outside = exact_nash(NEAR_TIE)
    column = np.sort(NEAR_TIE.payoffs[0, :, 0])
    lead = column[-1] - column[-2]
    print(f"near-tie game: row best response to column 0 leads by {lead:.3f}, "
          f"{lead / (SPREAD * np.sqrt(2 / EPISODES)):.2f} standard errors at {EPISODES} episodes")
    for saddle in (SADDLE, ([2], [0])):
        print(f"  ratings on the saddle {saddle}: {np.round(on_support(NEAR_TIE.payoffs, *saddle)[0], 3)}")
    rng = np.random.default_rng(1)
    per_run = [paired_run(sampled_around(NEAR_TIE, EPISODES, SPREAD, rng), run, truth) for run in range(runs)]
    record = {key: np.array([r[key] for r in per_run]) for key in per_run[0]}
    names = [f"row {i}" for i in range(3)] + [f"column {j}" for j in range(3)]
    print(f"{runs} runs x {REPLICATES} replicates, {EPISODES} episodes; off-equilibrium strategies "
          f"{[name for name, out in zip(names, outside) if out]} ({runs * outside.sum()} intervals)")
    for key in ("nash", "saddle piece", "nash, BC"):
        print(f"  coverage {key:<13} {record[key][:, outside].mean():.3f}  per strategy "
              f"{record[key][:, outside].mean(0).round(3).tolist()}")
    for key in ("game moved", "replicates moved", "nash differs"):
        print(f"  share {key:<17} {record[key].mean():.4f}")
    for key in ("bias", "nash width", "saddle piece width"):
        print(f"  mean {key:<18} {record[key][:, outside].mean(0).round(3).tolist()}")
    for episodes in (160, 640):
        games, draws = saddle_moves(episodes, runs, 1000)
        print(f"  {episodes} episodes, {runs} runs x 1000 replicates: saddle moved in {games:.4f} of games, "
              f"{draws:.5f} of replicates", flush=True)


def smooth(runs: int, checked: int = 30) -> None:
    truth, outside = exact_nash(SMOOTH)
    assert np.allclose(truth, on_support(SMOOTH.payoffs, *SMOOTH_SUPPORT)[0], atol=1e-9)
    print(f"smooth game, exact ratings {truth.round(3).tolist()}; {runs} runs x {REPLICATES} replicates")
    rng, hits, game_kept, kept, nash_hits, differs = np.random.default_rng(1), [], [], [], [], []
    for run in range(runs):
        game = sampled_around(SMOOTH, EPISODES, SPREAD, rng)
        values, holds = on_support(replicate_draws(game, REPLICATES, run), *SMOOTH_SUPPORT)
        hits.append(covers(percentile_interval(values, LEVEL), truth)[outside])
        game_kept.append(on_support(game.payoffs, *SMOOTH_SUPPORT)[1])
        kept.append(holds)
        if run < checked:
            _, nash_values, bounds = nash_bootstrap(game, run)
            nash_hits.append(covers(bounds, truth)[outside])
            differs.append(np.abs(nash_values - values).max(1) > 1e-6)
    hits, game_kept, kept = np.array(hits), np.array(game_kept), np.array(kept)
    print(f"  coverage on the support: {hits.mean():.3f} ({hits.size} intervals), "
          f"first {checked} runs {hits[:checked].mean():.3f}")
    print(f"  nash, first {checked} runs: coverage {np.mean(nash_hits):.3f}, "
          f"replicates where it differs from the support's ratings {np.sum(differs)} of {np.size(differs)} "
          f"(support changed in {(~kept[:checked]).sum()})")
    print(f"  support changed: {(~game_kept).sum()} of {runs} games, {(~kept).sum()} of {kept.size} replicates; "
          f"first {checked} games x 40 replicates: {(~game_kept[:checked]).sum()} games, "
          f"{(~kept[:checked, :40]).sum()} replicates", flush=True)


PARTS = {"quantiles": (quantiles, 2000), "support": (support, 200), "smooth": (smooth, 2000)}  # default runs


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("runs", nargs="*", type=int, help="sampled games per part run, in order")
    args = parser.parse_args(argv)
    parts = list(PARTS) if args.part == "all" else [args.part]
    sizes = args.runs + [PARTS[part][1] for part in parts[len(args.runs):]]
    for part, runs in zip(parts, sizes):
        start, cpu = time.perf_counter(), time.process_time()
        print(f"== {part}")
        PARTS[part][0](runs)
        print(f"   {time.perf_counter() - start:.1f} s wall, {time.process_time() - cpu:.1f} s CPU", flush=True)


if __name__ == "__main__":
    main()
