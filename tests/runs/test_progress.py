"""Progress on stderr for every long piece of work: lines when asked and stderr is no
terminal, nothing by default, never a changed result. A fake clock stands in for long work."""

import itertools

import numpy as np
import pytest
from open_spiel.python import policy as policy_lib

from metaeval import MetaGame, cli, games, spiel
from metaeval.distributed import build_metagame
from metaeval.ratings.bootstrap import with_intervals
from metaeval.ratings.uniform import uniform
from metaeval.responses import PPO, Opponents, QLearning, Search
from metaeval.runs import progress
from metaeval.runs.progress import Progress, asked


@pytest.fixture
def slow_clock(monkeypatch):
    """A clock on which every reading is ten seconds after the last: any work is long."""
    ticks = itertools.count()
    monkeypatch.setattr(progress, "clock", lambda: 10.0 * next(ticks))


def sampled_build(**options):
    game = games.load("kuhn_3p")
    population = spiel.Population.random(game, 2, seed=0, lazy=True)
    return build_metagame(game, population, mode="sampled", episodes=60, batch_size=16, **options)


def test_a_long_build_says_how_far_it_is_and_builds_the_same_game(slow_clock, capsys):
    shown = sampled_build(progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("meta-game: ") for line in lines), lines
    assert "/480 episodes (" in lines[-1] and "episodes/s, about" in lines[-1] and lines[-1].endswith("left")
    quiet = sampled_build(progress=False)
    assert capsys.readouterr().err == ""
    assert all(np.array_equal(a, b) for a, b in zip(shown.payoffs, quiet.payoffs))
    assert np.array_equal(shown.stderr, quiet.stderr)


def test_a_library_call_is_quiet_unless_asked_and_inner_work_follows_the_outer(slow_clock, capsys):
    sampled_build()
    assert capsys.readouterr().err == ""  # stderr is no terminal: nothing by default
    with asked(True):
        sampled_build()
        with Progress(1, "a loop", progress=False):
            sampled_build()
    err = capsys.readouterr().err
    assert err.count("meta-game: ") >= 1 and err.count("/480 episodes") == err.count("meta-game: ")
    with asked(True):
        sampled_build(progress=False)
    assert capsys.readouterr().err == ""


def test_short_work_writes_no_line(capsys):
    with Progress(10, "quick", "episode", progress=True) as shown:
        shown.advance(10)  # done long before the first line is due
    assert capsys.readouterr().err == ""


def test_the_rate_and_time_left_wait_for_a_hundredth_of_the_work(slow_clock, capsys):
    with Progress(1000, "meta-game", "episode", progress=True) as shown:
        shown.advance(9)  # lock-step episodes: the first ones end long after the work started
        shown.advance(0)
        shown.advance(0)
        shown.advance(1)
    assert capsys.readouterr().err.splitlines() == [
        "meta-game: 9/1,000 episodes, 20 s so far",
        "meta-game: 10/1,000 episodes (1%), 0.14 episodes/s, about 1 h 56 min left",
    ]


def test_a_build_tells_a_callable_of_its_episodes_or_entries():
    calls = []
    sampled_build(progress=lambda *a: calls.append(a))
    assert calls[-1] == (480, 480) and [d for d, _ in calls] == sorted({d for d, _ in calls})
    game = games.load("kuhn_3p")
    calls.clear()
    build_metagame(game, spiel.Population.random(game, 2, seed=0), progress=lambda *a: calls.append(a))
    assert calls == [(8, 8)]  # exact: entries


def uniform_opponents(game, player):
    uniform_policy = policy_lib.UniformRandomPolicy(game)
    return Opponents((tuple(None if q == player else uniform_policy for q in range(game.num_players())),),
                     np.ones(1))


def noisy_game():
    rng = np.random.default_rng(0)
    return MetaGame(rng.random((2, 3, 3)), stderr=np.full((2, 3, 3), 0.05))


LONG_WORK = {
    "Q-learning, player 0": lambda game: QLearning().train(game, 0, uniform_opponents(game, 0), 50,
                                                           np.random.default_rng(0)),
    "PPO, player 0": lambda game: PPO(num_envs=8).train(game, 0, uniform_opponents(game, 0), 40,
                                                        np.random.default_rng(0)),
    "search, player 1": lambda game: Search(exhaustive=False).train(game, 1, uniform_opponents(game, 1), 200,
                                                                    np.random.default_rng(0)).sums,
    "bootstrap": lambda game: with_intervals(noisy_game(), uniform, {}, 40, seed=1).intervals,
    "CCE gap": lambda game: spiel.cce_gap(game, spiel.Population.random(game, 2, seed=0),
                                          np.full((2, 2), 0.25)).per_player,
}


def leaves(result) -> list:
    """The arrays of a result: an array, or nested dicts of them (a network's weights)."""
    if isinstance(result, dict):
        return [leaf for key in sorted(result) for leaf in leaves(result[key])]
    return [np.asarray(result)]


@pytest.mark.parametrize("desc", LONG_WORK)
def test_every_long_piece_of_work_shows_progress_and_the_same_result(desc, slow_clock, capsys):
    game = games.load("kuhn_2p")
    with asked(True):
        shown = LONG_WORK[desc](game)
    lines = capsys.readouterr().err.splitlines()
    assert any(line.startswith(f"{desc}: ") and line.endswith(" left") for line in lines), lines
    with asked(False):
        quiet = LONG_WORK[desc](game)
    assert capsys.readouterr().err == ""
    for a, b in zip(leaves(shown), leaves(quiet), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_command_shows_its_build_before_its_first_iteration(slow_clock, capsys, tmp_path):
    code = cli.main(["evolve", "--game", "kuhn_3p", "--mode", "sampled", "--episodes", "40", "--population", "4",
                     "--iterations", "1", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    first_build = next(i for i, line in enumerate(err) if line.startswith("meta-game: "))
    iteration = next(i for i, line in enumerate(err) if "seed 0: it 1/1" in line)
    assert first_build < iteration, err
    assert cli.main(["evolve", "--game", "kuhn_3p", "--mode", "sampled", "--episodes", "40", "--population", "4",
                     "--iterations", "1", "--out", str(tmp_path / "quiet"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
