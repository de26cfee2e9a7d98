"""``cce_gap``: the full-game CCE gap (maths, section 4), in-process or on the builds' actor pool.

The gap's pieces (`metaeval.spiel.gap.gap_pieces`: per player, runs of terminals)
go to the actors that build the meta-game, which already hold the population's policies
and reach rows; the driver sums the pieces in order and runs the best responses' backward
pass over information states. Both paths run the same code on the same pieces, so they
return the same gap bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

from metaeval import spiel
from metaeval.distributed.build import actor_pool
from metaeval.distributed.evaluator import GapTask
from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT
from metaeval.distributed.session import resolve_address
from metaeval.runs.progress import Progress
from metaeval.spiel.gap import cce_from_pieces, check_sigma, gap_pieces
from metaeval.spiel.tree import game_tree


@dataclass(frozen=True)
class GapShard:
    """A gap piece as the pool sends it."""

    task: GapTask

    def describe(self, count: int) -> str:
        piece = self.task.piece
        return (f"CCE gap shard {self.task.index} of {count} (player {piece.player}, "
                f"terminals {piece.start}..{piece.stop})")


def cce_gap(game, population, sigma, workers: int = 1, address: str | None = None, evaluator=None,
            log_dir=None, progress=None, max_retries: int = MAX_RETRIES, shard_timeout: float = SHARD_TIMEOUT):
    """[`metaeval.spiel.cce_gap`][metaeval.spiel.cce_gap], on Ray actors when ``workers > 1`` or an ``address``
    (default ``$RAY_ADDRESS``) is given; ``evaluator``: the in-process path's
    [`metaeval.spiel.ExactEvaluator`][metaeval.spiel.ExactEvaluator]. The other arguments are ``build_metagame``'s.

    Args:
        game: the game.
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        sigma: a joint distribution over the population.
        workers: Ray actors.
        address: the Ray cluster.
        evaluator: an [`ExactEvaluator`][metaeval.spiel.ExactEvaluator] of ``game`` to reuse (its cached reach columns).
        log_dir: where an embedded Ray writes its logs.
        progress: None (a bar on a terminal), True or False.
        max_retries: resubmissions of a shard whose actor was lost.
        shard_timeout: seconds a policy may take to answer one call.

    Returns:
        The gap, as [`metaeval.spiel.cce_gap`][metaeval.spiel.cce_gap] returns it.
    """
    address = resolve_address(address)
    if workers <= 1 and address is None:
        return spiel.cce_gap(game, population, sigma, evaluator=evaluator, progress=progress)
    game, sigma = check_sigma(game, population, sigma)
    tree = game_tree(game)
    pool = actor_pool(game, workers, address, log_dir)
    sync = pool.registry.sync(population)
    columns = tuple(tuple(tokens) for tokens in sync.tokens)
    pieces = gap_pieces(tree, per_recommendation=False)
    shards = [GapShard(GapTask(i, columns, sigma, piece)) for i, piece in enumerate(pieces)]
    with Progress(sum(piece.stop - piece.start for piece in pieces), "CCE gap", "terminal", progress) as bar:
        results, _ = pool.run(shards, sync, bar, max_retries, shard_timeout)
    return cce_from_pieces(tree, pieces, [(result.follow, result.sequences, result.magnitude) for result in results])
