"""The clone lottery: how much does submitting copies of a model buy under a rater?

Hays et al. (2026, sections 3.1 and 4.6): every pair of models gets the same number of
votes, each a Bernoulli draw with Bradley-Terry probability sigma(theta_i - theta_j); a
producer adds c copies of one model (same quality, independent vote noise) and is rewarded
for the best rank among them.  The harness reports the best-copy rank gain over the same
model submitted alone, the chance that the best copy ranks first, and the Kendall distance
of the estimated ranking to the truth, for any scorer and with or without YRWR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from metaeval.errors import MetaEvalError
from metaeval.pairwise.battles import game_from_wins
from metaeval.pairwise.bradley_terry import strongly_connected
from metaeval.pairwise.yrwr import ranks_by, running_minimum
from metaeval.ratings.elo import fit_batch


@dataclass(frozen=True)
class CloneLottery:
    """Per-run results of [`clone_lottery`][metaeval.pairwise.clone_lottery] (arrays of length ``runs``) and their summary."""

    gain: np.ndarray  # rank alone minus best rank of the copies (positive: cloning paid)
    top: np.ndarray  # the best copy ranked first
    top_alone: np.ndarray  # the model alone ranked first
    kendall: np.ndarray  # discordant pairs of distinct quality, with the copies
    kendall_alone: np.ndarray  # the same without them

    def summary(self) -> dict:
        return {
            "gain_mean": float(self.gain.mean()),
            "gain_p5": float(np.percentile(self.gain, 5)),
            "gain_p95": float(np.percentile(self.gain, 95)),
            "p_top": float(self.top.mean()),
            "p_top_alone": float(self.top_alone.mean()),
            "kendall_mean": float(self.kendall.mean()),
            "kendall_alone_mean": float(self.kendall_alone.mean()),
            "runs": len(self.gain),
        }


def balanced_votes(theta: np.ndarray, votes: int, rng: np.random.Generator, runs: int = 1) -> np.ndarray:
    """``[runs, k, k]`` win counts: every pair gets ``votes`` Bernoulli(sigma(theta_i - theta_j)) votes."""
    k = len(theta)
    upper = np.triu(np.ones((k, k), dtype=bool), 1)
    p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))
    wins = np.zeros((runs, k, k))
    wins[:, upper] = rng.binomial(votes, p[upper], size=(runs, upper.sum()))
    lower = np.swapaxes(wins, 1, 2)
    wins += np.where(upper.T, votes - lower, 0.0)
    return wins


def bradley_terry_scores(wins: np.ndarray, names) -> np.ndarray:
    """MLE scores (natural-log units, mean 0) of every run at once; ``[runs, k]``."""
    if not strongly_connected(wins).all():
        raise MetaEvalError("a simulated run has a model that never lost or never won; use more votes per pair")
    return fit_batch(wins)


def borda_scores(wins: np.ndarray, names) -> np.ndarray:
    """Total wins: the BT-MLE ranking in a balanced complete design (Hays et al., Lemma B.1)."""
    return wins.sum(axis=2)


def rater_scores(method: str, **options) -> Callable:
    """A scorer running any registered rater on the runs' win-probability games (player 0)."""
    from metaeval.ratings import rate

    def score(wins, names):
        return np.stack([rate(game_from_wins(w, names), method, **options).ratings[0] for w in wins])

    return score


SCORERS = {"bradley_terry": bradley_terry_scores, "borda": borda_scores}


def clone_lottery(
    theta: pd.Series,
    model: str,
    clones: int,
    votes: int,
    runs: int = 100,
    seed: int = 0,
    scorer: str | Callable = "bradley_terry",
    correction: str | None = None,
    owners: dict | None = None,
) -> CloneLottery:
    """Inject ``clones`` copies of ``model`` and measure the best copy's rank gain.

    Args:
        theta: true qualities (natural-log odds units) indexed by model.
        model: the model to copy.
        clones: copies added besides the original.
        votes: votes per pair of submitted models.
        runs: simulated leaderboards (each also drawn without the copies).
        seed: seed of the votes and of the random tie-breaks.
        scorer: ``"bradley_terry"``, ``"borda"``, ``rater_scores(name)`` or any
            ``f(wins [runs, k, k], names) -> scores [runs, k]``.
        correction: None or ``"yrwr"`` with truthful owner rankings (the copies right
            after the original, other models by true quality).
        owners: model -> owner (default: every model its own owner).

    Returns:
        Per run, the best copy's rank gain and the rankings' other measures, with their summary.
    """
    if model not in theta.index:
        raise MetaEvalError(f"model {model!r} is not among the qualities")
    if clones < 0 or votes < 1 or runs < 1:
        raise MetaEvalError("clones must be >= 0, votes and runs >= 1")
    if correction not in (None, "yrwr"):
        raise MetaEvalError(f"unknown correction {correction!r}; the one correction is 'yrwr'")
    if isinstance(scorer, str) and scorer not in SCORERS:
        raise MetaEvalError(f"unknown scorer {scorer!r}; choose {', '.join(SCORERS)} or pass a function")
    score = SCORERS[scorer] if isinstance(scorer, str) else scorer
    copies = [f"{model} (copy {c + 1})" for c in range(clones)]
    alone = theta.astype(np.float64)
    submitted = pd.concat([alone, pd.Series(alone[model], index=copies)])
    owners = {m: m for m in alone.index} if owners is None else dict(owners)
    rankings = _truthful_rankings(alone, owners, model, copies)
    rng = np.random.default_rng(seed)
    wins_alone = balanced_votes(alone.to_numpy(), votes, rng, runs)
    wins_cloned = balanced_votes(submitted.to_numpy(), votes, rng, runs)
    ranks_alone = _ranks(score(wins_alone, list(alone.index)), alone.index, rankings, correction, rng)
    ranks = _ranks(score(wins_cloned, list(submitted.index)), submitted.index, rankings, correction, rng)
    best = ranks[:, submitted.index.get_indexer([model, *copies])].min(axis=1)
    alone_rank = ranks_alone[:, alone.index.get_loc(model)]
    return CloneLottery(
        gain=alone_rank - best, top=best == 1, top_alone=alone_rank == 1,
        kendall=kendall_distance(ranks, submitted.to_numpy()),
        kendall_alone=kendall_distance(ranks_alone, alone.to_numpy()),
    )


def kendall_distance(ranks: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per run (rows of ``ranks``), pairs of different true quality ordered the wrong way."""
    worse_truth = theta[:, None] > theta[None, :]
    return ((ranks[:, :, None] > ranks[:, None, :]) & worse_truth).sum(axis=(1, 2))


def _truthful_rankings(theta, owners, model, copies):
    missing = sorted(set(theta.index) - set(owners), key=str)
    if missing:
        raise MetaEvalError(f"owners do not name the owner of {', '.join(map(str, missing))}")
    rankings = {}
    for m in theta.sort_values(ascending=False, kind="stable").index:
        rankings.setdefault(owners[m], []).append(m)
        if m == model:
            rankings[owners[m]] += copies
    return rankings


def _ranks(scores, names, rankings, correction, rng):
    """Ranks of every run; with YRWR, scores capped down each owner's list and equal scores
    kept in the owner's order; remaining ties broken at random."""
    position = np.zeros(len(names), dtype=np.int64)
    if correction == "yrwr":
        groups = [names.get_indexer([m for m in ms if m in names]) for ms in rankings.values()]
        groups = [g for g in groups if len(g)]
        scores = running_minimum(scores, groups)
        for g in groups:
            position[g] = np.arange(len(g))
    return ranks_by(scores, position, rng.random(scores.shape))
