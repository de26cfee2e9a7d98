"""metaeval: game-theoretic evaluation of agents and populations.

The top-level names, each documented where it is defined:

- [`MetaGame`][metaeval.game.MetaGame]: the payoff tensors of a population, one per player;
- [`rate`][metaeval.ratings.rate], [`RATERS`][metaeval.ratings.RATERS] and
  [`Rating`][metaeval.ratings.base.Rating]: rate every strategy of a meta-game by a named rater;
- [`Evaluator`][metaeval.training.evaluator.Evaluator]: the evaluator a training loop talks to;
- [`MetaEvalError`][metaeval.errors.MetaEvalError] and
  [`IdenticalPoliciesWarning`][metaeval.errors.IdenticalPoliciesWarning].

They are imported on first use, so that ``metaeval --help`` and tools that only need part
of the package do not load OpenSpiel, Ray and the solvers.
"""

import importlib
from typing import TYPE_CHECKING

from metaeval.errors import IdenticalPoliciesWarning, MetaEvalError

if TYPE_CHECKING:  # what the lazy names are, for type checkers and the API reference
    from metaeval.game import MetaGame
    from metaeval.ratings import RATERS, Rating, rate
    from metaeval.training.evaluator import Evaluator

_LAZY = {
    "Evaluator": "metaeval.training.evaluator",
    "MetaGame": "metaeval.game",
    "RATERS": "metaeval.ratings",
    "Rating": "metaeval.ratings",
    "rate": "metaeval.ratings",
}

__all__ = ["Evaluator", "IdenticalPoliciesWarning", "MetaEvalError", "MetaGame", "RATERS", "Rating", "rate"]
__version__ = "0.2.0"


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'metaeval' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
