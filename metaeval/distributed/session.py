"""Lazy, quiet Ray start-up, a bounded connection with one-line causes, and a clean shutdown.

Ray is imported and started only when a pool first needs it, never at import
time. When this module starts Ray (a local instance, or a connection to a
cluster), it also shuts it down; a Ray session the caller opened is left alone.

Connecting to a cluster first checks, within :data:`CONNECT_TIMEOUT` seconds, that
something listens at the address, so an unreachable address is reported at once
instead of after Ray's own retries; a ``ray://`` address needs Ray Client (the
``client`` extra); token authentication uses the token Ray would find
(``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) even for an
explicit address, which Ray itself does only for ``address="auto"``.

An embedded Ray keeps its session files under a short directory
``metaeval-ray-*`` in the system temporary directory, with a note of the driver's
process id. If a driver dies without shutting Ray down (SIGKILL), the next embedded
start finds that directory, kills the processes whose command line names it (the
dead session's Ray processes, and no other) and removes it.

To tell its own session from a caller's, this module keeps process-wide state
(whether it called ``ray.init``, with which address, and its session directory),
as Ray itself is process-wide: one session per process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from metaeval.runs import rundir
from metaeval.errors import MetaEvalError

RAY_ADDRESS_VARIABLE = "RAY_ADDRESS"
#: Seconds allowed to reach a cluster's address before giving up.
CONNECT_TIMEOUT = 10.0
#: Prefix of embedded sessions' directories in the system temporary directory.
SESSION_PREFIX = "metaeval-ray-"
OWNER_FILE = "driver.pid"
CLIENT_FIX = "pip install 'metaeval[client]' (or 'ray[client]'), or give the cluster's GCS address host:6379"


class _State:
    """The process-wide state described in the module docstring."""

    started = False  # this module called ray.init
    address: str | None = None  # the address it was called with
    link_dir: str | None = None  # the embedded session's short directory


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
        clean_stale_sessions()
        options["num_cpus"] = num_cpus
        options["_temp_dir"] = _session_dir(None if log_dir is None else Path(log_dir))
    else:
        check_reachable(address)
        _use_available_token()
    from ray.exceptions import AuthenticationError

    where = f"the Ray cluster at {address!r}" if address else "an embedded Ray instance"
    token_hint = (
        " (token authentication is on: check that RAY_AUTH_TOKEN, the file named by RAY_AUTH_TOKEN_PATH "
        "or ~/.ray/auth_token holds the cluster's token)"
        if address and os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else ""
    )
    try:
        with _keep_sigterm_handler(), _quiet_stderr():
            ray.init(address=address, **options)
    except AuthenticationError:
        _remove_session_dir()
        raise MetaEvalError(
            f"{where} refused this driver's authentication token (or none was found): put the cluster's "
            "token in RAY_AUTH_TOKEN, in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token"
        ) from None
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        _remove_session_dir()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MetaEvalError(f"cannot start {where}: {first}{token_hint}") from None
    _State.started, _State.address = True, address


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse, within ``timeout`` seconds, an address where nothing listens (``auto`` is left to Ray)."""
    if address == "auto":
        return
    if address.startswith("ray://"):
        try:
            import grpc  # noqa: F401  (what Ray Client needs beyond Ray's core)
        except ImportError:
            raise MetaEvalError(f"--address {address} uses Ray Client, which is not installed: {CLIENT_FIX}") from None
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or port is None:
        raise MetaEvalError(f"Ray address {address!r} is not host:port, ray://host:port or auto")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as exc:
        raise MetaEvalError(f"cannot reach the Ray cluster at {address!r}: unknown host {host!r} ({exc.strerror})") from None
    except TimeoutError:
        raise MetaEvalError(
            f"cannot reach the Ray cluster at {address!r}: no answer within {timeout:g} s (a firewall, or a wrong host?)"
        ) from None
    except OSError as exc:
        raise MetaEvalError(
            f"cannot reach the Ray cluster at {address!r}: {exc.strerror or exc} (is the cluster running? "
            "`ray start --head` prints its address)"
        ) from None


def _use_available_token() -> None:
    """Turn on token authentication when a token is available and RAY_AUTH_MODE is unset,
    as Ray does itself for ``address="auto"`` (Ray >= 2.5x; a no-op before)."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return
    quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level, quiet.level = quiet.level, logging.ERROR  # its warning would say what we say here
    try:
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        quiet.setLevel(level)


@contextlib.contextmanager
def _keep_sigterm_handler():
    """``ray.init`` installs a SIGTERM handler that exits with Ray's stack dump; keep ours."""
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if handler is not None:
            with contextlib.suppress(ValueError):  # not the main thread: Ray set nothing either
                signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def _quiet_stderr():
    """Discard what Ray's C++ core writes to stderr while connecting (a warning per failed
    attempt); a failure is reported in one line by :func:`ensure_ray` instead."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _session_dir(log_dir: Path | None) -> str:
    """A short, new directory for the embedded session, noting this driver's process id.

    Ray puts its Unix sockets under its temp dir, and a socket path may not exceed
    107 bytes, which a run directory easily does; with ``log_dir``, the session's
    files go to ``log_dir/ray`` (``rundir.RAY_LOGS``) through a symlink in the short directory.
    """
    _State.link_dir = tempfile.mkdtemp(prefix=SESSION_PREFIX)
    Path(_State.link_dir, OWNER_FILE).write_text(str(os.getpid()))
    session = os.path.join(_State.link_dir, "r")
    if log_dir is None:
        os.mkdir(session)
    else:
        target = (log_dir / rundir.RAY_LOGS).resolve()
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, session)
    return session


def _remove_session_dir() -> None:
    if _State.link_dir is not None:
        shutil.rmtree(_State.link_dir, ignore_errors=True)
        _State.link_dir = None


def clean_stale_sessions() -> list[int]:
    """Kill the processes of embedded sessions whose driver has died, and remove their
    directories; returns the process ids killed."""
    killed = []
    for directory in Path(tempfile.gettempdir()).glob(f"{SESSION_PREFIX}*"):
        try:
            owner = int((directory / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not (yet) a session directory of this module
        if _alive(owner):
            continue
        killed += _kill_processes_naming(str(directory))
        shutil.rmtree(directory, ignore_errors=True)
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_processes_naming(text: str) -> list[int]:
    """SIGKILL every process of this user whose command line contains ``text``."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid() or text not in (entry / "cmdline").read_text(errors="replace"):
                continue
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return killed


def stop_ray() -> None:
    """Shut Ray down if this module started it; leave a caller's Ray session alone."""
    if not _State.started:
        return
    import ray

    ray.shutdown()
    _State.started = False
    _remove_session_dir()
