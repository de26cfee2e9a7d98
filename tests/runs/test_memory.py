"""Resident memory as the loops record it each iteration."""

import numpy as np

from metaeval.runs import memory


def test_resident_memory_sees_an_allocation_come_and_go_and_keeps_its_peak():
    before = memory.resident_memory()
    block = np.ones(256 * 2**20 // 8)  # 256 MiB, every page touched
    during = memory.resident_memory()
    del block
    after = memory.resident_memory()
    assert during["rss_mib"] - before["rss_mib"] > 200
    assert after["rss_mib"] < during["rss_mib"] - 200
    assert after["peak_mib"] > before["rss_mib"] + 200  # the peak outlives the allocation


def test_without_build_actors_only_the_driver_is_measured():
    usage = memory.memory_usage()
    assert usage["actors"] == [] and usage["driver"]["peak_mib"] >= usage["driver"]["rss_mib"] > 0
