"""The approximate CCE gap against the exact one, where both can be computed.

    python -m bench.approx_gap [--trials 20] [--games kuhn_3p,leduc_2p] [--out runs/approx_gap]

On populations of random policies (4 per player) with sigma the MECCE of their exact
meta-game, the exact full-game CCE gap (a tree walk, :func:`metaeval.spiel.cce_gap`) is set
beside the approximate one (:func:`metaeval.responses.gap.approximate_cce_gap`: a
PPO deviation per player trained for a budget of episodes, values from 4,000 fresh episodes)
at three budgets, over ``--trials`` seeds each. Reported per game and budget: the mean
estimate and its spread, the mean ratio to the exact gap, and the share of trials whose
95% interval's lower end lies at or below the exact gap (the estimate is a lower bound, so
this share should be at least 95%). Rows are written to ``OUT/approx_gap.csv`` as they come.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval import Evaluator, games, spiel
from metaeval.responses.gap import approximate_cce_gap
from metaeval.responses import PPO

BUDGETS = {"kuhn_3p": (300, 1000, 3000), "leduc_2p": (1000, 3000, 10000)}
EVALUATION_EPISODES = 4000
POPULATION = 4


def problem(name: str, seed: int):
    game = games.load(name)
    population = spiel.Population.random(game, size=POPULATION, seed=seed)
    evaluator = Evaluator(game)
    for player, member in enumerate(population.policies):
        for policy in member:
            evaluator.add(player, policy)
    sigma = evaluator.meta_distribution("mecce")
    return game, population, sigma, spiel.cce_gap(game, population, sigma).total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--games", default="kuhn_3p,leduc_2p")
    parser.add_argument("--out", default="runs/approx_gap")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.games.split(","):
        game, population, sigma, exact = problem(name, seed=0)
        for budget in BUDGETS[name]:
            for trial in range(args.trials):
                start = time.perf_counter()
                estimate = approximate_cce_gap(game, population.policies, sigma, PPO(), budget,
                                               EVALUATION_EPISODES, np.random.default_rng(trial))
                low, high = estimate.interval(0.95)
                rows.append(dict(game=name, budget=budget, trial=trial, exact=exact, estimate=estimate.total,
                                 stderr=estimate.stderr, low=low, high=high, covered=bool(exact >= low),
                                 seconds=time.perf_counter() - start))
                pd.DataFrame(rows).to_csv(out / "approx_gap.csv", index=False)
    table = pd.DataFrame(rows).groupby(["game", "budget"]).agg(
        exact=("exact", "first"), estimate=("estimate", "mean"), spread=("estimate", "std"),
        stderr=("stderr", "mean"), covered=("covered", "mean"), trials=("trial", "count"),
        seconds=("seconds", "median"))
    table["ratio"] = table["estimate"] / table["exact"]
    print(f"approximate CCE gap (PPO deviations, {EVALUATION_EPISODES} evaluation episodes) against the exact "
          f"gap; sigma = MECCE of {POPULATION} random policies per player")
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
