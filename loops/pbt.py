"""Population-based training with metaeval as selector and matchmaker.

Every player has ``population`` members; a member is a learner with its hyper-parameters
and what it learns ([`metaeval.training.members.Member`][metaeval.training.members.Member]: a Q-learner's value table, or
a DQN's or PPO's network weights), and its policy is held in a [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator].
One *step* (Jaderberg et al. 2017, section 3):

1. every member draws its opponents by the matchmaking rule
   ([`metaeval.Evaluator.opponents`][metaeval.training.evaluator.Evaluator.opponents], member by member, on the population as it
   stood at the start of the step) and trains for ``episodes_per_step`` episodes;
2. the trained policies replace the old ones; the step's record holds the full-game CCE
   gap of the meta-game's MECCE and the population's average payoff, as in ``evolve``;
3. every ``interval`` steps the rater rates the meta-game and each player's
   lowest-rated quarter is replaced (exploit) by copies of members drawn uniformly from
   its top-rated quarter, perturbed (explore, [`metaeval.training.members.exploit_and_explore`][metaeval.training.members.exploit_and_explore]:
   the copied weights with perturbed hyper-parameters, or the copied values with noise).

Members start from perturbed all-zero values, or from fresh weights with hyper-parameters
drawn around the learner's (so they differ). Each member's training at
step t draws from its own generator ``SeedSequence(seed, spawn_key=(t, player, index))``,
so results do not depend on ``workers``; tie-breaks and exploit/explore draw from the
loop's generator, which is checkpointed. With ``workers > 1`` members train in parallel
as Ray tasks, and the meta-game is built on as many Ray actors.

``mode="sampled"`` (what ``"auto"`` picks for a game exact mode refuses) estimates the
meta-game from ``episodes`` per entry; the CCE gap is then not computed (null in the log),
but ``approximate_gap`` estimates a lower bound on it every step
([`metaeval.loops.approximate`][metaeval.loops.approximate]). Q-learning keeps a table over the game's information
states (the game must be enumerable); DQN and PPO never walk the tree, so with them PBT
runs on any game that can be simulated.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import metaeval
from metaeval.runs.progress import Progress
from metaeval import games, spiel
from metaeval.runs import checksums, rundir
from metaeval.runs.memory import memory_usage
from metaeval.runs.build import build_versions
from metaeval.distributed.build import check_limits
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT
from metaeval.distributed.session import check_workers
from metaeval.errors import DamagedFileError, MetaEvalError
from metaeval.training.evaluator import Evaluator
from metaeval.training import members
from metaeval.responses import LEARNED, Opponents
from metaeval.loops import approximate, checkpoint
from metaeval.loops.evolve import _scalars, check_population, mecce_fields
from metaeval.training.matchmaking import RULES
from metaeval.training.meta_solvers import SOLVERS
from metaeval.training.selection import rank_order
from metaeval.spiel.mode import MODES, describe, resolve_mode
from metaeval.spiel.tree import game_tree

KIND = "pbt"
"""The run-directory kind of a PBT run."""

RATED = "rated.npz"
"""A checkpoint's file of the population the last record rates."""

VALUES = "values.npz"
"""A checkpoint's file of the members' values (Q-tables or network weights)."""

RECORD_SCHEMA = rundir.RecordSchema({
    "policy_ids": rundir.LIST, "cce_gap": rundir.OPTIONAL_NUMBER, "cce_gap_per_player": rundir.OPTIONAL_NUMBERS,
    "mean_payoff": rundir.NUMBERS, "mecce_payoff": rundir.NUMBERS, "mecce_support": rundir.COUNT,
    "seconds": rundir.OBJECT,
})
"""What every line of a PBT run's ``iterations.jsonl`` holds."""


@dataclass(frozen=True)
class PBTConfig:
    """Everything that defines a PBT run (written to ``config.json``)."""

    game: str = "kuhn_3p"
    rater: str = "deviation"
    learner: str = "qlearning"
    matchmaking: str = "mecce"
    steps: int = 30
    interval: int = 2
    population: int = 8
    episodes_per_step: int = 2000
    discard_fraction: float = 0.25
    mutation_scale: float = 0.25
    seed: int = 0
    workers: int = 1
    address: str | None = None
    shard_timeout: float = SHARD_TIMEOUT
    max_retries: int = MAX_RETRIES
    rater_options: dict = field(default_factory=dict)
    learner_options: dict = field(default_factory=dict)
    mode: str = "auto"
    episodes: int = 1000
    approximate_gap: int = 0
    approximate_gap_learner: str = "ppo"
    approximate_gap_episodes: int = 2000

    def __post_init__(self):
        if self.rater not in metaeval.RATERS:
            raise MetaEvalError(f"unknown rater {self.rater!r}; choose one of {', '.join(sorted(metaeval.RATERS))}")
        if self.learner not in LEARNED:
            raise MetaEvalError(f"unknown learner {self.learner!r}; choose one of {', '.join(LEARNED)}")
        rules = sorted({*RULES, *SOLVERS} - {"conditional"})
        if self.matchmaking not in rules:
            raise MetaEvalError(f"unknown matchmaking rule {self.matchmaking!r}; choose one of {', '.join(rules)}")
        for name in ("steps", "interval", "episodes_per_step", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MetaEvalError(f"{name.replace('_', ' ')} must be a positive int, got {value!r}")
        check_workers(self.workers, self.address)
        check_limits(self.max_retries, self.shard_timeout)
        if self.population < 4:
            raise MetaEvalError(f"population must be at least 4 per player, got {self.population}")
        if not 0 < self.discard_fraction < 1:
            raise MetaEvalError(f"discard fraction must lie strictly between 0 and 1, got {self.discard_fraction}")
        if not 0 <= self.mutation_scale <= 1:
            raise MetaEvalError(f"mutation scale must lie in [0, 1], got {self.mutation_scale}")
        if self.learner != "qlearning" and self.mutation_scale == 1:
            raise MetaEvalError(f"mutation scale must lie in [0, 1) for {self.learner}: it scales hyper-parameters "
                                "by 1 - scale or 1 + scale")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise MetaEvalError(f"seed must be a non-negative integer, got {self.seed!r}")
        self.make_learner()  # validates the learner's options
        if self.mode not in MODES:
            raise MetaEvalError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if isinstance(self.episodes, bool) or not isinstance(self.episodes, int) or self.episodes < 2:
            raise MetaEvalError(f"episodes must be at least 2 (for a standard error), got {self.episodes!r}")
        approximate.check(self)
        object.__setattr__(self, "mode", resolve_mode(self.game, self.mode))

    @property
    def metagame(self) -> str:
        """How the meta-game's entries are obtained ("exact", "sampled, E episodes per entry")."""
        return describe(self.mode, self.episodes)

    def make_learner(self):
        try:
            return LEARNED[self.learner](**self.learner_options)
        except TypeError as exc:
            raise MetaEvalError(f"bad options for learner {self.learner!r}: {exc}") from None

    def result_settings(self) -> dict:
        """The settings that change results; a resumed run must agree on all of them (the mode
        and episodes only in sampled mode, the approximate gap's only when it is on, so runs
        made before they existed still resume).

        Returns:
            The settings by name.
        """
        skip = {"steps", "workers", "address", "shard_timeout", "max_retries", *(("mode", "episodes") if self.mode == "exact" else ()),
                *(() if self.approximate_gap else approximate.SETTINGS)}
        return {k: v for k, v in asdict(self).items() if k not in skip}

    @property
    def replace_count(self) -> int:
        """Members replaced per player at each exploit (at least 1, at most K - 1)."""
        return min(self.population - 1, max(1, math.floor(self.population * self.discard_fraction)))


@dataclass(frozen=True)
class Resumed:
    """What a PBT run continues from: its checkpoint, loaded."""

    next_iteration: int
    evaluator: Evaluator
    rated: spiel.Population
    members: list[list[members.Member]]
    rng_state: dict


def member_rng(seed: int, step: int, player: int, index: int) -> np.random.Generator:
    """The generator of one member's training at one step (independent of the workers)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(step, player, index)))


def _train(task: tuple) -> np.ndarray:
    """One member's training (module level, so that Ray can ship it)."""
    learner, game_string, player, opponents, episodes, rng, values = task
    return learner.train(games.load(game_string), player, opponents, episodes, rng, values=values)


class PBT:
    """A PBT run that can be stepped, checkpointed and resumed (see the module docstring).

    Args:
        config: the run's definition.
        out: run directory; when given, every step is logged and checkpointed there, and
            an existing run in it is resumed.
        tensorboard: a directory for TensorBoard event files of the records (with ``out``;
            [`metaeval.runs.tensorboard`][metaeval.runs.tensorboard]).
    """

    def __init__(self, config: PBTConfig, out: Path | str | None = None, tensorboard: Path | str | None = None):
        self.config = config
        self.tensorboard = tensorboard
        self.learner = config.make_learner()
        self.out = None if out is None else Path(out)
        self.run_dir: rundir.RunDirectory | None = None
        self.game = games.load(config.game)
        num_players = self.game.num_players()
        self.layouts = game_tree(self.game).players if config.learner == "qlearning" else [None] * num_players
        initial, loop = np.random.SeedSequence(config.seed).spawn(2)
        self.rng = np.random.default_rng(loop)
        check_population(config.population, num_players, "the PBT population")
        self.evaluator = Evaluator(self.game, mode=config.mode, episodes=config.episodes, workers=config.workers,
                                   address=config.address, seed=config.seed, log_dir=self.out,
                                   shard_timeout=config.shard_timeout, max_retries=config.max_retries)
        start = np.random.default_rng(initial)
        self.members = [[members.first(self.learner, self.game, p, start, config.mutation_scale, layout)
                         for _ in range(config.population)] for p, layout in enumerate(self.layouts)]
        for p, player in enumerate(self.members):
            for member in player:
                self.evaluator.add(p, member.policy(self.game, p))
        self.step_index = 0
        self.records: list[dict] = []
        self.rated = None  # the population the last record rates
        self.evaluator.check_rater(config.rater, **config.rater_options)  # before anything is written
        if self.out is not None:
            self._open_run_directory()

    # -- run directory ---------------------------------------------------------
    def _open_run_directory(self):
        """Check ``self.out`` and resume the run there if its settings agree; writes nothing."""
        self.run_dir = rundir.RunDirectory.open(
            self.out, KIND, settings=asdict(self.config), result_settings=self.config.result_settings(),
            schema=RECORD_SCHEMA, header={"metagame": self.config.metagame}, tensorboard=self.tensorboard,
        )
        if self.run_dir.exists:
            self._resume()

    def _checkpoint(self):
        directory = self.out / f"checkpoint-{self.step_index:06d}"
        if directory.exists():
            shutil.rmtree(directory)
        self.evaluator.save(directory)
        self.rated.save(directory / RATED, tables=self.config.mode == "exact")
        members.save(directory / VALUES, self.members)
        hyperparameters = [[member.hyperparameters() for member in player] for player in self.members]
        files = [f"{directory.name}/{path.name}" for path in directory.iterdir()]
        rundir.write_json(self.out / rundir.STATE, {"next_step": self.step_index, "directory": directory.name,
                                                    "rng": self.rng.bit_generator.state,
                                                    "hyperparameters": hyperparameters,
                                                    "checksums": checksums.of_files(self.out, files)})
        for old in self.out.glob("checkpoint-*"):
            if old.name != directory.name:
                shutil.rmtree(old)

    def _resume(self):
        """Continue from the checkpoint if it is intact and the log holds every record before
        it, else from step 0 (`metaeval.runs.rundir.RunDirectory.resume`)."""
        self.step_index, resumed = self.run_dir.resume(self._load_checkpoint)
        if resumed is not None:
            self.evaluator, self.rated, self.members = resumed.evaluator, resumed.rated, resumed.members
            self.rng.bit_generator.state = resumed.rng_state
        self.records = self.run_dir.records_before(self.step_index)

    def _load_checkpoint(self) -> Resumed | None:
        """The checkpoint in ``self.out`` (None before the first one), or a
        [`DamagedFileError`][metaeval.errors.DamagedFileError] naming the file at fault."""
        path = self.out / rundir.STATE
        if not path.exists():  # killed before the first checkpoint
            return None
        state = rundir.read_json(path, sealed=True)
        try:
            directory = self.out / state["directory"]
            learners = [[type(self.learner)(**settings) for settings in player] for player in state["hyperparameters"]]
            next_step, rng_state = int(state["next_step"]), state["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedFileError(f"{path} does not describe a checkpoint ({exc!r})") from None
        checksums.verify(self.out, state.get("checksums"), path)
        evaluator = Evaluator.load(directory, workers=self.config.workers, address=self.config.address,
                                   shard_timeout=self.config.shard_timeout, max_retries=self.config.max_retries)
        evaluator.log_dir = self.out
        return Resumed(next_step, evaluator, spiel.Population.load(directory / RATED),
                       members.load(directory / VALUES, learners), rng_state)

    # -- the loop ----------------------------------------------------------------
    def _tasks(self) -> list[tuple]:
        """One training task per member, against opponents matched on the current population."""
        ev, config = self.evaluator, self.config
        policies = ev.population.policies  # objects for the networks; Q-learning reads tables faster
        if config.learner == "qlearning":
            policies = [[policy.action_probability_array for policy in player] for player in policies]
        tasks = []
        for p in range(self.game.num_players()):
            for index, policy_id in enumerate(ev.ids[p]):
                distribution = ev.opponents(p, config.matchmaking, member=policy_id)
                opponents = Opponents.from_distribution(policies, p, distribution)
                member = self.members[p][index]
                tasks.append((member.learner, str(self.game), p, opponents, config.episodes_per_step,
                              member_rng(config.seed, self.step_index, p, index), member.values))
        return tasks

    def _run_tasks(self, tasks: list[tuple]) -> list:
        config = self.config
        if config.workers == 1 and config.address is None:
            return [_train(task) for task in tasks]
        import ray

        from metaeval.distributed.build import release_idle_pool
        from metaeval.distributed.session import ensure_ray

        ensure_ray(config.address, num_cpus=config.workers, log_dir=self.out, workers=config.workers)
        release_idle_pool()
        remote = ray.remote(num_cpus=1)(_train)
        return ray.get([remote.remote(task) for task in tasks])

    def step(self) -> dict:
        """One training step, and an exploit/explore round every ``interval`` steps.

        Returns:
            The step's record.
        """
        config, ev, seconds = self.config, self.evaluator, {}
        clock = time.perf_counter()
        trained = self._run_tasks(self._tasks())
        for p, player in enumerate(self.members):
            values = trained[p * config.population:(p + 1) * config.population]
            self.members[p] = [members.Member(member.learner, v) for member, v in zip(player, values)]
            ev.replace(p, list(ev.ids[p]), [member.policy(self.game, p) for member in self.members[p]])
        seconds["train"] = time.perf_counter() - clock

        clock = time.perf_counter()
        rated = ev.population
        metagame = ev.metagame()
        sigma = ev.meta_distribution("mecce")
        gap = ev.gap(sigma) if config.mode == "exact" else None
        seconds["gap"] = time.perf_counter() - clock
        clock = time.perf_counter()
        estimate = approximate.estimate(ev, sigma, config, self.step_index)
        if estimate is not None:
            seconds["approximate_gap"] = time.perf_counter() - clock
        record = {
            "iteration": self.step_index,
            "policy_ids": [list(map(int, ids)) for ids in ev.ids],
            **mecce_fields(metagame, sigma, gap),
            **approximate.fields(estimate),
        }
        explored = members.EXPLORED.get(type(self.learner).__name__)
        if explored:  # the hyper-parameters each member trained with
            record["hyperparameters"] = [[{name: getattr(m.learner, name) for name in explored} for m in player]
                                         for player in self.members]
        if (self.step_index + 1) % config.interval == 0:
            clock = time.perf_counter()
            record.update(self._exploit_and_explore())
            seconds["exploit"] = time.perf_counter() - clock
        seconds["total"] = sum(seconds.values())
        record["seconds"] = seconds
        record["memory"] = memory_usage()

        self.step_index += 1
        self.rated = rated
        if self.run_dir is not None:
            record = self.run_dir.commit(
                record, {"from_step": record["iteration"], "versions": build_versions(), "command": sys.argv})
            self._checkpoint()
        self.records.append(record)
        return record

    def _exploit_and_explore(self) -> dict:
        """Replace each player's lowest-rated quarter by perturbed copies of its top quarter."""
        config, ev = self.config, self.evaluator
        rating = ev.rate(config.rater, **config.rater_options)
        count = config.replace_count
        replaced, parents, added, keys = [], [], [], []
        for p, ratings in enumerate(rating.ratings):
            order, tie_keys = rank_order(ratings, self.rng)
            lowest, top = np.sort(order[:count]), order[::-1][:count]
            chosen = top[self.rng.integers(len(top), size=count)]
            ids = list(ev.ids[p])
            for low, parent in zip(lowest, chosen):
                self.members[p][low] = members.exploit_and_explore(self.members[p][parent], self.rng,
                                                                   config.mutation_scale, self.layouts[p])
            replaced.append([ids[i] for i in lowest])
            parents.append([ids[i] for i in chosen])
            added.append(ev.replace(p, replaced[-1], [self.members[p][i].policy(self.game, p) for i in lowest]))
            keys.append(tie_keys.tolist())
        return {"ratings": [r.tolist() for r in rating.ratings], "rater_diagnostics": _scalars(rating.diagnostics),
                "discarded": replaced, "parents": parents, "added": added, "tie_break_keys": keys}

    def run(self, progress: bool | None = None) -> list[dict]:
        """Step until ``config.steps`` steps are done; write results and plots.

        Args:
            progress: None (a bar on a terminal), True or False.

        Returns:
            Every step's record.
        """
        desc = f"pbt {self.config.game} {self.config.rater} seed {self.config.seed}"
        try:
            with Progress(self.config.steps, desc, "step", progress, done=self.step_index, each=True) as shown:
                for _ in range(self.step_index, self.config.steps):
                    record = self.step()
                    shown.advance(gap=record["cce_gap"], approximate_gap_at_least=record.get("approximate_cce_gap"))
            if self.out is not None:
                self.finish()
        finally:
            if self.run_dir is not None:
                self.run_dir.close()
        return self.records

    def finish(self):
        """The population the last record rates (``population.npz``: after training, before
        that step's exploit), the per-step summary table and plots in the run directory."""
        from metaeval.runs import reports

        config = self.config
        checkpoint.write_results(self.out, self.run_dir, self.records, self.rated, self.evaluator, config,
                                 reports.summary_frame)
        plot(self.out, config, self.records)


def plot(out: Path, config: PBTConfig, records: list[dict]) -> list[Path]:
    """The CCE-gap and payoff figures of a PBT run in ``out`` (titled with how its meta-game was made)."""
    from metaeval.viz import plots

    suffix = f", meta-game {config.metagame}" if config.mode == "sampled" else ""
    return plots.plot_run(out, records, label=f"pbt, {config.rater}", seed=config.seed, unit="step",
                          title=f"{config.game}, PBT ({config.learner}), {config.rater}, seed {config.seed}{suffix}")


def pbt(config: PBTConfig, out=None, progress: bool | None = None, tensorboard=None) -> list[dict]:
    """Run (or resume, when ``out`` holds a run) population-based training; returns the records.

    Args:
        config: the run's settings.
        out: the run directory; a run already there is resumed (None: nothing written).
        progress: None (a bar on a terminal), True or False.
        tensorboard: a directory for TensorBoard event files of the records (with ``out``).

    Returns:
        Every step's record.
    """
    return PBT(config, out=out, tensorboard=tensorboard).run(progress=progress)
