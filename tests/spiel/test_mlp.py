"""The MLP policy (metaeval.spiel.mlp): native batches, OpenSpiel's Policy interface, save/load, pickling."""

import pickle

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import expected_game_score

from metaeval import MetaEvalError, games
from metaeval.spiel import BatchedPolicy, Population, exact_metagame, game_tree, sample_joints, sampled_metagame
from metaeval.spiel.batched import DecisionBatch
from metaeval.spiel.mlp import MLPPolicy
from metaeval.spiel.snapshot import snapshot

HIDDEN = (16,)  # small: the tests check behaviour, not capacity


@pytest.fixture(scope="module")
def leduc():
    return games.load("leduc_poker")


def decision_states(game, count, player=0, seed=0):
    """Decision states of ``player`` reached by uniform play."""
    rng, states = np.random.default_rng(seed), []
    while len(states) < count:
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.current_player() == player:
                states.append(state.clone())
            outcomes = state.chance_outcomes() if state.is_chance_node() else None
            actions = [a for a, _ in outcomes] if outcomes else state.legal_actions()
            state.apply_action(actions[rng.integers(len(actions))])
    return states[:count]


def test_batch_answers_are_distributions_over_legal_actions_and_match_per_state(leduc):
    policy = MLPPolicy(leduc, 0, seed=1, hidden=HIDDEN)
    assert isinstance(policy, BatchedPolicy)
    batch = DecisionBatch(leduc, 0, decision_states(leduc, 50))
    probabilities = policy.batch_probabilities(batch.observations, batch.legal)
    assert probabilities.shape == (50, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(probabilities[~batch.legal] == 0) and np.all(probabilities[batch.legal] > 0)
    for row, state in enumerate(batch.states):
        answer = policy.action_probabilities(state)
        assert sorted(answer) == state.legal_actions()
        np.testing.assert_allclose([answer[a] for a in sorted(answer)], probabilities[row, sorted(answer)], rtol=1e-6)
    other = MLPPolicy(leduc, 0, seed=2, hidden=HIDDEN).batch_probabilities(batch.observations, batch.legal)
    assert np.abs(other - probabilities).max() > 1e-3  # the seed matters


def test_save_load_round_trip(leduc, tmp_path):
    policy = MLPPolicy(leduc, 1, seed=4, hidden=(8, 8))
    policy.save(tmp_path / "p.npz")
    loaded = MLPPolicy.load(tmp_path / "p.npz")
    assert (loaded.player, loaded.hidden, str(loaded.game)) == (1, (8, 8), str(leduc))
    batch = DecisionBatch(leduc, 1, decision_states(leduc, 40, player=1))
    np.testing.assert_array_equal(
        loaded.batch_probabilities(batch.observations, batch.legal),
        policy.batch_probabilities(batch.observations, batch.legal),
    )
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(MetaEvalError, match="is not a saved MLP policy"):
        MLPPolicy.load(tmp_path / "other.npz")


def test_pickled_policy_answers_the_same(leduc):
    policy = MLPPolicy(leduc, 0, seed=5, hidden=HIDDEN)
    states = decision_states(leduc, 10)
    before = [policy.action_probabilities(s) for s in states]  # device parameters now cached
    copy = pickle.loads(pickle.dumps(policy))
    assert [copy.action_probabilities(s) for s in states] == before


def test_openspiel_tools_accept_it_and_agree_with_the_sampled_and_exact_entries():
    game = games.load("kuhn_poker")
    policies = [[MLPPolicy(game, p, seed=p, hidden=HIDDEN)] for p in range(2)]
    population = Population(game, policies)
    value = expected_game_score.policy_value(game.new_initial_state(), [policies[0][0], policies[1][0]])
    exact = exact_metagame(game, population)
    np.testing.assert_allclose(exact.payoffs[:, 0, 0], value, atol=1e-6)
    sampled = sampled_metagame(game, population, episodes=2000, seed=0)
    assert np.all(np.abs(sampled.payoffs[:, 0, 0] - value) < 4 * sampled.stderr[:, 0, 0])


def test_lockstep_and_one_by_one_agree_with_neural_policies(leduc):
    policies = [[MLPPolicy(leduc, p, seed=3 + p, hidden=HIDDEN)] for p in range(2)]
    reference = sample_joints(leduc, policies, [[0, 0]], 60, [9], batch_size=None)
    for batch_size in (5, 64):
        for expected, value in zip(reference, sample_joints(leduc, policies, [[0, 0]], 60, [9], batch_size)):
            np.testing.assert_array_equal(value, expected)


def test_bad_player_is_rejected(leduc):
    with pytest.raises(MetaEvalError, match="player must be in 0..1, got 2"):
        MLPPolicy(leduc, 2)


def test_imitation_reproduces_a_tabular_policy_and_leaves_the_original_unchanged():
    game = games.load("kuhn_poker")
    target = Population.random(game, 1, seed=7).policies[0][0]
    states = list(target.states)  # every information state of player 0
    batch = DecisionBatch(game, 0, states)
    wanted = np.array([target.action_probabilities(s) for s in states])
    wanted = np.array([[row.get(a, 0.0) for a in range(2)] for row in wanted])
    policy = MLPPolicy(game, 0, seed=0, hidden=HIDDEN)
    before = policy.batch_probabilities(batch.observations, batch.legal)
    trained = policy.imitate(batch.observations, batch.legal, wanted, steps=400)
    np.testing.assert_array_equal(policy.batch_probabilities(batch.observations, batch.legal), before)
    assert np.abs(before - wanted).max() > 0.2
    assert np.abs(trained.batch_probabilities(batch.observations, batch.legal) - wanted).max() < 0.02


def test_parameters_are_read_only_copies(leduc):
    import jax

    params = MLPPolicy(leduc, 0, seed=1, hidden=HIDDEN).params
    given = jax.tree_util.tree_map(np.array, params)
    policy = MLPPolicy(leduc, 0, hidden=HIDDEN, params=given)
    given["Dense_0"]["kernel"][:] = 0.0  # the caller's arrays are not the policy's
    np.testing.assert_array_equal(policy.params["Dense_0"]["kernel"], params["Dense_0"]["kernel"])
    with pytest.raises(ValueError, match="read-only"):
        policy.params["Dense_0"]["kernel"][0, 0] = 1.0


def test_a_game_too_large_to_enumerate_is_sampled_without_walking_its_tree():
    game = games.load("goofspiel(num_cards=8,imp_info=True,players=2)")
    with pytest.raises(MetaEvalError, match="needs about"):
        game_tree(game)  # what exact mode would need first
    policies = [[MLPPolicy(game, p, seed=2 * p + i, hidden=HIDDEN) for i in range(2)] for p in range(2)]
    sampled = sampled_metagame(game, Population(game, policies), episodes=20, seed=0)
    assert sampled.payoffs.shape == (2, 2, 2) and np.all(sampled.counts == 20)
    assert np.all(np.abs(sampled.payoffs) <= 1) and np.all(sampled.stderr > 0)


def test_a_greedy_policy_plays_its_largest_legal_output_and_survives_a_round_trip(tmp_path):
    """``output="greedy"`` (action values, as DQN learns them): uniform over the legal actions
    of the largest output, illegal ones never chosen even when their output is larger."""
    game = pyspiel.load_game("kuhn_poker")
    policy = MLPPolicy(game, 0, seed=3, output="greedy")
    observations = np.random.default_rng(0).uniform(size=(64, game.information_state_tensor_size())).astype(np.float32)
    legal = np.ones((64, 2), dtype=bool)
    legal[::3, 0] = False
    answers = policy.batch_probabilities(observations, legal)
    softmax = MLPPolicy(game, 0, seed=3).batch_probabilities(observations, np.ones((64, 2), dtype=bool))
    best = np.where(legal, softmax, -1).argmax(axis=1)  # the softmax keeps the outputs' order
    np.testing.assert_array_equal(answers, np.eye(2)[best])
    policy.save(tmp_path / "greedy.npz")
    again = MLPPolicy.load(tmp_path / "greedy.npz")
    assert again.output == "greedy"
    np.testing.assert_array_equal(again.batch_probabilities(observations, legal), answers)
    with pytest.raises(MetaEvalError, match="output must be one of"):
        MLPPolicy(game, 0, output="argmax")


def test_a_snapshot_shares_the_read_only_weights_and_nothing_rebound_later_reaches_it(leduc):
    policy = MLPPolicy(leduc, 0, seed=1, hidden=HIDDEN)
    states = decision_states(leduc, 8)
    before = [policy.action_probabilities(state) for state in states]  # makes the device copy too
    copied = snapshot(policy)
    kernel = policy.params["Dense_0"]["kernel"]
    assert copied is not policy and copied.params["Dense_0"]["kernel"] is kernel  # no second copy
    assert copied._device_params is policy._device_params and copied.game is policy.game
    policy.params["Dense_0"]["kernel"] = np.zeros_like(kernel)  # rebound in the original only
    policy.params = {**policy.params, "Dense_1": None}
    policy._device_params = None
    assert copied.params["Dense_0"]["kernel"] is kernel and copied.params["Dense_1"] is not None
    assert [copied.action_probabilities(state) for state in states] == before
    writeable = MLPPolicy(leduc, 0, seed=1, hidden=HIDDEN)
    writeable.params = {"Dense_0": {"kernel": np.ones(3)}}  # set by hand: not read-only, so copied
    assert not np.shares_memory(snapshot(writeable).params["Dense_0"]["kernel"], writeable.params["Dense_0"]["kernel"])
