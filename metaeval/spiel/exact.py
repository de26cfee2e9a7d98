"""Exact meta-games of enumerable games (maths, section 3, "Exact").

The payoff of joint policy (k_1..k_N) to player n is

    G_n(k) = sum_z chance(z) u_n(z) prod_p R_p[z, k_p],

where ``R_p [Z, K_p]`` is player p's reach matrix: column k holds the realisation
weight of policy k's last sequence on every terminal. Reach matrices come from one
level-by-level pass over the player's sequence tree for all K policies at once,
and the tensor is a single contraction (a Khatri-Rao product of the first N-1
reach matrices times the weighted last one), chunked over terminals to bound memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metaeval import games
from metaeval.runs import budget
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.spiel.policies import check_table, policy_table
from metaeval.spiel.population import check_joints
from metaeval.spiel.tree import GameTree, game_tree

#: Upper bound on the elements of one intermediate array of a contraction.
CHUNK_ELEMENTS = 1 << 22


def realisation_plans(tree: GameTree, player: int, tables: np.ndarray) -> np.ndarray:
    """Sequence-form weights ``[S*A + 1, K]`` of K policy tables ``[K, S, A]``.

    Row ``s`` is the product of the policy's probabilities along sequence s; the
    last row (index -1) is the empty sequence, weight 1.
    """
    layout = tree.players[player]
    num_actions = tree.num_actions
    probabilities = tables.reshape(tables.shape[0], -1).T  # [S*A, K]
    plans = np.ones((probabilities.shape[0] + 1, probabilities.shape[1]))
    for rows in layout.levels:
        sequences = (rows[:, None] * num_actions + np.arange(num_actions)).ravel()
        parents = np.repeat(layout.parent[rows], num_actions)
        plans[sequences] = plans[parents] * probabilities[sequences]
    return plans


class ExactEvaluator:
    """Exact payoffs of joint policies in one game, with caches for incremental updates.

    Reach columns are cached by ``(player, policy id)`` and the last payoff tensor
    by the ids along its axes, each together with the policy object (so a population
    of another lineage that reuses an id is recomputed): `metagame` then
    contracts only the slices of policies that changed.

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load] (enumerable).
    """

    def __init__(self, game):
        self.tree = game_tree(game)
        self._weighted_returns = self.tree.chance[:, None] * self.tree.returns  # [Z, N]
        self._reach_cache: list[dict[int, tuple[object, np.ndarray]]] = [
            {} for _ in range(self.tree.num_players)
        ]
        # Per player {id: policy} of the last tensor's axes, and the tensor.
        self._last_payoffs: tuple[list[dict[int, object]], np.ndarray] | None = None

    @property
    def num_players(self) -> int:
        return self.tree.num_players

    # -- reach ----------------------------------------------------------------
    def tables(self, player: int, policies: Sequence) -> np.ndarray:
        """The ``[K, S, A]`` tables of OpenSpiel policies (or of tables) for ``player``.

        Args:
            player: the player.
            policies: the player's policies, or their ``[S, A]`` tables.

        Returns:
            The tables ``[K, S, A]``.
        """
        layout = self.tree.players[player]
        if isinstance(policies, np.ndarray):
            policies = list(policies)
        return np.stack(
            [
                check_table(layout, pi, player) if isinstance(pi, np.ndarray) else policy_table(layout, pi, player)
                for pi in policies
            ]
        ).reshape(len(policies), *layout.legal.shape)

    def reach_matrix(self, player: int, policies: Sequence) -> np.ndarray:
        """``R_p [Z, K]``: reach of each policy (or ``[S, A]`` table) on every terminal.

        Args:
            player: the player.
            policies: the player's policies, or their ``[S, A]`` tables.

        Returns:
            The reach matrix ``[Z, K]``.
        """
        self._check_player(player)
        if len(policies) == 0:
            return np.ones((self.tree.num_terminals, 0))
        layout = self.tree.players[player]
        budget.check(budget.FLOAT * len(policies) * (self.tree.num_terminals + 2 * layout.legal.size),
                     f"the reach matrix of {len(policies)} policies over {self.tree.num_terminals:,} terminals")
        plans = realisation_plans(self.tree, player, self.tables(player, policies))
        return plans[self.tree.last_sequence[player]]

    def population_reaches(self, population) -> list[np.ndarray]:
        """Reach matrices of every player's policies, reusing cached columns by policy id.

        Args:
            population: a [`Population`][metaeval.spiel.Population] of ``game``.

        Returns:
            One reach matrix ``[Z, K_p]`` per player.
        """
        self._check_population(population)
        reaches = []
        for p, cache in enumerate(self._reach_cache):
            policies, ids = population.policies[p], population.ids[p]
            missing = [i for i, (pi, pid) in enumerate(zip(policies, ids))
                       if pid not in cache or cache[pid][0] is not pi]
            if missing:
                fresh = self.reach_matrix(p, [policies[i] for i in missing])
                for column, i in enumerate(missing):
                    cache[ids[i]] = (policies[i], fresh[:, column].copy())
            for stale in set(cache) - set(ids):
                del cache[stale]
            reaches.append(np.stack([cache[pid][1] for pid in ids], axis=1))
        return reaches

    # -- payoffs --------------------------------------------------------------
    def payoffs(self, reaches: Sequence[np.ndarray], joints=None) -> np.ndarray:
        """Expected returns from reach matrices.

        ``joints=None``: the tensor ``[N, K_1..K_N]``. ``joints`` an int array
        ``[M, N]``: the ``[M, N]`` payoff vectors of just those joint profiles.

        Args:
            reaches: one reach matrix per player.
            joints: the joint profiles to evaluate (None: all).

        Returns:
            The payoffs.
        """
        reaches = self._check_reaches(reaches)
        if joints is None:
            return self._tensor(reaches)
        joints = check_joints(joints, [r.shape[1] for r in reaches])
        result = np.empty((len(joints), self.num_players))
        step = max(1, CHUNK_ELEMENTS // max(1, self.tree.num_terminals))
        for start in range(0, len(joints), step):
            chunk = joints[start : start + step]
            reach = np.ones((self.tree.num_terminals, len(chunk)))
            for p, matrix in enumerate(reaches):
                reach *= matrix[:, chunk[:, p]]
            result[start : start + step] = reach.T @ self._weighted_returns
        return result

    def _tensor(self, reaches: list[np.ndarray]) -> np.ndarray:
        *leading, last = reaches
        sizes = [r.shape[1] for r in reaches]
        rows = int(np.prod(sizes[:-1]))
        weighted_last = (self._weighted_returns[:, :, None] * last[:, None, :]).reshape(len(last), -1)
        total = np.zeros((rows, weighted_last.shape[1]))
        step = max(1, CHUNK_ELEMENTS // max(1, rows))
        for start in range(0, self.tree.num_terminals, step):
            stop = start + step
            khatri_rao = np.ones((min(stop, self.tree.num_terminals) - start, 1))
            for matrix in leading:
                khatri_rao = (khatri_rao[:, :, None] * matrix[start:stop, None, :]).reshape(len(khatri_rao), -1)
            total += khatri_rao.T @ weighted_last[start:stop]
        # total[(k_1..k_{N-1}), (n, k_N)] -> [N, K_1..K_N]
        return np.moveaxis(total.reshape(*sizes[:-1], self.num_players, sizes[-1]), -2, 0)

    # -- meta-games -----------------------------------------------------------
    def metagame(self, population) -> MetaGame:
        """The exact meta-game of ``population``; only slices of new policies are computed.

        Args:
            population: a [`Population`][metaeval.spiel.Population] of ``game``.

        Returns:
            The meta-game.
        """
        budget.check_joints(population.sizes, self.num_players, "the exact meta-game")
        reaches = self.population_reaches(population)
        kept, fresh, old_positions = self._reusable(population)
        if all(kept):
            payoffs = np.empty((self.num_players, *population.sizes))
            payoffs[(slice(None), *np.ix_(*kept))] = self._last_payoffs[1][
                (slice(None), *np.ix_(*old_positions))
            ]
            # The joints involving a new policy are the disjoint blocks
            # kept_1 x .. x kept_{p-1} x fresh_p x all_{p+1} x .. x all_N.
            for p in range(self.num_players):
                if fresh[p]:
                    block = [*kept[:p], fresh[p], *(list(range(k)) for k in population.sizes[p + 1 :])]
                    payoffs[(slice(None), *np.ix_(*block))] = self._tensor(
                        [r[:, b] for r, b in zip(reaches, block)]
                    )
        else:
            payoffs = self._tensor(reaches)
        self._last_payoffs = (
            [dict(zip(ids, policies)) for ids, policies in zip(population.ids, population.policies)],
            payoffs,
        )
        return MetaGame(
            payoffs,
            strategy_names=population.strategy_names(),
            player_names=population.player_names(),
        )

    def _reusable(self, population):
        """Per player: indices already in the last tensor (same id and policy), the
        other indices, and where the kept ones sat in the last tensor."""
        kept = [[] for _ in population.ids]
        fresh = [list(range(k)) for k in population.sizes]
        positions = [[] for _ in population.ids]
        if self._last_payoffs is None:
            return kept, fresh, positions
        for p, (ids, policies, old) in enumerate(zip(population.ids, population.policies, self._last_payoffs[0])):
            old_index = {pid: i for i, pid in enumerate(old)}
            fresh[p] = []
            for i, (pid, pi) in enumerate(zip(ids, policies)):
                if old.get(pid) is pi:
                    kept[p].append(i)
                    positions[p].append(old_index[pid])
                else:
                    fresh[p].append(i)
        return kept, fresh, positions

    # -- checks ---------------------------------------------------------------
    def _check_player(self, player: int) -> None:
        if not 0 <= player < self.num_players:
            raise MetaEvalError(f"no player {player} in {self.tree.game_string}")

    def _check_population(self, population) -> None:
        if population.game_string != self.tree.game_string:
            raise MetaEvalError(
                f"the population is for {population.game_string}, the evaluator for {self.tree.game_string}"
            )

    def _check_reaches(self, reaches) -> list[np.ndarray]:
        reaches = [np.asarray(r, dtype=np.float64) for r in reaches]
        if len(reaches) != self.num_players:
            raise MetaEvalError(f"need {self.num_players} reach matrices, got {len(reaches)}")
        for p, r in enumerate(reaches):
            if r.ndim != 2 or r.shape[0] != self.tree.num_terminals or r.shape[1] == 0:
                raise MetaEvalError(
                    f"reach matrix of player {p} must be [{self.tree.num_terminals}, K>0], got {r.shape}"
                )
        return reaches


def exact_metagame(game, population, evaluator: ExactEvaluator | None = None) -> MetaGame:
    """The exact meta-game of ``population`` in ``game`` (maths, section 3).

    Pass the same ``evaluator`` across iterations of a loop to recompute only the
    slices of replaced policies.

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        evaluator: an [`ExactEvaluator`][metaeval.spiel.ExactEvaluator] of ``game`` to reuse (its cached reach columns).

    Returns:
        The meta-game.
    """
    game = games.load(game)
    evaluator = evaluator or ExactEvaluator(game)
    if evaluator.tree.game_string != str(game):
        raise MetaEvalError(f"the evaluator is for {evaluator.tree.game_string}, not {game}")
    return evaluator.metagame(population)
