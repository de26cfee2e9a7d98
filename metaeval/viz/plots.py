"""Figures of population runs (CCE gap and average payoff against iteration) and of
ratings with their bootstrap intervals.

The layout follows Figure 3 of Marris et al. (2025): the full-game CCE gap on a
log scale, one line per rater with a band over seeds, and the population's
average payoff per player.
"""

from __future__ import annotations

import textwrap

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, NullLocator  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from metaeval.runs.reports import comparison_frame  # noqa: E402

GAP_PLOT = "cce_gap.png"
PAYOFF_PLOT = "payoff.png"
EXPLOITABILITY_PLOT = "exploitability.png"
MEMORY_PLOT = "memory.png"
RUN_FIGURES = (GAP_PLOT, EXPLOITABILITY_PLOT, PAYOFF_PLOT, MEMORY_PLOT)
"""The figures a loop or comparison draws in its directory (those that apply to it)."""
TITLE_WIDTH = 80
"""Characters per title line: a title fits a 6.4-inch figure in at most two lines."""


def _title(ax, title: str) -> None:
    ax.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=9)


def _steps_axis(ax, unit: str) -> None:
    """The x axis of a loop's figure: its own unit (iteration, step), whole-number ticks."""
    ax.set_xlabel(unit)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _log_axis(ax) -> None:
    """A log-scale y axis (set once the data are drawn) labelled in plain numbers (0.4,
    1e-10); a range of less than a decade, which holds one power of ten or none, gets
    evenly spaced ticks instead."""
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    if high < 10 * low:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:.3g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _band(ax, frame: pd.DataFrame, column: str, label: str, color):
    """Mean over seeds, with a band of one standard error of the mean."""
    stats = frame.groupby("iteration")[column].agg(["mean", "sem"])
    ax.plot(stats.index, stats["mean"], label=label, color=color, lw=1.6)
    if frame.seed.nunique() > 1:
        ax.fill_between(stats.index, stats["mean"] - stats["sem"], stats["mean"] + stats["sem"],
                        color=color, alpha=0.18, lw=0)


def plot_comparison(out: Path, comparison: pd.DataFrame, title: str = "", unit: str = "iteration") -> list[Path]:
    """Write the gap and payoff figures for a table from ``reports.comparison_frame`` (no gap
    figure when no gap was computed, as in sampled mode), against the loop's ``unit`` (its
    ``iteration`` column counts them); returns the files written.

    Args:
        out: the directory written.
        comparison: the comparison's table.
        title: the figures' title.
        unit: what the loop counts (its x axis).

    Returns:
        The files written.
    """
    out = Path(out)
    raters = list(dict.fromkeys(comparison.rater))
    colors = dict(zip(raters, plt.cm.tab10.colors))
    seeds = comparison.seed.nunique()
    band = f" (mean over {seeds} seeds ± one standard error)" if seeds > 1 else ""
    written = []
    if pd.to_numeric(comparison.cce_gap, errors="coerce").notna().any():
        written.append(_plot_gap(out, comparison, raters, colors, f"{title}{band}", unit))
    written.append(_plot_payoffs(out, comparison, raters, colors, f"{title}{band}", unit))
    return written


def _plot_gap(out: Path, comparison: pd.DataFrame, raters, colors, title: str, unit: str) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for rater in raters:
        _band(ax, comparison[comparison.rater == rater], "cce_gap", rater, colors[rater])
    _log_axis(ax)
    _steps_axis(ax, unit)
    ax.set_ylabel("full-game CCE gap of the meta-game's MECCE")
    _title(ax, title)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(out / GAP_PLOT, dpi=130)
    plt.close(fig)
    return out / GAP_PLOT


def _plot_payoffs(out: Path, comparison: pd.DataFrame, raters, colors, title: str, unit: str) -> Path:
    """One panel per player, at most three in a row, on a 6.4-inch-wide figure; the payoff
    axis labelled and the legend drawn once for all panels (the legend below them, clear of
    the data)."""
    players = sorted(int(c.rsplit("p", 1)[1]) for c in comparison.columns if c.startswith("mean_payoff_p"))
    columns = min(len(players), 3)
    rows = -(-len(players) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6.4, 1.2 + 2.6 * rows), squeeze=False, layout="constrained")
    for ax, p in zip(axes.flat, players):
        for rater in raters:
            _band(ax, comparison[comparison.rater == rater], f"mean_payoff_p{p}", rater, colors[rater])
        ax.set_title(f"player {p}", fontsize=9)
        _steps_axis(ax, unit)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(players):]:
        ax.set_visible(False)
    fig.supylabel("average payoff of the population", fontsize=10)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(raters), 5), frameon=False, fontsize=8)
    fig.suptitle("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=9)
    fig.savefig(out / PAYOFF_PLOT, dpi=130)
    plt.close(fig)
    return out / PAYOFF_PLOT


def plot_paired(path: Path, paired: pd.DataFrame, title: str = "") -> Path:
    """How the paired comparison with the baseline evolves: for a table from
    ``loops.study.paired_statistics`` (every iteration), each rater's mean gap minus the
    baseline's over seeds with a band of one standard error (top), and the two-sided
    Wilcoxon signed-rank p-value on a log scale, with 0.05 marked (bottom). Colours are
    those of [`plot_comparison`][metaeval.viz.plots.plot_comparison] when the baseline comes first there.

    Args:
        path: the file written.
        paired: the paired statistics.
        title: the figure's title.

    Returns:
        ``path``.
    """
    raters = list(dict.fromkeys(paired.rater))
    colors = dict(zip(raters, plt.cm.tab10.colors[1:]))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True, height_ratios=(3, 2))
    for rater in raters:
        rows = paired[paired.rater == rater]
        top.plot(rows.iteration, rows.mean_difference, color=colors[rater], lw=1.4, label=rater)
        top.fill_between(rows.iteration, rows.mean_difference - rows.standard_error,
                         rows.mean_difference + rows.standard_error, color=colors[rater], alpha=0.18, lw=0)
        bottom.plot(rows.iteration, rows.wilcoxon_p, color=colors[rater], lw=1.2)
    baseline = paired.baseline.iloc[0]
    top.axhline(0, color="black", lw=0.8)
    top.set_ylabel(f"CCE gap minus {baseline}'s\n(paired by seed)")
    top.legend(frameon=False, fontsize=8)
    top.grid(alpha=0.3)
    bottom.axhline(0.05, color="black", lw=0.8, ls="--")
    _log_axis(bottom)
    bottom.set_ylabel("Wilcoxon p-value")
    _steps_axis(bottom, "iteration")
    bottom.grid(alpha=0.3, which="both")
    pairs = int(paired.pairs.max())
    _title(top, f"{title} ({pairs} paired seeds; band: ± one standard error)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return Path(path)


def plot_run(out: Path, records: list[dict], label: str, seed: int = 0, title: str = "",
             unit: str = "iteration") -> list[Path]:
    """The same figures for a single run; with an approximate gap in its records, the gap
    figure is [`plot_psro`][metaeval.viz.plots.plot_psro]'s (exact gap, if any, and the approximate one with its band).

    Args:
        out: the directory written.
        records: the run's records.
        label: the run's label in the legend.
        seed: the run's seed.
        title: the figures' title.
        unit: what the loop counts (its x axis).

    Returns:
        The files written.
    """
    written = plot_comparison(out, comparison_frame({label: {seed: records}}), title=title, unit=unit)
    if any(r.get("approximate_cce_gap") is not None for r in records):
        written = sorted({*written, *plot_psro(out, {label: records}, title=title, unit=unit)})
    return written


def plot_psro(out: Path, runs: dict[str, list[dict]], title: str = "", unit: str = "iteration") -> list[Path]:
    """PSRO curves, one line per run label: the full-game CCE gap of the meta-distribution
    (and, when estimated, its approximate lower bound, dashed, with a band of two standard
    errors), and (when the records have it) the exploitability of the meta-Nash mixture;
    against the loop's ``unit``, counted by the records' ``iteration``.

    Args:
        out: the directory written.
        runs: label -> the run's records.
        title: the figures' title.
        unit: what the loop counts (its x axis).

    Returns:
        The files written.
    """
    out = Path(out)
    written = []
    for column, name, label in [("cce_gap", GAP_PLOT, "full-game CCE gap of the meta-distribution"),
                                ("exploitability", EXPLOITABILITY_PLOT, "exploitability of the meta-Nash mixture")]:
        curves = {key: [(r["iteration"], r[column]) for r in records if r.get(column) is not None]
                  for key, records in runs.items()}
        curves = {key: points for key, points in curves.items() if points}
        approximate = {} if column != "cce_gap" else {
            key: [(r["iteration"], r.get("approximate_cce_gap_estimate", r["approximate_cce_gap"]),
                   r["approximate_cce_gap_stderr"], _deviations(r))
                  for r in records if r.get("approximate_cce_gap") is not None]
            for key, records in runs.items()}
        approximate = {key: points for key, points in approximate.items() if points}
        if not curves and not approximate:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for key, points in curves.items():
            x, y = zip(*points)
            ax.plot(x, [max(v, 1e-12) for v in y], label=key, lw=1.6)
        for key, points in approximate.items():
            x, y, se, by = zip(*points)
            x, y, se = (np.array(v, dtype=float) for v in (x, y, se))
            # a gap is never negative: the bound is max(0, estimate), its band clipped at 0 too
            line, = ax.plot(x, np.maximum(y, 0), ls="--", lw=1.4,
                            label=f"{key}: approximate, a lower bound ({by[-1]})")
            ax.fill_between(x, np.maximum(y - 2 * se, 0), np.maximum(y + 2 * se, 0), color=line.get_color(),
                            alpha=0.15, lw=0)
        if approximate:
            _from_zero(ax)  # a bound can be 0: a linear axis, with room for the legend
        else:
            _log_axis(ax)
        _steps_axis(ax, unit)
        ax.set_ylabel(label if not approximate else "CCE gap (approximate: at least)")
        _title(ax, title)
        ax.legend(frameon=False, fontsize=8)
        ax.grid(alpha=0.3, which="both")
        fig.tight_layout()
        fig.savefig(out / name, dpi=130)
        plt.close(fig)
        written.append(out / name)
    return written


def plot_memory(out: Path, records: list[dict], title: str = "") -> Path | None:
    """Resident memory per iteration (MiB; [`metaeval.runs.memory`][metaeval.runs.memory]): the driver's peak
    and current, each build actor's peak, beside the largest population (right axis).
    None (nothing written) when the records hold no memory.

    Args:
        out: the directory written.
        records: the run's records.
        title: the figure's title.

    Returns:
        The file written, or None.
    """
    records = [r for r in records if r.get("memory")]
    if not records:
        return None
    x = [r["iteration"] for r in records]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(x, [r["memory"]["driver"]["peak_mib"] for r in records], lw=1.6, label="driver: peak")
    ax.plot(x, [r["memory"]["driver"]["rss_mib"] for r in records], lw=1.2, ls="--", label="driver: current")
    for i in range(max(len(r["memory"]["actors"]) for r in records)):
        points = [(t, r["memory"]["actors"][i]["peak_mib"]) for t, r in zip(x, records)
                  if len(r["memory"]["actors"]) > i]
        ax.plot(*zip(*points), lw=1.2, label=f"build actor {i}: peak")
    _from_zero(ax)
    _steps_axis(ax, "iteration")
    ax.set_ylabel("resident memory (MiB)")
    sizes = ax.twinx()
    sizes.plot(x, [max(r["sizes"]) for r in records], color="grey", lw=1, ls=":")
    sizes.set_ylabel("policies per player (dotted)", color="grey")
    sizes.yaxis.set_major_locator(MaxNLocator(integer=True))
    _from_zero(sizes)
    _title(ax, title)
    ax.legend(frameon=False, fontsize=8, loc="upper left", ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(out) / MEMORY_PLOT
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def short_names(names: list[str]) -> list[str]:
    """Names without the leading words they all share, each keeping at least two words
    (``"kuhn_poker player 0"`` -> ``"player 0"``; ``"agent A"``, ``"task"`` unchanged).

    Args:
        names: the names.

    Returns:
        The shortened names, in order.
    """
    words = [name.split(" ") for name in names]
    shared = 0
    while all(len(w) > shared + 2 and w[shared] == words[0][shared] for w in words):
        shared += 1
    return [" ".join(w[shared:]) for w in words]


def _deviations(record: dict) -> str:
    """What the approximate gap of ``record`` searched: ``dqn deviations, 20000 episodes``."""
    responder = record.get("approximate_cce_gap_responder") or "learned"
    episodes = record.get("approximate_cce_gap_episodes")
    return f"{responder} deviations" + (f", {episodes} episodes" if episodes else "")


def _from_zero(ax) -> None:
    """A y axis from 0 with room above the highest line (for the legend): set from the data,
    as the limits autoscaled before ``bottom=0`` would leave a flat line on the top frame."""
    values = [np.asarray(line.get_ydata(orig=False), dtype=np.float64) for line in ax.get_lines()]
    highest = max((np.nanmax(v) for v in values if np.isfinite(v).any()), default=0.0)  # unmeasured: NaN
    ax.set_ylim(0, 1.3 * highest if highest > 0 else 1.0)


def plot_rating_bars(path: Path, rating, player: int = 0, opponent: int | None = None,
                     top: int = 8) -> Path:
    """Horizontal bars of ``player``'s ratings, best on top, written atomically to ``path``.

    For ratings against an equilibrium (metaeval.ratings.contributions) each bar is split into
    the contributions of the ``top`` opponent strategies (tasks) with the largest total
    |contribution| and one segment for all others; a black tick marks the rating.

    Args:
        path: the file written.
        rating: the rating.
        player: the rated player.
        opponent: the player whose strategies contribute (default: the last).
        top: the opponent strategies shown apart.

    Returns:
        ``path``.
    """
    from metaeval.ratings.base import rounded
    from metaeval.ratings.contributions import EQUILIBRIUM_RATERS, contributions
    from metaeval.runs.fileio import atomic_write

    game = rating.game
    values = rating.ratings[player]
    shown = rounded(values, rating.tolerance, rating.ranks(player))  # ties level, in the game's order
    order = np.lexsort((-np.arange(len(values)), shown))  # barh draws bottom-up: best on top
    names = [game.strategy_names[player][i] for i in order]
    players = short_names(game.player_names)
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.32 * len(names)))
    if rating.method in EQUILIBRIUM_RATERS:
        opponent = game.num_players - 1 if opponent is None else opponent
        shares = contributions(rating, player, opponent)[order]
        biggest = np.argsort(-np.abs(shares).sum(axis=0), kind="stable")[:top]
        segments = [(game.strategy_names[opponent][j], shares[:, j]) for j in biggest]
        rest = np.delete(shares, biggest, axis=1).sum(axis=1)
        if shares.shape[1] > len(biggest):
            segments.append((f"{shares.shape[1] - len(biggest)} others", rest))
        colors = [c for i, c in enumerate(plt.cm.tab10.colors) if i != 7] + [(0.75, 0.75, 0.75)]  # grey: the others only
        negative, positive = np.zeros(len(names)), np.zeros(len(names))
        for k, (label, share) in enumerate(segments):
            color = colors[k] if k < len(biggest) else colors[-1]
            left = np.where(share < 0, negative, positive)
            ax.barh(names, share, left=left, color=color, label=label, height=0.7)
            negative += np.minimum(share, 0.0)
            positive += np.maximum(share, 0.0)
        ax.scatter(shown[order], names, marker="|", s=250, color="black", zorder=3, label="rating")
        ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5),
                  title=players[opponent], title_fontsize=8)
        _title(ax, f"{rating.method} ratings of {players[player]}, split by {players[opponent]}")
    else:
        ax.barh(names, shown[order], color=plt.cm.tab10.colors[0], height=0.7)
        _title(ax, f"{rating.method} ratings of {players[player]}")
    ax.use_sticky_edges = False  # a margin beyond the longest bar, not the frame at its end
    ax.margins(x=0.05)
    ax.axvline(0.0, color="black", lw=0.6)
    ax.set_xlabel("rating")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    atomic_write(path, lambda handle: fig.savefig(handle, dpi=130, format="png"))
    plt.close(fig)
    return Path(path)
def plot_intervals(rating, path=None, player: int = 0, title: str = "", ax=None):
    """One player's ratings with their bootstrap intervals, best at the top, each
    labelled with its probability of being rated top; returns the figure.

    ``rating`` comes from ``metaeval.rate(..., bootstrap=B)``; the figure is written to
    ``path`` when one is given.

    Args:
        rating: a bootstrapped rating.
        path: the file to write (None: none).
        player: the rated player.
        title: the figure's title.
        ax: the axes to draw on (None: a new figure).

    Returns:
        The figure.
    """
    from metaeval.errors import MetaEvalError

    if rating.intervals is None:
        raise MetaEvalError("plot_intervals needs a rating with intervals: rate with bootstrap=B")
    values, bounds, p_top = rating.ratings[player], rating.intervals[player], rating.p_top[player]
    order = np.argsort(values, kind="stable")
    names = [rating.game.strategy_names[player][i] for i in order]
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(5.6, 0.8 + 0.32 * len(order)))
    else:
        fig = ax.figure
    y = np.arange(len(order))
    error = np.abs(bounds[order] - values[order, None]).T
    ax.errorbar(values[order], y, xerr=error, fmt="o", ms=4, capsize=3, color="tab:blue")
    for row, i in zip(y, order):
        ax.annotate(f"P(top) {p_top[i]:.2f}", (bounds[i, 1], row), xytext=(6, -3),
                    textcoords="offset points", fontsize=7)
    ax.set_yticks(y, names)
    settings = rating.diagnostics.get("bootstrap", {})
    replicates = settings.get("replicates")
    if settings.get("failed"):
        replicates = f"{replicates - settings['failed']} of {replicates}"
    ax.set_xlabel(f"{rating.method} rating ({settings.get('level', 0.95):.0%} interval, {replicates} bootstrap replicates)")
    ax.set_title(title or rating.game.player_names[player], fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    ax.margins(x=0.25)
    if path is not None:
        fig.tight_layout()
        fig.savefig(path, dpi=130)
        if own:
            plt.close(fig)
    return fig
