"""A run directory on disk: config, append-only iteration log, checkpoints.

Everything is written so that a killed process never leaves a half-written
file behind: JSON files are replaced atomically, the iteration log is appended
one flushed line at a time, and a checkpoint becomes current only when the
small ``state.json`` that names it is replaced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from metaeval.errors import MetaEvalError
from metaeval.fileio import atomic_write

CONFIG = "config.json"
LOG = "iterations.jsonl"
STATE = "state.json"


def prepare(out: Path) -> Path:
    """Create ``out`` (and parents) and check that it is writable."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise MetaEvalError(f"output directory {out} is not writable: {exc.strerror or exc}") from None
    return out


def write_json(path: Path, data) -> None:
    """Write JSON atomically (see :func:`metaeval.fileio.atomic_write`)."""
    atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, sort_keys=True) + "\n"), mode="w")


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MetaEvalError(f"cannot read {path}: {exc}") from None


def append_record(out: Path, record: dict) -> None:
    """Append one iteration record to the log and flush it to disk."""
    with open(Path(out) / LOG, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(out: Path) -> list[dict]:
    """The iteration log; a torn last line (killed mid-write) is ignored."""
    path = Path(out) / LOG
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def truncate_records(out: Path, keep_below: int) -> None:
    """Drop log records of iterations >= ``keep_below`` (work past the last checkpoint)."""
    records = [r for r in read_records(out) if r["iteration"] < keep_below]
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    atomic_write(Path(out) / LOG, lambda f: f.write(text), mode="w")
