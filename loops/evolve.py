"""The population loop of the maths page, section 5 (Marris et al. 2025, section 5.3).

Each iteration builds the meta-game of the current populations, rates every
player's policies, records the full-game CCE gap of the meta-game's maximum
entropy CCE, and replaces each player's lowest-rated quarter with new policies.

In sampled mode (any game that can be simulated) nothing walks the game tree: the
policies are random ones drawn state by state ([`metaeval.spiel.LazyRandomPolicy`][metaeval.spiel.LazyRandomPolicy]),
a ``new_policy`` hook's objects or networks a DQN or PPO learner trained, and the CCE gap
is not computed (null in the log); ``approximate_gap`` estimates a lower bound on it every
iteration instead ([`metaeval.loops.approximate`][metaeval.loops.approximate]).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import metaeval
from metaeval.runs.progress import Progress
from metaeval import games, spiel
from metaeval.runs import budget
from metaeval.training import oracles
from metaeval.runs import rundir
from metaeval.runs.memory import memory_usage
from metaeval.runs.build import build_versions
from metaeval.distributed.build import check_limits
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT
from metaeval.distributed.session import check_workers
from metaeval.errors import MetaEvalError
from metaeval.training.evaluator import Evaluator
from metaeval.responses import RESPONDERS
from metaeval.responses.gap import responder_named
from metaeval.loops import approximate, checkpoint
from metaeval.training.selection import TIE_DECIMALS, lowest_rated
from metaeval.spiel.mode import MODES, describe, resolve_mode

NewPolicy = Callable[[object, int, np.random.Generator], object]
"""``new_policy(game, player, rng) -> OpenSpiel policy`` for one player's new strategy."""

SUPPORT_MASS = 1e-9
"""Joints with more MECCE mass than this count towards its logged support size."""

TIMING_KEYS = {"seconds"}
"""Diagnostics that vary between identical runs; kept out of the iteration log."""

KIND = "evolve"
"""The run-directory kind of a population run."""

RECORD_SCHEMA = rundir.RecordSchema({
    "policy_ids": rundir.LIST, "ratings": rundir.LIST, "cce_gap": rundir.OPTIONAL_NUMBER,
    "cce_gap_per_player": rundir.OPTIONAL_NUMBERS, "mean_payoff": rundir.NUMBERS, "mecce_payoff": rundir.NUMBERS,
    "mecce_support": rundir.COUNT, "rater_diagnostics": rundir.OBJECT, "discarded": rundir.LIST,
    "added": rundir.LIST, "tie_break_keys": rundir.LIST, "seconds": rundir.OBJECT,
})
"""What every line of an evolve run's ``iterations.jsonl`` holds."""


REPLACEMENTS = ("random", "mutate", "best-response", "learned")
"""What replaces the discarded policies: a random policy (maths, section 5), a perturbed copy of a
top-quarter policy, the exact best response to the MECCE's opponents' joint marginal
(JPSRO's oracle; every replacement of a player is that same policy), or a ``learner``
(Q-learning, DQN or PPO) trained from scratch for ``learner_episodes`` episodes against
that marginal."""


@dataclass(frozen=True)
class EvolveConfig:
    """Everything that defines a population run (written to ``config.json``).

    ``mode="sampled"`` estimates the meta-game from ``episodes`` per entry and never
    builds the game tree (so only random replacements or ones learned by networks, and no
    exact CCE gap: ``approximate_gap`` as in [`metaeval.loops.approximate`][metaeval.loops.approximate]); ``"auto"``
    (the default) becomes ``"exact"`` for a game that can be enumerated and ``"sampled"``
    otherwise, and the config holds the mode it became.
    """

    game: str = "kuhn_3p"
    rater: str = "deviation"
    iterations: int = 100
    population: int = 8
    discard_fraction: float = 0.25
    seed: int = 0
    mode: str = "auto"
    episodes: int = 1000
    workers: int = 1
    address: str | None = None
    shard_timeout: float = SHARD_TIMEOUT
    max_retries: int = MAX_RETRIES
    rater_options: dict = field(default_factory=dict)
    replace: str = "random"
    learner: str = "qlearning"
    learner_episodes: int = 2000
    mutation_scale: float = 0.25
    approximate_gap: int = 0
    approximate_gap_learner: str = "ppo"
    approximate_gap_episodes: int = 2000

    def __post_init__(self):
        if self.replace not in REPLACEMENTS:
            raise MetaEvalError(f"unknown replacement {self.replace!r}; choose one of {', '.join(REPLACEMENTS)}")
        if self.learner not in RESPONDERS:
            raise MetaEvalError(f"unknown learner {self.learner!r}; choose one of {', '.join(RESPONDERS)}")
        approximate.check(self)
        if not 0 <= self.mutation_scale <= 1:
            raise MetaEvalError(f"mutation scale must lie in [0, 1], got {self.mutation_scale}")
        if self.learner_episodes < 1:
            raise MetaEvalError(f"learner episodes must be at least 1, got {self.learner_episodes}")
        if self.population < 4:
            raise MetaEvalError(f"population must be at least 4 per player, got {self.population}")
        if not 0 < self.discard_fraction < 1:
            raise MetaEvalError(
                f"discard fraction must lie strictly between 0 and 1, got {self.discard_fraction}"
            )
        if self.iterations < 1:
            raise MetaEvalError(f"iterations must be at least 1, got {self.iterations}")
        if self.workers < 1:
            raise MetaEvalError(f"workers must be at least 1, got {self.workers}")
        check_workers(self.workers, self.address)
        check_limits(self.max_retries, self.shard_timeout)
        if self.mode not in MODES:
            raise MetaEvalError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.episodes < 2:
            raise MetaEvalError(f"episodes must be at least 2 (for a standard error), got {self.episodes}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise MetaEvalError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.rater_options, dict):
            raise MetaEvalError(f"rater_options must be a dict, got {self.rater_options!r}")
        metaeval.ratings.check_options(self.rater, self.rater_options)
        object.__setattr__(self, "mode", resolve_mode(self.game, self.mode))
        if self.mode == "sampled" and self.replace != "random" and not self.learned_by_network:
            raise MetaEvalError(
                f"replace {self.replace!r} works on tables over the game tree, which sampled mode never builds: "
                "use replace 'random' (or a new_policy hook), 'learned' with learner dqn or ppo, or mode 'exact' "
                "for a game that can be enumerated"
            )

    @property
    def learned_by_network(self) -> bool:
        """Whether replacements are networks a learner trained (no tree walk)."""
        return self.replace == "learned" and self.learner != "qlearning"

    @property
    def metagame(self) -> str:
        """How the meta-game's entries are obtained ("exact", "sampled, E episodes per entry")."""
        return describe(self.mode, self.episodes)

    def result_settings(self) -> dict:
        """The settings that change results; a resumed run must agree on all of them.

        Returns:
            The settings by name.
        """
        keys = ["game", "rater", "rater_options", "population", "discard_fraction", "seed", "mode"]
        if self.mode == "sampled":
            keys.append("episodes")
        keys.append("replace")
        keys += {"learned": ["learner_episodes"], "mutate": ["mutation_scale"]}.get(self.replace, [])
        keys += ["learner"] if self.learned_by_network else []  # Q-learning, the first learner, is not recorded
        keys += approximate.result_keys(self)
        return {k: getattr(self, k) for k in keys}

    @property
    def discard_count(self) -> int:
        """How many policies each player loses per iteration (at least 1, at most K - 1)."""
        return min(self.population - 1, max(1, math.floor(self.population * self.discard_fraction)))


def mecce_fields(metagame, sigma, gap) -> dict:
    """A loop record's equilibrium fields: the full-game CCE gap of the meta-game's MECCE
    ``sigma`` (total, per player; None when ``gap`` is, as in sampled mode), the population's
    mean payoff and sigma's payoff per player, and sigma's support size."""
    players = range(metagame.num_players)
    return {
        "cce_gap": None if gap is None else float(gap.total),
        "cce_gap_per_player": None if gap is None else [float(g) for g in gap.per_player],
        "mean_payoff": [float(metagame.payoffs[p].mean()) for p in players],
        "mecce_payoff": [float(np.sum(sigma * metagame.payoffs[p])) for p in players],
        "mecce_support": int(np.count_nonzero(sigma > SUPPORT_MASS)),
    }


def random_new_policy(game, player: int, rng: np.random.Generator):
    """The default replacement: a random stochastic tabular policy (maths, section 3).

    Args:
        game: the game.
        player: the player.
        rng: the generator of the draw.

    Returns:
        The policy.
    """
    return spiel.random_policy(game, player, rng)


def lazy_new_policy(game, player: int, rng: np.random.Generator):
    """The default replacement in sampled mode: the same law, drawn state by state (no tree).

    Args:
        game: the game.
        player: the player.
        rng: the generator of the draw.

    Returns:
        The policy.
    """
    return spiel.population.lazy_random_policy(game, player, rng)


def _scalars(diagnostics: dict) -> dict:
    """The JSON-friendly, reproducible scalar part of a rater's diagnostics."""
    keep = {}
    for key, value in diagnostics.items():
        if key in TIMING_KEYS:
            continue
        if isinstance(value, (bool, int, float, str, np.integer, np.floating)):
            keep[key] = value.item() if isinstance(value, np.generic) else value
    return keep


def check_population(population: int, num_players: int, loop: str) -> None:
    """Refuse, before any policy is made, a population whose meta-game and CCE constraints
    (N + K N floats per joint of K policies per player) exceed the memory budget."""
    budget.check_joints([population] * num_players, num_players + population * num_players,
                        f"{loop}'s meta-game and CCE constraints")


class Evolution:
    """A population run that can be stepped, checkpointed and resumed.

    Args:
        config: the run's definition.
        out: run directory; when given, every iteration is logged and checkpointed
            there, and an existing run in it is resumed.
        new_policy: ``new_policy(game, player, rng)`` supplying replacements (a
            training loop's hook, for ``replace="random"``); default: random stochastic
            tabular policies.
        tensorboard: a directory for TensorBoard event files of the records (with ``out``;
            [`metaeval.runs.tensorboard`][metaeval.runs.tensorboard]).
    """

    def __init__(self, config: EvolveConfig, out: Path | str | None = None,
                 new_policy: NewPolicy | None = None, tensorboard: Path | str | None = None):
        self.config = config
        self.out = None if out is None else Path(out)
        self.tensorboard = tensorboard
        if new_policy is not None and config.replace != "random":
            raise MetaEvalError(f"a new_policy hook replaces random policies; it cannot go with replace={config.replace!r}")
        self.new_policy = new_policy or (lazy_new_policy if config.mode == "sampled" else random_new_policy)
        self.game = games.load(config.game)
        self.records: list[dict] = []
        # Independent streams: the initial population, and the loop (tie-breaks, new policies).
        initial, loop = np.random.SeedSequence(config.seed).spawn(2)
        self.rng = np.random.default_rng(loop)
        num_players = self.game.num_players()
        check_population(config.population, num_players, "the population loop")
        self.evaluator = self._evaluator(spiel.Population.random(
            self.game, config.population, seed=int(initial.generate_state(1)[0]), lazy=config.mode == "sampled"
        ))
        self.iteration = 0
        self.rated: spiel.Population | None = None  # the population the last record rates
        self.run_dir: rundir.RunDirectory | None = None
        if self.out is not None:
            self._open_run_directory()

    def close(self) -> None:
        """Release the run directory ([`run`][metaeval.loops.evolve.Evolution.run] does at its end)."""
        if self.run_dir is not None:
            self.run_dir.close()

    def _evaluator(self, population, metagame=None) -> Evaluator:
        """The Evaluator of ``population``; ``metagame``: its last meta-game, for incremental builds."""
        config = self.config
        return Evaluator(self.game, mode=config.mode, episodes=config.episodes, workers=config.workers,
                         address=config.address, seed=config.seed, population=population,
                         metagame=metagame, log_dir=self.out, shard_timeout=config.shard_timeout,
                         max_retries=config.max_retries)

    @property
    def population(self) -> spiel.Population:
        return self.evaluator.population

    # -- run directory ---------------------------------------------------------
    def _open_run_directory(self):
        """Check ``self.out`` and resume the run there if its settings agree; writes nothing."""
        header = {"metagame": self.config.metagame,
                  "tie_break": f"lowest ratings rounded to {TIE_DECIMALS} decimals; ties by seeded uniform keys",
                  "random_streams": "the loop's stream depends on the seed alone, so runs with one seed "
                                    "draw the same replacement policies whatever the rater (common random numbers)"}
        self.run_dir = rundir.RunDirectory.open(
            self.out, KIND, settings=asdict(self.config), result_settings=self.config.result_settings(),
            schema=RECORD_SCHEMA, header=header, tensorboard=self.tensorboard,
        )
        self._resume()

    def _resume(self):
        """Continue from the checkpoint if it is intact and the log holds every record before
        it, else from iteration 0 (`metaeval.runs.rundir.RunDirectory.resume`)."""
        start, state = self.run_dir.resume(lambda: checkpoint.load(self.out))
        if start:
            self.iteration, self.rated = start, state.rated
            self.rng.bit_generator.state = state.rng_state
            self.evaluator = self._evaluator(state.population, state.metagame)
        self.records = self.run_dir.records_before(start)

    def _commit(self, record: dict) -> dict:
        """Log ``record`` (or check it against the one already logged, which is kept) and
        checkpoint; returns the record as logged."""
        logged = self.run_dir.commit(
            record, {"from_iteration": record["iteration"], "versions": build_versions(), "command": sys.argv})
        checkpoint.save(self.out, self.iteration, self.population, self.evaluator.built_metagame, self.rng,
                        self.rated, tables=self.config.mode == "exact")
        return logged

    # -- the loop ----------------------------------------------------------------
    def step(self) -> dict:
        """One iteration of the loop (maths, section 5): build, rate, measure the gap, replace the bottom quarter.

        Returns:
            The iteration's record.
        """
        config, evaluator, seconds = self.config, self.evaluator, {}
        if self.run_dir is not None:
            self.run_dir.begin()
        clock = time.perf_counter()
        metagame = evaluator.metagame()
        seconds["build"] = time.perf_counter() - clock

        clock = time.perf_counter()
        rating = evaluator.rate(config.rater, **config.rater_options)
        seconds["rate"] = time.perf_counter() - clock

        clock = time.perf_counter()
        sigma = evaluator.meta_distribution("mecce")
        seconds["solve"] = time.perf_counter() - clock

        clock = time.perf_counter()
        gap = evaluator.gap(sigma) if config.mode == "exact" else None
        seconds["gap"] = time.perf_counter() - clock
        clock = time.perf_counter()
        estimate = approximate.estimate(evaluator, sigma, config, self.iteration)
        if estimate is not None:
            seconds["approximate_gap"] = time.perf_counter() - clock

        record = {
            "iteration": self.iteration,
            "policy_ids": [list(map(int, ids)) for ids in evaluator.ids],
            "ratings": [r.tolist() for r in rating.ratings],
            **mecce_fields(metagame, sigma, gap),
            "rater_diagnostics": _scalars(rating.diagnostics),
        }
        record.update(approximate.fields(estimate))

        self.rated = evaluator.population
        clock = time.perf_counter()
        oracle = self._oracle(rating)
        discarded, replacements, keys = [], [], []
        for player in range(self.game.num_players()):  # every oracle sees the rated population
            lowest, tie_keys = lowest_rated(rating.ratings[player], config.discard_count, self.rng)
            discarded.append([int(evaluator.ids[player][i]) for i in lowest])
            replacements.append([oracle(evaluator, player, sigma, self.rng) for _ in lowest])
            keys.append(tie_keys.tolist())
        added = [evaluator.replace(p, ids, new) for p, (ids, new) in enumerate(zip(discarded, replacements))]
        seconds["replace"] = time.perf_counter() - clock
        seconds["total"] = sum(seconds.values())
        record.update(discarded=discarded, added=added, tie_break_keys=keys, seconds=seconds,
                      memory=memory_usage())

        self.iteration += 1
        if self.run_dir is not None:
            record = self._commit(record)
        self.records.append(record)
        return record

    def _oracle(self, rating):
        """The oracle of ``config.replace`` (signature of [`metaeval.training.oracles`][metaeval.training.oracles])."""
        replace = self.config.replace
        if replace == "random":
            return oracles.from_new_policy(self.new_policy)
        if replace == "mutate":
            return oracles.mutate(rating, self.config.discard_fraction, self.config.mutation_scale)
        if replace == "best-response":
            return oracles.jpsro
        return oracles.learned(responder_named(self.config.learner, self.config.workers, self.config.address),
                               self.config.learner_episodes)

    def run(self, progress: bool | None = None) -> list[dict]:
        """Step until ``config.iterations`` iterations are done; write results and plots.

        Args:
            progress: None (a bar on a terminal), True or False.

        Returns:
            Every iteration's record.
        """
        desc = f"{self.config.game} {self.config.rater} seed {self.config.seed}"
        try:
            with Progress(self.config.iterations, desc, "it", progress, done=self.iteration, each=True) as shown:
                for _ in range(self.iteration, self.config.iterations):
                    record = self.step()
                    shown.advance(gap=record["cce_gap"], approximate_gap_at_least=record.get("approximate_cce_gap"))
            if self.run_dir is not None:
                self.finish()
        except BaseException:
            if self.run_dir is not None:
                self.run_dir.discard_if_unused()
            raise
        finally:
            self.close()
        return self.records

    def finish(self):
        """Final population, per-iteration summary table and plots in the run directory."""
        from metaeval.viz import plots
        from metaeval.runs import reports

        self.run_dir.begin()
        config = self.config
        checkpoint.write_results(self.out, self.run_dir, self.records, self.rated, self.evaluator, config,
                                 reports.summary_frame)
        plots.plot_run(self.out, self.records, label=config.rater, seed=config.seed, title=title_of(config))


def title_of(config: EvolveConfig) -> str:
    """A run's plot title; it says how the meta-game was obtained when it was sampled."""
    sampled = f", meta-game {config.metagame}" if config.mode == "sampled" else ""
    return f"{config.game}, {config.rater}, seed {config.seed}{sampled}"


def evolve(config: EvolveConfig, out=None, new_policy: NewPolicy | None = None,
           progress: bool | None = None, tensorboard=None) -> list[dict]:
    """Run (or resume, when ``out`` holds a run) the population loop; returns the records.

    Args:
        config: the run's settings.
        out: the run directory; a run already there is resumed (None: nothing written).
        new_policy: the replacement hook (default: [`random_new_policy`][metaeval.loops.evolve.random_new_policy],
            or [`lazy_new_policy`][metaeval.loops.evolve.lazy_new_policy] in sampled mode).
        progress: None (a bar on a terminal), True or False.
        tensorboard: a directory for TensorBoard event files of the records (with ``out``).

    Returns:
        Every iteration's record.
    """
    return Evolution(config, out=out, new_policy=new_policy, tensorboard=tensorboard).run(progress=progress)
