"""Atomic writes: a reader sees the old file or the new one, never a partial one."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def atomic_write(path, write, mode: str = "wb") -> Path:
    """Call ``write(handle)`` on a temporary file beside ``path``, then replace ``path``.

    The file is flushed to disk before the one rename; if writing fails, ``path`` is
    untouched and the temporary file removed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
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


def atomic_savez(path, **arrays) -> Path:
    """Write ``arrays`` as an ``.npz`` archive at exactly ``path`` (no suffix added), atomically."""
    return atomic_write(path, lambda handle: np.savez(handle, **arrays))
