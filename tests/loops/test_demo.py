"""``make demo``: the JPSRO gap falls, the final population is rated, the files are where it says."""

import re
from pathlib import Path

from metaeval.loops import demo


def test_demo_prints_the_falling_gap_the_ratings_and_where_the_files_are(tmp_path, capsys):
    result = demo.run(tmp_path, iterations=6, progress=False)
    out = capsys.readouterr().out
    assert result["gaps"][0] > 2 and result["gaps"][-1] < result["gaps"][0] / 5
    table = result["table"]
    assert len(table) == 7 and set(demo.RATERS) <= set(table.columns)
    assert table["deviation rank"].min() == 1 and table["deviation"].max() <= 1e-9  # a CCE: nobody gains
    listed = [Path(p) for p in re.findall(r"^   (/\S+)$", out, flags=re.M)]
    assert listed == result["files"] and all(p.stat().st_size > 0 for p in listed)
    assert "From 2.06 to" in out and "rated three ways" in out
