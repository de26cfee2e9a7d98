"""Batched policies: action probabilities for a whole batch of decisions at once.

A *batched* policy (the protocol [`BatchedPolicy`][metaeval.spiel.BatchedPolicy]) answers

    probabilities = policy.batch_probabilities(observations, legal)

with ``observations [B, D]`` float32 (the acting player's information-state tensors,
or observation tensors where the game has no information-state tensor, see
[`observation_kind`][metaeval.spiel.observation_kind]), ``legal [B, A]`` bool legal-action masks, and
``probabilities [B, A]``: a distribution over legal actions per row. Neural
policies answer natively ([`metaeval.spiel.mlp.MLPPolicy`][metaeval.spiel.mlp.MLPPolicy]).

Every other policy is answered per state through [`as_batched`][metaeval.spiel.as_batched]: any OpenSpiel
``Policy`` (tabular or not), a ``pyspiel`` policy, or a plain callable
``fn(state, player) -> {action: probability}`` wrapped in [`CallablePolicy`][metaeval.spiel.CallablePolicy].
The lock-step episodes ([`metaeval.spiel.lockstep`][metaeval.spiel.lockstep]) call every policy through
[`as_batched`][metaeval.spiel.as_batched], once per decision step for the whole batch.
"""

from __future__ import annotations

from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib
from open_spiel.python.observation import INFO_STATE_OBS_TYPE, make_observation

from metaeval.errors import MetaEvalError
from metaeval.spiel.adapters import CallablePolicy
from metaeval.spiel.policies import PROBABILITY_TOLERANCE, probability_row
from metaeval.spiel.tree import infostate_key

#: Row sums a batched answer may miss 1 by: float32 networks round at about 1e-7 per action.
BATCH_SUM_TOLERANCE = 1e-4


@runtime_checkable
class BatchedPolicy(Protocol):
    """A policy that answers a batch of decisions natively."""

    def batch_probabilities(self, observations: np.ndarray, legal: np.ndarray) -> np.ndarray:
        """``[B, A]`` action probabilities for ``observations [B, D]`` and masks ``legal [B, A]``.

        Args:
            observations: the acting player's tensors ``[B, D]``.
            legal: the legal-action masks ``[B, A]``.

        Returns:
            The probabilities ``[B, A]``.
        """


def observation_kind(game) -> str:
    """``"information_state"`` or ``"observation"``: the tensor batched policies of ``game`` see.

    Args:
        game: the game.

    Returns:
        The kind.

    Raises:
        MetaEvalError: the game has neither tensor.
    """
    game_type = game.get_type()
    if game_type.provides_information_state_tensor:
        return "information_state"
    if game_type.provides_observation_tensor:
        return "observation"
    raise MetaEvalError(f"{game} has neither information-state nor observation tensors; batched policies need one")


def observation_size(game) -> int:
    """Length of the flattened tensor of [`observation_kind`][metaeval.spiel.observation_kind].

    Args:
        game: the game.

    Returns:
        The size D.
    """
    if observation_kind(game) == "information_state":
        return game.information_state_tensor_size()
    return game.observation_tensor_size()


class TensorReader:
    """Reads the tensors batched policies of ``game`` see into rows of an array.

    Through OpenSpiel's observation API (one C++ buffer written in place; about twice
    as fast as ``state.information_state_tensor``, which builds a Python list), with
    the perfect-recall observation type for information states, the game's default
    for observations: the same numbers as the state's own tensor methods.
    """

    def __init__(self, game):
        kind = observation_kind(game)
        self._observation = make_observation(game, INFO_STATE_OBS_TYPE if kind == "information_state" else None)
        self._method = f"{kind}_tensor"

    def read(self, states, player: int) -> np.ndarray:
        """``[len(states), D]`` float32 tensors of ``states`` seen by ``player``."""
        observation = self._observation
        if observation is None or observation.tensor is None:
            return np.array([getattr(state, self._method)(player) for state in states], dtype=np.float32)
        tensor, parts = observation.tensor, []
        for state in states:  # copying each tensor out as bytes costs a third of a row assignment
            observation.set_from(state, player)
            parts.append(tensor.tobytes())
        return np.frombuffer(bytearray().join(parts), dtype=np.float32).reshape(len(states), tensor.size)


class DecisionBatch:
    """Decisions of one player in a batch of episodes: states, legal masks, and (built on
    first use, as only native batched policies need them) observation tensors, read by
    ``reader`` (a `TensorReader` of the game; one is made when not given)."""

    def __init__(self, game, player: int, states: list, reader: TensorReader | None = None):
        self.game, self.player, self.states, self._reader = game, player, states, reader
        self.legal = np.array([state.legal_actions_mask(player) for state in states], dtype=bool)

    @cached_property
    def observations(self) -> np.ndarray:
        return (self._reader or TensorReader(self.game)).read(self.states, self.player)


def as_batched(policy, game, player: int):
    """``answer(batch: DecisionBatch) -> [B, A]`` for any policy of ``player``.

    A [`BatchedPolicy`][metaeval.spiel.BatchedPolicy] is asked once for the whole batch; a ``TabularPolicy``
    gathers its table's rows; any other OpenSpiel or ``pyspiel`` policy is asked once
    per state (``action_probabilities``); a plain callable is first wrapped in
    [`CallablePolicy`][metaeval.spiel.CallablePolicy]. Answers are not checked here (see
    `checked`).

    Args:
        policy: the policy.
        game: the game.
        player: the player it plays.

    Returns:
        The answering function.
    """
    if isinstance(policy, BatchedPolicy):
        return lambda batch: policy.batch_probabilities(batch.observations, batch.legal)
    if isinstance(policy, policy_lib.TabularPolicy):
        return _tabular(policy)
    if not isinstance(policy, policy_lib.Policy) and callable(policy) and not isinstance(policy, pyspiel.Policy):
        policy = CallablePolicy(policy, game, [player])

    def per_state(batch: DecisionBatch) -> np.ndarray:
        width = batch.legal.shape[1]
        return np.array([probability_row(policy, state, batch.player, width) for state in batch.states])

    return per_state


def _tabular(policy: policy_lib.TabularPolicy):
    """A ``TabularPolicy`` answers with its table's rows, looked up by the key it uses itself
    (one dictionary lookup per state instead of a dictionary built per state)."""
    table, lookup, game_type = policy.action_probability_array, policy.state_lookup, policy.game_type

    def rows(batch: DecisionBatch) -> np.ndarray:
        return table[[lookup[infostate_key(game_type, state, batch.player)] for state in batch.states]]

    return rows


def checked(probabilities, legal: np.ndarray) -> np.ndarray:
    """``probabilities`` as a float64 ``[B, A]`` array, after checking they are
    distributions over the legal actions (one-line ``MetaEvalError`` otherwise)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.shape != legal.shape:
        raise MetaEvalError(f"expected probabilities of shape {legal.shape}, got {probabilities.shape}")
    if not is_distribution(probabilities, legal):
        raise MetaEvalError(f"action probabilities {distribution_problem(probabilities, legal)}")
    return probabilities


def is_distribution(probabilities: np.ndarray, legal: np.ndarray) -> bool:
    """Whether every row is a distribution over its legal actions: the checks of
    `distribution_problem` in a few array passes, as a batch is checked every step
    (a NaN fails every comparison, an infinity the minimum or the row sums)."""
    if not probabilities.size:
        return True
    illegal = np.where(legal, 0.0, probabilities)
    return bool(
        probabilities.min() >= -PROBABILITY_TOLERANCE
        and np.abs(illegal).max() <= PROBABILITY_TOLERANCE
        and np.abs(probabilities.sum(axis=1) - 1.0).max() <= BATCH_SUM_TOLERANCE
    )


def distribution_problem(probabilities: np.ndarray, legal: np.ndarray) -> str:
    """What makes ``probabilities`` no distributions over the legal actions, for the error."""
    if not np.isfinite(probabilities).all():
        return "are not finite"
    if (probabilities < -PROBABILITY_TOLERANCE).any():
        return "are negative"
    if (np.abs(probabilities[~legal]) > PROBABILITY_TOLERANCE).any():
        return "put mass on an illegal action"
    return "do not sum to 1"
