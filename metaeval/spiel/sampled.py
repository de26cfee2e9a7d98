"""Sampled meta-games: entries estimated from simulated episodes (maths, section 3, "Sampled").

Works for any policy ([`metaeval.spiel.batched`][metaeval.spiel.batched]) and any game that can be
simulated; the episodes of a joint are played in lock-step ([`metaeval.spiel.lockstep`][metaeval.spiel.lockstep]).
Each joint profile's random numbers are seeded from the run seed and the joint's
policy ids ([`joint_seed`][metaeval.spiel.joint_seed]), episode by episode, so an entry never depends on
how the joints are split into shards, on their order, on the number of workers,
or on how many episodes are played at once.

An exception raised by a policy or by the game is a one-line ``MetaEvalError``
naming the joint (and the player whose policy failed): it would be raised again on
any retry, so builders report it at once instead of retrying.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.errors import MetaEvalError, first_line
from metaeval.game import MetaGame
from metaeval.runs.threads import one_blas_thread
from metaeval.spiel.batched import DecisionBatch, as_batched, checked
from metaeval.spiel.lockstep import BATCH_SIZE, Uniforms, chance_step, draw_index, play_episodes, policy_errors
from metaeval.spiel.policies import probability_row
from metaeval.spiel.population import check_joints, check_seed
from metaeval.runs.time_limit import named


def joint_seed(seed: int, ids: Sequence[int]) -> np.random.SeedSequence:
    """The seed of the joint profile whose policies have these ids.

    Args:
        seed: the build's seed.
        ids: the profile's policy ids, one per player.

    Returns:
        The seed.
    """
    ids = tuple(int(i) for i in ids)
    if min(ids, default=0) < 0:
        raise MetaEvalError(f"policy ids must be non-negative, got {ids}")
    return np.random.SeedSequence(entropy=check_seed(seed), spawn_key=ids)


def joint_seeds(seed: int, population, joints) -> list[np.random.SeedSequence]:
    """Seeds of the joint profiles ``joints [M, N]`` (indices into ``population``).

    Args:
        seed: the build's seed.
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        joints: the profiles ``[M, N]``.

    Returns:
        One seed per profile.
    """
    joints = check_joints(joints, population.sizes)
    return [joint_seed(seed, [population.ids[p][i] for p, i in enumerate(joint)]) for joint in joints]


def sample_joints(
    game, policies_per_player, joints, episodes, seeds, batch_size: int | None = BATCH_SIZE, ids=None,
    advance=None, first=None, moments: bool = False,
):
    """Simulate ``episodes`` episodes of each joint profile.

    Args:
        game: a ``pyspiel.Game`` or a name.
        policies_per_player: one sequence of policies per player, of any kind
            [`metaeval.spiel.batched.as_batched`][metaeval.spiel.as_batched] takes.
        joints: int array ``[M, N]`` of policy indices.
        episodes: episodes per joint (at least 2, for a standard error), or one count per joint.
        seeds: M seeds (ints or ``SeedSequence``), e.g. from [`joint_seeds`][metaeval.spiel.joint_seeds].
        batch_size: episodes of a joint played in lock-step at once
            ([`metaeval.spiel.lockstep`][metaeval.spiel.lockstep]); ``None`` plays them one after another,
            one state at a time (the reference the lock-step path is tested against).
            Every choice gives the same entries.
        ids: ``[M, N]`` policy ids of the joints, to name a joint whose policy fails
            (default: its indices).
        advance: ``advance(count)``, told of the episodes as they end (for progress).
        first: per joint, the number of its first episode (default 0): a joint's episodes
            ``first .. first + episodes - 1`` continue the ones it has played, the same
            episodes whichever call plays them.
        moments: return the returns' sums and cross-products (`return_moments`) in place
            of their mean and standard error, to be added to a joint's running sums (then
            a joint may get a single episode).

    Returns:
        ``(mean [M, N], stderr [M, N], counts [M])``: mean return per player, its
        standard error (sample std / sqrt(episodes)), and the episode count; with
        ``moments``, ``(sums [M, N], products [M, N, N], counts [M])``.
    """
    game = games.load(game)
    if len(policies_per_player) != game.num_players():
        raise MetaEvalError(f"{game} has {game.num_players()} players; got {len(policies_per_player)} policy lists")
    joints = check_joints(joints, [len(p) for p in policies_per_player])
    if np.ndim(episodes) and np.shape(episodes) != (len(joints),):
        raise MetaEvalError(f"need one episode count per joint: {len(joints)} joints, {np.shape(episodes)} counts")
    counts = np.broadcast_to(np.asarray(episodes, dtype=np.int64), len(joints))
    starts = np.zeros(len(joints), dtype=np.int64) if first is None else np.asarray(first, dtype=np.int64)
    least = 1 if moments else 2
    if len(counts) and counts.min() < least:
        reason = "" if moments else " to estimate a standard error"
        raise MetaEvalError(f"episodes must be at least {least}{reason}, got {counts.min()}")
    seeds = list(seeds)
    if len(seeds) != len(joints):
        raise MetaEvalError(f"need one seed per joint: {len(joints)} joints, {len(seeds)} seeds")
    if starts.shape != (len(joints),) or (len(starts) and starts.min() < 0):
        raise MetaEvalError(f"need one non-negative first episode per joint: {len(joints)} joints, got {starts}")
    summarise = return_moments if moments else mean_and_stderr
    sums_or_means = np.empty((len(joints), game.num_players()))
    products_or_stderrs = np.empty((*sums_or_means.shape, game.num_players()) if moments else sums_or_means.shape)
    names = joints if ids is None else np.asarray(ids)
    for m, (joint, seed) in enumerate(zip(joints, seeds)):
        policies = [policies_per_player[p][i] for p, i in enumerate(joint)]
        numbers = np.arange(starts[m], starts[m] + counts[m])
        try:
            if batch_size is None:
                returns = play_one_by_one(game, policies, seed, numbers)
                if advance is not None:
                    advance(len(numbers))
            else:
                returns = play_episodes(game, policies, seed, numbers, batch_size, advance)
        except MetaEvalError as exc:  # a policy's failure (or time-out), named by policy_errors
            label = "policy ids" if ids is not None else "joint"
            raise named(exc, f"{label} {tuple(int(i) for i in names[m])}") from None
        except Exception as exc:  # the game's own errors (pyspiel.SpielError, ...): they would recur
            raise MetaEvalError(f"{game} raised {type(exc).__name__}: {first_line(exc)} playing joint "
                                f"{tuple(int(i) for i in names[m])}") from None
        sums_or_means[m], products_or_stderrs[m] = summarise(returns)
    return sums_or_means, products_or_stderrs, counts.copy()


def mean_and_stderr(returns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean ``[N]`` of returns ``[E, N]`` and its standard error (sample std / sqrt(E))."""
    return returns.mean(axis=0), returns.std(axis=0, ddof=1) / np.sqrt(len(returns))


def return_moments(returns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sums ``[N]`` and cross-products ``[N, N]`` of returns ``[E, N]``: what a joint's
    running sums add, so that its estimate is the same whichever call played its episodes."""
    return returns.sum(axis=0), np.einsum("ei,ej->ij", returns, returns)


def play_one_by_one(game, policies, seed, episodes) -> np.ndarray:
    """Returns ``[E, N]`` of episodes ``episodes`` (a count, or episode numbers) of the joint
    profile ``policies``, one episode and one state at a time, drawing the same uniforms as
    `metaeval.spiel.lockstep.play`.

    OpenSpiel policies are asked ``action_probabilities`` and their answers checked
    only for unknown actions, as before lock-step episodes existed; other policies
    answer a batch of one state.
    """
    numbers = np.arange(episodes) if np.ndim(episodes) == 0 else np.asarray(episodes, dtype=np.int64)
    uniforms = Uniforms(seed, numbers)
    answers = [_one_state_answer(policy, game, player) for player, policy in enumerate(policies)]
    with one_blas_thread():  # as in lock-step episodes
        return np.array([play_episode(game, answers, uniforms, row) for row in range(len(numbers))])


def _one_state_answer(policy, game, player: int):
    """``answer(state) -> [A]`` probabilities of ``policy`` for ``player``."""
    num_actions = game.num_distinct_actions()
    if isinstance(policy, (policy_lib.Policy, pyspiel.Policy)):
        return lambda state: probability_row(policy, state, player, num_actions)
    answer = as_batched(policy, game, player)

    def one(state):
        batch = DecisionBatch(game, player, [state])
        return checked(answer(batch), batch.legal)[0]

    return one


def play_episode(game, answers, uniforms: Uniforms, row: int) -> list[float]:
    """Returns of the episode at position ``row`` of ``uniforms``, player p answered by
    ``answers[p](state)`` (see `play_one_by_one`)."""

    def act(state, player: int) -> int:
        with policy_errors(player):
            probabilities = answers[player](state)
        return draw_index(probabilities, uniforms.take_one(row))

    state = game.new_initial_state()
    while not state.is_terminal():
        if state.is_chance_node():
            chance_step(state, uniforms.take_one(row))
        elif state.is_simultaneous_node():
            state.apply_actions([act(state, p) for p in range(game.num_players())])
        else:
            state.apply_action(act(state, state.current_player()))
    return state.returns()


def sampled_metagame(game, population, episodes: int, seed: int, batch_size: int | None = BATCH_SIZE) -> MetaGame:
    """The meta-game of ``population`` estimated from ``episodes`` episodes per joint,
    with per-entry counts and standard errors (``batch_size`` as in [`sample_joints`][metaeval.spiel.sample_joints]).

    Args:
        game: the game.
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        episodes: episodes per joint.
        seed: the build's seed; same seed, same meta-game.
        batch_size: episodes played at once.

    Returns:
        The meta-game.
    """
    game = games.load(game)
    if population.game_string != str(game):
        raise MetaEvalError(f"the population is for {population.game_string}, not {game}")
    joints = np.array(list(np.ndindex(*population.sizes)), dtype=np.int64)
    ids = np.array([[population.ids[p][i] for p, i in enumerate(joint)] for joint in joints], dtype=np.int64)
    mean, stderr, counts = sample_joints(
        game, population.policies, joints, episodes, joint_seeds(seed, population, joints), batch_size, ids=ids
    )
    shape = population.sizes
    return MetaGame(
        mean.T.reshape(game.num_players(), *shape),
        strategy_names=population.strategy_names(),
        player_names=population.player_names(),
        counts=counts.reshape(shape),
        stderr=stderr.T.reshape(game.num_players(), *shape),
    )
