"""Ray actor pool vs in-process meta-game builds, measured in one run.

    python -m bench.distributed [--episodes 100] [--repeats 3]

1. Sampled throughput (episodes/s) on kuhn_3p with 8 policies per player (512
   joints): in-process, one actor, two actors; target: two actors >= 1.6x in-process.
2. Exact builds: the per-entry overhead of the actor path over the in-process
   path, for a full build and for the population loop's incremental call (2 new
   policies per player out of 8).

Each time is the median of ``--repeats`` runs on warm evaluators (actors started,
game loaded, policies cached), as in a loop's later iterations. Wall-clock
speed-up needs idle cores; the CPU seconds (driver plus actors, read from /proc;
the median of ``--repeats`` further runs) show how much work each path did,
whatever else runs on the machine.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import ray

from bench.timing import cpu_seconds, median_time
from metaeval import games, spiel
from metaeval.distributed import build_metagame, current_pool, last_build, shutdown
from metaeval.distributed.session import start_embedded, stop_embedded


def warm_seconds(build, repeats: int) -> float:
    """Median wall seconds of ``repeats`` builds after a warm-up build (actors started,
    game loaded, policies cached)."""
    build()
    return median_time(build, repeats)[0]


def cpu_seconds_clock():
    """A clock of the CPU seconds spent by this process and the current pool's actors."""
    actors = current_pool().pids() if last_build().workers else []
    return lambda: time.process_time() + sum(cpu_seconds(pid) for pid in actors)


def sampled_throughput(game, population, episodes: int, repeats: int, address: str):
    rows = []
    for label, options in (
        ("in-process", dict(workers=1)),
        ("1 actor", dict(workers=1, address=address)),
        ("2 actors", dict(workers=2)),
    ):
        def build():
            return build_metagame(game, population, mode="sampled", episodes=episodes, **options)

        seconds = warm_seconds(build, repeats)
        cpu, _ = median_time(build, repeats, clock=cpu_seconds_clock())
        rows.append((label, seconds, cpu, last_build().evaluated * episodes / seconds))
    base = rows[0][3]
    print(f"\nSampled meta-game, kuhn_3p, 8 policies per player, {episodes} episodes per joint")
    print(f"{'path':<12} {'seconds':>8} {'CPU s':>7} {'episodes/s':>11} {'vs in-process':>14}")
    for label, seconds, cpu, rate in rows:
        print(f"{label:<12} {seconds:8.3f} {cpu:7.3f} {rate:11.0f} {rate / base:13.2f}x")
    return rows[2][3] / base


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
        local = warm_seconds(lambda: build_metagame(game, population, previous=previous), repeats)
        entries = last_build().evaluated
        pooled = warm_seconds(lambda: build_metagame(game, population, previous=previous, workers=2), repeats)
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
    # Other processes on the machine take CPUs from the actors: say how busy it was.
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")
    start_embedded(num_cpus=2)
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
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutdown()
        stop_embedded()


if __name__ == "__main__":
    main()
