"""Rating: the result every rater returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from metaeval.game import MetaGame


@dataclass(frozen=True, eq=False)
class Rating:
    """One real number per strategy of every player, with what produced it.

    Attributes:
        method: the rater's registered name.
        game: the rated game.
        ratings: one 1-D array per player, ``ratings[p][i]`` for strategy i.
        distribution: the joint distribution ``[K_1..K_N]`` or per-player marginals
            the ratings were computed against, or None.
        diagnostics: solver facts (rounds, residuals, regret, timings, ...).
    """

    method: str
    game: MetaGame
    ratings: list[np.ndarray]
    distribution: np.ndarray | list[np.ndarray] | None = None
    diagnostics: dict = field(default_factory=dict)

    def ranking(self, player: int = 0) -> list[str]:
        """Strategy names of ``player`` from best to worst (stable for ties)."""
        order = np.argsort(-self.ratings[player], kind="stable")
        return [self.game.strategy_names[player][i] for i in order]

    def to_frame(self) -> pd.DataFrame:
        """Long table: player, strategy, rating, rank (1 = best, ties share the best rank)."""
        rows = []
        for p, values in enumerate(self.ratings):
            ranks = pd.Series(-values).rank(method="min").astype(int).to_numpy()
            for i, value in enumerate(values):
                rows.append(
                    {
                        "player": self.game.player_names[p],
                        "strategy": self.game.strategy_names[p][i],
                        "rating": float(value),
                        "rank": int(ranks[i]),
                    }
                )
        return pd.DataFrame(rows, columns=["player", "strategy", "rating", "rank"])
