import numpy as np
import pytest

from metaeval import MetaEvalError, spiel
from metaeval.training.mutation import perturb_policy, perturb_values
from metaeval.spiel.policies import check_table, random_table


@pytest.fixture(scope="module")
def layout():
    return spiel.game_tree("kuhn_3p").players[1]


@pytest.mark.parametrize("kind", ["dirichlet", "deterministic"])
def test_perturbed_policies_are_valid_seeded_and_near_their_parent(layout, kind):
    parent = random_table(layout, np.random.default_rng(0), kind)
    child = perturb_policy(layout, parent, np.random.default_rng(1), scale=0.25)
    check_table(layout, child)  # raises unless a distribution over legal actions everywhere
    np.testing.assert_array_equal(child, perturb_policy(layout, parent, np.random.default_rng(1), scale=0.25))
    assert not np.array_equal(child, perturb_policy(layout, parent, np.random.default_rng(2), scale=0.25))
    assert 0 < np.abs(child - parent).max() <= 0.25 + 1e-12  # a convex step of size 0.25
    np.testing.assert_array_equal(perturb_policy(layout, parent, np.random.default_rng(1), scale=0.0), parent)
    np.testing.assert_allclose(perturb_policy(layout, parent, np.random.default_rng(1), scale=1.0),
                               random_table(layout, np.random.default_rng(1)))


def test_perturbed_values_keep_illegal_entries_and_have_the_documented_spread(layout):
    rng = np.random.default_rng(0)
    values = np.where(layout.legal, rng.uniform(-2, 2, layout.legal.shape), 0.0)
    spread = np.abs(values[layout.legal]).max()
    noise = np.concatenate([
        (perturb_values(layout, values, np.random.default_rng(s), scale=0.1) - values)[layout.legal]
        for s in range(200)
    ])
    assert np.std(noise) == pytest.approx(0.1 * spread, rel=0.05)
    child = perturb_values(layout, values, np.random.default_rng(5), scale=0.1)
    np.testing.assert_array_equal(child[~layout.legal], values[~layout.legal])
    np.testing.assert_array_equal(child, perturb_values(layout, values, np.random.default_rng(5), scale=0.1))
    # An all-zero table (a learner that has not trained) gets unit-scale noise.
    fresh = perturb_values(layout, np.zeros(layout.legal.shape), np.random.default_rng(5), scale=0.1)
    assert 0.05 < np.std(fresh[layout.legal]) < 0.2


def test_bad_scales_and_tables_are_refused(layout):
    table = random_table(layout, np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="scale"):
        perturb_policy(layout, table, np.random.default_rng(0), scale=1.5)
    with pytest.raises(MetaEvalError, match="does not sum to 1"):
        perturb_policy(layout, table * 2, np.random.default_rng(0))
    with pytest.raises(MetaEvalError, match="finite"):
        perturb_values(layout, np.full(layout.legal.shape, np.nan), np.random.default_rng(0))
