"""PSRO with learned best responses (DQN, PPO): on a game the tree walk refuses, resumed bit
for bit, and recorded by name with their budget."""

import json
import textwrap
from dataclasses import asdict

import pytest

from metaeval import MetaEvalError
from metaeval.loops.psro import PSRO, PSROConfig, psro
from metaeval.viz import plots
from tests.conftest import without_timings

pytest.importorskip("jax")

LARGE = "goofspiel(num_cards=8,imp_info=True)"  # exact mode refuses it (about 1.64 TiB)


def test_a_learned_oracle_runs_psro_on_a_game_the_tree_walk_refuses(tmp_path):
    config = PSROConfig(game=LARGE, solver="mecce", oracle="ppo", oracle_episodes=300, iterations=3,
                        episodes=50, oracle_target="psro")
    records = psro(config, out=tmp_path, progress=False)
    assert config.mode == "sampled" and [r["sizes"] for r in records] == [[1, 1], [2, 2], [3, 3]]
    settings = json.loads((tmp_path / "config.json").read_text())["settings"]
    assert (settings["oracle"], settings["oracle_episodes"], settings["oracle_target"]) == ("ppo", 300, "psro")


def test_a_resumed_learned_run_is_the_uninterrupted_one(tmp_path):
    config = PSROConfig(game=LARGE, solver="mecce", oracle="dqn", oracle_episodes=200, iterations=3, episodes=40)
    straight = psro(config, out=tmp_path / "straight", progress=False)
    psro(PSROConfig(**{**config.__dict__, "iterations": 2}), out=tmp_path / "resumed", progress=False)
    resumed = psro(config, out=tmp_path / "resumed", progress=False)
    assert without_timings(resumed) == without_timings(straight)


def test_exact_best_responses_are_refused_in_sampled_mode_and_bad_budgets_too():
    with pytest.raises(MetaEvalError, match="use a search or learned oracle"):
        psro(PSROConfig(game=LARGE, oracle="jpsro", iterations=1, episodes=10), progress=False)
    with pytest.raises(MetaEvalError, match="oracle_episodes must be a positive int"):
        PSROConfig(game="kuhn_2p", oracle="ppo", oracle_episodes=0)
    with pytest.raises(MetaEvalError, match="unknown oracle_target"):
        PSROConfig(game="kuhn_2p", oracle="ppo", oracle_target="nash")


def test_the_approximate_gap_is_recorded_below_the_exact_one_and_changes_nothing_else(tmp_path):
    """Kuhn poker, exact mode: each iteration's learned lower bound lies below the exact gap
    (within three standard errors), is written to the summary and the plot, and the run's
    populations are those of the same run without it."""
    import pandas as pd

    base = dict(game="kuhn_2p", solver="nash", oracle="psro", iterations=3)
    plain = psro(PSROConfig(**base), progress=False)
    config = PSROConfig(**base, approximate_gap=1500, approximate_gap_episodes=3000)
    records = psro(config, out=tmp_path, progress=False)
    assert [r["policy_ids"] for r in records] == [r["policy_ids"] for r in plain]
    for record in records:
        assert record["approximate_cce_gap"] <= record["cce_gap"] + 3 * record["approximate_cce_gap_stderr"]
        assert len(record["approximate_cce_gap_per_player"]) == 2
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary["approximate_cce_gap_lower_bound"]) == [r["approximate_cce_gap"] for r in records]
    assert (tmp_path / "cce_gap.png").stat().st_size > 0
    with pytest.raises(MetaEvalError, match="approximate_gap must be a non-negative int"):
        PSROConfig(**base, approximate_gap=-1)


def test_the_figures_title_names_the_run_in_two_lines_at_most():
    """The longest titles, a learned oracle on a sampled game with a searched gap, fit in two
    lines; the approximate gap's learner and budget are in the figure's legend."""
    config = PSROConfig(game=LARGE, oracle="dqn", oracle_episodes=5000, oracle_target="psro", episodes=100,
                        approximate_gap=20000, approximate_gap_learner="dqn", approximate_gap_episodes=4000,
                        cap=16)
    title = PSRO.title_of(asdict(config))
    assert title == (f"{LARGE}, dqn oracle (5000 episodes, psro target), mgcce, seed 0, cap 16 by deviation, "
                     "sampled (100 episodes per entry)")
    assert len(textwrap.wrap(title, plots.TITLE_WIDTH)) == 2
    assert PSRO.title_of(asdict(PSROConfig(game="kuhn_2p", oracle="ppo"))) == (
        "kuhn_2p, ppo oracle (2000 episodes), mgcce, seed 0")


def test_a_search_oracle_and_a_searched_gap_resume_bit_for_bit_and_are_recorded_by_name(tmp_path):
    """PSRO with the search oracle and the search's approximate gap on kuhn: the records name
    the responder and its budget, the bound is never negative, and a resumed run is the
    uninterrupted one."""
    config = PSROConfig(game="kuhn_2p", solver="nash", oracle="search", oracle_episodes=3000, iterations=3,
                        approximate_gap=3000, approximate_gap_learner="search", approximate_gap_episodes=500)
    straight = psro(config, out=tmp_path / "straight", progress=False)
    psro(PSROConfig(**{**config.__dict__, "iterations": 2}), out=tmp_path / "resumed", progress=False)
    resumed = psro(config, out=tmp_path / "resumed", progress=False)
    assert without_timings(resumed) == without_timings(straight)
    for record in straight:
        assert record["approximate_cce_gap_responder"] == "search (tree walked)" and record["approximate_cce_gap_episodes"] == 3000
        assert record["approximate_cce_gap"] >= 0
        assert record["approximate_cce_gap_estimate"] <= record["cce_gap"] + 3 * record["approximate_cce_gap_stderr"]
        assert len(record["approximate_cce_gap_per_player_stderr"]) == 2
    assert straight[-1]["cce_gap"] < straight[0]["cce_gap"]
