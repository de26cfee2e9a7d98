"""Which policies a rating keeps: lowest and highest rated, with seeded tie-breaks.

Ratings are compared rounded to ``TIE_DECIMALS`` decimals (solver noise is not a
difference); equal ones are ordered by keys drawn uniformly from a generator, and
the keys are returned so that a run can record them.
"""

from __future__ import annotations

import numpy as np

TIE_DECIMALS = 9
"""Ratings equal to this many decimals count as tied; ties go to a seeded random order."""


def rank_order(ratings: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices from lowest to highest rating, and the tie-break keys drawn from ``rng``."""
    keys = rng.random(len(ratings))
    return np.lexsort((keys, np.round(ratings, TIE_DECIMALS))), keys


def lowest_rated(ratings: np.ndarray, count: int, rng: np.random.Generator,
                 protected: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Indices (sorted) of the ``count`` lowest ratings, and the tie-break keys used.

    ``protected`` (a boolean mask) indices are chosen only when the others are too few,
    and then the lowest-rated of them: the choice is the ``count`` lowest in the order
    (protected, rating, key).
    """
    order, keys = rank_order(ratings, rng)
    if protected is not None:
        order = order[np.argsort(np.asarray(protected, dtype=bool)[order], kind="stable")]
    return np.sort(order[:count]), keys
