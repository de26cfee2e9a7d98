"""Approximate full-game CCE gap, for games too large to walk.

For each player p, a deviation b_p is found by a responder ([`metaeval.responses`][metaeval.responses]: a
search against the known opponents, or a learner trained for a budget of episodes) against
the opponents' joint policies drawn from sigma's marginal on them, fixed for the episode.
Then, from fresh episodes that the responder never saw,

    gap_hat = sum_p ( mean_p(b_p vs sigma_-p) - mean_p(sigma) )

b_p is one policy of the full game, so each deviation term estimates a value at most the
best response's: ``gap_hat`` estimates a **lower bound** on the true gap, and its interval
(normal approximation, the two terms of a player from independent episodes) covers that
lower bound, not the gap. Terms are not clipped at 0 before summing (clipping would bias the
estimate upward). The gap itself is never negative (playing the recommendation is a
deviation), so the bound reported is never negative: it is ``gap_hat`` where a profitable
deviation was found (the 95% interval's lower end above 0), else 0, and reads "no
profitable deviation found (estimate -0.38 +- 0.09)".

Every stream of episodes (on-policy, each player's search or training, each player's
evaluation) comes from its own seeds, spawned from one draw of the caller's generator, and
the evaluation episodes are played in a fixed number of shards: the same seed gives the
same estimate in-process and on any number of Ray workers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from metaeval import games
from metaeval.distributed.replicates import actor_scope
from metaeval.errors import MetaEvalError
from metaeval.responses.episodes import TrainingEpisodes
from metaeval.responses.exact import ExactValues
from metaeval.responses.opponents import Opponents
from metaeval.runs.progress import Progress
from metaeval.runs.threads import one_blas_thread
from metaeval.solvers.equilibria import check_joint_distribution
from metaeval.spiel.batched import as_batched
from metaeval.spiel.lockstep import decide, play_episodes

EVALUATION_SHARDS = 8
"""Shards of every stream of evaluation episodes (fixed, so results do not depend on the workers)."""


def _z(level: float) -> float:
    """The normal quantile of a two-sided interval at ``level`` (1.96 at 0.95)."""
    from scipy import stats  # a third of a second to import: only when a gap is reported

    return stats.norm.ppf(0.5 + level / 2)


def found(estimate: float, stderr: float, level: float = 0.95) -> bool:
    """Whether a profitable deviation was found: the interval's lower end lies above 0.

    Args:
        estimate: the estimated gap.
        stderr: its standard error.
        level: the interval's coverage.

    Returns:
        Whether a profitable deviation was found.
    """
    return estimate - _z(level) * stderr > 0


def describe(estimate: float, stderr: float, responder: str = "", level: float = 0.95) -> str:
    """How an estimated lower bound on a CCE gap reads: ``CCE gap at least 0.42 ...``, or, where
    no profitable deviation was found ([`found`][metaeval.responses.gap.found]), ``no profitable deviation found
    (estimate -0.38 +- 0.09)``.

    Args:
        estimate: the estimated gap.
        stderr: its standard error.
        responder: the responder's name, said in the line.
        level: the interval's coverage.

    Returns:
        The line.
    """
    half = _z(level) * stderr
    by = f"{responder} deviations" if responder else "deviations"
    if not found(estimate, stderr, level):
        return f"no profitable deviation found ({by}; estimate {estimate:.3g} +- {half:.2g})"
    return (f"CCE gap at least {estimate:.4g} (approximate: {by}, {level:.0%} interval of the estimate "
            f"[{estimate - half:.4g}, {estimate + half:.4g}])")


@dataclass(frozen=True)
class ApproximateGap:
    """An estimated lower bound on the full-game CCE gap, with its standard error.

    ``per_player[p] = deviation_values[p] - on_policy_values[p]`` (not clipped), each value
    the mean of ``evaluation_episodes`` fresh episodes with its standard error;
    ``total = per_player.sum()``, ``stderr`` its standard error; ``bound``, the lower bound
    reported: ``total`` where a profitable deviation was found (the 95% interval's lower end
    above 0), else 0. ``responder`` names the responder (for the search, whether it walked
    the tree or sampled) and ``training_episodes`` its budget (simulated or training
    episodes per player).
    """

    per_player: np.ndarray
    deviation_values: np.ndarray
    deviation_stderr: np.ndarray
    on_policy_values: np.ndarray
    on_policy_stderr: np.ndarray
    training_episodes: int
    evaluation_episodes: int
    responder: str = ""
    approximate: bool = True

    @property
    def total(self) -> float:
        return float(self.per_player.sum())

    @property
    def bound(self) -> float:
        """The lower bound on the gap: ``total`` where a profitable deviation was found, else 0
        (a CCE gap is never negative)."""
        return self.total if found(self.total, self.stderr) else 0.0

    @property
    def per_player_stderr(self) -> np.ndarray:
        return np.sqrt(self.deviation_stderr**2 + self.on_policy_stderr**2)

    @property
    def stderr(self) -> float:
        return float(np.sqrt(np.sum(self.per_player_stderr**2)))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The normal-approximation interval of ``total`` at ``level``.

        Args:
            level: the coverage, in (0, 1).

        Returns:
            ``(low, high)``.
        """
        return self._interval(self.total, self.stderr, level)

    def per_player_intervals(self, level: float = 0.95) -> np.ndarray:
        """``[N, 2]``: each player's term's normal-approximation interval at ``level``.

        Args:
            level: the coverage, in (0, 1).

        Returns:
            The intervals ``[N, 2]``.
        """
        return np.array([self._interval(v, s, level) for v, s in zip(self.per_player, self.per_player_stderr)])

    @staticmethod
    def _interval(value: float, stderr: float, level: float) -> tuple[float, float]:
        if not 0 < level < 1:
            raise MetaEvalError(f"level must lie in (0, 1), got {level!r}")
        half = _z(level) * stderr
        return float(value - half), float(value + half)

    def __str__(self) -> str:
        return describe(self.total, self.stderr, self.responder)


def responder_named(responder, workers: int = 1, address: str | None = None):
    """``responder`` itself, or the responder of that name in [`metaeval.responses.RESPONDERS`][metaeval.responses.RESPONDERS]
    (a search spread over ``workers`` Ray workers)."""
    from metaeval.responses import RESPONDERS, Search

    if isinstance(responder, str):
        if responder not in RESPONDERS:
            raise MetaEvalError(f"unknown responder {responder!r}; choose one of {', '.join(RESPONDERS)}")
        responder = RESPONDERS[responder]()
        if isinstance(responder, Search):
            responder = replace(responder, workers=workers, address=address)
    if not (callable(getattr(responder, "train", None)) and callable(getattr(responder, "policy", None))):
        raise MetaEvalError(f"a responder needs train() and policy() methods; got {type(responder).__name__}")
    return responder


def responder_name(responder, walked=()) -> str:
    """The registered name of ``responder``'s class, else the class name; for the search, given
    for each player whether it walked the tree (``walked``: it returned the exact best
    response) or sampled, which: ``search (tree walked)``, ``search (sampled)``."""
    from metaeval.responses import RESPONDERS, Search

    name = next((name for name, cls in RESPONDERS.items() if type(responder) is cls), type(responder).__name__)
    if not isinstance(responder, Search) or not walked:
        return name
    if all(walked):
        return f"{name} (tree walked)"
    if not any(walked):
        return f"{name} (sampled)"
    players = ", ".join(str(p) for p, w in enumerate(walked) if w)
    return f"{name} (tree walked for player {players}, sampled for the others)"


def approximate_cce_gap(game, policies, sigma, responder, training_episodes: int, evaluation_episodes: int,
                        rng: np.random.Generator, workers: int = 1, address: str | None = None) -> ApproximateGap:
    """[`ApproximateGap`][metaeval.responses.gap.ApproximateGap] of ``sigma [K_1..K_N]`` over ``policies`` (one list of policy
    objects per player), each player's deviation found by ``responder`` (a name in
    [`metaeval.responses.RESPONDERS`][metaeval.responses.RESPONDERS] or a responder, e.g. [`metaeval.responses.Search`][metaeval.responses.search.Search])
    with ``training_episodes`` episodes and every value estimated from ``evaluation_episodes``
    fresh episodes, played on ``workers`` Ray workers when more than one. All randomness from ``rng``.

    Args:
        game: the game.
        policies: the population's policies, one list per player.
        sigma: the joint distribution over the population.
        responder: a responder or its name.
        training_episodes: each player's training episodes.
        evaluation_episodes: episodes of each value estimate.
        rng: the generator of every random choice.
        workers: Ray workers.
        address: the Ray cluster.

    Returns:
        The estimate.
    """
    sigma = np.clip(check_joint_distribution(sigma, [len(member) for member in policies], "population"), 0, None)
    if isinstance(evaluation_episodes, bool) or not isinstance(evaluation_episodes, (int, np.integer)) \
            or evaluation_episodes < 2:
        raise MetaEvalError(f"evaluation_episodes must be an int of at least 2, got {evaluation_episodes!r}")
    responder = responder_named(responder, workers, address)
    seed = int(rng.integers(2**63))
    with actor_scope(workers, address):  # one start-up of the actors for every stream of episodes
        on_policy = on_policy_returns(game, policies, sigma, evaluation_episodes,
                                      np.random.SeedSequence(seed, spawn_key=(0,)), workers, address)
        deviation, walked = [], []
        for player in range(game.num_players()):
            opponents = Opponents.from_distribution(policies, player, sigma.sum(axis=player))
            search_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, player)))
            values = responder.train(game, player, opponents, training_episodes, search_rng)
            walked.append(isinstance(values, ExactValues))
            deviation.append(deviation_returns(game, player, responder.policy(game, player, values), opponents,
                                               evaluation_episodes, np.random.SeedSequence(seed, spawn_key=(2, player)),
                                               workers, address))
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
        responder=responder_name(responder, walked),
    )


def shard_sizes(episodes: int, shards: int = EVALUATION_SHARDS) -> list[int]:
    """``episodes`` split into ``shards`` near-equal counts."""
    return np.diff(np.linspace(0, episodes, shards + 1).round().astype(np.int64)).tolist()


def run_shards(task, chunks: list, workers: int, address: str | None, advance) -> list:
    """``[task(chunk) for chunk in chunks]`` for chunks ``(episodes, seed)``, on ``workers`` Ray
    actors when more than one (or an address); ``advance(episodes)`` is told of each chunk's
    episodes when it is done (`metaeval.runs.progress.Progress.advance`)."""
    if workers <= 1 and address is None:
        results = []
        for chunk in chunks:
            results.append(task(chunk))
            advance(chunk[0])
        return results
    from metaeval.distributed.replicates import map_on_actors

    return map_on_actors(task, chunks, workers, address, lambda i: advance(chunks[i][0]))


@dataclass(frozen=True)
class ResponderShard:
    """One shard of a responder's round, picklable for Ray workers: ``sample(game, player,
    opponents, episodes, rng, *options)`` on a chunk ``(episodes, seed)``, the game
    rebuilt from its string."""

    sample: Callable
    game: str
    player: int
    opponents: Opponents
    options: tuple

    def __call__(self, chunk):
        episodes, seed = chunk
        return self.sample(games.load(self.game), self.player, self.opponents, episodes,
                           np.random.default_rng(seed), *self.options)


def run_round(task: ResponderShard, budget: int, shards: int, seed: int, round_: int, workers: int,
              address: str | None, advance) -> list:
    """``task`` on ``budget`` episodes split into ``shards`` chunks seeded from ``(seed, round_,
    shard)``, results in shard order (`run_shards`): the same for any number of workers."""
    chunks = [(share, np.random.SeedSequence(seed, spawn_key=(round_, shard)))
              for shard, share in enumerate(shard_sizes(int(budget), shards)) if share]
    return run_shards(task, chunks, workers, address, advance)


@dataclass(frozen=True)
class _OnPolicyShard:
    game: object
    policies: tuple
    sigma: np.ndarray

    def __call__(self, chunk) -> np.ndarray:
        episodes, seed = chunk
        return _on_policy(self.game, self.policies, self.sigma, episodes, np.random.default_rng(seed))


@dataclass(frozen=True)
class _DeviationShard:
    game: object
    player: int
    policy: object
    opponents: Opponents

    def __call__(self, chunk) -> np.ndarray:
        episodes, seed = chunk
        return _deviation(self.game, self.player, self.policy, self.opponents, episodes, np.random.default_rng(seed))


def _chunks(episodes: int, seed: np.random.SeedSequence) -> list:
    return [(size, np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, shard)))
            for shard, size in enumerate(shard_sizes(episodes)) if size]


def on_policy_returns(game, policies, sigma, episodes: int, seed: np.random.SeedSequence, workers: int = 1,
                      address: str | None = None) -> np.ndarray:
    """``[episodes, N]`` returns of episodes whose joint policies are drawn from ``sigma``."""
    task = _OnPolicyShard(game, tuple(tuple(m) for m in policies), sigma)
    with Progress(episodes, "on-policy episodes", "episode") as shown:
        return np.concatenate(run_shards(task, _chunks(episodes, seed), workers, address, shown.advance))


def deviation_returns(game, player: int, policy, opponents: Opponents, episodes: int, seed: np.random.SeedSequence,
                      workers: int = 1, address: str | None = None) -> np.ndarray:
    """``[episodes]`` returns of ``player`` playing ``policy`` against ``opponents``."""
    task = _DeviationShard(game, player, policy, opponents)
    with Progress(episodes, f"deviation episodes, player {player}", "episode") as shown:
        return np.concatenate(run_shards(task, _chunks(episodes, seed), workers, address, shown.advance))


def _on_policy(game, policies, sigma, episodes: int, rng: np.random.Generator) -> np.ndarray:
    """A multinomial count per joint, each joint's episodes played in lock-step."""
    counts = rng.multinomial(episodes, sigma.ravel() / sigma.sum())
    returns = []
    for flat in np.flatnonzero(counts):
        joint = np.unravel_index(flat, sigma.shape)
        profile = [policies[p][j] for p, j in enumerate(joint)]
        returns.append(play_episodes(game, profile, int(rng.integers(2**63)), int(counts[flat])))
    return np.concatenate(returns)


def _deviation(game, player: int, policy, opponents: Opponents, episodes: int, rng: np.random.Generator) -> np.ndarray:
    env = TrainingEpisodes(game, player, opponents, episodes, min(episodes, 256), rng)
    answer = as_batched(policy, game, player)
    with one_blas_thread():  # as in lock-step episodes
        while env.running():
            batch, live = env.decisions()
            actions = np.zeros(len(live), dtype=np.int64)
            actions[live] = decide(answer, batch, rng.random(int(live.sum())))
            env.act(actions)
    return np.array(env.returns)
