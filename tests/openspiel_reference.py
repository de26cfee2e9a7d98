"""OpenSpiel's alpha-Rank, importable where networkx (used only by its plots) is missing."""

import importlib
import sys
import types

_VISUALIZER = "open_spiel.python.egt.alpharank_visualizer"


def openspiel_alpharank():
    """The module ``open_spiel.python.egt.alpharank``.

    It imports its plotting module, which needs networkx; ``compute`` never plots, so when
    networkx is absent an empty stand-in for the plotting module is registered first.
    """
    try:
        importlib.import_module("networkx")
    except ImportError:
        sys.modules.setdefault(_VISUALIZER, types.ModuleType(_VISUALIZER))
    return importlib.import_module("open_spiel.python.egt.alpharank")
