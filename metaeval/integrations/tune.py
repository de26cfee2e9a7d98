"""Ray Tune's population-based training (PBT, PB2) with a game-theoretic fitness.

Tune's ``PopulationBasedTraining`` and ``PB2`` exploit and explore on one scalar per trial.
Here that scalar is the trial's rating in the population of all trials' current policies:

- [`shared_evaluator`][metaeval.integrations.tune.shared_evaluator] starts, once per experiment, one named Ray actor
  ([`SharedEvaluator`][metaeval.integrations.tune.SharedEvaluator]) holding a [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator] whose
  population has one policy per trial and player (a *slot* per trial, in the order of the
  trials' ids).
- Each trial, after each training iteration, reports its policies with
  [`TrialLink.report`][metaeval.integrations.tune.TrialLink.report]. A *round* completes when every trial has reported it:
  the Evaluator snapshots the policies (tables in exact mode, copies in sampled mode: never
  the trial's live objects; each named by a hash of its content), builds the meta-game,
  rates it, and answers each trial with flat keys Tune's schedulers read unchanged:
  ``metaeval_rating`` (the trial's rating averaged over the players it plays), and when
  asked ``metaeval_rank`` (1 for the highest-rated trial), ``approximate_cce_gap`` (a lower
  bound on the population's CCE gap, learned) and ``exploitability`` (2-player zero-sum
  games walked exactly: of the meta-Nash mixture); always ``pool_win_rate``, the trial's
  payoff against the other player's whole population rescaled from the game's payoff range
  to [0, 1] (its win probability in a +1/-1 game), the fitness self-play loops use when they
  have nothing better.
- [`TrialLink.opponents`][metaeval.integrations.tune.TrialLink.opponents] gives a trial the opponents of its next iteration, drawn
  from the round's population by a matchmaking rule (uniform, pfsp, or a meta-solver's).
- [`ppo_trainable`][metaeval.integrations.tune.ppo_trainable] is a ready function trainable: one metaeval PPO learner per
  player, checkpointed through Tune's checkpoint API, so PBT's exploit copies it.

Rounds are barriers, so a round's population and meta-game do not depend on the order in
which trials report. After each round the actor saves its state in its directory (best in
the experiment's directory); a Tune experiment restored after its driver was killed starts
the actor again with [`shared_evaluator`][metaeval.integrations.tune.shared_evaluator], which reloads every round, and a trial
that repeats a round already recorded gets the recorded answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.runs import rundir


METRIC = "metaeval_rating"
"""The key of a trial's rating in its results: the metric to give Tune's scheduler."""

POOL_METRIC = "pool_win_rate"
"""The key of a trial's rescaled payoff against the other player's population."""

ROUND = "metaeval_round"
"""The key of the round a result answers: the clock to give Tune's scheduler and stop criterion.

Tune counts a trial's ``training_iteration`` itself and, when PBT copies a checkpoint, restores
that count from the copied trial's last result, which need not be the result the checkpoint
was saved with; the round is read from the checkpoint, so it is the one clock the shared
Evaluator's barriers and Tune's decisions agree on.
"""

DEFAULT_NAME = "metaeval-shared-evaluator"
"""The Ray actor name of an experiment's shared Evaluator."""

ROUNDS = "rounds.json"


@dataclass(frozen=True)
class Fitness:
    """What the shared Evaluator computes.

    Args:
        game: the game (a preset name or an OpenSpiel game string).
        trials: the trials of the experiment (a round waits for all of them).
        rater: the rater of ``metaeval_rating`` (a name in ``metaeval.RATERS``).
        rater_options: the rater's options.
        matchmaking: how opponents are drawn: uniform, pfsp, or a meta-solver (mecce, nash, ...).
        rank: also report ``metaeval_rank``.
        approximate_gap: episodes of each learned deviation behind ``approximate_cce_gap``
            (0: not reported).
        exploitability: also report the meta-Nash mixture's exact ``exploitability``.
        mode: the meta-game's entries: exact, sampled or auto.
        episodes: episodes per entry in sampled mode.
        seed: the seed of the trials' training (each trial and round draws its own stream).
        timeout: seconds a round waits for its last trial before it fails naming those missing.
    """

    game: str
    trials: int
    rater: str = "deviation"
    rater_options: dict = field(default_factory=dict)
    matchmaking: str = "uniform"
    rank: bool = False
    approximate_gap: int = 0
    exploitability: bool = False
    mode: str = "auto"
    episodes: int = 1000
    seed: int = 0
    timeout: float = 3600.0

    def __post_init__(self):
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 2:
            raise MetaEvalError(f"a shared Evaluator rates at least 2 trials, got trials={self.trials!r}")
        check_rater_and_matchmaking(self.rater, self.matchmaking)


def check_rater_and_matchmaking(rater: str, matchmaking: str) -> None:
    """Refuse, in one line, a rater or a matchmaking rule metaeval does not know.

    Args:
        rater: a name in ``metaeval.RATERS``.
        matchmaking: ``uniform``, ``pfsp`` or a meta-solver's name.
    """
    from metaeval.ratings import RATERS
    from metaeval.training.matchmaking import RULES
    from metaeval.training.meta_solvers import SOLVERS

    if rater not in RATERS:
        raise MetaEvalError(f"unknown rater {rater!r}; known: {', '.join(sorted(RATERS))}")
    if matchmaking not in RULES and matchmaking not in SOLVERS:
        raise MetaEvalError(f"unknown matchmaking {matchmaking!r}: uniform, pfsp, or a meta-solver "
                            f"({', '.join(sorted(SOLVERS))})")


def content_hash(snapshot) -> str:
    """A hash of what a snapshot holds (a policy table's numbers, or a copied policy's pickle).

    Args:
        snapshot: a policy as the Evaluator stores it.

    Returns:
        The hexadecimal SHA-256 digest.
    """
    if isinstance(snapshot, np.ndarray):
        data = np.ascontiguousarray(snapshot).tobytes() + str((snapshot.dtype, snapshot.shape)).encode()
    else:
        import cloudpickle

        data = cloudpickle.dumps(snapshot)
    return hashlib.sha256(data).hexdigest()


class SharedEvaluator:
    """The experiment's Evaluator behind a Ray actor (see the module docstring).

    Args:
        fitness: what it computes.
        directory: where it keeps its state (reloaded from there when it holds some).
    """

    def __init__(self, fitness: Fitness, directory: str):
        from metaeval.training.evaluator import Evaluator

        self.fitness, self.directory = fitness, Path(directory)
        self.rounds: dict[int, dict] = {}
        self.pending: dict[int, dict[str, list]] = {}
        self.done: dict[int, asyncio.Event] = {}
        self.slots: list[str] | None = None
        self.evaluator = Evaluator(fitness.game, mode=fitness.mode, episodes=fitness.episodes, seed=fitness.seed)
        if (self.directory / ROUNDS).exists():
            self._load()

    # -- state on disk ----------------------------------------------------------------
    def _load(self) -> None:
        from metaeval.training.evaluator import Evaluator

        stored = rundir.read_json(self.directory / ROUNDS, sealed=True)
        if _defining(stored.get("fitness")) != _defining(json.loads(json.dumps(asdict(self.fitness)))):
            raise MetaEvalError(f"{self.directory} holds a shared Evaluator of other settings ({stored.get('fitness')}); "
                                "use a new directory")
        self.rounds = {int(r): record for r, record in stored["rounds"].items()}
        self.slots = stored["slots"]
        last = max(self.rounds)
        self.evaluator = Evaluator.load(self.directory / _round_directory(last))
        for r in self.rounds:
            self.done[r] = asyncio.Event()
            self.done[r].set()

    def _save(self, r: int) -> None:
        """The round's population and meta-game, then the records naming it (atomically)."""
        self.evaluator.save(self.directory / _round_directory(r))
        rundir.write_json(self.directory / ROUNDS, {
            "fitness": asdict(self.fitness), "slots": self.slots,
            "rounds": {str(k): v for k, v in sorted(self.rounds.items())},
        })

    # -- what trials call ---------------------------------------------------------------
    async def report(self, trial: str, r: int, policies: list) -> dict:
        """Record ``trial``'s ``policies`` (one per player) as of round ``r`` and wait for the
        round to complete (a round already recorded answers at once, as recorded).

        Args:
            trial: the Tune trial's id.
            r: the round.
            policies: one OpenSpiel policy per player.

        Returns:
            The trial's metrics (flat keys).
        """
        if r not in self.rounds:
            if len(policies) != self.evaluator.num_players:
                raise MetaEvalError(f"trial {trial} reported {len(policies)} policies for a "
                                    f"{self.evaluator.num_players}-player game")
            self.pending.setdefault(r, {})[trial] = policies
            if len(self.pending[r]) == self.fitness.trials:
                self._complete(r)
        await self._wait(r)
        record = self.rounds[r]
        if trial not in record["metrics"]:
            raise MetaEvalError(f"trial {trial} is not one of the {self.fitness.trials} trials of round {r}")
        return record["metrics"][trial]

    async def opponents(self, trial: str, r: int) -> tuple[int, int, list]:
        """What ``trial`` trains against after round ``r`` (waiting for the round).

        Args:
            trial: the Tune trial's id.
            r: the round.

        Returns:
            ``(slot, seed, opponents)``: the trial's slot, the experiment's seed, and per
            player an ``Opponents`` drawn by the matchmaking rule.
        """
        from metaeval.responses import Opponents
        from metaeval.training.evaluator import Evaluator

        await self._wait(r)
        slot = self.slots.index(trial)
        evaluator = self.evaluator
        if r != max(self.rounds):  # an earlier round, for a trial resumed from an older checkpoint
            evaluator = Evaluator.load(self.directory / _round_directory(r))
        population = evaluator.population
        found = [Opponents.from_distribution(population.policies, p,
                                             evaluator.opponents(p, self.fitness.matchmaking, member=ids[slot]))
                 for p, ids in enumerate(evaluator.ids)]
        return slot, self.fitness.seed, found

    def state(self) -> dict:
        """What the actor holds.

        Returns:
            ``rounds`` (per round its population's hashes, per player and slot, and every
            trial's metrics), ``slots`` (the trials' ids in slot order) and ``payoffs`` (the
            last meta-game's).
        """
        metagame = self.evaluator.built_metagame
        return {"rounds": self.rounds, "slots": self.slots,
                "payoffs": None if metagame is None else [np.asarray(p).tolist() for p in metagame.payoffs]}

    async def _wait(self, r: int) -> None:
        event = self.done.setdefault(r, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), self.fitness.timeout)
        except asyncio.TimeoutError:
            missing = self.fitness.trials - len(self.pending.get(r, {}))
            raise MetaEvalError(f"round {r} still waits for {missing} of {self.fitness.trials} trials after "
                                f"{self.fitness.timeout:g} s") from None

    # -- a round ------------------------------------------------------------------------
    def _complete(self, r: int) -> None:
        reported = self.pending.pop(r)
        ev, fitness = self.evaluator, self.fitness
        if self.slots is None:
            self.slots = sorted(reported)
        elif sorted(reported) != self.slots:
            raise MetaEvalError(f"round {r} was reported by trials {sorted(reported)}, not the experiment's {self.slots}")
        for p in range(ev.num_players):
            policies = [reported[trial][p] for trial in self.slots]
            if ev.sizes[p] == 0:
                for policy in policies:
                    ev.add(p, policy)
            else:
                ev.replace(p, list(ev.ids[p]), policies)
        hashes = [[content_hash(pi) for pi in player] for player in ev.population.policies]
        metagame = ev.metagame()
        rating = ev.rate(fitness.rater, **fitness.rater_options)
        from metaeval.training.matchmaking import win_probability

        mean = np.mean(rating.ratings, axis=0)
        utility_range = (ev.game.min_utility(), ev.game.max_utility())
        pool = [np.mean([win_probability(metagame, p, slot, utility_range).mean() for p in range(ev.num_players)])
                for slot in range(len(self.slots))]
        shared = {}
        if fitness.exploitability:
            shared["exploitability"] = float(ev.exploitability())
        if fitness.approximate_gap:
            estimate = ev.approximate_gap(ev.meta_distribution("mecce"), learner="ppo",
                                          episodes=fitness.approximate_gap)
            shared["approximate_cce_gap"] = float(estimate.bound)
        order = np.argsort(-mean, kind="stable")
        ranks = np.empty(len(mean), dtype=int)
        ranks[order] = np.arange(1, len(mean) + 1)
        metrics = {}
        for slot, trial in enumerate(self.slots):
            metrics[trial] = {METRIC: float(mean[slot]), POOL_METRIC: float(pool[slot]), ROUND: r,
                              **shared}
            if fitness.rank:
                metrics[trial]["metaeval_rank"] = int(ranks[slot])
        self.rounds[r] = {"hashes": hashes, "metrics": metrics}
        self._save(r)
        self.done.setdefault(r, asyncio.Event()).set()


def _defining(fitness) -> dict | None:
    """The settings that change what a round records (a round's time limit does not)."""
    return None if not isinstance(fitness, dict) else {k: v for k, v in fitness.items() if k != "timeout"}


def _round_directory(r: int) -> str:
    return f"round-{r:06d}"


def synchronous_pbt(**options):
    """Tune's ``PopulationBasedTraining`` with ``synch=True``, timed by the round
    (``time_attr`` is ``ROUND``, ``metaeval_round``, unless given), that also runs on after ``Tuner.restore``.

    Stop the experiment on the round too (``stop={ROUND: rounds}``): a trial that copied a
    checkpoint can be ahead in Tune's ``training_iteration`` of the round it resumes from,
    and stopped on the iteration it would leave the last round waiting for it.

    Tune does not save a scheduler's state with the experiment: a restored synchronous PBT
    starts again with its next synchronisation time at the first interval while its trials
    resume at a later iteration, and after its first perturbation it waits forever for a
    trial that is behind that time (none is). Here, once every trial has reached the next
    synchronisation time, it moves to one interval past the latest trial, as in a run
    never interrupted.

    Args:
        **options: ``PopulationBasedTraining``'s arguments (``synch`` is set).

    Returns:
        The scheduler.
    """
    from ray.tune.schedulers import PopulationBasedTraining

    class SynchronousPBT(PopulationBasedTraining):
        def on_trial_result(self, tune_controller, trial, result):
            decision = super().on_trial_result(tune_controller, trial, result)
            times = [self._trial_state[t].last_train_time for t in tune_controller.get_trials()]
            if times and min(times) >= self._next_perturbation_sync:
                self._next_perturbation_sync = max(times) + self._perturbation_interval
            return decision

    return SynchronousPBT(**{"time_attr": ROUND, **options, "synch": True})


def shared_evaluator(fitness: Fitness, directory, name: str = DEFAULT_NAME, address: str | None = None,
                     num_cpus: int | None = None):
    """Start the experiment's shared Evaluator (reloading its state from ``directory`` if it
    holds some), on the Ray session Tune will use (an embedded one on the loopback address
    unless ``address`` names a cluster).

    Args:
        fitness: what it computes.
        directory: where it keeps its state, best inside the experiment's directory.
        name: its Ray actor name (trials find it by this name).
        address: a Ray cluster to join (None: embedded Ray, or ``$RAY_ADDRESS``).
        num_cpus: CPUs of an embedded Ray.

    Returns:
        The actor's handle.
    """
    import ray

    from metaeval.distributed.session import ensure_ray, resolve_address

    ensure_ray(resolve_address(address), num_cpus=num_cpus)
    try:
        ray.get_actor(name)
    except ValueError:
        pass
    else:
        raise MetaEvalError(f"a Ray actor named {name!r} already runs in this Ray session; give another name")
    actor = ray.remote(SharedEvaluator).options(name=name, num_cpus=0).remote(fitness, str(directory))
    ray.get(actor.state.remote())  # a refusal (other settings, a damaged state) surfaces here
    return actor


class TrialLink:
    """A trial's side of the shared Evaluator (inside a Tune trainable).

    Args:
        name: the shared Evaluator's actor name.
    """

    def __init__(self, name: str = DEFAULT_NAME):
        import ray
        from ray import tune

        try:
            self.actor = ray.get_actor(name)
        except ValueError:
            raise MetaEvalError(f"no shared Evaluator named {name!r}: start it with "
                                "metaeval.integrations.tune.shared_evaluator before Tuner.fit") from None
        self.trial = tune.get_context().get_trial_id()

    def report(self, r: int, policies: list) -> dict:
        """Report this trial's policies (one per player) as of round ``r``.

        Args:
            r: the round (0: the initial policies; r: after r training iterations).
            policies: one OpenSpiel policy per player (snapshotted by the Evaluator).

        Returns:
            The trial's metrics once every trial has reported round ``r`` (flat keys).
        """
        import ray

        return ray.get(self.actor.report.remote(self.trial, r, policies))

    def opponents(self, r: int) -> tuple[int, int, list]:
        """What this trial trains against after round ``r``.

        Args:
            r: the round.

        Returns:
            ``(slot, seed, opponents)``: the trial's slot in the population, the
            experiment's seed, and per player an ``Opponents`` drawn by the matchmaking rule.
        """
        import ray

        return ray.get(self.actor.opponents.remote(self.trial, r))


def round_rng(seed: int, slot: int, r: int, player: int) -> np.random.Generator:
    """The generator of one trial slot's training of ``player`` after round ``r``: its own
    stream, so a trial that copied another's checkpoint does not repeat its draws.

    Args:
        seed: the experiment's seed.
        slot: the trial's slot.
        r: the round.
        player: the player.

    Returns:
        The generator.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(slot, r, player)))


def ppo_trainable(config: dict) -> None:
    """A Tune function trainable: one metaeval [`PPO`][metaeval.responses.ppo.PPO] learner per player, each
    iteration trained for ``config["episodes"]`` episodes per player against opponents from
    the shared Evaluator, then reported to it; Tune gets its metrics and a checkpoint.

    Args:
        config: ``game``, ``episodes``, ``seed`` (of the initial weights), optionally
            ``metaeval_evaluator`` (the actor's name) and any [`PPO`][metaeval.responses.ppo.PPO] field
            (``learning_rate``, ``entropy_coef``, ... : what PBT perturbs).
    """
    import dataclasses

    from ray import tune

    from metaeval import games
    from metaeval.responses.ppo import PPO
    from metaeval.runs.progress import asked
    from metaeval.training import members

    link = TrialLink(config.get("metaeval_evaluator", DEFAULT_NAME))
    game = games.load(config["game"])
    players = range(game.num_players())
    settings = {f.name: config[f.name] for f in dataclasses.fields(PPO) if f.name in config}
    if "hidden" in settings:
        settings["hidden"] = tuple(settings["hidden"])
    ppo = PPO(**settings)
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        rng = np.random.default_rng(config["seed"])
        values = [ppo.initial_values(game, p, rng) for p in players]
        r = 0
        link.report(r, [ppo.policy(game, p, v) for p, v in zip(players, values)])
    else:
        with checkpoint.as_directory() as directory:
            loaded = members.load(Path(directory) / "members.npz", [[ppo] for _ in players])
            r = rundir.read_json(Path(directory) / "round.json")["round"]
        values = [player[0].values for player in loaded]
    while True:
        slot, seed, opponents = link.opponents(r)
        with asked(False):
            values = [ppo.train(game, p, opponents[p], config["episodes"], round_rng(seed, slot, r, p), values[p])
                      for p in players]
        r += 1
        metrics = link.report(r, [ppo.policy(game, p, v) for p, v in zip(players, values)])
        with tempfile.TemporaryDirectory() as directory:
            members.save(Path(directory) / "members.npz", [[members.Member(ppo, v)] for v in values])
            rundir.write_json(Path(directory) / "round.json", {"round": r})
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))
