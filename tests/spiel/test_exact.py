"""Exact meta-games against pyspiel.expected_returns, joint subsets, incremental updates."""

import itertools

import numpy as np
import pytest
from open_spiel.python.algorithms import expected_game_score

from metaeval import MetaEvalError, MetaGame, games
from metaeval.spiel import ExactEvaluator, Population, exact_metagame, pyspiel_policies
from tests.spiel.references import HashPolicy, expected_returns


def mixed_population(name, size, seed):
    """Dirichlet policies with one deterministic and one uniform policy mixed in."""
    pop = Population.random(name, size, seed)
    pop = pop.replace_random(0, [0], seed, kind="deterministic")
    return pop.replace_random(pop.num_players - 1, [size - 1], seed, kind="uniform")


@pytest.mark.parametrize("name, size", [("kuhn_3p", 4), ("sheriff", 5), ("leduc_2p", 3), ("kuhn_4p", 3)])
def test_exact_metagame_equals_expected_returns(name, size):
    game = games.load(name)
    pop = mixed_population(name, size, seed=11)
    metagame = exact_metagame(game, pop)
    assert isinstance(metagame, MetaGame) and metagame.shape == pop.sizes
    policies = pyspiel_policies(pop)
    for joint in itertools.product(*(range(k) for k in pop.sizes)):
        np.testing.assert_allclose(
            metagame.payoffs[(slice(None), *joint)], expected_returns(game, policies, joint), rtol=0, atol=1e-9
        )


def test_simultaneous_move_games_are_exact_too():
    game = games.load("goofspiel(num_cards=3,players=2)")
    pop = Population.random(game, 3, seed=2)
    metagame = exact_metagame(game, pop)
    policies = pyspiel_policies(pop)
    for joint in itertools.product(range(3), range(3)):
        np.testing.assert_allclose(
            metagame.payoffs[:, joint[0], joint[1]], expected_returns(game, policies, joint), atol=1e-9
        )


def test_non_tabular_policies_are_evaluated_exactly():
    game = games.load("kuhn_3p")
    pop = Population.random(game, 2, seed=0).replace(1, [0], [HashPolicy(game, "a")])
    pop = pop.replace(2, [1], [HashPolicy(game, "b")])
    metagame = exact_metagame(game, pop)
    for joint in itertools.product(range(2), repeat=3):
        profile = [pop.policies[p][i] for p, i in enumerate(joint)]
        reference = expected_game_score.policy_value(game.new_initial_state(), profile)
        np.testing.assert_allclose(metagame.payoffs[(slice(None), *joint)], reference, atol=1e-12)


def test_names_come_from_ids_and_the_game():
    pop = Population.random("sheriff", 2, seed=0).replace_random(1, [0], seed=0)
    metagame = exact_metagame("sheriff", pop)
    assert metagame.strategy_names == (("policy 0", "policy 1"), ("policy 2", "policy 1"))
    assert metagame.player_names == ("sheriff player 0", "sheriff player 1")


@pytest.mark.parametrize("name", ["kuhn_3p", "sheriff"])
def test_payoffs_of_joint_subsets_equal_the_tensor(name):
    pop = Population.random(name, 4, seed=3)
    evaluator = ExactEvaluator(name)
    reaches = evaluator.population_reaches(pop)
    tensor = evaluator.payoffs(reaches)
    joints = np.random.default_rng(0).integers(0, 4, size=(17, pop.num_players))
    np.testing.assert_allclose(
        evaluator.payoffs(reaches, joints), tensor[(slice(None), *joints.T)].T, rtol=0, atol=1e-13
    )
    assert evaluator.payoffs(reaches, np.zeros((0, pop.num_players), dtype=int)).shape == (0, pop.num_players)


def test_reach_matrix_of_tables_equals_that_of_policies():
    pop = Population.random("leduc_2p", 3, seed=1)
    evaluator = ExactEvaluator("leduc_2p")
    from_policies = evaluator.reach_matrix(1, pop.policies[1])
    tables = np.stack([pi.action_probability_array for pi in pop.policies[1]])
    np.testing.assert_array_equal(evaluator.reach_matrix(1, tables), from_policies)
    assert from_policies.shape == (evaluator.tree.num_terminals, 3)


class CountingEvaluator(ExactEvaluator):
    """Counts the joints whose payoffs are contracted, to see what an update recomputes."""

    contracted = 0

    def _tensor(self, reaches):
        self.contracted += int(np.prod([r.shape[1] for r in reaches]))
        return super()._tensor(reaches)


@pytest.mark.parametrize("name", ["kuhn_3p", "sheriff"])
def test_incremental_update_recomputes_only_new_slices_and_is_exact(name):
    evaluator = CountingEvaluator(name)
    pop = Population.random(name, 6, seed=0)
    evaluator.metagame(pop)
    assert evaluator.contracted == 6**pop.num_players
    for step in range(3):
        for p in range(pop.num_players):
            pop = pop.replace_random(p, [step, (step + 2) % 6], seed=step)
        evaluator.contracted = 0
        updated = evaluator.metagame(pop).payoffs
        # Joints that involve at least one replaced policy: all minus the kept 4^N.
        assert evaluator.contracted == 6**pop.num_players - 4**pop.num_players
        np.testing.assert_allclose(updated, ExactEvaluator(name).metagame(pop).payoffs, rtol=0, atol=1e-13)


def test_an_evaluator_is_not_fooled_by_another_lineage_with_the_same_ids():
    evaluator = ExactEvaluator("kuhn_3p")
    first, second = Population.random("kuhn_3p", 3, seed=0), Population.random("kuhn_3p", 3, seed=1)
    evaluator.metagame(first)
    assert first.ids == second.ids
    np.testing.assert_allclose(
        evaluator.metagame(second).payoffs, ExactEvaluator("kuhn_3p").metagame(second).payoffs, atol=1e-13
    )


def test_unchanged_population_costs_no_contraction():
    evaluator = CountingEvaluator("kuhn_3p")
    pop = Population.random("kuhn_3p", 3, seed=0)
    first = evaluator.metagame(pop).payoffs
    evaluator.contracted = 0
    np.testing.assert_array_equal(evaluator.metagame(pop).payoffs, first)
    assert evaluator.contracted == 0


def test_mismatched_inputs_are_rejected():
    evaluator = ExactEvaluator("kuhn_3p")
    pop = Population.random("kuhn_2p", 2, seed=0)
    with pytest.raises(MetaEvalError, match="population is for kuhn_poker\\(players=2\\), the evaluator for"):
        evaluator.metagame(pop)
    with pytest.raises(MetaEvalError, match="evaluator is for kuhn_poker\\(players=3\\), not sheriff"):
        exact_metagame("sheriff", Population.random("sheriff", 2, seed=0), evaluator)
    with pytest.raises(MetaEvalError, match="no player 3"):
        evaluator.reach_matrix(3, [])
    reaches = evaluator.population_reaches(Population.random("kuhn_3p", 2, seed=0))
    with pytest.raises(MetaEvalError, match="need 3 reach matrices, got 2"):
        evaluator.payoffs(reaches[:2])
    with pytest.raises(MetaEvalError, match="reach matrix of player 1 must be \\[312, K>0\\]"):
        evaluator.payoffs([reaches[0], reaches[1][:5], reaches[2]])
    with pytest.raises(MetaEvalError, match="joints must index policies within sizes \\[2, 2, 2\\]"):
        evaluator.payoffs(reaches, [[0, 0, 2]])
    with pytest.raises(MetaEvalError, match="joints must be an int array \\[M, 3\\]"):
        evaluator.payoffs(reaches, [[0.0, 1.0, 0.0]])
