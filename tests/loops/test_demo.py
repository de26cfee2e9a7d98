"""``make demo``: the JPSRO gap falls, the final population is rated, the files are where it says."""

import subprocess
import sys

from metaeval.loops import demo


def test_demo_prints_the_falling_gap_the_ratings_and_where_the_files_are(tmp_path, capsys):
    result = demo.run(tmp_path, iterations=6, progress=False)
    out = capsys.readouterr().out
    assert result["gaps"][0] > 2 and result["gaps"][-1] < result["gaps"][0] / 5
    table = result["table"]
    assert len(table) == 7 and set(demo.RATERS) <= set(table.columns)
    assert table["deviation rank"].min() == 1 and table["deviation"].max() <= 1e-9  # a CCE: nobody gains
    figures = ", ".join(str(path) for path in result["figures"])
    assert out.splitlines()[-2:] == [f"results in {tmp_path}", f"plots: {figures}"]
    assert all(path.stat().st_size > 0 for path in result["results"] + result["figures"])
    assert {tmp_path / "psro" / "cce_gap.png", tmp_path / "ratings_deviation.png"} <= set(result["figures"])
    assert "From 2.06 to" in out and "rated three ways" in out and "-0 " not in out


def test_the_demos_repeated_warnings_are_one_line_without_source(tmp_path):
    """Its six identical-policy warnings (best responses found twice) are said once, counted."""
    done = subprocess.run([sys.executable, "-m", "metaeval.loops.demo", "--out", str(tmp_path), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("metaeval: warning: IdenticalPoliciesWarning x6, the first: ")
