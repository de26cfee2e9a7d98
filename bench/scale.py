"""Every rater on random games of P players x S strategies, beside polarix's maximum-entropy CE.

    python -m bench.scale [--shapes 3x64 4x32 5x16 4x64 3x128] [--raters ...]
                          [--game random|dominated|tied] [--polarix] [--full]
                          [--limit 120] [--cpu-limit S] [--memory-limit 8] [--json FILE]

Each (rater, size) runs in its own subprocess, so the peak resident memory reported
(``VmHWM`` of that process; its ``ru_maxrss`` would also count the parent's memory at the
fork) belongs to one rater; the process is killed when it exceeds ``--limit`` seconds,
``--cpu-limit`` CPU seconds or ``--memory-limit`` GiB (resident, polled), so one slow or
greedy rater cannot hang the bench or the machine. Payoffs are uniform on [-1, 1],
seeded; ``--game dominated`` and ``--game tied`` change them so that the largest CCE
support is a small part of the joints (see :func:`dominated_game`, :func:`tied_game`).
Wall and CPU seconds are both printed: on a shared machine the CPU time
(all threads of the process) is the steadier figure. The "earlier wall s" column holds an
earlier metaeval's seconds (3 players, 16, 24 and 32 per player). ``--sizes K ...`` is
``--shapes 3xK ...``.

Each run also prints its accuracy figure (:data:`ACCURACY`): deviation's largest
|delta(sigma*) - rating|, payoff's KKT residual and CCE violation, nash's max regret,
alpha-Rank's stationary residual. ``--full`` adds, for deviation, payoff and nash, a run of
the full solver (deviation: the LPs over every joint of the reduced system; payoff: the dense
CCE matrix and its support LP; nash: the logit tracer with every pass over the payoffs in
float64) with the same figures, the largest rating difference from the default path and
the default path's CPU seconds over the full solver's, where the full solver fits the limits.

``--polarix`` adds polarix's ``ce_maxent`` (DeepMind's JAX library: a maximum-entropy
*correlated* equilibrium by Adam on its dual, float32 as JAX defaults, default tolerance
1e-5 and iteration cap) on the same game under the same limits, with its CE and CCE gaps
(relative to the payoff range), as two rows: ``polarix``, its first call on the game (JIT
compile for the game's shapes included), and ``polarix warm``, a second call in the same
process (compiled). Every rater's CPU seconds are shown over each: the ratio columns are
this rater's CPU seconds / polarix's CPU seconds on the same game in the same run. It
solves a different problem from every rater here (a CE, not the MECCE of payoff ratings
nor the strictest CCE of deviation ratings); it is the reference for speed.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.timing import cpu_seconds
from metaeval.runs.memory import resident_memory

RATERS = ("uniform", "elo", "nash", "alpharank", "deviation", "payoff")
SHAPES = ("3x16", "3x32", "3x64")
#: Diagnostics that say how accurate each rater's result is.
ACCURACY = {
    "deviation": ("max_violation",),
    "payoff": ("kkt_residual", "cce_violation"),
    "nash": ("max_regret",),
    "alpharank": ("residual",),
}
#: Options of the full solver, for ``--full`` (nash's is its tracer in float64: see :func:`child`).
FULL = {"deviation": {"column_generation": False}, "payoff": {"implicit": False}, "nash": {}}
#: Wall seconds of an earlier ``metaeval.rate`` on a random 3-player game (quoted in issue 14).
BEFORE = {
    "deviation": {16: 0.74, 24: 7.0, 32: 59.0},
    "nash": {16: 4.2, 24: 12.0, 32: 34.0},
    "payoff": {16: 0.14, 24: 0.71, 32: 2.1},
    "alpharank": {16: 0.12, 24: 0.50, 32: 1.6},
}
POLL_SECONDS = 0.2
#: The ratio columns' headers: a rater's CPU seconds over polarix's, first call and warm call.
RATIOS = ("CPU s/polarix CPU s", "CPU s/polarix warm CPU s")


def parse_shape(text: str) -> tuple[int, int]:
    """``"4x64"`` -> (4, 64): players and strategies per player."""
    players, _, size = text.lower().partition("x")
    if not (players.isdigit() and size.isdigit()) or int(players) < 2 or int(size) < 1:
        raise argparse.ArgumentTypeError(f"a shape is PLAYERSxSTRATEGIES such as 4x64, got {text!r}")
    return int(players), int(size)


def random_game(size: int, seed: int, players: int = 3):
    import metaeval

    rng = np.random.default_rng(seed)
    return metaeval.MetaGame(rng.uniform(-1.0, 1.0, size=(players, *[size] * players)))


def dominated_game(size: int, seed: int, copies: int | None = None):
    """A random game in which each player has, for their own payoff, ``copies`` (default
    size // 8) copies of one strategy and other strategies that it strictly dominates, by
    0.1 to 1 (uniform), in a seeded order. No deviation from the copies gains, so every
    CCE plays only them: the largest support is the copies^3 joints among them."""
    import metaeval

    rng = np.random.default_rng(seed)
    copies = copies or max(1, size // 8)
    payoffs = rng.uniform(-1.0, 1.0, size=(3, size, size, size))
    for p in range(3):
        own = np.moveaxis(payoffs[p], p, 0)  # a view: [a_p, a_-p]
        own[1:copies] = own[0]
        own[copies:] = own[0] - rng.uniform(0.1, 1.0, size=own[copies:].shape)
        payoffs = np.take(payoffs, rng.permutation(size), axis=1 + p)
    return metaeval.MetaGame(payoffs)


def tied_game(size: int, seed: int):
    """A random game in which player 0's strategy 0 earns the largest of player 0's payoffs
    against every opponents' joint: it weakly dominates, tied with one best reply each,
    so every CCE plays only player 0's best replies (2 size^2 joints, not a product)."""
    import metaeval

    payoffs = random_game(size, seed).payoffs.copy()
    payoffs[0][0] = payoffs[0][1:].max(axis=0)
    return metaeval.MetaGame(payoffs)


GAMES = {"random": random_game, "dominated": dominated_game, "tied": tied_game}


def make_game(family: str, players: int, size: int, seed: int):
    if family == "random":
        return random_game(size, seed, players)
    if players != 3:
        raise SystemExit(f"--game {family} is a 3-player family; use shapes 3xS")
    return GAMES[family](size, seed)


def child(rater: str, players: int, size: int, seed: int, family: str = "random") -> None:
    """Rate one game in this process and print one JSON line: times, memory, accuracy
    figures and ratings. ``rater`` is a rater's name, NAME:full (:data:`FULL`) or polarix.

    Every solver first rates a game of 2 strategies per player, out of the timing (imports,
    and for polarix the tracing it can do before it meets the game's shapes). polarix is then
    timed twice on the game: its first call compiles its JIT functions for the game's shapes,
    the second (``warm_seconds``, ``warm_cpu_seconds``) runs them compiled."""
    import metaeval

    game = make_game(family, players, size, seed)
    name, _, variant = rater.partition(":")
    if name == "nash" and variant:
        from metaeval.ratings import logit_mixed

        logit_mixed.MIXED_SIZE = math.inf  # no float32 passes

    def solve(game):
        if name == "polarix":
            return polarix_ce(game)
        rating = metaeval.rate(game, name, **(FULL[name] if variant else {}))
        return rating.ratings, {key: rating.diagnostics[key] for key in ACCURACY.get(name, ())}

    try:
        solve(random_game(2, seed, players))
    except metaeval.MetaEvalError:
        pass
    baseline = resident_memory()["peak_mib"]
    try:
        (ratings, accuracy), seconds, cpu = timed(solve, game)
        warm = {}
        if name == "polarix":
            _, warm_seconds, warm_cpu = timed(solve, game)
            warm = {"warm_seconds": warm_seconds, "warm_cpu_seconds": warm_cpu}
    except metaeval.MetaEvalError as exc:
        print(json.dumps({"status": f"refused: {exc}"}))
        return
    peak = resident_memory()["peak_mib"]
    print(json.dumps({"status": "ok", "seconds": seconds, "cpu_seconds": cpu, **warm, "peak_mib": peak,
                      "baseline_mib": baseline, "accuracy": accuracy,
                      "ratings": [np.asarray(r, dtype=float).tolist() for r in ratings]}))


def timed(solve, game):
    """``(solve(game), wall seconds, CPU seconds of this process's threads)``."""
    start, cpu_start = time.perf_counter(), time.process_time()
    result = solve(game)
    return result, time.perf_counter() - start, time.process_time() - cpu_start


def polarix_ce(game) -> tuple[list, dict]:
    """polarix's maximum-entropy CE of ``game`` (defaults of ``polarix.solve`` and
    ``ce_maxent``), its ratings, and its CE and CCE gaps relative to the payoff range."""
    import polarix as plx

    from bench.affinity import _polarix_game, ce_violation
    from metaeval.solvers.equilibria import deviation_gains

    result = plx.solve(_polarix_game(game), plx.ce_maxent, disable_progress_bar=True)
    joint = np.asarray(result.joint, dtype=np.float64)
    joint = np.maximum(joint, 0.0) / joint.sum()
    spread = game.payoff_range() or 1.0
    cce = max(0.0, max(float(g.max()) for g in deviation_gains(game, joint))) / spread
    return result.ratings, {"ce_violation": ce_violation(game, joint) / spread, "cce_violation": cce}


def run_limited(command: list[str], limit: float, memory_limit_gib: float, cpu_limit: float | None = None) -> dict:
    """Run ``command`` (a child printing one JSON line last) under the time and memory limits
    (``cpu_limit``: CPU seconds of the child, if given). Its output goes to files, not pipes:
    a child that prints more than a pipe holds would otherwise block until the time limit."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True)
        start = time.monotonic()
        reason = None
        while process.poll() is None:
            if time.monotonic() - start > limit:
                reason = f"over {limit:g} s"
            elif cpu_limit is not None and _cpu_seconds(process.pid) > cpu_limit:
                reason = f"over {cpu_limit:g} CPU s"
            elif (resident_memory(process.pid)["rss_mib"] or 0.0) > memory_limit_gib * 1024:
                reason = f"over {memory_limit_gib:g} GiB"
            if reason:
                process.kill()
                process.wait()
                return {"status": f"killed ({reason})"}
            time.sleep(POLL_SECONDS)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    lines = out.strip().splitlines()
    if process.returncode != 0 or not lines:
        last = (err.strip().splitlines() or ["no output"])[-1]
        return {"status": f"failed: {last}"}
    return json.loads(lines[-1])


def _cpu_seconds(pid: int) -> float:
    """The CPU seconds of a running process, 0 once it has gone."""
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0


def measure(rater: str, players: int, size: int, seed: int, limit: float, memory_limit_gib: float,
            family: str = "random", cpu_limit: float | None = None) -> dict:
    """Run :func:`child` in a subprocess under the time and memory limits."""
    command = [sys.executable, "-m", "bench.scale", "--child", rater, str(players), str(size), str(seed), family]
    return run_limited(command, limit, memory_limit_gib, cpu_limit)


def _figures(result: dict) -> str:
    if result["status"] != "ok":
        return f"{'-':>9} {'-':>9} {'-':>9}"
    return f"{result['seconds']:9.3f} {result['cpu_seconds']:9.3f} {result['peak_mib']:9.0f}"


def _ratio(result: dict, reference: dict | None, width: int) -> str:
    """``result``'s CPU seconds over ``reference``'s, or blank."""
    if result["status"] != "ok" or not reference or reference["status"] != "ok":
        return f"{'':>{width}}"
    return f"{result['cpu_seconds'] / max(reference['cpu_seconds'], 1e-9):{width}.3g}"


def warm(result: dict) -> dict:
    """polarix's second call (compiled) as a result of its own."""
    if result["status"] != "ok":
        return result
    return {**result, "seconds": result["warm_seconds"], "cpu_seconds": result["warm_cpu_seconds"]}


def _accuracy(result: dict, fast: dict | None = None) -> str:
    figures = [f"{key} {value:.2g}" for key, value in result.get("accuracy", {}).items()]
    if fast and fast.get("status") == "ok" and result["status"] == "ok":
        difference = max(np.abs(np.asarray(a) - np.asarray(b)).max()
                         for a, b in zip(result["ratings"], fast["ratings"]))
        figures.append(f"|full - default| {difference:.2g}")
        figures.append(f"default CPU s / full {fast['cpu_seconds'] / max(result['cpu_seconds'], 1e-9):.3g}")
    return ", ".join(figures)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=parse_shape, nargs="+", default=[parse_shape(s) for s in SHAPES])
    parser.add_argument("--sizes", type=int, nargs="+", help="3-player shapes 3xK")
    parser.add_argument("--raters", nargs="+", default=list(RATERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--game", choices=sorted(GAMES), default="random")
    parser.add_argument("--polarix", action="store_true", help="run polarix's ce_maxent on every shape")
    parser.add_argument("--full", action="store_true", help="also run deviation's, payoff's and nash's full solvers")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--memory-limit", type=float, default=8.0, help="GiB resident per run")
    parser.add_argument("--cpu-limit", type=float, help="CPU seconds per run (on a shared machine the wall "
                        "limit kills runs that took little CPU; set --limit high then)")
    parser.add_argument("--json", help="append every result as a JSON line to this file")
    parser.add_argument("--child", nargs=5, metavar=("RATER", "PLAYERS", "SIZE", "SEED", "GAME"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        rater, players, size, seed, family = args.child
        child(rater, int(players), int(size), int(seed), family)
        return
    shapes = [(3, k) for k in args.sizes] if args.sizes else args.shapes
    cpu = f", {args.cpu_limit:g} CPU s" if args.cpu_limit else ""
    print(f"{args.game} games, uniform payoffs on [-1, 1], seed {args.seed}; "
          f"limits {args.limit:g} s{cpu} and {args.memory_limit:g} GiB per run")
    if args.polarix:
        print("polarix: its first call on the game (JIT compile included); polarix warm: its second call. "
              "Ratio columns: this row's CPU s / polarix's CPU s (first call, warm call), same game, same run")
    print(f"{'rater':<15} {'shape':>6} {'joints':>10} {'wall s':>9} {'CPU s':>9} {'peak MiB':>9} "
          f"{'earlier wall s':>14} {RATIOS[0]} {RATIOS[1]}  status; accuracy")
    for players, size in shapes:
        runs = [("polarix", None)] if args.polarix else []
        for rater in args.raters:
            runs.append((rater, None))
            if args.full and rater in FULL:
                runs.append((f"{rater}:full", rater))
        results: dict = {}
        for rater, default in runs:
            result = measure(rater, players, size, args.seed, args.limit, args.memory_limit, args.game,
                             args.cpu_limit)
            results[rater] = result
            if rater == "polarix":
                results["polarix warm"] = warm(result)
            for label in ("polarix", "polarix warm") if rater == "polarix" else (rater,):
                before = BEFORE.get(label, {}).get(size) if args.game == "random" and players == 3 else None
                before = f"{before:14.2f}" if before is not None else f"{'':>14}"
                references = (None, None) if label.startswith("polarix") else ("polarix", "polarix warm")
                ratios = " ".join(_ratio(results[label], results.get(reference), len(header))
                                  for reference, header in zip(references, RATIOS))
                accuracy = _accuracy(results[label], results.get(default) if default else None)
                print(f"{label:<15} {players}x{size:<4} {size**players:>10,} {_figures(results[label])} {before} "
                      f"{ratios}  {result['status'][:100]}; {accuracy}", flush=True)
            if args.json:
                record = {k: v for k, v in result.items() if k != "ratings"}
                with open(args.json, "a") as out:
                    out.write(json.dumps({"rater": rater, "shape": f"{players}x{size}", "game": args.game,
                                          "seed": args.seed, **record}) + "\n")


if __name__ == "__main__":
    main()
