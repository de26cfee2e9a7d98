"""Rating: the result every rater returns."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame

if TYPE_CHECKING:
    import pandas as pd


def product_distribution(marginals) -> np.ndarray:
    """The joint distribution ``[K_1..K_N]`` of independent per-player mixtures (their outer product).

    Args:
        marginals: one mixture per player.

    Returns:
        The joint distribution.
    """
    return functools.reduce(np.multiply.outer, [np.asarray(m, dtype=np.float64) for m in marginals])


def marginals(sigma: np.ndarray) -> list[np.ndarray]:
    """Each player's marginal of a joint distribution ``sigma`` ``[K_1..K_N]``: a list of N
    1-D arrays, ``marginals(sigma)[p][i]`` the probability that player p plays strategy i.

    Args:
        sigma: a joint distribution ``[K_1, ..., K_N]``.

    Returns:
        The N marginals.
    """
    axes = range(sigma.ndim)
    return [sigma.sum(axis=tuple(q for q in axes if q != p)) for p in axes]


@dataclass(frozen=True, eq=False)
class Rating:
    """One real number per strategy of every player, with what produced it.

    Attributes:
        method: the rater's registered name.
        game: the rated game.
        ratings: one 1-D array per player, ``ratings[p][i]`` for strategy i.
        distribution: the joint distribution the ratings were computed against, always a
            NumPy array of the game's shape ``[K_1..K_N]`` (for raters that pick one mixture
            per player, such as ``nash``, ``uniform`` or single-population ``alpharank``,
            the product of those mixtures; ``metaeval.training.meta_solvers.marginals``
            recovers them), or None for raters without one (``elo``, most voting rules).
        diagnostics: solver facts (rounds, residuals, regret, timings, ...); a
            bootstrap adds its settings under ``"bootstrap"``.
        intervals: with ``rate(..., bootstrap=B)``, one ``[K_p, 2]`` array of lower and
            upper bounds per player (95% percentile intervals by default).
        p_top: with a bootstrap, per player the share of replicates in which each
            strategy has the player's highest rating.
        replicates: with a bootstrap, per player the ``[B, K_p]`` replicate ratings.
        tolerance: the rater's accuracy in rating units (its relative tolerance times the
            payoff range, for raters of payoff differences): ratings at most this far apart
            are tied, and share a rank.
    """

    method: str
    game: MetaGame
    ratings: list[np.ndarray]
    distribution: np.ndarray | None = None
    diagnostics: dict = field(default_factory=dict)
    intervals: list[np.ndarray] | None = None
    p_top: list[np.ndarray] | None = None
    replicates: list[np.ndarray] | None = None
    tolerance: float = 0.0

    def __post_init__(self):
        for p, values in enumerate(self.ratings):
            if not np.all(np.isfinite(values)):
                raise MetaEvalError(
                    f"{self.method} gave a non-finite rating to a strategy of player {p}; "
                    "no rating is reported rather than a wrong one"
                )
        if self.distribution is not None and (
                not isinstance(self.distribution, np.ndarray) or self.distribution.shape != self.game.shape):
            raise MetaEvalError(
                f"{self.method}: a rating's distribution is an array of the game's shape {self.game.shape}, got "
                f"{type(self.distribution).__name__} {getattr(self.distribution, 'shape', '')}".rstrip()
            )

    def ranking(self, player: int = 0) -> list[str]:
        """Strategy names of ``player`` from best to worst (stable for ties).

        Args:
            player: the player.

        Returns:
            The names, best first.
        """
        order = np.argsort(-self.ratings[player], kind="stable")
        return [self.game.strategy_names[player][i] for i in order]

    def ranks(self, player: int = 0) -> np.ndarray:
        """1 + the number of the player's strategies rated above this one by more than
        ``tolerance``: strategies tied within the rater's accuracy share the best rank.

        Args:
            player: the player.

        Returns:
            The ranks ``[K_p]`` (1 = best), in strategy order.
        """
        values = self.ratings[player]
        return shared_ranks(values, values, self.tolerance)

    def ci_ranks(self) -> list[np.ndarray]:
        """Per player, 1 + the number of strategies whose interval lies wholly above this
        one's (by more than ``tolerance``).

        Returns:
            One array of ranks ``[K_p]`` per player (1 = best).

        Raises:
            MetaEvalError: the rating has no intervals (it was not bootstrapped).
        """
        if self.intervals is None:
            raise MetaEvalError("CI-aware ranks need intervals: rate with bootstrap=B")
        return [shared_ranks(b[:, 0], b[:, 1], self.tolerance) for b in self.intervals]

    def to_frame(self) -> pd.DataFrame:
        """Long table: player, strategy, rating, rank (1 = best; ratings within the rater's
        ``tolerance``, kept in ``frame.attrs["rank_tolerance"]``, share a rank); with a
        bootstrap also low, high, p_top and ci_rank. Ratings and bounds are rounded to the
        rater's accuracy (`rounded`); ``ratings`` keeps them unrounded.

        Returns:
            One row per strategy of every player.
        """
        import pandas as pd  # a tenth of a second to import: only for tables

        columns = ["player", "strategy", "rating", "rank"]
        if self.intervals is not None:
            columns += ["low", "high", "p_top", "ci_rank"]
            ci_ranks = self.ci_ranks()
        rows = []
        for p, values in enumerate(self.ratings):
            ranks = self.ranks(p)
            for i, value in enumerate(rounded(values, self.tolerance, ranks)):
                row = [self.game.player_names[p], self.game.strategy_names[p][i], float(value), int(ranks[i])]
                if self.intervals is not None:
                    low, high = rounded(self.intervals[p][i], self.tolerance)
                    row += [float(low), float(high), float(self.p_top[p][i]), int(ci_ranks[p][i])]
                rows.append(row)
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs["rank_tolerance"] = self.tolerance
        return frame

    def rank_note(self) -> str:
        """One line saying how ranks treat ties, for printed tables.

        Returns:
            The line.
        """
        return (f"ranks: ratings within {self.tolerance:.3g} of each other ({self.method}'s accuracy) "
                "share a rank")


def rounded(values, tolerance: float, ranks=None) -> np.ndarray:
    """``values`` rounded to the decimal digit of ``tolerance`` (a rater's accuracy: the
    digits below it are solver noise), with ``-0.0`` made ``0.0``; unrounded when the
    tolerance is 0 or below the floats' own precision. With ``ranks`` (`Rating.ranks`
    of the values), values that share a rank all take the best of them, so ties read equal.

    Args:
        values: the numbers to round.
        tolerance: the rater's accuracy.
        ranks: the values' ranks, or None.

    Returns:
        The rounded values, a float array.
    """
    values = np.asarray(values, dtype=np.float64)
    if 0 < tolerance < np.inf and values.size:
        decimals = int(np.floor(-np.log10(tolerance)))
        with np.errstate(over="ignore"):
            if np.abs(values).max() * np.power(10.0, decimals) < 2.0**52:
                values = np.round(values, decimals)
    if ranks is not None:
        _, group = np.unique(ranks, return_inverse=True)
        best = np.full(group.max() + 1, -np.inf)
        np.maximum.at(best, group, values)
        values = best[group]
    return values + 0.0


def shared_ranks(low, high, tolerance: float) -> np.ndarray:
    """1 + the number of entries whose ``low`` exceeds this entry's ``high`` by more than
    ``tolerance`` (with low = high = the ratings: ranks that tied ratings share)."""
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    with np.errstate(over="ignore"):  # ratings near 1e308 apart: an infinite gap is above any tolerance
        return 1 + (low[None, :] - high[:, None] > tolerance).sum(axis=1)


UNIT_SCALES = (2.0**-64, 2.0**64)
"""Games whose largest |payoff| lies outside this range are rated by homogeneous raters at
unit scale ([`homogeneous`][metaeval.ratings.base.homogeneous]); ordinary games are rated as given, bit for bit."""


def homogeneous(*payoff_diagnostics: str):
    """Make a rater whose ratings of ``a * game`` are ``a`` times those of ``game`` (a > 0)
    rate extreme games at unit scale: payoffs (and standard errors) divided by the power of
    two [`MetaGame.payoff_scale`][metaeval.game.MetaGame.payoff_scale] (exact), ratings, tolerance and the diagnostics named
    in ``payoff_diagnostics`` multiplied back. Sums and differences of payoffs near 1e308
    would overflow inside the solvers; ratings that themselves overflow are refused.

    Args:
        *payoff_diagnostics: the diagnostics (in payoff units) scaled back with the ratings.

    Returns:
        A decorator for a rater function.
    """

    def wrap(rater):
        @functools.wraps(rater)
        def rate_at_unit_scale(game, *args, **options):
            if not isinstance(game, MetaGame):
                return rater(game, *args, **options)
            largest = max(float(game.payoffs.max()), -float(game.payoffs.min()))  # no |payoffs| copy
            if largest == 0 or UNIT_SCALES[0] <= largest <= UNIT_SCALES[1]:
                return rater(game, *args, **options)
            scale = game.payoff_scale()
            unit = MetaGame(game.payoffs / scale, game.strategy_names, game.player_names, counts=game.counts,
                            stderr=None if game.stderr is None else game.stderr / scale)
            rating = rater(unit, *args, **options)
            with np.errstate(over="ignore"):
                ratings = [values * scale for values in rating.ratings]
            if not all(np.all(np.isfinite(values)) for values in ratings):
                largest_rating = max(float(np.abs(values).max()) for values in rating.ratings)
                raise MetaEvalError(
                    f"{rating.method} ratings of this game exceed the largest float ({largest_rating:.3g} "
                    f"times the payoff scale {scale:.3g}); divide the payoffs by a common factor"
                )
            diagnostics = dict(rating.diagnostics, payoff_scale=scale)
            for key in payoff_diagnostics:
                if diagnostics.get(key) is not None:
                    diagnostics[key] = diagnostics[key] * scale
            return dataclasses.replace(rating, game=game, ratings=ratings, diagnostics=diagnostics,
                                       tolerance=rating.tolerance * scale)

        return rate_at_unit_scale

    return wrap
