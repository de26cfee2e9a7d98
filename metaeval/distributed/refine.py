"""More episodes for a sampled meta-game where its alpha-Rank is uncertain, played on the build's actors.

    mg = evaluator.metagame()                          # a league: every joint has its pilot episodes
    better = refine(game, evaluator.population, mg, budget=100_000, workers=2)

A league's meta-game is sampled uniformly as it grows: each new joint gets the same pilot
episodes. `refine` then spends ``budget`` more episodes in ``rounds``, each round on the
joints of the response-graph edges whose sign is not yet resolved
(`metaeval.spiel.adaptive.uncertain_edges`, ResponseGraphUCB's test), with ``UNIFORM_SHARE`` of it spread evenly, as the
``"response_graph"`` rule of ``adaptive_metagame`` does; it targets alpha-Rank at infinite
alpha, whose ranking is read off that graph. Unlike ``adaptive_metagame`` the episodes
are played in lock-step on Ray actors (or in-process), a round's joints cut into shards as
a build's are, and memory stays linear in the joints, so a league of a thousand policies per
player can be refined.

Each joint's new episodes continue its own stream (episode n of a joint is the same
whoever plays it, `metaeval.spiel.sampled.joint_seed`), so a refined entry is the entry of
a uniform build of its count, up to the rounding of the merged sums. Episodes go to a joint
in pairs, so each batch has a standard error to merge.
"""

from __future__ import annotations

import numpy as np

from metaeval import games
from metaeval.distributed.build import LOCAL_SAMPLED_SHARDS, SAMPLED_SHARDS_PER_WORKER, evaluation_backend
from metaeval.distributed.plan import cut_shards
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.runs.progress import Progress
from metaeval.spiel.adaptive import UNIFORM_SHARE, allocate, uncertain_edges


def refine(game, population, metagame: MetaGame, budget: int, rounds: int = 4, confidence: float = 1.96,
           seed: int = 0, workers: int = 1, address: str | None = None, log_dir=None, progress=None) -> MetaGame:
    """``metagame`` (sampled from ``population`` with ``seed``) with ``budget`` more episodes
    where its response graph is uncertain (module docstring).

    Args:
        game: a ``pyspiel.Game`` or a name.
        population: the population ``metagame`` was built from.
        metagame: its sampled meta-game (counts and standard errors), e.g. ``Evaluator.metagame()``.
        budget: episodes to add, an even int.
        rounds: allocation rounds.
        confidence: z of the normal interval deciding an edge.
        seed: the seed ``metagame`` was built with (each joint's stream continues from it).
        workers: Ray actors playing the episodes (1: in-process), as in ``build_metagame``.
        address: the Ray cluster they run on (None: an embedded Ray, or ``$RAY_ADDRESS``).
        log_dir: where an embedded Ray started here writes its logs.
        progress: as in ``build_metagame``, counting episodes.

    Returns:
        The refined meta-game.
    """
    game = games.load(game)
    _check(population, metagame, budget, rounds, confidence)
    counts = metagame.counts.astype(np.int64)
    sums = metagame.payoffs * counts
    squares = (counts - 1) * counts * metagame.stderr**2 + counts * metagame.payoffs**2
    backend = evaluation_backend(game, workers, address, log_dir)
    pool = workers > 1 or address is not None
    shard_count = workers * SAMPLED_SHARDS_PER_WORKER if pool else LOCAL_SAMPLED_SHARDS
    remaining = budget // 2  # in pairs of episodes
    with Progress(budget, "refinement", "episode", progress) as bar:
        for r in range(rounds):
            pairs = remaining // (rounds - r)
            remaining -= pairs
            current = _metagame(metagame, sums, squares, counts)
            players = np.arange(len(sums))
            covariance = np.zeros((*counts.shape, len(sums), len(sums)))
            covariance[..., players, players] = np.moveaxis(current.stderr, 0, -1) ** 2
            weight = uncertain_edges(current.payoffs, covariance, counts, confidence)
            share = weight / weight.sum() if weight.sum() > 0 else 1.0 / counts.size
            targets = (counts.sum() + 2 * pairs) * ((1 - UNIFORM_SHARE) * share + UNIFORM_SHARE / counts.size)
            extra = 2 * allocate(targets / 2, counts / 2, pairs)
            joints = np.argwhere(extra > 0)
            if not len(joints):
                continue
            where = tuple(joints.T)
            sync = backend.registry.sync(population)
            shards = cut_shards(joints, population, shard_count, "sampled", sync.tokens, extra[where], seed,
                                first=counts[where])
            results, _ = backend.run(shards, sync, bar, MAX_RETRIES, SHARD_TIMEOUT)
            for shard, result in zip(shards, results, strict=True):
                at = tuple(joints[shard.rows].T)
                n = result.counts
                sums[(slice(None), *at)] += (result.mean * n[:, None]).T
                squares[(slice(None), *at)] += (((n - 1) * n)[:, None] * result.stderr**2
                                                + n[:, None] * result.mean**2).T
                counts[at] += n.astype(np.int64)
    return _metagame(metagame, sums, squares, counts)


def _metagame(like: MetaGame, sums: np.ndarray, squares: np.ndarray, counts: np.ndarray) -> MetaGame:
    """The meta-game of these running sums, named as ``like``."""
    mean = sums / counts
    variance = np.maximum(squares / counts - mean**2, 0.0) * counts / (counts - 1)
    return MetaGame(mean, strategy_names=like.strategy_names, player_names=like.player_names, counts=counts,
                    stderr=np.sqrt(variance / counts))


def _check(population, metagame: MetaGame, budget, rounds, confidence) -> None:
    if metagame.counts is None or metagame.stderr is None:
        raise MetaEvalError("refine needs a sampled meta-game (with counts and standard errors)")
    if tuple(metagame.payoffs.shape[1:]) != tuple(population.sizes):
        raise MetaEvalError(f"the meta-game has shape {metagame.payoffs.shape[1:]}, the population "
                            f"{tuple(population.sizes)}: it was not built from this population")
    if metagame.counts.min() < 2:
        raise MetaEvalError("every joint needs at least 2 episodes before it is refined")
    for name, value, least in (("budget", budget, 0), ("rounds", rounds, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise MetaEvalError(f"{name} must be an int of at least {least}, got {value!r}")
    if budget % 2:
        raise MetaEvalError(f"budget must be even (episodes go to a joint in pairs), got {budget}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < np.inf:
        raise MetaEvalError(f"confidence (the z of an edge's interval) must be a positive number, got {confidence!r}")
