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
    )
    fields.update(overrides)
    return EvolveConfig(**fields)


def _load_table_or_game(path: Path):
    from metaeval.data import tables
    from metaeval.game import MetaGame

    if not path.exists():
        raise MetaEvalError(f"no such file: {path}")
    if path.suffix == ".csv":
        return tables.agent_vs_task(tables.read_scores(path))
    if path.suffix in (".npz", ".npy"):
        return MetaGame.load(path)
    raise MetaEvalError(f"cannot rate {path}: expected a .npz, .npy or .csv file")


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
        import metaeval

        rating = metaeval.rate(_load_table_or_game(args.file), args.rater, **dict(args.option))
        print(rating.to_frame().to_string(index=False, float_format=lambda x: f"{x:.6g}"))
    elif args.command == "battles":
        from metaeval.pairwise import bradley_terry

        if not args.file.exists():
            raise MetaEvalError(f"no such file: {args.file}")
        frame = bradley_terry(args.file, bootstrap=args.bootstrap, seed=args.seed, prior=args.prior)
        print(frame.to_string(float_format=lambda x: f"{x:.1f}"))
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
