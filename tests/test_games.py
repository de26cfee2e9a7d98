"""Game presets: every preset loads with the parameters it promises; bad names fail clearly."""

import pytest

from metaeval import MetaEvalError, games


@pytest.mark.parametrize(
    "name, players, short_name",
    [
        ("kuhn_2p", 2, "kuhn_poker"),
        ("kuhn_3p", 3, "kuhn_poker"),
        ("kuhn_4p", 4, "kuhn_poker"),
        ("leduc_2p", 2, "leduc_poker"),
        ("leduc_3p", 3, "leduc_poker"),
        ("sheriff", 2, "sheriff"),
    ],
)
def test_presets_load_the_named_game(name, players, short_name):
    game = games.load(name)
    assert game.num_players() == players
    assert game.get_type().short_name == short_name
    assert name in games.names()


def test_sheriff_has_the_papers_parameters():
    params = games.load("sheriff").get_parameters()
    assert params == {
        "item_penalty": 1.0,
        "item_value": 5.0,
        "max_bribe": 2,
        "max_items": 10,
        "num_rounds": 2,
        "sheriff_penalty": 1.0,
    }
    assert isinstance(params["item_value"], float)


def test_any_openspiel_game_string_loads():
    game = games.load("goofspiel(num_cards=4,players=3)")
    assert game.num_players() == 3
    assert game.get_parameters()["num_cards"] == 4


def test_a_loaded_game_passes_through_and_its_string_round_trips():
    game = games.load("sheriff")
    assert games.load(game) is game
    assert str(games.load(str(game))) == str(game)


def test_unknown_name_lists_the_presets():
    with pytest.raises(MetaEvalError, match="unknown game 'kuhn_5p'.*kuhn_2p, kuhn_3p.*sheriff"):
        games.load("kuhn_5p")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("kuhn_poker(colour=1)", "Unknown parameter 'colour'"),
        ("sheriff(item_value=5)", "item_value"),
        ("kuhn_poker(players=3", "bracket"),
    ],
)
def test_bad_parameters_say_what_is_wrong_and_list_the_presets(name, reason):
    with pytest.raises(MetaEvalError, match=rf"cannot load game .*{reason}.*Presets: kuhn_2p"):
        games.load(name)


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_non_names_are_rejected(name):
    with pytest.raises(MetaEvalError, match="preset name or an OpenSpiel game string"):
        games.load(name)

