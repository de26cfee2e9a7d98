"""PSRO and JPSRO against OpenSpiel's ``psro_v2`` and ``jpsro``, measured in one run.

Run from the repository root: ``python -m bench.psro [--part psro|jpsro|cap|ties|leduc3|all]``
(needs the ``bench`` extra: OpenSpiel's Nash meta-solver imports cvxopt). Parts:

- ``psro``: kuhn_2p and leduc_2p, Nash meta-solver, exact best responses. OpenSpiel's
  ``psro_v2`` with its ``BestResponseOracle`` (C++ tabular best responses) estimates each new
  meta-game entry from ``--sims`` episodes, as it always does; metaeval's meta-game is exact.
  Exploitability (NashConv / 2) of the meta-Nash mixture per iteration, measured with
  OpenSpiel's ``exploitability.nash_conv`` for psro_v2 (outside its timed loop) and logged by
  metaeval's loop (inside its timed loop).
- ``jpsro``: kuhn_3p, one uniform policy per player, CCE best responses, mgcce meta-solver:
  ``jpsro.run_loop`` against ``metaeval psro`` with mgcce, mecce and deviation, and with
  mgcce and ``--tie-break openspiel`` (whose populations are checked to equal OpenSpiel's).
  Full-game CCE gap per iteration and cumulative wall time; the speed-up is OpenSpiel's
  total time over metaeval's time to first reach a gap at or below OpenSpiel's final one.
- ``cap``: kuhn_3p JPSRO with and without ``--cap K --prune-by deviation`` (``--caps``).
- ``ties``: kuhn_3p JPSRO with mgcce, without a cap and with cap 8, under each choice among
  tied best actions: the default draw (``--tie-seeds`` seeds), OpenSpiel's, and the lowest
  tied action (the gap's ``best_responses``); the iteration from which the gap stays at or
  below 1e-6.
- ``leduc3``: a few JPSRO iterations on leduc_3p, seconds per iteration.

Tables are printed; CSVs and figures go to ``--out``. Timings are wall clock on whatever
machine runs this; compare ratios taken in the same run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval import games
from metaeval.viz import plots
from metaeval.loops.psro import PSRO, PSROConfig

PARTS = ("psro", "jpsro", "cap", "ties", "leduc3")


def metaeval_run(game: str, solver: str, oracle: str, iterations: int, cap=None,
                 tie_break: str = "drawn") -> tuple[pd.DataFrame, PSRO]:
    """metaeval's loop: per iteration its gap, exploitability and cumulative wall time; and the run."""
    run = PSRO(PSROConfig(game=game, solver=solver, oracle=oracle, iterations=iterations, cap=cap,
                          tie_break=tie_break))
    rows, start = [], time.perf_counter()
    for _ in range(iterations):
        record = run.step()
        rows.append({"iteration": record["iteration"], "cce_gap": record["cce_gap"],
                     "exploitability": record["exploitability"], "size": max(record["sizes"]),
                     "seconds": time.perf_counter() - start})
    return pd.DataFrame(rows), run


def psro_v2_run(game_name: str, iterations: int, sims: int, seed: int = 0) -> pd.DataFrame:
    """OpenSpiel's psro_v2 with exact best responses and the Nash meta-solver."""
    from open_spiel.python import policy as policy_lib
    from open_spiel.python.algorithms import exploitability, policy_aggregator
    from open_spiel.python.algorithms.psro_v2 import best_response_oracle, psro_v2, strategy_selectors

    np.random.seed(seed)
    game = games.load(game_name)
    rows, elapsed = [], 0.0
    start = time.perf_counter()
    oracle = best_response_oracle.BestResponseOracle(game=game, policy=policy_lib.TabularPolicy(game))
    solver = psro_v2.PSROSolver(
        game, oracle, initial_policies=[policy_lib.TabularPolicy(game) for _ in range(game.num_players())],
        training_strategy_selector=strategy_selectors.probabilistic, sims_per_entry=sims,
        number_policies_selected=1, meta_strategy_method="nash", sample_from_marginals=True,
    )
    for iteration in range(iterations):
        if iteration:
            solver.iteration()
        elapsed += time.perf_counter() - start
        aggregated = policy_aggregator.PolicyAggregator(game).aggregate(
            range(game.num_players()), solver.get_policies(), solver.get_meta_strategies())
        nash_conv = exploitability.nash_conv(game, aggregated)
        rows.append({"iteration": iteration, "exploitability": nash_conv / 2, "seconds": elapsed})
        start = time.perf_counter()
    return pd.DataFrame(rows)


def jpsro_run(game_name: str, iterations: int, seed: int = 0) -> tuple[pd.DataFrame, list]:
    """OpenSpiel's jpsro.run_loop: uniform start, CCE best responses, mgcce meta-solver; per
    iteration its gap and cumulative wall time, and its final policies per player."""
    from open_spiel.python.algorithms import jpsro

    rows, policies, start = [], [], time.perf_counter()

    def callback(iteration, *args):
        train_meta_gaps = args[9]
        rows.append({"iteration": iteration - 1, "cce_gap": float(sum(train_meta_gaps[-1])),
                     "seconds": time.perf_counter() - start})
        policies[:] = args[1]
        return args[-1]

    jpsro.run_loop(games.load(game_name), game_name, seed=seed, iterations=iterations - 1,
                   policy_init="uniform", target_equilibrium="cce", train_meta_solver="mgcce",
                   callback=callback)
    return pd.DataFrame(rows), policies


def same_populations(run: PSRO, policies: list) -> bool:
    """Whether metaeval's run holds exactly jpsro's policies (same tables, same order)."""
    from open_spiel.python import policy as policy_lib

    from metaeval.spiel import game_tree

    evaluator, game = run.evaluator, run.game
    for p, theirs in enumerate(policies):
        rows = [policy_lib.TabularPolicy(game, players=(p,)).state_lookup[k] for k in game_tree(game).players[p].keys]
        ours = [evaluator.policy(p, i).action_probability_array for i in evaluator.ids[p]]
        if len(ours) != len(theirs) or any(
                not np.array_equal(a, b.action_probability_array[rows]) for a, b in zip(ours, theirs)):
            return False
    return True


def time_to_reach(frame: pd.DataFrame, target: float) -> float | None:
    reached = frame[frame.cce_gap <= target + 1e-12]
    return None if reached.empty else float(reached.seconds.iloc[0])


def part_psro(args, out: Path):
    iterations_of = {"kuhn_2p": args.kuhn_iterations, "leduc_2p": args.leduc_iterations}
    for game in args.psro_games.split(","):
        iterations = iterations_of[game]
        ours, _ = metaeval_run(game, "nash", "psro", iterations)
        theirs = psro_v2_run(game, iterations, args.sims)
        table = pd.DataFrame({"iteration": ours.iteration,
                              "metaeval exploitability": ours.exploitability,
                              "metaeval s": ours.seconds,
                              "psro_v2 exploitability": theirs.exploitability,
                              "psro_v2 s": theirs.seconds})
        print(f"\n{game}: PSRO, Nash meta-solver, exact best responses "
              f"(psro_v2 estimates entries from {args.sims} episodes)")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"wall time for {iterations} iterations: metaeval {ours.seconds.iloc[-1]:.3g} s, "
              f"psro_v2 {theirs.seconds.iloc[-1]:.3g} s "
              f"({theirs.seconds.iloc[-1] / ours.seconds.iloc[-1]:.1f}x)")
        table.to_csv(out / f"psro_{game}.csv", index=False)
        plots.plot_psro(out, {"metaeval (exact meta-game)": ours.to_dict("records"),
                              f"OpenSpiel psro_v2 ({args.sims} episodes per entry)": theirs.to_dict("records")},
                        title=f"{game}: PSRO, Nash meta-solver, exact best responses")
        (out / plots.EXPLOITABILITY_PLOT).rename(out / f"psro_{game}_exploitability.png")
        (out / plots.GAP_PLOT).unlink(missing_ok=True)


def part_jpsro(args, out: Path):
    theirs, policies = jpsro_run("kuhn_3p", args.jpsro_iterations)
    target = float(theirs.cce_gap.iloc[-1])
    runs = {"OpenSpiel jpsro, mgcce": theirs}
    for solver in ("mgcce", "mecce", "deviation"):
        runs[f"metaeval, {solver}"], _ = metaeval_run("kuhn_3p", solver, "jpsro", args.iterations)
    ties = "metaeval, mgcce, openspiel ties"
    runs[ties], run = metaeval_run("kuhn_3p", "mgcce", "jpsro", args.jpsro_iterations, tie_break="openspiel")
    table = pd.DataFrame({"iteration": range(args.iterations)})
    for label, frame in runs.items():
        table[f"{label} gap"] = frame.cce_gap
        table[f"{label} s"] = frame.seconds
    print(f"\nkuhn_3p JPSRO (CCE best responses, uniform start): full-game CCE gap and cumulative seconds")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}", na_rep=""))
    total = float(theirs.seconds.iloc[-1])
    print(f"OpenSpiel: {len(theirs)} iterations in {total:.3g} s, final gap {target:.4g}")
    for label, frame in runs.items():
        if label.startswith("metaeval"):
            reached = time_to_reach(frame, target)
            text = "never" if reached is None else f"{reached:.3g} s ({total / reached:.0f}x less)"
            print(f"{label}: reaches gap <= {target:.4g} after {text}")
    difference = (runs[ties].cce_gap - theirs.cce_gap).to_numpy()
    print(f"{ties}: same populations as OpenSpiel's: {same_populations(run, policies)}; gap minus "
          f"OpenSpiel's per iteration: {' '.join(f'{d:.2g}' for d in difference)}")
    table.to_csv(out / "jpsro_kuhn_3p.csv", index=False)
    plots.plot_psro(out, {k: v.to_dict("records") for k, v in runs.items()},
                    title="kuhn_3p JPSRO: uniform start, CCE best responses")
    (out / plots.GAP_PLOT).rename(out / "jpsro_kuhn_3p_gap.png")


def part_cap(args, out: Path):
    """Capped runs; the uncapped ones are the jpsro part's when it ran with ``--out`` before."""
    uncapped = out / "jpsro_kuhn_3p.csv"
    earlier = pd.read_csv(uncapped) if uncapped.exists() else None
    caps = [int(c) for c in args.caps.split(",")]
    runs = {}
    for solver in ("mgcce", "deviation"):
        if earlier is not None and len(earlier) >= args.iterations:
            runs[f"{solver}, no cap"] = pd.DataFrame({
                "iteration": earlier.iteration, "cce_gap": earlier[f"metaeval, {solver} gap"],
                "seconds": earlier[f"metaeval, {solver} s"], "size": earlier.iteration + 1})
        else:
            runs[f"{solver}, no cap"], _ = metaeval_run("kuhn_3p", solver, "jpsro", args.iterations)
        for cap in caps:
            runs[f"{solver}, cap {cap} by deviation"], _ = metaeval_run(
                "kuhn_3p", solver, "jpsro", args.iterations, cap=cap)
    table = pd.DataFrame({"iteration": range(args.iterations)})
    for label, frame in runs.items():
        table[f"{label}"] = frame.cce_gap
    print(f"\nkuhn_3p JPSRO with and without a cap of {args.caps} policies per player (pruned by deviation rating)")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    for label, frame in runs.items():
        print(f"{label}: {frame.seconds.iloc[-1]:.3g} s in all, largest population {frame['size'].max()}")
    table.to_csv(out / "cap_kuhn_3p.csv", index=False)
    plots.plot_psro(out, {k: v.to_dict("records") for k, v in runs.items()},
                    title=f"kuhn_3p JPSRO, with and without --cap {args.caps} --prune-by deviation")
    (out / plots.GAP_PLOT).rename(out / "cap_kuhn_3p_gap.png")


def settled(gaps, tolerance: float = 1e-6) -> int | None:
    """The first iteration from which every gap is at most ``tolerance``."""
    above = [i for i, gap in enumerate(gaps) if gap > tolerance]
    first = above[-1] + 1 if above else 0
    return first if first < len(gaps) else None


def lowest_tied_action(evaluator, player, sigma, rng):
    """The best response taking the lowest tied action at every state."""
    return evaluator.gap(sigma).best_responses[player]


def part_ties(args, out: Path):
    rows = []
    for cap in (None, 8):
        choices = [("drawn", seed, None) for seed in range(args.tie_seeds)]
        choices += [("openspiel", 0, None), ("lowest", 0, lowest_tied_action)]
        for tie_break, seed, oracle in choices:
            config = PSROConfig(game="kuhn_3p", solver="mgcce", iterations=args.tie_iterations, seed=seed, cap=cap,
                                tie_break="drawn" if oracle else tie_break)
            gaps = [record["cce_gap"] for record in PSRO(config, oracle=oracle).run(progress=False)]
            rows.append({"cap": cap, "tie_break": tie_break, "seed": seed, "settled": settled(gaps),
                         "gap at 8": gaps[8], "final gap": gaps[-1]})
    table = pd.DataFrame(rows)
    print(f"\nkuhn_3p JPSRO, mgcce, {args.tie_iterations} iterations: first iteration from which the gap stays <= 1e-6")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    table.to_csv(out / "ties_kuhn_3p.csv", index=False)


def part_leduc3(args, out: Path):
    start = time.perf_counter()
    pyspiel_game = games.load("leduc_3p")
    from metaeval.spiel import game_tree

    tree = game_tree(pyspiel_game)
    print(f"\nleduc_3p: {tree.num_terminals} terminal histories, enumerated in {time.perf_counter() - start:.3g} s")
    frame, _ = metaeval_run("leduc_3p", "mgcce", "jpsro", args.leduc3_iterations)
    frame["seconds this iteration"] = frame.seconds.diff().fillna(frame.seconds)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    frame.to_csv(out / "jpsro_leduc_3p.csv", index=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("--sims", type=int, default=1000, help="psro_v2 episodes per meta-game entry")
    parser.add_argument("--psro-games", default="kuhn_2p,leduc_2p", help="games of the psro part")
    parser.add_argument("--kuhn-iterations", type=int, default=30)
    parser.add_argument("--leduc-iterations", type=int, default=20)
    parser.add_argument("--jpsro-iterations", type=int, default=9, help="OpenSpiel jpsro iterations (0..8)")
    parser.add_argument("--iterations", type=int, default=30, help="metaeval JPSRO iterations on kuhn_3p")
    parser.add_argument("--caps", default="16,8", help="caps of the cap part, comma-separated")
    parser.add_argument("--tie-seeds", type=int, default=10, help="seeds of the default draw in the ties part")
    parser.add_argument("--tie-iterations", type=int, default=20)
    parser.add_argument("--leduc3-iterations", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-psro"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = {"psro": part_psro, "jpsro": part_jpsro, "cap": part_cap, "ties": part_ties, "leduc3": part_leduc3}
    for part in PARTS if args.part == "all" else (args.part,):
        parts[part](args, args.out)


if __name__ == "__main__":
    main()
