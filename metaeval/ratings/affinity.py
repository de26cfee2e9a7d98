"""Clone-invariant equilibrium selection with an affinity-entropy target (Liu et al. 2025,
"Re-evaluating open-ended evaluation of large language models", section 3).

Player i's kernel compares its strategies by their payoffs against uniformly random
co-players (eqs. 5-6):

    D_ab = E_{a_-i ~ U}[(u_i(a, a_-i) - u_i(b, a_-i))^2],   K_ab = exp(-D_ab / (2 variance)),

(the exponent as in DeepMind's polarix; the paper writes (2 sigma)^2). The affinity
entropy (eq. 4) is H(x) = (1/p)[1 - sum((U x)^(p+1))], U = K diag(||K_:j||_(p+1))^-1, and
the target t_i is its maximiser. With ``variance=None`` the kernel is hard: K_ab = 1 for
exact clones (D_ab = 0, to 1e-12 of the payoff scale), else 0, and t_i puts 1/c on each of
the c clone sets, split evenly inside a set.

- ``payoff(game, target="affinity")``: the CCE of maximum entropy relative to t = x_i t_i,
  max H(sigma) + sum_a sigma(a) log t(a) subject to the CCE constraints; ratings are its
  deviation gains. An exponential-cone program (CVXPY + Clarabel), or, for the hard
  kernel when clones pay every player alike, the MECCE of the de-cloned game.
- ``nash(game, target="affinity")``: the equilibrium the nash rater selects (LLE, or the
  maximum-entropy NE in 2-player zero-sum games) with target t. For the hard kernel it
  is exact: along the logit path x_i(a) is proportional to t_i(a) exp(u_i(a, x_-i) / tau),
  so clones share their set's mass evenly and the path is the uniform-target path of the
  de-cloned game, whose merged strategy pays the other players the mean of its clones.
  That game is solved and its strategies split back. A soft kernel would need a
  target-aware path follower, which metaeval does not have: refused.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from metaeval.solvers.equilibria import cce_constraints, deviation_gains
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers.mecce import FAILURE_TOLERANCE
from metaeval.solvers.reduction import identical
from metaeval.ratings.base import Rating, marginals, product_distribution

TARGETS = ("uniform", "affinity")
CLONE_TOLERANCE = 1e-12


def _payoff_rows(game: MetaGame, player: int) -> np.ndarray:
    """u_i(a, a_-i) as a [K_i, prod_{j != i} K_j] matrix."""
    return np.moveaxis(game.payoffs[player], player, 0).reshape(game.shape[player], -1)


def clone_sets(game: MetaGame, player: int) -> np.ndarray:
    """Label of each strategy's set of exact clones (same payoff to ``player`` against every
    co-player profile, to CLONE_TOLERANCE of the payoff scale), numbered by first appearance.

    Args:
        game: the meta-game.
        player: the player whose strategies are compared.

    Returns:
        The labels ``[K_p]``.
    """
    rows = _payoff_rows(game, player)
    scale = max(float(np.abs(game.payoffs).max()), np.finfo(float).tiny)
    rows = np.round(rows / scale / CLONE_TOLERANCE) + 0.0  # -0.0 made 0.0
    return identical(len(rows), rows.__getitem__)


def affinity_kernel(game: MetaGame, player: int, variance: float | None = None) -> np.ndarray:
    """K (eqs. 5-6), exact expectation over uniform co-players; hard kernel when variance is None.

    Args:
        game: the meta-game.
        player: the player whose strategies are compared.
        variance: the Gaussian kernel's variance; None: 1 between clones, 0 otherwise.

    Returns:
        The kernel ``[K_p, K_p]``.
    """
    if variance is None:
        labels = clone_sets(game, player)
        return (labels[:, None] == labels[None, :]).astype(np.float64)
    if not variance > 0:
        raise MetaEvalError(f"kernel variance must be positive, got {variance}")
    rows = _payoff_rows(game, player)
    squares = (rows**2).sum(axis=1)
    distance = np.maximum(squares[:, None] + squares[None, :] - 2 * rows @ rows.T, 0.0) / rows.shape[1]
    np.fill_diagonal(distance, 0.0)
    return np.exp(-distance / (2 * variance))


def affinity_entropy(x, kernel: np.ndarray, p: float = 1.0) -> float:
    """H_a^p(x) = (1/p)[1 - 1^T (U x)^(p+1)] (eq. 4).

    Args:
        x: a mixture ``[K_p]``.
        kernel: the affinity kernel ``[K_p, K_p]``.
        p: the entropy's order, in (0, 1].

    Returns:
        The affinity entropy.
    """
    if not 0 < p <= 1:
        raise MetaEvalError(f"affinity entropy needs 0 < p <= 1, got {p}")
    norms = np.linalg.norm(kernel, ord=p + 1, axis=0)
    return float((1 - np.sum((kernel / norms @ np.asarray(x, dtype=np.float64)) ** (p + 1))) / p)


def affinity_target(game: MetaGame, player: int, variance: float | None = None, p: float = 1.0) -> np.ndarray:
    """argmax_x H_a^p(x) over the simplex: 1/c per clone set, split evenly, for the hard
    kernel; otherwise a convex program (CVXPY + Clarabel) on the de-cloned strategies.

    Args:
        game: the meta-game.
        player: the player.
        variance: the kernel's variance (None: the hard kernel).
        p: the entropy's order, in (0, 1].

    Returns:
        The target mixture ``[K_p]``.
    """
    labels = clone_sets(game, player)
    sizes = np.bincount(labels)
    if variance is None:
        return 1.0 / (len(sizes) * sizes[labels])
    if not 0 < p <= 1:
        raise MetaEvalError(f"affinity entropy needs 0 < p <= 1, got {p}")
    import cvxpy as cp

    representatives = np.array([np.flatnonzero(labels == s)[0] for s in range(len(sizes))])
    kernel = affinity_kernel(game, player, variance)
    norms = np.linalg.norm(kernel, ord=p + 1, axis=0)
    # Clones have equal columns of U: the problem depends on their sets' masses only.
    u = (kernel / norms)[:, representatives] * 1.0
    mass = cp.Variable(len(sizes), nonneg=True)
    problem = cp.Problem(cp.Minimize(cp.sum(cp.power(u @ mass, p + 1))), [cp.sum(mass) == 1])
    problem.solve(solver=cp.CLARABEL)
    if problem.status != cp.OPTIMAL or mass.value is None:
        raise MetaEvalError(f"affinity target of player {player}: the solver ended {problem.status}")
    masses = np.maximum(np.asarray(mass.value), 0.0)
    return masses[labels] / masses.sum() / sizes[labels]


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise MetaEvalError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")


def max_relative_entropy_cce(game: MetaGame, target: np.ndarray) -> np.ndarray:
    """argmax_sigma H(sigma) + sum sigma log t subject to the CCE constraints (sigma = 0 where t = 0).

    Args:
        game: the meta-game.
        target: the target joint distribution t ``[K_1, ..., K_N]``.

    Returns:
        The CCE ``[K_1, ..., K_N]``.
    """
    import cvxpy as cp

    target = np.asarray(target, dtype=np.float64).ravel()
    support = target > 0
    matrix = cce_constraints(game)[:, support]
    matrix = matrix / max(float(np.abs(matrix).max()), np.finfo(float).tiny)
    sigma = cp.Variable(int(support.sum()), nonneg=True)
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(sigma)) + np.log(target[support]) @ sigma),
                         [matrix @ sigma <= 0, cp.sum(sigma) == 1])
    try:
        problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    except cp.error.SolverError as exc:
        raise MetaEvalError(f"maximum relative-entropy CCE: the solver failed: {exc}") from None
    if problem.status != cp.OPTIMAL or sigma.value is None:
        raise MetaEvalError(f"maximum relative-entropy CCE: the solver ended {problem.status}")
    joint = np.zeros(target.size)
    joint[support] = np.maximum(np.asarray(sigma.value), 0.0)
    return (joint / joint.sum()).reshape(game.shape)


def _split_evenly(reduced_sigma: np.ndarray, labels: list[np.ndarray]) -> np.ndarray:
    """A joint over the de-cloned game spread evenly over the clones of every joint."""
    sigma = reduced_sigma[np.ix_(*labels)]
    for p, label in enumerate(labels):
        shape = [1] * len(labels)
        shape[p] = len(label)
        sigma = sigma / np.bincount(label)[label].reshape(shape)
    return sigma


def _full_clones(game: MetaGame, reduced: MetaGame, labels: list[np.ndarray]) -> bool:
    """Whether every clone set pays every player the same (so the de-cloned game loses nothing)."""
    expanded = reduced.payoffs[(slice(None), *np.ix_(*labels))]
    scale = max(float(np.abs(game.payoffs).max()), np.finfo(float).tiny)
    return bool(np.allclose(expanded, game.payoffs, rtol=0, atol=CLONE_TOLERANCE * scale))


def payoff_with_target(game: MetaGame, target: str, kernel_variance: float | None = None) -> Rating:
    """Payoff ratings against the CCE of maximum entropy relative to the affinity target.

    With the hard kernel and clone sets that pay every player alike, KL(sigma || t) is
    the KL of the clone sets' total mass to the uniform joint plus that of the splits
    inside them, and the CCE constraints see the totals only: the answer is the MECCE of
    the de-cloned game (metaeval.solvers.mecce, dual Newton) spread evenly over the clones.
    Otherwise the exponential-cone program is solved.

    Args:
        game: the meta-game.
        target: ``"affinity"``.
        kernel_variance: the kernel's variance (None: the hard kernel).

    Returns:
        The Rating.
    """
    from metaeval.ratings.payoff import payoff

    _check_target(target)
    targets = [affinity_target(game, p, kernel_variance) for p in range(game.num_players)]
    reduced, labels = decloned(game)
    if kernel_variance is None and _full_clones(game, reduced, labels):
        inner = payoff(reduced)
        sigma, solver = _split_evenly(inner.distribution, labels), "MECCE of the de-cloned game"
        if "solver" in inner.diagnostics:
            solver += f" by {inner.diagnostics['solver']}"
        # The de-cloned solve's own figures (KKT residual, Newton steps, ...).
        details = {key: value for key, value in inner.diagnostics.items() if key not in ("solver", "cce_violation")}
    else:
        sigma, solver = max_relative_entropy_cce(game, product_distribution(targets)), "exponential-cone program (Clarabel)"
        details = {}
    ratings = deviation_gains(game, sigma)
    diagnostics = {
        **details,
        "target": target,
        "kernel_variance": kernel_variance,
        "solver": solver,
        "target_marginals": targets,
        "cce_violation": max(0.0, float(max(r.max() for r in ratings))),
    }
    return Rating("payoff", game, ratings, distribution=sigma, diagnostics=diagnostics,
                  tolerance=FAILURE_TOLERANCE * game.payoff_range())


def decloned(game: MetaGame) -> tuple[MetaGame, list[np.ndarray]]:
    """The game with each player's clone sets merged into their first member, whose payoff
    to every other player is the mean over the set; and each player's set labels. The mean
    is the first member's payoff plus the mean difference from it, so payoffs that agree
    across a set are kept bit for bit.

    Args:
        game: the meta-game.

    Returns:
        The de-cloned game and, per player, the label of each strategy's clone set.
    """
    labels = [clone_sets(game, p) for p in range(game.num_players)]
    payoffs = game.payoffs
    for p, label in enumerate(labels):
        if label.max() + 1 == len(label):
            continue  # no clones: nothing to merge
        # A sparse averaging matrix: a dense one multiplies every payoff by K_p' entries
        # (74 GFLOP for a 64 x 64 x 3,000 king-of-the-hill game with 1,000 prompt copies,
        # 1.9 of the 10.2 CPU s its de-cloning took).
        merge = sp.csr_matrix((1.0 / np.bincount(label)[label], (np.arange(game.shape[p]), label)))
        first = np.take(payoffs, np.unique(label, return_index=True)[1], axis=1 + p)
        differences = np.moveaxis(payoffs - np.take(first, label, axis=1 + p), 1 + p, -1)
        merged = (merge.T @ differences.reshape(-1, game.shape[p]).T).T.reshape(*differences.shape[:-1], -1)
        payoffs = first + np.moveaxis(merged, -1, 1 + p)
    names = [[game.strategy_names[p][np.flatnonzero(label == s)[0]] for s in range(label.max() + 1)]
             for p, label in enumerate(labels)]
    return MetaGame(payoffs, strategy_names=names, player_names=game.player_names), labels


def nash_with_target(game: MetaGame, target: str, kernel_variance: float | None = None) -> Rating:
    """Nash ratings for the equilibrium selected with the hard affinity target (module docstring).

    Args:
        game: the meta-game.
        target: ``"affinity"``.
        kernel_variance: None (the hard kernel).

    Returns:
        The Rating.
    """
    from metaeval.ratings.nash import nash

    _check_target(target)
    if kernel_variance is not None:
        raise MetaEvalError("nash with target='affinity' supports only the hard kernel (kernel_variance=None)")
    reduced, labels = decloned(game)
    rating = nash(reduced)
    strategies = [x[label] / np.bincount(label)[label] for x, label in zip(marginals(rating.distribution), labels)]
    ratings = [r[label] for r, label in zip(rating.ratings, labels)]
    diagnostics = dict(rating.diagnostics, target=target, decloned_shape=reduced.shape)
    return Rating("nash", game, ratings, distribution=product_distribution(strategies), diagnostics=diagnostics,
                  tolerance=rating.tolerance)
