"""Raters: plain functions ``(MetaGame, **options) -> Rating``, registered by name."""

from __future__ import annotations

import inspect

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.alpharank import alpharank
from metaeval.ratings.base import Rating
from metaeval.ratings.bootstrap import with_intervals
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
"""Every rater by name: the ``method`` names [`rate`][metaeval.ratings.rate] accepts."""


def rate(
    game: MetaGame,
    method: str,
    bootstrap: int = 0,
    seed: int = 0,
    level: float = 0.95,
    samples=None,
    workers: int = 1,
    address: str | None = None,
    correction: str | None = None,
    owner_rankings=None,
    **options,
) -> Rating:
    """Rate every strategy of ``game`` with the rater registered as ``method``.

    With ``bootstrap=B`` the game is resampled B times (from its ``stderr``, or from
    ``samples`` of episode returns), re-rated, on ``workers`` Ray actors when more than
    one, and the Rating gains ``intervals`` at ``level``, ``p_top`` and CI-aware ranks;
    see [`metaeval.ratings.bootstrap`][metaeval.ratings.bootstrap]. ``correction="yrwr"`` with ``owner_rankings``
    (owner -> its strategies by name, best first) post-processes every player's ratings
    by You-Rank-We-Rank (``metaeval.pairwise.yrwr``); the owners are the keys of that
    mapping. Other keywords are the rater's options.

    Args:
        game: the meta-game to rate.
        method: a rater's name in [`RATERS`][metaeval.ratings.RATERS] (or a rater function).
        bootstrap: B >= 2 replicates for intervals; 0: point ratings only.
        seed: the bootstrap's seed; same seed, same intervals.
        level: the intervals' coverage, in (0, 1).
        samples: episode returns ``[S, N, K_1, ..., K_N]`` to resample instead of ``stderr``.
        workers: Ray actors rating the replicates.
        address: an existing Ray cluster to rate them on.
        correction: ``"yrwr"``, or None for no correction.
        owner_rankings: owner -> its strategies by name, best first (with ``correction``).
        **options: the rater's options.

    Returns:
        The [`Rating`][metaeval.ratings.base.Rating]: one number per strategy of every player.

    Raises:
        MetaEvalError: an unknown rater or option, or options that do not go together.
    """
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"rate() needs a MetaGame, got {type(game).__name__}")
    rater = check_options(method, options)
    if correction not in (None, "yrwr"):
        raise MetaEvalError(f"unknown correction {correction!r}; the one correction is 'yrwr'")
    if (correction is None) != (owner_rankings is None):
        raise MetaEvalError("correction='yrwr' and owner_rankings go together")
    if bootstrap:
        if correction is not None:
            raise MetaEvalError("a correction applies to point ratings; use it without bootstrap")
        return with_intervals(game, rater, options, bootstrap, seed=seed, level=level,
                              samples=samples, workers=workers, address=address)
    if samples is not None or workers != 1 or address is not None:
        raise MetaEvalError("samples, workers and address apply only with bootstrap=B (B >= 2)")
    rating = rater(game, **options)
    if correction is None:
        return rating
    from metaeval.pairwise.yrwr import correct_rating

    return correct_rating(rating, owner_rankings)


def check_options(method, options: dict):
    """The rater registered as ``method`` (or the rater function ``method``), once its name
    and option names are checked.

    Args:
        method: a rater's name in [`RATERS`][metaeval.ratings.RATERS], or a rater function.
        options: the options meant for it.

    Returns:
        The rater function.

    Raises:
        MetaEvalError: an unknown rater, or an option it does not take.
    """
    if callable(method):
        rater, method = method, getattr(method, "__name__", repr(method))
    else:
        try:
            rater = RATERS[method]
        except (KeyError, TypeError):
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
