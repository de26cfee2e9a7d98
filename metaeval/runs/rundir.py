"""Run directories: a small store that any population loop (evolve, compare, psro, ...) uses.

A run directory holds

- ``config.json``: ``{"kind": ..., "settings": {...}, "sessions": [...], ...}``. The
  kind names the loop that owns the directory; a loop refuses a directory of another
  kind. The settings that change results must agree for a run to be resumed.
- ``iterations.jsonl``: one record per line, appended and flushed one at a time, each
  with its checksum (`metaeval.runs.checksums`). Every record is checked against
  the loop's `RecordSchema` and its checksum when read; a line that is not a
  valid record (garbage, cut off, a missing key, changed since it was written) is
  reported with its line number and moved aside into ``iterations.damaged.jsonl``, and
  the valid records are all kept.
- checkpoints (see `metaeval.loops.checkpoint`) and the loop's result files.

The JSON files carry their checksum too, and ``state.json`` the checksums of the
checkpoint files it names: a file changed after it was written is detected, never used.

Opening a run directory (`RunDirectory.open`) only reads and checks: the
directory is created, repaired and ``config.json`` written only when the loop
calls `RunDirectory.begin` and commits its first record, so a command
refused for any reason (or failing before its first record) writes nothing. A
non-empty directory that holds no run is refused (it holds someone's files).
Every file is replaced atomically or appended one flushed line at a time, so a
killed process never leaves a half-written file behind.

One process at a time writes a run directory: the directory itself is locked
(`lock_directory`, an OS lock on the directory, so no lock file is written)
from `RunDirectory.open` (or, for a directory that does not exist yet, from
`RunDirectory.begin`) until `RunDirectory.close`; the kernel releases
it when the process dies, so a run killed with SIGKILL resumes at once.

On resume (`RunDirectory.resume`) a loop continues from its checkpoint if the
checkpoint is intact and the log holds every record before it, else from iteration 0;
the records on disk at or past that point are checked against their recomputation
(`RunDirectory.commit`), so an edited or stale record is detected, never kept.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from metaeval.errors import DamagedFileError, MetaEvalError
from metaeval.runs import checksums
from metaeval.runs.fileio import atomic_write, check_writable, temporary_path
from metaeval.runs.tensorboard import EventLog

CONFIG = "config.json"
LOG = "iterations.jsonl"
DAMAGED = "iterations.damaged.jsonl"
STATE = "state.json"
RAY_LOGS = "ray"
"""Where an embedded Ray keeps its logs in a run directory (possibly before its first record)."""
UNFINISHED_CONFIG = temporary_path(CONFIG).name
"""What a process killed while writing the first ``config.json`` leaves behind: the directory
holds no run yet, and `RunDirectory.begin` removes it."""
MEASUREMENTS = ("seconds", "memory")
"""The record fields of wall-clock timings and resident memory, which vary between identical runs."""

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
        plain = checksums.unsealed(record) if isinstance(record, dict) else record
        reason = schema.problem(plain) or checksums.problem(record)
        if reason is None and record["iteration"] in by_iteration:
            reason = f"a second record of iteration {record['iteration']}"
        if reason is not None:
            damaged.append((number, reason, line))
        else:
            by_iteration[record["iteration"]] = plain
    return LogReading([by_iteration[i] for i in sorted(by_iteration)], damaged)


def read_records(out: Path, schema: RecordSchema | None = None) -> list[dict]:
    """The valid records of ``out``'s log, by iteration (bad lines are skipped, not moved)."""
    return read_log(out, schema).records


# -- JSON files ------------------------------------------------------------------
def write_json(path: Path, data) -> None:
    """Write JSON atomically (see `metaeval.runs.fileio.atomic_write`); an object
    with its checksum (`metaeval.runs.checksums.seal`)."""
    if isinstance(data, dict):
        data = checksums.seal(data)
    atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, sort_keys=True) + "\n"), mode="w")


def read_json(path: Path, sealed: bool = False):
    """The JSON value `write_json` wrote to ``path``, without its checksum. A checksum
    is checked wherever there is one; ``sealed``: there must be one. A file that is missing,
    unreadable or changed raises [`DamagedFileError`][metaeval.errors.DamagedFileError] naming it."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DamagedFileError(f"{path} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedFileError(f"cannot read {path}: {exc}") from None
    if not (sealed or isinstance(data, dict) and checksums.KEY in data):
        return data
    reason = checksums.problem(data)
    if reason is not None:
        raise DamagedFileError(f"{path} is damaged: {reason}")
    return checksums.unsealed(data)


def record_line(record: dict) -> str:
    """``record`` as a line of ``iterations.jsonl``: sorted keys and its checksum."""
    return json.dumps(checksums.seal(record), sort_keys=True) + "\n"


def _write_lines(path: Path, records: list[dict]) -> None:
    text = "".join(map(record_line, records))
    atomic_write(path, lambda f: f.write(text), mode="w")


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


def without_timings(record: dict) -> dict:
    """``record`` without its wall-clock timings and memory measurements."""
    return {k: v for k, v in record.items() if k not in MEASUREMENTS}


class DirectoryLock:
    """An exclusive ``flock`` on a directory, held until `release` (or the process ends)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.release()
            raise MetaEvalError(f"{self.path} is in use: another metaeval run writes to it; wait for it to end "
                                "or use another --out") from None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the lock
            self._fd = None

    __del__ = release


def lock_directory(path) -> DirectoryLock:
    """Lock the existing directory ``path`` for this process, or raise [`MetaEvalError`][metaeval.errors.MetaEvalError]
    if another process holds it. The lock is released by `DirectoryLock.release`, when
    the lock is garbage-collected, or by the kernel when the process dies."""
    return DirectoryLock(path)


def _stored_run(path: Path, kind: str, result_settings: Mapping[str, object]) -> dict | None:
    """The ``config.json`` content of the run of ``kind`` in ``path`` (None if there is none),
    or [`MetaEvalError`][metaeval.errors.MetaEvalError] if ``path`` holds another kind of run, one with other result
    settings, or someone's files."""
    config_path = path / CONFIG
    stored = None
    if config_path.exists():
        try:
            stored = read_json(config_path)
        except DamagedFileError as exc:  # the run's definition: nothing to recover it from
            raise DamagedFileError(f"{exc}; use another --out") from None
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
            shown = "; ".join(f"{k} {previous[k]!r} there, {result_settings[k]!r} here" for k in differ)
            raise MetaEvalError(
                f"{path} holds a {kind} run with different {', '.join(differ)} ({shown}); "
                "use a new --out directory or the same settings to resume"
            )
    elif (path / LOG).exists() or (path / STATE).exists():
        raise MetaEvalError(f"{config_path} is missing, though {path} holds run files; use another --out")
    elif path.is_dir() and any(p.name not in (RAY_LOGS, UNFINISHED_CONFIG) for p in path.iterdir()):
        raise MetaEvalError(f"{path} is not empty and holds no metaeval run (no {config_path}); "
                            "use a new or empty --out")
    return stored


class RunDirectory:
    """One run directory of a named kind; see the module docstring.

    Use `open` to check a directory, `begin` before the loop writes
    anything (it creates the directory and moves damaged log lines aside), and
    `append` for each record (the first one also writes ``config.json``).
    """

    def __init__(self, path: Path, kind: str, settings: dict, header: dict, stored: dict | None,
                 schema: RecordSchema, log_reading: LogReading):
        self.path, self.kind, self.settings, self.schema = path, kind, settings, schema
        self._header, self._stored, self._reading = header, stored, log_reading
        self._created = self._begun = self._committed = self._restarted = False
        self._lock: DirectoryLock | None = None
        self._on_disk: dict[int, dict] = {}  # records at or past the resume point, to check
        self._events = None  # the run's TensorBoard event log, when asked for

    @classmethod
    def open(cls, path, kind: str, settings: dict, result_settings: Mapping[str, object],
             schema: RecordSchema | None = None, header: dict | None = None,
             tensorboard: Path | str | None = None) -> RunDirectory:
        """Check that ``path`` is new or holds a run of ``kind`` whose result settings agree.

        Writes nothing. Raises [`MetaEvalError`][metaeval.errors.MetaEvalError] naming the problem.

        Args:
            settings: everything that defines the run (stored in ``config.json``).
            result_settings: the subset that changes results; a stored run must agree.
            schema: what every record of this kind must hold.
            header: further fixed entries of ``config.json`` (descriptions of rules).
            tensorboard: a directory for TensorBoard event files of the records
                ([`metaeval.runs.tensorboard`][metaeval.runs.tensorboard]; None: none).
        """
        path = Path(path)
        check_writable(path, f"the output directory {path}")
        lock = lock_directory(path) if path.is_dir() else None  # before reading what another writer may change
        try:
            stored = _stored_run(path, kind, result_settings)
            schema = schema or RecordSchema()
            run = cls(path, kind, settings, header or {}, stored, schema, read_log(path, schema))
            if tensorboard is not None:
                run._events = EventLog(tensorboard)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        run._lock = lock
        return run

    def close(self) -> None:
        """Release the directory's lock and close the event log; this object writes no more."""
        if self._events is not None:
            self._events.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # -- reading -------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        """Whether a run of this kind was already stored here."""
        return self._stored is not None

    @property
    def records(self) -> list[dict]:
        """The valid records on disk (by iteration), as read by `open`."""
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
        if self._lock is None:
            self._lock = lock_directory(self.path)
            if self._stored is None and any(p.name in (CONFIG, LOG, STATE) for p in self.path.iterdir()):
                raise MetaEvalError(f"another metaeval process began a run in {self.path} meanwhile; "
                                    "run the command again to resume it")
        (self.path / UNFINISHED_CONFIG).unlink(missing_ok=True)
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

    def _check_locked(self) -> None:
        if self._lock is None:
            raise MetaEvalError(f"{self.path} was closed by this process; open it again to write")

    def write_config(self, session: dict) -> None:
        """Write ``config.json``: the settings, the header and every session so far plus ``session``."""
        self.begin()
        self._check_locked()
        sessions = list(self._stored.get("sessions", [])) if self._stored else []
        write_json(self.path / CONFIG, {**self._header, "kind": self.kind, "settings": self.settings,
                                        "sessions": [*sessions, session]})
        self._committed = True

    @property
    def committed(self) -> bool:
        """Whether this session has written its entry to ``config.json``."""
        return self._committed

    def append(self, record: dict) -> None:
        """Append one record to the log and flush it to disk (call `write_config` first)."""
        if not self.committed:
            raise MetaEvalError("write_config() must come before the first record of a session")
        self._check_locked()
        reason = self.schema.problem(record)
        if reason is not None:
            raise MetaEvalError(f"refusing to log an invalid {self.kind} record: {reason}")
        with open(self.path / LOG, "a") as f:
            f.write(record_line(record))
            f.flush()
            os.fsync(f.fileno())

    def resume(self, load_checkpoint: Callable[[], object | None]) -> tuple[int, object | None]:
        """The iteration to continue from and the checkpoint to continue with (None: from 0).

        ``load_checkpoint()`` returns the run's checkpoint (an object with ``next_iteration``),
        or None before the first one. A damaged checkpoint ([`DamagedFileError`][metaeval.errors.DamagedFileError]) is named
        in a warning and the run restarts from iteration 0, as it does when the log lacks a
        record before the checkpoint (`resume_from`)."""
        checkpoint = None
        if self.exists:
            try:
                checkpoint = load_checkpoint()
            except DamagedFileError as exc:
                log.warning(f"{exc}: the checkpoint is not used; the run restarts from iteration 0, recomputes "
                            f"the records and checks the {len(self.records)} on disk against their recomputation")
        start = self.resume_from(None if checkpoint is None else checkpoint.next_iteration)
        return start, checkpoint if start else None

    def resume_from(self, checkpoint_iteration: int | None) -> int:
        """The iteration to continue from: the checkpoint's if the log holds every record
        before it, else 0 (the only earlier consistent state; a warning names the missing
        iterations). The records on disk at or past it are kept to be checked by `commit`."""
        logged = {r["iteration"]: r for r in self.records}
        start = checkpoint_iteration or 0
        missing = [i for i in range(start) if i not in logged]
        if missing:
            log.warning(
                f"{self.path / LOG} lacks iteration(s) {_ranges(missing)} before the checkpoint at "
                f"{start}; the run restarts from iteration 0, recomputes them and checks the {len(logged)} "
                "records on disk against their recomputation"
            )
            start, self._restarted = 0, True
        self._on_disk = {i: r for i, r in logged.items() if i >= start}
        return start

    def records_before(self, iteration: int) -> list[dict]:
        """The records before ``iteration`` (all on disk, as `resume_from` made sure)."""
        logged = {r["iteration"]: r for r in self.records}
        return [logged[i] for i in range(iteration)]

    def commit(self, record: dict, session: dict) -> dict:
        """Log ``record`` (writing ``config.json`` with ``session`` first in a session), or,
        if a record of its iteration is on disk, check that the two agree but for timings and memory
        and keep the one on disk; returns the record as logged."""
        if not self.committed:
            self.write_config(session)
        logged = self._on_disk.pop(record["iteration"], None)
        if logged is None:
            self.append(record)
            logged = record
        elif without_timings(logged) != without_timings(json.loads(json.dumps(record))):
            raise MetaEvalError(
                f"iteration {record['iteration']} recomputed differs from its record in {self.path / LOG} "
                "(the record was changed, or the run is not reproducible); use a new --out"
            )
        if self._events is not None:
            self._events.write(logged, step=logged["iteration"])
        return logged

    def finish_log(self, records: list[dict]) -> None:
        """After a restart from iteration 0, rewrite the log in iteration order (the
        recomputed records were appended after later ones); ``records``: the run's records."""
        if self._restarted:
            self.rewrite(sorted([*records, *self._on_disk.values()], key=lambda r: r["iteration"]))

    def rewrite(self, records: list[dict]) -> None:
        """Replace the log atomically with ``records`` (e.g. sorted after filling gaps)."""
        _write_lines(self.path / LOG, records)

    def discard_if_unused(self) -> None:
        """Remove the directory if this session created it and committed nothing to it."""
        if self._created and not self.committed:
            shutil.rmtree(self.path, ignore_errors=True)


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    spans, start = [], numbers[0]
    for previous, current in zip(numbers, numbers[1:] + [None]):
        if current != previous + 1:
            spans.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = current
    return ", ".join(spans)
