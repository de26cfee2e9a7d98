"""What one MLP policy costs in resident memory, piece by piece, in one process.

    python -m bench.policy_memory [--game "goofspiel(num_cards=8,imp_info=True)"] [--count 200]

``count`` fresh policies (64 x 64 MLPs) are made, added to a sampled Evaluator, asked once
for a batch (JAX's device copy of the weights, kept for the next call) and put in Ray's
object store (as a build sends them to its actors); after each step the growth of this
process's resident memory (``VmRSS``, and its shared part ``RssShmem``, where Ray's store
is counted) is divided by ``count``. A PSRO run's growth per added policy
(``memory`` in its records) should be about the sum of these pieces.
"""

from __future__ import annotations

import argparse

import numpy as np


def status() -> dict:
    with open("/proc/self/status") as handle:
        fields = dict(line.split(":", 1) for line in handle if ":" in line)
    return {key: int(fields[key].split()[0]) for key in ("VmRSS", "RssShmem")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="goofspiel(num_cards=8,imp_info=True)")
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args(argv)

    import ray

    import metaeval
    from metaeval import games
    from metaeval.distributed.build import shutdown
    from metaeval.distributed.session import ensure_ray
    from metaeval.spiel.batched import observation_size
    from metaeval.spiel.mlp import MLPPolicy

    game = games.load(args.game)
    observations = np.zeros((4, observation_size(game)), np.float32)
    legal = np.ones((4, game.num_distinct_actions()), bool)
    evaluator = metaeval.Evaluator(game, mode="sampled", episodes=2, seed=0)
    ensure_ray(None, num_cpus=1, log_dir=None, workers=1)
    try:
        warm = MLPPolicy(game, 0, seed=-1 % 2**31)  # imports, compilation, the store's first object
        warm.batch_probabilities(observations, legal)
        evaluator.add(0, warm)
        ray.put(warm)
        weights = sum(leaf.nbytes for layer in warm.params.values() for leaf in layer.values()) / 1024
        print(f"{args.game}: {weights:.0f} KiB of weights per policy; resident KiB per policy, step by step")

        def measure(name, step):
            before = status()
            result = step()
            after = status()
            growth = {key: (after[key] - before[key]) / args.count for key in after}
            print(f"  {name:<34} {growth['VmRSS']:6.0f}   (shared: {growth['RssShmem']:.0f})")
            return result

        made = measure("weights (new policies)", lambda: [MLPPolicy(game, 0, seed=i) for i in range(args.count)])
        ids = measure("Evaluator.add (snapshot)", lambda: [evaluator.add(0, policy) for policy in made])
        stored = [evaluator.policy(0, i) for i in ids]
        measure("device copy (first batched call)", lambda: [p.batch_probabilities(observations, legal) for p in stored])
        refs = measure("Ray object store (ray.put)", lambda: [ray.put(policy) for policy in stored])
        print(f"  ({len(refs)} objects referenced in the store)")
    finally:
        shutdown()


if __name__ == "__main__":
    main()
