"""Independent chunks of work (bootstrap replicates) mapped over a pool of Ray actors.

Each actor receives the task once (the game, the rater and its options) and then
runs chunks of seeds; a chunk's result depends only on its seeds, so results are
the same on any number of actors, or in-process. An actor that dies is replaced and
its chunk resubmitted, up to ``max_retries`` times per chunk. The actors are killed
when the map ends; Ray itself stays up for the next call and is stopped by
:func:`metaeval.distributed.shutdown` (or at exit) if metaeval started it.
"""

from __future__ import annotations

import atexit
import os

from tqdm.auto import tqdm

from metaeval.distributed.session import ensure_ray
from metaeval.errors import MetaEvalError


class ChunkWorker:
    """The actor: holds one task and runs it on chunks."""

    def __init__(self, task):
        self._task = task

    def run(self, chunk):
        return self._task(chunk)


class _Exit:
    hooked = False


def map_on_actors(task, chunks: list, workers: int, address: str | None = None, progress=None,
                  max_retries: int = 3, desc: str = "bootstrap", unit: str = "replicate") -> list:
    """``[task(chunk) for chunk in chunks]``, computed by ``workers`` Ray actors; the progress
    bar counts ``len(chunk)`` ``unit``s per chunk (one per chunk where a chunk has no length)."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    from metaeval.distributed.build import release_idle_pool, shutdown

    ensure_ray(address, num_cpus=max(workers, os.cpu_count() or 1), workers=workers)
    release_idle_pool()
    if not _Exit.hooked:
        atexit.register(shutdown)
        _Exit.hooked = True
    cpus = min(1.0, ray.cluster_resources().get("CPU", 1.0) / workers)
    actor_class = ray.remote(ChunkWorker).options(num_cpus=cpus, max_restarts=0, max_task_retries=0)
    task_ref = ray.put(task)
    actors = [actor_class.remote(task_ref) for _ in range(workers)]
    results, failures, pending, running = [None] * len(chunks), [0] * len(chunks), list(range(len(chunks))), {}
    size = [len(c) if unit == "replicate" else 1 for c in chunks]
    bar = tqdm(total=sum(size), unit=unit, desc=desc, leave=False,
               disable=None if progress is None else not progress)
    try:
        while pending or running:
            for slot, actor in enumerate(actors):
                if pending and slot not in {s for s, _ in running.values()}:
                    i = pending.pop(0)
                    running[actor.run.remote(chunks[i])] = (slot, i)
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
                ray.kill(actors[slot], no_restart=True)
                actors[slot] = actor_class.remote(task_ref)
                pending.insert(0, i)
                continue
            bar.update(size[i])
    finally:
        bar.close()
        for actor in actors:
            ray.kill(actor, no_restart=True)
    return results
