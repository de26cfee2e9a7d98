"""Bootstrap replicates warm-started from the point rating.

A replicate's payoffs differ from the rated game's by sampling noise, so its rating
usually lies where the point rating's solver ended. `warm_replicates` returns, for a
rater that has one, a function that rates a replicate's payoff tensor from there, or
returns None where it cannot certify its answer (the replicate is then rated from
scratch, as without a warm start):

- ``uniform``: the means, without building a game and a Rating (where the replicates
  are not drawn from their Gaussian law, `metaeval.ratings.gaussian_replicates`: in
  win-probability games and from episodes).
- ``payoff``: the maximum-entropy dual's Newton started from the point's multipliers;
  a KKT point with every joint's mass positive is the MECCE itself (the entropy is
  strictly concave), so nothing else is checked. A replicate whose MECCE leaves joints
  out is solved from scratch.
- ``deviation``: Algorithm 1 by column generation over the game's joints (as the rater
  runs it above COLUMN_GENERATION_JOINTS joints) with the first working set the point's
  support instead of one joint; pricing over every joint makes the LPs' optima those over
  every joint, whatever the start.
- ``alpharank``: the point's chain with each replicate's rates, a batch of replicates
  solved together (`metaeval.ratings.warm_chains`), where the point's chain is stored
  and has one metastable class.

Every accepted replicate is the cold rating to the solver's precision.

nash has none: Newton's method on the point equilibrium's support, started from it,
reaches an exact equilibrium of most replicates whose support has not changed, but not
always the one the logit branch selects (on a random 3 x 16 game, 2 of 20 replicates
reached an equilibrium 0.31 away from the traced one), so each replicate's branch is
traced.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating
from metaeval.ratings.warm_chains import ChainReplicates
from metaeval.solvers import king_of_the_hill
from metaeval.solvers.cce_columns import GameColumns
from metaeval.solvers.equilibria import cce_constraints, deviation_gains
from metaeval.solvers.mecce import NEWTON_FIRST_JOINTS, max_entropy_from, scaled_matrix


def warm_replicates(rater, rating: Rating, options: dict):
    """A function rating a replicate's payoffs ``[N, K_1..K_N]`` warm from ``rating``,
    returning the ratings of every player concatenated, or None to rate it from scratch;
    one with ``batched = True`` takes a stack of replicates and returns a list of those.

    Args:
        rater: the rater function.
        rating: its point rating of the game.
        options: the rater's options.

    Returns:
        The function, or None if the rater has no warm start there (module docstring).
    """
    from metaeval.ratings.alpharank import alpharank
    from metaeval.ratings.deviation import deviation
    from metaeval.ratings.payoff import payoff
    from metaeval.ratings.uniform import uniform

    if rater is uniform:
        return _uniform
    if rater is payoff and not options and "solver" not in rating.diagnostics:
        return PayoffReplicate.from_game(rating.game)
    if rater is deviation and not options and not rating.diagnostics.get("merged_copies"):
        return DeviationReplicate(np.flatnonzero(rating.distribution.ravel() > 0))
    if rater is alpharank:
        return ChainReplicates.from_rating(rating)
    return None


def _uniform(payoffs: np.ndarray) -> np.ndarray:
    """The uniform rater's ratings of ``payoffs``, as `metaeval.ratings.uniform` computes them."""
    players = len(payoffs)
    return np.concatenate([payoffs[p].mean(axis=tuple(q for q in range(players) if q != p))
                           for p in range(players)])


class PayoffReplicate:
    """A replicate's MECCE by Newton from the point's dual multipliers."""

    def __init__(self, implicit: bool, start: np.ndarray):
        self.implicit, self.start = implicit, start

    @classmethod
    def from_game(cls, game: MetaGame) -> "PayoffReplicate | None":
        """The point's multipliers, by Newton from zero on ``game`` (None where its MECCE
        leaves joints out)."""
        implicit = game.num_joints > NEWTON_FIRST_JOINTS
        found = max_entropy_from(cls.system(game, implicit), np.zeros(sum(game.shape)))
        return None if found is None else cls(implicit, found[1])

    @staticmethod
    def system(game: MetaGame, implicit: bool):
        """The CCE matrix of ``game`` as the maximum-entropy dual's Newton uses it."""
        return GameColumns(game) if implicit else scaled_matrix(cce_constraints(game))

    def __call__(self, payoffs: np.ndarray) -> np.ndarray | None:
        game = MetaGame(payoffs)
        if king_of_the_hill.structured(game):
            return None
        found = max_entropy_from(self.system(game, self.implicit), self.start)
        if found is None:
            return None
        return np.concatenate(deviation_gains(game, found[0].reshape(game.shape)))


class DeviationReplicate:
    """A replicate's deviation ratings by column generation from the point's support."""

    def __init__(self, support: np.ndarray):
        self.support = support

    def __call__(self, payoffs: np.ndarray) -> np.ndarray | None:
        from metaeval.ratings.deviation import strictest_cce
        from metaeval.solvers.reduction import copied_strategies

        game = MetaGame(payoffs)
        if any(len(np.unique(label)) < len(label) for label in copied_strategies(game)):
            return None  # copies to merge: the point's joints are not this game's
        source = GameColumns(game)
        try:
            result = strictest_cce(source, joints=self.support)
        except MetaEvalError:
            return None
        return source.scale * result.values
