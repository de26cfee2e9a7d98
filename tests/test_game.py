import numpy as np
import pytest

from metaeval import MetaEvalError, MetaGame


def test_shape_and_default_names():
    g = MetaGame(np.zeros((3, 2, 3, 4)))
    assert g.num_players == 3 and g.shape == (2, 3, 4) and g.num_joints == 24
    assert g.strategy_names[2] == ("p2s0", "p2s1", "p2s2", "p2s3")
    assert g.player_names == ("player 0", "player 1", "player 2")


def test_payoffs_are_read_only_copies():
    raw = np.zeros((2, 2, 2))
    g = MetaGame(raw)
    raw[0, 0, 0] = 5
    assert g.payoffs[0, 0, 0] == 0
    with pytest.raises(ValueError):
        g.payoffs[0, 0, 0] = 1


@pytest.mark.parametrize(
    "payoffs, message",
    [
        (np.array([[[np.nan, 0], [0, 0]], [[0, 0], [0, 0]]]), "finite"),
        (np.array([[[np.inf, 0], [0, 0]], [[0, 0], [0, 0]]]), "finite"),
        (np.zeros((2, 3)), "rank"),
        (np.zeros((3, 2, 2)), "rank must be 4"),
        (np.zeros((2, 0, 3)), "0 strategies"),
        (np.zeros(4), "rank"),
        ([["a", "b"]], "numeric"),
    ],
)
def test_bad_payoffs_raise_clear_errors(payoffs, message):
    with pytest.raises(MetaEvalError, match=message):
        MetaGame(payoffs)


def test_mismatched_names_raise():
    with pytest.raises(MetaEvalError, match=r"strategy_names\[1\] has 2 names but player 1 has 3"):
        MetaGame(np.zeros((2, 2, 3)), strategy_names=[["a", "b"], ["x", "y"]])
    with pytest.raises(MetaEvalError, match="player_names has 3 names"):
        MetaGame(np.zeros((2, 2, 3)), player_names=["a", "b", "c"])
    with pytest.raises(MetaEvalError, match="strategy_names has 1 lists"):
        MetaGame(np.zeros((2, 2, 3)), strategy_names=[["a", "b"]])


def test_counts_and_stderr_validated():
    with pytest.raises(MetaEvalError, match="counts must have shape"):
        MetaGame(np.zeros((2, 2, 3)), counts=np.ones((3, 2)))
    with pytest.raises(MetaEvalError, match="stderr must be finite and non-negative"):
        MetaGame(np.zeros((2, 2, 2)), stderr=-np.ones((2, 2, 2)))


def test_from_matrix_zero_sum_and_symmetric():
    rps = MetaGame.from_matrix([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    assert rps.is_zero_sum() and rps.is_symmetric()
    assert not MetaGame.from_matrix([[0, 2], [1, 0]]).is_symmetric()
    with pytest.raises(MetaEvalError, match="differ in shape"):
        MetaGame.from_matrix(np.zeros((2, 2)), np.zeros((2, 3)))


def test_symmetric_three_player():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(3, 3, 3))  # player 0's payoff; others by permutation
    payoffs = np.stack([base, base.transpose(1, 0, 2), base.transpose(2, 1, 0)])
    # u_1(a0, a1, a2) = base(a1, a0, a2), u_2(a0, a1, a2) = base(a2, a1, a0)
    # is symmetric only if base is symmetric in its last two arguments.
    base = base + base.transpose(0, 2, 1)
    payoffs = np.stack([base, base.transpose(1, 0, 2), base.transpose(2, 1, 0)])
    assert MetaGame(payoffs).is_symmetric()
    payoffs[0, 0, 1, 2] += 1
    assert not MetaGame(payoffs).is_symmetric()


def test_restrict_and_add_clone(rng):
    g = MetaGame(rng.normal(size=(2, 3, 4)), counts=np.ones((3, 4)), stderr=np.ones((2, 3, 4)))
    sub = g.restrict({1: [3, 0]})
    np.testing.assert_array_equal(sub.payoffs, g.payoffs[:, :, [3, 0]])
    assert sub.strategy_names[1] == ("p1s3", "p1s0") and sub.counts.shape == (3, 2)
    with pytest.raises(MetaEvalError, match="out of range"):
        g.restrict({0: [5]})
    with pytest.raises(MetaEvalError, match="keep 0 strategies"):
        g.restrict({0: []})
    cloned = g.add_clone(1, 2)
    assert cloned.shape == (3, 5)
    np.testing.assert_array_equal(cloned.payoffs[:, :, 4], g.payoffs[:, :, 2])
    assert cloned.strategy_names[1][-1] == "p1s2 (clone)"
    assert cloned.stderr.shape == (2, 3, 5)
    with pytest.raises(MetaEvalError, match="no index 9"):
        g.add_clone(0, 9)


def test_save_load_round_trip(tmp_path, rng):
    g = MetaGame(rng.normal(size=(3, 2, 3, 2)), player_names=["a", "b", "c"], counts=np.ones((2, 3, 2)))
    loaded = MetaGame.load(g.save(tmp_path / "g.npz"))
    np.testing.assert_array_equal(loaded.payoffs, g.payoffs)
    assert loaded.player_names == g.player_names and loaded.strategy_names == g.strategy_names
    np.save(tmp_path / "bare.npy", g.payoffs)
    np.testing.assert_array_equal(MetaGame.load(tmp_path / "bare.npy").payoffs, g.payoffs)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(MetaEvalError, match="cannot read"):
        MetaGame.load(tmp_path / "junk.npz")


def _resave(path, **changes):
    """Rewrite the saved game at ``path`` with some arrays replaced (None: removed)."""
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    for name, value in changes.items():
        if value is None:
            arrays.pop(name)
        else:
            arrays[name] = value
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(meta=np.array("{not json")), "'meta' entry is not valid JSON"),
        (dict(meta=np.array("[1, 2]")), "'meta' entry must be a JSON object, got list"),
        (dict(meta=np.array('{"player_names": ["a", "b"]}')), "'meta' entry lacks strategy_names$"),
        (dict(meta=np.array("{}")), "'meta' entry lacks strategy_names and player_names"),
        (dict(meta=np.array('{"strategy_names": "ab", "player_names": ["a", "b"]}')), "one list per player"),
        (dict(meta=np.array('{"strategy_names": [["x"], ["y"]], "player_names": "ab"}')), "must be a list"),
        (dict(payoffs=None), r"has no 'payoffs' array \(found \['meta'\]\)"),
    ],
)
def test_load_rejects_corrupt_or_incomplete_files(tmp_path, changes, message):
    path = MetaGame(np.zeros((2, 1, 1))).save(tmp_path / "g.npz")
    _resave(path, **changes)
    with pytest.raises(MetaEvalError, match=message):
        MetaGame.load(path)


def test_load_rejects_truncated_and_missing_files(tmp_path):
    path = MetaGame(np.arange(16.0).reshape(2, 2, 4)).save(tmp_path / "g.npz")
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    with pytest.raises(MetaEvalError, match="cannot read a meta-game from"):
        MetaGame.load(path)
    with pytest.raises(MetaEvalError, match="cannot read a meta-game from"):
        MetaGame.load(tmp_path / "missing.npz")


def test_save_writes_exactly_the_path_given_and_replaces_it(tmp_path):
    path = tmp_path / "game"  # no suffix: none is added
    assert MetaGame(np.zeros((2, 2, 2))).save(path) == path
    assert MetaGame(np.ones((2, 3, 3))).save(path) == path
    assert MetaGame.load(path).shape == (3, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["game"]
