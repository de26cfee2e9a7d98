"""The ``metaeval`` command: evolve, compare, psro, pbt, rate, plot.

Bad input ends in one line, ``metaeval: error: ...``, and exit status 2; a comparison
some of whose runs failed ends with exit status 1 after writing what finished.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from metaeval.errors import MetaEvalError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise MetaEvalError(message)


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def _option(text: str):
    """``key=value`` with a JSON value (``alpha=10``, ``inf_alpha=true``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"rater options are key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _out_dir(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no directory; give the run directory")
    return Path(text)


def _memory_size(text: str) -> int:
    from metaeval.runs import budget

    try:
        return budget.parse_size(text)
    except MetaEvalError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memory_argument(parser):
    parser.add_argument("--max-memory", type=_memory_size, default=None, metavar="SIZE",
                        help="memory budget of any one allocation, e.g. 16G (default: $METAEVAL_MAX_MEMORY or 4G)")


def _run_arguments(parser):
    parser.add_argument("--game", default="kuhn_3p", help="preset name or OpenSpiel game string")
    parser.add_argument("--iterations", type=_positive(int), default=100)
    parser.add_argument("--population", type=int, default=8, help="policies per player (>= 4)")
    parser.add_argument("--discard-fraction", type=float, default=0.25)
    parser.add_argument("--mode", choices=["exact", "sampled"], default="exact")
    parser.add_argument("--episodes", type=_positive(int), default=1000, help="per entry, sampled mode")
    parser.add_argument("--workers", type=_positive(int), default=1, help="Ray actors building meta-games")
    parser.add_argument("--address", default=None, help="existing Ray cluster (default: embedded Ray)")
    parser.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                        help="rater option, repeatable")
    parser.add_argument("--replace", default="random", help="replacements: random, mutate, best-response, learned")
    parser.add_argument("--learner-episodes", type=_positive(int), default=2000,
                        help="training budget of each learned replacement")
    parser.add_argument("--mutation-scale", type=float, default=0.25, help="perturbation of mutated copies")
    parser.add_argument("--out", required=True, type=_out_dir, help="run directory (resumed if it exists)")
    _memory_argument(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="metaeval", description="Game-theoretic evaluation of agent populations.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    evolve = commands.add_parser("evolve", help="evolve populations by rating (SPEC 5)")
    evolve.add_argument("--rater", default="deviation")
    evolve.add_argument("--seed", type=int, default=0)
    _run_arguments(evolve)

    compare = commands.add_parser("compare", help="every rater x seed, one comparison")
    compare.add_argument("--raters", default="uniform,nash,alpharank,deviation")
    compare.add_argument("--seeds", type=_positive(int), default=5, help="number of seeds 0..S-1")
    compare.add_argument("--jobs", type=_positive(int), default=1, help="runs in parallel processes")
    _run_arguments(compare)

    psro = commands.add_parser("psro", help="PSRO / JPSRO: meta-solver, exact best responses, optional cap")
    psro.add_argument("--game", default="kuhn_3p", help="preset name or OpenSpiel game string")
    psro.add_argument("--solver", default="mgcce",
                      help="meta-solver: uniform, nash, alpharank, mecce, mgcce, deviation")
    psro.add_argument("--oracle", default="jpsro",
                      help="jpsro (best response to the opponents' joint marginal), psro, random")
    psro.add_argument("--tie-break", choices=["drawn", "openspiel"], default="drawn",
                      help="jpsro: a seeded draw among tied best actions (drawn) or OpenSpiel jpsro's choice (openspiel)")
    psro.add_argument("--iterations", type=_positive(int), default=30)
    psro.add_argument("--seed", type=int, default=0)
    psro.add_argument("--cap", type=_positive(int), default=None, help="at most this many policies per player")
    psro.add_argument("--prune-by", default="deviation", help="rater whose lowest-rated policies the cap removes")
    psro.add_argument("--initial", default="uniform", help="first policy per player: uniform, dirichlet, deterministic")
    psro.add_argument("--mode", choices=["exact", "sampled"], default="exact")
    psro.add_argument("--episodes", type=_positive(int), default=1000, help="per entry, sampled mode")
    psro.add_argument("--workers", type=_positive(int), default=1, help="Ray actors building meta-games")
    psro.add_argument("--address", default=None, help="existing Ray cluster (default: embedded Ray)")
    psro.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                      help="meta-solver option, repeatable")
    psro.add_argument("--out", required=True, type=_out_dir, help="run directory (resumed if it exists)")

    pbt = commands.add_parser("pbt", help="population-based training of learners, selected by a rater")
    pbt.add_argument("--game", default="kuhn_3p", help="preset name or OpenSpiel game string")
    pbt.add_argument("--rater", default="deviation", help="who is copied and who is replaced")
    pbt.add_argument("--learner", default="qlearning")
    pbt.add_argument("--matchmaking", default="mecce", help="uniform, pfsp, or a meta-solver (mecce, nash, ...)")
    pbt.add_argument("--steps", type=_positive(int), default=30, help="training steps")
    pbt.add_argument("--interval", type=_positive(int), default=2, help="training steps between exploits")
    pbt.add_argument("--episodes-per-step", type=_positive(int), default=2000)
    pbt.add_argument("--population", type=int, default=8, help="members per player (>= 4)")
    pbt.add_argument("--discard-fraction", type=float, default=0.25)
    pbt.add_argument("--mutation-scale", type=float, default=0.25)
    pbt.add_argument("--seed", type=int, default=0)
    pbt.add_argument("--workers", type=_positive(int), default=1, help="Ray tasks training members")
    pbt.add_argument("--address", default=None, help="existing Ray cluster (default: embedded Ray)")
    pbt.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                     help="rater option, repeatable")
    pbt.add_argument("--learner-option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                     help="learner option (step_size, epsilon), repeatable")
    pbt.add_argument("--out", required=True, type=_out_dir, help="run directory (resumed if it exists)")

    rate = commands.add_parser("rate", help="rate a saved meta-game (.npz, .npy) or score table (.csv)")
    rate.add_argument("file", type=Path)
    rate.add_argument("--rater", default="deviation")
    rate.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE")
    _memory_argument(rate)
    table = rate.add_argument_group("score tables (.csv)")
    table.add_argument("--game", choices=["2p", "3p"], default="2p",
                       help="agent vs task (2p) or agent vs agent vs task (3p)")
    table.add_argument("--layout", choices=["rows", "columns", "long"], default="rows",
                       help="agents as rows, as columns, or a long table (agent, game, score)")
    table.add_argument("--normalise", choices=["minmax", "rank", "none"], default="minmax")
    table.add_argument("--missing", choices=["error", "drop_tasks", "drop_agents"], default="error")
    table.add_argument("--plot", type=Path, default=None,
                       help="bar chart of the agents' ratings (default: FILE_GAME_RATER.png beside the table)")

    battles = commands.add_parser("battles", help="Bradley-Terry leaderboard of a battle CSV (model_a, model_b, winner)")
    battles.add_argument("file", type=Path)
    battles.add_argument("--bootstrap", type=int, default=1000, help="bootstrap rounds (0: no intervals)")
    battles.add_argument("--seed", type=int, default=0)
    battles.add_argument("--prior", type=float, default=0.0, help="virtual games per pair (disconnected data)")

    plot = commands.add_parser("plot", help="(re)draw the figures of a run or comparison directory")
    plot.add_argument("run_dir", type=Path)
    return parser


def _config(args, **overrides):
    from metaeval.loops.evolve import EvolveConfig

    fields = dict(
        game=args.game, iterations=args.iterations, population=args.population,
        discard_fraction=args.discard_fraction, mode=args.mode, episodes=args.episodes,
        workers=args.workers, address=args.address, rater_options=dict(args.option),
        replace=args.replace, learner_episodes=args.learner_episodes, mutation_scale=args.mutation_scale,
    )
    fields.update(overrides)
    return EvolveConfig(**fields)


def _table_game(args):
    """The 2p or 3p game of a score table, built as the table options say."""
    from metaeval import data

    if args.layout == "long":
        table, _ = data.read_long(args.file)
    else:
        table = data.read_scores(args.file, agents=args.layout)
    build = data.agent_vs_task if args.game == "2p" else data.agent_vs_agent_vs_task
    return build(table, normalise=args.normalise, missing=args.missing)


def _rate_file(args) -> None:
    """Rate a saved game (every player's ratings) or a score table (the agents, ranked, and a chart)."""
    import metaeval
    from metaeval.game import MetaGame

    path = args.file
    if not path.exists():
        raise MetaEvalError(f"no such file: {path}")
    if path.suffix in (".npz", ".npy"):
        rating = metaeval.rate(MetaGame.load(path), args.rater, **dict(args.option))
        print(rating.to_frame().to_string(index=False, float_format=lambda x: f"{x:.6g}"))
        return
    if path.suffix != ".csv":
        raise MetaEvalError(f"cannot rate {path}: expected a .npz, .npy or .csv file")
    from metaeval.viz import plots

    rating = metaeval.rate(_table_game(args), args.rater, **dict(args.option))
    frame = rating.to_frame()
    agents = frame[frame.player == rating.game.player_names[0]].sort_values(["rank", "strategy"])
    agents = agents.rename(columns={"strategy": "agent"})[["rank", "agent", "rating"]]
    print(agents.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
    plot = args.plot or path.with_name(f"{path.stem}_{args.game}_{args.rater}.png")
    print(f"plot: {plots.plot_rating_bars(plot, rating)}")


@contextlib.contextmanager
def _memory_budget(max_memory: int | None):
    """Set the budget for this command (in the environment, so compare's workers see it too)."""
    from metaeval.runs import budget

    previous = os.environ.get(budget.VARIABLE)
    if max_memory is not None:
        os.environ[budget.VARIABLE] = str(max_memory)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(budget.VARIABLE, None)
        else:
            os.environ[budget.VARIABLE] = previous


def run(args) -> int:
    with _memory_budget(getattr(args, "max_memory", None)):
        return _run(args)


def _run(args) -> int:
    if args.command == "evolve":
        from metaeval import games
        from metaeval.loops.evolve import evolve

        config = _config(args, rater=args.rater, seed=args.seed)
        games.load(config.game)  # fail fast on an unknown game
        records = evolve(config, out=args.out)
        last = records[-1]
        print(f"{len(records)} iterations; final CCE gap {last['cce_gap']:.6g}; results in {args.out}")
        print(f"plots: {args.out / 'cce_gap.png'}, {args.out / 'payoff.png'}")
    elif args.command == "compare":
        from metaeval import games
        from metaeval.loops.compare import compare

        raters = [r.strip() for r in args.raters.split(",") if r.strip()]
        base = _config(args)
        for rater in raters:
            _config(args, rater=rater)  # validates every rater name up front
        games.load(base.game)
        _, final, failures = compare(base, raters, list(range(args.seeds)), args.out, jobs=args.jobs)
        print(final.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"plots: {args.out / 'cce_gap.png'}, {args.out / 'payoff.png'}")
        if not failures.empty:
            print(f"metaeval: {len(failures)} of {len(raters) * args.seeds} runs failed (listed in "
                  f"{args.out / 'failures.csv'}); the tables cover the others; run the same command "
                  "again to retry them", file=sys.stderr)
            return 1
    elif args.command == "psro":
        from metaeval import games
        from metaeval.loops.psro import PSROConfig, psro

        config = PSROConfig(
            game=args.game, solver=args.solver, oracle=args.oracle, tie_break=args.tie_break,
            iterations=args.iterations, seed=args.seed, cap=args.cap, prune_by=args.prune_by,
            initial=args.initial, mode=args.mode, episodes=args.episodes, workers=args.workers, address=args.address,
            solver_options=dict(args.option),
        )
        games.load(config.game)  # fail fast on an unknown game
        records = psro(config, out=args.out)
        last = records[-1]
        seconds = sum(r["seconds"]["total"] for r in records)
        exploitability = "" if last["exploitability"] is None else f"; exploitability {last['exploitability']:.6g}"
        print(f"{len(records)} iterations in {seconds:.3g} s; final CCE gap {last['cce_gap']:.6g}"
              f"{exploitability}; population {last['sizes']}; results in {args.out}")
    elif args.command == "pbt":
        from metaeval import games
        from metaeval.loops.pbt import PBTConfig, pbt

        config = PBTConfig(
            game=args.game, rater=args.rater, learner=args.learner, matchmaking=args.matchmaking,
            steps=args.steps, interval=args.interval, episodes_per_step=args.episodes_per_step,
            population=args.population, discard_fraction=args.discard_fraction,
            mutation_scale=args.mutation_scale, seed=args.seed, workers=args.workers, address=args.address,
            rater_options=dict(args.option), learner_options=dict(args.learner_option),
        )
        games.load(config.game)
        records = pbt(config, out=args.out)
        print(f"{len(records)} steps; final CCE gap {records[-1]['cce_gap']:.6g}; results in {args.out}")
        print(f"plots: {args.out / 'cce_gap.png'}, {args.out / 'payoff.png'}")
    elif args.command == "rate":
        _rate_file(args)
    elif args.command == "battles":
        from metaeval.pairwise import bradley_terry

        if not args.file.exists():
            raise MetaEvalError(f"no such file: {args.file}")
        frame = bradley_terry(args.file, bootstrap=args.bootstrap, seed=args.seed, prior=args.prior)
        print(frame.to_string(float_format=lambda x: f"{x:.1f}"))
    elif args.command == "plot":
        from metaeval.viz import plots
        from metaeval.runs import rundir
        from metaeval.loops import compare, evolve

        config_path = args.run_dir / rundir.CONFIG
        if not config_path.exists():
            raise MetaEvalError(f"{args.run_dir} is not a run directory (no {rundir.CONFIG})")
        stored = rundir.read_json(config_path)
        if rundir.stored_kind(stored) == "psro" and rundir.stored_settings(stored) is not None:
            from metaeval.loops.psro import PSRO, RECORD_SCHEMA

            records = rundir.read_records(args.run_dir, RECORD_SCHEMA)
            if not records:
                raise MetaEvalError(f"{args.run_dir} has no completed iterations to plot")
            settings = rundir.stored_settings(stored)
            try:
                title = PSRO.title_of(settings)
            except KeyError as exc:
                raise MetaEvalError(f"{config_path} is damaged: it lacks {exc}") from None
            written = plots.plot_psro(args.run_dir, {settings["solver"]: records}, title=title)
            print(f"plots: {', '.join(str(path) for path in written)}")
            return 0
        kind, settings = rundir.stored_kind(stored), rundir.stored_settings(stored)
        if kind == compare.KIND and settings is not None:
            runs, base = compare.load_comparison(args.run_dir)
            compare.write_comparison(args.run_dir, runs, title=compare.title_of(base))
        elif kind == evolve.KIND and settings is not None:
            missing = [k for k in ("game", "rater", "seed") if k not in settings]
            if missing:
                raise MetaEvalError(f"{config_path} is damaged: it lacks {', '.join(missing)}")
            records = rundir.read_records(args.run_dir, evolve.RECORD_SCHEMA)
            if not records:
                raise MetaEvalError(f"{args.run_dir} has no completed iterations to plot")
            title = f"{settings['game']}, {settings['rater']}, seed {settings['seed']}"
            plots.plot_run(args.run_dir, records, label=settings["rater"], seed=settings["seed"], title=title)
        else:
            raise MetaEvalError(f"{config_path} is not a metaeval run or comparison configuration")
        print(f"plots: {args.run_dir / plots.GAP_PLOT}, {args.run_dir / plots.PAYOFF_PLOT}")
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every interrupt path (actor pools, worker
    processes, run directories) cleans up the same way."""


def _terminate(signum, frame):
    raise Terminated()


def interrupt_on_sigterm():
    """Make SIGTERM raise :class:`Terminated` in this process; returns the previous handler."""
    return signal.signal(signal.SIGTERM, _terminate)


def main(argv=None) -> int:
    """Run one command; SIGINT and SIGTERM stop it at once (exit 130 and 143): no new run or
    shard is scheduled, the iteration in flight is abandoned and Ray is shut down."""
    handler = interrupt_on_sigterm()
    try:
        return run(build_parser().parse_args(argv))
    except MetaEvalError as exc:
        print(f"metaeval: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        how, code = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
        print(f"metaeval: {how}; finished iterations are saved, run the same command again to resume",
              file=sys.stderr)
        return code
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not break the clean-up
        try:
            if "metaeval.distributed" in sys.modules:  # only when this command used Ray
                sys.modules["metaeval.distributed"].shutdown()
        finally:
            signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    sys.exit(main())
