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
and figures), and the results and figures are named at the end, as every command does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from metaeval.cli import guarded, run_figures, say_written
from metaeval.loops.psro import PSRO, PSROConfig
from metaeval.ratings import rate
from metaeval.ratings.base import rounded
from metaeval.runs.reports import table_text
from metaeval.viz import plots

RATERS = ("uniform", "alpharank", "deviation")


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
        ranks = rating.ranks(0)  # ratings within the rater's accuracy share a rank
        table[name] = rounded(rating.ratings[0], rating.tolerance, ranks)
        table[f"{name} rank"] = ranks
    table_path = out / "ratings.csv"
    table.to_csv(table_path, index=False)

    print(f"2. Player 0's {metagame.shape[0]} policies, rated three ways (rank 1 = best):")
    shown = table.sort_values(["deviation rank", "uniform rank"])
    print(table_text(shown, digits=3))
    newest = table.iloc[-1]
    tied = int((table["deviation rank"] == 1).sum())
    first = table.iloc[0]
    first_last = all(first[f"{name} rank"] == table[f"{name} rank"].max() for name in RATERS)
    print(f"\n   The newest policy, {newest['policy']}, the last best response: uniform rank "
          f"{newest['uniform rank']}, alpha-Rank rank {newest['alpharank rank']}, deviation rank "
          f"{newest['deviation rank']} of {len(table)}. Deviation ratings put {tied} policies at the top, tied"
          + (f"; {first['policy']}, the uniform random start, is last by every rating." if first_last else ".")
          + "\n")

    figures = run_figures(out / "psro")  # drawn by the loop
    figures += [plots.plot_rating_bars(out / f"ratings_{name}.png", ratings[name]) for name in ("uniform", "deviation")]
    results = [out / "psro" / "summary.csv", table_path, metagame_path]
    say_written(out, figures)
    return {"gaps": gaps, "table": table, "results": results, "figures": figures}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metaeval.loops.demo", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory (resumed if it exists)")
    parser.add_argument("--iterations", type=int, default=16, help="JPSRO iterations")
    parser.add_argument("--quiet", action="store_true", help="no per-iteration progress on stderr")
    args = parser.parse_args(argv)

    def demo() -> int:
        run(args.out, args.iterations, progress=False if args.quiet else None)
        return 0

    return guarded(demo)  # errors and warnings in one line each, as every command says them


if __name__ == "__main__":
    raise SystemExit(main())
