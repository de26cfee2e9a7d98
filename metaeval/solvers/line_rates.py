"""Matrix-free rates of a chain on joint profiles whose moves change one player's strategy.

alpha-Rank's multi-population chain (Omidshafiei et al. 2019, eq. 10) moves from profile
s to a profile s' that differs in one player p's strategy, at a rate r(f_p(s') - f_p(s))
that depends only on player p's payoff gain.  A profile has sum_p (K_p - 1) such moves:
4.2e9 at 4 players x 64, too many to store.  This module applies the rate matrix N
(``N[s, s'] = r(f_p(s') - f_p(s))``) and its transpose without forming it.

Along one *line* (profiles that differ only in player p's strategy) sort the payoffs
f_1 <= ... <= f_K.  Away from zero the rate is a short sum of exponentials of the gain,

    r(d) = sum_k c_k exp(-l_k d)        for d >= delta  (an "up" move),
    r(d) = sum_k c'_k exp(-l'_k |d|)     for d <= -delta (a "down" move),

each of which factors, exp(-l (f_j - f_i)) = exp(-l (f_j - f_{j-1})) exp(-l (f_{j-1} - f_i)),
so ``sum_{i < j} x_i exp(-l (f_j - f_i))`` is a running sum along the sorted line with
factors <= 1 (no overflow at any alpha): O(K) per line instead of O(K^2).  Pairs closer
than delta (payoff ties, and the removable singularity of the fixation probability at
d = 0) get the difference between the exact rate and the far formula as a sparse
correction.  Rates are divided by the largest one, as the sparse solver does.
"""

from __future__ import annotations

import numpy as np

from metaeval.runs import budget


class LineRates:
    """The rate matrix N of a line-structured chain on the profiles of ``payoffs[0].shape``.

    Args:
        payoffs: one array per player p, f_p over the joint profiles.
        log_rate: vectorised gain d -> log r(d), exact for every d; r non-decreasing.
        up, down: ``(c, l)`` pairs of the far expansions above (rates not yet scaled).
        delta: gains with |d| <= delta are corrected to the exact rate (< 0: none).
    """

    def __init__(self, payoffs, log_rate, up, down, delta):
        self.shape = tuple(payoffs[0].shape)
        self.n = int(np.prod(self.shape))
        self.log_rate = log_rate
        index = np.int32 if self.n < 2**31 else np.int64
        self.payoffs = [np.asarray(f, dtype=np.float64) for f in payoffs]
        self.max_gain = max(float(np.ptp(f, axis=p).max()) for p, f in enumerate(self.payoffs))
        self.log_scale = float(log_rate(np.array([self.max_gain]))[0])  # log of the largest rate
        scale = np.exp(-self.log_scale)
        self.up = [(c * scale, lam) for c, lam in up]
        self.down = [(c * scale, lam) for c, lam in down]
        lambdas = sorted({lam for _, lam in (*up, *down) if lam > 0})
        num_floats = self.n * (2 + len(lambdas)) + self.n * np.dtype(index).itemsize / budget.FLOAT
        budget.check(num_floats * budget.FLOAT * len(payoffs),
                     f"the line-sorted alpha-Rank rates of {self.n:,} profiles", "use fewer strategies per player")
        ids = np.arange(self.n, dtype=index).reshape(self.shape)
        self.lines = []  # per player: sorted ids [K, L], sorted payoffs, factors exp(-l gap) per l
        near = ([], [], [])
        for p, f in enumerate(self.payoffs):
            k = self.shape[p]
            values = np.moveaxis(f, p, 0).reshape(k, -1)
            order = np.argsort(values, axis=0, kind="stable")
            sorted_ids = np.take_along_axis(np.moveaxis(ids, p, 0).reshape(k, -1), order, axis=0)
            sorted_values = np.take_along_axis(values, order, axis=0)
            del order, values
            gap = np.diff(sorted_values, axis=0)
            factors = {lam: np.exp(-lam * gap) for lam in lambdas}
            del gap
            self.lines.append((sorted_ids, factors))
            if delta >= 0:
                for part, found in zip(near, self._near_pairs(sorted_ids, sorted_values, delta)):
                    part.append(found)
            del sorted_values
        self.near_source, self.near_target, self.near_rate = (
            np.concatenate(part) if part else np.zeros(0) for part in near)

    def _near_pairs(self, sorted_ids, sorted_values, delta):
        """Corrections ``exact - far`` for moves between line neighbours within delta (both ways)."""
        sources, targets, rates = [], [], []
        for offset in range(1, len(sorted_ids)):
            gain = sorted_values[offset:] - sorted_values[:-offset]  # >= 0: from low to high
            close = gain <= delta
            if not close.any():
                break
            low, high, d = sorted_ids[:-offset][close], sorted_ids[offset:][close], gain[close]
            exact_up = np.exp(self.log_rate(d) - self.log_scale)
            exact_down = np.exp(self.log_rate(-d) - self.log_scale)
            sources += [low, high]
            targets += [high, low]
            rates += [exact_up - _far(self.up, d), exact_down - _far(self.down, d)]
        if not sources:
            return np.zeros(0, dtype=sorted_ids.dtype), np.zeros(0, dtype=sorted_ids.dtype), np.zeros(0)
        return np.concatenate(sources), np.concatenate(targets), np.concatenate(rates)

    def transpose_product(self, x: np.ndarray) -> np.ndarray:
        """``N^T x``: the flow into every profile, ``y(s') = sum_s x(s) r(s -> s')``."""
        return self._apply(x, below=self.up, above=self.down, source=self.near_source, target=self.near_target)

    def product(self, x: np.ndarray) -> np.ndarray:
        """``N x``: ``y(s) = sum_s' r(s -> s') x(s')`` (``N 1`` is the exit rate)."""
        return self._apply(x, below=self.down, above=self.up, source=self.near_target, target=self.near_source)

    def _apply(self, x, below, above, source, target):
        y = np.zeros(self.n)
        for sorted_ids, factors in self.lines:
            xs = x[sorted_ids]
            ys = np.zeros_like(xs)
            for c, lam in below:  # from lower payoffs on the line: sum_{i < j} x_i e^{-l (f_j - f_i)}
                ys += c * _running_sum(xs, factors.get(lam))
            for c, lam in above:  # from higher payoffs: sum_{i > j} x_i e^{-l (f_i - f_j)}
                ys += c * _running_sum(xs[::-1], None if lam == 0 else factors[lam][::-1])[::-1]
            y[sorted_ids] += ys
        if len(source):
            y += np.bincount(target, self.near_rate * x[source], self.n)
        return y

    def row(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """The moves out of ``state``: target profiles and their scaled log rates (exact)."""
        coords = np.unravel_index(state, self.shape)
        targets, gains = [], []
        for p, k in enumerate(self.shape):
            others = [b for b in range(k) if b != coords[p]]
            profiles = np.array([coords] * len(others))
            profiles[:, p] = others
            ids = np.ravel_multi_index(profiles.T, self.shape)
            targets.append(ids)
            gains.append(self._payoff(p, ids) - self._payoff(p, np.array([state]))[0])
        return np.concatenate(targets), self.log_rate(np.concatenate(gains)) - self.log_scale

    def _payoff(self, p, ids):
        return self.payoffs[p].reshape(-1)[ids]


def _far(terms, d):
    return sum(c * np.exp(-lam * d) for c, lam in terms)


def _running_sum(xs, factors):
    """``s_j = sum_{i < j} x_i prod_{i <= t < j} w_t`` down the rows of ``xs`` (w = factors, 1 if None)."""
    out = np.empty_like(xs)
    out[0] = 0.0
    if factors is None:
        np.cumsum(xs[:-1], axis=0, out=out[1:])
        return out
    for j in range(1, len(xs)):
        np.add(out[j - 1], xs[j - 1], out=out[j])
        out[j] *= factors[j - 1]
    return out
