"""The ``metaeval`` command: evolve, compare, psro, pbt, rate, plot.

Bad input ends in one line, ``metaeval: error: ...``, and exit status 2; a comparison
some of whose runs failed ends with exit status 1 after writing what finished.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import math
import os
import signal
import sys
import threading
import warnings
from pathlib import Path

from metaeval.errors import MetaEvalError


class Parser(argparse.ArgumentParser):
    """argparse's errors as a MetaEvalError: one line and exit 2, as every other error."""

    def error(self, message):
        raise MetaEvalError(message)


def at_least(least: int):
    """An int option from ``least`` to ``sys.maxsize`` (argparse names the option in its error)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}" if least == 1
                                             else f"must be at least {least}, got {text}")
        if value > sys.maxsize:  # no count or seed is meaningful beyond; range() and len() refuse them
            raise argparse.ArgumentTypeError(f"must be at most {sys.maxsize}, got {text}")
        return value
    return parse


def _number(text: str) -> float:
    """A finite float option (NaN and infinity would pass range checks by accident or overflow)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _option(text: str):
    """``key=value`` with a JSON value (``alpha=10``, ``inf_alpha=true``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"rater options are key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _anchor(text: str) -> tuple[str, float]:
    """``MODEL=SCORE``: the model whose score is fixed, and that score."""
    model, sep, score = text.rpartition("=")
    if not sep or not model:
        raise argparse.ArgumentTypeError(f"an anchor is MODEL=SCORE, e.g. gpt-4=1000, got {text!r}")
    return model, _number(score)


def _names(text: str) -> list[str]:
    """A comma-separated list of column names."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


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


OWN_POLICIES = """\
your own policies:
  add them to an evaluator and save its meta-game, then rate the file:
    evaluator = metaeval.Evaluator("kuhn_3p")
    evaluator.add(0, my_policy, name="mine")      # for every player, every policy
    evaluator.metagame().save("mine.npz")
  metaeval rate mine.npz --rater deviation
  (or any metaeval.MetaGame of payoffs measured elsewhere, saved the same way)"""


class _Version(argparse.Action):
    """``--version``: the installed package's version (read only when asked for)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print metaeval's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import version

        print(f"metaeval {version('metaeval')}")
        parser.exit()


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default after its help, written once, except where there is none to
    show (unset, off, empty): those say in their help what happens when the option is not
    given. Descriptions and epilogs keep their line breaks."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == [] \
                or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def _memory_argument(parser):
    parser.add_argument("--max-memory", type=_memory_size, default=None, metavar="SIZE",
                        help="memory budget of any one allocation, e.g. 16G (unset: $METAEVAL_MAX_MEMORY or 4G)")


def _tensorboard_argument(parser, layout=""):
    parser.add_argument("--tensorboard", type=_out_dir, default=None, metavar="DIR",
                        help="also write TensorBoard event files of the records to DIR" + layout +
                             ", every number under the record's key (seconds/total, ratings/0/3, ...); "
                             "needs tensorboardX (pip install 'metaeval[tensorboard]')")


def _quiet_argument(parser):
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on stderr (otherwise a bar with the current CCE gap on a "
                             "terminal, one line per iteration when stderr is not a terminal)")


def _ray_arguments(parser, what):
    from metaeval.runs.time_limit import SHARD_TIMEOUT

    parser.add_argument("--workers", type=at_least(1), default=1, help=what)
    parser.add_argument("--address", default=None,
                        help="address of an existing Ray cluster (unset: an embedded Ray, or $RAY_ADDRESS)")
    parser.add_argument("--shard-timeout", type=_seconds, default=SHARD_TIMEOUT, metavar="SECONDS",
                        help="time a policy may take to answer one batch of decisions while a meta-game is "
                             "built; one that takes longer stops the run with an error naming it (on Ray "
                             "workers after a second try on a fresh worker)")
    parser.add_argument("--max-retries", type=at_least(0), default=None,
                        help="resubmissions of a meta-game shard whose Ray worker was lost before the run "
                             "stops (unset: 3)")


def _ray_settings(args) -> dict:
    """The Ray and build settings of a loop's config (an unset retry count: the config's default)."""
    retries = {} if args.max_retries is None else {"max_retries": args.max_retries}
    return dict(workers=args.workers, address=args.address, shard_timeout=args.shard_timeout, **retries)


def _run_arguments(parser):
    parser.add_argument("--game", default="kuhn_3p", help="preset name or OpenSpiel game string")
    parser.add_argument("--iterations", type=at_least(1), default=100, help="iterations of the loop")
    parser.add_argument("--population", type=int, default=8, help="policies per player (>= 4)")
    parser.add_argument("--discard-fraction", type=_number, default=0.25,
                        help="share of each player's population replaced every iteration (its lowest-rated)")
    _mode_arguments(parser)
    _ray_arguments(parser, "Ray actors building meta-games")
    _approximate_gap_arguments(parser)
    parser.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                        help="rater option with a JSON value (alpha=10), repeatable")
    parser.add_argument("--replace", default="random",
                        help="where replacements come from: random, mutate, best-response, learned")
    parser.add_argument("--learner", choices=["qlearning", "dqn", "ppo", "search", "rollout"], default="qlearning",
                        help="the responder of learned replacements (--replace learned): qlearning (tabular), "
                             "dqn or ppo (networks; any game that can be simulated), search (simulates the game "
                             "against the known opponents), rollout (a network fitted to rollouts against them)")
    parser.add_argument("--learner-episodes", type=at_least(1), default=2000,
                        help="training episodes of each learned replacement (--replace learned)")
    parser.add_argument("--mutation-scale", type=_number, default=0.25,
                        help="size of the perturbation of mutated copies (--replace mutate)")
    parser.add_argument("--out", required=True, type=_out_dir, help="run directory (resumed if it exists)")
    _memory_argument(parser)
    _quiet_argument(parser)


def _mode_arguments(parser):
    parser.add_argument("--mode", choices=["auto", "exact", "sampled"], default="auto",
                        help="meta-game entries: exact (walks the game tree), sampled (episodes; no tree), "
                             "auto (exact if the game can be enumerated, else sampled)")
    parser.add_argument("--episodes", type=at_least(1), default=1000, help="per entry, sampled mode")


def _approximate_gap_arguments(parser):
    parser.add_argument("--approximate-gap", type=at_least(0), default=0, metavar="EPISODES",
                        help="estimate a lower bound on the CCE gap every iteration from deviations searched or "
                             "trained for EPISODES episodes each (0: off); for games too large to walk")
    parser.add_argument("--approximate-gap-learner", choices=["search", "rollout", "ppo", "dqn"], default="ppo",
                        help="the responder of the approximate gap's deviations: search (simulates the game "
                             "against the known opponents; a table), rollout (a network fitted to forked rollouts "
                             "against them), ppo or dqn (learned by trial)")
    parser.add_argument("--approximate-gap-episodes", type=at_least(2), default=2000,
                        help="fresh episodes behind each value of the approximate gap")


def _approximate_gap_settings(args) -> dict:
    return dict(approximate_gap=args.approximate_gap, approximate_gap_learner=args.approximate_gap_learner,
                approximate_gap_episodes=args.approximate_gap_episodes)


def _gap_text(record: dict) -> str:
    """``final CCE gap 0.123``, or why there is none; and the approximate gap's lower bound
    with its 95% interval, when estimated."""
    if record["cce_gap"] is None:
        text = "CCE gap not computed (sampled meta-game: it needs the game tree)"
    else:
        text = f"final CCE gap {record['cce_gap']:.6g}"
    if record.get("approximate_cce_gap") is not None:
        from metaeval.responses.gap import describe

        estimate = record.get("approximate_cce_gap_estimate", record["approximate_cce_gap"])
        text += "; approximate gap: " + describe(estimate, record["approximate_cce_gap_stderr"],
                                            record.get("approximate_cce_gap_responder", ""))
    return text


def say_written(results: Path | None = None, figures=()) -> None:
    """The last lines of every command that writes files: ``results in RESULTS`` and
    ``plots: FIGURE, ...`` (each only when there is one)."""
    if results is not None:
        print(f"results in {results}")
    if figures:
        print(f"plots: {', '.join(str(path) for path in figures)}")


def run_figures(out: Path) -> list[Path]:
    """The figures a loop or comparison drew in ``out`` (no gap figure when no gap was
    computed, as in sampled mode)."""
    from metaeval.viz import plots

    return [out / name for name in plots.RUN_FIGURES if (out / name).exists()]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="metaeval", description="Game-theoretic evaluation of agent populations.",
                     epilog=OWN_POLICIES, formatter_class=HelpFormatter)
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")

    def command(name, description, epilog=None):
        return commands.add_parser(name, help=description, description=description, epilog=epilog,
                                   formatter_class=HelpFormatter)

    evolve = command("evolve", "evolve populations: rate, replace the lowest-rated, repeat")
    evolve.add_argument("--rater", default="deviation", help="rater that picks whom to replace (a name in metaeval.RATERS)")
    evolve.add_argument("--seed", type=at_least(0), default=0, help="seed of every random choice of the run")
    _run_arguments(evolve)
    _tensorboard_argument(evolve)

    compare = command("compare", "every rater x seed, one comparison")
    compare.add_argument("--raters", default="uniform,nash,alpharank,deviation", help="comma-separated raters")
    compare.add_argument("--seeds", type=at_least(1), default=5, help="number of seeds 0..S-1")
    compare.add_argument("--jobs", type=at_least(1), default=1, help="runs in parallel processes")
    _run_arguments(compare)
    _tensorboard_argument(compare, layout=" (one run per rater and seed: DIR/RATER/seedS)")

    psro = command("psro", "PSRO / JPSRO: meta-solver, exact best responses, optional cap")
    psro.add_argument("--game", default="kuhn_3p", help="preset name or OpenSpiel game string")
    psro.add_argument("--solver", default="mgcce",
                      help="meta-solver: uniform, nash, alpharank, mecce, mgcce, deviation")
    psro.add_argument("--oracle", default="jpsro",
                      help="jpsro (best response to the opponents' joint marginal), psro (to the product of their "
                           "marginals), random, or a response for games too large to walk: search (simulates the game "
                           "against the known opponents), rollout (a network fitted to rollouts against them), dqn "
                           "or ppo (learned by trial)")
    psro.add_argument("--oracle-episodes", type=at_least(1), default=2000,
                      help="simulated episodes of each search or learned response (--oracle search, rollout, dqn or ppo)")
    _approximate_gap_arguments(psro)
    psro.add_argument("--oracle-target", choices=["jpsro", "psro"], default="jpsro",
                      help="what a learned response answers: the opponents' joint marginal (jpsro) or the "
                           "product of their marginals (psro)")
    psro.add_argument("--tie-break", choices=["drawn", "openspiel"], default="drawn",
                      help="jpsro: a seeded draw among tied best actions (drawn) or OpenSpiel jpsro's choice (openspiel)")
    psro.add_argument("--iterations", type=at_least(1), default=30, help="iterations of the loop")
    psro.add_argument("--seed", type=at_least(0), default=0, help="seed of every random choice of the run")
    psro.add_argument("--cap", type=at_least(1), default=None, help="at most this many policies per player (unset: no cap)")
    psro.add_argument("--prune-by", default="deviation", help="rater whose lowest-rated policies the cap removes")
    psro.add_argument("--initial", default="uniform", help="first policy per player: uniform, dirichlet, deterministic")
    _mode_arguments(psro)
    _ray_arguments(psro, "Ray actors building meta-games")
    psro.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                      help="meta-solver option with a JSON value, repeatable")
    psro.add_argument("--out", required=True, type=_out_dir, help="run directory (resumed if it exists)")
    _tensorboard_argument(psro)
    _quiet_argument(psro)
    _memory_argument(psro)

    pbt = command("pbt", "population-based training of learners, selected by a rater")
    pbt.add_argument("--game", default="kuhn_3p", help="preset name or OpenSpiel game string")
    pbt.add_argument("--rater", default="deviation", help="who is copied and who is replaced")
    pbt.add_argument("--learner", default="qlearning",
                     help="the members' learning algorithm: qlearning (tabular Q-learning; enumerable games), "
                          "dqn or ppo (networks, any game that can be simulated)")
    pbt.add_argument("--matchmaking", default="mecce", help="uniform, pfsp, or a meta-solver (mecce, nash, ...)")
    pbt.add_argument("--steps", type=at_least(1), default=30, help="training steps")
    pbt.add_argument("--interval", type=at_least(1), default=2, help="training steps between exploits")
    pbt.add_argument("--episodes-per-step", type=at_least(1), default=2000, help="training episodes per member and step")
    pbt.add_argument("--population", type=int, default=8, help="members per player (>= 4)")
    pbt.add_argument("--discard-fraction", type=_number, default=0.25,
                     help="share of each player's members replaced at an exploit (its lowest-rated)")
    pbt.add_argument("--mutation-scale", type=_number, default=0.25,
                     help="explore: noise added to a copied Q-table, relative to its largest value; for dqn and ppo, "
                          "a copied member's hyper-parameters are multiplied by 1 - scale or 1 + scale")
    pbt.add_argument("--seed", type=at_least(0), default=0, help="seed of every random choice of the run")
    _mode_arguments(pbt)
    _ray_arguments(pbt, "Ray tasks training members, and Ray actors building meta-games")
    _approximate_gap_arguments(pbt)
    pbt.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                     help="rater option with a JSON value, repeatable")
    pbt.add_argument("--learner-option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                     help="learner option with a JSON value (qlearning: step_size, epsilon; dqn, ppo: "
                          "learning_rate, num_envs, hidden, ...), repeatable")
    pbt.add_argument("--out", required=True, type=_out_dir, help="run directory (resumed if it exists)")
    _tensorboard_argument(pbt)
    _quiet_argument(pbt)
    _memory_argument(pbt)

    rate = command("rate", "rate a saved meta-game (.npz, .npy) or score table (.csv)", epilog=OWN_POLICIES)
    rate.add_argument("file", type=Path, help="the meta-game (MetaGame.save) or score table")
    rate.add_argument("--rater", default="deviation", help="a name in metaeval.RATERS")
    rate.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                      help="rater option with a JSON value, repeatable")
    _memory_argument(rate)
    table = rate.add_argument_group("score tables (.csv)")
    table.add_argument("--game", choices=["2p", "3p"], default="2p",
                       help="agent vs task (2p) or agent vs agent vs task (3p)")
    table.add_argument("--layout", choices=["rows", "columns", "long"], default="rows",
                       help="agents as rows, as columns, or a long table (agent, game, score)")
    table.add_argument("--normalise", choices=["minmax", "rank", "none"], default="minmax",
                       help="per-task rescaling of the scores")
    table.add_argument("--missing", choices=["error", "drop_tasks", "drop_agents"], default="error",
                       help="what to do with missing scores")
    table.add_argument("--plot", type=Path, default=None,
                       help="bar chart of the agents' ratings (unset: FILE_GAME_RATER.png beside the table)")

    battles = command("battles", "Bradley-Terry leaderboard of a battle CSV (model_a, model_b, winner)")
    battles.add_argument("file", type=Path, help="battle CSV: model_a, model_b, winner")
    battles.add_argument("--bootstrap", type=at_least(0), default=1000, help="bootstrap rounds (0: no intervals)")
    battles.add_argument("--seed", type=at_least(0), default=0, help="seed of the bootstrap")
    battles.add_argument("--prior", type=_number, default=0.0, help="virtual games per pair (disconnected data)")
    battles.add_argument("--anchor", type=_anchor, default=None, metavar="MODEL=SCORE",
                         help="shift every score so that MODEL scores SCORE, e.g. a reference model at 1000 "
                              "(unset: scores average 0)")
    battles.add_argument("--control", type=_names, default=None, metavar="COLUMNS",
                         help="style control: covariates fitted with the scores, comma-separated numeric "
                              "columns (or NAME for columns NAME_a, NAME_b), e.g. len,headers,lists,bold")
    battles.add_argument("--ties", choices=["half", "davidson"], default="half",
                         help="a tie is half a win for each side, or a third outcome (Davidson)")
    battles.add_argument("--sandwich", action="store_true",
                         help="closed-form sandwich intervals (the only intervals with --bootstrap 0)")
    battles.add_argument("--inverse-propensity", action="store_true",
                         help="weight each battle by 1 / (battles of its pair, at least 50), mean 1 "
                              "(replaces a weight column)")
    battles.add_argument("--audit", action="store_true",
                         help="bias audit per owner (needs owner_a, owner_b): sampling share, variants, "
                              "and the score and rank each owner's best loses under YRWR and a held-out split")
    battles.add_argument("--out", type=Path, default=None, metavar="FILE",
                         help="also write the leaderboard to this CSV file (unset: printed only)")

    plot = command("plot", "(re)draw the figures of a run or comparison directory")
    plot.add_argument("run_dir", type=Path, help="a directory written by evolve, compare, psro or pbt")
    return parser


def _progress(args) -> bool | None:
    """The loops' progress setting: off under --quiet, else a bar or lines by the terminal."""
    return False if args.quiet else None


def _config(args, **overrides):
    from metaeval.loops.evolve import EvolveConfig

    fields = dict(
        game=args.game, iterations=args.iterations, population=args.population,
        discard_fraction=args.discard_fraction, mode=args.mode, episodes=args.episodes,
        **_ray_settings(args), rater_options=dict(args.option),
        replace=args.replace, learner=args.learner, learner_episodes=args.learner_episodes,
        mutation_scale=args.mutation_scale, **_approximate_gap_settings(args),
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

    _work_starts()
    from metaeval.runs.reports import table_text  # pandas: part of the work
    path = args.file
    if not path.exists():
        raise MetaEvalError(f"no such file: {path}")
    if path.suffix in (".npz", ".npy"):
        rating = metaeval.rate(MetaGame.load(path), args.rater, **dict(args.option))
        print(table_text(rating.to_frame()))
        _report_failed_replicates(rating)
        print(rating.rank_note())
        return
    if path.suffix != ".csv":
        raise MetaEvalError(f"cannot rate {path}: expected a .npz, .npy or .csv file")
    from metaeval.viz import plots
    from metaeval.runs.fileio import check_writable

    plot = args.plot or path.with_name(f"{path.stem}_{args.game}_{args.rater}.png")
    if not plot.parent.is_dir():
        raise MetaEvalError(f"cannot write the plot {plot}: no directory {plot.parent}")
    check_writable(plot.parent, f"the plot {plot}")
    rating = metaeval.rate(_table_game(args), args.rater, **dict(args.option))
    frame = rating.to_frame()
    agents = frame[frame.player == rating.game.player_names[0]].sort_values(["rank", "strategy"])
    agents = agents.rename(columns={"strategy": "agent"})[["rank", "agent", "rating"]]
    print(table_text(agents))
    _report_failed_replicates(rating)
    print(rating.rank_note())
    say_written(figures=[plots.plot_rating_bars(plot, rating)])


def _report_failed_replicates(rating) -> None:
    """One line naming the bootstrap replicates the rater refused, if any."""
    settings = rating.diagnostics.get("bootstrap", {})
    if settings.get("failed"):
        index, message = settings["failures"][0]
        print(f"bootstrap: {settings['failed']} of {settings['replicates']} replicates failed and are left out "
              f"of the intervals (first, replicate {index}: {message})")


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


#: Set in the environment, a command ends where its work would start (``bench.startup`` times its start).
EXIT_BEFORE_WORK = "METAEVAL_EXIT_BEFORE_WORK"


def _work_starts() -> None:
    """Where a command's work starts: its arguments parsed and checked, its modules imported.
    With ``$METAEVAL_EXIT_BEFORE_WORK`` set, the command ends here (exit status 0)."""
    if os.environ.get(EXIT_BEFORE_WORK):
        raise SystemExit(0)


def run(args) -> int:
    from metaeval.runs.progress import asked

    with _memory_budget(getattr(args, "max_memory", None)), asked(not getattr(args, "quiet", False)):
        return _run(args)


def _run(args) -> int:
    if args.command == "evolve":
        from metaeval import games
        from metaeval.loops.evolve import evolve

        config = _config(args, rater=args.rater, seed=args.seed)
        games.load(config.game)  # fail fast on an unknown game
        _work_starts()
        records = evolve(config, out=args.out, progress=_progress(args), tensorboard=args.tensorboard)
        _say_if_longer(records, config.iterations, "iterations", args.out)
        print(f"{len(records)} iterations; meta-game {config.metagame}; {_gap_text(records[-1])}")
        say_written(args.out, run_figures(args.out))
    elif args.command == "compare":
        from metaeval import games
        from metaeval.runs import budget
        from metaeval.loops.compare import compare
        from metaeval.loops.evolve import check_population

        raters = [r.strip() for r in args.raters.split(",") if r.strip()]
        base = _config(args)
        for rater in raters:
            _config(args, rater=rater)  # validates every rater name up front
        check_population(base.population, games.load(base.game).num_players(), "each run")
        budget.check(budget.RUN_BYTES * len(raters) * args.seeds, f"{len(raters)} raters x {args.seeds} seeds",
                     "use fewer seeds")
        _work_starts()
        from metaeval.runs.reports import table_text  # pandas: part of the work

        _, final, failures = compare(base, raters, list(range(args.seeds)), args.out, jobs=args.jobs,
                                      progress=_progress(args), tensorboard=args.tensorboard)
        if base.mode == "sampled":
            print(f"meta-game {base.metagame}: no CCE gap to compare (it needs the game tree); payoffs in "
                  f"{args.out / 'comparison.csv'}")
        else:
            print(f"final CCE gap per rater after {base.iterations} iterations, over its finished seeds:")
            print(table_text(final, digits=4))
        say_written(args.out, run_figures(args.out))
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
            oracle_episodes=args.oracle_episodes, oracle_target=args.oracle_target, iterations=args.iterations,
            **_approximate_gap_settings(args), seed=args.seed, cap=args.cap, prune_by=args.prune_by,
            initial=args.initial, mode=args.mode, episodes=args.episodes, **_ray_settings(args),
            solver_options=dict(args.option),
        )
        games.load(config.game)  # fail fast on an unknown game
        _work_starts()
        records = psro(config, out=args.out, progress=_progress(args), tensorboard=args.tensorboard)
        _say_if_longer(records, config.iterations, "iterations", args.out)
        last = records[-1]
        seconds = sum(r["seconds"]["total"] for r in records)
        exploitability = "" if last["exploitability"] is None else f"; exploitability {last['exploitability']:.6g}"
        print(f"{len(records)} iterations in {seconds:.3g} s; meta-game {config.metagame}; {_gap_text(last)}"
              f"{exploitability}; population {last['sizes']}")
        say_written(args.out, run_figures(args.out))
    elif args.command == "pbt":
        from metaeval import games
        from metaeval.loops.pbt import PBTConfig, pbt

        config = PBTConfig(
            game=args.game, rater=args.rater, learner=args.learner, matchmaking=args.matchmaking,
            steps=args.steps, interval=args.interval, episodes_per_step=args.episodes_per_step,
            population=args.population, discard_fraction=args.discard_fraction,
            mutation_scale=args.mutation_scale, seed=args.seed, **_ray_settings(args),
            rater_options=dict(args.option), learner_options=dict(args.learner_option),
            mode=args.mode, episodes=args.episodes, **_approximate_gap_settings(args),
        )
        games.load(config.game)
        _work_starts()
        records = pbt(config, out=args.out, progress=_progress(args), tensorboard=args.tensorboard)
        _say_if_longer(records, config.steps, "steps", args.out)
        print(f"{len(records)} steps; meta-game {config.metagame}; {_gap_text(records[-1])}")
        say_written(args.out, run_figures(args.out))
    elif args.command == "rate":
        _rate_file(args)
    elif args.command == "battles":
        _work_starts()  # all its work is Bradley-Terry's, pandas and the raters included
        _battles(args)
    elif args.command == "plot":
        from metaeval.runs import rundir
        from metaeval.loops import compare, evolve

        _work_starts()
        config_path = args.run_dir / rundir.CONFIG
        if not config_path.exists():
            raise MetaEvalError(f"{args.run_dir} is not a run directory (no {rundir.CONFIG})")
        stored = rundir.read_json(config_path)
        kind, settings = rundir.stored_kind(stored), rundir.stored_settings(stored)
        from metaeval.viz import plots  # matplotlib, once there is a run to draw
        if kind in ("psro", "pbt") and settings is not None:
            from metaeval.loops import pbt, psro

            loop = psro if kind == "psro" else pbt
            if kind == "psro":  # a custom oracle is recorded by name, which no PSROConfig holds
                _check_settings(psro.PSROConfig, settings, config_path, also={"custom_oracle"})
            else:
                config = _stored_config(pbt.PBTConfig, settings, config_path)
            records = rundir.read_records(args.run_dir, loop.RECORD_SCHEMA)
            if not records:
                raise MetaEvalError(f"{args.run_dir} has no completed iterations to plot")
            if kind == "psro":
                try:
                    title = psro.PSRO.title_of(settings)
                except KeyError as exc:
                    raise MetaEvalError(f"{config_path} is damaged: it lacks {exc}") from None
                written = plots.plot_psro(args.run_dir, {settings["solver"]: records}, title=title)
                written += [path for path in [plots.plot_memory(args.run_dir, records, title=title)] if path]
            else:
                written = pbt.plot(args.run_dir, config, records)
            say_written(args.run_dir, written)
            return 0
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
            if settings.get("mode") == "sampled":
                title += f", meta-game sampled, {settings.get('episodes')} episodes per entry"
            plots.plot_run(args.run_dir, records, label=settings["rater"], seed=settings["seed"], title=title)
        else:
            raise MetaEvalError(f"{config_path} is not a metaeval run or comparison configuration")
        say_written(args.run_dir, run_figures(args.run_dir))
    return 0


def _battles(args) -> None:
    """The Bradley-Terry leaderboard of a battle CSV, printed (and written with ``--out``);
    its covariates' coefficients with ``--control``, the owners' audit with ``--audit``."""
    import pandas as pd

    from metaeval.pairwise import audit, bradley_terry, inverse_propensity, read_battles
    from metaeval.runs.fileio import atomic_write, check_writable
    from metaeval.runs.reports import table_text

    if not args.file.exists():
        raise MetaEvalError(f"no such file: {args.file}")
    if args.out is not None:
        if not args.out.parent.is_dir() or args.out.is_dir():
            raise MetaEvalError(f"cannot write the leaderboard {args.out}: "
                                + ("it is a directory" if args.out.is_dir() else f"no directory {args.out.parent}"))
        check_writable(args.out.parent, f"the leaderboard {args.out}")
    table = read_battles(args.file)
    if args.inverse_propensity:
        table["weight"] = inverse_propensity(table)
    options = dict(prior=args.prior, anchor=args.anchor, control=args.control, ties=args.ties)
    frame = bradley_terry(table, bootstrap=args.bootstrap, seed=args.seed, sandwich=args.sandwich, **options)
    print(table_text(frame, decimals=1, index=True))
    if args.control:
        coefficients = pd.DataFrame(frame.attrs["coefficients"]).T.rename_axis("covariate")
        print("\ncovariate coefficients (log-odds per standard deviation of the covariate):")
        print(table_text(coefficients, decimals=4, index=True))
    if args.ties == "davidson":
        print(f"\ntie parameter nu: {frame.attrs['tie_parameter']:.4f}")
    if args.audit:
        result = audit(table, seed=args.seed, **options)
        print("\naudit per owner (loss: the best model's score or rank minus the corrected one):")
        print(table_text(result.owners, decimals=3, index=True))
    if args.out is not None:
        atomic_write(args.out, lambda handle: frame.to_csv(handle), mode="w")
        say_written(args.out)


def _check_settings(config_class, settings: dict, config_path: Path, also=frozenset()) -> None:
    """A one-line error naming the settings of ``config_path`` that ``config_class`` (or ``also``) does not know."""
    known = {f.name for f in dataclasses.fields(config_class)} | set(also)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise MetaEvalError(f"{config_path} has setting(s) this metaeval does not know: {', '.join(unknown)} "
                            "(damaged, or written by another version)")


def _stored_config(config_class, settings: dict, config_path: Path):
    """The config a run directory's settings describe, or a one-line error naming what is wrong."""
    _check_settings(config_class, settings, config_path)
    try:
        return config_class(**settings)
    except MetaEvalError as exc:
        raise MetaEvalError(f"{config_path} is damaged: {exc}") from None


def _say_if_longer(records: list, asked: int, unit: str, out: Path) -> None:
    """Say that a resumed run already had more than the ``asked`` iterations (or steps): none
    were run and the results are those of all it had."""
    if len(records) > asked:
        print(f"{out} already holds {len(records)} {unit}, more than the {asked} asked for: nothing was run, "
              f"and the results below are of all {len(records)}", file=sys.stderr)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every interrupt path (actor pools, worker
    processes, run directories) cleans up the same way."""


def _terminate(signum, frame):
    raise Terminated()


class _Warnings:
    """A command's Python warnings, said when it ends, one line each and without the source
    line Python would echo; the warnings of one place in the code (six identical-policy
    warnings of one loop) in one line with their count."""

    def __init__(self):
        self.seen: dict[tuple, list] = {}  # (category, file, line) -> [first message, count]

    def record(self, message, category, filename, lineno, file=None, line=None):
        self.seen.setdefault((category, filename, lineno), [message, 0])[1] += 1

    def say(self):
        for (category, _, _), (message, count) in self.seen.items():
            times = f" x{count}, the first" if count > 1 else ""
            print(f"metaeval: warning: {category.__name__}{times}: {' '.join(str(message).split())}",
                  file=sys.stderr)


class _Redelivery:
    """An unraisable-exception hook that sends a swallowed interrupt again: Ctrl-C or SIGTERM
    raised where Python ignores exceptions (a garbage-collector callback, a ``__del__``) is
    printed and dropped, and the command would run on; other exceptions go to ``previous``.
    The signal is sent from another thread a moment later: sent while this hook runs, its
    handler would raise in the hook, where Python ignores it again."""

    def __init__(self, previous):
        self.previous = previous
        self.pending: list[threading.Timer] = []

    def __call__(self, unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.previous(unraisable)
            return
        signum = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
        again = threading.Timer(0.01, os.kill, args=(os.getpid(), signum))
        again.daemon = True
        self.pending.append(again)
        again.start()

    def cancel(self):
        """Send nothing more: the command has ended."""
        for again in self.pending:
            again.cancel()
            again.join()


def interrupt_on_sigterm():
    """Make SIGTERM raise `Terminated` in this process; returns the previous handler."""
    return signal.signal(signal.SIGTERM, _terminate)


def main(argv=None) -> int:
    """Run one command; SIGINT and SIGTERM stop it at once (exit 130 and 143): no new run or
    shard is scheduled, the iteration in flight is abandoned and Ray is shut down."""
    return guarded(lambda: run(build_parser().parse_args(argv)))


#: Failures of the file system rather than of metaeval: said in one line, never a traceback.
_FILE_SYSTEM_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}


def guarded(command) -> int:
    """``command()``'s exit status, with every error a user can meet said in one line on stderr:
    bad input (exit 2), a full or read-only disk (exit 1), an interrupt (130, 143)."""
    handler = interrupt_on_sigterm()
    redelivery = sys.unraisablehook = _Redelivery(sys.unraisablehook)
    said = _Warnings()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = said.record
            try:
                return command()
            finally:
                said.say()  # before the error line, if any
    except MetaEvalError as exc:
        print(f"metaeval: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout stopped early (``| head``): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail
        return 141
    except OSError as exc:
        if exc.errno not in _FILE_SYSTEM_ERRORS:
            raise
        where = f": {exc.filename}" if exc.filename else ""
        print(f"metaeval: error: {exc.strerror}{where}; finished iterations are saved: make room (or "
              "permission) and run the same command again to resume", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        how, code = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
        print(f"metaeval: {how}; finished iterations are saved, run the same command again to resume",
              file=sys.stderr)
        return code
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not break the clean-up
        redelivery.cancel()
        sys.unraisablehook = redelivery.previous
        try:
            if "metaeval.distributed" in sys.modules:  # only when this command used Ray
                sys.modules["metaeval.distributed"].shutdown()
        finally:
            signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    sys.exit(main())
