"""Damaged run directories: a damaged checkpoint file or record is named and the run restarts
from iteration 0, or the resume is refused in one line naming the file; never a traceback,
never a changed record kept (``python -m bench.damage`` runs the whole matrix)."""

import json
import shutil

import numpy as np
import pytest

from bench import damage
from bench.kills import outcome
from metaeval.runs import rundir


def damaged_copy(base, tmp_path, name, kind):
    """A copy of the run directory ``base`` whose file ``name`` is damaged by ``kind``; the file's path."""
    out = tmp_path / "run"
    shutil.copytree(base, out)
    damage.damage(out / name, kind, np.random.default_rng(0))
    return out, out / name


@pytest.fixture(scope="module")
def neural_pbt(tmp_path_factory):
    pytest.importorskip("jax")
    return damage.reference_runs("pbt-ppo", tmp_path_factory.mktemp("neural-pbt"))


@pytest.fixture(scope="module")
def evolution(tmp_path_factory):
    return damage.reference_runs("evolve", tmp_path_factory.mktemp("evolve"))


@pytest.mark.parametrize("kind", ["flip", "truncate"])
def test_a_damaged_weights_file_is_named_and_the_run_restarts_from_iteration_0(neural_pbt, tmp_path, kind, caplog):
    base, reference = neural_pbt
    out, values = damaged_copy(base, tmp_path, f"checkpoint-{damage.ITERATIONS:06d}/values.npz", kind)
    code, err = damage.run(damage.command("pbt-ppo", damage.ITERATIONS + 1, out))
    assert code == 0, err
    assert f"{values} was changed" in caplog.text and "the run restarts from iteration 0" in caplog.text
    assert outcome(out) == reference


@pytest.mark.parametrize("name", ["population", "metagame", "rated"])
def test_a_damaged_checkpoint_file_is_named_not_its_state_and_the_run_restarts(evolution, tmp_path, name, caplog):
    base, reference = evolution
    out, path = damaged_copy(base, tmp_path, f"checkpoint-{name}-{damage.ITERATIONS:06d}.npz", "truncate")
    code, err = damage.run(damage.command("evolve", damage.ITERATIONS + 1, out))
    assert code == 0, err
    assert caplog.messages[0].startswith(f"{path} was changed after it was written (its checksum does not match")
    assert "restarts from iteration 0" in caplog.messages[0]
    assert outcome(out) == reference


def test_an_edited_record_before_the_checkpoint_is_moved_aside_and_recomputed(tmp_path, caplog):
    base, reference = damage.reference_runs("psro", tmp_path)
    log = base / rundir.LOG
    lines = log.read_text().splitlines(keepends=True)
    edited = json.loads(lines[1])
    edited["meta_value"][0] += 0.25  # still JSON, still a valid record
    log.write_text(lines[0] + json.dumps(edited, sort_keys=True) + "\n" + "".join(lines[2:]))
    code, err = damage.run(damage.command("psro", damage.ITERATIONS + 1, base))
    assert code == 0, err
    assert "line 2: changed after it was written (its checksum does not match)" in caplog.text
    assert outcome(base) == reference
    assert json.loads((base / rundir.DAMAGED).read_text())["meta_value"] == edited["meta_value"]


def test_a_slice_of_the_damage_matrix(evolution, tmp_path):
    """Each kind of file (log, state, checkpoint, configuration, result) and each damage."""
    base, reference = evolution
    slice_ = [(rundir.LOG, "flip"), (rundir.STATE, "flip"), (f"checkpoint-rated-{damage.ITERATIONS:06d}.npz", "flip"),
              (rundir.CONFIG, "truncate"), ("population.npz", "delete")]
    cases = [damage.resume_case("evolve", base, reference, name, kind, tmp_path, seed=0) for name, kind in slice_]
    assert [case.result for case in cases] == ["recovered"] * 3 + ["refused", "recovered"]
