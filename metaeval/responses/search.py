"""Search best response: a best response found by simulating the game against the known opponents.

The responder p faces opponents drawn from a distribution over joint profiles (for a CCE,
sigma's marginal on the other players: the profile j is drawn once per episode and is part
of the hidden state). Its best response maximises, over p's pure policies pi',

    sum_z  P_c(z) sum_j Pr(j) P_-p^j(z) u_p(z) [pi' plays z]            (sequence form)

A terminal's weight ``w(z) = P_c(z) sum_j Pr(j) P_-p^j(z) u_p(z)`` belongs to the last
sequence (I, a) of p on the way to z, and a state's value is the best of its sequences'
values (the terminals' weights below them plus the values of the states that follow), as in
:mod:`metaeval.spiel.best_response`, which walks the tree. Here nothing is walked: episodes
are simulated with chance, j and the opponents' actions drawn from their known
probabilities and p's actions from a behaviour policy b (uniform at first, then
epsilon-greedy around the current best choice), and each finished episode adds

    u_p(z) / b_p(z)            (b_p(z): the product of b's probabilities of p's actions)

to its last sequence. Divided by the number of episodes, that is an unbiased estimate of
the sequence's weight for any b that plays every action with positive probability, so the
rounds' episodes are pooled whatever their behaviour. The information states' values, and so
the beliefs behind them (over the opponents' private information *and* over which joint
profile j is playing, weighted by chance and the opponents' own action probabilities), are
estimated, never enumerated; only the responder's visited information states are stored
(a sampled tabular best response: for games whose responder states fit in memory although
the tree does not). With every episode's outcome enumerated instead of drawn
(:func:`exhaustive_statistics`), the same backward pass gives the exact best response.

Why the value is a lower bound. The responder's policy (greedy in the estimated values;
uniform at information states never visited) is one fixed policy of the full game. Its
value against the opponents, measured on fresh episodes the search did not see, is an
unbiased estimate of a number at most the best response's value; the estimate made while
searching (the maximum of noisy values) is biased upward and is never reported.

Episodes are played in lock-step (:class:`metaeval.responses.episodes.TrainingEpisodes`:
each opponent policy answers a batch of decisions at once), in a fixed number of shards per
round whose statistics are summed in shard order: the same seed gives the same response on
any number of Ray workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.distributed.replicates import actor_scope
from metaeval.errors import MetaEvalError
from metaeval.responses.gap import run_shards, shard_sizes
from metaeval.runs.progress import Progress
from metaeval.spiel.tree import infostate_key
from metaeval.responses.episodes import TrainingEpisodes
from metaeval.responses.opponents import Opponents

ROOT = -1
"""The parent sequence of the responder's first information states."""


@dataclass
class SearchStatistics:
    """What the episodes taught about the responder's visited information states.

    ``keys[s]``: the information state's key (as ``TabularPolicy`` keys it); ``parent[s]``:
    its parent sequence ``t * A + a`` (state t, action a) or :data:`ROOT`; ``legal [S, A]``;
    ``sums [S, A]``: the summed ``u_p(z) / b_p(z)`` of the episodes ending in each sequence;
    ``episodes``: how many episodes the sums are over.
    """

    num_actions: int
    keys: list = field(default_factory=list)
    parent: list = field(default_factory=list)
    legal: list = field(default_factory=list)
    sums: np.ndarray = None
    episodes: int = 0
    index: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.sums is None:
            self.sums = np.zeros((0, self.num_actions))

    def state(self, key: str, parent: int, legal) -> int:
        """The index of the information state ``key`` (added if new)."""
        found = self.index.get(key)
        if found is not None:
            return found
        found = self.index[key] = len(self.keys)
        self.keys.append(key)
        self.parent.append(parent)
        self.legal.append(np.asarray(legal, dtype=bool))
        if found >= len(self.sums):
            self.sums = np.vstack([self.sums, np.zeros((max(64, len(self.sums)), self.num_actions))])
        return found

    def add(self, sequence: int, value: float) -> None:
        """Add ``value`` to the sequence ``s * A + a`` (nothing for :data:`ROOT`)."""
        if sequence != ROOT:
            self.sums[divmod(sequence, self.num_actions)] += value

    def merge(self, other: SearchStatistics) -> None:
        """Add ``other``'s episodes (its states mapped onto these by key)."""
        width = self.num_actions
        mapped = np.empty(len(other.keys), dtype=np.int64)
        for s, key in enumerate(other.keys):
            parent = other.parent[s]
            if parent != ROOT:
                parent = int(mapped[parent // width]) * width + parent % width
            mapped[s] = self.state(key, parent, other.legal[s])
        np.add.at(self.sums, mapped, other.sums[: len(other.keys)])
        self.episodes += other.episodes

    def best(self) -> tuple[np.ndarray, np.ndarray]:
        """The backward pass: each state's estimated value ``[S]`` (per episode) and best action ``[S]``
        (the lowest among tied ones)."""
        count, width = len(self.keys), self.num_actions
        if count == 0:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        parent = np.asarray(self.parent, dtype=np.int64)
        legal = np.array(self.legal)
        depth = np.zeros(count, dtype=np.int64)
        for s in range(count):  # a parent is always added before its children
            if parent[s] != ROOT:
                depth[s] = depth[parent[s] // width] + 1
        q = self.sums[:count].copy()
        values = np.zeros(count)
        for level in range(depth.max(), -1, -1):
            rows = np.flatnonzero(depth == level)
            values[rows] = np.where(legal[rows], q[rows], -np.inf).max(axis=1)
            inner = rows[parent[rows] != ROOT]
            np.add.at(q.reshape(-1), parent[inner], values[inner])
        choices = np.where(legal, q, -np.inf).argmax(axis=1)
        return values / max(self.episodes, 1), choices

    def choices(self) -> dict[str, int]:
        """The best action at each visited information state, by key."""
        return dict(zip(self.keys, self.best()[1].tolist()))


class SearchPolicy(policy_lib.Policy):
    """The responder's policy: the searched action at every visited information state,
    uniform over the legal actions elsewhere."""

    def __init__(self, game, player: int, choices: dict[str, int]):
        super().__init__(game, [player])
        self.player = player
        self.choices = choices
        self._game_type = game.get_type()

    def action_probabilities(self, state, player_id=None):
        player = self.player if player_id is None else player_id
        action = self.choices.get(infostate_key(self._game_type, state, player))
        if action is not None:
            return {action: 1.0}
        legal = state.legal_actions(player)
        return {a: 1.0 / len(legal) for a in legal}

    def __getstate__(self):
        return {"game": self.game, "player": self.player, "choices": self.choices}

    def __setstate__(self, state):
        self.__init__(state["game"], state["player"], state["choices"])


def search_shard(game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
                 choices: dict[str, int] | None, epsilon: float, num_envs: int = 256) -> SearchStatistics:
    """:class:`SearchStatistics` of ``episodes`` episodes in which ``player`` plays, at a state
    with a choice in ``choices``, that action with probability ``1 - epsilon`` and a uniform
    legal one otherwise (uniform everywhere without ``choices``)."""
    width = game.num_distinct_actions()
    statistics = SearchStatistics(width)
    game_type = game.get_type()
    env = TrainingEpisodes(game, player, opponents, episodes, min(num_envs, episodes), rng)
    slots = len(env.live)
    last = np.full(slots, ROOT, dtype=np.int64)  # each slot's last sequence
    reach = np.ones(slots)  # b_p of each slot's episode so far
    finished = 0
    while env.running():
        batch, live = env.decisions()
        rows = np.flatnonzero(live)
        probabilities = batch.legal / batch.legal.sum(axis=1, keepdims=True)
        states = np.empty(len(rows), dtype=np.int64)
        for i, (slot, state) in enumerate(zip(rows, batch.states)):
            states[i] = statistics.state(infostate_key(game_type, state, player), int(last[slot]), batch.legal[i])
            if choices is not None:
                choice = choices.get(statistics.keys[states[i]])
                if choice is not None:
                    probabilities[i] *= epsilon
                    probabilities[i, choice] += 1 - epsilon
        cumulative = probabilities.cumsum(axis=1)
        drawn = rng.random(len(rows))[:, None] * cumulative[:, -1:]
        picked = np.minimum((cumulative <= drawn).sum(axis=1), width - 1)
        picked = np.where(batch.legal[np.arange(len(rows)), picked], picked,
                          np.where(batch.legal, np.arange(width), -1).max(axis=1))
        actions = np.zeros(slots, dtype=np.int64)
        actions[rows] = picked
        last[rows] = states * width + picked
        reach[rows] *= probabilities[np.arange(len(rows)), picked]
        env.act(actions)
        for slot, ret in zip(env.finished_slots[finished:], env.returns[finished:]):
            statistics.add(int(last[slot]), ret / reach[slot])
            last[slot], reach[slot] = ROOT, 1.0
        finished = len(env.returns)
    statistics.episodes = len(env.returns)
    statistics.sums = statistics.sums[: len(statistics.keys)]
    return statistics


def exhaustive_statistics(game, player: int, opponents: Opponents) -> SearchStatistics:
    """The :class:`SearchStatistics` of every episode at once: each terminal's outcome
    enumerated with its probability (chance, the profile j and the opponents' actions; the
    responder's actions all taken, unweighted) instead of drawn, so the sums are the
    sequences' exact weights and :meth:`SearchStatistics.best` is the exact best response. A
    tree walk: for checks on games small enough to enumerate."""
    from metaeval.spiel.policies import probability_row

    width = game.num_distinct_actions()
    statistics = SearchStatistics(width)
    game_type = game.get_type()

    def opponent_rows(state, profile, players):
        return {q: probability_row(profile[q], state, q, width) for q in players}

    def walk(state, profile, weight: float, last: int) -> None:
        if state.is_terminal():
            statistics.add(last, weight * state.returns()[player])
            return
        if state.is_chance_node():
            for action, probability in state.chance_outcomes():
                walk(state.child(action), profile, weight * probability, last)
            return
        if state.is_simultaneous_node():
            legal = state.legal_actions_mask(player)
            node = statistics.state(infostate_key(game_type, state, player), last, legal)
            others = [q for q in range(game.num_players()) if q != player]
            rows = opponent_rows(state, profile, others)
            for own in state.legal_actions(player):
                joint_actions = [[]]
                for q in range(game.num_players()):
                    choices = [(own, 1.0)] if q == player else [(a, rows[q][a]) for a in np.flatnonzero(rows[q])]
                    joint_actions = [prefix + [c] for prefix in joint_actions for c in choices]
                for joint in joint_actions:
                    child = state.clone()
                    child.apply_actions([int(a) for a, _ in joint])
                    walk(child, profile, weight * float(np.prod([p for _, p in joint])), node * width + own)
            return
        current = state.current_player()
        if current == player:
            node = statistics.state(infostate_key(game_type, state, player), last, state.legal_actions_mask(player))
            for action in state.legal_actions(player):
                walk(state.child(action), profile, weight, node * width + action)
            return
        row = opponent_rows(state, profile, [current])[current]
        for action in np.flatnonzero(row):
            walk(state.child(int(action)), profile, weight * row[action], last)

    for profile, probability in zip(opponents.profiles, opponents.probabilities):
        walk(game.new_initial_state(), profile, float(probability), ROOT)
    statistics.episodes = 1
    statistics.sums = statistics.sums[: len(statistics.keys)]
    return statistics


@dataclass(frozen=True)
class _SearchShard:
    """One shard of a search round (picklable, for Ray workers)."""

    game: str
    player: int
    opponents: Opponents
    choices: dict | None
    epsilon: float
    num_envs: int

    def __call__(self, chunk) -> SearchStatistics:
        episodes, seed = chunk
        return search_shard(games.load(self.game), self.player, self.opponents, episodes,
                            np.random.default_rng(seed), self.choices, self.epsilon, self.num_envs)


@dataclass(frozen=True)
class Search:
    """The search best response (module docstring), with its budget in simulated episodes
    split over ``rounds`` rounds (uniform behaviour in the first, epsilon-greedy around the
    current best choices after), each round in ``shards`` seeded shards, played on ``workers``
    Ray workers (at ``address``) when more than one; the same response on any number."""

    rounds: int = 4
    epsilon: float = 0.5
    shards: int = 4
    num_envs: int = 256
    workers: int = 1
    address: str | None = None

    def __post_init__(self):
        for name in ("rounds", "shards", "num_envs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise MetaEvalError(f"search {name} must be a positive int, got {value!r}")
        if not 0 < self.epsilon <= 1:
            raise MetaEvalError(f"search epsilon must lie in (0, 1], got {self.epsilon!r}")

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values=None) -> SearchStatistics:
        """:class:`SearchStatistics` of ``episodes`` simulated episodes against ``opponents``."""
        game = games.load(game)
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise MetaEvalError(f"episodes must be a positive int, got {episodes!r}")
        statistics = SearchStatistics(game.num_distinct_actions()) if values is None else values
        seed = int(rng.integers(2**63))
        budgets = shard_sizes(int(episodes), self.rounds)
        with actor_scope(self.workers, self.address), \
                Progress(int(episodes), f"search, player {player}", "episode") as shown:
            self._rounds(game, player, opponents, statistics, budgets, seed, shown.advance)
        return statistics

    def _rounds(self, game, player, opponents, statistics, budgets, seed, advance) -> None:
        for round_, budget in enumerate(budgets):
            choices = statistics.choices() if statistics.keys else None
            task = _SearchShard(str(game), player, opponents, choices, self.epsilon if choices else 1.0, self.num_envs)
            chunks = [(share, np.random.SeedSequence(seed, spawn_key=(round_, shard)))
                      for shard, share in enumerate(shard_sizes(int(budget), self.shards)) if share]
            for shard in run_shards(task, chunks, self.workers, self.address, advance):
                statistics.merge(shard)

    def policy(self, game, player: int, values: SearchStatistics) -> SearchPolicy:
        """The greedy policy of the searched values."""
        return SearchPolicy(games.load(game), player, values.choices())
