"""Approximate full-game CCE gap, for games too large to walk (SPEC 4.1).

For each player p, a policy b_p is trained (a learner, a fixed budget of episodes) against
the opponents' joint policies drawn from sigma's marginal on them, fixed for the episode.
Then, from fresh episodes not used in training,

    gap_hat = sum_p ( mean_p(b_p vs sigma_-p) - mean_p(sigma) )

b_p is one policy of the full game, so each deviation term estimates a value at most the
best response's: ``gap_hat`` estimates a **lower bound** on the true gap, and its interval
(normal approximation, the two terms of a player from independent episodes) covers that
lower bound, not the gap. Terms are not clipped at 0 (clipping would bias the estimate
upward and break the lower-bound reading); the exact gap of :mod:`metaeval.spiel.gap`
floors each player's gain at 0, which only raises it, so the reading holds against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from metaeval.errors import MetaEvalError
from metaeval.runs.threads import one_blas_thread
from metaeval.solvers.equilibria import check_joint_distribution
from metaeval.spiel.batched import as_batched
from metaeval.spiel.lockstep import decide, play_episodes
from metaeval.training.learners.episodes import TrainingEpisodes
from metaeval.training.learners.opponents import Opponents


@dataclass(frozen=True)
class ApproximateGap:
    """An estimated lower bound on the full-game CCE gap, with its standard error.

    ``per_player[p] = deviation_values[p] - on_policy_values[p]`` (not clipped), each value
    the mean of ``evaluation_episodes`` fresh episodes with its standard error;
    ``total = per_player.sum()``, ``stderr`` its standard error. ``training_episodes``: the
    budget each learned deviation b_p was trained with.
    """

    per_player: np.ndarray
    deviation_values: np.ndarray
    deviation_stderr: np.ndarray
    on_policy_values: np.ndarray
    on_policy_stderr: np.ndarray
    training_episodes: int
    evaluation_episodes: int
    approximate: bool = True

    @property
    def total(self) -> float:
        return float(self.per_player.sum())

    @property
    def stderr(self) -> float:
        return float(np.sqrt(np.sum(self.deviation_stderr**2 + self.on_policy_stderr**2)))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The normal-approximation interval of ``total`` at ``level``."""
        if not 0 < level < 1:
            raise MetaEvalError(f"level must lie in (0, 1), got {level!r}")
        half = stats.norm.ppf(0.5 + level / 2) * self.stderr
        return self.total - half, self.total + half

    def __str__(self) -> str:
        low, high = self.interval()
        return (f"CCE gap at least {self.total:.4g} (approximate: learned deviations, "
                f"95% interval of the estimate [{low:.4g}, {high:.4g}])")


def approximate_cce_gap(game, policies, sigma, learner, training_episodes: int, evaluation_episodes: int,
                        rng: np.random.Generator) -> ApproximateGap:
    """:class:`ApproximateGap` of ``sigma [K_1..K_N]`` over ``policies`` (one list of policy
    objects per player), each player's deviation trained by ``learner`` (e.g.
    :class:`metaeval.training.learners.PPO`) for ``training_episodes`` episodes and every
    value estimated from ``evaluation_episodes`` fresh episodes. All randomness from ``rng``."""
    sigma = np.clip(check_joint_distribution(sigma, [len(member) for member in policies], "population"), 0, None)
    if isinstance(evaluation_episodes, bool) or not isinstance(evaluation_episodes, (int, np.integer)) \
            or evaluation_episodes < 2:
        raise MetaEvalError(f"evaluation_episodes must be an int of at least 2, got {evaluation_episodes!r}")
    num_players = game.num_players()
    on_policy = on_policy_returns(game, policies, sigma, evaluation_episodes, rng)
    deviation = []
    for player in range(num_players):
        opponents = Opponents.from_distribution(policies, player, sigma.sum(axis=player))
        values = learner.train(game, player, opponents, training_episodes, rng)
        deviation.append(deviation_returns(game, player, learner.policy(game, player, values), opponents,
                                           evaluation_episodes, rng))
    deviation = np.array(deviation)
    on_policy_values, deviation_values = on_policy.mean(axis=0), deviation.mean(axis=1)
    return ApproximateGap(
        per_player=deviation_values - on_policy_values,
        deviation_values=deviation_values,
        deviation_stderr=deviation.std(axis=1, ddof=1) / np.sqrt(evaluation_episodes),
        on_policy_values=on_policy_values,
        on_policy_stderr=on_policy.std(axis=0, ddof=1) / np.sqrt(evaluation_episodes),
        training_episodes=int(training_episodes),
        evaluation_episodes=int(evaluation_episodes),
    )


def on_policy_returns(game, policies, sigma, episodes: int, rng: np.random.Generator) -> np.ndarray:
    """``[episodes, N]`` returns of episodes whose joint policies are drawn from ``sigma``
    (a multinomial count per joint, each joint's episodes played in lock-step)."""
    counts = rng.multinomial(episodes, sigma.ravel() / sigma.sum())
    returns = []
    for flat in np.flatnonzero(counts):
        joint = np.unravel_index(flat, sigma.shape)
        profile = [policies[p][j] for p, j in enumerate(joint)]
        returns.append(play_episodes(game, profile, int(rng.integers(2**63)), int(counts[flat])))
    return np.concatenate(returns)


def deviation_returns(game, player: int, policy, opponents: Opponents, episodes: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``[episodes]`` returns of ``player`` playing ``policy`` against ``opponents``."""
    env = TrainingEpisodes(game, player, opponents, episodes, min(episodes, 256), rng)
    answer = as_batched(policy, game, player)
    with one_blas_thread():  # as in lock-step episodes
        while env.running():
            batch, live = env.decisions()
            actions = np.zeros(len(live), dtype=np.int64)
            actions[live] = decide(answer, batch, rng.random(int(live.sum())))
            env.act(actions)
    return np.array(env.returns)
