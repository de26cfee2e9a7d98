"""Sampled mode of the Evaluator (issue 24, items 1 and 5): policies kept as the objects they
are (snapshotted on add), no game tree, games exact mode refuses, Ray workers."""

import logging
import re
import os
import signal
import threading

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib

import metaeval
from metaeval import MetaEvalError, games, spiel
from metaeval.distributed import build_metagame, current_pool, last_build
from metaeval.spiel import mode as mode_module

LARGE = "goofspiel(num_cards=8,imp_info=True)"  # exact mode refuses it: about 1.64 TiB
GAME_THEORETIC = ("nash", "alpharank", "deviation", "payoff")


def no_tree(monkeypatch):
    """Make any enumeration of a game tree fail the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the game tree was enumerated")

    monkeypatch.setattr("metaeval.spiel.tree._Enumerator.run", refuse)
    monkeypatch.setattr("metaeval.spiel.tree.estimate_terminals", refuse)


def first_action(state, player):
    """A callable policy: always the lowest legal action."""
    return {state.legal_actions(player)[0]: 1.0}


def object_policies(game, player):
    """Three kinds of object: OpenSpiel's uniform policy, a lazy random one, a callable."""
    return [policy_lib.UniformRandomPolicy(game), spiel.LazyRandomPolicy(game, player, seed=player),
            spiel.CallablePolicy(first_action, game)]


def filled(game, policies, **options):
    evaluator = metaeval.Evaluator(game, mode="sampled", **options)
    for p, player in enumerate(policies):
        for policy in player:
            evaluator.add(p, policy)
    return evaluator


def test_sampled_mode_never_enumerates_the_tree_and_equals_the_reference_sampler(monkeypatch):
    game = games.load("leduc_poker(players=3)")
    policies = [object_policies(game, p) for p in range(3)]
    no_tree(monkeypatch)
    evaluator = filled(game, policies, episodes=20, seed=4)
    built = evaluator.metagame()
    reference = spiel.sampled_metagame(game, spiel.Population(game, policies), episodes=20, seed=4)
    np.testing.assert_array_equal(built.payoffs, reference.payoffs)
    np.testing.assert_array_equal(built.stderr, reference.stderr)
    assert np.all(built.counts == 20)


class Weighted(policy_lib.Policy):
    """A policy whose parameters are an attribute (as a learner's would be)."""

    def __init__(self, game, weights):
        super().__init__(game, list(range(game.num_players())))
        self.weights = weights

    def action_probabilities(self, state, player_id=None):
        legal = state.legal_actions()
        weights = self.weights[legal]
        return dict(zip(legal, weights / weights.sum()))


def mutable_policies(game):
    """A tabular policy, a callable over a closure's array, an object with a weights attribute,
    each of them favouring action 1; and a function that mutates them all to favour action 0."""
    table = policy_lib.TabularPolicy(game)
    table.action_probability_array[:] = [0.1, 0.9]
    closure_weights = np.array([0.1, 0.9])
    callable_policy = spiel.CallablePolicy(lambda state, player: closure_weights, game)
    weighted = Weighted(game, np.array([0.1, 0.9]))

    def mutate():
        table.action_probability_array[:] = [0.9, 0.1]
        closure_weights[:] = [0.9, 0.1]
        weighted.weights[:] = [0.9, 0.1]

    return [table, callable_policy, weighted], mutate


def test_a_policy_mutated_after_add_does_not_change_the_metagame():
    game = games.load("kuhn_2p")
    options = dict(episodes=200, seed=1)
    policies, mutate = mutable_policies(game)
    evaluator = filled(game, [policies, policies], **options)
    mutate()  # e.g. a learner keeps training the objects it added
    after = evaluator.metagame()
    untouched, _ = mutable_policies(game)
    np.testing.assert_array_equal(after.payoffs, filled(game, [untouched, untouched], **options).metagame().payoffs)
    # The mutation does change what the objects play, so the test can tell.
    mutated = filled(game, [policies, policies], **options).metagame()
    assert not np.array_equal(after.payoffs, mutated.payoffs)


def test_what_cannot_be_snapshotted_is_refused_in_one_line():
    game = games.load("kuhn_2p")
    evaluator = metaeval.Evaluator(game, mode="sampled")
    locked = Weighted(game, np.ones(2))
    locked.lock = threading.Lock()
    with pytest.raises(MetaEvalError, match=r"^cannot snapshot the policy Weighted \(copy.deepcopy failed: .*\)"):
        evaluator.add(0, locked)
    with pytest.raises(MetaEvalError, match=r"got function; wrap a function as spiel.CallablePolicy\(fn\)"):
        evaluator.add(0, first_action)
    # a pyspiel tabular policy is copied as its table, keyed by information state
    table = policy_lib.TabularPolicy(game)
    table.action_probability_array[:] = [0.2, 0.8]
    original = policy_lib.python_policy_to_pyspiel_policy(table)
    for p in (0, 1):
        evaluator.add(p, original)
    reference = spiel.sampled_metagame(game, spiel.Population(game, [[original], [original]]), episodes=1000, seed=0)
    np.testing.assert_array_equal(evaluator.metagame().payoffs, reference.payoffs)


def test_auto_mode_samples_what_exact_mode_refuses_and_says_so_in_one_line(caplog):
    mode_module._auto.cache_clear()
    with caplog.at_level(logging.WARNING, logger="metaeval"):
        assert metaeval.Evaluator(LARGE).mode == "sampled"
    [record] = caplog.records
    assert "\n" not in record.message
    assert record.message.startswith(f"metaeval: exact mode refuses {games.load(LARGE)} (enumerating")
    assert record.message.endswith("needs about 1.64 TiB, over the memory budget of 4 GiB); using sampled mode")
    assert metaeval.Evaluator("kuhn_2p").mode == "exact"  # the default where the game can be enumerated
    with pytest.raises(MetaEvalError, match="needs about 1.64 TiB"):
        metaeval.Evaluator(LARGE, mode="exact")


def test_operations_that_walk_the_tree_refuse_in_sampled_mode():
    game = games.load("kuhn_2p")
    evaluator = filled(game, [object_policies(game, p) for p in range(2)], episodes=10)
    sigma = evaluator.meta_distribution("nash")
    calls = {"the full-game CCE gap": lambda: evaluator.gap(sigma),
             "an exact best response": lambda: evaluator.best_response(0, sigma, np.random.default_rng(0)),
             "OpenSpiel's best response": lambda: evaluator.openspiel_best_response(0, sigma),
             "NashConv": evaluator.nash_conv}
    for what, call in calls.items():
        with pytest.raises(MetaEvalError, match=f"^{what} walks the game tree, which sampled mode never builds"):
            call()


def test_callable_answers_are_read_as_mappings_or_action_vectors_and_checked():
    game = games.load("kuhn_2p")
    state = game.new_initial_state()
    state.apply_action(0)
    state.apply_action(1)
    as_vector = spiel.CallablePolicy(lambda s, p: np.array([0.25, 0.75]))
    assert as_vector.action_probabilities(state) == {0: 0.25, 1: 0.75}
    with pytest.raises(MetaEvalError, match=r"sum to 0.5, not 1"):
        spiel.CallablePolicy(lambda s, p: {0: 0.5}).action_probabilities(state)
    with pytest.raises(MetaEvalError, match=r"returned 3 probabilities at '0' \(player 0\)"):
        spiel.CallablePolicy(lambda s, p: [0.2, 0.3, 0.5]).action_probabilities(state)
    after_bet = game.new_initial_state()
    for action in (0, 1, 1):
        after_bet.apply_action(action)
    with pytest.raises(MetaEvalError, match=r"illegal action\(s\) \[2\]"):
        spiel.CallablePolicy(lambda s, p: {0: 0.5, 2: 0.5}).action_probabilities(after_bet)


def test_lazy_random_policies_are_the_same_in_every_copy_and_follow_their_kind():
    game = games.load(LARGE)
    state = game.new_initial_state()
    policy = spiel.LazyRandomPolicy(game, 0, seed=5)
    import pickle

    assert pickle.loads(pickle.dumps(policy)).action_probabilities(state, 0) == policy.action_probabilities(state, 0)
    other = spiel.LazyRandomPolicy(game, 0, seed=6).action_probabilities(state, 0)
    assert other != policy.action_probabilities(state, 0)
    assert set(policy.action_probabilities(state, 0)) == set(state.legal_actions(0))
    deterministic = spiel.LazyRandomPolicy(game, 0, seed=5, kind="deterministic").action_probabilities(state, 0)
    assert sorted(deterministic.values()) == [0.0] * 7 + [1.0]


def test_save_and_load_keep_the_objects(tmp_path):
    game = games.load(LARGE)
    evaluator = filled(game, [object_policies(game, p) for p in range(2)], episodes=4, seed=2)
    built = evaluator.metagame()
    loaded = metaeval.Evaluator.load(evaluator.save(tmp_path / "ev"))
    assert loaded.mode == "sampled" and loaded.ids == evaluator.ids
    fresh = filled(game, [[loaded.policy(p, i) for i in loaded.ids[p]] for p in range(2)], episodes=4, seed=2)
    np.testing.assert_array_equal(fresh.metagame().payoffs, built.payoffs)


def test_a_large_game_on_two_workers_equals_one_and_is_rated_with_intervals(ray_session):
    game = games.load(LARGE)
    policies = [object_policies(game, p) for p in range(2)]
    one = filled(game, policies, episodes=30, seed=7).metagame()
    two = filled(game, policies, episodes=30, seed=7, workers=2).metagame()
    assert last_build().workers == 2 and last_build().evaluated == 9
    np.testing.assert_array_equal(one.payoffs, two.payoffs)
    np.testing.assert_array_equal(one.stderr, two.stderr)
    for rater in GAME_THEORETIC:
        rating = metaeval.rate(two, rater, bootstrap=40, seed=0)
        assert len(rating.intervals) == 2
        for bounds, point in zip(rating.intervals, rating.ratings):
            assert bounds.shape == (3, 2) and np.all(np.isfinite(bounds)) and np.all(bounds[:, 0] <= bounds[:, 1])


def test_a_killed_actor_gives_the_same_metagame_of_object_policies(ray_session):
    game = games.load(LARGE)
    population = spiel.Population(game, [object_policies(game, p) for p in range(2)])
    options = dict(mode="sampled", episodes=60, seed=3)
    build_metagame(game, spiel.Population(game, [object_policies(game, p)[:1] for p in range(2)]),
                   workers=2, **options)
    victims = current_pool().pids()
    killed = []

    def kill_at_first_shard(done, total):
        if not killed:
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            killed.extend(victims)

    survived = build_metagame(game, population, workers=2, progress=kill_at_first_shard, **options)
    assert killed and last_build().retries >= 1
    reference = build_metagame(game, population, **options)
    np.testing.assert_array_equal(survived.payoffs, reference.payoffs)
    np.testing.assert_array_equal(survived.stderr, reference.stderr)
    assert len(current_pool().memory()) == 2
    os.kill(current_pool().pids()[0], signal.SIGKILL)
    assert current_pool().memory() == []  # an actor lost since the build: nothing measured, nothing raised


def test_auto_mode_says_in_one_line_when_it_tabulates_a_policy_by_asking_it(caplog):
    game = games.load("kuhn_2p")
    with caplog.at_level(logging.WARNING, logger="metaeval"):
        explicit = metaeval.Evaluator(game, mode="exact")
        explicit.add(0, spiel.CallablePolicy(first_action))  # exact mode asked for: nothing to say
        auto = metaeval.Evaluator(game)
        auto.add(0, spiel.random_policy(game, 0, np.random.default_rng(0)))  # a table: nothing asked
        assert not caplog.records
        auto.add(1, spiel.CallablePolicy(first_action))
        auto.add(1, policy_lib.UniformRandomPolicy(game))  # said once per evaluator
    [record] = caplog.records
    assert "\n" not in record.message
    assert re.fullmatch(r"metaeval: mode='auto' chose exact mode for kuhn_poker\(players=2\), which keeps each "
                        r"policy as a table: player 1's CallablePolicy was asked at its 6 information states "
                        r"\([0-9.e-]+ s\); mode='sampled' keeps the policy object instead", record.message)
