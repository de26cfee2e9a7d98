"""Population: per-player lists of OpenSpiel policies with stable ids.

Ids are unique per player and never reused within a lineage (a population and
every population derived from it by ``replace``): a replaced policy gets a fresh
id from the player's counter ``next_ids[p]``. Caches of reach vectors and payoff
entries key on these ids, so a policy must not change once it is in a population
(random tabular policies are read-only for that reason).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.runs import budget
from metaeval.errors import DamagedFileError, IdenticalPoliciesWarning, MetaEvalError
from metaeval.runs.fileio import atomic_savez, json_entry, read_arrays
from metaeval.spiel.adapters import LazyRandomPolicy
from metaeval.spiel.policies import policy_table, random_table, tabular_policy
from metaeval.spiel.tree import game_tree

FILE_FORMAT = "metaeval.population/1"
OBJECTS_FORMAT = "metaeval.population-objects/1"


def check_seed(seed) -> int:
    """``seed`` as an int, or an error: runs must be reproducible, so no ``None``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MetaEvalError(f"seed must be a non-negative int (for reproducibility), got {seed!r}")
    return int(seed)


def policy_rng(seed: int, player: int, policy_id: int) -> np.random.Generator:
    """The generator of the random policy with this id: independent of creation order."""
    return np.random.default_rng(np.random.SeedSequence(check_seed(seed), spawn_key=(player, policy_id)))


def identical_groups(policies: Sequence, new: Collection[int] | None = None) -> list[list[int]]:
    """Indices of policies that are one policy: the same object, or tabular policies with
    exactly equal tables. With ``new``, only the groups holding one of those indices."""
    groups: dict = {}
    for i, policy in enumerate(policies):
        if isinstance(policy, policy_lib.TabularPolicy):
            table = policy.action_probability_array
            key = ("table", table.shape, table.tobytes())
        else:
            key = ("object", id(policy))
        groups.setdefault(key, []).append(i)
    return [g for g in groups.values() if len(g) > 1 and (new is None or not new.isdisjoint(g))]


def warn_identical(player: int, names: Sequence[str], policies: Sequence,
                   new: Collection[int] | None = None, stacklevel: int = 3) -> None:
    """Warn ([`IdenticalPoliciesWarning`][metaeval.errors.IdenticalPoliciesWarning]) about every group of `identical_groups`,
    naming its policies (with ``new``: each new one, and the others it equals)."""
    for group in identical_groups(policies, new):
        if new is None:
            what = f"{', '.join(repr(names[i]) for i in group)} are the same policy"
        else:
            added = [i for i in group if i in new]
            others = [repr(names[i]) for i in group if i != added[0]]
            what = f"{names[added[0]]!r} is the same policy as {', '.join(others)}"
        warnings.warn(f"player {player}: {what} (equal tables); they get equal payoffs and tie under every rater",
                      IdenticalPoliciesWarning, stacklevel=stacklevel)


@contextlib.contextmanager
def identical_policies_warned():
    """Silence [`IdenticalPoliciesWarning`][metaeval.errors.IdenticalPoliciesWarning] where the policies were checked when added
    (a saved population, the Evaluator's population)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdenticalPoliciesWarning)
        yield


def random_policies(game, player: int, ids: Sequence[int], seed, kind: str = "dirichlet", lazy: bool = False) -> list:
    """Random tabular policies of ``kind`` for ``player``, the one with id i from ``policy_rng(seed, player, i)``;
    ``lazy``: [`LazyRandomPolicy`][metaeval.spiel.LazyRandomPolicy] objects instead (no game tree), each seeded from that generator."""
    if lazy:
        return [lazy_random_policy(game, player, policy_rng(seed, player, i), kind) for i in ids]
    layout = game_tree(game).players[player]
    budget.check(budget.FLOAT * len(ids) * layout.legal.size,
                 f"{len(ids)} tabular policies of player {player} ({layout.legal.shape[0]} information states)")
    return [tabular_policy(layout, random_table(layout, policy_rng(seed, player, i), kind)) for i in ids]


def lazy_random_policy(game, player: int, rng: np.random.Generator, kind: str = "dirichlet") -> LazyRandomPolicy:
    """A random policy of ``kind`` drawn state by state (no game tree), seeded from ``rng``."""
    return LazyRandomPolicy(game, player, int(rng.integers(2**63)), kind)


class Population:
    """Per-player lists of policies (``policies[p][i]``) with ids (``ids[p][i]``).

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
        policies: one non-empty sequence of OpenSpiel policies per player.
        ids: ints unique per player; default ``0..K_p-1``.
        next_ids: per player, the next unused id (default: one past the largest).
    """

    def __init__(self, game, policies, ids=None, next_ids=None):
        self.game = games.load(game)
        self.game_string = str(self.game)
        num_players = self.game.num_players()
        policies = [list(player) for player in policies]
        if len(policies) != num_players:
            raise MetaEvalError(f"{self.game_string} has {num_players} players; got {len(policies)} policy lists")
        for p, player in enumerate(policies):
            if not player:
                raise MetaEvalError(f"player {p} has an empty population; every player needs a policy")
            for policy in player:
                if not isinstance(policy, (policy_lib.Policy, pyspiel.Policy)):
                    raise MetaEvalError(
                        f"player {p}: expected OpenSpiel policies, got {type(policy).__name__}"
                    )
        self.policies = tuple(tuple(player) for player in policies)
        self.ids = self._check_ids(ids)
        self.next_ids = self._check_next_ids(next_ids)
        for p, names in enumerate(self.strategy_names()):
            warn_identical(p, names, self.policies[p])

    def _check_ids(self, ids) -> tuple[tuple[int, ...], ...]:
        if ids is None:
            return tuple(tuple(range(k)) for k in self.sizes)
        ids = [[int(i) for i in player] for player in ids]
        if [len(player) for player in ids] != list(self.sizes):
            raise MetaEvalError(f"ids have sizes {[len(p) for p in ids]}, policies {list(self.sizes)}")
        for p, player in enumerate(ids):
            if len(set(player)) != len(player) or min(player) < 0:
                raise MetaEvalError(f"ids of player {p} must be distinct non-negative ints, got {player}")
        return tuple(tuple(player) for player in ids)

    def _check_next_ids(self, next_ids) -> tuple[int, ...]:
        smallest = tuple(max(player) + 1 for player in self.ids)
        if next_ids is None:
            return smallest
        next_ids = tuple(int(i) for i in next_ids)
        if len(next_ids) != self.num_players or any(n < s for n, s in zip(next_ids, smallest)):
            raise MetaEvalError(f"next_ids {next_ids} must exceed every used id (at least {smallest})")
        return next_ids

    # -- shape --------------------------------------------------------------
    @property
    def num_players(self) -> int:
        return len(self.policies)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(player) for player in self.policies)

    def __repr__(self) -> str:
        return f"Population({self.game_string!r}, sizes={self.sizes})"

    def strategy_names(self) -> list[list[str]]:
        """Meta-game strategy names: ``"policy <id>"``.

        Returns:
            The names, one list per player.
        """
        return [[f"policy {i}" for i in ids] for ids in self.ids]

    def player_names(self) -> list[str]:
        """Meta-game player names: ``"<game short name> player <p>"``.

        Returns:
            The names.
        """
        short_name = self.game.get_type().short_name
        return [f"{short_name} player {p}" for p in range(self.num_players)]

    # -- construction ---------------------------------------------------------
    @classmethod
    def random(cls, game, size, seed, kind: str = "dirichlet", lazy: bool = False) -> Population:
        """Random tabular policies (maths, section 3): ``size`` per player (an int or one per player).

        The policy with id i of player p is drawn from ``policy_rng(seed, p, i)``; ``lazy``:
        drawn state by state when asked ([`LazyRandomPolicy`][metaeval.spiel.LazyRandomPolicy]), for
        games too large to enumerate.

        Args:
            game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
            size: policies per player.
            seed: the seed the policies are drawn from.
            kind: the law of a random policy (``spiel.KINDS``).
            lazy: draw the policies state by state when asked.

        Returns:
            The population.
        """
        game = games.load(game)
        sizes = _sizes(size, game.num_players())
        return cls(game, [random_policies(game, p, range(k), seed, kind, lazy) for p, k in enumerate(sizes)])

    def replace(self, player: int, indices: Sequence[int], policies: Sequence) -> Population:
        """A population with ``policies`` at ``indices`` of ``player``, under fresh ids.

        Args:
            player: the player.
            indices: the positions replaced.
            policies: the new policies, one per position.

        Returns:
            The new population (this one is unchanged).
        """
        self._check_player(player)
        indices = [int(i) for i in indices]
        policies = list(policies)
        if len(indices) != len(policies):
            raise MetaEvalError(f"replace: {len(indices)} indices but {len(policies)} policies")
        if len(set(indices)) != len(indices):
            raise MetaEvalError(f"replace: repeated index in {indices}")
        bad = [i for i in indices if not 0 <= i < self.sizes[player]]
        if bad:
            raise MetaEvalError(f"replace: player {player} has {self.sizes[player]} policies, no index {bad}")
        new_policies = [list(p) for p in self.policies]
        new_ids = [list(p) for p in self.ids]
        next_ids = list(self.next_ids)
        for index, policy in zip(indices, policies):
            new_policies[player][index] = policy
            new_ids[player][index] = next_ids[player]
            next_ids[player] += 1
        return Population(self.game, new_policies, new_ids, next_ids)

    def replace_random(self, player: int, indices: Sequence[int], seed, kind: str = "dirichlet",
                       lazy: bool = False) -> Population:
        """Replace ``indices`` of ``player`` by random policies drawn from ``policy_rng(seed, player, id)``.

        Args:
            player: the player.
            indices: the positions replaced.
            seed: the population's seed.
            kind: the law of a random policy.
            lazy: draw the policies state by state when asked.

        Returns:
            The new population (this one is unchanged).
        """
        self._check_player(player)
        indices = list(indices)
        first = self.next_ids[player]
        new_ids = range(first, first + len(indices))
        return self.replace(player, indices, random_policies(self.game, player, new_ids, seed, kind, lazy))

    def _check_player(self, player: int) -> None:
        if not 0 <= player < self.num_players:
            raise MetaEvalError(f"no player {player} in a {self.num_players}-player population")

    # -- persistence ----------------------------------------------------------
    def save(self, path, tables: bool = True) -> Path:
        """Write the game string, ids and every policy's ``[S_p, A]`` table to ``.npz`` (atomically).

        Non-tabular policies are stored as their tables, so they load as ``TabularPolicy``.
        ``tables=False`` (sampled mode) stores the policy objects themselves, pickled with
        cloudpickle, without the game tree: load such a file only from a source you trust.

        Args:
            path: the file to write.
            tables: store tables (True) or the pickled policy objects (False).

        Returns:
            The path written.
        """
        if not tables:
            return self._save_objects(path)
        tree = game_tree(self.game)
        arrays = {}
        for p, layout in enumerate(tree.players):
            arrays[f"tables_{p}"] = np.stack([policy_table(layout, pi, p) for pi in self.policies[p]])
            arrays[f"ids_{p}"] = np.array(self.ids[p], dtype=np.int64)
        header = {
            "format": FILE_FORMAT,
            "game": self.game_string,
            "next_ids": list(self.next_ids),
            "layouts": [layout.fingerprint for layout in tree.players],
        }
        return atomic_savez(path, header=np.array(json.dumps(header)), **arrays)

    def _save_objects(self, path) -> Path:
        import cloudpickle

        arrays = {}
        for p, policies in enumerate(self.policies):
            try:
                arrays[f"objects_{p}"] = np.frombuffer(cloudpickle.dumps(list(policies)), dtype=np.uint8)
            except Exception as exc:  # pickling errors come in many types
                raise MetaEvalError(f"cannot save the policies of player {p}: {exc}") from None
            arrays[f"ids_{p}"] = np.array(self.ids[p], dtype=np.int64)
        header = {"format": OBJECTS_FORMAT, "game": self.game_string, "next_ids": list(self.next_ids)}
        return atomic_savez(path, header=np.array(json.dumps(header)), **arrays)

    @classmethod
    def load(cls, path) -> Population:
        """Read a population written by `save`; tables come back bit for bit.

        Args:
            path: the file.

        Returns:
            The population.
        """
        path = Path(path)
        arrays = read_arrays(path, "a population")
        header = json_entry(arrays, "header", "a population", path)
        if isinstance(header, dict) and header.get("format") == OBJECTS_FORMAT:
            return cls._load_objects(path, header, arrays)
        if not isinstance(header, dict) or header.get("format") != FILE_FORMAT:
            raise MetaEvalError(f"{path} is not a population file (format {FILE_FORMAT})")
        tree = game_tree(games.load(header.get("game")))
        if header.get("layouts") != [layout.fingerprint for layout in tree.players]:
            raise MetaEvalError(
                f"{path}: its information states do not match those of {tree.game_string} "
                "in this OpenSpiel version"
            )
        policies, ids = [], []
        for p, layout in enumerate(tree.players):
            try:
                tables, player_ids = arrays[f"tables_{p}"], arrays[f"ids_{p}"]
            except KeyError as exc:
                raise MetaEvalError(f"{path} lacks array {exc} for player {p}") from None
            if tables.ndim != 3 or len(player_ids) != len(tables):
                raise MetaEvalError(f"{path}: player {p} has {len(player_ids)} ids for tables {tables.shape}")
            policies.append([tabular_policy(layout, table) for table in tables])
            ids.append(player_ids.tolist())
        with identical_policies_warned():
            return cls(tree.game, policies, ids, header.get("next_ids"))


    @classmethod
    def _load_objects(cls, path: Path, header: dict, arrays: dict) -> Population:
        import pickle

        game = games.load(header.get("game"))
        policies, ids = [], []
        for p in range(game.num_players()):
            try:
                policies.append(pickle.loads(arrays[f"objects_{p}"].tobytes()))
                ids.append(arrays[f"ids_{p}"].tolist())
            except KeyError as exc:
                raise MetaEvalError(f"{path} lacks array {exc} for player {p}") from None
            except Exception as exc:  # unpickling errors come in many types
                raise DamagedFileError(f"{path}: cannot read the policies of player {p}: {exc}") from None
        return cls(game, policies, ids, header.get("next_ids"))


def _sizes(size, num_players: int) -> tuple[int, ...]:
    sizes = (size,) * num_players if np.isscalar(size) else tuple(size)
    if len(sizes) != num_players or any(int(k) != k or k < 1 for k in sizes):
        raise MetaEvalError(
            f"size must be a positive int or {num_players} positive ints (one per player), got {size!r}"
        )
    return tuple(int(k) for k in sizes)


def check_joints(joints, sizes: Sequence[int]) -> np.ndarray:
    """``joints`` as an int array ``[M, N]`` of policy indices within ``sizes``, or a clear error."""
    joints = np.asarray(joints)
    if joints.size == 0:
        joints = joints.astype(np.int64).reshape(0, len(sizes))
    if joints.ndim != 2 or joints.shape[1] != len(sizes) or not np.issubdtype(joints.dtype, np.integer):
        raise MetaEvalError(f"joints must be an int array [M, {len(sizes)}], got {joints.dtype} {joints.shape}")
    if np.any(joints < 0) or np.any(joints >= np.asarray(sizes)):
        raise MetaEvalError(f"joints must index policies within sizes {list(sizes)}")
    return joints
