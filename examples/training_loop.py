"""Using metaeval inside a training loop: CFR snapshots on Kuhn poker, rated as they arrive.

    python examples/training_loop.py [--out DIR]

A training run (here OpenSpiel's CFR on two-player Kuhn poker) hands a snapshot of its
average policy to a ``metaeval.Evaluator`` every few iterations. The evaluator keeps the
meta-game between all kept snapshots current (only games against the new snapshot are
evaluated), rates them, keeps the population bounded by pruning the lowest-rated, and
reports how exploitable the best mixture of the snapshots is. Then a PSRO loop gets a
home-made oracle through the same signature a learner would use.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from open_spiel.python.algorithms import cfr

import metaeval
from metaeval import games
from metaeval.training import oracles
from metaeval.loops.psro import PSROConfig, psro

CAP = 6  # snapshots kept per player


def train_and_rate(out: Path | None) -> metaeval.Evaluator:
    game = games.load("kuhn_2p")
    solver = cfr.CFRSolver(game)
    evaluator = metaeval.Evaluator(game, seed=0)
    for step in range(1, 65):
        solver.evaluate_and_update_policy()
        if step & (step - 1):  # snapshot at iterations 1, 2, 4, 8, ...
            continue
        snapshot = solver.average_policy()  # a TabularPolicy for both players
        for player in range(game.num_players()):
            evaluator.add(player, snapshot, name=f"cfr {step}")
        pruned = evaluator.prune("deviation", keep=CAP)  # drops each player's lowest-rated
        best = evaluator.select("deviation", 1)
        print(f"CFR iteration {step:3d}: population {evaluator.sizes}, "
              f"exploitability of the meta-Nash {evaluator.exploitability():.4f}, "
              f"best rated {[evaluator.name(p, ids[0]) for p, ids in enumerate(best)]}, "
              f"pruned {pruned.names if any(pruned.removed) else '-'}")
    print(evaluator.rate("deviation").to_frame().to_string(index=False))
    sigma = evaluator.meta_distribution("mecce")
    print(f"full-game CCE gap of the snapshots' MECCE: {evaluator.gap(sigma).total:.4f}")
    if out is not None:
        evaluator.save(out / "evaluator")
        print(f"saved to {out / 'evaluator'}; metaeval.Evaluator.load() restores it exactly")
    return evaluator


def mostly_best_response(evaluator, player, sigma, rng):
    """An oracle of the shared signature: the exact best response, except that one time in
    four it returns a random policy (an exploring learner would live here)."""
    if rng.random() < 0.25:
        return oracles.random(evaluator, player, sigma, rng)
    return oracles.psro(evaluator, player, sigma, rng)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="save the evaluator and the PSRO run here")
    args = parser.parse_args(argv)
    train_and_rate(args.out)
    records = psro(PSROConfig(game="kuhn_2p", solver="nash", iterations=16, seed=0),
                   out=None if args.out is None else args.out / "psro", oracle=mostly_best_response,
                   progress=False)
    print("PSRO with a custom oracle, exploitability per iteration:",
          " ".join(f"{r['exploitability']:.3f}" for r in records))


if __name__ == "__main__":
    main()
