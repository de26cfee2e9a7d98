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
    table["model_a"], table["model_b"] = _names(table["model_a"], table["model_b"])
    self_play = table["model_a"] == table["model_b"]
    if self_play.any():
        row = int(np.flatnonzero(self_play.to_numpy())[0])
        raise MetaEvalError(f"battles: row {row} pits {table['model_a'].iloc[row]!r} against itself")
    if "weight" in table.columns:
        weight = pd.to_numeric(table["weight"], errors="coerce").to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(weight)) or np.any(weight < 0):
            raise MetaEvalError("battles: every weight must be a finite number >= 0")
    return table


def _names(first: pd.Series, second: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The two model columns as text; two categorical columns become categoricals over one
    shared set of text categories (relabelling their codes, not converting ten million values)."""
    if not (isinstance(first.dtype, pd.CategoricalDtype) and isinstance(second.dtype, pd.CategoricalDtype)):
        return first.astype(str), second.astype(str)
    labels = [[str(c) for c in column.cat.categories] for column in (first, second)]
    shared = sorted(set(labels[0]) | set(labels[1]))
    position = {name: i for i, name in enumerate(shared)}
    return tuple(
        pd.Series(pd.Categorical.from_codes(np.array([position[n] for n in names], dtype=np.int64)[column.cat.codes],
                                            shared), index=column.index, name=column.name)
        for column, names in zip((first, second), labels)
    )


@dataclass(frozen=True)
class BattleCounts:
    """Battles aggregated per (model a, model b, outcome, weight) cell.

    Attributes:
        models: model names, sorted.
        a, b, outcome: per cell, the two model indices and 0 (a won), 1 (b won), 2 (tie).
        weight: per cell, the weight of each battle in it.
        count: per cell, how many battles it holds.
        owners: model -> owner, when the table names owners.
        covariates: per cell, the covariates named in ``control`` (``[cells, len(control)]``), or None.
        control: the covariates' names.
    """

    models: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    weight: np.ndarray
    count: np.ndarray
    owners: dict | None = None
    covariates: np.ndarray | None = None
    control: tuple[str, ...] = ()

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


def count_battles(battles, control=None, normalise: bool = True) -> BattleCounts:
    """Aggregate a battle table (DataFrame or CSV path) into `BattleCounts`.

    Battles alike in models, outcome, weight and covariates share one cell, so ten
    million battles among 130 models without covariates fit in a few tens of thousands
    of cells.

    Args:
        battles: the battle table, or the path of its CSV.
        control: names of the covariates (see `covariates`), or None.
        normalise: standardise each covariate (mean 0, standard deviation 1 over the battles).

    Returns:
        The counts.
    """
    table = read_battles(battles)
    control = tuple(control or ())
    codes_a, names_a = pd.factorize(table["model_a"])  # per column: categorical codes are reused
    codes_b, names_b = pd.factorize(table["model_b"])
    models = tuple(sorted(set(map(str, names_a)) | set(map(str, names_b))))
    position = {name: i for i, name in enumerate(models)}
    a = np.array([position[str(n)] for n in names_a], dtype=np.int64)[codes_a]
    b = np.array([position[str(n)] for n in names_b], dtype=np.int64)[codes_b]
    outcome_codes, outcome_names = pd.factorize(table["winner"])
    outcome = np.array([WINNERS[w] for w in outcome_names], dtype=np.int64)[outcome_codes]
    k = len(models)
    x = covariates(table, control, normalise) if control else np.empty((len(table), 0))
    if "weight" not in table and not control:  # the common case: one bincount, no sort
        key = (a * k + b) * 3 + outcome
        number = np.bincount(key, minlength=k * k * 3)
        cells = np.flatnonzero(number)
        return BattleCounts(
            models=models, a=cells // (3 * k), b=cells // 3 % k, outcome=cells % 3,
            weight=np.ones(len(cells)), count=number[cells].astype(np.float64), owners=_owners(table),
        )
    frame = pd.DataFrame(
        {"a": a, "b": b, "outcome": outcome,
         "weight": table["weight"].to_numpy(dtype=np.float64) if "weight" in table else 1.0,
         **{f"x{j}": x[:, j] for j in range(x.shape[1])}}
    )
    grouped = frame.groupby(list(frame.columns), sort=True).size().reset_index(name="count")
    return BattleCounts(
        models=models,
        a=grouped["a"].to_numpy(dtype=np.int64),
        b=grouped["b"].to_numpy(dtype=np.int64),
        outcome=grouped["outcome"].to_numpy(dtype=np.int64),
        weight=grouped["weight"].to_numpy(dtype=np.float64),
        count=grouped["count"].to_numpy(dtype=np.float64),
        owners=_owners(table),
        covariates=grouped[[f"x{j}" for j in range(x.shape[1])]].to_numpy(dtype=np.float64) if control else None,
        control=control,
    )


def inverse_propensity(battles, floor: float = 50.0) -> np.ndarray:
    """Per battle, the inverse of how often its pair of models met (at least ``floor``),
    scaled to mean 1: the arena's reweighting of unevenly sampled pairs, so that every
    pair counts about as much as any other with at least ``floor`` battles.

    Args:
        battles: the battle table, or the path of its CSV.
        floor: the smallest pair count divided by (pairs met fewer times are not inflated).

    Returns:
        The weights, one per battle, in the table's order.
    """
    if not (np.isfinite(floor) and floor > 0):
        raise MetaEvalError(f"floor must be a finite number > 0, got {floor}")
    table = read_battles(battles)
    first = np.minimum(table["model_a"].astype(str), table["model_b"].astype(str))
    second = np.maximum(table["model_a"].astype(str), table["model_b"].astype(str))
    pair, _ = pd.factorize(pd.MultiIndex.from_arrays([first, second]))
    weight = 1.0 / np.maximum(np.bincount(pair)[pair], floor)
    return weight / weight.mean()


def covariates(table: pd.DataFrame, control, normalise: bool = True) -> np.ndarray:
    """The covariates of every battle, ``[battles, len(control)]``.

    A name is a numeric column of the table (a's response relative to b's, such as a
    length difference), or, when the table has ``name_a`` and ``name_b`` instead, the
    arena's normalised difference ``(name_a - name_b) / (name_a + name_b)`` (0 when both
    are 0). ``normalise`` standardises each to mean 0 and standard deviation 1 (a constant
    column is only centred).

    Args:
        table: the battles.
        control: the covariates' names.
        normalise: whether to standardise them.

    Returns:
        The covariates.
    """
    columns = []
    for name in control:
        if name in table:
            values = pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64)
        elif f"{name}_a" in table and f"{name}_b" in table:
            first, second = (pd.to_numeric(table[f"{name}_{s}"], errors="coerce").to_numpy(dtype=np.float64)
                             for s in "ab")
            total = first + second
            values = np.divide(first - second, total, out=np.where(np.isnan(total), np.nan, 0.0), where=total != 0)
        else:
            raise MetaEvalError(f"battles: no covariate column {name!r} (nor {name}_a and {name}_b)")
        if not np.all(np.isfinite(values)):
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise MetaEvalError(f"battles: covariate {name!r} is not a finite number in row {row}")
        if normalise:
            spread = values.std()
            values = (values - values.mean()) / (spread if spread > 0 else 1.0)
        columns.append(values)
    if len(set(control)) < len(control):
        raise MetaEvalError(f"control names a covariate twice: {', '.join(control)}")
    return np.stack(columns, axis=1)


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
