"""Atomic writes: a reader sees the old file or the new one, never a partial one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from metaeval.errors import MetaEvalError


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
    """Where :func:`atomic_write` writes ``path`` before the rename; a process killed
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
