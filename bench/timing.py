"""The one timing rule of the benchmarks: the median wall time of repeated calls."""

from __future__ import annotations

import statistics
import time


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
