"""Rate the two published Atari tables shipped with metaeval, with every rater.

    python examples/rate_atari.py [--out docs/atari]

For each table: uniform and Nash averaging on the 2-player agent-vs-task game
(min-max normalised scores), deviation ratings of the 2-player and the 3-player
agent-vs-agent-vs-task games, payoff ratings against the affinity-target CCE of the
3-player game, and the social-choice methods on the profile where each game ranks the
agents (ties broken with seed 0). Writes ``TABLE.csv`` (one column per method, agents
in the order of the 3-player deviation ratings) and ``TABLE_3p_deviation.png``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import metaeval
from metaeval import data
from metaeval.viz import plots
from metaeval.solvers import social_choice

VOTING_OPTIONS = {"approval": {"k": 3}, "stv": {"num_winners": 3}}


def rate_table(name: str, out: Path) -> pd.DataFrame:
    table = data.load_table(name)
    two, three = data.agent_vs_task(table), data.agent_vs_agent_vs_task(table)
    columns, seconds = {}, {}

    def record(label, game, method, **options):
        start = time.perf_counter()
        rating = metaeval.rate(game, method, **options)
        seconds[label] = time.perf_counter() - start
        columns[label] = rating.ratings[0]
        return rating

    record("uniform", two, "uniform")
    record("nash averaging", two, "nash")
    record("deviation 2p", two, "deviation")
    deviation = record("deviation 3p", three, "deviation")
    record("payoff 3p affinity", three, "payoff", target="affinity")
    profile = data.Profile.from_table(table, seed=0)
    for method in social_choice.METHODS:
        start = time.perf_counter()
        election = social_choice.elect(profile, method, **VOTING_OPTIONS.get(method, {}))
        seconds[method] = time.perf_counter() - start
        columns[method] = election.scores
    frame = pd.DataFrame(columns, index=table.index)
    frame = frame.iloc[(-frame["deviation 3p"]).argsort(kind="stable")]
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / f"{name}.csv", float_format="%.6g")
    plots.plot_rating_bars(out / f"{name}_3p_deviation.png", deviation)
    print(f"# {data.source_line(name)}")
    print(frame.to_string(float_format=lambda x: f"{x:.4g}"))
    print("seconds:", ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    print()
    return frame


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/atari"))
    args = parser.parse_args(argv)
    for name in ("atari_rainbow_table6", "atari_agent57"):
        rate_table(name, args.out)


if __name__ == "__main__":
    main()
