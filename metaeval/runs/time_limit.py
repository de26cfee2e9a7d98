"""A time limit on each call of a policy, so that a policy that hangs ends its build in one line.

A build runs its shards within `time_limit`; every call of a policy in them goes
through `limited` (`metaeval.spiel.lockstep.policy_errors` does it), and a call
that takes longer than the limit raises `PolicyTimeout`, which the callers turn into
one line naming the policy and its joint.

A thread cannot stop another thread's Python code, and a watchdog could only wait beside
a call that never returns. So the call is interrupted from within: on the main thread
(where in-process builds run, and where a Ray actor runs its tasks) an interval timer
(``setitimer``, ``SIGALRM``) fires when the time is up, and its handler raises an
exception in the call itself. Python runs signal handlers between bytecodes and wakes
blocking calls such as ``time.sleep`` to do so, so a sleeping policy and a busy loop stop
alike. The exception is a ``BaseException``, as ``KeyboardInterrupt`` is, so that a policy's
``except Exception`` lets it through; should the timer fire in the instant between the
call's return and the disarming of the timer, the block turns it into ``PolicyTimeout``. A call that still returns late (code
compiled elsewhere that never returns to the interpreter before it ends, or a build off
the main thread, where Python handles no signal) fails as it returns. A caller's own
``SIGALRM`` handler and timer are put back when the block ends.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

from metaeval.errors import MetaEvalError

#: Seconds a policy may take to answer one call in a build by default (the shard timeout): a
#: stuck build says so within a minute; a policy that thinks longer (a search at every state
#: of a batch) needs a larger one.
SHARD_TIMEOUT = 60.0


class PolicyTimeout(MetaEvalError):
    """A policy gave no answer within the time limit."""


class _Expired(BaseException):
    """Raised in a policy call whose time is up (a PolicyTimeout once out of the policy)."""


def named(exc: MetaEvalError, what: str) -> MetaEvalError:
    """``exc`` with ``what`` (the policy or joint) before its message, of the same kind."""
    return (PolicyTimeout if isinstance(exc, PolicyTimeout) else MetaEvalError)(f"{what}: {exc}")


class _Limit(threading.local):
    """The limit in force in this thread, and whether SIGALRM is its (on the main thread only)."""

    seconds: float | None = None
    timer = False


_limit = _Limit()
#: The limit of the main thread's call running under the timer (None between calls).
_armed: float | None = None


def _interrupt(signum, frame):
    if _armed is not None:
        raise _Expired


@contextmanager
def time_limit(seconds: float | None):
    """Within the block, each policy call made through `limited` in this thread may
    take ``seconds`` (None: no limit)."""
    outer = _limit.seconds, _limit.timer
    timer = seconds is not None and threading.current_thread() is threading.main_thread()
    if timer:
        handler = signal.signal(signal.SIGALRM, _interrupt)
        pending, interval = signal.setitimer(signal.ITIMER_REAL, 0)
        start = time.monotonic()
    _limit.seconds, _limit.timer = seconds, timer
    try:
        yield
    except _Expired:  # the timer fired on the way out of a call, after limited() had let go
        raise PolicyTimeout(f"a policy gave no answer within {seconds:g} s") from None
    finally:
        _limit.seconds, _limit.timer = outer
        if timer:
            signal.signal(signal.SIGALRM, signal.SIG_DFL if handler is None else handler)
            if pending:  # the caller's timer, less the time the block took (at once if that is past)
                signal.setitimer(signal.ITIMER_REAL, max(pending - (time.monotonic() - start), 1e-6), interval)


@contextmanager
def limited():
    """One policy call under this thread's limit (if any); raises `PolicyTimeout`."""
    global _armed
    seconds, timer = _limit.seconds, _limit.timer
    if seconds is None or (timer and _armed is not None):  # no limit, or a call within a limited call
        yield
        return
    start = time.monotonic()
    if timer:
        _armed = seconds
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Expired:
        expired = True
    else:
        expired = time.monotonic() - start > seconds
    finally:
        if timer:
            _armed = None  # first: an alarm from here on raises nothing
            signal.setitimer(signal.ITIMER_REAL, 0)
    if expired:
        raise PolicyTimeout(f"no answer within {seconds:g} s")
