"""Time and peak memory to the first sampled meta-game: policies as objects against the
tables-over-the-tree path sampled mode took before, measured in one run.

    python -m bench.sampled_start [--game "leduc_poker(players=3)"] [--episodes 100] [--workers 1]
    python -m bench.sampled_start --actor-memory [--game ...] [--episodes 20]

Both paths add the same policies (OpenSpiel's uniform random policy and a random policy drawn
state by state, per player) and build the same sampled meta-game:

- ``tables``: what sampled mode did before: the game tree is enumerated, every policy is
  tabulated over its player's information states, and the tables are simulated;
- ``objects``: ``Evaluator(game, mode="sampled")``: the objects themselves are simulated.

Each path runs in a fresh process, so that neither reuses the other's cached tree and the
peak resident memory (``VmHWM`` of that process; Ray actors not included) is its own.

``--actor-memory``: the peak resident memory of each of two Ray actors (``VmHWM``) after
sampled builds of a population growing from 2 to 32 random policies per player (drawn
state by state), each build adding to the last: each policy goes to the actors once, as
an object of a few hundred bytes, so an actor's memory should stay flat.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, sys, time
start = time.perf_counter()
from open_spiel.python import policy as policy_lib
import metaeval
from metaeval import games, spiel
from metaeval.distributed import build_metagame
from metaeval.runs.memory import resident_memory

path, game_string, episodes, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
game = games.load(game_string)
policies = [[policy_lib.UniformRandomPolicy(game), spiel.LazyRandomPolicy(game, p, seed=p)]
            for p in range(game.num_players())]
imported = time.perf_counter()
mode = "exact" if path == "tables" else "sampled"  # exact mode stores tables over the tree
evaluator = metaeval.Evaluator(game, mode=mode, episodes=episodes, workers=workers, seed=0)
for p, player in enumerate(policies):
    for policy in player:
        evaluator.add(p, policy)
entered = time.perf_counter()
if path == "tables":
    metagame = build_metagame(game, evaluator.population, mode="sampled", episodes=episodes, workers=workers, seed=0)
else:
    metagame = evaluator.metagame()
built = time.perf_counter()
print(json.dumps({"entry": entered - imported, "build": built - entered, "total": built - imported,
                  "peak_mib": resident_memory()["peak_mib"],
                  "entries": int(metagame.counts.size), "episodes": int(metagame.counts.sum())}))
"""


def measure(path: str, game: str, episodes: int, workers: int) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, path, game, str(episodes), str(workers)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def actor_memory(game_string: str, episodes: int) -> None:
    from metaeval import games, spiel
    from metaeval.distributed import build_metagame, current_pool, shutdown
    from metaeval.runs.memory import resident_memory

    game = games.load(game_string)
    print(f"{game_string}: peak resident memory of 2 Ray actors (MiB) as the population grows, "
          f"{episodes} episodes per entry")
    previous = None
    try:
        for size in (2, 4, 8, 16, 32):
            population = spiel.Population.random(game, (size, 2, 2), seed=0, lazy=True)
            previous = build_metagame(game, population, mode="sampled", episodes=episodes, workers=2,
                                      seed=0, previous=previous, progress=False)
            peaks = [resident_memory(pid)["peak_mib"] for pid in current_pool().pids()]
            print(f"{size:>3} policies for player 0: " + ", ".join(f"{peak:.0f}" for peak in peaks))
    finally:
        shutdown()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="leduc_poker(players=3)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--actor-memory", action="store_true", help="measure the actors' memory instead")
    args = parser.parse_args(argv)
    if args.actor_memory:
        return actor_memory(args.game, args.episodes)
    results = {path: measure(path, args.game, args.episodes, args.workers) for path in ("tables", "objects")}
    print(f"{args.game}: first sampled meta-game, 2 policies per player, {args.episodes} episodes per entry, "
          f"{args.workers} worker(s)")
    print(f"{'path':<8} {'entry s':>9} {'build s':>9} {'total s':>9} {'peak MiB':>9}")
    for path, r in results.items():
        print(f"{path:<8} {r['entry']:>9.2f} {r['build']:>9.2f} {r['total']:>9.2f} {r['peak_mib']:>9.0f}")
    tables, objects = results["tables"], results["objects"]
    print(f"objects/tables: time to the first meta-game {objects['total'] / tables['total']:.3f}x, "
          f"peak memory {objects['peak_mib'] / tables['peak_mib']:.2f}x")


if __name__ == "__main__":
    main()
