"""Bootstrap replicates warm-started from the point rating.

A replicate's payoffs differ from the rated game's by sampling noise, so its rating
usually lies where the point rating's solver ended. `warm_replicates` returns, for a
rater that has one, a function that rates a replicate's payoff tensor from there, or
returns None where it cannot certify its answer (the replicate is then rated from
scratch, as without a warm start):

- ``uniform``: the means, without building a game and a Rating (where the replicates
  are not drawn from their Gaussian law, `metaeval.ratings.gaussian_replicates`: in
  win-probability games and from episodes).
- ``payoff``: the maximum-entropy dual's Newton started from the point's multipliers,
  a batch's replicates in lock-step on their stored CCE matrices
  (`metaeval.solvers.mecce_batch`) where the point's dual has no linear direction; a KKT
  point with every joint's mass positive is the MECCE itself (the entropy is strictly
  concave), so nothing else is checked. A replicate whose MECCE leaves joints out is
  solved from scratch.
- ``deviation``: Algorithm 1 by column generation over the game's joints (as the rater
  runs it above COLUMN_GENERATION_JOINTS joints) with the first working set the point's
  support instead of one joint; pricing over every joint makes the LPs' optima those over
  every joint, whatever the start.
- ``alpharank``: the point's chain with each replicate's rates, a batch of replicates
  solved together (`metaeval.ratings.warm_chains`), where the point's chain is stored
  and has one metastable class.
- ``nash``: where the point's equilibrium is the general limiting logit equilibrium (not
  a 2-player zero-sum, symmetric or large king-of-the-hill game's), on games of at most
  BATCH_ENTRIES pairwise entries: a task's replicates' logit branches traced in lock-step
  (`metaeval.ratings.logit_batch`), each with the tracer's own equations, step control
  and end test, then their ends refined and checked in lock-step as a traced point is
  (`metaeval.ratings.logit_refine_batch`). A replicate whose
  selection is another, whose branch the batch does not end, or whose refinements hold
  two equilibria tied in regret up to rounding (the selection could then turn on the
  last bits of the traced point, `metaeval.ratings.logit.selected_equilibrium`), is
  rated from scratch.
  Not from the point's equilibrium: Newton's method on its support reaches an exact
  equilibrium of most replicates, but not always the one the logit branch selects (on a
  random 3 x 16 game, 2 of 20 replicates reached one 0.31 away), so each replicate's
  own branch is traced, many at once.

Every accepted replicate is the cold rating to the solver's precision.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating
from metaeval.ratings.logit_batch import trace_logit_branches
from metaeval.ratings.logit_refine_batch import payoffs_against, selected_equilibria
from metaeval.ratings.warm_chains import ChainReplicates
from metaeval.solvers import king_of_the_hill
from metaeval.solvers.cce_columns import GameColumns
from metaeval.runs import budget
from metaeval.solvers.equilibria import cce_constraint_stack, cce_constraints, deviation_gains
from metaeval.solvers.mecce import NEWTON_FIRST_JOINTS, STORED_COPIES, max_entropy_from, scaled_matrix
from metaeval.solvers.mecce_batch import has_linear_directions, max_entropy_batch

#: nash's warm start (`NashReplicate`) holds each replicate's payoff tensors once per pair
#: of players (`metaeval.ratings.logit_batch`), N (N - 1) x joints entries, at most this
#: many: on small games a step of one branch costs more in numpy's calls than in arithmetic.
BATCH_ENTRIES = 2**16


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
    from metaeval.ratings.nash import nash
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
    if rater is nash and not options and NashReplicate.applies(rating):
        return NashReplicate()
    return None


def _uniform(payoffs: np.ndarray) -> np.ndarray:
    """The uniform rater's ratings of ``payoffs``, as `metaeval.ratings.uniform` computes them."""
    players = len(payoffs)
    return np.concatenate([payoffs[p].mean(axis=tuple(q for q in range(players) if q != p))
                           for p in range(players)])


class PayoffReplicate:
    """Replicates' MECCEs by Newton from the point's dual multipliers: a batch's together on
    their stored CCE matrices (`metaeval.solvers.mecce_batch`) where the point's dual has no
    linear direction; otherwise (above NEWTON_FIRST_JOINTS joints, implicit, or along a
    linear direction), and where the batch leaves one uncertified, one by one
    (`metaeval.solvers.mecce.max_entropy_from`)."""

    def __init__(self, implicit: bool, start: np.ndarray, batched: bool = False):
        self.implicit, self.start = implicit, start
        # Rates a stack of replicates' payoffs at once (metaeval.ratings.bootstrap), else one
        # payoff tensor a call: a chunk's tensors are then not all held (8 of 3 x 320 are 6 GiB).
        self.batched = batched

    @classmethod
    def from_game(cls, game: MetaGame) -> "PayoffReplicate | None":
        """The point's multipliers, by Newton from zero on ``game`` (None where its MECCE
        leaves joints out)."""
        implicit = game.num_joints > NEWTON_FIRST_JOINTS
        system = cls.system(game, implicit)
        found = max_entropy_from(system, np.zeros(sum(game.shape)))
        if found is None:
            return None
        return cls(implicit, found[1], batched=not implicit and not has_linear_directions(system.matrix))

    @staticmethod
    def system(game: MetaGame, implicit: bool):
        """The CCE matrix of ``game`` as the maximum-entropy dual's Newton uses it."""
        return GameColumns(game) if implicit else scaled_matrix(cce_constraints(game))

    def __call__(self, payoffs: np.ndarray) -> list | np.ndarray | None:
        """Each replicate's ratings (every player's, concatenated), or None to rate it from scratch.

        Args:
            payoffs: the replicates' payoff tensors ``[B, N, K_1, ..., K_N]`` where
                ``batched``, else one tensor ``[N, K_1, ..., K_N]``.

        Returns:
            One entry per replicate (where ``batched``), or the one replicate's entry.
        """
        if not self.batched:
            return self.one(payoffs)
        count = len(payoffs)
        budget.check(STORED_COPIES * budget.FLOAT * count * len(self.start) * payoffs[0, 0].size,
                     f"the CCE matrices of {count} payoff replicates")
        matrices = cce_constraint_stack(payoffs)
        scale = np.abs(matrices).max(axis=(1, 2))
        scale[scale == 0] = 1.0
        matrices /= scale[:, None, None]  # as scaled_matrix scales each
        sigma, certified = max_entropy_batch(matrices, np.broadcast_to(self.start, (count, len(self.start))))
        gains = (matrices @ sigma[:, :, None])[:, :, 0] * scale[:, None]  # each player's deviation gains
        return [gains[b] if certified[b] else self.one(payoffs[b]) for b in range(count)]

    def one(self, payoffs: np.ndarray) -> np.ndarray | None:
        """One replicate's ratings by `metaeval.solvers.mecce.max_entropy_from`, or None."""
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


class NashReplicate:
    """Replicates' nash ratings with their logit branches traced in lock-step
    (`metaeval.ratings.logit_batch`), their ends then refined and checked together as
    each one's own trace is (`metaeval.ratings.logit_refine_batch`); a replicate whose
    selection is not the general logit branch, whose branch the batch does not end, or
    whose equilibrium rounding may have selected among others, is rated from scratch."""

    #: Rates a stack of replicates' payoffs at once (metaeval.ratings.bootstrap).
    batched = True
    #: Replicates a task (metaeval.ratings.bootstrap's CHUNK otherwise; fewer where the
    #: actors would not each get one): a batch takes as many steps as its slowest branch,
    #: each with a fixed cost in numpy's calls, so larger ones take fewer in all (on a
    #: goofspiel meta-game a warm replicate cost 3.6 CPU ms in batches of 25, 2.9 of 50,
    #: 2.5 of 100).
    chunk = 100

    @staticmethod
    def applies(rating: Rating) -> bool:
        """Whether the point's equilibrium is the general logit branch's, on a game of at
        most BATCH_ENTRIES pairwise entries."""
        from metaeval.ratings.nash import LOGIT

        players = rating.game.num_players
        return (rating.diagnostics.get("equilibrium") == LOGIT
                and players * (players - 1) * rating.game.num_joints <= BATCH_ENTRIES)

    def __call__(self, payoffs: np.ndarray) -> list:
        """Each replicate's ratings (every player's, concatenated), or None to rate it from scratch.

        Args:
            payoffs: the replicates' payoff tensors ``[B, N, K_1, ..., K_N]``.

        Returns:
            One entry per replicate.
        """
        from metaeval.ratings.logit import TRACE_REGRET
        from metaeval.ratings.nash import LOGIT, equilibrium_selection, well_scaled

        scaled = [well_scaled(tensor) for tensor in payoffs]
        traced = [b for b, (tensor, spread) in enumerate(scaled)
                  if equilibrium_selection(MetaGame(payoffs[b]), tensor, spread) == LOGIT]
        rows = [None] * len(payoffs)
        if not traced:
            return rows
        ends = trace_logit_branches(np.stack([scaled[b][0] for b in traced]), TRACE_REGRET)
        ended = [(b, reached) for b, reached in zip(traced, ends) if reached is not None]
        if not ended:
            return rows
        selected = selected_equilibria(np.stack([scaled[b][0] for b, _ in ended]), [reached for _, reached in ended])
        # None: rounding may select another equilibrium than the replicate's own trace
        rated = [(b, strategies) for (b, _), strategies in zip(ended, selected) if strategies is not None]
        if not rated:
            return rows
        # nash's ratings (`metaeval.ratings.nash.rated_against`): the payoffs against the
        # equilibrium minus its value. Its max regret is below the traced end's, at most
        # TRACE_REGRET x range, far within the rater's tolerance.
        profiles = [np.stack([strategies[p] for _, strategies in rated]) for p in range(payoffs.shape[1])]
        values = payoffs_against(np.stack([scaled[b][0] for b, _ in rated]), profiles)
        for i, (b, _) in enumerate(rated):
            rows[b] = scaled[b][1] * np.concatenate([v[i] - v[i] @ x[i] for v, x in zip(values, profiles)])
        return rows
