"""Deep Q-learning (Mnih et al. 2015) on JAX, many episodes stepped in lock-step.

The update is OpenSpiel's DQN's: a replay buffer of the learner's transitions, the Huber
loss of ``Q(s, a) - (r + discount * max_{b legal at s'} Q_target(s', b))`` (no bootstrap
where the episode ended) on a sampled batch every ``transitions_per_update`` transitions
(OpenSpiel's ``learn_every``), target weights copied every ``target_every`` updates, and
epsilon-greedy play with epsilon decaying linearly from ``epsilon_start`` to
``epsilon_end`` over the first ``epsilon_decay`` of the episode budget.

Why not ``open_spiel.python.jax.dqn.DQN`` itself: it is stepped through ``rl_environment``
one ``TimeStep`` at a time (a network call per move) and it brings flax.nnx, orbax and
chex along; here the network answers all ``num_envs`` running episodes at once
(`metaeval.responses.episodes.TrainingEpisodes`), and the trained weights
are an [`metaeval.spiel.mlp.MLPPolicy`][metaeval.spiel.mlp.MLPPolicy] (``output="greedy"``) as they stand, so the
Evaluator, the batched builder and Ray take them without conversion.

``values`` (what [`DQN.train`][metaeval.responses.dqn.DQN.train] returns and continues from) are the Q-network's weights:
a nested dict of NumPy arrays. Training is reproducible from ``rng``: it draws the
initial weights' key, the opponents, chance, exploration and the replay samples.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from metaeval import games
from metaeval.spiel.batched import observation_size
from metaeval.spiel.lockstep import draw_actions
from metaeval.spiel.mlp import HIDDEN, MLPPolicy, _network, _to_numpy
from metaeval.responses.episodes import TrainingEpisodes
from metaeval.responses.hyperparameters import adam, check_hyperparameters
from metaeval.responses.opponents import Opponents
from metaeval.runs.progress import Progress


class GreedyQNetwork:
    """A responder whose values are a Q-network's weights (an MLP of ``self.hidden``) and whose
    policy is greedy in them: shared by [`DQN`][metaeval.responses.dqn.DQN] and
    [`Rollout`][metaeval.responses.rollout.Rollout]."""

    def initial_values(self, game, player: int, rng: np.random.Generator) -> dict:
        """Fresh Q-network weights for ``player``, seeded from ``rng``.

        Args:
            game: the game.
            player: the player.
            rng: the generator of the weights.

        Returns:
            The weights.
        """
        return MLPPolicy(game, player, seed=int(rng.integers(2**31)), hidden=self.hidden).params

    def policy(self, game, player: int, values) -> MLPPolicy:
        """The greedy policy of the Q-values ``values``.

        Args:
            game: the game.
            player: the player.
            values: the Q-network's weights.

        Returns:
            The policy.
        """
        return MLPPolicy(game, player, hidden=self.hidden, params=values, output="greedy")


@dataclass(frozen=True)
class DQN(GreedyQNetwork):
    """Deep Q-learning with the hyper-parameters below (OpenSpiel's DQN's where they apply,
    with Adam and a smaller replay for games of a few thousand episodes). Learning starts
    once the replay holds one batch and takes a step every 2 transitions: with 500 and 8,
    an oracle of 300 Leduc episodes (500 to 700 transitions) took at most 25 steps and PSRO
    with it stalled near the uniform policy's exploitability (2.11 after 20 iterations,
    mean of 3 seeds, against 1.47; ``python -m bench.rl_oracle``)."""

    hidden: tuple = HIDDEN
    learning_rate: float = 1e-3
    batch_size: int = 128
    replay_capacity: int = 20_000
    min_replay: int = 128
    transitions_per_update: int = 2
    target_every: int = 100
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_decay: float = 0.5
    num_envs: int = 32
    discount: float = 1.0

    def __post_init__(self):
        check_hyperparameters(self, {
            "learning_rate": self.learning_rate > 0, "discount": 0 <= self.discount <= 1,
            "epsilon_start": 0 <= self.epsilon_start <= 1, "epsilon_end": 0 <= self.epsilon_end <= 1,
            "epsilon_decay": 0 < self.epsilon_decay <= 1,
        }, ("batch_size", "replay_capacity", "min_replay", "transitions_per_update", "target_every", "num_envs"))

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values=None) -> dict:
        """Q-network weights after ``episodes`` episodes against ``opponents``, from
        ``values`` (default: fresh weights drawn from ``rng``).

        Args:
            game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
            player: the player who learns.
            opponents: the distribution its opponents are drawn from.
            episodes: the training episodes.
            rng: the generator of every random choice.
            values: the weights to start from.

        Returns:
            The weights.
        """
        with Progress(episodes, f"DQN, player {player}", "episode") as shown:
            return self._train(games.load(game), player, opponents, episodes, rng, values, shown.advance)

    def _train(self, game, player, opponents, episodes, rng, values, advance) -> dict:
        params = self.initial_values(game, player, rng) if values is None else values
        jitted = _jitted(self.hidden, game.num_distinct_actions(), self.discount)
        optimiser_state = adam(self.learning_rate).init(params)
        target = params
        replay = _Replay(self.replay_capacity, observation_size(game), game.num_distinct_actions())
        env = TrainingEpisodes(game, player, opponents, episodes, self.num_envs, rng, advance)
        observations, legal, live = env.observe()
        updates = owed = 0
        while env.running():
            epsilon = self._epsilon(len(env.returns) / episodes)
            q_values = np.asarray(jitted.q_values(params, observations))
            greedy = np.where(legal, q_values, -np.inf).argmax(axis=1)
            explore = rng.random(len(live)) < epsilon
            uniform = draw_actions(legal / np.maximum(legal.sum(axis=1, keepdims=True), 1), rng.random(len(live)))
            actions = np.where(explore, uniform, greedy)
            rewards, done = env.act(actions)
            next_observations, next_legal, next_live = env.observe()
            replay.add(live, observations, actions, rewards, next_observations, next_legal, done)
            owed += int(live.sum())
            while replay.size >= self.min_replay and owed >= self.transitions_per_update:
                owed -= self.transitions_per_update
                batch = replay.sample(rng, self.batch_size)
                params, optimiser_state = jitted.update(params, target, optimiser_state, *batch)
                updates += 1
                if updates % self.target_every == 0:
                    target = params
            observations, legal, live = next_observations, next_legal, next_live
        return _to_numpy(params)

    def _epsilon(self, progress: float) -> float:
        fraction = min(1.0, progress / self.epsilon_decay)
        return self.epsilon_start + fraction * (self.epsilon_end - self.epsilon_start)


class _Replay:
    """A ring buffer of the learner's transitions."""

    def __init__(self, capacity: int, width: int, actions: int):
        self.capacity, self.size, self._next = capacity, 0, 0
        self.observations = np.zeros((capacity, width), np.float32)
        self.actions = np.zeros(capacity, np.int32)
        self.rewards = np.zeros(capacity, np.float32)
        self.next_observations = np.zeros((capacity, width), np.float32)
        self.next_legal = np.zeros((capacity, actions), bool)
        self.done = np.zeros(capacity, bool)

    def add(self, live, observations, actions, rewards, next_observations, next_legal, done) -> None:
        rows = np.flatnonzero(live)
        slots = (self._next + np.arange(len(rows))) % self.capacity
        self.observations[slots] = observations[rows]
        self.actions[slots] = actions[rows]
        self.rewards[slots] = rewards[rows]
        self.next_observations[slots] = next_observations[rows]
        self.next_legal[slots] = next_legal[rows]
        self.done[slots] = done[rows]
        self._next = (self._next + len(rows)) % self.capacity
        self.size = min(self.capacity, self.size + len(rows))

    def sample(self, rng: np.random.Generator, count: int):
        rows = rng.integers(self.size, size=count)
        return (self.observations[rows], self.actions[rows], self.rewards[rows],
                self.next_observations[rows], self.next_legal[rows], self.done[rows])


@functools.lru_cache(maxsize=None)
def _jitted(hidden: tuple, num_actions: int, discount: float):
    """The jitted Q-values and update of one network shape (the learning rate is in the
    optimiser's state)."""
    import jax
    import jax.numpy as jnp
    import optax

    module, _ = _network(hidden, num_actions)
    optimiser = adam()

    def q_values(params, observations):
        return module.apply({"params": params}, observations)

    def loss(params, target, observations, actions, rewards, next_observations, next_legal, done):
        taken = jnp.take_along_axis(q_values(params, observations), actions[:, None], axis=1)[:, 0]
        following = jnp.where(next_legal, q_values(target, next_observations), -jnp.inf).max(axis=1)
        following = jnp.where(done | ~next_legal.any(axis=1), 0.0, following)
        targets = jax.lax.stop_gradient(rewards + discount * following)
        return optax.huber_loss(taken, targets).mean()

    @jax.jit
    def update(params, target, optimiser_state, *batch):
        grads = jax.grad(loss)(params, target, *batch)
        changes, optimiser_state = optimiser.update(grads, optimiser_state)
        return optax.apply_updates(params, changes), optimiser_state

    return _Functions(jax.jit(q_values), update)


class _Functions(NamedTuple):
    q_values: Callable
    update: Callable
