"""What a bootstrap costs against one point rating, with and without warm starts.

    python -m bench.bootstrap_cost [--games goofspiel 3x64] [--raters ...] [--replicates 100]

Games: ``goofspiel``, the sampled meta-game of 3-player goofspiel (5 cards) between 8
random policies per player (drawn state by state, seed 0), 50 episodes per joint, with
its standard errors; ``3xK`` (any PxK), a random game with payoffs uniform on [-1, 1]
(seed 0) and a standard error of 0.05 on every entry.

For each rater, in this process and one after another: CPU seconds of one point rating,
of B replicates warm-started from it (`rate(..., bootstrap=B)`'s default; the point
rating itself not counted) and of the same B replicates each rated from scratch
(``warm_start=False``), both as multiples of the point rating's seconds measured in the
same run; how many replicates the warm run rated from scratch; and the largest
difference between a warm and a cold replicate rating; where the warm run draws the
replicates' ratings from their law (uniform, `metaeval.ratings.gaussian_replicates`)
rather than from payoff tensors, the draws differ and no difference is printed. A rater without a warm start
(metaeval.ratings.warm) is run once: both runs would be the same code. Every solver
first rates the game and a 3-replicate bootstrap out of the timing (imports, BLAS
start-up). A call taking less than SHORT CPU seconds is timed as the median of REPEATS
calls. 95% intervals, seed 0. "draws x": the CPU seconds of drawing the B
replicates' payoff tensors alone (their generators included), as a multiple of the
point rating's: no bootstrap that draws them costs less.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.scale import parse_shape
from bench.timing import median_time
from metaeval.game import MetaGame
from metaeval.ratings import RATERS
from metaeval.ratings.bootstrap import Resampler, with_intervals
from metaeval.ratings.warm import warm_replicates

DEFAULT_RATERS = ("uniform", "payoff", "deviation", "nash", "alpharank")
STDERR = 0.05
#: Calls shorter than this many CPU seconds (uniform's, a few point ratings) are timed as a median.
SHORT = 0.05
REPEATS = 21


def goofspiel_game() -> MetaGame:
    """The sampled 8 x 8 x 8 meta-game of 3-player goofspiel (module docstring)."""
    from metaeval import spiel
    from metaeval.spiel.sampled import sampled_metagame

    game = "goofspiel(num_cards=5,players=3)"
    population = spiel.Population.random(game, size=8, seed=0, lazy=True)
    return sampled_metagame(game, population, episodes=50, seed=0)


def random_game(players: int, size: int) -> MetaGame:
    payoffs = np.random.default_rng(0).uniform(-1.0, 1.0, (players, *[size] * players))
    return MetaGame(payoffs, stderr=np.full(payoffs.shape, STDERR))


def cpu_seconds(function, *args, **kwargs):
    """``(function(*args, **kwargs), CPU seconds of this process)``: of one call, or the
    median of REPEATS calls where one takes less than SHORT seconds."""
    seconds, result = median_time(lambda: function(*args, **kwargs), clock=time.process_time)
    if seconds < SHORT:
        seconds, result = median_time(lambda: function(*args, **kwargs), REPEATS, clock=time.process_time)
    return result, seconds


def draw_seconds(game: MetaGame, replicates: int) -> float:
    """CPU seconds of drawing ``replicates`` payoff tensors as the bootstrap draws them (seed 0)."""
    resampler = Resampler(game)
    seeds = np.random.SeedSequence(0).spawn(replicates)

    def draw_each():  # one tensor at a time, as the bootstrap holds them
        for seed in seeds:
            resampler.draw(np.random.default_rng(seed))

    return cpu_seconds(draw_each)[1]


def measure(game: MetaGame, name: str, replicates: int) -> dict:
    rater = RATERS[name]
    rater(game)
    with_intervals(game, rater, {}, 3, level=0.5, progress=False)
    point, point_seconds = cpu_seconds(rater, game)
    runs = {}
    for warm in (True, False) if warm_replicates(rater, point, {}) is not None else (False,):
        # The point rating inside with_intervals is timed too; its own seconds are taken off.
        result, seconds = cpu_seconds(with_intervals, game, rater, {}, replicates, progress=False, warm_start=warm)
        runs[warm] = (result, max(seconds - point_seconds, 0.0))
    cold, cold_seconds = runs[False]
    figures = {"point": point_seconds, "cold": cold_seconds, "warm": None, "from_scratch": None, "difference": None,
               "draws": draw_seconds(game, replicates)}
    if True in runs:
        warm, warm_seconds = runs[True]
        figures.update(warm=warm_seconds, from_scratch=warm.diagnostics["bootstrap"]["cold_replicates"],
                       difference=max(float(np.abs(a - b).max()) for a, b in zip(warm.replicates, cold.replicates)))
        if warm.diagnostics["bootstrap"]["drawn"] != "payoff tensors":  # other draws of the same law
            figures.update(from_scratch="law", difference=None)
    return figures


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["goofspiel", "3x64"])
    parser.add_argument("--raters", nargs="+", default=list(DEFAULT_RATERS), choices=sorted(RATERS))
    parser.add_argument("--replicates", type=int, default=100)
    args = parser.parse_args(argv)
    print(f"{args.replicates} replicates, 95% intervals; CPU seconds; x: multiple of one point rating's CPU s")
    print(f"{'game':<10} {'rater':<10} {'point s':>9} {'warm s':>9} {'warm x':>8} {'cold s':>9} {'cold x':>8} "
          f"{'rated cold':>10} {'|warm - cold|':>13} {'draws x':>8}")
    for name in args.games:
        game = goofspiel_game() if name == "goofspiel" else random_game(*parse_shape(name))
        for rater in args.raters:
            f = measure(game, rater, args.replicates)
            warm = (f"{f['warm']:9.3f} {f['warm'] / f['point']:8.1f}" if f["warm"] is not None
                    else f"{'-':>9} {'-':>8}")
            if f["warm"] is None:
                extra = f"{'no warm start':>24}"
            elif f["difference"] is None:
                extra = f"{'drawn from their law':>24}"
            else:
                extra = f"{f['from_scratch']:>10} {f['difference']:13.2g}"
            print(f"{name:<10} {rater:<10} {f['point']:9.2g} {warm} {f['cold']:9.3f} {f['cold'] / f['point']:8.1f} "
                  f"{extra} {f['draws'] / f['point']:8.1f}", flush=True)


if __name__ == "__main__":
    main()
