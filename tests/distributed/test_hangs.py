"""A policy that never answers ends its build in one line naming it, in-process and on Ray
actors, within the shard timeout given (on actors: twice it, once on each of two actors)."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from metaeval import Evaluator, MetaEvalError, games, spiel
from metaeval.cli import _config, build_parser, main
from metaeval.distributed import build_metagame, current_pool
from metaeval.loops.evolve import Evolution
from tests.failing_policy import HangingPolicy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def kuhn():
    return games.load("kuhn_3p")


def _hanging(game, how, seconds=float("inf")):
    """Three random policies per player; player 0's policy 1 never answers."""
    population = spiel.Population.random(game, 3, seed=8)
    policies = [list(p) for p in population.policies]
    policies[0][1] = HangingPolicy(policies[0][1], how, seconds)
    return spiel.Population(game, policies, population.ids)


_IN_PROCESS = """
import json, sys, time
from metaeval import games
from metaeval.distributed import build_metagame
from metaeval.errors import MetaEvalError
from tests.distributed.test_hangs import _hanging
game = games.load("kuhn_3p")
how, mode = sys.argv[1:]
start = time.monotonic()
try:
    build_metagame(game, _hanging(game, how), mode=mode, episodes=4, shard_timeout=2, progress=False)
    message = None
except MetaEvalError as exc:
    message = str(exc)
print(json.dumps({"message": message, "seconds": time.monotonic() - start}))
"""


@pytest.mark.parametrize("how", ["sleep", "busy"])
@pytest.mark.parametrize("mode", ["sampled", "exact"])
def test_a_policy_that_never_answers_ends_an_in_process_build_in_one_line(how, mode):
    """In a process of its own: without the limit the build never ends (the subprocess's
    timeout fails the test)."""
    out = subprocess.run([sys.executable, "-c", _IN_PROCESS, how, mode], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    report = json.loads(out.stdout)
    named = r"policy ids \(1, 0, 0\)" if mode == "sampled" else "policy id 1"
    assert re.fullmatch(rf"{named}: the policy of player 0 gave no answer within 2 s \(the shard timeout\)",
                        report["message"]), report["message"]
    assert 2 <= report["seconds"] < 10, report["seconds"]


def test_the_evaluator_passes_its_shard_timeout_to_builds(kuhn):
    from metaeval.runs.time_limit import PolicyTimeout

    evaluator = Evaluator(kuhn, mode="sampled", episodes=4, shard_timeout=1, max_retries=0)
    population = _hanging(kuhn, "sleep", seconds=30)  # bounded, should the limit not work here
    for player, policies in enumerate(population.policies):
        for policy in policies:
            evaluator.add(player, policy)
    start = time.monotonic()
    with pytest.raises(PolicyTimeout, match=r"^policy ids \(1, 0, 0\): the policy of player 0 gave no answer "
                                            r"within 1 s \(the shard timeout\)$"):
        evaluator.metagame()
    assert time.monotonic() - start < 10


def test_the_cli_takes_the_shard_timeout_and_retries_to_the_loops(tmp_path, capsys):
    args = build_parser().parse_args(["evolve", "--mode", "sampled", "--shard-timeout", "2.5", "--max-retries", "1",
                                      "--out", str(tmp_path / "run")])
    evolution = Evolution(_config(args, rater="uniform", seed=0))
    assert (evolution.evaluator.shard_timeout, evolution.evaluator.max_retries) == (2.5, 1)
    assert main(["evolve", "--shard-timeout", "0", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err == "metaeval: error: argument --shard-timeout: must be a positive number of seconds, got 0\n"


@pytest.mark.parametrize("options, message", [
    (dict(shard_timeout=-1), "shard_timeout must be a positive number of seconds, got -1"),
    (dict(max_retries=1.5), "max_retries must be an int of at least 0, got 1.5"),
])
def test_the_evaluator_refuses_bad_limits(kuhn, options, message):
    with pytest.raises(MetaEvalError, match=f"^{message}$"):
        Evaluator(kuhn, **options)


# -- on Ray actors ---------------------------------------------------------------------
def test_a_policy_that_never_answers_ends_a_build_on_two_actors_in_one_line(kuhn, ray_session):
    """Tried on a second, fresh actor, then reported, although three retries are allowed
    (before, each try waited out the whole shard deadline and the error blamed the actor)."""
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2, mode="sampled", episodes=4)
    start = time.monotonic()
    with pytest.raises(MetaEvalError) as raised:
        build_metagame(kuhn, _hanging(kuhn, "sleep"), mode="sampled", episodes=4, workers=2, shard_timeout=3)
    elapsed = time.monotonic() - start
    message = str(raised.value)
    assert re.fullmatch(r"shard \d+ of 8 \(policy ids .*entries\): policy ids \(1, \d, \d\): the policy of player 0 "
                        r"gave no answer within 3 s \(the shard timeout\), on 2 Ray actors in turn", message), message
    assert 6 <= elapsed < 120, elapsed  # twice the timeout, an actor start and a build; loaded CI machines are slow
    assert current_pool() is None  # the failed pool was torn down


def test_an_actor_stuck_out_of_the_timers_reach_is_killed_and_the_shard_tried_once_more(kuhn, ray_session,
                                                                                        monkeypatch):
    monkeypatch.setattr("metaeval.distributed.pool.UNINTERRUPTIBLE_TIMEOUT", 3.0)
    build_metagame(kuhn, spiel.Population.random(kuhn, 2, seed=0), workers=2, mode="sampled", episodes=4)
    with pytest.raises(MetaEvalError, match=r"^shard \d+ of 8 \(policy ids .*entries\): no result within 5 s, a policy "
                       r"call stuck beyond the reach of the shard timeout \(its actor was killed\), on 2 Ray actors "
                       r"in turn$"):
        build_metagame(kuhn, _hanging(kuhn, "uninterruptible"), mode="sampled", episodes=4, workers=2,
                       shard_timeout=2)
