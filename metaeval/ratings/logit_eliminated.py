"""The limiting logit equilibrium of a 3-player game traced with its last player eliminated.

On the logit branch every player plays x_q = softmax(lambda G_q(., x_-q)), and G_q(., x_-q)
does not depend on x_q: given the others' strategies and lambda, a player's strategy is
explicit. So the last player's unknowns can be substituted away, and the branch traced in
(y_0, y_1, lambda) alone (y = log x): its projection, one to one, of the curve that
`metaeval.ratings.logit.trace_logit_branch` follows in all unknowns. Its Jacobian
adds, by the chain rule, the effect of x_0, x_1 and lambda through x_2:

    dx_2 = (diag x_2 - x_2 x_2^T) (lambda dg + g dlambda),   g = G_2(., x_0, x_1),

and the determinant keeps its sign along the branch (the full Jacobian's is the reduced
one's times that of the eliminated block, which is positive), so branch switches are
detected as before.

Why: in the king-of-the-hill game of 64 models and 2,000 prompts the full tracer solves a
dense 2,129-unknown system at every step (an LU of 6 GFLOP); eliminated, the system has
129 unknowns and a step costs a few contractions of the payoff tensors, O(joints).

Two more things make the branch cheap to follow to its end (bench.scale_koth, 64 models):

- Strategies out of play leave the unknowns. A model the branch drops has log mass
  y(i) = y(ref) + lambda (V(i) - V(ref)), falling like -lambda x gap; while the prompt mix
  still moves, its gap moves too, and that line bends by ~gap / lambda: with it among the
  unknowns the corrector's absolute 0.4 bound held steps to ~sqrt(lambda / gap), and at
  2,000 prompts the tracer took over 2,000 steps (35 ms each) to reach lambda = 2e6, at
  1,000 prompts 5,305 steps to a stall at 4e6. A strategy whose mass falls DEAD_GAP below
  its player's largest (1e-26 of it, far below anything the equations resolve) is
  dropped: its mass is taken as 0 and its y is explicit, so the curve in the remaining
  unknowns is the projection of the full one (the full Jacobian is block triangular with
  an identity block there, so det keeps its sign). It returns to the unknowns within
  REVIVED_GAP, and a step that brings it within RETURNING_GAP is retried shorter.
- The prompt player becomes unknowns again once at most LAST_UNKNOWNS prompts are live:
  logit's own equations on the sub-tensor of live strategies. Substituted, x_2 =
  softmax(lambda g) makes the models' residuals depend on y through lambda^2, so points
  the corrector accepts (steps below 1e-4 in y) carry payoff errors that stop the max
  regret from falling with lambda; in logit's equations the prompts' y are unknowns and
  the residuals linear in lambda. The sub-tensor (a few models by the live prompts) makes
  those steps cheap; the three passes over the whole tensors a step that remain give the
  max regret and every dropped strategy's explicit y.

So at 64 x 2,000 the branch ends in about 540 steps (130 of them substituted), 7 CPU s,
where it did not end in 1,500 s; at 64 x 500 in 1.6 CPU s instead of 3.4, at the same
equilibrium as the full tracer (to 1e-14 on the KOTH games of the tests). The end point
is refined and checked exactly as the full tracer's (`metaeval.ratings.logit._refined`),
followed further where that refinement is not exact (`limiting_logit_equilibrium`).
"""

from __future__ import annotations

from contextlib import closing
from functools import partial

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.ratings import logit
from metaeval.runs.threads import one_blas_thread

#: A strategy leaves the unknowns when its log mass falls DEAD_GAP below its player's
#: largest (a mass ratio below 1e-26), comes back when it rises within REVIVED_GAP, and a
#: step that brings it within RETURNING_GAP is retried shorter (module docstring).
DEAD_GAP, REVIVED_GAP, RETURNING_GAP = 60.0, 50.0, 40.0
#: The last player's strategies become unknowns once at most this many are live.
LAST_UNKNOWNS = 512
#: Refined points of at most EXACT_REGRET max regret (x payoff range) are exact equilibria;
#: short of one, the branch is followed on down to DEEPEST_REGRET (limiting_logit_equilibrium).
EXACT_REGRET = DEEPEST_REGRET = 1e-12


def _last(payoffs, x0, x1, lam):
    """(g, x_2, dg/dx_1 transposed [K1, K2]): the last player's payoffs against x_0, x_1
    and its logit response."""
    g2 = payoffs[2]
    b1 = (x0 @ g2.reshape(len(x0), -1)).reshape(g2.shape[1:])
    g = x1 @ b1
    x2 = np.exp(lam * (g - g.max()))
    return g, x2 / x2.sum(), b1


def _values(payoffs, x0, x1, lam):
    """The contractions of one point: g, x_2, each model player's payoffs and their
    partial derivatives (module docstring)."""
    g0, g1, _ = payoffs
    g, x2, b1 = _last(payoffs, x0, x1, lam)
    c02 = np.matmul(x1, g0)  # [K0, K2]: dV_0/dx_2
    c12 = (x0 @ g1.reshape(len(x0), -1)).reshape(g1.shape[1:])  # [K1, K2]: dV_1/dx_2
    return g, x2, b1, c02, c12


def _all_live(sizes) -> list[np.ndarray]:
    """Every strategy of each player, strategy 0 (the reference) first."""
    return [np.arange(k) for k in sizes]


def _scattered(vector, offsets, live, sizes) -> list[np.ndarray]:
    """Each player's block of a vector over the unknowns, placed at its live strategies'
    indices among its ``sizes[p]`` strategies (0 elsewhere); zeros for a player without
    unknowns."""
    blocks = [np.zeros(k) for k in sizes]
    for p, own in enumerate(live):
        blocks[p][own] = vector[offsets[p] : offsets[p + 1]]
    return blocks


def _strategies(v, offsets, live, sizes) -> list[np.ndarray]:
    """The strategies of the players with unknowns v = (y.., lambda) at their live
    strategies (mass 0 elsewhere)."""
    return _scattered(np.exp(v[: offsets[-1]]), offsets, live, sizes)[: len(live)]


def _equations(payoffs, v, offsets, jacobian=True, live=None):
    """Residuals of the branch equations of players 0 and 1 (logit's ``_branch_equations``)
    over their ``live`` strategies (all by default; the first of each is the reference), with
    x_2 substituted, and their Jacobian in v = (y_0, y_1, lambda) (spare zero last row)."""
    n = offsets[-1]
    lam = v[n]
    live = live or _all_live(payoffs.shape[1:3])
    x0, x1 = _strategies(v, offsets, live, payoffs.shape[1:3])
    g, x2, b1, c02, c12 = _values(payoffs, x0, x1, lam)
    values = [c02 @ x2, c12 @ x2]
    residual = np.empty(n)
    for p, x in enumerate((x0, x1)):
        first, stop = offsets[p], offsets[p + 1]
        own = live[p]
        residual[first] = x.sum() - 1.0
        residual[first + 1 : stop] = v[first + 1 : stop] - v[first] - lam * (values[p][own[1:]] - values[p][own[0]])
    if not jacobian:
        return residual, None
    g0, g1, _ = payoffs
    b0 = np.matmul(x1, payoffs[2])  # [K0, K2]: dg/dx_0, transposed
    # d V_p / d(lambda g) through x_2: C (diag x_2 - x_2 x_2^T), C = dV_p/dx_2.
    through = [c * x2 - np.outer(c @ x2, x2) for c in (c02, c12)]
    direct = [(g0 @ x2), (g1 @ x2).T]  # dV_0/dx_1 [K0, K1], dV_1/dx_0 [K1, K0]
    derivatives = np.zeros((n + 1, n + 1))
    for p, x in enumerate((x0, x1)):
        first, stop = offsets[p], offsets[p + 1]
        own = live[p]
        rest = slice(first + 1, stop)
        derivatives[first, first:stop] = x[own]
        derivatives[rest, rest] = np.eye(stop - first - 1)
        derivatives[rest, first] = -1.0
        by_x = [lam * through[p] @ b0.T, lam * through[p] @ b1.T]  # dV_p/dx_0, dV_p/dx_1 through x_2
        by_x[1 - p] = by_x[1 - p] + direct[p]
        for q, (xq, d) in enumerate(zip((x0, x1), by_x)):
            d = d[:, live[q]]
            derivatives[rest, offsets[q] : offsets[q + 1]] -= lam * (d[own[1:]] - d[own[0]]) * xq[live[q]]
        by_lam = through[p] @ g
        derivatives[rest, n] = -(values[p][own[1:]] - values[p][own[0]]) - lam * (by_lam[own[1:]] - by_lam[own[0]])
    return residual, derivatives


def _profile(payoffs, v, offsets, live):
    """Every player's strategy at v: the live strategies' masses from v, 0 elsewhere, and
    the last player's logit response while it is eliminated (one contraction)."""
    x = _strategies(v, offsets, live, payoffs.shape[1:])
    if len(live) == 2:
        x.append(_last(payoffs, *x, v[offsets[-1]])[1])
    return x


def _chart(payoffs, live):
    """(payoffs, equations, offsets) that the steps see with these ``live`` strategies: the
    eliminated equations over the whole tensor while the last player is eliminated, else
    logit's own equations over the sub-tensor of live strategies."""
    offsets = np.cumsum([0, *(len(own) for own in live)])
    if len(live) == 2:
        return payoffs, partial(_equations, live=live), offsets
    return payoffs[np.ix_(np.arange(3), *live)], logit._branch_equations, offsets


def _log_masses(v, offsets, live, values):
    """Every player's log masses at v: the live strategies' from v, every other's explicit
    from the branch equation y(i) = y(ref) + lambda (V(i) - V(ref)) at the payoffs
    ``values`` (the eliminated last player's: its logit response)."""
    lam = v[offsets[-1]]
    logs = []
    for p, own in enumerate(live):
        y = v[offsets[p]] + lam * (values[p] - values[p][own[0]])
        y[own] = v[offsets[p] : offsets[p + 1]]
        logs.append(y)
    if len(live) == 2:
        scaled = lam * (values[2] - values[2].max())
        logs.append(scaled - np.log(np.exp(scaled).sum()))
    return logs


def _relive(logs, live):
    """The live strategies after a step (None if unchanged): those within DEAD_GAP of their
    player's largest log mass that were live and those within REVIVED_GAP that were not,
    the largest first (the reference); and the eliminated last player's within DEAD_GAP,
    once they are at most LAST_UNKNOWNS."""
    changed, updated = False, []
    for y, own in zip(logs, live):
        was = np.zeros(len(y), dtype=bool)
        was[own] = True
        gap = y.max() - y
        now = np.where(was, gap <= DEAD_GAP, gap <= REVIVED_GAP)
        changed |= bool((now != was).any())
        updated.append(_reference_first(y, now))
    if len(live) == 2 and np.count_nonzero(near := logs[2] >= logs[2].max() - DEAD_GAP) <= LAST_UNKNOWNS:
        changed = True
        updated.append(_reference_first(logs[2], near))
    return updated if changed else None


def _reference_first(y, kept):
    """The indices kept, the one of largest y (the equations' reference) first."""
    top = int(np.argmax(y))
    return np.concatenate([[top], np.flatnonzero(kept & (np.arange(len(y)) != top))])


def _returning(logs, live) -> bool:
    """Whether a strategy out of the unknowns came within RETURNING_GAP of its player's
    largest log mass: then the step that brought it there was too long (its mass, taken as
    0 within the step, is no longer negligible)."""
    for y, own in zip(logs, live):
        out = np.ones(len(y), dtype=bool)
        out[own] = False
        if (y[out] > y.max() - RETURNING_GAP).any():
            return True
    return False


def _max_regret(x, values) -> float:
    """logit.max_regret from the payoffs against the others (computed once a step)."""
    return max(float(xp @ (vp.max() - vp)) for xp, vp in zip(x, values))


def trace_eliminated_branch(payoffs: np.ndarray, target: float) -> list[np.ndarray]:
    """The principal logit branch of a 3-player game, traced in the unknowns of the live
    strategies, the last player's substituted while it has many (module docstring), by the
    predictor-corrector steps and step control of
    `metaeval.ratings.logit.trace_logit_branch`, until the max regret is at most
    ``target`` times the payoff range. Raises logit.BranchStalled as that does."""
    return next(_branch_points(payoffs, [target]))


def _branch_points(payoffs, targets):
    """The points of the branch (as `trace_eliminated_branch`) where the max regret
    first falls to each of the decreasing ``targets`` times the payoff range (one point for
    the targets it reaches at once)."""
    if payoffs.shape[0] != 3:
        raise MetaEvalError(f"the eliminated tracer needs a 3-player game, got {payoffs.shape[0]} players")
    live = _all_live(payoffs.shape[1:3])
    goals = iter(np.multiply(targets, float(np.ptp(payoffs))))
    goal = next(goals)
    v = np.concatenate([np.full(len(own), -np.log(len(own))) for own in live] + [[0.0]])
    seen, equations, offsets = _chart(payoffs, live)
    x = _profile(payoffs, v, offsets, live)
    values = [logit.payoff_against(payoffs, x, p) for p in range(3)]
    with one_blas_thread():
        tangent, orientation = logit._tangent(seen, v, logit._last_unit(len(v)), offsets, equations)[:2]
        step = logit._FIRST_STEP
        for _ in range(logit._MAX_STEPS):
            regret = _max_regret(x, values)
            if regret <= goal:
                yield x
                goal = next((g for g in goals if g < regret), None)
                if goal is None:
                    return
            logs = _log_masses(v, offsets, live, values)
            updated = _relive(logs, live)
            if updated is not None:
                # The old tangent's entries at the new unknowns orient the new tangent (the
                # curve in either set of unknowns is a projection of the other's), and the
                # step shrinks with their length so that it moves lambda alike.
                old = _scattered(tangent, offsets, live, payoffs.shape[1:])
                previous = np.concatenate([t[own] for t, own in zip(old, updated)] + [tangent[-1:]])
                step *= float(np.linalg.norm(previous))
                live = updated
                v = np.concatenate([y[own] for y, own in zip(logs, live)] + [v[-1:]])
                seen, equations, offsets = _chart(payoffs, live)
                x = _profile(payoffs, v, offsets, live)
                tangent, orientation = logit._tangent(seen, v, previous, offsets, equations)[:2]
            point, new_tangent, slow_down = logit._step(seen, v + step * tangent, tangent, orientation,
                                                        offsets, equations)
            if point is not None:
                reached = _profile(payoffs, point, offsets, live)
                reached_values = [logit.payoff_against(payoffs, reached, p) for p in range(3)]
                if _returning(_log_masses(point, offsets, live, reached_values), live):
                    point = None
            step = logit.next_step(step, slow_down, point is not None, near_end=regret <= 2 * goal)
            if point is None:
                if step < logit._MIN_STEP:
                    raise logit.BranchStalled("the logit path of this game could not be followed (step below 1e-8)", x)
                continue
            v, tangent, x, values = point, new_tangent, reached, reached_values
    raise logit.BranchStalled(f"the logit path of this game did not end within {logit._MAX_STEPS} steps", x)


def limiting_logit_equilibrium(payoffs: np.ndarray) -> list[np.ndarray]:
    """The LLE of a 3-player game (as `metaeval.ratings.logit.limiting_logit_equilibrium`,
    without pygambit's follower as a fallback, which cannot follow games this large).

    Where the refinement of the point at TRACE_REGRET is not an exact equilibrium (max
    regret above EXACT_REGRET x range), the branch is followed on, a tenth of the regret at
    a time down to DEEPEST_REGRET, and each point reached refined: steps cost little there
    (module docstring), and supports read off nearer the limit are the limit's. At 64 x
    2,000 the point at 1e-8 has the rebel's masses still spread over 64 models (their
    payoffs within 1e-6 where the judge's tanh saturates), refined to max regret 9.6e-9;
    the point at 1e-9 refines to an exact equilibrium (max regret 0), and the points of
    1e-10 to 1e-13 to the same one, within 2e-11.
    """
    spread = float(np.ptp(payoffs))
    targets = logit.TRACE_REGRET * 0.1 ** np.arange(round(np.log10(logit.TRACE_REGRET / DEEPEST_REGRET)) + 1)
    found, reached = [], None
    try:
        with closing(_branch_points(payoffs, targets)) as points:
            for reached in points:
                with one_blas_thread():
                    found.append(logit._refined(payoffs, reached, False))
                if logit.max_regret(payoffs, found[-1]) <= EXACT_REGRET * spread:
                    break
    except logit.BranchStalled as stalled:
        reached = stalled.strategies
        if not found and logit.max_regret(payoffs, reached) > logit.STALLED_REGRET * spread:
            raise
        with one_blas_thread():
            found.append(logit._refined(payoffs, reached, False))
    strategies = min(reversed(found), key=lambda x: logit.max_regret(payoffs, x))
    if logit.max_regret(payoffs, strategies) > logit.STALLED_REGRET * spread:
        with one_blas_thread():
            strategies = logit._nearest_equilibrium(payoffs, reached, False) or strategies
    return [x.copy() for x in strategies]
