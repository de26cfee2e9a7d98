"""Tokens that name policy objects across builds, for the evaluators' caches.

Policy ids are stable within a population's lineage, but another population (or
one loaded from disk) may use the same id for a different object. A token names
one ``(player, policy id, object)``; the registry holds the object, so a token is
never reused for another policy, and caches keyed by tokens stay correct.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field


@dataclass
class Sync:
    """What changed since the last `PolicyRegistry.sync`.

    Attributes:
        tokens: per player, the token of each policy of the population, by index.
        added: token -> ``(player, policy id, policy)``, for policies not seen before.
        dropped: tokens of policies no longer in the population.
    """

    @property
    def new_policies(self) -> dict[int, object]:
        """token -> policy, for the added policies."""
        return {token: policy for token, (_, _, policy) in self.added.items()}

    tokens: list[list[int]]
    added: dict[int, tuple[int, int, object]] = field(default_factory=dict)
    dropped: list[int] = field(default_factory=list)


class PolicyRegistry:
    """Tokens for the policies of the population last synced (and only those)."""

    def __init__(self):
        self._entries: dict[tuple[int, int], tuple[object, int]] = {}
        self._counter = itertools.count()

    def sync(self, population) -> Sync:
        """Give every policy of ``population`` a token, and forget all other policies."""
        entries, result = {}, Sync(tokens=[])
        for player, (ids, policies) in enumerate(zip(population.ids, population.policies)):
            tokens = []
            for policy_id, policy in zip(ids, policies):
                key = (player, int(policy_id))
                entry = self._entries.get(key)
                if entry is None or entry[0] is not policy:
                    entry = (policy, next(self._counter))
                    result.added[entry[1]] = (player, int(policy_id), policy)
                entries[key] = entry
                tokens.append(entry[1])
            result.tokens.append(tokens)
        live = {token for _, token in entries.values()}
        result.dropped = [token for _, token in self._entries.values() if token not in live]
        self._entries = entries
        return result
