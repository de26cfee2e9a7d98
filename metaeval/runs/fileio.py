"""Writing and reading metaeval's files.

Writes are atomic: a reader sees the old file or the new one, never a partial one.
Reads of ``.npz`` archives go through `read_arrays`, which turns whatever a damaged,
cut-off or missing file makes numpy or zipfile raise into one [`DamagedFileError`][metaeval.errors.DamagedFileError]
naming the file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import zipfile
from collections.abc import Collection
from pathlib import Path

import numpy as np

from metaeval.errors import DamagedFileError, MetaEvalError
from metaeval.runs import budget

NPY_MAGIC = b"\x93NUMPY"
"""How an ``.npy`` file begins (an ``.npz`` archive begins with ``PK``)."""


def atomic_write(path, write, mode: str = "wb") -> Path:
    """Call ``write(handle)`` on a temporary file beside ``path``, then replace ``path``.

    The file is flushed to disk before the one rename; if writing fails, ``path`` is
    untouched and the temporary file removed.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        with open(tmp, mode) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def temporary_path(path) -> Path:
    """Where `atomic_write` writes ``path`` before the rename; a process killed
    between the two (SIGKILL, power loss) leaves this file behind."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp")


def atomic_savez(path, **arrays) -> Path:
    """Write ``arrays`` as an ``.npz`` archive at exactly ``path`` (no suffix added), atomically."""
    return atomic_write(path, lambda handle: np.savez(handle, **arrays))


def check_writable(directory, what: str) -> None:
    """Refuse, before any work, to write ``what`` into ``directory`` if this process cannot:
    a file is created and removed in ``directory`` or its nearest existing ancestor (a probe
    that also catches read-only file systems, which permission bits miss for root)."""
    existing = Path(directory)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise MetaEvalError(f"cannot write {what}: {existing} is not a writable directory "
                            f"({exc.strerror or exc})") from None


def read_arrays(path, what: str, names: Collection[str] | None = None,
                float64_copy: bool = False) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive at ``path`` (those in ``names`` when given), or an
    ``.npy`` file's one array under the name ``""``; ``what`` the file holds is said in errors.

    Every array's header is checked against the memory budget before its data is read (the
    array as stored, and as float64 too with ``float64_copy``, for the copy the caller makes):
    a damaged header's shape costs nothing to claim. A file that is missing, cut off or
    damaged raises one [`DamagedFileError`][metaeval.errors.DamagedFileError] naming it.
    """
    path = Path(path)
    try:
        with open(path, "rb") as stream:
            if stream.read(len(NPY_MAGIC)) == NPY_MAGIC:
                stream.seek(0)
                _check_header(stream, f"{path}: its array", float64_copy)
                stream.seek(0)
                return {"": np.load(stream, allow_pickle=False)}
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if names is None or m.removesuffix(".npy") in names]
            for member in members:
                with archive.open(member) as stream:
                    _check_header(stream, f"{path}: its array {member.removesuffix('.npy')!r}", float64_copy)
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files if names is None or name in names}
    except MetaEvalError:
        raise
    except Exception as exc:  # zipfile and numpy raise many kinds of error on damaged bytes
        raise DamagedFileError(f"cannot read {what} from {path}: {exc}") from None


def _check_header(stream, what: str, float64_copy: bool) -> None:
    """Budget check of one ``.npy`` header: the array as stored (and as float64)."""
    version = np.lib.format.read_magic(stream)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(stream)
    copy = budget.FLOAT if float64_copy else 0
    budget.check(math.prod(shape) * (dtype.itemsize + copy),
                 f"{what} of shape {shape}{' (as stored and as float64)' if float64_copy else ''}",
                 "is the file what it claims to be?")


def json_entry(arrays: dict, name: str, what: str, path) -> object:
    """The JSON text an archive read by `read_arrays` keeps in its array ``name``, parsed."""
    if name not in arrays:
        raise DamagedFileError(f"cannot read {what} from {path}: it has no {name!r} entry")
    try:
        return json.loads(str(arrays[name]))
    except json.JSONDecodeError as exc:
        raise DamagedFileError(f"{path}: its {name!r} entry is not valid JSON ({exc})") from None
