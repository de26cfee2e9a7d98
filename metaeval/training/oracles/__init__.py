"""Oracles: the policy a loop adds for a player, given the population and a meta-distribution.

Every oracle has one signature,

    oracle(evaluator, player, sigma, rng) -> OpenSpiel policy for ``player``

where ``evaluator`` is the [`metaeval.Evaluator`][metaeval.training.evaluator.Evaluator] holding the game
(``evaluator.game``), the population (``evaluator.population``, policies by id) and its
meta-game; ``sigma`` is a joint distribution over the population (an array of the
meta-game's shape, e.g. ``evaluator.meta_distribution("nash")``); and ``rng`` a
``numpy.random.Generator`` for any randomness (sampling opponents, exploration, seeds of
a learner), so a loop is reproducible from its seed. A learned oracle fits the same
shape: draw opponents' joint policies from sigma's opponents' marginal, train against
them, return the trained policy. The loop adds what is returned with ``evaluator.add``.

- ``psro``: the exact best response in the full game to the opponents' mixture
  (the product of their marginals of sigma), as in PSRO (Lanctot et al. 2017);
- ``jpsro``: the exact best response to the opponents' joint marginal of sigma,
  JPSRO's CCE oracle (Marris et al. 2021); ``tie_break="openspiel"`` picks among tied
  best actions as OpenSpiel's ``jpsro`` does;
- ``random``: a random stochastic tabular policy (maths, section 3);
- `learned` (a factory: learner, episode budget) trains a policy from scratch
  against the opponents' joint marginal of sigma;
- `mutate` (a factory: a rating) copies one of the player's top-rated policies with
  a perturbed table;
- [`from_new_policy`][metaeval.training.oracles.from_new_policy] wraps the population loop's ``new_policy(game, player, rng)`` hook.
"""

from metaeval.training.oracles.best_response import TIE_BREAKS, jpsro, psro
from metaeval.training.oracles.learned import learned
from metaeval.training.oracles.mutate import mutate
from metaeval.training.oracles.random import from_new_policy, random

ORACLES = {"psro": psro, "jpsro": jpsro, "random": random}

__all__ = ["ORACLES", "TIE_BREAKS", "from_new_policy", "jpsro", "learned", "mutate", "psro", "random"]
