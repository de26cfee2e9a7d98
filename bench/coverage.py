"""Coverage of bootstrap intervals for every rater, by simulation around known payoffs.

    python -m bench.coverage [--runs 50] [--replicates 100]

For each rater, a random game with known exact payoffs (3 players x 3 strategies;
2-player zero-sum 3 x 3 for nash, i.e. Nash averaging; a 4-agent win-probability
game for elo), ``runs`` sampled meta-games of 40 episodes per joint (two-point
noise ±0.4; Bernoulli games for elo), each rated with a bootstrap of ``replicates``.
Prints the share of (run, strategy) whose 95% interval covers the exact rating.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import metaeval
from metaeval.ratings.calibration import coverage

GAMES = {  # rater: (shape, options)
    "uniform": ((3, 3, 3, 3), {}),
    "nash": ((2, 3, 3), {}),
    "alpharank": ((3, 3, 3, 3), {"alpha": 2.0, "population_size": 10}),
    "deviation": ((3, 3, 3, 3), {}),
    "payoff": ((3, 3, 3, 3), {}),
}


def exact_game(rater: str, shape) -> metaeval.MetaGame:
    payoffs = np.random.default_rng(11).uniform(-1, 1, shape)
    if rater == "nash":
        payoffs[1] = -payoffs[0]
    return metaeval.MetaGame(payoffs)


def elo_coverage(runs: int, replicates: int, episodes: int = 60) -> float:
    """Win-probability games: ``episodes`` Bernoulli games per pair of 4 agents."""
    strength = np.array([0.0, 0.4, 0.8, 1.2])
    probability = 1 / (1 + np.exp(strength[None, :] - strength[:, None]))
    truth = metaeval.rate(metaeval.MetaGame(np.stack([probability, probability.T])), "elo").ratings[0]
    rng = np.random.default_rng(4)
    covered = []
    for run in range(runs):
        upper = np.triu(rng.binomial(episodes, probability) / episodes, 1)
        row = upper + np.tril(1 - upper.T, -1) + 0.5 * np.eye(4)
        stderr = np.sqrt(row * (1 - row) / episodes)
        game = metaeval.MetaGame(np.stack([row, row.T]), stderr=np.stack([stderr, stderr.T]))
        bounds = metaeval.rate(game, "elo", bootstrap=replicates, seed=run).intervals[0]
        covered.append((bounds[:, 0] <= truth) & (truth <= bounds[:, 1]))
    return float(np.mean(covered))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--raters", nargs="+", default=[*GAMES, "elo"])
    args = parser.parse_args(argv)
    print(f"{args.runs} sampled games per rater, {args.replicates} bootstrap replicates, nominal 0.95")
    print(f"{'rater':<10} {'game':<14} {'intervals':>9} {'coverage':>9} {'seconds':>8}")
    for rater in args.raters:
        start = time.perf_counter()
        if rater == "elo":
            shape, value, count = "2 x 4 x 4", elo_coverage(args.runs, args.replicates), 4 * args.runs
        else:
            dims, options = GAMES[rater]
            exact = exact_game(rater, dims)
            value = coverage(exact, rater, runs=args.runs, replicates=args.replicates, seed=1, **options)
            shape, count = " x ".join(map(str, dims)), sum(dims[1:]) * args.runs
        print(f"{rater:<10} {shape:<14} {count:>9} {value:>9.3f} {time.perf_counter() - start:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
