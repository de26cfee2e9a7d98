"""Deviation ratings and MECCE against the reference recipes, timed in the same run.

    python -m bench.deviation

Deviation ratings: metaeval (one HiGHS model, bound changes, warm re-solves; column
generation above 2048 joints) against the paper's recipe (Marris et al. 2025; maths, section
2.1): CVXPY with GLOP, the frozen mask and values as parameters of one disciplined parametrised program, re-solved each round with
the same freezing rule; and column generation against every joint in the LPs. MECCE: metaeval's dual Newton method against the primal
exponential-cone program in CVXPY with Clarabel. Random 3-player games with payoffs
uniform in [-1, 1]; median over seeds; both answers are checked to agree.
"""

from __future__ import annotations

import statistics

import cvxpy as cp
import numpy as np

import metaeval
from bench.timing import median_time
from metaeval.solvers.equilibria import cce_constraints, mecce
from metaeval.ratings.deviation import constraints_to_freeze

RATING_AGREEMENT = 1e-6
MECCE_AGREEMENT = 1e-4


def recipe_deviation_ratings(game: metaeval.MetaGame) -> np.ndarray:
    """Algorithm 1 as the paper ran it: CVXPY + GLOP, a DPP problem re-parametrised per round."""
    matrix = cce_constraints(game)
    rows, joints = matrix.shape
    sigma = cp.Variable(joints, nonneg=True)
    t = cp.Variable()
    frozen = cp.Parameter(rows, nonneg=True)  # 1 where frozen
    frozen_value = cp.Parameter(rows)  # the frozen value there, 0 elsewhere
    gains = matrix @ sigma
    caps = gains <= cp.multiply(1 - frozen, t) + frozen_value
    floors = cp.multiply(frozen, gains) >= frozen_value
    problem = cp.Problem(cp.Minimize(t), [cp.sum(sigma) == 1, caps, floors])
    values = np.zeros(rows)
    unfrozen = np.ones(rows, dtype=bool)
    while unfrozen.any():
        frozen.value = (~unfrozen).astype(float)
        frozen_value.value = np.where(unfrozen, 0.0, values)
        problem.solve(solver=cp.GLOP)
        if problem.status != cp.OPTIMAL:
            raise RuntimeError(f"GLOP via CVXPY returned {problem.status}")
        freeze, _ = constraints_to_freeze(caps.dual_value, gains.value, unfrozen)
        values[freeze] = t.value
        unfrozen &= ~freeze
    return values


def clarabel_mecce(game: metaeval.MetaGame) -> np.ndarray:
    """The MECCE as the primal exponential-cone program."""
    matrix = cce_constraints(game)
    sigma = cp.Variable(matrix.shape[1], nonneg=True)
    constraints = [cp.sum(sigma) == 1, matrix @ sigma <= 0]
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(sigma))), constraints)
    problem.solve(solver=cp.CLARABEL)
    if problem.status != cp.OPTIMAL:
        raise RuntimeError(f"Clarabel returned {problem.status}")
    return sigma.value.reshape(game.shape)


def random_game(strategies: int, seed: int) -> metaeval.MetaGame:
    rng = np.random.default_rng(seed)
    return metaeval.MetaGame(rng.uniform(-1, 1, size=(3, strategies, strategies, strategies)))


def compare(sizes, seeds, ours, reference, distance, tolerance):
    """Median times of ``ours`` and ``reference`` per size, and their largest disagreement."""
    small = random_game(2, 0)  # load and warm both solvers before timing
    ours(small), reference(small)
    rows = []
    for size in sizes:
        mine, theirs, gaps = [], [], []
        for seed in seeds:
            game = random_game(size, seed)
            elapsed, answer = median_time(lambda: ours(game))
            mine.append(elapsed)
            elapsed, expected = median_time(lambda: reference(game))
            theirs.append(elapsed)
            gaps.append(distance(answer, expected))
        if max(gaps) > tolerance:
            raise AssertionError(f"{size} strategies: answers differ by {max(gaps):.2g} > {tolerance}")
        rows.append((size, size**3, statistics.median(mine), statistics.median(theirs), max(gaps)))
    return rows


def format_table(title: str, reference_name: str, rows) -> str:
    lines = [
        title,
        "",
        f"| strategies | joints | metaeval (s) | {reference_name} (s) | speed-up | max difference |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size, joints, mine, theirs, gap in rows:
        speed_up = theirs / mine
        lines.append(f"| {size} | {joints} | {mine:.4f} | {theirs:.4f} | {speed_up:.1f}x | {gap:.1e} |")
    return "\n".join(lines)


def deviation_table(sizes=(8, 12, 16, 24), seeds=(0, 1, 2)) -> str:
    rows = compare(
        sizes,
        seeds,
        lambda game: np.concatenate(metaeval.rate(game, "deviation").ratings),
        recipe_deviation_ratings,
        lambda a, b: float(np.abs(a - b).max()),
        RATING_AGREEMENT,
    )
    title = (
        f"Deviation ratings, random 3-player games "
        f"(median of {len(seeds)} seeds; difference = max |rating gap|)"
    )
    return format_table(title, "CVXPY + GLOP recipe", rows)


def column_generation_table(sizes=(16, 24, 32), alone=(48, 64), seed=0) -> str:
    """Column generation against the same Algorithm 1 with every joint in the LPs, one run."""
    lines = [
        f"Deviation ratings by column generation vs every joint in the LPs (random 3-player game, seed {seed})",
        "",
        "| strategies | joints | column generation (s) | joints in final LP | all joints (s) | speed-up | max difference |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in (*sizes, *alone):
        game = random_game(size, seed)
        elapsed, generated = median_time(lambda: metaeval.rate(game, "deviation", column_generation=True))
        used = generated.diagnostics["lp_columns"]
        if size in alone:
            lines.append(f"| {size} | {size**3} | {elapsed:.3f} | {used} | | | |")
            continue
        full_time, full = median_time(lambda: metaeval.rate(game, "deviation", column_generation=False))
        gap = max(float(np.abs(a - b).max()) for a, b in zip(generated.ratings, full.ratings))
        if gap > RATING_AGREEMENT:
            raise AssertionError(f"{size} strategies: ratings differ by {gap:.2g}")
        lines.append(f"| {size} | {size**3} | {elapsed:.3f} | {used} | {full_time:.3f} | "
                     f"{full_time / elapsed:.1f}x | {gap:.1e} |")
    return "\n".join(lines)


def mecce_table(sizes=(8, 12), seeds=(0, 1, 2)) -> str:
    rows = compare(
        sizes, seeds, mecce, clarabel_mecce, lambda a, b: float(np.abs(a - b).max()), MECCE_AGREEMENT
    )
    title = f"MECCE, random 3-player games (median of {len(seeds)} seeds; difference = max |sigma gap|)"
    return format_table(title, "CVXPY + Clarabel", rows)


def main() -> None:
    print(deviation_table())
    print()
    print(column_generation_table())
    print()
    print(mecce_table())


if __name__ == "__main__":
    main()
