"""Evaluation data as games (maths, section 6): agent vs task, agent vs agent vs task, king of the hill.

Player 0 is always the rated model (the agent, agent A, the king); the task or prompt
player is last.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from metaeval.runs import budget
from metaeval.data.tables import complete, normalise as normalise_table
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame


def _prepared(table, normalise, missing, stderr):
    """Complete, normalised scores [M, T] and their standard errors (or None)."""
    table, stderr = complete(table, missing, stderr)
    scores, scale = normalise_table(table, normalise)
    if stderr is None:
        return table, scores.to_numpy(), None
    if normalise == "rank":
        raise MetaEvalError("standard errors cannot be carried through rank normalisation; use minmax or none")
    errors = (stderr * scale).to_numpy(dtype=np.float64)
    return table, scores.to_numpy(), np.nan_to_num(errors, nan=0.0)


def agent_vs_task(table: pd.DataFrame, normalise: str = "minmax", missing: str = "error",
                  stderr: pd.DataFrame | None = None) -> MetaGame:
    """2-player zero-sum game: the agent earns its normalised score, the task its negation
    (Balduzzi et al. 2018; maths, section 6).

    Args:
        table: agents as rows, tasks as columns (NaN for a missing score).
        normalise: per task, ``"minmax"`` (default), ``"rank"`` or ``"none"``.
        missing: ``"error"``, ``"drop_tasks"`` or ``"drop_agents"`` (see ``tables.complete``).
        stderr: optional table of per-score standard errors, same labels; rescaled with
            the scores and stored as the game's ``stderr`` (NaN entries become 0).

    Returns:
        The game, players ``agent`` and ``task``.
    """
    table, scores, errors = _prepared(table, normalise, missing, stderr)
    return MetaGame(
        np.stack([scores, -scores]),
        strategy_names=[list(table.index), list(table.columns)],
        player_names=["agent", "task"],
        stderr=None if errors is None else np.stack([errors, errors]),
    )


def agent_vs_agent_vs_task(table: pd.DataFrame, normalise: str = "minmax", missing: str = "error",
                           stderr: pd.DataFrame | None = None) -> MetaGame:
    """3-player general-sum game of the maths page (section 6), players (agent A, agent B, task):

        G_A(m_A, m_B, t) = T(m_A, t) - T(m_B, t),   G_B = -G_A,   G_T = |G_A|.

    The ratings of player 0 are the model ratings. Arguments as ``agent_vs_task``; with
    ``stderr`` the entries' standard errors are sqrt(s(m_A, t)^2 + s(m_B, t)^2) for every
    player (independent scores; the same bound is used for |G_A|).

    Args:
        table: as in [`agent_vs_task`][metaeval.data.agent_vs_task].
        normalise: as in [`agent_vs_task`][metaeval.data.agent_vs_task].
        missing: as in [`agent_vs_task`][metaeval.data.agent_vs_task].
        stderr: as in [`agent_vs_task`][metaeval.data.agent_vs_task].

    Returns:
        The game.
    """
    table, scores, errors = _prepared(table, normalise, missing, stderr)
    agents, tasks = scores.shape
    # The difference, the three payoff tensors and MetaGame's copy of them (twice with stderr).
    budget.check_joints([agents, agents, tasks], 4 if errors is None else 8, "the agent-vs-agent-vs-task game",
                        "agents x agents x tasks")
    with np.errstate(over="ignore"):
        difference = scores[:, None, :] - scores[None, :, :]
    if not np.isfinite(difference).all():
        raise MetaEvalError("differences of the scores overflow (largest |score| "
                            f"{np.abs(scores).max():.3g}); divide the table by a large number, or normalise it")
    payoffs = np.stack([difference, -difference, np.abs(difference)])
    combined = None
    if errors is not None:
        combined = np.sqrt(errors[:, None, :] ** 2 + errors[None, :, :] ** 2)
        combined = np.stack([combined] * 3)
    agents = list(table.index)
    return MetaGame(payoffs, strategy_names=[agents, agents, list(table.columns)],
                    player_names=["agent A", "agent B", "task"], stderr=combined)


WINNER_SCORES = {"model_a": 1.0, "model_b": -1.0, "tie": 0.0, "tie (bothbad)": 0.0}


def king_of_the_hill(judgements: pd.DataFrame) -> MetaGame:
    """The king-of-the-hill game of Liu et al. (2025, section 3), players (king, rebel, prompt).

    ``judgements`` has one row per judgement with columns ``prompt``, ``model_a``,
    ``model_b`` and either ``score`` (the judge's preference for model_a's answer over
    model_b's, in [-1, 1]) or ``winner`` (``"model_a"``, ``"model_b"``, ``"tie"`` or
    ``"tie (bothbad)"``, as in Chatbot Arena exports). Repeated judgements of a pair on a
    prompt are averaged; a judgement of (a, b) counts for (b, a) with the opposite sign.

        u_king(p, k, r) = mean preference for k over r on p  (0 when k = r),
        u_rebel = -u_king, except u_rebel(p, k, k) = -1,
        u_prompt = |u_king|.

    Every prompt needs a judgement of every pair of distinct models. The king's ratings
    are the model ratings.

    Args:
        judgements: the judgements, one per row.

    Returns:
        The game.
    """
    if not isinstance(judgements, pd.DataFrame):
        raise MetaEvalError(f"judgements must be a pandas DataFrame, got {type(judgements).__name__}")
    needed = {"prompt", "model_a", "model_b"}
    if not needed <= set(judgements.columns) or not ({"score", "winner"} & set(judgements.columns)):
        raise MetaEvalError(
            "judgements need columns prompt, model_a, model_b and score or winner; "
            f"got {', '.join(map(str, judgements.columns))}"
        )
    if judgements.empty:
        raise MetaEvalError("judgements are empty")
    if "score" in judgements.columns:
        score = pd.to_numeric(judgements["score"], errors="coerce")
        if score.isna().any() or (score.abs() > 1).any():
            raise MetaEvalError("judgement scores must be numbers in [-1, 1]")
    else:
        score = judgements["winner"].map(WINNER_SCORES)
        if score.isna().any():
            bad = judgements["winner"][score.isna()].iloc[0]
            raise MetaEvalError(f"unknown winner {bad!r}; expected one of {', '.join(WINNER_SCORES)}")
    a, b = judgements["model_a"].astype(str), judgements["model_b"].astype(str)
    if (a == b).any():
        raise MetaEvalError(f"a judgement compares model {a[a == b].iloc[0]!r} with itself")
    prompts = list(pd.unique(judgements["prompt"].astype(str)))
    models = sorted(set(a) | set(b))
    both = pd.DataFrame({
        "prompt": pd.concat([judgements["prompt"].astype(str)] * 2, ignore_index=True),
        "king": pd.concat([a, b], ignore_index=True),
        "rebel": pd.concat([b, a], ignore_index=True),
        "score": pd.concat([score, -score], ignore_index=True).astype(np.float64),
    })
    budget.check_joints([len(prompts), len(models), len(models)], 5, "the king-of-the-hill game",
                        "prompts x models x models")
    mean = both.groupby(["prompt", "king", "rebel"])["score"].mean()
    index = pd.MultiIndex.from_product([prompts, models, models], names=["prompt", "king", "rebel"])
    u = mean.reindex(index).to_numpy(copy=True).reshape(len(prompts), len(models), len(models))
    diagonal = np.eye(len(models), dtype=bool)
    u[:, diagonal] = 0.0
    if np.isnan(u).any():
        p, k, r = np.argwhere(np.isnan(u))[0]
        raise MetaEvalError(f"no judgement of {models[k]!r} against {models[r]!r} on prompt {prompts[p]!r}")
    return king_of_the_hill_game(np.moveaxis(u, 0, -1), models, prompts)


def king_of_the_hill_game(preferences: np.ndarray, models=None, prompts=None) -> MetaGame:
    """The king-of-the-hill game from the judge's preferences ``[king, rebel, prompt]``
    (antisymmetric in king and rebel, 0 when they are the same model; Liu et al. 2025,
    section 3): u_king = preferences, u_rebel = -u_king except -1 on the diagonal,
    u_prompt = |u_king|. Names default to ``m0, m1, ...`` and ``p0, p1, ...``."""
    king = np.asarray(preferences, dtype=np.float64)
    if king.ndim != 3 or king.shape[0] != king.shape[1]:
        raise MetaEvalError(f"preferences must have shape [models, models, prompts], got {king.shape}")
    budget.check_joints(king.shape, 5, "the king-of-the-hill game", "models x models x prompts")
    diagonal = np.eye(king.shape[0], dtype=bool)[:, :, None]
    rebel = np.where(diagonal, -1.0, -king)
    models = [f"m{i}" for i in range(king.shape[0])] if models is None else models
    prompts = [f"p{i}" for i in range(king.shape[2])] if prompts is None else prompts
    return MetaGame(np.stack([king, rebel, np.abs(king)]), strategy_names=[models, models, prompts],
                    player_names=["king", "rebel", "prompt"])
