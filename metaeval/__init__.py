"""metaeval: game-theoretic evaluation of agents and populations."""

from metaeval.errors import IdenticalPoliciesWarning, MetaEvalError
from metaeval.training.evaluator import Evaluator
from metaeval.game import MetaGame
from metaeval.ratings import RATERS, Rating, rate

__all__ = ["Evaluator", "IdenticalPoliciesWarning", "MetaEvalError", "MetaGame", "RATERS", "Rating", "rate"]
__version__ = "0.2.0"
