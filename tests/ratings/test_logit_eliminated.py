from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from metaeval import MetaEvalError
from metaeval.data.simulated import simulated_judge
from metaeval.ratings import logit, logit_eliminated
from metaeval.ratings.nash import well_scaled


@pytest.mark.parametrize("live", [None, [np.array([2, 0, 4]), np.array([5, 1, 0, 3])]])
def test_the_reduced_jacobian_is_the_derivative_of_the_reduced_equations(live):
    """Over every strategy, and over live subsets whose reference is not strategy 0."""
    payoffs = np.random.default_rng(0).uniform(-1, 1, size=(3, 5, 6, 9))
    sizes = [5, 6] if live is None else [len(own) for own in live]
    offsets = np.cumsum([0, *sizes])
    rng = np.random.default_rng(1)
    v = np.concatenate([np.log(rng.dirichlet(np.ones(k))) for k in sizes] + [[2.5]])
    equations = partial(logit_eliminated._equations, live=live)
    jacobian = equations(payoffs, v, offsets)[1][:-1]
    numeric = np.empty_like(jacobian)
    for i in range(len(v)):
        step = np.zeros_like(v)
        step[i] = 1e-6
        ahead = equations(payoffs, v + step, offsets, jacobian=False)[0]
        behind = equations(payoffs, v - step, offsets, jacobian=False)[0]
        numeric[:, i] = (ahead - behind) / 2e-6
    np.testing.assert_allclose(jacobian, numeric, rtol=0, atol=1e-8)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(sizes=st.tuples(st.integers(2, 4), st.integers(2, 4), st.integers(2, 9)), seed=st.integers(0, 10_000))
def test_ends_where_the_full_tracer_ends_on_random_games(sizes, seed):
    payoffs, _ = well_scaled(np.random.default_rng(seed).uniform(-1, 1, size=(3, *sizes)))
    full = logit.limiting_logit_equilibrium(payoffs)
    eliminated = logit_eliminated.limiting_logit_equilibrium(payoffs)
    assert logit.max_regret(payoffs, eliminated) <= 1e-6
    for x, y in zip(full, eliminated):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)


@pytest.mark.parametrize("last_unknowns", [8, 512])
@pytest.mark.parametrize("models, prompts, seed", [(4, 10, 0), (6, 25, 1), (9, 40, 2), (16, 200, 1)])
def test_ends_where_the_full_tracer_ends_on_king_of_the_hill_games(models, prompts, seed, last_unknowns, monkeypatch):
    """With the prompts substituted until 8 are live (most of the branch), and as unknowns
    from the start (512, where the full tracer's curve is followed with dead strategies out)."""
    monkeypatch.setattr(logit_eliminated, "LAST_UNKNOWNS", last_unknowns)
    payoffs, _ = well_scaled(simulated_judge(models, prompts, seed=seed).payoffs)
    full = logit.limiting_logit_equilibrium(payoffs)
    eliminated = logit_eliminated.limiting_logit_equilibrium(payoffs)
    assert logit.max_regret(payoffs, eliminated) <= 1e-12
    for x, y in zip(full, eliminated):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)


def test_a_64_model_2000_prompt_game_is_traced_in_few_steps_to_an_exact_equilibrium(monkeypatch):
    """The game of bench.scale_koth. The king's dropped models (log masses falling like
    -lambda x gap) bent the branch in its unknowns while the prompt mix still moved, so the
    steps shrank to 0.05% of lambda: past 2,000 steps at lambda = 2e6, and at 1,000 prompts
    5,305 steps to a stall. With them out of the unknowns it ends in about 540. Its point at
    max regret 1e-8 refines to max regret 9.6e-9 only; the branch followed on to 1e-9
    refines to an exact equilibrium."""
    monkeypatch.setattr(logit, "_MAX_STEPS", 1000)
    payoffs, _ = well_scaled(simulated_judge(64, 2000, seed=0).payoffs)
    reached = logit_eliminated.trace_eliminated_branch(payoffs, logit.TRACE_REGRET)
    assert logit.max_regret(payoffs, logit._refined(payoffs, reached, False)) > 1e-9
    strategies = logit_eliminated.limiting_logit_equilibrium(payoffs)
    assert logit.max_regret(payoffs, strategies) <= logit_eliminated.EXACT_REGRET
    assert [np.count_nonzero(x) for x in strategies] == [1, 2, 2]


def test_strategies_leave_and_return_to_the_unknowns_with_hysteresis():
    """Out below DEAD_GAP (60), back within REVIVED_GAP (50), in between unchanged; the
    largest log mass first, as the equations' reference; a step bringing an excluded
    strategy within RETURNING_GAP (40) is retried."""
    king = np.array([-61.0, -55.0, 0.0, -45.0, -55.0])  # strategies 3 and 4 out before
    rebel = np.array([0.0, -1.0])
    prompts = np.log(np.full(600, 1 / 600))
    live = [np.array([2, 0, 1]), np.array([0, 1])]
    updated = logit_eliminated._relive([king, rebel, prompts], live)
    assert [own.tolist() for own in updated] == [[2, 1, 3], [0, 1]]  # 600 prompts: still substituted
    assert logit_eliminated._relive([king[[2, 1, 3]], rebel, prompts], [np.arange(3), np.arange(2)]) is None
    few = np.log(np.full(4, 1 / 4))
    assert [own.tolist() for own in logit_eliminated._relive([king[[2, 1]], rebel, few], [np.arange(2)] * 2)] == \
        [[0, 1], [0, 1], [0, 1, 2, 3]]
    assert not logit_eliminated._returning([king, rebel], live)
    king[4] = -35.0
    assert logit_eliminated._returning([king, rebel], live)


def test_refuses_games_of_other_than_three_players():
    with pytest.raises(MetaEvalError, match="needs a 3-player game"):
        logit_eliminated.trace_eliminated_branch(np.zeros((2, 2, 2)), 1e-8)


def test_a_step_predicted_where_the_strategies_overflow_is_rejected():
    """Steps that double can predict a point so far off the branch that exp(y) overflows;
    that step is retried shorter instead of reaching the LU factorisation with NaNs."""
    payoffs, _ = well_scaled(np.random.default_rng(148).uniform(-1, 1, size=(3, 4, 4, 5)))
    strategies = logit_eliminated.limiting_logit_equilibrium(payoffs)
    assert logit.max_regret(payoffs, strategies) <= 1e-12
    for x, y in zip(logit.limiting_logit_equilibrium(payoffs), strategies):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)


def test_a_saturated_judge_refines_without_iterating_on_stalled_supports(monkeypatch):
    """A saturated judge (temperature 0.1) ties prompts in the prompt player's payoff: the
    refinement's equations on the supports read off are rank-deficient and Newton sits at a
    least-squares point. It gives up there (7 least-squares solves at 8 x 100, 200 when it
    iterated 50 times on each support) and selects the same equilibrium bit for bit."""
    payoffs = np.asarray(simulated_judge(8, 100, temperature=0.1, seed=0).payoffs)
    solves = []
    lstsq = np.linalg.lstsq
    monkeypatch.setattr(logit.np.linalg, "lstsq", lambda *a, **k: solves.append(1) or lstsq(*a, **k))
    found = logit_eliminated.limiting_logit_equilibrium(payoffs)
    assert len(solves) < 50
    assert logit.max_regret(payoffs, found) <= logit.STALLED_REGRET * np.ptp(payoffs)
    monkeypatch.setattr(logit, "STALLED_STEP", 0.0)  # never stalled: all 50 iterations
    iterated = logit_eliminated.limiting_logit_equilibrium(payoffs)
    for x, y in zip(found, iterated):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12)
