"""Checkpoints of a population run: what a resumed run needs to continue exactly.

A checkpoint is the population to evaluate next, the last meta-game (so the next
build is incremental exactly as in an uninterrupted run), the loop's RNG state and
the population the last record rates (what ``population.npz`` holds when the run ends).
Its files become current only when ``state.json`` naming them (with their checksums) is
replaced atomically, so a run killed at any instant resumes from the last whole iteration;
a checkpoint whose files are missing or changed is refused by `load` naming the file
(and the run restarts from iteration 0: `metaeval.runs.rundir.RunDirectory.resume`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metaeval import spiel
from metaeval.runs import checksums, rundir
from metaeval.errors import DamagedFileError
from metaeval.game import MetaGame


METAGAME = "metagame.npz"
"""The last meta-game of a sampled run (entries, standard errors, episode counts)."""


@dataclass(frozen=True)
class Checkpoint:
    next_iteration: int
    population: spiel.Population
    metagame: MetaGame
    rng_state: dict
    rated: spiel.Population


def save(out: Path, next_iteration: int, population, metagame: MetaGame,
         rng: np.random.Generator, rated, tables: bool = True) -> None:
    """Write the checkpoint for ``next_iteration`` and drop the previous one; ``rated``: the
    population the last record rates; ``tables=False`` (sampled mode) keeps the policies as
    objects (see [`metaeval.spiel.Population.save`][metaeval.spiel.Population.save])."""
    tag = f"{next_iteration:06d}"
    files = {"population": f"checkpoint-population-{tag}.npz",
             "metagame": f"checkpoint-metagame-{tag}.npz",
             "rated": f"checkpoint-rated-{tag}.npz"}
    population.save(out / files["population"], tables=tables)
    metagame.save(out / files["metagame"])
    rated.save(out / files["rated"], tables=tables)
    rundir.write_json(out / rundir.STATE, {"next_iteration": next_iteration, "rng": rng.bit_generator.state,
                                           **files, "checksums": checksums.of_files(out, files.values())})
    for old in out.glob("checkpoint-*.npz"):
        if old.name not in files.values():
            old.unlink()


def load(out: Path) -> Checkpoint | None:
    """The current checkpoint of the run in ``out``, or None before the first one; a
    [`DamagedFileError`][metaeval.errors.DamagedFileError] naming the file at fault if it is damaged."""
    path = out / rundir.STATE
    if not path.exists():
        return None
    state = rundir.read_json(path, sealed=True)
    try:
        names = {key: state[key] for key in ("population", "metagame", "rated")}
        next_iteration, rng_state = int(state["next_iteration"]), state["rng"]
    except (KeyError, TypeError, ValueError) as exc:
        raise DamagedFileError(f"{path} does not describe a checkpoint ({exc!r})") from None
    checksums.verify(out, state.get("checksums"), path)
    return Checkpoint(next_iteration=next_iteration, population=spiel.Population.load(out / names["population"]),
                      metagame=MetaGame.load(out / names["metagame"]), rng_state=rng_state,
                      rated=spiel.Population.load(out / names["rated"]))


def write_results(out: Path, run_dir, records: list[dict], rated, evaluator, config, frame) -> None:
    """What a loop leaves in its run directory when it ends: the finished log, the population
    the last record rates (``population.npz``), in sampled mode the last meta-game with its
    standard errors and episode counts, and the summary table ``frame(records, metagame)``
    (``metagame`` describes a sampled meta-game, None for an exact one)."""
    sampled = config.mode == "sampled"
    run_dir.finish_log(records)
    rated.save(out / "population.npz", tables=not sampled)
    if sampled:
        evaluator.built_metagame.save(out / METAGAME)
    frame(records, config.metagame if sampled else None).to_csv(out / "summary.csv", index=False)
