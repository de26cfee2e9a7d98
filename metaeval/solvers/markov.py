"""Stationary distribution of a continuous-time Markov chain given by log transition rates.

Built for alpha-Rank (Omidshafiei et al. 2019, section 2.1.3): one state per joint pure
profile, sum_p (K_p - 1) transitions out of each, and rates that span hundreds of orders
of magnitude once the selection intensity alpha is large.  Rates are passed as logarithms
so that nothing underflows before the solver decides how to treat it.

Method.  Let ``q_max`` be the largest rate.  A transition is *strong* when its rate is at
least ``STRONG * q_max``.  The closed (sink) strongly connected components of the strong
transition graph are the chain's metastable classes; every other state is transient at
that scale and drains into the classes along strong paths.

* One class: fix pi at an anchor state of the class and solve the nonsingular M-matrix
  system ``pi_rest (D - Q)_rest = q_anchor`` for the others (the singular system
  ``pi Q = 0`` with the anchor's equation replaced by ``pi_anchor = 1``).
* Several classes (a nearly reducible chain): Courtois aggregation.  Each class's
  internal distribution comes from its own transitions (exact for single-state
  classes); absorption probabilities H[t, j] of every transient state t into each class j
  come from linear solves (in magnitude tiers, below); the class-to-class rates
  ``Lambda_ij = sum_{s in C_i, t} pi_i(s) q(s, t) H[t, j]`` are assembled in log space, so
  couplings far below the double-precision range survive; the macro chain is solved by
  this same function (it has fewer states, so the recursion ends); transient masses
  follow exactly from the balance ``pi_T (D - Q)_TT = pi_C Q_CT``.

A linear solve is accurate only relative to its largest unknown, yet a class's exit
flow may leave through a state of tiny mass, or reach another class through two
improbable steps; so class masses and absorption probabilities are solved in tiers:
unknowns below ``TIER`` of the largest are solved again at their own scale with the
reliable ones fixed, until every value the macro chain needs is reliable.

Aggregation perturbs a multi-state class's internal distribution by O(exit rate /
internal rate); a linear solve loses about eps / (smallest coupling it resolves);
``STRONG = 1e-8`` balances the two.  Against exact log-space GTH elimination the error is
~1e-15 on alpha-Rank chains at any alpha, and at most ~1e-7 on adversarial chains whose
rates are spread evenly over hundreds of orders of magnitude.  Linear systems are
M-matrices: dense LU up to ``DENSE_MAX`` unknowns, otherwise BiCGSTAB with Jacobi
preconditioning, or the system's own approximate inverse where it has one (the matrix-free
chains' line sweeps; GMRES if BiCGSTAB stalls), every answer checked by its backward error.
Every system is a principal submatrix of ``D - N`` (N the rates, or their transpose),
applied without copying N (`_MMatrix`), and state ids are int32 when they fit: a
64^3 alpha-Rank chain has 5e7 transitions.  A sparse LU is not used because these transition graphs
(Hamming graphs: states differing in one coordinate are adjacent) have no small
separators, so the factors fill in almost completely; power iteration is not used because
its step count grows like the inverse of the smallest relevant rate.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse import csgraph

from metaeval.errors import MetaEvalError
from metaeval.runs.threads import one_blas_thread

STRONG = 1e-8
DENSE_MAX = 1000
TIER = 1e-8
MAX_TIERS = 400
_BACKWARD_TOL = 1e-10
#: BiCGSTAB's relative residual at which it stops: Jacobi preconditioning, and the
#: matrix-free chains' line sweeps.  Swept solves take half the steps and stop nearer the
#: threshold, so their smallest masses (1e-45 of the largest on a 5 x 16 alpha-Rank chain)
#: were 6e-11 relative from those of a solve to 1e-16; at 1e-14, 1.9e-13, as Jacobi's at 1e-13.
_RTOL = 1e-13
_SWEPT_RTOL = 1e-14
RESIDUAL_TOL = 1e-9


def stationary_distribution(num_states: int, source, target, log_rate) -> tuple[np.ndarray, dict]:
    """pi with pi Q = 0, sum(pi) = 1, for the chain with rates exp(log_rate) on source -> target.

    Returns ``(pi, info)``; ``info["residual"]`` is ``||pi P - pi||_1`` for the uniformised
    chain ``P = I + Q / (largest exit rate)`` and ``info["levels"]`` the aggregation depth.
    Raises MetaEvalError if the chain is reducible or a solve does not converge.

    Args:
        num_states: the number of states.
        source: each transition's source state.
        target: each transition's target state.
        log_rate: each transition's log rate.

    Returns:
        ``(pi, info)``.
    """
    source, target = (_ids(x) for x in (source, target))
    log_rate = np.asarray(log_rate, dtype=np.float64)
    if not (source.shape == target.shape == log_rate.shape and source.ndim == 1):
        raise MetaEvalError("source, target and log_rate must be 1-D arrays of one length")
    if not (isinstance(num_states, (int, np.integer)) and num_states >= 1):
        raise MetaEvalError(f"num_states must be a positive integer, got {num_states!r}")
    if len(source) and (min(source.min(), target.min()) < 0 or max(source.max(), target.max()) >= num_states):
        raise MetaEvalError(f"transitions must join states 0..{num_states - 1}")
    index = np.int32 if num_states < 2**31 else np.int64
    source, target = source.astype(index, copy=False), target.astype(index, copy=False)
    if np.any(source == target):
        raise MetaEvalError("self-transitions are implicit; remove edges with source == target")
    if np.any(np.isnan(log_rate)) or np.any(log_rate == np.inf):
        raise MetaEvalError("log rates must be finite or -inf")
    pi, levels = _solve_chain(num_states, source, target, log_rate)
    residual = _residual(pi, source, target, log_rate)
    if not residual <= RESIDUAL_TOL:
        raise MetaEvalError(f"stationary distribution: residual ||pi P - pi|| = {residual:.3g} is too large")
    return pi, {"residual": residual, "levels": levels}


def _ids(states) -> np.ndarray:
    states = np.asarray(states)
    return states if states.dtype.kind in "iu" else states.astype(np.int64)


def _residual(pi, source, target, log_rate) -> float:
    rate = np.exp(log_rate - log_rate.max()) if len(log_rate) else log_rate
    flow = pi[source] * rate
    n = len(pi)
    net = np.bincount(target, flow, n) - np.bincount(source, flow, n)
    exits = np.bincount(source, rate, n)
    return float(np.abs(net).sum() / exits.max()) if len(rate) else 0.0


def _solve_chain(n, source, target, log_rate, depth=0) -> tuple[np.ndarray, int]:
    keep = np.isfinite(log_rate)
    if not keep.all():
        source, target, log_rate = source[keep], target[keep], log_rate[keep]
    if n == 1:
        return np.ones(1), 0
    if _num_components(n, source, target) > 1:
        if depth == 0:
            raise MetaEvalError(f"the Markov chain is reducible: its {n} states do not all communicate")
        raise MetaEvalError(
            "stationary distribution: couplings between metastable classes fell below the "
            "double-precision range; the chain cannot be resolved at these parameters"
        )
    log_rate = log_rate - log_rate.max()
    classes = _sink_classes(n, source, target, log_rate >= np.log(STRONG))
    if classes.max() == 0:
        in_class = np.flatnonzero(classes == 0)
        log_pi = _anchored(n, source, target, log_rate, np.arange(n), in_class, needed=None)
        return np.exp(log_pi), 1
    return _aggregate(n, source, target, log_rate, classes, depth)


def _num_components(n, source, target) -> int:
    """Strongly connected components of the transition graph."""
    graph = _csr(n, source, target, np.ones(len(source)))
    return csgraph.connected_components(graph, directed=True, connection="strong")[0]


def _csr(n, rows, cols, values) -> sp.csr_matrix:
    """The n x n matrix with ``values`` at (rows, cols), repeated entries adding up. When
    rows are sorted (alpha-Rank's transitions are) it is built directly, without the sort
    and copies of SciPy's COO conversion: seconds and a gigabyte on 5e7 transitions."""
    if np.any(rows[1:] < rows[:-1]):
        return sp.csr_matrix((values, (rows, cols)), shape=(n, n))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    return sp.csr_matrix((values, cols, indptr), shape=(n, n))


def _sink_classes(n, source, target, strong) -> np.ndarray:
    """Class index per state for the closed components of the strong graph, -1 elsewhere."""
    graph = _csr(n, source[strong], target[strong], np.ones(int(strong.sum())))
    _, component = csgraph.connected_components(graph, directed=True, connection="strong")
    leaves = component[source[strong]] != component[target[strong]]
    closed = np.ones(component.max() + 1, dtype=bool)
    closed[component[source[strong]][leaves]] = False
    index = np.full(len(closed), -1)
    index[closed] = np.arange(int(closed.sum()))
    return index[component]


def _anchored(n, source, target, log_rate, states, anchor_candidates, needed) -> np.ndarray:
    """log pi of the chain restricted to ``states`` (transitions inside only), normalised.

    Fixing pi = 1 at an anchor leaves the M-matrix system ``x (D - Q)_rest = q_anchor``.
    The anchor is the candidate with the largest in-rate / out-rate ratio, a one-step
    estimate of stationary mass, which keeps the system well scaled.  ``needed`` marks
    the states (in ``states`` order) whose tiny masses must keep their logarithms.
    """
    size = len(states)
    if size == 1:
        return np.zeros(1)
    if size == n:  # states is every state, in order (a single class): no copies
        rows, cols, log_values, candidates = source, target, log_rate, anchor_candidates
    else:
        local = np.full(n, -1, dtype=source.dtype)
        local[states] = np.arange(size)
        inside = (local[source] >= 0) & (local[target] >= 0)
        rows, cols, log_values = local[source[inside]], local[target[inside]], log_rate[inside]
        candidates = local[anchor_candidates]
    rate = np.exp(log_values)
    out_rate = np.bincount(rows, rate, size)
    in_rate = np.bincount(cols, rate, size)
    ratio = np.full(len(candidates), np.inf)  # a state with no exits holds all the mass
    with np.errstate(over="ignore"):
        np.divide(in_rate[candidates], out_rate[candidates], out=ratio, where=out_rate[candidates] > 0)
    anchor = int(candidates[np.argmax(ratio)])
    # Unknown x_v balances sum_u x_u q(u -> v): the off-diagonal part is Q transposed,
    # stored by rows so that each Krylov product gathers (1.7x faster on 5e7 transitions
    # than the scattering product of the transposed view, repaying the conversion).
    matrix = _MMatrix(out_rate, _csr(size, rows, cols, rate).T.tocsr())
    del rate
    known = np.full(size, np.nan)
    known[anchor] = 0.0
    log_pi = _tiered_solve(matrix, cols, rows, log_values, np.full(size, -np.inf), needed, known)
    return log_pi - np.logaddexp.reduce(log_pi)


def _tiered_solve(matrix, rows, cols, log_values, log_rhs, needed, known=None) -> np.ndarray:
    """log x with ``matrix @ x = b``, b = exp(log_rhs), for ``matrix = diag(d) - N`` (an _MMatrix),
    N[rows, cols] = exp(log_values) >= 0; ``known`` gives log x where fixed, NaN elsewhere.

    A linear solve is accurate to about TIER relative to the largest unknown.  Unknowns
    below that which are ``needed`` are re-solved in tiers: the reliable ones are fixed,
    their flows join the right-hand side (in log space) and the rest is solved again at
    its own scale, until every needed unknown is reliable.  All flows are positive, so no
    tier loses what the one before fixed.  ``needed=None`` stops after the first solve.
    """
    size = matrix.shape[0]
    log_x = np.full(size, np.nan) if known is None else known.copy()
    free = np.flatnonzero(np.isnan(log_x))
    for _ in range(MAX_TIERS):
        log_b = np.array(log_rhs, dtype=np.float64)
        if len(free) < size:
            is_free = np.zeros(size, dtype=bool)
            is_free[free] = True
            to_fixed = is_free[rows] & ~is_free[cols]
            np.logaddexp.at(log_b, rows[to_fixed], log_values[to_fixed] + log_x[cols[to_fixed]])
        shift = log_b[free].max() if len(free) else -np.inf
        if not np.isfinite(shift):
            log_x[free] = -np.inf  # the remaining unknowns are exactly zero
            return log_x
        y = np.maximum(_solve(matrix.principal(free), np.exp(log_b[free] - shift)), 0.0)
        with np.errstate(divide="ignore"):
            log_x[free] = np.log(y) + shift
        free = free[y < TIER * y.max()]
        if needed is None or not np.any(needed[free]):
            return log_x
    raise MetaEvalError("stationary distribution: tiered solve did not settle")


class _MMatrix:
    """``diag(d) - N`` restricted to the unknowns ``keep`` (all when None); N >= 0 is sparse
    with a zero diagonal.

    Principal submatrices are views, never copies of N: (N_KK x)_K = (N x~)_K where x~ is x
    on K and 0 elsewhere.
    """

    def __init__(self, diagonal, off, keep=None):
        self.full_diagonal, self.off, self.keep = diagonal, off, keep
        size = len(diagonal) if keep is None else len(keep)
        self.shape = (size, size)

    def diagonal(self) -> np.ndarray:
        return self.full_diagonal if self.keep is None else self.full_diagonal[self.keep]

    def principal(self, index) -> "_MMatrix":
        if len(index) == self.shape[0]:
            return self
        return _MMatrix(self.full_diagonal, self.off, index if self.keep is None else self.keep[index])

    def off_product(self, x) -> np.ndarray:
        """N_KK @ x."""
        if self.keep is None:
            return self.off @ x
        spread = np.zeros((self.off.shape[1], *x.shape[1:]))
        spread[self.keep] = x
        return (self.off @ spread)[self.keep]

    def __matmul__(self, x) -> np.ndarray:
        return _scale_rows(self.diagonal(), x) - self.off_product(x)

    def preconditioner(self):
        """``(v -> ~matrix^-1 v, BiCGSTAB's relative tolerance)``: the off-diagonal part's own
        approximate inverse (a matrix-free chain's line sweeps) where it has one, else Jacobi's
        ``v / d``."""
        sweep = getattr(self.off, "sweep", None)
        if sweep is not None and self.keep is None:
            return sweep(self.full_diagonal), _SWEPT_RTOL
        diagonal = self.diagonal()
        return (lambda v: v / diagonal), _RTOL

    def absolute_product(self, x) -> np.ndarray:
        """|matrix| @ |x|, which is diag(d) |x| + N |x| because N >= 0."""
        x = np.abs(x)
        return _scale_rows(np.abs(self.diagonal()), x) + self.off_product(x)

    def toarray(self) -> np.ndarray:
        if not sp.issparse(self.off):  # a matrix-free N: one product per column
            return np.column_stack([self @ column for column in np.eye(self.shape[0])])
        off = self.off if self.keep is None else self.off[self.keep][:, self.keep]
        return np.diag(self.diagonal()) - off.toarray()


def _scale_rows(d, x):
    return d * x if x.ndim == 1 else d[:, None] * x


def _aggregate(n, source, target, log_rate, classes, depth) -> tuple[np.ndarray, int]:
    num_classes = int(classes.max()) + 1
    in_class = classes >= 0
    exits = in_class[source] & (classes[target] != classes[source])
    gateway = np.zeros(n, dtype=bool)
    gateway[source[exits]] = True
    log_within = np.full(n, -np.inf)
    order = np.argsort(classes, kind="stable")
    bounds = np.searchsorted(classes[order], np.arange(num_classes + 1))
    for c in range(num_classes):
        members = order[bounds[c] : bounds[c + 1]]
        log_within[members] = _anchored(n, source, target, log_rate, members, members, gateway[members])

    transient = np.flatnonzero(~in_class)
    local = np.full(n, -1, dtype=source.dtype)
    local[transient] = np.arange(len(transient))
    log_absorb = np.full((n, num_classes), -np.inf)  # log P(first class reached is j | start s)
    log_absorb[in_class, classes[in_class]] = 0.0
    if len(transient):
        out_rate, rows, cols, log_values, log_into = _transient_system(n, source, target, log_rate, classes, local)
        absorb = _MMatrix(out_rate, _csr(len(transient), rows, cols, np.exp(log_values)))
        entered = np.zeros(len(transient), dtype=bool)
        entered[local[target[exits & ~in_class[target]]]] = True
        for j in range(num_classes):
            log_absorb[transient, j] = np.minimum(
                _tiered_solve(absorb, rows, cols, log_values, log_into[:, j], entered), 0.0
            )

    # Class-to-class rates: sum over exits s -> t of pi_i(s) q(s, t) H[t, j], in log space.
    terms = (log_within[source[exits]] + log_rate[exits])[:, None] + log_absorb[target[exits]]
    from_class = classes[source[exits]]
    peak = np.full((num_classes, num_classes), -np.inf)
    np.maximum.at(peak, from_class, terms)
    finite_peak = np.where(np.isfinite(peak), peak, 0.0)
    total = np.zeros_like(peak)
    np.add.at(total, from_class, np.exp(terms - finite_peak[from_class]))
    with np.errstate(divide="ignore"):
        macro_log = finite_peak + np.log(total)
    np.fill_diagonal(macro_log, -np.inf)
    i, j = np.nonzero(np.isfinite(macro_log))
    macro_pi, levels = _solve_chain(num_classes, i, j, macro_log[i, j], depth + 1)

    with np.errstate(divide="ignore"):
        log_class_mass = np.log(macro_pi)
    pi = np.where(in_class, np.exp(log_within + log_class_mass[np.maximum(classes, 0)]), 0.0)
    if len(transient):
        # Transient masses from the balance pi_T (D - Q)_TT = pi_C Q_CT (absolute accuracy).
        feed = in_class[source] & ~in_class[target]
        inflow = np.bincount(local[target[feed]], pi[source[feed]] * np.exp(log_rate[feed]), len(transient))
        drain_t = _MMatrix(out_rate, absorb.off.T.tocsr())
        pi[transient] = np.maximum(_solve(drain_t, inflow), 0.0)
    return pi / pi.sum(), levels + 1


def _transient_system(n, source, target, log_rate, classes, local):
    """Exit rates of transient states, their transitions among themselves, log rates into classes."""
    size = int(local.max()) + 1
    from_t = local[source] >= 0
    out_rate = np.bincount(local[source[from_t]], np.exp(log_rate[from_t]), size)
    within = from_t & (local[target] >= 0)
    to_class = from_t & (classes[target] >= 0)
    log_into = np.full((size, int(classes.max()) + 1), -np.inf)
    np.logaddexp.at(log_into, (local[source[to_class]], classes[target[to_class]]), log_rate[to_class])
    return out_rate, local[source[within]], local[target[within]], log_rate[within], log_into


def _solve(matrix: _MMatrix, rhs: np.ndarray) -> np.ndarray:
    """x with ``matrix @ x = rhs`` for a nonsingular M-matrix; rhs may have several columns.

    Each column is scaled to unit maximum first, so right-hand sides far below the
    double range (flows out of deep metastable classes) are solved at full precision.
    """
    columns = rhs.reshape(len(rhs), -1)
    scale = np.abs(columns).max(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    columns = columns / scale
    # Threaded BLAS costs more than it saves here on a busy 2-core machine: a dense 511 x 511
    # solve took 64 CPU ms on two threads and 3.4 on one; Krylov methods make many BLAS-1
    # calls on long vectors, each taking milliseconds threaded.
    with one_blas_thread():
        if matrix.shape[0] <= DENSE_MAX:
            solution = np.linalg.solve(matrix.toarray(), columns)
            _check_backward_error(matrix, solution, columns)
        else:
            solution = np.column_stack([_krylov(matrix, b) for b in columns.T])
    return (solution * scale).reshape(rhs.shape)


def _krylov(matrix, rhs):
    approximate_inverse, rtol = matrix.preconditioner()
    preconditioner = spla.LinearOperator(matrix.shape, approximate_inverse, dtype=np.float64)
    operator = spla.LinearOperator(matrix.shape, matrix.__matmul__, dtype=np.float64)
    # Started from the preconditioner's guess: from zero, a right-hand side on a few states
    # (the anchor's moves) broke BiCGSTAB down in its first step on alpha-Rank chains, which
    # left GMRES, 100 vectors of the system's size, to do the solve.
    x, info = spla.bicgstab(operator, rhs, x0=preconditioner @ rhs, M=preconditioner, rtol=rtol, atol=0.0,
                            maxiter=1000)
    if info == 0 and _backward_error_ok(matrix, x, rhs):
        return x  # checked once: each check is two products with the matrix
    x, info = spla.gmres(
        operator, rhs, M=preconditioner, rtol=rtol, atol=0.0, restart=100, maxiter=50,
        callback_type="pr_norm",
    )
    _check_backward_error(matrix, x, rhs)
    return x


def _backward_error_ok(matrix, x, rhs) -> bool:
    scale = matrix.absolute_product(x).sum() + np.abs(rhs).sum()
    return bool(np.all(np.isfinite(x))) and np.abs(matrix @ x - rhs).sum() <= _BACKWARD_TOL * scale


def _check_backward_error(matrix, x, rhs):
    if not _backward_error_ok(matrix, x, rhs):
        raise MetaEvalError(
            f"stationary distribution: a linear solve with {matrix.shape[0]} unknowns did not "
            "converge; the chain is too ill-conditioned at these parameters"
        )
