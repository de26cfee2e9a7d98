"""A bias audit of an arena: who is sampled how often, who tests how many variants, and how
much each owner's published best would lose to a selection-proof score.

An owner that tests many variants and publishes the best scoring one publishes the
luckiest draw: its score is the maximum of several noisy estimates, biased upwards
(the winner's curse of private testing, Singh et al. 2025, "The Leaderboard Illusion").
Two corrections give each owner a score its choice did not select on:

- a held-out split: the battles are split in two at random; the owner picks its best on
  one half (its private testing) and that model is scored on the other;
- You-Rank-We-Rank: the owner's own ranking of its models caps each model's score by
  those ranked above it, so the owner's best is its first-listed model, picked without
  the board's noise.  Declared rankings correct the full-data board; without them each
  owner ranks its models by the first half and the second half's board is corrected.

The audit reports, per owner, the published best's score and rank and what each
correction takes from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError
from metaeval.pairwise.battles import read_battles
from metaeval.pairwise.bradley_terry import bradley_terry
from metaeval.pairwise.yrwr import owner_order_ranks, yrwr


@dataclass(frozen=True)
class Audit:
    """The audit's tables: ``models`` (per model: owner, battles, sampling share, score,
    rank) and ``owners`` (per owner: models, share, best model, its score and rank, and
    the score and rank lost under YRWR and under the held-out split)."""

    models: pd.DataFrame
    owners: pd.DataFrame


def audit(battles, owner_rankings=None, seed: int = 0, **options) -> Audit:
    """Audit a battle table with owner columns.

    Args:
        battles: a battle table (DataFrame or CSV path) with ``owner_a`` and ``owner_b``.
        owner_rankings: owner -> its models, best first, declared before the battles
            (default: by their scores on the first half of the held-out split, and YRWR
            then corrects the second half's scores).
        seed: the seed of the held-out split.
        **options: passed to `pairwise.bradley_terry` for every
            fit (``control``, ``ties``, ``anchor`` ...; no intervals are drawn).

    Returns:
        The audit.
    """
    table = read_battles(battles)
    if not {"owner_a", "owner_b"} <= set(table.columns):
        raise MetaEvalError("the audit needs owner_a and owner_b columns (who produced each model)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MetaEvalError(f"seed must be an int of at least 0, got {seed!r}")
    full = bradley_terry(table, **options)
    owners = full["owner"]
    if owners.isna().any():
        raise MetaEvalError(f"model {owners.index[owners.isna()][0]!r} has no owner")
    half = np.random.default_rng(seed).random(len(table)) < 0.5
    picked_on, scored_on = (_scores(table[rows], full.index, options) for rows in (half, ~half))
    held_ranks = scored_on.rank(ascending=False, method="min")
    board = full["score"]
    if owner_rankings is None:
        by_half = picked_on.sort_values(ascending=False, kind="stable").index
        owner_rankings = {o: [m for m in by_half if owners[m] == o] for o in owners.unique()}
        board = scored_on
    rankings = dict(owner_rankings)
    corrected = yrwr(board, rankings)
    corrected_ranks = owner_order_ranks(corrected, rankings)
    raw_ranks = full["score"].rank(ascending=False, method="min").astype(int)
    appearances = pd.concat([table["model_a"].astype(str), table["model_b"].astype(str)]).value_counts()
    models = pd.DataFrame({
        "owner": owners, "battles": appearances.reindex(full.index).astype(np.int64),
        "share": appearances.reindex(full.index) / appearances.sum(),  # of battle appearances (unweighted)
        "score": full["score"], "rank": raw_ranks,
    })
    rows = []
    for owner, own in models.groupby("owner", sort=True):
        best = own["score"].idxmax()
        listed = [m for m in rankings.get(owner, []) if m in own.index]
        first = listed[0] if listed else best
        picked = picked_on[own.index].idxmax()
        rows.append({
            "owner": owner, "models": len(own), "share": own["share"].sum(), "best": best,
            "score": own.at[best, "score"], "rank": int(own.at[best, "rank"]),
            "yrwr_model": first, "yrwr_loss": own.at[best, "score"] - corrected[first],
            "yrwr_rank_loss": int(corrected_ranks[first]) - int(own.at[best, "rank"]),
            "heldout_model": picked, "heldout_loss": own.at[best, "score"] - scored_on[picked],
            "heldout_rank_loss": int(held_ranks[picked]) - int(own.at[best, "rank"]),
        })
    frame = pd.DataFrame(rows).set_index("owner").sort_values("score", ascending=False, kind="stable")
    return Audit(models.sort_values("score", ascending=False, kind="stable"), frame)


def _scores(half: pd.DataFrame, models, options) -> pd.Series:
    """Scores fitted on one half of the battles, in the full fit's order of models."""
    try:
        scores = bradley_terry(half, **options)["score"]
    except MetaEvalError as exc:
        raise MetaEvalError(f"the held-out split cannot be fitted: {exc}") from None
    missing = [m for m in models if m not in scores.index]
    if missing:
        raise MetaEvalError(f"the held-out split leaves {missing[0]!r} without battles in one half; "
                            "the audit needs more battles per model")
    return scores.reindex(models)
