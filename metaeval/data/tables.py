"""Score tables (agents x tasks) as games (SPEC 6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame


def read_scores(path) -> pd.DataFrame:
    """A CSV whose first column names the agents and whose other columns are tasks."""
    path = Path(path)
    try:
        table = pd.read_csv(path, index_col=0)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise MetaEvalError(f"cannot read a score table from {path}: {exc}") from None
    if table.empty or table.shape[1] == 0:
        raise MetaEvalError(f"{path} needs agent names in the first column and at least one task column")
    non_numeric = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    if non_numeric:
        raise MetaEvalError(f"{path}: task columns must be numeric; not numeric: {', '.join(map(str, non_numeric))}")
    if table.isna().any().any():
        raise MetaEvalError(f"{path} has missing scores; fill or drop them first")
    return table


def normalise(scores: np.ndarray) -> np.ndarray:
    """Min-max normalise each task (column) to [0, 1] over agents; constant tasks become 0."""
    low, high = scores.min(axis=0), scores.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return (scores - low) / span


def agent_vs_task(table: pd.DataFrame, normalised: bool = True) -> MetaGame:
    """2-player zero-sum game: the agent earns its (normalised) score, the task its negation.

    Balduzzi et al. (2018), as in SPEC section 6.
    """
    scores = table.to_numpy(dtype=np.float64)
    if normalised:
        scores = normalise(scores)
    return MetaGame.from_matrix(
        scores,
        strategy_names=[[str(a) for a in table.index], [str(t) for t in table.columns]],
        player_names=["agent", "task"],
    )
