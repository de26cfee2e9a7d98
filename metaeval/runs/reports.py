"""Tables from population runs: per-iteration summaries and rater comparisons; and how
every command prints a table."""

from __future__ import annotations

import numpy as np
import pandas as pd


def population_age(records: list[dict]) -> list[float]:
    """Per iteration, the mean age of the members rated: iterations since each policy first
    appeared among them (in ``policy_ids``; a trained or replaced policy is a new one). Low
    ages mean the population turns over; high ones that it keeps a core."""
    birth, ages = {}, []
    for record in records:
        t = record["iteration"]
        members = [(p, i) for p, ids in enumerate(record["policy_ids"]) for i in ids]
        ages.append(float(np.mean([t - birth.setdefault(member, t) for member in members])))
    return ages


def summary_frame(records: list[dict], metagame: str | None = None) -> pd.DataFrame:
    """One row per iteration: CCE gap (total, per player; empty when not computed, as in
    sampled mode), the approximate gap's lower bound and its standard error (when estimated), payoffs, the population's mean age (`population_age`), timings;
    with ``metagame`` (e.g. "sampled, 1000 episodes per entry"), a column saying so."""
    rows = []
    for record, age in zip(records, population_age(records)):
        row = {"iteration": record["iteration"], **_metagame(metagame), "cce_gap": record["cce_gap"]}
        for p, gap in enumerate(record["cce_gap_per_player"] or []):
            row[f"cce_gap_p{p}"] = gap
        row.update(_approximate(record))
        for p, payoff in enumerate(record["mean_payoff"]):
            row[f"mean_payoff_p{p}"] = payoff
        for p, payoff in enumerate(record["mecce_payoff"]):
            row[f"mecce_payoff_p{p}"] = payoff
        row["mecce_support"] = record["mecce_support"]
        row["population_age"] = age
        row["seconds"] = record["seconds"]["total"]
        rows.append(row)
    return pd.DataFrame(rows)


def _approximate(record: dict) -> dict:
    """The approximate gap's columns, when estimated: the lower bound (the estimate where a
    profitable deviation was found, else 0), the estimate and its standard error."""
    if record.get("approximate_cce_gap") is None:
        return {}
    return {"approximate_cce_gap_lower_bound": record["approximate_cce_gap"],
            "approximate_cce_gap_estimate": record.get("approximate_cce_gap_estimate", record["approximate_cce_gap"]),
            "approximate_cce_gap_stderr": record["approximate_cce_gap_stderr"]}


def _metagame(metagame: str | None) -> dict:
    return {} if metagame is None else {"metagame": metagame}


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


def paired_differences(comparison: pd.DataFrame, baseline: str = "uniform") -> pd.DataFrame:
    """Final CCE gap minus the baseline rater's, seed by seed (runs of one seed share their
    random replacements, so the difference isolates the rater): mean, std, and how many
    seeds the rater ends lower, equal (within 1e-9) or higher."""
    last = comparison[comparison.iteration == comparison.iteration.max()]
    gaps = last.pivot(index="seed", columns="rater", values="cce_gap")
    rows = []
    for rater in gaps.columns.drop(baseline):
        diff = gaps[rater] - gaps[baseline]
        rows.append({"rater": rater, "baseline": baseline, "mean": diff.mean(), "std": diff.std(),
                     "lower": int((diff < -1e-9).sum()), "equal": int((diff.abs() <= 1e-9).sum()),
                     "higher": int((diff > 1e-9).sum())})
    return pd.DataFrame(rows)


def psro_frame(records: list[dict], metagame: str | None = None) -> pd.DataFrame:
    """One row per PSRO iteration: CCE gap (total, per player), the approximate gap's lower
    bound and its standard error (when estimated), NashConv and exploitability
    (2-player zero-sum games; all empty when not computed, as in sampled mode),
    meta-distribution support, population sizes, timings, resident memory
    (`memory_columns`); ``metagame`` as in `summary_frame`."""
    rows = []
    for record in records:
        row = {"iteration": record["iteration"], **_metagame(metagame), "cce_gap": record["cce_gap"]}
        for p, gap in enumerate(record["cce_gap_per_player"] or []):
            row[f"cce_gap_p{p}"] = gap
        row.update(_approximate(record))
        row["nash_conv"] = record["nash_conv"]
        row["exploitability"] = record["exploitability"]
        row["support"] = record["support"]
        for p, size in enumerate(record["sizes"]):
            row[f"size_p{p}"] = size
        row["seconds"] = record["seconds"]["total"]
        row.update(memory_columns(record))
        rows.append(row)
    return pd.DataFrame(rows)


def memory_columns(record: dict) -> dict:
    """The driver's current and peak resident memory (MiB) and the largest peak among the
    build actors, of a record that has them ([`metaeval.runs.memory`][metaeval.runs.memory])."""
    memory = record.get("memory")
    if memory is None:
        return {}
    actors = [actor["peak_mib"] for actor in memory["actors"]]
    return {"rss_mib": memory["driver"]["rss_mib"], "peak_rss_mib": memory["driver"]["peak_mib"],
            "actors_peak_rss_mib": max(actors) if actors else None}


def table_text(frame: pd.DataFrame, digits: int = 6, decimals: int | None = None, index: bool = False) -> str:
    """``frame`` as the commands print it: numbers to ``digits`` significant digits (or to
    ``decimals`` places) and never ``-0``, columns of whole numbers (counts, ranks) as
    integers. Round noise away first (``Rating.to_frame`` does: its ratings are rounded to
    the rater's accuracy)."""
    shown = frame.copy()
    for column in shown.columns:
        values = shown[column]
        whole = pd.api.types.is_float_dtype(values) and values.notna().all() and (values % 1 == 0).all()
        if whole and (values.abs() < 2.0**53).all() and decimals is None:  # exact as integers
            shown[column] = values.astype(np.int64)
    if decimals is None:
        return shown.to_string(index=index, float_format=lambda x: f"{x + 0.0:.{digits}g}")
    return shown.to_string(index=index, float_format=lambda x: f"{round(x, decimals) + 0.0:.{decimals}f}")
