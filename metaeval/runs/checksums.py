"""Checksums of what a run directory writes, checked before anything it wrote is trusted.

- A JSON object (a record of ``iterations.jsonl``, ``config.json``, ``state.json``) carries
  the SHA-256 of its canonical text (sorted keys, no spaces) under `KEY`
  (`seal`; `problem` says whether an object read back is as sealed).
- A checkpoint's other files are listed with their SHA-256 in the ``state.json`` that names
  them (`of_files`; `verify` checks them before they are loaded).

A changed byte then shows as a mismatch even where the file stays readable (a digit of a
JSON number, a weight in an ``.npz`` archive).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from metaeval.errors import DamagedFileError

KEY = "checksum"
"""The key of a sealed JSON object's checksum."""

_CHUNK = 1 << 20


def _of_object(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(data: Mapping) -> dict:
    """``data`` as JSON reads it back (tuples become lists, keys strings), with its checksum."""
    plain = json.loads(json.dumps(data))
    plain.pop(KEY, None)
    return {**plain, KEY: _of_object(plain)}


def problem(data) -> str | None:
    """Why ``data`` (a JSON value read back) is not an object as `seal` made it, or None."""
    if not isinstance(data, dict) or KEY not in data:
        return "no checksum (written by an earlier metaeval, or edited)"
    if data[KEY] != _of_object(unsealed(data)):
        return "changed after it was written (its checksum does not match)"
    return None


def unsealed(data: dict) -> dict:
    """``data`` without its checksum."""
    return {k: v for k, v in data.items() if k != KEY}


def of_file(path) -> str:
    """The SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def of_files(root, names: Iterable[str]) -> dict[str, str]:
    """``{name: SHA-256}`` of the files ``root / name``."""
    return {name: of_file(Path(root) / name) for name in sorted(names)}


def verify(root, listed, listed_in) -> None:
    """Raise [`DamagedFileError`][metaeval.errors.DamagedFileError] naming the first file of ``listed`` (checksums as
    `of_files` gave them, kept in the file ``listed_in``) that is missing or differs."""
    if not isinstance(listed, dict) or not listed:
        raise DamagedFileError(f"{listed_in} lists no checksums of the files it names")
    for name, expected in listed.items():
        path = Path(root) / name
        try:
            found = of_file(path)
        except FileNotFoundError:
            raise DamagedFileError(f"{path} is missing") from None
        except OSError as exc:
            raise DamagedFileError(f"cannot read {path}: {exc.strerror or exc}") from None
        if found != expected:
            raise DamagedFileError(f"{path} was changed after it was written "
                                   f"(its checksum does not match the one in {listed_in})")
