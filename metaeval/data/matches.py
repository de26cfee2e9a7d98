"""Match logs with any number of players as an N-player meta-game.

One row per game, as OpenSpiel's ``heuristic_payoff_table.from_match_results`` reads them:
a column of agent-name tuples (one per player role, in seat order) and a column of score
tuples (each role's return).  Role p's strategies are the agents seen in seat p; the
payoff of a joint profile is the mean return over its games, with the number of games as
its count and the standard error of the mean per player, so every game-theoretic rater,
and per-role rankings (``Rating.to_frame``), apply to logs from any league.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame


def match_results(matches: pd.DataFrame, agents: str = "agents", scores: str = "scores",
                  roles=None, fill: float | None = None) -> MetaGame:
    """The meta-game of a match log.

    Args:
        matches: one row per game with ``agents`` and ``scores`` tuples of equal length N.
        roles: N player names (default ``"role 0"``, ...).
        fill: payoff of joint profiles never played (count 0); without it an unplayed
            profile is an error, since the game-theoretic raters need every entry.

    Standard errors are ``std / sqrt(n)`` (ddof 1) and 0 for profiles played once.
    """
    missing = [c for c in (agents, scores) if c not in matches.columns]
    if missing:
        raise MetaEvalError(f"match log needs columns {agents!r} and {scores!r}; missing {', '.join(missing)}")
    if matches.empty:
        raise MetaEvalError("match log has no rows")
    seats = [tuple(map(str, a)) for a in matches[agents]]
    try:
        returns = np.array([np.asarray(s, dtype=np.float64) for s in matches[scores]])
    except ValueError as exc:
        raise MetaEvalError(f"match log scores must be numbers, one per player: {exc}") from None
    n = len(seats[0])
    for row, (a, s) in enumerate(zip(seats, returns)):
        if len(a) != n or s.shape != (n,):
            raise MetaEvalError(f"match log row {row}: expected {n} agents and {n} scores")
    if not np.all(np.isfinite(returns)):
        raise MetaEvalError("match log scores must be finite")
    names = [sorted({a[p] for a in seats}) for p in range(n)]
    index = np.array([[names[p].index(a[p]) for p in range(n)] for a in seats])
    shape = tuple(len(x) for x in names)
    flat = np.ravel_multi_index(index.T, shape)
    size = int(np.prod(shape))
    counts = np.bincount(flat, minlength=size).astype(np.float64)
    totals = np.stack([np.bincount(flat, weights=returns[:, p], minlength=size) for p in range(n)])
    squares = np.stack([np.bincount(flat, weights=returns[:, p] ** 2, minlength=size) for p in range(n)])
    played = counts > 0
    if not played.all() and fill is None:
        first = np.unravel_index(np.flatnonzero(~played)[0], shape)
        example = ", ".join(names[p][i] for p, i in enumerate(first))
        raise MetaEvalError(
            f"match log leaves {(~played).sum()} of {size} joint profiles unplayed (e.g. {example}); "
            "play them, or pass fill= to give them a payoff"
        )
    safe = np.maximum(counts, 1)
    means = np.where(played, totals / safe, 0.0 if fill is None else fill)
    variance = np.where(counts > 1, (squares - counts * means**2) / np.maximum(counts - 1, 1), 0.0)
    stderr = np.sqrt(np.maximum(variance, 0.0) / safe)
    return MetaGame(
        means.reshape(n, *shape), strategy_names=names,
        player_names=roles if roles is not None else [f"role {p}" for p in range(n)],
        counts=counts.reshape(shape), stderr=stderr.reshape(n, *shape),
    )
