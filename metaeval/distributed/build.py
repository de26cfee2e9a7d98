"""``build_metagame``: a population's meta-game, in-process or on a Ray actor pool.

Both paths run the same shard evaluator on the same shards of joints, so they
return the same MetaGame bit for bit. Builds are incremental: a joint whose
policies all appear in ``previous`` is copied from it, and only joints touching a
new policy are evaluated.

Process-wide state, kept on purpose: this module holds one actor pool per
process (the last one used; a build for another game, number of workers or
cluster replaces it) and in-process evaluators for the last few games. Evaluators
load their game once and cache the policies and reach rows they were sent, so a
population loop's next build sends and evaluates only its new policies; the pool
is one per process because Ray is (one ``ray.init`` per process). ``shutdown()``
releases it, and runs at interpreter exit. ``last_build()`` is a read-only view
of the last build's statistics (a frozen record): nothing here reads it back, so
it never changes what a build does.
"""

from __future__ import annotations

import atexit
import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from metaeval import games
from metaeval.distributed.evaluator import MODES, ShardEvaluator
from metaeval.distributed.plan import plan_build
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT, EvaluatorPool
from metaeval.distributed.registry import PolicyRegistry, Sync
from metaeval.distributed.session import resolve_address, stop_ray
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.runs.progress import Progress
from metaeval.spiel.lockstep import BATCH_SIZE

#: Sampled shards per actor: enough to balance the load and lose little work to a
#: retry. Exact entries cost microseconds, so an exact build gives each actor one
#: shard and pays one round trip per actor.
SAMPLED_SHARDS_PER_WORKER = 4
#: In-process sampled builds report progress this many times.
LOCAL_SAMPLED_SHARDS = 32
#: In-process evaluators kept (one per game).
LOCAL_GAMES = 4


@dataclass(frozen=True)
class BuildStats:
    """What the last build did.

    Attributes:
        mode: ``"exact"`` or ``"sampled"``.
        workers: actors used, 0 for an in-process build.
        entries: joints in the meta-game.
        evaluated: joints evaluated (as reported by the evaluators).
        copied: joints copied from ``previous``.
        shards: shards the evaluated joints were cut into.
        retries: shard resubmissions after an actor was lost or hung (a shard that
            raises fails the build at once).
        seconds: wall time of the build.
    """

    mode: str
    workers: int
    entries: int
    evaluated: int
    copied: int
    shards: int
    retries: int
    seconds: float


class _LocalBackend:
    """The in-process path: one evaluator per game, kept between builds."""

    def __init__(self, game):
        self.registry = PolicyRegistry()
        self.evaluator = ShardEvaluator(game)

    def run(
        self, shards, sync: Sync, progress: Progress, max_retries: int, shard_timeout: float
    ) -> tuple[list, int]:
        """Evaluate the shards in turn, each policy call within ``shard_timeout`` seconds
        (nothing to retry: a policy that fails or times out fails the build)."""
        self.evaluator.forget(sync.dropped)
        self.evaluator.add(sync.new_policies)
        return [self.evaluator.evaluate(shard.task, shard_timeout, progress.advance) for shard in shards], 0


class _State:
    """The process-wide state described in the module docstring."""

    pool: EvaluatorPool | None = None
    exit_hook = False
    local: OrderedDict[str, _LocalBackend] = OrderedDict()
    last: BuildStats | None = None


def build_metagame(
    game,
    population,
    mode: str = "exact",
    episodes: int = 1000,
    workers: int = 1,
    seed: int = 0,
    address: str | None = None,
    previous: MetaGame | None = None,
    log_dir=None,
    progress=None,
    max_retries: int = MAX_RETRIES,
    shard_timeout: float = SHARD_TIMEOUT,
    batch_size: int | None = BATCH_SIZE,
) -> MetaGame:
    """The meta-game of ``population`` (maths, section 3), exact or sampled.

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
        population: a [`metaeval.spiel.Population`][metaeval.spiel.Population] for ``game``.
        mode: ``"exact"`` (enumerable games) or ``"sampled"``.
        episodes: episodes per joint in sampled mode (at least 2).
        workers: Ray actors; 1 evaluates in-process unless an address is given.
        seed: run seed; a sampled joint's episodes are seeded from it and the
            joint's policy ids, whatever the sharding or number of workers.
        address: an existing Ray cluster (default ``$RAY_ADDRESS``, else embedded Ray).
        previous: an earlier meta-game of this run (same mode, episodes and seed);
            joints whose policies all appear in it are copied, not evaluated.
            Policies are matched by strategy name, i.e. by policy id only (the
            meta-game holds no policies): a ``previous`` built from another
            population lineage that uses the same ids would be reused as if its
            policies were these. Pass only a meta-game of this population's own
            lineage, as the population loop does with its last meta-game.
        log_dir: where Ray keeps its logs when this call starts it.
        progress: True, None, False or ``callable(done, total)`` ([`metaeval.runs.progress`][metaeval.runs.progress]),
            counting episodes (sampled mode) or entries (exact mode).
        max_retries: resubmissions allowed per shard whose actor was lost before the
            build fails (an exception of a policy or the game fails it at once; a shard
            that times out is tried on one more actor at most).
        shard_timeout: seconds a policy may take to answer one call (a batch of
            decisions; in exact mode, every information state of a new policy). A call
            that takes longer is interrupted and fails the build in one line naming the
            policy and its joint, in-process at once, on Ray actors after a second try
            on a fresh actor. Raise it for policies that think longer (a search at every state).
        batch_size: sampled mode: episodes of a joint played in lock-step, each policy
            asked once per step for all of them (None: one episode and state at a
            time); the meta-game is the same for every choice.

    Returns:
        A MetaGame with strategy names from the policy ids, player names from the
        game, and (sampled mode) per-entry counts and standard errors.
    """
    start = time.perf_counter()
    game = games.load(game)
    _check_arguments(game, population, mode, episodes, workers, seed, batch_size)
    check_limits(max_retries, shard_timeout)
    address = resolve_address(address)
    plan = plan_build(population, previous, mode, episodes)
    use_pool = workers > 1 or address is not None
    backend = evaluation_backend(game, workers, address, log_dir)
    if mode == "exact":
        count = workers if use_pool else 1
    else:
        count = workers * SAMPLED_SHARDS_PER_WORKER if use_pool else LOCAL_SAMPLED_SHARDS
    sync = backend.registry.sync(population)
    shards = plan.shards(population, count, mode, sync.tokens, episodes, seed, batch_size)
    work, unit = (len(plan.joints), "entry") if mode == "exact" else (len(plan.joints) * episodes, "episode")
    with Progress(work, "meta-game", unit, progress) as bar:
        results, retries = backend.run(shards, sync, bar, max_retries, shard_timeout)
    plan.assemble(shards, results)
    _State.last = BuildStats(
        mode=mode,
        workers=workers if use_pool else 0,
        entries=plan.payoffs[0].size,
        evaluated=sum(r.evaluated for r in results),
        copied=plan.copied,
        shards=len(shards),
        retries=retries,
        seconds=time.perf_counter() - start,
    )
    return MetaGame(
        plan.payoffs,
        strategy_names=population.strategy_names(),
        player_names=population.player_names(),
        counts=plan.counts,
        stderr=plan.stderr,
    )


def check_limits(max_retries, shard_timeout) -> None:
    """Refuse a retry count or shard timeout that ``build_metagame`` cannot use, in one line."""
    _check_count("max_retries", max_retries, 0)
    positive = isinstance(shard_timeout, (int, float)) and 0 < shard_timeout < math.inf
    if isinstance(shard_timeout, bool) or not positive:
        raise MetaEvalError(f"shard_timeout must be a positive number of seconds, got {shard_timeout!r}")


def _check_count(name: str, value, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise MetaEvalError(f"{name} must be an int of at least {least}, got {value!r}")


def _check_arguments(game, population, mode, episodes, workers, seed, batch_size) -> None:
    if mode not in MODES:
        raise MetaEvalError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if getattr(population, "game_string", None) != str(game):
        raise MetaEvalError(
            f"the population is for {getattr(population, 'game_string', population)!r}, not {game}"
        )
    for name, value, least in (("workers", workers, 1), ("seed", seed, 0)):
        _check_count(name, value, least)
    if mode == "sampled" and (not isinstance(episodes, int) or episodes < 2):
        raise MetaEvalError(f"episodes must be an int of at least 2 (for a standard error), got {episodes!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise MetaEvalError(f"batch_size must be a positive int or None, got {batch_size!r}")


def evaluation_backend(game, workers: int, address: str | None, log_dir=None):
    """Where shards are evaluated: the process's actor pool (``workers > 1`` or a cluster
    ``address``), else the in-process evaluator of ``game``; either has ``registry`` and ``run``."""
    if workers > 1 or address is not None:
        return actor_pool(game, workers, address, log_dir)
    return _local(game)


def _local(game) -> _LocalBackend:
    key = str(game)
    backend = _State.local.pop(key, None) or _LocalBackend(game)
    _State.local[key] = backend
    while len(_State.local) > LOCAL_GAMES:
        _State.local.popitem(last=False)
    return backend


def actor_pool(game, workers: int, address, log_dir) -> EvaluatorPool:
    """The process's actor pool for this game, workers and cluster (started, or the last one kept)."""
    pool = _State.pool
    if pool is None or not pool.matches(game, workers, address):
        if pool is not None:
            pool.close()
        if not _State.exit_hook:
            atexit.register(shutdown)
            _State.exit_hook = True
        _State.pool = pool = EvaluatorPool(game, workers, address, log_dir)
    return pool


def current_pool() -> EvaluatorPool | None:
    """The actor pool of the last pool build (None if there is none).

    Returns:
        The pool, or None.
    """
    pool = _State.pool
    return None if pool is None or pool.closed else pool


def release_idle_pool() -> None:
    """Close the build pool between builds: its idle actors hold the CPUs that other Ray work
    (bootstrap replicates, PBT's training tasks) needs, which would otherwise wait for them
    forever on a machine with no CPU to spare. The next build starts a fresh pool."""
    pool = current_pool()
    if pool is not None:
        pool.close()


def last_build() -> BuildStats | None:
    """Statistics of the last completed build in this process (None before the first).

    A read-only view: the record is frozen, and builds never consult it.

    Returns:
        The statistics, or None.
    """
    return _State.last


def shutdown() -> None:
    """Kill the actor pool, and stop Ray if a build started it (a caller's Ray stays up)."""
    if _State.pool is not None:
        _State.pool.close()
        _State.pool = None
    stop_ray()
