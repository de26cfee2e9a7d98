"""Independent chunks of work (bootstrap replicates) mapped over a pool of Ray actors.

The task (the game, the rater and its options) goes to the object store once per map and
each actor runs chunks of seeds with it; a chunk's result depends only on its seeds, so
results are the same on any number of actors, or in-process. An actor that dies is
replaced and its chunk resubmitted, up to ``max_retries`` times per chunk. The actors are
killed when the map ends, or, inside `actor_scope`, when the scope ends (many maps,
one start-up); Ray itself stays up for the next call and is stopped by
[`metaeval.distributed.shutdown`][metaeval.distributed.shutdown] (or at exit) if metaeval started it.
"""

from __future__ import annotations

import atexit
import os
from contextlib import contextmanager

from metaeval.distributed.session import ensure_ray
from metaeval.errors import MetaEvalError


class ChunkWorker:
    """The actor: runs any task on chunks (the task arrives by object-store reference)."""

    def run(self, task, chunk):
        return task(chunk)


class _Exit:
    hooked = False


class _Actors:
    """The actors of one scope (`actor_scope`), kept between maps, or of one map."""

    current: _Actors | None = None

    def __init__(self, workers: int, address: str | None):
        import ray

        from metaeval.distributed.build import release_idle_pool, shutdown

        ensure_ray(address, num_cpus=max(workers, os.cpu_count() or 1), workers=workers)
        release_idle_pool()
        if not _Exit.hooked:
            atexit.register(shutdown)
            _Exit.hooked = True
        self.workers, self.address = workers, address
        cpus = min(1.0, ray.cluster_resources().get("CPU", 1.0) / workers)
        self._class = ray.remote(ChunkWorker).options(num_cpus=cpus, max_restarts=0, max_task_retries=0)
        self.actors = [self._class.remote() for _ in range(workers)]

    def replace(self, slot: int) -> None:
        import ray

        ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self._class.remote()

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []


@contextmanager
def actor_scope(workers: int, address: str | None = None):
    """Every `map_on_actors` with these ``workers`` and ``address`` inside the scope uses
    the same actors (started once: an actor's start-up imports metaeval), killed at its end."""
    if workers <= 1 and address is None or _Actors.current is not None:
        yield
        return
    _Actors.current = _Actors(workers, address)
    try:
        yield
    finally:
        _Actors.current.close()
        _Actors.current = None


def map_on_actors(task, chunks: list, workers: int, address: str | None = None, finished=None,
                  max_retries: int = 3) -> list:
    """``[task(chunk) for chunk in chunks]``, computed by ``workers`` Ray actors (those of the
    enclosing `actor_scope`, if any, else actors started for this map);
    ``finished(i)``, if given, is called as the result of chunk ``i`` arrives (for progress)."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    scoped = _Actors.current
    if scoped is not None and (scoped.workers, scoped.address) != (workers, address):
        scoped = None
    pool = scoped or _Actors(workers, address)
    task_ref = ray.put(task)
    results, failures, pending, running = [None] * len(chunks), [0] * len(chunks), list(range(len(chunks))), {}
    try:
        while pending or running:
            for slot, actor in enumerate(pool.actors):
                if pending and slot not in {s for s, _ in running.values()}:
                    i = pending.pop(0)
                    running[actor.run.remote(task_ref, chunks[i])] = (slot, i)
            (ready,), _ = ray.wait(list(running), num_returns=1)
            slot, i = running.pop(ready)
            try:
                results[i] = ray.get(ready)
            except RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, MetaEvalError):
                    raise MetaEvalError(str(cause)) from None
                raise
            except RayActorError as exc:
                failures[i] += 1
                if failures[i] > max_retries:
                    raise MetaEvalError(f"chunk {i} of {len(chunks)} lost its actor {failures[i]} times: {exc}") from None
                pool.replace(slot)
                pending.insert(0, i)
                continue
            if finished is not None:
                finished(i)
    finally:
        if pool is not scoped:
            pool.close()
    return results
