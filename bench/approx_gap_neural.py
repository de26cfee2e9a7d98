"""The approximate CCE gap of populations of neural policies on games too large to walk: search against PPO.

    python -m bench.approx_gap_neural [--seeds 10] [--games goofspiel8,liars_dice] [--responder rollout]
                                      [--out runs/approx_gap_neural]

Each seed draws a population of 8 randomly initialised MLP policies per player
(:class:`metaeval.spiel.mlp.MLPPolicy`), builds its sampled meta-game (``--entry-episodes``
per joint) and takes sigma = the MECCE of that meta-game. The search responder
(``--search-episodes`` simulated episodes per player)
and PPO given the same CPU time per player (PPO's episodes from its CPU seconds per
episode, measured on a seed that is not reported, ``--tune-seed``) each estimate a lower
bound on the gap from ``--evaluation`` fresh episodes per value. The search responder is
``--responder``: ``rollout`` (:class:`metaeval.responses.Rollout`, forked rollouts
generalised by a network) or ``search`` (the tabular :class:`metaeval.responses.Search`,
which walks the tree where its budget covers the walk). No exact gap exists on goofspiel:
the larger lower bound is the tighter one. Reported per game: both estimates per seed, CPU
seconds per player, and in how many seeds the search's estimate is above PPO's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from bench.approx_gap import ppo_cost, timed_gap
from metaeval import Evaluator, games
from metaeval.responses import PPO, RESPONDERS
from metaeval.spiel.mlp import MLPPolicy

GAMES = {"goofspiel8": "goofspiel(num_cards=8,imp_info=True)", "liars_dice": "liars_dice"}
POPULATION = 8
SEARCH_EPISODES = {"rollout": {"goofspiel8": 400_000, "liars_dice": 100_000},
                   "search": {"goofspiel8": 300_000, "liars_dice": 1_200_000}}
"""The responders' budgets per player (ended histories), set on the tuning seed. liars_dice's
tree has 147,420 terminal histories: 1,200,000 covers a walk per opponent profile (at most
8), so the search walks it (the exact best response) instead of sampling."""


def problem(name: str, seed: int, entry_episodes: int):
    game = games.load(GAMES.get(name, name))
    evaluator = Evaluator(game, mode="sampled", episodes=entry_episodes, seed=seed)
    policies = [[MLPPolicy(game, p, seed=1_000 * seed + POPULATION * p + i) for i in range(POPULATION)]
                for p in range(game.num_players())]
    for player, member in enumerate(policies):
        for policy in member:
            evaluator.add(player, policy)
    return game, policies, evaluator.meta_distribution("mecce")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--tune-seed", type=int, default=100)
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--responder", choices=("rollout", "search"), default="rollout")
    parser.add_argument("--search-episodes", type=int, help="default: per game, SEARCH_EPISODES")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--entry-episodes", type=int, default=200)
    parser.add_argument("--evaluation", type=int, default=4000)
    parser.add_argument("--out", default="runs/approx_gap_neural")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.games.split(","):
        per_episode, fixed = ppo_cost(*problem(name, args.tune_seed, args.entry_episodes), args.evaluation,
                                      args.tune_seed)
        budget = args.search_episodes or SEARCH_EPISODES[args.responder][name]
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            game, policies, sigma = problem(name, seed, args.entry_episodes)
            search, search_cpu = timed_gap(game, policies, sigma, RESPONDERS[args.responder](), budget,
                                           args.evaluation, seed)
            ppo_episodes = max(1_000, int((search_cpu - fixed) / per_episode))
            ppo, ppo_cpu = timed_gap(game, policies, sigma, PPO(), ppo_episodes, args.evaluation, seed)
            rows.append(dict(game=name, seed=seed, responder=args.responder, search_episodes=budget,
                             search=search.total, search_stderr=search.stderr,
                             search_cpu=search_cpu, ppo=ppo.total, ppo_stderr=ppo.stderr, ppo_cpu=ppo_cpu,
                             ppo_episodes=ppo_episodes, search_above=bool(search.total > ppo.total)))
            print(f"{name} seed {seed}: search {search.total:.4g} +- {search.stderr:.2g} ({search_cpu:.1f} CPU s/player), "
                  f"ppo {ppo.total:.4g} +- {ppo.stderr:.2g} ({ppo_cpu:.1f} CPU s/player, {ppo_episodes} episodes)",
                  flush=True)
            pd.DataFrame(rows).to_csv(out / f"approx_gap_neural_{args.responder}.csv", index=False)
    table = pd.DataFrame(rows).groupby("game", sort=False).agg(
        search=("search", "mean"), ppo=("ppo", "mean"), search_above=("search_above", "sum"),
        seeds=("seed", "count"), search_cpu=("search_cpu", "mean"), ppo_cpu=("ppo_cpu", "mean"))
    print(f"approximate CCE gap (a lower bound) of {POPULATION} MLP policies per player under the MECCE of their "
          f"sampled meta-game; PPO given the search's CPU time; {args.evaluation} evaluation episodes per value")
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
