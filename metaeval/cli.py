"""The ``metaeval`` command: evolve, compare, rate, plot.

Bad input ends in one line, ``metaeval: error: ...``, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--out", required=True, type=Path, help="run directory (resumed if it exists)")


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

    rate = commands.add_parser("rate", help="rate a saved meta-game (.npz, .npy) or score table (.csv)")
    rate.add_argument("file", type=Path)
    rate.add_argument("--rater", default="deviation")
    rate.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE")
    table = rate.add_argument_group("score tables (.csv)")
    table.add_argument("--game", choices=["2p", "3p"], default="2p",
                       help="agent vs task (2p) or agent vs agent vs task (3p)")
    table.add_argument("--layout", choices=["rows", "columns", "long"], default="rows",
                       help="agents as rows, as columns, or a long table (agent, game, score)")
    table.add_argument("--normalise", choices=["minmax", "rank", "none"], default="minmax")
    table.add_argument("--missing", choices=["error", "drop_tasks", "drop_agents"], default="error")
    table.add_argument("--plot", type=Path, default=None,
                       help="bar chart of the agents' ratings (default: FILE_GAME_RATER.png beside the table)")

    plot = commands.add_parser("plot", help="(re)draw the figures of a run or comparison directory")
    plot.add_argument("run_dir", type=Path)
    return parser


def _config(args, **overrides):
    from metaeval.loops.evolve import EvolveConfig

    fields = dict(
        game=args.game, iterations=args.iterations, population=args.population,
        discard_fraction=args.discard_fraction, mode=args.mode, episodes=args.episodes,
        workers=args.workers, address=args.address, rater_options=dict(args.option),
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
    from metaeval import plots

    rating = metaeval.rate(_table_game(args), args.rater, **dict(args.option))
    frame = rating.to_frame()
    agents = frame[frame.player == rating.game.player_names[0]].sort_values(["rank", "strategy"])
    agents = agents.rename(columns={"strategy": "agent"})[["rank", "agent", "rating"]]
    print(agents.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
    plot = args.plot or path.with_name(f"{path.stem}_{args.game}_{args.rater}.png")
    print(f"plot: {plots.plot_rating_bars(plot, rating)}")


def run(args) -> int:
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
        _, final = compare(base, raters, list(range(args.seeds)), args.out, jobs=args.jobs)
        print(final.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"plots: {args.out / 'cce_gap.png'}, {args.out / 'payoff.png'}")
    elif args.command == "rate":
        _rate_file(args)
    elif args.command == "plot":
        from metaeval import plots, rundir
        from metaeval.loops.compare import load_comparison, write_comparison

        config_path = args.run_dir / rundir.CONFIG
        if not config_path.exists():
            raise MetaEvalError(f"{args.run_dir} is not a run directory (no {rundir.CONFIG})")
        stored = rundir.read_json(config_path)
        if not isinstance(stored, dict) or not ({"compare", "config"} & set(stored)):
            raise MetaEvalError(f"{config_path} is not a metaeval run or comparison configuration")
        if "compare" in stored:
            runs, base = load_comparison(args.run_dir)
            write_comparison(args.run_dir, runs, title=base.game)
        else:
            config = stored["config"]
            records = rundir.read_records(args.run_dir)
            if not records:
                raise MetaEvalError(f"{args.run_dir} has no completed iterations to plot")
            plots.plot_run(args.run_dir, records, label=config["rater"], seed=config["seed"],
                           title=f"{config['game']}, {config['rater']}, seed {config['seed']}")
        print(f"plots: {args.run_dir / plots.GAP_PLOT}, {args.run_dir / plots.PAYOFF_PLOT}")
    return 0


def main(argv=None) -> int:
    try:
        return run(build_parser().parse_args(argv))
    except MetaEvalError as exc:
        print(f"metaeval: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("metaeval: interrupted; finished iterations are saved, run again to resume", file=sys.stderr)
        return 130
    finally:
        if "metaeval.distributed" in sys.modules:  # only when this command used Ray
            sys.modules["metaeval.distributed"].shutdown()


if __name__ == "__main__":
    sys.exit(main())
