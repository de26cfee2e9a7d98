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
  come from linear solves; the class-to-class rates
  ``Lambda_ij = sum_{s in C_i, t} pi_i(s) q(s, t) H[t, j]`` are assembled in log space, so
  couplings far below the double-precision range survive; the macro chain is solved by
  this same function (it has fewer states, so the recursion ends); transient masses
  follow exactly from the balance ``pi_T (D - Q)_TT = pi_C Q_CT``.

Aggregation perturbs a multi-state class's internal distribution by O(exit rate /
internal rate) < O(STRONG); a linear solve loses about eps / STRONG; ``STRONG = 1e-8``
balances the two.  Linear systems are M-matrices: dense LU up to ``DENSE_MAX`` unknowns,
otherwise BiCGSTAB with Jacobi preconditioning (GMRES if BiCGSTAB stalls), every answer
checked by its backward error.  A sparse LU is not used because these transition graphs
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

STRONG = 1e-8
DENSE_MAX = 1000
_BACKWARD_TOL = 1e-10


def stationary_distribution(num_states: int, source, target, log_rate) -> tuple[np.ndarray, dict]:
    """pi with pi Q = 0, sum(pi) = 1, for the chain with rates exp(log_rate) on source -> target.

    Returns ``(pi, info)``; ``info["residual"]`` is ``||pi P - pi||_1`` for the uniformised
    chain ``P = I + Q / (largest exit rate)`` and ``info["levels"]`` the aggregation depth.
    Raises MetaEvalError if the chain is reducible or a solve does not converge.
    """
    source = np.asarray(source, dtype=np.int64)
    target = np.asarray(target, dtype=np.int64)
    log_rate = np.asarray(log_rate, dtype=np.float64)
    if not (source.shape == target.shape == log_rate.shape and source.ndim == 1):
        raise MetaEvalError("source, target and log_rate must be 1-D arrays of one length")
    if np.any(source == target):
        raise MetaEvalError("self-transitions are implicit; remove edges with source == target")
    if np.any(np.isnan(log_rate)) or np.any(log_rate == np.inf):
        raise MetaEvalError("log rates must be finite or -inf")
    pi, levels = _solve_chain(num_states, source, target, log_rate)
    return pi, {"residual": _residual(pi, source, target, log_rate), "levels": levels}


def _residual(pi, source, target, log_rate) -> float:
    rate = np.exp(log_rate - log_rate.max()) if len(log_rate) else log_rate
    flow = pi[source] * rate
    n = len(pi)
    net = np.bincount(target, flow, n) - np.bincount(source, flow, n)
    exits = np.bincount(source, rate, n)
    return float(np.abs(net).sum() / exits.max()) if len(rate) else 0.0


def _solve_chain(n, source, target, log_rate) -> tuple[np.ndarray, int]:
    keep = np.isfinite(log_rate)
    source, target, log_rate = source[keep], target[keep], log_rate[keep]
    if n == 1:
        return np.ones(1), 0
    if len(log_rate) == 0:
        raise MetaEvalError(f"the Markov chain is reducible: {n} states and no transitions")
    rate = np.exp(log_rate - log_rate.max())
    classes = _sink_classes(n, source, target, rate >= STRONG)
    num_classes = int(classes.max()) + 1
    if num_classes == 1:
        anchor_set = np.flatnonzero(classes == 0)
        return _anchored(n, source, target, rate, np.arange(n), anchor_set), 1
    return _aggregate(n, source, target, rate, log_rate - log_rate.max(), classes)


def _sink_classes(n, source, target, strong) -> np.ndarray:
    """Class index per state for the closed components of the strong graph, -1 elsewhere."""
    graph = sp.csr_matrix(
        (np.ones(int(strong.sum())), (source[strong], target[strong])), shape=(n, n)
    )
    _, component = csgraph.connected_components(graph, directed=True, connection="strong")
    leaves = component[source[strong]] != component[target[strong]]
    closed = np.ones(component.max() + 1, dtype=bool)
    closed[component[source[strong]][leaves]] = False
    index = np.full(len(closed), -1)
    index[closed] = np.arange(int(closed.sum()))
    return index[component]


def _anchored(n, source, target, rate, states, anchor_candidates) -> np.ndarray:
    """Stationary distribution of the chain restricted to ``states`` (transitions inside only).

    The anchor is the candidate with the largest in-rate / out-rate ratio, a one-step
    estimate of stationary mass, which keeps the anchored system well scaled.
    """
    size = len(states)
    if size == 1:
        return np.ones(1)
    local = np.full(n, -1)
    local[states] = np.arange(size)
    inside = (local[source] >= 0) & (local[target] >= 0)
    rows, cols, values = local[source[inside]], local[target[inside]], rate[inside]
    out_rate = np.bincount(rows, values, size)
    in_rate = np.bincount(cols, values, size)
    score = np.full(size, -1.0)
    candidates = local[anchor_candidates]
    out_c = out_rate[candidates]
    score[candidates] = np.where(out_c > 0, in_rate[candidates] / np.where(out_c > 0, out_c, 1), np.inf)
    anchor = int(np.argmax(score))
    others = np.arange(size) != anchor
    generator = sp.csr_matrix((values, (rows, cols)), shape=(size, size))
    system = (sp.diags(out_rate) - generator)[others][:, others]
    inflow = generator[anchor].toarray().ravel()[others]
    pi = np.insert(_solve(system.T.tocsr(), inflow), anchor, 1.0)
    return pi / pi.sum()


def _aggregate(n, source, target, rate, log_rate, classes) -> tuple[np.ndarray, int]:
    num_classes = int(classes.max()) + 1
    pi_within = np.zeros(n)
    order = np.argsort(classes, kind="stable")
    bounds = np.searchsorted(classes[order], np.arange(num_classes + 1))
    for c in range(num_classes):
        members = order[bounds[c] : bounds[c + 1]]
        pi_within[members] = _anchored(n, source, target, rate, members, members)

    transient = np.flatnonzero(classes < 0)
    local = np.full(n, -1)
    local[transient] = np.arange(len(transient))
    log_absorb = np.full((n, num_classes), -np.inf)  # log P(first class reached is j | start s)
    in_class = classes >= 0
    log_absorb[in_class, classes[in_class]] = 0.0
    if len(transient):
        drain, into_class = _transient_system(n, source, target, rate, classes, local, len(transient))
        absorb = np.clip(_solve(drain, into_class), 0.0, 1.0)
        with np.errstate(divide="ignore"):
            log_absorb[transient] = np.log(absorb)

    # Class-to-class rates: sum over exits s -> t of pi_i(s) q(s, t) H[t, j], in log space.
    exits = in_class[source] & (classes[target] != classes[source])
    with np.errstate(divide="ignore"):
        log_flow = np.log(pi_within[source[exits]]) + log_rate[exits]
    terms = log_flow[:, None] + log_absorb[target[exits]]
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
    macro_pi, levels = _solve_chain(num_classes, i, j, macro_log[i, j])

    pi = np.where(in_class, pi_within * macro_pi[np.maximum(classes, 0)], 0.0)
    if len(transient):
        feed = in_class[source] & (local[target] >= 0)
        inflow = np.bincount(local[target[feed]], pi[source[feed]] * rate[feed], len(transient))
        pi[transient] = np.maximum(_solve(drain.T.tocsr(), inflow), 0.0)
    return pi / pi.sum(), levels + 1


def _transient_system(n, source, target, rate, classes, local, size):
    """(D - Q)_TT over transient states (D = total exit rates) and the rates into each class."""
    from_t = local[source] >= 0
    out_rate = np.bincount(local[source[from_t]], rate[from_t], size)
    within = from_t & (local[target] >= 0)
    generator = sp.csr_matrix(
        (rate[within], (local[source[within]], local[target[within]])), shape=(size, size)
    )
    to_class = from_t & (classes[target] >= 0)
    into_class = np.zeros((size, int(classes.max()) + 1))
    np.add.at(into_class, (local[source[to_class]], classes[target[to_class]]), rate[to_class])
    return (sp.diags(out_rate) - generator).tocsr(), into_class


def _solve(matrix: sp.csr_matrix, rhs: np.ndarray) -> np.ndarray:
    """x with ``matrix @ x = rhs`` for a nonsingular M-matrix; rhs may have several columns."""
    if matrix.shape[0] <= DENSE_MAX:
        solution = np.linalg.solve(matrix.toarray(), rhs)
        _check_backward_error(matrix, solution, rhs)
        return solution
    columns = rhs.reshape(len(rhs), -1)
    solution = np.column_stack([_krylov(matrix, b) for b in columns.T])
    return solution.reshape(rhs.shape)


def _krylov(matrix, rhs):
    diagonal = matrix.diagonal()
    jacobi = spla.LinearOperator(matrix.shape, lambda v: v / diagonal, dtype=np.float64)
    x, info = spla.bicgstab(matrix, rhs, M=jacobi, rtol=1e-13, atol=0.0, maxiter=1000)
    if info != 0 or not _backward_error_ok(matrix, x, rhs):
        x, info = spla.gmres(
            matrix, rhs, M=jacobi, rtol=1e-13, atol=0.0, restart=100, maxiter=50,
            callback_type="pr_norm",
        )
    _check_backward_error(matrix, x, rhs)
    return x


def _backward_error_ok(matrix, x, rhs) -> bool:
    scale = np.abs(abs(matrix) @ np.abs(x)).sum() + np.abs(rhs).sum()
    return bool(np.all(np.isfinite(x))) and np.abs(matrix @ x - rhs).sum() <= _BACKWARD_TOL * scale


def _check_backward_error(matrix, x, rhs):
    if not _backward_error_ok(matrix, x, rhs):
        raise MetaEvalError(
            f"stationary distribution: a linear solve with {matrix.shape[0]} unknowns did not "
            "converge; the chain is too ill-conditioned at these parameters"
        )
