"""Maximum-entropy duals of a batch of stored systems in lock-step (metaeval.solvers.mecce_batch)."""

import numpy as np

from metaeval import MetaGame
from metaeval.solvers.equilibria import cce_constraint_stack, cce_constraints
from metaeval.solvers.mecce import max_entropy, max_entropy_from, scaled_matrix
from metaeval.solvers.mecce_batch import has_linear_directions, max_entropy_batch


def scaled_stack(payoffs):
    matrices = cce_constraint_stack(payoffs)
    return matrices / np.abs(matrices).max(axis=(1, 2))[:, None, None]


def noisy_stack(shape, count, seed=0):
    rng = np.random.default_rng(seed)
    game = rng.uniform(-1, 1, (len(shape), *shape))
    return game, game + 0.1 * rng.standard_normal((count, *game.shape))


def test_each_system_s_sigma_is_its_own_maximum_entropy_cce():
    game, stack = noisy_stack((4, 5, 3), 6)
    start = max_entropy_from(scaled_matrix(cce_constraints(MetaGame(game))), np.zeros(12))[1]
    sigma, certified = max_entropy_batch(scaled_stack(stack), np.tile(start, (6, 1)))
    assert certified.all()
    for drawn, found in zip(stack, sigma):
        np.testing.assert_allclose(found, max_entropy(cce_constraints(MetaGame(drawn))).distribution,
                                   rtol=0, atol=1e-11)


def test_systems_stop_at_their_own_step():
    """One system already at its optimum and one started from zero finish in the same batch."""
    _, stack = noisy_stack((3, 3, 3), 2, seed=1)
    matrices = scaled_stack(stack)
    optimum = max_entropy_from(scaled_matrix(cce_constraints(MetaGame(stack[0]))), np.zeros(9))[1]
    sigma, certified = max_entropy_batch(matrices, np.stack([optimum, np.zeros(9)]))
    assert certified.all()
    for drawn, found in zip(stack, sigma):
        np.testing.assert_allclose(found, max_entropy(cce_constraints(MetaGame(drawn))).distribution,
                                   rtol=0, atol=1e-11)


def test_a_system_whose_mecce_leaves_joints_out_is_uncertified_alone():
    """Strategy 0 strictly dominates for every player: the only CCE is that joint, the
    multipliers diverge; the other system of the batch is still solved."""
    _, stack = noisy_stack((3, 3, 3), 2, seed=2)
    stack[1, 0, 1:] = stack[1, 0, :1] - 1.0
    stack[1, 1, :, 1:] = stack[1, 1, :, :1] - 1.0
    stack[1, 2, :, :, 1:] = stack[1, 2, :, :, :1] - 1.0
    assert (max_entropy(cce_constraints(MetaGame(stack[1]))).distribution > 0).sum() == 1
    sigma, certified = max_entropy_batch(scaled_stack(stack), np.zeros((2, 9)))
    assert certified.tolist() == [True, False]
    np.testing.assert_allclose(sigma[0], max_entropy(cce_constraints(MetaGame(stack[0]))).distribution,
                               rtol=0, atol=1e-11)


def test_linear_directions_are_found_on_clones_and_one_strategy_players():
    game, _ = noisy_stack((3, 4, 2), 1)
    assert not has_linear_directions(scaled_stack(game[None])[0])
    cloned = np.concatenate([game, game[:, :, :1]], axis=2)  # player 1's strategy 0 twice
    assert has_linear_directions(scaled_stack(cloned[None])[0])
    assert has_linear_directions(scaled_stack(game[None, :, :1])[0])


def test_a_batch_with_a_singular_free_block_is_left_uncertified():
    """Cloned rows make the free block of the Hessian singular: the batch is reported
    uncertified (to be solved system by system) rather than wrong."""
    game, _ = noisy_stack((3, 4, 2), 1, seed=3)
    cloned = np.concatenate([game, game[:, :, :1]], axis=2)
    stack = np.stack([cloned, cloned])
    sigma, certified = max_entropy_batch(scaled_stack(stack), np.ones((2, 10)))
    assert not certified.any()
