"""Resident memory of a run: this process's and its build actors', recorded each iteration.

    record["memory"] = memory_usage()
    # {"driver": {"rss_mib": 412.0, "peak_mib": 530.1},
    #  "actors": [{"rss_mib": 301.2, "peak_mib": 322.0}, ...]}   # [] without Ray actors

``rss_mib`` is the resident memory now, ``peak_mib`` its maximum since the process started
(Linux ``VmRSS`` and ``VmHWM``), in MiB. A peak that keeps rising from iteration to
iteration while the population is capped, or rises faster than the population's own
size, is a leak. Like the timings, these vary between identical runs: a resumed run is
checked without them (`metaeval.runs.rundir.MEASUREMENTS`).
"""

from __future__ import annotations

import resource
import sys

MEMORY = "memory"
"""The record field of the memory measurements."""


def resident_memory(pid: int | str = "self") -> dict:
    """A process's current and peak resident memory in MiB (this process's by default).
    Where ``/proc`` is missing or the process is gone, ``rss_mib`` is None and the peak
    comes from ``getrusage`` for this process, None for another."""
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return {"rss_mib": _mib(fields["VmRSS"]), "peak_mib": _mib(fields["VmHWM"])}
    except (OSError, KeyError):
        if pid != "self":
            return {"rss_mib": None, "peak_mib": None}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB elsewhere
        return {"rss_mib": None, "peak_mib": peak / 2**20 if sys.platform == "darwin" else peak / 1024}


def memory_usage() -> dict:
    """``{"driver": resident_memory(), "actors": [...]}``: the actors' of the meta-game
    builds' Ray pool, if one is alive (`metaeval.distributed.pool.EvaluatorPool.memory`)."""
    from metaeval.distributed.build import current_pool

    pool = current_pool()
    return {"driver": resident_memory(), "actors": [] if pool is None else pool.memory()}


def _mib(field: str) -> float:
    """``"  12345 kB"`` in MiB."""
    return int(field.split()[0]) / 1024
