"""``make demo``: what metaeval is for, in about two minutes on two cores.

    python -m metaeval.loops.demo [--out runs/demo] [--iterations 16] [--quiet]

1. JPSRO (MGCCE meta-solver, exact best responses) grows a population for each player of
   three-player Kuhn poker; the full-game CCE gap of the meta-distribution falls to 0:
   the population then holds a coarse correlated equilibrium of the whole game.
2. The final population (policy k was added at iteration k) is rated three ways. The
   uniform rating averages a policy's payoff over every opponent policy, weak early ones
   included; deviation ratings (Marris et al. 2025) measure what committing to a policy
   gains over the game's strictest CCE, so policies that are as good against the
   equilibrium tie, and the newest best responses are not marked down for how they fare
   against opponents nobody plays any more.

Everything is written to the run directory (the PSRO run, the meta-game, a ratings table
and figures), and the paths are printed at the end.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from metaeval.loops.psro import PSRO, PSROConfig
from metaeval.ratings import rate
from metaeval.viz import plots

RATERS = ("uniform", "alpharank", "deviation")
TIE = 1e-9  # ratings this close count as tied


def run(out: Path, iterations: int = 16, progress: bool | None = None) -> dict:
    """The demo; returns the gap per iteration, the ratings table and the files written.

    Args:
        out: the directory the demo writes.
        iterations: JPSRO's iterations.
        progress: None (a bar on a terminal), True or False.

    Returns:
        ``{"gaps": ..., "table": ..., "files": ...}``: the CCE gap per iteration, the
        ratings table and the files written.
    """
    config = PSROConfig(game="kuhn_3p", solver="mgcce", oracle="jpsro", iterations=iterations, seed=0)
    loop = PSRO(config, out=out / "psro")
    records = loop.run(progress=progress)
    gaps = [r["cce_gap"] for r in records]
    print(f"1. JPSRO on three-player Kuhn poker ({config.solver} meta-solver, exact best responses).")
    print("   Full-game CCE gap of the meta-distribution, iteration by iteration:")
    print("   " + " ".join(f"{g:.2g}" for g in gaps))
    print(f"   From {gaps[0]:.3g} to {gaps[-1]:.2g}: the population holds a coarse correlated "
          "equilibrium of the whole game.\n")

    evaluator = loop.evaluator
    metagame = evaluator.metagame()
    metagame_path = metagame.save(out / "metagame.npz")
    ratings = {name: rate(metagame, name) for name in RATERS}
    table = pd.DataFrame({"policy": metagame.strategy_names[0]})
    for name, rating in ratings.items():
        table[name] = rating.ratings[0]
        values = rating.ratings[0]
        table[f"{name} rank"] = 1 + (values[None, :] > values[:, None] + TIE).sum(axis=1)  # ties share a rank
    table_path = out / "ratings.csv"
    table.to_csv(table_path, index=False)

    print(f"2. Player 0's {metagame.shape[0]} policies, rated three ways (rank 1 = best):")
    shown = table.sort_values(["deviation rank", "uniform rank"])
    print(shown.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    newest = table.iloc[-1]
    tied = int((table["deviation rank"] == 1).sum())
    first = table.iloc[0]
    first_last = all(first[f"{name} rank"] == table[f"{name} rank"].max() for name in RATERS)
    print(f"\n   The newest policy, {newest['policy']}, the last best response: uniform rank "
          f"{newest['uniform rank']}, alpha-Rank rank {newest['alpharank rank']}, deviation rank "
          f"{newest['deviation rank']} of {len(table)}. Deviation ratings put {tied} policies at the top, tied"
          + (f"; {first['policy']}, the uniform random start, is last by every rating." if first_last else ".")
          + "\n")

    figures = plots.plot_psro(out / "psro", {config.solver: records}, title=PSRO.title_of(asdict(config)))
    figures += [plots.plot_rating_bars(out / f"ratings_{name}.png", ratings[name]) for name in ("uniform", "deviation")]
    files = [out / "psro" / "summary.csv", table_path, metagame_path, *figures]
    print("Files:")
    for path in files:
        print(f"   {path}")
    return {"gaps": gaps, "table": table, "files": files}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metaeval.loops.demo", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory (resumed if it exists)")
    parser.add_argument("--iterations", type=int, default=16, help="JPSRO iterations")
    parser.add_argument("--quiet", action="store_true", help="no per-iteration progress on stderr")
    args = parser.parse_args(argv)
    run(args.out, args.iterations, progress=False if args.quiet else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
