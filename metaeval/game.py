"""MetaGame: the normal-form game between strategies (policies, models, tasks).

Payoffs are a float64 tensor of shape ``[N, K_1, ..., K_N]``; ``payoffs[p][a]`` is
player p's payoff at the joint strategy ``a`` (maths, section 1).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.runs.fileio import atomic_savez, json_entry, read_arrays


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64, copy=True)
    array.setflags(write=False)
    return array


def _real_array(label: str, values) -> np.ndarray:
    """``values`` as float64; complex numbers are refused, not silently cut to their real part."""
    if np.iscomplexobj(values):
        raise MetaEvalError(f"{label} must be real numbers, got complex ones")
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetaEvalError(f"{label} must be numeric: {exc}") from None


class MetaGame:
    """An N-player normal-form game, validated on construction and immutable.

    Args:
        payoffs: array ``[N, K_1, ..., K_N]``.
        strategy_names: one sequence of K_p names per player (default ``"p{p}s{i}"``).
        player_names: N names (default ``"player 0"``, ...).
        counts: optional per-joint sample counts, shape ``[K_1, ..., K_N]``.
        stderr: optional per-entry standard errors, shape ``[N, K_1, ..., K_N]``.
    """

    def __init__(
        self,
        payoffs,
        strategy_names: Sequence[Sequence[str]] | None = None,
        player_names: Sequence[str] | None = None,
        counts=None,
        stderr=None,
    ):
        payoffs = _real_array("payoffs", payoffs)
        if payoffs.ndim < 2:
            raise MetaEvalError(
                f"payoffs must have shape [N, K_1, ..., K_N]; got an array of rank {payoffs.ndim}"
            )
        num_players = payoffs.shape[0]
        if payoffs.ndim != num_players + 1:
            raise MetaEvalError(
                f"payoffs of shape {payoffs.shape} are inconsistent: the first axis says "
                f"{num_players} players, so the rank must be {num_players + 1}, not {payoffs.ndim}"
            )
        if num_players < 1:
            raise MetaEvalError("a game needs at least one player")
        for p, k in enumerate(payoffs.shape[1:]):
            if k < 1:
                raise MetaEvalError(f"player {p} has 0 strategies; every player needs at least one")
        if not np.all(np.isfinite(payoffs)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(payoffs))[0])
            raise MetaEvalError(
                f"payoffs must be finite; entry {bad} (player, joint strategy) is {payoffs[bad]}"
            )
        self.payoffs = _frozen(payoffs)
        self.player_names = self._check_player_names(player_names)
        self.strategy_names = self._check_strategy_names(strategy_names)
        self.counts = None if counts is None else self._check_extra("counts", counts, self.shape)
        self.stderr = (
            None if stderr is None else self._check_extra("stderr", stderr, self.payoffs.shape)
        )

    # -- validation ---------------------------------------------------------
    def _check_player_names(self, names) -> tuple[str, ...]:
        if names is None:
            return tuple(f"player {p}" for p in range(self.num_players))
        names = tuple(str(n) for n in names)
        if len(names) != self.num_players:
            raise MetaEvalError(
                f"player_names has {len(names)} names but the game has {self.num_players} players"
            )
        return names

    def _check_strategy_names(self, names) -> tuple[tuple[str, ...], ...]:
        if names is None:
            return tuple(
                tuple(f"p{p}s{i}" for i in range(k)) for p, k in enumerate(self.shape)
            )
        names = tuple(tuple(str(n) for n in player) for player in names)
        if len(names) != self.num_players:
            raise MetaEvalError(
                f"strategy_names has {len(names)} lists but the game has {self.num_players} players"
            )
        for p, (player, k) in enumerate(zip(names, self.shape)):
            if len(player) != k:
                raise MetaEvalError(
                    f"strategy_names[{p}] has {len(player)} names but player {p} has {k} strategies"
                )
        return names

    @staticmethod
    def _check_extra(label: str, values, shape) -> np.ndarray:
        values = _real_array(label, values)
        if values.shape != tuple(shape):
            raise MetaEvalError(f"{label} must have shape {tuple(shape)}, got {values.shape}")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise MetaEvalError(f"{label} must be finite and non-negative")
        return _frozen(values)

    # -- shape ----------------------------------------------------------------
    @property
    def num_players(self) -> int:
        return self.payoffs.shape[0]

    @property
    def shape(self) -> tuple[int, ...]:
        """Strategies per player, ``(K_1, ..., K_N)``."""
        return self.payoffs.shape[1:]

    @property
    def num_joints(self) -> int:
        return int(np.prod(self.shape))

    def __repr__(self) -> str:
        return f"MetaGame(players={self.num_players}, strategies={self.shape})"

    # -- constructors ---------------------------------------------------------
    @classmethod
    def from_matrix(cls, row_payoffs, column_payoffs=None, **names) -> MetaGame:
        """A 2-player game from the row player's matrix; zero-sum when no column matrix is given.

        Args:
            row_payoffs: the row player's payoffs ``[K_1, K_2]``.
            column_payoffs: the column player's payoffs, of the same shape; default: ``-row_payoffs``.
            **names: ``strategy_names`` or ``player_names``, as the constructor takes them.

        Returns:
            The game, with payoffs ``[2, K_1, K_2]``.
        """
        row = np.asarray(row_payoffs, dtype=np.float64)
        if row.ndim != 2:
            raise MetaEvalError(f"from_matrix needs a 2-D matrix, got shape {row.shape}")
        column = -row if column_payoffs is None else np.asarray(column_payoffs, dtype=np.float64)
        if column.shape != row.shape:
            raise MetaEvalError(
                f"row payoffs {row.shape} and column payoffs {column.shape} differ in shape"
            )
        return cls(np.stack([row, column]), **names)

    # -- structure ------------------------------------------------------------
    def payoff_scale(self) -> float:
        """A power of two near the largest |payoff| (1 for an all-zero game): payoffs divided
        by it lie within [-2, 2], exactly (no rounding), whatever their magnitude.

        Returns:
            The power of two.
        """
        largest = max(float(self.payoffs.max()), -float(self.payoffs.min()))  # no |payoffs| copy
        return float(2.0 ** np.round(np.log2(largest))) if largest > 0 else 1.0

    def payoff_range(self) -> float:
        """The largest payoff difference of any player, max_p (max G_p - min G_p); inf if
        it exceeds the largest float.

        Returns:
            The range, in payoff units.
        """
        scale = self.payoff_scale()
        with np.errstate(over="ignore"):  # max / scale - min / scale: the range of g / scale, without its copy
            return float(max(np.float64(g.max()) / scale - np.float64(g.min()) / scale for g in self.payoffs)) * scale

    def is_zero_sum(self, rtol: float = 1e-9) -> bool:
        """True when the players' payoffs sum to a constant at every joint strategy, up to
        ``rtol`` times the payoff range.

        Args:
            rtol: the tolerance, relative to the largest payoff range of a player.

        Returns:
            Whether the payoffs sum to one constant at every joint strategy.
        """
        unit = self.payoffs / self.payoff_scale()  # sums and ranges cannot overflow
        return bool(np.ptp(unit.sum(axis=0)) <= rtol * max(np.ptp(g) for g in unit))

    def is_symmetric(self, rtol: float = 1e-9) -> bool:
        """True when relabelling players permutes payoffs: G_q(a with p, q swapped) = G_p(a),
        up to ``rtol`` times the payoff range.

        Adjacent transpositions generate all permutations, so checking them suffices. The
        sub-game of every player's first two strategies is checked first: it is symmetric
        if the game is, and an asymmetric game (most) fails there without the copies of
        the whole tensor the full check makes (seconds on 4 x 64 strategies).

        Args:
            rtol: the tolerance, relative to the largest payoff range of a player.

        Returns:
            Whether every relabelling of the players permutes their payoffs.
        """
        if len(set(self.shape)) != 1:
            return False
        unit = self.payoffs / self.payoff_scale()
        atol = rtol * max(np.ptp(g) for g in unit)
        corner = unit[(slice(None), *[slice(0, 2)] * self.num_players)]
        for payoffs in (corner, unit):
            for p in range(self.num_players - 1):
                swapped = np.swapaxes(payoffs, 1 + p, 2 + p)[[*range(p), p + 1, p, *range(p + 2, self.num_players)]]
                if not np.allclose(swapped, payoffs, atol=atol, rtol=0):
                    return False
        return True

    def restrict(self, indices: Mapping[int, Sequence[int]] | Sequence[Sequence[int]]) -> MetaGame:
        """The sub-game keeping, for each player named, only the given strategy indices.

        Args:
            indices: player -> the strategy indices to keep (in that order), or one sequence of
                indices per player; players not named keep every strategy.

        Returns:
            The sub-game, with its names, counts and standard errors restricted alike.
        """
        if not isinstance(indices, Mapping):
            indices = dict(enumerate(indices))
        keep = [list(range(k)) for k in self.shape]
        for p, chosen in indices.items():
            if not 0 <= p < self.num_players:
                raise MetaEvalError(f"restrict: no player {p} in a {self.num_players}-player game")
            chosen = [int(i) for i in chosen]
            if not chosen:
                raise MetaEvalError(f"restrict: player {p} would keep 0 strategies")
            bad = [i for i in chosen if not 0 <= i < self.shape[p]]
            if bad:
                raise MetaEvalError(
                    f"restrict: player {p} has {self.shape[p]} strategies; indices {bad} are out of range"
                )
            keep[p] = chosen
        grid = np.ix_(*keep)
        return MetaGame(
            self.payoffs[(slice(None), *grid)],
            strategy_names=[[names[i] for i in k] for names, k in zip(self.strategy_names, keep)],
            player_names=self.player_names,
            counts=None if self.counts is None else self.counts[grid],
            stderr=None if self.stderr is None else self.stderr[(slice(None), *grid)],
        )

    def add_clone(self, player: int, index: int, name: str | None = None) -> MetaGame:
        """The game with an exact copy of ``player``'s strategy ``index`` appended last.

        Args:
            player: the player whose strategy is copied.
            index: the strategy copied.
            name: the copy's strategy name; default: the original's with `` (clone)`` appended.

        Returns:
            The game with ``player``'s ``K + 1`` strategies; the others are unchanged.
        """
        if not 0 <= player < self.num_players:
            raise MetaEvalError(f"add_clone: no player {player} in a {self.num_players}-player game")
        if not 0 <= index < self.shape[player]:
            raise MetaEvalError(
                f"add_clone: player {player} has {self.shape[player]} strategies, no index {index}"
            )

        def append(array, axis):
            copy = np.take(array, [index], axis=axis)
            return np.concatenate([array, copy], axis=axis)

        names = [list(n) for n in self.strategy_names]
        names[player].append(name or f"{names[player][index]} (clone)")
        return MetaGame(
            append(self.payoffs, 1 + player),
            strategy_names=names,
            player_names=self.player_names,
            counts=None if self.counts is None else append(self.counts, player),
            stderr=None if self.stderr is None else append(self.stderr, 1 + player),
        )

    def joint_profiles(self):
        """Iterate over joint strategy index tuples in C order.

        Returns:
            An iterator over ``(a_1, ..., a_N)`` index tuples.
        """
        return itertools.product(*(range(k) for k in self.shape))

    # -- persistence ----------------------------------------------------------
    def save(self, path) -> Path:
        """Write payoffs, names and statistics to an ``.npz`` file (atomically).

        Args:
            path: the file to write.

        Returns:
            The path written.
        """
        arrays = {"payoffs": self.payoffs}
        if self.counts is not None:
            arrays["counts"] = self.counts
        if self.stderr is not None:
            arrays["stderr"] = self.stderr
        meta = {"strategy_names": self.strategy_names, "player_names": self.player_names}
        return atomic_savez(path, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path) -> MetaGame:
        """Read a game written by [`save`][metaeval.game.MetaGame.save], or a bare payoff tensor in ``.npy``/``.npz``.

        Args:
            path: an ``.npz`` written by ``save``, or a bare ``.npy``/``.npz`` payoff tensor
                ``[N, K_1, ..., K_N]``.

        Returns:
            The game, with the names, counts and standard errors the file holds.
        """
        path = Path(path)
        arrays = read_arrays(path, "a meta-game", names=_SAVED_ARRAYS, float64_copy=True)
        if "" in arrays:  # a bare .npy tensor
            arrays = {"payoffs": arrays[""]}
        if "payoffs" not in arrays:
            raise MetaEvalError(f"{path} has no 'payoffs' array (found {sorted(arrays)})")
        meta = _read_meta(path, arrays) if "meta" in arrays else {}
        return cls(
            arrays["payoffs"],
            strategy_names=meta.get("strategy_names"),
            player_names=meta.get("player_names"),
            counts=arrays.get("counts"),
            stderr=arrays.get("stderr"),
        )


#: The arrays ``MetaGame.save`` writes.
_SAVED_ARRAYS = ("payoffs", "counts", "stderr", "meta")


def _read_meta(path: Path, arrays: dict) -> dict:
    """The names stored in a saved game's ``meta`` entry, or an error saying what is wrong."""
    meta = json_entry(arrays, "meta", "a meta-game", path)
    if not isinstance(meta, dict):
        raise MetaEvalError(f"{path}: its 'meta' entry must be a JSON object, got {type(meta).__name__}")
    missing = [key for key in ("strategy_names", "player_names") if key not in meta]
    if missing:
        raise MetaEvalError(f"{path}: its 'meta' entry lacks {' and '.join(missing)}")
    names = meta["strategy_names"]
    if not isinstance(names, list) or not all(isinstance(player, list) for player in names):
        raise MetaEvalError(f"{path}: strategy_names in its 'meta' entry must be one list per player")
    if not isinstance(meta["player_names"], list):
        raise MetaEvalError(f"{path}: player_names in its 'meta' entry must be a list")
    return meta
