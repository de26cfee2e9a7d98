"""Tune PBT exploiting on metaeval's rating against exploiting on win rate against the pool.

    python -m bench.tune_pbt OUT [--seeds 5] [--iterations 8] [--episodes 250]

Each run is ``examples/tune_pbt.py``: Ray Tune's synchronous ``PopulationBasedTraining``
of 4 trials of metaeval's PPO (one learner per player) on 2-player leduc poker, perturbing
after each of ``--iterations`` iterations, embedded Ray. The two arms differ only in the
metric PBT exploits on: ``metaeval_rating`` (deviation rating in the population of all
trials' policies) or ``pool_win_rate`` (payoff against the other player's population,
rescaled to [0, 1]); seeds, trials' first weights and learning rates, training streams and
schedule are the same. After every round the shared Evaluator records the exact
exploitability of the population's meta-Nash mixture. Writes ``OUT/exploitability.csv``
(arm, seed, round, exploitability), ``OUT/tune_pbt.png`` (per round, each arm's mean over
seeds with every seed's line) and prints per round both arms' means, their paired
difference and how many seeds each arm ends lower. Each run is its own process, in
``OUT/ARM/seedS``; a finished run is not repeated, an unfinished one resumes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval.runs import rundir

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("metaeval_rating", "pool_win_rate")
NAME = "tune-pbt"


def rounds_file(out: Path, arm: str, seed: int) -> Path:
    return out / arm / f"seed{seed}" / NAME / "metaeval" / "rounds.json"


def run(out: Path, arm: str, seed: int, iterations: int, episodes: int) -> float | None:
    """One run in its own process, unless finished; its wall time (None if it was finished)."""
    path = rounds_file(out, arm, seed)
    if path.exists() and str(iterations) in rundir.read_json(path, sealed=True)["rounds"]:
        return None
    clock = time.perf_counter()
    # one XLA thread per trial: four trials share the cores
    env = {**os.environ, "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
    subprocess.run([sys.executable, str(ROOT / "examples" / "tune_pbt.py"), "--out", str(out / arm / f"seed{seed}"),
                    "--metric", arm, "--seed", str(seed), "--iterations", str(iterations),
                    "--episodes", str(episodes)], check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - clock


def exploitability_table(out: Path, seeds: list[int]) -> pd.DataFrame:
    rows = []
    for arm in ARMS:
        for seed in seeds:
            rounds = rundir.read_json(rounds_file(out, arm, seed), sealed=True)["rounds"]
            for r, record in sorted(rounds.items(), key=lambda item: int(item[0])):
                value = next(iter(record["metrics"].values()))["exploitability"]
                rows.append({"arm": arm, "seed": seed, "round": int(r), "exploitability": value})
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm, colour in zip(ARMS, ("tab:blue", "tab:orange")):
        rows = table[table.arm == arm]
        for _, seed in rows.groupby("seed"):
            ax.plot(seed["round"], seed.exploitability, color=colour, alpha=0.25, lw=1)
        mean = rows.groupby("round").exploitability.mean()
        ax.plot(mean.index, mean.values, color=colour, lw=2.5, label=f"PBT exploits on {arm} (mean)")
    ax.set_xlabel("perturbation interval (round)")
    ax.set_ylabel("exploitability of the meta-Nash mixture")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=100, help="seeds not used while choosing the settings")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=250)
    args = parser.parse_args(argv)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    for seed in seeds:  # the arms alternate, so a change of machine load falls on both
        for arm in ARMS:
            seconds = run(args.out, arm, seed, args.iterations, args.episodes)
            if seconds is not None:
                print(f"{arm} seed {seed}: {seconds:.0f} s", flush=True)
    table = exploitability_table(args.out, seeds)
    table.to_csv(args.out / "exploitability.csv", index=False)
    plot(table, args.out / "tune_pbt.png",
         f"leduc_poker, Tune PBT of 4 PPO trials ({args.episodes} episodes per player and iteration), "
         f"{len(seeds)} seeds")
    wide = table.pivot_table(index=["seed", "round"], columns="arm", values="exploitability")
    difference = (wide[ARMS[0]] - wide[ARMS[1]]).groupby("round")
    summary = pd.DataFrame({arm: wide[arm].groupby("round").mean() for arm in ARMS})
    summary["difference"] = difference.mean()
    summary["difference_stderr"] = difference.std() / np.sqrt(len(seeds))
    print(summary.to_string(float_format=lambda x: f"{x:.3f}"))
    last = wide.xs(args.iterations, level="round")
    lower = int((last[ARMS[0]] < last[ARMS[1]]).sum())
    print(f"final round: {ARMS[0]} lower on {lower} of {len(seeds)} seeds, {ARMS[1]} lower on "
          f"{int((last[ARMS[1]] < last[ARMS[0]]).sum())}")


if __name__ == "__main__":
    main()
