"""Full-game CCE and CE gaps of a distribution over a population's joint policies (maths, section 4).

For player p, the opponents' correlated mixture weighs terminal z by

    c_p(z, k) = sum_{j_-p} sigma(k, j_-p) prod_{q != p} R_q[z, j_q]      (k: p's recommendation)

a contraction of sigma with the opponents' reach matrices. Then

- on-policy value:  sum_z chance(z) u_p(z) sum_k R_p[z, k] c_p(z, k) = E_sigma u_p;
- CCE deviation:    best response to weights chance * u_p * sum_k c_p(., k);
- CE deviation:     one best response per recommendation k, weights chance * u_p * c_p(., k).

Per-player gains are floored at 0, as OpenSpiel's ``cce_dist`` and JPSRO do: a
correlated mixture can be worth more to p than any unilateral policy.

The work is cut into pieces, one per player and run of ``PIECE_TERMINALS`` terminals
(`gap_pieces`): a piece yields its on-policy values and its terminals' deviation
weights summed per sequence of the player (`piece_values`), and the pieces are summed
in order before the best responses' backward pass (`cce_from_pieces`). The pieces depend on
the game alone, so a gap is the same bit for bit in-process and on Ray actors
([`metaeval.distributed.cce_gap`][metaeval.distributed.cce_gap]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from open_spiel.python import policy as policy_lib

from metaeval import games
from metaeval.solvers.equilibria import check_joint_distribution
from metaeval.errors import MetaEvalError
from metaeval.spiel.best_response import (backward_pass, best_response, pure_table, reached_states,
                                          sequence_weights)
from metaeval.spiel.exact import CHUNK_ELEMENTS, ExactEvaluator
from metaeval.spiel.policies import tabular_policy
from metaeval.runs.progress import Progress
from metaeval.runs.threads import one_blas_thread


#: OpenSpiel's JPSRO drops joint and opponents' marginal masses below this (its ``DIST_TOL``).
OPENSPIEL_DIST_TOL = 1e-8
#: Best-response actions within this fraction of the terminals' total absolute weight of the
#: best are tied (``metaeval.spiel.best_response.backward_pass``): well above the rounding
#: of the values, so which actions tie does not depend on the build of the linear algebra.
#: (The terminals' weights, not the values: a player's values can cancel to rounding residue.)
TIE_TOLERANCE = 1e-9
#: Terminals per piece of a gap computation (the unit of work of an actor).
PIECE_TERMINALS = 1 << 18


@dataclass(frozen=True)
class CCEGap:
    """``total = sum(per_player)``, ``per_player[p] = max(0, best_response_values[p] - on_policy_values[p])``;
    ``best_actions[p] [S, A]``: at each of player p's states, the actions within
    ``TIE_TOLERANCE`` of the best; ``best_responses[p]`` is the pure ``TabularPolicy`` taking
    the lowest of them (any choice among them attains the value,
    [`metaeval.Evaluator.best_response`][metaeval.training.evaluator.Evaluator.best_response])."""

    total: float
    per_player: np.ndarray
    best_response_values: np.ndarray
    on_policy_values: np.ndarray
    best_responses: tuple[policy_lib.TabularPolicy, ...]
    best_actions: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class CEGap:
    """Per player and recommended policy k (mass-weighted, as JPSRO's CE branch):
    ``gains[p][k] = max(0, best_response_values[p][k] - on_policy_values[p][k])``;
    ``per_player[p] = gains[p].sum()``, ``total = per_player.sum()``."""

    total: float
    per_player: np.ndarray
    gains: tuple[np.ndarray, ...]
    best_response_values: tuple[np.ndarray, ...]
    on_policy_values: tuple[np.ndarray, ...]
    best_responses: tuple[tuple[policy_lib.TabularPolicy, ...], ...]


@dataclass(frozen=True)
class GapPiece:
    """The share of ``player``'s deviations from the terminals ``start .. stop``."""

    player: int
    start: int
    stop: int
    per_recommendation: bool = False


def cce_gap(game, population, sigma, evaluator: ExactEvaluator | None = None, progress=None) -> CCEGap:
    """The full-game CCE gap of ``sigma [K_1..K_N]`` over ``population``'s joint policies.

    Args:
        game: the game.
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        sigma: a joint distribution over the population ``[K_1, ..., K_N]``.
        evaluator: an [`ExactEvaluator`][metaeval.spiel.ExactEvaluator] of ``game`` to reuse (its cached reach columns).
        progress: counts the terminals done ([`metaeval.runs.progress`][metaeval.runs.progress]).

    Returns:
        The gap, per player, with the best responses.
    """
    tree, reaches, sigma = _prepare(game, population, sigma, evaluator)
    pieces = gap_pieces(tree, per_recommendation=False)
    results = []
    with Progress(sum(piece.stop - piece.start for piece in pieces), "CCE gap", "terminal", progress) as shown:
        for piece in pieces:
            results.append(piece_values(tree, _rows(reaches, piece), sigma, piece))
            shown.advance(piece.stop - piece.start)
    return cce_from_pieces(tree, pieces, results)


def cce_from_pieces(tree, pieces: list[GapPiece], results) -> CCEGap:
    """The CCE gap from the `piece_values` of `gap_pieces` (in their order)."""
    deviations = list(_deviations(tree, pieces, results))
    values = np.array([d.values[0] for d in deviations])
    on_policy = np.array([d.follow[0] for d in deviations])
    per_player = np.maximum(values - on_policy, 0.0)
    responses = tuple(d.responses[0] for d in deviations)
    best_actions = tuple(d.best_actions[:, :, 0] for d in deviations)
    return CCEGap(float(per_player.sum()), per_player, values, on_policy, responses, best_actions)


def ce_gap(game, population, sigma, evaluator: ExactEvaluator | None = None) -> CEGap:
    """The full-game CE gap: each player best-responds separately to every recommendation.

    Args:
        game: the game.
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        sigma: a joint distribution over the population ``[K_1, ..., K_N]``.
        evaluator: an [`ExactEvaluator`][metaeval.spiel.ExactEvaluator] of ``game`` to reuse (its cached reach columns).

    Returns:
        The gap, per player and recommendation.
    """
    tree, reaches, sigma = _prepare(game, population, sigma, evaluator)
    pieces = gap_pieces(tree, per_recommendation=True)
    results = [piece_values(tree, _rows(reaches, p), sigma, p) for p in pieces]
    deviations = list(_deviations(tree, pieces, results))
    gains = tuple(np.maximum(d.values - d.follow, 0.0) for d in deviations)
    per_player = np.array([g.sum() for g in gains])
    return CEGap(
        total=float(per_player.sum()),
        per_player=per_player,
        gains=gains,
        best_response_values=tuple(d.values for d in deviations),
        on_policy_values=tuple(d.follow for d in deviations),
        best_responses=tuple(d.responses for d in deviations),
    )


def gap_pieces(tree, per_recommendation: bool) -> list[GapPiece]:
    """Per player, its runs of ``PIECE_TERMINALS`` terminals (module docstring)."""
    starts = range(0, tree.num_terminals, PIECE_TERMINALS)
    return [GapPiece(p, start, min(start + PIECE_TERMINALS, tree.num_terminals), per_recommendation)
            for p in range(tree.num_players) for start in starts]


def piece_values(tree, reaches: list[np.ndarray], sigma: np.ndarray, piece: GapPiece):
    """The piece's on-policy values ``[K_p]``, its deviation weights per sequence of the
    player ``[S*A + 1, M]`` (M: 1, or K_p per recommendation) and their terminals' total
    absolute weight ``[M]``, from the rows ``start .. stop`` of the reach matrices,
    ``reaches[q] [stop - start, K_q]``."""
    player, terminals = piece.player, slice(piece.start, piece.stop)
    conditional = conditional_reach(reaches, sigma, player)
    payoff = tree.chance[terminals] * tree.returns[terminals, player]
    follow = payoff @ (reaches[player] * conditional)  # [K_p]
    if not piece.per_recommendation:
        conditional = conditional.sum(axis=1, keepdims=True)
    weights = payoff[:, None] * conditional
    return follow, sequence_weights(tree, player, weights, piece.start), np.abs(weights).sum(axis=0)


def _rows(reaches: list[np.ndarray], piece: GapPiece) -> list[np.ndarray]:
    return [r[piece.start : piece.stop] for r in reaches]


def openspiel_best_response(game, population, sigma, player: int,
                             evaluator: ExactEvaluator | None = None) -> policy_lib.TabularPolicy:
    """The best response OpenSpiel's JPSRO adds for ``player`` against sigma
    (``jpsro.find_best_response`` with ``target_equilibrium="cce"``, i.e. ``pyspiel.cce_dist``):

    - masses of sigma, then of the opponents' joint marginal, below ``OPENSPIEL_DIST_TOL``
      are dropped and the rest renormalised, as jpsro does;
    - at states that chance and the opponents never reach: uniform over the legal actions
      (OpenSpiel's ``TabularBestResponse`` never visits them and keeps its uniform default);
    - elsewhere the lowest legal action whose value is within ``TIE_TOLERANCE`` of the best
      (``TabularBestResponse`` keeps the first action strictly better than all before it, so
      exact ties go to the lowest action; near-ties left by rounding count as ties here).

    Args:
        game: the game.
        population: a [`Population`][metaeval.spiel.Population] of ``game``.
        sigma: a joint distribution over the population ``[K_1, ..., K_N]``.
        player: the player who responds.
        evaluator: an [`ExactEvaluator`][metaeval.spiel.ExactEvaluator] of ``game`` to reuse (its cached reach columns).

    Returns:
        The best response.
    """
    tree, reaches, sigma = _prepare(game, population, sigma, evaluator)
    opponents = _drop_small(np.moveaxis(_drop_small(sigma), player, 0).sum(axis=0))
    reach = tree.chance * conditional_reach(reaches, np.expand_dims(opponents, player), player)[:, 0]
    _, choices = best_response(tree, player, (reach * tree.returns[:, player])[:, None], TIE_TOLERANCE)
    table = pure_table(tree, player, choices[:, 0])
    layout = tree.players[player]
    unreached = ~reached_states(tree, player, reach)
    table[unreached] = layout.legal[unreached] / layout.legal[unreached].sum(axis=1, keepdims=True)
    return tabular_policy(layout, table)


def _drop_small(distribution: np.ndarray) -> np.ndarray:
    kept = np.where(distribution < OPENSPIEL_DIST_TOL, 0.0, distribution)
    return kept / kept.sum()


class Deviations(NamedTuple):
    """One player's best-response values, on-policy values, best responses and best actions."""

    values: np.ndarray
    follow: np.ndarray
    responses: tuple
    best_actions: np.ndarray


def _deviations(tree, pieces: list[GapPiece], results):
    """Per player: best-response values, on-policy values, best responses (the lowest best
    action at every state) and best actions ``[S, A, M]``, one per recommendation (CE) or a
    single one (CCE, M = 1)."""
    for player in range(tree.num_players):
        own = [(piece, result) for piece, result in zip(pieces, results, strict=True) if piece.player == player]
        follow = sum(result[0] for _, result in own)
        if not own[0][0].per_recommendation:
            follow = follow.sum(keepdims=True)
        magnitude = sum(result[2] for _, result in own)
        values, best = backward_pass(tree, player, sum(result[1] for _, result in own), TIE_TOLERANCE * magnitude)
        layout = tree.players[player]
        responses = tuple(tabular_policy(layout, pure_table(tree, player, c)) for c in best.argmax(axis=1).T)
        yield Deviations(values, follow, responses, best)


def conditional_reach(reaches: list[np.ndarray], sigma: np.ndarray, player: int) -> np.ndarray:
    """``c_p [Z, K_p]``: sigma contracted with every reach matrix but ``player``'s (module docstring)."""
    others = [q for q in range(len(reaches)) if q != player]
    if not others:
        return np.broadcast_to(sigma, (reaches[player].shape[0], sigma.size)).copy()
    # sigma with the player's axis first, then the opponents' axes in order.
    table = np.moveaxis(sigma, player, 0)
    num_terminals = reaches[0].shape[0]
    step = max(1, CHUNK_ELEMENTS // sigma.size)
    result = np.empty((num_terminals, sigma.shape[player]))
    with one_blas_thread():  # many small products: threads cost more than they give
        for start in range(0, num_terminals, step):
            stop = min(start + step, num_terminals)
            first = reaches[others[0]][start:stop]  # [z, K_q]
            partial = first @ np.moveaxis(table, 1, 0).reshape(first.shape[1], -1)  # [z, K_p * rest]
            partial = partial.reshape(stop - start, table.shape[0], -1)
            for q in others[1:]:
                r = reaches[q][start:stop]
                partial = partial.reshape(stop - start, table.shape[0], r.shape[1], -1)
                partial = np.einsum("zkjr,zj->zkr", partial, r)
            result[start:stop] = partial.reshape(stop - start, -1)
    return result


def check_sigma(game, population, sigma):
    """The loaded game and sigma, checked as a distribution over ``population``'s joints."""
    game = games.load(game)
    if population.game_string != str(game):
        raise MetaEvalError(f"the population is for {population.game_string}, not {game}")
    return game, check_joint_distribution(sigma, population.sizes, "population")


def _prepare(game, population, sigma, evaluator):
    """The tree, the population's reach matrices and the checked sigma."""
    game, sigma = check_sigma(game, population, sigma)
    evaluator = evaluator or ExactEvaluator(game)
    return evaluator.tree, evaluator.population_reaches(population), sigma
