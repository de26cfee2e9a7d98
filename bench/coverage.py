"""Coverage of bootstrap intervals for every rater, by simulation around known payoffs.

    python -m bench.coverage [--runs 50] [--replicates 100] [--cold]

For each rater, a random game with known exact payoffs (3 players x 3 strategies; a
4-agent win-probability game for elo), ``runs`` sampled meta-games of 40 episodes per
joint (two-point noise ±0.4; Bernoulli games for elo), each rated with a bootstrap of
``replicates``. Prints the share of (run, strategy) whose 95% interval covers the
exact rating, with wall and CPU seconds.

``uniform-zero-sum`` rates a random 2-player zero-sum 4 x 4 game, whose replicates'
noise keeps the zero sum (their ratings' covariance is not diagonal). ``--cold`` rates
every replicate from scratch from a drawn payoff tensor, as ``warm_start=False`` does
(elo has no warm start).

Nash averaging (2-player zero-sum) is run on two games: ``nash``, the 4 x 4 game
``SMOOTH_ZERO_SUM`` whose rating is a smooth function of the payoffs, and
``nash-near-tie``, a random 3 x 3 game with a pure saddle point whose row best
response is 1.3 standard errors from a tie, so its support changes in about 9% of
the sampled games. For these the column ``off-eq.`` is the coverage of the strategies
outside the exact equilibrium's support; the others rate exactly 0 and are covered by
construction. ``nash-3p`` rates the general-sum 3-player game of the others by its
limiting logit equilibrium, whose warm replicates' branches are traced in lock-step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import metaeval
from metaeval.ratings.calibration import SMOOTH_ZERO_SUM, covered
from metaeval.ratings.base import marginals

GAMES = {  # case: (rater, shape, options)
    "uniform": ("uniform", (3, 3, 3, 3), {}),
    "uniform-zero-sum": ("uniform", (2, 4, 4), {}),
    "nash": ("nash", (2, 4, 4), {}),
    "nash-near-tie": ("nash", (2, 3, 3), {}),
    "nash-3p": ("nash", (3, 3, 3, 3), {}),
    "alpharank": ("alpharank", (3, 3, 3, 3), {"alpha": 2.0, "population_size": 10}),
    "deviation": ("deviation", (3, 3, 3, 3), {}),
    "payoff": ("payoff", (3, 3, 3, 3), {}),
}


def exact_game(case: str, shape) -> metaeval.MetaGame:
    if case == "nash":
        return metaeval.MetaGame(np.stack([SMOOTH_ZERO_SUM, -SMOOTH_ZERO_SUM]))
    payoffs = np.random.default_rng(11).uniform(-1, 1, shape)
    if case in ("nash-near-tie", "uniform-zero-sum"):
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
    parser.add_argument("--raters", nargs="+", default=[*GAMES, "elo"], choices=[*GAMES, "elo"])
    parser.add_argument("--cold", action="store_true",
                        help="rate every replicate from scratch from a drawn payoff tensor (no warm start)")
    args = parser.parse_args(argv)
    print(f"{args.runs} sampled games per rater, {args.replicates} bootstrap replicates, nominal 0.95")
    print(f"{'rater':<16} {'game':<13} {'intervals':>9} {'coverage':>9} {'off-eq.':>8} {'wall s':>7} {'cpu s':>7}")
    for case in args.raters:
        start, cpu = time.perf_counter(), time.process_time()
        off_equilibrium = ""
        if case == "elo":
            shape, value, count = "2 x 4 x 4", elo_coverage(args.runs, args.replicates), 4 * args.runs
        else:
            rater, dims, options = GAMES[case]
            exact = exact_game(case, dims)
            hits = covered(exact, rater, runs=args.runs, replicates=args.replicates, seed=1,
                           warm_start=not args.cold, **options)[0]
            shape, value, count = " x ".join(map(str, dims)), hits.mean(), hits.size
            if rater == "nash":
                outside = np.concatenate([x <= 1e-6 for x in marginals(metaeval.rate(exact, "nash").distribution)])
                off_equilibrium = f"{hits[:, outside].mean():.3f}"
        print(f"{case:<16} {shape:<13} {count:>9} {value:>9.3f} {off_equilibrium:>8} "
              f"{time.perf_counter() - start:>7.1f} {time.process_time() - cpu:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
