"""Sampled meta-game throughput of neural policies: lock-step batches against one state at a time.

    python -m bench.sampled [--episodes 500] [--slow-episodes 100] [--repeats 3]

On the same MLP policies (metaeval.spiel.mlp; leduc_poker, 2 players, 8 per player,
64 joints), episodes per second of

(a) OpenSpiel psro_v2's ``sample_episodes`` (``AbstractMetaTrainer.sample_episodes``:
    one episode and one state at a time, each policy asked per state),
(b) the per-episode builder (``sampled_metagame(..., batch_size=None)``),
(c) the batched builder (episodes of a joint in lock-step): in-process, and on 1 and
    2 Ray actors (``build_metagame(mode="sampled", workers=...)``),
(d) uniform-random rollouts through pyspiel in one process: the stepping cost every
    builder pays, so the ceiling,
(e) the batched builder in-process with uniform batched policies and no network: the
    builder's own cost, so (c) minus (e) is what the MLP calls cost,
(f) the batched builder in-process with a user's plain NumPy MLP (:class:`NumpyMLP`,
    hidden layers 128 x 128), against the same build in a subprocess started with
    ``OPENBLAS_NUM_THREADS=1``: small matrix products cost more on several BLAS threads
    than on one, and metaeval limits BLAS to one thread around the policies' calls.

Targets: (c) on one actor at least 20x (a) and within 3x of (d) per core; 2 actors at
least 1.8x one; (f) in-process within 1.3x of (f) with one BLAS thread set outside, per
episode in wall-clock and in CPU seconds. Slow paths (a, b) play ``--slow-episodes`` per
joint, the others ``--episodes``; a rate per episode does not depend on it for them. Each
time is the median of ``--repeats`` warm runs (actors started, shapes compiled).
Wall-clock rates need idle cores, so the CPU seconds (driver plus actors, from /proc)
are shown too: episodes per CPU second is the per-core rate whatever else runs on the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import ray
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms.psro_v2.abstract_meta_trainer import AbstractMetaTrainer

from bench.distributed import cpu_seconds_clock
from bench.timing import median_time
from metaeval import games, spiel
from metaeval.distributed import build_metagame, shutdown
from metaeval.distributed.session import start_embedded, stop_embedded
from metaeval.spiel.lockstep import chance_step
from metaeval.spiel.mlp import MLPPolicy

PER_PLAYER = 8


def psro_sample_episodes(game, population, episodes: int) -> np.ndarray:
    """Every joint's mean returns by psro_v2's ``sample_episodes``, ``[M, N]``."""
    trainer = SimpleNamespace(_game=game, _num_players=game.num_players())
    return np.array([
        AbstractMetaTrainer.sample_episodes(trainer, [population.policies[p][i] for p, i in enumerate(joint)], episodes)
        for joint in np.ndindex(*population.sizes)
    ])


def random_rollouts(game, episodes: int, rng: np.random.Generator) -> float:
    """Mean return of player 0 over ``episodes`` uniform-random episodes."""
    total = 0.0
    for _ in range(episodes):
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.is_chance_node():
                chance_step(state, rng.random())
            else:
                actions = state.legal_actions()
                state.apply_action(actions[int(rng.random() * len(actions))])
        total += state.returns()[0]
    return total / episodes


def measure(label, run, episodes: int, repeats: int, actors: bool = False):
    """``(label, wall seconds, CPU seconds, episodes/s, episodes per CPU second)`` of warm runs."""
    run()
    seconds, _ = median_time(run, repeats)
    clock = cpu_seconds_clock() if actors else time.process_time
    cpu, _ = median_time(run, repeats, clock=clock)
    return label, seconds, cpu, episodes / seconds, episodes / cpu


class UniformBatched(policy_lib.Policy):
    """Uniform over the legal actions, answering batches natively without a network: the
    batched builder with it costs what the builder itself costs (stepping, tensors, draws)."""

    def batch_probabilities(self, observations, legal):
        return legal / legal.sum(axis=1, keepdims=True)

    def action_probabilities(self, state, player_id=None):
        actions = state.legal_actions(player_id)
        return {action: 1 / len(actions) for action in actions}


class NumpyMLP(policy_lib.Policy):
    """A user's policy as plain NumPy: an MLP (ReLU hidden layers) from the information-state
    tensor to a softmax over the legal actions, answering batches with NumPy matrix products."""

    def __init__(self, game, player: int, seed: int, hidden=(128, 128)):
        super().__init__(game, [player])
        rng = np.random.default_rng(seed)
        sizes = [game.information_state_tensor_size(), *hidden, game.num_distinct_actions()]
        self.layers = [(rng.normal(0, 1 / np.sqrt(n), (n, m)).astype(np.float32), np.zeros(m, np.float32))
                       for n, m in zip(sizes, sizes[1:])]

    def batch_probabilities(self, observations, legal):
        x = np.asarray(observations, dtype=np.float32)
        for weights, bias in self.layers[:-1]:
            x = np.maximum(x @ weights + bias, 0)
        weights, bias = self.layers[-1]
        logits = np.where(legal, x @ weights + bias, -np.inf)
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        return exp / exp.sum(axis=1, keepdims=True)


def numpy_mlp_row(label: str, episodes: int, repeats: int):
    """Row (f): the in-process batched build of :class:`NumpyMLP` policies."""
    game = games.load("leduc_poker")
    population = spiel.Population(game, [[NumpyMLP(game, p, seed=100 * p + i) for i in range(PER_PLAYER)]
                                         for p in range(2)])
    return measure(label, lambda: build_metagame(game, population, mode="sampled", episodes=episodes),
                   PER_PLAYER**2 * episodes, repeats)


def one_blas_thread_reference(episodes: int, repeats: int):
    """Row (f) measured in a subprocess started with ``OPENBLAS_NUM_THREADS=1``."""
    command = [sys.executable, "-m", "bench.sampled", "--numpy-reference", "--episodes", str(episodes),
               "--repeats", str(repeats)]
    done = subprocess.run(command, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, cwd=Path(__file__).parents[1],
                          capture_output=True, text=True, check=True)
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def report(label: str, value: float, target: float, unit: str, at_most: bool = False, note: str = "") -> None:
    """Print a measured ratio beside its target and whether it is met."""
    met = value <= target if at_most else value >= target
    bound = "<=" if at_most else ">="
    extra = f" ({note})" if note else ""
    print(f"{label}: {value:.2f}{unit} (target {bound} {target}{unit}: {'met' if met else 'not met'}){extra}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--slow-episodes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--numpy-reference", action="store_true", help=argparse.SUPPRESS)  # row (f)'s reference
    args = parser.parse_args()
    if args.numpy_reference:
        print(json.dumps(numpy_mlp_row("(f) NumPy MLP, OPENBLAS_NUM_THREADS=1", args.episodes, args.repeats)))
        return
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")
    np.random.seed(0)  # psro_v2 draws from NumPy's global generator
    # Ray first: its processes are forked before JAX starts threads in this one.
    address = start_ray()
    try:
        game = games.load("leduc_poker")
        policies = [[MLPPolicy(game, p, seed=100 * p + i) for i in range(PER_PLAYER)] for p in range(2)]
        population = spiel.Population(game, policies)
        uniform = spiel.Population(game, [[UniformBatched(game, [p])] * PER_PLAYER for p in range(2)])
        joints = PER_PLAYER**2
        fast, slow = joints * args.episodes, joints * args.slow_episodes
        batched = [
            spiel.sampled_metagame(game, population, args.slow_episodes, 0, batch_size=size) for size in (None, 1024)
        ]
        assert np.array_equal(batched[0].payoffs, batched[1].payoffs), "batched and per-episode builds differ"

        def build(**options):
            return lambda: build_metagame(game, population, mode="sampled", episodes=args.episodes, **options)

        rows = [
            measure("(a) psro_v2 sample_episodes", lambda: psro_sample_episodes(game, population, args.slow_episodes),
                    slow, args.repeats),
            measure("(b) per-episode builder", lambda: spiel.sampled_metagame(
                game, population, args.slow_episodes, 0, batch_size=None), slow, args.repeats),
            measure("(c) batched, in-process", build(), fast, args.repeats),
            *[measure(f"(c) batched, {workers} actor{'s' * (workers > 1)}", build(workers=workers, address=address),
                      fast, args.repeats, actors=True) for workers in ((1, 2) if address else ())],
            measure("(e) batched, no network", lambda: spiel.sampled_metagame(game, uniform, args.episodes, 0),
                    fast, args.repeats),
            measure("(d) uniform random rollouts", lambda: random_rollouts(game, fast, np.random.default_rng(0)),
                    fast, args.repeats),
            numpy_mlp_row("(f) NumPy MLP, in-process", args.episodes, args.repeats),
            one_blas_thread_reference(args.episodes, args.repeats),
        ]
        print(f"\nleduc_poker, MLP policies {MLPPolicy(game, 0).hidden}, {PER_PLAYER} per player ({joints} joints); "
              f"episodes per joint: {args.slow_episodes} for (a, b), {args.episodes} for (c)-(f)")
        print(f"{'path':<38} {'seconds':>8} {'CPU s':>7} {'episodes/s':>11} {'per CPU s':>10} {'vs (a)':>8}")
        base = rows[0][4]
        for label, seconds, cpu, rate, per_cpu in rows:
            versus = "" if label.startswith("(f)") else f"{per_cpu / base:7.1f}x"  # (f): other policies than (a)
            print(f"{label:<38} {seconds:8.2f} {cpu:7.2f} {rate:11.0f} {per_cpu:10.0f} {versus:>8}")
        rate = {row[0]: row for row in rows}
        ceiling = rate["(d) uniform random rollouts"]
        psro = rate["(a) psro_v2 sample_episodes"]
        print()
        for label in [label for label in rate if label.startswith("(c)")][:2]:
            row = rate[label]
            report(f"{label} vs (a), per CPU second", row[4] / psro[4], 20, "x")
            report(f"(d) vs {label}, per CPU second", ceiling[4] / row[4], 3, "x", at_most=True)
        if address:
            one, two = rate["(c) batched, 1 actor"], rate["(c) batched, 2 actors"]
            report("2 actors vs 1 (same episodes, warm actors), wall clock", two[3] / one[3], 1.8, "x",
                   note=f"needs 2 idle cores; load average now {os.getloadavg()[0]:.1f}; CPU seconds "
                        f"{one[2]:.2f} on 1 actor, {two[2]:.2f} on 2")
        numpy, reference = rate["(f) NumPy MLP, in-process"], rate["(f) NumPy MLP, OPENBLAS_NUM_THREADS=1"]
        for what, column in (("wall", 3), ("CPU", 4)):
            report(f"(f) in-process vs OPENBLAS_NUM_THREADS=1 set outside, {what} seconds per episode",
                   reference[column] / numpy[column], 1.3, "x", at_most=True)
        inprocess, bare = rate["(c) batched, in-process"], rate["(e) batched, no network"]
        per_episode = {label: 1e6 / rate[label][4] for label in rate}
        print("\nCPU microseconds per episode, in one process: "
              f"pyspiel stepping and random draws (d) {per_episode[ceiling[0]]:.1f}; "
              f"batched builder without a network (e) {per_episode[bare[0]]:.1f}; "
              f"its MLP calls {per_episode[inprocess[0]] - per_episode[bare[0]]:.1f}; "
              f"psro_v2 (a) {per_episode[psro[0]]:.1f}")
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutdown()
        stop_embedded()


def start_ray() -> str | None:
    """The address of a 2-CPU Ray started for the actor rows on the loopback address (the
    project's embedded session), or None (said in one line) when it does not start, as
    happens on an overloaded machine: the in-process rows are measured all the same."""
    try:
        start_embedded(num_cpus=2)
    except Exception as exc:  # Ray raises a bare Exception when its node times out
        stop_embedded()  # ends a half-started session (nothing to do after a MetaEvalError)
        print(f"Ray did not start ({str(exc).splitlines()[0]}); the actor rows are skipped")
        return None
    return ray.get_runtime_context().gcs_address


if __name__ == "__main__":
    main()
