import json
from dataclasses import replace

import numpy as np
import pytest

import metaeval
from tests.conftest import without_timings
from metaeval import MetaEvalError
from metaeval.runs import rundir
from metaeval.loops.evolve import EvolveConfig, Evolution, evolve, lowest_rated

# Raters defined for any game; elo needs a symmetric 2-player win-probability game.
GENERAL_RATERS = [name for name in metaeval.RATERS if name != "elo"]
RECORD_KEYS = {
    "iteration", "policy_ids", "ratings", "cce_gap", "cce_gap_per_player", "mean_payoff",
    "mecce_payoff", "mecce_support", "rater_diagnostics", "discarded", "added", "tie_break_keys", "seconds",
    "memory",
}


@pytest.mark.parametrize("game", ["kuhn_3p", "sheriff"])
@pytest.mark.parametrize("rater", GENERAL_RATERS)
def test_three_iterations_with_every_rater(tmp_path, game, rater):
    config = EvolveConfig(game=game, rater=rater, iterations=3, seed=1)
    records = evolve(config, out=tmp_path, progress=False)
    assert [r["iteration"] for r in records] == [0, 1, 2]
    players = metaeval.games.load(game).num_players()
    for record in records:
        assert record["cce_gap"] >= 0 and len(record["cce_gap_per_player"]) == players
        assert record["cce_gap"] == pytest.approx(sum(record["cce_gap_per_player"]))
        assert all(len(d) == config.discard_count for d in record["discarded"])
    # the log on disk is what the run returned, and the results files exist
    assert rundir.read_records(tmp_path) == json.loads(json.dumps(records))
    for name in ["config.json", "summary.csv", "population.npz", "cce_gap.png", "payoff.png"]:
        assert (tmp_path / name).stat().st_size > 0


def test_elo_on_a_three_player_game_is_a_clear_error():
    with pytest.raises(MetaEvalError, match="elo"):
        evolve(EvolveConfig(game="kuhn_3p", rater="elo", iterations=1), progress=False)


def test_jsonl_schema(tmp_path):
    evolve(EvolveConfig(game="kuhn_3p", rater="uniform", iterations=2, population=5), out=tmp_path,
           progress=False)
    lines = (tmp_path / "iterations.jsonl").read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        record = json.loads(line)
        assert set(record) == RECORD_KEYS | {"checksum"}
        assert [len(ids) for ids in record["policy_ids"]] == [5, 5, 5]
        assert [len(r) for r in record["ratings"]] == [5, 5, 5]
        assert all(isinstance(x, float) for x in record["cce_gap_per_player"] + record["mean_payoff"])
        assert set(record["seconds"]) == {"build", "rate", "solve", "gap", "replace", "total"}
        assert [len(a) for a in record["added"]] == [1, 1, 1]  # floor(5 / 4) = 1
        assert 1 <= record["mecce_support"] <= 5**3


def test_discarded_are_exactly_the_lowest_rated_quarter():
    records = evolve(EvolveConfig(game="kuhn_3p", rater="deviation", iterations=4, population=8),
                     progress=False)
    for record in records:
        for ids, ratings, discarded, added in zip(
            record["policy_ids"], record["ratings"], record["discarded"], record["added"]
        ):
            rounded = dict(zip(ids, np.round(ratings, 9)))
            assert len(discarded) == 2 and set(discarded) <= set(ids)
            kept = set(ids) - set(discarded)
            assert max(rounded[d] for d in discarded) <= min(rounded[k] for k in kept)
            assert not set(added) & set(ids)
    for before, after in zip(records, records[1:]):
        for p in range(3):
            survivors = set(before["policy_ids"][p]) - set(before["discarded"][p])
            assert set(after["policy_ids"][p]) == survivors | set(before["added"][p])


def test_lowest_rated_breaks_ties_by_seeded_keys():
    ratings = np.array([0.5, 0.1, 0.1 + 1e-12, 0.1, 0.9])
    first, keys = lowest_rated(ratings, 2, np.random.default_rng(3))
    again, keys_again = lowest_rated(ratings, 2, np.random.default_rng(3))
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(keys, keys_again)
    assert set(first) <= {1, 2, 3}  # solver noise below 1e-9 counts as a tie
    tied = [1, 2, 3]
    assert list(first) == sorted(sorted(tied, key=lambda i: keys[i])[:2])


@pytest.mark.parametrize("rater", GENERAL_RATERS)
def test_same_seed_same_log_and_different_seed_differs(tmp_path, rater):
    def log(seed, name):
        evolve(EvolveConfig(game="kuhn_3p", rater=rater, iterations=2, seed=seed), out=tmp_path / name,
               progress=False)
        return without_timings(rundir.read_records(tmp_path / name))

    assert log(7, "a") == log(7, "b")
    assert log(7, "a") != log(8, "c")


def test_resume_in_process_equals_uninterrupted(tmp_path):
    config = EvolveConfig(game="kuhn_3p", rater="deviation", iterations=5, seed=3)
    whole = without_timings(evolve(config, out=tmp_path / "whole", progress=False))
    short = EvolveConfig(game="kuhn_3p", rater="deviation", iterations=2, seed=3)
    evolve(short, out=tmp_path / "split", progress=False)
    resumed = Evolution(config, out=tmp_path / "split")
    assert resumed.iteration == 2
    assert without_timings(resumed.run(progress=False)) == whole
    assert without_timings(rundir.read_records(tmp_path / "split")) == whole


def test_resume_refuses_a_different_run(tmp_path):
    evolve(EvolveConfig(game="kuhn_3p", rater="uniform", iterations=1, seed=0), out=tmp_path,
           progress=False)
    with pytest.raises(MetaEvalError, match="different rater, seed"):
        Evolution(EvolveConfig(game="kuhn_3p", rater="deviation", iterations=2, seed=1), out=tmp_path)


def test_new_policy_hook_supplies_replacements():
    from metaeval import spiel

    calls = []

    def uniform_policy(game, player, rng):
        calls.append(player)
        return spiel.random_policy(game, player, rng, kind="uniform")

    records = evolve(EvolveConfig(game="kuhn_3p", rater="uniform", iterations=2), progress=False,
                     new_policy=uniform_policy)
    assert sorted(calls) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert records[1]["policy_ids"] != records[0]["policy_ids"]


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(population=3), "population must be at least 4"),
        (dict(discard_fraction=1.0), "strictly between 0 and 1"),
        (dict(discard_fraction=0.0), "strictly between 0 and 1"),
        (dict(rater="best"), "unknown rater 'best'"),
        (dict(iterations=0), "iterations must be at least 1"),
    ],
)
def test_bad_config(options, message):
    with pytest.raises(MetaEvalError, match=message):
        EvolveConfig(**options)


def test_seed_and_episodes_validated():
    with pytest.raises(MetaEvalError, match="seed must be a non-negative integer"):
        EvolveConfig(seed=-1)
    with pytest.raises(MetaEvalError, match="episodes must be at least 2"):
        EvolveConfig(mode="sampled", episodes=1)


def test_comparison_directory_is_a_clear_error_and_a_damaged_state_restarts_the_run(tmp_path, caplog):
    rundir.write_json(tmp_path / "config.json", {"compare": {}})
    with pytest.raises(MetaEvalError, match="holds a 'compare' run, not 'evolve'"):
        Evolution(EvolveConfig(iterations=1), out=tmp_path)
    run = tmp_path / "run"
    evolve(EvolveConfig(rater="uniform", iterations=1), out=run, progress=False)
    (run / "state.json").write_text('{"next_iteration": 1}')
    with caplog.at_level("WARNING", logger="metaeval"):
        resumed = Evolution(EvolveConfig(rater="uniform", iterations=2), out=run)
    resumed.close()
    assert resumed.iteration == 0
    assert "state.json is damaged: no checksum" in caplog.text and "restarts from iteration 0" in caplog.text


def test_resume_keeps_the_history_of_sessions(tmp_path):
    evolve(EvolveConfig(rater="uniform", iterations=1), out=tmp_path, progress=False)
    evolve(EvolveConfig(rater="uniform", iterations=2), out=tmp_path, progress=False)
    sessions = rundir.read_json(tmp_path / "config.json")["sessions"]
    assert [s["from_iteration"] for s in sessions] == [0, 1]
    assert all("numpy" in s["versions"] for s in sessions)
    # the BLAS NumPy runs, with the kernels it chose for this CPU (their choice moves last bits)
    assert all(len(lib.split()) == 3 for s in sessions for lib in s["versions"]["blas"])
    assert sessions[0]["versions"]["blas"]


def test_rater_timings_stay_out_of_the_log():
    records = evolve(EvolveConfig(rater="nash", iterations=1), progress=False)
    assert "seconds" not in records[0]["rater_diagnostics"]
    assert records[0]["rater_diagnostics"]["max_regret"] < 1e-6


def test_paired_differences_count_seeds():
    from metaeval.runs import reports

    rows = []
    for seed, (u, d) in enumerate([(1.0, 0.5), (1.0, 1.0), (1.0, 2.0)]):
        rows += [{"rater": "uniform", "seed": seed, "iteration": 9, "cce_gap": u},
                 {"rater": "deviation", "seed": seed, "iteration": 9, "cce_gap": d}]
    table = reports.paired_differences(__import__("pandas").DataFrame(rows))
    row = table.iloc[0]
    assert (row.rater, row.lower, row.equal, row.higher) == ("deviation", 1, 1, 1)
    assert row["mean"] == pytest.approx(0.5 / 3)


def test_logged_mecce_support_is_that_of_the_iterations_metagame():
    from metaeval.solvers import equilibria

    run = Evolution(EvolveConfig(game="sheriff", rater="uniform", iterations=3, seed=0))
    for _ in range(3):
        record = run.step()
        sigma = equilibria.mecce(run.evaluator.built_metagame)
        assert record["mecce_support"] == int(np.count_nonzero(sigma > 1e-9))
        assert record["mecce_payoff"][0] == pytest.approx(float(np.sum(sigma * run.evaluator.built_metagame.payoffs[0])))


def _reference(iterations=6):
    config = EvolveConfig(game="kuhn_3p", rater="uniform", iterations=iterations, population=4, seed=5)
    return config, without_timings(evolve(config, progress=False))


def _steps(config, out, count):
    """``count`` logged iterations without the final plots (which dominate a short run's time)."""
    run = Evolution(config, out=out)
    for _ in range(count):
        run.step()


def test_a_garbage_line_costs_no_valid_record(tmp_path, caplog):
    config, reference = _reference()
    run = tmp_path / "run"
    _steps(config, run, 4)
    lines = (run / "iterations.jsonl").read_text().splitlines(keepends=True)
    (run / "iterations.jsonl").write_text(lines[0] + "garbage\n" + "".join(lines[1:]))
    with caplog.at_level("WARNING", logger="metaeval"):
        records = evolve(config, out=run, progress=False)
    assert "line 2: not JSON" in caplog.text and "iterations.damaged.jsonl" in caplog.text
    assert (run / "iterations.damaged.jsonl").read_text() == "garbage\n"
    assert without_timings(records) == reference
    assert without_timings(rundir.read_records(run)) == reference


@pytest.mark.parametrize("damage", ["truncate", "delete", "replace_a_record"])
def test_a_log_with_holes_is_recomputed_and_the_valid_records_kept(tmp_path, damage, caplog):
    config, reference = _reference()
    run = tmp_path / "run"
    _steps(config, run, 4)
    log = run / "iterations.jsonl"
    text = log.read_text()
    kept = rundir.read_records(run)
    if damage == "truncate":  # cut in the middle of the third record
        log.write_text(text[: text.index('"iteration": 2') + 5])
        kept = kept[:2]
    elif damage == "delete":
        log.unlink()
        kept = []
    else:  # a record without mean_payoff
        lines = text.splitlines(keepends=True)
        bad = json.loads(lines[1])
        del bad["mean_payoff"]
        log.write_text(lines[0] + json.dumps(bad) + "\n" + "".join(lines[2:]))
        kept = [kept[0], *kept[2:]]
    with caplog.at_level("WARNING", logger="metaeval"):
        records = evolve(config, out=run, progress=False)
    assert "restarts from iteration 0" in caplog.text
    assert without_timings(records) == reference
    on_disk = rundir.read_records(run)
    assert without_timings(on_disk) == reference
    # the records that were valid are the very ones kept (with their original timings)
    assert all(r in on_disk for r in kept)
    assert [json.loads(line)["iteration"] for line in log.read_text().splitlines()] == list(range(6))


def test_a_record_past_the_checkpoint_is_kept_not_rewritten(tmp_path):
    config, reference = _reference(iterations=3)
    run = tmp_path / "run"
    _steps(config, run, 2)
    extra = json.loads(json.dumps(evolve(config, progress=False)[2]))  # what iteration 2 will be
    with open(run / "iterations.jsonl", "a") as f:  # as if killed between log and checkpoint
        f.write(rundir.record_line(extra))
    evolve(config, out=run, progress=False)
    assert rundir.read_records(run)[2] == extra
    assert len((run / "iterations.jsonl").read_text().splitlines()) == 3


def test_a_config_without_its_settings_is_a_clear_error(tmp_path):
    config = EvolveConfig(rater="uniform", iterations=1, population=4)
    _steps(config, tmp_path, 1)
    stored = rundir.read_json(tmp_path / "config.json")
    del stored["settings"]["rater"]
    rundir.write_json(tmp_path / "config.json", stored)
    with pytest.raises(MetaEvalError, match="config.json lacks rater"):
        Evolution(config, out=tmp_path)


def test_a_refused_or_failed_run_writes_nothing(tmp_path):
    with pytest.raises(MetaEvalError, match="has no option"):
        EvolveConfig(rater="alpharank", rater_options={"alfa": 1})
    out = tmp_path / "run"
    bad = EvolveConfig(rater="alpharank", iterations=1, population=4, rater_options={"alpha": -1})
    with pytest.raises(MetaEvalError):
        evolve(bad, out=out, progress=False)
    assert not out.exists()
    _steps(replace(bad, rater_options={"alpha": 1}), out, 1)
    assert len(rundir.read_records(out)) == 1


def test_population_age_counts_iterations_since_each_member_joined():
    from metaeval.runs.reports import population_age

    # Two players of two members; after iteration 0 player 0's policy 1 is replaced by 2,
    # after iteration 1 player 1's policy 0 by 3, and after iteration 2 policy 2 by 4.
    records = [{"iteration": 0, "policy_ids": [[0, 1], [0, 1]]},
               {"iteration": 1, "policy_ids": [[0, 2], [0, 1]]},
               {"iteration": 2, "policy_ids": [[0, 2], [3, 1]]},
               {"iteration": 3, "policy_ids": [[0, 4], [3, 1]]}]
    assert population_age(records) == [0.0, (1 + 0 + 1 + 1) / 4, (2 + 1 + 0 + 2) / 4, (3 + 0 + 1 + 3) / 4]
