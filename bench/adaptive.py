"""Adaptive against uniform episode allocation, and OpenSpiel's ResponseGraphUCB.

    python -m bench.adaptive [--seeds 6] [--size 4] [--episodes-per-joint 300] [--out docs/adaptive]

kuhn_3p, ``size`` random policies per player (population seed = run seed). Every
rule spends the same budget on the same per-joint episode streams; after each
round the estimate is rated and compared with the ratings of the exact meta-game
(RMSE over all strategies). Two targets:

- payoff ratings (the MECCE's deviation gains): uniform vs the variance rule;
- alpha-Rank at infinite alpha, which the response graph decides: uniform, the
  variance rule, and ``open_spiel.python.algorithms.response_graph_ucb`` (payoffs
  scaled to [0, 1] by the game's utility bounds; its estimate is read at the same
  episode counts, and stays fixed once it has resolved every edge).

Prints the mean RMSE per episode count, the episodes each rule needs to reach the
accuracy uniform allocation reaches with the whole budget, and writes a figure
and a CSV.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd

import metaeval
from metaeval import games, spiel
from metaeval.spiel.adaptive import EpisodeStreams, adaptive_metagame

TARGETS = {"payoff": ("payoff", {}), "alpharank (alpha = inf)": ("alpharank", {"alpha": math.inf})}


class ResponseGraphSampler:
    """OpenSpiel's ResponseGraphUCB game interface over metaeval's episode streams."""

    def __init__(self, game, population, exact, seed: int, checkpoints):
        self.streams = EpisodeStreams(game, population, seed)
        self.low, self.high = game.min_utility(), game.max_utility()
        self.n_players = game.num_players()
        self.strategy_spaces = list(population.sizes)
        self.means = (exact.payoffs - self.low) / (self.high - self.low)
        self.checkpoints = set(checkpoints)
        self.snapshots = {}

    def observe_result(self, joint):
        returns = self.streams.play(joint, 1)[0]
        if self.streams.episodes in self.checkpoints:
            self.snapshots[self.streams.episodes] = self.estimate()
        return (returns - self.low) / (self.high - self.low)

    def estimate(self) -> metaeval.MetaGame:
        return metaeval.MetaGame(self.streams.sums / np.maximum(self.streams.counts, 1))


def response_graph_ucb(game, population, exact, budget: int, seed: int, checkpoints) -> dict:
    from open_spiel.python.algorithms.response_graph_ucb import ResponseGraphUCB

    sampler = ResponseGraphSampler(game, population, exact, seed, checkpoints)
    random.seed(seed)
    np.random.seed(seed)
    ResponseGraphUCB(sampler).run(verbose=False, max_total_iterations=budget)
    final = sampler.estimate()
    return {e: sampler.snapshots.get(e, final) for e in checkpoints}, sampler.streams.episodes


def rmse(rater, options, estimate, truth) -> float:
    return float(np.sqrt(np.mean((np.concatenate(rater(estimate, **options).ratings) - truth) ** 2)))


def run(seeds: int, size: int, per_joint: int, rounds: int) -> tuple[pd.DataFrame, dict]:
    game = games.load("kuhn_3p")
    rows, stops = [], {}
    for seed in range(seeds):
        population = spiel.Population.random(game, size=size, seed=seed)
        exact = spiel.exact_metagame(game, population)
        budget = per_joint * exact.num_joints
        for label, (name, options) in TARGETS.items():
            rater = metaeval.RATERS[name]
            truth = np.concatenate(rater(exact, **options).ratings)
            for rule in ("uniform", "variance"):
                start = time.perf_counter()
                history = adaptive_metagame(game, population, budget, rater, rule=rule, rounds=rounds,
                                            seed=seed, **options)
                for point in history:
                    rows.append(dict(seed=seed, target=label, rule=rule, episodes=point.episodes,
                                     rmse=rmse(rater, options, point.metagame, truth)))
                print(f"seed {seed} {label:<24} {rule:<20} {time.perf_counter() - start:6.1f} s", flush=True)
            if name == "alpharank":
                start = time.perf_counter()
                checkpoints = [point.episodes for point in history]
                estimates, used = response_graph_ucb(game, population, exact, budget, seed, checkpoints)
                stops[seed] = used
                for episodes, estimate in estimates.items():
                    rows.append(dict(seed=seed, target=label, rule="ResponseGraphUCB (OpenSpiel)",
                                     episodes=episodes, rmse=rmse(rater, options, estimate, truth)))
                print(f"seed {seed} {label:<24} {'ResponseGraphUCB':<20} {time.perf_counter() - start:6.1f} s"
                      f" (stopped after {used} episodes)", flush=True)
    return pd.DataFrame(rows), stops


def summarise(frame: pd.DataFrame) -> str:
    lines = []
    mean = frame.groupby(["target", "rule", "episodes"]).rmse.mean().reset_index()
    for target, part in mean.groupby("target", sort=False):
        table = part.pivot(index="episodes", columns="rule", values="rmse")
        lines.append(f"\n{target}: mean RMSE of the ratings over seeds\n{table.to_string(float_format='%.4f')}")
        goal = table["uniform"].iloc[-1]
        for rule in table.columns:
            reached = table.index[table[rule] <= goal + 1e-12]
            needed = f"{reached[0]} episodes ({reached[0] / table.index[-1]:.0%} of the budget)" if len(reached) else "not reached"
            lines.append(f"  {rule}: uniform's final accuracy {goal:.4f} reached after {needed}")
    return "\n".join(lines)


def plot(frame: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = list(dict.fromkeys(frame.target))
    fig, axes = plt.subplots(1, len(targets), figsize=(5.2 * len(targets), 3.8), squeeze=False)
    for ax, target in zip(axes[0], targets):
        part = frame[frame.target == target]
        for rule, lines in part.groupby("rule", sort=False):
            stats = lines.groupby("episodes").rmse.agg(["mean", "sem"])
            ax.plot(stats.index, stats["mean"], marker="o", ms=3, label=rule)
            ax.fill_between(stats.index, stats["mean"] - stats["sem"], stats["mean"] + stats["sem"], alpha=0.2, lw=0)
        ax.set_title(target, fontsize=9)
        ax.set_xlabel("episodes")
        ax.set_ylabel("RMSE of the ratings vs the exact meta-game")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--episodes-per-joint", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("docs/adaptive"))
    args = parser.parse_args(argv)
    frame, stops = run(args.seeds, args.size, args.episodes_per_joint, args.rounds)
    print(summarise(frame))
    print(f"\nResponseGraphUCB episodes used per seed (budget {args.episodes_per_joint * args.size ** 3}): {stops}")
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "adaptive.csv", index=False)
    title = (f"kuhn_3p, {args.size} random policies per player, {args.episodes_per_joint} episodes per joint "
             f"on average; mean over {args.seeds} seeds, band: one standard error")
    plot(frame, args.out / "adaptive.png", title)
    print(f"wrote {args.out / 'adaptive.csv'} and {args.out / 'adaptive.png'}")


if __name__ == "__main__":
    main()
