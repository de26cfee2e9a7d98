"""Episodes of one joint profile played in lock-step, each policy asked once per step.

Each step advances every unfinished episode by one decision: chance nodes are
sampled on the way (``chance_outcomes``), finished episodes drop out (their returns
recorded), and every player's policy is asked once, for all the episodes where that
player acts — its turn, or a simultaneous node, where all players act. Nothing here
walks or enumerates the game tree: only the states of the episodes being played exist.

Random numbers. The t-th uniform that episode e of a joint draws (chance outcome or
action, in the order the episode meets them; at a simultaneous node players 0..N-1)
is ``U(e, t)``, fixed by the joint's seed, e and t alone. Episodes are grouped by
``EPISODES_PER_GENERATOR``; group g has its own generator, seeded from the joint's
``SeedSequence`` with g appended to its spawn key, whose k-th draw is a block
``[EPISODES_PER_GENERATOR, DRAWS_PER_BLOCK]`` holding draws ``k * DRAWS_PER_BLOCK``
onwards of the group's episodes. So an entry is the same whatever the batch size,
the order the episodes advance in, or how many are played at once, and one
generator serves many episodes (seeding one costs about as much as an episode of a
small game). A draw picks the first outcome whose cumulative probability exceeds
``u * total`` (inverse-CDF sampling over the actions in ascending order).
"""

from __future__ import annotations

import bisect
import itertools
from contextlib import contextmanager

import numpy as np
import pyspiel

from metaeval.errors import MetaEvalError, first_line
from metaeval.runs.threads import one_blas_thread
from metaeval.spiel.batched import DecisionBatch, TensorReader, as_batched, checked
from metaeval.spiel.population import check_seed
from metaeval.runs.time_limit import PolicyTimeout, limited

CHANCE = int(pyspiel.PlayerId.CHANCE)
TERMINAL = int(pyspiel.PlayerId.TERMINAL)
SIMULTANEOUS = int(pyspiel.PlayerId.SIMULTANEOUS)
EPISODES_PER_GENERATOR = 64
DRAWS_PER_BLOCK = 16
#: Episodes of one joint played at once by default: enough to make a policy call cheap
#: per state, few enough that the states in flight stay small.
BATCH_SIZE = 1024


def seed_sequence(seed) -> np.random.SeedSequence:
    """``seed`` (a ``SeedSequence`` or a non-negative int) as a ``SeedSequence``."""
    return seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(check_seed(seed))


class Uniforms:
    """The uniforms ``U(e, t)`` of the episodes ``episodes`` of the joint seeded by ``seed``."""

    def __init__(self, seed, episodes):
        seed = seed_sequence(seed)
        episodes = np.asarray(episodes, dtype=np.int64)
        groups, self._group = np.unique(episodes // EPISODES_PER_GENERATOR, return_inverse=True)
        self._row = episodes % EPISODES_PER_GENERATOR
        self._generators = [
            np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, int(g))))
            for g in groups
        ]
        self.values = self._block()
        self.used = np.zeros(len(episodes), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.used)

    def _block(self) -> np.ndarray:
        shape = (EPISODES_PER_GENERATOR, DRAWS_PER_BLOCK)
        blocks = np.stack([generator.random(shape) for generator in self._generators])
        return blocks[self._group, self._row]

    def take(self, rows) -> np.ndarray:
        """The next uniform of each episode in ``rows`` (distinct positions in ``episodes``)."""
        rows = np.asarray(rows, dtype=np.intp)
        if not len(rows):
            return np.empty(0)
        drawn = self.used[rows]
        if drawn.max() >= self.values.shape[1]:
            self.values = np.hstack([self.values, self._block()])
        self.used[rows] = drawn + 1
        return self.values[rows, drawn]

    def take_one(self, row: int) -> float:
        """The next uniform of the episode at position ``row``."""
        drawn = self.used.item(row)
        if drawn >= self.values.shape[1]:
            self.values = np.hstack([self.values, self._block()])
        self.used[row] = drawn + 1
        return self.values.item(row, drawn)


def draw_index(probabilities, u: float) -> int:
    """The outcome of ``u`` in [0, 1) under (unnormalised) ``probabilities``, by inverse CDF."""
    cumulative = list(itertools.accumulate(probabilities))
    index = bisect.bisect_right(cumulative, u * cumulative[-1])
    if index == len(cumulative):  # u * total rounded up to the total
        index = max(i for i, p in enumerate(probabilities) if p > 0)
    return index


def draw_actions(probabilities: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row-wise `draw_index` of ``probabilities [B, A]`` with ``u [B]``."""
    cumulative = np.cumsum(probabilities, axis=1)
    index = (cumulative <= (u * cumulative[:, -1])[:, None]).sum(axis=1)
    over = np.flatnonzero(index == probabilities.shape[1])
    if len(over):
        index[over] = probabilities.shape[1] - 1 - np.argmax(probabilities[over, ::-1] > 0, axis=1)
    return index


@contextmanager
def policy_errors(player: int):
    """A call of a policy of ``player``, under the time limit in force
    (`metaeval.runs.time_limit`): whatever it raises, as a one-line ``MetaEvalError``
    naming it (a `PolicyTimeout` if it took too long)."""
    try:
        with limited():
            yield
    except PolicyTimeout as exc:
        raise PolicyTimeout(f"the policy of player {player} gave {exc} (the shard timeout)") from None
    except Exception as exc:  # a policy may raise anything
        cause = first_line(exc) if isinstance(exc, MetaEvalError) else f"{type(exc).__name__}: {first_line(exc)}"
        raise MetaEvalError(f"the policy of player {player} failed: {cause}") from None


def decide(answer, batch: DecisionBatch, u: np.ndarray) -> np.ndarray:
    """Actions drawn with ``u`` from the checked answer of a policy to ``batch``."""
    with policy_errors(batch.player):
        probabilities = checked(answer(batch), batch.legal)
    return draw_actions(probabilities, u)


def chance_step(state, u: float) -> None:
    """Apply the chance outcome of ``state`` that the uniform ``u`` draws."""
    outcomes = state.chance_outcomes()
    state.apply_action(outcomes[draw_index([p for _, p in outcomes], u)][0])


def next_decisions(game, states, rows, uniforms: Uniforms, returns: list):
    """Play the chance nodes of the episodes ``rows`` until each is at a decision or over:
    the returns of those over go to ``returns``; the rest are given as ``(movers,
    simultaneous)``, the rows where player p alone acts (``movers[p]``) and those at a
    simultaneous node. Chance nodes are sampled a round at a time, each round's uniforms
    drawn at once (each episode still draws its own in order)."""
    movers = [[] for _ in range(game.num_players())]
    simultaneous = []
    while rows:
        chance = []
        for row in rows:
            state = states[row]
            player = state.current_player()  # one call tells chance, terminal, simultaneous
            if player >= 0:
                movers[player].append(row)
            elif player == CHANCE:
                chance.append(row)
            elif player == TERMINAL:
                returns[row] = state.returns()
            elif player == SIMULTANEOUS:
                simultaneous.append(row)
            else:
                raise MetaEvalError(f"{game}: cannot play a node of player id {player} (e.g. mean-field games)")
        for row, u in zip(chance, uniforms.take(chance).tolist()):
            chance_step(states[row], u)
        rows = chance
    return movers, simultaneous


def play(game, answers, uniforms: Uniforms, advance=None) -> np.ndarray:
    """Returns ``[E, N]`` of the episodes of ``uniforms``, player p answered by ``answers[p]``
    (from [`metaeval.spiel.batched.as_batched`][metaeval.spiel.as_batched]), all advancing in lock-step;
    ``advance(count)``, if given, is told after every step how many episodes it ended."""
    num_players = game.num_players()
    states = [game.new_initial_state() for _ in range(len(uniforms))]
    reader = TensorReader(game)
    returns = [None] * len(states)
    active = list(range(len(states)))
    while active:
        movers, simultaneous = next_decisions(game, states, active, uniforms, returns)
        joint_actions = {row: [0] * num_players for row in simultaneous}
        for player, turn in enumerate(movers):
            rows = turn + simultaneous
            if not rows:
                continue
            batch = DecisionBatch(game, player, [states[row] for row in rows], reader)
            actions = decide(answers[player], batch, uniforms.take(rows)).tolist()
            for row, action in zip(turn, actions):
                states[row].apply_action(action)
            for row, action in zip(simultaneous, actions[len(turn):]):
                joint_actions[row][player] = action
        for row, actions in joint_actions.items():
            states[row].apply_actions(actions)
        ended = len(active) - len(simultaneous) - sum(map(len, movers))
        active = list(itertools.chain(simultaneous, *movers))
        if advance is not None:
            advance(ended)
    return np.array(returns, dtype=np.float64).reshape(len(states), num_players)


def play_episodes(game, policies, seed, episodes, batch_size: int = BATCH_SIZE, advance=None) -> np.ndarray:
    """Returns ``[E, N]`` of episodes ``episodes`` (a count, or episode numbers) of the joint
    profile ``policies`` (one policy of any kind per player) seeded by ``seed``, played
    ``batch_size`` at a time.

    Args:
        game: the game.
        policies: one policy per player.
        seed: the joint profile's seed (a ``SeedSequence`` or a non-negative int).
        episodes: a count, or the episode numbers.
        batch_size: episodes played at once.
        advance: as in `play`.

    Returns:
        The returns ``[E, N]``.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise MetaEvalError(f"batch_size must be a positive int, got {batch_size!r}")
    numbers = np.arange(episodes) if np.ndim(episodes) == 0 else np.asarray(episodes, dtype=np.int64)
    answers = [as_batched(policy, game, player) for player, policy in enumerate(policies)]
    returns = np.empty((len(numbers), game.num_players()))
    with one_blas_thread():  # policies' many small matrix products: BLAS threads cost more than they give
        for start in range(0, len(numbers), batch_size):
            chunk = numbers[start : start + batch_size]
            returns[start : start + len(chunk)] = play(game, answers, Uniforms(seed, chunk), advance)
    return returns
