"""Social-choice raters (Lanctot et al. 2023): every player's strategies are elected by
the profile ``Profile.from_game(game, player, tie_seed)``: each joint strategy of the other
players votes by decreasing payoff (for an agent-vs-task game: each task ranks the
agents by score), ties broken by the order seeded by ``tie_seed``, the same for every method.

A strategy's rating is the method's score; the method's own ranking is in the
diagnostics (for ranked pairs the scores need not decrease along it).
"""

from __future__ import annotations

from metaeval.solvers import social_choice
from metaeval.errors import MetaEvalError
from metaeval.game import MetaGame
from metaeval.ratings.base import Rating, product_distribution

SCORE_TOLERANCE = 1e-9
"""Scores are counts of votes (exact) or probabilities of lotteries (LP solutions, accurate
to far better than this): scores closer than this are tied."""


def _elect_every_player(game: MetaGame, method: str, tie_seed: int, **options) -> Rating:
    from metaeval.data.profiles import Profile  # the data package imports pandas: only when electing

    if not isinstance(game, MetaGame):
        raise MetaEvalError(f"{method} needs a MetaGame, got {type(game).__name__}")
    elections = []
    for p in range(game.num_players):
        try:
            elections.append(social_choice.elect(Profile.from_game(game, p, tie_seed), method, **options))
        except MetaEvalError as exc:
            raise MetaEvalError(f"{method}, player {game.player_names[p]!r}: {exc}") from None
    lotteries = [e.lottery for e in elections]
    diagnostics = {
        "tie_seed": tie_seed,
        "ranking": [e.ranked_names() for e in elections],
        "details": [e.details for e in elections],
    }
    return Rating(method, game, [e.scores for e in elections],
                  distribution=None if lotteries[0] is None else product_distribution(lotteries),
                  diagnostics=diagnostics, tolerance=SCORE_TOLERANCE)


def maximal_lotteries(game: MetaGame, tie_seed: int = 0) -> Rating:
    """Probability under the maximum-entropy maximal lottery.

    Args:
        game: the meta-game.
        tie_seed: the seed of the order that breaks ties in the votes.

    Returns:
        The Rating; its ``distribution`` is the product of the players' lotteries.
    """
    return _elect_every_player(game, "maximal_lotteries", tie_seed)


def iterative_maximal_lotteries(game: MetaGame, tie_seed: int = 0) -> Rating:
    """Levels of iterated maximal lotteries plus the probability within the level.

    Args:
        game: the meta-game.
        tie_seed: the seed of the order that breaks ties in the votes.

    Returns:
        The Rating.
    """
    return _elect_every_player(game, "iterative_maximal_lotteries", tie_seed)


def kemeny_young(game: MetaGame, tie_seed: int = 0,
                 max_alternatives: int = social_choice.KEMENY_MAX_ALTERNATIVES) -> Rating:
    """Kemeny-Young scores; refused for a player with more than ``max_alternatives`` strategies.

    Args:
        game: the meta-game.
        tie_seed: the seed of the order that breaks ties in the votes.
        max_alternatives: the most strategies a player may have.

    Returns:
        The Rating.
    """
    return _elect_every_player(game, "kemeny_young", tie_seed, max_alternatives=max_alternatives)


def stv(game: MetaGame, tie_seed: int = 0, num_winners: int | None = None) -> Rating:
    """Single transferable vote (``num_winners`` defaults to half the strategies).

    Args:
        game: the meta-game.
        tie_seed: the seed of the order that breaks ties in the votes.
        num_winners: the number of seats.

    Returns:
        The Rating.
    """
    return _elect_every_player(game, "stv", tie_seed, num_winners=num_winners)


def approval(game: MetaGame, tie_seed: int = 0, k: int = 1) -> Rating:
    """k-approval: the number of votes ranking a strategy in the top k.

    Args:
        game: the meta-game.
        tie_seed: the seed of the order that breaks ties in the votes.
        k: the number of strategies each vote approves.

    Returns:
        The Rating.
    """
    return _elect_every_player(game, "approval", tie_seed, k=k)


def borda(game: MetaGame, tie_seed: int = 0) -> Rating:
    return _elect_every_player(game, "borda", tie_seed)


def plurality(game: MetaGame, tie_seed: int = 0) -> Rating:
    return _elect_every_player(game, "plurality", tie_seed)


def copeland(game: MetaGame, tie_seed: int = 0) -> Rating:
    return _elect_every_player(game, "copeland", tie_seed)


def schulze(game: MetaGame, tie_seed: int = 0) -> Rating:
    return _elect_every_player(game, "schulze", tie_seed)


def ranked_pairs(game: MetaGame, tie_seed: int = 0) -> Rating:
    return _elect_every_player(game, "ranked_pairs", tie_seed)


VOTING_RATERS = {
    name: globals()[name] for name in social_choice.METHODS
}
