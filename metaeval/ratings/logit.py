"""Limiting logit equilibrium (LLE): the end of the principal branch of logit QREs.

McKelvey & Palfrey's logit quantal-response equilibria x(lambda) start at the uniform
profile (lambda = 0) and, along the principal branch, converge to a Nash equilibrium as
lambda -> infinity; that limit selects one equilibrium of any game (Marris et al. 2022).
The branch is traced (`trace_logit_branch`) to a max regret of ``TRACE_REGRET``
times the payoff range (tighter targets make path followers crawl: 1e-12 did not finish
in minutes on a 3 x 8 game), then the end point is refined by Newton's method on the
equilibrium conditions over its support S:

    G_p(i, x_-p) = w_p  for i in S_p,     sum_{i in S_p} x_p(i) = 1,

whose solution near the traced point is the branch's limit.  A refined point counts only
if its strategies are probabilities and its regret is below the traced one's (else the
traced point is returned). Where
payoff ties give a continuum of equilibria, supports read off the traced point can also
reach other exact equilibria of the same component (the king-of-the-hill game of Liu et
al. 2025: the prompt player is indifferent at the limit, and dropping its near-tied
prompts is exact too); of the refined points of lowest regret, the one nearest the
traced point is returned.

The tracer is pygambit's predictor-corrector method (``logit_solve``) with each step's
Jacobian built from a few tensor contractions, and a step limit. pygambit's own follower
has none, and on some meta-games it does not end: on the 8 x 8 x 8 kuhn_3p meta-game of
``tests/regression`` it ran for over 13 minutes, where this tracer ends in 0.2 s. On
random 3-player games pygambit takes 30 s of CPU at 32^3 (92 ms a step) and over 120 s
at 64^3, this tracer 0.5 s and 6 s, ending at the same point. Over the 783 final
8-per-player meta-games of the rater study a nash rating took 155 CPU s in all through
it and 170 through pygambit's (which ended on each of these within 60 s), with ratings
equal to 1e-9 except in 53 degenerate games, where the refinement reaches another point
of the same continuum of equilibria (differences up to 1.1e-4, both at max regret below
1.2e-14). pygambit's follower remains the fallback when this tracer gives up far from
the end (`_branch_end`), and the reference it is tested against.

On large games a step's cost is passes over the payoff tensors (134 MB a player at
4 x 64), memory-bound. A step reads each tensor twice for its Jacobian
(`_all_cross_payoffs`) and about once more per corrector iteration; the max regret's
pass is made only near the end (`_branch_regret`). At 4 x 64 a Jacobian takes
0.054 CPU s instead of 0.113, and a step 0.08 instead of 0.17. The number of steps is set
by the step control (comment above `trace_logit_branch`): on a random 4 x 32 game
the branch turns back in lambda 14 times between lambda = 100 and 1e4, where 1,024 of the
1,184 Jacobians went with pygambit's growth of 1.1 a step and 391 of 426 go now.
The residuals multiply payoff differences by lambda (up to ~1e8 at the end), so
float32 payoffs would exceed the corrector's 1e-4 tolerance from lambda ~1e3. On large
games of 3 players or more (`metaeval.ratings.logit_mixed`) float32 copies serve only
where their error is bounded below a tenth of that tolerance: one of the Jacobian's two
passes, and the other one and each corrector residual's pass where they contract the
difference from the last float64 contraction within that bound.
"""

from __future__ import annotations

import io
import math
import subprocess
import sys

import numpy as np
import scipy.linalg

from metaeval.errors import MetaEvalError
from metaeval.runs.threads import one_blas_thread

TRACE_REGRET = 1e-8
STALLED_REGRET = 1e-6  # the nash rater's accepted max regret
GAMBIT_SECONDS = 300
SUPPORT_THRESHOLDS = (1e-6, 1e-4, 1e-8)
#: A Newton step of the refinement below this (in mass; 1e-15 is a few ulps of 1) while the
#: residual is above 1e-14 has stalled: on supports whose equations are rank-deficient
#: (a saturated judge's prompts tied in the prompt player's payoff, 1,122 equations of rank
#: 6 at 64 x 2,000) the iterates sit at a least-squares point, steps of 3e-17, and the 50
#: iterations (a 55 ms lstsq each) took 69 of the nash rater's 72 CPU s there.
STALLED_STEP = 1e-15
# The refinement's Newton method (`_refine`) takes at most REFINE_ITERATIONS steps, has converged
# below a residual of REFINED_RESIDUAL, and leaves the simplex below a mass of -NEGATIVE_MASS.
REFINE_ITERATIONS, REFINED_RESIDUAL, NEGATIVE_MASS = 50, 1e-14, 1e-12
# Supports can also be read off the payoffs: the strategies within this gap of a best
# response (payoffs of range 1). Where a strategy is dominated only by a margin far below
# the range, the path ends with mass still on it; its payoff gap still shows it is out.
BEST_RESPONSE_GAPS = (1e-12, 1e-10)
# Vertex enumeration, the last resort for 2-player games, is exponential in the strategies.
ENUMERATED_STRATEGIES = 10
# Adjacent dropped axes of a tensor of at least JOINT_SIZE entries are summed together, in
# one product against at most JOINT_LENGTH entries. Smaller tensors are summed one axis at a
# time, the last first: on degenerate games the equilibrium the trace reaches can move with
# the rounding of the sums (on a weakly dominant 2 x 5 x 4 game of the tracer corpus, from
# (0.60, 0.40) to (1, 0) for player 0), and the recorded selections were made that way.
JOINT_SIZE, JOINT_LENGTH = 2**20, 4096
# Strategies of an enumerated equilibrium within this mass of each other are one (symmetric).
SYMMETRIC_MASS = 1e-9
# Refinements whose max regrets differ by less than ROUNDING_REGRET x range are tied up to
# rounding; where such ties are DISTINCT_MASS apart, the lowest regret's selection can turn
# on the last bits of the traced point (`selected_equilibrium`).
ROUNDING_REGRET, DISTINCT_MASS = 1e-14, 1e-9


def limiting_logit_equilibrium(payoffs: np.ndarray, symmetric: bool = False, reached=None) -> list[np.ndarray]:
    """One mixed strategy per player: the LLE of the game ``payoffs[N, K_1..K_N]``.

    ``symmetric`` (players identical up to relabelling, G_p(a) = G_0(a_p, a_-p)) traces
    the branch on the symmetric subspace, one strategy shared by every player. The
    principal branch starts there (the centroid is symmetric, and so is the unique QRE at
    small lambda) and the equations keep it there; but where the Jacobian's
    antisymmetric eigenvalue crosses zero (a pitchfork, as in chicken [[0, -1], [1, -10]])
    the unrestricted tracer can leave it for an asymmetric equilibrium,
    rating identical players differently. On the subspace that crossing is not seen, so
    the selected equilibrium is the limit of the symmetric branch, a symmetric Nash
    equilibrium (which every symmetric game has; Nash 1951), and identical players get
    identical ratings. pygambit's follower, which does not keep to the subspace, is not
    a fallback then.

    Where the trace stalls far from an equilibrium (at a branch point whose Jacobian is
    singular, which pygambit's follower does not pass either), `_nearest_equilibrium`
    selects the equilibrium nearest the point reached.

    ``reached``: the branch's point at ``TRACE_REGRET`` where it is already traced (by
    `metaeval.ratings.logit_batch`), refined and checked here as the tracer's own.
    """
    reached = _branch_end(payoffs, symmetric) if reached is None else reached
    return selected_equilibrium(payoffs, reached, symmetric)[0]


def selected_equilibrium(payoffs: np.ndarray, reached: list[np.ndarray],
                         symmetric: bool = False) -> tuple[list[np.ndarray], bool]:
    """The equilibrium `limiting_logit_equilibrium` selects from the branch's point
    ``reached``, and whether rounding may have decided it: another refinement within
    ROUNDING_REGRET x range of the selected one's regret lies DISTINCT_MASS away from it
    (two exact equilibria, as where the best responses at the end are a pure equilibrium
    beside the mixed one traced), or no refinement is an equilibrium (the nearest one is
    then searched). A point traced another way, equal up to rounding, may then select
    another equilibrium.

    Args:
        payoffs: the game ``[N, K_1, ..., K_N]``.
        reached: the branch's point at ``TRACE_REGRET``, one strategy per player.
        symmetric: on the symmetric subspace (`limiting_logit_equilibrium`).

    Returns:
        The selected equilibrium, one mixed strategy per player, and whether rounding may
        have decided it.
    """
    strategies, contested = lowest_regret_selection(_refinements(payoffs, reached, symmetric), reached,
                                                    float(np.ptp(payoffs)))
    if max_regret(payoffs, strategies) > STALLED_REGRET * float(np.ptp(payoffs)):
        strategies, contested = _nearest_equilibrium(payoffs, reached, symmetric) or strategies, True
    return [x.copy() for x in strategies], contested  # distinct arrays, also where players share one


def lowest_regret_selection(candidates: list, reached: list[np.ndarray], spread: float) -> tuple[list, bool]:
    """Of the refinements ``(profile, max regret)`` of the traced point ``reached``, the
    one `selected_equilibrium` selects (``reached`` if there are none), and whether another
    within ROUNDING_REGRET x ``spread`` (the payoff range) of its regret lies DISTINCT_MASS
    away from it.

    Args:
        candidates: the refinements, each a profile (one strategy per player) and its max regret.
        reached: the traced point, one strategy per player.
        spread: the game's payoff range.

    Returns:
        The selected profile and whether the selection is contested.
    """
    strategies = _lowest_regret(candidates, reached)
    tie = ROUNDING_REGRET * spread
    contested = any(regret <= min(r for _, r in candidates) + tie and _distance(x, strategies) > DISTINCT_MASS
                    for x, regret in candidates)
    return strategies, contested


def _refined(payoffs, strategies, symmetric):
    """The traced point refined by Newton's method on the supports read off it (module
    docstring), or the point itself if no refinement lowers its regret."""
    return _lowest_regret(_refinements(payoffs, strategies, symmetric), strategies)


def _refinements(payoffs, strategies, symmetric) -> list[tuple[list[np.ndarray], float]]:
    """The refinements of the traced point on the supports read off it whose max regret is
    below the point's, each with its max regret."""
    traced_regret = max_regret(payoffs, strategies)
    supports = [[np.flatnonzero(x > threshold) for x in strategies] for threshold in SUPPORT_THRESHOLDS]
    supports += [_near_best_responses(payoffs, strategies, gap) for gap in BEST_RESPONSE_GAPS]
    candidates, seen = [], set()
    for support in supports:
        key = tuple(tuple(s) for s in support)
        if key in seen:  # the same refinement as an earlier support's
            continue
        seen.add(key)
        refined = _refine(payoffs, strategies, support, symmetric)
        if refined is not None and (regret := max_regret(payoffs, refined)) < traced_regret:
            candidates.append((refined, regret))
    return candidates


def _lowest_regret(candidates, point):
    """Of the refinements of lowest regret, the one nearest ``point``; ``point`` if there are none."""
    if not candidates:
        return point
    lowest = min(regret for _, regret in candidates)
    return _nearest([x for x, regret in candidates if regret == lowest], point)


def _distance(profile, point) -> float:
    """The largest difference of a strategy's mass between two profiles."""
    return max(np.abs(a - b).max() for a, b in zip(profile, point))


def _nearest(profiles, point):
    """The profile nearest ``point`` in the largest difference of a strategy's mass."""
    return min(profiles, key=lambda x: _distance(x, point))


def _nearest_equilibrium(payoffs, point, symmetric):
    """The equilibrium nearest ``point`` (max regret within STALLED_REGRET x range) among
    the Newton refinements on the supports left by dropping the least-played strategies of
    ``point`` one at a time (the strategy with least mass relative to its player's most
    played, while every player keeps one), and, for two players with at most
    ENUMERATED_STRATEGIES each, the extreme equilibria that pygambit's vertex enumeration
    (``enummixed``) lists; symmetric ones only for a symmetric game. None if there is none.

    The branch points where the trace stalls can keep mass on strategies the equilibrium
    does not play (0.21 on strategy 3 of a 4 x 4 symmetric game whose only equilibrium
    leaves it out), so supports read off by thresholds miss it.
    """
    accepted = STALLED_REGRET * float(np.ptp(payoffs))
    found = []
    for support in _dropping_least_played(point[:1] if symmetric else point):
        refined = _refine(payoffs, point, support * len(point) if symmetric else support, symmetric)
        if refined is not None and max_regret(payoffs, refined) <= accepted:
            found.append(refined)
    if not found and len(payoffs) == 2 and max(payoffs.shape[1:]) <= ENUMERATED_STRATEGIES:
        for equilibrium in _enumerated_equilibria(payoffs):
            if max_regret(payoffs, equilibrium) <= accepted and (
                    not symmetric or np.abs(equilibrium[0] - equilibrium[1]).max() <= SYMMETRIC_MASS):
                found.append(_profile(equilibrium[:1], 2) if symmetric else equilibrium)
    return _nearest(found, point) if found else None


def _dropping_least_played(strategies):
    """Supports (one index array per player), each dropping from the one before the
    remaining strategy of least mass relative to its player's largest, until every player
    keeps one."""
    relative = [x / x.max() for x in strategies]
    kept = [np.ones(len(x), dtype=bool) for x in strategies]
    order = sorted((r, p, i) for p, masses in enumerate(relative) for i, r in enumerate(masses))
    supports = []
    for _, p, i in order:
        if kept[p].sum() > 1:
            kept[p][i] = False
            supports.append([np.flatnonzero(k) for k in kept])
    return supports


def _enumerated_equilibria(payoffs) -> list[list[np.ndarray]]:
    """The extreme Nash equilibria of a 2-player game, by pygambit's vertex enumeration."""
    import pygambit

    game = pygambit.Game.from_arrays(*payoffs)
    found = pygambit.nash.enummixed_solve(game, rational=False).equilibria
    return [[np.array([float(profile[s]) for s in player.strategies]) for player in game.players]
            for profile in found]


class BranchStalled(MetaEvalError):
    """The tracer's steps fell below 1e-8 (or ran past the step limit) short of its target;
    ``strategies`` is the point it reached."""

    def __init__(self, message: str, strategies: list[np.ndarray]):
        super().__init__(message)
        self.strategies = strategies


def _branch_end(payoffs: np.ndarray, symmetric: bool) -> list[np.ndarray]:
    """The branch's point at ``TRACE_REGRET``, from `trace_logit_branch`. Where its
    steps stall short of that target (on a kuhn_3p meta-game of ``tests/regression``, at
    lambda = 5e7 and a max regret of 1.2e-8 x range, where the equations are too stiff for
    the corrector), the point reached is kept if its max regret is already below
    ``STALLED_REGRET`` x range: the refinement then takes it to an exact equilibrium.
    Stalls are common on meta-games of learned policies (18 in 60 iterations of a kuhn_3p
    run, at max regrets of 1.1e-8 to 2.7e-7); on those 18 the ratings differ from the ones
    reached through pygambit's follower (5 to 19 s a game, against 0.3) by 5e-10 to 4.4e-6,
    both exact equilibria (max regret below 1e-16) of a continuum of them.
    Otherwise pygambit's follower, in a child process stopped after ``GAMBIT_SECONDS``:
    it has no step limit, and on that meta-game it ran for 55 minutes towards 1e-8 and
    grew to 11.7 GB. A symmetric game keeps the point its tracer reached (see
    `limiting_logit_equilibrium`), and so does a game whose follower fails."""
    reached = None
    try:
        return trace_logit_branch(payoffs, TRACE_REGRET, symmetric=symmetric)
    except BranchStalled as stalled:
        reached = stalled.strategies
        if symmetric or max_regret(payoffs, reached) <= STALLED_REGRET * float(np.ptp(payoffs)):
            return reached
    except MetaEvalError:
        if symmetric:
            raise
    try:
        return _gambit_logit(payoffs)
    except MetaEvalError:
        if reached is None:
            raise
        return reached


def _gambit_logit(payoffs: np.ndarray) -> list[np.ndarray]:
    """pygambit's end point of the principal branch (`gambit_branch_end`) computed in
    a child process, which is stopped after ``GAMBIT_SECONDS``."""
    sent = io.BytesIO()
    np.save(sent, payoffs)
    try:
        child = subprocess.run([sys.executable, "-c", "from metaeval.ratings.logit import _gambit_child; _gambit_child()"],
                               input=sent.getvalue(), capture_output=True, timeout=GAMBIT_SECONDS)
    except subprocess.TimeoutExpired:
        raise MetaEvalError(f"the logit path of this game could not be followed (our tracer gave up, and "
                            f"pygambit's follower did not end within {GAMBIT_SECONDS} s)") from None
    if child.returncode != 0:
        lines = child.stderr.decode().strip().splitlines() or [f"pygambit's follower exited with {child.returncode}"]
        raise MetaEvalError(lines[-1])
    received = np.load(io.BytesIO(child.stdout))
    return [received[f"arr_{p}"] for p in range(len(received.files))]


def gambit_branch_end(payoffs: np.ndarray) -> list[np.ndarray]:
    """pygambit's end point of the principal branch, at max regret TRACE_REGRET x range
    (it has no step limit: it may not return)."""
    # Imported here: pygambit is only needed for this solver.
    import pygambit

    try:
        game = pygambit.Game.from_arrays(*payoffs)
        traced = pygambit.nash.logit_solve(game, maxregret=TRACE_REGRET).equilibria
    except (RuntimeError, ValueError) as exc:
        raise MetaEvalError(f"the logit path of this game could not be followed (pygambit: {exc})") from None
    if not traced:
        raise MetaEvalError("logit path following (pygambit) returned no equilibrium")
    profile = traced[0]
    return [np.array([float(profile[s]) for s in player.strategies]) for player in game.players]


# Step control of the predictor-corrector (Allgower & Georg 1990, sec. 6.1, steplength
# adaptation by asymptotic estimates). A step is rejected when its first corrector step is
# longer than _MAX_DISTANCE, the corrector contracts by less than _MAX_CONTRACTION, the
# orientation flips or the corrector does not converge; it is then retried at half its
# length. After an accepted step of length h the next is h / f, with the deceleration
#     f = max(sqrt(d_1 / _NOMINAL_DISTANCE), sqrt(kappa / _NOMINAL_CONTRACTION))
# (d_1 the first corrector step, kappa the largest contraction) clamped to
# [1 / _MAX_ACCELERATION, _MAX_ACCELERATION]: the predictor's error grows as h^2 and the
# contraction as h, so h / f aims at the nominal values. The bounds and nominal values are
# pygambit's; its acceleration of at most 1.1 a step, also on rejection, kept the steps
# hovering at the rejection bounds (452 of 1,183 steps rejected on a random 4 x 32 game,
# some 6,000 steps at 4 x 64); with a factor of 2 that game takes 425 steps, 136 rejected,
# and a 4 x 64 one 174 CPU s instead of 429 (docs/benchmarks.md). The corrector is
# a chord method (the predicted point's Jacobian throughout) and stops once a step is
# below _CORRECTOR_TOLERANCE. Near the end steps grow by at most _END_ACCELERATION, as
# pygambit's: the regret of a point off the branch by d is of order d where the equilibrium
# is interior, and only short steps leave the corrector's points far closer to the branch
# than its tolerance; growing by 2 there, the regret of a 3 x 3 symmetric game stayed above
# 1e-8 while lambda doubled to overflow. (Stopping the corrector on its error estimate
# kappa d / (1 - kappa) spared 17% of the passes but failed that way on 2 x 2 games.)
_FIRST_STEP, _MAX_ACCELERATION, _END_ACCELERATION = 0.03, 2.0, 1.1
_MAX_DISTANCE, _MAX_CONTRACTION, _ETA = 0.4, 0.6, 0.1
_NOMINAL_DISTANCE, _NOMINAL_CONTRACTION = _MAX_DISTANCE / 1.21, _MAX_CONTRACTION / 1.21
_CORRECTOR_TOLERANCE, _MIN_STEP, _MAX_CORRECTOR_STEPS, _MAX_STEPS = 1e-4, 1e-8, 100, 100_000


def trace_logit_branch(payoffs: np.ndarray, target: float, symmetric: bool = False) -> list[np.ndarray]:
    """The principal logit-QRE branch from lambda = 0, followed until the max regret is at
    most ``target`` times the payoff range; with ``symmetric``, on the symmetric subspace
    (one strategy y = log x shared by every player: player 0's equations only, each
    derivative in x summed over the other players).

    Unknowns v = (y, lambda) with y = log x; per player p (strategy 0 as reference):

        y_p(i) - y_p(0) - lambda (G_p(i, x_-p) - G_p(0, x_-p)) = 0   for i > 0,
        sum_i exp(y_p(i)) - 1 = 0,

    sum_p K_p equations H(v) = 0 in one more unknown: a curve, followed by arclength. A
    step predicts v + h t along the tangent t, then corrects by chord-Newton steps on
    [H; t . dv = 0] with the Jacobian J of the predicted point, whose factors also give
    the new tangent (J t' = 0, t . t' > 0). The sign of det [J; t] must stay that of the
    start: a flip means the step crossed onto another branch, and it is retried shorter
    (pygambit rejects such steps too). J's blocks are the payoffs contracted with the
    other players' strategies. The small dense solves run on one BLAS thread: threaded
    LAPACK on 200 x 200 matrices is up to 100 times slower on a busy 2-core machine.
    """
    from metaeval.ratings import logit_mixed  # it builds on this module

    sizes = payoffs.shape[1:2] if symmetric else payoffs.shape[1:]
    offsets = np.cumsum([0, *sizes])
    goal = target * float(np.ptp(payoffs))
    v = np.concatenate([np.full(k, -np.log(k)) for k in sizes] + [[0.0]])
    x = _profile(_strategies(v, offsets), len(payoffs))
    equations = logit_mixed.MixedEquations(payoffs) if logit_mixed.applies(payoffs) else None
    with one_blas_thread():
        tangent, orientation = _tangent(payoffs, v, _last_unit(len(v)), offsets, equations)[:2]
        step = _FIRST_STEP
        for _ in range(_MAX_STEPS):
            near_end = _branch_regret(v, offsets) <= 2 * goal
            if near_end and max_regret(payoffs, x) <= goal:
                return x
            point, new_tangent, slow_down = _step(payoffs, v + step * tangent, tangent, orientation, offsets, equations)
            step = next_step(step, slow_down, point is not None, near_end)
            if point is None:
                if step < _MIN_STEP:
                    raise BranchStalled("the logit path of this game could not be followed (step below 1e-8)", x)
                continue
            v, tangent = point, new_tangent
            x = _profile(_strategies(v, offsets), len(payoffs))
    raise BranchStalled(f"the logit path of this game did not end within {_MAX_STEPS} steps", x)


def _branch_regret(v, offsets) -> float:
    """The max regret at v read off the branch equations, without a pass over the payoffs:
    where they hold, G_p(i, x_-p) - G_p(0, x_-p) = (y_p(i) - y_p(0)) / lambda, so player p's
    regret is (max_i y_p(i) - x_p . y_p) / lambda. The corrector leaves residuals of about
    its tolerance, an error of ~1e-4 / lambda; `max_regret` confirms the end, so
    this only spares its N passes over the tensor at every step before it."""
    lam = v[-1]
    if not lam > 0:
        return np.inf
    gaps = [y.max() - np.exp(y) @ y for y in (v[offsets[p] : offsets[p + 1]] for p in range(len(offsets) - 1))]
    return float(max(gaps)) / lam


def _tangent(payoffs, v, previous, offsets, equations=None):
    """(t, sign of det [J; t], the LU factors of [J; previous], H(v)): t is the unit
    tangent at v with t . previous > 0. None where H or J is not finite (a point predicted
    far off the branch, whose strategies exp(y) overflow)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        residual, jacobian = (equations or _branch_equations)(payoffs, v, offsets)
    if not (np.isfinite(residual).all() and np.isfinite(jacobian).all()):
        return None
    jacobian[-1] = previous
    factors = scipy.linalg.lu_factor(jacobian, check_finite=False)  # checked above
    t = scipy.linalg.lu_solve(factors, _last_unit(len(v)), check_finite=False)
    lu, pivots = factors
    # det [J; t] has the sign of det [J; previous] because t is a positive multiple of the
    # cofactor vector (J t = 0, t . previous > 0).
    swaps = np.count_nonzero(pivots != np.arange(len(pivots)))
    sign = int(np.prod(np.sign(np.diag(lu)))) * (-1) ** swaps
    return t / np.linalg.norm(t), sign, factors, residual


def _last_unit(size: int) -> np.ndarray:
    """The unit vector along the last of ``size`` unknowns (lambda's)."""
    unit = np.zeros(size)
    unit[-1] = 1.0
    return unit


def next_step(length: float, slow_down: float, accepted: bool, near_end: bool = False) -> float:
    """The next step's length after one of ``length``: half of it when rejected, else
    ``length / slow_down`` within a factor _MAX_ACCELERATION of it (step control above),
    or within _END_ACCELERATION near the end (the regret read off the branch within twice
    the target)."""
    if not accepted:
        return length / 2
    most = _END_ACCELERATION if near_end else _MAX_ACCELERATION
    return length / min(max(slow_down, 1 / most), most)


def _step(payoffs, v, tangent, orientation, offsets, equations=None):
    """Chord-Newton from the predicted point v to the curve, moving orthogonally to
    ``tangent``: (point, its tangent, the deceleration f of the step control above), or
    (None, None, f) when the step is rejected."""
    slow_down, previous = 0.0, None
    found = _tangent(payoffs, v, tangent, offsets, equations)
    if found is None or found[1] != orientation:
        return None, None, slow_down
    new_tangent, _, factors, residual = found
    for _ in range(_MAX_CORRECTOR_STEPS):
        delta = scipy.linalg.lu_solve(factors, -np.append(residual, 0.0), check_finite=False)
        distance = float(np.linalg.norm(delta))
        if not distance < _MAX_DISTANCE:
            return None, None, slow_down
        if previous is None:
            slow_down = np.sqrt(distance / _NOMINAL_DISTANCE)
        else:
            contraction = distance / (previous + _CORRECTOR_TOLERANCE * _ETA)
            if contraction > _MAX_CONTRACTION:
                return None, None, slow_down
            slow_down = max(slow_down, np.sqrt(contraction / _NOMINAL_CONTRACTION))
        v, previous = v + delta, distance
        if distance <= _CORRECTOR_TOLERANCE:
            return v, new_tangent, slow_down
        residual = (equations or _branch_equations)(payoffs, v, offsets, jacobian=False)[0]
    return None, None, slow_down


class Contractions:
    """The passes over the payoffs that the branch equations make, in float64: every
    Jacobian block of player p (`_all_cross_payoffs`) and G_p(., x_-p)."""

    def __init__(self, payoffs: np.ndarray):
        self.payoffs = payoffs

    def cross(self, p: int, x) -> dict:
        return _all_cross_payoffs(self.payoffs[p], x, p)

    def values(self, p: int, x) -> np.ndarray:
        return payoff_against(self.payoffs, x, p)


def _branch_equations(payoffs, v, offsets, jacobian=True, contractions=None):
    """Residuals of `trace_logit_branch`'s equations at v and their Jacobian in v
    (with a spare zero last row, making it square; None if not ``jacobian``), the payoffs
    contracted by ``contractions`` (default: `Contractions`, in float64)."""
    contractions = contractions or Contractions(payoffs)
    n = offsets[-1]
    y, lam = v[:n], v[n]
    blocks = _strategies(v, offsets)
    x = _profile(blocks, len(payoffs))
    residual = np.empty(n)
    derivatives = np.zeros((n + 1, n + 1)) if jacobian else None
    for p in range(len(blocks)):
        first, stop = offsets[p], offsets[p + 1]
        rest = slice(first + 1, stop)
        cross = contractions.cross(p, x) if jacobian else None
        values = _payoff_from(cross, x) if jacobian else contractions.values(p, x)
        residual[first] = x[p].sum() - 1.0
        residual[rest] = y[rest] - y[first] - lam * (values[1:] - values[0])
        if not jacobian:
            continue
        derivatives[first, first:stop] = x[p]
        derivatives[rest, rest] = np.eye(stop - first - 1)
        derivatives[rest, first] = -1.0
        derivatives[rest, n] = -(values[1:] - values[0])
        for q, cross_q in cross.items():  # d G_p(i, x_-p) / d x_q(j)
            b = _block(q, blocks, x)
            derivatives[rest, offsets[b] : offsets[b + 1]] -= lam * (cross_q[1:] - cross_q[0]) * x[q]
    return residual, derivatives


def _strategies(v, offsets) -> list[np.ndarray]:
    """x_p = exp(y_p) from the branch unknowns v = (y, lambda)."""
    return [np.exp(v[offsets[p] : offsets[p + 1]]) for p in range(len(offsets) - 1)]


def _profile(blocks: list[np.ndarray], num_players: int) -> list[np.ndarray]:
    """Every player's strategy from the unknown ones: one per player, or (on the symmetric
    subspace) one shared by all."""
    return blocks if len(blocks) == num_players else [blocks[0]] * num_players


def _block(player: int, blocks, profile) -> int:
    """The unknown block holding ``player``'s strategy (0 for all on the symmetric subspace)."""
    return player if len(blocks) == len(profile) else 0


def payoff_against(payoffs: np.ndarray, strategies, player: int) -> np.ndarray:
    """G_p(a_p, x_-p) for every pure strategy a_p of ``player``."""
    axes = list(range(len(strategies)))
    return _contract_axes(payoffs[player], axes, [q for q in axes if q != player], strategies)[0]


def _contract_axes(values: np.ndarray, axes: list, drop: list, strategies) -> tuple[np.ndarray, list]:
    """``values`` (whose axes belong to the players ``axes``) summed against the strategies
    of the players ``drop``, and the players of its remaining axes. Adjacent dropped axes
    of a large tensor (JOINT_SIZE) are summed together, in one product against the
    Kronecker product of their strategies (up to JOINT_LENGTH entries; the longest such
    run first): a product over short rows is slow (a 7 x 12 tensor read against rows of
    12 took 17.6 CPU ms, against rows of 1,728 9.4 ms; 4 x 64 rows of 64 5.7 ms, of
    4,096 4.7)."""
    axes, drop = list(axes), set(drop)
    while drop:
        if values.size < JOINT_SIZE:  # one axis at a time, the last first
            first, stop = _runs(values.shape, axes, drop, 1)[-1]
        else:
            runs = _runs(values.shape, axes, drop, JOINT_LENGTH)[::-1]  # ties: the last, rows of values
            first, stop = max(runs, key=lambda run: math.prod(values.shape[run[0] : run[1]]))
        joint = strategies[axes[first]]
        for q in axes[first + 1 : stop]:
            joint = np.multiply.outer(joint, strategies[q]).ravel()  # C order, as the reshape below
        shape = values.shape
        values = _contract(values.reshape(shape[:first] + (joint.size,) + shape[stop:]), joint, first)
        drop -= set(axes[first:stop])
        axes = axes[:first] + axes[stop:]
    return values, axes


def _runs(shape, axes, drop, most) -> list[tuple[int, int]]:
    """The runs ``(first, stop)`` of adjacent positions of ``axes`` in ``drop``, each cut
    to at most ``most`` entries (one axis at least)."""
    runs, first, length = [], None, 1
    for position, (q, size) in enumerate(zip(axes, shape)):
        if first is not None and (q not in drop or length * size > most):
            runs.append((first, position))
            first = None
        if q in drop and first is None:
            first, length = position, 1
        if first is not None:
            length *= size
    if first is not None:
        runs.append((first, len(axes)))
    return runs


def _contract(values: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    """``values`` summed against ``x`` along ``axis``: one BLAS matrix-vector product per
    block of the leading axes, on a reshaped view (``np.tensordot`` and a transposed
    ``@`` copy the tensor first: 1.4x slower on a 64^4 tensor, and tensordot's overhead
    was most of a small game's tracing time)."""
    shape = values.shape
    before, size = math.prod(shape[:axis]), shape[axis]
    after = values.size // (before * size) if values.size else 0
    if after == 1:
        contracted = values.reshape(before, size) @ x
    else:
        contracted = x @ values.reshape(before, size, after)
    return contracted.reshape(shape[:axis] + shape[axis + 1 :])


def max_regret(payoffs: np.ndarray, strategies) -> float:
    """max_p [max_a G_p(a, x_-p) - G_p(x)], the largest gain from a unilateral deviation,
    summed as x_p @ (max - G_p(., x_-p)): nonnegative terms, exactly 0 on exact ties."""
    gains = []
    for p, x in enumerate(strategies):
        values = payoff_against(payoffs, strategies, p)
        gains.append(x @ (values.max() - values))
    return float(max(gains))


def _near_best_responses(payoffs, strategies, gap):
    """Per player, the strategies whose payoff against the others is within gap of the best."""
    supports = []
    for p in range(len(strategies)):
        values = payoff_against(payoffs, strategies, p)
        supports.append(np.flatnonzero(values >= values.max() - gap))
    return supports


def _refine(payoffs, strategies, supports, symmetric=False, iterations=REFINE_ITERATIONS):
    """Newton's method on the equations of the given supports, started from the strategies
    renormalised there; None when it leaves the simplex or fails. With ``symmetric``, on
    the symmetric subspace: player 0's support and equations, its strategy shared."""
    num_players = len(strategies)
    if symmetric:
        supports = [supports[0]] * num_players
    if any(len(s) == 0 for s in supports):
        return None
    local = payoffs[(slice(None), *np.ix_(*supports))]
    blocks = supports[:1] if symmetric else supports
    offsets = np.cumsum([0, *(len(s) for s in blocks)])
    x = []
    for p, support in enumerate(blocks):
        mass = strategies[p][support]
        x.append(mass / mass.sum() if mass.sum() > 0 else np.full(len(support), 1.0 / len(support)))
    w = np.array([payoff_against(local, _profile(x, num_players), p) @ x[p] for p in range(len(x))])
    for _ in range(iterations):
        residual, jacobian = _equations(local, x, w, offsets)
        if np.abs(residual).max() < REFINED_RESIDUAL:
            break
        step = np.linalg.lstsq(jacobian, -residual, rcond=None)[0]
        if np.abs(step).max() < STALLED_STEP:
            return None  # a least-squares point of a rank-deficient system: iterating more would not move
        x = [x[p] + step[offsets[p] : offsets[p + 1]] for p in range(len(x))]
        w = w + step[offsets[-1] :]
    else:
        return None
    if any(np.any(xp < -NEGATIVE_MASS) for xp in x):
        return None
    refined = [np.zeros_like(strategies[p]) for p in range(len(x))]
    for p, support in enumerate(blocks):
        refined[p][support] = np.maximum(x[p], 0.0) / np.maximum(x[p], 0.0).sum()
    return _profile(refined, num_players)


def _equations(local, blocks, w, offsets):
    """Residuals [G_p(i, x_-p) - w_p; sum x_p - 1] and their Jacobian in (x, w), for the
    unknown strategies ``blocks`` (every player's, or one shared by all)."""
    x = _profile(blocks, len(local))
    n = offsets[-1]
    residual = np.zeros(n + len(blocks))
    jacobian = np.zeros((n + len(blocks), n + len(blocks)))
    for p in range(len(blocks)):
        rows = slice(offsets[p], offsets[p + 1])
        residual[rows] = payoff_against(local, x, p) - w[p]
        jacobian[rows, n + p] = -1.0
        residual[n + p] = x[p].sum() - 1.0
        jacobian[n + p, rows] = 1.0
        for q, cross_q in _all_cross_payoffs(local[p], x, p).items():
            b = _block(q, blocks, x)
            jacobian[rows, offsets[b] : offsets[b + 1]] += cross_q
    return residual, jacobian


def _all_cross_payoffs(payoff, x, p, axes=None) -> dict:
    """``{q: d G_p(i, x_-p) / d x_q(j)}`` for every q != p: the payoff tensor contracted
    with every player but p and q, as K_p x K_q matrices. Computed by halving: the players
    other than p are split in two, the tensor is contracted with each half's strategies
    and each result recursively split again (leave-one-out products on a binary tree).
    Only the first contraction of each half reads the whole tensor, so the Jacobian of an
    N-player step reads each payoff tensor twice instead of N - 1 times (the tracer's
    cost on large games: 64^4 payoffs are 134 MB a player). ``axes``: the players of
    ``payoff``'s axes (default every player, in order)."""
    axes = list(range(len(x))) if axes is None else list(axes)

    def split(values, axes, others):
        if len(others) == 1:
            return {others[0]: values if axes.index(p) == 0 else values.T}
        found = {}
        half = len(others) // 2
        for keep, drop in ((others[:half], others[half:]), (others[half:], others[:half])):
            found.update(split(*_contract_axes(values, axes, drop, x), keep))
        return found

    return split(payoff, axes, [q for q in axes if q != p])


def _payoff_from(cross: dict, x) -> np.ndarray:
    """G_p(i, x_-p) from one of `_all_cross_payoffs`' matrices (no pass over the tensor)."""
    q, values = next(iter(cross.items()))
    return values @ x[q]


def _gambit_child() -> None:
    """The child process of `_gambit_logit`: payoffs (``np.save``) on stdin, pygambit's
    end point (``np.savez``, one array per player) on stdout, a MetaEvalError on stderr."""
    payoffs = np.load(io.BytesIO(sys.stdin.buffer.read()))
    try:
        strategies = gambit_branch_end(payoffs)
    except MetaEvalError as error:
        sys.exit(str(error))
    sent = io.BytesIO()
    np.savez(sent, *strategies)
    sys.stdout.buffer.write(sent.getvalue())

