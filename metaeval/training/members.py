"""PBT members: a learner with its hyper-parameters and what it has learned (Jaderberg et al. 2017).

A [`Member`][metaeval.training.members.Member] is a learner (a frozen dataclass of hyper-parameters, e.g.
[`metaeval.responses.PPO`][metaeval.responses.ppo.PPO]) and its ``values`` (a Q-table, or network weights).
PBT's *exploit* copies a better member; its *explore* perturbs the copy (section 3 of the paper):

- a neural member (``dqn``, ``ppo``) keeps the copied weights and multiplies each of its
  `EXPLORED` hyper-parameters by ``1 - scale`` or ``1 + scale``, drawn evenly (the
  paper's "perturb", 0.8 or 1.2 at ``scale=0.2``); the first population draws each from
  ``[x / 2, 2 x]`` log-uniformly around the learner's setting ``x`` (the paper's random
  initial hyper-parameters);
- a tabular member (``qlearning``) keeps its hyper-parameters and adds Gaussian noise to the
  copied values ([`metaeval.training.mutation.perturb_values`][metaeval.training.mutation.perturb_values]); the first population
  perturbs all-zero tables.

The optimiser's state is not part of a member: every training step starts Adam afresh from
the member's weights (the learners' ``train`` takes weights, not optimiser state).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from metaeval.errors import DamagedFileError
from metaeval.runs.fileio import atomic_savez, read_arrays
from metaeval.training.mutation import perturb_values

EXPLORED = {"DQN": ("learning_rate",), "PPO": ("learning_rate", "entropy_coef")}
"""The hyper-parameters explore perturbs, by learner class (none for Q-learning)."""


@dataclasses.dataclass(frozen=True)
class Member:
    """One member of a player's population: ``learner`` and the ``values`` it trains."""

    learner: object
    values: object

    def policy(self, game, player: int):
        """The member's policy (the Evaluator snapshots it when added).

        Args:
            game: the game.
            player: the member's player.

        Returns:
            The policy.
        """
        return self.learner.policy(game, player, self.values)

    def hyperparameters(self) -> dict:
        """The learner's settings, JSON-ready (``type(learner)(**settings)`` rebuilds it).

        Returns:
            The settings by name.
        """
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(self.learner).items()}


def first(learner, game, player: int, rng: np.random.Generator, scale: float, layout=None) -> Member:
    """A member of the first population (``layout``: the player's table layout, tabular learners).

    Args:
        learner: the member's learner.
        game: the game.
        player: the member's player.
        rng: the generator of the perturbations and initial values.
        scale: the perturbation's scale.
        layout: the player's table layout.

    Returns:
        The member.
    """
    explored = EXPLORED.get(type(learner).__name__, ())
    if not explored:
        return Member(learner, perturb_values(layout, learner.initial_values(game, player), rng, scale))
    factors = np.exp(rng.uniform(-np.log(2), np.log(2), size=len(explored)))
    changed = {name: float(getattr(learner, name) * factor) for name, factor in zip(explored, factors)}
    return Member(dataclasses.replace(learner, **changed), learner.initial_values(game, player, rng))


def exploit_and_explore(parent: Member, rng: np.random.Generator, scale: float, layout=None) -> Member:
    """A perturbed copy of ``parent``: its values (noisy, for a tabular member) and its
    hyper-parameters (perturbed, for a neural one).

    Args:
        parent: the member copied.
        rng: the generator of the perturbation.
        scale: the perturbation's scale.
        layout: the player's table layout (tabular members).

    Returns:
        The new member.
    """
    explored = EXPLORED.get(type(parent.learner).__name__, ())
    if not explored:
        return Member(parent.learner, perturb_values(layout, parent.values, rng, scale))
    factors = np.where(rng.random(len(explored)) < 0.5, 1 - scale, 1 + scale)
    changed = {name: float(getattr(parent.learner, name) * factor) for name, factor in zip(explored, factors)}
    return Member(dataclasses.replace(parent.learner, **changed), copy.deepcopy(parent.values))


def save(path, members: list[list[Member]]) -> None:
    """Write every member's values (``members[p][i]``) to one ``.npz``, atomically.

    Args:
        path: the ``.npz`` file to write.
        members: the members, per player.
    """
    from flax.traverse_util import flatten_dict

    nested = {str(p): {str(i): m.values for i, m in enumerate(player)} for p, player in enumerate(members)}
    atomic_savez(path, **{"/".join(key): value for key, value in flatten_dict(nested).items()})


def load(path, learners: list[list]) -> list[list[Member]]:
    """The members [`save`][metaeval.training.members.save] wrote, with ``learners[p][i]`` as their learners.

    Args:
        path: the file [`save`][metaeval.training.members.save] wrote.
        learners: the members' learners, per player.

    Returns:
        The members, per player.
    """
    from flax.traverse_util import unflatten_dict

    arrays = read_arrays(path, "the members' values")
    nested = unflatten_dict({tuple(name.split("/")): value for name, value in arrays.items()})
    missing = [f"{p}/{i}" for p, player in enumerate(learners) for i in range(len(player))
               if str(i) not in nested.get(str(p), {})]
    if missing:
        raise DamagedFileError(f"{path} lacks the values of member(s) {', '.join(missing)}")
    return [[Member(learner, nested[str(p)][str(i)]) for i, learner in enumerate(player)]
            for p, player in enumerate(learners)]
