"""Exact meta-games and full-game CCE gaps against OpenSpiel's per-joint path.

Run from the repository root: ``python -m bench.spiel``. Every ratio compares
timings taken in this run, on the same policies; results are checked to agree.
OpenSpiel's timings exclude converting policies to ``pyspiel`` objects; ours
include everything from the population's policies to the result, except the
one-off enumeration of the game tree (cached per game, printed separately).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time

import numpy as np
import pyspiel

from bench.timing import median_time
from metaeval import MetaEvalError, games
from metaeval.solvers import equilibria
from metaeval.spiel import ExactEvaluator, Population, cce_gap, game_tree, pyspiel_policies


def openspiel_metagame(game, population) -> np.ndarray:
    """The meta-game by looping ``pyspiel.expected_returns`` over every joint profile."""
    policies = pyspiel_policies(population)
    payoffs = np.empty((game.num_players(), *population.sizes))
    root = game.new_initial_state()
    for joint in itertools.product(*(range(k) for k in population.sizes)):
        profile = [policies[p][i] for p, i in enumerate(joint)]
        payoffs[(slice(None), *joint)] = pyspiel.expected_returns(root, profile, -1, True)
    return payoffs


def openspiel_cce_dist(game, population, sigma, support_mass: float = 0.0):
    """``pyspiel.cce_dist`` timed on a correlation device of the joints with mass > ``support_mass``."""
    policies = pyspiel_policies(population)
    joints = [j for j in itertools.product(*(range(k) for k in population.sizes)) if sigma[j] > support_mass]
    mass = sum(sigma[j] for j in joints)
    device = [
        (float(sigma[j] / mass), pyspiel.to_joint_tabular_policy([policies[p][i] for p, i in enumerate(j)], True))
        for j in joints
    ]
    return len(joints), lambda: pyspiel.cce_dist(game, device, prob_cut_threshold=0.0)


def loop_iteration_seconds(name: str, iterations: int = 10) -> tuple[float, float]:
    """Median seconds per population-loop step (8 policies per player, 2 replaced per
    player): (exact meta-game update + CCE gap, the same plus drawing the new policies)."""
    game = games.load(name)
    evaluator = ExactEvaluator(game)
    population = Population.random(game, 8, seed=0)
    evaluator.metagame(population)
    core, total = [], []
    for step in range(1, iterations + 1):
        start = time.perf_counter()
        for p in range(population.num_players):
            population = population.replace_random(p, [step % 8, (step + 3) % 8], seed=step)
        drawn = time.perf_counter()
        metagame = evaluator.metagame(population)
        sigma = np.full(metagame.shape, 1.0 / metagame.num_joints)
        cce_gap(game, population, sigma, evaluator)
        end = time.perf_counter()
        core.append(end - drawn)
        total.append(end - start)
    return statistics.median(core), statistics.median(total)


AGREEMENT = 1e-9


def row(case, ours, theirs, error):
    if not error <= AGREEMENT:
        raise MetaEvalError(f"{case}: results differ from OpenSpiel's by {error:.2e} > {AGREEMENT}")
    print(f"| {case} | {ours * 1e3:.2f} | {theirs * 1e3:.1f} | {theirs / ours:,.0f}x | {error:.1e} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    game = games.load("kuhn_3p")

    start = time.perf_counter()
    game_tree(game)
    print(f"kuhn_3p tree: {game_tree(game).num_terminals} terminals, enumerated once in "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms\n")
    print("| case | metaeval (ms) | OpenSpiel (ms) | speed-up | max abs diff |")
    print("|---|---|---|---|---|")

    population = Population.random(game, 32, seed=args.seed)
    ours, metagame = median_time(lambda: ExactEvaluator(game).metagame(population), repeats=7)
    theirs, reference = median_time(lambda: openspiel_metagame(game, population), repeats=1)
    row("exact meta-game, kuhn_3p, 32 per player (32,768 joints) vs expected_returns loop",
        ours, theirs, np.abs(metagame.payoffs - reference).max())

    population = Population.random(game, 8, seed=args.seed)
    metagame = ExactEvaluator(game).metagame(population)
    rng = np.random.default_rng(args.seed)
    scattered = np.zeros(512)
    scattered[rng.choice(512, 24, replace=False)] = rng.dirichlet(np.ones(24))
    sigmas = [
        ("uniform sigma", np.full(population.sizes, 1.0 / 512)),
        ("MECCE sigma", equilibria.mecce(metagame)),
        ("random sigma on 24 joints", scattered.reshape(population.sizes)),
    ]
    for label, sigma in sigmas:
        support, call = openspiel_cce_dist(game, population, sigma, support_mass=1e-12)
        ours, gap = median_time(lambda: cce_gap(game, population, sigma, ExactEvaluator(game)), repeats=7)
        if support > 100:
            print(f"(timing pyspiel.cce_dist on {support} joints takes minutes)", file=sys.stderr, flush=True)
        theirs, info = median_time(call, repeats=1 if support > 100 else 3)
        joints = f"{support} support joint{'s' if support != 1 else ''}"
        row(f"cce_gap, kuhn_3p, 8 per player, {label}; cce_dist on its {joints}",
            ours, theirs, max(abs(gap.total - info.dist_value),
                              np.abs(gap.per_player - info.deviation_incentives).max()))

    print("\nPopulation-loop step (8 per player, 2 replaced per player), median of 10:")
    print("| game | meta-game update + cce_gap (ms) | including drawing new policies (ms) |")
    print("|---|---|---|")
    for name in ("kuhn_3p", "sheriff"):
        core, total = loop_iteration_seconds(name)
        print(f"| {name} | {core * 1e3:.2f} | {total * 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
