"""Score tables: agents as rows, tasks as columns, read from CSV or pandas (maths, section 6).

A table is a pandas DataFrame of floats indexed by agent name with one column per task.
Missing cells are NaN; the game builders refuse them unless told how to drop them
(``missing="drop_tasks"`` or ``"drop_agents"``), and preference profiles leave an agent
out of the votes of the tasks it was not evaluated on.

Published tables ship with the package (``load_table(name)``), first line the source.
"""

from __future__ import annotations

import csv
import io
import itertools
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError

NORMALISATIONS = ("minmax", "none", "rank")
MISSING = ("error", "drop_tasks", "drop_agents")


def _read_csv(path, names: str | list[str]) -> pd.DataFrame:
    """A CSV whose leading lines starting with '#' (the source line) are comments.

    Elsewhere '#' is data, and the ``names`` columns (header names, or ``"first"`` for the
    first column, which becomes the index) are read as text as written (``1.10`` is not
    ``1.1``). The header is read here, not by pandas, which would rename a repeated name
    ``t1`` to ``t1.1``; repeated names are refused.
    """
    try:
        lines = Path(path).read_text().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise MetaEvalError(f"cannot read a score table from {path}: {exc}") from None
    body = list(itertools.dropwhile(lambda line: line.startswith("#"), lines))
    if not body:
        raise MetaEvalError(f"cannot read a score table from {path}: it has no header line")
    header = next(csv.reader([body[0].rstrip("\r\n")], skipinitialspace=True))
    named = header[1:] if names == "first" else header
    _refuse_repeated(named, f"{path}: repeated names in the header")
    text = [header[0]] if names == "first" else [name for name in names if name in header]
    rows = "".join(body[1:])
    try:
        table = pd.read_csv(io.StringIO(rows), header=None, names=header, skipinitialspace=True)
        # Names once more, as text: only an empty cell is missing ("NA" is a name).
        table[text] = pd.read_csv(io.StringIO(rows), header=None, names=header, skipinitialspace=True,
                                  dtype=str, keep_default_na=False, na_values=[""])[text]
    except (ValueError, pd.errors.ParserError) as exc:
        raise MetaEvalError(f"cannot read a score table from {path}: {exc}") from None
    if names != "first":
        return table
    _refuse_repeated(table[header[0]].dropna().tolist(), f"{path}: repeated names in the first column")
    return table.set_index(header[0])


def _refuse_repeated(names: list[str], what: str) -> None:
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise MetaEvalError(f"{what}: {', '.join(repeated)}")


def check_table(table: pd.DataFrame, what: str = "score table") -> pd.DataFrame:
    """``table`` as floats with string agent and task names, or a MetaEvalError naming the problem."""
    if not isinstance(table, pd.DataFrame):
        raise MetaEvalError(f"a {what} must be a pandas DataFrame, got {type(table).__name__}")
    if table.shape[0] == 0 or table.shape[1] == 0:
        raise MetaEvalError(f"the {what} needs at least one agent (row) and one task (column)")
    non_numeric = [str(c) for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    if non_numeric:
        raise MetaEvalError(f"{what}: task columns must be numeric; not numeric: {', '.join(non_numeric)}")
    table = table.astype(np.float64)
    table.index = table.index.map(str)
    table.columns = table.columns.map(str)
    for axis, names in (("agent", table.index), ("task", table.columns)):
        duplicated = sorted(set(names[names.duplicated()]))
        if duplicated:
            raise MetaEvalError(f"{what}: repeated {axis} names: {', '.join(duplicated)}")
    if np.isinf(table.to_numpy()).any():
        raise MetaEvalError(f"{what}: scores must be finite or missing (NaN), not infinite")
    return table


def read_scores(path, agents: str = "rows") -> pd.DataFrame:
    """A wide CSV: the first column names the rows, the header names the columns.

    ``agents="rows"`` (agents down, tasks across) or ``"columns"`` (tasks down, as in
    published Atari tables); the result always has agents as rows. Empty cells are NaN.

    Args:
        path: the CSV file.
        agents: ``"rows"`` or ``"columns"``.

    Returns:
        The score table, agents as rows.
    """
    if agents not in ("rows", "columns"):
        raise MetaEvalError(f"agents must be 'rows' or 'columns', got {agents!r}")
    table = _read_csv(path, "first")
    if table.shape[1] == 0:
        raise MetaEvalError(f"{path} needs names in the first column and at least one more column")
    table = check_table(table, what=str(path))
    return table.T if agents == "columns" else table


def from_long(frame: pd.DataFrame, agent="agent", task="game", score="score",
              spread: str | None = "std") -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """A long table (one row per agent and task) as the wide score table and, when the
    ``spread`` column exists, the matching wide table of spreads (NaN where none is given).

    Rows and columns keep their order of first appearance.

    Args:
        frame: the long table.
        agent: the column naming the agent.
        task: the column naming the task.
        score: the column of scores.
        spread: the column of spreads (None: no spreads).

    Returns:
        The wide score table and the wide table of spreads (or None).
    """
    missing = [c for c in (agent, task, score) if c not in frame.columns]
    if missing:
        raise MetaEvalError(f"long table has no column(s) {', '.join(missing)}; it has {', '.join(frame.columns)}")
    repeated = frame.duplicated([agent, task])
    if repeated.any():
        first = frame[repeated].iloc[0]
        raise MetaEvalError(f"long table has more than one score for agent {first[agent]!r} on task {first[task]!r}")
    agents = pd.unique(frame[agent].astype(str))
    tasks = pd.unique(frame[task].astype(str))

    def wide(column):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() & frame[column].notna()
        if bad.any():
            raise MetaEvalError(f"long table column {column!r} is not numeric: {frame[column][bad].iloc[0]!r}")
        table = pd.DataFrame({"a": frame[agent].astype(str), "t": frame[task].astype(str), "v": values})
        return table.pivot(index="a", columns="t", values="v").reindex(index=agents, columns=tasks).rename_axis(index=None, columns=None)

    scores = check_table(wide(score))
    spreads = None
    if spread is not None and spread in frame.columns:
        spreads = wide(spread)
        if (spreads < 0).any().any():
            raise MetaEvalError(f"long table column {spread!r} has negative spreads")
    return scores, spreads


def read_long(path, **columns) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``from_long`` on a CSV file (agent and task names read as text).

    Args:
        path: the CSV file.
        **columns: the column names, as [`from_long`][metaeval.data.from_long] takes them.

    Returns:
        As [`from_long`][metaeval.data.from_long].
    """
    names = [columns.get("agent", "agent"), columns.get("task", "game")]
    return from_long(_read_csv(path, names), **columns)


PUBLISHED = {
    "atari_rainbow_table6": ("wide", "columns"),
    "atari_agent57": ("long", None),
}


def load_table(name: str, spread: bool = False):
    """A published table shipped with metaeval, agents as rows.

    ``atari_rainbow_table6``: Hessel et al. (2017), Table 6, 8 agents x 54 games.
    ``atari_agent57``: Badia et al. (2020), Section H.4, human, random and 6 agents x 57
    games. With ``spread=True`` returns ``(scores, spreads)``; the spreads are the
    published standard deviations (NaN where none is given, and for tables without any).

    Args:
        name: the table's name.
        spread: also return the spreads.

    Returns:
        The scores, or ``(scores, spreads)``.
    """
    if name not in PUBLISHED:
        raise MetaEvalError(f"no published table {name!r}; choose one of {', '.join(PUBLISHED)}")
    shape, agents = PUBLISHED[name]
    path = resources.files("metaeval.data") / "published" / f"{name}.csv"
    with resources.as_file(path) as file:
        if shape == "wide":
            scores, spreads = read_scores(file, agents=agents), None
        else:
            scores, spreads = read_long(file)
    if not spread:
        return scores
    return scores, (spreads if spreads is not None else scores * np.nan)


def source_line(name: str) -> str:
    """The citation on the first line of a published table.

    Args:
        name: the table's name.

    Returns:
        The citation.
    """
    if name not in PUBLISHED:
        raise MetaEvalError(f"no published table {name!r}; choose one of {', '.join(PUBLISHED)}")
    text = (resources.files("metaeval.data") / "published" / f"{name}.csv").read_text()
    return text.splitlines()[0].lstrip("# ").strip()


def complete(table: pd.DataFrame, missing: str = "error", spreads: pd.DataFrame | None = None):
    """The table (and spreads) without missing scores, by the rule ``missing``:
    ``"error"`` refuses them, ``"drop_tasks"`` drops every task with a missing score,
    ``"drop_agents"`` every agent with one.

    Args:
        table: the score table, agents as rows.
        missing: ``"error"``, ``"drop_tasks"`` or ``"drop_agents"``.
        spreads: a table of spreads with the same labels, cut alike.

    Returns:
        The complete table, and the spreads (or None).
    """
    table = check_table(table)
    if missing not in MISSING:
        raise MetaEvalError(f"missing must be one of {', '.join(MISSING)}, got {missing!r}")
    holes = table.isna()
    if holes.any().any():
        if missing == "error":
            agent, task = holes.stack()[lambda s: s].index[0]
            raise MetaEvalError(
                f"the score table has {int(holes.to_numpy().sum())} missing score(s), e.g. agent "
                f"{agent!r} on task {task!r}; pass missing='drop_tasks' or 'drop_agents', or fill them"
            )
        keep = ~holes.any(axis=0) if missing == "drop_tasks" else ~holes.any(axis=1)
        table = table.loc[:, keep] if missing == "drop_tasks" else table.loc[keep]
        if table.empty:
            raise MetaEvalError(f"missing={missing!r} leaves no {'task' if missing == 'drop_tasks' else 'agent'}")
    if spreads is not None:
        spreads = spreads.reindex(index=table.index, columns=table.columns)
    return table, spreads


def normalise(table: pd.DataFrame, how: str = "minmax") -> tuple[pd.DataFrame, pd.Series]:
    """Per-task normalisation of a complete table, and each task's scale factor.

    ``minmax``: (score - min) / (max - min) over agents, in [0, 1]; a constant task
    becomes 0 (Balduzzi et al. 2018). ``rank``: (average rank - 1) / (agents - 1), 0 for
    the lowest score, ties sharing their average rank. ``none``: raw scores.
    The scale (1 / span for minmax, 1 for none, NaN for rank) rescales standard errors.

    Args:
        table: a complete score table, agents as rows.
        how: ``"minmax"``, ``"rank"`` or ``"none"``.

    Returns:
        The normalised table and each task's scale.
    """
    if how not in NORMALISATIONS:
        raise MetaEvalError(f"normalise must be one of {', '.join(NORMALISATIONS)}, got {how!r}")
    if how == "none":
        return table, pd.Series(1.0, index=table.columns)
    if how == "rank":
        ranks = table.rank(axis=0, method="average") - 1.0
        return ranks / max(1, len(table) - 1), pd.Series(np.nan, index=table.columns)
    with np.errstate(over="ignore"):
        low, span = table.min(axis=0), table.max(axis=0) - table.min(axis=0)
    if np.isinf(span).any():
        task = span.index[np.isinf(span.to_numpy())][0]
        raise MetaEvalError(f"task {task!r}: its scores span {low[task]:.3g} to {table[task].max():.3g}, more than "
                            "a float can hold; divide the table by a large number, or normalise by rank")
    scale = 1.0 / span.where(span > 0, 1.0)
    return (table - low) * scale, scale
