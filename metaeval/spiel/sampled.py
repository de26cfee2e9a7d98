"""Sampled meta-games: entries estimated from simulated episodes (SPEC section 3, "Sampled").

Works for any OpenSpiel policy and any game that can be simulated. Each joint
profile is simulated with its own generator, seeded from the run seed and the
joint's policy ids (:func:`joint_seed`), so an entry never depends on how the
joints are split into shards, on their order, or on the number of workers.

An exception raised by a policy or by the game while simulating is an
:class:`EpisodeError` naming the policy (or the joint): it would be raised again on
any retry, so builders report it at once instead of retrying.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.spiel.policies import action_probabilities
from metaeval.spiel.population import check_joints, check_seed


class EpisodeError(MetaEvalError):
    """A policy or the game raised while simulating a joint's episodes (deterministic)."""


class _PolicyFailure(Exception):
    def __init__(self, player: int, cause: BaseException):
        super().__init__(player, cause)
        self.player, self.cause = player, cause


def joint_seed(seed: int, ids: Sequence[int]) -> np.random.SeedSequence:
    """The seed of the joint profile whose policies have these ids."""
    ids = tuple(int(i) for i in ids)
    if min(ids, default=0) < 0:
        raise MetaEvalError(f"policy ids must be non-negative, got {ids}")
    return np.random.SeedSequence(entropy=check_seed(seed), spawn_key=ids)


def joint_seeds(seed: int, population, joints) -> list[np.random.SeedSequence]:
    """Seeds of the joint profiles ``joints [M, N]`` (indices into ``population``)."""
    joints = check_joints(joints, population.sizes)
    return [joint_seed(seed, [population.ids[p][i] for p, i in enumerate(joint)]) for joint in joints]


def sample_joints(game, policies_per_player, joints, episodes: int, seeds, ids=None):
    """Simulate ``episodes`` episodes of each joint profile.

    Args:
        game: a ``pyspiel.Game`` or a name.
        policies_per_player: one sequence of OpenSpiel policies per player.
        joints: int array ``[M, N]`` of policy indices.
        episodes: episodes per joint (at least 2, for a standard error).
        seeds: M seeds (ints or ``SeedSequence``), e.g. from :func:`joint_seeds`.
        ids: ``[M, N]`` policy ids of the joints, to name a policy that raises
            (default: its index).

    Returns:
        ``(mean [M, N], stderr [M, N], counts [M])``: mean return per player, its
        standard error (sample std / sqrt(episodes)), and the episode count.
    """
    game = games.load(game)
    if len(policies_per_player) != game.num_players():
        raise MetaEvalError(f"{game} has {game.num_players()} players; got {len(policies_per_player)} policy lists")
    joints = check_joints(joints, [len(p) for p in policies_per_player])
    episodes = int(episodes)
    if episodes < 2:
        raise MetaEvalError(f"episodes must be at least 2 to estimate a standard error, got {episodes}")
    seeds = list(seeds)
    if len(seeds) != len(joints):
        raise MetaEvalError(f"need one seed per joint: {len(joints)} joints, {len(seeds)} seeds")
    mean = np.empty((len(joints), game.num_players()))
    stderr = np.empty_like(mean)
    for m, (joint, seed) in enumerate(zip(joints, seeds)):
        rng = np.random.default_rng(seed)
        policies = [policies_per_player[p][i] for p, i in enumerate(joint)]
        names = tuple(int(i) for i in (joint if ids is None else ids[m]))
        try:
            returns = np.array([play_episode(game, policies, rng) for _ in range(episodes)])
        except _PolicyFailure as failure:
            raise EpisodeError(f"policy {names[failure.player]} of player {failure.player} raised "
                               f"{_one_line(failure.cause)} (joint {names})") from None
        except Exception as exc:  # the game's own errors (pyspiel.SpielError, ...)
            raise EpisodeError(f"{game} raised {_one_line(exc)} playing joint {names}") from None
        mean[m] = returns.mean(axis=0)
        stderr[m] = returns.std(axis=0, ddof=1) / np.sqrt(episodes)
    return mean, stderr, np.full(len(joints), episodes)


def play_episode(game, policies, rng: np.random.Generator) -> list[float]:
    """Returns of one episode with player p following ``policies[p]``."""
    state = game.new_initial_state()
    while not state.is_terminal():
        if state.is_chance_node():
            actions, probabilities = zip(*state.chance_outcomes())
            state.apply_action(actions[_draw(probabilities, rng)])
        elif state.is_simultaneous_node():
            state.apply_actions(
                [_action(policies[p], state, p, rng) for p in range(game.num_players())]
            )
        else:
            player = state.current_player()
            state.apply_action(_action(policies[player], state, player, rng))
    return state.returns()


def _action(policy, state, player: int, rng: np.random.Generator) -> int:
    try:
        probabilities = action_probabilities(policy, state, player)
        actions = list(probabilities)
        return actions[_draw(list(probabilities.values()), rng)]
    except Exception as exc:
        raise _PolicyFailure(player, exc) from exc


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (a MetaEvalError's message alone)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    return text if isinstance(exc, MetaEvalError) else f"{type(exc).__name__}: {text}"


def _draw(probabilities, rng: np.random.Generator) -> int:
    cumulative = np.cumsum(probabilities)
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return min(index, len(cumulative) - 1)


def sampled_metagame(game, population, episodes: int, seed: int) -> MetaGame:
    """The meta-game of ``population`` estimated from ``episodes`` episodes per joint,
    with per-entry counts and standard errors."""
    game = games.load(game)
    if population.game_string != str(game):
        raise MetaEvalError(f"the population is for {population.game_string}, not {game}")
    joints = np.array(list(np.ndindex(*population.sizes)), dtype=np.int64)
    ids = np.array([[population.ids[p][i] for p, i in enumerate(joint)] for joint in joints], dtype=np.int64)
    mean, stderr, counts = sample_joints(
        game, population.policies, joints, episodes, joint_seeds(seed, population, joints), ids
    )
    shape = population.sizes
    return MetaGame(
        mean.T.reshape(game.num_players(), *shape),
        strategy_names=population.strategy_names(),
        player_names=population.player_names(),
        counts=counts.reshape(shape),
        stderr=stderr.T.reshape(game.num_players(), *shape),
    )
