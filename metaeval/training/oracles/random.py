"""Oracles that ignore sigma: random policies, and the population loop's hook."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from metaeval import spiel


def random(evaluator, player: int, sigma, rng: np.random.Generator):
    """A random stochastic tabular policy: Dirichlet(1) at every information state (maths, section 3);
    drawn state by state in sampled mode (which builds no game tree)."""
    if evaluator.mode == "sampled":
        return spiel.population.lazy_random_policy(evaluator.game, player, rng)
    return spiel.random_policy(evaluator.game, player, rng)


def from_new_policy(new_policy: Callable) -> Callable:
    """The oracle of a ``new_policy(game, player, rng) -> policy`` hook (``evolve``'s).

    Args:
        new_policy: the hook.

    Returns:
        The oracle.
    """

    def oracle(evaluator, player: int, sigma, rng: np.random.Generator):
        return new_policy(evaluator.game, player, rng)

    return oracle
