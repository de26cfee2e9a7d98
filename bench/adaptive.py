"""Adaptive against uniform episode allocation, and OpenSpiel's ResponseGraphUCB.

    python -m bench.adaptive --setting leduc_cfr [--seeds 12] [--episodes-per-joint 300] [--out docs/adaptive]
    python -m bench.adaptive --setting kuhn_3p_random [--seeds 12] ...

Settings:

- ``leduc_cfr``: checkpoints of a training run, the CFR average policies of
  leduc_poker after 1, 2, 3, 4, 6, 8, 12 and 16 iterations, for both players (64
  joints); the seed varies the episodes only. Targets: Nash ratings (Nash averaging)
  and alpha-Rank at infinite alpha.
- ``kuhn_3p_random``: kuhn_3p, 4 random policies per player (64 joints; population
  seed = run seed). Targets: payoff ratings (the MECCE's deviation gains) and
  alpha-Rank at infinite alpha.

Every rule spends the same budget on the same per-joint episode streams; after each
round the estimate is rated and compared with the ratings of the exact meta-game
(RMSE over all strategies). For alpha-Rank the share of response-graph edges whose
sign differs from the exact one is reported too, and
``open_spiel.python.algorithms.response_graph_ucb`` runs on the same streams
(payoffs scaled to [0, 1] by the game's utility bounds; its estimate is read at the
same episode counts, and stays fixed once it has resolved every edge).

Prints the mean error per episode count and the episodes each rule needs to reach,
and stay at, the accuracy uniform allocation reaches with the whole budget (mean over
seeds, linear between checkpoints; standard error by resampling seeds), and writes a
figure and a CSV.
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd

import metaeval
from metaeval import games, spiel
from metaeval.spiel.adaptive import EpisodeStreams, adaptive_metagame

RULES = {"nash": ("uniform", "variance"), "payoff": ("uniform", "variance"),
         "alpharank": ("uniform", "variance", "response_graph")}
CFR_CHECKPOINTS = (1, 2, 3, 4, 6, 8, 12, 16)


def leduc_cfr():
    """The CFR average policies of leduc_poker at ``CFR_CHECKPOINTS``, for both players."""
    from open_spiel.python.algorithms.cfr import CFRSolver

    game = games.load("leduc_poker")
    solver, checkpoints = CFRSolver(game), []
    for iteration in range(1, max(CFR_CHECKPOINTS) + 1):
        solver.evaluate_and_update_policy()
        if iteration in CFR_CHECKPOINTS:
            checkpoints.append(copy.deepcopy(solver.average_policy()))
    return game, spiel.Population(game, [checkpoints, checkpoints])


ALPHARANK = ("alpharank", {"alpha": math.inf})
SETTINGS = {
    "leduc_cfr": dict(targets={"nash ratings": ("nash", {}), "alpha-Rank (alpha = inf)": ALPHARANK},
                      title="leduc_poker, 8 CFR checkpoints per player"),
    "kuhn_3p_random": dict(targets={"payoff ratings": ("payoff", {}), "alpha-Rank (alpha = inf)": ALPHARANK},
                           title="kuhn_3p, 4 random policies per player"),
}


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


def edge_errors(estimate: np.ndarray, exact: np.ndarray) -> float:
    """Share of the response graph's edges (exact ties left out) whose sign the estimate gets wrong."""
    wrong = total = 0
    for p in range(exact.shape[0]):
        true, guess = (np.moveaxis(x[p], p, -1) for x in (exact, estimate))
        d_true, d_guess = (x[..., None, :] - x[..., :, None] for x in (true, guess))
        edges = np.triu(np.ones(d_true.shape[-2:], dtype=bool), 1) & (np.abs(d_true) > 1e-12)
        wrong += int((edges & (np.sign(d_true) != np.sign(d_guess))).sum())
        total += int(edges.sum())
    return wrong / total


def run(setting: str, seeds: int, per_joint: int, rounds: int, initial: int) -> tuple[pd.DataFrame, dict]:
    rows, stops = [], {}
    if setting == "leduc_cfr":
        game, population = leduc_cfr()
    for seed in range(seeds):
        if setting == "kuhn_3p_random":
            game = games.load("kuhn_3p")
            population = spiel.Population.random(game, size=4, seed=seed)
        exact = spiel.exact_metagame(game, population)
        budget = per_joint * exact.num_joints
        for label, (name, options) in SETTINGS[setting]["targets"].items():
            rater = metaeval.RATERS[name]
            truth = np.concatenate(rater(exact, **options).ratings)

            def record(rule, episodes, estimate):
                row = dict(seed=seed, target=label, rule=rule, episodes=episodes,
                           rmse=rmse(rater, options, estimate, truth))
                if name == "alpharank":
                    row["edge_errors"] = edge_errors(estimate.payoffs, exact.payoffs)
                rows.append(row)

            for rule in RULES[name]:
                start, cpu = time.perf_counter(), time.process_time()
                history = adaptive_metagame(game, population, budget, rater, rule=rule, rounds=rounds,
                                            initial=initial, seed=seed, **options)
                for point in history:
                    record(rule, point.episodes, point.metagame)
                print(f"seed {seed} {label:<26} {rule:<16} {time.perf_counter() - start:6.1f} s wall "
                      f"{time.process_time() - cpu:6.1f} s CPU", flush=True)
            if name == "alpharank":
                start, cpu = time.perf_counter(), time.process_time()
                checkpoints = [point.episodes for point in history]
                estimates, used = response_graph_ucb(game, population, exact, budget, seed, checkpoints)
                stops[seed] = used
                for episodes, estimate in estimates.items():
                    record("ResponseGraphUCB (OpenSpiel)", episodes, estimate)
                print(f"seed {seed} {label:<26} {'ResponseGraphUCB':<16} {time.perf_counter() - start:6.1f} s wall "
                      f"{time.process_time() - cpu:6.1f} s CPU (stopped after {used} episodes)", flush=True)
    return pd.DataFrame(rows), stops


def episodes_to_reach(curve: pd.Series, goal: float) -> float:
    """First episode count from which ``curve`` stays at or below ``goal`` (linear between points)."""
    above = np.flatnonzero(curve.to_numpy() > goal + 1e-12)
    if len(above) == 0:
        return float(curve.index[0])
    last = above[-1]
    if last == len(curve) - 1:
        return math.nan
    (x0, x1), (y0, y1) = curve.index[last : last + 2], curve.iloc[last : last + 2]
    return float(x0 + (x1 - x0) * (y0 - goal) / (y0 - y1))


def savings(frame: pd.DataFrame, metric: str, resamples: int = 2000) -> pd.DataFrame:
    """Per rule, the episodes needed for uniform's final mean error, with a standard error
    from resampling the seeds (paired: the same seeds for every rule)."""
    curves = frame.pivot_table(index=["rule", "episodes"], columns="seed", values=metric)
    seeds = curves.columns.to_numpy()
    rng = np.random.default_rng(0)
    draws = [seeds] + [rng.choice(seeds, len(seeds)) for _ in range(resamples)]
    rows = []
    for rule in dict.fromkeys(frame.rule[frame.rule != "uniform"]):
        needed = []
        for draw in draws:
            goal = curves.loc["uniform"][draw].mean(axis=1).iloc[-1]
            needed.append(episodes_to_reach(curves.loc[rule][draw].mean(axis=1), goal))
        resampled = np.array(needed[1:])
        reached = resampled[~np.isnan(resampled)]
        rows.append(dict(rule=rule, goal=curves.loc["uniform"][seeds].mean(axis=1).iloc[-1], episodes=needed[0],
                         stderr=reached.std() if len(reached) else math.nan,
                         unreached=1 - len(reached) / len(resampled)))
    return pd.DataFrame(rows)


def summarise(frame: pd.DataFrame) -> str:
    lines = []
    budget = frame.episodes.max()
    for target, part in frame.groupby("target", sort=False):
        for metric in ("rmse", "edge_errors"):
            if metric not in part or part[metric].isna().all():
                continue
            stats = part.groupby(["episodes", "rule"], sort=False)[metric].agg(["mean", "sem"]).unstack("rule")
            table = stats["mean"].map("{:.4f}".format) + " ± " + stats["sem"].map("{:.4f}".format)
            lines.append(f"\n{target}: {metric}, mean ± standard error over seeds\n{table.to_string()}")
            for row in savings(part, metric).itertuples():
                needed = ("not reached" if math.isnan(row.episodes) else
                          f"{row.episodes:,.0f} ± {row.stderr:,.0f} episodes ({row.episodes / budget:.0%} ± "
                          f"{row.stderr / budget:.0%} of the budget; unreached in {row.unreached:.0%} of resamples)")
                lines.append(f"  {row.rule}: uniform's final {metric} {row.goal:.4f} reached after {needed}")
    return "\n".join(lines)


def plot(frame: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(target, metric) for target, part in frame.groupby("target", sort=False)
              for metric in ("rmse", "edge_errors") if metric in part and part[metric].notna().any()]
    labels = {"rmse": "RMSE of the ratings vs the exact meta-game",
              "edge_errors": "share of response-graph edges wrongly signed"}
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    for ax, (target, metric) in zip(axes[0], panels):
        part = frame[frame.target == target]
        for rule, lines in part.groupby("rule", sort=False):
            stats = lines.groupby("episodes")[metric].agg(["mean", "sem"])
            ax.plot(stats.index, stats["mean"], marker="o", ms=3, label=rule)
            ax.fill_between(stats.index, stats["mean"] - stats["sem"], stats["mean"] + stats["sem"], alpha=0.2, lw=0)
        goal = part[part.rule == "uniform"].groupby("episodes")[metric].mean().iloc[-1]
        ax.axhline(goal, color="grey", lw=0.8, ls=":")
        ax.set_title(target, fontsize=9)
        ax.set_xlabel("episodes")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}k")
        ax.set_ylabel(labels[metric], fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=SETTINGS, default="leduc_cfr")
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--episodes-per-joint", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--initial", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("docs/adaptive"))
    args = parser.parse_args(argv)
    start, cpu = time.perf_counter(), time.process_time()
    frame, stops = run(args.setting, args.seeds, args.episodes_per_joint, args.rounds, args.initial)
    print(summarise(frame))
    print(f"\nResponseGraphUCB episodes used per seed (budget {frame.episodes.max()}): {stops}")
    print(f"total {time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu:.0f} s CPU")
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / f"{args.setting}.csv", index=False)
    title = (f"{SETTINGS[args.setting]['title']}, {args.episodes_per_joint} episodes per joint on average; "
             f"mean over {args.seeds} seeds, band: one standard error, dotted: uniform's final error")
    plot(frame, args.out / f"{args.setting}.png", title)
    print(f"wrote {args.out / args.setting}.csv and .png")


if __name__ == "__main__":
    main()
