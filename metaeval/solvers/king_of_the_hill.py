"""The structure of king-of-the-hill games (Liu et al. 2025, section 3) and what it buys.

Players (king, rebel, prompt), joints (k, r, p); U the judge's preference for k over r:

    u_king = U, antisymmetric in (k, r) with U(k, k, p) = 0,
    u_rebel = -U off the diagonal and -1 on it,   u_prompt = |U|.

What the raters exploit, with M models and P prompts (M^2 P joints; 8.2M at 64 x 2,000):

- The prompt player's payoff is a function of the prompt and the pair. Its deviation gains
  depend on sigma only through the (king, rebel) marginal, and on the logit branch its
  strategy is an explicit softmax of its payoffs against the models' mix. So the max-
  entropy CCE binds few prompt deviations (solved by constraint generation,
  metaeval.solvers.mecce_rows) and the LLE is traced in the models' 2M + 1 unknowns
  (metaeval.ratings.logit_eliminated), both without a joint-by-constraint matrix.
- Copies of a prompt (the prompt-copying attack) pay every player alike, so de-cloning
  them (metaeval.ratings.affinity.decloned) is exact and the affinity-target ratings
  do not move.
- Deviation ratings need no structured path: the first LP of Algorithm 1 binds few
  deviations and joints, and on its optimal face most gains are constant
  (metaeval.solvers.cce_first_round, metaeval.solvers.cce_face).
- The antisymmetry is what makes a game recognisable as one ([`is_king_of_the_hill`][metaeval.solvers.king_of_the_hill.is_king_of_the_hill]);
  the solvers above need only the prompt player's large strategy set, not the rest.
"""

from __future__ import annotations

import numpy as np

from metaeval.game import MetaGame

#: Payoffs equal to within this fraction of the largest |payoff| count as equal.
STRUCTURE_RTOL = 1e-12
#: Above this many joints the raters take the structured paths (below it the full solvers
#: are as fast: 64 x 64 x 100 rates in seconds either way).
STRUCTURED_JOINTS = 1 << 20


def is_king_of_the_hill(game: MetaGame) -> bool:
    """Whether ``game`` has the king-of-the-hill structure of the module docstring (to
    STRUCTURE_RTOL of its largest |payoff|).

    Args:
        game: the meta-game.

    Returns:
        Whether it has that structure.
    """
    if game.num_players != 3 or game.shape[0] != game.shape[1]:
        return False
    king, rebel, prompt = game.payoffs
    atol = STRUCTURE_RTOL * max(float(np.abs(game.payoffs).max()), np.finfo(float).tiny)
    diagonal = np.eye(game.shape[0], dtype=bool)[:, :, None]
    return bool(
        np.allclose(king, -king.transpose(1, 0, 2), rtol=0, atol=atol)
        and np.allclose(rebel, np.where(diagonal, -1.0, -king), rtol=0, atol=atol)
        and np.allclose(prompt, np.abs(king), rtol=0, atol=atol)
    )


def structured(game: MetaGame) -> bool:
    """Whether the raters rate ``game`` by the structured paths: a king-of-the-hill game
    of more than STRUCTURED_JOINTS joints.

    Args:
        game: the meta-game.

    Returns:
        Whether the structured paths apply.
    """
    return game.num_joints > STRUCTURED_JOINTS and is_king_of_the_hill(game)
