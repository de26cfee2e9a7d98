"""Bradley-Terry scores of battles with bootstrap confidence intervals and CI-aware ranks.

Scores are the maximum-likelihood Elo scores (base 10, scale 400, mean 0; a tie is half
a win), fitted by the Newton solver of ``metaeval.ratings.elo`` on the battle counts;
with covariates (style control) or Davidson ties, by ``metaeval.pairwise.contextual``,
which also gives the closed-form sandwich intervals.
Bootstrap rounds resample the battles with replacement, as the arena's published method
does (Chiang et al. 2024), but draw the resampled counts per (pair, outcome) cell from a
multinomial instead of copying rows, and fit all rounds of a chunk in one batched Newton
iteration warm-started at the full-data estimate.  Every round is fitted in the mean-0
gauge, so the intervals do not depend on which model, if any, anchors the scale.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse import csgraph
from scipy.stats import norm

from metaeval.errors import MetaEvalError
from metaeval.pairwise import contextual
from metaeval.pairwise.battles import BattleCounts, components, count_battles
from metaeval.ratings.bootstrap import check_replicates, percentile_interval
from metaeval.ratings.base import shared_ranks
from metaeval.ratings.elo import RANK_TOLERANCE, SCALE, fit_batch, with_prior
from metaeval.runs.threads import one_blas_thread

#: Bootstrap rounds per chunk; each chunk has its own random stream, so results do not
#: depend on the number of workers.
CHUNK = 50


def bradley_terry(
    battles,
    bootstrap: int = 0,
    seed: int = 0,
    prior: float = 0.0,
    confidence: float = 0.95,
    anchor: tuple[str, float] | None = None,
    workers: int | None = None,
    control=None,
    normalise: bool = True,
    ties: str = "half",
    sandwich: bool = False,
    ridge: float = 0.0,
    hessian_ridge: float = 0.0,
) -> pd.DataFrame:
    """Elo-scale Bradley-Terry scores of every model, best first.

    Args:
        battles: a battle table (DataFrame or CSV path, see ``battles.read_battles``) or
            its `BattleCounts`.
        bootstrap: number of bootstrap rounds (0: no bootstrap intervals).
        seed: seed of the bootstrap's random streams.
        prior: virtual games between every pair of models, half won by each; needed (and
            only then allowed to matter) when the comparison graph is not strongly
            connected.  ``prior=1`` adds one virtual game per pair.  Plain
            Bradley-Terry only (no ``control``, half-win ties, no sandwich).
        confidence: coverage of the intervals.
        anchor: ``(model, value)``: shift every score and bound by one constant so that
            ``model`` scores ``value`` (the default is mean 0).
        workers: threads fitting bootstrap chunks (default: the number of cores, at most 2).
        control: covariates fitted jointly with the scores (style control): names of
            numeric columns, or of ``name_a``/``name_b`` column pairs (see
            ``battles.covariates``).
        normalise: standardise the covariates (mean 0, standard deviation 1).
        ties: ``"half"`` (a tie is half a win for each side) or ``"davidson"`` (a third
            outcome with its own fitted probability).
        sandwich: closed-form sandwich (robust) intervals ``H^-1 B H^-1``, normal at
            ``confidence``.
        ridge: L2 penalty ``ridge * N / 2 * |beta|^2`` on the coefficients (N battles).
        hessian_ridge: per battle, added to the Hessian's diagonal before the sandwich
            inverts it (0: the exact mean-0 gauge).

    Returns:
        A DataFrame indexed by model with columns ``score`` (0 where it lies within
        ``elo.RANK_TOLERANCE`` of 0, as a model between two others in a cycle does: the
        fit leaves rounding error such as -1e-15), ``lower``, ``upper`` (bootstrap
        percentiles, else the sandwich interval, else NaN), ``rank`` (1 + the number of
        models whose lower bound exceeds this one's upper bound; by score alone without
        intervals), ``battles`` (weighted; integers when every count is whole) and, when
        the battles name owners, ``owner``.  With ``sandwich``: ``stderr`` and, beside a
        bootstrap, ``sandwich_lower`` and ``sandwich_upper``.  With ``control``:
        ``uncontrolled``, the score without the covariates, and ``uncontrolled_rank``;
        ``attrs["coefficients"]`` maps each covariate to its ``coefficient`` (log-odds
        per unit), ``stderr``, ``lower`` and ``upper``.  With Davidson ties,
        ``attrs["tie_parameter"]`` is nu.
    """
    counts = battles if isinstance(battles, BattleCounts) else count_battles(battles, control, normalise)
    control = tuple(control or ())
    if control != counts.control:
        raise MetaEvalError(f"the counts hold covariates ({', '.join(counts.control) or 'none'}), "
                            f"not the control asked for ({', '.join(control) or 'none'})")
    if not (isinstance(bootstrap, (int, np.integer)) and bootstrap >= 0):
        raise MetaEvalError(f"bootstrap must be a whole number of rounds >= 0, got {bootstrap!r}")
    if not 0 < confidence < 1:
        raise MetaEvalError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MetaEvalError(f"seed must be an int of at least 0, got {seed!r}")
    if ties not in contextual.TIES:
        raise MetaEvalError(f"unknown ties {ties!r}; choose {' or '.join(contextual.TIES)}")
    plain = not control and ties == "half"
    if prior and (sandwich or not plain):
        raise MetaEvalError("prior applies to plain Bradley-Terry only (no control, half-win ties, no sandwich)")
    if bootstrap:
        check_replicates(bootstrap, confidence, len(counts.models) + len(control) + (ties == "davidson"))
    if plain:
        point, samples = fit(counts, bootstrap, seed, prior, workers)
        samples = samples / SCALE
        model_fit = contextual.fit(counts, sandwich=True, hessian_ridge=hessian_ridge,
                                   start=point / SCALE) if sandwich else None
    else:
        model_fit, samples = fit_general(counts, bootstrap, seed, ties, ridge, sandwich, hessian_ridge)
        point = SCALE * model_fit.theta
    k = len(counts.models)
    point = np.where(np.abs(point) <= RANK_TOLERANCE, 0.0, point)  # tied with 0: it is 0
    frame = pd.DataFrame({"score": point}, index=pd.Index(counts.models, name="model"))
    z = norm.ppf(0.5 + confidence / 2)
    shifted = ["score", "lower", "upper"]
    if sandwich:
        stderr = SCALE * np.sqrt(np.diag(model_fit.covariance))[:k]
        bounds = point - z * stderr, point + z * stderr
    if bootstrap:
        frame["lower"], frame["upper"] = percentile_interval(SCALE * samples[:, :k], confidence)
        if sandwich:
            frame["sandwich_lower"], frame["sandwich_upper"] = bounds
            shifted += ["sandwich_lower", "sandwich_upper"]
    elif sandwich:
        frame["lower"], frame["upper"] = bounds
    else:
        frame["lower"] = frame["upper"] = np.nan
    if sandwich:
        frame["stderr"] = stderr
    if control:
        if ties == "half":  # the win matrix holds all plain Bradley-Terry needs
            frame["uncontrolled"] = SCALE * fit_batch(counts.wins()[None])[0]
        else:
            frame["uncontrolled"] = SCALE * contextual.fit(replace(counts, covariates=None, control=()), ties).theta
        shifted.append("uncontrolled")
    if anchor is not None:
        model, value = anchor
        if model not in frame.index:
            raise MetaEvalError(f"anchor model {model!r} is not in the battles")
        shift = value - frame.at[model, "score"]
        for column in shifted:
            frame[column] += value - frame.at[model, "uncontrolled"] if column == "uncontrolled" else shift
        frame.at[model, "score"] = value  # exactly, not 1000.0000000000001
    frame["rank"] = ci_ranks(frame["score"], frame["lower"], frame["upper"])
    if control:
        frame["uncontrolled_rank"] = ci_ranks(frame["uncontrolled"], *[np.full(k, np.nan)] * 2)
    wins = counts.wins()
    played = (wins + wins.T).sum(axis=1)
    frame["battles"] = played.astype(np.int64) if np.all(played % 1 == 0) else played
    if counts.owners is not None:
        frame["owner"] = [counts.owners.get(m) for m in counts.models]
    frame.attrs.update(bootstrap=int(bootstrap), seed=seed, prior=prior, confidence=confidence,
                       ties=ties, sandwich=bool(sandwich))
    if control:
        frame.attrs["coefficients"] = _coefficients(model_fit, samples, control, k, z, confidence, bootstrap)
    if ties == "davidson":
        frame.attrs["tie_parameter"] = float(np.exp(model_fit.tau))
    return frame.sort_values(["score"], ascending=False, kind="stable")


def _coefficients(model_fit, samples, control, k, z, confidence, bootstrap) -> dict:
    """Each covariate's coefficient with its interval (bootstrap if drawn, else sandwich)."""
    beta = model_fit.beta
    stderr = (np.sqrt(np.diag(model_fit.covariance))[k: k + len(control)] if model_fit.covariance is not None
              else np.full(len(control), np.nan))
    if bootstrap:
        lower, upper = percentile_interval(samples[:, k: k + len(control)], confidence)
    else:
        lower, upper = beta - z * stderr, beta + z * stderr
    return {name: {"coefficient": float(beta[j]), "stderr": float(stderr[j]),
                   "lower": float(lower[j]), "upper": float(upper[j])} for j, name in enumerate(control)}


def fit_general(counts: BattleCounts, bootstrap: int, seed: int, ties: str, ridge: float,
                sandwich: bool, hessian_ridge: float):
    """The contextual or Davidson fit (natural-log units) and ``bootstrap`` resampled
    parameter vectors ``[bootstrap, parameters]``, each round warm-started at the fit."""
    wins = counts.wins()
    groups = components(wins, counts.models)
    if len(groups) > 1:
        raise MetaEvalError(_disconnected(groups, wins, counts.models).split(", or pass prior")[0])
    point = contextual.fit(counts, ties, ridge, sandwich, hessian_ridge)
    rounds = []
    for c, stream in enumerate(np.random.SeedSequence(seed).spawn(-(-bootstrap // CHUNK))):
        draws = resample(counts, min(CHUNK, bootstrap - c * CHUNK), np.random.default_rng(stream))
        broken = np.flatnonzero(~strongly_connected(counts.wins(draws)))
        if len(broken):
            raise MetaEvalError(f"bootstrap round {c * CHUNK + broken[0]}: a resample of the battles is not "
                                "strongly connected (a model never lost or never won in it)")
        rounds += [contextual.fit(counts, ties, ridge, count=d, start=point.parameters).parameters for d in draws]
    return point, np.array(rounds).reshape(bootstrap, point.parameters.size)


def ci_ranks(score, lower, upper) -> np.ndarray:
    """1 + the number of models whose lower bound exceeds this one's upper bound by more
    than the fit's precision (``elo.RANK_TOLERANCE``).

    Without intervals (NaN bounds) the rank is 1 + the number of higher scores, so scores
    tied within that precision share a rank.
    """
    score, lower, upper = (np.asarray(x, dtype=np.float64) for x in (score, lower, upper))
    if np.isnan(lower).all():
        lower = upper = score
    return shared_ranks(lower, upper, RANK_TOLERANCE)


def fit(counts: BattleCounts, bootstrap: int = 0, seed: int = 0, prior: float = 0.0, workers=None):
    """The MLE and ``bootstrap`` resampled MLEs, Elo scale, mean 0: ``([k], [bootstrap, k])``."""
    if not (np.isfinite(prior) and prior >= 0):
        raise MetaEvalError(f"prior must be a finite number >= 0, got {prior}")
    wins = with_prior(counts.wins(), prior)
    groups = components(wins, counts.models)
    if len(groups) > 1:
        raise MetaEvalError(_disconnected(groups, wins, counts.models))
    point = fit_batch(wins[None])[0]
    if not bootstrap:
        return SCALE * point, np.empty((0, len(point)))
    streams = np.random.SeedSequence(seed).spawn(-(-bootstrap // CHUNK))
    sizes = [min(CHUNK, bootstrap - c * CHUNK) for c in range(len(streams))]

    def chunk(c):
        draws = resample(counts, sizes[c], np.random.default_rng(streams[c]))
        round_wins = with_prior(counts.wins(draws), prior)
        broken = np.flatnonzero(~strongly_connected(round_wins))
        if len(broken):
            raise MetaEvalError(
                f"bootstrap round {c * CHUNK + broken[0]}: a resample of the battles is not strongly "
                "connected (a model never lost or never won in it); pass prior > 0"
            )
        return fit_batch(round_wins, start=point)

    workers = min(2, os.cpu_count() or 1) if workers is None else int(workers)
    with one_blas_thread(), ThreadPoolExecutor(max(1, workers)) as pool:
        samples = np.concatenate(list(pool.map(chunk, range(len(streams)))))
    return SCALE * point, SCALE * samples


def strongly_connected(wins: np.ndarray) -> np.ndarray:
    """For each matrix of a stack ``[B, k, k]``: is its "has beaten" graph strongly connected?

    One graph search over the block-diagonal union of the B graphs, not B small searches.
    """
    rounds, k, _ = wins.shape
    b, i, j = np.nonzero(wins > 0)
    union = sparse.csr_matrix((np.ones(len(b)), (b * k + i, b * k + j)), shape=(rounds * k,) * 2)
    _, labels = csgraph.connected_components(union, directed=True, connection="strong")
    labels = labels.reshape(rounds, k)
    return (labels == labels[:, :1]).all(axis=1)


def resample(counts: BattleCounts, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Cell counts of ``rounds`` resamples of the battles with replacement, ``[rounds, cells]``."""
    total = int(counts.count.sum())
    return rng.multinomial(total, counts.count / total, size=rounds).astype(np.float64)


def _disconnected(groups, wins, models) -> str:
    lost = wins.sum(axis=0)
    won = wins.sum(axis=1)
    never_lost = [m for m, x in zip(models, lost) if x == 0]
    never_won = [m for m, x in zip(models, won) if x == 0]
    shown = "; ".join(", ".join(g[:5]) + (" ..." if len(g) > 5 else "") for g in groups[:6])
    facts = []
    if never_lost:
        facts.append(f"never lost: {', '.join(never_lost[:5])}")
    if never_won:
        facts.append(f"never won: {', '.join(never_won[:5])}")
    return (
        f"Bradley-Terry scores would be infinite: the comparison graph has {len(groups)} strongly "
        f"connected components ({shown})" + (f"; {'; '.join(facts)}" if facts else "")
        + ". Rate each component separately, or pass prior > 0 (virtual games between every pair)"
    )
