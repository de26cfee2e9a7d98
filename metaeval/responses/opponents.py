"""The opponents a learner trains against: a distribution over the other players' policies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metaeval.training import matchmaking
from metaeval.errors import MetaEvalError


@dataclass(frozen=True)
class Opponents:
    """A distribution over opponent profiles: ``profiles[j][q]`` is the policy (an OpenSpiel
    policy or an ``[S, A]`` table on the player's layout) of player q in profile j (the
    learner's own entry is ignored), drawn with ``probabilities[j]``."""

    profiles: tuple[tuple, ...]
    probabilities: np.ndarray

    def __post_init__(self):
        probabilities = np.asarray(self.probabilities, dtype=np.float64)
        if len(self.profiles) == 0 or probabilities.shape != (len(self.profiles),):
            raise MetaEvalError(
                f"opponents need one probability per profile; got {len(self.profiles)} profiles "
                f"and probabilities of shape {probabilities.shape}"
            )
        if not np.all(np.isfinite(probabilities)) or np.any(probabilities < 0) or abs(probabilities.sum() - 1) > 1e-9:
            raise MetaEvalError("opponent probabilities must be finite, non-negative and sum to 1")
        object.__setattr__(self, "profiles", tuple(tuple(p) for p in self.profiles))
        object.__setattr__(self, "probabilities", probabilities)

    @classmethod
    def from_distribution(cls, policies, player: int, distribution) -> Opponents:
        """The profiles in the support of a matchmaking distribution over ``policies`` (one
        list per player, of policies or ``[S, A]`` policy tables, e.g. a population's
        ``policies``); the distribution's shape is their sizes without ``player``'s (see
        [`metaeval.training.matchmaking`][metaeval.training.matchmaking]).

        Args:
            policies: the population's policies (or tables), one list per player.
            player: the player who trains.
            distribution: the distribution over the other players' joint profiles.

        Returns:
            The opponents.
        """
        distribution = np.asarray(distribution, dtype=np.float64)
        expected = matchmaking.opponent_shape([len(member) for member in policies], player)
        if distribution.shape != expected:
            raise MetaEvalError(f"an opponent distribution for player {player} has shape {expected}, "
                                f"got {distribution.shape}")
        joints, probabilities = matchmaking.profiles(distribution, player)
        profiles = [tuple(None if q == player else policies[q][i] for q, i in enumerate(joint))
                    for joint in joints]
        return cls(profiles, probabilities / probabilities.sum())
