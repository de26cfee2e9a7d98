"""Which entries a build evaluates, which it copies from the previous meta-game,
how the evaluated ones are cut into shards, and how results are put back.

Entries are placed by joint index, never by the order results arrive, so a
retried or reordered shard cannot move, lose or double an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metaeval.runs import budget
from metaeval.distributed.evaluator import ShardResult, ShardTask
from metaeval.errors import MetaEvalError
from metaeval.spiel.lockstep import BATCH_SIZE
from metaeval.game import MetaGame


@dataclass
class BuildPlan:
    """The entries of one build.

    Attributes:
        payoffs: ``[N, K_1..K_N]``, copied entries filled, the rest NaN until assembled.
        stderr, counts: the same for sampled builds (None for exact ones).
        joints: ``[M, N]`` population indices of the joints to evaluate, in C order.
        copied: number of joints copied from the previous meta-game.
    """

    payoffs: np.ndarray
    stderr: np.ndarray | None
    counts: np.ndarray | None
    joints: np.ndarray
    copied: int

    def shards(self, population, count: int, mode: str, tokens, episodes: int, seed: int, batch_size=BATCH_SIZE):
        """The joints to evaluate cut into at most ``count`` contiguous shards of near-equal size."""
        return cut_shards(self.joints, population, count, mode, tokens, episodes, seed, batch_size)

    def assemble(self, shards, results: list[ShardResult]) -> None:
        """Write each shard's values at its joints' positions (results in shard order)."""
        shape = self.payoffs.shape[1:]
        for shard, result in zip(shards, results, strict=True):
            if result.index != shard.task.index or result.evaluated != len(shard.rows):
                raise MetaEvalError(
                    f"shard {shard.task.index}: got {result.evaluated} values for shard "
                    f"{result.index}, expected {len(shard.rows)}"
                )
            flat = np.ravel_multi_index(self.joints[shard.rows].T, shape)
            self.payoffs.reshape(len(self.payoffs), -1)[:, flat] = result.mean.T
            if self.stderr is not None:
                self.stderr.reshape(len(self.stderr), -1)[:, flat] = result.stderr.T
                self.counts.reshape(-1)[flat] = result.counts


def cut_shards(all_joints: np.ndarray, population, count: int, mode: str, tokens, episodes, seed: int,
               batch_size=BATCH_SIZE, first=None, moments: bool = False) -> list[Shard]:
    """``all_joints [M, N]`` (population indices) cut into at most ``count`` contiguous shards
    of near-equal size; ``episodes`` per joint (one count, or one per joint) and, per joint,
    its ``first`` episode (sampled mode; default 0); ``moments`` as in `ShardTask`."""
    ids = [np.asarray(player, dtype=np.int64) for player in population.ids]
    shards = []
    if len(all_joints) == 0:
        return shards
    per_joint = np.ndim(episodes) > 0
    for index, rows in enumerate(np.array_split(np.arange(len(all_joints)), min(count, len(all_joints)))):
        joints = all_joints[rows]
        columns, local = [], np.empty_like(joints)
        for p in range(joints.shape[1]):
            used, local[:, p] = np.unique(joints[:, p], return_inverse=True)
            columns.append(tuple(tokens[p][i] for i in used))
        joint_ids = np.stack([ids[p][joints[:, p]] for p in range(joints.shape[1])], axis=1)
        task = ShardTask(index, mode, tuple(columns), local, joint_ids,
                         np.asarray(episodes)[rows] if per_joint else episodes, seed, batch_size,
                         None if first is None else np.asarray(first)[rows], moments)
        shards.append(Shard(rows, task))
    return shards


@dataclass(frozen=True)
class Shard:
    """A task and the rows of `BuildPlan.joints` it covers."""

    rows: np.ndarray
    task: ShardTask

    def describe(self, count: int) -> str:
        """``shard 3 of 8 (policy ids (0, 1, 2)..(0, 3, 7), 32 entries)``."""
        first, last = self.task.ids[0], self.task.ids[-1]
        return (
            f"shard {self.task.index} of {count} (policy ids {tuple(int(i) for i in first)}.."
            f"{tuple(int(i) for i in last)}, {len(self.rows)} entries)"
        )


def plan_build(population, previous: MetaGame | None, mode: str, episodes: int) -> BuildPlan:
    """Copy every joint whose policies all appear in ``previous``; evaluate the others.

    A policy "appears" when its strategy name (its policy id) does: ``previous`` must
    come from the same population lineage (see ``build_metagame``).
    """
    sizes = tuple(population.sizes)
    num_players = len(sizes)
    sampled = mode == "sampled"
    budget.check_joints(sizes, num_players * (3 if sampled else 1), "the meta-game")
    payoffs = np.full((num_players, *sizes), np.nan)
    stderr = np.full_like(payoffs, np.nan) if sampled else None
    counts = np.zeros(sizes) if sampled else None
    kept = np.zeros(sizes, dtype=bool)
    if previous is not None:
        kept_index, positions = _positions(population, previous)
        if all(len(k) for k in kept_index):
            _check_reusable(previous, positions, mode, episodes)
            grid, old = np.ix_(*kept_index), np.ix_(*positions)
            payoffs[(slice(None), *grid)] = previous.payoffs[(slice(None), *old)]
            if sampled:
                stderr[(slice(None), *grid)] = previous.stderr[(slice(None), *old)]
                counts[grid] = previous.counts[old]
            kept[grid] = True
    joints = np.argwhere(~kept)  # C order
    return BuildPlan(payoffs, stderr, counts, joints, int(kept.sum()))


def _positions(population, previous: MetaGame):
    """Per player: indices whose policy appears in ``previous``, and where it sits there."""
    names = population.strategy_names()
    if previous.num_players != len(names) or tuple(previous.player_names) != tuple(
        population.player_names()
    ):
        raise MetaEvalError(
            f"previous meta-game has players {list(previous.player_names)}, the population "
            f"{list(population.player_names())}: it is not from this game"
        )
    kept, positions = [], []
    for p, (now, before) in enumerate(zip(names, previous.strategy_names)):
        if len(set(before)) != len(before):
            raise MetaEvalError(f"previous meta-game repeats a strategy name of player {p}")
        where = {name: i for i, name in enumerate(before)}
        kept.append([i for i, name in enumerate(now) if name in where])
        positions.append([where[now[i]] for i in kept[-1]])
    return kept, positions


def _check_reusable(previous: MetaGame, positions, mode: str, episodes: int) -> None:
    """Copied entries must be what this build would compute: same mode and episodes."""
    if mode == "exact":
        if previous.counts is not None:
            raise MetaEvalError(
                "previous meta-game was sampled; an exact build cannot reuse its entries"
            )
        return
    if previous.counts is None or previous.stderr is None:
        raise MetaEvalError(
            "previous meta-game has no counts/standard errors (an exact build); "
            "a sampled build cannot reuse its entries"
        )
    reused = previous.counts[np.ix_(*positions)]
    if np.any(reused != episodes):
        raise MetaEvalError(
            f"previous meta-game has entries from {sorted({int(c) for c in reused.ravel()})} episodes; "
            f"this build asks for {episodes}"
        )
