"""Adaptive evaluation: spend an episode budget on the meta-game entries that move the ratings.

Uniform allocation gives every joint profile the same number of episodes. The
``"variance"`` rule instead minimises the ratings' variance to first order: with
per-entry standard errors ``s_e`` and rating sensitivities ``g_ie = d r_i / d G_e``,

    Var(r_i) ~ sum_e g_ie^2 s_e^2 = sum_e c_ie / n_e,

and the allocation minimising ``sum_i Var(r_i)`` for a fixed total is Neyman's,
``n_a`` proportional to ``sqrt(sum_{i, p} c_{i,(p,a)})`` per joint a. Sensitivities are
estimated without differentiating the rater, by Stein's lemma on a parametric
bootstrap of the current estimate (``G* = G + s Z``, Z standard normal):
``E[r_i(G*) Z_e] = s_e E[d r_i / d G_e]``, so any rater works. After ``initial``
episodes per joint, each round spends ``budget / rounds`` episodes on the joints
furthest below their Neyman target.

Episodes come from per-joint streams seeded by :func:`metaeval.spiel.sampled.joint_seed`:
the k-th episode of a joint is the same whatever the rule or the order, so rules
compared at one seed see the same episodes (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.spiel.sampled import joint_seed, play_episode
from metaeval.spiel.population import check_seed

RULES = ("uniform", "variance")
#: Share of each round the variance rule still spreads evenly, so that no joint is
#: starved on the strength of a noisy sensitivity estimate.
UNIFORM_SHARE = 0.1


class EpisodeStreams:
    """Running sums of episode returns per joint, each joint drawing from its own stream."""

    def __init__(self, game, population, seed: int):
        self.game = games.load(game)
        if population.game_string != str(self.game):
            raise MetaEvalError(f"the population is for {population.game_string}, not {self.game}")
        self.population = population
        self.seed = check_seed(seed)
        shape = tuple(population.sizes)
        self.counts = np.zeros(shape, dtype=np.int64)
        self.sums = np.zeros((self.game.num_players(), *shape))
        self.squares = np.zeros_like(self.sums)
        self._rngs: dict[tuple[int, ...], np.random.Generator] = {}

    @property
    def episodes(self) -> int:
        return int(self.counts.sum())

    def play(self, joint, episodes: int = 1) -> np.ndarray:
        """Play the next ``episodes`` episodes of ``joint``; returns them ``[episodes, N]``."""
        joint = tuple(int(i) for i in joint)
        rng = self._rngs.get(joint)
        if rng is None:
            ids = [self.population.ids[p][i] for p, i in enumerate(joint)]
            rng = self._rngs[joint] = np.random.default_rng(joint_seed(self.seed, ids))
        policies = [self.population.policies[p][i] for p, i in enumerate(joint)]
        returns = np.array([play_episode(self.game, policies, rng) for _ in range(episodes)])
        index = (slice(None), *joint)
        self.sums[index] += returns.sum(axis=0)
        self.squares[index] += (returns**2).sum(axis=0)
        self.counts[joint] += episodes
        return returns

    def metagame(self) -> MetaGame:
        """The current estimate, with counts and standard errors (every joint needs 2 episodes)."""
        if self.counts.min() < 2:
            raise MetaEvalError("every joint needs at least 2 episodes for a standard error")
        mean = self.sums / self.counts
        variance = np.maximum(self.squares / self.counts - mean**2, 0.0) * self.counts / (self.counts - 1)
        return MetaGame(
            mean,
            strategy_names=self.population.strategy_names(),
            player_names=self.population.player_names(),
            counts=self.counts,
            stderr=np.sqrt(variance / self.counts),
        )


def sensitivity(game: MetaGame, rater, options: dict, replicates: int, rng) -> np.ndarray:
    """Per joint, ``sum_{i,p} (s_(p,a) g_(i,(p,a)))^2`` by Stein's lemma on ``replicates`` draws.

    Each squared Stein estimate is debiased by its noise, ``Var(r_i) / replicates``,
    and the sum clipped at 0.
    """
    noise = rng.standard_normal((replicates, *game.payoffs.shape))
    ratings = np.array([
        np.concatenate(rater(MetaGame(game.payoffs + game.stderr * z), **options).ratings) for z in noise
    ])
    centred = ratings - ratings.mean(axis=0)
    stein = np.tensordot(centred, noise, axes=(0, 0)) / replicates  # [R, N, K_1, ..., K_N]
    floor = centred.var(axis=0) / replicates
    squared = stein**2 - floor.reshape(-1, *[1] * (stein.ndim - 1))
    return np.maximum(squared.sum(axis=(0, 1)), 0.0)


def allocate(targets: np.ndarray, counts: np.ndarray, episodes: int) -> np.ndarray:
    """Split ``episodes`` among joints in proportion to their shortfall below ``targets``
    (largest remainders first; ties in C order)."""
    shortfall = np.maximum(targets - counts, 0.0).ravel()
    if shortfall.sum() <= 0:
        shortfall = np.ones_like(shortfall)
    share = episodes * shortfall / shortfall.sum()
    given = np.floor(share).astype(np.int64)
    order = np.argsort(-(share - given), kind="stable")
    given[order[: episodes - given.sum()]] += 1
    return given.reshape(counts.shape)


@dataclass(frozen=True)
class Checkpoint:
    """The estimate after ``episodes`` episodes."""

    episodes: int
    metagame: MetaGame


def adaptive_metagame(
    game,
    population,
    budget: int,
    rater,
    rule: str = "variance",
    initial: int = 4,
    rounds: int = 20,
    replicates: int = 32,
    seed: int = 0,
    **options,
) -> list[Checkpoint]:
    """Estimate the meta-game of ``population`` from ``budget`` episodes allocated by ``rule``.

    Args:
        game: a ``pyspiel.Game`` or a name.
        population: a :class:`metaeval.spiel.Population` for it.
        budget: total episodes, at least ``initial`` per joint.
        rater: a rater function (e.g. ``metaeval.RATERS["deviation"]``) whose ratings
            the ``"variance"`` rule makes precise; ``options`` are passed to it.
        rule: ``"uniform"`` or ``"variance"`` (module docstring).
        initial: episodes every joint gets first (at least 2).
        rounds: allocation rounds after the initial ones.
        replicates: bootstrap draws per round for the sensitivities.
        seed: seeds the episodes (per joint) and the bootstrap draws.

    Returns:
        One :class:`Checkpoint` after the initial episodes and one after each round;
        the last holds the final estimate.
    """
    if rule not in RULES:
        raise MetaEvalError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    streams = EpisodeStreams(game, population, seed)
    joints = streams.counts.size
    for name, value, least in (("initial", initial, 2), ("rounds", rounds, 1), ("replicates", replicates, 2),
                               ("budget", budget, initial * joints)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
            raise MetaEvalError(f"{name} must be an int of at least {least}, got {value!r}")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
    for joint in np.ndindex(streams.counts.shape):
        streams.play(joint, initial)
    history = [Checkpoint(streams.episodes, streams.metagame())]
    remaining = budget - streams.episodes
    for r in range(rounds):
        spend = remaining // (rounds - r)
        remaining -= spend
        total = streams.episodes + spend
        if rule == "uniform":
            targets = np.full(streams.counts.shape, total / joints)
        else:
            weight = np.sqrt(sensitivity(history[-1].metagame, rater, options, replicates, rng) * streams.counts)
            share = weight / weight.sum() if weight.sum() > 0 else 1.0 / joints
            targets = total * ((1 - UNIFORM_SHARE) * share + UNIFORM_SHARE / joints)
        for joint, episodes in np.ndenumerate(allocate(targets, streams.counts, spend)):
            if episodes:
                streams.play(joint, int(episodes))
        history.append(Checkpoint(streams.episodes, streams.metagame()))
    return history
