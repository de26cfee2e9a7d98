"""A policy that fails or hangs on purpose, for the Ray actors' retry tests.

In a module of its own: an actor unpickling it imports this module, and importing the
test module instead (pytest, Ray fixtures) took longer than the tests' shard timeout on
a busy machine, so that every fresh actor's first shard timed out."""

import os
import time
from pathlib import Path

from open_spiel.python import policy as policy_lib


class FailingPolicy(policy_lib.Policy):
    """Delegates to ``inner``, but raises (or, with ``hang``, sleeps for ten minutes)
    while ``marker`` is missing, creating it first when ``once``: the first call
    fails, later calls succeed."""

    def __init__(self, inner, marker, once, hang=False):
        super().__init__(inner.game, inner.player_ids)
        self.inner, self.marker, self.once, self.hang = inner, str(marker), once, hang

    def action_probabilities(self, state, player_id=None):
        if not os.path.exists(self.marker):
            if self.once:
                Path(self.marker).touch()
            if self.hang:
                time.sleep(600)
            raise RuntimeError("this policy failed on purpose")
        return self.inner.action_probabilities(state, player_id)


class HangingPolicy(policy_lib.Policy):
    """Never answers: sleeps (``"sleep"``), spins in a pure-Python loop that catches every
    ``Exception`` (``"busy"``), or sleeps with SIGALRM blocked, out of reach of the time
    limit's timer (``"uninterruptible"``); for ``seconds`` (forever by default)."""

    def __init__(self, inner, how, seconds=float("inf")):
        super().__init__(inner.game, inner.player_ids)
        self.inner, self.how, self.seconds = inner, how, seconds

    def action_probabilities(self, state, player_id=None):
        end = time.monotonic() + self.seconds
        if self.how == "uninterruptible":
            import signal

            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while time.monotonic() < end:
            try:
                if self.how == "busy":
                    sum(range(1000))
                else:
                    time.sleep(min(end - time.monotonic(), 3600))
            except Exception:  # noqa: BLE001 - a policy that swallows errors must be stopped all the same
                pass
        return self.inner.action_probabilities(state, player_id)
