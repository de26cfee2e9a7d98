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


def saved_archives(directory):
    """``(path, loader)`` of each kind of archive metaeval writes and reads back."""
    from metaeval import Evaluator, MetaGame, games
    from metaeval.spiel import Population
    from metaeval.spiel.mlp import MLPPolicy
    from metaeval.training import members
    from metaeval.training.learners import QLearning

    game = games.load("kuhn_poker")
    tables, objects = directory / "tables.npz", directory / "objects.npz"
    Population.random(game, 2, seed=0).save(tables)
    Population.random(game, 2, seed=0, lazy=True).save(objects, tables=False)
    metagame = MetaGame(np.arange(8.0).reshape(2, 2, 2)).save(directory / "metagame.npz")
    policy = directory / "mlp.npz"
    MLPPolicy(game, 0, hidden=(4,)).save(policy)
    values = directory / "values.npz"
    learner = QLearning()
    members.save(values, [[members.Member(learner, learner.initial_values(game, p))] for p in range(2)])
    evaluator = Evaluator(game, population=Population.random(game, 2, seed=1)).save(directory / "evaluator")
    return [(tables, Population.load), (objects, Population.load), (metagame, MetaGame.load),
            (policy, MLPPolicy.load), (values, lambda path: members.load(path, [[learner], [learner]])),
            (evaluator / "population-000000.npz", lambda path: Evaluator.load(path.parent))]


def test_every_archive_damaged_anywhere_loads_or_is_refused_in_one_line_naming_it(tmp_path):
    """A flipped byte (at 40 seeded places) or a cut (at four) in each kind of archive either
    leaves it readable (a byte the archive does not check, such as a date) or is refused in
    one line naming the file: never numpy's or zipfile's own exceptions."""
    from metaeval.errors import MetaEvalError

    rng = np.random.default_rng(0)
    refused = 0
    for path, load in saved_archives(tmp_path):
        original = path.read_bytes()
        damaged = [original[:len(original) * k // 4] for k in range(4)]
        for position in rng.integers(len(original), size=40):
            flipped = bytearray(original)
            flipped[position] ^= 1
            damaged.append(bytes(flipped))
        for content in damaged:
            path.write_bytes(content)
            try:
                load(path)
            except MetaEvalError as exc:
                assert str(path) in str(exc) and "\n" not in str(exc), exc
                refused += 1
        path.write_bytes(original)
    assert refused > 6 * 4  # every cut at least
