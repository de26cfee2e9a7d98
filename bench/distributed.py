"""Ray actor pool vs in-process meta-game builds, measured in one run.

    python -m bench.distributed [--episodes 100] [--repeats 3]

1. Sampled throughput (episodes/s) on kuhn_3p with 8 policies per player (512
   joints): in-process, one actor, two actors; target: two actors >= 1.6x in-process.
2. Exact builds: the per-entry overhead of the actor path over the in-process
   path, for a full build and for the population loop's incremental call (2 new
   policies per player out of 8).

Each time is the best of ``--repeats`` runs on warm evaluators (actors started,
game loaded, policies cached), as in a loop's later iterations.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import ray

from metaeval import games, spiel
from metaeval.distributed import build_metagame, last_build, shutdown


def best_time(build, repeats: int) -> float:
    build()  # warm up: actors, game, policy caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        build()
        times.append(time.perf_counter() - start)
    return min(times)


def sampled_throughput(game, population, episodes: int, repeats: int, address: str):
    rows = []
    for label, options in (
        ("in-process", dict(workers=1)),
        ("1 actor", dict(workers=1, address=address)),
        ("2 actors", dict(workers=2)),
    ):
        seconds = best_time(
            lambda: build_metagame(game, population, mode="sampled", episodes=episodes, **options), repeats
        )
        rows.append((label, seconds, last_build().evaluated * episodes / seconds))
    base = rows[0][2]
    print(f"\nSampled meta-game, kuhn_3p, 8 policies per player, {episodes} episodes per joint")
    print(f"{'path':<12} {'seconds':>8} {'episodes/s':>11} {'vs in-process':>14}")
    for label, seconds, rate in rows:
        print(f"{label:<12} {seconds:8.3f} {rate:11.0f} {rate / base:13.2f}x")
    return rows[2][2] / base


def exact_overhead(game, repeats: int):
    print("\nExact meta-game, kuhn_3p: actor path (2 actors) vs in-process")
    print(f"{'build':<36} {'entries':>7} {'in-process':>11} {'2 actors':>9} {'overhead/entry':>15} {'ratio':>6}")
    cases = []
    for size in (8, 32):
        population = spiel.Population.random(game, size, seed=0)
        cases.append((f"full, {size} per player", population, None))
    population = spiel.Population.random(game, 8, seed=0)
    previous = build_metagame(game, population)
    replaced = population
    for player in range(game.num_players()):
        replaced = replaced.replace_random(player, [0, 1], seed=1)
    cases.append(("incremental, 2 of 8 per player new", replaced, previous))
    for label, population, previous in cases:
        local = best_time(lambda: build_metagame(game, population, previous=previous), repeats)
        entries = last_build().evaluated
        pooled = best_time(lambda: build_metagame(game, population, previous=previous, workers=2), repeats)
        overhead = (pooled - local) / entries * 1e6
        print(
            f"{label:<36} {entries:7d} {local * 1e3:9.2f}ms {pooled * 1e3:7.2f}ms "
            f"{overhead:12.2f} us {pooled / local:5.1f}x"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        game = games.load("kuhn_3p")
        population = spiel.Population.random(game, 8, seed=0)
        check = build_metagame(game, population, mode="sampled", episodes=4)
        pooled = build_metagame(game, population, mode="sampled", episodes=4, workers=2)
        assert np.array_equal(check.payoffs, pooled.payoffs), "pool and in-process builds differ"
        speedup = sampled_throughput(
            game, population, args.episodes, args.repeats, ray.get_runtime_context().gcs_address
        )
        print(f"speed-up of 2 actors over in-process: {speedup:.2f}x (target >= 1.6x)")
        exact_overhead(game, args.repeats)
    finally:
        shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
