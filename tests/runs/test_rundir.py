import json
import logging
import types

import pytest

from metaeval import MetaEvalError
from metaeval.errors import DamagedFileError
from metaeval.runs import rundir

SCHEMA = rundir.RecordSchema({"value": rundir.NUMBER, "values": rundir.NUMBERS})


def write_log(path, lines):
    path.mkdir(exist_ok=True)
    (path / rundir.LOG).write_text("".join(line + "\n" for line in lines))


def entry(i, value=1.0):
    return {"iteration": i, "value": value, "values": [value]}


def record(i, value=1.0):
    """The line a run directory writes for ``entry(i, value)``."""
    return rundir.record_line(entry(i, value)).rstrip("\n")


def test_schema_names_the_problem():
    assert SCHEMA.problem({"iteration": 0, "value": 1, "values": [1.5]}) is None
    assert SCHEMA.problem({"iteration": 0, "values": []}) == "no 'value'"
    assert SCHEMA.problem({"iteration": 0, "value": "x", "values": []}) == "'value' is not a number"
    assert SCHEMA.problem({"iteration": 0, "value": True, "values": []}) == "'value' is not a number"
    assert SCHEMA.problem({"iteration": -1, "value": 1, "values": []}) == "'iteration' is not a non-negative integer"
    assert SCHEMA.problem({"iteration": 0, "value": 1, "values": [None]}) == "'values' is not a list of numbers"
    assert SCHEMA.problem([1]) == "not a record but list"


def test_read_log_keeps_every_valid_record_and_reports_bad_lines(tmp_path):
    write_log(tmp_path, [record(0), "garbage", record(1), '{"iteration": 2}', record(1, 2.0), record(3)])
    with open(tmp_path / rundir.LOG, "a") as f:
        f.write('{"iteration": 4, "val')  # cut off by a kill
    reading = rundir.read_log(tmp_path, SCHEMA)
    assert [r["iteration"] for r in reading.records] == [0, 1, 3]
    assert reading.records[1]["value"] == 1.0  # the first of two records of iteration 1
    assert [(n, reason) for n, reason, _ in reading.damaged] == [
        (2, "not JSON"), (4, "no 'value'"), (5, "a second record of iteration 1"),
        (7, "cut off (the run was killed while writing it)"),
    ]


def test_a_record_changed_after_it_was_written_or_without_its_checksum_is_damaged(tmp_path):
    write_log(tmp_path, [record(0), record(1)])
    lines = (tmp_path / rundir.LOG).read_text().splitlines()
    edited = json.loads(lines[1])
    edited["value"] += 0.25  # still JSON and a valid record
    write_log(tmp_path, [lines[0], json.dumps(edited), json.dumps(entry(2))])
    reading = rundir.read_log(tmp_path, SCHEMA)
    assert reading.records == [entry(0)]  # read back without the checksum
    assert [(n, reason) for n, reason, _ in reading.damaged] == [
        (2, "changed after it was written (its checksum does not match)"),
        (3, "no checksum (written by an earlier metaeval, or edited)"),
    ]


def test_a_json_file_changed_after_it_was_written_is_damaged(tmp_path):
    path = tmp_path / "state.json"
    rundir.write_json(path, {"next_iteration": 3, "rng": [1, 2]})
    assert rundir.read_json(path, sealed=True) == {"next_iteration": 3, "rng": [1, 2]}
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "next_iteration": 2}))
    with pytest.raises(DamagedFileError, match=r"state.json is damaged: changed after it was written"):
        rundir.read_json(path)
    path.write_text(json.dumps({"next_iteration": 3}))  # as an earlier metaeval wrote it
    assert rundir.read_json(path) == {"next_iteration": 3}
    with pytest.raises(DamagedFileError, match="state.json is damaged: no checksum"):
        rundir.read_json(path, sealed=True)
    path.write_text('{"next_iteration": 3')
    with pytest.raises(DamagedFileError, match="cannot read .*state.json"):
        rundir.read_json(path)
    path.unlink()
    with pytest.raises(DamagedFileError, match="state.json is missing"):
        rundir.read_json(path)


def test_a_changed_config_is_refused_naming_it(tmp_path):
    run = open_run(tmp_path)
    run.write_config({})
    run.close()
    config = tmp_path / rundir.CONFIG
    config.write_text(config.read_text().replace('"a": 1', '"a": 2'))
    with pytest.raises(DamagedFileError, match=f"{config} is damaged: changed after it was written .* another --out"):
        open_run(tmp_path)


def test_a_damaged_checkpoint_restarts_the_run_from_iteration_0(tmp_path, caplog):
    run = open_run(tmp_path)
    run.write_config({})
    for i in range(3):
        run.append(entry(i))
    run.close()
    checkpoint = types.SimpleNamespace(next_iteration=3)
    resumed = open_run(tmp_path)
    assert resumed.resume(lambda: checkpoint) == (3, checkpoint)
    resumed.close()

    def damaged():
        raise DamagedFileError(f"{tmp_path / 'checkpoint.npz'} is missing")

    resumed = open_run(tmp_path)
    with caplog.at_level(logging.WARNING, logger="metaeval"):
        assert resumed.resume(damaged) == (0, None)
    assert caplog.messages == [f"{tmp_path / 'checkpoint.npz'} is missing: the checkpoint is not used; the run "
                               "restarts from iteration 0, recomputes the records and checks the 3 on disk against "
                               "their recomputation"]
    assert resumed.commit(entry(0), {}) == entry(0)  # the records on disk are checked
    with pytest.raises(MetaEvalError, match="iteration 1 recomputed differs"):
        resumed.commit(entry(1, 2.0), {})


def open_run(path, **result):
    return rundir.RunDirectory.open(path, "test", settings={"a": 1, **result}, result_settings={"a": 1, **result},
                                    schema=SCHEMA)


def test_open_writes_nothing_and_begin_moves_damaged_lines_aside(tmp_path, caplog):
    new = tmp_path / "new"
    run = open_run(new)
    assert not new.exists() and not run.exists
    run.write_config({"session": 1})
    run.append(entry(0))
    with open(new / rundir.LOG, "a") as f:
        f.write("garbage\n")
    run.append(entry(1))
    run.close()
    before = (new / rundir.CONFIG).read_bytes()

    again = open_run(new)
    assert again.exists and [r["iteration"] for r in again.records] == [0, 1]
    assert (new / rundir.CONFIG).read_bytes() == before and "garbage" in (new / rundir.LOG).read_text()
    with caplog.at_level(logging.WARNING, logger="metaeval"):
        again.begin()
    assert "line 2: not JSON" in caplog.text and rundir.DAMAGED in caplog.text
    assert (new / rundir.DAMAGED).read_text() == "garbage\n"
    assert [r["iteration"] for r in rundir.read_records(new, SCHEMA)] == [0, 1]
    assert "garbage" not in (new / rundir.LOG).read_text()


def test_open_refuses_other_kinds_other_settings_and_damaged_configs(tmp_path):
    run = open_run(tmp_path)
    run.write_config({})
    run.close()
    with pytest.raises(MetaEvalError, match="holds a 'test' run, not 'other'"):
        rundir.RunDirectory.open(tmp_path, "other", settings={}, result_settings={})
    with pytest.raises(MetaEvalError, match="different a"):
        rundir.RunDirectory.open(tmp_path, "test", settings={"a": 2}, result_settings={"a": 2})
    with pytest.raises(MetaEvalError, match="lacks b"):
        open_run(tmp_path, b=0)
    (tmp_path / rundir.CONFIG).write_text("[1, 2")
    with pytest.raises(MetaEvalError, match="cannot read"):
        open_run(tmp_path)
    (tmp_path / rundir.CONFIG).unlink()
    write_log(tmp_path, [record(0)])
    with pytest.raises(MetaEvalError, match="config.json is missing, though .* holds run files"):
        open_run(tmp_path)


def test_records_need_a_session_and_must_be_valid(tmp_path):
    run = open_run(tmp_path / "r")
    with pytest.raises(MetaEvalError, match="write_config"):
        run.append(entry(0))
    run.write_config({})
    with pytest.raises(MetaEvalError, match="invalid test record: no 'value'"):
        run.append({"iteration": 0})


def test_discard_if_unused_removes_only_a_directory_it_created(tmp_path):
    created = open_run(tmp_path / "fresh")
    created.begin()
    assert (tmp_path / "fresh").is_dir()
    created.discard_if_unused()
    assert not (tmp_path / "fresh").exists()
    existing = open_run(tmp_path)
    existing.begin()
    existing.discard_if_unused()
    assert tmp_path.is_dir()


def test_one_writer_at_a_time_and_a_refused_open_keeps_no_lock(tmp_path):
    run = open_run(tmp_path)
    run.write_config({})
    with pytest.raises(MetaEvalError, match="in use: another metaeval run writes to it"):
        open_run(tmp_path)
    run.close()
    with pytest.raises(MetaEvalError, match="was closed"):
        run.append(entry(0))
    with pytest.raises(MetaEvalError, match=r"different a \(a 1 there, 2 here\)") as refused:
        rundir.RunDirectory.open(tmp_path, "test", settings={"a": 2}, result_settings={"a": 2})
    assert refused.traceback  # the refusal's frames are alive, and hold no lock
    open_run(tmp_path).close()


def test_a_recomputed_record_is_checked_but_for_its_timings_and_memory(tmp_path):
    def measured(i, value, seconds, peak):
        return {**entry(i, value), "seconds": {"total": seconds},
                "memory": {"driver": {"rss_mib": peak - 10, "peak_mib": peak}, "actors": []}}

    first = open_run(tmp_path / "r")
    first.write_config({})
    first.append(measured(0, 1.0, 1.0, 100.0))
    first.append(measured(1, 1.0, 1.0, 100.0))
    first.close()
    run = open_run(tmp_path / "r")
    assert run.resume_from(None) == 0
    assert run.commit(measured(0, 1.0, 2.0, 150.0), {}) == measured(0, 1.0, 1.0, 100.0)  # the one on disk
    with pytest.raises(MetaEvalError, match="iteration 1 recomputed differs"):
        run.commit(measured(1, 2.0, 1.0, 100.0), {})


def test_a_config_left_half_written_by_a_killed_process_is_no_one_elses_file(tmp_path):
    """A SIGKILL between writing ``config.json``'s temporary file and renaming it leaves only
    that file: the directory holds no run, so it is begun afresh, not refused as someone's."""
    tmp_path.joinpath(rundir.UNFINISHED_CONFIG).write_text('{"kind": "te')
    run = open_run(tmp_path)
    run.begin()
    assert not tmp_path.joinpath(rundir.UNFINISHED_CONFIG).exists()
    run.write_config({})
    run.append(entry(0))
    run.close()
    assert [r["iteration"] for r in open_run(tmp_path).records] == [0]
    other = tmp_path / "other"
    other.mkdir()
    other.joinpath(rundir.UNFINISHED_CONFIG).write_text("{")
    other.joinpath("notes.txt").write_text("precious")
    with pytest.raises(MetaEvalError, match="is not empty and holds no metaeval run"):
        open_run(other)
