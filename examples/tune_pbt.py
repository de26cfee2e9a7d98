"""Ray Tune's population-based training, exploiting on metaeval's rating.

Four Tune trials each train one metaeval PPO learner per player of 2-player leduc poker.
After every training iteration each trial reports its policies to the experiment's shared
Evaluator, which rates the population of all trials' current policies and gives each
trial its ``metaeval_rating``; Tune's own ``PopulationBasedTraining`` scheduler (synchronous,
perturbing every iteration) copies the checkpoint of the best-rated trial into the worst
one and perturbs its learning rate. ``--metric pool_win_rate`` exploits on the trials'
payoff against the other player's population instead. Ray runs embedded, on the loopback
address; the experiment, the shared Evaluator's state and the trials' checkpoints are in
``OUT``, and running the same command again after the driver was killed resumes it.

    python examples/tune_pbt.py --out runs/tune-pbt [--metric metaeval_rating] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metaeval.integrations import tune as metaeval_tune  # noqa: E402

TRIALS = 4
LEARNING_RATES = (1e-3, 2e-3, 4e-3, 8e-3)
"""Each trial's first learning rate; PBT's explore moves a copied trial's to a neighbour."""
MUTATED_RATES = [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]


def run_experiment(out, seed: int = 0, metric: str = metaeval_tune.METRIC, game: str = "leduc_poker",
                   iterations: int = 8, episodes: int = 250, num_cpus: int = 2, name: str = "tune-pbt",
                   exploitability: bool = True, mutated_rates=MUTATED_RATES,
                   stop_driver_at: int | None = None) -> dict:
    """Run (or resume, if ``out`` holds it) one PBT experiment; returns the shared Evaluator's
    state ([`SharedEvaluator.state`][metaeval.integrations.tune.SharedEvaluator.state]).

    Args:
        out: the experiment's storage directory.
        seed: seeds the trials' first weights, their training and PBT's draws.
        metric: what PBT exploits on: ``metaeval_rating`` or ``pool_win_rate``.
        game: a 2-player game.
        iterations: training iterations per trial (PBT perturbs after each).
        episodes: PPO episodes per player and iteration.
        num_cpus: CPUs of the embedded Ray (each trial asks for half of one).
        name: the experiment's name (its directory in ``out``).
        exploitability: report the meta-Nash mixture's exact exploitability every round.
        mutated_rates: the learning rates PBT's explore moves between.
        stop_driver_at: kill this process with SIGKILL once the shared Evaluator has
            completed this round (to show that a restored experiment resumes).

    Returns:
        The shared Evaluator's state.
    """
    import ray
    from ray import tune

    out = Path(out).resolve()
    random.seed(seed)  # PBT's explore draws from Python's generator
    actor_name = f"metaeval-{name}-{seed}-{metric}"
    fitness = metaeval_tune.Fitness(game=game, trials=TRIALS, seed=seed, rank=True, exploitability=exploitability)
    actor = metaeval_tune.shared_evaluator(fitness, out / name / "metaeval", name=actor_name, num_cpus=num_cpus)
    trainable = tune.with_resources(metaeval_tune.ppo_trainable, {"cpu": num_cpus / TRIALS})
    scheduler = metaeval_tune.synchronous_pbt(metric=metric, mode="max", perturbation_interval=1,
                                              hyperparam_mutations={"learning_rate": list(mutated_rates)})
    if stop_driver_at is not None:
        _stop_at(actor, stop_driver_at)
    if tune.Tuner.can_restore(out / name):
        tuner = tune.Tuner.restore(str(out / name), trainable=trainable, resume_unfinished=True, resume_errored=True)
    else:
        space = {"game": game, "episodes": episodes, "metaeval_evaluator": actor_name,
                 "seed": tune.grid_search([TRIALS * seed + i for i in range(TRIALS)]),
                 "learning_rate": tune.sample_from(lambda spec: LEARNING_RATES[spec.config.seed % TRIALS])}
        tuner = tune.Tuner(trainable, param_space=space,
                           tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=True),
                           run_config=tune.RunConfig(name=name, storage_path=str(out), verbose=0,
                                                     stop={metaeval_tune.ROUND: iterations},
                                                     checkpoint_config=tune.CheckpointConfig(num_to_keep=4)))
    tuner.fit()
    state = ray.get(actor.state.remote())
    ray.kill(actor)
    return state


def _stop_at(actor, r: int) -> None:
    """A thread that kills this process (SIGKILL, no clean-up) when round ``r`` is recorded."""
    import os
    import signal
    import threading
    import time

    import ray

    def watch():
        while r not in ray.get(actor.state.remote())["rounds"]:
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Ray Tune PBT on leduc poker, exploiting on metaeval's rating.")
    parser.add_argument("--out", type=Path, required=True, help="the experiment's storage directory")
    parser.add_argument("--metric", choices=[metaeval_tune.METRIC, metaeval_tune.POOL_METRIC],
                        default=metaeval_tune.METRIC, help="what PBT exploits on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=250, help="PPO episodes per player and iteration")
    args = parser.parse_args(argv)
    state = run_experiment(args.out, seed=args.seed, metric=args.metric, iterations=args.iterations,
                           episodes=args.episodes)
    for r, record in sorted(state["rounds"].items(), key=lambda item: int(item[0])):
        ratings = [round(m[metaeval_tune.METRIC], 3) for m in record["metrics"].values()]
        exploitability = next(iter(record["metrics"].values()))["exploitability"]
        print(f"round {r}: ratings {ratings}, exploitability of the meta-Nash {exploitability:.3f}")


if __name__ == "__main__":
    main()
