"""Meta-solvers: a meta-game in, a joint distribution ``[K_1..K_N]`` over its strategies out.

PSRO-style loops mix the population with these (SPEC 1 notation). Product distributions
(Nash) are the outer product of the players' mixtures.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import numpy as np

from metaeval.solvers.equilibria import check_distribution, mecce
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers.mgcce import mgcce
from metaeval.ratings import rate


def product_distribution(marginals) -> np.ndarray:
    """The joint distribution ``[K_1..K_N]`` of independent per-player mixtures."""
    return functools.reduce(np.multiply.outer, [np.asarray(m, dtype=np.float64) for m in marginals])


def marginals(sigma: np.ndarray) -> list[np.ndarray]:
    """Each player's marginal of a joint distribution."""
    axes = range(sigma.ndim)
    return [sigma.sum(axis=tuple(q for q in axes if q != p)) for p in axes]


def uniform(game: MetaGame) -> np.ndarray:
    """Every joint equally likely."""
    return np.full(game.shape, 1.0 / game.num_joints)


def nash(game: MetaGame) -> np.ndarray:
    """The Nash equilibrium the ``nash`` rater selects (maximum-entropy in 2-player zero-sum
    games, the limiting logit equilibrium otherwise), as a product distribution."""
    return product_distribution(rate(game, "nash").distribution)


def alpharank(game: MetaGame, **options) -> np.ndarray:
    """alpha-Rank's stationary mass over joint profiles (options as the ``alpharank`` rater)."""
    distribution = rate(game, "alpharank", **options).distribution
    return product_distribution(distribution) if isinstance(distribution, list) else distribution


def deviation(game: MetaGame, **options) -> np.ndarray:
    """The strictest CCE, against which deviation ratings are measured (SPEC 2.1)."""
    return rate(game, "deviation", **options).distribution


SOLVERS: dict[str, Callable[..., np.ndarray]] = {
    "uniform": uniform,
    "nash": nash,
    "alpharank": alpharank,
    "mecce": mecce,
    "mgcce": mgcce,
    "deviation": deviation,
}


def solve(game: MetaGame, solver, **options) -> np.ndarray:
    """The joint distribution of ``solver`` (a name in :data:`SOLVERS`, or a callable
    ``solver(game, **options) -> array``), checked to be a distribution over the joints."""
    if callable(solver):
        function = solver
    elif isinstance(solver, str) and solver in SOLVERS:
        function = SOLVERS[solver]
    else:
        raise MetaEvalError(
            f"unknown meta-solver {solver!r}; choose one of {', '.join(SOLVERS)} or pass a callable"
        )
    accepted = inspect.signature(function).parameters
    unknown = sorted(set(options) - set(list(accepted)[1:]))
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        raise MetaEvalError(f"meta-solver {solver!r} has no option(s) {', '.join(unknown)}")
    return check_distribution(game, function(game, **options))
