import numpy as np
import pandas as pd
import pytest

from metaeval.loops.study import paired_statistics, summary


def comparison(differences):
    """Two raters x len(differences) seeds x 3 iterations; rater "a" sits ``differences``
    above uniform at every iteration, on one-player-per-column payoffs."""
    rows = []
    for seed, difference in enumerate(differences):
        for iteration in range(3):
            base = 1.0 + seed + 0.1 * iteration
            for rater, gap in (("uniform", base), ("a", base + difference)):
                rows.append({"rater": rater, "seed": seed, "iteration": iteration, "cce_gap": gap,
                             "mean_payoff_p0": gap, "mean_payoff_p1": -gap})
    return pd.DataFrame(rows)


def test_paired_statistics_count_signs_and_test_them():
    table = paired_statistics(comparison([-0.1, -0.2, -0.3, -0.4, -0.5, -0.6]), every=2)
    assert table.iteration.tolist() == [1, 2]  # every 2nd iteration, and the last
    row = table.iloc[-1]
    assert (row.lower, row.equal, row.higher) == (6, 0, 0)
    assert row.mean_difference == pytest.approx(-0.35)
    assert row.sign_test_p == pytest.approx(2 / 2**6)  # two-sided binomial, 6 of 6
    assert row.wilcoxon_p == pytest.approx(2 / 2**6)  # exact: all ranks on one side
    tied = paired_statistics(comparison([0.0, 0.0, 0.1, -0.1]), every=3).iloc[-1]
    assert (tied.lower, tied.equal, tied.higher, tied.sign_test_p) == (1, 2, 1, 1.0)


def test_summary_reports_final_and_mean_gaps_and_welfare():
    table = summary(comparison([0.5, 0.5])).set_index("rater")
    assert table.loc["a", "final_gap_mean"] == pytest.approx(np.mean([1.7, 2.7]))
    assert table.loc["uniform", "mean_gap_mean"] == pytest.approx(np.mean([1.1, 2.1]))
    assert table.loc["a", "final_welfare_mean"] == pytest.approx(0.0)  # zero-sum payoffs
    assert table.loc["a", "seeds"] == 2
