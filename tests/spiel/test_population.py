"""Populations: stable ids, replacement, and exact save/load round trips."""

import json

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib

from metaeval import MetaEvalError, games
from metaeval.spiel import Population, exact_metagame
from metaeval.spiel.population import policy_rng
from tests.spiel.references import HashPolicy


def tables(population):
    return [[np.asarray(pi.action_probability_array) for pi in player] for player in population.policies]


def test_random_population_shape_ids_and_names():
    pop = Population.random("kuhn_3p", size=(2, 3, 4), seed=0)
    assert pop.num_players == 3 and pop.sizes == (2, 3, 4)
    assert pop.ids == ((0, 1), (0, 1, 2), (0, 1, 2, 3)) and pop.next_ids == (2, 3, 4)
    assert pop.game_string == "kuhn_poker(players=3)"
    assert pop.strategy_names()[2] == ["policy 0", "policy 1", "policy 2", "policy 3"]
    assert pop.player_names() == ["kuhn_poker player 0", "kuhn_poker player 1", "kuhn_poker player 2"]
    assert isinstance(pop.policies[1][2], policy_lib.TabularPolicy)


def test_random_population_is_reproducible_and_policies_differ():
    first, again = Population.random("sheriff", 3, seed=4), Population.random("sheriff", 3, seed=4)
    for a, b in zip(tables(first), tables(again)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    other = Population.random("sheriff", 3, seed=5)
    assert not np.allclose(tables(first)[0][0], tables(other)[0][0])
    assert not np.allclose(tables(first)[0][0], tables(first)[0][1])


def test_a_policy_depends_on_seed_player_and_id_only():
    small, large = Population.random("kuhn_3p", 2, seed=9), Population.random("kuhn_3p", 5, seed=9)
    np.testing.assert_array_equal(tables(small)[1][1], tables(large)[1][1])
    layout_draw = policy_rng(9, 1, 1).standard_exponential(small.policies[1][1].legal_actions_mask.shape)
    weights = layout_draw * small.policies[1][1].legal_actions_mask
    np.testing.assert_array_equal(tables(small)[1][1], weights / weights.sum(axis=1, keepdims=True))


def test_replace_gives_fresh_ids_that_are_never_reused():
    pop = Population.random("kuhn_3p", 4, seed=0)
    once = pop.replace_random(1, [0, 2], seed=0)
    twice = once.replace_random(1, [0], seed=0)
    assert once.ids[1] == (4, 1, 5, 3) and twice.ids[1] == (6, 1, 5, 3)
    assert twice.next_ids == (4, 7, 4)
    # Untouched policies are the very same objects, other players untouched.
    assert once.policies[1][1] is pop.policies[1][1] and once.policies[0] == pop.policies[0]
    assert pop.ids[1] == (0, 1, 2, 3)  # the original population is unchanged
    # New random policies are new, and reproducible from (seed, player, id).
    assert not np.allclose(tables(once)[1][0], tables(pop)[1][0])
    np.testing.assert_array_equal(tables(once)[1][0], tables(pop.replace_random(1, [0, 2], seed=0))[1][0])


def test_replace_with_given_policies():
    pop = Population.random("kuhn_2p", 2, seed=0)
    game = games.load("kuhn_2p")
    mixed = pop.replace(0, [1], [HashPolicy(game, "a")])
    assert isinstance(mixed.policies[0][1], HashPolicy) and mixed.ids[0] == (0, 2)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: p.replace(3, [0], [None]), "no player 3"),
        (lambda p: p.replace(0, [0, 1], [p.policies[0][0]]), "2 indices but 1 policies"),
        (lambda p: p.replace(0, [1, 1], [p.policies[0][0]] * 2), "repeated index"),
        (lambda p: p.replace(0, [5], [p.policies[0][0]]), "no index \\[5\\]"),
        (lambda p: p.replace_random(0, [0], seed=-1), "seed must be a non-negative int"),
        (lambda p: p.replace_random(0, [0], seed=None), "seed must be a non-negative int"),
        (lambda p: p.replace_random(0, [0], seed=0, kind="best"), "unknown policy kind"),
    ],
)
def test_bad_replacements_are_rejected(call, message):
    with pytest.raises(MetaEvalError, match=message):
        call(Population.random("kuhn_2p", 2, seed=0))


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda g, pi: Population(g, [[pi]]), "has 2 players; got 1 policy lists"),
        (lambda g, pi: Population(g, [[pi], []]), "player 1 has an empty population"),
        (lambda g, pi: Population(g, [[pi], ["policy"]]), "expected OpenSpiel policies, got str"),
        (lambda g, pi: Population(g, [[pi], [pi]], ids=[[0], [0, 1]]), "ids have sizes"),
        (lambda g, pi: Population(g, [[pi, pi], [pi]], ids=[[3, 3], [0]]), "distinct non-negative"),
        (lambda g, pi: Population(g, [[pi], [pi]], ids=[[4], [0]], next_ids=[4, 1]), "must exceed every used id"),
        (lambda g, pi: Population.random(g, 0, seed=0), "size must be a positive int"),
        (lambda g, pi: Population.random(g, (2, 2, 2), seed=0), "size must be a positive int or 2"),
    ],
)
def test_bad_populations_are_rejected(build, message):
    game = games.load("kuhn_2p")
    with pytest.raises(MetaEvalError, match=message):
        build(game, policy_lib.UniformRandomPolicy(game))


@pytest.mark.parametrize("name", ["kuhn_3p", "sheriff", "leduc_2p"])
def test_save_load_round_trips_exactly(tmp_path, name):
    pop = Population.random(name, 3, seed=1).replace_random(0, [1], seed=2)
    path = pop.save(tmp_path / "pop.npz")
    back = Population.load(path)
    assert back.game_string == pop.game_string
    assert back.ids == pop.ids and back.next_ids == pop.next_ids
    for a, b in zip(tables(pop), tables(back)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(
        exact_metagame(name, back).payoffs, exact_metagame(name, pop).payoffs
    )


def test_non_tabular_policies_are_saved_as_their_tables(tmp_path):
    game = games.load("kuhn_2p")
    pop = Population.random(game, 2, seed=0).replace(1, [0], [HashPolicy(game, "s")])
    back = Population.load(pop.save(tmp_path / "pop.npz"))
    assert isinstance(back.policies[1][0], policy_lib.TabularPolicy)
    np.testing.assert_array_equal(exact_metagame(game, back).payoffs, exact_metagame(game, pop).payoffs)


def test_corrupt_files_are_rejected(tmp_path):
    path = tmp_path / "broken.npz"
    path.write_bytes(b"PK\x03\x04 definitely not a zip archive")
    with pytest.raises(MetaEvalError, match="cannot read a population from"):
        Population.load(path)
    with pytest.raises(MetaEvalError, match="cannot read a population from"):
        Population.load(tmp_path / "missing.npz")


def test_files_of_another_kind_are_rejected(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, payoffs=np.zeros((2, 2, 2)))
    with pytest.raises(MetaEvalError, match="cannot read a population from"):
        Population.load(path)
    np.savez(path, header=np.array(json.dumps({"format": "something/else"})))
    with pytest.raises(MetaEvalError, match="is not a population file"):
        Population.load(path)


def _rewrite(path, **changes):
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    header = json.loads(str(arrays.pop("header")))
    for key, value in changes.items():
        if key in header:
            header[key] = value
        elif value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    np.savez(path, header=np.array(json.dumps(header)), **arrays)


def test_mismatched_files_are_rejected(tmp_path):
    path = Population.random("kuhn_2p", 2, seed=0).save(tmp_path / "pop.npz")
    # Claims another game: the information states do not match.
    _rewrite(path, game="kuhn_poker(players=3)")
    with pytest.raises(MetaEvalError, match="information states do not match those of kuhn_poker\\(players=3\\)"):
        Population.load(path)

    path = Population.random("kuhn_2p", 2, seed=0).save(tmp_path / "pop.npz")
    _rewrite(path, tables_1=None)
    with pytest.raises(MetaEvalError, match="lacks array 'tables_1' for player 1"):
        Population.load(path)

    path = Population.random("kuhn_2p", 2, seed=0).save(tmp_path / "pop.npz")
    _rewrite(path, tables_0=np.full((2, 6, 2), 0.7))
    with pytest.raises(MetaEvalError, match="does not sum to 1"):
        Population.load(path)

    path = Population.random("kuhn_2p", 2, seed=0).save(tmp_path / "pop.npz")
    _rewrite(path, ids_0=np.array([0, 1, 2]))
    with pytest.raises(MetaEvalError, match="player 0 has 3 ids for tables"):
        Population.load(path)

    path = Population.random("kuhn_2p", 2, seed=0).save(tmp_path / "pop.npz")
    _rewrite(path, game="no_such_game")
    with pytest.raises(MetaEvalError, match="unknown game 'no_such_game'"):
        Population.load(path)
