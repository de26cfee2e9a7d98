"""Spilled MLP weights: written once, read back bit for bit, held within the budget."""

import copy
import os
import pickle

import numpy as np
import pytest

from metaeval.errors import DamagedFileError, MetaEvalError
from metaeval.spiel.mlp import MLPPolicy
from metaeval.spiel.spill import WeightStore, weight_bytes

GAME = "leduc_poker"


def leaves(policy):
    return [leaf for layer in sorted(policy.params) for _, leaf in sorted(policy.params[layer].items())]


def test_spilled_weights_come_back_bit_identical(tmp_path):
    original = MLPPolicy(GAME, 1, seed=5)
    store = WeightStore(tmp_path, budget=0)  # nothing stays in memory beyond the last one asked
    spilled = store.spill(original)
    store.spill(MLPPolicy(GAME, 1, seed=6)).weights  # evicts the first
    assert spilled.path not in store.cache.loaded
    back = spilled.weights
    assert store.cache.reads == 1  # read back from its file
    assert back is not original
    for a, b in zip(leaves(original), leaves(back), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    rng = np.random.default_rng(0)
    observations = rng.random((7, 30)).astype(np.float32)
    legal = rng.random((7, 3)) < 0.7
    legal[:, 0] = True
    assert np.array_equal(spilled.batch_probabilities(observations, legal),
                          original.batch_probabilities(observations, legal))


def test_the_cache_holds_at_most_the_budget(tmp_path):
    one = weight_bytes(MLPPolicy(GAME, 0, seed=0))
    store = WeightStore(tmp_path, budget=3 * one)
    spilled = [store.spill(MLPPolicy(GAME, 0, seed=i)) for i in range(8)]
    for policy in spilled:
        policy.weights
        assert store.cache.held <= 3 * one
    assert list(store.cache.loaded) == [p.path for p in spilled[-3:]]


def test_a_spilled_policy_pickles_as_its_file_and_is_its_own_snapshot(tmp_path):
    spilled = WeightStore(tmp_path, budget=1 << 20).spill(MLPPolicy(GAME, 0, seed=2))
    assert copy.deepcopy(spilled) is spilled
    data = pickle.dumps(spilled)
    assert len(data) < 2_000  # no weights (about 25 KB) in it
    again = pickle.loads(data)
    assert again.path == spilled.path
    assert all(a.tobytes() == b.tobytes() for a, b in zip(leaves(again.weights), leaves(spilled.weights)))


def test_bad_input_is_refused_in_one_line(tmp_path):
    with pytest.raises(MetaEvalError, match="budget must be"):
        WeightStore(tmp_path, budget=-1)
    with pytest.raises(MetaEvalError, match="only MLP policies"):
        WeightStore(tmp_path, budget=0).spill(object())


def test_a_file_cut_short_or_missing_is_named_in_one_line(tmp_path):
    store = WeightStore(tmp_path, budget=0)
    cut, gone = store.spill(MLPPolicy(GAME, 0, seed=1)), store.spill(MLPPolicy(GAME, 0, seed=2))
    store.spill(MLPPolicy(GAME, 0, seed=3))  # evicts both
    with open(cut.path, "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(DamagedFileError, match=r"policy-000000\.bin hold 100 bytes"):
        cut.weights
    os.remove(gone.path)
    with pytest.raises(DamagedFileError, match=r"policy-000001\.bin cannot be read"):
        gone.weights
