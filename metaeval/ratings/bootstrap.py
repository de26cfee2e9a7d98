"""Ratings under uncertainty: bootstrap intervals, probability of being top, CI-aware ranks.

A replicate redraws the payoff tensor and rates it again; B replicates give, per
strategy, a percentile interval (Efron & Tibshirani 1993, ch. 13), the share of
replicates in which it has its player's highest rating (``p_top``), and a CI-aware
rank: 1 + the number of the player's strategies whose interval lies entirely above
its own (the rule of Chatbot Arena's leaderboard).

Two ways to redraw the tensor:

- **parametric** (from ``MetaGame.stderr``): ``G* = G + stderr * Z`` with Z standard
  normal per entry, keeping the structure raters rely on. In a constant-sum game the
  last player's noise is minus the sum of the others' (so the sum stays constant);
  in a symmetric 2-player game player 1's noise is player 0's transposed, and
  antisymmetric (scaled by 1/sqrt 2) when the game is also constant-sum; a
  win-probability game (symmetric, constant sum 1, payoffs in [0, 1]) is clipped to
  [0, 1].
- **non-parametric** (from stored episodes): ``samples`` of shape ``[S, N, K_1, ...,
  K_N]``, ``samples[s, :, a]`` the players' returns in episode s of joint a; a joint
  with fewer than S episodes is padded at the end with NaN. A replicate redraws each
  joint's episodes with replacement (whole episodes, so per-episode structure such
  as a zero sum is kept) and averages them. The samples must average to the game's
  payoffs.

The interval's bounds at level 1 - 2a are the (B+1)a-th and (B+1)(1-a)-th smallest
replicates (Davison & Hinkley 1997, secs. 5.2-5.3), interpolated between order statistics
(numpy's ``method="weibull"``, Hyndman & Fan 1996 definition 6): the k-th smallest of B
draws has expected distribution function k/(B+1), so each tail holds a on average
whatever B. numpy's default (definition 7) takes the (1 + (B-1)a)-th, too far inside
for small B: a 95% interval from 40 replicates then covers about 90%.

A replicate the rater refuses (a MetaEvalError) is left out of the summaries and
reported: its index and message in ``diagnostics["bootstrap"]["failures"]``, their count
in ``["failed"]``; only if every replicate fails does the bootstrap fail.

Replicate b is drawn from ``SeedSequence(seed).spawn(B)[b]``, so results do not
depend on how replicates are split among Ray actors.

Where the rater allows, a replicate is rated from the point rating (payoff ratings from
its dual multipliers, deviation ratings from its support, alpha-Rank a task's replicates
together on the point's chain, nash a task's replicates' logit branches traced together;
`metaeval.ratings.warm`):
the same ratings to the solver's precision, at a fraction of the cost, and rated from
scratch wherever the warm start cannot certify its result. Uniform ratings under the
parametric bootstrap are drawn from their exact Gaussian law instead of from payoff
tensors (`metaeval.ratings.gaussian_replicates`): the same law, not the same draws,
and replicate b is then row b of one ``[B, sum_p K_p]`` draw seeded by ``seed``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import numpy as np

from metaeval.runs import budget
from metaeval.runs.progress import Progress
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating
from metaeval.ratings.gaussian_replicates import GaussianReplicates
from metaeval.ratings.warm import warm_replicates

#: Replicates per task sent to an actor (and per progress-bar step in-process).
CHUNK = 8


class Resampler:
    """Draws payoff tensors around ``game`` (see the module docstring).

    Args:
        game: the rated game, with ``stderr`` unless ``samples`` is given.
        samples: optional episode returns ``[S, N, K_1, ..., K_N]``.
    """

    def __init__(self, game: MetaGame, samples=None):
        self.game = game
        if samples is not None:
            self.samples, self.episodes = _check_samples(game, samples)
            self.kind = "non-parametric (episodes)"
        elif game.stderr is not None:
            self.samples = None
            self.kind = "parametric (stderr)"
            self.constant_sum = game.is_zero_sum()
            self.symmetric = game.num_players == 2 and game.is_symmetric()
            payoffs = game.payoffs
            self.win_probability = (
                self.symmetric and self.constant_sum
                and np.allclose(payoffs.sum(axis=0), 1.0) and payoffs.min() >= 0 and payoffs.max() <= 1
            )
        else:
            raise MetaEvalError(
                "bootstrap needs per-entry standard errors (MetaGame.stderr) or samples of episode returns"
            )

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One resampled payoff tensor ``[N, K_1, ..., K_N]``.

        Args:
            rng: the generator the draw uses.

        Returns:
            The payoff tensor.
        """
        if self.samples is not None:
            return self._redraw_episodes(rng)
        game = self.game
        stderr, payoffs = game.stderr, game.payoffs
        if self.symmetric:
            z = rng.standard_normal(game.shape)
            if self.constant_sum:
                z = (z - z.T) / np.sqrt(2.0)
            row = payoffs[0] + stderr[0] * z
            if self.win_probability:
                row = np.clip(row, 0.0, 1.0)
            return np.stack([row, row.T])
        noise = stderr * rng.standard_normal(payoffs.shape)
        if self.constant_sum:
            noise[-1] = -noise[:-1].sum(axis=0)
        return payoffs + noise

    def _redraw_episodes(self, rng: np.random.Generator) -> np.ndarray:
        size = self.samples.shape[0]
        picks = np.floor(rng.random((size, *self.game.shape)) * self.episodes).astype(np.int64)
        drawn = np.take_along_axis(self.samples, picks[:, None], axis=0)
        valid = (np.arange(size).reshape(-1, *[1] * self.game.num_players) < self.episodes)[:, None]
        return np.where(valid, drawn, 0.0).sum(axis=0) / self.episodes


def _check_samples(game: MetaGame, samples) -> tuple[np.ndarray, np.ndarray]:
    """The samples as float64, and the number of episodes of each joint ``[K_1, ..., K_N]``."""
    try:
        samples = np.asarray(samples, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetaEvalError(f"samples must be numbers (episode returns, NaN for padding): {exc}") from None
    expected = (game.num_players, *game.shape)
    if samples.ndim != game.num_players + 2 or samples.shape[1:] != expected:
        raise MetaEvalError(f"samples must have shape [S, {', '.join(map(str, expected))}], got {samples.shape}")
    present = ~np.isnan(samples)
    if np.any(present.any(axis=1) != present.all(axis=1)):
        raise MetaEvalError("samples: an episode must give a return to every player or be all NaN (padding)")
    if not np.all(np.isfinite(samples[present])):
        raise MetaEvalError("samples must be finite (NaN marks padding only)")
    episode_present = present[:, 0]
    episodes = episode_present.sum(axis=0)
    if np.any(episodes < 1):
        raise MetaEvalError("samples: every joint needs at least one episode")
    padded_first = np.cumsum(episode_present, axis=0) != np.arange(1, len(samples) + 1).reshape(
        -1, *[1] * game.num_players
    )
    if np.any(padded_first & episode_present):
        raise MetaEvalError("samples: NaN padding must come after a joint's episodes")
    means = np.where(present, samples, 0.0).sum(axis=0) / episodes
    scale = float(np.abs(samples[present]).max())  # the means' rounding is relative to it
    if not np.allclose(means, game.payoffs, rtol=0, atol=1e-9 * scale):
        worst = float(np.abs(means - game.payoffs).max())
        raise MetaEvalError(f"samples do not average to the game's payoffs (largest difference {worst:.3g})")
    return samples, episodes


def replicate_ratings(game: MetaGame, rater, options: dict, samples, seeds,
                      warm=None) -> tuple[np.ndarray, list[tuple[int, str]], int]:
    """Ratings of the replicates drawn from ``seeds``, ``[len(seeds), sum_p K_p]``, the
    replicates the rater refused, as (replicate index, its message; their rows are NaN),
    and how many replicates were rated from scratch. ``warm``: a function rating a
    replicate's payoffs from the point rating, or returning None to rate it from scratch
    (`metaeval.ratings.warm.warm_replicates`)."""
    resampler = Resampler(game, samples)
    rows = np.full((len(seeds), sum(game.shape)), np.nan)
    failures, cold = [], 0
    batched = getattr(warm, "batched", False)  # rates the chunk's replicates at once
    draws = [resampler.draw(np.random.default_rng(seed)) for seed in seeds] if batched else None
    warm_rows = _warm_ratings(warm, np.stack(draws)) if batched else None
    for row, seed in enumerate(seeds):
        payoffs = draws[row] if batched else resampler.draw(np.random.default_rng(seed))
        if warm is not None:
            ratings = warm_rows[row] if batched else _warm_ratings(warm, payoffs)
            if ratings is not None and np.all(np.isfinite(ratings)):
                rows[row] = ratings
                continue
        cold += 1
        drawn = MetaGame(payoffs, game.strategy_names, game.player_names)
        try:
            rows[row] = np.concatenate(rater(drawn, **options).ratings)
        except MetaEvalError as exc:
            failures.append((int(seed.spawn_key[-1]), str(exc)))
    return rows, failures, cold


def _warm_ratings(warm, payoffs):
    """``warm(payoffs)``, or None (rate from scratch) where it refuses; a batched warm
    start's refusal declines every replicate of its batch."""
    try:
        return warm(payoffs)
    except MetaEvalError:
        return [None] * len(payoffs) if getattr(warm, "batched", False) else None


def percentile_interval(values: np.ndarray, level: float) -> np.ndarray:
    """``[2, K]`` lower and upper percentile bounds of replicates ``[B, K]``: the (B+1)a-th
    order statistics (module docstring)."""
    tail = (1.0 - level) / 2.0
    return np.quantile(values, [tail, 1.0 - tail], axis=0, method="weibull")


def summarise(replicates: list[np.ndarray], level: float,
              tolerance: float = 0.0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Percentile intervals ``[K_p, 2]`` ((B+1)a-th order statistics, module docstring) and
    top probabilities ``[K_p]`` from replicates ``[B, K_p]``; ratings within ``tolerance``
    (the rater's, `Rating.tolerance`) of a replicate's best share its top."""
    # Every player at once: a uniform bootstrap costs a few of numpy's calls per player.
    values, sizes = np.concatenate(replicates, axis=1), [len(values.T) for values in replicates]
    starts, ends = np.cumsum([0, *sizes[:-1]]), np.cumsum(sizes)[:-1]
    bounds = percentile_interval(values, level).T
    top = values >= np.repeat(np.maximum.reduceat(values, starts, axis=1), sizes, axis=1) - tolerance
    share = top / np.repeat(np.add.reduceat(top, starts, axis=1, dtype=np.int64), sizes, axis=1)
    return np.split(bounds, ends), np.split(share.mean(axis=0), ends)


def with_intervals(
    game: MetaGame,
    rater,
    options: dict,
    replicates: int,
    seed: int = 0,
    level: float = 0.95,
    samples=None,
    workers: int = 1,
    address: str | None = None,
    progress=None,
    warm_start: bool = True,
) -> Rating:
    """``rater(game, **options)`` with ``intervals``, ``p_top`` and ``replicates`` from a
    bootstrap of ``game``.

    Args:
        game: the game to rate, with ``stderr`` unless ``samples`` are given.
        rater: the rater function, run on the game and on every replicate with ``options``.
        options: the rater's options.
        replicates: B >= 2.
        seed: non-negative int; same seed, same intervals.
        level: interval coverage in (0, 1).
        samples: episode returns for the non-parametric bootstrap (module docstring).
        workers: Ray actors rating replicates; 1 rates them in-process unless an
            ``address`` is given.
        address: an existing Ray cluster (default ``$RAY_ADDRESS``, else embedded Ray).
        progress: True, None or False ([`metaeval.runs.progress`][metaeval.runs.progress]).
        warm_start: rate replicates from the point rating where the rater can
            ([`metaeval.ratings.warm`][metaeval.ratings.warm]); False: every one from scratch.

    Returns:
        The Rating of ``game``, with ``intervals``, ``p_top`` and ``replicates``.
    """
    _check_arguments(replicates, seed, level, workers, sum(game.shape))
    resampler = Resampler(game, samples)  # validates before any work starts
    rating = rater(game, **options)
    start = time.perf_counter()
    gaussian = GaussianReplicates.of(rater, rating, resampler) if warm_start else None
    with Progress(replicates, "bootstrap", "replicate", progress) as shown:
        if gaussian is not None:
            values, failures, cold, used = gaussian.draw(np.random.default_rng(seed), replicates), [], 0, 0
            shown.advance(replicates)
        else:
            warm = warm_replicates(rater, rating, options) if warm_start else None
            values, failures, cold, used = _rate_replicates(
                game, rater, options, resampler, replicates, seed, warm, workers, address, shown)
    if len(failures) == replicates:
        raise MetaEvalError(f"every bootstrap replicate failed; replicate {failures[0][0]}: {failures[0][1]}")
    values = np.delete(values, [index for index, _ in failures], axis=0)  # row b is replicate b
    per_player = np.split(values, np.cumsum(game.shape)[:-1], axis=1)
    intervals, p_top = summarise(per_player, level, rating.tolerance)
    diagnostics = dict(rating.diagnostics)
    diagnostics["bootstrap"] = {
        "replicates": replicates,
        "failed": len(failures),
        "failures": failures,
        "seed": seed,
        "level": level,
        "resampling": resampler.kind,
        "interval": "percentile",
        "workers": used,
        "drawn": "ratings (their Gaussian law)" if gaussian is not None else "payoff tensors",
        "cold_replicates": cold,
        "seconds": time.perf_counter() - start,
    }
    return dataclasses.replace(
        rating, intervals=intervals, p_top=p_top, replicates=per_player, diagnostics=diagnostics
    )


def _rate_replicates(game, rater, options, resampler, replicates, seed, warm, workers, address, shown):
    """Every replicate's ratings ``[B, sum_p K_p]`` from its drawn payoffs, by chunks in
    process or on Ray actors; the replicates refused, how many were rated from scratch and
    the actors used (0 in process)."""
    from metaeval.distributed.session import resolve_address

    children = np.random.SeedSequence(seed).spawn(replicates)
    size = CHUNK
    if hasattr(warm, "chunk"):  # a batched warm start takes more replicates a task, still one for every actor
        size = min(warm.chunk, -(-replicates // workers))
    chunks = [children[i : i + size] for i in range(0, replicates, size)]
    task = functools.partial(replicate_ratings, game, rater, dict(options), resampler.samples, warm=warm)
    address = resolve_address(address)
    if workers > 1 or address is not None:
        from metaeval.distributed.replicates import map_on_actors

        results = map_on_actors(task, chunks, workers, address, lambda i: shown.advance(len(chunks[i])))
        used = workers
    else:
        results = []
        for chunk in chunks:
            results.append(task(chunk))
            shown.advance(len(chunk))
        used = 0
    values = np.concatenate([rows for rows, _, _ in results])
    failures = [failure for _, chunk_failures, _ in results for failure in chunk_failures]
    cold = sum(chunk_cold for _, _, chunk_cold in results) if warm is not None else replicates
    return values, failures, cold, used


def _check_arguments(replicates, seed, level, workers, ratings: int) -> None:
    for name, value, least in (("bootstrap", replicates, 2), ("seed", seed, 0), ("workers", workers, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
            raise MetaEvalError(f"{name} must be an int of at least {least}, got {value!r}")
    if not isinstance(level, (int, float)) or isinstance(level, bool) or not 0.0 < level < 1.0:
        raise MetaEvalError(f"level must be a number strictly between 0 and 1, got {level!r}")
    check_replicates(replicates, level, ratings)


#: Bytes of one replicate's random stream (``SeedSequence``; about 380 measured).
SEED_BYTES = 512


def least_replicates(level: float) -> int:
    """The fewest replicates B whose percentile interval at ``level`` = 1 - 2a exists: its
    bounds are the (B+1)a-th order statistics (module docstring), so (B+1)a >= 1 (39 at 95%).
    With fewer, both bounds are clamped to the extreme replicates and the interval covers less
    than ``level``, however the point estimate falls.

    Args:
        level: the interval's coverage, in (0, 1).

    Returns:
        The number of replicates.
    """
    tail = (1.0 - level) / 2.0
    return max(2, math.ceil(1.0 / tail - 1.0 - 1e-9))


def check_replicates(replicates: int, level: float, ratings: int, what: str = "bootstrap") -> None:
    """Refuse fewer replicates than a ``level`` interval needs, or more than the memory budget
    holds (a random stream and twice ``ratings`` floats per replicate), before any is drawn."""
    least = least_replicates(level)
    if replicates < least:
        raise MetaEvalError(
            f"{what}={replicates} replicates are too few for a {level:.3g} percentile interval: "
            f"it needs at least {least} (or a lower level)"
        )
    budget.check(replicates * (SEED_BYTES + 2 * budget.FLOAT * ratings),
                 f"{what}={replicates} replicates of {ratings} ratings", "use fewer replicates")
