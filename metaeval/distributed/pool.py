"""A pool of Ray actors evaluating shards of a meta-game, with retries.

Each actor loads the game once and keeps the policies it was sent (by token) and
their reach rows across builds. A policy goes to the object store once per build
that introduces it; a shard carries only references, and an actor fetches the ones
it lacks. Each actor holds one shard at a time, so a failure belongs to exactly one
shard. Only what can succeed on a retry is retried: when an actor is lost (killed,
crashed, out of memory), the actor is replaced and the shard resubmitted, up to
``max_retries`` times, after which the build fails naming the shard. An exception
raised by the shard itself (a policy's or the game's) would be raised again, so it
fails the build at once with its own message. Ray's own restarts and task retries
stay off, so every retry is visible here and counted once.

A policy that hangs would block a build forever. Each call of a policy in a shard may
take ``shard_timeout`` seconds (`metaeval.runs.time_limit`); one that takes longer
fails its shard with a one-line error naming the policy and its joint. That may be the
actor's fault (a loaded node), so the shard goes once more to a fresh actor (the first is
killed: its policy was interrupted mid-call); timed out there too, it fails the build. An
actor that gives no result at all, stuck where the time limit cannot reach (compiled code
that never returns to the interpreter), is presumed hung after ``shard_timeout`` plus
`UNINTERRUPTIBLE_TIMEOUT` seconds, counted from the shard's submission to an actor
that has started (an actor's own start-up, which loads the game, has its own allowance,
`ACTOR_START_TIMEOUT`): it is killed and replaced, and the shard is treated the same.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field

from metaeval.distributed.evaluator import ShardEvaluator
from metaeval.runs.progress import Progress
from metaeval.distributed.registry import PolicyRegistry, Sync
from metaeval.distributed.session import ensure_ray
from metaeval.errors import MetaEvalError, first_line
from metaeval.runs.memory import resident_memory
from metaeval.runs.time_limit import SHARD_TIMEOUT, PolicyTimeout

#: Resubmissions allowed by default per shard whose actor was lost.
MAX_RETRIES = 3
#: Times a shard may time out, on as many fresh actors, before the build fails.
TIMEOUTS = 2
#: Seconds beyond ``shard_timeout`` an actor may take over a shard before it is presumed hung
#: where no time limit reaches it. Generous: a sampled shard of a large build (4,096 joints of
#: kuhn_3p at 1,000 episodes each, some 20,000 episodes a second) takes about three minutes.
UNINTERRUPTIBLE_TIMEOUT = 600.0
#: Seconds an actor may take to start (import, load the game) before the build
#: fails; a cluster may first have to find room for it.
ACTOR_START_TIMEOUT = 600.0
#: Seconds the actors may take to say how much memory they use.
MEMORY_TIMEOUT = 60.0

class ShardWorker:
    """The actor: one game, policies cached by token, shards on demand."""

    def __init__(self, game_string: str):
        self._evaluator = ShardEvaluator(game_string)

    def pid(self) -> int:
        return os.getpid()

    def memory(self) -> dict:
        return resident_memory()

    def evaluate(self, task, refs: dict, forget: list[int], timeout: float):
        """Evaluate ``task``, each policy call within ``timeout`` seconds; ``refs`` maps its
        tokens to object-store policies."""
        import ray

        self._evaluator.forget(forget)
        missing = self._evaluator.missing(task.tokens)
        if missing:
            self._evaluator.add(dict(zip(missing, ray.get([refs[t] for t in missing]))))
        return self._evaluator.evaluate(task, timeout)


@dataclass
class _Slot:
    """One actor of the pool, whether it has started and holds a shard, and the tokens
    it should drop."""

    actor: object
    pid: object  # ObjectRef of the actor's pid, ready once the actor has started
    started: bool = False
    busy: bool = False
    forget: list[int] = field(default_factory=list)


class EvaluatorPool:
    """``workers`` actors for one game, started on an embedded or existing Ray.

    Args:
        game: a ``pyspiel.Game``.
        workers: number of actors.
        address: Ray cluster to join (None: embedded Ray, started if not running).
        log_dir: where an embedded Ray started here keeps its logs.
    """

    def __init__(self, game, workers: int, address: str | None = None, log_dir=None):
        import ray

        ensure_ray(address, num_cpus=max(workers, os.cpu_count() or 1), log_dir=log_dir, workers=workers)
        self.game_string = str(game)
        self.workers = workers
        self.address = address
        self.registry = PolicyRegistry()
        # Share the CPUs Ray has among the actors, so that all of them get scheduled
        # even on a session with fewer CPUs than workers.
        cpus = min(1.0, ray.cluster_resources().get("CPU", 1.0) / workers)
        self._actor_class = ray.remote(ShardWorker).options(
            num_cpus=cpus, max_restarts=0, max_task_retries=0
        )
        self._refs: dict[int, object] = {}
        self._slots = [self._launch() for _ in range(workers)]
        self.closed = False

    def _launch(self) -> _Slot:
        actor = self._actor_class.remote(self.game_string)
        return _Slot(actor, actor.pid.remote())

    def pids(self) -> list[int]:
        """Process ids of the current actors.

        Returns:
            The process ids.
        """
        import ray

        return ray.get([slot.pid for slot in self._slots])

    def memory(self) -> list[dict]:
        """Each actor's resident memory (`metaeval.runs.memory.resident_memory`); none
        if an actor was lost since the last build (the next build replaces it).

        Returns:
            One ``{"rss_mib": ..., "peak_mib": ...}`` per actor.
        """
        import ray

        try:
            return ray.get([slot.actor.memory.remote() for slot in self._slots], timeout=MEMORY_TIMEOUT)
        except ray.exceptions.RayError:
            return []

    def matches(self, game, workers: int, address: str | None) -> bool:
        import ray

        return (
            not self.closed
            and ray.is_initialized()
            and (self.game_string, self.workers, self.address) == (str(game), workers, address)
        )

    # -- a build ------------------------------------------------------------------
    def run(
        self, shards, sync: Sync, progress: Progress, max_retries: int = MAX_RETRIES,
        shard_timeout: float = SHARD_TIMEOUT,
    ) -> tuple[list, int]:
        """Evaluate every shard (a ``.task`` for the actors, ``.describe(count)`` for errors)
        once; returns the results in shard order and the retries.

        Args:
            shards: the work, in pieces.
            sync: what the actors need before the first shard (policies, game).
            progress: where the finished shards are counted.
            max_retries: resubmissions of a shard whose actor was lost.
            shard_timeout: seconds a policy may take to answer one call.

        Returns:
            The shards' results in shard order, and the number of retries.
        """
        try:
            self._publish(sync)
            return self._dispatch(shards, progress, max_retries, shard_timeout)
        except BaseException:
            self.close()
            raise

    def _publish(self, sync: Sync) -> None:
        import ray

        for token in sync.dropped:
            self._refs.pop(token, None)
        for slot in self._slots:
            slot.forget.extend(sync.dropped)
        for token, (player, policy_id, policy) in sync.added.items():
            try:
                self._refs[token] = ray.put(policy)
            except Exception as exc:  # serialisation errors come in many types
                while exc.__cause__ is not None:  # Ray's report (many lines) wraps the pickler's error
                    exc = exc.__cause__
                raise MetaEvalError(f"policy {policy_id} of player {player} cannot be sent to Ray workers: "
                                    f"{type(exc).__name__}: {first_line(exc)}") from None

    def _dispatch(self, shards, progress: Progress, max_retries: int, timeout: float) -> tuple[list, int]:
        import ray
        from ray.exceptions import RayError, RayTaskError

        results = [None] * len(shards)
        failures = [0] * len(shards)
        timeouts = [0] * len(shards)
        queue = deque(range(len(shards)))
        running = {}  # ref -> (slot, shard number, deadline)

        def failed(slot: _Slot, i: int, reason: str, timed_out: bool = False) -> None:
            failures[i] += 1
            timeouts[i] += timed_out
            if timeouts[i] >= TIMEOUTS or (timed_out and failures[i] > max_retries):
                self._abandon(running)
                on = f", on {timeouts[i]} Ray actors in turn" if timeouts[i] > 1 else ""
                raise MetaEvalError(f"{shards[i].describe(len(shards))}: {reason}{on}") from None
            if failures[i] > max_retries:
                raise MetaEvalError(
                    f"{shards[i].describe(len(shards))} failed {failures[i]} times "
                    f"(retries allowed: {max_retries}); last error: {reason}"
                ) from None
            self._replace(slot)
            queue.appendleft(i)

        while queue or running:
            for slot in self._slots:
                if not slot.busy and queue:
                    self._await_start(slot)
                    i = queue.popleft()
                    task = shards[i].task
                    refs = {token: self._refs[token] for token in task.tokens}
                    ref = slot.actor.evaluate.remote(task, refs, slot.forget, timeout)
                    running[ref] = (slot, i, time.monotonic() + timeout + UNINTERRUPTIBLE_TIMEOUT)
                    slot.forget, slot.busy = [], True
            first_deadline = min(deadline for _, _, deadline in running.values())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=max(0.0, first_deadline - time.monotonic()))
            if not ready:  # a deadline passed: the actors past theirs are presumed hung
                now = time.monotonic()
                for ref, (slot, i, deadline) in list(running.items()):
                    if deadline <= now:
                        del running[ref]
                        slot.busy = False
                        failed(slot, i, f"no result within {timeout + UNINTERRUPTIBLE_TIMEOUT:g} s, a policy call "
                                        "stuck beyond the reach of the shard timeout (its actor was killed)", True)
                continue
            slot, i, _ = running.pop(ready[0])
            slot.busy = False
            try:
                results[i] = ray.get(ready[0])
            except RayTaskError as exc:
                if isinstance(exc.cause, PolicyTimeout):
                    failed(slot, i, str(exc.cause), True)
                elif not isinstance(exc.cause, RayError):  # the shard's own error: it would happen again
                    self._abandon(running)
                    raise MetaEvalError(f"{shards[i].describe(len(shards))}: {_cause(exc)}") from None
                else:
                    failed(slot, i, _cause(exc))
            except RayError as exc:  # the actor was lost
                failed(slot, i, _cause(exc))
            else:
                progress.advance(results[i].work)
        return results, sum(failures)

    @staticmethod
    def _abandon(running: dict) -> None:
        """Kill the actors of the shards still running and consume their results, so that Ray
        does not log their errors as unhandled (more lines after the one that says why)."""
        import ray

        for slot, _, _ in running.values():
            ray.kill(slot.actor, no_restart=True)
        for ref in running:
            try:
                ray.get(ref, timeout=ACTOR_START_TIMEOUT)
            except Exception:  # noqa: BLE001 - an error of an abandoned shard says nothing more
                pass

    def _await_start(self, slot: _Slot) -> None:
        """Wait up to ``ACTOR_START_TIMEOUT`` seconds for the slot's actor to start (an
        actor that died starting counts as started: its first shard fails and is retried)."""
        import ray

        if not slot.started:
            ready, _ = ray.wait([slot.pid], timeout=ACTOR_START_TIMEOUT)
            if not ready:
                raise MetaEvalError(
                    f"a Ray actor for {self.game_string} did not start within {ACTOR_START_TIMEOUT:g} s"
                )
            slot.started = True

    def _replace(self, slot: _Slot) -> None:
        """Kill the slot's actor (if it still lives) and start a fresh one in its place."""
        import ray

        ray.kill(slot.actor, no_restart=True)
        fresh = self._launch()
        slot.actor, slot.pid, slot.forget = fresh.actor, fresh.pid, []

    def close(self) -> None:
        """Kill the actors and release the policies in the object store."""
        import ray

        if not self.closed and ray.is_initialized():
            for slot in self._slots:
                ray.kill(slot.actor, no_restart=True)
        self._slots, self._refs = [], {}
        self.registry = PolicyRegistry()
        self.closed = True


def _cause(exc) -> str:
    """The application error behind a Ray error (a MetaEvalError's message alone), else
    Ray's own first line."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, MetaEvalError):
        return str(cause)
    if isinstance(cause, BaseException) and not isinstance(cause, type(exc)):
        return f"{type(cause).__name__}: {first_line(cause)}"
    return f"{type(exc).__name__}: {first_line(exc)}"
