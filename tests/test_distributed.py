"""Distributed meta-game builds: Ray pool vs in-process, determinism, incremental
builds, fault tolerance, and a clean Ray lifecycle (issue: distributed evaluation)."""

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as policy_lib

from metaeval import Evaluator, MetaEvalError, MetaGame, games, spiel
from metaeval.distributed import build_metagame, cce_gap, current_pool, last_build, shutdown
from metaeval.distributed.evaluator import ShardEvaluator, contract
from metaeval.distributed.registry import PolicyRegistry
from tests.distributed.processes import descendants, live_processes, still_alive
from tests.failing_policy import FailingPolicy
from metaeval.spiel.tree import game_tree


@pytest.fixture(scope="module")
def kuhn():
    return games.load("kuhn_3p")


def _replace_two(population, seed):
    for player in range(population.num_players):
        population = population.replace_random(player, [0, 2], seed=seed)
    return population


def _same_game(a: MetaGame, b: MetaGame):
    """Bit-for-bit equality of payoffs, names and statistics."""
    assert np.array_equal(a.payoffs, b.payoffs)
    assert a.strategy_names == b.strategy_names and a.player_names == b.player_names
    for x, y in ((a.counts, b.counts), (a.stderr, b.stderr)):
        assert (x is None) == (y is None)
        if x is not None:
            assert np.array_equal(x, y)


# -- processes (read from /proc, so the checks need no extra package) ----------------
def _pids_alive(pids):
    table = live_processes()
    return [pid for pid in pids if pid in table]


# -- exact entries are shard-invariant ---------------------------------------------
@pytest.mark.parametrize("name", ["kuhn_3p", "kuhn_4p"])
def test_exact_entries_do_not_depend_on_the_shard(name, monkeypatch):
    """An entry's bits depend only on its own joint: same values alone, in any split,
    in any order, and across chunk boundaries."""
    game = games.load(name)
    population = spiel.Population.random(game, 3, seed=7)
    evaluator = spiel.ExactEvaluator(game)
    reaches = [evaluator.reach_matrix(p, population.policies[p]).T.copy() for p in range(game.num_players())]
    weights = np.ascontiguousarray((evaluator.tree.chance[:, None] * evaluator.tree.returns).T)
    joints = np.argwhere(np.ones(population.sizes, dtype=bool))
    whole = contract(reaches, joints, weights)
    singles = np.concatenate([contract(reaches, joints[i : i + 1], weights) for i in range(len(joints))])
    assert np.array_equal(whole, singles)
    order = np.random.default_rng(0).permutation(len(joints))
    shuffled = np.empty_like(whole)
    for part in np.array_split(order, 5):
        shuffled[part] = contract(reaches, joints[part], weights)
    assert np.array_equal(whole, shuffled)
    monkeypatch.setattr("metaeval.distributed.evaluator.CHUNK_ELEMENTS", 3 * evaluator.tree.num_terminals)
    assert np.array_equal(contract(reaches, joints, weights), whole)
    # and they are the expected returns (maths, section 3), checked on a few joints
    policies = spiel.pyspiel_policies(population)
    for joint in joints[:: max(1, len(joints) // 4)]:
        profile = [policies[p][i] for p, i in enumerate(joint)]
        expected = pyspiel.expected_returns(game.new_initial_state(), profile, -1, True)
        row = np.flatnonzero((joints == joint).all(axis=1))[0]
        np.testing.assert_allclose(whole[row], expected, rtol=0, atol=1e-12)


def test_in_process_exact_build_matches_the_spiel_meta_game(kuhn):
    population = spiel.Population.random(kuhn, 4, seed=1)
    built = build_metagame(kuhn, population)
    reference = spiel.exact_metagame(kuhn, population)
    np.testing.assert_allclose(built.payoffs, reference.payoffs, rtol=0, atol=1e-12)
    assert built.strategy_names == reference.strategy_names
    assert built.player_names == reference.player_names
    assert built.counts is None and built.stderr is None
    stats = last_build()
    assert (stats.workers, stats.entries, stats.evaluated, stats.copied) == (0, 64, 64, 0)


def test_in_process_build_never_imports_ray():
    """Importing the module and building with one worker leave Ray alone."""
    script = textwrap.dedent("""
        import sys
        from metaeval import games, spiel
        from metaeval.distributed import build_metagame
        game = games.load("kuhn_2p")
        build_metagame(game, spiel.Population.random(game, 2, seed=0))
        build_metagame(game, spiel.Population.random(game, 2, seed=0), mode="sampled", episodes=4)
        print("ray" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


# -- incremental builds --------------------------------------------------------------
def _counting(monkeypatch):
    """Record the policy ids of every joint the in-process evaluator evaluates."""
    seen = []
    original = ShardEvaluator.evaluate

    def evaluate(self, task, timeout=None, advance=None):
        seen.extend(tuple(int(i) for i in ids) for ids in task.ids)
        return original(self, task, timeout, advance)

    monkeypatch.setattr(ShardEvaluator, "evaluate", evaluate)
    return seen


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_only_joints_touching_new_policies_are_evaluated(kuhn, mode, monkeypatch, tmp_path):
    options = dict(mode=mode, episodes=6, seed=3)
    population = spiel.Population.random(kuhn, 4, seed=2)
    first = build_metagame(kuhn, population, **options)
    seen = _counting(monkeypatch)
    replaced = _replace_two(population, seed=11)
    second = build_metagame(kuhn, replaced, previous=first, **options)
    new_ids = [set(now) - set(before) for now, before in zip(replaced.ids, population.ids)]
    expected = {
        ids
        for ids in np.ndindex(*replaced.sizes)
        for ids in [tuple(replaced.ids[p][i] for p, i in enumerate(ids))]
        if any(ids[p] in new_ids[p] for p in range(3))
    }
    assert len(seen) == len(set(seen)) == 64 - 8 and set(seen) == expected
    stats = last_build()
    assert (stats.evaluated, stats.copied, stats.entries) == (56, 8, 64)
    # copied entries equal fresh ones bit for bit, also with a previous game and a
    # population read back from disk (no reliance on in-memory caches)
    fresh = build_metagame(kuhn, replaced, **options)
    _same_game(second, fresh)
    first.save(tmp_path / "first.npz")
    replaced.save(tmp_path / "population.npz")
    reloaded = build_metagame(
        kuhn, spiel.Population.load(tmp_path / "population.npz"), previous=MetaGame.load(tmp_path / "first.npz"), **options
    )
    _same_game(reloaded, fresh)
    # nothing new: nothing evaluated
    seen.clear()
    again = build_metagame(kuhn, replaced, previous=second, **options)
    assert seen == [] and last_build().evaluated == 0 and last_build().shards == 0
    _same_game(again, second)


def test_registry_tokens_follow_policy_objects(kuhn):
    registry = PolicyRegistry()
    population = spiel.Population.random(kuhn, 2, seed=0)
    first = registry.sync(population)
    assert len(first.added) == 6 and first.dropped == []
    same = registry.sync(population)
    assert same.tokens == first.tokens and not same.added and not same.dropped
    replaced = population.replace_random(1, [0], seed=5)
    step = registry.sync(replaced)
    assert step.tokens[0] == first.tokens[0] and step.tokens[1][1] == first.tokens[1][1]
    assert step.dropped == [first.tokens[1][0]] and list(step.added) == [step.tokens[1][0]]
    # another lineage reusing ids with other objects gets new tokens
    other = registry.sync(spiel.Population.random(kuhn, 2, seed=1))
    assert set(other.dropped) == {t for player in step.tokens for t in player}
    assert not {t for player in other.tokens for t in player} & set(other.dropped)


# -- bad input -----------------------------------------------------------------------
def test_bad_arguments_raise(kuhn):
    population = spiel.Population.random(kuhn, 2, seed=0)
    cases = [
        (dict(mode="fast"), "mode must be one of exact, sampled"),
        (dict(workers=0), "workers must be an int of at least 1"),
        (dict(workers=2.0), "workers must be an int"),
        (dict(seed=-1), "seed must be an int of at least 0"),
        (dict(max_retries=-1), "max_retries must be"),
        (dict(shard_timeout=0), "shard_timeout must be a positive number of seconds, got 0"),
        (dict(shard_timeout=float("inf")), "shard_timeout must be a positive number"),
        (dict(shard_timeout="60"), "shard_timeout must be a positive number"),
        (dict(mode="sampled", episodes=1), "episodes must be an int of at least 2"),
    ]
    for options, message in cases:
        with pytest.raises(MetaEvalError, match=message):
            build_metagame(kuhn, population, **options)
    with pytest.raises(MetaEvalError, match="population is for"):
        build_metagame(games.load("kuhn_2p"), population)


def test_unusable_previous_games_raise(kuhn):
    population = spiel.Population.random(kuhn, 2, seed=0)
    exact = build_metagame(kuhn, population)
    sampled = build_metagame(kuhn, population, mode="sampled", episodes=4)
    with pytest.raises(MetaEvalError, match="was sampled; an exact build cannot reuse"):
        build_metagame(kuhn, population, previous=sampled)
    with pytest.raises(MetaEvalError, match="no counts/standard errors"):
        build_metagame(kuhn, population, mode="sampled", episodes=4, previous=exact)
    with pytest.raises(MetaEvalError, match=r"entries from \[4\] episodes; this build asks for 8"):
        build_metagame(kuhn, population, mode="sampled", episodes=8, previous=sampled)
    other = build_metagame(games.load("kuhn_2p"), spiel.Population.random("kuhn_2p", 2, seed=0))
    with pytest.raises(MetaEvalError, match="not from this game"):
        build_metagame(kuhn, population, previous=other)
    names = [list(n) for n in exact.strategy_names]
    names[1][1] = names[1][0]
    repeated = MetaGame(exact.payoffs, strategy_names=names, player_names=exact.player_names)
    with pytest.raises(MetaEvalError, match="repeats a strategy name of player 1"):
        build_metagame(kuhn, population, previous=repeated)


def test_progress_counts_episodes(kuhn, capsys):
    population = spiel.Population.random(kuhn, 3, seed=0)
    calls = []
    build_metagame(kuhn, population, mode="sampled", episodes=2, progress=lambda *a: calls.append(a))
    assert calls[-1] == (54, 54) and [d for d, _ in calls] == sorted(d for d, _ in calls)
    build_metagame(kuhn, population)  # default: nothing when not on a terminal
    assert capsys.readouterr().err == ""


# -- the Ray pool ----------------------------------------------------------------------
def test_pool_exact_build_equals_in_process_bit_for_bit(kuhn, ray_session):
    population = spiel.Population.random(kuhn, 8, seed=4)
    local = build_metagame(kuhn, population)
    pooled = build_metagame(kuhn, population, workers=2)
    _same_game(pooled, local)
    stats = last_build()
    assert (stats.workers, stats.evaluated, stats.shards) == (2, 512, 2)
    # incremental on the pool: only the new slices, still identical
    replaced = _replace_two(population, seed=9)
    pooled_next = build_metagame(kuhn, replaced, workers=2, previous=pooled)
    assert (last_build().evaluated, last_build().copied) == (512 - 6**3, 6**3)
    _same_game(pooled_next, build_metagame(kuhn, replaced))


def test_sampled_build_is_identical_for_1_2_and_3_workers(kuhn, ray_session):
    population = spiel.Population.random(kuhn, 3, seed=5)
    options = dict(mode="sampled", episodes=30, seed=17)
    builds = {w: build_metagame(kuhn, population, workers=w, **options) for w in (1, 2, 3)}
    assert last_build().workers == 3
    _same_game(builds[1], builds[2])
    _same_game(builds[1], builds[3])
    _same_game(builds[1], spiel.sampled_metagame(kuhn, population, episodes=30, seed=17))
    assert np.all(builds[1].counts == 30) and np.all(builds[1].stderr > 0)
    other_seed = build_metagame(kuhn, population, mode="sampled", episodes=30, seed=18)
    assert not np.array_equal(other_seed.payoffs, builds[1].payoffs)


def test_neural_policies_give_the_same_sampled_game_on_any_workers_and_batch_size(kuhn, ray_session):
    from metaeval.spiel.mlp import MLPPolicy

    policies = [[MLPPolicy(kuhn, p, seed=10 * p + i, hidden=(8,)) for i in range(2)] for p in range(3)]
    population = spiel.Population(kuhn, policies)
    options = dict(mode="sampled", episodes=40, seed=3)
    one_by_one = build_metagame(kuhn, population, batch_size=None, **options)
    assert np.all(one_by_one.stderr > 0)
    _same_game(build_metagame(kuhn, population, **options), one_by_one)
    _same_game(build_metagame(kuhn, population, workers=2, batch_size=7, **options), one_by_one)
    assert last_build().workers == 2


def test_killed_actors_are_replaced_and_the_game_is_complete(kuhn, ray_session):
    options = dict(mode="sampled", episodes=150, seed=1)
    population = spiel.Population.random(kuhn, 4, seed=6)
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2, **options)
    victims = current_pool().pids()
    killed = []

    def kill_at_first_shard(done, total):
        if not killed:  # the other actor is mid-shard; this one gets its next shard
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            killed.extend(victims)

    survived = build_metagame(kuhn, population, workers=2, progress=kill_at_first_shard, **options)
    stats = last_build()
    assert killed and stats.retries >= 1 and stats.evaluated == 64
    assert not set(current_pool().pids()) & set(victims) and not _pids_alive(victims)
    _same_game(survived, build_metagame(kuhn, population, **options))


def _with_failing_policy(population, marker, once, hang=False):
    policies = [list(p) for p in population.policies]
    policies[0][1] = FailingPolicy(policies[0][1], marker, once, hang)
    return spiel.Population(population.game, policies, population.ids)


def test_a_policy_that_raises_fails_the_build_at_once_with_its_own_message(kuhn, ray_session, tmp_path):
    """Issue 27.8: a deterministic error used to be retried on fresh actors (four times by
    default, 19.9 s); it is reported at once. The policy here would succeed on a second call,
    so a build that retried it would succeed: this one must fail."""
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2, mode="sampled", episodes=4)
    population = _with_failing_policy(spiel.Population.random(kuhn, 3, seed=8), tmp_path / "marker", once=True)
    start = time.monotonic()
    with pytest.raises(MetaEvalError) as raised:
        build_metagame(kuhn, population, mode="sampled", episodes=4, workers=2)
    elapsed = time.monotonic() - start
    message = str(raised.value)
    assert "\n" not in message
    assert re.fullmatch(r"shard \d+ of \d+ \(policy ids .*entries\): policy ids \(1, \d+, \d+\): "
                        r"the policy of player 0 failed: RuntimeError: this policy failed on purpose", message), message
    assert (tmp_path / "marker").exists()  # the one call that failed
    assert elapsed < 60, elapsed  # no retries on fresh actors (each costs an actor start)
    assert current_pool() is None  # the failed pool was torn down; the next build starts afresh
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2)
    assert last_build().evaluated == 8


def test_a_raising_policy_fails_an_in_process_build_in_one_line(kuhn, tmp_path):
    population = _with_failing_policy(spiel.Population.random(kuhn, 3, seed=8), tmp_path / "never", once=False)
    with pytest.raises(MetaEvalError, match=r"^policy ids \(1, 0, 0\): the policy of player 0 failed: "
                       r"RuntimeError: this policy failed on purpose$"):
        build_metagame(kuhn, population, mode="sampled", episodes=4)


def test_a_hung_shard_times_out_and_is_retried_on_a_fresh_actor(kuhn, ray_session, tmp_path):
    options = dict(mode="sampled", episodes=10, seed=2)
    population = spiel.Population.random(kuhn, 3, seed=8)
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2, **options)  # actors up
    table = live_processes()
    actors = [(pid, table[pid][1]) for pid in current_pool().pids()]
    hanging = _with_failing_policy(population, tmp_path / "marker", once=True, hang=True)
    start = time.monotonic()
    # 30 s: with 15, a fresh actor's first shard overran four times in a row on a 2-core
    # machine running two study jobs beside the test suite.
    built = build_metagame(kuhn, hanging, workers=2, shard_timeout=30, **options)
    assert time.monotonic() - start < 300  # far less than the ten minutes the policy sleeps
    assert (tmp_path / "marker").exists() and last_build().retries >= 1
    replaced = [actor for actor in actors if actor[0] not in current_pool().pids()]
    assert replaced and still_alive(replaced) == []  # the hung actor was killed
    _same_game(built, build_metagame(kuhn, population, **options))


def test_an_actor_that_does_not_start_in_time_fails_the_build(kuhn, ray_session, monkeypatch):
    shutdown()  # the next build starts fresh actors
    monkeypatch.setattr("metaeval.distributed.pool.ACTOR_START_TIMEOUT", 1e-4)
    with pytest.raises(MetaEvalError, match=r"a Ray actor for kuhn_poker\(players=3\) did not start within 0.0001 s"):
        build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2)
    assert current_pool() is None


class _Unpicklable(policy_lib.Policy):
    """A policy ``copy.deepcopy`` copies (so an Evaluator takes it) but pickle refuses."""

    def __init__(self, inner):
        super().__init__(inner.game, inner.player_ids)
        self.inner = inner

    def __deepcopy__(self, memo):
        return _Unpicklable(self.inner)

    def __reduce__(self):
        raise TypeError("this policy refuses to be pickled")

    def action_probabilities(self, state, player_id=None):
        return self.inner.action_probabilities(state, player_id)


def test_policies_that_cannot_be_sent_raise_in_one_line(kuhn, ray_session):
    import threading

    population = spiel.Population.random(kuhn, 2, seed=0)
    policies = [list(p) for p in population.policies]
    policies[2][1] = FailingPolicy(policies[2][1], "unused", once=False)
    policies[2][1].lock = threading.Lock()
    unpicklable = spiel.Population(kuhn, policies, population.ids)
    with pytest.raises(MetaEvalError, match=r"^policy 1 of player 2 cannot be sent to Ray workers: "
                                            r"TypeError: cannot pickle '_thread.lock' object$"):
        build_metagame(kuhn, unpicklable, mode="sampled", episodes=4, workers=2)
    policies = [list(p) for p in population.policies]
    policies[1][1] = _Unpicklable(policies[1][1])
    evaluator = Evaluator(kuhn, mode="sampled", episodes=4, workers=2,  # its snapshots are deep copies
                          population=spiel.Population(kuhn, policies, population.ids))
    with pytest.raises(MetaEvalError, match=r"^policy 1 of player 1 cannot be sent to Ray workers: "
                                            r"TypeError: this policy refuses to be pickled$"):
        evaluator.metagame()


def _same_gap(a, b):
    assert a.total == b.total
    for x, y in ((a.per_player, b.per_player), (a.best_response_values, b.best_response_values),
                 (a.on_policy_values, b.on_policy_values)):
        assert np.array_equal(x, y)
    for x, y in zip(a.best_responses, b.best_responses):
        assert np.array_equal(x.action_probability_array, y.action_probability_array)


@pytest.mark.parametrize("name, size, piece", [("kuhn_3p", 4, None), ("leduc_2p", 3, 1000)])
def test_pool_cce_gap_equals_in_process_bit_for_bit(name, size, piece, ray_session, monkeypatch):
    game = games.load(name)
    if piece is not None:  # several pieces per player (leduc_2p has 5,520 terminals)
        monkeypatch.setattr(spiel.gap, "PIECE_TERMINALS", piece)
    population = spiel.Population.random(game, size, seed=2)
    sigma = np.random.default_rng(3).dirichlet(np.ones(size ** game.num_players())).reshape(population.sizes)
    calls = []
    pooled = cce_gap(game, population, sigma, workers=2, progress=lambda done, total: calls.append((done, total)))
    local = spiel.cce_gap(game, population, sigma)
    _same_gap(pooled, local)
    assert pooled.total > 0.1
    terminals = game_tree(game).num_terminals
    assert calls[-1] == (game.num_players() * terminals, game.num_players() * terminals)
    assert len(calls) == len(spiel.gap.gap_pieces(game_tree(game), per_recommendation=False))


def test_an_evaluator_on_workers_gives_the_in_process_gap(kuhn, ray_session):
    population = spiel.Population.random(kuhn, 3, seed=8)
    sigma = np.random.default_rng(1).dirichlet(np.ones(27)).reshape(3, 3, 3)
    shutdown()
    _same_gap(Evaluator(kuhn, workers=2, population=population).gap(sigma),
              Evaluator(kuhn, population=population).gap(sigma))
    assert len(current_pool().pids()) == 2  # the gap started the pool


def test_ray_address_variable_selects_the_pool(kuhn, ray_session, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", ray_session.get_runtime_context().gcs_address)
    population = spiel.Population.random(kuhn, 2, seed=3)
    pooled = build_metagame(kuhn, population)
    assert last_build().workers == 1 and len(current_pool().pids()) == 1
    monkeypatch.delenv("RAY_ADDRESS")
    _same_game(pooled, build_metagame(kuhn, population))


def test_shutdown_kills_the_actors_but_not_a_callers_ray(kuhn, ray_session):
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2)
    table = live_processes()
    actors = [(pid, table[pid][1]) for pid in current_pool().pids()]
    assert len(actors) == 2
    shutdown()
    assert current_pool() is None and ray_session.is_initialized()
    assert still_alive(actors) == []


# -- an embedded Ray started by a build ------------------------------------------------
_EMBEDDED = """
import json, os, sys
from metaeval import games, spiel
from metaeval.distributed import build_metagame, shutdown, session
game = games.load("kuhn_3p")
build_metagame(game, spiel.Population.random(game, 2, seed=0), workers=2, log_dir=sys.argv[1])
report = {"processes": descendants(os.getpid()), "link_dir": session._State.link_dir}
if sys.argv[2] == "shutdown":
    shutdown()
    import ray
    report["ray_running"] = ray.is_initialized()
print(json.dumps(report))
"""


@pytest.mark.parametrize("ending", ["shutdown", "exit"])
def test_embedded_ray_is_quiet_logs_to_the_run_and_leaves_nothing_behind(ending, tmp_path):
    run_dir = tmp_path / ("a-run-directory-whose-path-is-too-long-for-ray-sockets" * 2)
    helpers = "\n".join(inspect.getsource(f) for f in (live_processes, descendants))
    script = "import os\n" + helpers + _EMBEDDED
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(run_dir), ending],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # quiet start-up and shutdown
    report = json.loads(out.stdout)
    processes = [tuple(p) for p in report["processes"]]
    assert len(processes) >= 4  # at least GCS, raylet and the two actors
    assert still_alive(processes) == []
    assert not os.path.exists(report["link_dir"])
    assert report.get("ray_running", False) is False
    logs = list(run_dir.glob("ray/metaeval-ray-*/session_*/logs/*"))
    assert any(path.name.startswith("raylet") for path in logs)


_KILLED_ACTORS = """
import os, signal, sys, time
from pathlib import Path
from metaeval import games, spiel
from metaeval.distributed import build_metagame, current_pool
game = games.load("kuhn_3p")
population = spiel.Population.random(game, 2, seed=0)
build_metagame(game, population, mode="sampled", episodes=4, workers=2, log_dir=sys.argv[1])
for pid in current_pool().pids():
    os.kill(pid, signal.SIGKILL)
build_metagame(game, spiel.Population.random(game, 3, seed=1), mode="sampled", episodes=4, workers=2,
               log_dir=sys.argv[1], progress=False)
deadline = time.monotonic() + 30  # Ray's message about the killed workers comes on its own time
while time.monotonic() < deadline and not any(
        "A worker died" in path.read_text() for path in Path(sys.argv[1]).glob("ray/*/driver-messages.log")):
    time.sleep(0.5)
time.sleep(2)  # a message printed on stdout would be there by now
print("the results")
"""


def test_rays_messages_about_killed_actors_go_to_the_run_log_not_stdout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", _KILLED_ACTORS, str(tmp_path)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=180)
    assert out.returncode == 0, out.stderr
    assert (out.stdout, out.stderr) == ("the results\n", "")
    [log] = tmp_path.glob("ray/metaeval-ray-*/driver-messages.log")
    assert "A worker died or was killed" in log.read_text()
