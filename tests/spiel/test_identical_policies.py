"""Identical policies of one player are named in an IdenticalPoliciesWarning: checkpoints that
are one live view of a solver gave an all-equal meta-game, ranked first together in silence."""

import re
import warnings

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import cfr

import metaeval
from metaeval import IdenticalPoliciesWarning, spiel
from metaeval.cli import main


def cfr_checkpoints(count):
    """``count`` "checkpoints" of CFR's average policy: one live view, so all the same."""
    solver = cfr.CFRSolver(pyspiel.load_game("kuhn_poker"))
    checkpoints = []
    for _ in range(count):
        solver.evaluate_and_update_policy()
        checkpoints.append(solver.average_policy())
    return checkpoints


def test_evaluator_add_names_a_policy_equal_to_an_earlier_one():
    evaluator = metaeval.Evaluator("kuhn_poker")
    first, second = cfr_checkpoints(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for the first policy
        evaluator.add(0, first, name="iteration 1")
    with pytest.warns(IdenticalPoliciesWarning, match=r"player 0: 'iteration 2' is the same policy as 'iteration 1'"):
        evaluator.add(0, second, name="iteration 2")
    always_first = policy_lib.TabularPolicy(evaluator.game)
    always_first.action_probability_array[:] = np.eye(2)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a different policy: silence, also for the other player
        evaluator.add(0, always_first)
        evaluator.add(1, second)
        evaluator.metagame()  # building the population repeats nothing


def test_population_names_every_group_of_equal_tables():
    game = pyspiel.load_game("kuhn_poker")
    tables = [policy_lib.TabularPolicy(game) for _ in range(4)]
    tables[1].action_probability_array[:] = np.eye(2)[0]  # differs from the uniform ones
    with pytest.warns(IdenticalPoliciesWarning) as record:
        spiel.Population(game, [tables, [tables[1]]])
    assert [str(w.message).split(" (")[0] for w in record] == [
        "player 0: 'policy 0', 'policy 2', 'policy 3' are the same policy"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spiel.Population(game, [tables[:2], tables[:2]])  # distinct within each player


def test_cli_says_so_in_one_line_with_the_count_of_duplicates(tmp_path, capsys):
    # JPSRO on Kuhn poker returns to best responses it already holds.
    assert main(["psro", "--game", "kuhn_poker", "--iterations", "8", "--quiet", "--out", str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and " is the same policy as " in lines[0]
    assert re.match(r"metaeval: warning: IdenticalPoliciesWarning x\d+, the first: player \d: ", lines[0])
