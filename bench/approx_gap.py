"""The approximate CCE gap against the exact one, where both can be computed: search against PPO.

    python -m bench.approx_gap [--seeds 10] [--first-seed 0] [--games leduc_3p,kuhn_4p,goofspiel4_3p] [--out runs/approx_gap]
    python -m bench.approx_gap --equilibrium      # at JPSRO's equilibrium of kuhn_3p

On populations of random tabular policies (3 per player) with sigma the MECCE of their exact
meta-game, the exact full-game CCE gap (a tree walk, :func:`metaeval.spiel.cce_gap`) is set
beside the approximate one (:func:`metaeval.responses.gap.approximate_cce_gap`) found by the
search responder (:class:`metaeval.responses.Search`, a budget of simulated episodes per
player; sampling only, ``exhaustive=False``: these games stand in for games too large to
walk, and at these budgets the search would walk kuhn_4p's tree) and by PPO given the same CPU time per player: PPO's episodes are the search's CPU
seconds divided by PPO's CPU seconds per episode, measured on a population of a seed that is
not reported (``--tune-seed``). Every value comes from ``--evaluation`` fresh episodes.
Reported per game and responder: the mean ratio estimate / exact, its spread, CPU seconds per
player (search or training plus evaluation, the gap's on-policy episodes shared out), and the
share of trials whose 95% interval's lower end lies at or below the exact gap (the estimate is
a lower bound). Rows are written to ``OUT/approx_gap.csv`` as they come.

``--equilibrium`` runs JPSRO (mgcce, exact best responses) on kuhn_3p until its CCE gap is
below 1e-9, as ``make demo`` does, and estimates the gap of its final meta-distribution with
the search responder: the bound reported should be 0 and the interval should cover 0.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval import Evaluator, games, spiel
from metaeval.responses import PPO, Search
from metaeval.responses.gap import approximate_cce_gap

GAMES = {
    "leduc_3p": "leduc_poker(players=3)",
    "kuhn_4p": "kuhn_poker(players=4)",
    "goofspiel4_3p": "goofspiel(num_cards=4,imp_info=True,players=3)",
}
SEARCH_EPISODES = {"leduc_3p": 1_200_000, "kuhn_4p": 150_000, "goofspiel4_3p": 300_000}
SAMPLED = Search(exhaustive=False)
"""The search as on a game too large to walk."""
POPULATION = 3


def problem(name: str, seed: int):
    game = games.load(GAMES.get(name, name))
    population = spiel.Population.random(game, size=POPULATION, seed=seed)
    evaluator = Evaluator(game)
    for player, member in enumerate(population.policies):
        for policy in member:
            evaluator.add(player, policy)
    sigma = evaluator.meta_distribution("mecce")
    return game, population, sigma, spiel.cce_gap(game, population, sigma).total


def timed_gap(game, policies, sigma, responder, episodes: int, evaluation: int, seed: int):
    """The approximate gap and its CPU seconds per player."""
    start = time.process_time()
    estimate = approximate_cce_gap(game, policies, sigma, responder, episodes, evaluation, np.random.default_rng(seed))
    return estimate, (time.process_time() - start) / game.num_players()


def ppo_cost(game, policies, sigma, evaluation: int, seed: int) -> tuple[float, float]:
    """PPO's CPU seconds per player per training episode and fixed CPU seconds per player (the
    evaluation), from two budgets after a warm-up (JAX compiles in the first call)."""
    timed_gap(game, policies, sigma, PPO(), 1_000, evaluation, seed)
    _, short = timed_gap(game, policies, sigma, PPO(), 2_000, evaluation, seed)
    _, long = timed_gap(game, policies, sigma, PPO(), 12_000, evaluation, seed)
    per_episode = (long - short) / 10_000
    return per_episode, short - 2_000 * per_episode


def compare(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.games.split(","):
        game, population, sigma, _ = problem(name, args.tune_seed)
        per_episode, fixed = ppo_cost(game, population.policies, sigma, args.evaluation, args.tune_seed)
        print(f"{name}: PPO {per_episode * 1e6:.0f} CPU us per training episode per player, "
              f"{fixed:.2f} s fixed (tuned on seed {args.tune_seed})", flush=True)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            game, population, sigma, exact = problem(name, seed)
            search, search_cpu = timed_gap(game, population.policies, sigma, SAMPLED, SEARCH_EPISODES[name],
                                           args.evaluation, seed)
            ppo_episodes = max(1_000, int((search_cpu - fixed) / per_episode))
            ppo, ppo_cpu = timed_gap(game, population.policies, sigma, PPO(), ppo_episodes, args.evaluation, seed)
            for responder, estimate, cpu, episodes in (("search", search, search_cpu, SEARCH_EPISODES[name]),
                                                       ("ppo", ppo, ppo_cpu, ppo_episodes)):
                low, _ = estimate.interval(0.95)
                rows.append(dict(game=name, responder=responder, seed=seed, episodes=episodes, exact=exact,
                                 estimate=estimate.total, bound=estimate.bound, stderr=estimate.stderr, low=low,
                                 ratio=estimate.total / exact, covered=bool(exact >= low),
                                 cpu_per_player=cpu))
            print(f"{name} seed {seed}: exact {exact:.4g}, search {search.total:.4g} ({search_cpu:.1f} CPU s/player), "
                  f"ppo {ppo.total:.4g} ({ppo_cpu:.1f} CPU s/player, {ppo_episodes} episodes)", flush=True)
            pd.DataFrame(rows).to_csv(out / "approx_gap.csv", index=False)
    table = pd.DataFrame(rows).groupby(["game", "responder"], sort=False).agg(
        exact=("exact", "mean"), ratio=("ratio", "mean"), ratio_min=("ratio", "min"), ratio_spread=("ratio", "std"),
        covered=("covered", "sum"), trials=("seed", "count"), episodes=("episodes", "median"),
        cpu_per_player=("cpu_per_player", "mean"))
    print(f"approximate CCE gap against the exact gap; sigma = MECCE of {POPULATION} random policies per player, "
          f"{args.evaluation} evaluation episodes per value; PPO given the search's CPU time")
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))


def equilibrium(args) -> None:
    from metaeval.loops import psro

    config = psro.PSROConfig(game="kuhn_3p", solver="mgcce", iterations=args.iterations, seed=0)
    loop = psro.PSRO(config)
    records = loop.run(progress=False)
    evaluator = Evaluator(loop.rated.game)
    for player, member in enumerate(loop.rated.policies):
        for policy in member:
            evaluator.add(player, policy)
    sigma = evaluator.meta_distribution("mgcce")
    print(f"JPSRO on kuhn_3p: CCE gap {records[0]['cce_gap']:.3g} -> {records[-1]['cce_gap']:.3g} after "
          f"{len(records)} iterations; the final population's exact gap {evaluator.gap(sigma).total:.3g}")
    for seed in range(args.seeds):
        estimate = evaluator.approximate_gap(sigma, SAMPLED, SEARCH_EPISODES["kuhn_4p"], args.evaluation,
                                             np.random.default_rng(seed))
        low, high = estimate.interval()
        print(f"seed {seed}: bound {estimate.bound:.3g}, estimate {estimate.total:.3g}, 95% interval "
              f"[{low:.3g}, {high:.3g}] covers 0: {low <= 0 <= high}; {estimate}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed, first-seed + 1, ...")
    parser.add_argument("--tune-seed", type=int, default=100)
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--evaluation", type=int, default=4000)
    parser.add_argument("--equilibrium", action="store_true")
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--out", default="runs/approx_gap")
    args = parser.parse_args()
    equilibrium(args) if args.equilibrium else compare(args)


if __name__ == "__main__":
    main()
