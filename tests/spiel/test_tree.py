"""The sequence-form tree: terminals, chance weights, perfect recall, caching."""

import numpy as np
import pyspiel
import pytest

from metaeval import MetaEvalError, games
from metaeval.runs import budget
from metaeval.spiel import tree as tree_module
from metaeval.spiel.exact import realisation_plans
from metaeval.spiel.tree import EMPTY_SEQUENCE, game_tree

FORGETFUL_EFG = """EFG 2 R "forgetful" { "P1" "P2" }
p "" 1 1 "a" { "L" "R" } 0
p "" 1 2 "b" { "l" "r" } 0
t "" 1 "o1" { 1.0 -1.0 }
t "" 2 "o2" { 0.0 0.0 }
p "" 1 2 "b" { "l" "r" } 0
t "" 3 "o3" { 0.0 0.0 }
t "" 4 "o4" { 2.0 -2.0 }
"""

SOLO_EFG = """EFG 2 R "solo" { "P1" "P2" }
c "" 1 "c" { "x" 0.25 "y" 0.75 } 0
p "" 1 1 "a" { "L" "R" } 0
t "" 1 "o1" { 1.0 -1.0 }
t "" 2 "o2" { 0.0 3.0 }
p "" 1 2 "b" { "L" "R" } 0
t "" 3 "o3" { 0.5 0.0 }
t "" 4 "o4" { 2.0 -2.0 }
"""


def walk(state, chance=1.0):
    """Terminal (history, chance weight, returns) by a plain recursive walk."""
    if state.is_terminal():
        yield state.history(), chance, state.returns()
    elif state.is_chance_node():
        for action, p in state.chance_outcomes():
            yield from walk(state.child(action), chance * p)
    else:
        for action in state.legal_actions():
            yield from walk(state.child(action), chance)


@pytest.mark.parametrize(
    "name, terminals", [("kuhn_2p", 30), ("kuhn_3p", 312), ("kuhn_4p", 3960), ("leduc_2p", 5520), ("sheriff", 396)]
)
def test_terminals_match_a_plain_walk(name, terminals):
    game = games.load(name)
    tree = game_tree(game)
    reference = list(walk(game.new_initial_state()))
    assert tree.num_terminals == len(reference) == terminals
    # Same multiset of (chance, returns) rows, whatever the order.
    ours = np.column_stack([tree.chance, tree.returns])
    theirs = np.array([[c, *r] for _, c, r in reference])
    np.testing.assert_allclose(ours[np.lexsort(ours.T)], theirs[np.lexsort(theirs.T)], atol=1e-15)


@pytest.mark.parametrize("name", ["kuhn_3p", "leduc_2p", "sheriff", "goofspiel(num_cards=3,players=2)"])
def test_uniform_play_reaches_each_terminal_with_total_probability_one(name):
    tree = game_tree(name)
    probability = tree.chance.copy()
    for p, layout in enumerate(tree.players):
        uniform = layout.legal / layout.legal.sum(axis=1, keepdims=True)
        probability *= realisation_plans(tree, p, uniform[None])[tree.last_sequence[p], 0]
    assert probability.sum() == pytest.approx(1.0, abs=1e-12)


def test_layout_matches_openspiel_tabular_policy_keys_and_parents():
    tree = game_tree("kuhn_2p")
    layout = tree.players[1]
    assert sorted(layout.keys) == ["0b", "0p", "1b", "1p", "2b", "2p"]
    assert [len(level) for level in layout.levels] == [6]
    assert np.all(layout.parent == EMPTY_SEQUENCE)
    opener = tree.players[0]
    # "0pb" follows player 0's pass (action 0) at "0".
    row, parent_row = opener.template.state_lookup["0pb"], opener.template.state_lookup["0"]
    assert opener.parent[row] == parent_row * tree.num_actions + 0


def test_trees_are_cached_per_game_string():
    assert game_tree("kuhn_3p") is game_tree(games.load("kuhn_poker(players=3)"))


def test_imperfect_recall_is_refused(tmp_path):
    path = tmp_path / "forgetful.efg"
    path.write_text(FORGETFUL_EFG)
    with pytest.raises(MetaEvalError, match="lacks perfect recall for player 0.*sampled meta-game"):
        game_tree(f"efg_game(filename={path})")


def test_a_player_who_never_decides_has_an_empty_layout(tmp_path):
    path = tmp_path / "solo.efg"
    path.write_text(SOLO_EFG)
    tree = game_tree(f"efg_game(filename={path})")
    assert tree.players[1].legal.shape == (0, 2)
    assert np.all(tree.last_sequence[1] == EMPTY_SEQUENCE)
    np.testing.assert_allclose(sorted(tree.chance), [0.25, 0.25, 0.75, 0.75])


def test_too_many_terminals_is_a_clear_error(monkeypatch):
    with pytest.raises(MetaEvalError, match="about 3.4e\\+02 terminal histories, more than max_terminals=100"):
        game_tree("kuhn_3p", max_terminals=100)
    # the walk stops at the limit too, whatever the estimate said
    monkeypatch.setattr(tree_module, "estimate_terminals", lambda game, **_: (1.0, True))
    with pytest.raises(MetaEvalError, match="more than 100 terminal histories"):
        game_tree("kuhn_3p", max_terminals=100)


@pytest.mark.parametrize("game, count", [("kuhn_3p", 312), ("sheriff", 396), ("leduc_2p", 5520)])
def test_size_estimate_is_near_the_true_count(game, count):
    estimate, finished = tree_module.estimate_terminals(games.load(game))
    assert finished and 0.7 * count < estimate < 1.3 * count


def test_games_too_big_for_the_budget_are_refused_at_once(monkeypatch):
    """Chess used to grow at hundreds of MB a second; now its estimate is refused in milliseconds."""
    import time

    monkeypatch.delenv(budget.VARIABLE, raising=False)
    for name in ["chess", "kuhn_poker(players=9)"]:
        start = time.perf_counter()
        with pytest.raises(MetaEvalError, match="enumerating .* terminal histories.*over the memory budget of 4 GiB"):
            game_tree(name)
        assert time.perf_counter() - start < 10
    monkeypatch.setenv(budget.VARIABLE, "1K")
    with pytest.raises(MetaEvalError, match="over the memory budget of 1 KiB"):
        game_tree("leduc_2p")


def test_mean_field_games_are_refused():
    game = pyspiel.load_game("mfg_crowd_modelling")
    with pytest.raises(MetaEvalError, match="only sequential and simultaneous"):
        game_tree(game)


def test_a_game_whose_string_cannot_be_reloaded_is_refused():
    game = pyspiel.load_efg_game(pyspiel.get_sample_efg_data())  # its string is "efg_game()"
    with pytest.raises(MetaEvalError, match="cannot load game 'efg_game\\(\\)'"):
        game_tree(game)
