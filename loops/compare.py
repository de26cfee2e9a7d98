"""Compare raters as the population loop's selection rule: every rater × seed.

Each run is an ordinary (resumable) evolve run in ``OUT/RATER/seedS``; the
comparison adds ``comparison.csv`` (every iteration of every finished run),
``final.csv`` (final CCE gap per rater over seeds), ``paired.csv`` (each rater's
final gap minus uniform's, seed by seed, when uniform is among the raters) and
the figures. A run that fails does not stop the others: it is reported on stderr
and in ``failures.csv``, the tables and figures cover the runs that finished, and
running the same comparison again resumes unfinished runs and retries failed ones.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from metaeval.runs.progress import Progress
from metaeval.runs import rundir
from metaeval.errors import MetaEvalError
from metaeval.runs.fileio import atomic_write
from metaeval.runs.tensorboard import summary_writer
from metaeval.loops.evolve import RECORD_SCHEMA, Evolution, EvolveConfig, evolve

if TYPE_CHECKING:
    import pandas as pd

KIND = "compare"
"""The run-directory kind of a comparison."""

PER_RUN = ("rater", "seed")
"""Settings that vary between the runs of a comparison."""

FAILURES = "failures.csv"
FAILURE_COLUMNS = ["rater", "seed", "run_directory", "error"]


def run_directory(out: Path, config: EvolveConfig) -> Path:
    return Path(out) / config.rater / f"seed{config.seed}"


def _run(job: tuple[EvolveConfig, Path, bool | None, Path | None]) -> list[dict] | str:
    """One evolve run: its records, or the error that stopped it (as text)."""
    config, out, progress, tensorboard = job
    try:
        return evolve(config, out=out, progress=progress, tensorboard=tensorboard)
    except Exception as exc:  # any failure of one run is recorded, not fatal to the others
        return f"{type(exc).__name__}: {exc}"


def _indexed_run(item: tuple[int, tuple]) -> tuple[int, list[dict] | str]:
    index, job = item
    return index, _run(job)


PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal the kernel sends this process when its parent dies."""


def _worker_signals(parent: int) -> None:
    """Workers leave interrupts to the parent, which terminates them at once, and die with
    the parent however it ends (even by SIGKILL): no orphan goes on writing a run directory
    (its run resumes from its last checkpoint)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    else:  # no parent-death signal: a thread watches for the parent to go
        threading.Thread(target=_exit_without, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _exit_without(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def open_comparison(out, base: EvolveConfig, raters: list[str], seeds: list[int]) -> rundir.RunDirectory:
    """Check ``out`` for this comparison (and every run in it); writes nothing."""
    settings = {k: v for k, v in asdict(base).items() if k not in PER_RUN}
    shared = {k: v for k, v in base.result_settings().items() if k not in PER_RUN}
    run_dir = rundir.RunDirectory.open(out, KIND, settings={**settings, "raters": raters, "seeds": seeds},
                                       result_settings=shared)
    for rater in raters:
        for seed in seeds:
            config = replace(base, rater=rater, seed=seed)
            Evolution(config, out=run_directory(out, config)).close()  # refuses a conflicting run, writes nothing
    return run_dir


def compare(base: EvolveConfig, raters: list[str], seeds: list[int], out, jobs: int = 1,
            progress: bool | None = None, tensorboard=None):
    """Run ``base`` with every rater and seed, then tabulate and plot the finished runs.

    Args:
        base: settings shared by all runs (its rater and seed are replaced).
        raters: the raters compared.
        seeds: the seeds each rater runs with.
        out: the comparison's directory (one run directory per rater and seed inside).
        jobs: runs executed at once in separate processes; each then builds its
            meta-games in-process, so ``jobs > 1`` requires ``base.workers == 1``.
        progress: None (a bar on a terminal), True or False.
        tensorboard: a directory for TensorBoard event files, one run per rater and seed in
            ``TENSORBOARD/RATER/seedS`` ([`metaeval.runs.tensorboard`][metaeval.runs.tensorboard]).

    Returns:
        ``(comparison, final, failures)`` DataFrames; ``failures`` lists the runs that
        failed (rater, seed, run directory, error), also written to ``failures.csv``.
    """
    if not raters or not seeds:
        raise MetaEvalError("compare needs at least one rater and one seed")
    for name, values in (("rater", raters), ("seed", seeds)):
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise MetaEvalError(f"the {name}s of a comparison must differ: {', '.join(repeated)} given twice")
    if jobs < 1:
        raise MetaEvalError(f"jobs must be at least 1, got {jobs}")
    if jobs > 1 and base.workers > 1:
        raise MetaEvalError("use either several jobs or several workers per run, not both")
    out = Path(out)
    if tensorboard is not None:
        summary_writer()  # fails before any run starts if tensorboardX is missing
    run_dir = open_comparison(out, base, raters, seeds)
    try:
        run_dir.write_config({"command": sys.argv})
        configs = [replace(base, rater=r, seed=s) for r in raters for s in seeds]
        outcomes = {(c.rater, c.seed): outcome for c, outcome in run_all(configs, out, jobs, progress,
                                                                         desc=f"compare {base.game}",
                                                                         tensorboard=tensorboard)}
        return _tabulate(out, base, configs, outcomes)
    finally:
        run_dir.close()


def _tabulate(out: Path, base: EvolveConfig, configs: list[EvolveConfig], outcomes: dict):
    """``failures.csv`` and the tables and figures of the finished runs; see [`compare`][metaeval.loops.compare.compare]."""
    import pandas as pd  # tables (pandas, matplotlib) only once the runs are done

    runs: dict[str, dict[int, list[dict]]] = {}
    failed = []
    for config in configs:  # in the order asked for
        outcome = outcomes[config.rater, config.seed]
        if isinstance(outcome, str):
            failed.append(failure(out, config, outcome))
        else:
            runs.setdefault(config.rater, {})[config.seed] = outcome
    failures = pd.DataFrame(failed, columns=FAILURE_COLUMNS)
    write_failures(out, failures)
    if not runs:
        raise MetaEvalError(f"every run of the comparison failed; see {out / FAILURES}")
    return (*write_comparison(out, runs, title=title_of(base)), failures)


def run_all(configs: list[EvolveConfig], out: Path, jobs: int, progress: bool | None, desc: str,
            tensorboard: Path | None = None):
    """Run every config in ``run_directory(out, config)`` (its event files, if asked for, in
    ``run_directory(tensorboard, config)``), ``jobs`` at once, yielding
    ``(config, records or error text)`` as each run ends (so a slow run holds back no
    other's result); a failure is also said on stderr as soon as it happens."""
    bar = Progress(len(configs), desc, "run", progress, each=True)

    def events(config):
        return None if tensorboard is None else run_directory(tensorboard, config)

    try:
        if jobs == 1:
            for config in configs:
                outcome = _run((config, run_directory(out, config), progress, events(config)))
                _report(outcome, config, out, bar)
                yield config, outcome
        else:
            # On an interrupt or an error, leaving the block terminates the workers at once:
            # no queued run starts, and the runs in flight resume from their last checkpoint.
            with multiprocessing.Pool(jobs, initializer=_worker_signals, initargs=(os.getpid(),)) as pool:
                work = [(i, (c, run_directory(out, c), False, events(c))) for i, c in enumerate(configs)]
                for i, outcome in pool.imap_unordered(_indexed_run, work):
                    _report(outcome, configs[i], out, bar)
                    yield configs[i], outcome
                # Done: let the workers exit by themselves. Terminating them (what leaving the
                # block does) can signal a worker still starting, before it has set its signal
                # handlers; it then hung on the task queue's lock and the pool's join with it.
                pool.close()
                pool.join()
    finally:
        bar.close()


def _report(outcome, config: EvolveConfig, out: Path, bar) -> None:
    """Say on stderr (above the progress bar) that a run failed, as soon as it does."""
    bar.advance(rater=config.rater, seed=config.seed, outcome="failed" if isinstance(outcome, str) else "done")
    if isinstance(outcome, str):
        bar.write(f"metaeval: run {config.rater} seed {config.seed} failed "
                   f"({run_directory(out, config)}): {outcome}")


def failure(out: Path, config: EvolveConfig, error: str) -> dict:
    """A row of ``failures.csv``."""
    return {"rater": config.rater, "seed": config.seed, "run_directory": str(run_directory(out, config)),
            "error": error}


def write_failures(out: Path, failures: pd.DataFrame) -> None:
    """``failures.csv`` listing the failed runs; removed when none failed."""
    path = Path(out) / FAILURES
    if failures.empty:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, lambda f: failures.to_csv(f, index=False), mode="w")


def title_of(base: EvolveConfig) -> str:
    """The figures' title: game and replacement."""
    return f"{base.game}, {base.replace} replacements"


def write_comparison(out: Path, runs, title: str = ""):
    """Tables and figures of a comparison's finished runs (see the module docstring).

    Args:
        out: the comparison's directory.
        runs: rater -> seed -> the run's records.
        title: the figures' title.

    Returns:
        The files written.
    """
    from metaeval.runs import reports  # pandas: only once the runs are done

    return write_comparison_frame(out, reports.comparison_frame(runs), title)


def write_comparison_frame(out: Path, comparison: pd.DataFrame, title: str = ""):
    """As [`write_comparison`][metaeval.loops.compare.write_comparison], from a ``reports.comparison_frame`` table."""
    from metaeval.runs import reports
    from metaeval.viz import plots  # matplotlib: only once the runs are done

    Path(out).mkdir(parents=True, exist_ok=True)
    final = reports.final_gaps(comparison)
    comparison.to_csv(Path(out) / "comparison.csv", index=False)
    final.to_csv(Path(out) / "final.csv", index=False)
    if "uniform" in set(comparison.rater) and comparison.rater.nunique() > 1:
        reports.paired_differences(comparison).to_csv(Path(out) / "paired.csv", index=False)
    plots.plot_comparison(out, comparison, title=title)
    return comparison, final


def load_comparison(out: Path):
    """Re-read the finished runs of a comparison directory (for re-plotting); records are checked.

    Args:
        out: the comparison's directory.

    Returns:
        The runs, as [`write_comparison`][metaeval.loops.compare.write_comparison] takes them, and the
        comparison's base configuration (an ``EvolveConfig``).
    """
    path = Path(out) / rundir.CONFIG
    stored = rundir.read_json(path)
    settings = rundir.stored_settings(stored) if rundir.stored_kind(stored) == KIND else None
    if settings is None:
        raise MetaEvalError(f"{path} is not a comparison configuration")
    try:
        raters, seeds = list(settings["raters"]), [int(s) for s in settings["seeds"]]
        base = EvolveConfig(**{k: v for k, v in settings.items() if k not in ("raters", "seeds")})
    except (KeyError, TypeError, ValueError) as exc:
        raise MetaEvalError(f"{path} is damaged ({exc!r}); rerun the comparison into a new --out") from None
    runs = {}
    for rater in raters:
        for seed in seeds:
            records = rundir.read_records(run_directory(out, replace(base, rater=rater, seed=seed)), RECORD_SCHEMA)
            if len(records) >= base.iterations:  # finished runs only, as compare() tabulates
                runs.setdefault(rater, {})[seed] = records
    if not runs:
        raise MetaEvalError(f"{out} has no finished runs to plot")
    return runs, base
