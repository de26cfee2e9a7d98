"""Deviation ratings: CCE deviation gains under the strictest CCE (maths, section 2.1).

Marris, Liu, Gemp, Piliouras, Lanctot (2025), "Deviation Ratings". Each round solves

    min_{sigma in simplex, t} t   s.t.  delta_i(sigma) <= t   (unfrozen i),
                                        delta_i(sigma) == v_i (frozen i),

and freezes, at value t, every unfrozen constraint with a non-zero dual.

The first LP is solved over working sets of rows and joints
(metaeval.solvers.cce_first_round); every later optimum lies in its optimal face, and
when that face has at most FACE_JOINTS joints the later rounds run there, as small LPs
whose equalities are kept exactly and whose constant gains are read off
(metaeval.solvers.cce_face). Otherwise the rounds run in one warm-started model
(`_warm_rounds`), as described next.

One HiGHS model serves every round. Each deviation gain has its own column
``g_i = (A sigma)_i`` (an equality row) and a cap row ``g_i - t <= 0``. Freezing i sets
the upper bound of g_i to t and makes its cap row free: bound changes only, so the
previous optimal basis stays valid and each round is a short warm re-solve.

A frozen constraint is tight at every optimum of its round, i.e. everywhere on the set
{all gains <= t} that later rounds search, so the bound g_i <= t already forces
g_i == t. The one-sided bound states the same thing without asking the solver to meet
an equality whose right-hand side carries an earlier LP's rounding.

Safeguards (all in `_Safeguards`; counted in the diagnostics). In exact arithmetic
every round is feasible (the previous optimum meets every frozen bound), so a round the
warm model cannot solve is round-off, typical of evolved populations whose strategies are
nearly tied (the frozen face is then thin and ill-conditioned):

- ``cold_resolves``: a warm optimum that is not optimal, or whose unscaled residuals
  exceed RESIDUAL_TOLERANCE (the warm basis drifts on nearly tied games), is solved again
  in a fresh model, with presolve and the dual simplex, frozen gains as plain rows;
- ``looser_tolerances``: that fresh model needed feasibility tolerances looser than
  1e-10 (up to 1e-7 of the largest payoff difference, `metaeval.solvers.lp.solve`);
- ``largest_gain_freezes``: a round whose duals name no active constraint freezes the
  largest gain (see `constraints_to_freeze`);
- ``column_generation_retries`` (in [`deviation`][metaeval.ratings.deviation.deviation]): if the LPs over every joint still
  fail, the game is rated by column generation over its own joints instead;
- ``final_resolves``: the last LP's sigma must reproduce every frozen value to
  CHECK_TOLERANCE; if it does not, sigma is recomputed by an LP minimising the largest
  |gain - value|, and the result checked again (a clear error if it still fails).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from metaeval.runs import budget
from metaeval.solvers import lp
from metaeval.solvers.cce_columns import GameColumns, StoredColumns
from metaeval.solvers.cce_face import face_rounds
from metaeval.solvers.cce_first_round import FirstRoundModel
from metaeval.solvers.equilibria import deviation_gains
from metaeval.solvers.matrix_game import solve_matrix_game
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating, homogeneous
from metaeval.solvers.reduction import copied_strategies, quantise, reduce_cce

# A cap row counts as active when |dual| > DUAL_TOLERANCE. The cap duals of a round are
# convex weights (dual feasibility of the free column t makes them sum to 1), so their
# largest is at least 1 / #unfrozen: a true active set is far above this tolerance, while
# simplex round-off on a zero dual (~1e-16) is far below it. A missed small dual only
# costs a round: the next LP finds the same t and freezes the constraint then.
DUAL_TOLERANCE = 1e-9

CHECK_TOLERANCE = 1e-7
MASS_FLOOR = 1e-12
"""LP masses at or below this are round-off (far below the feasibility tolerance): zero."""
"""Largest accepted |delta_i(sigma*) - rating_i| over all deviations, relative."""
PRICING_TOLERANCE = 1e-9
"""A joint outside the LP enters when its reduced cost is below -PRICING_TOLERANCE (in
units of the largest payoff difference, like HiGHS's dual feasibility tolerance)."""
ENTERING_PER_PRICING = 256
"""At most this many joints enter per pricing (the most negative reduced costs)."""
COLUMN_GENERATION_JOINTS = 2048
"""Games with more joints than this are rated by column generation over the game's
payoffs (by default); smaller ones by the reduced system with every joint in the LP."""
FACE_JOINTS = 2048
"""Largest optimal face (joints of zero reduced cost) on which the later rounds are
solved (metaeval.solvers.cce_face: a dense SVD of up to rows x FACE_JOINTS a round)."""
INTERIOR_POINT_ROWS = 256
"""First LPs with more deviations than this grow their working sets from interior points
before the simplex runs (`_grow_by_interior_point`)."""
RESIDUAL_TOLERANCE = 1e-10
"""Largest accepted unscaled residual of a warm optimum (simplex sum, sign, gain rows)."""
ZERO_SUM_TOLERANCE = 1e-9
"""Two players' payoffs summing to a constant within this fraction of the range: rated
player by player (`_zero_sum_strictest_cce`)."""


@dataclass
class StrictestCCE:
    """Algorithm 1's output on a (reduced) constraint matrix."""

    values: np.ndarray  # frozen value of every row
    masses: np.ndarray  # the final LP's distribution over columns
    rounds: int
    lp_solves: int
    simplex_iterations: int
    safeguards: dict  # how often each safeguard fired
    max_violation: float  # max |A masses - values|, relative to the largest payoff difference
    priced_joints: int = 0  # joints added by pricing
    lp_joints: int = 0  # joints in the first LP (and in the warm LP, if the later rounds ran there)
    first_rows: int = 0  # rows in the first LP
    face_rounds: int = 0  # rounds solved on an optimal face (metaeval.solvers.cce_face)
    read_off: int = 0  # constraints rated by being constant on that face


@dataclass
class _Round:
    """One round's optimum: t, the duals of the unfrozen caps, every gain, sigma (over the
    model's columns), and the duals that price the joints outside the model."""

    t: float
    cap_duals: np.ndarray  # over all rows; zero on frozen ones
    gains: np.ndarray
    masses: np.ndarray
    simplex_dual: float
    gain_duals: np.ndarray  # y of the reduced cost -(simplex_dual + A_j^T y) of a joint j
    lp_solves: int = 1


def constraints_to_freeze(
    duals: np.ndarray, gains: np.ndarray, unfrozen: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Mask of unfrozen constraints to freeze this round, and whether the safeguard fired.

    Active = |dual| > DUAL_TOLERANCE. Safeguard: should no unfrozen dual pass (possible
    only if the solver's duals are wrong, see DUAL_TOLERANCE), freeze the unfrozen
    constraint with the largest gain, which equals t at the LP's optimum, so every round
    still makes progress.
    """
    active = unfrozen & (np.abs(duals) > DUAL_TOLERANCE)
    if active.any():
        return active, False
    active = np.zeros_like(unfrozen)
    active[np.argmax(np.where(unfrozen, gains, -np.inf))] = True
    return active, True


class _WarmModel:
    """The one HiGHS model of every round: gain columns, caps freed by bound changes.

    It holds the joints ``joints`` of the column source (all of them for small games;
    a working set grown by pricing otherwise); ``matrix`` is their columns.
    """

    def __init__(self, source, joints: np.ndarray):
        rows = source.num_rows
        columns = len(joints)
        budget.check(3 * 16 * rows * columns, f"the deviation-rating LP ({rows} x {columns})")  # 3 copies of 16-byte nonzeros
        matrix = source.columns(joints)
        # Columns: sigma (columns), g (rows), t; sigma columns added later go last.
        # Rows: simplex, g definitions, caps.
        sigma_part = sp.vstack(
            [sp.csr_matrix(np.ones((1, columns))), sp.csr_matrix(matrix), sp.csr_matrix((rows, columns))]
        )
        identity = sp.identity(rows, format="csr")
        g_part = sp.vstack([sp.csr_matrix((1, rows)), -identity, identity])
        t_part = sp.csr_matrix(np.concatenate([np.zeros(1 + rows), -np.ones(rows)])[:, None])
        self.source, self.joints, self.matrix = source, np.asarray(joints), matrix
        self.sigma_col = np.arange(columns)
        self.cap = 1 + rows + np.arange(rows)
        self.gain_col = columns + np.arange(rows)
        self.highs = lp.highs_model(
            sp.hstack([sigma_part, g_part, t_part]),
            costs=np.concatenate([np.zeros(columns + rows), [1.0]]),
            col_lower=np.concatenate([np.zeros(columns), np.full(rows + 1, -lp.INF)]),
            col_upper=np.full(columns + rows + 1, lp.INF),
            row_lower=np.concatenate([[1.0], np.zeros(rows), np.full(rows, -lp.INF)]),
            row_upper=np.concatenate([[1.0], np.zeros(2 * rows)]),
        )
        # Presolve would be skipped on warm starts anyway, and it slows the first solve here.
        self.highs.setOptionValue("presolve", "off")
        self.iterations = 0

    def add_joints(self, joints: np.ndarray) -> None:
        """Append the sigma columns of ``joints`` (at 0, nonbasic: the basis stays valid)."""
        block = self.source.columns(joints)
        count = len(joints)
        entries = sp.csc_matrix(np.vstack([np.ones((1, count)), block]))  # simplex and g rows
        start = self.highs.getNumCol()
        lp.check(
            self.highs.addCols(count, np.zeros(count), np.zeros(count), np.full(count, lp.INF),
                               entries.nnz, entries.indptr[:-1].astype(np.int32),
                               entries.indices.astype(np.int32), entries.data),
            self.highs, "addCols",
        )
        self.sigma_col = np.concatenate([self.sigma_col, start + np.arange(count)])
        self.joints = np.concatenate([self.joints, joints])
        self.matrix = np.hstack([self.matrix, block])

    def solve(self) -> _Round | None:
        """Re-solve from the current basis at the tight tolerance; None if not optimal."""
        optimal = lp.run(self.highs)
        self.iterations += self.highs.getInfo().simplex_iteration_count
        if not optimal:
            return None
        solution = self.highs.getSolution()
        values = np.asarray(solution.col_value)
        masses, gains = values[self.sigma_col], values[self.gain_col]
        residual = max(abs(masses.sum() - 1.0), -masses.min(), np.abs(self.matrix @ masses - gains).max())
        if residual > RESIDUAL_TOLERANCE:
            return None
        row_duals = np.asarray(solution.row_dual)
        return _Round(
            t=self.highs.getInfo().objective_function_value,
            cap_duals=row_duals[self.cap],
            gains=gains,
            masses=masses,
            simplex_dual=float(row_duals[0]),
            gain_duals=row_duals[1 : 1 + len(self.cap)],
        )

    def freeze(self, chosen: np.ndarray, t: float) -> None:
        """Cap the chosen gains at t and free their cap rows (bound changes only)."""
        highs = self.highs
        columns_to_cap = self.gain_col[chosen].astype(np.int32)
        no_floor, cap_at_t = np.full(chosen.size, -lp.INF), np.full(chosen.size, t)
        lp.check(highs.changeColsBounds(chosen.size, columns_to_cap, no_floor, cap_at_t), highs,
                 "changeColsBounds")
        for row in self.cap[chosen]:
            lp.check(highs.changeRowBounds(int(row), -lp.INF, lp.INF), highs, "changeRowBounds")
        # The previous optimum stays primal feasible after a freeze: primal simplex
        # continues from it, where dual simplex would first repair dual feasibility.
        highs.setOptionValue("simplex_strategy", 4)


def _plain_model(matrix: np.ndarray, unfrozen: np.ndarray, values: np.ndarray):
    """A fresh model of one round: rows A_u sigma - t <= 0 and A_f sigma <= v_f."""
    rows, columns = matrix.shape
    t_column = np.where(unfrozen, -1.0, 0.0)[:, None]
    return lp.highs_model(
        sp.vstack([sp.csr_matrix(np.r_[np.ones(columns), 0.0][None]), sp.csr_matrix(np.hstack([matrix, t_column]))]),
        costs=np.r_[np.zeros(columns), 1.0],
        col_lower=np.r_[np.zeros(columns), -lp.INF],
        col_upper=np.full(columns + 1, lp.INF),
        row_lower=np.r_[1.0, np.full(rows, -lp.INF)],
        row_upper=np.r_[1.0, np.where(unfrozen, 0.0, values)],
    )


@dataclass
class _Safeguards:
    """Every fallback of Algorithm 1's LPs, and how often each fired. They work on
    ``matrix``, the columns the warm model holds (a round's optimum has no mass elsewhere)."""

    matrix: np.ndarray
    counts: dict = field(default_factory=lambda: dict(
        cold_resolves=0, looser_tolerances=0, largest_gain_freezes=0, final_resolves=0))
    lp_solves: int = 0

    def cold_round(self, unfrozen: np.ndarray, values: np.ndarray, what: str) -> _Round:
        """The round in a fresh, differently configured model, at looser tolerances if need be."""
        self.counts["cold_resolves"] += 1
        highs = _plain_model(self.matrix, unfrozen, values)
        try:
            runs = lp.solve(highs, what)
        except MetaEvalError as exc:
            raise MetaEvalError(
                f"{what} has no solution even solved afresh at a feasibility tolerance of "
                f"{lp.LOOSEST_TOLERANCE:g} of the largest payoff difference; the game is too "
                f"ill-conditioned to rate ({exc})"
            ) from None
        self.lp_solves += runs
        self.counts["looser_tolerances"] += runs > 1
        solution = highs.getSolution()
        x, row_duals = np.asarray(solution.col_value), np.asarray(solution.row_dual)
        masses = x[:-1]
        return _Round(
            t=x[-1],
            cap_duals=np.where(unfrozen, row_duals[1:], 0.0),
            gains=self.matrix @ masses,
            masses=masses,
            simplex_dual=float(row_duals[0]),
            gain_duals=row_duals[1:],
        )

    def freeze(self, cap_duals, gains, unfrozen) -> np.ndarray:
        freeze, fired = constraints_to_freeze(cap_duals, gains, unfrozen)
        self.counts["largest_gain_freezes"] += fired
        return freeze

    def checked_masses(self, masses: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, float]:
        """sigma reproducing every rating to CHECK_TOLERANCE, and its largest miss."""
        masses = np.where(masses > MASS_FLOOR, masses, 0.0)
        masses /= masses.sum()
        miss = float(np.abs(self.matrix @ masses - values).max())
        if miss <= CHECK_TOLERANCE:
            return masses, miss
        self.counts["final_resolves"] += 1
        masses = self._closest_masses(values)
        miss = float(np.abs(self.matrix @ masses - values).max())
        if miss > CHECK_TOLERANCE:
            raise MetaEvalError(
                f"no distribution reproduces the strictest CCE's deviation gains: the closest misses "
                f"by {miss:.3g} of the largest payoff difference (accepted: {CHECK_TOLERANCE:g}); "
                "the game is too ill-conditioned to rate"
            )
        return masses, miss

    def _closest_masses(self, values: np.ndarray) -> np.ndarray:
        """argmin over the simplex of max_i |(A sigma)_i - v_i|, by one fresh LP."""
        rows, columns = self.matrix.shape
        s_column = -np.ones((rows, 1))
        highs = lp.highs_model(
            sp.vstack([
                sp.csr_matrix(np.r_[np.ones(columns), 0.0][None]),
                sp.csr_matrix(np.hstack([self.matrix, s_column])),
                sp.csr_matrix(np.hstack([self.matrix, -s_column])),
            ]),
            costs=np.r_[np.zeros(columns), 1.0],
            col_lower=np.zeros(columns + 1),
            col_upper=np.full(columns + 1, lp.INF),
            row_lower=np.r_[1.0, np.full(rows, -lp.INF), values],
            row_upper=np.r_[1.0, values, np.full(rows, lp.INF)],
        )
        self.lp_solves += lp.solve(highs, "the check of the strictest CCE")
        masses = np.clip(np.asarray(highs.getSolution().col_value)[:-1], 0.0, None)
        return masses / masses.sum()


def strictest_cce(source, joints: np.ndarray | None = None, interior_points: bool = True) -> StrictestCCE:
    """Algorithm 1 on the CCE system of ``source`` (a column source of
    metaeval.solvers.cce_columns; entries at most 1).

    The first LP is solved over working sets of rows and joints, grown from ``joints``
    (default: all) until no row is violated and no joint has negative reduced cost
    (metaeval.solvers.cce_first_round), so its optimum, t and duals are those of the LP
    over every joint. The later rounds run on its optimal face (metaeval.solvers.cce_face)
    if that has at most FACE_JOINTS joints, else from the first round again in one
    warm-started HiGHS model with the safeguards of `_Safeguards`
    (`_warm_rounds`).

    Args:
        source: the column source of the CCE system.
        joints: the joints the first working set starts from; default: all.
        interior_points: grow the first working sets from interior points above
            INTERIOR_POINT_ROWS deviations (else by the simplex alone).

    Returns:
        The strictest CCE, its ratings and how it was found.
    """
    rows = source.num_rows
    pricer = _Pricer(source)
    first, model, priced = _first_round(source, np.arange(source.num_columns) if joints is None
                                        else np.asarray(joints), pricer, interior_points)
    on_face = pricer.face(model, first)
    if on_face is None:
        return _warm_rounds(source, model.joints, pricer, priced, model.iterations)
    guard = _Safeguards(model.matrix)
    values, unfrozen = np.zeros(rows), np.ones(rows, dtype=bool)
    chosen = guard.freeze(first.cap_duals, first.gains, unfrozen)
    values[chosen] = first.t
    unfrozen &= ~chosen
    face = face_rounds(source.columns(on_face), on_face, _masses_on(model, first, on_face),
                       np.flatnonzero(np.abs(first.gain_duals) > DUAL_TOLERANCE), values, unfrozen,
                       guard.freeze, DUAL_TOLERANCE, "the deviation-rating LPs")
    guard.matrix = face.matrix
    guard.lp_solves = first.lp_solves + face.lp_solves
    masses, miss = guard.checked_masses(face.masses, values)
    everywhere = np.zeros(source.num_columns)
    everywhere[face.joints] = masses
    return StrictestCCE(values, everywhere, 1 + face.rounds, guard.lp_solves, model.iterations, guard.counts,
                        miss, priced_joints=priced, lp_joints=len(model.joints), first_rows=len(model.rows),
                        face_rounds=face.rounds, read_off=face.read_off)


def _first_round(source, joints: np.ndarray, pricer: "_Pricer",
                 interior_points: bool = True) -> tuple[_Round, FirstRoundModel, int]:
    """The first LP's optimum over every row and joint (metaeval.solvers.cce_first_round),
    the model that holds it, and the number of joints priced in."""
    model = FirstRoundModel(source, joints)
    grow = interior_points and source.num_rows > INTERIOR_POINT_ROWS
    priced = _grow_by_interior_point(model, pricer) if grow else 0
    solves = 0
    while True:
        t, masses, duals, simplex_dual, runs = model.solve("the first deviation-rating LP")
        solves += runs
        gains = model.matrix @ masses
        violated = model.violated(gains, t, PRICING_TOLERANCE)
        if violated.size:
            model.add_rows(violated)
            continue
        result = _Round(t, duals, gains, masses, simplex_dual, duals, lp_solves=solves)
        entering = pricer.entering(model, result)
        if entering.size == 0:
            return result, model, priced
        priced += entering.size
        model.add_joints(entering)


def _grow_by_interior_point(model: FirstRoundModel, pricer: "_Pricer") -> int:
    """Grow the first LP's working sets from approximate optima of the matrix game over
    them (metaeval.solvers.matrix_game), then start the simplex from the basis the last
    one names; return the number of joints priced in.

    Each round enters the rows the approximate sigma violates and the joints the
    approximate y prices negative, as the simplex rounds would from exact optima. With
    dense columns every simplex pivot costs a pass over the working LP, and the simplex
    re-solves after each entry took some 1,500 pivots at 3 x 192; the interior point takes
    about twenty Newton steps whatever entered. The optimum, its duals and the proof that
    no row or joint is left out still come from the simplex rounds that follow.
    """
    priced = 0
    while True:
        game = solve_matrix_game(model.matrix[model.rows])
        if not game.converged:  # round-off stalled it: the simplex rounds take over from there
            model.set_basis_near(game.sigma, game.y, game.value)
            return priced
        gains = model.matrix @ game.sigma
        duals = np.zeros(model.source.num_rows)
        duals[model.rows] = -game.y  # HiGHS's sign for the caps' duals
        rows = model.violated(gains, game.value, PRICING_TOLERANCE)
        joints = pricer.entering(model, _Round(game.value, duals, gains, game.sigma, game.value, duals))
        if rows.size == 0 and joints.size == 0:
            model.set_basis_near(game.sigma, game.y, game.value)
            return priced
        if rows.size:
            model.add_rows(rows)
        if joints.size:
            model.add_joints(joints)
            priced += joints.size


def _warm_rounds(source, joints: np.ndarray, pricer: "_Pricer", priced: int, iterations: int) -> StrictestCCE:
    """Algorithm 1 from its first round in one warm-started HiGHS model (`_WarmModel`)
    over ``joints``, with the safeguards of `_Safeguards`.

    Before a round's constraints are frozen, every joint is priced with that round's
    duals and those with negative reduced cost enter (column generation); the round is
    re-solved until none does, so its optimum, t and duals are those of the LP over all
    joints, and the freezing rule sees exactly what it would on the full LP. Joints never
    leave.
    """
    rows = source.num_rows
    model = _WarmModel(source, joints)
    guard = _Safeguards(model.matrix)
    values = np.zeros(rows)
    unfrozen = np.ones(rows, dtype=bool)
    rounds = 0
    while unfrozen.any():
        rounds += 1
        what = f"round {rounds} of the deviation-rating LPs"
        while True:
            result = model.solve()
            guard.lp_solves += 1
            if result is None:
                result = guard.cold_round(unfrozen, values, what)
            entering = pricer.entering(model, result)
            if entering.size == 0:
                break
            priced += entering.size
            model.add_joints(entering)
            guard.matrix = model.matrix
        chosen = np.flatnonzero(guard.freeze(result.cap_duals, result.gains, unfrozen))
        # Freeze at the LP's t, not at each g's own value: constraints frozen together get
        # exactly equal ratings, and the current sigma meets the new bounds, so the next
        # round starts primal feasible.
        values[chosen] = result.t
        unfrozen[chosen] = False
        model.freeze(chosen, result.t)
    masses, miss = guard.checked_masses(result.masses, values)
    everywhere = np.zeros(source.num_columns)
    everywhere[model.joints] = masses
    return StrictestCCE(values, everywhere, rounds, guard.lp_solves, iterations + model.iterations, guard.counts,
                        miss, priced_joints=priced, lp_joints=len(model.joints), first_rows=rows)


def _masses_on(model: FirstRoundModel, result: _Round, joints: np.ndarray) -> np.ndarray:
    """The round's sigma on ``joints`` (sorted; every joint carrying mass is among them)."""
    masses = np.zeros(len(joints))
    at = np.searchsorted(joints, model.joints)
    inside = at < len(joints)
    inside[inside] = joints[at[inside]] == model.joints[inside]
    masses[at[inside]] = result.masses[inside]
    return masses


class _Pricer:
    """Reduced costs -(s + A_j^T y) of every joint, priced by one contraction
    (`GameColumns.price`) into an array kept between pricings.

    Each round needs at least one pricing to prove its LP optimal over every joint: at
    4 x 64 (16.7M joints) pricing is most of the time. Bounding the change of reduced
    costs by |s - s0| + ||y - y0||_1 between pricings (entries of A are at most 1) and
    pricing only the joints the bound leaves open was tried: the duals move so much
    between rounds that it spared 3 of 33 full pricings at 4 x 32 and 8 of 76 at 3 x 64.
    """

    def __init__(self, source):
        self.source = source
        self.reduced = None
        self.priced = None  # the round whose duals priced ``reduced``

    def _price(self, result: _Round) -> np.ndarray:
        if self.priced is not result:
            reduced = self.reduced = self.source.price(result.gain_duals, out=self.reduced)
            reduced += result.simplex_dual
            np.negative(reduced, out=reduced)
            self.priced = result
        return self.reduced

    def entering(self, model: _WarmModel | FirstRoundModel, result: _Round) -> np.ndarray:
        """Joints outside the model with reduced cost below -PRICING_TOLERANCE: the most
        negative, at most ENTERING_PER_PRICING of them."""
        if len(model.joints) == self.source.num_columns:
            return np.empty(0, dtype=np.int64)
        reduced = self._price(result)
        entering = np.setdiff1d(np.flatnonzero(reduced < -PRICING_TOLERANCE), model.joints, assume_unique=True)
        if entering.size > ENTERING_PER_PRICING:
            entering = entering[np.argpartition(reduced[entering], ENTERING_PER_PRICING)[:ENTERING_PER_PRICING]]
        return np.sort(entering)

    def face(self, model: FirstRoundModel, result: _Round) -> np.ndarray | None:
        """The joints of the first round's optimal face (reduced cost at most
        PRICING_TOLERANCE: a superset of those of zero reduced cost, so the face is exact),
        or None if more than FACE_JOINTS (the later rounds then run in the warm model)."""
        joints = np.flatnonzero(self._price(result) <= PRICING_TOLERANCE)
        return joints if len(joints) <= FACE_JOINTS else None


def _zero_sum_strictest_cce(game: MetaGame) -> tuple[StrictestCCE, np.ndarray, np.ndarray]:
    """The strictest CCE of a 2-player constant-sum game, one player at a time; with the
    ratings (flat, in payoff units) and sigma.

    Every CCE of a constant-sum game has minimax marginals s_1, s_2 and value V*: the gains
    sum to max_i (G_1 s_2)_i - min_j (s_1 G_1)_j >= 0, so gains <= 0 force both marginals
    optimal and E_sigma[G_1] = V*. Player 1's gains (G_1 s_2)_i - V* then depend on s_2
    alone and player 2's on s_1 alone, over a product of sets: Algorithm 1 over the joints
    is Algorithm 1 for each player over the opponent's strategies (constraints G_p, rows
    p's deviations, columns the opponent's strategies), K_1 x K_2 LPs instead of
    (K_1 + K_2) x K_1 K_2, and the product s_1 x s_2 is a strictest CCE. A sampled
    meta-game's minimax strategies mix many strategies (212 of 1,000 per player on a leduc
    league of random networks), so the joint LP's optimal face holds tens of thousands of
    joints: its later rounds were hundreds of warm re-solves and pricings over every joint.
    """
    results, ratings, marginals = [], [], []
    for payoff in (game.payoffs[0], game.payoffs[1].T):  # rows: the player's deviations
        scale = float(np.ptp(payoff)) or 1.0
        result = strictest_cce(StoredColumns(quantise((payoff - payoff.mean()) / scale)))
        # The first round's t, the largest value, is V* (shifted and scaled): the ratings are
        # the gains against the opponent's marginal, minus V*.
        ratings.append(scale * (result.values - result.values.max()))
        marginals.append(result.masses)
        results.append(result)
    counts = {name: sum(r.safeguards[name] for r in results) for name in results[0].safeguards}
    combined = StrictestCCE(
        np.concatenate([r.values for r in results]), np.empty(0), max(r.rounds for r in results),
        sum(r.lp_solves for r in results), sum(r.simplex_iterations for r in results), counts,
        max(r.max_violation for r in results), priced_joints=sum(r.priced_joints for r in results),
        lp_joints=sum(r.lp_joints for r in results), first_rows=sum(r.first_rows for r in results),
        face_rounds=max(r.face_rounds for r in results), read_off=sum(r.read_off for r in results))
    return combined, np.concatenate(ratings), np.outer(marginals[1], marginals[0])


@homogeneous("max_violation")
def deviation(game: MetaGame, symmetry: bool = True, merge_duplicates: bool = True,
              column_generation: bool | None = None) -> Rating:
    """CCE deviation ratings r_p(a'_p) = delta_p(a'_p; sigma*) (maths, section 2.1; Marris et al. 2025, eq. 3a).

    Args:
        game: the meta-game.
        symmetry: fold interchangeable players into one (exact; see metaeval.solvers.reduction).
        merge_duplicates: merge identical constraint rows and joint columns (exact).
        column_generation: True: column generation over the game's joints (the LPs hold a
            working set grown by pricing; symmetry and merge_duplicates do not apply);
            False: every joint of the reduced system in the LPs; None (default): a
            2-player constant-sum game player by player (each player's LPs over the
            opponent's strategies, `_zero_sum_strictest_cce`), other games by column
            generation above COLUMN_GENERATION_JOINTS joints. All give the same ratings.

    Returns:
        A Rating whose ``distribution`` is the strictest CCE sigma* found, and whose
        diagnostics hold ``zero_sum`` (rated player by player), ``column_generation``,
        ``rounds``, ``lp_solves`` (one re-solve per round and per pricing or row generation
        that added joints or rows, plus any safeguard's), ``simplex_iterations`` (of the first and warm models), one count per
        safeguard (``safeguard_cold_resolves``, ``safeguard_looser_tolerances``,
        ``safeguard_largest_gain_freezes``, ``safeguard_final_resolves``,
        ``safeguard_simplex_retries``: the LPs solved again with the first one by the
        simplex alone after they failed from interior points), the LP size
        (``lp_rows``: deviations, ``first_rows``: those in the first LP, ``lp_columns``: joints
        in the first LP, and in the warm one if the later rounds ran there), ``face_rounds``
        (rounds on the first LP's optimal face), ``read_off`` (ratings read there as gains
        constant on the face), ``priced_joints`` (added by pricing) and ``max_violation``, the largest
        |delta(sigma*) - rating| over all constraints in payoff units (at most
        CHECK_TOLERANCE times the largest payoff difference).
    """
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"deviation ratings need a MetaGame, got {type(game).__name__}")
    zero_sum = column_generation is None and game.num_players == 2 and game.is_zero_sum(ZERO_SUM_TOLERANCE)
    if column_generation is None:
        column_generation = game.num_joints > COLUMN_GENERATION_JOINTS
    diagnostics = {"safeguard_column_generation_retries": 0, "safeguard_simplex_retries": 0}
    if zero_sum:
        result, flat, sigma = _zero_sum_strictest_cce(game)
        column_generation = False
    elif not column_generation:
        try:
            reduced = reduce_cce(game, symmetry=symmetry, merge_duplicates=merge_duplicates)
            result = strictest_cce(StoredColumns(reduced.matrix))
            sigma = reduced.expand(result.masses, game.shape)
            flat = reduced.scale * result.values[reduced.row_of]
            diagnostics["player_classes"] = reduced.classes
        except MetaEvalError:
            # Last safeguard: the same Algorithm 1 on a differently built LP sequence (the
            # game's own joints, no folding or merging, grown from one joint by pricing),
            # whose round-off differs; a failure there is the error reported.
            diagnostics["safeguard_column_generation_retries"] = 1
            column_generation = True
    if column_generation and not zero_sum:
        # Copies of a strategy merged first (exact): else every joint with a copy is a
        # duplicate column, and an attacked king-of-the-hill game's optimal face is some
        # fifty times too large.
        labels = copied_strategies(game) if merge_duplicates else [np.arange(k) for k in game.shape]
        firsts = [np.unique(label, return_index=True)[1] for label in labels]
        copies = sum(game.shape) - sum(len(first) for first in firsts)
        merged = MetaGame(game.payoffs[(slice(None), *np.ix_(*firsts))]) if copies else game
        source = GameColumns(merged)
        start = [source.least_tempted_joint()]
        try:
            try:
                result = strictest_cce(source, joints=start)
            except MetaEvalError:
                if source.num_rows <= INTERIOR_POINT_ROWS:
                    raise
                # The interior points' first optimum is another vertex of the same optimal
                # face; on nearly tied games the later rounds' round-off depends on it
                # (3 x 128 `tied`: round 49 infeasible from it, solved from the simplex's).
                diagnostics["safeguard_simplex_retries"] = 1
                result = strictest_cce(source, joints=start, interior_points=False)
        except MetaEvalError as exc:
            raise MetaEvalError(
                f"{exc}. Deviation ratings of this game ({game.num_joints:.3g} joints) need more precision "
                "than the LP solver reaches: rate fewer strategies (e.g. a subset chosen by another rater) "
                "or use another rater, such as nash"
            ) from None
        sigma = np.zeros(game.shape)
        sigma[np.ix_(*firsts)] = result.masses.reshape(merged.shape)
        starts = np.cumsum([0, *merged.shape[:-1]])
        flat = source.scale * result.values[np.concatenate([start + label for start, label in zip(starts, labels)])]
        diagnostics["merged_copies"] = copies
    diagnostics["column_generation"] = bool(column_generation)
    diagnostics["zero_sum"] = bool(zero_sum)
    ratings = np.split(flat, np.cumsum(game.shape)[:-1])
    gains = np.concatenate(deviation_gains(game, sigma))
    diagnostics.update({
        "rounds": result.rounds,
        "lp_solves": result.lp_solves,
        "simplex_iterations": result.simplex_iterations,
        **{f"safeguard_{name}": count for name, count in result.safeguards.items()},
        "lp_rows": len(result.values),
        "lp_columns": result.lp_joints,
        "priced_joints": result.priced_joints,
        "first_rows": result.first_rows,
        "face_rounds": result.face_rounds,
        "read_off": result.read_off,
        "max_violation": float(np.abs(gains - flat).max()),
    })
    # Ratings are accurate to CHECK_TOLERANCE of the payoff range: closer ratings are tied.
    return Rating("deviation", game, ratings, distribution=sigma, diagnostics=diagnostics,
                  tolerance=CHECK_TOLERANCE * game.payoff_range())
