"""A league of MLP policies grown one policy at a time: what each addition costs, what memory
the weights take with and without spilling, and how long every rater takes on the result.

    python -m bench.league_scale [--size 300] [--players 2] [--episodes 8] [--workers 2]
                                 [--budget-mib 1] [--exact-size 1000] [--adaptive-size 48]
                                 [--adaptive-reference FILE] [--adaptive-initial 4] [--adaptive-rounds 4]
                                 [--limit 3600] [--rate-limit 300] [--json FILE] [--save DIR]
    python -m bench.league_scale --rate-saved FILE [--rate-limit 300] [--memory-limit 5]

The policies are random-initialised 64 x 64 MLPs (`metaeval.spiel.mlp.MLPPolicy`, seeded by
player and index): evaluation cost and memory are what is measured, not training. The
league grows round robin, one policy per player in turn, and the meta-game is rebuilt after
every addition (`metaeval.Evaluator`), so each build evaluates only the new policy's joints
(K opponents with 2 players, K^2 with 3) and copies the rest.

Parts, each in its own subprocess (so each peak memory is its own; killed past ``--limit``
seconds or ``--memory-limit`` GiB); each rater, too, rates a saved meta-game in a subprocess
of its own, killed past ``--rate-limit`` seconds:

- ``sampled``: the league to ``--size`` per player in sampled mode (``--episodes`` per
  joint, played in lock-step on ``--workers`` Ray actors), twice: weights held in memory
  (the reference) and spilled beyond ``--budget-mib`` per process
  (`metaeval.spiel.spill.WeightStore`). Reported: the seconds of an addition against the
  joints it evaluates (a least-squares line a + b x joints over all additions, and
  the line extrapolated to a league of 1,000 per player with 2 players, 100 with 3,
  labelled as such), the peak resident memory
  of the driver and of each actor, the weights each holds (and the spilled ones on disk), the
  CPU seconds of the driver and actors, and the seconds of every rater
  on the final meta-game. Both runs must build the same meta-game (checked by digest).
- ``exact``: the league to ``--exact-size`` per player in exact mode (in-process; each
  policy is tabulated once when added, and its joints are exact), timed per addition; then
  every rater on the resulting meta-game.
- ``adaptive``: the league's first ``--adaptive-size`` policies per player, fully sampled
  (``--adaptive-episodes`` per joint, or read from a league saved by ``--save`` with
  ``--adaptive-reference``); then, on half that budget, uniform allocation (one build) and
  `metaeval.spiel.adaptive.adaptive_metagame` with each of ``--adaptive-rules`` (``variance``
  for nash ratings, ``response_graph`` for alpha-Rank at infinite alpha), on the same
  per-joint episode streams (a pilot of ``--adaptive-initial`` episodes per joint, then
  ``--adaptive-rounds`` rounds), all played on ``--workers`` Ray actors; reported: each
  estimate's distance from the fully sampled ratings (largest and root-mean-square
  difference over all strategies), its seconds and CPU seconds (this process and the
  actors'), and the seconds to rate it.
- ``refine``: the same comparison at league scale on Ray, ``--refine-size`` policies per
  player: the league fully sampled, then half its episodes spent uniformly, and half
  spent as a pilot of `INITIAL` per joint plus `metaeval.distributed.refine.refine`
  (episodes where the response graph is uncertain: it targets alpha-Rank at infinite
  alpha; nash distances are shown beside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import sys
import tempfile
import time

import numpy as np

from bench.scale import RATERS, run_limited, timed

GAME = {2: "leduc_poker", 3: "leduc_poker(players=3)"}
#: League sizes (per player) at which the growth is reported.
REPORTED_SIZES = 4
#: The league size (per player) the cost of one addition is extrapolated to, by number of players.
TARGET = {2: 1000, 3: 100}
#: Adaptive estimates: pilot episodes per joint, then rounds of allocation.
INITIAL, ROUNDS = 4, 4
#: The ratings estimates are compared on: rater and options (payoff ratings are nash's on 2-player
#: leduc: its maximum-entropy CCE is the product of the players' maximum-entropy minimax strategies).
TARGETS = {"nash": ("nash", {}), "alpharank (alpha = inf)": ("alpharank", {"alpha": math.inf})}
#: Each adaptive rule and the rating it makes precise.
RULE_TARGETS = {"variance": ("nash", {}), "response_graph": ("alpharank", {"alpha": math.inf})}


def policy_seed(seed: int, player: int, index: int) -> int:
    """The initial-weight seed of the league's ``index``-th policy of ``player``."""
    return (seed * 10 + player) * 100_000 + index


def grow(evaluator, game, sizes, seed: int, store=None):
    """Add MLP policies round robin up to ``sizes`` per player, rebuilding the meta-game after
    each addition once every player has one; returns one record per build."""
    from metaeval.distributed import last_build
    from metaeval.spiel.mlp import MLPPolicy

    records = []
    for index in range(max(sizes)):
        for player, size in enumerate(sizes):
            if index >= size:
                continue
            policy = MLPPolicy(game, player, seed=policy_seed(seed, player, index))
            start = time.perf_counter()
            evaluator.add(player, policy if store is None else store.spill(policy))
            if min(evaluator.sizes):
                evaluator.metagame()
                build = last_build()
                records.append({"sizes": evaluator.sizes, "joints": build.evaluated, "copied": build.copied,
                                "seconds": time.perf_counter() - start})
    return records


def rate_child(path: str, rater: str) -> dict:
    """Rate the meta-game saved at ``path`` with ``rater``: seconds, CPU seconds, peak memory
    (the rater first rates the game's first 2 strategies per player, out of the timing)."""
    import metaeval
    from metaeval.runs.memory import resident_memory

    metagame = metaeval.MetaGame.load(path)
    options = {"alpha": math.inf} if rater == "alpharank" else {}
    try:  # out of the timing: imports, on a game of 2 strategies per player
        metaeval.rate(metaeval.MetaGame(metagame.payoffs[(slice(None),) + (slice(0, 2),) * metagame.num_players]),
                      rater, **options)
    except metaeval.MetaEvalError:
        pass
    try:
        _, seconds, cpu = timed(lambda g: metaeval.rate(g, rater, **options), metagame)
    except metaeval.MetaEvalError as exc:
        return {"status": f"refused: {exc}"}
    return {"status": "ok", "seconds": seconds, "cpu_seconds": cpu, "peak_mib": resident_memory()["peak_mib"]}


def rate_all(path: str, limit: float, memory_limit: float) -> dict:
    """Every rater on the meta-game saved at ``path``, each in its own subprocess under the limits."""
    return {rater: run_child("rate", [path, rater], limit, memory_limit) for rater in RATERS}


def digest(metagame) -> str:
    arrays = [metagame.payoffs] + ([] if metagame.stderr is None else [metagame.stderr])
    return hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()[:16]


def weights_held(policies) -> int:
    from metaeval.spiel.spill import weight_bytes

    return sum(weight_bytes(p) for p in policies)


def sampled_child(players: int, size: int, episodes: int, workers: int, seed: int, budget_mib: float,
                  path: str) -> dict:
    """Grow the sampled league on Ray (spilled beyond ``budget_mib`` if positive); save its meta-game to ``path``."""
    import metaeval
    from metaeval.distributed import current_pool, shutdown
    from metaeval.runs.memory import resident_memory
    from metaeval.spiel.spill import WeightStore

    game = GAME[players]
    with tempfile.TemporaryDirectory() as directory:
        store = WeightStore(directory, int(budget_mib * 2**20)) if budget_mib > 0 else None
        evaluator = metaeval.Evaluator(game, mode="sampled", episodes=episodes, seed=seed, workers=workers)
        try:
            records = grow(evaluator, game, (size,) * players, seed, store)
            actors = current_pool().memory()
            driver = resident_memory()
            cpu = cpu_clock()
            held = store.cache.held if store else weights_held(p for ps in evaluator.population.policies for p in ps)
            on_disk = sum(f.stat().st_size for f in pathlib.Path(directory).rglob("*") if f.is_file())
            metagame = evaluator.metagame()
        finally:
            shutdown()
        metagame.save(path)
        return {"records": records, "driver": driver, "actors": actors, "driver_weights": held,
                "weights_on_disk": on_disk, "cpu_seconds": cpu, "digest": digest(metagame),
                "reads": store.cache.reads if store else 0}


def exact_child(players: int, size: int, seed: int, path: str) -> dict:
    """Grow the exact league in-process; save its meta-game to ``path``."""
    import metaeval
    from metaeval.runs.memory import resident_memory

    game = GAME[players]
    evaluator = metaeval.Evaluator(game, mode="exact", seed=seed)
    records = grow(evaluator, game, (size,) * players, seed)
    memory = resident_memory()
    evaluator.metagame().save(path)
    return {"records": records, "driver": memory}


def league_population(game, size: int, players: int, seed: int):
    """The league's first ``size`` policies per player, ids ``0 .. size - 1`` (as `grow` adds them)."""
    from metaeval import spiel
    from metaeval.spiel.mlp import MLPPolicy

    return spiel.Population(game, [[MLPPolicy(game, player, seed=policy_seed(seed, player, index))
                                    for index in range(size)] for player in range(players)])


def cpu_clock() -> float:
    """CPU seconds of this process and of the build pool's actors, if any."""
    from bench.timing import cpu_seconds
    from metaeval.distributed import current_pool

    pool = current_pool()
    return time.process_time() + (sum(cpu_seconds(pid) for pid in pool.pids()) if pool else 0.0)


def timed_estimate(estimate) -> tuple:
    """``(estimate(), wall seconds, CPU seconds of this process and the actors)``."""
    start, cpu = time.perf_counter(), cpu_clock()
    result = estimate()
    return result, time.perf_counter() - start, cpu_clock() - cpu


def adaptive_child(players: int, size: int, episodes: int, workers: int, seed: int, reference: str | None = None,
                   rules=tuple(RULE_TARGETS), initial: int = INITIAL, rounds: int = ROUNDS) -> dict:
    """The fully sampled league of ``size`` per player (grown here with ``episodes`` per joint,
    or the first ``size`` per player of the league saved at ``reference``) against uniform
    allocation and each adaptive rule on half its episodes, played on ``workers`` Ray actors."""
    import metaeval
    from metaeval.distributed import build_metagame, current_pool, shutdown
    from metaeval.runs.memory import resident_memory
    from metaeval.spiel.adaptive import adaptive_metagame

    game = GAME[players]
    try:
        if reference is None:
            evaluator = metaeval.Evaluator(game, mode="sampled", episodes=episodes, seed=seed, workers=workers)
            records = grow(evaluator, game, (size,) * players, seed)
            full, full_seconds, population = evaluator.metagame(), sum(r["seconds"] for r in records), evaluator.population
        else:
            saved = metaeval.MetaGame.load(reference)
            full = metaeval.MetaGame(saved.payoffs[(slice(None),) + (slice(0, size),) * players],
                                     counts=saved.counts[(slice(0, size),) * players],
                                     stderr=saved.stderr[(slice(None),) + (slice(0, size),) * players])
            episodes, full_seconds = int(full.counts.max()), None
            if full.counts.shape != (size,) * players or full.counts.min() != episodes:
                raise metaeval.MetaEvalError(f"{reference} is no league of {size} per player with equal counts")
            population = league_population(metaeval.games.load(game), size, players, seed)
        budget = full.counts.size * episodes // 2
        truth, results = target_ratings(full), {}
        estimate, seconds, cpu = timed_estimate(lambda: build_metagame(
            game, population, mode="sampled", episodes=episodes // 2, workers=workers, seed=seed))
        results["uniform"] = {"episodes": int(estimate.counts.sum()), "seconds": seconds, "cpu_seconds": cpu,
                              "distance": distances(estimate, truth)}
        for rule in rules:
            rater, options = RULE_TARGETS[rule]
            history, seconds, cpu = timed_estimate(lambda: adaptive_metagame(
                game, population, budget, rater, rule=rule, initial=initial, rounds=rounds, seed=seed,
                workers=workers, **options))
            estimate = history[-1].metagame
            results[rule] = {"episodes": int(estimate.counts.sum()), "seconds": seconds, "cpu_seconds": cpu,
                             "joints_touched": [int((b.metagame.counts > a.metagame.counts).sum())
                                                for a, b in zip(history, history[1:])],
                             "distance": distances(estimate, truth)}
        pool = current_pool()
        memory = {"driver": resident_memory(), "actors": pool.memory() if pool else []}
    finally:
        shutdown()
    return {"memory": memory, "full_episodes": int(full.counts.sum()), "full_seconds": full_seconds, "budget": budget,
            "initial": initial, "rounds": rounds, "results": results,
            "reference_rating": {label: {"seconds": seconds, "cpu_seconds": cpu}
                                 for label, (_, seconds, cpu) in truth.items()}}


def target_ratings(metagame) -> dict:
    """Each target rater's ratings of ``metagame``, all strategies in one vector, with its
    seconds and CPU seconds."""
    import metaeval

    result = {}
    for label, (rater, options) in TARGETS.items():
        try:
            rating, seconds, cpu = timed(lambda game: metaeval.rate(game, rater, **options), metagame)
        except metaeval.MetaEvalError as exc:  # recorded, so that the other raters' figures survive
            result[label] = (f"refused: {exc}", None, None)
            continue
        result[label] = (np.concatenate(rating.ratings), seconds, cpu)
    return result


def distances(estimate, truth: dict) -> dict:
    """Each target rater's largest and root-mean-square rating difference between ``estimate``
    and the reference ratings ``truth`` (`target_ratings`), and its seconds rating ``estimate``."""
    result = {}
    for label, (ratings, seconds, cpu) in target_ratings(estimate).items():
        if isinstance(ratings, str) or isinstance(truth[label][0], str):
            result[label] = {"status": ratings if isinstance(ratings, str) else f"reference {truth[label][0]}"}
            continue
        result[label] = {"max": float(np.abs(ratings - truth[label][0]).max()),
                         "rmse": float(np.sqrt(np.mean((ratings - truth[label][0]) ** 2))),
                         "rate_seconds": seconds, "rate_cpu_seconds": cpu}
    return result


def refine_child(players: int, size: int, episodes: int, workers: int, seed: int) -> dict:
    """The league of ``size`` per player fully sampled, against half the budget spent uniformly
    and half spent as a pilot plus `metaeval.distributed.refine.refine`, all on Ray."""
    import metaeval
    from metaeval.distributed import shutdown
    from metaeval.distributed.refine import refine

    game, builds = GAME[players], {}
    try:
        for label, per_joint in (("full", episodes), ("uniform", episodes // 2), ("pilot", INITIAL)):
            evaluator = metaeval.Evaluator(game, mode="sampled", episodes=per_joint, seed=seed, workers=workers)
            records = grow(evaluator, game, (size,) * players, seed)
            builds[label] = (evaluator.metagame(), sum(r["seconds"] for r in records[1:]))  # past Ray start-up
        pilot, pilot_seconds = builds.pop("pilot")
        budget = int(pilot.counts.size * (episodes // 2 - INITIAL))
        start = time.perf_counter()
        population = evaluator.population  # the pilot's
        refined = refine(game, population, pilot, budget, rounds=ROUNDS, seed=seed, workers=workers)
        builds["refined"] = (refined, pilot_seconds + time.perf_counter() - start)
    finally:
        shutdown()
    truth = target_ratings(builds["full"][0])
    return {label: {"episodes": int(mg.counts.sum()), "seconds": seconds, "distance": distances(mg, truth)}
            for label, (mg, seconds) in builds.items()}


CHILDREN = {"sampled": sampled_child, "exact": exact_child, "adaptive": adaptive_child, "refine": refine_child,
            "rate": rate_child}
PARTS = ("sampled", "exact", "adaptive", "refine")


def run_child(part: str, args: list, limit: float, memory_limit: float) -> dict:
    """Run ``CHILDREN[part](*args)`` in a subprocess under the limits; its result, or its status."""
    with tempfile.TemporaryDirectory() as directory:
        output = f"{directory}/result.json"
        command = [sys.executable, "-m", "bench.league_scale", "--child", part, json.dumps(args), output]
        status = run_limited(command, limit, memory_limit)
        if status.get("status") != "ok":
            return status
        with open(output) as handle:
            return {"status": "ok", **json.load(handle)}


def cost_line(records) -> tuple[float, float]:
    """Least-squares ``seconds = a + b * joints`` over the additions to a league of at least a
    tenth of its final size (past the start-up, compilation and first batches of the actors)."""
    largest = max(max(r["sizes"]) for r in records)
    records = [r for r in records if max(r["sizes"]) >= largest / 10]
    joints = np.array([r["joints"] for r in records], dtype=float)
    seconds = np.array([r["seconds"] for r in records])
    b, a = np.polyfit(joints, seconds, 1)
    return a, b


def growth_table(records, episodes: int, players: int) -> str:
    """Additions near a few league sizes: joints evaluated, episodes and seconds (mean)."""
    largest = max(max(r["sizes"]) for r in records)
    lines = [f"  first build {records[0]['seconds']:.1f} s (start-up included)",
             f"  {'size':>6} {'joints/add':>11} {'episodes/add':>13} {'s/add':>8}"]
    for size in np.linspace(largest / REPORTED_SIZES, largest, REPORTED_SIZES).astype(int):
        near = [r for r in records[1:] if size - max(1, size // 10) < max(r["sizes"]) <= size]
        if near:
            joints = np.mean([r["joints"] for r in near])
            lines.append(f"  {size:>6} {joints:>11.0f} {joints * episodes:>13.0f} "
                         f"{np.mean([r['seconds'] for r in near]):>8.3f}")
    return "\n".join(lines)


def extrapolate(records, episodes: int, players: int) -> str:
    a, b = cost_line(records)
    target = TARGET[players]
    joints = target ** (players - 1)
    per_add = a + b * joints
    sizes = np.arange(1, target + 1)
    total = players * float(np.sum(a + b * sizes.astype(float) ** (players - 1)))
    return (f"  EXTRAPOLATED to {target} per player (line a + b x joints, a = {a * 1e3:.1f} ms, "
            f"b = {b * 1e3:.3f} ms per joint): one addition {joints:,} joints, {joints * episodes:,} "
            f"episodes, {per_add:.1f} s; the whole league {total / 3600:.1f} h")


def memory_line(label: str, result: dict) -> str:
    actors = ", ".join(f"{a['peak_mib']:.0f}" for a in result["actors"])
    return (f"  {label:<22} driver peak {result['driver']['peak_mib']:6.0f} MiB, actors' peaks {actors} MiB; "
            f"driver's weights {result['driver_weights'] / 2**20:6.1f} MiB (host and device copies), "
            f"{result.get('weights_on_disk', 0) / 2**20:.1f} MiB on disk; {result.get('cpu_seconds', 0):.0f} CPU s "
            "(driver and actors)")


def rating_lines(rating: dict) -> str:
    lines = []
    for rater, figures in rating.items():
        if figures["status"] != "ok":
            lines.append(f"  {rater:<10} {figures['status']}")
        else:
            lines.append(f"  {rater:<10} {figures['seconds']:8.2f} s ({figures['cpu_seconds']:.2f} CPU s), "
                         f"peak {figures['peak_mib']:.0f} MiB")
    return "\n".join(lines)


def main(argv=None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        with open(sys.argv[4], "w") as handle:  # not stdout: a pipe the parent reads only at the end
            json.dump(CHILDREN[sys.argv[2]](*json.loads(sys.argv[3])), handle)
        print(json.dumps({"status": "ok"}))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, choices=sorted(GAME), default=2)
    parser.add_argument("--size", type=int, default=300, help="sampled league: policies per player")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-mib", type=float, default=1.0, help="spilled weights kept in memory per process")
    parser.add_argument("--exact-size", type=int, default=1000, help="exact league: policies per player (0: skip)")
    parser.add_argument("--adaptive-size", type=int, default=48, help="adaptive comparison: policies per player (0: skip)")
    parser.add_argument("--adaptive-episodes", type=int, default=32, help="adaptive comparison: episodes per joint "
                        "of the fully sampled league (the estimates get half)")
    parser.add_argument("--adaptive-reference", metavar="FILE", help="adaptive comparison: the fully sampled league "
                        "saved by --save (held.npz), its first --adaptive-size per player, instead of growing it")
    parser.add_argument("--adaptive-rules", nargs="+", default=list(RULE_TARGETS), choices=list(RULE_TARGETS))
    parser.add_argument("--adaptive-initial", type=int, default=INITIAL, help="adaptive pilot: episodes per joint")
    parser.add_argument("--adaptive-rounds", type=int, default=ROUNDS, help="adaptive allocation rounds")
    parser.add_argument("--refine-size", type=int, default=100, help="refinement on Ray: policies per player (0: skip)")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--rate-limit", type=float, default=300.0, help="seconds each rater may take (0: rate nothing)")
    parser.add_argument("--limit", type=float, default=3600.0)
    parser.add_argument("--memory-limit", type=float, default=5.0)
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--save", help="keep the built meta-games (held.npz, spilled.npz, exact.npz) in this directory")
    parser.add_argument("--rate-saved", metavar="FILE", help="only rate the meta-game saved at FILE (by --save) "
                        "with every rater, each in its own subprocess under --rate-limit and --memory-limit")
    args = parser.parse_args(argv)

    if args.rate_saved:
        rating = rate_all(args.rate_saved, args.rate_limit, args.memory_limit)
        print(f"every rater on the meta-game saved at {args.rate_saved}:\n{rating_lines(rating)}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"rating": rating}, handle, indent=1)
        return
    game, results = GAME[args.players], {}
    saved = tempfile.TemporaryDirectory()
    directory = args.save or saved.name
    held_path, exact_path = f"{directory}/held.npz", f"{directory}/exact.npz"
    print(f"{game}: a league of random-initialised 64 x 64 MLP policies, grown one policy at a time")
    if "sampled" in args.parts:
        for label, budget in (("held in memory", 0.0), (f"spilled beyond {args.budget_mib:g} MiB", args.budget_mib)):
            results[label] = run_child("sampled", [args.players, args.size, args.episodes, args.workers, args.seed,
                                                   budget, held_path if budget == 0 else f"{directory}/spilled.npz"],
                                       args.limit, args.memory_limit)
        held, spilled = results.values()
        print(f"\nsampled, {args.episodes} episodes per joint, {args.workers} Ray actors, "
              f"{args.size} policies per player")
        if held.get("records") and spilled.get("records"):
            for label, result in results.items():
                print(f"weights {label}:\n{growth_table(result['records'], args.episodes, args.players)}")
                if args.size < TARGET[args.players]:
                    print(extrapolate(result["records"], args.episodes, args.players))
                else:
                    a, b = cost_line(result["records"])
                    print(f"  the whole league: {sum(r['seconds'] for r in result['records']):.0f} s of additions "
                          f"and builds; line a + b x joints: a = {a * 1e3:.1f} ms, b = {b * 1e3:.3f} ms per joint")
                print(memory_line("", result))
            ratio = (np.sum([r["seconds"] for r in spilled["records"][1:]])
                     / np.sum([r["seconds"] for r in held["records"][1:]]))
            print(f"  spilled / held: build seconds {ratio:.2f}x, driver peak "
                  f"{spilled['driver']['peak_mib'] / held['driver']['peak_mib']:.2f}x, actor peak "
                  f"{max(a['peak_mib'] for a in spilled['actors']) / max(a['peak_mib'] for a in held['actors']):.2f}x; "
                  f"{spilled['reads']} reads from disk in the driver; same meta-game: "
                  f"{held['digest'] == spilled['digest']}")
            if args.rate_limit > 0:
                held["rating"] = rate_all(held_path, args.rate_limit, args.memory_limit)
                print(f"every rater on the meta-game of {args.size} per player:\n{rating_lines(held['rating'])}")
        else:
            print(f"  held: {held.get('status')}; spilled: {spilled.get('status')}")
    if "exact" in args.parts and args.exact_size:
        result = results["exact"] = run_child("exact", [args.players, args.exact_size, args.seed, exact_path],
                                              args.limit, args.memory_limit)
        print(f"\nexact, in-process, {args.exact_size} policies per player")
        if "records" in result:
            print(growth_table(result["records"], 0, args.players))
            print(f"  the whole league: {sum(r['seconds'] for r in result['records']):.0f} s of additions and "
                  f"builds; driver peak {result['driver']['peak_mib']:.0f} MiB")
            if args.rate_limit > 0:
                result["rating"] = rate_all(exact_path, args.rate_limit, args.memory_limit)
                print(f"every rater on the meta-game of {args.exact_size} per player:\n"
                      f"{rating_lines(result['rating'])}")
        else:
            print(f"  {result.get('status')}")
    if "adaptive" in args.parts and args.adaptive_size:
        result = results["adaptive"] = run_child(
            "adaptive", [args.players, args.adaptive_size, args.adaptive_episodes, args.workers, args.seed,
                         args.adaptive_reference, args.adaptive_rules, args.adaptive_initial, args.adaptive_rounds],
            args.limit, args.memory_limit)
        where = f"{args.workers} Ray actors" if args.workers > 1 else "in-process"
        source = (f"{result.get('full_seconds') or 0:.0f} s on Ray" if args.adaptive_reference is None
                  else f"saved at {args.adaptive_reference}")
        print(f"\nadaptive, {args.adaptive_size} policies per player, {where}: half of the fully "
              f"sampled league's {result.get('full_episodes', 0):,} episodes ({source}); a pilot of "
              f"{args.adaptive_initial} per joint and {args.adaptive_rounds} rounds; distance from the fully "
              "sampled ratings, and seconds to rate the estimate")
        for label, figures in result.get("results", {}).items():
            print(f"  {label:<15} {figures['episodes']:>11,} episodes {figures['seconds']:8.1f} s "
                  f"({figures['cpu_seconds']:.1f} CPU s with the actors')"
                  + (f", joints given episodes each round {figures['joints_touched']}" if "joints_touched" in figures
                     else ""))
            for rater, d in figures["distance"].items():
                if "status" in d:
                    print(f"    {rater:<24} {d['status']}")
                    continue
                print(f"    {rater:<24} max {d['max']:.4f}  rmse {d['rmse']:.4f}  rated in {d['rate_seconds']:.1f} s "
                      f"({d['rate_cpu_seconds']:.1f} CPU s)")
        if "memory" in result:
            actors = ", ".join(f"{a['peak_mib']:.0f}" for a in result["memory"]["actors"])
            print(f"  peak memory of the whole comparison: driver {result['memory']['driver']['peak_mib']:.0f} MiB, "
                  f"actors {actors} MiB")
        for rater, d in result.get("reference_rating", {}).items():
            print(f"  fully sampled, {rater}: " + (f"rated in {d['seconds']:.1f} s ({d['cpu_seconds']:.1f} CPU s)"
                                                    if d["seconds"] is not None else "refused"))
        if "results" not in result:
            print(f"  {result.get('status')}")
    if "refine" in args.parts and args.refine_size:
        result = results["refine"] = run_child("refine", [args.players, args.refine_size, args.adaptive_episodes,
                                                          args.workers, args.seed], args.limit, args.memory_limit)
        print(f"\nrefined on Ray, {args.refine_size} policies per player: distance from the fully sampled "
              f"({args.adaptive_episodes} episodes per joint) ratings")
        for label in ("uniform", "refined"):
            if label not in result:
                print(f"  {result.get('status')}")
                break
            figures = result[label]
            text = ", ".join(f"{rater} max {d['max']:.4f} rmse {d['rmse']:.4f}" for rater, d in figures["distance"].items())
            print(f"  {label:<8} {figures['episodes']:>10,} episodes {figures['seconds']:7.1f} s: {text}")
        if "full" in result:
            print(f"  full     {result['full']['episodes']:>10,} episodes {result['full']['seconds']:7.1f} s")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
