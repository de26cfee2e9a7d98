"""Proximal policy optimisation (Schulman et al. 2017) on JAX, many episodes in lock-step.

Each round plays ``rollout_steps`` decisions of all ``num_envs`` running episodes with the
current policy, computes generalised advantage estimates (GAE, Schulman et al. 2016:
``A_t = sum_k (discount * lam)^k delta_{t+k}``, ``delta_t = r_t + discount * V(s_{t+1}) - V(s_t)``,
cut where an episode ends), then takes ``epochs`` passes of Adam over ``minibatches``
minibatches of the clipped surrogate (eq. 7 of the paper)

    L = -E[min(rho A, clip(rho, 1 - clip, 1 + clip) A)] + value_coef E[(V - R)^2] - entropy_coef E[H(pi)]

with ``rho = pi(a|s) / pi_old(a|s)`` over the legal actions only. Actor and critic are two
MLPs; the actor's weights are an [`metaeval.spiel.mlp.MLPPolicy`][metaeval.spiel.mlp.MLPPolicy] as they stand.

Why here and not OpenSpiel's ``open_spiel.python.jax.policy_gradient``: that one needs
haiku and rlax (not installed beside flax) and is stepped one ``TimeStep`` at a time;
OpenSpiel's PPO (``open_spiel.python.pytorch.ppo``) needs PyTorch.

``values`` (what [`PPO.train`][metaeval.responses.ppo.PPO.train] returns and continues from) are the actor's and the
critic's weights, ``{"actor": ..., "critic": ...}``. Training is reproducible from ``rng``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from metaeval import games
from metaeval.spiel.lockstep import draw_actions
from metaeval.spiel.batched import observation_size
from metaeval.spiel.mlp import HIDDEN, MLPPolicy, _network, _to_numpy
from metaeval.responses.episodes import TrainingEpisodes
from metaeval.responses.hyperparameters import adam, check_hyperparameters
from metaeval.responses.opponents import Opponents
from metaeval.runs.progress import Progress


@dataclass(frozen=True)
class PPO:
    """PPO with the hyper-parameters below (the paper's Atari settings where they apply)."""

    hidden: tuple = HIDDEN
    learning_rate: float = 2.5e-3
    num_envs: int = 32
    rollout_steps: int = 16
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    gae_lambda: float = 0.95
    discount: float = 1.0
    value_coef: float = 0.5
    entropy_coef: float = 0.01

    def __post_init__(self):
        check_hyperparameters(self, {
            "learning_rate": self.learning_rate > 0, "clip": 0 < self.clip < 1,
            "gae_lambda": 0 <= self.gae_lambda <= 1, "discount": 0 <= self.discount <= 1,
            "value_coef": self.value_coef >= 0, "entropy_coef": self.entropy_coef >= 0,
        }, ("num_envs", "rollout_steps", "epochs", "minibatches"))

    def initial_values(self, game, player: int, rng: np.random.Generator) -> dict:
        """Fresh actor and critic weights for ``player``, seeded from ``rng``.

        Args:
            game: the game.
            player: the player.
            rng: the generator of the weights.

        Returns:
            The weights, ``{"actor": ..., "critic": ...}``.
        """
        import jax

        game = games.load(game)
        actor = MLPPolicy(game, player, seed=int(rng.integers(2**31)), hidden=self.hidden)
        critic, _ = _network(self.hidden, 1)
        key = jax.random.PRNGKey(int(rng.integers(2**31)))
        dummy = np.zeros((1, observation_size(game)), np.float32)
        return {"actor": actor.params, "critic": _to_numpy(critic.init(key, dummy)["params"])}

    def policy(self, game, player: int, values) -> MLPPolicy:
        """The actor of ``values``: a softmax policy over the legal actions.

        Args:
            game: the game.
            player: the player.
            values: the actor's and critic's weights.

        Returns:
            The policy.
        """
        return MLPPolicy(game, player, hidden=self.hidden, params=values["actor"])

    def train(self, game, player: int, opponents: Opponents, episodes: int, rng: np.random.Generator,
              values=None) -> dict:
        """Actor and critic weights after ``episodes`` episodes against ``opponents``, from
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
        with Progress(episodes, f"PPO, player {player}", "episode") as shown:
            return self._train(games.load(game), player, opponents, episodes, rng, values, shown.advance)

    def _train(self, game, player, opponents, episodes, rng, values, advance) -> dict:
        params = self.initial_values(game, player, rng) if values is None else values
        jitted = _jitted(self.hidden, game.num_distinct_actions(), self.clip, self.value_coef)
        optimiser_state = adam(self.learning_rate).init(params)
        env = TrainingEpisodes(game, player, opponents, episodes, self.num_envs, rng, advance)
        observations, legal, live = env.observe()
        while env.running():
            rollout = []
            for _ in range(self.rollout_steps):
                if not env.running():
                    break
                probabilities, values_now = (np.asarray(x) for x in jitted.forward(params, observations, legal | ~live[:, None]))
                actions = draw_actions(np.where(legal, probabilities, 0.0) + ~live[:, None] * 1.0, rng.random(len(live)))
                rewards, done = env.act(actions)
                rollout.append((observations, legal, live, actions, probabilities[np.arange(len(actions)), actions],
                                values_now, rewards, done))
                observations, legal, live = env.observe()
            _, last_values = (np.asarray(x) for x in jitted.forward(params, observations, legal | ~live[:, None]))
            batch = self._batch(rollout, last_values, live)
            params, optimiser_state = self._update(jitted, params, optimiser_state, batch, rng)
        return _to_numpy(params)

    def _batch(self, rollout, last_values, last_live):
        """Flattened ``(observations, legal, actions, old probabilities, advantages, returns)``
        of the live rows of a rollout, with GAE computed backwards through it."""
        advantages = np.zeros_like(last_values)
        following = np.where(last_live, last_values, 0.0)
        gathered = []
        for observations, legal, live, actions, taken, values, rewards, done in reversed(rollout):
            following = np.where(done, 0.0, following)
            delta = rewards + self.discount * following - values
            advantages = delta + self.discount * self.gae_lambda * np.where(done, 0.0, advantages)
            rows = np.flatnonzero(live)
            gathered.append((observations[rows], legal[rows], actions[rows], taken[rows], advantages[rows],
                             (advantages + values)[rows]))
            following = values
        return tuple(np.concatenate(parts) for parts in zip(*gathered))

    def _update(self, jitted, params, optimiser_state, batch, rng):
        """``epochs`` passes over ``batch`` in ``minibatches`` minibatches, each padded to one
        size (weight 0 on padding rows), so the update compiles once per run."""
        size = len(batch[0])
        width = -(-self.num_envs * self.rollout_steps // self.minibatches)
        for _ in range(self.epochs):
            for rows in np.array_split(rng.permutation(size), max(1, -(-size // width))):
                padded = np.resize(rows, width)
                weights = (np.arange(width) < len(rows)).astype(np.float32)
                params, optimiser_state = jitted.update(params, optimiser_state, self.entropy_coef, weights,
                                                        *(part[padded] for part in batch))
        return params, optimiser_state


@functools.lru_cache(maxsize=None)
def _jitted(hidden: tuple, num_actions: int, clip: float, value_coef: float):
    """The jitted forward pass and update of one network shape and set of coefficients (the
    learning rate is in the optimiser's state and the entropy coefficient an argument, so
    PBT's members, which explore both, share one compiled update)."""
    import jax
    import jax.numpy as jnp
    import optax

    actor, _ = _network(hidden, num_actions)
    critic, _ = _network(hidden, 1)
    optimiser = adam()

    def policy(params, observations, legal):
        logits = jnp.where(legal, actor.apply({"params": params["actor"]}, observations), -1e9)
        return jax.nn.log_softmax(logits)

    @jax.jit
    def forward(params, observations, legal):
        return jnp.exp(policy(params, observations, legal)), critic.apply({"params": params["critic"]}, observations)[:, 0]

    def loss(params, entropy_coef, weights, observations, legal, actions, taken, advantages, returns):
        def mean(x):
            return jnp.sum(weights * x) / jnp.sum(weights)

        log_probabilities = policy(params, observations, legal)
        ratio = jnp.exp(jnp.take_along_axis(log_probabilities, actions[:, None], axis=1)[:, 0] - jnp.log(taken))
        centred = advantages - mean(advantages)
        advantages = centred / (jnp.sqrt(mean(centred**2)) + 1e-8)
        surrogate = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1 - clip, 1 + clip) * advantages)
        values = critic.apply({"params": params["critic"]}, observations)[:, 0]
        entropy = -jnp.sum(jnp.where(legal, jnp.exp(log_probabilities) * log_probabilities, 0.0), axis=1)
        return -mean(surrogate) + value_coef * mean((values - returns) ** 2) - entropy_coef * mean(entropy)

    @jax.jit
    def update(params, optimiser_state, entropy_coef, weights, *batch):
        grads = jax.grad(loss)(params, entropy_coef, weights, *batch)
        changes, optimiser_state = optimiser.update(grads, optimiser_state)
        return optax.apply_updates(params, changes), optimiser_state

    return _Functions(forward, update)


class _Functions(NamedTuple):
    forward: Callable
    update: Callable
