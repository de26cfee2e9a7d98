import numpy as np
import pytest
from scipy.stats import spearmanr

from metaeval import MetaEvalError
from metaeval.pairwise.poe import ComparisonPlanner, difference_rows, gaussian_poe, soft_bradley_terry
from metaeval.ratings.elo import SCALE, bradley_terry


def test_gaussian_examples():
    scores, _ = gaussian_poe(3, [(0, 1), (1, 2)], [0.8, 0.7])
    np.testing.assert_allclose(scores, [0.0, -0.3, -0.5], atol=1e-12)
    scores, covariance = gaussian_poe(3, [(0, 1), (1, 2), (0, 2)], [0.8, 0.7, 0.6])
    np.testing.assert_allclose(scores, [0.0, -1 / 6, -7 / 30], atol=1e-12)
    assert covariance[0, 0] == pytest.approx(1.0)  # only the prior expert sets the level


def test_full_information_matrix_and_inverse_for_four_items():
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    planner = ComparisonPlanner(4, pairs)
    information = np.linalg.inv(planner.inverse)
    np.testing.assert_allclose(information, 4 * np.eye(4) - 1 + np.diag([1, 0, 0, 0]), atol=1e-12)
    np.testing.assert_allclose(planner.inverse, [[1, 1, 1, 1], [1, 1.5, 1.25, 1.25], [1, 1.25, 1.5, 1.25], [1, 1.25, 1.25, 1.5]], atol=1e-12)


@pytest.mark.parametrize("n", [4, 5, 7])
def test_complete_graph_determinant_counts_spanning_trees(n):
    planner = ComparisonPlanner(n, [(i, j) for i in range(n) for j in range(i + 1, n)])
    assert np.exp(planner.log_det) == pytest.approx(n ** (n - 2))


def test_greedy_from_the_chain():
    planner = ComparisonPlanner(4)
    np.testing.assert_allclose(planner.inverse, np.minimum.outer(np.arange(1, 5), np.arange(1, 5)))
    assert planner.next_pair() == (0, 3) and planner.resistances()[0, 3] == pytest.approx(3.0)
    determinants = [np.exp(planner.log_det)]
    picks = []
    for _ in range(3):
        picks += planner.plan(1)
        determinants.append(np.exp(planner.log_det))
    # After (0, 3) the graph is a 4-cycle whose two diagonals tie at resistance 1 (the
    # paper's order (4, 2), (1, 3) breaks the tie the other way); both complete K_4.
    assert picks[0] == (0, 3) and set(picks[1:]) == {(0, 2), (1, 3)}
    np.testing.assert_allclose(determinants, [1, 4, 8, 16])


def test_sherman_morrison_and_the_determinant_identity():
    rng = np.random.default_rng(0)
    planner = ComparisonPlanner(8)
    for _ in range(15):
        i, j = rng.choice(8, 2, replace=False)
        growth = 1 + planner.resistances()[i, j]
        before = planner.log_det
        planner.add(i, j)
        design = np.vstack([np.eye(8)[:1], difference_rows(8, np.array(planner.pairs))])
        np.testing.assert_allclose(planner.inverse, np.linalg.inv(design.T @ design), atol=1e-10)
        assert planner.log_det == pytest.approx(np.linalg.slogdet(design.T @ design)[1])
        assert planner.log_det - before == pytest.approx(np.log(growth))


def test_full_symmetric_set_is_affine_in_the_average_probability():
    rng = np.random.default_rng(1)
    n = 6
    p = rng.uniform(0.05, 0.95, (n, n))
    p = np.triu(p, 1) + np.tril(1 - p.T, -1)  # p_ji = 1 - p_ij
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    scores, _ = gaussian_poe(n, pairs, [p[i, j] for i, j in pairs])
    average = p.sum(axis=1) / (n - 1)
    np.testing.assert_allclose(scores - scores.mean(), (n - 1) / n * (average - average.mean()), atol=1e-12)
    again, _ = gaussian_poe(n, pairs, [p[i, j] for i, j in pairs], alpha=3.0, beta=0.3)
    assert spearmanr(again, scores).statistic == pytest.approx(1.0)


def test_soft_bradley_terry_is_stationary_and_hard_outcomes_are_plain_bt():
    rng = np.random.default_rng(2)
    pairs = np.array([(i, j) for i in range(5) for j in range(i + 1, 5)] * 2)
    p = rng.uniform(0.1, 0.9, len(pairs))
    s = soft_bradley_terry(5, pairs, p)
    rows = difference_rows(5, pairs)
    np.testing.assert_allclose(rows.T @ (1 / (1 + np.exp(-rows @ s)) - p), 0, atol=1e-9)
    hard = (p > 0.5).astype(float)
    wins = np.zeros((5, 5))
    for (i, j), h in zip(pairs, hard):
        wins[i, j] += h
        wins[j, i] += 1 - h
    np.testing.assert_allclose(soft_bradley_terry(5, pairs, hard, prior=0.5), bradley_terry(wins, prior=0.5) / SCALE)


def test_bad_comparisons():
    with pytest.raises(MetaEvalError, match="unconnected"):
        gaussian_poe(4, [(0, 1), (2, 3)], [0.5, 0.5])
    with pytest.raises(MetaEvalError, match="distinct"):
        gaussian_poe(3, [(0, 0)], [0.5])
    with pytest.raises(MetaEvalError, match=r"\[0, 1\]"):
        gaussian_poe(3, [(0, 1), (1, 2)], [0.5, 1.5])
    with pytest.raises(MetaEvalError, match="distinct items"):
        ComparisonPlanner(3).add(1, 1)
