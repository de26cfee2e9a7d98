"""RLlib league self-play on an OpenSpiel game, rated and matched by metaeval.

RLlib's PPO (new API stack, torch) trains one module, ``main``, on 2-player leduc poker
through RLlib's own OpenSpiel wrapper, as in RLlib's league self-play example; instead of
freezing ``main`` when its win rate passes a threshold, metaeval's
[`LeagueCallback`][metaeval.integrations.rllib.LeagueCallback] snapshots it after every
iteration into a league of frozen modules, rates the league's exact meta-game (deviation
rating), keeps the best-rated members up to its capacity, and draws ``main``'s opponents by
prioritised fictitious self-play. Ray runs embedded, on the loopback address, with RLlib's
sampling and learning in this process. Each iteration prints the league's size, the newest
snapshot's rating, the exploitability of the league's meta-Nash mixture and this process's
memory; the last line, the memory added per snapshot once the league is full.

    python examples/rllib_league.py [--game leduc_poker] [--iterations 20] [--capacity 6] [--seed 0]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metaeval.integrations.rllib import League, LeagueCallback  # noqa: E402

def build(league: League, batch: int = 2000, hidden: int = 64):
    """A PPO algorithm training ``league.main`` on ``league.game`` with the league callback.

    Args:
        league: the league's settings.
        batch: environment steps per training iteration.
        hidden: units of each of the module's two hidden layers.

    Returns:
        The built RLlib algorithm.
    """
    import pyspiel
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.open_spiel import OpenSpielEnv
    from ray.tune.registry import register_env

    from metaeval import games

    game_string = str(games.load(league.game))
    register_env("metaeval_open_spiel", lambda _: OpenSpielEnv(pyspiel.load_game(game_string)))
    config = (
        PPOConfig()
        .environment("metaeval_open_spiel")
        .env_runners(num_env_runners=0)
        .callbacks(functools.partial(LeagueCallback, league))
        .multi_agent(policies={league.main}, policy_mapping_fn=lambda agent_id, episode, **kwargs: league.main,
                     policies_to_train=[league.main])
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
            league.main: RLModuleSpec(model_config=DefaultModelConfig(fcnet_hiddens=[hidden, hidden]))}))
        .training(train_batch_size_per_learner=batch, minibatch_size=batch // 4, num_epochs=4, lr=1e-3)
        .debugging(seed=league.seed)
    )
    return config.build_algo()


def run(game: str = "leduc_poker", iterations: int = 20, capacity: int = 6, seed: int = 0, batch: int = 2000,
        num_cpus: int = 2) -> list[dict]:
    """Train for ``iterations`` iterations; per iteration, what it printed.

    Args:
        game: a 2-player OpenSpiel game the game tree of which can be walked.
        iterations: training iterations (one snapshot after each).
        capacity: the most members the league keeps.
        seed: seeds RLlib and the league's draws.
        batch: environment steps per iteration.
        num_cpus: CPUs of the embedded Ray.

    Returns:
        Per iteration: ``iteration``, ``league_size``, ``rating``, ``exploitability``,
        ``snapshots`` (taken so far) and ``memory`` (this process's resident memory, MiB).
    """
    from metaeval.distributed.session import ensure_ray
    from metaeval.runs.memory import resident_memory

    ensure_ray(None, num_cpus=num_cpus)
    algorithm = build(League(game=game, capacity=capacity, exploitability=True, seed=seed), batch=batch)
    records = []
    try:
        for _ in range(iterations):
            result = algorithm.train()
            records.append({"iteration": result["training_iteration"], "league_size": result["metaeval_league_size"],
                            "rating": result["metaeval_rating"], "exploitability": result["exploitability"],
                            "snapshots": result["training_iteration"] + 1, "memory": resident_memory()["rss_mib"]})
            print(f"iteration {records[-1]['iteration']}: league {records[-1]['league_size']}, "
                  f"newest snapshot's rating {records[-1]['rating']:.3f}, exploitability of the meta-Nash "
                  f"{records[-1]['exploitability']:.3f}, memory {records[-1]['memory']:.0f} MiB", flush=True)
    finally:
        algorithm.stop()
    return records


def memory_per_snapshot(records: list[dict], capacity: int) -> float:
    """MiB added per snapshot once the league is full: the least-squares slope of memory
    against snapshots taken, over the iterations after the league first reached ``capacity``."""
    full = [r for r in records if r["league_size"] == capacity][1:]
    if len(full) < 2:
        raise ValueError("the league was full for fewer than 3 iterations: run more iterations")
    return float(np.polyfit([r["snapshots"] for r in full], [r["memory"] for r in full], 1)[0])


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description="RLlib league self-play on an OpenSpiel game, rated by metaeval.")
    parser.add_argument("--game", default="leduc_poker")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--capacity", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=2000, help="environment steps per iteration")
    args = parser.parse_args(argv)
    records = run(args.game, args.iterations, args.capacity, args.seed, args.batch)
    slope = memory_per_snapshot(records, args.capacity)
    print(f"memory added per snapshot with the league full: {slope * 1024:.0f} KiB")
    return records


if __name__ == "__main__":
    main()
