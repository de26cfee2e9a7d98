"""Figures: ratings with intervals, the memory, a PBT run's steps, rating bars' names and
limits, the approximate gap's legend."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

import metaeval
from metaeval import games, spiel
from metaeval.loops.pbt import PBTConfig, pbt
from metaeval.loops.pbt import plot as pbt_plot
from metaeval.viz import plots
from metaeval.viz.plots import plot_intervals


def test_plot_intervals_writes_a_figure_best_strategy_on_top(tmp_path):
    payoffs = np.array([[0.0, 1.0, 0.5], [0.2, 0.0, 0.1], [0.9, 0.7, 0.0]])
    game = metaeval.MetaGame(np.stack([payoffs, -payoffs]), stderr=np.full((2, 3, 3), 0.05),
                             strategy_names=[["a", "b", "c"], ["x", "y", "z"]])
    rating = metaeval.rate(game, "uniform", bootstrap=50, seed=0)
    figure = plot_intervals(rating, tmp_path / "intervals.png")
    assert (tmp_path / "intervals.png").stat().st_size > 1000
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert labels[-1] == "c" and labels[0] == "b"  # best (highest mean payoff) plotted at the top
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert f"P(top) {rating.p_top[0][2]:.2f}" in texts


def test_plot_intervals_needs_a_bootstrap():
    rating = metaeval.rate(metaeval.MetaGame.from_matrix([[0.0, 1.0], [-1.0, 0.0]]), "uniform")
    with pytest.raises(metaeval.MetaEvalError, match="bootstrap"):
        plot_intervals(rating)


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions draw, kept open for inspection (they close each one)."""
    figures, close = [], plt.close
    monkeypatch.setattr(plots.plt, "close", figures.append)
    yield figures
    for figure in figures:
        close(figure)


def test_the_memory_figure_shows_a_flat_line_inside_its_frame(tmp_path, drawn):
    """Memory that barely changes (300 to 302 MiB over 3 iterations) used to sit on the top frame."""
    records = [{"iteration": t, "sizes": [t + 1, t + 1], "memory": {
        "driver": {"rss_mib": 300.0 + t, "peak_mib": 300.5 + t}, "actors": []}} for t in range(3)]
    plots.plot_memory(tmp_path, records, title="kuhn_2p")
    memory, sizes = drawn[-1].axes
    assert memory.get_ylim()[0] == 0 and memory.get_ylim()[1] > 1.2 * 302.5
    assert sizes.get_ylim()[0] == 0 and sizes.get_ylim()[1] > 1.2 * 3
    assert all(float(t).is_integer() for t in memory.get_xticks())


def test_a_pbt_runs_figures_count_steps_in_whole_numbers(tmp_path, drawn):
    config = PBTConfig(game="kuhn_2p", steps=2, population=4, episodes_per_step=20)
    records = pbt(config, progress=False)
    pbt_plot(tmp_path, config, records)
    axes = [ax for figure in drawn for ax in figure.axes]
    assert len(axes) == 3  # the gap, and the payoff of each player
    for ax in axes:
        assert ax.get_xlabel() == "step"
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks == [0, 1]


def test_rating_bars_name_players_without_the_game_and_end_inside_the_frame(tmp_path, drawn):
    population = spiel.Population.random(games.load("kuhn_3p"), size=12, seed=0)
    game = spiel.ExactEvaluator(games.load("kuhn_3p")).metagame(population)
    assert game.player_names[0] == "kuhn_poker player 0"
    for rater, title in [("deviation", "deviation ratings of player 0, split by player 2"),
                         ("uniform", "uniform ratings of player 0")]:
        plots.plot_rating_bars(tmp_path / f"{rater}.png", metaeval.rate(game, rater))
        ax = drawn[-1].axes[0]
        assert ax.get_title() == title
        ends = [edge for bar in ax.patches for edge in (bar.get_x(), bar.get_x() + bar.get_width())]
        low, high = ax.get_xlim()
        assert low < min(ends) and max(ends) < high
    legend = drawn[0].axes[0].get_legend()  # the deviation ratings' 8 largest opponents and the rest
    assert legend.get_title().get_text() == "player 2" and legend.get_texts()[-1].get_text() == "4 others"


def test_the_approximate_gaps_learner_and_budget_are_in_the_legend(tmp_path, drawn):
    records = [{"iteration": t, "cce_gap": None, "approximate_cce_gap": 1.0 / (t + 1),
                "approximate_cce_gap_estimate": 1.0 / (t + 1), "approximate_cce_gap_stderr": 0.05,
                "approximate_cce_gap_responder": "dqn", "approximate_cce_gap_episodes": 20000} for t in range(3)]
    plots.plot_psro(tmp_path, {"mgcce": records}, title="goofspiel")
    labels = [t.get_text() for t in drawn[-1].axes[0].get_legend().get_texts()]
    assert labels == ["mgcce: approximate, a lower bound (dqn deviations, 20000 episodes)"]
