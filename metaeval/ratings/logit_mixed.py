"""Branch equations of large games whose passes over the payoffs are half in float32.

A step of the logit tracer (`metaeval.ratings.logit.trace_logit_branch`) builds the
Jacobian at its predicted point x and evaluates the residuals at the corrector's iterates
x'; on large games each is a pass over every player's payoff tensor at the speed of
memory. Here, with q the first opponent of player p, the Jacobian and every residual
first contract G_p with x_q:

- in float64 (a tensor K_q times smaller), kept as the base C_p; or, where the bound
  below allows, as C_p plus a pass over a float32 copy of G_p (half the bytes)
  contracted with x_q - x_q(C_p), x_q's change since C_p's point. That pass's error is at
  most (K_q + 3) 2^-24 max|G_p| |x_q - x_q(C_p)|_1, and the residuals multiply
  differences of two payoffs by lambda; where 2 lambda times that bound exceeds
  MIXED_TOLERANCE (a tenth of the corrector's tolerance) the contraction is a float64
  pass, which becomes the base. The corrector's steps shrink, so its later iterates are
  mostly within the bound again (at 4 x 64, where lambda reaches 1e5, 57% of the
  residuals were float64 passes when every change was from the Jacobian's point), and so
  is the next step's Jacobian where the step is short (at 7 x 9, 45% of the Jacobians).
- the Jacobian takes G_p(., x_-p), the residual at its point, and every block but q's
  from that contraction; q's block dG_p / dx_q is a pass over the float32 copy: a chord
  corrector and the tangent only need it close.
- a residual at x' contracts it with x'_-p,q.

So a Jacobian reads one float64 tensor and a float32 one, or two float32 ones, instead of
two float64 tensors, and a corrector iterate mostly a float32 tensor instead of a float64
one. The points the corrector accepts move within its tolerance of the branch; the end
point is confirmed (`max_regret`) and refined in float64, so the equilibrium selected is
the branch's limit as before.
"""

from __future__ import annotations

import numpy as np

from metaeval.ratings import logit

#: Tensors of at least this many entries (and 3 players or more) are traced this way;
#: smaller ones stay in cache, where float32 saves nothing.
MIXED_SIZE = 2**20
#: Largest bound on a residual's error from the float32 pass (module docstring).
MIXED_TOLERANCE = 1e-5
FLOAT32_ROUNDING = 2.0**-24


def applies(payoffs: np.ndarray) -> bool:
    """Whether `MixedEquations` traces this game (at least 3 players, MIXED_SIZE entries)."""
    return payoffs.ndim >= 4 and payoffs[0].size >= MIXED_SIZE


class MixedEquations(logit.Contractions):
    """The branch equations (called as `logit._branch_equations`) with the contractions of
    the module docstring; float32 copies of the payoffs are made on first use."""

    def __init__(self, payoffs: np.ndarray):
        super().__init__(payoffs)
        self.single = {}  # player -> (float32 copy of G_p, max |G_p|)
        self.base = {}  # player -> (x_q, C_p) of the last float64 pass
        self.lam = 0.0

    def __call__(self, payoffs, v, offsets, jacobian=True):
        self.lam = abs(float(v[-1]))
        return logit._branch_equations(payoffs, v, offsets, jacobian, contractions=self)

    def cross(self, p, x):
        q = _first_opponent(p)
        axes = list(range(len(x)))
        rest = [a for a in axes if a != q]
        found = logit._all_cross_payoffs(self._against(p, x[q]), x, p, axes=rest)  # float64; first, for _payoff_from
        single = [s.astype(np.float32) for s in x]
        block, kept = logit._contract_axes(self._single(p)[0], axes, [r for r in rest if r != p], single)
        found[q] = (block if kept[0] == p else block.T).astype(np.float64)
        return found

    def values(self, p, x):
        if p not in self.base:
            return super().values(p, x)
        q = _first_opponent(p)
        rest = [a for a in range(len(x)) if a != q]
        return logit._contract_axes(self._against(p, x[q]), rest, [r for r in rest if r != p], x)[0]

    def _against(self, p, x_q):
        """G_p contracted with x_q: the last float64 contraction C_p plus a float32 pass over
        x_q's change since C_p's point where that pass's bound allows it, else a float64 pass,
        which becomes C_p."""
        q = _first_opponent(p)
        if p in self.base:
            start, base = self.base[p]
            change = x_q - start
            single, largest = self._single(p)
            bound = 2 * self.lam * (len(change) + 3) * FLOAT32_ROUNDING * largest * float(np.abs(change).sum())
            if bound <= MIXED_TOLERANCE:
                return base + logit._contract(single, change.astype(np.float32), q)
        base = logit._contract(self.payoffs[p], x_q, q)
        self.base[p] = x_q.copy(), base
        return base

    def _single(self, p):
        if p not in self.single:
            payoff = self.payoffs[p]
            self.single[p] = payoff.astype(np.float32), max(float(payoff.max()), -float(payoff.min()))
        return self.single[p]


def _first_opponent(p: int) -> int:
    """The opponent whose strategy the base C_p is contracted with: the first axis after p's
    own (rows of the tensor read in order)."""
    return 1 if p == 0 else 0
