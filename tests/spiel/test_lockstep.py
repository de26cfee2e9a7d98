"""Lock-step episodes (metaeval.spiel.lockstep) and the batched policy protocol (metaeval.spiel.batched)."""

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib

from metaeval import MetaEvalError, games
from metaeval.spiel import CallablePolicy, Population, sample_joints, sampled_metagame
from metaeval.spiel.batched import TensorReader, observation_kind
from metaeval.spiel.lockstep import DRAWS_PER_BLOCK, EPISODES_PER_GENERATOR, Uniforms, draw_actions, draw_index
from tests.spiel.references import HashPolicy


class UniformBatched:
    """A natively batched policy (NumPy): uniform over the legal actions; records its batch sizes."""

    def __init__(self, fail=False):
        self.sizes, self.fail = [], fail

    def batch_probabilities(self, observations, legal):
        self.sizes.append(len(observations))
        if self.fail:
            raise RuntimeError("this policy failed on purpose\nsecond line")
        return legal / legal.sum(axis=1, keepdims=True)


def first_legal(state, player):
    """A plain callable policy: always the smallest legal action."""
    return {state.legal_actions(player)[0]: 1.0}


def mixed_population(game):
    """Tabular, non-tabular OpenSpiel, plain-callable and natively batched policies."""
    population = Population.random(game, 2, seed=3)
    extra = [HashPolicy(game, "h"), CallablePolicy(first_legal, game, [1])]
    return population.replace(1, [0, 1], extra), [[UniformBatched()] for _ in range(game.num_players())]


@pytest.mark.parametrize("name", ["kuhn_3p", "leduc_poker", "goofspiel(num_cards=3,players=2)"])
def test_lockstep_gives_the_one_by_one_entries_for_any_batch_size(name):
    game = games.load(name)
    population, batched = mixed_population(game)
    policies = [list(player) + extra for player, extra in zip(population.policies, batched)]
    joints = np.array(list(np.ndindex(*[len(p) for p in policies])))
    seeds = list(range(len(joints)))
    reference = sample_joints(game, policies, joints, 90, seeds, batch_size=None)
    assert np.count_nonzero(reference[1]) > reference[1].size // 2  # mostly random entries, not constants
    for batch_size in (1, 7, 64, 4096):
        got = sample_joints(game, policies, joints, 90, seeds, batch_size=batch_size)
        for expected, value in zip(reference, got):
            np.testing.assert_array_equal(value, expected)


def test_sampled_metagame_is_the_same_for_every_batch_size():
    game = games.load("kuhn_3p")
    population = Population.random(game, 2, seed=0)
    reference = sampled_metagame(game, population, episodes=40, seed=2, batch_size=None)
    for batch_size in (3, 1000):
        got = sampled_metagame(game, population, episodes=40, seed=2, batch_size=batch_size)
        np.testing.assert_array_equal(got.payoffs, reference.payoffs)
        np.testing.assert_array_equal(got.stderr, reference.stderr)


def test_each_policy_is_asked_once_per_step_for_the_whole_batch():
    game = games.load("kuhn_poker")  # player 0 acts at most twice, player 1 once
    policies = [UniformBatched(), UniformBatched()]
    sample_joints(game, [[policies[0]], [policies[1]]], [[0, 0]], 500, [0], batch_size=500)
    assert policies[0].sizes[0] == 500 and policies[1].sizes == [500]
    assert len(policies[0].sizes) == 2 and 0 < policies[0].sizes[1] < 500  # pass-bet only


def test_uniforms_depend_on_the_episode_and_draw_only():
    seed = np.random.SeedSequence(4, spawn_key=(1, 2))
    picked = [3, EPISODES_PER_GENERATOR + 5]
    whole, part = Uniforms(seed, np.arange(2 * EPISODES_PER_GENERATOR)), Uniforms(seed, picked)
    draws = 2 * DRAWS_PER_BLOCK + 3  # past two block refills
    for _ in range(draws):
        whole.take(np.arange(len(whole)))
        part.take(np.arange(2))
    np.testing.assert_array_equal(part.values[:, :draws], whole.values[picked, :draws])
    assert len(np.unique(whole.values[:, :draws])) == whole.values[:, :draws].size


def test_draws_follow_the_inverse_cdf_and_never_pick_an_impossible_action():
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(5), size=200) * (rng.random((200, 5)) < 0.6)
    probabilities[probabilities.sum(axis=1) == 0, 0] = 1.0
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    u = rng.random(200)
    u[:20] = np.nextafter(1.0, 0.0)  # u * total may round up to the total
    actions = draw_actions(probabilities, u)
    cumulative = np.cumsum(probabilities, axis=1)
    for row, (action, value) in enumerate(zip(actions, u)):
        assert action == draw_index(probabilities[row], value)
        assert probabilities[row, action] > 0
        target = value * cumulative[row, -1]
        if target < cumulative[row, -1]:
            assert (cumulative[row, action - 1] if action else 0.0) <= target < cumulative[row, action]
        else:  # rounded up to the total: the last possible action
            assert action == np.flatnonzero(probabilities[row])[-1]
    frequencies = np.bincount(draw_actions(np.tile([0.2, 0.0, 0.8], (20000, 1)), rng.random(20000)), minlength=3)
    assert frequencies[1] == 0 and abs(frequencies[0] / 20000 - 0.2) < 0.02


class RaisingPolicy(policy_lib.Policy):
    """A per-state OpenSpiel policy that raises on its first call, counting calls."""

    calls = 0

    def action_probabilities(self, state, player_id=None):
        RaisingPolicy.calls += 1
        raise ValueError("no such state\nmore detail")


@pytest.mark.parametrize("batch_size", [None, 64])
@pytest.mark.parametrize("native", [True, False])
def test_a_failing_policy_fails_at_once_in_one_line(native, batch_size):
    game = games.load("kuhn_poker")
    failing = UniformBatched(fail=True) if native else RaisingPolicy(game, [1])
    RaisingPolicy.calls = 0
    policies = [[UniformBatched()], [UniformBatched(), failing]]
    error = "RuntimeError: this policy failed on purpose" if native else "ValueError: no such state"
    with pytest.raises(MetaEvalError, match=rf"^joint \(0, 1\): the policy of player 1 failed: {error}$"):
        sample_joints(game, policies, [[0, 0], [0, 1]], 100, [0, 1], batch_size=batch_size)
    assert (len(failing.sizes) if native else RaisingPolicy.calls) == 1


class SilentBatched(UniformBatched):
    def batch_probabilities(self, observations, legal):
        return None


def test_answers_that_are_not_distributions_over_legal_actions_are_rejected():
    game = games.load("leduc_poker")  # 3 actions; fold is illegal at the first decision
    with pytest.raises(MetaEvalError, match=r"^joint \(0, 0\): the policy of player 0 failed: "
                                            r"expected probabilities of shape \(\d+, 3\), got \(\)$"):
        sample_joints(game, [[SilentBatched()], [UniformBatched()]], [[0, 0]], 10, [0])
    uniform_all = lambda state, player: {a: 1 / 3 for a in range(3)}  # noqa: E731
    with pytest.raises(MetaEvalError, match=r"the policy puts mass on illegal action\(s\) \[0\]"):
        sample_joints(game, [[uniform_all], [UniformBatched()]], [[0, 0]], 10, [0])


class ConstantBatched(UniformBatched):
    """Answers every row with the same (bad) probabilities."""

    def __init__(self, row):
        super().__init__()
        self.row = row

    def batch_probabilities(self, observations, legal):
        return np.tile(self.row, (len(legal), 1))


@pytest.mark.parametrize("row, problem", [
    ([np.nan, 0.5, 0.5], "are not finite"),
    ([0.0, np.inf, 0.0], "are not finite"),
    ([0.0, -0.5, 1.5], "are negative"),
    ([0.2, 0.4, 0.4], "put mass on an illegal action"),
    ([0.0, 0.5, 0.4], "do not sum to 1"),
])
def test_each_way_an_answer_is_not_a_distribution_is_named(row, problem):
    game = games.load("leduc_poker")  # fold (action 0) is illegal at the first decision
    message = rf"^joint \(0, 0\): the policy of player 0 failed: action probabilities {problem}$"
    with pytest.raises(MetaEvalError, match=message):
        sample_joints(game, [[ConstantBatched(row)], [UniformBatched()]], [[0, 0]], 10, [0])


def test_batch_size_must_be_a_positive_int():
    game = games.load("kuhn_poker")
    with pytest.raises(MetaEvalError, match="batch_size must be a positive int, got 0"):
        sample_joints(game, [[UniformBatched()], [UniformBatched()]], [[0, 0]], 10, [0], batch_size=0)


@pytest.mark.parametrize("name", ["kuhn_3p", "goofspiel(num_cards=4,imp_info=True,players=2)", "oware"])
def test_tensor_reader_gives_the_states_own_tensors(name):
    game = games.load(name)
    kind = observation_kind(game)
    assert kind == ("observation" if name == "oware" else "information_state")
    rng, states = np.random.default_rng(0), []
    state = game.new_initial_state()
    while len(states) < 30:
        if state.is_terminal():
            state = game.new_initial_state()
        elif state.is_chance_node():
            outcomes = state.chance_outcomes()
            state.apply_action(outcomes[rng.integers(len(outcomes))][0])
        else:
            states.append(state.clone())
            players = range(game.num_players()) if state.is_simultaneous_node() else [state.current_player()]
            actions = [rng.choice(state.legal_actions(p)) for p in players]
            state.apply_actions(actions) if state.is_simultaneous_node() else state.apply_action(actions[0])
    player = 1
    expected = [getattr(s, f"{kind}_tensor")(player) for s in states]
    np.testing.assert_array_equal(TensorReader(game).read(states, player), np.array(expected, dtype=np.float32))


def test_a_tabular_policy_missing_a_state_fails_in_one_line():
    game = games.load("kuhn_poker")
    policy = Population.random(game, 1, seed=0).policies[0][0]
    partial = policy_lib.TabularPolicy(game, players=[0])
    partial.state_lookup = {key: row for key, row in policy.state_lookup.items() if not key.startswith("2")}
    with pytest.raises(MetaEvalError, match=r"^joint \(0, 0\): the policy of player 0 failed: KeyError: '2'$"):
        sample_joints(game, [[partial], [UniformBatched()]], [[0, 0]], 50, [0])


def test_a_node_no_policy_can_play_is_refused_in_one_line():
    game = games.load("mfg_crowd_modelling")  # mean-field nodes have player id -5
    with pytest.raises(MetaEvalError, match=r"^joint \(0,\): mfg_crowd_modelling\(\): cannot play a node of "
                                            r"player id -5 \(e.g. mean-field games\)$"):
        sample_joints(game, [[UniformBatched()]], [[0]], 4, [0])
