import numpy as np
import pytest

from metaeval.runs.fileio import atomic_savez


class Unconvertible:
    """An object numpy fails to turn into an array, so the write fails midway."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("cannot convert")


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = atomic_savez(tmp_path / "data.npz", a=np.arange(3))
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="cannot convert"):
        atomic_savez(path, a=np.zeros(2), b=Unconvertible())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["data.npz"]
    with np.load(path) as data:
        np.testing.assert_array_equal(data["a"], np.arange(3))
