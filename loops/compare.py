"""Compare raters as the population loop's selection rule: every rater × seed.

Each run is an ordinary (resumable) evolve run in ``OUT/RATER/seedS``; the
comparison adds ``comparison.csv`` (every iteration of every run),
``final.csv`` (final CCE gap per rater over seeds), ``paired.csv`` (each rater's
final gap minus uniform's, seed by seed, when uniform is among the raters) and
the figures.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from tqdm.auto import tqdm

from metaeval import plots, reports, rundir
from metaeval.errors import MetaEvalError
from metaeval.loops.evolve import EvolveConfig, evolve


def run_directory(out: Path, config: EvolveConfig) -> Path:
    return Path(out) / config.rater / f"seed{config.seed}"


def _run(job: tuple[EvolveConfig, Path]) -> list[dict]:
    config, out = job
    return evolve(config, out=out, progress=False)


def compare(base: EvolveConfig, raters: list[str], seeds: list[int], out, jobs: int = 1,
            progress: bool | None = None):
    """Run ``base`` with every rater and seed, then tabulate and plot them together.

    Args:
        base: settings shared by all runs (its rater and seed are replaced).
        jobs: runs executed at once in separate processes; each then builds its
            meta-games in-process, so ``jobs > 1`` requires ``base.workers == 1``.

    Returns:
        ``(comparison, final)`` DataFrames.
    """
    if not raters or not seeds:
        raise MetaEvalError("compare needs at least one rater and one seed")
    if jobs < 1:
        raise MetaEvalError(f"jobs must be at least 1, got {jobs}")
    if jobs > 1 and base.workers > 1:
        raise MetaEvalError("use either several jobs or several workers per run, not both")
    out = rundir.prepare(Path(out))
    configs = [replace(base, rater=r, seed=s) for r in raters for s in seeds]
    rundir.write_json(out / rundir.CONFIG, {"compare": {"base": asdict(base), "raters": raters, "seeds": seeds}})
    work = [(c, run_directory(out, c)) for c in configs]
    bar = tqdm(total=len(work), desc=f"compare {base.game}", unit="run",
               disable=None if progress is None else not progress)
    if jobs == 1:
        results = []
        for job in work:
            results.append(evolve(job[0], out=job[1], progress=progress))
            bar.update()
    else:
        with ProcessPoolExecutor(jobs) as pool:
            results = []
            for records in pool.map(_run, work):
                results.append(records)
                bar.update()
    bar.close()

    runs: dict[str, dict[int, list[dict]]] = {}
    for config, records in zip(configs, results):
        runs.setdefault(config.rater, {})[config.seed] = records
    return write_comparison(out, runs, title=base.game)


def write_comparison(out: Path, runs, title: str = ""):
    comparison = reports.comparison_frame(runs)
    final = reports.final_gaps(comparison)
    comparison.to_csv(Path(out) / "comparison.csv", index=False)
    final.to_csv(Path(out) / "final.csv", index=False)
    if "uniform" in runs and len(runs) > 1:
        reports.paired_differences(comparison).to_csv(Path(out) / "paired.csv", index=False)
    plots.plot_comparison(out, comparison, title=title)
    return comparison, final


def load_comparison(out: Path):
    """Re-read the runs of a comparison directory (for re-plotting)."""
    spec = rundir.read_json(Path(out) / rundir.CONFIG)["compare"]
    base = EvolveConfig(**spec["base"])
    runs = {
        rater: {seed: rundir.read_records(run_directory(out, replace(base, rater=rater, seed=seed)))
                for seed in spec["seeds"]}
        for rater in spec["raters"]
    }
    return runs, base
