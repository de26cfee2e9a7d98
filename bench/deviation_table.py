"""Deviation ratings of a large random score table as a 3-player game (a full-size run).

    python -m bench.deviation_table [--agents 300] [--tasks 50] [--seed 0]

Scores uniform in [0, 1] (seeded), ``data.agent_vs_agent_vs_task`` (minmax), rated by
``deviation`` (column generation at this size). Prints the outcome, the CPU seconds and
the rater's diagnostics (rounds, LP solves, safeguards that fired), or the error.

Measured on a 300 x 50 table of this kind (another draw of the same distribution, on a
loaded 2-core machine): the simplex gave up at round 193 of at most 650 (354 CPU s); with
the interior-point fallback of ``metaeval.solvers.lp.solve`` rounds 193 to 217 are solved (9 of
them by it), and round 218 fails after 461 CPU s, with the error saying what to do instead.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import metaeval
from metaeval import data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    scores = np.random.default_rng(args.seed).random((args.agents, args.tasks))
    table = pd.DataFrame(scores, index=[f"a{i}" for i in range(args.agents)],
                         columns=[f"t{j}" for j in range(args.tasks)])
    game = data.agent_vs_agent_vs_task(table)
    start = time.process_time()
    try:
        rating = metaeval.rate(game, "deviation")
    except metaeval.MetaEvalError as exc:
        print(f"failed after {time.process_time() - start:.0f} CPU s: {exc}")
        return
    scalars = {k: v for k, v in rating.diagnostics.items() if isinstance(v, (int, float, bool))}
    print(f"rated {game!r} in {time.process_time() - start:.0f} CPU s: {scalars}")


if __name__ == "__main__":
    main()
