"""Battles (one row per pairwise comparison) read, checked and counted.

A battle table has columns ``model_a``, ``model_b`` and ``winner`` (``"model_a"``,
``"model_b"`` or ``"tie"``; the arena's ``"tie (bothbad)"`` is a tie too), optionally
``weight`` (a non-negative number per row) and ``owner_a``/``owner_b`` (who produced each
model).  A tie counts half a win for each side, as in the arena's published method.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse import csgraph

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame

WINNERS = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 2}
REQUIRED = ("model_a", "model_b", "winner")
NAME_COLUMNS = ("model_a", "model_b", "winner", "owner_a", "owner_b")
"""Read as text, as written: ``1.10`` is not ``1.1``, ``NA`` is a name; only an empty cell is missing."""


def read_battles(source) -> pd.DataFrame:
    """A checked copy of a battle table given as a DataFrame or a CSV path.

    Args:
        source: the battle table, or the path of its CSV.

    Returns:
        The checked table.
    """
    if isinstance(source, pd.DataFrame):
        table = source.copy()
    else:
        path = Path(source)
        try:
            table = pd.read_csv(path, dtype=dict.fromkeys(NAME_COLUMNS, str),
                                keep_default_na=False, na_values={c: [""] for c in NAME_COLUMNS})
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            raise MetaEvalError(f"cannot read battles from {path}: {exc}") from None
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise MetaEvalError(f"battles need columns {', '.join(REQUIRED)}; missing {', '.join(missing)}")
    if table.empty:
        raise MetaEvalError("battles: the table has no rows")
    for column in ("model_a", "model_b", "winner"):
        if table[column].isna().any():
            row = int(np.flatnonzero(table[column].isna().to_numpy())[0])
            raise MetaEvalError(f"battles: row {row} has no {column}")
    bad = ~table["winner"].isin(list(WINNERS))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise MetaEvalError(
            f"battles: row {row} has winner {table['winner'].iloc[row]!r}; "
            f"expected one of {', '.join(map(repr, WINNERS))}"
        )
    table["model_a"] = table["model_a"].astype(str)
    table["model_b"] = table["model_b"].astype(str)
    self_play = table["model_a"] == table["model_b"]
    if self_play.any():
        row = int(np.flatnonzero(self_play.to_numpy())[0])
        raise MetaEvalError(f"battles: row {row} pits {table['model_a'].iloc[row]!r} against itself")
    if "weight" in table.columns:
        weight = pd.to_numeric(table["weight"], errors="coerce").to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(weight)) or np.any(weight < 0):
            raise MetaEvalError("battles: every weight must be a finite number >= 0")
    return table


@dataclass(frozen=True)
class BattleCounts:
    """Battles aggregated per (model a, model b, outcome, weight) cell.

    Attributes:
        models: model names, sorted.
        a, b, outcome: per cell, the two model indices and 0 (a won), 1 (b won), 2 (tie).
        weight: per cell, the weight of each battle in it.
        count: per cell, how many battles it holds.
        owners: model -> owner, when the table names owners.
    """

    models: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    weight: np.ndarray
    count: np.ndarray
    owners: dict | None = None

    def wins(self, count: np.ndarray | None = None) -> np.ndarray:
        """``wins[..., i, j]``: weighted wins of i over j, a tie half a win each.

        ``count`` replaces the cell counts, with any leading batch axes (bootstrap rounds).
        """
        count = np.asarray(self.count if count is None else count, dtype=np.float64)
        k, cells = len(self.models), len(self.count)
        tie = self.outcome == 2
        winner = np.where(self.outcome == 1, self.b, self.a)
        loser = np.where(self.outcome == 1, self.a, self.b)
        spread = sparse.csr_matrix(
            (
                np.r_[np.where(tie, 0.5, 1.0), np.full(tie.sum(), 0.5)],
                (np.r_[np.arange(cells), np.flatnonzero(tie)], np.r_[winner * k + loser, (loser * k + winner)[tie]]),
            ),
            shape=(cells, k * k),
        )
        mass = (count * self.weight).reshape(-1, cells)
        return np.asarray(spread.T @ mass.T).T.reshape(*count.shape[:-1], k, k)

    def table(self) -> pd.DataFrame:
        """Per unordered pair: wins of the first model, wins of the second, ties (weighted)."""
        rows = {}
        for a, b, o, m in zip(self.a, self.b, self.outcome, self.count * self.weight):
            first, second = (a, b) if a < b else (b, a)
            entry = rows.setdefault((first, second), [0.0, 0.0, 0.0])
            if o == 2:
                entry[2] += m
            else:
                entry[0 if (a if o == 0 else b) == first else 1] += m
        return pd.DataFrame(
            [(self.models[i], self.models[j], *v) for (i, j), v in sorted(rows.items())],
            columns=["model", "opponent", "wins", "losses", "ties"],
        )


def count_battles(battles) -> BattleCounts:
    """Aggregate a battle table (DataFrame or CSV path) into `BattleCounts`.

    Args:
        battles: the battle table, or the path of its CSV.

    Returns:
        The counts.
    """
    table = read_battles(battles)
    both = pd.concat([table["model_a"], table["model_b"]], ignore_index=True)
    codes, names = pd.factorize(both)  # hashing, not Python iteration over a million strings
    order = np.argsort(np.asarray(names, dtype=object))
    relabel = np.empty(len(names), dtype=np.int64)
    relabel[order] = np.arange(len(names))
    models = tuple(str(names[i]) for i in order)
    codes = relabel[codes]
    outcome_codes, outcome_names = pd.factorize(table["winner"])
    outcome = np.array([WINNERS[w] for w in outcome_names], dtype=np.int64)[outcome_codes]
    cells = pd.DataFrame(
        {
            "a": codes[: len(table)],
            "b": codes[len(table) :],
            "outcome": outcome,
            "weight": table["weight"].to_numpy(dtype=np.float64) if "weight" in table else 1.0,
        }
    )
    grouped = cells.groupby(["a", "b", "outcome", "weight"], sort=True).size().reset_index(name="count")
    return BattleCounts(
        models=models,
        a=grouped["a"].to_numpy(dtype=np.int64),
        b=grouped["b"].to_numpy(dtype=np.int64),
        outcome=grouped["outcome"].to_numpy(dtype=np.int64),
        weight=grouped["weight"].to_numpy(dtype=np.float64),
        count=grouped["count"].to_numpy(dtype=np.float64),
        owners=_owners(table),
    )


def _owners(table: pd.DataFrame) -> dict | None:
    if not {"owner_a", "owner_b"} <= set(table.columns):
        return None
    pairs = pd.concat(
        [
            table[["model_a", "owner_a"]].set_axis(["model", "owner"], axis=1),
            table[["model_b", "owner_b"]].set_axis(["model", "owner"], axis=1),
        ]
    ).dropna().drop_duplicates()
    clash = pairs["model"].duplicated(keep=False)
    if clash.any():
        model = pairs["model"][clash].iloc[0]
        owners = sorted(map(str, pairs["owner"][pairs["model"] == model]))
        raise MetaEvalError(f"battles: model {model!r} has several owners: {', '.join(owners)}")
    return {str(m): str(o) for m, o in zip(pairs["model"], pairs["owner"])}


def components(wins: np.ndarray, models) -> list[list[str]]:
    """Strongly connected components of the "has beaten (or tied)" graph, largest first.

    Bradley-Terry scores are finite only when there is one: a model that never lost, or a
    group never beaten by the rest, would be pushed to infinity.

    Args:
        wins: the (weighted) wins ``[n, n]``.
        models: the models' names.

    Returns:
        The components, each a list of names.
    """
    _, labels = csgraph.connected_components(wins > 0, directed=True, connection="strong")
    groups = [[models[i] for i in np.flatnonzero(labels == c)] for c in np.unique(labels)]
    return sorted(groups, key=lambda g: (-len(g), g))


def to_metagame(battles) -> MetaGame:
    """The symmetric 2-player game of empirical win probabilities (a tie is half a win).

    ``payoffs[0][i, j]`` is i's win rate against j (0.5 for pairs never compared, with
    count 0), ``counts[i, j]`` half the (weighted) battles between i and j, so that the
    ``elo`` rater refits exactly these battles, and ``stderr`` the binomial standard error.

    Args:
        battles: a battle table, the path of its CSV, or its counts.

    Returns:
        The game.
    """
    counts = battles if isinstance(battles, BattleCounts) else count_battles(battles)
    return game_from_wins(counts.wins(), counts.models)


def game_from_wins(wins: np.ndarray, models) -> MetaGame:
    """[`to_metagame`][metaeval.pairwise.to_metagame] of a win matrix ``wins[i, j]`` (i's wins over j) with model names."""
    games = wins + wins.T
    rate = np.divide(wins, games, out=np.full_like(wins, 0.5), where=games > 0)
    np.fill_diagonal(rate, 0.5)
    stderr = np.sqrt(np.divide(rate * (1 - rate), games, out=np.zeros_like(rate), where=games > 0))
    names = [list(models)] * 2
    return MetaGame(
        np.stack([rate, rate.T]), strategy_names=names, player_names=["model", "opponent"],
        counts=games / 2, stderr=np.stack([stderr, stderr.T]),
    )
