"""MLP policies whose weights live on disk beyond a memory budget, and come back on demand.

    store = WeightStore(directory, budget=64 << 20)     # bytes of weights kept in memory
    policy = store.spill(MLPPolicy(game, 0, seed=3))     # written once; an MLP policy still
    evaluator.add(0, policy)

A `SpilledPolicy` answers exactly as the `MLPPolicy` it was made from: its weights are
written to a file of ``directory`` (their raw bytes, in the dtype they are held in, so they
come back bit for bit; the spilled policy keeps their layout) and read back, through the
store's cache, when the policy is asked: one read of a few tens of KiB, no archive to parse. The cache keeps the most recently asked policies, up to ``budget`` bytes of weights
(their host and device copies); the least recently asked beyond it are dropped. A
spilled policy never changes (its file is written once), so a snapshot of it is itself.

Pickled (for a Ray actor) a spilled policy is its file's path, the weights' layout and the budget: the actor
reads the weights from the same directory through a cache of its own, so an actor that
holds a thousand opponents holds no more weights than the budget either. Actors on other
machines need the directory on storage they share.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from pathlib import Path

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.errors import DamagedFileError, MetaEvalError
from metaeval.runs.fileio import atomic_write
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

    def get(self, spilled: SpilledPolicy) -> MLPPolicy:
        """The MLP policy of ``spilled``, from memory or read from its file (then kept)."""
        policy = self.loaded.pop(spilled.path, None)
        if policy is None:
            policy = spilled.read()
            self.reads += 1
            self.held += weight_bytes(policy)
        self.loaded[spilled.path] = policy
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
        self._numbers = itertools.count(len(list(self.directory.glob("policy-*.bin"))))

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
        path = self.directory / f"policy-{next(self._numbers):06d}.bin"
        while path.exists():
            path = self.directory / f"policy-{next(self._numbers):06d}.bin"
        leaves = [(layer, name, np.ascontiguousarray(leaf)) for layer in sorted(policy.params)
                  for name, leaf in sorted(policy.params[layer].items())]
        atomic_write(path, lambda handle: [handle.write(leaf.tobytes()) for *_, leaf in leaves])
        layout = tuple((layer, name, leaf.shape, leaf.dtype.str) for layer, name, leaf in leaves)
        spilled = SpilledPolicy(str(path), self.budget, str(policy.game), policy.player, policy.hidden,
                                policy.output, layout)
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
        hidden: the MLP's hidden widths.
        output: the MLP's output (``"softmax"`` or ``"greedy"``).
        layout: per weight, in file order, ``(layer, name, shape, dtype)``.
    """

    def __init__(self, path: str, budget: int, game: str, player: int, hidden, output: str, layout):
        super().__init__(games.load(game), [player])
        self.path, self.budget, self.player = path, budget, player
        self.hidden, self.output, self.layout = tuple(hidden), output, tuple(layout)

    @property
    def weights(self) -> MLPPolicy:
        """The MLP policy, from memory or from its file."""
        return _cache(str(Path(self.path).parent), self.budget).get(self)

    def read(self) -> MLPPolicy:
        """The MLP policy rebuilt from the file (a file cut short or missing: one line naming it).

        Returns:
            The policy.
        """
        try:
            raw = np.fromfile(self.path, dtype=np.uint8)
        except OSError as exc:
            raise DamagedFileError(f"spilled weights {self.path} cannot be read: {exc.strerror or exc}") from None
        sizes = [int(np.prod(shape)) * np.dtype(dtype).itemsize for _, _, shape, dtype in self.layout]
        if raw.size != sum(sizes):
            raise DamagedFileError(f"spilled weights {self.path} hold {raw.size} bytes, not {sum(sizes)}")
        params, offsets = {}, np.cumsum([0, *sizes])
        for (layer, name, shape, dtype), start, stop in zip(self.layout, offsets, offsets[1:]):
            params.setdefault(layer, {})[name] = raw[start:stop].view(dtype).reshape(shape)
        return MLPPolicy(self.game, self.player, hidden=self.hidden, params=params, output=self.output)

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
        return SpilledPolicy, (self.path, self.budget, str(self.game), self.player, self.hidden, self.output,
                               self.layout)
