"""Random tabular policies and the conversion of any OpenSpiel policy to a table."""

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from scipy import stats

from metaeval import Evaluator, MetaEvalError, games
from metaeval.spiel import CallablePolicy, Population, sampled_metagame
from metaeval.spiel.policies import (
    check_table,
    policy_table,
    pyspiel_policies,
    random_policy,
    random_table,
    tabular_policy,
)
from metaeval.spiel.tree import game_tree
from tests.spiel.references import HashPolicy


@pytest.mark.parametrize("kind", ["dirichlet", "uniform", "deterministic"])
@pytest.mark.parametrize("name", ["kuhn_3p", "leduc_2p", "sheriff"])
def test_random_tables_are_distributions_over_legal_actions(name, kind):
    layout = game_tree(name).players[0]
    table = random_table(layout, np.random.default_rng(0), kind)
    assert np.all(table[~layout.legal] == 0)
    np.testing.assert_allclose(table.sum(axis=1), 1.0, atol=1e-12)
    if kind == "uniform":
        np.testing.assert_allclose(table, layout.legal / layout.legal.sum(axis=1, keepdims=True))
    if kind == "deterministic":
        assert set(np.unique(table)) <= {0.0, 1.0}


def test_dirichlet_one_marginals_are_beta_one_n_minus_one():
    """Dirichlet(1) over n legal actions has Beta(1, n-1) marginals; check by KS test."""
    layout = game_tree("sheriff").players[0]
    rng = np.random.default_rng(7)
    draws = np.stack([random_table(layout, rng) for _ in range(300)])  # [draws, S, A]
    for n in np.unique(layout.legal.sum(axis=1)):
        rows = np.flatnonzero(layout.legal.sum(axis=1) == n)
        first_legal = layout.legal[rows].argmax(axis=1)
        sample = draws[:, rows, first_legal].ravel()
        assert stats.kstest(sample, stats.beta(1, n - 1).cdf).pvalue > 1e-3, n


def test_deterministic_policies_pick_each_legal_action_equally_often():
    layout = game_tree("sheriff").players[1]
    rng = np.random.default_rng(3)
    counts = sum(random_table(layout, rng, "deterministic") for _ in range(400))
    rows = layout.legal.sum(axis=1) == 2
    # 400 draws per row, two legal actions: a fair coin.
    assert stats.binomtest(int(counts[rows][:, 0].sum()), int(400 * rows.sum())).pvalue > 1e-3


def test_random_policies_are_reproducible_and_seed_dependent():
    game = games.load("kuhn_3p")
    first = random_policy(game, 1, np.random.default_rng(5))
    again = random_policy(game, 1, np.random.default_rng(5))
    other = random_policy(game, 1, np.random.default_rng(6))
    np.testing.assert_array_equal(first.action_probability_array, again.action_probability_array)
    assert not np.allclose(first.action_probability_array, other.action_probability_array)


def test_unknown_kind_is_rejected():
    with pytest.raises(MetaEvalError, match="unknown policy kind 'greedy'.*dirichlet, uniform, deterministic"):
        random_table(game_tree("kuhn_2p").players[0], np.random.default_rng(0), "greedy")


def test_random_policies_are_read_only_openspiel_policies():
    game = games.load("kuhn_3p")
    pi = random_policy(game, 2, np.random.default_rng(0))
    state = game.new_initial_state()
    for action in (0, 1, 2):
        state.apply_action(action)
    state.apply_action(0)
    state.apply_action(0)  # player 2 to act
    probabilities = pi.action_probabilities(state, 2)
    assert set(probabilities) == {0, 1} and sum(probabilities.values()) == pytest.approx(1)
    with pytest.raises(ValueError, match="read-only"):
        pi.policy_for_key(state.information_state_string(2))[:] = [1.0, 0.0]


def test_tables_of_other_layouts_and_non_tabular_policies():
    game = games.load("leduc_2p")
    layout = game_tree(game).players[1]
    # A TabularPolicy over all players, built by OpenSpiel itself, in its own row order.
    full = policy_lib.TabularPolicy(game)
    weights = np.random.default_rng(1).random(full.legal_actions_mask.shape) * full.legal_actions_mask
    full.action_probability_array = weights / weights.sum(axis=1, keepdims=True)
    expected = np.array([full.policy_for_key(key) for key in layout.keys])
    np.testing.assert_array_equal(policy_table(layout, full, 1), expected)
    # The same policy as pyspiel.TabularPolicy and as an opaque callable policy.
    np.testing.assert_allclose(
        policy_table(layout, policy_lib.python_policy_to_pyspiel_policy(full), 1), expected, atol=1e-15
    )
    hashed = HashPolicy(game, "x")
    table = policy_table(layout, hashed, 1)
    for row, state in enumerate(layout.template.states):
        for action, p in hashed.action_probabilities(state, 1).items():
            assert table[row, action] == p


def test_a_tabular_policy_of_another_game_is_rejected():
    layout = game_tree("kuhn_3p").players[0]
    other = policy_lib.TabularPolicy(games.load("kuhn_2p"))
    with pytest.raises(MetaEvalError, match=r"no entry for \d+ of its 16 information states"):
        policy_table(layout, other, 0)


def test_non_policies_are_rejected():
    layout = game_tree("kuhn_2p").players[0]
    with pytest.raises(MetaEvalError, match="expected an OpenSpiel policy.*got dict"):
        policy_table(layout, {"0": [0.5, 0.5]}, 0)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t[:-1], "does not fit the game's layout"),
        (lambda t: np.where(t > 0, np.nan, t), "is not finite at information state"),
        (lambda t: t * np.array([-1.0, 2.0]), "has a negative probability"),
        (lambda t: t * 0.9, "does not sum to 1"),
    ],
)
def test_bad_tables_are_rejected_with_the_state(edit, message):
    layout = game_tree("kuhn_2p").players[0]
    table = layout.legal / layout.legal.sum(axis=1, keepdims=True)
    with pytest.raises(MetaEvalError, match=message):
        tabular_policy(layout, edit(table))


def test_mass_on_an_illegal_action_is_rejected():
    layout = game_tree("leduc_2p").players[0]
    table = layout.legal / layout.legal.sum(axis=1, keepdims=True)
    row = int(np.flatnonzero(~layout.legal.all(axis=1))[0])
    illegal = int(np.flatnonzero(~layout.legal[row])[0])
    table[row] *= 0.5
    table[row, illegal] = 0.5
    with pytest.raises(MetaEvalError, match="illegal action") as error:
        check_table(layout, table, 0)
    assert str(error.value).endswith(f"information state {layout.keys[row]!r}")


def test_pyspiel_policies_are_accepted():
    layout = game_tree("kuhn_2p").players[0]
    uniform = pyspiel.UniformRandomPolicy(games.load("kuhn_2p"))
    np.testing.assert_allclose(policy_table(layout, uniform, 0), 0.5)


def test_pyspiel_policies_of_a_population_act_like_its_policies():
    game = games.load("kuhn_3p")
    uniform = pyspiel.UniformRandomPolicy(game)
    population = Population.random(game, 2, seed=0).replace(1, [0], [HashPolicy(game, "x")])
    population = population.replace(2, [1], [uniform])
    converted = pyspiel_policies(population)
    assert [len(player) for player in converted] == [2, 2, 2]
    assert converted[2][1] is uniform
    for p, layout in enumerate(game_tree(game).players):
        for original, policy in zip(population.policies[p], converted[p]):
            assert isinstance(policy, pyspiel.Policy)
            for state in layout.template.states:
                if isinstance(original, pyspiel.Policy):
                    want = original.action_probabilities(state)
                else:
                    want = original.action_probabilities(state, p)
                got = dict(policy.action_probabilities(state))
                assert got.keys() == want.keys()
                np.testing.assert_allclose([got[a] for a in want], list(want.values()), rtol=0, atol=1e-15)


def shifted_first_action(state, player):
    """Mass 1 on a key 0.7 above the lowest legal action: no action at all."""
    return {state.legal_actions(player)[0] + 0.7: 1.0}


class KeyedFirstAction(policy_lib.Policy):
    """The lowest legal action, under a key made by ``key_type`` (float, numpy int, ...)."""

    def __init__(self, game, key_type):
        super().__init__(game, list(range(game.num_players())))
        self.key_type = key_type

    def action_probabilities(self, state, player_id=None):
        return {self.key_type(state.legal_actions(player_id)[0]): 1.0}


@pytest.mark.parametrize("mode, batch_size", [("exact", None), ("sampled", 1024), ("sampled", None)])
def test_an_action_key_that_is_no_integer_is_refused_not_truncated(mode, batch_size):
    game = games.load("kuhn_2p")
    shifted = CallablePolicy(shifted_first_action)
    with pytest.raises(MetaEvalError, match=r"CallablePolicy\(shifted_first_action\) gives action 0.7 at '\d' "
                                            r"\(player 0\); actions must be integers$"):
        if mode == "exact":
            Evaluator(game, mode="exact").add(0, shifted)
        else:
            uniform = policy_lib.UniformRandomPolicy(game)
            sampled_metagame(game, Population(game, [[shifted], [uniform]]), 10, 0, batch_size=batch_size)
    with pytest.raises(MetaEvalError, match=r"KeyedFirstAction gives action 0.5 at"):
        policy_table(game_tree(game).players[1], KeyedFirstAction(game, lambda a: a + 0.5), 1)


@pytest.mark.parametrize("key_type", [float, np.float32, np.int64, np.int8])
def test_integral_float_and_numpy_integer_action_keys_are_their_actions(key_type):
    game = games.load("kuhn_2p")
    keyed = Population(game, [[KeyedFirstAction(game, key_type)], [KeyedFirstAction(game, key_type)]])
    plain = Population(game, [[KeyedFirstAction(game, int)], [KeyedFirstAction(game, int)]])
    for batch_size in (1024, None):
        np.testing.assert_array_equal(sampled_metagame(game, keyed, 50, 0, batch_size=batch_size).payoffs,
                                      sampled_metagame(game, plain, 50, 0, batch_size=batch_size).payoffs)
    layout = game_tree(game).players[0]
    np.testing.assert_array_equal(policy_table(layout, KeyedFirstAction(game, key_type), 0),
                                  policy_table(layout, KeyedFirstAction(game, int), 0))
