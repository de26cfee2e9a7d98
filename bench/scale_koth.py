"""King-of-the-hill games of a simulated judge at scale, and the prompt-copying attack.

    python -m bench.scale_koth [--models 64] [--prompts 100 500 2000] [--raters ...]
                               [--copies 0.5] [--limit 900] [--memory-limit 8] [--seed 0]
                               [--temperature 0.5]

The game is metaeval.data.simulated.simulated_judge (the seed paper's simulation game
judged with noise; Liu et al. 2025): M models x M x P prompts joints. Raters, each in
its own subprocess (killed past ``--limit`` wall seconds or ``--memory-limit`` GiB
resident, as in bench.scale):

- ``deviation``: deviation ratings (the strictest CCE), no target: the first LP over
  working sets of rows and joints, the later rounds on its optimal face
  (metaeval.solvers.cce_first_round, metaeval.solvers.cce_face);
- ``deviation-full``: every round in the one warm-started model over all deviations,
  grown by column generation (FACE_JOINTS = 0: Algorithm 1 as it ran before the face);
- ``payoff``, ``nash``: with the affinity target (``target="affinity"``): the prompt
  copies are de-cloned exactly, then the game takes the structured paths of
  metaeval.solvers.king_of_the_hill (constraint generation on the MECCE's dual, the
  logit branch traced with the prompt player eliminated) at every size here (by
  default they start above STRUCTURED_JOINTS joints);
- ``payoff-full``, ``nash-full``: the same raters forced onto the full solvers
  (the structured paths switched off), for the accuracy check where they still run.

``-full`` rows print the largest difference of their ratings from the default rater's.

Each child rates the game, then the attacked game: ``--copies`` x P prompt copies drawn
from softmax(-10 u_bar) against the model with the best uniform rating (the paper adds
250 copies to 500 prompts), and reports the largest change of any model's (king) rating
and of any original prompt's rating. Wall and CPU seconds (of the first rating, game
construction excluded) and the peak resident memory of the child are printed; on a
shared machine the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

import numpy as np

from bench.scale import ACCURACY, run_limited
from metaeval.runs.memory import resident_memory

RATERS = ("deviation", "payoff", "nash", "deviation-full", "payoff-full", "nash-full")
OPTIONS = {"deviation": {}, "payoff": {"target": "affinity"}, "nash": {"target": "affinity"}}
SHARPNESS = 10.0


def _rate(game, method: str):
    import metaeval

    start, cpu = time.perf_counter(), time.process_time()
    rating = metaeval.rate(game, method, **OPTIONS[method])
    return rating, time.perf_counter() - start, time.process_time() - cpu


def child(rater: str, models: int, prompts: int, copies: float, seed: int, temperature: float) -> None:
    """Rate one game and its attacked copy in this process; print one JSON line."""
    import metaeval
    from metaeval.data.simulated import copy_prompts, simulated_judge
    from metaeval.solvers import king_of_the_hill

    method = rater.removesuffix("-full")
    # "payoff" and "nash" take the structured paths at every size (by default only above
    # STRUCTURED_JOINTS joints), "-full" never; "deviation-full" has no optimal face.
    king_of_the_hill.STRUCTURED_JOINTS = float("inf") if rater.endswith("-full") else 0
    if rater == "deviation-full":
        importlib.import_module("metaeval.ratings.deviation").FACE_JOINTS = 0
    game = simulated_judge(models, prompts, temperature=temperature, seed=seed)
    baseline = resident_memory()["peak_mib"]
    try:
        rating, seconds, cpu = _rate(game, method)
        peak = resident_memory()["peak_mib"]
        top = int(np.argmax(metaeval.rate(game, "uniform").ratings[0]))
        attacked = copy_prompts(game, top, int(round(copies * prompts)), SHARPNESS, seed)
        after, attacked_seconds, attacked_cpu = _rate(attacked, method)
    except metaeval.MetaEvalError as exc:
        print(json.dumps({"status": f"error: {exc}"}))  # a budget refusal or a solver failure
        return
    diagnostics = rating.diagnostics
    scale = rating.game.payoff_range()
    print(json.dumps({
        "status": "ok", "seconds": seconds, "cpu_seconds": cpu, "peak_mib": peak, "baseline_mib": baseline,
        "path": diagnostics.get("solver") or diagnostics.get("equilibrium") or _deviation_path(diagnostics),
        # relative to the payoff range (the KKT residual is already)
        "accuracy": {key: diagnostics[key] / (1 if key == "kkt_residual" else scale)
                     for key in ACCURACY[method] if key in diagnostics},
        "attacked_seconds": attacked_seconds, "attacked_cpu_seconds": attacked_cpu,
        "attacked_prompts": attacked.shape[2],
        "king_change": float(np.abs(after.ratings[0] - rating.ratings[0]).max()),
        "prompt_change": float(np.abs(after.ratings[2][:prompts] - rating.ratings[2]).max()),
        "ratings": [r.tolist() for r in rating.ratings],
    }))


def _deviation_path(diagnostics: dict) -> str:
    """How the deviation rater got there: the first LP's size, and rounds on the face or warm."""
    first = f"first LP {diagnostics['first_rows']} rows x {diagnostics['lp_columns']} joints"
    if diagnostics["read_off"] or diagnostics["face_rounds"]:
        return f"{first}, {diagnostics['face_rounds']} rounds on the face, {diagnostics['read_off']} gains read off"
    return f"{diagnostics['rounds']} warm rounds over {diagnostics['lp_columns']} joints"


def measure(rater: str, models: int, prompts: int, copies: float, seed: int, temperature: float, limit: float,
            memory_limit_gib: float) -> dict:
    """Run :func:`child` in a subprocess under the time and memory limits."""
    command = [sys.executable, "-m", "bench.scale_koth", "--child", rater, str(models), str(prompts),
               str(copies), str(seed), str(temperature)]
    return run_limited(command, limit, memory_limit_gib)


def _accuracy(result: dict) -> str:
    return ", ".join(f"{key} {value:.1e}" for key, value in result.get("accuracy", {}).items())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=64)
    parser.add_argument("--prompts", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--raters", nargs="+", choices=RATERS, default=list(RATERS))
    parser.add_argument("--copies", type=float, default=0.5, help="prompt copies, as a fraction of the prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=0.5,
                        help="the judge's temperature (0.1 saturates its verdicts near +-1)")
    parser.add_argument("--limit", type=float, default=900.0, help="wall seconds per run")
    parser.add_argument("--memory-limit", type=float, default=8.0, help="GiB resident per run")
    parser.add_argument("--child", nargs=6, metavar=("RATER", "MODELS", "PROMPTS", "COPIES", "SEED", "TEMPERATURE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        rater, models, prompts, copies, seed, temperature = args.child
        child(rater, int(models), int(prompts), float(copies), int(seed), float(temperature))
        return
    print(f"king of the hill, simulated judge, {args.models} models, temperature {args.temperature:g}, "
          f"seed {args.seed}; attack: "
          f"{args.copies:g} x prompts copies; limits {args.limit:g} s and {args.memory_limit:g} GiB per run")
    print(f"{'rater':<14} {'prompts':>7} {'joints':>9} {'wall s':>8} {'CPU s':>8} {'peak MiB':>8} "
          f"{'attacked CPU s':>14} {'king change':>11} {'prompt change':>13}  accuracy / status")
    for prompts in args.prompts:
        rated = {}
        for rater in args.raters:
            result = measure(rater, args.models, prompts, args.copies, args.seed, args.temperature, args.limit,
                             args.memory_limit)
            joints = args.models**2 * prompts
            if result["status"] != "ok":
                print(f"{rater:<14} {prompts:>7} {joints:>9} {'-':>8} {'-':>8} {'-':>8} {'-':>14} {'-':>11} "
                      f"{'-':>13}  {result['status'][:160]}", flush=True)
                continue
            rated[rater] = [np.asarray(r) for r in result["ratings"]]
            note = _accuracy(result)
            full = rater.removesuffix("-full")
            if rater.endswith("-full") and full in rated:
                difference = max(float(np.abs(a - b).max()) for a, b in zip(rated[full], rated[rater]))
                note += f", max |rating - structured| {difference:.1e}"
            print(f"{rater:<14} {prompts:>7} {joints:>9} {result['seconds']:8.1f} {result['cpu_seconds']:8.1f} "
                  f"{result['peak_mib']:8.0f} {result['attacked_cpu_seconds']:14.1f} {result['king_change']:11.1e} "
                  f"{result['prompt_change']:13.1e}  {note}; {result['path']}", flush=True)


if __name__ == "__main__":
    main()
