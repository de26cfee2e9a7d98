"""The processes of one embedded Ray session, found by the session's directory, and their end.

Ray names the session directory on the command line of the daemons it starts (GCS,
raylet, monitors), but its agents and workers retitle themselves (``ray::IDLE``,
``ray::DashboardAgent``), overwriting their command line and at times their
environment, so neither finds them. Their open files do: each keeps log files of
the session open (its own, and the raylet's output it inherited), and those lie
under the session's directory, or behind its ``r`` symlink in a directory named
after it. A process of this user belongs to the session when its command line names
the directory, or when it bears Ray's title and holds a file under the directory
open. Nothing is matched by name alone, and a process the driver forked keeps the
driver's title, so it is never taken for one of Ray's.

Run as a script (``python -I reaper.py DIRECTORY DRIVER_PID``), this module is the
session's watchdog: it reads its standard input, a pipe whose only writer is the
driver, until end of file, which comes when the driver closes the pipe or dies, even
by SIGKILL; then it ends the session's processes and removes the directory. It
imports only the standard library, so it starts in milliseconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

#: The (possibly symlinked) directory in a session's directory that Ray uses as its temp dir.
RAY_DIR = "r"
#: How Ray titles the processes it starts that rewrite their command line.
RAY_TITLE = "ray::"
#: Seconds to keep ending a session's processes (a dying raylet may still start one).
END_WAIT = 10.0


def _prefixes(directory: str) -> tuple[str, ...]:
    """Where the session's files lie: the directory, and what its ``r`` symlink leads to if
    that is named after the session (another name may hold other sessions' files)."""
    roots = {directory, os.path.realpath(directory)}
    files = os.path.realpath(os.path.join(directory, RAY_DIR))
    if os.path.basename(files) == os.path.basename(directory):
        roots.add(files)
    return tuple(root + os.sep for root in sorted(roots))


def _belongs(entry: Path, prefixes: tuple[str, ...]) -> bool:
    """Whether process ``entry`` (``/proc/<pid>``) is of the session with files under ``prefixes``."""
    if entry.stat().st_uid != os.getuid():
        return False
    command = (entry / "cmdline").read_bytes().decode(errors="replace")
    if any(prefix in command for prefix in prefixes):  # a daemon's --log_dir, --session-dir, ...
        return True
    if not command.startswith(RAY_TITLE):
        return False
    for fd in (entry / "fd").iterdir():
        try:
            if os.readlink(fd).startswith(prefixes):
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def session_processes(directory: str, exclude=()) -> list[int]:
    """Process ids of the session in ``directory`` (see the module docstring), except ``exclude``."""
    prefixes = _prefixes(os.path.abspath(directory))
    found = []
    if not os.path.isdir("/proc"):  # Linux only: elsewhere the session's processes go unfound
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        try:
            if _belongs(entry, prefixes):
                found.append(int(entry.name))
        except OSError:  # ended meanwhile
            continue
    return found


def _kill(pid: int, prefixes: tuple[str, ...]) -> bool:
    """SIGKILL ``pid`` if it still belongs to the session, through a pidfd, so that a process id
    reused between the check and the signal cannot be hit."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if not _belongs(Path(f"/proc/{pid}"), prefixes):
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def end_session(directory: str, exclude=(), wait: float = END_WAIT) -> list[int]:
    """SIGKILL the session's processes (some ignore SIGTERM) until none is left or ``wait``
    seconds have passed, then remove ``directory``; returns the process ids killed."""
    directory = os.path.abspath(directory)
    prefixes = _prefixes(directory)
    exclude = {os.getpid(), *exclude}
    killed = []
    deadline = time.monotonic() + wait
    while True:
        pids = session_processes(directory, exclude)
        killed += [pid for pid in pids if _kill(pid, prefixes)]
        if not pids or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    shutil.rmtree(directory, ignore_errors=True)
    return killed


def watch(directory: str, driver: int) -> None:
    """Block until end of file on stdin (the driver closed it or died), then end the session."""
    while sys.stdin.buffer.read(1 << 12):
        pass
    end_session(directory, exclude={driver})


if __name__ == "__main__":
    watch(sys.argv[1], int(sys.argv[2]))
