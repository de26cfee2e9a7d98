"""Rating: the result every rater returns."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame


def product_distribution(marginals) -> np.ndarray:
    """The joint distribution ``[K_1..K_N]`` of independent per-player mixtures (their outer product)."""
    return functools.reduce(np.multiply.outer, [np.asarray(m, dtype=np.float64) for m in marginals])


def marginals(sigma: np.ndarray) -> list[np.ndarray]:
    """Each player's marginal of a joint distribution ``sigma`` ``[K_1..K_N]``: a list of N
    1-D arrays, ``marginals(sigma)[p][i]`` the probability that player p plays strategy i."""
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
    """

    method: str
    game: MetaGame
    ratings: list[np.ndarray]
    distribution: np.ndarray | None = None
    diagnostics: dict = field(default_factory=dict)
    intervals: list[np.ndarray] | None = None
    p_top: list[np.ndarray] | None = None
    replicates: list[np.ndarray] | None = None

    def __post_init__(self):
        if self.distribution is not None and (
                not isinstance(self.distribution, np.ndarray) or self.distribution.shape != self.game.shape):
            raise MetaEvalError(
                f"{self.method}: a rating's distribution is an array of the game's shape {self.game.shape}, got "
                f"{type(self.distribution).__name__} {getattr(self.distribution, 'shape', '')}".rstrip()
            )

    def ranking(self, player: int = 0) -> list[str]:
        """Strategy names of ``player`` from best to worst (stable for ties)."""
        order = np.argsort(-self.ratings[player], kind="stable")
        return [self.game.strategy_names[player][i] for i in order]

    def ci_ranks(self) -> list[np.ndarray]:
        """Per player, 1 + the number of strategies whose interval lies wholly above this one's."""
        if self.intervals is None:
            raise MetaEvalError("CI-aware ranks need intervals: rate with bootstrap=B")
        return [1 + (b[None, :, 0] > b[:, None, 1]).sum(axis=1) for b in self.intervals]

    def to_frame(self) -> pd.DataFrame:
        """Long table: player, strategy, rating, rank (1 = best, ties share the best rank);
        with a bootstrap also low, high, p_top and ci_rank."""
        columns = ["player", "strategy", "rating", "rank"]
        if self.intervals is not None:
            columns += ["low", "high", "p_top", "ci_rank"]
            ci_ranks = self.ci_ranks()
        rows = []
        for p, values in enumerate(self.ratings):
            ranks = pd.Series(-values).rank(method="min").astype(int).to_numpy()
            for i, value in enumerate(values):
                row = [self.game.player_names[p], self.game.strategy_names[p][i], float(value), int(ranks[i])]
                if self.intervals is not None:
                    low, high = self.intervals[p][i]
                    row += [float(low), float(high), float(self.p_top[p][i]), int(ci_ranks[p][i])]
                rows.append(row)
        return pd.DataFrame(rows, columns=columns)
