"""Every rater on 3-player random games of 16, 32 and 64 strategies per player.

    python -m bench.scale [--sizes 16 32 64] [--raters ...] [--game random|dominated|tied]
                          [--limit 120] [--memory-limit 8]

Each (rater, size) runs in its own subprocess, so the peak resident memory reported
(``ru_maxrss`` of that process) belongs to one rater; the process is killed when it
exceeds ``--limit`` seconds or ``--memory-limit`` GiB (resident, polled), so one slow or
greedy rater cannot hang the bench or the machine. Payoffs are uniform on [-1, 1],
seeded; ``--game dominated`` and ``--game tied`` change them so that the largest CCE
support is a small part of the joints (see :func:`dominated_game`, :func:`tied_game`).
Wall and CPU seconds are both printed: on a shared machine the CPU time
(all threads of the process) is the steadier figure. The "before" column holds the figures quoted in issue 14 (16 and 32 per player).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

RATERS = ("uniform", "elo", "nash", "alpharank", "deviation", "payoff")
SIZES = (16, 32, 64)
#: Seconds quoted in issue 14 for ``metaeval.rate`` on a random 3-player game.
BEFORE = {
    "deviation": {16: 0.74, 24: 7.0, 32: 59.0},
    "nash": {16: 4.2, 24: 12.0, 32: 34.0},
    "payoff": {16: 0.14, 24: 0.71, 32: 2.1},
    "alpharank": {16: 0.12, 24: 0.50, 32: 1.6},
}
POLL_SECONDS = 0.2


def random_game(size: int, seed: int):
    import metaeval

    rng = np.random.default_rng(seed)
    return metaeval.MetaGame(rng.uniform(-1.0, 1.0, size=(3, size, size, size)))


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


def child(rater: str, size: int, seed: int, family: str = "random") -> None:
    """Rate one game in this process and print one JSON line."""
    import metaeval

    game = GAMES[family](size, seed)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        metaeval.rate(game, rater)
    except metaeval.MetaEvalError as exc:
        print(json.dumps({"status": f"refused: {exc}"}))
        return
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"status": "ok", "seconds": seconds, "cpu_seconds": cpu, "peak_mib": peak,
                      "baseline_mib": baseline}))


def _resident_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(rater: str, size: int, seed: int, limit: float, memory_limit_gib: float,
            family: str = "random") -> dict:
    """Run :func:`child` in a subprocess under the time and memory limits."""
    command = [sys.executable, "-m", "bench.scale", "--child", rater, str(size), str(seed), family]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    reason = None
    while process.poll() is None:
        if time.monotonic() - start > limit:
            reason = f"over {limit:g} s"
        elif _resident_mib(process.pid) > memory_limit_gib * 1024:
            reason = f"over {memory_limit_gib:g} GiB"
        if reason:
            process.kill()
            process.wait()
            return {"status": f"killed ({reason})"}
        time.sleep(POLL_SECONDS)
    out, err = process.communicate()
    lines = out.strip().splitlines()
    if process.returncode != 0 or not lines:
        last = (err.strip().splitlines() or ["no output"])[-1]
        return {"status": f"failed: {last}"}
    return json.loads(lines[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--raters", nargs="+", default=list(RATERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--game", choices=sorted(GAMES), default="random")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--memory-limit", type=float, default=8.0, help="GiB resident per run")
    parser.add_argument("--child", nargs=4, metavar=("RATER", "SIZE", "SEED", "GAME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        rater, size, seed, family = args.child
        child(rater, int(size), int(seed), family)
        return
    print(f"3-player {args.game} games, uniform payoffs on [-1, 1], seed {args.seed}; "
          f"limits {args.limit:g} s and {args.memory_limit:g} GiB per run")
    print(f"{'rater':<10} {'K':>3} {'joints':>7} {'seconds':>9} {'CPU s':>9} {'before (s)':>10} "
          f"{'peak MiB':>9} {'of which rating':>15}  status")
    for size in args.sizes:
        for rater in args.raters:
            result = measure(rater, size, args.seed, args.limit, args.memory_limit, args.game)
            before = BEFORE.get(rater, {}).get(size) if args.game == "random" else None
            if result["status"] == "ok":
                seconds = f"{result['seconds']:9.3f} {result['cpu_seconds']:9.3f}"
                peak = f"{result['peak_mib']:9.0f}"
                share = f"{result['peak_mib'] - result['baseline_mib']:15.0f}"
            else:
                seconds, peak, share = f"{'-':>9} {'-':>9}", f"{'-':>9}", f"{'-':>15}"
            before = f"{before:10.2f}" if before is not None else f"{'':>10}"
            print(f"{rater:<10} {size:>3} {size**3:>7} {seconds} {before} {peak} {share}  "
                  f"{result['status'][:100]}", flush=True)


if __name__ == "__main__":
    main()
