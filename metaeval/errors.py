"""The exception metaeval raises for bad input or failed solves, and the kind of it a damaged file raises."""


class MetaEvalError(ValueError):
    """Bad input, or a solver that did not reach an optimum; the message says which."""


class DamagedFileError(MetaEvalError):
    """A file metaeval wrote is missing, cut short or changed since (its checksum does not match);
    the message names it. A run directory recovers from it where it can (its loop restarts
    from iteration 0)."""


class IdenticalPoliciesWarning(UserWarning):
    """Policies of one player are the same policy: their meta-game rows are equal, so they
    tie under every rater (e.g. checkpoints that were all one live view of a solver)."""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (empty if it has none), for one-line errors."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
