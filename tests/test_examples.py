"""The training-loop examples run end to end and do what the README says they do."""

import re

import numpy as np

import metaeval
from examples import league_training, training_loop


def test_training_loop_rates_cfr_snapshots_and_psro_reaches_an_equilibrium(tmp_path, capsys):
    training_loop.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    # CFR's average policy improves, so each snapshot's meta-Nash is less exploitable.
    exploitability = [float(x) for x in re.findall(r"exploitability of the meta-Nash ([\d.]+)", out)]
    assert len(exploitability) == 7  # snapshots at CFR iterations 1, 2, 4, ..., 64
    assert all(b < a for a, b in zip(exploitability, exploitability[1:]))
    # PSRO with exact best responses (and some random ones) ends at the game's Nash equilibrium.
    psro = [float(x) for x in out.split("exploitability per iteration:")[1].split()]
    assert len(psro) == 16 and psro[0] > 0.4 and psro[-1] < 1e-3
    saved = metaeval.Evaluator.load(tmp_path / "evaluator")
    assert saved.sizes == (6, 6)  # capped by pruning
    assert abs(saved.exploitability() - exploitability[-1]) <= 5e-5  # printed to 4 decimals


def test_league_training_keeps_a_capped_pool_and_runs_pbt(tmp_path, capsys):
    league_training.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    gaps = [float(x) for x in re.findall(r"CCE gap of the pool's MECCE ([\d.]+)", out)]
    assert len(gaps) == league_training.ROUNDS and all(np.isfinite(gaps))
    league = metaeval.Evaluator.load(tmp_path / "league")
    assert league.sizes == (league_training.CAP,) * 3
    steps = re.findall(r"PBT step (\d+): CCE gap [\d.]+(, replaced)?", out)
    assert [int(s) for s, _ in steps] == list(range(6))
    assert [bool(replaced) for _, replaced in steps] == [False, True] * 3  # exploit every second step
    for name in ["summary.csv", "cce_gap.png"]:
        assert (tmp_path / "pbt" / name).stat().st_size > 0


def test_large_games_example_samples_a_game_exact_mode_refuses_on_two_workers(tmp_path, capsys, ray_session):
    from examples import large_games

    evaluator = large_games.main(["--workers", "2", "--episodes", "50", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert evaluator.mode == "sampled" and "mode: sampled" in out
    assert "meta-game (5, 5), 50 episodes per entry" in out
    for rater in large_games.RATERS:
        assert re.search(rf"{rater}: player 0's best rated '[a-z ]+' -?[\d.]+ \[-?[\d.]+, -?[\d.]+\]", out), rater
    assert "CCE gap: the full-game CCE gap walks the game tree" in out
    learner = evaluator.policy(0, evaluator.ids[0][-1])
    assert np.all(learner.preferences == 0)  # the snapshot, not the object trained after it was added
    saved = metaeval.MetaGame.load(tmp_path / "metagame.npz")
    assert np.all(saved.counts == 50)
