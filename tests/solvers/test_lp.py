import numpy as np
import pytest
import scipy.sparse as sp

from metaeval import MetaEvalError
from metaeval.solvers import lp


def one_variable(row_upper, cost=1.0):
    """min cost * x  s.t.  x <= row_upper (as a row),  x >= 0."""
    return lp.highs_model(
        sp.csr_matrix([[1.0]]),
        costs=[cost],
        col_lower=[0.0],
        col_upper=[lp.INF],
        row_lower=[-lp.INF],
        row_upper=[row_upper],
    )


def tolerance(highs):
    return highs.getOptionValue("primal_feasibility_tolerance")[1]


def test_optimum_in_one_run():
    highs = one_variable(2.0)
    assert lp.solve(highs, "a tiny LP") == 1
    assert highs.getInfo().objective_function_value == 0.0
    assert tolerance(highs) == lp.FEASIBILITY_TOLERANCE


def test_near_feasible_model_is_solved_at_a_looser_tolerance():
    # x >= 0 and x <= -5e-9: infeasible at 1e-10, within tolerance at 1e-8.
    highs = one_variable(-5e-9)
    assert lp.solve(highs, "a nearly feasible LP") == 2
    assert tolerance(highs) == pytest.approx(1e-8)
    assert abs(highs.getSolution().col_value[0]) <= 1e-8


@pytest.mark.parametrize(
    "row_upper, cost, status", [(-1.0, 1.0, "Infeasible"), (lp.INF, -1.0, "Unbounded")]
)
def test_failure_names_the_status_and_the_loosest_tolerance(row_upper, cost, status):
    highs = one_variable(row_upper, cost)
    with pytest.raises(MetaEvalError, match=f"did not solve a broken LP: model status '{status}"):
        lp.solve(highs, "a broken LP")
    assert tolerance(highs) == lp.LOOSEST_TOLERANCE


def test_rejected_model_change_is_an_error():
    highs = one_variable(1.0)
    status = highs.changeColsBounds(1, np.array([5], dtype=np.int32), np.zeros(1), np.ones(1))
    with pytest.raises(MetaEvalError, match="HiGHS rejected changeColsBounds"):
        lp.check(status, highs, "changeColsBounds")


def test_solve_afresh_retries_on_new_models_until_one_is_solved(monkeypatch):
    built, real_run = [], lp.run
    def build():
        built.append(one_variable(2.0))
        return built[-1]
    # The first three settings "fail" (as HiGHS 1.14 does on some degenerate LPs).
    monkeypatch.setattr(lp, "run", lambda highs: len(built) > 3 and real_run(highs))
    highs = lp.solve_afresh(build, "a tiny LP")
    assert highs is built[3] and len({id(h) for h in built}) == 4
    assert tolerance(highs) == 1e-9 and highs.getOptionValue("presolve")[1] == "off"


def test_solve_afresh_names_every_setting_it_tried():
    with pytest.raises(MetaEvalError, match="did not solve an infeasible LP: 'Infeasible' at 1e-10, presolve choose;.*1e-07, presolve off"):
        lp.solve_afresh(lambda: one_variable(-1.0), "an infeasible LP")


def test_a_simplex_that_stops_short_is_followed_by_the_interior_point_method():
    """min x + y  s.t.  x + 2y >= 1, 3x + y >= 1: the optimum (0.2, 0.4), found by IPM with
    crossover after the simplex (here held to 0 iterations) stopped at every tolerance."""
    highs = lp.highs_model(sp.csr_matrix([[1.0, 2.0], [3.0, 1.0]]), costs=[1.0, 1.0], col_lower=[0.0, 0.0],
                           col_upper=[lp.INF, lp.INF], row_lower=[1.0, 1.0], row_upper=[lp.INF, lp.INF])
    highs.setOptionValue("simplex_iteration_limit", 0)
    assert lp.solve(highs, "a small LP") == 4  # three tolerances, then the interior-point method
    np.testing.assert_allclose(highs.getSolution().col_value, [0.2, 0.4], atol=1e-9)
    assert highs.getOptionValue("solver")[1] == "choose"
