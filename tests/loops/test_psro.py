import json

import numpy as np
import pandas as pd
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import exploitability, policy_aggregator

from metaeval import MetaEvalError, cli, games, spiel
from metaeval.runs import rundir
from metaeval.training.meta_solvers import marginals
from metaeval.loops.psro import PSRO, PSROConfig, psro
from tests.conftest import without_timings


def test_psro_with_nash_and_exact_best_responses_solves_kuhn_2p():
    run = PSRO(PSROConfig(game="kuhn_2p", solver="nash", oracle="psro", iterations=8))
    records = run.run(progress=False)
    assert records[0]["exploitability"] == pytest.approx(0.458333333, abs=1e-6)  # uniform vs uniform
    assert min(r["exploitability"] for r in records) < 0.01
    # the logged value is OpenSpiel's NashConv of the aggregated meta-Nash mixture
    game, evaluator = run.game, run.evaluator
    evaluator.remove(0, [evaluator.ids[0][-1]])  # back to the population of the last record
    evaluator.remove(1, [evaluator.ids[1][-1]])
    sigma = evaluator.meta_distribution("nash")
    mixtures = [sigma.sum(axis=1), sigma.sum(axis=0)]
    policies = [list(player) for player in evaluator.population.policies]
    aggregated = policy_aggregator.PolicyAggregator(game).aggregate([0, 1], policies, mixtures)
    assert records[-1]["nash_conv"] == pytest.approx(exploitability.nash_conv(game, aggregated), abs=1e-9)


def test_jpsro_gap_agrees_with_openspiels_cce_dist():
    run = PSRO(PSROConfig(game="kuhn_3p", solver="mgcce", iterations=3))
    records = run.run(progress=False)
    assert [r["sizes"] for r in records] == [[1, 1, 1], [2, 2, 2], [3, 3, 3]]
    assert records[0]["exploitability"] is None
    game, evaluator = run.game, run.evaluator
    for p in range(3):
        evaluator.remove(p, [evaluator.ids[p][-1]])
    sigma = evaluator.meta_distribution("mgcce")
    population = evaluator.population
    mu = [(sigma[j], policy_lib.python_policy_to_pyspiel_policy(
        policy_lib.merge_tabular_policies([population.policies[p][j[p]] for p in range(3)], game)))
        for j in np.ndindex(sigma.shape) if sigma[j] > 0]
    metagame = evaluator.metagame()
    expected = 0.0
    for p in range(3):
        best = pyspiel.cce_dist(game, mu, p, prob_cut_threshold=0.0).best_response_values[0]
        expected += max(0.0, best - float(np.sum(sigma * metagame.payoffs[p])))
    assert records[-1]["cce_gap"] == pytest.approx(expected, abs=1e-7)


def check_pruning(records, cap):
    """Every prune kept the protected ids (unless they alone exceeded the cap, then lost their
    lowest-rated) and removed exactly the lowest-rated of the others, on the logged ratings."""
    pruned_somewhere = False
    for record in records:
        if record["prune_ratings"] is None:
            continue
        for p in range(3):
            ids = record["policy_ids"][p] + record["added"][p]
            ratings = dict(zip(ids, np.round(record["prune_ratings"][p], 9)))
            removed, protected = set(record["pruned"][p]), set(record["protected"][p])
            assert len(removed) == max(0, len(ids) - cap)
            kept = set(ids) - removed
            pruned_somewhere |= bool(removed)
            if len(protected) <= cap:
                assert not removed & protected
                others_kept = kept - protected
                if removed and others_kept:
                    assert max(ratings[i] for i in removed) <= min(ratings[i] for i in others_kept)
            else:  # unavoidable: all the others go, then the lowest-rated protected
                assert set(ids) - protected <= removed
                assert max(ratings[i] for i in removed & protected) <= min(ratings[i] for i in kept)
    return pruned_somewhere


def test_a_cap_removes_exactly_the_lowest_rated_outside_the_support():
    records = psro(PSROConfig(game="kuhn_3p", solver="deviation", iterations=8, cap=3), progress=False)
    assert max(max(r["sizes"]) for r in records) == 3
    assert check_pruning(records, 3)
    for before, after in zip(records, records[1:]):
        for p in range(3):
            survivors = set(before["policy_ids"][p] + before["added"][p]) - set(before["pruned"][p])
            assert set(after["policy_ids"][p]) == survivors


@pytest.mark.parametrize("solver", ["deviation", "mgcce"])
def test_a_capped_run_stays_converged_and_keeps_the_meta_distribution_available(solver):
    run = PSRO(PSROConfig(game="kuhn_3p", solver=solver, iterations=22, cap=8))
    evaluator, prune = run.evaluator, run.evaluator.prune
    lost_mass = []

    def watched_prune(*args, **kwargs):  # the mass the grown population's sigma puts on removed policies
        sigma = marginals(evaluator.meta_distribution(solver))
        ids = evaluator.ids
        result = prune(*args, **kwargs)
        fits = max(len(protected) for protected in result.protected) <= 8
        lost_mass.append((fits, max(sum(m for i, m in zip(ids[p], sigma[p]) if i in result.removed[p])
                                    for p in range(3))))
        return result

    evaluator.prune = watched_prune
    records = run.run(progress=False)
    assert check_pruning(records, 8)
    # sigma's mass is kept whenever its support fits the cap (mgcce's full-support sigma
    # sometimes holds 9 policies of a player before convergence, and must then lose some)
    assert any(fits for fits, _ in lost_mass) and max(mass for fits, mass in lost_mass if fits) < 1e-8
    gaps = [r["cce_gap"] for r in records]
    converged = next(i for i, g in enumerate(gaps) if g <= 1e-9)
    assert converged <= len(gaps) - 5 and max(gaps[converged:]) <= 1e-9
def test_resume_gives_the_uninterrupted_run(tmp_path):
    config = PSROConfig(game="kuhn_3p", solver="mecce", iterations=4, cap=2, prune_by="uniform", seed=3)
    whole = psro(config, out=tmp_path / "whole", progress=False)
    psro(PSROConfig(**{**config.__dict__, "iterations": 2}), out=tmp_path / "parts", progress=False)
    resumed = psro(config, out=tmp_path / "parts", progress=False)
    assert without_timings(resumed) == without_timings(whole)
    assert rundir.read_records(tmp_path / "parts") == json.loads(json.dumps(resumed))
    for name in ["config.json", "summary.csv", "population.npz", "cce_gap.png", "memory.png"]:
        assert (tmp_path / "parts" / name).stat().st_size > 0
    # every iteration's resident memory, without Ray actors here, also in the summary
    assert all(r["memory"]["actors"] == [] and r["memory"]["driver"]["peak_mib"] > 0 for r in resumed)
    summary = pd.read_csv(tmp_path / "parts" / "summary.csv")
    assert summary.peak_rss_mib.tolist() == [r["memory"]["driver"]["peak_mib"] for r in resumed]
    with pytest.raises(MetaEvalError, match="different solver"):
        psro(PSROConfig(**{**config.__dict__, "solver": "uniform"}), out=tmp_path / "parts")


def test_any_oracle_of_the_shared_signature_can_be_plugged_in():
    calls = []

    def oracle(evaluator, player, sigma, rng):
        calls.append((player, sigma.shape))
        return spiel.random_policy(evaluator.game, player, rng)

    psro(PSROConfig(game="kuhn_2p", solver="uniform", iterations=2), oracle=oracle, progress=False)
    assert calls == [(0, (1, 1)), (1, (1, 1)), (0, (2, 2)), (1, (2, 2))]


@pytest.mark.parametrize("field, value, message", [
    ("solver", "gini", "unknown meta-solver"), ("oracle", "sarsa", "unknown oracle"),
    ("prune_by", "best", "unknown rater"), ("cap", 0, "cap must be"), ("initial", "zeros", "initial must be"),
])
def test_bad_settings_are_clear_errors(field, value, message):
    with pytest.raises(MetaEvalError, match=message):
        PSROConfig(**{field: value})


def test_cli_runs_psro_and_reports_bad_input_in_one_line(tmp_path, capsys):
    assert cli.main(["psro", "--game", "kuhn_2p", "--solver", "nash", "--iterations", "2",
                     "--out", str(tmp_path)]) == 0
    assert "final CCE gap" in capsys.readouterr().out
    assert cli.main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "exploitability.png").exists()
    assert cli.main(["psro", "--solver", "gini", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("metaeval: error: unknown meta-solver 'gini'") and "\n" not in err


def test_openspiel_tie_break_holds_the_populations_of_openspiels_jpsro():
    from open_spiel.python.algorithms import jpsro

    game, iterations = games.load("kuhn_3p"), 5
    theirs = []

    def callback(iteration, *args):
        theirs.append((args[1], float(sum(args[9][-1]))))  # policies per player, train gap
        return args[-1]

    jpsro.run_loop(game, "kuhn_3p", iterations=iterations - 1, policy_init="uniform", target_equilibrium="cce",
                   train_meta_solver="mgcce", eval_meta_solver="uni", callback=callback)
    runs = {tie_break: PSRO(PSROConfig(game="kuhn_3p", solver="mgcce", iterations=iterations, tie_break=tie_break))
            for tie_break in ("openspiel", "drawn")}
    records = {tie_break: run.run(progress=False) for tie_break, run in runs.items()}
    ours = runs["openspiel"].evaluator
    for p in range(3):
        rows = [policy_lib.TabularPolicy(game, players=(p,)).state_lookup[k]
                for k in spiel.game_tree(game).players[p].keys]
        expected = [pi.action_probability_array[rows] for pi in theirs[-1][0][p]]
        got = [ours.policy(p, i).action_probability_array for i in ours.ids[p]]
        assert len(got) == len(expected) == iterations + 1
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
    for record, (_, gap) in zip(records["openspiel"], theirs):
        assert record["cce_gap"] == pytest.approx(gap, abs=1e-5)
    # the default's draws among ties hold other populations, so the check has teeth
    drawn = runs["drawn"].evaluator
    assert any(not np.array_equal(drawn.policy(p, i).action_probability_array, ours.policy(p, j).action_probability_array)
               for p in range(3) for i, j in zip(drawn.ids[p], ours.ids[p]))


def test_tie_break_is_checked_and_a_run_does_not_resume_with_another(tmp_path):
    with pytest.raises(MetaEvalError, match="tie_break"):
        PSROConfig(tie_break="last")
    with pytest.raises(MetaEvalError, match="jpsro oracle"):
        PSROConfig(oracle="psro", tie_break="openspiel")
    psro(PSROConfig(game="kuhn_2p", solver="uniform", iterations=1), out=tmp_path, progress=False)
    with pytest.raises(MetaEvalError, match="different tie_break"):
        PSRO(PSROConfig(game="kuhn_2p", solver="uniform", iterations=2, tie_break="openspiel"), out=tmp_path)
