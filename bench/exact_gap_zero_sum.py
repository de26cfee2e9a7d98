"""The exact CCE gap of the MLP populations of `bench.approx_gap_neural` on a two-player zero-sum game
small enough to walk (liars_dice): the sum of the players' exact best-response values.

    python -m bench.exact_gap_zero_sum [--game liars_dice] [--seeds 10] [--out runs/approx_gap_neural]

In a two-player zero-sum game the players' values under sigma sum to 0, so the CCE gap is
the sum of the best responses' values against sigma's marginals, which
[`metaeval.responses.Exact`][metaeval.responses.exact.Exact] computes by walking the tree.
Written beside the approximate estimates, it says how much of the gap each responder found.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from bench.approx_gap_neural import problem
from metaeval.errors import MetaEvalError
from metaeval.responses import Exact, Opponents


def exact_gap(name: str, seed: int, entry_episodes: int) -> float:
    game, policies, sigma = problem(name, seed, entry_episodes)
    kind = game.get_type()
    if game.num_players() != 2 or kind.utility.name != "ZERO_SUM":
        raise MetaEvalError(f"{name} is not a two-player zero-sum game")
    return sum(Exact().train(game, p, Opponents.from_distribution(policies, p, sigma.sum(axis=p)), 0, None).value
               for p in range(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="liars_dice")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--entry-episodes", type=int, default=200)
    parser.add_argument("--out", default="runs/approx_gap_neural")
    args = parser.parse_args()
    rows = []
    for seed in range(args.seeds):
        start = time.process_time()
        gap = exact_gap(args.game, seed, args.entry_episodes)
        rows.append(dict(game=args.game, seed=seed, exact=gap, cpu_per_player=(time.process_time() - start) / 2))
        print(f"{args.game} seed {seed}: exact CCE gap {gap:.4f} ({rows[-1]['cpu_per_player']:.1f} CPU s/player)",
              flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(Path(args.out) / f"exact_{args.game}.csv", index=False)


if __name__ == "__main__":
    main()
