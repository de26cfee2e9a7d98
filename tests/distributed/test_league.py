"""A league of MLP policies grown one policy at a time on Ray actors, weights spilled to disk."""

import numpy as np

import metaeval
from metaeval.distributed import last_build
from metaeval.spiel.mlp import MLPPolicy
from metaeval.spiel.spill import WeightStore

EPISODES = 4


def grow(game, sizes, seed, store=None, workers=2):
    """A sampled Evaluator holding ``sizes`` MLP policies per player, built after each addition;
    returns it and the joints each build evaluated."""
    evaluator = metaeval.Evaluator(game, mode="sampled", episodes=EPISODES, seed=seed, workers=workers)
    evaluated = []
    for round_ in range(max(sizes)):
        for player, size in enumerate(sizes):
            if round_ < size:
                policy = MLPPolicy(game, player, seed=100 * player + round_)
                evaluator.add(player, policy if store is None else store.spill(policy))
                if min(evaluator.sizes):
                    evaluator.metagame()
                    evaluated.append((evaluator.sizes, last_build().evaluated, last_build().copied))
    return evaluator, evaluated


def test_adding_a_policy_evaluates_exactly_its_new_joints_on_ray(ray_session, tmp_path):
    store = WeightStore(tmp_path, budget=0)  # every opponent comes back from disk
    evaluator, evaluated = grow("leduc_poker", (3, 3), seed=1, store=store)
    for sizes, built, copied in evaluated[1:]:
        grew = 0 if sizes[0] > sizes[1] else 1  # the player who just got a policy
        assert built == sizes[1 - grew] and copied == np.prod(sizes) - built
    assert [e[0] for e in evaluated] == [(1, 1), (2, 1), (2, 2), (3, 2), (3, 3)]
    assert last_build().workers == 2
    assert np.all(evaluator.metagame().counts == EPISODES)


def test_a_three_player_league_evaluates_the_new_policy_against_every_opponent_pair(ray_session, tmp_path):
    game = "leduc_poker(players=3)"
    evaluator, _ = grow(game, (2, 2, 2), seed=0, store=WeightStore(tmp_path, budget=1 << 20))
    evaluator.add(1, MLPPolicy(game, 1, seed=9))
    evaluator.metagame()
    assert (last_build().evaluated, last_build().copied) == (2 * 2, 8)


def test_same_seed_same_metagame_and_spilling_changes_nothing(ray_session, tmp_path):
    spilled, _ = grow("leduc_poker", (3, 2), seed=4, store=WeightStore(tmp_path / "a", budget=0))
    again, _ = grow("leduc_poker", (3, 2), seed=4, store=WeightStore(tmp_path / "b", budget=0))
    held, _ = grow("leduc_poker", (3, 2), seed=4)
    other, _ = grow("leduc_poker", (3, 2), seed=5)
    first = spilled.metagame()
    for twin in (again.metagame(), held.metagame()):
        assert first.payoffs.tobytes() == twin.payoffs.tobytes()
        assert first.stderr.tobytes() == twin.stderr.tobytes()
    assert not np.array_equal(first.payoffs, other.metagame().payoffs)
