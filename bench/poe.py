"""Product of experts with greedy comparison selection on simulated Bradley-Terry data.

    python -m bench.poe [--items 40] [--repeats 10] [--noise 1.0] [--out docs/pairwise]

Items have qualities theta ~ N(0, 1); a judge asked about (i, j) answers the soft outcome
p = sigma(theta_i - theta_j + e), e ~ N(0, noise^2) drawn once per ordered pair (a noisy
judge).  Starting from a random chain through all items, comparisons are added at random
or by the greedy determinant rule (``ComparisonPlanner``); scores come from Gaussian
experts (closed form), soft Bradley-Terry experts, and the average probability baseline.
Reports the Spearman correlation with theta against the number of comparisons, up to the
full set of N(N-1)/2 unordered pairs, and draws ``poe_selection.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import spearmanr

from metaeval.pairwise.poe import ComparisonPlanner, gaussian_poe, soft_bradley_terry


def average_probability(n, pairs, p):
    total, seen = np.zeros(n), np.zeros(n)
    np.add.at(total, pairs[:, 0], p)
    np.add.at(total, pairs[:, 1], 1 - p)
    np.add.at(seen, pairs.ravel(), 1)
    return total / seen


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--noise", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/pairwise"))
    args = parser.parse_args(argv)
    n = args.items
    full = n * (n - 1) // 2
    budgets = sorted({n - 1, 2 * n, 3 * n, 5 * n, 10 * n, full // 2, full} & set(range(n - 1, full + 1)))
    rows = []
    for repeat in range(args.repeats):
        rng = np.random.default_rng(args.seed + repeat)
        theta = rng.normal(size=n)
        judge = expit(theta[:, None] - theta[None, :] + args.noise * rng.normal(size=(n, n)))
        order = rng.permutation(n)
        chain = [tuple(sorted((order[k], order[k + 1]))) for k in range(n - 1)]
        others = [p for p in ((i, j) for i in range(n) for j in range(i + 1, n)) if p not in set(chain)]
        random_pairs = chain + [others[k] for k in rng.permutation(len(others))]
        planner = ComparisonPlanner(n, chain)
        greedy_pairs = chain + planner.plan(full - (n - 1))
        for selection, pairs in (("random", random_pairs), ("greedy", greedy_pairs)):
            for budget in budgets:
                chosen = np.array(pairs[:budget])
                p = judge[chosen[:, 0], chosen[:, 1]]
                scores = {
                    "PoE-Gaussian": gaussian_poe(n, chosen, p)[0],
                    "PoE-BT": soft_bradley_terry(n, chosen, p),
                    "average probability": average_probability(n, chosen, p),
                }
                for method, s in scores.items():
                    rows.append({"selection": selection, "method": method, "comparisons": budget,
                                 "spearman": spearmanr(s, theta).statistic})
    table = (pd.DataFrame(rows).groupby(["method", "selection", "comparisons"])["spearman"]
             .mean().unstack("comparisons"))
    table.columns = [f"{c} ({100 * c / full:.0f}%)" for c in table.columns]
    print(f"{n} items, judge noise {args.noise}, mean Spearman over {args.repeats} draws; "
          f"{full} comparisons = every unordered pair once")
    print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    args.out.mkdir(parents=True, exist_ok=True)
    plot(pd.DataFrame(rows), args.out / "poe_selection.png", n, full)
    print(f"plot: {args.out / 'poe_selection.png'}")


def plot(rows, path, n, full):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = rows.groupby(["method", "selection", "comparisons"])["spearman"].mean().reset_index()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for (method, selection), group in means.groupby(["method", "selection"]):
        ax.plot(100 * group["comparisons"] / full, group["spearman"], marker="o",
                ls="-" if selection == "greedy" else "--", label=f"{method}, {selection}")
    ax.set_xscale("log")
    ax.set_xlabel("comparisons (% of all pairs)")
    ax.set_ylabel("Spearman with the truth")
    ax.set_title(f"{n} items, soft judge outcomes", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
