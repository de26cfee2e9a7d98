"""Tables from population runs: per-iteration summaries and rater comparisons."""

from __future__ import annotations

import pandas as pd


def summary_frame(records: list[dict]) -> pd.DataFrame:
    """One row per iteration: CCE gap (total, per player), payoffs, timings."""
    rows = []
    for record in records:
        row = {"iteration": record["iteration"], "cce_gap": record["cce_gap"]}
        for p, gap in enumerate(record["cce_gap_per_player"]):
            row[f"cce_gap_p{p}"] = gap
        for p, payoff in enumerate(record["mean_payoff"]):
            row[f"mean_payoff_p{p}"] = payoff
        for p, payoff in enumerate(record["mecce_payoff"]):
            row[f"mecce_payoff_p{p}"] = payoff
        row["seconds"] = record["seconds"]["total"]
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_frame(runs: dict[str, dict[int, list[dict]]]) -> pd.DataFrame:
    """Long table over raters and seeds: rater, seed, and every summary column."""
    frames = []
    for rater, by_seed in runs.items():
        for seed, records in by_seed.items():
            frame = summary_frame(records)
            frame.insert(0, "seed", seed)
            frame.insert(0, "rater", rater)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def final_gaps(comparison: pd.DataFrame) -> pd.DataFrame:
    """Final-iteration CCE gap per rater: mean, std, min, max over seeds."""
    last = comparison[comparison.iteration == comparison.groupby("rater").iteration.transform("max")]
    table = last.groupby("rater").cce_gap.agg(["mean", "std", "min", "max", "count"])
    return table.rename(columns={"count": "seeds"}).reset_index()
