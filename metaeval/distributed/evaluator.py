"""Evaluation of one shard of joint profiles, the same code in-process and in actors.

An evaluator loads its game once and caches policies (and, in exact mode, their
reach columns) by registry token, so a policy crosses the wire and is walked once
per process however many shards use it.

Exact entries follow the maths page, section 3: ``G_n(k) = sum_z chance(z) u_n(z) prod_p R_p[z, k_p]``.
Each entry is a row of elementwise products reduced along its own contiguous row
(numpy's pairwise sum), so its bits depend only on its own terms: never on which
other joints share the shard, on the shard's size, or on the number of workers.
A matrix product (BLAS) would be faster but picks its blocking from the shape of
the whole shard, and gemv/gemm kernels round differently.

A `GapTask` is a piece of the full-game CCE gap (`metaeval.spiel.gap`),
computed from the same cached reach rows by the same function as in-process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.spiel.exact import ExactEvaluator
from metaeval.spiel.gap import GapPiece, piece_values
from metaeval.spiel.lockstep import BATCH_SIZE, policy_errors
from metaeval.runs.time_limit import named, time_limit

#: Upper bound on the elements of one ``[joints, terminals]`` intermediate.
CHUNK_ELEMENTS = 1 << 20

MODES = ("exact", "sampled")


@dataclass(frozen=True)
class ShardTask:
    """A shard of joint profiles to evaluate.

    Attributes:
        index: the shard's number in its build (named in errors).
        mode: ``"exact"`` or ``"sampled"``.
        columns: per player, the tokens of the policies the shard uses.
        joints: ``[M, N]`` indices into ``columns``.
        ids: ``[M, N]`` policy ids of the joints (they seed sampled episodes).
        episodes: episodes per joint (sampled mode): one count, or ``[M]`` counts.
        seed: the run seed (sampled mode).
        batch_size: episodes of a joint played in lock-step (sampled mode; None: one
            by one), see [`metaeval.spiel.sample_joints`][metaeval.spiel.sample_joints].
        first: ``[M]`` numbers of the joints' first episodes (sampled mode; None: 0), for
            episodes that continue the ones a joint has played.
        moments: sampled mode: the result carries the returns' sums and cross-products
            (`metaeval.spiel.sampled.return_moments`) for running sums, not standard errors.
    """

    index: int
    mode: str
    columns: tuple[tuple[int, ...], ...]
    joints: np.ndarray
    ids: np.ndarray
    episodes: int | np.ndarray = 0
    seed: int = 0
    batch_size: int | None = BATCH_SIZE
    first: np.ndarray | None = None
    moments: bool = False

    @property
    def tokens(self) -> set[int]:
        return {token for player in self.columns for token in player}


@dataclass(frozen=True)
class ShardResult:
    """Values of a shard's joints: ``mean [M, N]``; sampled mode adds ``counts`` and
    ``stderr``, or, for a task asking for moments, ``sums [M, N]`` and ``products [M, N, N]``."""

    index: int
    mean: np.ndarray
    stderr: np.ndarray | None = None
    counts: np.ndarray | None = None
    sums: np.ndarray | None = None
    products: np.ndarray | None = None

    @property
    def evaluated(self) -> int:
        return len(self.mean)

    @property
    def work(self) -> int:
        """What the shard counts for in a build's progress: its episodes (sampled), else its entries."""
        return self.evaluated if self.counts is None else int(self.counts.sum())


@dataclass(frozen=True)
class GapTask:
    """A piece of a CCE gap: ``columns``, per player, the tokens of the population's policies."""

    index: int
    columns: tuple[tuple[int, ...], ...]
    sigma: np.ndarray
    piece: GapPiece

    tokens = ShardTask.tokens


@dataclass(frozen=True)
class GapResult:
    """A piece's on-policy values, deviation weights per sequence and their terminals' total
    absolute weight (``piece_values``)."""

    index: int
    follow: np.ndarray
    sequences: np.ndarray
    magnitude: np.ndarray
    evaluated: int  # terminals of the piece

    @property
    def work(self) -> int:
        """What the piece counts for in a gap's progress: its terminals."""
        return self.evaluated


def contract(reaches, joints: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Exact payoffs ``[M, N]`` of ``joints`` from reach rows ``reaches[p] [k_p, Z]``
    and weighted returns ``weights [N, Z]`` (maths, section 3), each entry shard-invariant."""
    num_joints, num_terminals = len(joints), weights.shape[1]
    result = np.empty((num_joints, len(weights)))
    step = max(1, CHUNK_ELEMENTS // max(1, num_terminals))
    for start in range(0, num_joints, step):
        chunk = joints[start : start + step]
        common = reaches[0][chunk[:, 0]]
        for player in range(1, len(reaches)):
            common *= reaches[player][chunk[:, player]]
        for n, weight in enumerate(weights):
            result[start : start + step, n] = np.add.reduce(common * weight, axis=1)
    return result


class ShardEvaluator:
    """Evaluates shards of one game, caching policies and reach rows by token."""

    def __init__(self, game):
        self.game = games.load(game)
        self._policies: dict[int, object] = {}
        self._reach: dict[int, np.ndarray] = {}
        self._exact = None
        self._weights = None

    # -- cache ------------------------------------------------------------------
    def missing(self, tokens) -> list[int]:
        """The tokens whose policies this evaluator does not hold."""
        return sorted(t for t in tokens if t not in self._policies)

    def add(self, policies: dict[int, object]) -> None:
        self._policies.update(policies)

    def forget(self, tokens) -> None:
        for token in tokens:
            self._policies.pop(token, None)
            self._reach.pop(token, None)

    # -- evaluation -------------------------------------------------------------
    def evaluate(self, task: ShardTask | GapTask, timeout: float | None = None,
                 advance=None) -> ShardResult | GapResult:
        """The values of ``task``; each call of a policy may take ``timeout`` seconds (None: no
        limit), past which it raises a one-line `PolicyTimeout` naming the policy.
        ``advance(count)``, if given, is told of the work as it is done: episodes as they
        end (sampled mode), else the task's entries or terminals when it is done."""
        missing = self.missing(task.tokens)
        if missing:
            raise MetaEvalError(f"shard {task.index}: no policy for tokens {missing}")
        with time_limit(timeout):
            if isinstance(task, GapTask):
                result = self._gap_piece(task)
            elif task.mode == "exact":
                result = ShardResult(task.index, self._exact_values(task))
            elif task.mode == "sampled":
                return self._sampled(task, advance)
            else:
                raise MetaEvalError(f"mode must be one of {', '.join(MODES)}, got {task.mode!r}")
        if advance is not None:
            advance(result.work)
        return result

    def _exact_values(self, task: ShardTask) -> np.ndarray:
        reaches = [np.stack(rows) for rows in self._reach_rows(task.columns, task)]
        return contract(reaches, task.joints, self._weights)

    def _gap_piece(self, task: GapTask) -> GapResult:
        piece = task.piece
        reaches = [np.stack([row[piece.start : piece.stop] for row in rows], axis=1)
                   for rows in self._reach_rows(task.columns)]
        return GapResult(task.index, *piece_values(self._exact.tree, reaches, task.sigma, piece),
                         piece.stop - piece.start)

    def _reach_rows(self, columns, task: ShardTask | None = None) -> list[list[np.ndarray]]:
        """Per player, the reach rows ``[Z]`` of the policies with these tokens (cached);
        ``task``: the shard that needs them, whose ids name a policy that fails."""
        if self._exact is None:
            self._exact = ExactEvaluator(self.game)
            tree = self._exact.tree
            self._weights = np.ascontiguousarray((tree.chance[:, None] * tree.returns).T)
        result = []
        for player, tokens in enumerate(columns):
            new = [t for t in tokens if t not in self._reach]
            if new:
                tables = [self._table(player, token, task) for token in new]
                matrix = self._exact.reach_matrix(player, tables)
                for column, token in enumerate(new):
                    self._reach[token] = np.ascontiguousarray(matrix[:, column])
            result.append([self._reach[t] for t in tokens])
        return result

    def _table(self, player: int, token: int, task: ShardTask | None) -> np.ndarray:
        """The ``[S, A]`` table of the policy ``token`` of ``player``, asked at every information
        state in one call (under the time limit); a failure names the policy by its id in ``task``."""
        try:
            with policy_errors(player):
                return self._exact.tables(player, [self._policies[token]])[0]
        except MetaEvalError as exc:
            if task is None:
                raise
            column = task.columns[player].index(token)
            policy_id = task.ids[np.flatnonzero(task.joints[:, player] == column)[0], player]
            raise named(exc, f"policy id {policy_id}") from None

    def _sampled(self, task: ShardTask, advance=None) -> ShardResult:
        from metaeval.spiel.sampled import joint_seed, sample_joints

        policies = [[self._policies[t] for t in tokens] for tokens in task.columns]
        seeds = [joint_seed(task.seed, ids) for ids in task.ids]
        first, second, counts = sample_joints(
            self.game, policies, task.joints, task.episodes, seeds, task.batch_size, ids=task.ids, advance=advance,
            first=task.first, moments=task.moments,
        )
        counts = np.asarray(counts, dtype=np.float64)
        if task.moments:
            return ShardResult(task.index, first / counts[:, None], counts=counts, sums=first, products=second)
        return ShardResult(task.index, first, second, counts)
