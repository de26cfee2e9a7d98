"""The one exception type metaeval raises for bad input or failed solves."""


class MetaEvalError(ValueError):
    """Bad input, or a solver that did not reach an optimum; the message says which."""


class IdenticalPoliciesWarning(UserWarning):
    """Policies of one player are the same policy: their meta-game rows are equal, so they
    tie under every rater (e.g. checkpoints that were all one live view of a solver)."""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (empty if it has none), for one-line errors."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
