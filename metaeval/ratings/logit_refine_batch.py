"""The traced ends of a batch of games refined and selected in lock-step.

`logit.selected_equilibrium` refines a traced point by Newton's method on the supports
read off it and selects among the refinements. Bootstrap replicates of one game
(`metaeval.ratings.warm`) have payoff tensors of the same shape, so their traced points
are refined together: the payoffs against every point (`payoffs_against`, one batched
product per contracted axis, in `logit.payoff_against`'s order), every game's supports,
and Newton's iterations on all the (game, support) pairs at once, each pair keeping its
own stop (`_refine`). Only the least-squares steps are solved one pair at a time, by
the same `np.linalg.lstsq` call. The equations, supports, stops and selection are
`selected_equilibrium`'s, so each game selects what its own refinement selects, up to
rounding (the sums are taken by other BLAS calls). On 100 replicates of a goofspiel
meta-game (8 x 8 x 8, 2 supports a replicate in 40 distinct sizes over 50 replicates) a
replicate's refinement cost 0.18 to 0.29 CPU ms, against 0.83 one by one, mostly in
Python and numpy's calls.
"""

from __future__ import annotations

import math

import numpy as np

from metaeval.ratings import logit
from metaeval.ratings.logit import (BEST_RESPONSE_GAPS, NEGATIVE_MASS, REFINE_ITERATIONS, REFINED_RESIDUAL,
                                    STALLED_REGRET, STALLED_STEP, SUPPORT_THRESHOLDS)


def selected_equilibria(payoffs: np.ndarray, reached: list[list[np.ndarray]]) -> list[list[np.ndarray] | None]:
    """Each game's `logit.selected_equilibrium` from its traced point (not on the
    symmetric subspace), or None where rounding may have decided it (contested, or no
    refinement an equilibrium: the cases that function flags).

    Args:
        payoffs: the games ``[B, N, K_1, ..., K_N]``.
        reached: per game, its branch's point at ``TRACE_REGRET``, one strategy per player.

    Returns:
        Per game, the selected equilibrium (one mixed strategy per player), or None.
    """
    count, players = len(payoffs), payoffs.shape[1]
    points = [np.stack([x[p] for x in reached]) for p in range(players)]
    values = payoffs_against(payoffs, points)
    traced_regret = regrets(values, points)
    masks = [[x > threshold for x in points] for threshold in SUPPORT_THRESHOLDS]
    masks += [[v >= v.max(axis=1, keepdims=True) - gap for v in values] for gap in BEST_RESPONSE_GAPS]
    pairs = []  # (game, support masks) of every game's distinct supports, in its order
    for b in range(count):
        seen = set()
        for support in masks:
            rows = [mask[b] for mask in support]
            key = b"".join(row.tobytes() for row in rows)
            if key not in seen:  # the same refinement as an earlier support's
                seen.add(key)
                pairs.append((b, rows))
    refined = _refine(payoffs, points, pairs)
    candidates = [[] for _ in range(count)]
    kept = [i for i, x in enumerate(refined) if x is not None]
    if kept:
        games = np.array([pairs[i][0] for i in kept])
        profiles = [np.stack([refined[i][p] for i in kept]) for p in range(players)]
        found = regrets(payoffs_against(payoffs[games], profiles), profiles)
        for j, (b, regret) in enumerate(zip(games, found)):
            if regret < traced_regret[b]:
                candidates[b].append(([x[j] for x in profiles], float(regret)))
    selected = []
    for b in range(count):
        point = [x[b] for x in points]
        spread = float(np.ptp(payoffs[b]))
        strategies, contested = logit.lowest_regret_selection(candidates[b], point, spread)
        lowest = min((r for _, r in candidates[b]), default=float(traced_regret[b]))
        stalled = lowest > STALLED_REGRET * spread  # selected_equilibrium then searches the nearest equilibrium
        selected.append(None if contested or stalled else [x.copy() for x in strategies])
    return selected


def payoffs_against(payoffs: np.ndarray, strategies: list[np.ndarray]) -> list[np.ndarray]:
    """G_p(a_p, x_-p) of every game and pure strategy a_p, as `logit.payoff_against`.

    Args:
        payoffs: the games ``[B, N, K_1, ..., K_N]``.
        strategies: every player's mixed strategies ``[B, K_p]``.

    Returns:
        Per player, ``[B, K_p]``.
    """
    return [_contracted(payoffs[:, p], strategies, {p}) for p in range(len(strategies))]


def regrets(values: list[np.ndarray], strategies: list[np.ndarray]) -> np.ndarray:
    """`logit.max_regret` of every game ``[B]`` from its `payoffs_against` ``values``."""
    return np.max([((v.max(axis=1, keepdims=True) - v) * x).sum(axis=1) for v, x in zip(values, strategies)], axis=0)


def _contracted(tensor: np.ndarray, strategies: list[np.ndarray], kept: set) -> np.ndarray:
    """Every game's tensor ``[B, K_1..K_N]`` summed against the strategies of the players
    not ``kept``, one axis at a time, the last first (`logit._contract_axes` on small tensors)."""
    count = len(tensor)
    for q in reversed(range(len(strategies))):
        if q in kept:
            continue
        shape = tensor.shape  # every axis before q's is still there
        before, size, after = math.prod(shape[1 : 1 + q]), shape[1 + q], math.prod(shape[2 + q :])
        x = strategies[q]
        if after == 1:
            tensor = tensor.reshape(count, before, size) @ x[:, :, None]
        else:
            tensor = x[:, None, None, :] @ tensor.reshape(count, before, size, after)
        tensor = tensor.reshape(shape[: 1 + q] + shape[2 + q :])
    return tensor


def _refine(payoffs, points, pairs) -> list[list[np.ndarray] | None]:
    """`logit._refine` of each (game, support masks) pair, all in lock-step: Newton's method
    on the equations of the support, started from the game's traced point renormalised
    there; None where it stalls, does not converge or leaves the simplex.

    The unknowns of every pair are its game's whole strategies (and one w_p per player),
    those outside its support held at 0: the payoffs against them are then those against
    the support's, so every pair's equations come from the same batched products, and
    each pair's Newton step is solved on its support's rows and columns alone."""
    count, players = len(pairs), len(points)
    games = np.array([b for b, _ in pairs])
    masks = [np.stack([rows[p] for _, rows in pairs]) for p in range(players)]
    tensors = payoffs[games]
    x = []
    for p, mask in enumerate(masks):
        mass = np.where(mask, points[p][games], 0.0)
        total = mass.sum(axis=1, keepdims=True)
        x.append(np.where(total > 0, mass / np.where(total > 0, total, 1.0), mask / mask.sum(axis=1, keepdims=True)))
    w = np.stack([(v * xp).sum(axis=1) for v, xp in zip(payoffs_against(tensors, x), x)], axis=1)
    offsets = np.cumsum([0, *(mask.shape[1] for mask in masks)])
    unknowns = [np.flatnonzero(row) for row in np.concatenate(masks + [np.ones((count, players), bool)], axis=1)]
    converged = np.zeros(count, dtype=bool)
    going = np.arange(count)  # the pairs still iterating
    for _ in range(REFINE_ITERATIONS):
        if not len(going):
            break
        residual, jacobian = _equations(tensors[going], [xp[going] for xp in x], w[going], offsets)
        step = np.zeros(residual.shape)
        moving = np.zeros(len(going), dtype=bool)
        for m, i in enumerate(going):
            kept = unknowns[i]
            if np.abs(residual[m, kept]).max() < REFINED_RESIDUAL:
                converged[i] = True
                continue
            step[m, kept] = np.linalg.lstsq(jacobian[m][np.ix_(kept, kept)], -residual[m, kept], rcond=None)[0]
            moving[m] = np.abs(step[m, kept]).max() >= STALLED_STEP  # else a least-squares point: not converged
        going, step = going[moving], step[moving]
        for p in range(players):
            x[p][going] += step[:, offsets[p] : offsets[p + 1]]
        w[going] += step[:, offsets[-1] :]
    converged &= np.all([(xp >= -NEGATIVE_MASS).all(axis=1) for xp in x], axis=0)
    refined = [None] * count
    for i in np.flatnonzero(converged):
        mass = [np.maximum(xp[i], 0.0) for xp in x]
        refined[i] = [m / m.sum() for m in mass]
    return refined


def _equations(local, x, w, offsets):
    """`logit._equations` of every pair: residuals ``[M, n + N]`` and Jacobians in (x, w)."""
    count, players, n = len(local), len(x), offsets[-1]
    residual = np.zeros((count, n + players))
    jacobian = np.zeros((count, n + players, n + players))
    for p in range(players):
        rows = slice(offsets[p], offsets[p + 1])
        residual[:, rows] = _contracted(local[:, p], x, {p}) - w[:, p, None]
        jacobian[:, rows, n + p] = -1.0
        residual[:, n + p] = x[p].sum(axis=1) - 1.0
        jacobian[:, n + p, rows] = 1.0
        for q in range(players):
            if q != p:
                cross = _contracted(local[:, p], x, {p, q})  # axes (p, q) in the players' order
                jacobian[:, rows, offsets[q] : offsets[q + 1]] += cross if p < q else cross.transpose(0, 2, 1)
    return residual, jacobian
