"""The tracer's step control selects the equilibria recorded from the tracer before it."""

import warnings

import numpy as np
import pytest

from metaeval.ratings import logit, logit_mixed
from metaeval.ratings.logit import limiting_logit_equilibrium, max_regret
from metaeval.ratings.nash import well_scaled
from tests.ratings import tracer_corpus

RECORDED = np.load(tracer_corpus.RECORDED)


# Games with a continuum of equilibria (exact ties, or ties within 1e-9, below the trace's
# 1e-8 target): the refinement returns the point of the continuum nearest the traced end
# point, which moves with the lambda where the trace stops. The previous tracer itself,
# stopped at half its target regret, selected points up to 8.5e-7 away on these games.
CONTINUA = ("tied_", "nearly_tied_", "weakly_dominant_")


GAMES = tracer_corpus.games()
IDS = dict(ids=lambda value: value if isinstance(value, str) else "")


@pytest.mark.parametrize("name, payoffs, symmetric", GAMES, **IDS)
def test_selects_the_recorded_limiting_logit_equilibrium(name, payoffs, symmetric):
    assert_selects_the_recorded(name, payoffs, symmetric)


@pytest.mark.parametrize("name, payoffs, symmetric", [game for game in GAMES if game[1].ndim >= 4], **IDS)
def test_traced_in_mixed_precision_selects_the_recorded_equilibrium(monkeypatch, name, payoffs, symmetric):
    """Large games of 3 players or more are traced with float32 passes (logit_mixed): on
    the corpus, traced that way whatever its size, the same equilibria are selected."""
    monkeypatch.setattr(logit_mixed, "MIXED_SIZE", 0)
    traced = []
    monkeypatch.setattr(logit_mixed.MixedEquations, "__init__", spy(logit_mixed.MixedEquations.__init__, traced))
    assert_selects_the_recorded(name, payoffs, symmetric)
    assert traced


def spy(function, calls):
    def called(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)
    return called


def assert_selects_the_recorded(name, payoffs, symmetric):
    strategies = limiting_logit_equilibrium(payoffs, symmetric=symmetric)
    recorded = [RECORDED[f"{name}/{p}"] for p in range(len(payoffs))]
    assert max_regret(payoffs, strategies) <= max(max_regret(payoffs, recorded), 1e-13)  # Newton's 1e-14 residuals
    continuum = name.startswith(CONTINUA)
    for mine, theirs in zip(strategies, recorded):
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-6 if continuum else 1e-9)
        if continuum:  # the same face of the continuum
            np.testing.assert_array_equal(mine > 1e-12, theirs > 1e-12)


def test_the_corpus_holds_degenerate_games():
    names = [name for name, _, _ in tracer_corpus.games()]
    for family in ("uniform", "tied", "nearly_tied", "cloned", "weakly_dominant", "symmetric", "king_of_the_hill"):
        assert sum(name.startswith(family + "_") for name in names) >= 2


def test_steps_grow_by_at_most_the_acceleration_and_halve_on_rejection():
    assert logit.next_step(0.1, 0.01, True) == pytest.approx(0.1 * logit._MAX_ACCELERATION)
    assert logit.next_step(0.1, 100.0, True) == pytest.approx(0.1 / logit._MAX_ACCELERATION)
    assert logit.next_step(0.1, 0.8, True) == pytest.approx(0.125)
    assert logit.next_step(0.1, 0.01, False) == pytest.approx(0.05)
    assert logit.next_step(0.1, 0.01, True, near_end=True) == pytest.approx(0.1 * logit._END_ACCELERATION)


ROW = np.array([[0.38, 0.98, -0.82], [-0.67, 0.60, 0.27], [0.90, -0.27, -0.14]])


@pytest.mark.parametrize("symmetric", [False, True])
def test_the_trace_of_a_game_with_an_interior_equilibrium_reaches_its_target(symmetric):
    """The regret of a point off the branch by d is of order d where the equilibrium is
    interior: with steps doubling to the end the corrector's points stayed too far off the
    branch to reach 1e-8 on this symmetric game, and lambda ran to overflow. Near the end
    steps now grow by at most 1.1."""
    payoffs = well_scaled(np.stack([ROW, ROW.T]))[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = logit.trace_logit_branch(payoffs, logit.TRACE_REGRET, symmetric=symmetric)
    assert max_regret(payoffs, x) <= logit.TRACE_REGRET * np.ptp(payoffs)
    assert min(x[0]) > 0.28  # interior
    np.testing.assert_allclose(x[0], x[1], atol=1e-6)
