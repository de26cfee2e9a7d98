import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from metaeval import MetaEvalError
from metaeval.data.simulated import simulated_judge
from metaeval.ratings import logit, logit_eliminated
from metaeval.ratings.nash import well_scaled


def test_the_reduced_jacobian_is_the_derivative_of_the_reduced_equations():
    payoffs = np.random.default_rng(0).uniform(-1, 1, size=(3, 3, 4, 9))
    offsets = np.cumsum([0, 3, 4])
    rng = np.random.default_rng(1)
    v = np.concatenate([np.log(rng.dirichlet(np.ones(3))), np.log(rng.dirichlet(np.ones(4))), [2.5]])
    jacobian = logit_eliminated._equations(payoffs, v, offsets)[1][:-1]
    numeric = np.empty_like(jacobian)
    for i in range(len(v)):
        step = np.zeros_like(v)
        step[i] = 1e-6
        ahead = logit_eliminated._equations(payoffs, v + step, offsets, jacobian=False)[0]
        behind = logit_eliminated._equations(payoffs, v - step, offsets, jacobian=False)[0]
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


@pytest.mark.parametrize("models, prompts, seed", [(4, 10, 0), (6, 25, 1), (9, 40, 2)])
def test_ends_where_the_full_tracer_ends_on_king_of_the_hill_games(models, prompts, seed):
    payoffs, _ = well_scaled(simulated_judge(models, prompts, seed=seed).payoffs)
    full = logit.limiting_logit_equilibrium(payoffs)
    eliminated = logit_eliminated.limiting_logit_equilibrium(payoffs)
    assert logit.max_regret(payoffs, eliminated) <= 1e-12
    for x, y in zip(full, eliminated):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)


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
