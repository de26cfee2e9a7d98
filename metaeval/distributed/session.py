"""Lazy, quiet Ray start-up and a clean shutdown.

Ray is imported and started only when a pool first needs it, never at import
time. When this module starts Ray (a local instance, or a connection to a
cluster), it also shuts it down; a Ray session the caller opened is left alone.

To tell the two apart it keeps process-wide state (whether it called
``ray.init``, with which address, and the short log-directory link it made), as
Ray itself is process-wide: one session per process.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from metaeval.errors import MetaEvalError

RAY_ADDRESS_VARIABLE = "RAY_ADDRESS"


class _State:
    """The process-wide state described in the module docstring."""

    started = False  # this module called ray.init
    address: str | None = None  # the address it was called with
    link_dir: str | None = None  # short symlink directory standing in for a long log_dir


def resolve_address(address: str | None) -> str | None:
    """The cluster to join: ``address``, else ``$RAY_ADDRESS``, else None (embedded Ray)."""
    return address or os.environ.get(RAY_ADDRESS_VARIABLE) or None


def ensure_ray(address: str | None = None, num_cpus: int | None = None, log_dir=None) -> None:
    """Make sure Ray is running, starting it quietly if the caller has not.

    Args:
        address: an existing cluster (``"host:port"``, ``"ray://host:port"``,
            ``"auto"``); None starts an embedded local instance.
        num_cpus: CPUs of the embedded instance (ignored when joining a cluster).
        log_dir: directory for the embedded instance's session files and logs
            (Ray's ``temp_dir``); default: Ray's own temporary directory.
    """
    import ray

    if ray.is_initialized():
        if _State.started and address != _State.address:
            raise MetaEvalError(
                f"Ray already runs here for address {_State.address!r}; call "
                f"metaeval.distributed.shutdown() before using address {address!r}"
            )
        return
    options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if address is None:
        options["num_cpus"] = num_cpus
        if log_dir is not None:
            options["_temp_dir"] = _short_temp_dir(Path(log_dir))
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        _remove_link_dir()
        where = f"the Ray cluster at {address!r}" if address else "an embedded Ray instance"
        raise MetaEvalError(f"cannot start {where}: {exc}") from None
    _State.started, _State.address = True, address


def _short_temp_dir(log_dir: Path) -> str:
    """A short path that leads to ``log_dir/ray``.

    Ray puts its Unix sockets under its temp dir, and a socket path may not exceed
    107 bytes, which a run directory easily does; a symlink in the system temp
    directory keeps the path short while every file lands in ``log_dir``.
    """
    target = (log_dir / "ray").resolve()
    target.mkdir(parents=True, exist_ok=True)
    _State.link_dir = tempfile.mkdtemp(prefix="metaeval-ray-")
    link = os.path.join(_State.link_dir, "r")
    os.symlink(target, link)
    return link


def _remove_link_dir() -> None:
    if _State.link_dir is not None:
        shutil.rmtree(_State.link_dir, ignore_errors=True)
        _State.link_dir = None


def stop_ray() -> None:
    """Shut Ray down if this module started it; leave a caller's Ray session alone."""
    if not _State.started:
        return
    import ray

    ray.shutdown()
    _State.started = False
    _remove_link_dir()
