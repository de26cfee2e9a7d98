"""The one timing rule of the benchmarks: the median wall time of repeated calls; and
another process's CPU seconds."""

from __future__ import annotations

import os
import statistics
import time


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median_time(function, repeats: int = 1, clock=time.perf_counter):
    """Median of ``clock()`` elapsed over ``repeats`` calls of ``function()``, and the last result.

    ``clock`` defaults to wall time; pass another cumulative clock (e.g. CPU seconds) to
    measure that instead.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    times, result = [], None
    for _ in range(repeats):
        start = clock()
        result = function()
        times.append(clock() - start)
    return statistics.median(times), result
