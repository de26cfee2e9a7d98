"""A smaller, exact CCE constraint system for the deviation-rating LPs.

The "practical computation" of Marris et al. (2025, appendix): quantise the
payoffs, fold interchangeable players into one, and merge joint strategies (and
deviations) whose constraint columns (rows) are identical.

Why folding is exact: if a relabelling of players maps the game to itself, it maps
every LP of Algorithm 1 to itself, so averaging an optimal sigma over the relabelling
group gives an optimal symmetric sigma, under which interchangeable players have equal
deviation gains. Hence only one player per class needs constraint rows, and the
variables are the orbits of joints under the group (uniform mass within an orbit).
A constraint tight at every optimum of the folded LP is tight at every optimum of the
full LP (symmetrising a slack optimum would keep it slack), so the same constraints
freeze at the same values. Merging identical columns changes nothing either: only the
total mass on a set of identical columns enters any constraint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from metaeval.solvers.equilibria import cce_constraints
from metaeval.game import MetaGame

QUANTUM_DECIMALS = 14
# Payoffs equal to within this fraction of the largest payoff difference count as equal
# when deciding whether two players are interchangeable.
SYMMETRY_RTOL = 1e-12


def quantise(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Round to QUANTUM_DECIMALS decimals, so values equal up to rounding noise become equal
    (into ``out`` if given, which may be ``values``).

    Adding 0.0 turns -0.0 into 0.0, which matters for exact duplicate detection.
    """
    rounded = np.round(values, QUANTUM_DECIMALS, out=out)
    rounded += 0.0
    return rounded


def identical(count: int, row) -> np.ndarray:
    """Label of each of ``count`` arrays ``row(i)`` by its set of identical ones, numbered by
    first appearance. Arrays are grouped by a hash of their bytes and compared exactly
    within a group: np.unique(axis=0) on rows of 192,000 entries (a king against
    64 x 3,000 prompts) took most of the 8.4 CPU s of de-cloning a 64 x 64 x 3,000 game;
    hashing takes 2.4."""
    labels = np.empty(count, dtype=np.int64)
    groups: dict[int, list[int]] = {}
    found = 0
    for i in range(count):
        values = np.ascontiguousarray(row(i))
        group = groups.setdefault(hash(values.tobytes()), [])
        same = next((j for j in group if np.array_equal(row(j), values)), None)
        if same is None:
            group.append(i)
            labels[i], found = found, found + 1
        else:
            labels[i] = labels[same]
    return labels


def copied_strategies(game: MetaGame, probes: int = 256) -> list[np.ndarray]:
    """Per player, the label of each strategy's set of exact copies (the same payoffs, bit
    for bit, to every player against every co-player profile; the prompt-copying attack
    makes them), numbered by first appearance. Merging copies is exact for deviation
    ratings: a copy's constraint row is its original's, and a joint with a copy has the
    column of the joint with the original.

    Candidates are the strategies equal on ``probes`` co-player profiles (seeded), checked
    on every profile only within a candidate set: comparing whole slices of a 4 x 64 game
    (8 MB each) took 2 CPU s, most of it for games without a copy."""
    rng = np.random.default_rng(0)
    labels = []
    for p, k in enumerate(game.shape):
        others = [q for q in range(game.num_players) if q != p]
        at = rng.integers(0, int(np.prod([game.shape[q] for q in others])), probes)
        index: list = [None] * game.num_players
        for q, coordinate in zip(others, np.unravel_index(at, [game.shape[q] for q in others])):
            index[q] = coordinate[None, :]
        index[p] = np.arange(k)[:, None]
        sample = game.payoffs[(slice(None), *index)] + 0.0  # [players, k, probes]; -0.0 made 0.0
        candidates = identical(k, lambda s: sample[:, s])
        first = np.arange(k)
        for label in np.flatnonzero(np.bincount(candidates) > 1):
            members = np.flatnonzero(candidates == label)
            same = identical(len(members), lambda i: np.take(game.payoffs, members[i], axis=1 + p) + 0.0)
            first[members] = members[np.unique(same, return_index=True)[1]][same]
        labels.append(np.unique(first, return_inverse=True)[1].ravel())
    return labels


def interchangeable_players(game: MetaGame) -> list[list[int]]:
    """Classes of players that can be relabelled among themselves without changing the game.

    The transposition of players p and q is a symmetry when swapping their strategy axes
    and their payoff slots leaves the payoffs unchanged. Symmetric transpositions are
    transitive ((p r) = (p q)(q r)(p q)), so they partition the players into classes and
    every permutation within a class is a symmetry.
    """
    n = game.num_players
    spread = np.ptp(game.payoffs) if game.payoffs.size else 0.0
    atol = SYMMETRY_RTOL * max(spread, np.finfo(float).tiny)
    parent = list(range(n))

    def root(p: int) -> int:
        while parent[p] != p:
            p = parent[p]
        return p

    for p in range(n):
        for q in range(p + 1, n):
            if game.shape[p] != game.shape[q] or root(p) == root(q):
                continue
            order = list(range(n))
            order[p], order[q] = q, p
            swapped = np.swapaxes(game.payoffs, 1 + p, 1 + q)[order]
            if np.allclose(swapped, game.payoffs, rtol=0, atol=atol):
                parent[root(q)] = root(p)
    classes: dict[int, list[int]] = {}
    for p in range(n):
        classes.setdefault(root(p), []).append(p)
    return list(classes.values())


def joint_orbits(shape: tuple[int, ...], classes: list[list[int]]) -> np.ndarray:
    """Orbit label of every joint (C order) under permutations within each player class.

    Sorting a joint's coordinates within each class gives a canonical member of its orbit.
    """
    joints = np.indices(shape).reshape(len(shape), -1)
    for members in classes:
        if len(members) > 1:
            joints[members] = np.sort(joints[members], axis=0)
    canonical = np.ravel_multi_index(tuple(joints), shape)
    return np.unique(canonical, return_inverse=True)[1].ravel()


@dataclass(frozen=True)
class ReducedCCE:
    """The CCE system ``A sigma <= t`` after folding and merging.

    Attributes:
        matrix: reduced constraint matrix [rows, columns], in units of ``scale``.
        scale: largest absolute entry of the original CCE matrix (1 if it is all zero).
        row_of: for every original row (p, a'_p), in player order, its reduced row.
        column_of: for every joint (C order), its reduced column.
        classes: the interchangeable-player classes that were folded.
    """

    matrix: np.ndarray
    scale: float
    row_of: np.ndarray
    column_of: np.ndarray
    classes: list[list[int]]

    def expand(self, masses: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Joint distribution spreading each reduced column's mass evenly over its joints."""
        sizes = np.bincount(self.column_of, minlength=self.matrix.shape[1])
        return (masses[self.column_of] / sizes[self.column_of]).reshape(shape)


def reduce_cce(game: MetaGame, symmetry: bool = True, merge_duplicates: bool = True) -> ReducedCCE:
    """Scale A to unit size, quantise it, fold interchangeable players, merge duplicates."""
    full = cce_constraints(game)
    scale = float(np.abs(full).max()) or 1.0
    full = quantise(full / scale)
    classes = interchangeable_players(game) if symmetry else [[p] for p in range(game.num_players)]

    starts = np.concatenate([[0], np.cumsum(game.shape)])
    kept = np.concatenate([np.arange(starts[c[0]], starts[c[0] + 1]) for c in classes])
    orbit = joint_orbits(game.shape, classes)
    sizes = np.bincount(orbit)
    averaging = sp.csr_matrix((1.0 / sizes[orbit], (np.arange(orbit.size), orbit)))
    matrix = quantise(np.asarray((averaging.T @ full[kept].T).T))

    row_of_kept = np.arange(kept.size)
    column_of_orbit = np.arange(matrix.shape[1])
    if merge_duplicates:
        matrix, column_of_orbit = np.unique(matrix, axis=1, return_inverse=True)
        matrix, row_of_kept = np.unique(matrix, axis=0, return_inverse=True)
    position = {int(row): i for i, row in enumerate(kept)}
    row_of = np.empty(starts[-1], dtype=np.int64)
    for members in classes:
        lead = members[0]
        for p in members:
            for k in range(game.shape[p]):
                row_of[starts[p] + k] = row_of_kept[position[starts[lead] + k]]
    return ReducedCCE(
        matrix=np.ascontiguousarray(matrix),
        scale=scale,
        row_of=row_of,
        column_of=column_of_orbit.ravel()[orbit],
        classes=classes,
    )
