"""Refining a league's sampled meta-game where its response graph is uncertain."""

import numpy as np
import pytest

import metaeval
from metaeval import games
from metaeval.distributed.refine import refine
from metaeval.errors import MetaEvalError
from metaeval.spiel.lockstep import play_episodes
from metaeval.spiel.mlp import MLPPolicy
from metaeval.spiel.sampled import joint_seed

GAME = "leduc_poker"


def league(size=3, workers=1, seed=2):
    evaluator = metaeval.Evaluator(GAME, mode="sampled", episodes=4, seed=seed, workers=workers)
    for i in range(size):
        for player in range(2):
            evaluator.add(player, MLPPolicy(GAME, player, seed=10 * player + i))
    return evaluator, evaluator.metagame()


def test_refined_entries_continue_each_joints_episodes_and_spend_the_budget():
    evaluator, pilot = league()
    refined = refine(GAME, evaluator.population, pilot, budget=40, rounds=3, seed=2)
    assert refined.counts.sum() == pilot.counts.sum() + 40
    assert np.all(refined.counts >= pilot.counts) and np.all(refined.counts % 2 == 0)
    game, population = games.load(GAME), evaluator.population
    for joint in np.ndindex(refined.counts.shape):
        policies = [population.policies[p][i] for p, i in enumerate(joint)]
        ids = [population.ids[p][i] for p, i in enumerate(joint)]
        returns = play_episodes(game, policies, joint_seed(2, ids), int(refined.counts[joint]))
        index = (slice(None), *joint)
        np.testing.assert_allclose(refined.payoffs[index], returns.mean(axis=0), rtol=0, atol=1e-12)
        stderr = returns.std(axis=0, ddof=1) / np.sqrt(len(returns))
        np.testing.assert_allclose(refined.stderr[index], stderr, rtol=1e-9, atol=1e-12)


def test_the_episodes_go_where_edges_are_uncertain():
    evaluator, pilot = league(size=4)
    stderr = np.full_like(pilot.stderr, 1e-9)  # every edge resolved but those of player 0's policy 0
    stderr[:, 0, :] = pilot.stderr[:, 0, :]
    sure = metaeval.MetaGame(pilot.payoffs, counts=pilot.counts, stderr=stderr)
    extra = refine(GAME, evaluator.population, sure, budget=400, rounds=1, seed=2).counts - pilot.counts
    assert extra.sum() == 400
    assert extra[0].mean() > 4 * extra[1:].mean()


def test_same_seed_same_refinement_on_ray_and_in_process(ray_session):
    evaluator, pilot = league(workers=2)
    on_ray = refine(GAME, evaluator.population, pilot, budget=24, rounds=2, seed=2, workers=2)
    local = refine(GAME, evaluator.population, pilot, budget=24, rounds=2, seed=2)
    assert on_ray.payoffs.tobytes() == local.payoffs.tobytes()
    assert np.array_equal(on_ray.counts, local.counts)


def test_bad_input_is_refused_in_one_line():
    evaluator, pilot = league(size=2)
    with pytest.raises(MetaEvalError, match="budget must be even"):
        refine(GAME, evaluator.population, pilot, budget=3)
    exact = metaeval.MetaGame(pilot.payoffs)
    with pytest.raises(MetaEvalError, match="needs a sampled meta-game"):
        refine(GAME, evaluator.population, exact, budget=2)
