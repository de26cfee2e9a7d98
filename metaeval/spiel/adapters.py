"""Policies that are not tables: a plain callable, and random policies drawn state by state.

Neither needs the game tree, so both work in games far too large to enumerate
(sampled meta-games, [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator] with ``mode="sampled"``).

    policy = spiel.CallablePolicy(lambda state, player: {0: 0.5, 1: 0.5})
    policy = spiel.CallablePolicy(net_probabilities, game)   # a vector over all actions
    policy = spiel.LazyRandomPolicy(game, player=0, seed=3)  # Dirichlet(1) at every state
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval.errors import MetaEvalError
from metaeval.spiel.policies import KINDS, PROBABILITY_TOLERANCE, SUM_TOLERANCE, action_index, where
from metaeval.spiel.tree import infostate_key

#: Information states whose drawn probabilities a ``LazyRandomPolicy`` keeps.
CACHED_STATES = 1 << 16


class CallablePolicy(policy_lib.Policy):
    """An OpenSpiel policy answering with ``fn(state, player)``.

    ``fn`` returns the action probabilities of ``player`` at ``state``: a mapping
    ``{action: probability}``, or a vector over all ``game.num_distinct_actions()``
    actions (a network's masked output) whose mass must lie on legal actions. Each
    answer is checked (non-negative, sums to 1), and a bad one is a ``MetaEvalError``
    naming the state.

    Args:
        fn: ``fn(state, player) -> probabilities``.
        game: the game ``fn`` is for (optional; checked against the evaluator's).
        player_ids: the players it plays (default: any).
    """

    def __init__(self, fn: Callable, game=None, player_ids=None):
        if not callable(fn):
            raise MetaEvalError(f"CallablePolicy needs a callable fn(state, player), got {type(fn).__name__}")
        super().__init__(game, player_ids)
        self.fn = fn

    def __repr__(self) -> str:
        return f"CallablePolicy({getattr(self.fn, '__qualname__', type(self.fn).__name__)})"

    def action_probabilities(self, state, player_id=None):
        player = state.current_player() if player_id is None else player_id
        answer = self.fn(state, player)
        if isinstance(answer, Mapping):
            probabilities = {action_index(a, self, state, player): float(p) for a, p in answer.items()}
        else:
            vector = np.asarray(answer, dtype=np.float64).ravel()
            num_actions = state.get_game().num_distinct_actions()
            if vector.shape != (num_actions,):
                raise MetaEvalError(f"the policy's fn returned {vector.shape[0]} probabilities at {where(state, player)}; "
                                    f"expected a mapping or one per action ({num_actions})")
            probabilities = {a: float(p) for a, p in enumerate(vector) if p != 0}
        _check(probabilities, state, player)
        return probabilities


def _check(probabilities: dict[int, float], state, player: int) -> None:
    legal = set(state.legal_actions(player))
    values = np.fromiter(probabilities.values(), dtype=np.float64, count=len(probabilities))
    if not values.size or not np.all(np.isfinite(values)) or values.min() < -PROBABILITY_TOLERANCE:
        raise MetaEvalError(f"the policy's probabilities at {where(state, player)} are not a distribution: {probabilities}")
    if abs(values.sum() - 1) > SUM_TOLERANCE:
        raise MetaEvalError(f"the policy's probabilities at {where(state, player)} sum to {values.sum():.6g}, not 1")
    illegal = [a for a, p in probabilities.items() if a not in legal and p > PROBABILITY_TOLERANCE]
    if illegal:
        raise MetaEvalError(f"the policy puts mass on illegal action(s) {illegal} at {where(state, player)}")


class LazyRandomPolicy(policy_lib.Policy):
    """A random policy of ``kind`` (see `metaeval.spiel.KINDS`) drawn at each
    information state when first asked, from a generator seeded by ``seed``, the player
    and the state's key: the same policy in every process, without enumerating the game.

    The random tabular policies of the maths page (section 3), defined state by state: the same law (for
    ``dirichlet``, normalised Exp(1) draws over the legal actions), other draws.

    Args:
        game: the game.
        player: the player.
        seed: the seed of the draws.
        kind: the law of a random policy.
    """

    def __init__(self, game, player: int, seed: int, kind: str = "dirichlet"):
        if kind not in KINDS:
            raise MetaEvalError(f"unknown policy kind {kind!r}; choose one of {', '.join(KINDS)}")
        super().__init__(game, [player])
        self.player, self.seed, self.kind = int(player), int(seed), kind
        self._type = game.get_type()
        self._cache: dict[str, dict[int, float]] = {}

    def action_probabilities(self, state, player_id=None):
        key = infostate_key(self._type, state, self.player)
        probabilities = self._cache.get(key)
        if probabilities is None:
            probabilities = self._draw(key, state.legal_actions(self.player))
            if len(self._cache) >= CACHED_STATES:
                self._cache.clear()
            self._cache[key] = probabilities
        return probabilities

    def _draw(self, key: str, legal: list[int]) -> dict[int, float]:
        digest = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(self.player, digest)))
        if self.kind == "dirichlet":
            weights = rng.standard_exponential(len(legal))
        elif self.kind == "uniform":
            weights = np.ones(len(legal))
        else:
            weights = np.zeros(len(legal))
            weights[rng.integers(len(legal))] = 1.0
        weights /= weights.sum()
        return {int(a): float(w) for a, w in zip(legal, weights)}

    def __getstate__(self):
        return {**self.__dict__, "_cache": {}}  # drawn again where it is used
