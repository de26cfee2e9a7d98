"""Resident memory as the loops record it each iteration."""

import numpy as np

from metaeval.runs import memory, reports
from metaeval.viz import plots


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


def test_the_summary_and_the_figure_take_lost_actors_missing_measures_and_old_records(tmp_path):
    def measured(iteration, actors, rss=None):
        return {"iteration": iteration, "sizes": [iteration + 1] * 2, "memory": {
            "driver": {"rss_mib": rss, "peak_mib": 10.0 + iteration}, "actors": [{"rss_mib": 5.0, "peak_mib": 6.0}] * actors}}

    records = [measured(0, 2, rss=9.0), measured(1, 0), {"iteration": 2, "sizes": [3, 3]}]  # the last from before
    assert [reports.memory_columns(r) for r in records] == [
        {"rss_mib": 9.0, "peak_rss_mib": 10.0, "actors_peak_rss_mib": 6.0},
        {"rss_mib": None, "peak_rss_mib": 11.0, "actors_peak_rss_mib": None}, {}]
    assert plots.plot_memory(tmp_path, records).stat().st_size > 0
    assert plots.plot_memory(tmp_path / "none", records[2:]) is None


def test_another_process_is_read_by_its_pid_and_a_gone_one_gives_none():
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        other = memory.resident_memory(child.pid)
        assert other["rss_mib"] > 0 and other["peak_mib"] >= other["rss_mib"]
    finally:
        child.kill()
        child.wait()
    assert memory.resident_memory(child.pid) == {"rss_mib": None, "peak_mib": None}
    assert memory.resident_memory(os.getpid())["rss_mib"] > 0
