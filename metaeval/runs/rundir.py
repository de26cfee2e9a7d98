"""Run directories: a small store that any population loop (evolve, compare, psro, ...) uses.

A run directory holds

- ``config.json``: ``{"kind": ..., "settings": {...}, "sessions": [...], ...}``. The
  kind names the loop that owns the directory; a loop refuses a directory of another
  kind. The settings that change results must agree for a run to be resumed.
- ``iterations.jsonl``: one record per line, appended and flushed one at a time.
  Every record is checked against the loop's :class:`RecordSchema` when read; a
  line that is not a valid record is reported with its line number and moved
  aside into ``iterations.damaged.jsonl``, and the valid records are all kept.
- checkpoints (see :mod:`metaeval.loops.checkpoint`) and the loop's result files.

Opening a run directory (:meth:`RunDirectory.open`) only reads and checks: the
directory is created, repaired and ``config.json`` written only when the loop
calls :meth:`RunDirectory.begin` and commits its first record, so a command
refused for any reason (or failing before its first record) writes nothing.
Every file is replaced atomically or appended one flushed line at a time, so a
killed process never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from metaeval.errors import MetaEvalError
from metaeval.runs.fileio import atomic_write

CONFIG = "config.json"
LOG = "iterations.jsonl"
DAMAGED = "iterations.damaged.jsonl"
STATE = "state.json"

log = logging.getLogger("metaeval")


# -- record schemas --------------------------------------------------------------
def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class FieldType:
    """A named check of one record field."""

    name: str
    check: Callable[[object], bool]


NUMBER = FieldType("a number", _is_number)
COUNT = FieldType("a non-negative integer", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
NUMBERS = FieldType("a list of numbers", lambda v: isinstance(v, list) and all(map(_is_number, v)))
LIST = FieldType("a list", lambda v: isinstance(v, list))
OBJECT = FieldType("an object", lambda v: isinstance(v, dict))
OPTIONAL_NUMBER = FieldType("a number or null", lambda v: v is None or _is_number(v))
OPTIONAL_NUMBERS = FieldType("a list of numbers or null", lambda v: v is None or NUMBERS.check(v))


@dataclass(frozen=True)
class RecordSchema:
    """Required keys of a loop's records and the type of each; ``iteration`` is always required."""

    fields: Mapping[str, FieldType] = field(default_factory=dict)

    def problem(self, record) -> str | None:
        """Why ``record`` is not a valid record, or None."""
        if not isinstance(record, dict):
            return f"not a record but {type(record).__name__}"
        for key, kind in {"iteration": COUNT, **self.fields}.items():
            if key not in record:
                return f"no {key!r}"
            if not kind.check(record[key]):
                return f"{key!r} is not {kind.name}"
        return None


@dataclass(frozen=True)
class LogReading:
    """The valid records of a log (by iteration, first of duplicates) and its bad lines."""

    records: list[dict]
    damaged: list[tuple[int, str, str]]  # (line number from 1, reason, the line as read)


def read_log(out: Path, schema: RecordSchema | None = None) -> LogReading:
    """Parse and check ``out/iterations.jsonl``; never raises for bad lines, only reports them."""
    path = Path(out) / LOG
    if not path.exists():
        return LogReading([], [])
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise MetaEvalError(f"cannot read {path}: {exc.strerror or exc}") from None
    schema = schema or RecordSchema()
    by_iteration, damaged = {}, []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            last = number == len(lines) and not text.endswith("\n")
            damaged.append((number, "cut off (the run was killed while writing it)" if last else "not JSON", line))
            continue
        reason = schema.problem(record)
        if reason is None and record["iteration"] in by_iteration:
            reason = f"a second record of iteration {record['iteration']}"
        if reason is not None:
            damaged.append((number, reason, line))
        else:
            by_iteration[record["iteration"]] = record
    return LogReading([by_iteration[i] for i in sorted(by_iteration)], damaged)


def read_records(out: Path, schema: RecordSchema | None = None) -> list[dict]:
    """The valid records of ``out``'s log, by iteration (bad lines are skipped, not moved)."""
    return read_log(out, schema).records


# -- JSON files ------------------------------------------------------------------
def write_json(path: Path, data) -> None:
    """Write JSON atomically (see :func:`metaeval.runs.fileio.atomic_write`)."""
    atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, sort_keys=True) + "\n"), mode="w")


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetaEvalError(f"cannot read {path}: {exc}") from None


def _write_lines(path: Path, records: list[dict]) -> None:
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    atomic_write(path, lambda f: f.write(text), mode="w")


def _check_writable(out: Path) -> None:
    """``out`` is a directory, or can be created as one, that this process may write in."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise MetaEvalError(f"output directory {out} is not writable: {existing} is not a writable directory")


def stored_kind(stored) -> str | None:
    """The kind of a ``config.json``'s content (also the layout written before kinds existed)."""
    if not isinstance(stored, dict):
        return None
    if isinstance(stored.get("kind"), str):
        return stored["kind"]
    return "evolve" if "config" in stored else "compare" if "compare" in stored else None


def stored_settings(stored) -> dict | None:
    """The settings of a ``config.json``'s content (also the layout written before kinds existed)."""
    if not isinstance(stored, dict):
        return None
    settings = stored.get("settings", stored.get("config"))
    legacy = stored.get("compare")
    if settings is None and isinstance(legacy, dict) and isinstance(legacy.get("base"), dict):
        per_run = ("rater", "seed")
        settings = {**{k: v for k, v in legacy["base"].items() if k not in per_run},
                    "raters": legacy.get("raters"), "seeds": legacy.get("seeds")}
    return settings if isinstance(settings, dict) else None


class RunDirectory:
    """One run directory of a named kind; see the module docstring.

    Use :meth:`open` to check a directory, :meth:`begin` before the loop writes
    anything (it creates the directory and moves damaged log lines aside), and
    :meth:`append` for each record (the first one also writes ``config.json``).
    """

    def __init__(self, path: Path, kind: str, settings: dict, header: dict, stored: dict | None,
                 schema: RecordSchema, log_reading: LogReading):
        self.path, self.kind, self.settings, self.schema = path, kind, settings, schema
        self._header, self._stored, self._reading = header, stored, log_reading
        self._created = self._begun = self._committed = False

    @classmethod
    def open(cls, path, kind: str, settings: dict, result_settings: Mapping[str, object],
             schema: RecordSchema | None = None, header: dict | None = None) -> RunDirectory:
        """Check that ``path`` is new or holds a run of ``kind`` whose result settings agree.

        Writes nothing. Raises :class:`MetaEvalError` naming the problem.

        Args:
            settings: everything that defines the run (stored in ``config.json``).
            result_settings: the subset that changes results; a stored run must agree.
            schema: what every record of this kind must hold.
            header: further fixed entries of ``config.json`` (descriptions of rules).
        """
        path = Path(path)
        _check_writable(path)
        config_path = path / CONFIG
        stored = None
        if config_path.exists():
            stored = read_json(config_path)
            found = stored_kind(stored)
            if found is None:
                raise MetaEvalError(f"{config_path} is not a metaeval run configuration; use another --out")
            if found != kind:
                raise MetaEvalError(f"{path} holds a {found!r} run, not {kind!r}; use another --out")
            previous = stored_settings(stored)
            if previous is None:
                raise MetaEvalError(f"{config_path} is damaged: it has no settings; use another --out")
            missing = [k for k in result_settings if k not in previous]
            if missing:
                raise MetaEvalError(f"{config_path} lacks {', '.join(missing)} (damaged, or written by an earlier "
                                  "metaeval); use another --out")
            differ = [k for k, v in result_settings.items() if previous[k] != v]
            if differ:
                raise MetaEvalError(
                    f"{path} holds a {kind} run with different {', '.join(differ)}; "
                    "use a new --out directory or the same settings to resume"
                )
        elif (path / LOG).exists() or (path / STATE).exists():
            raise MetaEvalError(f"{path} holds run files but no {CONFIG}; use another --out")
        schema = schema or RecordSchema()
        return cls(path, kind, settings, header or {}, stored, schema, read_log(path, schema))

    # -- reading -------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        """Whether a run of this kind was already stored here."""
        return self._stored is not None

    @property
    def records(self) -> list[dict]:
        """The valid records on disk (by iteration), as read by :meth:`open`."""
        return list(self._reading.records)

    @property
    def damaged_lines(self) -> list[tuple[int, str, str]]:
        return list(self._reading.damaged)

    # -- writing -------------------------------------------------------------------
    def begin(self) -> None:
        """Create the directory and move damaged log lines aside (once; no-op after)."""
        if self._begun:
            return
        self._created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetaEvalError(f"output directory {self.path} is not writable: {exc.strerror or exc}") from None
        damaged = self._reading.damaged
        if damaged:
            aside = self.path / DAMAGED
            with open(aside, "a") as f:
                f.write("".join(line + "\n" for _, _, line in damaged))
                f.flush()
                os.fsync(f.fileno())
            _write_lines(self.path / LOG, self._reading.records)
            where = "; ".join(f"line {n}: {reason}" for n, reason, _ in damaged[:5])
            more = f" and {len(damaged) - 5} more" if len(damaged) > 5 else ""
            log.warning(f"{self.path / LOG}: {len(damaged)} unreadable line(s) moved to {aside} "
                        f"({where}{more}); the {len(self._reading.records)} valid records are kept")
            self._reading = LogReading(self._reading.records, [])
        self._begun = True

    def write_config(self, session: dict) -> None:
        """Write ``config.json``: the settings, the header and every session so far plus ``session``."""
        self.begin()
        sessions = list(self._stored.get("sessions", [])) if self._stored else []
        write_json(self.path / CONFIG, {**self._header, "kind": self.kind, "settings": self.settings,
                                        "sessions": [*sessions, session]})
        self._committed = True

    @property
    def committed(self) -> bool:
        """Whether this session has written its entry to ``config.json``."""
        return self._committed

    def append(self, record: dict) -> None:
        """Append one record to the log and flush it to disk (call :meth:`write_config` first)."""
        if not self.committed:
            raise MetaEvalError("write_config() must come before the first record of a session")
        reason = self.schema.problem(record)
        if reason is not None:
            raise MetaEvalError(f"refusing to log an invalid {self.kind} record: {reason}")
        with open(self.path / LOG, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def resume(self, next_iteration: int) -> list[dict]:
        """The records before a checkpoint's ``next_iteration``, or an error naming the
        iterations the log lacks (the valid records stay on disk either way)."""
        logged = {r["iteration"]: r for r in self.records}
        missing = [i for i in range(next_iteration) if i not in logged]
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            raise MetaEvalError(
                f"{self.path / LOG} lacks iteration(s) {shown} before the checkpoint at {next_iteration}; "
                "its valid records are kept, but this run cannot resume: use a new --out"
            )
        return [logged[i] for i in range(next_iteration)]

    def log(self, record: dict, session: dict) -> None:
        """Append ``record`` (writing ``config.json`` with ``session`` first in a session),
        unless a valid record of its iteration is on disk already: one logged after the
        last checkpoint by a killed process, kept rather than rewritten."""
        if not self.committed:
            self.write_config(session)
        if all(r["iteration"] != record["iteration"] for r in self._reading.records):
            self.append(record)

    def rewrite(self, records: list[dict]) -> None:
        """Replace the log atomically with ``records`` (e.g. sorted after filling gaps)."""
        _write_lines(self.path / LOG, records)

    def discard_if_unused(self) -> None:
        """Remove the directory if this session created it and committed nothing to it."""
        if self._created and not self.committed:
            shutil.rmtree(self.path, ignore_errors=True)
