"""The study's records: one small table per finished run, kept apart from the run directories.

A run directory holds checkpoints, logs and figures (about 800 kB per run of 300
iterations); what the study tabulates is the run's summary (``reports.summary_frame``:
one row per iteration). The records keep just that, gzipped CSV with full float
precision (about 20 kB a run), in ``RECORDS/RATER/seedS.csv.gz`` beside a
``settings.json`` of the settings that change results and the number of iterations,
and ``RECORDS/RATER/seedS.build.json``: the build of each session of the run
(`metaeval.runs.build.build_versions`), so a check can tell a run that differs on
the same build from one made on another.
Being small, the records can be kept with the published tables, so a study continues
where it stopped on another machine, or is re-tabulated, without rerunning finished
runs. A record is a function of the settings alone, except for its ``seconds`` column
(wall-clock time).
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval.runs import reports
from metaeval.runs import rundir
from metaeval.errors import MetaEvalError
from metaeval.runs.fileio import atomic_write
from metaeval.loops.compare import PER_RUN, run_all, run_directory
from metaeval.loops.evolve import EvolveConfig

SETTINGS = "settings.json"
# mtime 0: the same table gives the same bytes.
_GZIP = {"method": "gzip", "mtime": 0}


class RunRecords:
    """The records of one game and replacement's runs (every rater and seed) in ``path``."""

    def __init__(self, path, base: EvolveConfig):
        self.path = Path(path)
        self.settings = {**{k: v for k, v in base.result_settings().items() if k not in PER_RUN},
                         "iterations": base.iterations}
        stored = self.path / SETTINGS
        if stored.exists() and rundir.read_json(stored) != json.loads(json.dumps(self.settings)):
            raise MetaEvalError(f"{self.path} holds the records of runs with other settings than these: "
                                f"{rundir.read_json(stored)} (asked for {self.settings})")

    def file(self, rater: str, seed: int) -> Path:
        return self.path / rater / f"seed{seed}.csv.gz"

    def build_file(self, rater: str, seed: int) -> Path:
        return self.path / rater / f"seed{seed}.build.json"

    def has(self, rater: str, seed: int) -> bool:
        return self.file(rater, seed).exists()

    def write(self, rater: str, seed: int, summary: pd.DataFrame, builds: list[dict]) -> None:
        """Keep a finished run's summary and the ``builds`` of its sessions (each file
        atomically, the summary last: a partial record is never left)."""
        if len(summary) < self.settings["iterations"]:
            raise MetaEvalError(f"run {rater} seed {seed} has {len(summary)} of {self.settings['iterations']} "
                                "iterations: only finished runs are recorded")
        if not (self.path / SETTINGS).exists():
            self.path.mkdir(parents=True, exist_ok=True)
            rundir.write_json(self.path / SETTINGS, self.settings)
        path = self.file(rater, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        rundir.write_json(self.build_file(rater, seed), builds)
        atomic_write(path, lambda f: summary.to_csv(f, index=False, compression=_GZIP))

    def same_build(self, rater: str, seed: int, build: dict) -> bool | None:
        """Whether every session of the recorded run ran on ``build`` (None: the record,
        made by an earlier metaeval, does not say)."""
        path = self.build_file(rater, seed)
        if not path.exists():
            return None
        return all(recorded == build for recorded in rundir.read_json(path))

    @classmethod
    def at(cls, path) -> RunRecords:
        """The records in ``path``, with the settings stored there."""
        settings = dict(rundir.read_json(Path(path) / SETTINGS))
        return cls(path, EvolveConfig(**settings))

    def read(self, rater: str, seed: int) -> pd.DataFrame:
        try:
            return pd.read_csv(self.file(rater, seed), compression="gzip")
        except (OSError, EOFError, ValueError) as exc:
            raise MetaEvalError(f"record {self.file(rater, seed)} is unreadable ({exc}); delete it and rerun "
                                "the study to redo that run") from None

    def comparison(self, raters: list[str], seeds: list[int]) -> pd.DataFrame | None:
        """The recorded runs as ``reports.comparison_frame`` would give them (raters and
        seeds in the order asked for), or None if none is recorded."""
        frames = [self.read(r, s).assign(rater=r, seed=s) for r in raters for s in seeds if self.has(r, s)]
        if not frames:
            return None
        table = pd.concat(frames, ignore_index=True)
        return table[["rater", "seed", *table.columns[:-2]]]


def check_records(records: RunRecords, raters: list[str], seeds: list[int], out: Path, jobs: int,
                  rewrite: bool = False) -> pd.DataFrame:
    """Rerun the recorded runs of ``raters`` x ``seeds`` afresh in ``out`` and compare each
    summary with its record, every column but ``seconds``: one row per run, with
    ``identical`` (bit for bit, as the record's CSV is read back), the largest absolute
    difference, the first iteration that differs and ``same_build`` (whether the record
    was made on the rerun's build: see `RunRecords.same_build`), in the order asked for. With
    ``rewrite``, a differing record is replaced by the rerun's summary (after a deliberate
    change of results)."""
    base = EvolveConfig(**records.settings)
    configs = [replace(base, rater=r, seed=s) for r in raters for s in seeds if records.has(r, s)]
    if any(run_directory(out, c).exists() for c in configs):  # a run there would resume, not rerun
        raise MetaEvalError(f"{out} already holds runs; a check reruns afresh, in a new directory")
    rows = {}
    for config, outcome in run_all(configs, Path(out), jobs, progress=None, desc=f"checking {records.path}"):
        row = {"rater": config.rater, "seed": config.seed}
        if isinstance(outcome, str):
            rows[config.rater, config.seed] = {**row, "identical": False, "error": outcome}
            continue
        summary, builds = reports.summary_frame(outcome), session_builds(run_directory(out, config))
        row["same_build"] = records.same_build(config.rater, config.seed, builds[-1])
        fresh = pd.read_csv(io.StringIO(summary.to_csv(index=False))).drop(columns="seconds")
        recorded = records.read(config.rater, config.seed).drop(columns="seconds")
        identical = fresh.equals(recorded)
        if list(fresh.columns) == list(recorded.columns) and len(fresh) == len(recorded):
            numeric = fresh.select_dtypes("number").columns
            gaps = np.abs(fresh[numeric].to_numpy() - recorded[numeric].to_numpy())
            differing = np.flatnonzero(~(fresh.isna() & recorded.isna() | (fresh == recorded)).all(axis=1))
            row.update(max_difference=float(np.nanmax(gaps)),
                       first_difference=int(fresh.iteration.iloc[differing[0]]) if len(differing) else None)
        if rewrite and not identical:
            records.write(config.rater, config.seed, summary, builds)
        rows[config.rater, config.seed] = {**row, "identical": identical, "error": ""}
    columns = ["rater", "seed", "identical", "max_difference", "first_difference", "same_build", "error"]
    return pd.DataFrame([rows[c.rater, c.seed] for c in configs], columns=columns)


def session_builds(run_dir: Path) -> list[dict]:
    """The build of each session of the run in ``run_dir``, from its ``config.json``."""
    return [session["versions"] for session in rundir.read_json(Path(run_dir) / rundir.CONFIG)["sessions"]]
