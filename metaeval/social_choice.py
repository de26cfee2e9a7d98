"""Social-choice methods on preference profiles (Lanctot et al. 2023, "Evaluating agents
using social choice theory"), each returning one score per alternative and a ranking.

OpenSpiel's ``open_spiel.python.voting`` runs approval, Borda, plurality, Copeland,
Schulze and ranked pairs: they are deterministic given the profile, ties in the final
sort keeping the alternatives' order. Four are computed here instead, for a stated reason:

- maximal lotteries: OpenSpiel returns whichever optimal lottery its LP solver finds and
  adds random noise; the optimal lotteries are not unique when margins tie, so here the
  maximum-entropy one (unique, solver-independent, its support the union of all optimal
  supports) is returned;
- iterative maximal lotteries: the same, level by level (support threshold 1e-6);
- Kemeny-Young: OpenSpiel enumerates all m! orders; dynamic programming over subsets
  (O(2^m m)) finds the same order (the lexicographically first optimum) and is guarded at
  ``max_alternatives``;
- STV: OpenSpiel writes scores as ``float(f"{base}.{tally}")``, so tallies 2 and 20 give
  the same score; here the tally is the fraction tally / 10^d, d the digits of the total
  weight (the ranking is OpenSpiel's rule: Droop quota, surplus and eliminated votes
  transfer in vote order, ties to the alternatives' order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from metaeval.data.profiles import Profile
from metaeval.errors import MetaEvalError

SUPPORT_THRESHOLD = 1e-6
KEMENY_MAX_ALTERNATIVES = 16


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
    Condorcet winner is the only maximal lottery, returned without a solve."""
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
    Score = levels below + probability within the level."""
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


def kemeny_young(profile: Profile, max_alternatives: int = KEMENY_MAX_ALTERNATIVES) -> Election:
    """The order maximising sum_{i<j} N(a_i, a_j); score of a: sum of N(a, b) over b below a.

    W(S), the best value of ordering the set S, is max over a in S of (N(a, S - a) +
    W(S - a)); the optimum is read back choosing the smallest top alternative each time.
    """
    m = len(profile.alternatives)
    if m > max_alternatives:
        raise MetaEvalError(
            f"kemeny_young: {m} alternatives is above the limit of {max_alternatives} "
            f"(the search costs 2^m m); pass max_alternatives to raise it"
        )
    counts = profile.preferences()
    masks = np.arange(1 << m)
    members = (masks[:, None] >> np.arange(m)) & 1
    above = members @ counts.T  # above[S, a] = N(a, S) (N(a, a) = 0)
    best = np.zeros(1 << m, dtype=np.int64)
    for s in range(1, 1 << m):
        inside = np.flatnonzero(members[s])
        best[s] = np.max(above[s, inside] + best[s ^ (1 << inside)])
    order, scores, s = [], np.zeros(m), (1 << m) - 1
    while s:
        inside = np.flatnonzero(members[s])
        top = int(inside[np.argmax(above[s, inside] + best[s ^ (1 << inside)] == best[s])])
        order.append(top)
        s ^= 1 << top
        scores[top] = above[s, top]
    return Election("kemeny_young", profile.alternatives, scores, order,
                    details={"kemeny_value": int(best[-1])})


def stv(profile: Profile, num_winners: int | None = None) -> Election:
    """Single transferable vote (OpenSpiel's rule); winners in order of election score
    2m - i + tally / 10^d, the others (latest eliminated first) m - i + tally / 10^d."""
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
    from open_spiel.python.voting import approval, borda, copeland, plurality, ranked_pairs, schulze

    return {
        "approval": lambda: approval.ApprovalVoting(k=options.get("k", 1)),
        "borda": borda.BordaVoting,
        "plurality": plurality.PluralityVoting,
        "copeland": copeland.CopelandVoting,
        "schulze": schulze.SchulzeVoting,
        "ranked_pairs": ranked_pairs.RankedPairsVoting,
    }[name]()


OWN = {
    "maximal_lotteries": maximal_lotteries,
    "iterative_maximal_lotteries": iterative_maximal_lotteries,
    "kemeny_young": kemeny_young,
    "stv": stv,
}
OPENSPIEL = ("approval", "borda", "plurality", "copeland", "schulze", "ranked_pairs")
METHODS = (*OWN, *OPENSPIEL)


def elect(profile: Profile, method: str, **options) -> Election:
    """Run ``method`` (one of METHODS) on ``profile``. Options: ``k`` for approval (top-k,
    default 1), ``num_winners`` for stv, ``max_alternatives`` for kemeny_young."""
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
