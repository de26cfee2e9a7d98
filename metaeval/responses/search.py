"""Search best response: a best response found by simulating the game against the known opponents.

The responder p faces opponents drawn from a distribution over joint profiles (for a CCE,
sigma's marginal on the other players: the profile j is drawn once per episode and is part
of the hidden state). Its best response maximises, over p's pure policies pi',

    sum_z  P_c(z) sum_j Pr(j) P_-p^j(z) u_p(z) [pi' plays z]            (sequence form)

A terminal's weight ``w(z) = P_c(z) sum_j Pr(j) P_-p^j(z) u_p(z)`` belongs to the last
sequence (I, a) of p on the way to z, and a state's value is the best of its sequences'
values (the terminals' weights below them plus the values of the states that follow), as in
`metaeval.spiel.best_response`, which walks the tree. Here nothing is walked: histories
are sampled with chance, j and the opponents' actions drawn from their known probabilities
(beliefs over the opponents' private information *and* over which joint profile j plays
are never enumerated: they are what the sampling draws from). At p's decisions the history
*forks* into every legal action (external sampling, Lanctot et al. 2009, "Monte Carlo
sampling for regret minimization in extensive games"), as long as the fork stays within
``branching`` histories; past that p's action is drawn from a behaviour policy b (uniform
at first, then epsilon-greedy around the current best choice). Each ended history adds

    u_p(z) / b_p(z)            (b_p(z): the product of b's probabilities of p's drawn actions)

to its last sequence. Divided by the number of sampled roots, that is an unbiased estimate
of every sequence's weight, for any b that plays every action with positive probability,
so the rounds' histories are pooled whatever their behaviour. Forking is what makes the
estimate sharp: the actions of one information state are compared on the *same* sampled
chance outcomes and opponent actions, so the spread of the opponents' hidden cards cancels
out of the comparison instead of swamping it, and no importance weight grows with depth.
Only the responder's visited information states are stored (a sampled tabular best
response: for games whose responder states fit in memory although the tree does not). With
every outcome enumerated instead of drawn (`exhaustive_statistics`), the same backward
pass gives the exact best response. Where the budget covers that enumeration (the tree's
terminal histories once per opponent profile, at most ``episodes``) nothing is sampled: the
search walks the tree ([`Exact`][metaeval.responses.exact.Exact], with the opponents'
policies asked in batches) and returns the best response itself.

Why the value is a lower bound. The responder's policy (greedy in the estimated values;
uniform at information states never visited) is one fixed policy of the full game. Its
value against the opponents, measured on fresh episodes the search did not see, is an
unbiased estimate of a number at most the best response's value; the estimate made while
searching (the maximum of noisy values) is biased upward and is never reported.

Histories advance in lock-step (`metaeval.responses.episodes.OpponentPolicies`: each
opponent policy answers a batch of decisions at once), in a fixed number of shards per round
whose statistics are summed in shard order: the same seed gives the same response on any
number of Ray workers. The budget counts ended histories: a history that forks into k ends
costs k episodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.distributed.replicates import actor_scope
from metaeval.errors import MetaEvalError
from metaeval.responses.exact import Exact, ExactValues
from metaeval.responses.gap import ResponderShard, run_round, shard_sizes
from metaeval.runs.progress import Progress
from metaeval.runs.threads import one_blas_thread
from metaeval.spiel.lockstep import draw_actions
from metaeval.spiel.tree import has_at_most_terminals, infostate_key
from metaeval.responses.episodes import OpponentPolicies, play_to_decisions
from metaeval.responses.opponents import Opponents

ROOT = -1
"""The parent sequence of the responder's first information states."""


@dataclass
class SearchStatistics:
    """What the sampled histories taught about the responder's visited information states.

    ``keys[s]``: the information state's key (as ``TabularPolicy`` keys it); ``parent[s]``:
    its parent sequence ``t * A + a`` (state t, action a) or `ROOT`; ``legal [S, A]``;
    ``sums [S, A]``: the summed ``u_p(z) / b_p(z)`` of the histories ending in each sequence;
    ``episodes``: how many sampled roots (histories before any fork) the sums are over.
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
        """The index of the information state ``key`` (added if new).

        Args:
            key: the information state's key.
            parent: the sequence that leads to it.
            legal: its legal actions.

        Returns:
            The state's index.
        """
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
        """Add ``value`` to the sequence ``s * A + a`` (nothing for `ROOT`).

        Args:
            sequence: the sequence ``s * A + a``.
            value: the value to add.
        """
        if sequence != ROOT:
            self.sums[divmod(sequence, self.num_actions)] += value

    def merge(self, other: SearchStatistics) -> None:
        """Add ``other``'s episodes (its states mapped onto these by key).

        Args:
            other: statistics of other episodes of the same game and player.
        """
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
        (the lowest among tied ones).

        Returns:
            The values ``[S]`` and the best actions ``[S]``.
        """
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
        """The best action at each visited information state, by key.

        Returns:
            Information-state key -> best action.
        """
        return dict(zip(self.keys, self.best()[1].tolist()))


class SearchPolicy(policy_lib.Policy):
    """The responder's policy: the searched action at every visited information state,
    uniform over the legal actions elsewhere.

    Args:
        game: the game.
        player: the responder.
        choices: information-state key -> the searched action.
    """

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
                 choices: dict[str, int] | None, epsilon: float, branching: int = 64,
                 num_envs: int = 256) -> SearchStatistics:
    """[`SearchStatistics`][metaeval.responses.search.SearchStatistics] of histories sampled until about ``episodes`` have ended.

    Chance, the opponent profile and the opponents' actions are drawn; at a decision of
    ``player`` every legal action is taken (the history forks) while the fork's product of
    legal-action counts stays within ``branching``; past it one action is drawn: at a state
    with a choice in ``choices``, that action with probability ``1 - epsilon`` and a uniform
    legal one otherwise (uniform everywhere without ``choices``). Up to ``num_envs``
    histories advance in lock-step; the last ones in flight finish, so a few more than
    ``episodes`` may end."""
    width = game.num_distinct_actions()
    statistics = SearchStatistics(width)
    game_type = game.get_type()
    answers = OpponentPolicies(game, opponents)
    histories: list[_History] = []
    ended = 0

    def decide(mover, group):
        return answers.decide(mover, [h.state for h in group], [h.profile for h in group], rng)

    def on_end(history, value):  # the weighted return joins the history's last sequence
        nonlocal ended
        statistics.add(history.last, history.weight * value)
        ended += 1

    while True:
        while len(histories) < num_envs and ended + len(histories) < episodes:
            profile = rng.choice(len(opponents.probabilities), p=opponents.probabilities)
            histories.append(_History(game.new_initial_state(), int(profile), ROOT, 1.0, 1))
            statistics.episodes += 1
        if not histories:
            statistics.sums = statistics.sums[: len(statistics.keys)]
            return statistics
        deciding = play_to_decisions(player, histories, decide, uniform=lambda history: rng.random(), on_end=on_end)
        histories = _decide(game_type, player, deciding, answers, rng, statistics, choices, epsilon, branching)


@dataclass
class _History:
    """One history being sampled: its state, opponent profile, the responder's last sequence,
    the importance weight ``1 / b_p`` of its drawn responder actions, and its fork's size."""

    state: object
    profile: int
    last: int
    weight: float
    forks: int


def _decide(game_type, player, deciding, answers, rng, statistics, choices, epsilon, branching) -> list:
    """The histories after ``player``'s decisions in ``deciding``: forked into every legal
    action within the ``branching`` limit, else one action drawn (see `search_shard`)."""
    width = statistics.num_actions
    together = [h for h in deciding if h.state.is_simultaneous_node()]
    opponents = {}  # at simultaneous nodes the opponents' actions, drawn once for every fork
    if together:
        num_players = answers.game.num_players()
        joint = np.zeros((len(together), num_players), dtype=np.int64)
        with one_blas_thread():
            for q in range(num_players):
                if q != player:
                    joint[:, q] = answers.decide(q, [h.state for h in together], [h.profile for h in together], rng)
        opponents = {id(h): row for h, row in zip(together, joint.tolist())}
    after = []
    for history in deciding:
        state = history.state
        legal = state.legal_actions_mask(player)
        node = statistics.state(infostate_key(game_type, state, player), history.last, legal)
        actions = np.flatnonzero(legal)
        if history.forks * len(actions) <= branching:
            taken = [(int(a), 1.0) for a in actions]
            forks = history.forks * len(actions)
        else:
            probabilities = np.asarray(legal, dtype=np.float64) / len(actions)
            choice = choices.get(statistics.keys[node]) if choices else None
            if choice is not None:
                probabilities *= epsilon
                probabilities[choice] += 1 - epsilon
            drawn = draw_actions(probabilities[None], rng.random(1))[0]
            taken, forks = [(int(drawn), probabilities[drawn])], history.forks
        for i, (action, probability) in enumerate(taken):
            child = state if i == len(taken) - 1 else state.clone()
            if id(history) in opponents:
                moves = list(opponents[id(history)])
                moves[player] = action
                child.apply_actions(moves)
            else:
                child.apply_action(action)
            after.append(_History(child, history.profile, node * width + action, history.weight / probability, forks))
    return after


def exhaustive_statistics(game, player: int, opponents: Opponents) -> SearchStatistics:
    """The [`SearchStatistics`][metaeval.responses.search.SearchStatistics] of every episode at once: each terminal's outcome
    enumerated with its probability (chance, the profile j and the opponents' actions; the
    responder's actions all taken, unweighted) instead of drawn, so the sums are the
    sequences' exact weights and [`SearchStatistics.best`][metaeval.responses.search.SearchStatistics.best] is the exact best response. A
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
class Search:
    """The search best response (module docstring), with its budget in ended histories split
    over ``rounds`` rounds, forking at the responder's decisions while a fork holds at most
    ``branching`` histories and drawing its action past that (uniformly in the first round,
    epsilon-greedy around the current best choices after), each round in ``shards`` seeded
    shards, played on ``workers`` Ray workers (at ``address``) when more than one; the same
    response on any number. With ``exhaustive`` (the default), a budget that covers the tree
    walk buys the exact best response instead ([`walk_fits`][metaeval.responses.search.walk_fits])."""

    rounds: int = 4
    epsilon: float = 0.5
    branching: int = 64
    shards: int = 4
    num_envs: int = 256
    workers: int = 1
    address: str | None = None
    exhaustive: bool = True

    def __post_init__(self):
        for name in ("rounds", "branching", "shards", "num_envs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise MetaEvalError(f"search {name} must be a positive int, got {value!r}")
        if not 0 < self.epsilon <= 1:
            raise MetaEvalError(f"search epsilon must lie in (0, 1], got {self.epsilon!r}")

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values=None) -> SearchStatistics:
        """[`SearchStatistics`][metaeval.responses.search.SearchStatistics] of ``episodes`` simulated episodes against ``opponents``.

        Args:
            game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
            player: the player who learns.
            opponents: the distribution its opponents are drawn from.
            episodes: the training episodes.
            rng: the generator of every random choice.
            values: statistics to add the episodes to (default: none).

        Returns:
            The statistics, or the exact best response's
            [`ExactValues`][metaeval.responses.exact.ExactValues] where the budget covers the tree walk.
        """
        game = games.load(game)
        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise MetaEvalError(f"episodes must be a positive int, got {episodes!r}")
        if isinstance(values, ExactValues):
            return values
        if values is None and self.exhaustive and walk_fits(game, opponents, int(episodes)):
            return Exact().train(game, player, opponents, episodes, rng)
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
            task = ResponderShard(search_shard, str(game), player, opponents,
                                  (choices, self.epsilon if choices else 1.0, self.branching, self.num_envs))
            for shard in run_round(task, budget, self.shards, seed, round_, self.workers, self.address, advance):
                statistics.merge(shard)

    def policy(self, game, player: int, values: SearchStatistics) -> SearchPolicy:
        """The greedy policy of the searched values.

        Args:
            game: the game.
            player: the player.
            values: what [`train`][metaeval.responses.search.Search.train] returned.

        Returns:
            The policy (the exact best response's table where the tree was walked).
        """
        if isinstance(values, ExactValues):
            return values.response
        return SearchPolicy(games.load(game), player, values.choices())


def walk_fits(game, opponents: Opponents, episodes: int) -> bool:
    """Whether walking the tree once per opponent profile ends at most ``episodes`` histories
    (the budget's unit), so that the exact best response costs no more than the search would.
    The count stops at the budget (and is remembered): asking costs at most that walk.

    Args:
        game: the game.
        opponents: the opponents (one walk per profile).
        episodes: the search's budget.

    Returns:
        Whether the walk fits the budget.
    """
    per_profile = episodes // len(opponents.profiles)
    return per_profile >= 1 and has_at_most_terminals(str(game), per_profile)
