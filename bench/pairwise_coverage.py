"""Coverage of Bradley-Terry's sandwich and bootstrap intervals, per model, by simulation.

    python -m bench.pairwise_coverage [--replicates 500] [--models 20] [--battles 20000]
                                      [--rounds 200] [--contextual-bootstrap 500]
                                      [--contextual-rounds 100]

Fixed models (``simulated_arena`` with a fixed ``models_seed``: known qualities, uneven
sampling, style correlated with quality) and ``--replicates`` replicate arenas, each with
its own battles.  Per replicate and model: does the 95% interval contain the true score
(in the fit's mean-0 gauge)?

- plain Bradley-Terry on arenas without style effects: sandwich and bootstrap
  (``--rounds`` rounds) intervals;
- contextual Bradley-Terry on arenas with style effects (0.6, 0.1, 0.1, 0.05 on the raw
  normalised differences; fitted without standardising, so the coefficients are the
  simulated ones): sandwich intervals on every replicate, bootstrap intervals
  (``--contextual-rounds`` rounds) on the first ``--contextual-bootstrap`` replicates
  (each round is a Newton fit over every distinct battle, where plain rounds are batched).

Writes ``docs/pairwise/coverage.csv`` and ``coverage.png`` and prints the summary.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval import pairwise
from metaeval.data.simulated import STYLE, simulated_arena
from metaeval.ratings.elo import SCALE

OUT = Path(__file__).resolve().parents[1] / "docs" / "pairwise"
EFFECTS = (0.6, 0.1, 0.1, 0.05)


def covered(board, truth):
    """Per model: does [lower, upper] (and, if present, the sandwich interval) hold the truth?"""
    true = SCALE * truth.loc[board.index, "theta"]
    inside = lambda lo, hi: ((board[lo] <= true) & (true <= board[hi])).astype(float)
    if "sandwich_lower" in board:
        return inside("lower", "upper"), inside("sandwich_lower", "sandwich_upper")
    return inside("lower", "upper")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=500)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--battles", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--contextual-bootstrap", type=int, default=500)
    parser.add_argument("--contextual-rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="models' seed; replicate r draws battles with seed 1000 + r")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")
    start = time.perf_counter()
    columns = {}
    coefficient_hits = {"sandwich": [], "bootstrap": []}
    for r in range(args.replicates):
        options = dict(models=args.models, battles=args.battles, owners=4, seed=1000 + r, models_seed=args.seed)
        table, truth = simulated_arena(effects=(0, 0, 0, 0), **options)
        boot, sand = covered(pairwise.bradley_terry(table, bootstrap=args.rounds, seed=r, sandwich=True), truth)
        columns.setdefault("plain, sandwich", []).append(sand)
        columns.setdefault("plain, bootstrap", []).append(boot)
        table, truth = simulated_arena(effects=EFFECTS, **options)
        rounds = args.contextual_rounds if r < args.contextual_bootstrap else 0
        board = pairwise.bradley_terry(table, control=list(STYLE), normalise=False, sandwich=True,
                                       bootstrap=rounds, seed=r)
        if rounds:
            boot, sand = covered(board, truth)
            columns.setdefault("contextual, bootstrap", []).append(boot)
            coefficient_hits["bootstrap"].append([c["lower"] <= e <= c["upper"] for c, e in
                                                  zip(board.attrs["coefficients"].values(), EFFECTS)])
            refit = pairwise.bradley_terry(table, control=list(STYLE), normalise=False, sandwich=True)
        else:
            sand, refit = covered(board, truth), board
        columns.setdefault("contextual, sandwich", []).append(sand)
        coefficient_hits["sandwich"].append([c["lower"] <= e <= c["upper"] for c, e in
                                             zip(refit.attrs["coefficients"].values(), EFFECTS)])
        if (r + 1) % 25 == 0:
            print(f"  {r + 1} replicates, {time.perf_counter() - start:.0f} s", flush=True)
    _, truth = simulated_arena(effects=EFFECTS, **options)
    per_model = pd.DataFrame({name: pd.concat(hits, axis=1).mean(axis=1) for name, hits in columns.items()})
    per_model.insert(0, "true score", SCALE * truth.loc[per_model.index, "theta"])
    per_model.insert(1, "share", truth.loc[per_model.index, "rate"] / truth["rate"].sum())
    per_model = per_model.sort_values("true score", ascending=False)
    args.out.mkdir(parents=True, exist_ok=True)
    per_model.to_csv(args.out / "coverage.csv", float_format="%.4f")
    counts = {name: len(hits) for name, hits in columns.items()}
    print(f"\n{args.replicates} replicates, {args.models} models, {args.battles:,} battles each, "
          f"{args.rounds} bootstrap rounds ({args.contextual_rounds} contextual; "
          f"{time.perf_counter() - start:.0f} s)")
    print("\ncoverage of the 95% intervals (mean over models, lowest model, highest model; replicates):")
    for name in columns:
        print(f"  {name:24s} {per_model[name].mean():.3f}  {per_model[name].min():.3f}  "
              f"{per_model[name].max():.3f}  ({counts[name]})")
    for name, hits in coefficient_hits.items():
        print(f"  coefficients, {name:11s} " + ", ".join(f"{f} {v:.3f}" for f, v in zip(STYLE, np.mean(hits, axis=0)))
              + f"  ({len(hits)})")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    plot(per_model, counts, args.out / "coverage.png")


def plot(per_model, counts, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(per_model))
    markers = {"plain, sandwich": "o", "plain, bootstrap": "s", "contextual, sandwich": "^",
               "contextual, bootstrap": "v"}
    for name, marker in markers.items():
        ax.plot(x, per_model[name], marker, label=f"{name} ({counts[name]} arenas)", alpha=0.8)
    band = 1.96 * np.sqrt(0.95 * 0.05 / counts["plain, sandwich"])
    ax.axhspan(0.95 - band, 0.95 + band, color="grey", alpha=0.2, label="95% ± binomial noise (500 arenas)")
    ax.axhline(0.95, color="black", lw=0.8)
    ax.set_xticks(x, per_model.index, rotation=90, fontsize=7)
    ax.set_xlabel("model, best first (true score)")
    ax.set_ylabel("coverage of the true score")
    ax.set_ylim(0.8, 1.0)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("95% intervals of Bradley-Terry scores: how often they hold the truth")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
