"""Lazy, quiet Ray start-up, a bounded connection with one-line causes, and a clean shutdown.

Ray is imported and started only when a pool first needs it, never at import
time. When this module starts Ray (a local instance, or a connection to a
cluster), it also shuts it down; a Ray session the caller opened is left alone.

Connecting to a cluster first checks, within `CONNECT_TIMEOUT` seconds, that
something listens at the address, so an unreachable address is reported at once
instead of after Ray's own retries; a ``ray://`` address needs Ray Client (the
``client`` extra); token authentication uses the token Ray would find
(``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) even for an
explicit address, which Ray itself does only for ``address="auto"``.

An embedded Ray listens on the loopback address only: its node address is 127.0.0.1,
so each of its ports is bound there and actor calls and object transfers never leave
the machine. Ray on Linux rewrites a loopback node address, and the loopback host of
an address to join, to the machine's network-interface address (on macOS and Windows
it keeps them); `keep_loopback` turns that rewrite off while Ray starts. It is
off too when joining a cluster at a loopback address (a cluster started with
``--node-ip-address=127.0.0.1`` listens nowhere else); any other address goes to Ray
untouched.

An embedded Ray keeps its session files under a short directory ``metaeval-ray-*``
in the system temporary directory, with a note of the driver (process id and start
time), watched by a process of `metaeval.distributed.reaper` that ends the
session's processes and removes the directory when the driver dies, even by SIGKILL.
Should the watchdog be killed too, the next embedded start finds the directory of
the dead driver and does the same.

Ray prints its messages to the driver (``(raylet) A worker died ...`` when an actor is
killed, several lines in colour) on stdout, whatever ``log_to_driver`` says, beside a
command's results. In a session this module starts they go to the logger
``metaeval.ray`` instead, which an embedded session writes to its own directory
(`MESSAGES_FILE`, in the run directory's Ray logs when there is one).

To tell its own session from a caller's, this module keeps process-wide state
(whether it called ``ray.init``, with which address, and its session directory),
as Ray itself is process-wide: one session per process.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from metaeval.runs import rundir
from metaeval.runs.budget import describe
from metaeval.distributed import reaper
from metaeval.errors import MetaEvalError

RAY_ADDRESS_VARIABLE = "RAY_ADDRESS"
#: Seconds allowed to reach a cluster's address before giving up.
CONNECT_TIMEOUT = 10.0
#: Prefix of embedded sessions' directories in the system temporary directory.
SESSION_PREFIX = "metaeval-ray-"
OWNER_FILE = "driver.pid"
#: The node address of an embedded Ray.
LOOPBACK = "127.0.0.1"
#: Memory of one Ray worker process, by which worker counts are checked: an actor with
#: a game loaded holds 174 MiB of its own (proportional set size, kuhn_3p and sheriff).
WORKER_MEMORY = 192 << 20
CLIENT_FIX = "pip install 'metaeval[client]' (or 'ray[client]'), or give the cluster's GCS address host:6379"
#: Where an embedded session writes Ray's messages to the driver, in its Ray temp dir.
MESSAGES_FILE = "driver-messages.log"
#: Ray's messages to the driver in a session this module started (see the module docstring).
ray_messages = logging.getLogger("metaeval.ray")
ray_messages.setLevel(logging.INFO)  # below the WARNING at which Python prints a logger without handlers


class _State:
    """The process-wide state described in the module docstring."""

    started = False  # this module called ray.init
    address: str | None = None  # the address it was called with
    link_dir: str | None = None  # the embedded session's short directory
    watchdog: subprocess.Popen | None = None  # the process ending the session if the driver dies
    pipe: int | None = None  # the write end of the watchdog's stdin, held by this driver only
    printer = None  # Ray's printer of its messages to the driver, while they are logged instead
    messages: logging.Handler | None = None  # the embedded session's file of those messages


def resolve_address(address: str | None) -> str | None:
    """The cluster to join: ``address``, else ``$RAY_ADDRESS``, else None (embedded Ray)."""
    return address or os.environ.get(RAY_ADDRESS_VARIABLE) or None


def ensure_ray(address: str | None = None, num_cpus: int | None = None, log_dir=None, workers: int = 1) -> None:
    """Make sure Ray is running, starting it quietly if the caller has not.

    Args:
        address: an existing cluster (``"host:port"``, ``"ray://host:port"``,
            ``"auto"``); None starts an embedded local instance.
        num_cpus: CPUs of the embedded instance (ignored when joining a cluster).
        log_dir: directory for the embedded instance's session files and logs
            (Ray's ``temp_dir``); default: Ray's own temporary directory.
        workers: Ray worker processes the caller will start; more than the memory
            of this machine (before an embedded start), or of the cluster joined or
            the caller's session, holds at `WORKER_MEMORY` each are refused.
    """
    import ray

    if not ray.is_initialized():
        if address is None:
            check_workers(workers)
            start_embedded(num_cpus, None if log_dir is None else Path(log_dir))
        else:
            check_reachable(address)
            _use_available_token()
            _init(address)
        _State.started, _State.address = True, address
    elif _State.started and address != _State.address:
        raise MetaEvalError(
            f"Ray already runs here for address {_State.address!r}; call "
            f"metaeval.distributed.shutdown() before using address {address!r}"
        )
    if not (_State.started and _State.address is None):  # an embedded start checked this machine
        resources = ray.cluster_resources()
        where = f"the Ray cluster at {address!r}" if address else "the Ray session in use"
        _check_room(workers, resources.get("memory", 0) + resources.get("object_store_memory", 0), where)


def check_workers(workers: int, address: str | None = None) -> None:
    """Refuse, before anything starts, more Ray workers than this machine's memory holds at
    `WORKER_MEMORY` each, if they would run here (no ``address``, no ``$RAY_ADDRESS``;
    a cluster's memory is checked by `ensure_ray` on joining it)."""
    if resolve_address(address) is None:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        _check_room(workers, memory, "this machine", " (or a Ray cluster: address)")


def _check_room(workers: int, memory: float, where: str, alternative: str = "") -> None:
    most = max(1, int(memory // WORKER_MEMORY))
    if workers > most:
        raise MetaEvalError(
            f"{workers} Ray workers need about {describe(workers * WORKER_MEMORY)} ({describe(WORKER_MEMORY)} each), "
            f"more than the {describe(memory)} of {where}: use at most {most}{alternative}"
        )


def start_embedded(num_cpus: int | None = None, log_dir: Path | None = None) -> None:
    """Start a local Ray on the loopback address, in a session directory of its own watched
    for the driver's death (see the module docstring); stop it with `stop_embedded`."""
    clean_stale_sessions()
    temp_dir = _open_session(log_dir)
    _State.messages = logging.FileHandler(os.path.join(temp_dir, MESSAGES_FILE), delay=True)
    ray_messages.addHandler(_State.messages)
    _init(None, num_cpus=num_cpus, _temp_dir=temp_dir, _node_ip_address=LOOPBACK, dashboard_host=LOOPBACK)


def _init(address: str | None, **options) -> None:
    """``ray.init``, quietly; a failure is one line naming its cause (and ends an embedded session)."""
    import ray
    from ray.exceptions import AuthenticationError

    where = f"the Ray cluster at {address!r}" if address else "an embedded Ray instance"
    token_hint = (
        " (token authentication is on: check that RAY_AUTH_TOKEN, the file named by RAY_AUTH_TOKEN_PATH "
        "or ~/.ray/auth_token holds the cluster's token)"
        if address and os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else ""
    )
    loopback = keep_loopback() if address is None or is_loopback(address) else contextlib.nullcontext()
    _log_ray_messages()
    try:
        with _keep_sigterm_handler(), _quiet_stderr(), loopback:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                     **options)
    except AuthenticationError:
        _close_session()
        raise MetaEvalError(
            f"{where} refused this driver's authentication token (or none was found): put the cluster's "
            "token in RAY_AUTH_TOKEN, in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token"
        ) from None
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        _close_session()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MetaEvalError(f"cannot start {where}: {first}{token_hint}") from None


def _log_ray_messages() -> None:
    """Have Ray's messages to the driver logged to ``metaeval.ray`` instead of printed on stdout.

    Ray's listener of its error channel hands each message to
    ``ray._private.worker.print_to_stdstream`` (looked up at each message; the printer of
    workers' output, off here, holds its own reference), which is replaced until
    `_print_ray_messages`."""
    from ray._private import worker

    if _State.printer is None:
        _State.printer = worker.print_to_stdstream
        worker.print_to_stdstream = lambda data, ignore_prefix: ray_messages.info("\n".join(data["lines"]))


def _print_ray_messages() -> None:
    """Give Ray back its printer of messages to the driver."""
    if _State.printer is not None:
        from ray._private import worker

        worker.print_to_stdstream, _State.printer = _State.printer, None


def is_loopback(address: str) -> bool:
    """Whether ``address`` (``host:port``, ``ray://host:port``) names a loopback host."""
    try:
        host = urlsplit(address if "://" in address else f"//{address}").hostname
    except ValueError:
        return False
    return _loopback_host(host)


def _loopback_host(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def keep_loopback():
    """Within the block, Ray keeps a loopback host (as a node address, or in an address to
    join) instead of rewriting it to this machine's network-interface address, as it does on
    Linux in ``ray._private.services.resolve_ip_for_localhost`` (``ray.init``, ``ray start``)."""
    from ray._private import services

    rewrite = services.resolve_ip_for_localhost

    def resolve(host: str) -> str:
        if _loopback_host(host):
            return LOOPBACK if host == "localhost" else host
        return rewrite(host)

    services.resolve_ip_for_localhost = resolve
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = rewrite


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
    attempt); a failure is reported in one line by `ensure_ray` instead."""
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


def _open_session(log_dir: Path | None) -> str:
    """A short, new directory for the embedded session, noting this driver, and its watchdog;
    returns Ray's temp dir in it.

    Ray puts its Unix sockets under its temp dir, and a socket path may not exceed
    107 bytes, which a run directory easily does; with ``log_dir``, the session's
    files go to ``log_dir/ray/<the short directory's name>`` (``rundir.RAY_LOGS``) through a symlink (a
    directory of the session's own, so that the files open in it tell this session's
    processes from those of another session of the same run directory).
    """
    _State.link_dir = tempfile.mkdtemp(prefix=SESSION_PREFIX)
    Path(_State.link_dir, OWNER_FILE).write_text(_identity(os.getpid()))
    session = os.path.join(_State.link_dir, reaper.RAY_DIR)
    if log_dir is None:
        os.mkdir(session)
    else:
        target = (log_dir / rundir.RAY_LOGS / os.path.basename(_State.link_dir)).resolve()
        target.mkdir(parents=True)
        os.symlink(target, session)
    read, _State.pipe = os.pipe()  # not inherited by the processes Ray starts
    try:
        _State.watchdog = subprocess.Popen(
            [sys.executable, "-I", reaper.__file__, _State.link_dir, str(os.getpid())], stdin=read,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # no terminal's signals
    finally:
        os.close(read)
    return session


def _close_session() -> None:
    """End the embedded session's processes, remove its directory and let its watchdog go;
    Ray's messages are printed again."""
    _print_ray_messages()
    if _State.messages is not None:
        ray_messages.removeHandler(_State.messages)
        _State.messages.close()
        _State.messages = None
    if _State.link_dir is None:
        return
    watchdog = _State.watchdog
    reaper.end_session(_State.link_dir, exclude={watchdog.pid} if watchdog else ())
    if _State.pipe is not None:
        os.close(_State.pipe)
    if watchdog is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(timeout=reaper.END_WAIT + 5)
    _State.link_dir = _State.watchdog = _State.pipe = None


def _identity(pid: int) -> str:
    """``"<pid> <start time>"``: a process id with its start time (clock ticks after boot), which
    a later process reusing the id does not share; the id alone where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return str(pid)
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


def _alive(identity: str) -> bool:
    """Whether the process noted as ``identity`` (see `_identity`) still runs."""
    pid, *start = identity.split()
    if start:
        return _identity(int(pid)) == identity.strip()
    try:  # the id alone (no /proc, or noted by an earlier version)
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def clean_stale_sessions() -> list[int]:
    """End the processes of embedded sessions whose driver has died and remove their
    directories; returns the process ids killed."""
    killed = []
    for directory in Path(tempfile.gettempdir()).glob(f"{SESSION_PREFIX}*"):
        try:
            alive = _alive((directory / OWNER_FILE).read_text())
        except (OSError, ValueError, IndexError, OverflowError):
            continue  # not (yet) a session directory of this module
        if not alive:
            killed += reaper.end_session(str(directory))
    return killed


def stop_embedded() -> None:
    """Shut down the Ray started by `start_embedded` and end its session."""
    import ray

    ray.shutdown()
    _close_session()


def stop_ray() -> None:
    """Shut Ray down if this module started it; leave a caller's Ray session alone."""
    if not _State.started:
        return
    stop_embedded()  # joined to a cluster, only ray.shutdown() has anything to do
    _State.started = False
