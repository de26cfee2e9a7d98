"""Figures: ratings with intervals (metaeval.viz.plots.plot_intervals)."""

import numpy as np
import pytest

import metaeval
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
