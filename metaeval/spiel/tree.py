"""The terminal histories of an OpenSpiel game, in sequence form, enumerated once.

Every quantity of the maths page's sections 3 and 4 is a sum over terminal histories z of
``chance(z) * u(z) * prod_p reach_p(z)``. With perfect recall, ``reach_p(z)`` is
the realisation weight of player p's *last sequence* on z (its last own
information state and the action taken there), so the tree is stored as

- ``chance [Z]``, ``returns [Z, N]``;
- ``last_sequence [N, Z]``: flat sequence index ``row * A + action`` of the
  player's last decision on z, ``-1`` when the player never acts on z;
- per player, its information states (rows of a ``TabularPolicy`` template) with
  the parent sequence of each and their depth (number of own earlier decisions).

Sequence index ``-1`` always means "the empty sequence": arrays indexed by
sequences carry one extra last row for it, so numpy's ``-1`` lands there.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.runs import budget
from metaeval.errors import MetaEvalError

EMPTY_SEQUENCE = -1

#: Bytes one terminal history costs while enumerating (Python floats, lists and tuples:
#: about 200 + 90 N, measured with tracemalloc on kuhn_poker and sheriff) and after.
BYTES_PER_TERMINAL = 200
BYTES_PER_TERMINAL_PER_PLAYER = 90
#: Random playouts of the size estimate (Knuth 1975): each multiplies the branching
#: factors along one random path, an unbiased estimate of the number of terminals.
ESTIMATE_PLAYOUTS = 64


@dataclass(frozen=True, eq=False)
class PlayerLayout:
    """One player's information states in sequence form.

    Attributes:
        template: a ``TabularPolicy`` for this player only; its rows are the
            information states and define the layout of every policy table.
        legal: ``[S, A]`` boolean legal-action mask.
        parent: ``[S]`` flat index of the sequence leading to each state (-1: root).
        levels: state rows grouped by depth, shallowest first.
        fingerprint: hash of the state keys in row order (identifies the layout on disk).
    """

    template: policy_lib.TabularPolicy
    legal: np.ndarray
    parent: np.ndarray
    levels: tuple[np.ndarray, ...]
    fingerprint: str

    @property
    def keys(self) -> list[str]:
        return self.template.states_per_player[self.template.player_ids[0]]


@dataclass(frozen=True, eq=False)
class GameTree:
    """Terminal histories of an enumerable, perfect-recall game (see module docstring)."""

    game: pyspiel.Game
    num_actions: int
    chance: np.ndarray
    returns: np.ndarray
    last_sequence: np.ndarray
    players: tuple[PlayerLayout, ...]

    @property
    def game_string(self) -> str:
        return str(self.game)

    @property
    def num_players(self) -> int:
        return self.returns.shape[1]

    @property
    def num_terminals(self) -> int:
        return self.returns.shape[0]


def infostate_key(game_type, state, player: int) -> str:
    """The key ``TabularPolicy`` uses for ``(state, player)``."""
    if game_type.provides_information_state_string:
        return state.information_state_string(player)
    if game_type.provides_observation_string:
        return state.observation_string(player)
    return str(state)


def game_tree(game, max_terminals: int | None = None) -> GameTree:
    """The (cached) sequence-form tree of ``game``: a ``pyspiel.Game`` or a name for ``games.load``.

    The tree's size is estimated first and enumeration refused (a ``MetaEvalError``
    with the estimate) when it would exceed the memory budget ([`metaeval.runs.budget`][metaeval.runs.budget])
    or ``max_terminals``; the walk itself stops at the same limit.

    Args:
        game: the game.
        max_terminals: the most terminal histories to enumerate.

    Returns:
        The tree.
    """
    game = games.load(game)
    limit = terminal_limit(game.num_players())
    if max_terminals is not None:
        limit = min(limit, max_terminals)
    return _cached_tree(str(game), limit)


def terminal_limit(num_players: int) -> int:
    """The most terminal histories the memory budget allows to enumerate."""
    return budget.max_memory() // (BYTES_PER_TERMINAL + BYTES_PER_TERMINAL_PER_PLAYER * num_players)


def estimate_terminals(game, playouts: int = ESTIMATE_PLAYOUTS,
                       give_up_above: float = math.inf) -> tuple[float, bool]:
    """Knuth's (1975) estimate of the number of terminal histories: the mean over random
    playouts (seeded) of the product of branching factors along the path, and whether
    every playout finished. A playout whose product passes ``give_up_above`` stops
    there, so the estimate is then a lower bound (and cheap even for chess)."""
    rng = np.random.default_rng(0)
    total, finished = 0.0, True
    for _ in range(playouts):
        state, weight = game.new_initial_state(), 1.0
        while not state.is_terminal() and weight <= give_up_above:
            if state.is_chance_node():
                outcomes = [a for a, p in state.chance_outcomes() if p > 0]
                weight *= len(outcomes)
                state.apply_action(outcomes[rng.integers(len(outcomes))])
            elif state.is_simultaneous_node():
                choices = [state.legal_actions(p) or [0] for p in range(game.num_players())]
                weight *= math.prod(len(c) for c in choices)
                state.apply_actions([c[rng.integers(len(c))] for c in choices])
            else:
                actions = state.legal_actions()
                weight *= len(actions)
                state.apply_action(actions[rng.integers(len(actions))])
        total += weight
        finished = finished and state.is_terminal()
    return total / playouts, finished


@functools.lru_cache(maxsize=64)
def has_at_most_terminals(game_string: str, limit: int) -> bool:
    """Whether the game (by its string) has at most ``limit`` terminal histories: a walk that
    only counts (no policies, nothing stored) and stops once the count passes ``limit``.

    Args:
        game_string: the game, as ``str(game)``.
        limit: the most terminal histories.

    Returns:
        Whether the tree has at most ``limit`` terminals.
    """
    game = games.load(game_string)
    stack, terminals = [game.new_initial_state()], 0
    while stack:
        state = stack.pop()
        if state.is_terminal():
            terminals += 1
            if terminals > limit:
                return False
        elif state.is_chance_node():
            stack.extend(state.child(a) for a, probability in state.chance_outcomes() if probability > 0)
        elif state.is_simultaneous_node():
            for joint in itertools.product(*(state.legal_actions(p) or [0] for p in range(game.num_players()))):
                child = state.clone()
                child.apply_actions(list(joint))
                stack.append(child)
        else:
            stack.extend(state.child(a) for a in state.legal_actions())
    return True


def _check_size(game: pyspiel.Game, limit: int) -> None:
    """Refuse, before enumerating, a game whose estimated tree exceeds ``limit`` terminals."""
    estimate, finished = estimate_terminals(game, give_up_above=limit * ESTIMATE_PLAYOUTS)
    if estimate > limit:
        about = f"about {estimate:.2g}" if finished else f"at least {estimate:.2g}"
        per_terminal = BYTES_PER_TERMINAL + BYTES_PER_TERMINAL_PER_PLAYER * game.num_players()
        budget.check(
            estimate * per_terminal,
            f"enumerating {game} ({about} terminal histories, estimated from "
            f"{ESTIMATE_PLAYOUTS} random playouts; at most {limit:,} fit)",
            "exact meta-games, tabular policies and the full-game CCE gap need the whole tree, "
            "so choose a smaller game",
        )
        raise MetaEvalError(f"{game} has {about} terminal histories, more than max_terminals={limit:,}")


@functools.lru_cache(maxsize=16)
def _cached_tree(game_string: str, max_terminals: int) -> GameTree:
    # Rebuilt from the string, which is what the cache and saved populations rely on.
    enumerator = _Enumerator(games.load(game_string), max_terminals)  # checks the kind of game
    _check_size(enumerator.game, max_terminals)
    return enumerator.run()


class _Enumerator:
    """Depth-first walk recording, per terminal, chance weight, returns and last sequences."""

    def __init__(self, game: pyspiel.Game, max_terminals: int):
        game_type = game.get_type()
        if game_type.dynamics not in (
            pyspiel.GameType.Dynamics.SEQUENTIAL,
            pyspiel.GameType.Dynamics.SIMULTANEOUS,
        ):
            raise MetaEvalError(f"cannot enumerate {game}: only sequential and simultaneous games")
        self.game = game
        self.game_type = game_type
        self.max_terminals = max_terminals
        self.num_players = game.num_players()
        self.num_actions = game.num_distinct_actions()
        # Per player: key -> provisional row, and per row the parent sequence and a
        # representative state.
        self.rows = [{} for _ in range(self.num_players)]
        self.parents = [[] for _ in range(self.num_players)]
        self.representatives = [[] for _ in range(self.num_players)]
        self.chance, self.returns, self.last = [], [], []

    def run(self) -> GameTree:
        stack = [(self.game.new_initial_state(), 1.0, (EMPTY_SEQUENCE,) * self.num_players)]
        while stack:
            if len(stack) > self.max_terminals:  # a deep tree: the pending states alone are too many
                self._refuse(f"more than {len(stack):,} pending states")
            state, chance, last = stack.pop()
            if state.is_terminal():
                self._add_terminal(state, chance, last)
            elif state.is_chance_node():
                for action, probability in state.chance_outcomes():
                    if probability > 0:
                        stack.append((state.child(action), chance * probability, last))
            elif state.is_simultaneous_node():
                stack.extend(self._simultaneous_children(state, chance, last))
            else:
                player = state.current_player()
                row = self._row(state, player, last[player])
                for action in state.legal_actions():
                    child_last = last[:player] + (row * self.num_actions + action,) + last[player + 1 :]
                    stack.append((state.child(action), chance, child_last))
        if not self.returns:
            raise MetaEvalError(f"{self.game} has no terminal history")
        return self._finish()

    def _simultaneous_children(self, state, chance, last):
        choices = []
        for player in range(self.num_players):
            actions = state.legal_actions(player)
            if actions:
                row = self._row(state, player, last[player])
                choices.append([(a, row * self.num_actions + a) for a in actions])
            else:
                choices.append([(None, last[player])])
        for joint in itertools.product(*choices):
            child = state.clone()
            child.apply_actions([0 if a is None else a for a, _ in joint])
            yield child, chance, tuple(sequence for _, sequence in joint)

    def _row(self, state, player: int, parent: int) -> int:
        key = infostate_key(self.game_type, state, player)
        rows = self.rows[player]
        row = rows.get(key)
        if row is None:
            row = rows[key] = len(rows)
            self.parents[player].append(parent)
            self.representatives[player].append(state)
        elif self.parents[player][row] != parent:
            raise MetaEvalError(
                f"{self.game} lacks perfect recall for player {player}: information state "
                f"{key!r} is reached after different own decisions; exact evaluation needs "
                "perfect recall (use the sampled meta-game instead)"
            )
        return row

    def _refuse(self, found: str):
        raise MetaEvalError(
            f"{self.game} has {found}, more than the {self.max_terminals:,} terminal histories the memory "
            f"budget allows ({budget.describe(budget.max_memory())}; raise it with --max-memory or "
            f"{budget.VARIABLE}); exact meta-games, tabular policies and the full-game CCE gap need the whole tree"
        )

    def _add_terminal(self, state, chance, last):
        if len(self.returns) >= self.max_terminals:
            self._refuse(f"more than {self.max_terminals:,} terminal histories")
        self.chance.append(chance)
        self.returns.append(state.returns())
        self.last.append(last)

    def _finish(self) -> GameTree:
        last = np.array(self.last, dtype=np.int64).T.copy()
        layouts = []
        for player in range(self.num_players):
            layout, order = self._layout(player)
            # Re-express provisional rows in the template's row order.
            sequences = last[player]
            own = sequences != EMPTY_SEQUENCE
            rows, actions = np.divmod(sequences[own], self.num_actions)
            sequences[own] = order[rows] * self.num_actions + actions
            layouts.append(layout)
        return GameTree(
            game=self.game,
            num_actions=self.num_actions,
            chance=np.array(self.chance, dtype=np.float64),
            returns=np.array(self.returns, dtype=np.float64).reshape(-1, self.num_players),
            last_sequence=last,
            players=tuple(layouts),
        )

    def _layout(self, player: int) -> tuple[PlayerLayout, np.ndarray]:
        """The player's template policy and the map from provisional rows to template rows."""
        keys = list(self.rows[player])
        # An empty ``states`` makes TabularPolicy enumerate the game itself; that only
        # happens for a player who never decides, whose template is then empty.
        template = policy_lib.TabularPolicy(
            self.game,
            players=[player],
            states={state.history_str(): state for state in self.representatives[player]},
        )
        order = np.array([template.state_lookup[key] for key in keys], dtype=np.int64)
        num_states = len(keys)
        parent = np.full(num_states, EMPTY_SEQUENCE, dtype=np.int64)
        depth = np.zeros(num_states, dtype=np.int64)
        # Provisional rows are in discovery order, so a parent's depth is known first.
        for row, seq in enumerate(self.parents[player]):
            if seq != EMPTY_SEQUENCE:
                seq_row, action = divmod(seq, self.num_actions)
                parent_row = int(order[seq_row])
                seq = parent_row * self.num_actions + action
                depth[order[row]] = depth[parent_row] + 1
            parent[order[row]] = seq
        levels = tuple(np.flatnonzero(depth == d) for d in range(int(depth.max(initial=-1)) + 1))
        ordered_keys = template.states_per_player[player]
        fingerprint = hashlib.sha256(
            "\n".join([str(self.game), *ordered_keys]).encode()
        ).hexdigest()
        layout = PlayerLayout(
            template=template,
            legal=np.asarray(template.legal_actions_mask, dtype=bool).reshape(
                num_states, self.num_actions
            ),
            parent=parent,
            levels=levels,
            fingerprint=fingerprint,
        )
        return layout, order
