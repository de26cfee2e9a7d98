"""You-Rank-We-Rank: an owner-monotone correction of any scalar rating (Hays et al. 2026).

Each owner (producer) ranks its own models, best first.  A model's corrected score is the
lowest raw score among the models its owner ranked at or above it (Algorithm 2, step 3:
the running minimum down the owner's list), so a copy the owner did not put first can
never outrank the copy it did: submitting clones buys no lottery tickets.  Models no owner
lists keep their scores.  Variants: ``intervals`` gives ua-yrwr (only models above whose
confidence intervals overlap constrain a model, section 4.4) and [`local_yrwr`][metaeval.pairwise.local_yrwr] corrects
each leaderboard separately (section 4.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError


def yrwr(scores: pd.Series, owner_rankings: Mapping[str, Sequence[str]], intervals=None) -> pd.Series:
    """Corrected scores, same index as ``scores``; never higher than the raw ones.

    Args:
        scores: one number per model (any rater's output), indexed by model.
        owner_rankings: owner -> that owner's models, best first.
        intervals: optional ``(lower, upper)`` Series, or a DataFrame with columns
            ``lower`` and ``upper`` (e.g. ``pairwise.bradley_terry(..., bootstrap=B)``):
            model i is then capped only by models its owner ranked above it whose
            interval meets i's (ua-yrwr).
    """
    scores = _checked_scores(scores)
    lists = _checked_rankings(owner_rankings, scores.index)
    lower, upper = _checked_intervals(intervals, scores.index)
    if lower is None:
        groups = [scores.index.get_indexer(models) for models in lists.values()]
        return pd.Series(running_minimum(scores.to_numpy(), groups), index=scores.index)
    corrected = scores.copy()
    for models in lists.values():
        raw = scores[models].to_numpy()
        lo, hi = lower[models].to_numpy(), upper[models].to_numpy()
        overlap = (lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None])
        above = np.tril(overlap, k=-1)  # above[i, j]: j is listed before i and overlaps it
        corrected[models] = np.minimum(raw, np.where(above, raw[None, :], np.inf).min(axis=1))
    return corrected


def running_minimum(values: np.ndarray, groups) -> np.ndarray:
    """YRWR on arrays: ``values[..., k]`` (any leading axes), each group an index array
    listing one owner's models best first."""
    values = np.array(values, dtype=np.float64)
    for group in groups:
        values[..., group] = np.minimum.accumulate(values[..., group], axis=-1)
    return values


def ranks_by(values: np.ndarray, position: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Ranks (1 = best) along the last axis: by value, then ``position``, then ``noise``."""
    values = np.asarray(values, dtype=np.float64)
    position = np.broadcast_to(position, values.shape)
    order = np.lexsort((np.broadcast_to(noise, values.shape), position, -values), axis=-1)
    ranks = np.empty(values.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, np.arange(1, values.shape[-1] + 1), axis=-1)
    return ranks


def local_yrwr(scores, owner_rankings, leaderboards: Mapping[str, Sequence[str]]) -> dict[str, pd.Series]:
    """local-yrwr: each leaderboard (name -> its models) corrected with only the models it holds.

    An owner's list is cut to the models on the board, so a model off the board never caps
    one on it (Hays et al., Proposition 4.6: truthful at every sample size).

    Args:
        scores: the models' scores, by name.
        owner_rankings: owner -> its models, best first.
        leaderboards: board -> its models.

    Returns:
        Board -> its corrected scores.
    """
    scores = _checked_scores(scores)
    lists = _checked_rankings(owner_rankings, scores.index)
    boards = {}
    for name, members in leaderboards.items():
        members = list(members)
        unknown = sorted(set(members) - set(scores.index))
        if unknown:
            raise MetaEvalError(f"leaderboard {name!r} lists models without scores: {', '.join(map(str, unknown))}")
        on_board = set(members)
        cut = {owner: [m for m in models if m in on_board] for owner, models in lists.items()}
        boards[name] = yrwr(scores[members], {o: m for o, m in cut.items() if m})
    return boards


def owner_order_ranks(scores: pd.Series, owner_rankings: Mapping[str, Sequence[str]], rng=None) -> pd.Series:
    """Ranks (1 = best) by score; equal scores go by position in the owner's list (a
    YRWR-capped copy never passes the model above it), then at random (by ``rng``) or,
    without one, by index order.

    Args:
        scores: the models' scores, by name.
        owner_rankings: owner -> its models, best first.
        rng: the generator that orders the remaining ties.

    Returns:
        The ranks, by name.
    """
    scores = _checked_scores(scores)
    position = np.zeros(len(scores), dtype=np.int64)
    for models in _checked_rankings(owner_rankings, scores.index).values():
        position[scores.index.get_indexer(models)] = np.arange(len(models))
    noise = np.arange(len(scores)) if rng is None else rng.random(len(scores))
    return pd.Series(ranks_by(scores.to_numpy(), position, noise), index=scores.index)


def correct_rating(rating, owner_rankings):
    """A [`Rating`][metaeval.ratings.base.Rating] whose every player's ratings went through `yrwr`.

    Strategy names are the models; each player's ratings are corrected with the owners'
    lists cut to that player's strategies (a task player, say, is left alone).  The raw
    ratings stay in ``diagnostics["uncorrected"]``.
    """
    from metaeval.ratings.base import Rating

    every_name = {n for names in rating.game.strategy_names for n in names}
    lists = _checked_rankings(owner_rankings, every_name)
    corrected = []
    for values, names in zip(rating.ratings, rating.game.strategy_names):
        mine = set(names)
        cut = {owner: [m for m in models if m in mine] for owner, models in lists.items()}
        corrected.append(yrwr(pd.Series(values, index=list(names)), cut).to_numpy())
    diagnostics = {**rating.diagnostics, "correction": "yrwr", "uncorrected": rating.ratings}
    return Rating(rating.method, rating.game, corrected, rating.distribution, diagnostics,
                  tolerance=rating.tolerance)


def _checked_scores(scores) -> pd.Series:
    if not isinstance(scores, pd.Series):
        raise MetaEvalError(f"scores must be a pandas Series indexed by model, got {type(scores).__name__}")
    if scores.index.has_duplicates:
        raise MetaEvalError(f"scores name a model twice: {scores.index[scores.index.duplicated()][0]!r}")
    values = pd.to_numeric(scores, errors="coerce").astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise MetaEvalError(f"scores must be finite numbers; {values.index[~np.isfinite(values)][0]!r} is not")
    return values


def _checked_rankings(owner_rankings, models) -> dict:
    if not isinstance(owner_rankings, Mapping):
        raise MetaEvalError("owner_rankings must map each owner to a list of its models, best first")
    seen, lists = {}, {}
    for owner, ranked in owner_rankings.items():
        if isinstance(ranked, str) or not isinstance(ranked, Sequence):
            raise MetaEvalError(f"owner_rankings[{owner!r}] must be a list of models, best first")
        for model in ranked:
            if model in seen:
                raise MetaEvalError(f"model {model!r} is listed twice (by {seen[model]!r} and {owner!r})")
            seen[model] = owner
        lists[owner] = list(ranked)
    unknown = sorted(set(seen) - set(models), key=str)
    if unknown:
        raise MetaEvalError(f"owner_rankings list models without scores: {', '.join(map(str, unknown))}")
    return lists


def _checked_intervals(intervals, models):
    if intervals is None:
        return None, None
    lower, upper = (intervals["lower"], intervals["upper"]) if isinstance(intervals, pd.DataFrame) else intervals
    lower, upper = (pd.Series(x).reindex(models).astype(np.float64) for x in (lower, upper))
    if lower.isna().any() or upper.isna().any():
        raise MetaEvalError("intervals need a lower and an upper bound for every scored model")
    if (lower > upper).any():
        raise MetaEvalError(f"interval of {lower.index[(lower > upper).to_numpy()][0]!r} has lower > upper")
    return lower, upper
