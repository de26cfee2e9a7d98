"""The maximum-entropy CCE of a large game by constraint generation on its dual.

Same problem and dual as metaeval.solvers.mecce (maths, section 2.2): minimise over lambda >= 0

    f(lambda) = log sum_a exp(-(A^T lambda)_a),   sigma = softmax(-A^T lambda),
    gradient -A sigma (minus the deviation gains),  Hessian Cov_sigma(A columns),

but A (rows: deviations (p, a'_p); columns: joints) is never formed: A^T lambda is a
contraction of lambda with each player's payoffs (metaeval.solvers.cce_columns), A sigma
the deviation gains computed from sigma's marginals, both O(N joints). That is what a
game of 64 x 64 x 2,000 joints (8.2M) needs: its A has 2,128 x 8.2M entries (140 GB).

At the optimum few constraints bind. In king-of-the-hill games 0-2 model deviations and
3-6 of the prompt deviations have a positive multiplier (measured on 16 x 16 x 50 and
32 x 32 x 200 games of a simulated judge): the prompt player's payoff depends on the
models only, and few prompts are nearly the most separating. So the multipliers outside
a working set S stay at 0 and only S is optimised, by projected Newton (Bertsekas 1982)
with the Hessian's S x S block: row i of it is A (sigma * A_i), the deviation gains of
the signed measure sigma * A_i, O(N joints) per row. Rows enter S while their gain
exceeds GRADIENT_TOLERANCE (lambda_i = 0 is then not optimal), at most _ENTERING a round.
When no row outside S has a positive gain and S is at a KKT point, so is the full dual:
sigma is the maximum-entropy CCE, exactly as metaeval.solvers.mecce would find it.

sigma = softmax(...) is positive on every joint, so this suits games whose largest CCE
support is every joint (the king-of-the-hill games here: every joint keeps mass). Where
some joints are in no CCE's support the multipliers grow until those joints' mass no
longer shows in the KKT residual (1e-13 of the prisoner's dilemma's (defect, defect) in
30 steps); should they not get there, the solver stops with a clear error.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.runs import budget
from metaeval.solvers.cce_columns import GameColumns
from dataclasses import dataclass

from metaeval.solvers.mecce import FAILURE_TOLERANCE, GRADIENT_TOLERANCE, MaxEntropy

MAX_ITERATIONS = 200
_ENTERING = 32
_ARMIJO = 1e-4
_MAX_HALVINGS = 60


@dataclass
class RowsMaxEntropy(MaxEntropy):
    """[`metaeval.solvers.mecce.MaxEntropy`][metaeval.solvers.mecce.MaxEntropy] (no safeguards here) and the working set:
    ``rows`` holds ``constraint_rounds`` (rounds that added deviations), ``working_rows``
    and ``active_rows`` (positive multipliers) out of ``deviations``."""

    rows: dict


class _Dual:
    """f, sigma and the deviation gains of a game's CCE dual, from its (scaled) payoffs."""

    def __init__(self, game: MetaGame):
        budget.check_joints(game.shape, 4 * game.num_players + 4, "the constraint-generation MECCE")
        self.columns = GameColumns(game)
        self.payoffs = self.columns.payoffs
        self.shape = game.shape
        self.starts = self.columns.starts

    def row(self, index: int) -> np.ndarray:
        """A_i over every joint: G_p(a', a_-p) - G_p(a) for row i = (p, a')."""
        p = int(np.searchsorted(self.starts, index, side="right") - 1)
        payoff = self.payoffs[p]
        return np.take(payoff, [index - self.starts[p]], axis=p) - payoff

    def gains(self, measure: np.ndarray) -> np.ndarray:
        """A @ measure over every row: sum_a measure(a) (G_p(a', a_-p) - G_p(a))."""
        out = []
        for p, payoff in enumerate(self.payoffs):
            others = tuple(q for q in range(len(self.shape)) if q != p)
            opponents = measure.sum(axis=p)
            deviating = np.tensordot(payoff, opponents, axes=(others, tuple(range(len(others)))))
            out.append(deviating - float(np.vdot(measure, payoff)))
        return np.concatenate(out)

    def evaluate(self, lam: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(f, sigma, gains) at the full multiplier vector ``lam``."""
        logits = -self.columns.price(lam).reshape(self.shape)
        top = float(logits.max())
        sigma = np.exp(logits - top, out=logits)
        total = float(sigma.sum())
        sigma /= total
        return top + np.log(total), sigma, self.gains(sigma)

    def hessian(self, sigma: np.ndarray, gains: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cov_sigma(A columns) on ``rows``: row i is A (sigma * A_i) - gain_i * gains."""
        block = np.empty((len(rows), len(rows)))
        for n, i in enumerate(rows):
            block[n] = self.gains(sigma * self.row(i))[rows] - gains[i] * gains[rows]
        return (block + block.T) / 2


def _projected(lam: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    return np.where(lam > 0, gradient, np.minimum(gradient, 0.0))


def _line_search(dual: _Dual, lam, value, gains, direction, working):
    """Backtrack along the projected arc max(lambda + s d, 0) until f drops (Armijo) or, with
    f flat to rounding, the working rows' KKT residual halves (as metaeval.solvers.mecce)."""
    noise = 16 * np.finfo(float).eps * (1.0 + abs(value) + float(lam.sum()))
    residual = np.abs(_projected(lam[working], -gains[working])).max(initial=0.0)
    step = 1.0
    for _ in range(_MAX_HALVINGS):
        candidate = np.maximum(lam + step * direction, 0.0)
        trial, sigma, trial_gains = dual.evaluate(candidate)
        decrease = -gains @ (candidate - lam)
        if decrease < 0 and trial <= value + _ARMIJO * decrease:
            return candidate, trial, sigma, trial_gains
        flat = trial <= value + noise
        if flat and np.abs(_projected(candidate[working], -trial_gains[working])).max(initial=0.0) <= residual / 2:
            return candidate, trial, sigma, trial_gains
        step /= 2
    return None


def max_entropy_cce(game: MetaGame) -> MaxEntropy:
    """The maximum-entropy CCE of ``game`` (module docstring). Its KKT residual (largest
    projected-gradient entry over every deviation, in units of the largest payoff
    difference) is at most FAILURE_TOLERANCE, else MetaEvalError."""
    dual = _Dual(game)
    lam = np.zeros(dual.columns.num_rows)
    value, sigma, gains = dual.evaluate(lam)
    working = np.empty(0, dtype=np.int64)
    iterations = rounds = 0
    while True:
        outside = np.setdiff1d(np.flatnonzero(gains > GRADIENT_TOLERANCE), working)
        if outside.size:
            rounds += 1
            entering = outside[np.argsort(-gains[outside])[:_ENTERING]]
            working = np.union1d(working, entering)
        gradient = -gains[working]
        residual = float(np.abs(_projected(lam[working], gradient)).max(initial=0.0))
        if residual <= GRADIENT_TOLERANCE and not outside.size:
            break
        if iterations >= MAX_ITERATIONS:
            break
        iterations += 1
        point = lam[working]
        held = (point <= 0) & (gradient > 0)
        free = working[~held]
        direction = np.zeros_like(lam)
        if free.size:
            hessian = dual.hessian(sigma, gains, free)
            direction[free] = np.linalg.lstsq(hessian, gains[free], rcond=None)[0]  # -H^-1 gradient
        improved = _line_search(dual, lam, value, gains, direction, working)
        if improved is None:
            break
        lam, value, sigma, gains = improved
    residual = float(np.abs(_projected(lam, -gains)).max(initial=0.0))
    if residual > FAILURE_TOLERANCE:
        raise MetaEvalError(
            f"maximum-entropy CCE by constraint generation did not converge: KKT residual {residual:.3g} "
            f"(relative to the largest payoff difference, accepted {FAILURE_TOLERANCE:g}) after {iterations} "
            f"Newton steps on {working.size} of {lam.size} deviations; if some joints carry no mass in any CCE "
            "the multipliers diverge: rate a smaller game with the full solver"
        )
    return RowsMaxEntropy(sigma, iterations, residual, value, {},
                          {"constraint_rounds": rounds, "working_rows": int(working.size),
                           "active_rows": int((lam > 0).sum()), "deviations": int(lam.size)})
