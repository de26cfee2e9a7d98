"""Tabular policies: random ones (maths, section 3), and any policy as a per-state table.

A policy *table* for player p is an array ``[S_p, A]`` laid out like the player's
template ``TabularPolicy`` (see `metaeval.spiel.tree`): row = information
state, column = action. Random policies are ``TabularPolicy`` objects sharing the
template's lookup tables, with a read-only probability array, so a policy never
changes after it has been evaluated (meta-game caches key on policy ids).
"""

from __future__ import annotations

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval.errors import MetaEvalError
from metaeval.spiel.tree import PlayerLayout, game_tree, infostate_key

#: Kinds of random policy: Dirichlet(1) over legal actions at every information
#: state, the uniform policy, or one legal action drawn uniformly per state.
KINDS = ("dirichlet", "uniform", "deterministic")

PROBABILITY_TOLERANCE = 1e-9
SUM_TOLERANCE = 1e-6


def random_table(layout: PlayerLayout, rng: np.random.Generator, kind: str = "dirichlet") -> np.ndarray:
    """A ``[S, A]`` table of the given kind; rows are distributions over legal actions."""
    legal = layout.legal
    if kind == "dirichlet":
        # Normalised i.i.d. Exp(1) draws are Dirichlet(1) over the legal actions.
        weights = rng.standard_exponential(legal.shape) * legal
    elif kind == "uniform":
        weights = legal.astype(np.float64)
    elif kind == "deterministic":
        scores = np.where(legal, rng.random(legal.shape), -1.0)
        weights = np.zeros(legal.shape)
        weights[np.arange(legal.shape[0]), scores.argmax(axis=1)] = 1.0
    else:
        raise MetaEvalError(f"unknown policy kind {kind!r}; choose one of {', '.join(KINDS)}")
    return weights / weights.sum(axis=1, keepdims=True)


def tabular_policy(layout: PlayerLayout, table: np.ndarray) -> policy_lib.TabularPolicy:
    """A ``TabularPolicy`` for the layout's player whose probabilities are ``table`` (read-only)."""
    table = check_table(layout, table)
    result = layout.template.__copy__(copy_action_probability_array=False)
    frozen = np.array(table, dtype=np.float64)
    frozen.setflags(write=False)
    result.action_probability_array = frozen
    return result


def random_policy(game, player: int, rng: np.random.Generator, kind: str = "dirichlet"):
    """A random tabular policy of ``kind`` for ``player`` of an enumerable game.

    Args:
        game: the game.
        player: the player.
        rng: the generator of the draw.
        kind: the law of a random policy.

    Returns:
        The policy, a ``TabularPolicy``.
    """
    layout = game_tree(game).players[player]
    return tabular_policy(layout, random_table(layout, rng, kind))


def policy_table(layout: PlayerLayout, policy, player: int) -> np.ndarray:
    """The ``[S, A]`` table of any OpenSpiel policy for ``player``.

    Tabular policies are gathered by information-state key (no copy when they share
    the layout); other ``Policy`` objects and ``pyspiel`` policies are asked once per
    information state, at a representative state.

    Args:
        layout: the player's table layout (``game_tree(game).players[player]``).
        policy: the policy.
        player: the player.

    Returns:
        The table ``[S, A]``.
    """
    template = layout.template
    if isinstance(policy, policy_lib.TabularPolicy):
        if policy.state_lookup is template.state_lookup:
            table = policy.action_probability_array
        else:
            keys = layout.keys
            missing = [key for key in keys if key not in policy.state_lookup]
            if missing:
                raise MetaEvalError(
                    f"the tabular policy for player {player} has no entry for {len(missing)} of "
                    f"its {len(keys)} information states (e.g. {missing[0]!r}); is it for this game?"
                )
            rows = [policy.state_lookup[key] for key in keys]
            table = np.asarray(policy.action_probability_array)[rows]
    else:
        table = np.zeros(layout.legal.shape)
        for row, state in enumerate(template.states):
            table[row] = probability_row(policy, state, player, layout.legal.shape[1])
    return check_table(layout, table, player)


def action_probabilities(policy, state, player: int) -> dict[int, float]:
    """``{action: probability}`` of any OpenSpiel policy for ``player`` at ``state``."""
    if isinstance(policy, policy_lib.Policy):
        return policy.action_probabilities(state, player)
    if isinstance(policy, pyspiel.Policy):
        return policy.action_probabilities(state)
    raise MetaEvalError(
        "expected an OpenSpiel policy (open_spiel.python.policy.Policy or pyspiel.Policy), "
        f"got {type(policy).__name__}"
    )


def probability_row(policy, state, player: int, num_actions: int) -> np.ndarray:
    """``[num_actions]`` probabilities of any OpenSpiel policy for ``player`` at ``state``."""
    row = np.zeros(num_actions)
    probabilities = action_probabilities(policy, state, player)
    if not probabilities:
        key = infostate_key(state.get_game().get_type(), state, player)
        raise MetaEvalError(
            f"the policy for player {player} has no action probabilities at {key!r}; is it for this game?"
        )
    for given, probability in probabilities.items():
        action = action_index(given, policy, state, player)
        if not 0 <= action < num_actions:
            key = infostate_key(state.get_game().get_type(), state, player)
            raise MetaEvalError(f"policy gives action {action} at {key!r}; the game has {num_actions}")
        row[action] += probability
    return row


def action_index(key, policy, state, player: int) -> int:
    """The action a key of ``policy``'s answer at ``state`` names: an integer (Python or
    NumPy) or an integral float such as 3.0. Any other key is refused in one line naming
    the policy: ``int()`` would play 0.7 as action 0."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return int(key)
    if isinstance(key, (float, np.floating)) and float(key).is_integer():
        return int(key)
    raise MetaEvalError(f"{policy_name(policy)} gives action {key!r} at {where(state, player)}; "
                        "actions must be integers")


def policy_name(policy) -> str:
    """``policy``'s own ``repr`` where its class has one (``CallablePolicy(fn)``), else its class name."""
    if type(policy).__repr__ is object.__repr__:
        return type(policy).__name__
    return repr(policy).splitlines()[0]


def where(state, player: int) -> str:
    """``state``'s information-state key for ``player``, and the player, for errors."""
    return f"{infostate_key(state.get_game().get_type(), state, player)!r} (player {player})"


def check_table(layout: PlayerLayout, table, player: int | None = None) -> np.ndarray:
    """``table`` as a float array after checking it is a policy on the layout's states."""
    table = np.asarray(table, dtype=np.float64)
    who = "policy" if player is None else f"policy for player {player}"
    if table.shape != layout.legal.shape:
        raise MetaEvalError(
            f"{who}: table of shape {table.shape} does not fit the game's layout {layout.legal.shape}"
        )
    with np.errstate(invalid="ignore"):
        problems = {
            "is not finite": ~np.isfinite(table).all(axis=1),
            "has a negative probability": (table < -PROBABILITY_TOLERANCE).any(axis=1),
            "puts mass on an illegal action": (
                np.abs(np.where(layout.legal, 0.0, table)) > PROBABILITY_TOLERANCE
            ).any(axis=1),
            "does not sum to 1": ~(np.abs(table.sum(axis=1) - 1.0) <= SUM_TOLERANCE),
        }
    for text, rows in problems.items():
        if rows.any():
            key = layout.keys[int(np.argmax(rows))]
            raise MetaEvalError(f"{who} {text} at information state {key!r}")
    return table


def pyspiel_policies(population) -> list[list[pyspiel.Policy]]:
    """The population's policies as ``pyspiel`` policies, one list per player, ready for
    OpenSpiel's C++ algorithms (``pyspiel.expected_returns``, ``pyspiel.cce_dist``, ...).

    Conversion is OpenSpiel's own: ``python_policy_to_pyspiel_policy`` for a Python
    ``TabularPolicy``, after ``Policy.to_tabular`` for any other Python policy (which asks
    it at every state of the game); ``pyspiel`` policies are passed on as they are.

    Args:
        population: a [`Population`][metaeval.spiel.Population] of ``game``.

    Returns:
        The policies, one list per player.
    """
    return [[_to_pyspiel(policy) for policy in player] for player in population.policies]


def _to_pyspiel(policy) -> pyspiel.Policy:
    if isinstance(policy, pyspiel.Policy):
        return policy
    if not isinstance(policy, policy_lib.TabularPolicy):
        policy = policy.to_tabular()
    return policy_lib.python_policy_to_pyspiel_policy(policy)
