"""Meta-solvers: a meta-game in, a joint distribution ``[K_1..K_N]`` over its strategies out.

PSRO-style loops mix the population with these (notation of the maths page, section 1). Product distributions
(Nash) are the outer product of the players' mixtures. The public entry points:

- [`solve`][metaeval.training.meta_solvers.solve] ``(game, solver, **options)``: the joint distribution of a named solver
  ([`SOLVERS`][metaeval.training.meta_solvers.SOLVERS]) or a callable, checked to be a distribution over the game's joints;
- [`marginals`][metaeval.ratings.base.marginals] ``(sigma)``: each player's marginal of a joint distribution;
- [`product_distribution`][metaeval.ratings.base.product_distribution] ``(marginals)``: the joint of independent mixtures.

For example, the players' mixtures of the maximum-entropy CCE of rock-paper-scissors:

    from metaeval import MetaGame
    from metaeval.training import meta_solvers

    rps = MetaGame.from_matrix([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    meta_solvers.marginals(meta_solvers.solve(rps, "mecce"))  # [1/3, 1/3, 1/3] twice

[`metaeval.integrations.openspiel`][metaeval.integrations.openspiel] hands these to OpenSpiel's ``psro_v2`` and ``jpsro``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from metaeval.solvers.equilibria import check_distribution, mecce
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.solvers.mgcce import mgcce
from metaeval.ratings import RATERS, check_options as check_rater_options, rate
from metaeval.ratings.base import marginals, product_distribution


__all__ = ["SOLVERS", "alpharank", "check_options", "deviation", "marginals", "nash", "product_distribution",
           "solve", "uniform"]


def uniform(game: MetaGame) -> np.ndarray:
    """Every joint equally likely.

    Args:
        game: the meta-game.

    Returns:
        The joint distribution.
    """
    return np.full(game.shape, 1.0 / game.num_joints)


def nash(game: MetaGame) -> np.ndarray:
    """The Nash equilibrium the ``nash`` rater selects (maximum-entropy in 2-player zero-sum
    games, the limiting logit equilibrium otherwise), as a product distribution.

    Args:
        game: the meta-game.

    Returns:
        The joint distribution.
    """
    return rate(game, "nash").distribution


def alpharank(game: MetaGame, **options) -> np.ndarray:
    """alpha-Rank's stationary mass over joint profiles (options as the ``alpharank`` rater).

    Args:
        game: the meta-game.
        **options: the ``alpharank`` rater's options.

    Returns:
        The joint distribution.
    """
    return rate(game, "alpharank", **options).distribution


def deviation(game: MetaGame, **options) -> np.ndarray:
    """The strictest CCE, against which deviation ratings are measured (maths, section 2.1).

    Args:
        game: the meta-game.
        **options: the ``deviation`` rater's options.

    Returns:
        The joint distribution.
    """
    return rate(game, "deviation", **options).distribution


#: The named meta-solvers ``solve`` accepts: name -> ``f(game, **options) -> sigma``.
SOLVERS: dict[str, Callable[..., np.ndarray]] = {
    "uniform": uniform,
    "nash": nash,
    "alpharank": alpharank,
    "mecce": mecce,
    "mgcce": mgcce,
    "deviation": deviation,
}


def solve(game: MetaGame, solver, **options) -> np.ndarray:
    """The joint distribution ``[K_1..K_N]`` that ``solver`` puts on ``game``'s joints.

    Args:
        game: the meta-game.
        solver: a name in [`SOLVERS`][metaeval.training.meta_solvers.SOLVERS] (``uniform``, ``nash``, ``alpharank``, ``mecce``,
            ``mgcce``, ``deviation``) or a callable ``solver(game, **options) -> array``.
        options: the solver's options (an unknown one is an error).

    Raises:
        MetaEvalError: an unknown solver or option, or a result that is not a distribution
            over the joints (non-negative, summing to 1, of the game's shape).

    Returns:
        The joint distribution.
    """
    return check_distribution(game, check_options(solver, options)(game, **options))


def check_options(solver, options: dict) -> Callable[..., np.ndarray]:
    """The meta-solver named ``solver`` (or the callable ``solver``), once its name and
    option names are checked; the options of a solver that hands them on to the rater of
    its name (``alpharank``, ``deviation``) are checked against that rater's.

    Args:
        solver: a name in [`SOLVERS`][metaeval.training.meta_solvers.SOLVERS] or a callable.
        options: the options meant for it.

    Returns:
        The meta-solver function.

    Raises:
        MetaEvalError: an unknown solver, or an option it does not take.
    """
    if callable(solver):
        function = solver
    elif isinstance(solver, str) and solver in SOLVERS:
        function = SOLVERS[solver]
    else:
        raise MetaEvalError(
            f"unknown meta-solver {solver!r}; choose one of {', '.join(SOLVERS)} or pass a callable"
        )
    accepted = inspect.signature(function).parameters
    if any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        if isinstance(solver, str) and solver in RATERS:
            check_rater_options(solver, options)
        return function
    unknown = sorted(set(options) - set(list(accepted)[1:]))
    if unknown:
        raise MetaEvalError(f"meta-solver {solver!r} has no option(s) {', '.join(unknown)}")
    return function
