"""Meta-games captured from 300-iteration kuhn_3p runs on which a solver still fails.

Strict xfail: each test fails today and will turn into an error (XPASS) once fixed, so
that the fix moves the game to ``regression.GAMES``."""

import pytest

import metaeval
from metaeval.equilibria import mecce
from tests import regression


@pytest.mark.xfail(strict=True, raises=metaeval.MetaEvalError, reason="MECCE dual stalls at 5.6e-7")
def test_kuhn_seed5_mecce():
    mecce(regression.load("kuhn_3p_seed5_iteration92"))
