"""Training learners with metaeval as matchmaker and selector: a small league, then PBT.

    python examples/league_training.py [--out DIR]

Part 1 is a training loop written by hand around a ``metaeval.Evaluator``: one tabular
Q-learner per player of three-player Kuhn poker keeps training; every round it draws its
opponents from the pool of frozen snapshots by prioritised fictitious self-play
(``evaluator.opponents(player, "pfsp")``), and its greedy policy joins the pool as a new
snapshot. The pool is capped by pruning the lowest deviation ratings, and each round
prints the full-game CCE gap of the pool's maximum-entropy CCE.

Part 2 runs the packaged loop (``metaeval.loops.pbt``, also ``metaeval pbt``) for a few
steps: members train against matched opponents, and every second step the deviation
rater decides who is replaced by perturbed copies of whom.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import metaeval
from metaeval import games, spiel
from metaeval.responses import Opponents, QLearning
from metaeval.loops.pbt import PBTConfig, pbt

CAP = 6  # snapshots kept per player
ROUNDS = 8
EPISODES = 1000  # per learner and round


def league(seed: int = 0) -> metaeval.Evaluator:
    game = games.load("kuhn_3p")
    rng = np.random.default_rng(seed)
    evaluator = metaeval.Evaluator(game, seed=seed)
    for player in range(game.num_players()):  # the pool starts with one random policy each
        evaluator.add(player, spiel.random_policy(game, player, rng), name="random")
    learner = QLearning()
    values = [learner.initial_values(game, p) for p in range(game.num_players())]
    for round_ in range(1, ROUNDS + 1):
        policies = evaluator.population.policies
        for player in range(game.num_players()):
            distribution = evaluator.opponents(player, "pfsp")  # the player's pool as a whole
            opponents = Opponents.from_distribution(policies, player, distribution)
            values[player] = learner.train(game, player, opponents, EPISODES, rng, values=values[player])
        for player in range(game.num_players()):
            evaluator.add(player, learner.policy(game, player, values[player]), name=f"round {round_}")
        evaluator.prune("deviation", keep=CAP)
        gap = evaluator.gap(evaluator.meta_distribution("mecce")).total
        print(f"league round {round_}: pool {evaluator.sizes}, CCE gap of the pool's MECCE {gap:.3f}")
    return evaluator


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="save the league and the PBT run here")
    args = parser.parse_args(argv)
    evaluator = league()
    print(evaluator.rate("deviation").to_frame().to_string(index=False))
    if args.out is not None:
        evaluator.save(args.out / "league")
    config = PBTConfig(game="kuhn_3p", rater="deviation", steps=6, interval=2, population=4,
                       episodes_per_step=300, seed=0)
    records = pbt(config, out=None if args.out is None else args.out / "pbt", progress=False)
    for record in records:
        exploit = f", replaced {record['discarded']} by copies of {record['parents']}" if "parents" in record else ""
        print(f"PBT step {record['iteration']}: CCE gap {record['cce_gap']:.3f}{exploit}")


if __name__ == "__main__":
    main()
