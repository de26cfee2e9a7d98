"""MLP policies whose weights live on disk beyond a memory budget, and come back on demand.

    store = WeightStore(directory, budget=64 << 20)     # bytes of weights kept in memory
    policy = store.spill(MLPPolicy(game, 0, seed=3))     # written once; an MLP policy still
    evaluator.add(0, policy)

A `SpilledPolicy` answers exactly as the `MLPPolicy` it was made from: its weights are
written to ``directory`` (``.npz``, the policy's own `save` format, float32 as held, so
they come back bit for bit) and read back, through the store's cache, when the policy is
asked. The cache keeps the most recently asked policies, up to ``budget`` bytes of weights
(their host and device copies); the least recently asked beyond it are dropped. A
spilled policy never changes (its file is written once), so a snapshot of it is itself.

Pickled (for a Ray actor) a spilled policy is its file's path and the budget: the actor
reads the weights from the same directory through a cache of its own, so an actor that
holds a thousand opponents holds no more weights than the budget either. Actors on other
machines need the directory on storage they share.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from pathlib import Path

from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.spiel.mlp import MLPPolicy


def weight_bytes(policy: MLPPolicy) -> int:
    """Bytes a policy's weights hold in memory once asked: host and device copies.

    Args:
        policy: an MLP policy.

    Returns:
        The bytes.
    """
    return 2 * sum(leaf.nbytes for layer in policy.params.values() for leaf in layer.values())


class WeightCache:
    """The policies loaded in this process for one directory, least recently asked first."""

    def __init__(self, budget: int):
        self.budget = budget
        self.loaded: OrderedDict[str, MLPPolicy] = OrderedDict()
        self.held = 0
        self.reads = 0

    def get(self, path: str) -> MLPPolicy:
        """The policy saved at ``path``, from memory or read from its file (then kept)."""
        policy = self.loaded.pop(path, None)
        if policy is None:
            policy = MLPPolicy.load(path)
            self.reads += 1
            self.held += weight_bytes(policy)
        self.loaded[path] = policy
        self._trim()
        return policy

    def put(self, path: str, policy: MLPPolicy) -> None:
        """Keep ``policy``, just saved at ``path``."""
        self.loaded[path] = policy
        self.held += weight_bytes(policy)
        self._trim()

    def _trim(self) -> None:
        while self.held > self.budget and len(self.loaded) > 1:
            _, dropped = self.loaded.popitem(last=False)
            self.held -= weight_bytes(dropped)


#: One cache per (directory, budget) in each process: the store's in the driver, and one
#: in each actor that unpickles spilled policies.
_CACHES: dict[tuple[str, int], WeightCache] = {}


def _cache(directory: str, budget: int) -> WeightCache:
    return _CACHES.setdefault((directory, budget), WeightCache(budget))


class WeightStore:
    """Spills MLP policies to ``directory``, keeping at most ``budget`` bytes of weights in memory.

    Args:
        directory: where the weights are written (created if needed).
        budget: bytes of weights (host and device copies) kept in memory in each process.
    """

    def __init__(self, directory, budget: int):
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise MetaEvalError(f"budget must be a non-negative int of bytes, got {budget!r}")
        self.directory = Path(directory).resolve()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetaEvalError(f"cannot write spilled weights to {self.directory}: {exc.strerror or exc}") from None
        self.budget = budget
        self._numbers = itertools.count(len(list(self.directory.glob("policy-*.npz"))))

    @property
    def cache(self) -> WeightCache:
        """This process's cache of the store's policies (what it holds, what it read back)."""
        return _cache(str(self.directory), self.budget)

    def spill(self, policy: MLPPolicy) -> SpilledPolicy:
        """Write ``policy``'s weights to a new file; returns the policy that reads them back.

        Args:
            policy: an MLP policy.

        Returns:
            The spilled policy.
        """
        if not isinstance(policy, MLPPolicy):
            raise MetaEvalError(f"only MLP policies can be spilled, got {type(policy).__name__}")
        path = self.directory / f"policy-{next(self._numbers):06d}.npz"
        while path.exists():
            path = self.directory / f"policy-{next(self._numbers):06d}.npz"
        policy.save(path)
        spilled = SpilledPolicy(str(path), self.budget, str(policy.game), policy.player)
        self.cache.put(spilled.path, policy)
        return spilled


class SpilledPolicy(policy_lib.Policy):
    """An MLP policy read from ``path`` when asked (through its process's cache of ``budget`` bytes);
    made by [`WeightStore.spill`][metaeval.spiel.spill.WeightStore.spill].

    Args:
        path: the file its weights were saved to.
        budget: bytes of weights the cache it is read through keeps.
        game: the game's name.
        player: the player it acts for.
    """

    def __init__(self, path: str, budget: int, game: str, player: int):
        super().__init__(games.load(game), [player])
        self.path, self.budget, self.player = path, budget, player

    @property
    def weights(self) -> MLPPolicy:
        """The MLP policy, from memory or from its file."""
        return _cache(str(Path(self.path).parent), self.budget).get(self.path)

    def batch_probabilities(self, observations, legal):
        """As [`MLPPolicy.batch_probabilities`][metaeval.spiel.mlp.MLPPolicy.batch_probabilities].

        Args:
            observations: the acting player's tensors ``[B, D]``.
            legal: the legal-action masks ``[B, A]``.

        Returns:
            The probabilities ``[B, A]``.
        """
        return self.weights.batch_probabilities(observations, legal)

    def action_probabilities(self, state, player_id=None):
        """As OpenSpiel's ``Policy.action_probabilities``.

        Args:
            state: the state.
            player_id: the acting player (default: the policy's).

        Returns:
            Action -> probability, over the legal actions.
        """
        return self.weights.action_probabilities(state, player_id)

    def __deepcopy__(self, memo):
        return self  # its file is written once: nothing can change it

    def __reduce__(self):
        return SpilledPolicy, (self.path, self.budget, str(self.game), self.player)
