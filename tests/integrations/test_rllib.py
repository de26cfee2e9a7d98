"""The RLlib league callback: tables of RLlib modules, snapshots that stay what they were,
a league capped by rating, and metaeval's keys in RLlib's result dicts (a short PPO run)."""

import hashlib
import re

import numpy as np
import pytest

from metaeval.errors import MetaEvalError
from metaeval.integrations.rllib import PREFIX, League, LeagueCallback, Matchmaker, module_table
from metaeval.integrations.tune import content_hash
from metaeval.spiel.tree import game_tree


@pytest.mark.parametrize("settings, message", [
    (dict(capacity=1), "capacity must be an int of at least 2"),
    (dict(every=0), "every must be an int of at least 1"),
    (dict(rater="best"), "unknown rater 'best'"),
    (dict(matchmaking="strongest"), "unknown matchmaking 'strongest'"),
    (dict(game="kuhn_3p"), "2-player games; kuhn_3p has 3 players"),
])
def test_bad_settings_are_one_line_errors(settings, message):
    with pytest.raises(MetaEvalError, match=message):
        League(**{"game": "kuhn_poker", **settings})


class Logits:
    """A stand-in RLlib module: fixed logits at every observation."""

    def __init__(self, logits):
        self.logits = np.asarray(logits, dtype=np.float32)

    def forward_inference(self, batch):
        torch = pytest.importorskip("torch")
        return {"action_dist_inputs": torch.from_numpy(np.tile(self.logits, (len(batch["obs"]), 1)))}


def test_a_module_table_is_its_softmax_with_illegal_mass_spread_over_the_legal_actions():
    pytest.importorskip("torch")
    layout = game_tree("leduc_poker").players[0]
    table = module_table(Logits([0.0, np.log(2.0), np.log(5.0)]), layout, 0)  # fold, call, raise: 1/8, 2/8, 5/8
    legal = layout.legal
    np.testing.assert_allclose(table.sum(axis=1), 1.0)
    assert np.all(table[~legal] == 0)
    everything = legal.all(axis=1)
    np.testing.assert_allclose(table[everything], np.tile([1 / 8, 2 / 8, 5 / 8], (everything.sum(), 1)))
    no_raise = legal[:, :2].all(axis=1) & ~legal[:, 2]  # the raise's 5/8 goes half to fold, half to call
    np.testing.assert_allclose(table[no_raise][:, :2], np.tile([1 / 8 + 5 / 16, 2 / 8 + 5 / 16], (no_raise.sum(), 1)))


class Episode:
    def __init__(self, id_):
        self.id_ = id_


def test_the_matchmaker_gives_each_episode_one_seat_to_main_and_draws_the_other_by_its_weights():
    matchmaker = Matchmaker("main", [["a", "b"], ["a", "b"]], [np.array([0.25, 0.75]), np.array([1.0, 0.0])], 0, 1)
    seats, opponents = [], {0: [], 1: []}
    for episode in map(Episode, range(4000)):
        mapped = [matchmaker(agent, episode) for agent in (0, 1)]
        assert mapped.count("main") == 1
        seat = mapped.index("main")
        seats.append(seat)
        opponents[seat].append(mapped[1 - seat])
    assert not matchmaker.drawn  # nothing kept once both seats are mapped
    assert abs(np.mean(seats) - 0.5) < 0.05
    assert abs(np.mean(np.array(opponents[0]) == "b") - 0.75) < 0.05
    assert set(opponents[1]) == {"a"}
    first, second = (Matchmaker("main", [["a", "b"]] * 2, [np.array([0.5, 0.5])] * 2, 7, 2) for _ in range(2))
    assert [first(0, e) for e in map(Episode, range(50))] == [second(0, e) for e in map(Episode, range(50))]  # seeded


def weights_of(algorithm, module_id):
    """The module's weights in the learner and in the local env runner (copies)."""
    learner = algorithm.learner_group.get_weights(module_ids=[module_id])[module_id]
    runner = algorithm.get_module(module_id).get_state(inference_only=True)
    return ({k: np.array(v, copy=True) for k, v in learner.items()},
            {k: np.array(v, copy=True) for k, v in runner.items()})


def same(a, b):
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_league_run_keeps_its_snapshots_caps_its_league_and_reports_ratings(ray_session):
    pytest.importorskip("ray.rllib")
    pytest.importorskip("torch")
    from examples.rllib_league import build

    league = League(game="kuhn_poker", capacity=3, exploitability=True, seed=0)
    algorithm = build(league, batch=200, hidden=16)
    try:
        callback = LeagueCallback.of(algorithm)
        added = {}  # per member: its weights (learner, env runner) and tables when it joined

        def record_newest():
            newest = callback.members[-1]
            ids = [callback.evaluator.ids[p][-1] for p in range(2)]
            tables = [callback.evaluator.policy(p, i).action_probability_array.copy() for p, i in enumerate(ids)]
            added.setdefault(newest, (weights_of(algorithm, newest), tables))

        record_newest()
        first = callback.members[0]
        results = []
        for _ in range(5):
            results.append(algorithm.train())
            record_newest()
        main_now = weights_of(algorithm, league.main)[0]
        assert not same(main_now, added[first][0][0])  # the live weights did change
        for member in callback.members:  # every member is still exactly what it was when it joined
            (learner, runner), tables = added[member]
            assert same(weights_of(algorithm, member)[0], learner) and same(weights_of(algorithm, member)[1], runner)
            ids = [callback.evaluator.ids[p][callback.members.index(member)] for p in range(2)]
            now = [callback.evaluator.policy(p, i).action_probability_array for p, i in enumerate(ids)]
            assert all(np.array_equal(a, b) for a, b in zip(now, tables))
            assert member == PREFIX + hashlib.sha256("".join(content_hash(t) for t in tables).encode()).hexdigest()[:16]
        assert len(added) == 6 and len(callback.members) == league.capacity  # 6 snapshots, capped at 3
        modules = set(algorithm.learner_group.get_weights())
        assert modules == {league.main, *callback.members} == set(algorithm.env_runner.module.keys())
        for result in results:
            assert {"metaeval_rating", "metaeval_league_size", "metaeval_ratings", "exploitability"} <= set(result)
            assert result["metaeval_league_size"] <= league.capacity and np.isfinite(result["metaeval_rating"])
        assert list(results[-1]["metaeval_ratings"]) == callback.members
        mean = np.mean(callback.evaluator.rate("deviation").ratings, axis=0)
        assert results[-1]["metaeval_ratings"] == {m: pytest.approx(r) for m, r in zip(callback.members, mean)}
        assert results[-1]["exploitability"] == pytest.approx(callback.evaluator.exploitability())
        mapping = algorithm.env_runner.config.policy_mapping_fn
        assert isinstance(mapping, Matchmaker) and mapping.members == [callback.members] * 2
        assert all(np.isclose(w.sum(), 1) for w in mapping.weights)
    finally:
        algorithm.stop()


def test_the_example_prints_its_league_and_the_memory_a_snapshot_adds(ray_session, capsys):
    pytest.importorskip("ray.rllib")
    pytest.importorskip("torch")
    from examples import rllib_league

    records = rllib_league.main(["--game", "kuhn_poker", "--iterations", "5", "--capacity", "2", "--batch", "200"])
    out = capsys.readouterr().out
    assert [r["league_size"] for r in records] == [2] * 5 and [r["iteration"] for r in records] == [1, 2, 3, 4, 5]
    assert all(r["exploitability"] >= 0 and r["memory"] > 0 for r in records)
    assert len(re.findall(r"iteration \d+: league 2, newest snapshot's rating -?[\d.]+, exploitability", out)) == 5
    assert re.search(r"memory added per snapshot with the league full: -?\d+ KiB", out)
