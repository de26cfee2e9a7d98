"""PSRO on leduc_2p with the search oracle against the DQN oracle, at equal wall and CPU time.

Run from the repository root: ``python -m bench.search_oracle [--seeds 3] [--wall 900]
[--search-episodes S] [--dqn-episodes D] [--parallel 2]``. Each run is

    metaeval psro --game leduc_2p --solver nash --oracle SIDE --oracle-episodes E --oracle-target psro --seed K

through the Python API (:class:`metaeval.loops.psro.PSRO`, stepped one iteration at a time):
one uniform policy per player to start, the exact meta-game, the meta-Nash by linear
programming, and per iteration one new policy per player from the oracle, trained or
searched against the other player's meta-Nash marginal, the two sides differing only in
``--oracle`` and its episode budget: ``search`` (:class:`metaeval.responses.Search` at its
defaults; the policy added is the searched table, or the exact best response where the
budget covers a walk of the tree per opponent profile) or ``dqn``
(:class:`metaeval.responses.DQN` at its defaults; the greedy policy of its Q-network). The
budgets are chosen so that one oracle call costs about the same CPU time on either side;
the bench prints the mean CPU seconds per call it measured, to check.

Each run steps until its clock passes ``--wall`` seconds. The clocks (wall and process CPU
seconds; the process is the run's own: no Ray workers) run over the loop less the time
spent measuring: the exact exploitability (NashConv / 2 of the meta-Nash mixture, the
record's ``exploitability``, a tree walk) is an instrument, not part of the algorithm, and
it is taken out of both sides' clocks. A row gives the exploitability of the population
after ``iteration`` oracle rounds at the moment that population's meta-Nash was known
(its meta-game built and solved, before the next oracle calls). After the last step the
final population is measured the same way.

Each run is a fresh process (``--parallel`` at a time, each seed's two sides side by side,
so they share the machine's load), and each run's rows are written as they come
(``per_run/``). A CSV of every row, the figure (exploitability against wall and against
CPU seconds, log scale, one line per run) and a table of the exploitability at fixed wall
and CPU times (mean over seeds, with search / dqn) go to ``--out``.

The DQN budget was tuned on seed 100, which is not reported: ``python -m bench.search_oracle
--sides dqn --first-seed 100 --seeds 1 --wall 600 --dqn-episodes E --out OUT`` for E = 500,
1,000, 2,000 and 4,000, side by side (2,000 and 4,000 lowest at 600 s, 2,000 the CLI's
default). The search's budget then follows from the CPU per call: 20,000 episodes cost 1.12
CPU seconds a call on that seed against DQN's 0.98 at 2,000, hence 18,000.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import time
from pathlib import Path

import numpy as np
import pandas as pd

SIDES = ("search", "dqn")
COLOURS = {"search": "tab:blue", "dqn": "tab:orange"}
MAX_ITERATIONS = 10_000
"""A bound the wall budget always reaches first."""


class Clock:
    """Wall and process CPU seconds since it started, less those of the calls it excludes."""

    def __init__(self):
        self.start = np.array([time.perf_counter(), time.process_time()])
        self.excluded = np.zeros(2)

    def now(self) -> np.ndarray:
        """``[wall, cpu]`` seconds so far, less the excluded ones."""
        return np.array([time.perf_counter(), time.process_time()]) - self.start - self.excluded

    def excluding(self, function):
        """``function`` with its own seconds taken out of this clock."""

        def timed(*args, **kwargs):
            before = self.now()
            try:
                return function(*args, **kwargs)
            finally:
                self.excluded += self.now() - before

        return timed


def run_side(side: str, seed: int, episodes: int, wall: float, log: Path) -> list[dict]:
    """One PSRO run with the ``side`` oracle until its clock passes ``wall`` seconds; its rows."""
    import warnings

    from metaeval.loops.psro import PSRO, PSROConfig

    warnings.simplefilter("ignore")  # two greedy responses may act alike; each is still its own policy
    run = PSRO(PSROConfig(game="leduc_2p", solver="nash", oracle=side, oracle_episodes=episodes,
                          oracle_target="psro", iterations=MAX_ITERATIONS, seed=seed))
    clock = Clock()
    run.evaluator.gap = clock.excluding(run.evaluator.gap)  # the exact exploitability: measurement
    oracle, calls = run.oracle, []  # calls: (clock at the call, its [wall, cpu] seconds)

    def timed_oracle(*args):
        before = clock.now()
        policy = oracle(*args)
        calls.append((before, clock.now() - before))
        return policy

    run.oracle = timed_oracle
    rows, cost = [], np.zeros(2)  # cost: the seconds of the oracle calls that made the population

    def add_row(exploitability: float, at: np.ndarray) -> None:
        rows.append({"side": side, "seed": seed, "episodes": episodes, "iteration": len(rows),
                     "exploitability": exploitability, "wall_seconds": at[0], "cpu_seconds": at[1],
                     "oracle_wall": cost[0], "oracle_cpu": cost[1]})
        pd.DataFrame(rows).to_csv(log, index=False)

    while clock.now()[0] < wall and len(rows) < MAX_ITERATIONS:
        first = len(calls)
        record = run.step()
        add_row(record["exploitability"], calls[first][0])
        cost = sum(seconds for _, seconds in calls[first:])
    add_row(run.evaluator.exploitability(), clock.now())
    return rows


def run_all(runs: list[tuple[str, int, int]], args) -> pd.DataFrame:
    """Every (side, seed, episodes) run, each in a fresh process, ``args.parallel`` at a time."""
    logs = args.out / "per_run"
    logs.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    frames = []
    with concurrent.futures.ProcessPoolExecutor(args.parallel, mp_context=context, max_tasks_per_child=1) as pool:
        futures = [pool.submit(run_side, side, seed, episodes, args.wall, logs / f"{side}-{seed}.csv")
                   for side, seed, episodes in runs]
        for future in concurrent.futures.as_completed(futures):
            frame = pd.DataFrame(future.result())
            frames.append(frame)
            last = frame.iloc[-1]
            print(f"{last.side} seed {last.seed}: exploitability {last.exploitability:.4g} after "
                  f"{last.iteration} iterations, {last.wall_seconds:.0f} s wall, {last.cpu_seconds:.1f} s CPU",
                  flush=True)
    return pd.concat(frames, ignore_index=True)


def at_times(runs: pd.DataFrame, clock: str, times: list[float]) -> pd.DataFrame:
    """Per side and time t on ``clock`` (a column of ``runs``): the mean over seeds of the
    exploitability of each run's last row at or before t (runs that stopped before t left
    out; ``runs`` counts those kept)."""
    rows = []
    for side, frame in runs.groupby("side"):
        for t in times:
            values = []
            for _, one in frame.groupby("seed"):
                if one[clock].max() >= t:
                    values.append(one[one[clock] <= t].exploitability.iloc[-1])
            rows.append({"clock": clock, "at": t, "side": side, "runs": len(values),
                         "exploitability": np.mean(values) if values else np.nan,
                         "low": min(values, default=np.nan), "high": max(values, default=np.nan)})
    return pd.DataFrame(rows)


def summary(runs: pd.DataFrame, marks: dict[str, list[float]]) -> pd.DataFrame:
    """The exploitability at the fixed marks of each clock (``wall_seconds``, ``cpu_seconds``,
    ``iteration``), side by side, with search / dqn."""
    long = pd.concat([at_times(runs, clock, times) for clock, times in marks.items()])
    table = long.pivot(index=["clock", "at"], columns="side", values=["exploitability", "low", "high", "runs"])
    table = table.reindex(pd.MultiIndex.from_frame(long[["clock", "at"]].drop_duplicates()))
    table.columns = [f"{side} {column}" for column, side in table.columns]
    table = table[[f"{side} {column}" for side in SIDES for column in ("exploitability", "low", "high", "runs")
                   if f"{side} {column}" in table]]
    if all(f"{side} exploitability" in table for side in SIDES):
        table["search / dqn"] = table["search exploitability"] / table["dqn exploitability"]
    for side in SIDES:
        if f"{side} runs" in table:
            table[f"{side} runs"] = table[f"{side} runs"].astype(int)
    return table.reset_index()


def costs(runs: pd.DataFrame) -> pd.DataFrame:
    """Per side: the oracle budget, runs, iterations reached, mean seconds per oracle call
    (two calls per iteration) and the CPU share of the wall time."""
    rows = []
    for side, frame in runs.groupby("side"):
        last = frame.loc[frame.groupby("seed").iteration.idxmax()]
        rounds = last.iteration.sum()
        rows.append({"side": side, "episodes": int(frame.episodes.iloc[0]), "runs": len(last),
                     "iterations (mean)": last.iteration.mean(),
                     "wall s per call": frame.oracle_wall.sum() / (2 * rounds),
                     "CPU s per call": frame.oracle_cpu.sum() / (2 * rounds),
                     "CPU / wall": last.cpu_seconds.sum() / last.wall_seconds.sum()})
    return pd.DataFrame(rows)


def plot(runs: pd.DataFrame, out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for side in SIDES:
        frame = runs[runs.side == side]
        for i, (seed, one) in enumerate(frame.groupby("seed")):
            label = f"{side} ({int(one.episodes.iloc[0]):,} episodes a call)" if i == 0 else None
            for ax, clock in zip(axes, ("wall_seconds", "cpu_seconds")):
                ax.step(one[clock], one.exploitability, where="post", color=COLOURS[side], lw=1, alpha=0.8,
                        label=label)
    axes[0].set_xlabel("wall seconds (cumulative)")
    axes[1].set_xlabel("CPU seconds (cumulative, the run's process)")
    axes[0].set_ylabel("exact exploitability of the meta-Nash mixture")
    for ax in axes:
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = out / "exploitability.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def numbers(text: str) -> list[float]:
    return [float(t) for t in text.split(",")]


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--wall", type=float, default=900, help="wall seconds per run (its clock, see above)")
    parser.add_argument("--search-episodes", type=int, default=18_000, help="episodes per search oracle call")
    parser.add_argument("--dqn-episodes", type=int, default=2_000, help="episodes per DQN oracle call")
    parser.add_argument("--sides", default=",".join(SIDES), help="comma-separated: search, dqn")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (each in its own process)")
    parser.add_argument("--at-wall", type=numbers, default=[60, 120, 300, 600, 900])
    parser.add_argument("--at-cpu", type=numbers, default=[15, 30, 60, 120, 150])
    parser.add_argument("--at-iterations", type=numbers, default=[10, 20, 40, 80])
    parser.add_argument("--report", action="store_true", help="run nothing: tabulate and plot the rows in "
                        "--out's per_run/ (of an interrupted bench too)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/search_oracle"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report:
        runs = pd.concat([pd.read_csv(path) for path in sorted((args.out / "per_run").glob("*.csv"))],
                         ignore_index=True)
    else:
        episodes = {"search": args.search_episodes, "dqn": args.dqn_episodes}
        sides = args.sides.split(",")
        runs = run_all([(side, seed, episodes[side]) for seed in range(args.first_seed, args.first_seed + args.seeds)
                        for side in sides], args)
    runs = runs.sort_values(["side", "seed", "iteration"], ignore_index=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    table = summary(runs, {"wall_seconds": args.at_wall, "cpu_seconds": args.at_cpu,
                           "iteration": args.at_iterations})
    table.to_csv(args.out / "summary.csv", index=False)
    budgets = ", ".join(f"{side} {int(frame.episodes.iloc[0]):,}" for side, frame in runs.groupby("side"))
    title = (f"leduc_2p PSRO, Nash meta-solver, exact meta-game; oracle episodes per call: {budgets}; "
             f"seeds {', '.join(str(s) for s in sorted(runs.seed.unique()))}")
    print(f"\n{title}")
    print(costs(runs).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print("\nexploitability at fixed wall and CPU seconds and iterations (mean over the runs that reached "
          "them; low/high over seeds)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    plot(runs, args.out, title)
    return runs


if __name__ == "__main__":
    main()
