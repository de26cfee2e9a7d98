"""The clone lottery on an arena-like leaderboard: plain Bradley-Terry against YRWR.

    python -m bench.clones [--models 100] [--votes 20] [--runs 60] [--targets 10] [--out docs/pairwise]

Qualities: ``--models`` evenly spaced normal quantiles with a spread of 100 Elo (the top
model beats the 20th about 60% of the time, as in the arena); each model its own owner.
Each of ``--targets`` mid-table models in turn gets 1 to 5 copies; every pair of submitted
models gets ``--votes`` votes.  Prints the best-copy rank gain (mean and 5th/95th
percentile over targets and runs) and the Kendall distance to the truth, and draws
``clone_gain.png``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from metaeval.pairwise.clones import clone_lottery
from metaeval.ratings.elo import SCALE


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--votes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/pairwise"))
    args = parser.parse_args(argv)
    quantiles = norm.ppf((np.arange(args.models) + 0.5) / args.models)
    theta = pd.Series(100 / SCALE * quantiles[::-1], index=[f"m{i:03d}" for i in range(args.models)])
    middle = np.linspace(0.3 * args.models, 0.7 * args.models, args.targets).astype(int)
    rows = []
    start = time.perf_counter()
    for clones in range(0, 6):
        for correction in (None, "yrwr"):
            gains, kendall = [], []
            for t, target in enumerate(middle):
                result = clone_lottery(theta, theta.index[target], clones, args.votes, runs=args.runs,
                                       seed=args.seed + 1000 * t + clones, correction=correction)
                gains.append(result.gain)
                kendall.append(result.kendall)
            gains = np.concatenate(gains)
            rows.append({
                "clones": clones, "ranking": correction or "plain BT",
                "gain_mean": gains.mean(), "gain_p5": np.percentile(gains, 5), "gain_p95": np.percentile(gains, 95),
                "gain_stderr": gains.std() / np.sqrt(len(gains)), "kendall_mean": np.concatenate(kendall).mean(),
            })
    table = pd.DataFrame(rows)
    print(f"{args.models} models, {args.votes} votes per pair, {args.targets} targets x {args.runs} runs "
          f"({time.perf_counter() - start:.0f} s)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    args.out.mkdir(parents=True, exist_ok=True)
    plot(table, args.out / "clone_gain.png", args)
    print(f"plot: {args.out / 'clone_gain.png'}")


def plot(table, path, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, group in table.groupby("ranking", sort=False):
        ax.plot(group["clones"], group["gain_mean"], marker="o", label=name)
        ax.fill_between(group["clones"], group["gain_p5"], group["gain_p95"], alpha=0.15)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("copies added")
    ax.set_ylabel("rank positions gained by the best copy")
    ax.set_title(f"Clone lottery: {args.models} models, {args.votes} votes per pair", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
