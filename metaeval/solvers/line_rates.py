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

import math

import numpy as np

from metaeval.runs import budget


#: Profiles gathered or scattered at a time.  A line's profiles lie far apart in memory
#: (player p's stride is the product of the later players' strategy counts), so a gather
#: or scatter of a whole row of lines touches a fresh cache line per profile; a block of
#: lines reads and writes a few megabytes that stay in cache (at 4 x 48: gather 2.5 and
#: scatter 1.8 times faster, a product 1.4 times; at 4 x 64 a few per cent).
_CHUNK_PROFILES = 2**19

#: Bytes stored per pair of nearly tied profiles: a position and two corrections.
_NEAR_BYTES = 4 + 2 * budget.FLOAT

#: An offset whose nearly tied pairs are at least this fraction of its pairs stores its
#: corrections for every pair (zero where far; at most 2.4 times the memory of storing
#: the near ones with their positions): a product adds them as two shifted slices instead
#: of gathering and scattering pair by pair. At 3 x 160 (47% of neighbours along a sorted
#: line nearly tied, 15% of the pairs two apart) the corrections of a product took 0.079
#: CPU s against 0.137.
_DENSE_FRACTION = 1 / 3


class LineRates:
    """The rate matrix N of a line-structured chain on the profiles of ``payoffs[0].shape``.

    Args:
        payoffs: one array per player p, f_p over the joint profiles.
        log_rate: vectorised gain d -> log r(d), exact for every d; r non-decreasing.
        up: ``(c, l)`` pairs of the far expansion of up moves (rates not yet scaled).
        down: the same for down moves, in |d|.
        delta: gains with |d| <= delta are corrected to the exact rate (< 0: none).
        name: what the memory budget's refusal calls the chain.
    """

    def __init__(self, payoffs, log_rate, up, down, delta, name="the chain"):
        self.shape = tuple(payoffs[0].shape)
        self.n = int(np.prod(self.shape))
        self.log_rate = log_rate
        index = np.int32 if self.n < 2**31 else np.int64
        self.payoffs = [np.asarray(f, dtype=np.float64) for f in payoffs]
        self.max_gain = max(float(np.ptp(f, axis=p).max()) for p, f in enumerate(self.payoffs))
        self.log_scale = float(log_rate(np.array([self.max_gain]))[0])  # log of the largest rate
        self.unit = np.exp(-self.log_scale)  # the far terms' c are scaled by it once per product
        self.up, self.down = list(up), list(down)
        lambdas = sorted({lam for _, lam in (*up, *down) if lam > 0})
        self.name = name
        # Per player and profile: its sorted id and a factor for each exponent (at most).
        per_profile = len(payoffs) * (np.dtype(index).itemsize + budget.FLOAT * len(lambdas))
        budget.check(per_profile * self.n, f"{name} ({self.n:,} profiles, rates along payoff lines)",
                     "use fewer strategies per player")
        ids = np.arange(self.n, dtype=index).reshape(self.shape)
        self._buffers = None
        self.lines = []  # per player: sorted ids [K, L], factors exp(-l gap) per l, near pairs
        near_bytes = 0
        for p, f in enumerate(self.payoffs):
            k = self.shape[p]
            values = np.moveaxis(f, p, 0).reshape(k, -1)
            order = np.argsort(values, axis=0, kind="stable")
            sorted_ids = np.take_along_axis(np.moveaxis(ids, p, 0).reshape(k, -1), order, axis=0)
            sorted_values = np.take_along_axis(values, order, axis=0)
            del order, values
            gap = np.diff(sorted_values, axis=0)
            factors = _factors(gap, lambdas)
            del gap
            near = self._near_pairs(sorted_values, delta, near_bytes) if delta >= 0 else []
            near_bytes += sum(budget.FLOAT * (len(up) + len(down)) + (0 if position is None else 4 * len(position))
                              for _, position, up, down in near)
            self.lines.append((sorted_ids, factors, near))
            del sorted_values

    def _near_pairs(self, sorted_values, delta, stored_bytes):
        """Per offset o along the sorted lines: flat positions i of the lower profile of each
        pair (i, i + o) within delta, and the corrections ``exact - far`` of its up and down
        moves; positions None where the corrections are stored for every pair of the offset
        (at least _DENSE_FRACTION of them are near; zero for the others)."""
        pairs = []
        width = sorted_values.shape[1]
        for offset in range(1, len(sorted_values)):
            gain = sorted_values[offset:] - sorted_values[:-offset]  # >= 0: from low to high
            close = gain <= delta
            count = int(np.count_nonzero(close))
            if not count:
                break
            dense = count >= _DENSE_FRACTION * close.size
            stored_bytes += 2 * budget.FLOAT * close.size if dense else _NEAR_BYTES * count
            budget.check(stored_bytes, f"{self.name}: the corrections of its moves between nearly tied payoffs",
                         "use a larger alpha or break the ties")
            position = np.flatnonzero(close)
            position = position.astype(np.int32) if gain.size < 2**31 else position
            d = gain.reshape(-1)[position]
            up = np.exp(self.log_rate(d)) - _far(self.up, d)  # unscaled, as the far terms (r <= 1)
            down = np.exp(self.log_rate(-d)) - _far(self.down, d)
            if dense:
                up, down = _spread(up, position, close.size), _spread(down, position, close.size)
            pairs.append((offset * width, None if dense else position, up, down))
        return pairs

    def transpose_product(self, x: np.ndarray) -> np.ndarray:
        """``N^T x``: the flow into every profile, ``y(s') = sum_s x(s) r(s -> s')``."""
        return self._apply(x, transpose=True)

    def product(self, x: np.ndarray) -> np.ndarray:
        """``N x``: ``y(s) = sum_s' r(s -> s') x(s')`` (``N 1`` is the exit rate)."""
        return self._apply(x, transpose=False)

    def _apply(self, x, transpose):
        # N^T x gathers up moves from lower payoffs and down moves from higher ones; N x the reverse.
        below, above = (self.up, self.down) if transpose else (self.down, self.up)
        gathered, summed, spread = self._work_buffers()
        y = None
        for sorted_ids, factors, near in self.lines:
            xs = _gather_lines(x, sorted_ids, gathered)
            ys = summed.reshape(sorted_ids.shape)
            for term, (c, lam) in enumerate(below):  # sum_{i < j} x_i e^{-l (f_j - f_i)}
                _add_running_sum(ys, c, xs, factors[lam], start=term == 0)
            for c, lam in above:  # sum_{i > j} x_i e^{-l (f_i - f_j)}
                _add_running_sum(ys[::-1], c, xs[::-1], [factor[::-1] for factor in factors[lam]])
            flat_x, flat_y = xs.reshape(-1), ys.reshape(-1)
            for offset, low, up, down in near:
                into_high, into_low = (up, down) if transpose else (down, up)
                if low is None:  # every pair (i, i + offset); spread is free until the scatter
                    product = spread[: len(up)]
                    flat_y[offset:] += np.multiply(into_high, flat_x[:-offset], out=product)
                    flat_y[:-offset] += np.multiply(into_low, flat_x[offset:], out=product)
                    continue
                high = low + offset
                flat_y[high] += into_high * flat_x[low]
                flat_y[low] += into_low * flat_x[high]
            into = spread if y is not None else np.empty(self.n)  # the first player's flows start y
            _scatter_lines(ys, sorted_ids, into)
            if y is None:
                y = into
            else:
                y += spread
        y *= self.unit  # the far terms' scale, once for every player (corrections are stored unscaled)
        return y

    def sweep(self, diagonal: np.ndarray, free: np.ndarray, transpose: bool):
        """``y -> M^-1 y``, an approximate inverse of the system ``(D - N)_FF`` (identity rows off
        the mask F = ``free``; N^T if ``transpose``), D = diag(``diagonal``), for preconditioning.

        ``M = T_1 D^-1 T_2 D^-1 ... T_P`` with ``T_p = D - U_p``, U_p player p's up moves between
        free profiles by their far expansion (no down moves, no near-tie corrections).  Each
        ``T_p`` is triangular along player p's sorted lines, solved by running sums in O(K) per
        line, so ``M^-1`` costs about a product.  ``M^-1`` sums the chain's paths that move the
        players in turn (any number of up moves of player P, then of P - 1, ...), a subset of
        the paths ``(D - N)^-1`` sums, and so is a close inverse where moves are mostly up.
        """
        scaled = diagonal / self.unit  # D in the far terms' unit (their rates times unit are N's)
        gain = np.divide(1.0, scaled, out=np.zeros(self.n), where=free)  # x_j = gain_j (y_j + flows in)
        outside = ~free

        def apply(y):
            gathered, gains_gathered, _ = self._work_buffers()
            x = y / self.unit
            x[outside] = 0.0
            for p, (sorted_ids, factors, _) in enumerate(self.lines):
                if p:
                    x *= scaled
                xs = _gather_lines(x, sorted_ids, gathered)
                # the gains gathered again each time: kept per player they would be P vectors of n
                gains = _gather_lines(gain, sorted_ids, gains_gathered)
                _solve_lines(xs, gains, self.up, factors, ascending=transpose)
                _scatter_lines(xs, sorted_ids, x)
            x[outside] = y[outside]
            return x

        return apply

    def _work_buffers(self):
        """Three vectors of n floats kept between products and sweeps (fresh ones cost page
        faults each time)."""
        if self._buffers is None:
            self._buffers = tuple(np.empty(self.n) for _ in range(3))
        return self._buffers

    def row(self, state: int, into: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The moves out of ``state``: target profiles and their scaled log rates (exact); with
        ``into``, the moves into it from those profiles (a column of N)."""
        coords = np.unravel_index(state, self.shape)
        targets, gains = [], []
        for p, k in enumerate(self.shape):
            others = [b for b in range(k) if b != coords[p]]
            profiles = np.array([coords] * len(others))
            profiles[:, p] = others
            ids = np.ravel_multi_index(profiles.T, self.shape)
            targets.append(ids)
            gains.append(self._payoff(p, ids) - self._payoff(p, np.array([state]))[0])
        gains = np.concatenate(gains)
        return np.concatenate(targets), self.log_rate(-gains if into else gains) - self.log_scale

    def _payoff(self, p, ids):
        return self.payoffs[p].reshape(-1)[ids]


def _chunks(sorted_ids):
    """Slices of about ``_CHUNK_PROFILES`` profiles across the lines of ``sorted_ids`` [K, L]."""
    k, width = sorted_ids.shape
    step = max(1, _CHUNK_PROFILES // k)
    return [slice(start, start + step) for start in range(0, width, step)]


def _gather_lines(values, sorted_ids, buffer):
    """``values`` along the lines of ``sorted_ids`` [K, L], as a [K, L] view of ``buffer``."""
    gathered = buffer.reshape(sorted_ids.shape)
    for lines in _chunks(sorted_ids):
        np.take(values, sorted_ids[:, lines], out=gathered[:, lines], mode="clip")  # ids are valid; "raise" copies
    return gathered


def _scatter_lines(gathered, sorted_ids, out):
    """``out[sorted_ids] = gathered``, line chunk by line chunk."""
    for lines in _chunks(sorted_ids):
        out[sorted_ids[:, lines]] = gathered[:, lines]


def _solve_lines(xs, gains, terms, factors, ascending):
    """In place, along every line (rows in order if ``ascending``, else in reverse):
    ``x_j = g_j (y_j + sum_t c_t sum_i x_i e^{-l_t |f_i - f_j|})``, i over the rows before j."""
    rows = range(len(xs)) if ascending else range(len(xs) - 1, -1, -1)
    running = [np.zeros_like(xs[0]) for _ in terms]
    flows = np.empty_like(xs[0])
    previous = None
    for j in rows:
        if previous is not None:
            gap = min(j, previous)
            for term, (run, (c, lam)) in enumerate(zip(running, terms)):
                run += xs[previous]
                for factor in factors[lam]:
                    run *= factor[gap]
                _add(flows, c, run, start=term == 0)
            xs[j] += flows
        xs[j] *= gains[j]
        previous = j


def _far(terms, d):
    return sum(c * np.exp(-lam * d) for c, lam in terms)


def _factors(gap, lambdas) -> dict:
    """``exp(-l gap)`` for each l, as a list of stored arrays whose product it is: an l that is
    the sum of two smaller ones (alpha-Rank's m alpha = (m - 1) alpha + alpha) reuses theirs."""
    factors = {0.0: []}
    for lam in sorted(lambdas):
        parts = next(([*factors[a], *factors[b]] for a in factors for b in factors
                      if a and b and len(factors[a]) == len(factors[b]) == 1 and math.isclose(a + b, lam)), None)
        factors[lam] = parts or [np.exp(-lam * gap)]
    return factors


def _spread(values, position, size):
    """``values`` at ``position`` of a zero array of ``size``."""
    dense = np.zeros(size)
    dense[position] = values
    return dense


def _add_running_sum(out, c, xs, factors, start=False):
    """``out_j += c sum_{i < j} x_i prod_{i <= t < j} w_t`` down the rows, w the product of ``factors``
    (``start``: ``out_j =``, and row 0 zero, so ``out`` needs no zeroing first)."""
    running = np.zeros_like(xs[0])
    if start:
        out[0] = 0.0
    for j in range(1, len(xs)):
        running += xs[j - 1]
        for factor in factors:
            running *= factor[j - 1]
        _add(out[j], c, running, start)


def _add(out, c, values, start=False):
    """``out += c values`` (``out = c values`` when ``start``), without forming ``c values`` when c
    is 1 or -1 (alpha-Rank's far terms)."""
    if start:
        np.multiply(values, c, out=out)
    elif c == 1:
        out += values
    elif c == -1:
        out -= values
    else:
        out += c * values
