"""Distributed evaluation: meta-games built by a pool of Ray actors.

    from metaeval.distributed import build_metagame, shutdown
    mg = build_metagame(game, population, mode="sampled", episodes=1000, workers=2)
    shutdown()

The same call runs in-process (``workers=1``), on an embedded Ray (``workers > 1``),
or on an existing cluster (``address=`` or ``$RAY_ADDRESS``), and returns the same
MetaGame. ``cce_gap`` computes the full-game CCE gap the same way, on the same actors.
Ray is imported and started only when a pool is first needed; one pool
is then kept per process between builds (see `metaeval.distributed.build`).
"""

from metaeval.distributed.build import BuildStats, build_metagame, current_pool, last_build, shutdown
from metaeval.distributed.gap import cce_gap
from metaeval.distributed.pool import EvaluatorPool

__all__ = ["BuildStats", "EvaluatorPool", "build_metagame", "cce_gap", "current_pool", "last_build", "shutdown"]
