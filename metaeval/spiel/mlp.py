"""A small multi-layer perceptron policy on JAX (flax), batched natively.

    policy = MLPPolicy(game, player=0, seed=3)             # random initial weights
    probabilities = policy.batch_probabilities(obs, legal)   # [B, A], one jitted call
    policy.action_probabilities(state)                       # an OpenSpiel Policy too
    policy.save("p0.npz"); MLPPolicy.load("p0.npz")
    trained = policy.imitate(obs, legal, targets)          # a new policy (optax Adam)

The network maps the acting player's information-state tensor (observation tensor
where the game has none; [`metaeval.spiel.batched.observation_kind`][metaeval.spiel.observation_kind]) through
ReLU hidden layers to one logit per action; illegal actions are masked out before
the softmax. Parameters are kept as NumPy arrays, so a policy pickles (Ray) and
copies cheaply; the jitted forward pass is shared by all policies of one shape.
Batches are padded to the next power of two, so a run compiles at most
``log2(largest batch) + 1`` shapes however the batch sizes vary from step to step.

The forward pass stays on JAX although the network is tiny. Measured on leduc_poker
(64x64): NumPy answers one row in 10 us of CPU against JAX's 30-50 us of dispatch,
but NumPy's matrix products go to a multi-threaded BLAS from about a hundred rows
on, which cost milliseconds of CPU per call on a busy machine (JAX: 60-120 us at
500 rows). Answering small batches with NumPy and large ones with JAX would not pay
either: it would add a second rounding of every row, chosen by the batch's size.
"""

from __future__ import annotations

import copy
import functools
import json

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.runs.fileio import atomic_savez, json_entry, read_arrays
from metaeval.spiel.batched import observation_kind, observation_size

FILE_FORMAT = "metaeval.mlp_policy/1"
HIDDEN = (64, 64)
OUTPUTS = ("softmax", "greedy")


@functools.lru_cache(maxsize=None)
def _network(hidden: tuple[int, ...], num_actions: int, output: str = "softmax"):
    """The flax module and its jitted answer ``(params, obs, legal) -> [B, A]``: the masked
    softmax of the outputs, or (``output="greedy"``, for action values) uniform over the
    legal actions of the largest output."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            for width in hidden:
                x = nn.relu(nn.Dense(width)(x))
            return nn.Dense(num_actions)(x)

    module = MLP()

    @jax.jit
    def probabilities(params, observations, legal):
        outputs = jnp.where(legal, module.apply({"params": params}, observations), -jnp.inf)
        if output == "softmax":
            return jax.nn.softmax(outputs, axis=-1)
        best = outputs == outputs.max(axis=-1, keepdims=True)
        return best / best.sum(axis=-1, keepdims=True)

    return module, probabilities


class MLPPolicy(policy_lib.Policy):
    """An MLP policy for one player of ``game``.

    Args:
        game: a ``pyspiel.Game`` or a name for [`metaeval.games.load`][metaeval.games.load].
        player: the player it acts for.
        seed: seeds the initial weights (flax's default initialisers).
        hidden: widths of the hidden layers.
        params: weights to use instead (a nested dict of arrays, as ``params`` holds).
        output: ``"softmax"`` (the outputs are logits) or ``"greedy"`` (they are action
            values: play uniformly among the legal actions of the largest).
    """

    def __init__(self, game, player: int, seed: int = 0, hidden=HIDDEN, params=None, output: str = "softmax"):
        game = games.load(game)
        if not 0 <= player < game.num_players():
            raise MetaEvalError(f"player must be in 0..{game.num_players() - 1}, got {player}")
        super().__init__(game, [player])
        self.player = player
        self.hidden = tuple(int(width) for width in hidden)
        if output not in OUTPUTS:
            raise MetaEvalError(f"output must be one of {OUTPUTS}, got {output!r}")
        self.output = output
        self.kind = observation_kind(game)
        self.num_actions = game.num_distinct_actions()
        if params is None:
            import jax

            module, _ = _network(self.hidden, self.num_actions)
            dummy = np.zeros((1, observation_size(game)), dtype=np.float32)
            params = module.init(jax.random.PRNGKey(seed), dummy)["params"]
        self.params = _to_numpy(params)
        self._device_params = None

    # -- answers ---------------------------------------------------------------
    def batch_probabilities(self, observations, legal) -> np.ndarray:
        """``[B, A]`` probabilities for ``observations [B, D]`` and legal masks ``legal [B, A]``.

        Args:
            observations: the acting player's tensors ``[B, D]``.
            legal: the legal-action masks ``[B, A]``.

        Returns:
            The probabilities ``[B, A]``.
        """
        observations = np.asarray(observations, dtype=np.float32)
        legal = np.asarray(legal, dtype=bool)
        size = len(observations)
        padded = 1 << max(0, size - 1).bit_length()
        if padded != size:  # padding rows: all actions legal, so their softmax is finite
            observations = np.concatenate([observations, np.zeros((padded - size, observations.shape[1]), np.float32)])
            legal = np.concatenate([legal, np.ones((padded - size, legal.shape[1]), bool)])
        if self._device_params is None:
            import jax

            self._device_params = jax.device_put(self.params)
        _, forward = _network(self.hidden, self.num_actions, self.output)
        return np.asarray(forward(self._device_params, observations, legal))[:size]

    def action_probabilities(self, state, player_id=None):
        player = self.player if player_id is None else player_id
        if self.kind == "information_state":
            observation = state.information_state_tensor(player)
        else:
            observation = state.observation_tensor(player)
        legal = np.asarray(state.legal_actions_mask(player), dtype=bool)
        row = self.batch_probabilities(np.asarray([observation], np.float32), legal[None])[0]
        return {int(action): float(row[action]) for action in np.flatnonzero(legal)}

    def imitate(self, observations, legal, targets, steps: int = 500, learning_rate: float = 1e-2) -> MLPPolicy:
        """A new policy trained from this one to answer ``targets [B, A]`` (distributions over
        the legal actions) at ``observations [B, D]``, ``legal [B, A]``: full-batch Adam
        (optax) on the cross-entropy. This policy is left unchanged, so one already
        evaluated never changes under a meta-game that was built from it.

        Args:
            observations: the tensors ``[B, D]``.
            legal: the legal-action masks ``[B, A]``.
            targets: the distributions to answer ``[B, A]``.
            steps: Adam steps.
            learning_rate: Adam's learning rate.

        Returns:
            The new policy.
        """
        import jax
        import jax.numpy as jnp
        import optax

        observations = jnp.asarray(observations, dtype=jnp.float32)
        legal = jnp.asarray(legal, dtype=bool)
        targets = jnp.asarray(targets, dtype=jnp.float32)
        module, _ = _network(self.hidden, self.num_actions)
        optimiser = optax.adam(learning_rate)

        def loss(params):
            logits = jnp.where(legal, module.apply({"params": params}, observations), -1e9)
            return -jnp.mean(jnp.sum(targets * jax.nn.log_softmax(logits), axis=-1))

        @jax.jit
        def step(params, state):
            updates, state = optimiser.update(jax.grad(loss)(params), state)
            return optax.apply_updates(params, updates), state

        params = jax.device_put(self.params)
        state = optimiser.init(params)
        for _ in range(steps):
            params, state = step(params, state)
        return MLPPolicy(self.game, self.player, hidden=self.hidden, params=params, output=self.output)

    # -- state -----------------------------------------------------------------
    def __deepcopy__(self, memo):
        """A copy sharing what cannot change: the read-only weights, their device copy
        (immutable JAX arrays) and the game. A snapshot (`metaeval.spiel.snapshot`)
        then holds no second copy of the weights; rebinding a weight in this policy's
        dicts leaves the copy as it was, and a writeable array given as a weight is copied."""
        shared = {"game": self.game, "params": _share(self.params, memo), "_device_params": self._device_params}
        copied = copy.copy(self)
        copied.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items() if k not in shared})
        copied.__dict__.update(shared)
        return copied

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_device_params"] = None  # device buffers stay in their process
        return state

    def save(self, path) -> None:
        """Write the weights and what rebuilds the policy to ``path`` (an ``.npz``, atomically).

        Args:
            path: the file to write.
        """
        meta = dict(format=FILE_FORMAT, game=str(self.game), player=self.player, hidden=self.hidden,
                    output=self.output)
        from flax.traverse_util import flatten_dict

        arrays = {f"params/{name}": value for name, value in flatten_dict(self.params, sep="/").items()}
        atomic_savez(path, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path) -> MLPPolicy:
        """The policy [`save`][metaeval.spiel.mlp.MLPPolicy.save] wrote to ``path``.

        Args:
            path: the file.

        Returns:
            The policy.
        """
        from flax.traverse_util import unflatten_dict

        arrays = read_arrays(path, "an MLP policy")
        meta = json_entry(arrays, "meta", "an MLP policy", path) if "meta" in arrays else {}
        if not isinstance(meta, dict) or meta.get("format") != FILE_FORMAT:
            raise MetaEvalError(f"{path} is not a saved MLP policy (format {FILE_FORMAT})")
        flat = {name[len("params/"):]: value for name, value in arrays.items() if name.startswith("params/")}
        return cls(meta["game"], meta["player"], hidden=meta["hidden"], params=unflatten_dict(flat, sep="/"),
                   output=meta.get("output", "softmax"))


def _share(params, memo) -> dict:
    """New nested dicts over the same read-only arrays of ``params`` (writeable ones copied)."""
    if isinstance(params, dict):
        return {key: _share(value, memo) for key, value in params.items()}
    if isinstance(params, np.ndarray) and not params.flags.writeable:
        return params
    return copy.deepcopy(params, memo)


def _to_numpy(params) -> dict:
    """A nested dict of read-only NumPy copies of ``params`` (an evaluated policy never changes)."""
    from flax.core import unfreeze
    from flax.traverse_util import flatten_dict, unflatten_dict

    flat = {key: np.array(value) for key, value in flatten_dict(unfreeze(params)).items()}
    for value in flat.values():
        value.setflags(write=False)
    return unflatten_dict(flat)
