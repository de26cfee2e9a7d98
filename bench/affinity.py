"""Affinity-target equilibria: metaeval against DeepMind's polarix (JAX, gradient methods).

    pip install -e '.[polarix]'
    python -m bench.affinity [--iterations 20000]

Games: the 3-prompt, 4-model king-of-the-hill game u_king(p, i, j) = clip(S[p, i] -
S[p, j], -2, 2) / 2 with S = [[3,2,1,0],[0,3,2,1],[1,1,3,2]], without and with 5 copies of
prompt 1; and the agent-vs-agent-vs-task game of a random 5 x 6 table, without and with
10 adversarial task copies. For each:

- the affinity target: polarix's ``max_affinity_entropy_marginals`` (kernel sampled on
  512 Dirichlet profiles, variance 1e-6) against metaeval's exact hard-kernel target;
- the LLE with that target: polarix's ``lle`` (Adam on the QRE loss, annealed
  temperature) against ``metaeval.rate(game, "nash", target="affinity")``: time, king
  (agent A) ratings, max difference, and each answer's max regret (exploitability).

polarix has no CCE solver (its ``ce_maxent`` imposes correlated-equilibrium constraints),
so the maximum relative-entropy CCE is compared with metaeval's own MECCE (a different
solver: dual Newton) where the target is uniform, in the test suite, not here.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import pandas as pd

import metaeval
from metaeval import data
from metaeval.ratings import affinity
from metaeval.ratings.logit import max_regret


def king_of_the_hill(copies: int) -> metaeval.MetaGame:
    scores = np.array([[3, 2, 1, 0], [0, 3, 2, 1], [1, 1, 3, 2]], dtype=float)
    scores = np.vstack([scores, np.repeat(scores[1:2], copies, axis=0)])
    king = np.clip(scores[:, :, None] - scores[:, None, :], -2, 2) / 2  # [prompt, king, rebel]
    king = np.moveaxis(king, 0, -1)
    rebel = np.where(np.eye(4, dtype=bool)[:, :, None], -1.0, -king)
    return metaeval.MetaGame(np.stack([king, rebel, np.abs(king)]),
                             player_names=["king", "rebel", "prompt"])


def table_game(copies: int) -> metaeval.MetaGame:
    table = pd.DataFrame(np.random.default_rng(0).uniform(size=(5, 6)), index=list("abcde"))
    if copies:
        game = data.agent_vs_agent_vs_task(table)
        mean = game.payoffs[0][int(np.argmax(metaeval.rate(game, "uniform").ratings[0]))].mean(axis=0)
        weights = np.exp(-10 * (mean - mean.min()))
        picks = np.random.default_rng(0).choice(len(mean), size=copies, p=weights / weights.sum())
        extra = table.iloc[:, picks].copy()
        extra.columns = [f"{table.columns[i]} copy {k}" for k, i in enumerate(picks)]
        table = pd.concat([table, extra], axis=1)
    return data.agent_vs_agent_vs_task(table)


def polarix_lle(game: metaeval.MetaGame, iterations: int):
    import jax
    import polarix as plx

    plx_game = plx.Game(payoffs=jax.numpy.asarray(game.payoffs),
                        actions=tuple(np.array(n) for n in game.strategy_names),
                        players=tuple(game.player_names))
    start = time.perf_counter()
    kernel = plx.affinity_kernel(jax.random.PRNGKey(0))
    target = plx.solve(plx_game, functools.partial(plx.max_affinity_entropy_marginals, kernel_fn=kernel),
                       max_num_iterations=iterations, disable_progress_bar=True)
    targets = [np.asarray(m, dtype=np.float64) for m in target.marginals]
    solver = functools.partial(plx.lle, target_logits=[np.log(np.maximum(t, 1e-30)) for t in targets])
    result = plx.solve(plx_game, solver, max_num_iterations=iterations, disable_progress_bar=True)
    seconds = time.perf_counter() - start
    strategies = [np.asarray(m, dtype=np.float64) for m in result.marginals]
    return seconds, targets, strategies, [np.asarray(r, dtype=np.float64) for r in result.ratings]


def compare(label: str, game: metaeval.MetaGame, iterations: int) -> dict:
    start = time.perf_counter()
    ours = metaeval.rate(game, "nash", target="affinity")
    ours_seconds = time.perf_counter() - start
    targets = [affinity.affinity_target(game, p) for p in range(game.num_players)]
    plx_seconds, plx_targets, plx_strategies, plx_ratings = polarix_lle(game, iterations)
    return {
        "game": label,
        "strategies": "x".join(map(str, game.shape)),
        "target |diff|": max(np.abs(a - b).max() for a, b in zip(targets, plx_targets)),
        "metaeval s": ours_seconds,
        "polarix s": plx_seconds,
        "speed-up": plx_seconds / ours_seconds,
        "rating |diff|": np.abs(ours.ratings[0] - plx_ratings[0]).max(),
        "metaeval regret": max_regret(game.payoffs, ours.distribution),
        "polarix regret": max_regret(game.payoffs, plx_strategies),
        "metaeval ratings": np.round(ours.ratings[0], 4).tolist(),
        "polarix ratings": np.round(plx_ratings[0], 4).tolist(),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20_000, help="polarix's iteration budget per solve")
    args = parser.parse_args(argv)
    metaeval.rate(king_of_the_hill(0), "nash", target="affinity")  # warm imports
    rows = [
        compare("king of the hill", king_of_the_hill(0), args.iterations),
        compare("king of the hill + 5 copies of prompt 1", king_of_the_hill(5), args.iterations),
        compare("5x6 table, 3p", table_game(0), args.iterations),
        compare("5x6 table, 3p + 10 adversarial copies", table_game(10), args.iterations),
    ]
    frame = pd.DataFrame(rows)
    numbers = frame.drop(columns=["metaeval ratings", "polarix ratings"])
    print(numbers.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print()
    for row in rows:
        print(f"{row['game']}: metaeval {row['metaeval ratings']}, polarix {row['polarix ratings']}")


if __name__ == "__main__":
    main()
