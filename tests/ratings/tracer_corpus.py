"""Seeded small games on which the logit tracer's step control is checked against the
limiting logit equilibria recorded from the tracer before it (``tracer_corpus.npz``).

Generic games of 2 to 5 players, and degenerate ones: payoffs on a few levels (many exact
ties), the same perturbed by 1e-9 (nearly tied), cloned strategies, a weakly dominant
strategy, symmetric games (traced on the symmetric branch) and king-of-the-hill games.
Record afresh (only when the selected equilibrium is meant to change) with
``python -m tests.ratings.tracer_corpus``.
"""

from pathlib import Path

import numpy as np

from metaeval import MetaGame
from metaeval.data.simulated import simulated_judge
from metaeval.ratings.nash import well_scaled

RECORDED = Path(__file__).parent / "data" / "tracer_corpus.npz"
SHAPES = [(4, 5), (7, 3), (9, 9), (3, 3, 3), (2, 5, 4), (6, 6, 6), (2, 2, 2, 2), (3, 4, 2, 3),
          (5, 5, 5, 5), (2, 2, 3, 2, 2), (3, 3, 3, 3, 3)]


def _uniform(rng, shape):
    return rng.uniform(-1, 1, size=(len(shape), *shape))


def _tied(rng, shape):
    return rng.integers(-2, 3, size=(len(shape), *shape)).astype(float)


def _nearly_tied(rng, shape):
    return _tied(rng, shape) + 1e-9 * rng.uniform(-1, 1, size=(len(shape), *shape))


def _cloned(rng, shape):
    """Player p's last strategy a copy of their first (for every player's payoffs)."""
    payoffs = _uniform(rng, shape)
    for p in range(len(shape)):
        axis = 1 + p
        np.moveaxis(payoffs, axis, 1)[:, -1] = np.moveaxis(payoffs, axis, 1)[:, 0]
    return payoffs


def _weakly_dominant(rng, shape):
    """Player 0's first strategy earns player 0's best payoff against every opponents' joint."""
    payoffs = _uniform(rng, shape)
    payoffs[0][0] = payoffs[0].max(axis=0)
    return payoffs


def _symmetric(rng, players, size):
    """G_p(a) = G_0(a_p, a_-p) with G_0 symmetric in the opponents' actions."""
    own = rng.uniform(-1, 1, size=(size,) * players)
    own = sum(np.moveaxis(own, [0, *order], [0, *range(1, players)])
              for order in _orders(list(range(1, players)))) / _count(players - 1)
    return np.stack([np.moveaxis(own, 0, p) for p in range(players)])


def _orders(items):
    if len(items) <= 1:
        return [items]
    return [[items[i], *rest] for i in range(len(items)) for rest in _orders(items[:i] + items[i + 1:])]


def _count(n):
    return 1 if n <= 1 else n * _count(n - 1)


def games():
    """(name, well-scaled payoffs, symmetric) for every game of the corpus."""
    found = []
    for family in (_uniform, _tied, _nearly_tied, _cloned, _weakly_dominant):
        for index, shape in enumerate(SHAPES):
            if min(shape) < 3 and family is _cloned:  # two strategies, one cloned: a constant game
                continue
            rng = np.random.default_rng(1000 * index + len(found))
            found.append((f"{family.__name__[1:]}_{'x'.join(map(str, shape))}", family(rng, shape), False))
    for players, size, seed in ((2, 4, 0), (2, 7, 1), (3, 4, 2), (3, 6, 3), (4, 3, 4)):
        found.append((f"symmetric_{players}x{size}", _symmetric(np.random.default_rng(seed), players, size), True))
    for models, prompts, seed in ((4, 10, 0), (6, 25, 1)):
        found.append((f"king_of_the_hill_{models}x{prompts}", simulated_judge(models, prompts, seed=seed).payoffs, False))
    return [(name, well_scaled(payoffs)[0], symmetric or MetaGame(well_scaled(payoffs)[0]).is_symmetric(rtol=1e-9))
            for name, payoffs, symmetric in found]


def _record():
    from metaeval.ratings.logit import limiting_logit_equilibrium

    arrays = {}
    for name, payoffs, symmetric in games():
        for p, x in enumerate(limiting_logit_equilibrium(payoffs, symmetric=symmetric)):
            arrays[f"{name}/{p}"] = x
    np.savez(RECORDED, **arrays)


if __name__ == "__main__":
    _record()
