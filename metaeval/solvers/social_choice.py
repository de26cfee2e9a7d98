"""Social-choice methods on preference profiles (Lanctot et al. 2023, "Evaluating agents
using social choice theory"), each returning one score per alternative and a ranking.

OpenSpiel's ``open_spiel.python.voting`` runs approval, Borda, plurality, Copeland
and ranked pairs: they are deterministic given the profile, ties in the final sort
keeping the alternatives' order. Five are computed here instead, for a stated reason:

- maximal lotteries: OpenSpiel returns whichever optimal lottery its LP solver finds and
  adds random noise; the optimal lotteries are not unique when margins tie, so here the
  maximum-entropy one (unique, solver-independent, its support the union of all optimal
  supports) is returned;
- iterative maximal lotteries: the same, level by level (support threshold 1e-6);
- Kemeny-Young: OpenSpiel enumerates all m! orders; dynamic programming over subsets
  (O(2^m m), small m) or an integer program (HiGHS) finds the same order (the
  lexicographically first optimum) and is guarded at ``max_alternatives``;
- STV: OpenSpiel writes scores as ``float(f"{base}.{tally}")``, so tallies 2 and 20 give
  the same score; here the tally is the fraction tally / 10^d, d the digits of the total
  weight (the ranking is OpenSpiel's rule: Droop quota, surplus and eliminated votes
  transfer in vote order, ties to the alternatives' order);
- Schulze: OpenSpiel sorts with the comparison p[x, y] - p[y, x] of strongest paths, which
  is not an order when strengths tie (equal both ways is not transitive), so its first
  alternative can be beaten (a 9-vote profile in the tests); here the ranking extends the
  beat relation and its scores are OpenSpiel's definition on that ranking.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from metaeval.errors import MetaEvalError

if TYPE_CHECKING:
    from metaeval.data.profiles import Profile

SUPPORT_THRESHOLD = 1e-6
KEMENY_MAX_ALTERNATIVES = 60
KEMENY_SUBSET_ALTERNATIVES = 12  # the subset programme is the faster one up to here
KEMENY_TIME_LIMIT = 300.0  # seconds for the integer programs of one election


@dataclass(frozen=True, eq=False)
class Election:
    """Scores per alternative (profile order), the method's ranking (indices, best first)
    and, for maximal lotteries, the lottery."""

    method: str
    alternatives: tuple[str, ...]
    scores: np.ndarray
    ranking: list[int]
    lottery: np.ndarray | None = None
    details: dict = field(default_factory=dict)

    def ranked_names(self) -> list[str]:
        return [self.alternatives[i] for i in self.ranking]


def _openspiel(profile: Profile, method) -> tuple[np.ndarray, list[int]]:
    outcome = method.run_election(profile.to_openspiel())
    index = {a: i for i, a in enumerate(profile.alternatives)}
    scores = np.zeros(len(profile.alternatives))
    for name, score in zip(outcome.ranking, outcome.scores):
        scores[index[name]] = score
    return scores, [index[name] for name in outcome.ranking]


def _by_score(scores: np.ndarray) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")]


def maximal_lottery(margins: np.ndarray) -> np.ndarray:
    """The maximum-entropy lottery x with x^T M >= 0 (the game M has value 0); a strong
    Condorcet winner is the only maximal lottery, returned without a solve.

    Args:
        margins: the margins ``[m, m]`` (antisymmetric).

    Returns:
        The lottery ``[m]``.
    """
    from metaeval.ratings.nash_zero_sum import max_entropy_maximin

    margins = np.asarray(margins, dtype=np.float64)
    if len(margins) == 1 or not margins.any():
        return np.full(len(margins), 1.0 / len(margins))
    beats_all = (margins > 0).sum(axis=1) == len(margins) - 1
    if beats_all.any():
        return beats_all.astype(np.float64)
    return max_entropy_maximin(margins, 0.0)


def maximal_lotteries(profile: Profile) -> Election:
    lottery = maximal_lottery(profile.margins())
    return Election("maximal_lotteries", profile.alternatives, lottery, _by_score(lottery), lottery)


def iterative_maximal_lotteries(profile: Profile) -> Election:
    """Lanctot et al. 2023, Algorithm 2: the ML's support is a level; remove it, repeat.
    Score = levels below + probability within the level.

    Args:
        profile: the votes.

    Returns:
        The election.
    """
    margins = profile.margins()
    remaining = list(range(len(profile.alternatives)))
    levels = []
    while remaining:
        lottery = maximal_lottery(margins[np.ix_(remaining, remaining)])
        winners = [(remaining[i], float(p)) for i, p in enumerate(lottery) if p > SUPPORT_THRESHOLD]
        levels.append(winners)
        taken = {i for i, _ in winners}
        remaining = [i for i in remaining if i not in taken]
    scores = np.zeros(len(profile.alternatives))
    for depth, winners in enumerate(levels):
        for i, p in winners:
            scores[i] = len(levels) - 1 - depth + p
    return Election("iterative_maximal_lotteries", profile.alternatives, scores, _by_score(scores),
                    details={"levels": [[profile.alternatives[i] for i, _ in w] for w in levels]})


def schulze(profile: Profile) -> Election:
    """Schulze's method (Schulze 2011). p[x, y] is the strength of the
    strongest path from x to y over the defeats (N(a, b) where N(a, b) > N(b, a)), by
    Floyd-Warshall on widest paths; x beats y when p[x, y] > p[y, x], a transitive
    relation, so ordering by the number of alternatives each beats (ties in the
    alternatives' order) ranks every alternative below all that beat it and puts a
    Schulze winner first. Scores as OpenSpiel's and the voting paper's: 0 for the last,
    then each adds N(itself, the next below) to the score of the next below.

    Args:
        profile: the votes.

    Returns:
        The election.
    """
    counts = profile.preferences()
    strength = np.where(counts > counts.T, counts, 0)
    for via in range(len(counts)):
        strength = np.maximum(strength, np.minimum(strength[:, via, None], strength[None, via, :]))
    np.fill_diagonal(strength, 0)
    ranking = _by_score((strength > strength.T).sum(axis=1))
    scores = np.zeros(len(counts))
    for above, below in zip(ranking[-2::-1], ranking[:0:-1]):
        scores[above] = scores[below] + counts[above, below]
    return Election("schulze", profile.alternatives, scores, ranking,
                    details={"strongest_paths": strength})


def kemeny_young(profile: Profile, max_alternatives: int = KEMENY_MAX_ALTERNATIVES) -> Election:
    """The order maximising sum_{i<j} N(a_i, a_j); score of a: sum of N(a, b) over b below a.

    Among optimal orders the lexicographically first is returned (the smallest possible
    top, then recursively below it), the one OpenSpiel's enumeration of all m! orders
    finds. Up to KEMENY_SUBSET_ALTERNATIVES alternatives, dynamic programming over subsets
    (O(2^m m)); above, an integer program solved by HiGHS (`_kemeny_program`).

    Args:
        profile: the votes.
        max_alternatives: the most alternatives accepted.

    Returns:
        The election.
    """
    m = len(profile.alternatives)
    if m > max_alternatives:
        raise MetaEvalError(
            f"kemeny_young: {m} alternatives is above the limit of {max_alternatives} "
            f"(an exact integer program on m(m-1)/2 pairs and C(m, 3) triples); "
            f"pass max_alternatives to raise it"
        )
    counts = profile.preferences()
    order = _kemeny_subsets(counts) if m <= KEMENY_SUBSET_ALTERNATIVES else _kemeny_program(counts)
    scores = _kemeny_scores(counts, order)
    return Election("kemeny_young", profile.alternatives, scores, order,
                    details={"kemeny_value": int(scores.sum())})


def _kemeny_subsets(counts: np.ndarray) -> list[int]:
    """W(S), the best value of ordering the set S, is max over a in S of (N(a, S - a) +
    W(S - a)); the optimum is read back choosing the smallest top alternative each time."""
    m = len(counts)
    masks = np.arange(1 << m)
    members = (masks[:, None] >> np.arange(m)) & 1
    above = members @ counts.T  # above[S, a] = N(a, S) (N(a, a) = 0)
    best = np.zeros(1 << m, dtype=np.int64)
    for s in range(1, 1 << m):
        inside = np.flatnonzero(members[s])
        best[s] = np.max(above[s, inside] + best[s ^ (1 << inside)])
    order, s = [], (1 << m) - 1
    while s:
        inside = np.flatnonzero(members[s])
        top = int(inside[np.argmax(above[s, inside] + best[s ^ (1 << inside)] == best[s])])
        order.append(top)
        s ^= 1 << top
    return order


def _kemeny_program(counts: np.ndarray) -> list[int]:
    """Kemeny-Young as an integer program (Conitzer, Davenport & Kalagnanam 2006): binary
    x_ab (a above b, a < b; x_ba = 1 - x_ab) with 0 <= x_ab + x_bc - x_ac <= 1 on every
    triple. Each program also minimises the index of its top; if another order is as good
    as the one found, the places below the top are re-solved one by one, each program
    started from the order found so far."""
    deadline = time.monotonic() + KEMENY_TIME_LIMIT
    order = _kemeny_mip(counts, list(range(len(counts))), deadline)
    if _kemeny_mip(counts, order, deadline, exclude=True) is None:
        return order
    for k in range(1, len(order) - 1):  # order[k:] is optimal for its set: the warm start
        if order[k] != min(order[k:]):
            order[k:] = _kemeny_mip(counts, order[k:], deadline, start=True)
    return order


def _kemeny_scores(counts: np.ndarray, order: list[int]) -> np.ndarray:
    """N(a, b) summed over the alternatives b below a in ``order`` (they sum to its agreement)."""
    scores = np.zeros(len(counts), dtype=np.int64)
    for k, a in enumerate(order):
        scores[a] = counts[a, order[k + 1:]].sum()
    return scores


def _kemeny_mip(counts: np.ndarray, alternatives: list[int], deadline: float, exclude: bool = False,
                start: bool = False) -> list[int] | None:
    """An optimal order of ``alternatives`` with the smallest top; with ``exclude``,
    ``alternatives`` is an optimal order and another optimal one is sought (None if none);
    with ``start``, ``alternatives`` is an optimal order that the solver starts from."""
    import highspy
    import scipy.sparse as sp

    from metaeval.solvers.lp import INF, check, highs_model

    chosen = sorted(alternatives)
    m = len(chosen)
    if m == 1:
        return None if exclude else chosen
    sub = counts[np.ix_(chosen, chosen)]
    first, second = np.triu_indices(m, 1)
    pairs = len(first)
    pair = np.zeros((m, m), dtype=np.int64)
    pair[first, second] = np.arange(pairs)
    # Columns: x_ab per pair, then t_a (a on top). Agreement is an integer; times m it
    # outweighs the top's index (below m).
    costs = np.concatenate([-m * (sub - sub.T)[first, second], np.arange(m)]).astype(np.float64)
    triples = np.array(list(itertools.combinations(range(m), 3)), dtype=np.int64).reshape(-1, 3)
    a, b, c = triples.T
    rows = [np.repeat(np.arange(len(triples)), 3)]
    cols = [np.column_stack([pair[a, b], pair[b, c], pair[a, c]]).ravel()]
    values = [np.tile([1.0, 1.0, -1.0], len(triples))]
    lower, upper = [np.zeros(len(triples))], [np.ones(len(triples))]
    # t_a <= x_ab (a < b) and t_a <= 1 - x_ba (a > b): only the top may have t = 1.
    tops, others = np.nonzero(~np.eye(m, dtype=bool))
    r = len(triples) + np.arange(len(tops))
    rows += [r, r]
    cols += [pairs + tops, pair[np.minimum(tops, others), np.maximum(tops, others)]]
    values += [np.ones(len(tops)), np.where(tops < others, -1.0, 1.0)]
    lower.append(np.full(len(tops), -INF))
    upper.append(np.where(tops < others, 0.0, 1.0))
    r = len(triples) + len(tops)
    rows.append(np.full(m, r))
    cols.append(pairs + np.arange(m))
    values.append(np.ones(m))
    lower.append(np.ones(1))
    upper.append(np.ones(1))
    rank = np.argsort([chosen.index(x) for x in alternatives])
    above = rank[first] < rank[second]
    if exclude:  # not the given order: it agrees with it on at most pairs - 1 pairs
        rows.append(np.full(pairs, r + 1))
        cols.append(np.arange(pairs))
        values.append(np.where(above, 1.0, -1.0))
        lower.append(np.full(1, -INF))
        upper.append(np.full(1, pairs - 1.0 - (~above).sum()))
    matrix = sp.csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(r + 1 + exclude, pairs + m))
    highs = highs_model(matrix, costs, np.zeros(pairs + m), np.ones(pairs + m),
                        np.concatenate(lower), np.concatenate(upper))
    check(highs.changeColsIntegrality(pairs, np.arange(pairs, dtype=np.int32),
                                      np.full(pairs, highspy.HighsVarType.kInteger)), highs, "integrality")
    highs.setOptionValue("mip_rel_gap", 0.0)
    highs.setOptionValue("mip_abs_gap", 0.5)  # objective values are integers
    highs.setOptionValue("time_limit", max(deadline - time.monotonic(), 0.0))
    if start:
        solution = highspy.HighsSolution()
        solution.col_value = np.concatenate([above, np.arange(m) == rank.argmin()]).astype(np.float64)
        check(highs.setSolution(solution), highs, "setSolution")
    highs.run()
    status = highs.getModelStatus()
    if exclude and status == highspy.HighsModelStatus.kInfeasible:
        return None
    if status == highspy.HighsModelStatus.kTimeLimit:
        raise MetaEvalError(
            f"kemeny_young: no proven optimum for {len(counts)} alternatives within "
            f"KEMENY_TIME_LIMIT = {KEMENY_TIME_LIMIT:g} s (profiles with little consensus are the hardest)"
        )
    if status != highspy.HighsModelStatus.kOptimal:
        raise MetaEvalError(f"kemeny_young: HiGHS ended {highs.modelStatusToString(status)!r}")
    x = np.round(np.asarray(highs.getSolution().col_value[:pairs])).astype(bool)
    wins = np.bincount(first, x, minlength=m) + np.bincount(second, ~x, minlength=m)
    order = [chosen[i] for i in np.argsort(-wins, kind="stable")]
    if exclude and _kemeny_scores(counts, order).sum() < _kemeny_scores(counts, alternatives).sum():
        return None
    return order


def stv(profile: Profile, num_winners: int | None = None) -> Election:
    """Single transferable vote (OpenSpiel's rule); winners in order of election score
    2m - i + tally / 10^d, the others (latest eliminated first) m - i + tally / 10^d.

    Args:
        profile: the votes.
        num_winners: the number of seats (default: half the alternatives).

    Returns:
        The election.
    """
    m = len(profile.alternatives)
    seats = m // 2 if num_winners is None else int(num_winners)
    if not 1 <= seats < m:
        raise MetaEvalError(f"stv needs 1 <= num_winners < {m} alternatives, got {seats}")
    total = sum(profile.weights)
    quota = int(total / (seats + 1) + 1)
    ballots = [[0, w, v] for v, w in zip(profile.votes, profile.weights)]  # position, weight, vote
    winners, losers = [], []  # (alternative, tally)
    decided = set()

    def advance(ballot):
        ballot[0] += 1
        while ballot[0] < len(ballot[2]) and ballot[2][ballot[0]] in decided:
            ballot[0] += 1

    def at(ballot, alternative):
        return ballot[0] < len(ballot[2]) and ballot[2][ballot[0]] == alternative and ballot[1] > 0

    while len(decided) < m:
        tally = {a: 0 for a in range(m) if a not in decided}
        for ballot in ballots:
            if ballot[0] < len(ballot[2]) and ballot[1] > 0:
                tally[ballot[2][ballot[0]]] += ballot[1]
        ordered = sorted(tally.items(), key=lambda item: item[1], reverse=True)
        if ordered[0][1] >= quota:
            alternative, count = ordered[0]
            winners.append((alternative, count))
            decided.add(alternative)
            to_remove = quota
            for ballot in ballots:
                if to_remove and at(ballot, alternative):
                    removed = min(ballot[1], to_remove)
                    ballot[1] -= removed
                    to_remove -= removed
        else:
            alternative, count = ordered[-1]
            losers.insert(0, (alternative, count))
            decided.add(alternative)
        for ballot in ballots:
            if at(ballot, alternative):
                advance(ballot)
    fraction = 10.0 ** len(str(int(total)))
    scores = np.zeros(m)
    for i, (a, count) in enumerate(winners):
        scores[a] = 2 * m - i + count / fraction
    for i, (a, count) in enumerate(losers):
        scores[a] = m - i + count / fraction
    return Election("stv", profile.alternatives, scores, [a for a, _ in winners + losers],
                    details={"quota": quota, "winners": [profile.alternatives[a] for a, _ in winners]})


def _openspiel_method(name: str, **options):
    from open_spiel.python.voting import approval, borda, copeland, plurality, ranked_pairs

    return {
        "approval": lambda: approval.ApprovalVoting(k=options.get("k", 1)),
        "borda": borda.BordaVoting,
        "plurality": plurality.PluralityVoting,
        "copeland": copeland.CopelandVoting,
        "ranked_pairs": ranked_pairs.RankedPairsVoting,
    }[name]()


OWN = {
    "maximal_lotteries": maximal_lotteries,
    "iterative_maximal_lotteries": iterative_maximal_lotteries,
    "kemeny_young": kemeny_young,
    "stv": stv,
    "schulze": schulze,
}
OPENSPIEL = ("approval", "borda", "plurality", "copeland", "ranked_pairs")
METHODS = (*OWN, *OPENSPIEL)


def elect(profile: Profile, method: str, **options) -> Election:
    """Run ``method`` (one of METHODS) on ``profile``. Options: ``k`` for approval (top-k,
    default 1), ``num_winners`` for stv, ``max_alternatives`` for kemeny_young.

    Args:
        profile: the votes.
        method: the method's name.
        **options: its options.

    Returns:
        The election.
    """
    from metaeval.data.profiles import Profile  # the data package imports pandas: only when electing

    if not isinstance(profile, Profile):
        raise MetaEvalError(f"elect() needs a Profile, got {type(profile).__name__}")
    if method in OWN:
        return OWN[method](profile, **options)
    if method not in OPENSPIEL:
        raise MetaEvalError(f"unknown social-choice method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "approval":
        k = options.get("k", 1)
        if int(k) != k or k < 1:
            raise MetaEvalError(f"approval needs a positive integer k, got {k!r}")
    elif options:
        raise MetaEvalError(f"{method} takes no options, got {', '.join(options)}")
    scores, ranking = _openspiel(profile, _openspiel_method(method, **options))
    return Election(method, profile.alternatives, scores, ranking)
