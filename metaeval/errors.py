"""The one exception type metaeval raises for bad input or failed solves."""


class MetaEvalError(ValueError):
    """Bad input, or a solver that did not reach an optimum; the message says which."""
