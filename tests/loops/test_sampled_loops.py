"""The loops in sampled mode (issue 24, items 1, 3 and 5): no game tree, Ray workers, and run
directories that say the meta-game was sampled and from how many episodes."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from metaeval import MetaEvalError, MetaGame
from metaeval.loops.evolve import EvolveConfig, evolve
from metaeval.loops.pbt import PBTConfig, pbt
from metaeval.loops.psro import PSROConfig, psro
from tests.conftest import without_timings

LARGE = "goofspiel(num_cards=8,imp_info=True)"
GAME_THEORETIC = ("nash", "alpharank", "deviation", "payoff")


def says_sampled(out, episodes, summary_columns=True):
    """The run directory says how its meta-game was obtained, and keeps the last one."""
    config = json.loads((out / "config.json").read_text())
    assert config["metagame"] == f"sampled, {episodes} episodes per entry"
    assert config["settings"]["mode"] == "sampled"
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.metagame) == {f"sampled, {episodes} episodes per entry"}
    assert summary.cce_gap.isna().all()  # not computed: it needs the tree
    metagame = MetaGame.load(out / "metagame.npz")
    assert np.all(metagame.counts == episodes) and np.all(metagame.stderr >= 0)
    return metagame


def test_evolve_on_a_game_exact_mode_refuses_equals_itself_on_two_workers_and_resumes(tmp_path, ray_session):
    config = EvolveConfig(game=LARGE, rater="deviation", iterations=2, population=4, mode="sampled", episodes=10)
    one = evolve(config, out=tmp_path / "one", progress=False)
    two = evolve(EvolveConfig(**{**config.__dict__, "workers": 2}), out=tmp_path / "two", progress=False)
    assert without_timings(one) == without_timings(two)
    assert all(r["cce_gap"] is None and r["cce_gap_per_player"] is None for r in one)
    says_sampled(tmp_path / "one", 10)
    longer = evolve(EvolveConfig(**{**config.__dict__, "iterations": 3}), out=tmp_path / "one", progress=False)
    assert without_timings(longer[:2]) == without_timings(one) and len(longer) == 3


def test_sampled_loops_refuse_what_needs_the_tree_before_writing(tmp_path):
    with pytest.raises(MetaEvalError, match="replace 'mutate' works on tables over the game tree"):
        EvolveConfig(game=LARGE, replace="mutate")
    with pytest.raises(MetaEvalError, match="oracle 'jpsro' computes exact best responses on the game tree"):
        psro(PSROConfig(game=LARGE, mode="sampled"), out=tmp_path / "psro")
    assert not (tmp_path / "psro").exists()


def test_psro_and_pbt_in_sampled_mode_on_two_workers(tmp_path, ray_session):
    records = psro(PSROConfig(game=LARGE, oracle="random", solver="nash", iterations=3, mode="sampled",
                              episodes=10, workers=2), out=tmp_path / "psro", progress=False)
    assert [r["sizes"] for r in records] == [[1, 1], [2, 2], [3, 3]]
    assert all(r["cce_gap"] is None and r["nash_conv"] is None for r in records)
    says_sampled(tmp_path / "psro", 10)
    assert all(len(r["memory"]["actors"]) == 2 for r in records)  # each build actor's memory, every iteration
    summary = pd.read_csv(tmp_path / "psro" / "summary.csv")
    assert (summary.actors_peak_rss_mib > 0).all() and (summary.peak_rss_mib >= summary.rss_mib).all()
    config = PBTConfig(game="kuhn_3p", steps=2, population=4, episodes_per_step=50, mode="sampled", episodes=10)
    steps = pbt(PBTConfig(**{**config.__dict__, "workers": 2}), out=tmp_path / "pbt", progress=False)
    assert without_timings(steps) == without_timings(pbt(config, progress=False))
    says_sampled(tmp_path / "pbt", 10)


def test_cli_builds_a_large_game_on_two_workers_and_rates_it_with_intervals(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "metaeval.cli"]
    result = subprocess.run([*command, "evolve", "--game", LARGE, "--iterations", "1", "--population", "4",
                             "--episodes", "20", "--workers", "2", "--quiet", "--out", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "exact mode refuses" in result.stderr and result.stderr.count("\n") == 1  # auto: one line
    assert "meta-game sampled, 20 episodes per entry; CCE gap not computed" in result.stdout
    says_sampled(out, 20)
    for rater in GAME_THEORETIC:
        rated = subprocess.run([*command, "rate", str(out / "metagame.npz"), "--rater", rater,
                                "--option", "bootstrap=50"], capture_output=True, text=True, timeout=600)
        assert rated.returncode == 0, rated.stderr[-2000:]
        header = rated.stdout.splitlines()[0].split()
        assert header[:4] == ["player", "strategy", "rating", "rank"] and {"low", "high", "p_top"} <= set(header)
        rows = [line for line in rated.stdout.splitlines() if line.startswith("goofspiel player")]
        assert len(rows) == 2 * 4  # every policy of both players
        assert rated.stdout.splitlines()[-1].startswith("ranks: ratings within")


def test_identical_sampled_runs_write_identical_files(tmp_path):
    """The policies a sampled run saves are pickled objects: OpenSpiel's unseeded
    ``_random_state`` of each once made every file differ between identical runs."""
    config = EvolveConfig(game="kuhn_poker", rater="uniform", mode="sampled", episodes=20, iterations=1, population=4)
    for out in ("a", "b"):
        evolve(config, out=tmp_path / out, progress=False)
    for name in ("population.npz", "checkpoint-population-000001.npz", "checkpoint-rated-000001.npz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
