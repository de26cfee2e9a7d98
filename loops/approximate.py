"""A loop's per-iteration approximate CCE gap (maths, section 4.1): its settings, estimate and record fields.

``psro``, ``pbt`` and ``evolve`` share it: with ``approximate_gap`` positive, every iteration
estimates a lower bound on the full-game CCE gap of the meta-distribution
([`metaeval.Evaluator.approximate_gap`][metaeval.training.evaluator.Evaluator.approximate_gap]: one ``approximate_gap_learner`` deviation per
player, searched or trained with that many episodes, values from ``approximate_gap_episodes``
fresh episodes), recorded as ``approximate_cce_gap`` (the bound) and the fields of `fields`.
"""

from __future__ import annotations

import numpy as np

from metaeval.errors import MetaEvalError

GAP_LEARNERS = ("dqn", "ppo", "search", "rollout")
"""The responders of the deviations (none walks the tree)."""

STREAM = 2
"""The spawn key under the run's seed of the estimate's generators (0 and 1 seed a loop's
first population and its own stream)."""

SETTINGS = ("approximate_gap", "approximate_gap_learner", "approximate_gap_episodes")
"""The config fields of the estimate, result settings when it is on."""


def check(config) -> None:
    """Refuse, in one line, bad estimate settings of ``config`` (any loop config with `SETTINGS`)."""
    budget, learner, episodes = (getattr(config, name) for name in SETTINGS)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise MetaEvalError(f"approximate_gap must be a non-negative int (training episodes; 0: off), got {budget!r}")
    if learner not in GAP_LEARNERS:
        raise MetaEvalError(f"approximate_gap_learner must be one of {', '.join(GAP_LEARNERS)}, got {learner!r}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise MetaEvalError(f"approximate_gap_episodes must be at least 2, got {episodes!r}")


def result_keys(config) -> list[str]:
    """The estimate's settings that change a run's records (none when it is off)."""
    return list(SETTINGS) if config.approximate_gap else []


def estimate(evaluator, sigma, config, iteration: int):
    """The estimate at ``iteration`` (None when off), from a generator of its own seeded by the
    run's seed and the iteration: estimating changes nothing else in the run, and a resumed
    run estimates as the uninterrupted one."""
    if not config.approximate_gap:
        return None
    rng = np.random.default_rng(np.random.SeedSequence(config.seed, spawn_key=(STREAM, iteration)))
    return evaluator.approximate_gap(sigma, config.approximate_gap_learner, config.approximate_gap,
                                     config.approximate_gap_episodes, rng)


def fields(gap, always: bool = False) -> dict:
    """A record's fields of the estimate ``gap``: none when there is none, unless ``always``
    (then null), so the records of runs without it stay as they were.

    ``approximate_cce_gap`` is the lower bound ([`metaeval.responses.gap.ApproximateGap.bound`][metaeval.responses.gap.ApproximateGap.bound]: the estimate where
    a profitable deviation was found, else 0); ``_estimate`` the sum of
    the per-player terms, ``_stderr`` its standard error, ``_per_player`` and
    ``_per_player_stderr`` the terms; ``_responder`` and ``_episodes`` what found the deviations."""
    if gap is None and not always:
        return {}
    names = ("approximate_cce_gap", "approximate_cce_gap_estimate", "approximate_cce_gap_stderr",
             "approximate_cce_gap_per_player", "approximate_cce_gap_per_player_stderr",
             "approximate_cce_gap_responder", "approximate_cce_gap_episodes")
    if gap is None:
        return dict.fromkeys(names)
    return dict(zip(names, (gap.bound, gap.total, gap.stderr, gap.per_player.tolist(),
                            gap.per_player_stderr.tolist(), gap.responder, gap.training_episodes)))
