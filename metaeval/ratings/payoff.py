"""Payoff ratings: deviation gains under the maximum-entropy CCE (maths, section 2.2; Marris et al. 2022).

r_p(a_p) = delta_p(a_p; sigma_MECCE) = sum_a sigma(a) (G_p(a_p, a_-p) - G_p(a)).
"""

from __future__ import annotations

import numpy as np

from metaeval.solvers.equilibria import cce_constraints, deviation_gains
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers import king_of_the_hill
from metaeval.solvers.cce_columns import GameColumns
from metaeval.solvers.mecce import (FAILURE_TOLERANCE, NEWTON_FIRST_JOINTS, MaxEntropy, max_entropy,
                                    max_entropy_implicit)
from metaeval.solvers.mecce_rows import max_entropy_cce
from metaeval.ratings.base import Rating, homogeneous
from metaeval.ratings.nash import ZERO_SUM_TOLERANCE, well_scaled
from metaeval.ratings.nash_zero_sum import max_entropy_nash_solved


@homogeneous("cce_violation")
def payoff(game: MetaGame, target: str = "uniform", kernel_variance: float | None = None,
           implicit: bool | None = None) -> Rating:
    """Rate every strategy by its CCE deviation gain against the MECCE.

    The Rating's ``distribution`` is the MECCE; diagnostics hold ``newton_steps``,
    ``entropy`` (nats), ``cce_violation`` (max(0, largest gain), payoff units),
    ``kkt_residual`` (relative to the largest payoff difference) and how often each
    safeguard of [`metaeval.solvers.mecce.max_entropy`][metaeval.solvers.mecce.max_entropy] fired (``safeguard_*``).
    ``target="affinity"`` uses the CCE of maximum entropy relative to the clone-invariant
    affinity-entropy target instead (Liu et al. 2025; metaeval.ratings.affinity).

    ``implicit``: True: the dual is solved through contractions of the payoffs, never
    storing the CCE matrix ([`metaeval.solvers.mecce.max_entropy_implicit`][metaeval.solvers.mecce.max_entropy_implicit]; it falls
    back to the stored matrix, ``safeguard_dense_fallbacks``, if some joint leaves the
    support); False: on the stored matrix; None (default): a 2-player constant-sum game
    through each player's maximum-entropy minimax strategy (its MECCE is their product;
    ``solver`` says so), other games implicit above NEWTON_FIRST_JOINTS joints. All give
    the same MECCE to the accepted KKT residual.
    Large king-of-the-hill games (metaeval.solvers.king_of_the_hill) are solved by
    constraint generation on the dual (metaeval.solvers.mecce_rows; the same CCE, with
    ``solver``, ``constraint_rounds``, ``working_rows`` and ``active_rows`` diagnostics).

    Args:
        game: the meta-game.
        target: ``"uniform"``, or ``"affinity"`` for the clone-invariant selection.
        kernel_variance: with ``target="affinity"``: the kernel's variance (None: the hard kernel).
        implicit: how the dual is solved (above).

    Returns:
        The Rating.
    """
    if target != "uniform":
        from metaeval.ratings.affinity import payoff_with_target

        return payoff_with_target(game, target, kernel_variance)
    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"payoff ratings need a MetaGame, got {type(game).__name__}")
    solution, extra = None, {}
    if king_of_the_hill.structured(game):
        try:
            solution = max_entropy_cce(game)
            extra = dict(solution.rows, solver="constraint generation on the dual (king of the hill)")
        except MetaEvalError:
            # Its multipliers diverge where the largest CCE support leaves joints out (a
            # model that dominates on few prompts): the general solvers find that support.
            extra = {"safeguard_full_solver_fallbacks": 1}
    if solution is None and implicit is None and game.num_players == 2:
        solution = _zero_sum_mecce(game)
        if solution is not None:
            extra = {"solver": "maximum-entropy minimax strategies (constant-sum)"}
    if implicit is None:
        implicit = game.num_joints > NEWTON_FIRST_JOINTS
    if solution is None and implicit:
        solution = max_entropy_implicit(GameColumns(game), lambda: cce_constraints(game))
    elif solution is None:
        solution = max_entropy(cce_constraints(game))
    sigma = solution.distribution.reshape(game.shape)
    ratings = deviation_gains(game, sigma)
    support = sigma[sigma > 0]
    diagnostics = {
        "newton_steps": solution.iterations,
        "entropy": float(-(support * np.log(support)).sum()),
        "cce_violation": max(0.0, float(max(r.max() for r in ratings))),
        "kkt_residual": solution.kkt_residual,
        **{f"safeguard_{name}": count for name, count in {"dense_fallbacks": 0, **solution.safeguards}.items()},
        **extra,
    }
    # Ratings are accurate to the accepted KKT residual: closer ratings are tied.
    return Rating("payoff", game, ratings, distribution=sigma, diagnostics=diagnostics,
                  tolerance=FAILURE_TOLERANCE * game.payoff_range())


def _zero_sum_mecce(game: MetaGame) -> MaxEntropy | None:
    """The MECCE of a 2-player constant-sum game, None if the game is not constant-sum.

    Every CCE there has minimax marginals and value V* (metaeval.ratings.deviation), and the
    product of a CCE's marginals is then a CCE of at least its entropy: the MECCE is the
    product of each player's maximum-entropy minimax strategy, the maximum-entropy Nash
    equilibrium (metaeval.ratings.nash_zero_sum), found over K_1 x K_2 payoffs instead of
    the (K_1 + K_2) x K_1 K_2 CCE matrix.
    """
    payoffs, spread = well_scaled(game.payoffs)
    if spread == 0 or np.abs(payoffs.sum(axis=0)).max() > ZERO_SUM_TOLERANCE:
        return None
    row, column, _, solved = max_entropy_nash_solved(payoffs[0])
    safeguards = {name: sum(s.safeguards[name] for s in solved) for name in solved[0].safeguards}
    return MaxEntropy(np.outer(row, column).ravel(), sum(s.iterations for s in solved),
                      max(s.kkt_residual for s in solved), sum(s.dual_bound for s in solved), safeguards)
