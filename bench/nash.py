"""Nash rater timing where the population loop calls it: 3-player games, 8 strategies each.

    python -m bench.nash [--games 10]

Two inputs: random 3-player games (payoffs uniform in [-1, 1]) and meta-games of
three-player Kuhn poker between 8 random tabular policies per player (expected returns
computed exactly by OpenSpiel).  Both are general-sum or N-player, so the rater traces
the logit path with pygambit and refines its end point by Newton's method; the table
splits the time between the two and reports the resulting max regret.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms.expected_game_score import policy_value

import metaeval
from metaeval.ratings import logit


def kuhn_metagame(seed: int, size: int = 8) -> metaeval.MetaGame:
    game = pyspiel.load_game("kuhn_poker", {"players": 3})
    rng = np.random.default_rng(seed)
    population = []
    for _ in range(3):
        policies = []
        for _ in range(size):
            tabular = policy_lib.TabularPolicy(game)
            for row, state_policy in enumerate(tabular.action_probability_array):
                legal = tabular.legal_actions_mask[row].astype(bool)
                state_policy[:] = 0.0
                state_policy[legal] = rng.dirichlet(np.ones(legal.sum()))
            policies.append(tabular)
        population.append(policies)
    payoffs = np.zeros((3, size, size, size))
    root = game.new_initial_state()
    for joint in itertools.product(range(size), repeat=3):
        profile = [population[p][i] for p, i in enumerate(joint)]
        payoffs[(slice(None), *joint)] = policy_value(root, profile)
    return metaeval.MetaGame(payoffs)


def timed_rating(game):
    traced = []
    original = logit._refine

    def refine(*args, **kwargs):  # the first refinement starts right after the trace
        traced.append(time.perf_counter())
        return original(*args, **kwargs)

    logit._refine = refine
    try:
        start = time.perf_counter()
        rating = metaeval.rate(game, "nash")
        end = time.perf_counter()
    finally:
        logit._refine = original
    return end - start, traced[0] - start, rating.diagnostics["max_regret"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--kuhn", type=int, default=3)
    args = parser.parse_args()
    rows = [("random 3x8", metaeval.MetaGame(np.random.default_rng(s).uniform(-1, 1, (3, 8, 8, 8))))
            for s in range(args.games)]
    rows += [("kuhn_3p 8 policies", kuhn_metagame(s)) for s in range(args.kuhn)]
    print(f"{'game':<20} {'total s':>8} {'trace s':>8} {'refine s':>9} {'max regret':>11}")
    for name, game in rows:
        total, trace, regret = timed_rating(game)
        print(f"{name:<20} {total:>8.3f} {trace:>8.3f} {total - trace:>9.3f} {regret:>11.1e}")


if __name__ == "__main__":
    main()
