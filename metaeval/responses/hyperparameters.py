"""The one check of a neural learner's hyper-parameters, and its optimiser, shared by DQN and PPO."""

from __future__ import annotations

from metaeval.errors import MetaEvalError


def adam(learning_rate: float = 1e-3):
    """Adam (optax) with its learning rate held in the optimiser state
    (``optax.inject_hyperparams``): an update compiled once serves every rate, as PBT's
    members, each with a rate of its own, need."""
    import optax

    return optax.inject_hyperparams(optax.adam)(learning_rate=learning_rate)


def check_hyperparameters(learner, in_range: dict[str, bool], counts: tuple[str, ...]) -> None:
    """Normalise ``learner.hidden`` to a tuple of ints and refuse, in one line naming the
    learner and the setting, a value outside its range (``in_range[name]`` false) or a
    count below 1."""
    object.__setattr__(learner, "hidden", tuple(int(width) for width in learner.hidden))
    kind = type(learner).__name__
    for name, ok in in_range.items():
        if not ok:
            raise MetaEvalError(f"{kind}'s {name} is out of range: {getattr(learner, name)!r}")
    for name in counts:
        if int(getattr(learner, name)) < 1:
            raise MetaEvalError(f"{kind}'s {name} must be a positive int, got {getattr(learner, name)!r}")
