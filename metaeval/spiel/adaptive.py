"""Adaptive evaluation: spend an episode budget on the meta-game entries that move the ratings.

Uniform allocation gives every joint profile the same number of episodes. After
``initial`` episodes per joint (the pilot), each round spends ``budget / rounds``
episodes on the joints furthest below a target share; a ``UNIFORM_SHARE`` of every
target stays uniform, so no joint is starved on a noisy estimate. Two rules set it:

``"variance"`` minimises the ratings' variance to first order. With ``C_a`` the
covariance of the players' returns in one episode of joint a and ``g_ia = d r_i / d G_a``,

    sum_i Var(r_i) ~ sum_a c_a / n_a,   c_a = sum_i g_ia^T C_a g_ia,

which a fixed total minimises by Neyman's allocation ``n_a`` proportional to
``sqrt(c_a)``: per-episode spread times sensitivity. The sensitivities come from
Stein's lemma on a parametric bootstrap of the current estimate (`stein`), so
any rater works; the per-episode Stein estimates ``C_a^(1/2) g_ia`` are averaged over
the rounds, so their noise shrinks as the rounds go on.

``"response_graph"`` targets the response graph (alpha-Rank at infinite alpha):
it spends on the edges whose sign is not yet resolved, ResponseGraphUCB's idea
(Rowland et al. 2019), all of them at once rather than one at a time
(`uncertain_edges`), so that a near-tie it cannot resolve takes only its share.
Once every edge is resolved, the rest is spent uniformly.

Episodes come from per-joint streams seeded by [`metaeval.spiel.sampled.joint_seed`][metaeval.spiel.joint_seed]:
the k-th episode of a joint is the same whatever the rule or the order, so rules
compared at one seed see the same episodes (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from metaeval.runs import budget as memory
from metaeval import games
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.spiel.lockstep import play_episodes
from metaeval.runs.progress import Progress
from metaeval.spiel.sampled import joint_seed, return_moments
from metaeval.spiel.population import check_seed

RULES = ("uniform", "variance", "response_graph")
#: Share of each round's target spread evenly, so that no joint is starved on a noisy estimate.
UNIFORM_SHARE = 0.1
#: Edges compared at once by `uncertain_edges` (each holds a few float64 temporaries).
EDGE_CHUNK = 1 << 22


class EpisodeStreams:
    """Running sums of episode returns per joint, each joint drawing from its own stream;
    `play_joints` plays many joints' episodes in lock-step shards, in-process or on the
    meta-game builds' Ray actors (``workers > 1`` or a cluster ``address``)."""

    def __init__(self, game, population, seed: int, workers: int = 1, address: str | None = None):
        self.game = games.load(game)
        if population.game_string != str(self.game):
            raise MetaEvalError(f"the population is for {population.game_string}, not {self.game}")
        self.population = population
        self.seed = check_seed(seed)
        self.workers, self.address = workers, address
        shape = tuple(population.sizes)
        self.counts = np.zeros(shape, dtype=np.int64)
        self.sums = np.zeros((self.game.num_players(), *shape))
        self.products = np.zeros((self.game.num_players(), *self.sums.shape))

    @property
    def episodes(self) -> int:
        return int(self.counts.sum())

    def play(self, joint, episodes: int = 1) -> np.ndarray:
        """Play the next ``episodes`` episodes of ``joint`` in-process; returns them ``[episodes, N]``."""
        joint = tuple(int(i) for i in joint)
        ids = [self.population.ids[p][i] for p, i in enumerate(joint)]
        policies = [self.population.policies[p][i] for p, i in enumerate(joint)]
        played = int(self.counts[joint])
        returns = play_episodes(self.game, policies, joint_seed(self.seed, ids), range(played, played + episodes))
        self._add(np.array([joint]), *(x[None] for x in return_moments(returns)), np.array([episodes]))
        return returns

    def play_joints(self, joints: np.ndarray, episodes: np.ndarray, progress=None) -> None:
        """Play the next ``episodes [M]`` episodes of each of ``joints [M, N]``, cut into
        shards as a meta-game build's (`metaeval.distributed.build_metagame`), on the same
        actors; each joint's episodes continue its stream, so the sums are those of `play`."""
        from metaeval.distributed.build import LOCAL_SAMPLED_SHARDS, SAMPLED_SHARDS_PER_WORKER, evaluation_backend
        from metaeval.distributed.plan import cut_shards
        from metaeval.distributed.pool import MAX_RETRIES, SHARD_TIMEOUT

        if not len(joints):
            return
        backend = evaluation_backend(self.game, self.workers, self.address)
        pool = self.workers > 1 or self.address is not None
        sync = backend.registry.sync(self.population)
        shards = cut_shards(joints, self.population, self.workers * SAMPLED_SHARDS_PER_WORKER if pool
                            else LOCAL_SAMPLED_SHARDS, "sampled", sync.tokens, episodes, self.seed,
                            first=self.counts[tuple(joints.T)], moments=True)
        with Progress(int(np.sum(episodes)), "adaptive sampling", "episode", progress) as bar:
            results, _ = backend.run(shards, sync, bar, MAX_RETRIES, SHARD_TIMEOUT)
        for shard, result in zip(shards, results, strict=True):
            self._add(joints[shard.rows], result.sums, result.products, result.counts.astype(np.int64))

    def _add(self, joints: np.ndarray, sums: np.ndarray, products: np.ndarray, counts: np.ndarray) -> None:
        """Add the moments of new episodes (``[M, N]``, ``[M, N, N]``, ``[M]``) of distinct ``joints [M, N]``."""
        where = tuple(joints.T)
        self.sums[(slice(None), *where)] += sums.T
        self.products[(slice(None), slice(None), *where)] += np.moveaxis(products, 0, -1)
        self.counts[where] += counts

    def covariance(self) -> np.ndarray:
        """Per joint, the covariance of the players' mean returns, ``[K_1, ..., K_N, N, N]``."""
        if self.counts.min() < 2:
            raise MetaEvalError("every joint needs at least 2 episodes for a standard error")
        mean = np.moveaxis(self.sums / self.counts, 0, -1)
        products = np.moveaxis(self.products / self.counts, (0, 1), (-2, -1))
        per_episode = products - mean[..., :, None] * mean[..., None, :]
        return per_episode / (self.counts - 1)[..., None, None]

    def metagame(self) -> MetaGame:
        """The current estimate, with counts and standard errors (every joint needs 2 episodes)."""
        variance = np.diagonal(self.covariance(), axis1=-2, axis2=-1)
        return MetaGame(
            self.sums / self.counts,
            strategy_names=self.population.strategy_names(),
            player_names=self.population.player_names(),
            counts=self.counts,
            stderr=np.sqrt(np.maximum(np.moveaxis(variance, -1, 0), 0.0)),
        )


@dataclass
class Stein:
    """Stein estimates of ``S_a^(1/2) E[g_ia]`` for the R ratings in factored form,
    ``estimate[i, a] = sum_b centred[b, i] draws[b, a]`` (a vector of the N payoffs of joint
    a), so that memory is linear in the joints: the ``[R, K_1, ..., K_N, N]`` array itself
    would hold joints x strategies x players floats (32 GB at 1,000 x 1,000).

    Several rounds' estimates are summed by stacking their factors (`squared_norms`).
    """

    centred: np.ndarray  # [B, R]: each replicate's ratings minus their mean, divided by B
    draws: np.ndarray  # [B, K_1, ..., K_N, N]: the draws Z_a in the payoffs' basis, 0 where no spread
    noise: np.ndarray  # [K_1, ..., K_N]: the noise of each joint's squared norm, summed over the ratings

    def scaled(self, scale: np.ndarray) -> "Stein":
        """The estimates times ``scale`` per joint (``[K_1, ..., K_N]``)."""
        return Stein(self.centred, self.draws * scale[None, ..., None], self.noise * scale**2)


def squared_norms(parts: list[Stein], divisor: float = 1.0) -> np.ndarray:
    """Per joint, ``sum_i |sum_parts estimate_ia / divisor|^2`` debiased by the parts' noise,
    clipped at 0: ``sum_n w_an^T (C C^T) w_an`` with the parts' factors stacked (C their
    ``centred``, w_an their ``draws`` of joint a), stacked one chunk of joints at a time."""
    centred = np.concatenate([part.centred for part in parts])
    gram = centred @ centred.T
    flats = [part.draws.reshape(len(part.draws), -1) for part in parts]
    norms = np.empty(flats[0].shape[1])
    for start in range(0, len(norms), EDGE_CHUNK):
        block = np.concatenate([flat[:, start:start + EDGE_CHUNK] for flat in flats])
        norms[start:start + EDGE_CHUNK] = np.einsum("bj,bj->j", block, gram @ block)
    norms = norms.reshape(parts[0].draws.shape[1:]).sum(axis=-1)
    return np.maximum((norms - sum(part.noise for part in parts)) / divisor**2, 0.0)


def stein(game: MetaGame, rater, options: dict, replicates: int, rng, covariance=None) -> Stein:
    """Stein estimates of ``S_a^(1/2) E[g_ia]`` for the R ratings from ``replicates`` draws,
    and the variance of their noise (``Var(r_i) / replicates`` per direction with spread).

    ``S_a`` is the covariance of joint a's mean payoffs (``covariance``, ``[K_1, ..., K_N,
    N, N]``; default ``diag(stderr^2)``), ``g_ia = d r_i / d G_a``. With
    ``G*_a = G_a + S_a^(1/2) Z_a``, ``E[r_i(G*) Z_a] = S_a^(1/2) E[g_ia]`` (Stein's lemma),
    so any rater works, and correlated payoffs (zero-sum games) are perturbed as they vary.
    ``Z_a`` is drawn in the eigenbasis of ``S_a``, so that directions of zero variance
    (deterministic entries, the constant sum of a zero-sum game) contribute exactly 0.
    """
    if covariance is None:
        covariance = np.apply_along_axis(np.diag, -1, np.moveaxis(game.stderr, 0, -1) ** 2)
    values, vectors = np.linalg.eigh(covariance)
    spread = np.sqrt(np.maximum(values, 0.0))
    noise = rng.standard_normal((replicates, *covariance.shape[:-1]))  # [B, K_1, ..., K_N, N], eigenbasis
    shifts = np.moveaxis(np.einsum("...ij,b...j->b...i", vectors, spread * noise), -1, 1)
    ratings = np.array([
        np.concatenate(rater(MetaGame(game.payoffs + shift), **options).ratings) for shift in shifts
    ])
    del shifts
    centred = ratings - ratings.mean(axis=0)
    active = spread > 0  # directions without spread have no Stein signal, only noise
    # back from the eigenbasis, so that estimates of successive rounds can be summed
    draws = np.einsum("...ij,b...j->b...i", vectors, noise * active)
    floor = float(centred.var(axis=0).sum()) / replicates
    return Stein(centred / replicates, draws, floor * ((vectors**2) @ active[..., None])[..., 0].sum(axis=-1))


def sensitivity(game: MetaGame, rater, options: dict, replicates: int, rng, covariance=None) -> np.ndarray:
    """Per joint a, the variance ``sum_i g_ia^T S_a g_ia`` it adds to the ratings (`stein`)."""
    return squared_norms([stein(game, rater, options, replicates, rng, covariance)])


def uncertain_edges(payoffs: np.ndarray, covariance: np.ndarray, counts: np.ndarray, z: float) -> np.ndarray:
    """Per joint, its share of the response-graph edges whose sign is still uncertain.

    The edge between ``a`` and ``a'`` (differing in player p's strategy) is uncertain when
    ``|G_p(a') - G_p(a)| < z sqrt(S_p(a) + S_p(a'))`` (ResponseGraphUCB's test, Rowland et
    al. 2019, with a normal interval). Each uncertain edge weighs 1, split between its
    joints as Neyman's rule for a difference of means splits the episodes, in proportion
    to the per-episode standard deviations ``sigma_p(a) = sqrt(n_a S_p(a))``.

    The edges of player p are compared ``EDGE_CHUNK`` pairs at a time (a few opponent
    profiles, all pairs of p's strategies), so memory stays bounded on a league of a thousand.
    """
    variance = np.moveaxis(np.diagonal(covariance, axis1=-2, axis2=-1), -1, 0)  # [N, K_1, ..., K_N]
    sigma = np.sqrt(np.maximum(variance, 0.0) * counts)
    weight = np.zeros(counts.shape)
    for p in range(payoffs.shape[0]):
        g, v, s = (np.moveaxis(x[p], p, -1) for x in (payoffs, variance, sigma))
        shape = g.shape
        g, v, s = (x.reshape(-1, shape[-1]) for x in (g, v, s))
        shares = np.empty(g.shape)
        step = max(1, EDGE_CHUNK // shape[-1] ** 2)
        for start in range(0, len(g), step):
            rows = slice(start, start + step)
            shares[rows] = _edge_shares(g[rows], v[rows], s[rows], z)
        weight += np.moveaxis(shares.reshape(shape), -1, p)
    return weight


def _edge_shares(g: np.ndarray, v: np.ndarray, s: np.ndarray, z: float) -> np.ndarray:
    """For payoffs ``g [R, K]`` of one player's K strategies against R opponent profiles (variances
    ``v``, per-episode deviations ``s``), each entry's share of its row's uncertain edges."""
    uncertain = np.abs(g[..., None, :] - g[..., :, None]) < z * np.sqrt(v[..., None, :] + v[..., :, None])
    uncertain &= ~np.eye(g.shape[-1], dtype=bool)
    pair = s[..., :, None] + s[..., None, :]
    split = np.divide(s[..., :, None], pair, out=np.full(pair.shape, 0.5), where=pair > 0)
    return (uncertain * split).sum(axis=-1)


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
    initial: int = 16,
    rounds: int = 20,
    replicates: int = 32,
    confidence: float = 1.96,
    seed: int = 0,
    workers: int = 1,
    address: str | None = None,
    progress=None,
    **options,
) -> list[Checkpoint]:
    """Estimate the meta-game of ``population`` from ``budget`` episodes allocated by ``rule``.

    Args:
        game: a ``pyspiel.Game`` or a name.
        population: a [`metaeval.spiel.Population`][metaeval.spiel.Population] for it.
        budget: total episodes, at least ``initial`` per joint.
        rater: a rater's name or function (e.g. ``"deviation"``) whose ratings
            the ``"variance"`` rule makes precise; ``options`` are passed to it.
        rule: ``"uniform"``, ``"variance"`` or ``"response_graph"`` (module docstring).
        initial: episodes every joint gets first (at least 2); a pilot too small
            for the per-joint spreads misleads the adaptive rules.
        rounds: allocation rounds after the initial ones.
        replicates: bootstrap draws per round for the sensitivities (``"variance"``).
        confidence: z of the normal interval deciding an edge (``"response_graph"``).
        seed: seeds the episodes (per joint) and the bootstrap draws.
        workers: Ray actors playing the episodes in lock-step shards, as a meta-game
            build's (1: in-process); the estimates are the same for any number.
        address: the Ray cluster they run on (None: an embedded Ray, or ``$RAY_ADDRESS``).
        progress: as in ``build_metagame``, counting each batch's episodes.

    Returns:
        One `Checkpoint` after the initial episodes and one after each round;
        the last holds the final estimate.
    """
    if rule not in RULES:
        raise MetaEvalError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    from metaeval.ratings import check_options

    rater = check_options(rater, options)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < math.inf:
        raise MetaEvalError(f"confidence (the z of an edge's interval) must be a positive number, got {confidence!r}")
    streams = EpisodeStreams(game, population, seed, workers, address)
    joints = streams.counts.size
    for name, value, least in (("initial", initial, 2), ("rounds", rounds, 1), ("replicates", replicates, 2),
                               ("budget", budget, initial * joints), ("workers", workers, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
            raise MetaEvalError(f"{name} must be an int of at least {least}, got {value!r}")
    if rule == "variance":  # a round's noise, shifts and draws [B, joints, N], the draws of every round
        memory.check(memory.FLOAT * joints * len(streams.counts.shape) * replicates * (rounds + 4),
                     f"the sensitivities from {replicates} replicates over {rounds} rounds",
                     "use fewer replicates or rounds")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
    every = np.argwhere(np.ones(streams.counts.shape, dtype=bool))
    streams.play_joints(every, np.full(len(every), initial), progress)
    history = [Checkpoint(streams.episodes, streams.metagame())]
    estimates = []
    remaining = budget - streams.episodes
    for r in range(rounds):
        spend = remaining // (rounds - r)
        remaining -= spend
        total = streams.episodes + spend
        if rule == "uniform":
            targets = np.full(streams.counts.shape, total / joints)
        else:
            covariance = streams.covariance()
            if rule == "response_graph":
                weight = uncertain_edges(history[-1].metagame.payoffs, covariance, streams.counts, confidence)
            else:
                # per-episode estimates C_a^(1/2) g_ia (S_a = C_a / n_a), averaged over the rounds
                estimates.append(stein(history[-1].metagame, rater, options, replicates, rng, covariance)
                                 .scaled(np.sqrt(streams.counts)))
                weight = np.sqrt(squared_norms(estimates, r + 1))
            share = weight / weight.sum() if weight.sum() > 0 else 1.0 / joints
            targets = total * ((1 - UNIFORM_SHARE) * share + UNIFORM_SHARE / joints)
        given = allocate(targets, streams.counts, spend)
        chosen = np.argwhere(given > 0)  # C order, as the joints were played one by one
        streams.play_joints(chosen, given[tuple(chosen.T)], progress)
        history.append(Checkpoint(streams.episodes, streams.metagame()))
    return history
