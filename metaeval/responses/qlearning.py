"""Tabular Q-learning, as OpenSpiel's ``QLearner`` does it, against opponents drawn from a distribution.

A learner's state is a value table ``[S, A]`` on the player's information-state layout
(`metaeval.spiel.tree`), so it can be saved, copied and perturbed like a policy
table; its policy is greedy in those values (uniform over tied legal actions, hence
uniform at states never visited), which is what ``QLearner`` plays with exploration off.

Episodes are driven here rather than through ``rl_environment.Environment``: the learner
is keyed by the information state as the string key the policy tables use (so its values
map onto the layout), no observation tensors are computed, and chance outcomes and
opponents' actions come from the caller's seeded generator. The histories an episode
passes through are kept (`_History`: who moves, the information-state key, legal
actions, chance and reward), so a game state is built and queried once per history
rather than once per visit, which halves the training time.

The learner itself is `_QLearner`, not ``QLearner``: the same undiscounted update
``Q(s, a) += step_size * (r + max_b Q(s', b) - Q(s, a))`` and the same epsilon-greedy
distribution, in the same floating-point operations, but called directly at each move
instead of through ``QLearner.step`` and a ``TimeStep`` built for every move, whose
overhead was more than half the training time (``python -m bench.learners`` times both, and
``tests/training/learners`` trains both side by side and finds the same values bit for bit). Its
epsilon-greedy draw comes from the caller's generator (``QLearner`` draws from numpy's
global one), so training is reproducible from the seed and leaves global state alone.
"""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
from dataclasses import dataclass

import numpy as np
import pyspiel

from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.responses.opponents import Opponents
from metaeval.runs.progress import Progress
from metaeval.spiel.policies import check_table, policy_table, tabular_policy
from metaeval.spiel.tree import game_tree, infostate_key


class _Uniforms:
    """Uniform draws from a generator, fetched in blocks (one numpy call per block);
    ``draw()`` is the next one (a C-level iterator step: it runs at every move)."""

    BLOCK = 4096

    def __init__(self, rng: np.random.Generator):
        blocks = iter(lambda: rng.random(self.BLOCK).tolist(), None)  # endless: a list is never None
        self.draw = itertools.chain.from_iterable(blocks).__next__

    def choice(self, categorical: tuple[list[float], int]) -> int:
        """An index drawn from a `_categorical`: the first whose running total exceeds
        a uniform draw (the last positive one if rounding leaves the total below it)."""
        cumulative, last_positive = categorical
        index = bisect.bisect_right(cumulative, self.draw())
        return index if index < len(cumulative) else last_positive


def _categorical(probabilities) -> tuple[list[float], int]:
    """The running maximum of the running totals of ``probabilities`` (summed in order; the
    maximum keeps the list sorted for bisection when a table holds a tiny negative entry,
    without changing which index is first to exceed a draw) and the last positive index."""
    probabilities = [float(p) for p in probabilities]
    totals = list(itertools.accumulate(itertools.accumulate(probabilities), max))
    return totals, max(i for i, p in enumerate(probabilities) if p > 0)


class _QLearner:
    """OpenSpiel's ``QLearner`` (undiscounted, constant step size and epsilon), stepped by
    the driver: `act` at each of the learner's moves, `end` when the episode
    ends. The epsilon-greedy choice (a uniform legal action with probability epsilon,
    else a uniform one among the greedy actions) takes one draw from ``uniforms``."""

    __slots__ = ("q_values", "step_size", "epsilon", "uniforms", "last_key", "last_action")

    def __init__(self, step_size: float, epsilon: float, uniforms: _Uniforms):
        self.q_values = collections.defaultdict(lambda: collections.defaultdict(float))  # as QLearner's
        self.step_size, self.epsilon, self.uniforms = step_size, epsilon, uniforms
        self.last_key = self.last_action = None  # where the learner last acted this episode

    def act(self, key: str, legal: list[int], reward: float) -> int:
        """The action at information state ``key``, after learning from the move before,
        which led here with ``reward``."""
        values = self.q_values[key]
        best = max(values[a] for a in legal)
        u, epsilon = self.uniforms.draw(), self.epsilon
        if u < epsilon:
            action = legal[min(int(u / epsilon * len(legal)), len(legal) - 1)]
        else:
            greedy = [a for a in legal if values[a] == best]
            action = greedy[min(int((u - epsilon) / (1 - epsilon) * len(greedy)), len(greedy) - 1)]
        if self.last_key is not None:
            self._learn(reward + best)
        self.last_key, self.last_action = key, action
        return action

    def end(self, reward: float) -> None:
        """The episode ended with ``reward`` since the learner's last move."""
        if self.last_key is not None:
            self._learn(reward)
            self.last_key = self.last_action = None

    def _learn(self, target: float) -> None:
        values = self.q_values[self.last_key]
        values[self.last_action] += self.step_size * (target - values[self.last_action])


@dataclass(frozen=True)
class QLearning:
    """Q-learning as OpenSpiel's tabular ``QLearner`` with a constant step size and
    exploration rate (its defaults: 0.1 and epsilon-greedy with epsilon 0.2), undiscounted."""

    step_size: float = 0.1
    epsilon: float = 0.2

    def __post_init__(self):
        for name, value in (("step size", self.step_size), ("epsilon", self.epsilon)):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise MetaEvalError(f"{name} must be a number, got {value!r}")
        if not 0 < self.step_size <= 1:
            raise MetaEvalError(f"step size must lie in (0, 1], got {self.step_size}")
        if not 0 <= self.epsilon <= 1:
            raise MetaEvalError(f"epsilon must lie in [0, 1], got {self.epsilon}")

    def initial_values(self, game, player: int) -> np.ndarray:
        """The all-zero value table of ``player`` (its greedy policy is uniform).

        Args:
            game: the game.
            player: the player.

        Returns:
            The values ``[S, A]``.
        """
        return np.zeros(game_tree(game).players[player].legal.shape)

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values: np.ndarray | None = None) -> np.ndarray:
        """Values after ``episodes`` episodes of Q-learning from ``values`` (default: zeros);
        each episode's opponents are one profile drawn from ``opponents``.

        Args:
            game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
            player: the player who learns.
            opponents: the distribution its opponents are drawn from.
            episodes: the training episodes.
            rng: the generator of every random choice.
            values: the values to start from ``[S, A]``.

        Returns:
            The values ``[S, A]``.
        """
        game = games.load(game)
        if game.get_type().dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
            raise MetaEvalError(f"Q-learning steps through turns; {game} has simultaneous moves "
                                "(pyspiel.convert_to_turn_based makes a turn-based copy)")
        layout = game_tree(game).players[player]
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 0:
            raise MetaEvalError(f"episodes must be a non-negative int, got {episodes!r}")
        values = self.initial_values(game, player) if values is None else np.asarray(values, dtype=np.float64)
        if values.shape != layout.legal.shape:
            raise MetaEvalError(f"values of shape {values.shape} do not fit player {player}'s layout {layout.legal.shape}")
        tables = _opponent_tables(game, player, opponents)
        uniforms = _Uniforms(rng)
        agent = _QLearner(self.step_size, self.epsilon, uniforms)
        _load_values(agent.q_values, layout, values)
        lookups = [game_tree(game).players[q].template.state_lookup for q in range(game.num_players())]
        root = _root(str(game))
        profiles = _categorical(opponents.probabilities)
        with Progress(episodes, f"Q-learning, player {player}", "episode") as shown:
            for _ in range(episodes):
                _episode(root, player, agent, tables[uniforms.choice(profiles)], lookups, uniforms)
                shown.advance()
        return _read_values(agent.q_values, layout)

    def policy(self, game, player: int, values: np.ndarray):
        """The greedy policy of ``values``: a read-only ``TabularPolicy`` (ties split evenly).

        Args:
            game: the game.
            player: the player.
            values: the values ``[S, A]``.

        Returns:
            The policy.
        """
        layout = game_tree(game).players[player]
        values = np.where(layout.legal, values, -np.inf)
        greedy = layout.legal & (values == values.max(axis=1, keepdims=True))
        return tabular_policy(layout, greedy / greedy.sum(axis=1, keepdims=True))


"""Learners by the name the command line uses."""


def _opponent_tables(game, player: int, opponents: Opponents) -> list[list]:
    """Per opponent profile, each other player's policy as one `_categorical` per row."""
    tree = game_tree(game)
    converted = {}  # id(policy) -> its table as lists; profiles share policies
    tables = []
    for profile in opponents.profiles:
        if len(profile) != game.num_players():
            raise MetaEvalError(f"an opponent profile needs {game.num_players()} entries, got {len(profile)}")
        row = []
        for q, pi in enumerate(profile):
            if q != player and id(pi) not in converted:
                converted[id(pi)] = [_categorical(row) for row in _table(tree.players[q], pi, q)]
            row.append(None if q == player else converted[id(pi)])
        tables.append(row)
    return tables


def _table(layout, policy, player: int) -> np.ndarray:
    if isinstance(policy, np.ndarray):
        return check_table(layout, policy, player)
    return policy_table(layout, policy, player)


# The learner keeps its values as QLearner does (``q_values``: info state -> action ->
# value); a value table on the layout goes in and comes out through these two functions.
def _load_values(q_values, layout, values: np.ndarray) -> None:
    for key, row in zip(layout.keys, values):
        for action in np.flatnonzero(layout.legal[layout.template.state_lookup[key]]):
            if row[action] != 0.0:
                q_values[key][int(action)] = float(row[action])


def _read_values(q_values, layout) -> np.ndarray:
    values = np.zeros(layout.legal.shape)
    for key, actions in q_values.items():
        row = layout.template.state_lookup[key]
        for action, value in actions.items():
            values[row, action] = value
    return values


class _History:
    """A history of the game as an episode sees it: who moves (``CHANCE`` or a player), the
    mover's information-state key and legal actions, the chance distribution (a
    `_categorical` over ``outcomes``), the rewards on arrival, and the children
    reached so far. The game state is kept only until every child has been built."""

    CHANCE = -1
    __slots__ = ("state", "game_type", "children", "terminal", "player", "key", "legal", "outcomes", "chance",
                 "rewards")

    def __init__(self, state, game_type):
        self.state, self.game_type, self.children = state, game_type, {}
        self.terminal, self.rewards = state.is_terminal(), state.rewards()
        if self.terminal:
            return
        if state.is_chance_node():
            self.player = self.CHANCE
            self.outcomes, probabilities = zip(*state.chance_outcomes())
            self.chance = _categorical(probabilities)
        else:
            self.player = state.current_player()
            self.key = infostate_key(game_type, state, self.player)
            self.legal = state.legal_actions()

    def child(self, action: int) -> _History:
        child = self.children.get(action)
        if child is None:
            child = self.children[action] = _History(self.state.child(action), self.game_type)
            if len(self.children) == len(self.outcomes if self.player == self.CHANCE else self.legal):
                self.state = None
        return child


@functools.lru_cache(maxsize=8)
def _root(game_string: str) -> _History:
    """The initial history of a game; its descendants fill in as episodes reach them."""
    game = games.load(game_string)
    return _History(game.new_initial_state(), game.get_type())


def _episode(root, player: int, agent: _QLearner, tables, lookups, uniforms: _Uniforms) -> None:
    node = root
    reward = 0.0  # accumulated since the learner last acted
    while not node.terminal:
        current = node.player
        if current == _History.CHANCE:
            node = node.child(node.outcomes[uniforms.choice(node.chance)])
            continue
        if current == player:
            node = node.child(agent.act(node.key, node.legal, reward))
            reward = 0.0
        else:
            node = node.child(uniforms.choice(tables[current][lookups[current][node.key]]))
        reward += node.rewards[player]
    agent.end(reward)
