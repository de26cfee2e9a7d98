"""The studies behind the README's Results: does the rater matter, and does learning help?

    python -m metaeval.loops.study raters --out runs/study [--games kuhn_3p,sheriff]
        [--replacements random,mutate,best-response,learned] [--seeds 30] [--iterations 300] [--jobs 2]
        [--records docs/results/study-full/records] [--publish docs/results/study-full] [--finished-only]
    python -m metaeval.loops.study check --records docs/results/study-full/records --out runs/check
        [--games ...] [--replacements ...] [--raters nash] [--seeds 0,1,2] [--jobs 2] [--rewrite]
    python -m metaeval.loops.study pbt-vs-random --out runs/pbt-vs-random [--seeds 3] [--steps 20]
        [--episodes-per-step 500] [--matchmaking mecce]

``raters`` runs every rater x seed (an evolve run in ``OUT/GAME/REPLACEMENT/RATER/seedS``,
resumable) for each game and replacement and keeps each finished run's summary in
``RECORDS/GAME/REPLACEMENT`` (``study_records``; a recorded run is not run again, so a
study kept with its records continues or re-tabulates on any machine). From the records
it writes the comparison's tables and figures in ``OUT/GAME/REPLACEMENT`` (as ``compare``
does; ``cce_gap.png`` has a line per rater), then ``study.csv`` (final and mean full-game
CCE gap, final welfare and the final population's mean age per rater), ``paired.csv``
(each rater minus uniform, seed by seed: mean, sign counts, sign-test and Wilcoxon
p-values, at every ``--every`` iterations, so one sees how the paired statistic evolves
with the iteration count), ``timing.csv`` (median seconds per iteration for each
replacement), ``failures.csv`` (runs stopped by an error, with the error; the others are
tabulated, and a pair counts only where both runs finished), one figure of the paired
difference from uniform at every iteration (``GAME-REPLACEMENT-paired.png``), and
``study.md``, the final figures of ``study.csv`` and ``paired.csv`` as one Markdown
table. Runs with one seed share their initial population and their loop's random stream
whatever the rater, so the comparison is paired. Running the same command again resumes
unfinished runs and redraws everything; the numbers are a function of the settings
alone. ``--finished-only`` runs nothing and tabulates the comparisons whose runs are all
recorded (say, from another shell while a study runs).

``check`` reruns recorded runs afresh and compares each with its record
(``study_records.check_records``), writing ``OUT/check.csv``; it exits with status 1 if
any differs, unless ``--rewrite`` (replace differing records by the reruns') was given.

``pbt-vs-random`` runs PBT with Q-learners (rater ``deviation``) and ``evolve`` with
random replacements (same rater, population and number of iterations) for each seed, and
draws both CCE gaps in one figure.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from metaeval import games
from metaeval.runs import budget
from metaeval.viz import plots
from metaeval.runs import reports
from metaeval.runs import rundir
from metaeval.cli import HelpFormatter, Parser, at_least, guarded, run_figures, say_written
from metaeval.errors import MetaEvalError
from metaeval.runs.fileio import check_writable
from metaeval.ratings.base import rounded
from metaeval.runs.reports import table_text
from metaeval.loops.compare import FAILURE_COLUMNS, failure, run_all, run_directory, title_of, write_comparison_frame
from metaeval.loops.evolve import REPLACEMENTS, EvolveConfig, evolve
from metaeval.loops.pbt import PBTConfig, pbt
from metaeval.loops.study_records import RunRecords, check_records, session_builds

RATERS = ["uniform", "nash", "alpharank", "deviation", "payoff"]
TIE = 1e-9
WELFARE_PRECISION = 1e-12
"""Decimals of a run's welfare kept: a sum of payoffs is rounding error beyond them."""


def paired_statistics(comparison: pd.DataFrame, every: int, baseline: str = "uniform") -> pd.DataFrame:
    """Per rater and iteration (every ``every``-th and the last): the rater's CCE gap minus
    the baseline's, seed by seed, with mean, counts lower/equal/higher, the two-sided sign
    test's p-value (ties dropped) and the two-sided Wilcoxon signed-rank p-value."""
    last = comparison.iteration.max()
    chosen = comparison[(comparison.iteration % every == every - 1) | (comparison.iteration == last)]
    rows = []
    for iteration, frame in chosen.groupby("iteration"):
        gaps = frame.pivot(index="seed", columns="rater", values="cce_gap")
        for rater in [r for r in dict.fromkeys(frame.rater) if r != baseline]:  # the comparison's order
            diff = (gaps[rater] - gaps[baseline]).dropna().to_numpy()  # seeds both runs reached
            lower, higher = int((diff < -TIE).sum()), int((diff > TIE).sum())
            nonzero = diff[np.abs(diff) > TIE]
            sign_p = stats.binomtest(lower, lower + higher).pvalue if lower + higher else 1.0
            wilcoxon_p = stats.wilcoxon(nonzero).pvalue if len(nonzero) else 1.0
            rows.append({"iteration": int(iteration), "rater": rater, "baseline": baseline,
                         "pairs": len(diff), "mean_difference": mean(diff),
                         "standard_error": std(diff) / math.sqrt(len(diff)),
                         "lower": lower,
                         "equal": len(diff) - lower - higher, "higher": higher,
                         "sign_test_p": float(sign_p), "wilcoxon_p": float(wilcoxon_p)})
    return pd.DataFrame(rows)


def summary(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per rater, over seeds: final and mean (over iterations) CCE gap, the final welfare
    (the sum over players of the population's average payoff: 0 in a zero-sum game; each
    player's average payoff is in ``comparison.csv`` and ``payoff.png``; each run's rounded
    to 12 decimals, below which its sum is rounding error: zero-sum welfare is 0, not 1e-17),
    and the final population's mean age (``reports.population_age``)."""
    payoff_columns = [c for c in comparison.columns if c.startswith("mean_payoff_p")]
    comparison = comparison.assign(welfare=rounded(comparison[payoff_columns].sum(axis=1), WELFARE_PRECISION))
    per_run = comparison.groupby(["rater", "seed"], sort=False).agg(
        final_gap=("cce_gap", "last"), mean_gap=("cce_gap", mean), final_welfare=("welfare", "last"),
        final_age=("population_age", "last"))
    by_rater = per_run.groupby("rater", sort=False)  # raters in the comparison's order
    table = by_rater.agg([mean, std])
    table.columns = [f"{a}_{b}" for a, b in table.columns]
    return table.assign(seeds=by_rater.size()).reset_index()


def mean(values) -> float:
    """The mean from the correctly rounded sum (``math.fsum``): the same bits whatever the
    order of the values or the summation pandas or NumPy use (pandas' grouped mean changed
    the last bit of this study's tables between releases)."""
    values = list(values)
    return math.fsum(values) / len(values) if values else float("nan")


def std(values) -> float:
    """Sample standard deviation (n − 1) from correctly rounded sums, as `mean`."""
    values = list(values)
    if len(values) < 2:
        return float("nan")
    centre = mean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1))


def markdown_table(table: pd.DataFrame, paired: pd.DataFrame) -> str:
    """``study.csv`` and the last iteration of ``paired.csv`` as one Markdown table, a row
    per game, replacement and rater (mean ± standard deviation over seeds, the final
    population's mean age as a mean; the paired difference from uniform as mean ±
    standard error)."""
    last = paired.loc[paired.groupby(["game", "replacement", "rater"]).iteration.idxmax()]
    last = last.set_index(["game", "replacement", "rater"])
    lines = ["| game | replacement | rater | runs | final gap | mean gap | final welfare | final age | "
             "final − uniform | lower/equal/higher | sign p | Wilcoxon p |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for row in table.itertuples():
        cells = [row.game, row.replacement, row.rater, str(row.seeds),
                 f"{row.final_gap_mean:.3g} ± {row.final_gap_std:.2g}", f"{row.mean_gap_mean:.3g}",
                 f"{row.final_welfare_mean:.3g} ± {row.final_welfare_std:.2g}",
                 f"{row.final_age_mean:.3g}"]
        key = (row.game, row.replacement, row.rater)
        if key in last.index:
            p = last.loc[key]
            cells += [f"{p.mean_difference:+.3g} ± {p.standard_error:.2g}", f"{p.lower}/{p.equal}/{p.higher}",
                      f"{p.sign_test_p:.2g}", f"{p.wilcoxon_p:.2g}"]
        else:
            cells += [""] * 4
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def raters_study(out: Path, games: list[str], replacements: list[str], seeds: int, iterations: int,
                 every: int, jobs: int, learner_episodes: int, finished_only: bool = False,
                 records: Path | None = None) -> pd.DataFrame:
    """Run (or with ``finished_only``, only tabulate the finished) comparisons; see the module
    docstring for what is written. A run recorded in ``records`` (default ``OUT/records``)
    is not run again.

    Args:
        out: the study's directory.
        games: the games.
        replacements: the replacement rules.
        seeds: seeds per comparison.
        iterations: iterations per run.
        every: the iterations tabulated (every ``every``-th and the last).
        jobs: runs at once.
        learner_episodes: training episodes of the learned replacements.
        finished_only: only tabulate the finished runs.
        records: where the records of finished runs are kept.

    Returns:
        The study's summary table.
    """
    out = Path(out)
    records = Path(records) if records is not None else out / "records"
    out.mkdir(parents=True, exist_ok=True)
    # One study runs in ``out`` at a time (a --finished-only tabulation may run beside it).
    lock = None if finished_only else rundir.lock_directory(out)
    try:
        return _tabulate_study(out, games, replacements, seeds, iterations, every, jobs, learner_episodes,
                               finished_only, records)
    finally:
        if lock is not None:
            lock.release()


def _tabulate_study(out: Path, games: list[str], replacements: list[str], seeds: int, iterations: int,
                    every: int, jobs: int, learner_episodes: int, finished_only: bool, records: Path) -> pd.DataFrame:
    """[`raters_study`][metaeval.loops.study.raters_study] with ``out`` locked."""
    tables, paired, timing, failures = [], [], [], []
    for replacement in replacements:
        for game in games:
            base = EvolveConfig(game=game, iterations=iterations, replace=replacement,
                                learner_episodes=learner_episodes)
            label = {"game": game, "replacement": replacement}
            recorded = RunRecords(records / game / replacement, base)
            if not finished_only:  # failures.csv is left as the runs left it
                failures.append(_run_unrecorded(base, seeds, out / game / replacement, recorded, jobs).assign(**label))
                pd.concat(failures, ignore_index=True).to_csv(out / "failures.csv", index=False)
            if finished_only and not all(recorded.has(r, s) for r in RATERS for s in range(seeds)):
                continue
            comparison = recorded.comparison(RATERS, list(range(seeds)))
            if comparison is None:
                continue
            write_comparison_frame(out / game / replacement, comparison, title=title_of(base))
            tables.append(summary(comparison).assign(**label))
            paired.append(paired_statistics(comparison, every).assign(**label))
            plots.plot_paired(out / f"{game}-{replacement}-paired.png", paired_statistics(comparison, 1),
                              title=title_of(base))
            timing.append({**label, "median_seconds_per_iteration": float(comparison.seconds.median()),
                           "iterations": len(comparison)})
            # Rewritten after every comparison, so a study stopped part-way keeps its tables.
            study, paired_table = pd.concat(tables, ignore_index=True), pd.concat(paired, ignore_index=True)
            study.to_csv(out / "study.csv", index=False)
            paired_table.to_csv(out / "paired.csv", index=False)
            (out / "study.md").write_text(markdown_table(study, paired_table))
            pd.DataFrame(timing).to_csv(out / "timing.csv", index=False)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def _run_unrecorded(base: EvolveConfig, seeds: int, out: Path, recorded: RunRecords, jobs: int) -> pd.DataFrame:
    """Run every rater and seed not yet in ``recorded`` (in ``out/RATER/seedS``, resuming
    what is there) and record each as it finishes; returns the failed runs."""
    configs = [replace(base, rater=r, seed=s) for r in RATERS for s in range(seeds) if not recorded.has(r, s)]
    failed = []
    for config, outcome in run_all(configs, out, jobs, progress=None, desc=title_of(base)):
        if isinstance(outcome, str):
            failed.append(failure(out, config, outcome))
        else:
            recorded.write(config.rater, config.seed, reports.summary_frame(outcome),
                           session_builds(run_directory(out, config)))
    return pd.DataFrame(failed, columns=FAILURE_COLUMNS)


def check_study(records: Path, out: Path, games: list[str], replacements: list[str], raters: list[str],
                seeds: list[int], jobs: int, rewrite: bool = False) -> pd.DataFrame:
    """`check_records` for every recorded game and replacement, into ``OUT/check.csv``;
    every asked rater and seed must be recorded there (checked before anything runs)."""
    recorded = {}
    for game in games:
        for replacement in replacements:
            path = Path(records) / game / replacement
            if path.is_dir():
                recorded[game, replacement] = RunRecords.at(path)
    if not recorded:
        raise MetaEvalError(f"no records under {records}")
    unrecorded = [f"{path.path.relative_to(records)} {r} seed {s}" for path in recorded.values()
                  for r in raters for s in seeds if not path.has(r, s)]
    if unrecorded:
        shown = ", ".join(unrecorded[:5]) + (f" and {len(unrecorded) - 5} more" if len(unrecorded) > 5 else "")
        raise MetaEvalError(f"{records} has no record of {shown}: ask only for recorded raters and seeds")
    checked = [check_records(runs, raters, seeds, Path(out) / game / replacement, jobs, rewrite)
               .assign(game=game, replacement=replacement) for (game, replacement), runs in recorded.items()]
    table = pd.concat(checked, ignore_index=True)
    Path(out).mkdir(parents=True, exist_ok=True)
    table.to_csv(Path(out) / "check.csv", index=False)
    return table


def pbt_versus_random(out: Path, seeds: int, steps: int, population: int, episodes_per_step: int,
                      matchmaking: str, workers: int) -> pd.DataFrame:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    learned = PBTConfig(game="kuhn_3p", rater="deviation", steps=steps, population=population,
                        episodes_per_step=episodes_per_step, matchmaking=matchmaking, workers=workers)
    baseline = EvolveConfig(game="kuhn_3p", rater="deviation", iterations=steps, population=population)
    runs = {"PBT, Q-learning": {}, "evolve, random replacements": {}}
    for seed in range(seeds):
        runs["PBT, Q-learning"][seed] = pbt(replace(learned, seed=seed), out=out / "pbt" / f"seed{seed}",
                                            progress=False)
        runs["evolve, random replacements"][seed] = evolve(replace(baseline, seed=seed),
                                                           out=out / "random" / f"seed{seed}", progress=False)
    comparison = reports.comparison_frame(runs)
    comparison.to_csv(out / "comparison.csv", index=False)
    plots.plot_comparison(out, comparison, title=f"kuhn_3p, deviation rater, {population} per player",
                          unit="iteration (PBT: step)")
    final = reports.final_gaps(comparison)
    final.to_csv(out / "final.csv", index=False)
    return final


def publish(out: Path, docs: Path) -> None:
    """Copy a study's tables and figures (not its run directories) into ``docs``, figures of
    ``GAME/REPLACEMENT/cce_gap.png`` as ``GAME-REPLACEMENT-cce_gap.png``.

    Args:
        out: the study's directory.
        docs: the directory to copy into.
    """
    out, docs = Path(out), Path(docs)
    docs.mkdir(parents=True, exist_ok=True)
    for path in [*out.glob("*.csv"), *out.glob("*.md"), *out.glob("*.png")]:
        shutil.copyfile(path, docs / path.name)
    for path in out.glob("*/*/cce_gap.png"):
        shutil.copyfile(path, docs / f"{path.parent.parent.name}-{path.parent.name}-cce_gap.png")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m metaeval.loops.study", description=__doc__.splitlines()[0],
                    formatter_class=HelpFormatter)
    commands = parser.add_subparsers(dest="study", required=True, parser_class=Parser)

    def command(name, description):
        return commands.add_parser(name, help=description, description=description, formatter_class=HelpFormatter)

    raters = command("raters", "evolve runs of every rater and seed, paired with uniform's, per game")
    raters.add_argument("--out", type=Path, required=True, help="study directory (resumed if it exists)")
    raters.add_argument("--games", default="kuhn_3p,sheriff", help="comma-separated games")
    raters.add_argument("--replacements", default=",".join(REPLACEMENTS), help="comma-separated replacements")
    raters.add_argument("--seeds", type=at_least(1), default=30, help="seeds 0..S-1 of every rater")
    raters.add_argument("--iterations", type=at_least(1), default=300, help="iterations of every run")
    raters.add_argument("--every", type=at_least(1), default=25, help="iterations between paired statistics")
    raters.add_argument("--jobs", type=at_least(1), default=2, help="runs in parallel processes")
    raters.add_argument("--learner-episodes", type=at_least(1), default=2000,
                        help="training episodes of each learned replacement")
    raters.add_argument("--publish", type=Path, help="copy the tables and figures into this directory")
    raters.add_argument("--finished-only", action="store_true",
                        help="run nothing: tabulate the comparisons whose runs are all recorded")
    raters.add_argument("--records", type=Path,
                        help="where each finished run's summary is kept (default OUT/records); recorded runs "
                             "are not run again")
    check = command("check", "rerun recorded runs and compare them with their records")
    check.add_argument("--records", type=Path, required=True, help="the records of a raters study")
    check.add_argument("--out", type=Path, required=True, help="directory of the reruns and check.csv")
    check.add_argument("--games", default="kuhn_3p,sheriff", help="comma-separated games")
    check.add_argument("--replacements", default=",".join(REPLACEMENTS), help="comma-separated replacements")
    check.add_argument("--raters", default=",".join(RATERS), help="comma-separated raters")
    check.add_argument("--seeds", default="0", help="comma-separated seeds")
    check.add_argument("--jobs", type=at_least(1), default=2, help="runs in parallel processes")
    check.add_argument("--rewrite", action="store_true",
                       help="replace each differing record by the rerun's (after a deliberate change of results)")
    versus = command("pbt-vs-random", "PBT with Q-learners against evolve with random replacements, seed by seed")
    versus.add_argument("--out", type=Path, required=True, help="directory of the runs, tables and figures")
    versus.add_argument("--seeds", type=at_least(1), default=3, help="seeds 0..S-1 of both")
    versus.add_argument("--steps", type=at_least(1), default=20, help="PBT steps, and evolve iterations")
    versus.add_argument("--population", type=at_least(1), default=8, help="policies per player")
    versus.add_argument("--episodes-per-step", type=at_least(1), default=500,
                        help="training episodes per PBT member and step")
    versus.add_argument("--matchmaking", default="mecce", help="PBT's matchmaking")
    versus.add_argument("--workers", type=at_least(1), default=1, help="Ray workers of PBT")
    return parser


def main(argv=None) -> None:
    """Run one study; errors end in one line on stderr (see `metaeval.cli.guarded`)."""
    code = guarded(lambda: _run(build_parser().parse_args(argv)))
    if code:
        raise SystemExit(code)


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise MetaEvalError(f"--seeds: comma-separated whole numbers, got {text!r}") from None
    if any(s < 0 for s in seeds):
        raise MetaEvalError(f"--seeds: seeds are at least 0, got {text!r}")
    return seeds


def _run(args) -> int:
    for path in (args.out, getattr(args, "publish", None)):
        if path is not None:
            check_writable(path, f"the study's results in {path}")
    if args.study == "raters":
        for game in args.games.split(","):
            games.load(game)  # an unknown game is refused before any run, not failed run by run
            for replacement in args.replacements.split(","):
                EvolveConfig(game=game, replace=replacement, iterations=args.iterations)
        budget.check(budget.RUN_BYTES * len(RATERS) * args.seeds * len(args.games.split(",")),
                     f"{args.seeds} seeds of {len(RATERS)} raters", "use fewer seeds")
        table = raters_study(args.out, args.games.split(","), args.replacements.split(","), args.seeds,
                             args.iterations, args.every, args.jobs, args.learner_episodes, args.finished_only,
                             args.records)
        if args.publish:
            publish(args.out, args.publish)
        failed = 0 if args.finished_only else len(pd.read_csv(args.out / "failures.csv"))
        print(table_text(table, digits=4) if len(table) else "no comparison has a finished run to tabulate")
        say_written(args.out, sorted(args.out.glob("*.png")) + sorted(args.out.glob("*/*/*.png")))
        if failed:
            print(f"metaeval: {failed} run(s) failed (listed in {args.out / 'failures.csv'}); the tables cover "
                  "the others; run the same command again to retry them", file=sys.stderr)
        return 1 if failed else 0
    elif args.study == "check":
        table = check_study(args.records, args.out, args.games.split(","), args.replacements.split(","),
                            args.raters.split(","), _seeds(args.seeds), args.jobs, args.rewrite)
        print(table_text(table, digits=4))
        say_written(args.out)
        return 1 if not table.identical.all() and not args.rewrite else 0
    table = pbt_versus_random(args.out, args.seeds, args.steps, args.population, args.episodes_per_step,
                              args.matchmaking, args.workers)
    print(table_text(table, digits=4))
    say_written(args.out, run_figures(args.out))
    return 0


if __name__ == "__main__":
    main()
