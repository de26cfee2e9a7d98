"""Exact or sampled: which meta-game a game gets, and what sampled mode refuses.

``mode="auto"`` is exact mode for a game that can be enumerated (exact entries, the
full-game CCE gap, best responses) and sampled mode, announced in one line, for a game
exact mode refuses (too large for the memory budget, imperfect recall, ...). Sampled mode
never builds the game tree, so the operations that walk it refuse there.
"""

from __future__ import annotations

import functools
import re

from metaeval import games
from metaeval.runs import budget
from metaeval.runs import rundir
from metaeval.errors import MetaEvalError
from metaeval.spiel.tree import game_tree

MODES = ("auto", "exact", "sampled")


def resolve_mode(game, mode: str) -> str:
    """``"exact"`` or ``"sampled"``: ``mode`` itself, or for ``"auto"`` whichever the game allows.

    Args:
        game: the game.
        mode: ``"exact"``, ``"sampled"`` or ``"auto"``.

    Returns:
        The mode.
    """
    if mode not in MODES:
        raise MetaEvalError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        return mode
    return _auto(str(games.load(game)), budget.max_memory())


@functools.lru_cache(maxsize=64)
def _auto(game_string: str, max_memory: int) -> str:
    """The mode for ``auto`` (cached, so the line is said once per game and budget)."""
    try:
        game_tree(game_string)
    except MetaEvalError as exc:
        reason = re.split(r"; (?:exact|raise)", str(exc))[0]  # without the advice to exact-mode users
        rundir.log.warning(f"metaeval: exact mode refuses {game_string} ({reason}); using sampled mode")
        return "sampled"
    return "exact"


def describe(mode: str, episodes: int) -> str:
    """How a meta-game's entries were obtained, for run directories, logs and plots."""
    return "exact" if mode == "exact" else f"sampled, {episodes} episodes per entry"


def tree_refusal(what: str) -> MetaEvalError:
    """The error of an operation that needs the game tree, asked for in sampled mode."""
    return MetaEvalError(
        f"{what} walks the game tree, which sampled mode never builds: use mode='exact' (for a game that "
        "can be enumerated), or learned responses (Evaluator.approximate_gap, oracles.learned)"
    )
