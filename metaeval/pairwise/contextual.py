"""Bradley-Terry with covariates (style control) and Davidson ties, and its sandwich covariance.

A battle between a and b with covariates x (a's response relative to b's: length,
headers, ...) has the log-odds ``d = theta_a - theta_b + x . beta``; the scores theta
and the coefficients beta are fitted jointly (contextual Bradley-Terry, as the arena's
style control does).  Ties are half a win for each side (``ties="half"``), or a third
outcome (``ties="davidson"``, Davidson 1970):

    P(a) = e^{d/2} / D,   P(b) = e^{-d/2} / D,   P(tie) = nu / D,   D = e^{d/2} + e^{-d/2} + nu,

with nu = e^tau fitted too; P(a wins | not a tie) is sigma(d) in both models.

The fit is Newton's method on the duplicate-compressed cells of `BattleCounts` (every
sum over battles is a sum over cells weighted by their counts), in the mean-0 gauge of
the scores.  The sandwich covariance ``H^-1 B H^-1`` takes H, the Hessian of the negative
log-likelihood, and B, the sum over battles of the outer products of their gradients;
both are assembled over cells in one pass each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from metaeval.errors import MetaEvalError
from metaeval.pairwise.battles import BattleCounts, components
from metaeval.ratings.elo import fit_batch
from metaeval.runs.threads import one_blas_thread

TIES = ("half", "davidson")
NEWTON_TOLERANCE = 1e-12
"""Largest accepted gradient entry, per battle (the likelihood is a sum over battles)."""


@dataclass(frozen=True)
class Fit:
    """A fitted model: ``theta`` (natural-log units, mean 0), ``beta`` (per covariate),
    ``tau`` (log nu, Davidson only, else None) and ``covariance`` of all of them in that
    order (sandwich, mean-0 gauge), when asked for."""

    theta: np.ndarray
    beta: np.ndarray
    tau: float | None
    covariance: np.ndarray | None = None

    @property
    def parameters(self) -> np.ndarray:
        return np.r_[self.theta, self.beta, [] if self.tau is None else [self.tau]]


def fit(counts: BattleCounts, ties: str = "half", ridge: float = 0.0, sandwich: bool = False,
        hessian_ridge: float = 0.0, count: np.ndarray | None = None, start: np.ndarray | None = None,
        iterations: int = 100) -> Fit:
    """The maximum-likelihood scores, coefficients (and tie parameter) of the battles.

    Args:
        counts: the battles' cells, with covariates or without.
        ties: ``"half"`` or ``"davidson"``.
        ridge: L2 penalty ``ridge * N / 2 * |beta|^2`` on the coefficients (N battles).
        sandwich: also compute the sandwich covariance.
        hessian_ridge: per battle, added to the Hessian's diagonal before it is inverted
            for the sandwich (some implementations do so; 0 inverts in the mean-0 gauge).
        count: cell counts replacing ``counts.count`` (a bootstrap round).
        start: starting parameters (e.g. the full-data fit, for a bootstrap round).
        iterations: the most Newton steps.

    Returns:
        The fit.
    """
    if ties not in TIES:
        raise MetaEvalError(f"unknown ties {ties!r}; choose {' or '.join(TIES)}")
    if not (np.isfinite(ridge) and ridge >= 0) or not (np.isfinite(hessian_ridge) and hessian_ridge >= 0):
        raise MetaEvalError(f"ridge and hessian_ridge must be finite numbers >= 0, got {ridge}, {hessian_ridge}")
    with one_blas_thread():  # many small solves: BLAS threads cost more than they give
        return _fit(counts, ties, ridge, sandwich, hessian_ridge, count, start, iterations)


def _fit(counts, ties, ridge, sandwich, hessian_ridge, count, start, iterations) -> Fit:
    cells = Cells(counts, counts.count if count is None else count, ties)
    if cells.t and not (cells.tie * cells.mass).any():
        raise MetaEvalError("Davidson ties need battles with ties (their probability would be 0)")
    params = _start(counts, cells) if start is None else np.array(start, dtype=np.float64)
    battles = float((counts.count if count is None else count).sum())
    penalty = np.r_[np.zeros(cells.k), np.full(cells.m, ridge * battles), np.zeros(cells.t)]
    scale = max(float(cells.mass.sum()), 1e-300)

    def objective(p):
        return cells.value(p) + 0.5 * (penalty * p * p).sum() + 0.5 * scale * cells.k * p[: cells.k].mean() ** 2

    value = objective(params)
    for _ in range(iterations):
        gradient, hessian = cells.derivatives(params)
        gradient += penalty * params
        gradient[: cells.k] += params[: cells.k].mean() * scale  # the gauge: mean(theta) = 0
        if np.abs(gradient).max() <= NEWTON_TOLERANCE * scale:
            break
        hessian[np.diag_indices(cells.size)] += penalty
        hessian[: cells.k, : cells.k] += scale / cells.k
        step = np.linalg.solve(hessian, -gradient)
        length = 1.0  # halved until the objective does not get worse (rounding allowed)
        while (trial := objective(params + length * step)) > value + 1e-12 * abs(value) and length > 1e-10:
            length /= 2
        params, value = params + length * step, trial
    else:
        raise MetaEvalError(f"Bradley-Terry fit did not converge: gradient {np.abs(gradient).max():.3g} "
                            f"after {iterations} Newton steps")
    params[: cells.k] -= params[: cells.k].mean()
    covariance = None
    if sandwich:
        _, hessian = cells.derivatives(params)
        hessian[np.diag_indices(cells.size)] += penalty
        if hessian_ridge:
            hessian[np.diag_indices(cells.size)] += hessian_ridge * battles
        else:
            hessian[: cells.k, : cells.k] += scale / cells.k  # invertible; B ignores this direction
        meat = cells.outer(params, penalty * params)
        inverse = np.linalg.inv(hessian)
        covariance = inverse @ meat @ inverse
    return Fit(params[: cells.k], params[cells.k: cells.k + cells.m],
               float(params[-1]) if cells.t else None, covariance)


class Cells:
    """The cells' arrays and the per-cell derivatives of the log-likelihood in (d, tau)."""

    def __init__(self, counts: BattleCounts, count: np.ndarray, ties: str):
        self.a, self.b, self.k = counts.a, counts.b, len(counts.models)
        self.x = np.empty((len(counts.a), 0)) if counts.covariates is None else counts.covariates
        self.m, self.t = self.x.shape[1], int(ties == "davidson")
        self.size = self.k + self.m + self.t
        self.mass = np.asarray(count, dtype=np.float64) * counts.weight  # weighted battles per cell
        self.weight = counts.weight
        self.count = np.asarray(count, dtype=np.float64)
        self.won = np.select([counts.outcome == 0, counts.outcome == 1], [1.0, 0.0], 0.5)
        self.tie = (counts.outcome == 2).astype(np.float64)
        self.ya = (counts.outcome == 0).astype(np.float64)  # a won
        self.yb = (counts.outcome == 1).astype(np.float64)  # b won

    def logits(self, params):
        d = params[self.a] - params[self.b]
        if self.m:
            d = d + self.x @ params[self.k: self.k + self.m]
        return d

    def log_likelihood(self, params):
        """Per cell: the log-likelihood of one battle."""
        d = self.logits(params)
        if not self.t:
            return self.won * d - np.logaddexp(0.0, d)
        return (self.ya - self.yb) * d / 2 + self.tie * params[-1] - self.log_denominator(d, params[-1])

    @staticmethod
    def log_denominator(d, tau):
        """log(e^{d/2} + e^{-d/2} + e^tau), computed stably."""
        top = np.maximum(np.abs(d) / 2, tau)
        return top + np.log(np.exp(d / 2 - top) + np.exp(-d / 2 - top) + np.exp(tau - top))

    def terms(self, params):
        """Per cell: the first derivatives of one battle's log-likelihood in d and tau, and
        minus its second derivatives (dd, dtau, tautau); None for tau without Davidson ties."""
        d = self.logits(params)
        if not self.t:
            p = expit(d)
            return self.won - p, None, p * (1 - p), None, None
        tau = params[-1]
        log_d = self.log_denominator(d, tau)
        pa, pb, pt = np.exp(d / 2 - log_d), np.exp(-d / 2 - log_d), np.exp(tau - log_d)
        diff = pa - pb
        return ((self.ya - self.yb - diff) / 2, self.tie - pt,
                ((pa + pb) - diff**2) / 4, -pt * diff / 2, pt * (1 - pt))

    def derivatives(self, params):
        """Gradient and Hessian of the weighted negative log-likelihood."""
        gd, gt, hdd, hdt, htt = self.terms(params)
        gradient = -self.vector(self.mass * gd, None if gt is None else self.mass * gt)
        hessian = self.matrix(self.mass * hdd, None if hdt is None else self.mass * hdt,
                              None if htt is None else self.mass * htt)
        return gradient, hessian

    def value(self, params):
        """The weighted negative log-likelihood."""
        return -(self.mass * self.log_likelihood(params)).sum()

    def outer(self, params, shift):
        """B: the sum over battles of g g^T, g a battle's gradient of the (penalised)
        objective; a cell of c battles of weight w contributes c w^2 (per-battle gradient)^2."""
        gd, gt, *_ = self.terms(params)
        per_battle = self.count * self.weight**2
        total = self.count.sum()
        meat = self.matrix(per_battle * gd**2, None if gt is None else per_battle * gd * gt,
                           None if gt is None else per_battle * gt**2)
        # the penalty's share of each battle's gradient, shift / N, centres the sum
        return meat - np.outer(shift, shift) / max(total, 1e-300)

    def vector(self, sd, st):
        """sum over cells of s_d J_d + s_t e_tau, J_d = e_a - e_b + x the gradient of d."""
        k = self.k
        out = np.zeros(self.size)
        out[:k] = np.bincount(self.a, sd, k) - np.bincount(self.b, sd, k)
        out[k: k + self.m] = self.x.T @ sd
        if self.t and st is not None:
            out[-1] = st.sum()
        return out

    def matrix(self, dd, dt, tt):
        """sum over cells of dd J_d J_d^T + dt (J_d e_tau^T + e_tau J_d^T) + tt e_tau e_tau^T."""
        k, m = self.k, self.m
        out = np.zeros((self.size, self.size))
        pair = np.bincount(self.a * k + self.b, dd, k * k).reshape(k, k)
        block = -(pair + pair.T)
        block[np.diag_indices(k)] += np.bincount(self.a, dd, k) + np.bincount(self.b, dd, k)
        out[:k, :k] = block
        if m:
            weighted = dd[:, None] * self.x
            cross = np.stack([np.bincount(self.a, weighted[:, j], k) - np.bincount(self.b, weighted[:, j], k)
                              for j in range(m)], axis=1)
            out[:k, k: k + m], out[k: k + m, :k] = cross, cross.T
            out[k: k + m, k: k + m] = self.x.T @ weighted
        if self.t:
            column = self.vector(dt, None)[: k + m]
            out[: k + m, -1] = out[-1, : k + m] = column
            out[-1, -1] = tt.sum()
        return out



def _start(counts: BattleCounts, cells: Cells) -> np.ndarray:
    """Plain Bradley-Terry scores (coefficients 0, nu 1): a few Newton steps from the answer."""
    wins = counts.wins()
    theta = fit_batch(wins[None])[0] if len(components(wins, counts.models)) == 1 else np.zeros(cells.k)
    return np.r_[theta, np.zeros(cells.m + cells.t)]
