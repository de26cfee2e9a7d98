"""Neural PBT against random replacements: the approximate CCE gap per iteration of two runs.

    python -m bench.pbt_vs_random PBT_RUN EVOLVE_RUN OUT

``PBT_RUN`` is a ``metaeval pbt`` run directory and ``EVOLVE_RUN`` a ``metaeval evolve
--replace random`` one, both made with ``--approximate-gap``. Writes ``OUT/cce_gap.png``
(both estimates with bands of two standard errors, :func:`metaeval.viz.plots.plot_psro`) and
``OUT/approximate_gap.csv`` (per iteration: both estimates, their standard errors, and their
difference with its standard error), and prints how many iterations PBT's estimate lies
below the random population's, and by more than two standard errors of the difference.
Both estimates are lower bounds on the true gaps (maths, section 4.1), each from its own learned
deviations; a negative one means the deviation found no gain within its budget.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval.runs import rundir
from metaeval.viz import plots


def gap_table(pbt: list[dict], random: list[dict]) -> pd.DataFrame:
    """Per iteration both runs reached: both estimates, their standard errors and difference."""
    rows = []
    for a, b in zip(pbt, random):
        difference = a["approximate_cce_gap_estimate"] - b["approximate_cce_gap_estimate"]
        stderr = float(np.hypot(a["approximate_cce_gap_stderr"], b["approximate_cce_gap_stderr"]))
        rows.append({"iteration": a["iteration"], "pbt": a["approximate_cce_gap_estimate"],
                     "pbt_stderr": a["approximate_cce_gap_stderr"], "random": b["approximate_cce_gap_estimate"],
                     "random_stderr": b["approximate_cce_gap_stderr"], "difference": difference,
                     "difference_stderr": stderr})
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pbt", type=Path)
    parser.add_argument("random", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    pbt, random = rundir.read_records(args.pbt), rundir.read_records(args.random)
    settings = rundir.read_json(args.pbt / rundir.CONFIG)["settings"]
    args.out.mkdir(parents=True, exist_ok=True)
    table = gap_table(pbt, random)
    table.to_csv(args.out / "approximate_gap.csv", index=False)
    title = (f"{settings['game']}: PBT ({settings['learner']}, {settings['matchmaking']} matchmaking, "
             f"{settings['population']} members per player) against random replacements (evolve), meta-games "
             f"sampled, {settings['episodes']} episodes per entry, seed {settings['seed']}; deviations: "
             f"{settings['approximate_gap_learner']}, {settings['approximate_gap']} episodes")
    plots.plot_psro(args.out, {"pbt": pbt, "random replacements": random}, title=title)
    below = int((table.difference < 0).sum())
    clearly = int((table.difference < -2 * table.difference_stderr).sum())
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"PBT below random at {below} of {len(table)} iterations ({clearly} by more than two standard errors)")


if __name__ == "__main__":
    main()
