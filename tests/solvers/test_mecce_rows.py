import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from metaeval import MetaEvalError, MetaGame
from metaeval.data.simulated import simulated_judge
from metaeval.solvers.equilibria import cce_constraints, deviation_gains
from metaeval.solvers.mecce import max_entropy
from metaeval.solvers.mecce_rows import max_entropy_cce


@settings(max_examples=12, deadline=None, derandomize=True)
@given(models=st.integers(2, 7), prompts=st.integers(1, 30), seed=st.integers(0, 1000))
def test_agrees_with_the_full_dual_newton_on_king_of_the_hill_games(models, prompts, seed):
    game = simulated_judge(models, prompts, seed=seed)
    full = max_entropy(cce_constraints(game)).distribution.reshape(game.shape)
    rows = max_entropy_cce(game)
    np.testing.assert_allclose(rows.distribution, full, rtol=0, atol=1e-10)
    assert rows.kkt_residual <= 1e-13
    assert max(g.max() for g in deviation_gains(game, rows.distribution)) <= 1e-12
    assert rows.rows["working_rows"] <= rows.rows["deviations"]


def test_agrees_on_a_random_three_player_game():
    game = MetaGame(np.random.default_rng(5).uniform(-1, 1, size=(3, 4, 5, 6)))
    full = max_entropy(cce_constraints(game)).distribution.reshape(game.shape)
    np.testing.assert_allclose(max_entropy_cce(game).distribution, full, rtol=0, atol=1e-10)


def test_a_game_whose_cces_leave_joints_out_is_solved_to_the_tolerance():
    # Prisoner's dilemma: every CCE plays (defect, defect) only. The multipliers grow until
    # the other joints' mass no longer shows in the KKT residual.
    game = MetaGame.from_matrix([[3.0, 0.0], [5.0, 1.0]], [[3.0, 5.0], [0.0, 1.0]])
    solution = max_entropy_cce(game)
    assert solution.kkt_residual <= 1e-13
    np.testing.assert_allclose(solution.distribution, [[0, 0], [0, 1]], rtol=0, atol=1e-12)


def test_no_convergence_gets_a_one_line_error(monkeypatch):
    monkeypatch.setattr("metaeval.solvers.mecce_rows.MAX_ITERATIONS", 1)
    with pytest.raises(MetaEvalError, match="did not converge: KKT residual") as error:
        max_entropy_cce(simulated_judge(5, 12, seed=0))
    assert "\n" not in str(error.value)
