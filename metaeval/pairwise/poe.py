"""Product-of-experts comparative assessment (Liusie et al., "Efficient LLM Comparative
Assessment: a Product of Experts Framework").

Each comparison k of items (i, j) gives a soft outcome p_k = P(i better than j).  Its
expert is a density on s_i - s_j; the scores maximise the product of the experts.

- Gaussian experts N(s_i - s_j; alpha (p_k - beta), variance_k) with a prior expert
  N(s_0; 0, prior_variance) fixing the level: closed form (eqs 7-10), with the score
  covariance (W'^T S^-1 W')^-1.
- Soft Bradley-Terry experts sigma(s_i - s_j)^p (1 - sigma(s_i - s_j))^(1-p): the MAP is
  the Bradley-Terry MLE with fractional wins p and 1 - p.
- Greedy selection (section 3.6): with A = (W'^T W')^-1, compare next the pair maximising
  A_ii + A_jj - 2 A_ij (the effective resistance between i and j in the comparison graph),
  which maximises det(W'^T W') (eqs 13-16); A is updated by Sherman-Morrison (eq 55) and
  the determinant grows by the factor 1 + r^T A r (eq 50).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csgraph

from metaeval.errors import MetaEvalError
from metaeval.ratings.elo import SCALE, bradley_terry


def gaussian_poe(n, pairs, probabilities, alpha=1.0, beta=0.5, variance=1.0, prior_variance=1.0):
    """Scores ``[n]`` and their covariance ``[n, n]`` under Gaussian experts (eqs 7-10).

    ``variance`` may be one number or one per comparison (e.g. proportional to 1 / the
    number of judgements behind each p).

    Args:
        n: the number of items.
        pairs: the compared pairs ``[M, 2]``.
        probabilities: each comparison's probability that the first item wins ``[M]``.
        alpha: the experts' slope.
        beta: the experts' offset.
        variance: the experts' variance.
        prior_variance: the prior's variance.

    Returns:
        The scores and their covariance.
    """
    pairs, probabilities = _checked(n, pairs, probabilities)
    try:
        variance = np.broadcast_to(np.asarray(variance, dtype=np.float64), probabilities.shape)
        alpha, beta, prior_variance = float(alpha), float(beta), float(prior_variance)
    except (TypeError, ValueError) as exc:
        raise MetaEvalError(f"variance, alpha, beta and prior_variance must be numbers ({exc})") from None
    if not (np.all(np.isfinite(variance) & (variance > 0)) and 0 < prior_variance < np.inf and 0 < alpha < np.inf):
        raise MetaEvalError("variances and alpha must be positive and finite")
    if not np.isfinite(beta):
        raise MetaEvalError(f"beta must be finite, got {beta}")
    design = np.vstack([np.eye(n)[:1], difference_rows(n, pairs)])  # the prior expert first
    mean = np.r_[0.0, alpha * (probabilities - beta)]
    weight = 1 / np.r_[prior_variance, variance]
    precision = design.T @ (weight[:, None] * design)
    _require_connected(n, pairs)
    covariance = np.linalg.inv(precision)
    return covariance @ (design.T @ (weight * mean)), covariance


def soft_bradley_terry(n, pairs, probabilities, prior=0.0):
    """Scores (natural-log odds, mean 0) under soft Bradley-Terry experts: the BT MLE in
    which comparison k counts p_k wins for i and 1 - p_k for j (hard 0/1 outcomes may need
    ``prior > 0``, virtual games between every pair).

    Args:
        n: the number of items.
        pairs: the compared pairs ``[M, 2]``.
        probabilities: each comparison's probability that the first item wins ``[M]``.
        prior: virtual games between every pair.

    Returns:
        The scores ``[n]``.
    """
    pairs, probabilities = _checked(n, pairs, probabilities)
    wins = np.zeros((n, n))
    np.add.at(wins, (pairs[:, 0], pairs[:, 1]), probabilities)
    np.add.at(wins, (pairs[:, 1], pairs[:, 0]), 1 - probabilities)
    return bradley_terry(wins, prior=prior) / SCALE


def difference_rows(n, pairs) -> np.ndarray:
    """One row e_i - e_j per comparison (the paper's W)."""
    rows = np.zeros((len(pairs), n))
    rows[np.arange(len(pairs)), pairs[:, 0]] += 1.0
    rows[np.arange(len(pairs)), pairs[:, 1]] -= 1.0
    return rows


class ComparisonPlanner:
    """Which pair to compare next: greedy D-optimal selection with Sherman-Morrison updates.

    Starts from ``pairs`` (default: the chain 0-1, 1-2, ..., as in the paper's eq 60) plus
    the prior row on item 0; ``next_pair()`` names the pair to evaluate, ``add(i, j)``
    records that it was.

    Args:
        n: the number of items (at least 2).
        pairs: the pairs to start from, ``[M, 2]``, connecting every item (default: the
            chain 0-1, 1-2, ...).
    """

    def __init__(self, n: int, pairs=None):
        self.n = n = _count_of_items(n, least=2)
        start = np.array([(i, i + 1) for i in range(n - 1)]) if pairs is None else _indices(n, pairs)
        self.pairs = [(int(i), int(j)) for i, j in start]
        _require_connected(n, start)
        design = np.vstack([np.eye(n)[:1], difference_rows(n, start)])
        information = design.T @ design
        self.inverse = np.linalg.inv(information)
        self.log_det = float(np.linalg.slogdet(information)[1])

    def resistances(self) -> np.ndarray:
        """``A_ii + A_jj - 2 A_ij`` for every pair (eq 16).

        Returns:
            The resistances ``[n, n]``.
        """
        d = np.diag(self.inverse)
        return d[:, None] + d[None, :] - 2 * self.inverse

    def next_pair(self) -> tuple[int, int]:
        """The pair (i < j) whose comparison raises det(W'^T W') the most.

        Returns:
            ``(i, j)``.
        """
        gain = np.triu(self.resistances(), 1)
        i, j = np.unravel_index(np.argmax(gain), gain.shape)
        return int(i), int(j)

    def add(self, i: int, j: int) -> None:
        """Record a comparison of i and j (eq 55; the determinant grows by 1 + r^T A r).

        Args:
            i: one item compared.
            j: the other.
        """
        i, j = _indices(self.n, [(i, j)])[0]
        column = self.inverse[:, i] - self.inverse[:, j]  # A r
        growth = 1.0 + column[i] - column[j]  # 1 + r^T A r
        self.inverse = self.inverse - np.outer(column, column) / growth
        self.log_det += float(np.log(growth))
        self.pairs.append((int(i), int(j)))

    def plan(self, budget: int) -> list[tuple[int, int]]:
        """The next ``budget`` pairs, each chosen greedily after the previous one is added.

        Args:
            budget: the number of pairs.

        Returns:
            The pairs, in order.
        """
        chosen = []
        for _ in range(budget):
            pair = self.next_pair()
            self.add(*pair)
            chosen.append(pair)
        return chosen


def _count_of_items(n, least: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < least:
        raise MetaEvalError(f"the number of items must be an int of at least {least}, got {n!r}")
    return int(n)


def _indices(n: int, pairs) -> np.ndarray:
    """``pairs`` as ``[k, 2]`` int64 indices of two distinct items among ``n``; a fractional
    index is refused, not truncated to another item."""
    try:
        raw = np.asarray(pairs, dtype=np.float64).reshape(-1, 2)
    except (TypeError, ValueError) as exc:
        raise MetaEvalError(f"pairs must be pairs of item indices ({exc})") from None
    if not np.all(raw == np.round(raw)):
        raise MetaEvalError(f"item indices must be whole numbers, got {raw[raw != np.round(raw)][0]}")
    indices = raw.astype(np.int64)
    if np.any(raw < 0) or np.any(raw >= n) or np.any(indices[:, 0] == indices[:, 1]):
        raise MetaEvalError(f"every pair must name two distinct items among 0..{n - 1}")
    return indices


def _checked(n, pairs, probabilities):
    pairs = _indices(_count_of_items(n, least=1), pairs)
    try:
        probabilities = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise MetaEvalError(f"probabilities must be numbers ({exc})") from None
    if len(pairs) != len(probabilities):
        raise MetaEvalError(f"{len(pairs)} pairs but {len(probabilities)} probabilities")
    if not np.all((probabilities >= 0) & (probabilities <= 1)):
        raise MetaEvalError("probabilities must lie in [0, 1]")
    return pairs, probabilities


def _require_connected(n, pairs):
    adjacency = np.zeros((n, n), dtype=bool)
    adjacency[pairs[:, 0], pairs[:, 1]] = True
    count, labels = csgraph.connected_components(adjacency, directed=False)
    if count > 1:
        groups = [np.flatnonzero(labels == c).tolist() for c in range(count)]
        raise MetaEvalError(f"the comparisons leave {count} unconnected groups of items: {groups[:5]}")
