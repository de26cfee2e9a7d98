"""Stationary distribution of a line-structured chain given matrix-free ([`line_rates`][metaeval.solvers.line_rates]).

The method of [`metaeval.solvers.markov`][metaeval.solvers.markov] (read it first), with every sum over
transitions replaced by a product with the rate matrix N or its transpose, so nothing
of size "transitions" is stored:

* Metastable classes are the closed strongly connected components of the *strong* graph
  (moves whose rate is at least ``STRONG`` times the largest).  The rate grows with the
  gain, so a move is strong when its gain is at least a threshold g*, and one step of a
  search from a set X of profiles is a reduction along every line: s' is reached when
  ``f_p(s') >= min_{x in X on the line} f_p(x) + g*`` (forward) or reaches X when
  ``max_{x in X on the line} f_p(x) >= f_p(s) + g*`` (backward).  Closed classes are found by
  forward/backward closures: the forward closure F(v) holds a closed class; v's class
  F(v) & B(v) is closed when it is all of F(v); otherwise the search restarts from the
  last state F(v) reached.
* One class: fix pi at an anchor and solve ``x (D - Q)_rest = q_anchor`` by Krylov products.
* Several: Courtois aggregation as in markov.py -- internal distributions of the classes,
  absorption probabilities of the transient profiles (re-solved in tiers where a needed
  value is below ``TIER`` of the largest; the last class's are one minus the others',
  see ``COMPLEMENT_SHARE``), class-to-class rates (in log space for single-profile
  classes, whose exits may underflow), the macro chain by the sparse solver, transient
  masses from the balance ``pi_T (D - Q)_TT = pi_C Q_CT``.

Linear solves go through ``markov._solve`` (Krylov with a backward-error check),
preconditioned by line sweeps (``LineRates.sweep``: each player's up moves solved
exactly along its sorted lines, the players in turn), which halve the products a solve
takes against Jacobi's.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from metaeval.errors import MetaEvalError
from metaeval.solvers.line_rates import LineRates
from metaeval.solvers.markov import MAX_TIERS, RESIDUAL_TOL, STRONG, TIER, _MMatrix, _solve, stationary_distribution

#: More closed classes than this are refused (each costs closures over every profile).
MAX_CLASSES = 64

#: The last class's absorption probabilities are one minus the others' (no solve of their
#: own) when every other class sends at least this share of its exits into it: an
#: absolute error e of the solved ones is then at most (classes - 1) e / COMPLEMENT_SHARE
#: relative in a class-to-class rate.
COMPLEMENT_SHARE = 0.01


def line_stationary_distribution(rates: LineRates) -> tuple[np.ndarray, dict]:
    """pi with pi Q = 0, sum(pi) = 1, for the chain of ``rates``; ``info`` as markov's
    [`stationary_distribution`][metaeval.solvers.markov.stationary_distribution] (residual, levels) plus the
    number of classes."""
    threshold = _strong_gain(rates)
    classes = _sink_classes(rates, threshold)
    num_classes = int(classes.max()) + 1
    exits = rates.product(np.ones(rates.n))
    if num_classes == 1:
        everyone = np.ones(rates.n, bool)
        pi, levels = np.exp(_class_log_distribution(rates, everyone, classes == 0, None, exits)), 1
    else:
        pi, levels = _aggregate(rates, classes, num_classes, exits)
    residual = _residual(rates, pi, exits)
    if not residual <= RESIDUAL_TOL:
        raise MetaEvalError(f"stationary distribution: residual ||pi P - pi|| = {residual:.3g} is too large")
    return pi, {"residual": residual, "levels": levels, "classes": num_classes}


def _residual(rates, pi, exits) -> float:
    """``||pi P - pi||_1`` of the uniformised chain, as markov's ``_residual`` (``exits``: N 1)."""
    return float(np.abs(rates.transpose_product(pi) - exits * pi).sum() / exits.max())


def _strong_gain(rates) -> float:
    """The smallest gain g* with r(g*) >= STRONG * (largest rate), by bisection (r grows with the gain)."""
    low, high = -rates.max_gain, rates.max_gain
    log_strong = np.log(STRONG)

    def strong(d):
        return rates.log_rate(np.array([d]))[0] - rates.log_scale >= log_strong

    if strong(low):
        return -np.inf
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        low, high = (low, middle) if strong(middle) else (middle, high)
    return high


def _step(rates, reached, threshold, forward):
    """Profiles one strong move from ``reached`` (forward) or with one strong move into it."""
    new = reached.copy()
    for p, f in enumerate(rates.payoffs):
        if forward:
            low = np.min(np.where(reached, f, np.inf), axis=p, keepdims=True)
            new |= f - low >= threshold
        else:
            high = np.max(np.where(reached, f, -np.inf), axis=p, keepdims=True)
            new |= high - f >= threshold
    return new


def _closure(rates, start, threshold, forward, within=None):
    """Every profile reachable from ``start`` by strong moves (or reaching it: ``forward=False``),
    staying inside ``within``; returns the closure and the last profiles added."""
    reached, last = start.copy(), start
    while True:
        new = _step(rates, reached, threshold, forward)
        if within is not None:
            new &= within
        added = new & ~reached
        if not added.any():
            return reached, last
        reached, last = new, added


def _sink_classes(rates, threshold) -> np.ndarray:
    """Class index per profile (flat) for the closed classes of the strong graph, -1 elsewhere."""
    shape = rates.shape
    classes = np.full(shape, -1)
    settled = np.zeros(shape, dtype=bool)  # in a class or with a strong path into one
    count = 0
    while not settled.all():
        start = np.zeros(shape, dtype=bool)
        start[np.unravel_index(np.argmin(settled), shape)] = True
        while True:
            forward, last = _closure(rates, start, threshold, True)
            component, _ = _closure(rates, start, threshold, False, within=forward)
            if component.sum() == forward.sum():
                break
            start = np.zeros(shape, dtype=bool)  # a profile the search reached last, deeper down
            deeper = last & ~component
            start[np.unravel_index(np.argmax(deeper if deeper.any() else forward & ~component), shape)] = True
        if count == MAX_CLASSES:
            raise MetaEvalError(
                f"stationary distribution: the chain has more than {MAX_CLASSES} metastable classes; "
                "the matrix-free solver does not aggregate that many"
            )
        classes[component] = count
        count += 1
        settled |= _closure(rates, component, threshold, False)[0]
    return classes.reshape(-1)


def _neighbours(shape, mask_flat) -> np.ndarray:
    """Profiles one move (any rate) from a profile of ``mask_flat``, or in it."""
    mask = mask_flat.reshape(shape)
    near = mask.copy()
    for p in range(len(shape)):
        near |= mask.any(axis=p, keepdims=True)
    return near.reshape(-1)


class _Off:
    """N or N^T of a `LineRates` as the off-diagonal part of an `_MMatrix`,
    restricted to the profiles of the mask ``free`` (zero rows and columns elsewhere).

    Systems are kept at full length, with identity rows off ``free`` (see `_system`):
    masking costs two multiplications a product where markov's index views cost a
    gather and a scatter, and no index array of the chain's size is stored.
    """

    def __init__(self, rates, transpose, free=None):
        self.rates, self.transpose, self.free = rates, transpose, free
        self.shape = (rates.n, rates.n)

    def sweep(self, diagonal):
        """An approximate inverse of ``diag(diagonal) - (this)``: `LineRates.sweep`."""
        free = np.ones(self.rates.n, dtype=bool) if self.free is None else self.free
        return self.rates.sweep(diagonal, free, self.transpose)

    def __matmul__(self, x):
        if x.ndim == 2:  # the dense path's several right-hand sides
            return np.column_stack([self @ column for column in x.T])
        if self.free is not None:
            x = x * self.free
        y = self.rates.transpose_product(x) if self.transpose else self.rates.product(x)
        if self.free is not None:
            y *= self.free
        return y


def _system(rates, transpose, diagonal, free) -> _MMatrix:
    """``(diag(d) - N)_FF`` (N^T if ``transpose``) at full length: identity off F."""
    return _MMatrix(np.where(free, diagonal, 1.0), _Off(rates, transpose, free))


def _tiered(rates, transpose, diagonal, free, rhs, needed) -> np.ndarray:
    """x >= 0 with ``(diag(d) - N)_FF x_F = rhs_F`` (N^T if ``transpose``; x = 0 off F),
    re-solving in tiers the unknowns below TIER of the largest while any of them is
    ``needed`` (markov's ``_tiered_solve`` in linear space: flows from the unknowns
    already fixed join the right-hand side)."""
    x = np.zeros(rates.n)
    for _ in range(MAX_TIERS):
        b = rhs * free
        if x.any():
            b += _Off(rates, transpose) @ x * free
        y = np.maximum(_solve(_system(rates, transpose, diagonal, free), b), 0.0)
        del b
        x = np.where(free, y, x)
        if needed is None or not y.any():
            return x
        unreliable = free & (y < TIER * y.max())
        if not (needed & unreliable).any():
            return x
        x[unreliable] = 0.0
        free = unreliable
    raise MetaEvalError("stationary distribution: tiered solve did not settle")


def _class_log_distribution(rates, members, candidates, needed, exits=None) -> np.ndarray:
    """log pi (flat, -inf outside) of the chain restricted to ``members``, anchored at the
    candidate with the largest in-rate / out-rate ratio (markov's ``_anchored``); ``exits``
    (N 1) when ``members`` is every profile."""
    log_pi = np.full(rates.n, -np.inf)
    if members.sum() == 1:
        log_pi[members] = 0.0
        return log_pi
    out_rate = rates.product(members * 1.0) * members if exits is None else exits
    ratio = rates.transpose_product(members * 1.0)  # in-rate, then in-rate / out-rate
    np.divide(ratio, out_rate, out=ratio, where=out_rate > 0)
    ratio[out_rate == 0] = np.inf  # a state with no exits holds all the mass
    ratio[~candidates] = -np.inf
    anchor = int(np.argmax(ratio))
    del ratio
    free = members.copy()
    free[anchor] = False
    targets, log_rate = rates.row(anchor)  # the anchor's flows, N^T e_anchor, without a product
    flows = np.zeros(rates.n)
    flows[targets] = np.exp(log_rate)
    x = _tiered(rates, True, out_rate, free, flows, needed)
    del out_rate
    with np.errstate(divide="ignore"):
        np.log(x, out=log_pi, where=free)
    log_pi[anchor] = 0.0
    return log_pi - logsumexp(log_pi[members])


def _complement_reliable(macro_log, last) -> bool:
    """Whether every other class sends at least COMPLEMENT_SHARE of its exit rate into ``last``."""
    rates = macro_log.copy()
    np.fill_diagonal(rates, -np.inf)
    share = rates[:, last] - logsumexp(rates, axis=1)
    return bool(np.all(np.delete(share, last) >= np.log(COMPLEMENT_SHARE)))


def _aggregate(rates, classes, num_classes, exits) -> tuple[np.ndarray, int]:
    n = rates.n
    in_class = classes >= 0
    sizes = np.bincount(classes[in_class], minlength=num_classes)
    log_within = np.full(n, -np.inf)
    for c in range(num_classes):
        members = classes == c
        if sizes[c] == 1:
            log_within[members] = 0.0
            continue
        gateway = members & _neighbours(rates.shape, ~members)
        log_within = np.where(members, _class_log_distribution(rates, members, members, gateway), log_within)
    within = np.exp(log_within)
    del log_within

    transient = ~in_class
    entered = ~in_class & _neighbours(rates.shape, in_class)
    singletons = {int(c): int(np.flatnonzero(classes == c)[0]) for c in np.flatnonzero(sizes == 1)}
    rows = {c: rates.row(state) for c, state in singletons.items()}
    grouped = np.flatnonzero(in_class & (sizes[np.maximum(classes, 0)] > 1))  # profiles of larger classes

    def absorption(j):
        """h_j: probability of entering class j first, 1 on it, 0 on the other classes."""
        h = (classes == j).astype(np.float64)
        if transient.any():
            if j in singletons:  # N 1_j is the one column of flows into the profile
                targets, log_rate = rates.row(singletons[j], into=True)
                into = np.zeros(n)
                into[targets] = np.exp(log_rate)
            else:
                into = rates.product(h)
            h += _tiered(rates, False, exits, transient, into, entered)
        return np.minimum(h, 1.0, out=h)

    def log_rates_into(h):
        """log sum_t q(s, t) h(t), weighted by pi_i(s), summed over each class i."""
        column = np.full(num_classes, -np.inf)
        with np.errstate(divide="ignore"):
            if len(grouped):
                flow = rates.product(h)[grouped] * within[grouped]
                column = np.log(np.bincount(classes[grouped], flow, num_classes))
            for c, (targets, log_rate) in rows.items():  # single profiles: in log space
                column[c] = logsumexp(log_rate + np.log(h[targets]))
        return column

    # Every transient profile enters some class first, so the last class's h is one minus
    # the others': one solve fewer, accepted where no class's exits into the last class are
    # below COMPLEMENT_SHARE of its exits (there the difference loses no digits that count).
    macro_log = np.full((num_classes, num_classes), -np.inf)
    last = num_classes - 1
    others = np.zeros(n)
    for j in range(last):
        h = absorption(j)
        macro_log[:, j] = log_rates_into(h)
        others += h
        del h
    np.subtract(1.0, others, out=others)
    macro_log[:, last] = log_rates_into(np.clip(others, 0.0, 1.0, out=others))
    del others
    if not _complement_reliable(macro_log, last):
        macro_log[:, last] = log_rates_into(absorption(last))
    np.fill_diagonal(macro_log, -np.inf)
    i, j = np.nonzero(np.isfinite(macro_log))
    try:
        macro_pi, info = stationary_distribution(num_classes, i, j, macro_log[i, j])
    except MetaEvalError:
        raise MetaEvalError(
            "stationary distribution: couplings between metastable classes fell below the "
            "double-precision range; the chain cannot be resolved at these parameters"
        ) from None
    pi = np.where(in_class, within * macro_pi[np.maximum(classes, 0)], 0.0)
    if transient.any():
        inflow = rates.transpose_product(pi) * transient
        pi += np.maximum(_solve(_system(rates, True, exits, transient), inflow), 0.0)
    return pi / pi.sum(), info["levels"] + 1
