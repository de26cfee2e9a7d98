from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metaeval import MetaEvalError
from metaeval.runs import rundir
from metaeval.runs.build import build_versions
from metaeval.loops.study import markdown_table, mean, paired_statistics, std, summary


def comparison(differences):
    """Two raters x len(differences) seeds x 3 iterations; rater "a" sits ``differences``
    above uniform at every iteration, on one-player-per-column payoffs."""
    rows = []
    for seed, difference in enumerate(differences):
        for iteration in range(3):
            base = 1.0 + seed + 0.1 * iteration
            for rater, gap in (("uniform", base), ("a", base + difference)):
                rows.append({"rater": rater, "seed": seed, "iteration": iteration, "cce_gap": gap,
                             "mean_payoff_p0": gap, "mean_payoff_p1": -gap,
                             "population_age": iteration * (2 if rater == "a" else 1)})
    return pd.DataFrame(rows)


def test_paired_statistics_count_signs_and_test_them():
    table = paired_statistics(comparison([-0.1, -0.2, -0.3, -0.4, -0.5, -0.6]), every=2)
    assert table.iteration.tolist() == [1, 2]  # every 2nd iteration, and the last
    row = table.iloc[-1]
    assert (row.lower, row.equal, row.higher) == (6, 0, 0)
    assert row.mean_difference == pytest.approx(-0.35)
    assert row.sign_test_p == pytest.approx(2 / 2**6)  # two-sided binomial, 6 of 6
    assert row.wilcoxon_p == pytest.approx(2 / 2**6)  # exact: all ranks on one side
    tied = paired_statistics(comparison([0.0, 0.0, 0.1, -0.1]), every=3).iloc[-1]
    assert (tied.lower, tied.equal, tied.higher, tied.sign_test_p) == (1, 2, 1, 1.0)


def test_summary_reports_final_and_mean_gaps_and_welfare():
    table = summary(comparison([0.5, 0.5])).set_index("rater")
    assert table.loc["a", "final_gap_mean"] == pytest.approx(np.mean([1.7, 2.7]))
    assert table.loc["uniform", "mean_gap_mean"] == pytest.approx(np.mean([1.1, 2.1]))
    assert table.loc["a", "final_welfare_mean"] == pytest.approx(0.0)  # zero-sum payoffs
    assert list(table.index) == ["uniform", "a"]  # the comparison's order, not sorted
    assert table.loc["a", "seeds"] == 2
    assert table.loc["a", "final_age_mean"] == 4 and table.loc["uniform", "final_age_mean"] == 2


def test_zero_sum_welfare_is_zero_not_the_rounding_error_of_its_sum():
    frame = comparison([0.5]).assign(mean_payoff_p0=0.1, mean_payoff_p1=0.2, mean_payoff_p2=-0.3)
    assert 0.1 + 0.2 - 0.3 != 0
    assert list(summary(frame).final_welfare_mean) == [0.0, 0.0]


def test_pairs_count_only_seeds_both_runs_reached():
    frame = comparison([-0.1, -0.2, -0.3])
    frame = frame[~((frame.rater == "a") & (frame.seed == 2))]  # rater a's seed 2 failed
    row = paired_statistics(frame, every=1).iloc[-1]
    assert row.pairs == 2
    assert row.mean_difference == pytest.approx(-0.15)
    assert row.standard_error == pytest.approx(np.std([-0.1, -0.2], ddof=1) / np.sqrt(2))


def test_the_markdown_table_has_a_row_per_rater_with_its_paired_difference():
    frame = comparison([-0.1, -0.2, -0.3, -0.4, -0.5, -0.6])
    table = summary(frame).assign(game="g", replacement="r")
    lines = markdown_table(table, paired_statistics(frame, every=2).assign(game="g", replacement="r")).splitlines()
    assert len(lines) == 4 and lines[0].startswith("| game | replacement | rater |") and lines[0].count("|") == 13
    rows = {line.split(" | ")[2]: line.split(" | ") for line in lines[2:]}
    assert rows["a"][7] == "4" and rows["uniform"][7] == "2"  # final ages
    assert rows["a"][8] == "-0.35 ± 0.076" and rows["a"][9] == "6/0/0"  # sd 0.187 over 6 seeds
    final = 1.1 + 0.9 * np.arange(6)  # base 1.2 + seed at the last iteration, minus 0.1 (seed + 1)
    assert rows["a"][4] == f"{final.mean():.3g} ± {final.std(ddof=1):.2g}" == "3.35 ± 1.7"
    assert rows["uniform"][8:] == ["", "", "", " |"]  # the baseline has no difference from itself


def test_a_study_reruns_bit_for_bit_into_a_new_directory(tmp_path):
    from metaeval.loops.study import raters_study

    def run(out):
        raters_study(out, ["sheriff"], ["random"], seeds=2, iterations=3, every=2, jobs=1, learner_episodes=10)
        return {name: (out / name).read_bytes() for name in ("study.csv", "paired.csv", "study.md")}

    first = run(tmp_path / "first")
    assert first == run(tmp_path / "second")
    records = sorted((tmp_path / "first" / "records").rglob("*.csv.gz"))
    assert len(records) == 2 * 5  # a record per rater and seed
    for path in records:  # the same bytes but for the wall-clock column
        again = tmp_path / "second" / path.relative_to(tmp_path / "first")
        frames = [pd.read_csv(p).drop(columns="seconds") for p in (path, again)]
        pd.testing.assert_frame_equal(*frames, check_exact=True)
    assert (tmp_path / "first" / "sheriff-random-paired.png").stat().st_size > 0
    assert b"deviation" in first["paired.csv"] and b"pairs" in first["paired.csv"]


def test_finished_only_tabulates_finished_comparisons_and_runs_nothing(tmp_path):
    from metaeval.loops.study import raters_study

    settings = dict(seeds=2, iterations=3, every=2, jobs=1, learner_episodes=10)
    raters_study(tmp_path / "full", ["sheriff"], ["random"], **settings)
    ran = {name: (tmp_path / "full" / name).read_bytes() for name in ("study.csv", "paired.csv", "study.md")}
    (tmp_path / "full" / "study.csv").unlink()
    # kuhn_3p was never run: it is skipped, and no run starts.
    raters_study(tmp_path / "full", ["kuhn_3p", "sheriff"], ["random"], finished_only=True, **settings)
    assert {name: (tmp_path / "full" / name).read_bytes() for name in ran} == ran
    assert not (tmp_path / "full" / "kuhn_3p").exists()
    # Asked for 3 seeds, the comparison has not finished: nothing is tabulated or started.
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "full").rglob("*"))
    (tmp_path / "full" / "study.csv").unlink()
    raters_study(tmp_path / "full", ["sheriff"], ["random"], finished_only=True, **{**settings, "seeds": 3})
    assert not (tmp_path / "full" / "study.csv").exists()
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "full").rglob("*")) == [
        p for p in before if p.name != "study.csv"]
    with pytest.raises(MetaEvalError, match="other settings"):
        raters_study(tmp_path / "full", ["sheriff"], ["random"], finished_only=True, **{**settings, "iterations": 4})


def test_a_study_continues_from_its_records_without_rerunning_them(tmp_path):
    from metaeval.loops.study import raters_study

    settings = dict(seeds=2, iterations=3, every=2, jobs=1, learner_episodes=10, records=tmp_path / "records")
    raters_study(tmp_path / "first", ["sheriff"], ["random"], **settings)
    tables = {name: (tmp_path / "first" / name).read_bytes() for name in ("study.csv", "paired.csv", "study.md")}
    # Another machine with the records and none of the run directories: nothing runs again.
    raters_study(tmp_path / "elsewhere", ["sheriff"], ["random"], **settings)
    assert {name: (tmp_path / "elsewhere" / name).read_bytes() for name in tables} == tables
    assert not list((tmp_path / "elsewhere").rglob("iterations.jsonl"))
    # A lost record is redone, and only that run.
    (tmp_path / "records" / "sheriff" / "random" / "nash" / "seed1.csv.gz").unlink()
    raters_study(tmp_path / "third", ["sheriff"], ["random"], **settings)
    assert [p.parent.relative_to(tmp_path) for p in (tmp_path / "third").rglob("iterations.jsonl")] == [
        Path("third/sheriff/random/nash/seed1")]
    assert {name: (tmp_path / "third" / name).read_bytes() for name in tables} == tables


def test_a_check_reruns_recorded_runs_and_finds_a_changed_record(tmp_path):
    from metaeval.loops.study import check_study, raters_study
    from metaeval.loops.study_records import RunRecords

    records = tmp_path / "records"
    raters_study(tmp_path / "study", ["sheriff"], ["mutate"], seeds=2, iterations=3, every=2, jobs=1,
                 learner_episodes=10, records=records)
    stored = RunRecords.at(records / "sheriff" / "mutate")
    changed = stored.read("nash", 1)
    changed.loc[2, "cce_gap"] = np.nextafter(changed.loc[2, "cce_gap"], np.inf)  # one ulp
    stored.write("nash", 1, changed, rundir.read_json(stored.build_file("nash", 1)))
    table = check_study(records, tmp_path / "check", ["kuhn_3p", "sheriff"], ["random", "mutate"],
                        ["uniform", "nash"], [0, 1], jobs=1)
    assert table[["rater", "seed", "identical"]].values.tolist() == [
        ["uniform", 0, True], ["uniform", 1, True], ["nash", 0, True], ["nash", 1, False]]
    assert 0 < table.max_difference.iloc[3] <= 1e-12 and (table.max_difference.iloc[:3] == 0).all()
    assert table.first_difference.iloc[3] == 2 and table.first_difference.iloc[:3].isna().all()
    assert pd.read_csv(tmp_path / "check" / "check.csv").identical.tolist() == [True, True, True, False]
    assert table.same_build.tolist() == [True] * 4  # so nash seed 1 differs on the build that made it
    # A record made on another build says so; one made by an earlier metaeval does not know.
    other = [{**build, "numpy": "0.0"} for build in rundir.read_json(stored.build_file("uniform", 1))]
    rundir.write_json(stored.build_file("uniform", 1), other)
    stored.build_file("uniform", 0).unlink()
    this_build = rundir.read_json(stored.build_file("nash", 0))[0]
    assert [stored.same_build("uniform", s, this_build) for s in (0, 1)] == [None, False]
    with pytest.raises(MetaEvalError, match="already holds runs"):
        check_study(records, tmp_path / "check", ["sheriff"], ["mutate"], ["nash"], [1], jobs=1)
    rewritten = check_study(records, tmp_path / "again", ["sheriff"], ["mutate"], ["nash"], [1], jobs=1, rewrite=True)
    assert not rewritten.identical.any()
    assert check_study(records, tmp_path / "third", ["sheriff"], ["mutate"], ["nash"], [1], jobs=1).identical.all()
    with pytest.raises(MetaEvalError, match="no records"):
        check_study(tmp_path / "nowhere", tmp_path / "check", ["sheriff"], ["mutate"], ["nash"], [0], jobs=1)


def test_records_refuse_other_settings_unfinished_runs_and_damage(tmp_path):
    from metaeval.loops.evolve import EvolveConfig
    from metaeval.loops.study_records import RunRecords

    base = EvolveConfig(game="sheriff", iterations=3)
    records = RunRecords(tmp_path, base)
    frame = pd.DataFrame({"iteration": [0, 1, 2], "cce_gap": [0.1, 1 / 3, np.pi]})
    with pytest.raises(MetaEvalError, match="only finished runs"):
        records.write("uniform", 0, frame.iloc[:2], [build_versions()])
    assert not records.has("uniform", 0) and not records.build_file("uniform", 0).exists()
    records.write("uniform", 0, frame, [build_versions()])
    assert records.same_build("uniform", 0, build_versions())
    pd.testing.assert_frame_equal(records.read("uniform", 0), frame, check_exact=True)  # full precision
    with pytest.raises(MetaEvalError, match="other settings"):
        RunRecords(tmp_path, EvolveConfig(game="sheriff", iterations=4))
    records.file("uniform", 0).write_bytes(b"not gzip")
    with pytest.raises(MetaEvalError, match="unreadable"):
        records.read("uniform", 0)


def test_means_and_deviations_are_correctly_rounded_whatever_the_order():
    rng = np.random.default_rng(0)
    values = list(rng.lognormal(0, 3, 300))  # a wide spread: naive sums depend on the order
    assert mean([0.1] * 10) == 0.1 != sum([0.1] * 10) / 10
    assert mean([1e16, 1.0, -1e16]) == 1 / 3
    for _ in range(20):
        shuffled = list(rng.permutation(values))
        assert mean(shuffled) == mean(values) and std(shuffled) == std(values)
    assert std(values) == pytest.approx(np.std(values, ddof=1), rel=1e-12)
    assert np.isnan(std([1.0])) and np.isnan(mean([]))
