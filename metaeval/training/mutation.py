"""Exploit and explore: perturbed copies of policy and value tables (seeded).

- [`perturb_policy`][metaeval.training.mutation.perturb_policy]: each information state's action distribution ``pi(s)`` becomes
  ``(1 - scale) * pi(s) + scale * d(s)``, ``d(s) ~ Dirichlet(1)`` over the legal actions
  (the random policy of the maths page, section 3). A convex combination of two distributions over the legal
  actions, so the result is always a valid policy; ``scale = 1`` is a fresh random policy.
- [`perturb_values`][metaeval.training.mutation.perturb_values]: every legal entry of a value table ``Q [S, A]`` gets independent
  Gaussian noise ``N(0, (scale * spread)^2)``, ``spread`` the table's largest absolute
  legal value (1 for an all-zero table), so the noise is relative to the values' size and
  changes the greedy policy where values are close.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError
from metaeval.spiel.policies import check_table, random_table
from metaeval.spiel.tree import PlayerLayout


def _check_scale(scale: float) -> float:
    if not 0 <= scale <= 1:
        raise MetaEvalError(f"the mutation scale must lie in [0, 1], got {scale!r}")
    return float(scale)


def perturb_policy(layout: PlayerLayout, table, rng: np.random.Generator, scale: float = 0.25) -> np.ndarray:
    """``(1 - scale) * table + scale * Dirichlet(1)`` at every information state.

    Args:
        layout: the player's table layout.
        table: the policy table ``[S, A]``.
        rng: the generator of the Dirichlet draws.
        scale: the weight of the noise, in [0, 1].

    Returns:
        The perturbed table.
    """
    scale = _check_scale(scale)
    table = check_table(layout, table)
    return (1.0 - scale) * table + scale * random_table(layout, rng, "dirichlet")


def perturb_values(layout: PlayerLayout, values, rng: np.random.Generator, scale: float = 0.25) -> np.ndarray:
    """``values`` plus ``N(0, (scale * max |legal value|)^2)`` on every legal entry.

    Args:
        layout: the player's table layout.
        values: the value table ``[S, A]``.
        rng: the generator of the noise.
        scale: the noise's standard deviation relative to the largest legal value.

    Returns:
        The perturbed values.
    """
    scale = _check_scale(scale)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != layout.legal.shape or not np.all(np.isfinite(values)):
        raise MetaEvalError(f"values must be a finite array of shape {layout.legal.shape}, got {values.shape}")
    spread = np.abs(values[layout.legal]).max(initial=0.0) or 1.0
    noise = rng.normal(0.0, scale * spread, size=values.shape)
    return np.where(layout.legal, values + noise, values)
