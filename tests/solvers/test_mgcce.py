import numpy as np
import pytest
from open_spiel.python.algorithms import jpsro

import metaeval
from metaeval.solvers.equilibria import deviation_gains
from metaeval.solvers.mgcce import mgcce


@pytest.mark.parametrize("seed", range(4))
def test_mgcce_is_openspiels_maximum_gini_cce(seed):
    rng = np.random.default_rng(seed)
    shape = (3, 3, 2) if seed % 2 else (4, 3)
    game = metaeval.MetaGame(rng.uniform(-1, 1, size=(len(shape), *shape)))
    ours = mgcce(game)
    theirs, _ = jpsro._mgcce(game.payoffs, [np.ones(k, dtype=int) for k in shape], ignore_repeats=True)
    np.testing.assert_allclose(ours, theirs, atol=2e-5)
    assert max(g.max() for g in deviation_gains(game, ours)) <= 1e-7  # a CCE
    # the objective OpenSpiel maximises is no higher at its own solution
    assert 1 - np.sum(ours**2) >= 1 - np.sum(theirs**2) - 1e-6


def test_mgcce_of_rock_paper_scissors_is_uniform():
    rps = metaeval.MetaGame.from_matrix([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    np.testing.assert_allclose(mgcce(rps), np.full((3, 3), 1 / 9), atol=1e-8)
