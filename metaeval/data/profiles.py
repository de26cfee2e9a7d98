"""Preference profiles: weighted rankings of alternatives, the input of social choice.

How evaluation data becomes a profile (Lanctot et al. 2023, section 4):

- a score table (agents x tasks): each task is a voter ranking the agents it scored, by
  decreasing score; agents with a missing score are left out of that vote;
- a MetaGame, for player p: each joint strategy of the other players is a voter ranking
  p's strategies by p's payoff there (so an agent-vs-task game gives the table's votes).

Tied values are broken by a seeded random order, drawn once per vote, so the same
profile (and so the same tie-breaking) serves every method; the seed is recorded in
``tie_seed``. A vote whose values are all equal expresses no preference and is dropped
(counted in ``dropped``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame


@dataclass(frozen=True, eq=False)
class Profile:
    """Votes over ``alternatives``: ``votes[v]`` lists alternative indices best first (a
    vote may leave alternatives out), cast ``weights[v]`` times (positive integers)."""

    alternatives: tuple[str, ...]
    votes: tuple[tuple[int, ...], ...]
    weights: tuple[int, ...]
    tie_seed: int | None = None
    dropped: int = 0

    def __post_init__(self):
        m = len(self.alternatives)
        if m == 0:
            raise MetaEvalError("a profile needs at least one alternative")
        if len(set(self.alternatives)) != m:
            raise MetaEvalError("a profile's alternatives must have distinct names")
        if not self.votes:
            raise MetaEvalError("a profile needs at least one vote that ranks two alternatives")
        if len(self.weights) != len(self.votes):
            raise MetaEvalError(f"{len(self.votes)} votes but {len(self.weights)} weights")
        if any(int(w) != w or w <= 0 for w in self.weights):
            raise MetaEvalError("vote weights must be positive integers (counts of identical votes)")
        for vote in self.votes:
            if len(set(vote)) != len(vote) or any(not 0 <= i < m for i in vote):
                raise MetaEvalError(f"a vote must list distinct alternatives among {m}, got {vote}")

    @classmethod
    def from_rankings(cls, rankings: Sequence[Sequence[str]], weights: Sequence[int] | None = None,
                      alternatives: Sequence[str] | None = None) -> Profile:
        """Votes given as lists of names, best first; alternatives default to first appearance.

        Args:
            rankings: the votes, each a list of alternatives' names, best first.
            weights: each vote's weight (default: 1 each).
            alternatives: every alternative's name, in the profile's order.

        Returns:
            The profile.
        """
        if alternatives is None:
            alternatives = list(dict.fromkeys(str(a) for vote in rankings for a in vote))
        alternatives = tuple(str(a) for a in alternatives)
        index = {a: i for i, a in enumerate(alternatives)}
        try:
            votes = tuple(tuple(index[str(a)] for a in vote) for vote in rankings)
        except KeyError as exc:
            raise MetaEvalError(f"vote names unknown alternative {exc.args[0]!r}") from None
        weights = tuple(1 for _ in votes) if weights is None else tuple(weights)
        return cls(alternatives, votes, weights)

    @classmethod
    def from_values(cls, values, alternatives: Sequence[str], weights: Sequence[int] | None = None,
                    seed: int = 0) -> Profile:
        """One vote per row of ``values [voters, alternatives]`` (NaN: not ranked), by
        decreasing value, ties broken by a random order drawn from ``seed``.

        Args:
            values: the values ``[voters, alternatives]``.
            alternatives: the alternatives' names.
            weights: each vote's weight (default: 1 each).
            seed: the seed of the tie-breaking order.

        Returns:
            The profile.
        """
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(alternatives):
            raise MetaEvalError(f"values must be [voters, {len(alternatives)}], got shape {values.shape}")
        weights = [1] * len(values) if weights is None else list(weights)
        if len(weights) != len(values):
            raise MetaEvalError(f"{len(values)} voters but {len(weights)} weights")
        rng = np.random.default_rng(seed)
        votes, kept, dropped = [], [], 0
        for row, weight in zip(values, weights):
            tie_break = rng.permutation(len(row))  # drawn for every row: votes stay aligned
            ranked = np.flatnonzero(~np.isnan(row))
            if len(ranked) < 2 or np.ptp(row[ranked]) == 0:
                dropped += 1
                continue
            order = np.lexsort((tie_break[ranked], -row[ranked]))
            votes.append(tuple(int(i) for i in ranked[order]))
            kept.append(weight)
        return cls(tuple(str(a) for a in alternatives), tuple(votes), tuple(kept), seed, dropped)

    @classmethod
    def from_table(cls, table: pd.DataFrame, weights: Sequence[int] | None = None, seed: int = 0) -> Profile:
        """Each task (column) votes for the agents (rows) by decreasing score.

        Args:
            table: a score table, agents as rows, tasks as columns.
            weights: each task's weight (default: 1 each).
            seed: the seed of the tie-breaking order.

        Returns:
            The profile.
        """
        from metaeval.data.tables import check_table

        table = check_table(table)
        return cls.from_values(table.to_numpy().T, list(table.index), weights, seed)

    @classmethod
    def from_game(cls, game: MetaGame, player: int = 0, seed: int = 0) -> Profile:
        """Each joint strategy of the other players votes for ``player``'s strategies.

        Args:
            game: the meta-game.
            player: the player whose strategies are elected.
            seed: the seed of the tie-breaking order.

        Returns:
            The profile.
        """
        values = np.moveaxis(game.payoffs[player], player, -1).reshape(-1, game.shape[player])
        return cls.from_values(values, game.strategy_names[player], seed=seed)

    def preferences(self) -> np.ndarray:
        """N[x, y]: total weight of votes ranking x above y.

        Returns:
            The counts ``[m, m]``.
        """
        m = len(self.alternatives)
        counts = np.zeros((m, m), dtype=np.int64)
        for vote, weight in zip(self.votes, self.weights):
            vote = np.asarray(vote)
            above = np.triu(np.ones((len(vote), len(vote)), dtype=bool), 1)
            rows, cols = np.nonzero(above)
            np.add.at(counts, (vote[rows], vote[cols]), weight)
        return counts

    def margins(self) -> np.ndarray:
        """delta(x, y) = N(x, y) - N(y, x), antisymmetric.

        Returns:
            The margins ``[m, m]``.
        """
        counts = self.preferences()
        return counts - counts.T

    def to_openspiel(self):
        """The same profile as an ``open_spiel.python.voting.base.PreferenceProfile``.

        Returns:
            The OpenSpiel profile.
        """
        from open_spiel.python.voting import base

        votes = [base.WeightedVote(int(w), [self.alternatives[i] for i in v])
                 for v, w in zip(self.votes, self.weights)]
        return base.PreferenceProfile(votes=votes, alternatives=list(self.alternatives))
