"""Raters: plain functions ``(MetaGame, **options) -> Rating``, registered by name."""

from __future__ import annotations

import inspect

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.alpharank import alpharank
from metaeval.ratings.base import Rating
from metaeval.ratings.deviation import deviation
from metaeval.ratings.elo import elo
from metaeval.ratings.nash import nash
from metaeval.ratings.payoff import payoff
from metaeval.ratings.uniform import uniform
from metaeval.ratings.voting import VOTING_RATERS

RATERS = {
    "uniform": uniform,
    "elo": elo,
    "nash": nash,
    "alpharank": alpharank,
    "deviation": deviation,
    "payoff": payoff,
    **VOTING_RATERS,
}


def rate(game: MetaGame, method: str, **options) -> Rating:
    """Rate every strategy of ``game`` with the rater registered as ``method``."""
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"rate() needs a MetaGame, got {type(game).__name__}")
    return check_options(method, options)(game, **options)


def check_options(method: str, options: dict):
    """The rater registered as ``method``, once its name and option names are checked."""
    try:
        rater = RATERS[method]
    except KeyError:
        raise MetaEvalError(
            f"unknown rater {method!r}; choose one of {', '.join(sorted(RATERS))}"
        ) from None
    accepted = inspect.signature(rater).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        raise MetaEvalError(
            f"rater {method!r} has no option(s) {', '.join(unknown)}; "
            f"it accepts {', '.join(list(accepted)[1:]) or 'none'}"
        )
    return rater


__all__ = ["RATERS", "Rating", "check_options", "rate"]
