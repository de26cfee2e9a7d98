"""PSRO and JPSRO on one Evaluator (Lanctot et al. 2017; Marris et al. 2021).

Each player starts with one policy (uniform by default, as OpenSpiel's JPSRO). Each iteration

    a) builds the meta-game of the population (incrementally),
    b) turns it into a joint distribution sigma with the meta-solver,
    c) records the full-game CCE gap of sigma (and, in 2-player zero-sum games, the
       NashConv and exploitability of the meta-Nash mixture),
    d) adds every player's oracle policy against sigma (all computed from the same sigma),
    e) with a cap, removes each player's lowest-rated policies (``prune_by``) down to it,
       never one in the support of the meta-distribution of the grown population unless
       that support alone exceeds the cap (then its lowest-rated go too).

Under a cap, a player already at it whose best response gains nothing against sigma (its
CCE gap at most ``NO_GAIN``) adds no policy: the response could only displace one, and a
converged population then stays as it is (with seeded tie-breaks among equally rated
policies, pruning otherwise removes policies a later sigma rests on).

The run directory follows ``evolve``'s conventions: ``config.json``, one flushed line per
iteration in ``iterations.jsonl``, checkpoints, resume, ``summary.csv`` and plots.

In sampled mode nothing walks the game tree: the first policies are drawn state by state,
the oracle must be learned (``dqn``, ``ppo``), ``random`` or a custom one, and the CCE gap,
NashConv and exploitability are not computed (null in the log).
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import metaeval
from metaeval.runs.progress import Progress
from metaeval import games, spiel
from metaeval.runs import rundir
from metaeval.runs.memory import memory_usage
from metaeval.runs.build import build_versions
from metaeval.distributed.build import check_limits
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT
from metaeval.distributed.session import check_workers
from metaeval.errors import MetaEvalError
from metaeval.training.evaluator import Evaluator
from metaeval.loops import approximate, checkpoint
from metaeval.loops.evolve import SUPPORT_MASS
from metaeval.training.meta_solvers import SOLVERS, marginals
from metaeval.responses.gap import responder_named
from metaeval.training.oracles import ORACLES, TIE_BREAKS, learned
from metaeval.training.oracles.learned import TARGETS

LEARNED_ORACLES = ("dqn", "ppo", "search", "rollout")
"""Oracles that learn the response (JAX networks, no tree walk): a learner of that name."""
ORACLE_NAMES = (*ORACLES, *LEARNED_ORACLES)
from metaeval.spiel.mode import MODES, describe, resolve_mode

NO_GAIN = 1e-9
"""A player's CCE gap at most this counts as zero (its best response gains nothing)."""

KIND = "psro"
"""The run-directory kind of a PSRO run."""

RECORD_SCHEMA = rundir.RecordSchema({
    "sizes": rundir.LIST, "cce_gap": rundir.OPTIONAL_NUMBER, "cce_gap_per_player": rundir.OPTIONAL_NUMBERS,
    "meta_value": rundir.NUMBERS, "support": rundir.COUNT, "added": rundir.LIST, "seconds": rundir.OBJECT,
})
"""What every line of a PSRO run's ``iterations.jsonl`` holds."""


@dataclass(frozen=True)
class PSROConfig:
    """Everything that defines a PSRO run (written to ``config.json``).

    ``oracle="jpsro"`` best-responds to the opponents' joint marginal of sigma (JPSRO's
    CCE oracle), ``"psro"`` to the product of their marginals; in 2-player games they
    coincide. ``"search"`` searches the response against the known opponents
    ([`metaeval.responses.Search`][metaeval.responses.search.Search]; the policy added is the searched table itself, so
    nothing is lost to distilling it into a network), ``"rollout"`` fits a network to forked
    rollouts against them ([`metaeval.responses.Rollout`][metaeval.responses.rollout.Rollout]) and ``"dqn"`` and ``"ppo"`` learn it
    (JAX networks), each with ``oracle_episodes`` episodes
    (`metaeval.training.oracles.learned`), to the
    opponents' joint marginal (``oracle_target="jpsro"``) or to the product of their
    marginals (``"psro"``): the oracles for games whose tree cannot be walked.
    ``approximate_gap``: when positive, every iteration also estimates a lower bound on the
    CCE gap ([`metaeval.Evaluator.approximate_gap`][metaeval.training.evaluator.Evaluator.approximate_gap]): a ``approximate_gap_learner``
    deviation per player trained for that many episodes, values from
    ``approximate_gap_episodes`` fresh episodes; recorded beside the exact gap, if any.
    ``tie_break``: how the ``jpsro`` oracle chooses among tied best actions
    ([`metaeval.training.oracles.jpsro`][metaeval.training.oracles.jpsro]; ``"openspiel"`` as OpenSpiel's ``jpsro``). ``cap``: at
    most this many policies per player, pruned by ``prune_by``. ``mode``: as in
    [`metaeval.loops.evolve.EvolveConfig`][metaeval.loops.evolve.EvolveConfig] (``"auto"`` becomes the mode the game allows).
    """

    game: str = "kuhn_3p"
    solver: str = "mgcce"
    oracle: str = "jpsro"
    tie_break: str = "drawn"
    oracle_episodes: int = 2000
    oracle_target: str = "jpsro"
    approximate_gap: int = 0
    approximate_gap_learner: str = "ppo"
    approximate_gap_episodes: int = 2000
    iterations: int = 30
    seed: int = 0
    cap: int | None = None
    prune_by: str = "deviation"
    initial: str = "uniform"
    mode: str = "auto"
    episodes: int = 1000
    workers: int = 1
    address: str | None = None
    shard_timeout: float = SHARD_TIMEOUT
    max_retries: int = MAX_RETRIES
    solver_options: dict = field(default_factory=dict)

    def __post_init__(self):
        checks = [
            (self.solver in SOLVERS, f"unknown meta-solver {self.solver!r}; choose one of {', '.join(SOLVERS)}"),
            (self.oracle in ORACLE_NAMES, f"unknown oracle {self.oracle!r}; choose one of {', '.join(ORACLE_NAMES)}"),
            (self.oracle_target in TARGETS,
             f"unknown oracle_target {self.oracle_target!r}; choose one of {', '.join(TARGETS)}"),
            (isinstance(self.oracle_episodes, int) and not isinstance(self.oracle_episodes, bool)
             and self.oracle_episodes >= 1, f"oracle_episodes must be a positive int, got {self.oracle_episodes!r}"),
            (self.tie_break in TIE_BREAKS,
             f"unknown tie_break {self.tie_break!r}; choose one of {', '.join(TIE_BREAKS)}"),
            (self.tie_break == "drawn" or self.oracle == "jpsro",
             f"tie_break {self.tie_break!r} applies to the jpsro oracle, not {self.oracle!r}"),
            (self.prune_by in metaeval.RATERS,
             f"unknown rater {self.prune_by!r} for pruning; choose one of {', '.join(sorted(metaeval.RATERS))}"),
            (self.initial in spiel.KINDS, f"initial must be one of {', '.join(spiel.KINDS)}, got {self.initial!r}"),
            (self.cap is None or (isinstance(self.cap, int) and self.cap >= 1),
             f"cap must be a positive int or None, got {self.cap!r}"),
            (isinstance(self.iterations, int) and self.iterations >= 1,
             f"iterations must be at least 1, got {self.iterations!r}"),
            (isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0,
             f"seed must be a non-negative integer, got {self.seed!r}"),
            (self.mode in MODES, f"mode must be one of {', '.join(MODES)}, got {self.mode!r}"),
            (isinstance(self.workers, int) and self.workers >= 1, f"workers must be at least 1, got {self.workers!r}"),
            (isinstance(self.episodes, int) and self.episodes >= 2,
             f"episodes must be at least 2 (for a standard error), got {self.episodes!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise MetaEvalError(message)
        approximate.check(self)
        check_workers(self.workers, self.address)
        check_limits(self.max_retries, self.shard_timeout)
        object.__setattr__(self, "mode", resolve_mode(self.game, self.mode))

    @property
    def metagame(self) -> str:
        """How the meta-game's entries are obtained ("exact", "sampled, E episodes per entry")."""
        return describe(self.mode, self.episodes)

    def result_settings(self) -> dict:
        """The settings that change results; a resumed run must agree on all of them.

        Returns:
            The settings by name.
        """
        keys = ["game", "solver", "solver_options", "oracle", "seed", "cap", "prune_by", "initial", "mode"]
        if self.oracle in LEARNED_ORACLES:
            keys += ["oracle_episodes", "oracle_target"]
        keys += approximate.result_keys(self)
        if self.mode == "sampled":
            keys.append("episodes")
        keys.append("tie_break")
        return {k: getattr(self, k) for k in keys}


def oracle_name(oracle) -> str:
    """The qualified name of a custom oracle (of its function, for a ``functools.partial``;
    of its class, for a callable object), as a run directory records it."""
    target = oracle.func if isinstance(oracle, functools.partial) else oracle
    if not hasattr(target, "__qualname__"):
        target = type(target)
    return f"{target.__module__}.{target.__qualname__}"


def run_settings(config: PSROConfig, oracle=None) -> tuple[dict, dict]:
    """``(settings, result settings)`` of a run of ``config``, recording a custom ``oracle``
    (which replaces ``config.oracle``) by its qualified name, marked ``custom_oracle``; a run
    directory then resumes only with an oracle of that name, never with a built-in one."""
    settings, result = asdict(config), config.result_settings()
    if oracle is not None:
        settings.update(oracle=oracle_name(oracle), custom_oracle=True)
        result["oracle"] = settings["oracle"]
    return settings, result


class PSRO:
    """A PSRO run that can be stepped, checkpointed and resumed.

    Args:
        config: the run's definition.
        out: run directory; when given, every iteration is logged and checkpointed there,
            and an existing run in it is resumed.
        oracle: any ``oracle(evaluator, player, sigma, rng)`` (see [`metaeval.training.oracles`][metaeval.training.oracles])
            instead of ``config.oracle``, e.g. a learner; recorded by its qualified name
            (`run_settings`).
        tensorboard: a directory for TensorBoard event files of the records (with ``out``;
            [`metaeval.runs.tensorboard`][metaeval.runs.tensorboard]).
    """

    def __init__(self, config: PSROConfig, out: Path | str | None = None, oracle=None,
                 tensorboard: Path | str | None = None):
        self.config = config
        self.tensorboard = tensorboard
        self.settings, self._result_settings = run_settings(config, oracle)
        self.out = None if out is None else Path(out)
        self.run_dir: rundir.RunDirectory | None = None
        if oracle is None and config.mode == "sampled" and config.oracle in ("jpsro", "psro"):
            raise MetaEvalError(
                f"oracle {config.oracle!r} computes exact best responses on the game tree, which sampled mode never "
                "builds: use a search or learned oracle (search, rollout, dqn, ppo), 'random' or your own, or mode 'exact' for a game that can "
                "be enumerated"
            )
        self.rated: spiel.Population | None = None  # the population the last record rates
        if oracle is None and config.oracle in LEARNED_ORACLES:
            oracle = learned(responder_named(config.oracle, config.workers, config.address), config.oracle_episodes,
                             config.oracle_target)
        self.oracle = oracle or ORACLES[config.oracle]
        if oracle is None and config.tie_break != "drawn":
            self.oracle = functools.partial(self.oracle, tie_break=config.tie_break)
        self.game = games.load(config.game)
        initial, loop = np.random.SeedSequence(config.seed).spawn(2)
        self.rng = np.random.default_rng(loop)
        start = np.random.default_rng(initial)
        first = spiel.population.lazy_random_policy if config.mode == "sampled" else spiel.random_policy
        population = spiel.Population(
            self.game, [[first(self.game, p, start, config.initial)] for p in range(self.game.num_players())]
        )
        self.iteration = 0
        self.records: list[dict] = []
        metagame = None
        if self.out is not None:
            resumed = self._open_run_directory()
            if resumed is not None:
                population, metagame = resumed.population, resumed.metagame
        self.evaluator = Evaluator(
            self.game, mode=config.mode, episodes=config.episodes, workers=config.workers,
            address=config.address, seed=config.seed, population=population, metagame=metagame,
            log_dir=self.out, shard_timeout=config.shard_timeout, max_retries=config.max_retries,
        )
        if config.cap is not None:  # pruning starts at the cap: a rater that cannot rate is refused now
            self.evaluator.check_rater(config.prune_by)

    # -- run directory ---------------------------------------------------------------
    def _open_run_directory(self):
        """Check ``self.out`` and resume the run there if its settings agree (writes nothing);
        returns the checkpoint it continues from, if any (see `rundir.RunDirectory.resume`)."""
        self.run_dir = rundir.RunDirectory.open(
            self.out, KIND, settings=self.settings, result_settings=self._result_settings, schema=RECORD_SCHEMA,
            header={"metagame": self.config.metagame}, tensorboard=self.tensorboard,
        )
        self.iteration, resumed = self.run_dir.resume(lambda: checkpoint.load(self.out))
        self.records = self.run_dir.records_before(self.iteration)
        if resumed is None:
            return None
        self.rng.bit_generator.state = resumed.rng_state
        self.rated = resumed.rated
        return resumed

    # -- the loop ------------------------------------------------------------------------
    def step(self) -> dict:
        """One iteration: build, solve, measure, add the oracles' policies, prune to the cap.

        Returns:
            The iteration's record.
        """
        config, evaluator, seconds = self.config, self.evaluator, {}
        clock = time.perf_counter()
        metagame = evaluator.metagame()
        seconds["build"] = time.perf_counter() - clock

        clock = time.perf_counter()
        sigma = evaluator.meta_distribution(config.solver, **config.solver_options)
        seconds["solve"] = time.perf_counter() - clock

        clock = time.perf_counter()
        exact = config.mode == "exact"
        gap = evaluator.gap(sigma) if exact else None
        nash_conv = evaluator.nash_conv() if exact and evaluator.two_player_zero_sum else None
        seconds["gap"] = time.perf_counter() - clock
        clock = time.perf_counter()
        estimate = approximate.estimate(evaluator, sigma, config, self.iteration)
        seconds["approximate_gap"] = time.perf_counter() - clock

        record = {
            "iteration": self.iteration,
            "policy_ids": [list(ids) for ids in evaluator.ids],
            "sizes": list(evaluator.sizes),
            "cce_gap": None if gap is None else float(gap.total),
            "cce_gap_per_player": None if gap is None else [float(g) for g in gap.per_player],
            "nash_conv": nash_conv,
            "exploitability": None if nash_conv is None else nash_conv / 2,
            "meta_value": [float(np.sum(sigma * metagame.payoffs[p])) for p in range(metagame.num_players)],
            "support": int(np.count_nonzero(sigma > SUPPORT_MASS)),
            **approximate.fields(estimate, always=True),
        }

        rated = evaluator.population
        clock = time.perf_counter()
        players = [p for p in range(evaluator.num_players)  # without a gap (sampled), a gain is presumed
                   if config.cap is None or evaluator.sizes[p] < config.cap or gap is None or gap.per_player[p] > NO_GAIN]
        policies = {p: self.oracle(evaluator, p, sigma, self.rng) for p in players}
        record["added"] = [[evaluator.add(p, policies[p])] if p in policies else []
                           for p in range(evaluator.num_players)]
        seconds["oracle"] = time.perf_counter() - clock

        clock = time.perf_counter()
        pruned, keys = [[] for _ in range(evaluator.num_players)], [[] for _ in range(evaluator.num_players)]
        ratings = protected = None
        if config.cap is not None and max(evaluator.sizes) > config.cap:
            grown = evaluator.meta_distribution(config.solver, **config.solver_options)
            support = [[i for i, mass in zip(ids, marginal) if mass > SUPPORT_MASS]
                       for ids, marginal in zip(evaluator.ids, marginals(grown))]
            result = evaluator.prune(config.prune_by, keep=config.cap, rng=self.rng, protect=support)
            pruned, keys, protected = result.removed, result.tie_break_keys, result.protected
            ratings = [r.tolist() for r in result.rating.ratings]
        record.update(pruned=pruned, prune_ratings=ratings, tie_break_keys=keys, protected=protected)
        seconds["prune"] = time.perf_counter() - clock
        seconds["total"] = sum(seconds.values())
        record["seconds"] = seconds
        record["memory"] = memory_usage()

        self.iteration += 1
        self.rated = rated
        if self.run_dir is not None:
            record = self.run_dir.commit(
                record, {"from_iteration": record["iteration"], "versions": build_versions(), "command": sys.argv})
            checkpoint.save(self.out, self.iteration, evaluator.population, evaluator.built_metagame, self.rng, rated,
                            tables=config.mode == "exact")
        self.records.append(record)
        return record

    def run(self, progress: bool | None = None) -> list[dict]:
        """Step until ``config.iterations`` iterations are done; write results and plots.

        Args:
            progress: None (a bar on a terminal), True or False.

        Returns:
            Every iteration's record.
        """
        desc = f"{self.config.game} {self.settings['oracle']} {self.config.solver} seed {self.config.seed}"
        try:
            with Progress(self.config.iterations, desc, "it", progress, done=self.iteration, each=True) as shown:
                for _ in range(self.iteration, self.config.iterations):
                    record = self.step()
                    shown.advance(gap=record["cce_gap"], approximate_gap_at_least=record["approximate_cce_gap"],
                                  size=max(record["sizes"]))
            if self.out is not None:
                self.finish()
        finally:
            if self.run_dir is not None:
                self.run_dir.close()
        return self.records

    def finish(self):
        """The population the last record rates (``population.npz``: the oracles' last
        policies, never rated, are only in the checkpoint), the per-iteration summary
        table and plots (the gap, and the memory per iteration) in the run directory."""
        from metaeval.viz import plots
        from metaeval.runs import reports

        checkpoint.write_results(self.out, self.run_dir, self.records, self.rated, self.evaluator, self.config,
                                 reports.psro_frame)
        title = self.title_of(self.settings)
        plots.plot_psro(self.out, {self.config.solver: self.records}, title=title)
        plots.plot_memory(self.out, self.records, title=title)

    @staticmethod
    def title_of(settings: dict) -> str:
        """The figures' title, from a run's settings (`run_settings`): what the run is, in
        at most two lines (the approximate gap's learner and budget are in the legend).

        Args:
            settings: the run's settings.

        Returns:
            The title.
        """
        cap = "" if settings["cap"] is None else f", cap {settings['cap']} by {settings['prune_by']}"
        ties = "" if settings["tie_break"] == "drawn" else f", {settings['tie_break']} ties"
        oracle = f"custom oracle {settings['oracle']}" if settings.get("custom_oracle") else settings["oracle"]
        if oracle in LEARNED_ORACLES:
            target = ", psro target" if settings["oracle_target"] == "psro" else ""
            oracle += f" oracle ({settings['oracle_episodes']} episodes{target})"
        sampled = (f", sampled ({settings['episodes']} episodes per entry)"
                   if settings.get("mode") == "sampled" else "")
        return f"{settings['game']}, {oracle}{ties}, {settings['solver']}, seed {settings['seed']}{cap}{sampled}"


def psro(config: PSROConfig, out=None, oracle=None, progress: bool | None = None, tensorboard=None) -> list[dict]:
    """Run (or resume, when ``out`` holds a run) PSRO/JPSRO; returns the records.

    Args:
        config: the run's settings.
        out: the run directory; a run already there is resumed (None: nothing written).
        oracle: a custom oracle ``oracle(evaluator, player, sigma, rng) -> policy`` (default:
            ``config.oracle``'s).
        progress: None (a bar on a terminal), True or False.
        tensorboard: a directory for TensorBoard event files of the records (with ``out``).

    Returns:
        Every iteration's record.
    """
    return PSRO(config, out=out, oracle=oracle, tensorboard=tensorboard).run(progress=progress)
