"""Time per iteration of the population loop for each replacement oracle, and of a PBT step.

    python -m bench.replacements [--iterations 10]

``evolve`` with the deviation rater and 8 policies per player on kuhn_3p and sheriff, once
per ``--replace`` choice (learned: 2,000 Q-learning episodes per replacement), and
``pbt`` (8 members per player, 500 episodes per member and step, as in the README), all
in one process one after the other, so the figures share the machine's load. Medians of
the per-iteration ``seconds`` the loops log.
"""

from __future__ import annotations

import argparse
import statistics

from metaeval.loops.evolve import REPLACEMENTS, EvolveConfig, evolve
from metaeval.loops.pbt import PBTConfig, pbt

PARTS = ("build", "rate", "solve", "gap", "replace")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"median seconds per iteration over {args.iterations} iterations (deviation rater, 8 per player)")
    print(f"{'game':<9}{'loop':<22}{'total':>9}" + "".join(f"{p:>9}" for p in PARTS))
    for game in ("kuhn_3p", "sheriff"):
        for replace in REPLACEMENTS:
            records = evolve(EvolveConfig(game=game, iterations=args.iterations, replace=replace), progress=False)
            row = [statistics.median(r["seconds"][part] for r in records) for part in ("total", *PARTS)]
            print(f"{game:<9}{'evolve, ' + replace:<22}" + "".join(f"{x:>9.3f}" for x in row))
        records = pbt(PBTConfig(game=game, steps=args.iterations, episodes_per_step=500), progress=False)
        total = statistics.median(r["seconds"]["total"] for r in records)
        train = statistics.median(r["seconds"]["train"] for r in records)
        print(f"{game:<9}{'pbt step':<22}{total:>9.3f}   (training {train:.3f})")


if __name__ == "__main__":
    main()
