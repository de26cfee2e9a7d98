"""How the search responder's cost grows with population size, players and game length, and where it stops paying.

    python -m bench.search_cost [--episodes 300000] [--out runs/search_cost]

Each row: a game, a population of random policies per player (tabular where the tree can be
walked, MLP networks where it cannot), every joint profile
equally likely (so every opponent profile is in play: the beliefs are over all of them),
and for player 0 the sampling search's CPU seconds (``exhaustive=False``: where the budget
covers the walk, the search's default walks it) for ``--episodes`` simulated episodes, the
information states it stored, and, where the tree can be walked, the exact best
response's CPU seconds (:func:`metaeval.responses.search.exhaustive_statistics`) and the
share of the best response's gain the searched policy keeps (its exact value against the
same opponents; 1 is the best response). The search pays where the walk is slow or
impossible and the share stays near 1; it stops paying where the walk is cheaper (small
trees) and where the states it must store outgrow its budget (the share falls: too few
episodes per state).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval import games, spiel
from metaeval.responses import Opponents, Search
from metaeval.responses.search import ROOT, SearchStatistics, exhaustive_statistics

#: (row name, game, policies per player, whether the tree is walked for the exact best response)
SETTINGS = [
    ("leduc, 2 players, 3 policies", "leduc_poker", 3, True),
    ("leduc, 3 players, 2 policies", "leduc_poker(players=3)", 2, True),
    ("leduc, 3 players, 3 policies", "leduc_poker(players=3)", 3, True),
    ("leduc, 3 players, 5 policies", "leduc_poker(players=3)", 5, True),
    ("leduc, 4 players, 2 policies", "leduc_poker(players=4)", 2, False),
    ("goofspiel 4 cards, 2 players", "goofspiel(num_cards=4,imp_info=True)", 3, True),
    ("goofspiel 5 cards, 2 players", "goofspiel(num_cards=5,imp_info=True)", 3, True),
    ("goofspiel 6 cards, 2 players", "goofspiel(num_cards=6,imp_info=True)", 3, False),
    ("goofspiel 8 cards, 2 players", "goofspiel(num_cards=8,imp_info=True)", 3, False),
]


def opponents_of(game, size: int, seed: int, tabular: bool) -> Opponents:
    """Random tabular policies where the tree can be walked, else random MLP policies."""
    if tabular:
        policies = spiel.Population.random(game, size=size, seed=seed).policies
    else:
        from metaeval.spiel.mlp import MLPPolicy

        policies = [[MLPPolicy(game, p, seed=1_000 * seed + size * p + i) for i in range(size)]
                    for p in range(game.num_players())]
    count = size ** (game.num_players() - 1)
    distribution = np.full([size] * (game.num_players() - 1), 1.0 / count)
    return Opponents.from_distribution(policies, 0, distribution)


def value_of(statistics: SearchStatistics, choices: dict) -> float:
    """The exact value of the policy playing ``choices`` (uniform elsewhere), from the exact
    sequence weights of ``statistics`` (a forward pass over its states)."""
    width, count = statistics.num_actions, len(statistics.keys)
    legal = np.array(statistics.legal)
    play = legal / legal.sum(axis=1, keepdims=True)
    for s, key in enumerate(statistics.keys):
        if key in choices:
            play[s] = 0.0
            play[s, choices[key]] = 1.0
    reach = np.ones(count)
    for s in range(count):  # parents come before their children
        parent = statistics.parent[s]
        if parent != ROOT:
            reach[s] = reach[parent // width] * play[parent // width, parent % width]
    return float((reach[:, None] * play * statistics.sums[:count]).sum())


def row(name: str, spec: str, size: int, walk: bool, episodes: int, seed: int) -> dict:
    game = games.load(spec)
    opponents = opponents_of(game, size, seed, walk)
    start = time.process_time()
    searched = Search(exhaustive=False).train(game, 0, opponents, episodes, np.random.default_rng(seed))
    search_cpu = time.process_time() - start
    result = dict(setting=name, players=game.num_players(), policies=size, episodes=episodes,
                  search_cpu=search_cpu, states=len(searched.keys), walk_cpu=np.nan, kept=np.nan)
    if walk:
        start = time.process_time()
        exact = exhaustive_statistics(game, 0, opponents)
        result["walk_cpu"] = time.process_time() - start
        best = value_of(exact, exact.choices())
        uniform = value_of(exact, {})
        result["kept"] = (value_of(exact, searched.choices()) - uniform) / (best - uniform)
        result["all_states"] = len(exact.keys)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settings", default="", help="comma-separated row numbers (default: all)")
    parser.add_argument("--out", default="runs/search_cost")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chosen = [SETTINGS[int(i)] for i in args.settings.split(",")] if args.settings else SETTINGS
    rows = []
    for setting in chosen:
        rows.append(row(*setting, args.episodes, args.seed))
        print(rows[-1], flush=True)
        pd.DataFrame(rows).to_csv(out / "search_cost.csv", index=False)
    print(f"the search's cost for player 0 at {args.episodes} episodes; kept: the share of the best response's gain "
          "over uniform play that the searched policy keeps (exact values)")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    main()
