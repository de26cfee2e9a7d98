"""Sampled meta-games: convergence to the exact one, standard errors, shard independence."""

import numpy as np
import pytest

from metaeval import MetaEvalError, games
from metaeval.spiel import Population, exact_metagame, joint_seed, joint_seeds, sample_joints, sampled_metagame
from tests.spiel.references import HashPolicy


@pytest.mark.parametrize("name", ["kuhn_3p", "sheriff"])
def test_sampled_entries_lie_within_four_standard_errors_of_exact(name):
    pop = Population.random(name, 2, seed=5)
    sampled = sampled_metagame(name, pop, episodes=600, seed=1)
    exact = exact_metagame(name, pop)
    assert np.all(sampled.counts == 600)
    assert np.all(sampled.stderr > 0)
    z = np.abs(sampled.payoffs - exact.payoffs) / sampled.stderr
    assert z.max() < 4, z.max()
    assert sampled.strategy_names == exact.strategy_names and sampled.player_names == exact.player_names


def test_standard_error_shrinks_like_one_over_sqrt_episodes():
    game = games.load("kuhn_3p")
    pop = Population.random(game, 2, seed=0)
    joints = np.array([[0, 1, 1], [1, 0, 1]])
    seeds = joint_seeds(3, pop, joints)
    _, few, _ = sample_joints(game, pop.policies, joints, 400, seeds)
    _, many, counts = sample_joints(game, pop.policies, joints, 1600, seeds)
    assert np.all(counts == 1600)
    ratio = many / few  # expected 1/2
    assert np.all((ratio > 0.4) & (ratio < 0.6)), ratio


def test_results_do_not_depend_on_sharding_or_order():
    game = games.load("sheriff")
    pop = Population.random(game, 3, seed=0)
    joints = np.array(list(np.ndindex(*pop.sizes)))
    seeds = joint_seeds(7, pop, joints)
    whole = sample_joints(game, pop.policies, joints, 20, seeds)
    order = np.random.default_rng(0).permutation(len(joints))
    shards = [order[:4], order[4:]]
    for shard in shards:
        part = sample_joints(game, pop.policies, joints[shard], 20, joint_seeds(7, pop, joints[shard]))
        for full, piece in zip(whole, part):
            np.testing.assert_array_equal(full[shard], piece)


def test_joint_seeds_depend_on_run_seed_and_ids_only():
    pop = Population.random("kuhn_2p", 3, seed=0)
    moved = pop.replace_random(0, [0], seed=0)  # policy 0 of player 0 gets id 3
    seeds = joint_seeds(1, moved, [[0, 2], [1, 2]])
    assert seeds[0].spawn_key == (3, 2) and seeds[1].spawn_key == (1, 2)
    draw = lambda s: np.random.default_rng(s).integers(1 << 62)  # noqa: E731
    assert draw(seeds[1]) == draw(joint_seed(1, (1, 2)))
    assert draw(joint_seed(1, (1, 2))) != draw(joint_seed(2, (1, 2)))
    assert draw(joint_seed(1, (1, 2))) != draw(joint_seed(1, (2, 1)))


def test_same_seed_same_meta_game():
    pop = Population.random("kuhn_2p", 2, seed=0)
    first = sampled_metagame("kuhn_2p", pop, episodes=50, seed=4)
    np.testing.assert_array_equal(first.payoffs, sampled_metagame("kuhn_2p", pop, episodes=50, seed=4).payoffs)
    assert not np.array_equal(first.payoffs, sampled_metagame("kuhn_2p", pop, episodes=50, seed=5).payoffs)


def test_non_tabular_policies_and_simultaneous_games_are_sampled():
    game = games.load("goofspiel(num_cards=3,players=2)")
    pop = Population.random(game, 2, seed=0).replace(1, [1], [HashPolicy(game, "g")])
    sampled = sampled_metagame(game, pop, episodes=800, seed=0)
    exact = exact_metagame(game, pop)
    # A zero standard error (no randomness left) must mean an exact entry.
    assert np.all(np.abs(sampled.payoffs - exact.payoffs) <= 4 * sampled.stderr + 1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g, pop: sample_joints(g, pop.policies, [[0, 0]], 1, [0]), "episodes must be at least 2"),
        (lambda g, pop: sample_joints(g, pop.policies, [[0, 0]], 5, [0, 1]), "one seed per joint"),
        (lambda g, pop: sample_joints(g, pop.policies, [[0, 2]], 5, [0]), "within sizes \\[2, 2\\]"),
        (lambda g, pop: sample_joints(g, pop.policies[:1], [[0, 0]], 5, [0]), "has 2 players; got 1"),
        (lambda g, pop: sampled_metagame("kuhn_3p", pop, 5, 0), "population is for kuhn_poker\\(players=2\\)"),
        (lambda g, pop: joint_seeds(-3, pop, [[0, 0]]), "seed must be a non-negative int"),
        (lambda g, pop: sampled_metagame(g, pop, 5, None), "seed must be a non-negative int"),
        (lambda g, pop: joint_seed(0, (1, -2)), "policy ids must be non-negative"),
    ],
)
def test_bad_requests_are_rejected(call, message):
    game = games.load("kuhn_2p")
    with pytest.raises(MetaEvalError, match=message):
        call(game, Population.random(game, 2, seed=0))
