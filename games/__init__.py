"""Named game presets: OpenSpiel games by short name, or any OpenSpiel game string.

Examples:
    >>> from metaeval import games
    >>> games.names()
    ['kuhn_2p', 'kuhn_3p', 'kuhn_4p', 'leduc_2p', 'leduc_3p', 'sheriff']
    >>> games.load("kuhn_3p")
    kuhn_poker(players=3)
    >>> games.load("goofspiel(num_cards=4,players=3)")
    goofspiel(num_cards=4,players=3)
"""

from __future__ import annotations

import pyspiel

from metaeval.errors import MetaEvalError

#: Preset name -> OpenSpiel game string. ``sheriff`` uses the parameters of
#: Marris et al. 2025, appendix C.1 (floats typed as floats, as OpenSpiel wants).
PRESETS: dict[str, str] = {
    "kuhn_2p": "kuhn_poker(players=2)",
    "kuhn_3p": "kuhn_poker(players=3)",
    "kuhn_4p": "kuhn_poker(players=4)",
    "leduc_2p": "leduc_poker(players=2)",
    "leduc_3p": "leduc_poker(players=3)",
    "sheriff": (
        "sheriff(item_penalty=1.0,item_value=5.0,max_bribe=2,max_items=10,"
        "num_rounds=2,sheriff_penalty=1.0)"
    ),
}


def names() -> list[str]:
    """The preset names.

    Returns:
        The names [`load`][metaeval.games.load] accepts besides OpenSpiel game strings, sorted.
    """
    return sorted(PRESETS)


def load(name) -> pyspiel.Game:
    """The game called ``name``: a preset, any OpenSpiel game string, or a ``pyspiel.Game``.

    Args:
        name: a preset name (see [`names`][metaeval.games.names]), an OpenSpiel game string
            such as ``"goofspiel(num_cards=4,players=3)"``, or a loaded ``pyspiel.Game``.

    Returns:
        The loaded game (``name`` itself when it is already a ``pyspiel.Game``).

    Raises:
        MetaEvalError: unknown game or bad parameters; the message lists the presets.
    """
    if isinstance(name, pyspiel.Game):
        return name
    if not isinstance(name, str) or not name.strip():
        raise MetaEvalError(f"a game is a preset name or an OpenSpiel game string, not {name!r}")
    game_string = PRESETS.get(name.strip(), name.strip())
    hint = (
        f"Presets: {', '.join(names())}; or an OpenSpiel game string such as "
        "'goofspiel(num_cards=4,players=3)' (names in pyspiel.registered_names())"
    )
    short_name = game_string.split("(", 1)[0].strip()
    if short_name not in pyspiel.registered_names():
        raise MetaEvalError(f"unknown game {name!r}. {hint}")
    try:
        return pyspiel.load_game(game_string)
    except pyspiel.SpielError as exc:
        reason = str(exc).strip().rstrip(".")
        raise MetaEvalError(f"cannot load game {name!r}: {reason}. {hint}") from None
