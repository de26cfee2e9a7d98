"""cvxpy, highspy and OR-Tools' LP solver must load and solve in one process.

ortools and highspy each bundle their own HiGHS; with mismatched builds (e.g. ortools
9.15 with highspy 1.15) whichever loads second fails with an undefined symbol, and cvxpy
imports highspy. Each order runs in a fresh interpreter so this test does not depend on
what pytest happened to import first.
"""

import subprocess
import sys
import textwrap

import pytest

IMPORTS = {
    "cvxpy": "import cvxpy as cp",
    "highspy": "import highspy",
    "ortools": "from ortools.linear_solver import pywraplp",
}

# min x + y  s.t.  x + 2 y >= 1,  x, y >= 0:  optimum 0.5 at (0, 0.5).
SOLVES = textwrap.dedent(
    """
    import numpy as np

    x = cp.Variable(2, nonneg=True)
    problem = cp.Problem(cp.Minimize(cp.sum(x)), [x[0] + 2 * x[1] >= 1])
    problem.solve(solver=cp.HIGHS)
    assert problem.status == cp.OPTIMAL and abs(problem.value - 0.5) < 1e-9, problem.status
    problem.solve(solver=cp.GLOP)
    assert problem.status == cp.OPTIMAL and abs(problem.value - 0.5) < 1e-9, problem.status

    h = highspy.Highs()
    h.silent()
    a, b = h.addVariable(lb=0, obj=1), h.addVariable(lb=0, obj=1)
    h.addConstr(a + 2 * b >= 1)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert abs(h.getInfo().objective_function_value - 0.5) < 1e-9

    s = pywraplp.Solver.CreateSolver("GLOP")
    u, v = s.NumVar(0, s.infinity(), "u"), s.NumVar(0, s.infinity(), "v")
    s.Add(u + 2 * v >= 1)
    s.Minimize(u + v)
    assert s.Solve() == pywraplp.Solver.OPTIMAL and abs(s.Objective().Value() - 0.5) < 1e-9
    print("ok")
    """
)


@pytest.mark.parametrize("order", [("ortools", "highspy", "cvxpy"), ("cvxpy", "highspy", "ortools")])
def test_all_three_solvers_in_one_process(order):
    script = "\n".join(IMPORTS[name] for name in order) + "\n" + SOLVES
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
