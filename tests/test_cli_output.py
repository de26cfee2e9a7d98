"""What the commands print: --version, the same last lines everywhere, help texts with
each default once, numbers rounded to the rater's accuracy (never -0), counts as integers,
warnings in one line each, and the route from a user's own policies to ``metaeval rate``."""

import argparse
import gc
import importlib.metadata
import re
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest

import metaeval
from metaeval import data, spiel
from metaeval.cli import build_parser, guarded, main
from metaeval.pairwise import bradley_terry
from metaeval.runs.reports import table_text
from tests.conftest import rock_paper_scissors
from tests.pairwise.references import simulated_battles


def _commands():
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _negative_zeros(text: str) -> list[str]:
    return [token for token in text.split() if re.fullmatch(r"-0(\.0*)?", token)]


def test_version_is_the_installed_packages():
    done = subprocess.run([sys.executable, "-m", "metaeval.cli", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout == f"metaeval {importlib.metadata.version('metaeval')}\n"


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_help_text_says_a_default_once(name):
    command = _commands()[name]
    for action in command._actions:
        shown = command._get_formatter()._expand_help(action)
        assert shown.lower().count("default") <= 1, f"{name} {action.dest}: {shown}"


def test_every_command_defaults_to_the_same_mode():
    modes = {name: next(a.default for a in command._actions if a.dest == "mode")
             for name, command in _commands().items() if any(a.dest == "mode" for a in command._actions)}
    assert modes == dict.fromkeys(["compare", "evolve", "pbt", "psro"], "auto")


def _last_lines(capsys, args):
    capsys.readouterr()
    assert main([str(a) for a in args]) == 0
    return capsys.readouterr().out.splitlines()


def _figures(line, out):
    assert line.startswith("plots: ")
    figures = line.removeprefix("plots: ").split(", ")
    assert figures and all(path.startswith(str(out)) and (out / path.removeprefix(f"{out}/")).is_file()
                           for path in figures)
    return [path.rsplit("/", 1)[1] for path in figures]


@pytest.mark.parametrize("args, figures", [
    (["psro", "--game", "kuhn_2p", "--iterations", "2"], ["cce_gap.png", "exploitability.png", "memory.png"]),
    (["evolve", "--game", "kuhn_3p", "--iterations", "1", "--population", "4"], ["cce_gap.png", "payoff.png"]),
    (["pbt", "--game", "kuhn_2p", "--steps", "1", "--population", "4", "--episodes-per-step", "20"],
     ["cce_gap.png", "payoff.png"]),
    (["compare", "--game", "kuhn_3p", "--raters", "uniform", "--seeds", "1", "--iterations", "1",
      "--population", "4"], ["cce_gap.png", "payoff.png"]),
])
def test_every_run_ends_with_where_its_results_and_figures_are(tmp_path, capsys, args, figures):
    out = tmp_path / "run"
    lines = _last_lines(capsys, [*args, "--quiet", "--out", out])
    assert lines[-2] == f"results in {out}" and _figures(lines[-1], out) == figures
    assert all(f"results in {out}" not in line for line in lines[:-2])  # said once, on its own line
    for figure in out.glob("*.png"):
        figure.unlink()
    lines = _last_lines(capsys, ["plot", out])
    assert lines[-2] == f"results in {out}" and _figures(lines[-1], out) == figures


def test_compare_captions_its_table(tmp_path, capsys):
    out = tmp_path / "cmp"
    lines = _last_lines(capsys, ["compare", "--game", "kuhn_3p", "--raters", "uniform,deviation", "--seeds", "1",
                                 "--iterations", "2", "--population", "4", "--quiet", "--out", out])
    caption = lines.index("final CCE gap per rater after 2 iterations, over its finished seeds:")
    assert lines[caption + 1].split() == ["rater", "mean", "std", "min", "max", "seeds"]
    assert [line.split()[0] for line in lines[caption + 2:-2]] == ["deviation", "uniform"]


def test_pbt_in_auto_mode_is_exact_on_the_games_its_tests_use(tmp_path, capsys):
    from metaeval.loops.pbt import PBTConfig

    for game in ("kuhn_2p", "kuhn_3p", "kuhn_poker"):
        assert PBTConfig(game=game).mode == "exact"
    lines = _last_lines(capsys, ["pbt", "--game", "kuhn_3p", "--steps", "1", "--population", "4",
                                 "--episodes-per-step", "20", "--quiet", "--out", tmp_path / "pbt"])
    assert lines[0].startswith("1 steps; meta-game exact; final CCE gap ")


def test_rated_numbers_are_rounded_to_the_raters_accuracy_and_never_negative_zero(tmp_path, capsys):
    """Rock-paper-scissors rates every strategy 0 (deviation ratings as -0.0); nash on a
    score table ties three agents at 5e-13, -1e-12 and 5e-13."""
    rock_paper_scissors().save(tmp_path / "rps.npz")
    for rater in ("uniform", "nash", "deviation", "alpharank", "payoff"):
        lines = _last_lines(capsys, ["rate", tmp_path / "rps.npz", "--rater", rater])
        assert not _negative_zeros("\n".join(lines)), (rater, lines)
        assert len({line.split()[3] for line in lines[1:-1]}) == 1, (rater, lines)  # one rating, printed once
    (tmp_path / "scores.csv").write_text("game,x,y,z\ng1,3,2,1\ng2,1,3,2\ng3,2,1,3\ng4,3,1,2\n")
    lines = _last_lines(capsys, ["rate", tmp_path / "scores.csv", "--layout", "columns", "--rater", "nash"])
    assert [line.split() for line in lines[1:4]] == [["1", "x", "0"], ["1", "y", "0"], ["1", "z", "0"]]
    game = data.agent_vs_task(data.read_scores(tmp_path / "scores.csv", agents="columns"))
    rating = metaeval.rate(game, "nash")
    assert np.abs(rating.ratings[0]).max() > 0  # the solver's noise, which the table rounds away
    assert list(rating.to_frame().rating[:3]) == [0.0, 0.0, 0.0]
    assert not _negative_zeros(rating.to_frame().to_string())


def test_ties_within_the_accuracy_print_equal_and_rank_equal():
    game = metaeval.MetaGame.from_matrix(np.zeros((3, 2)))
    rating = metaeval.Rating("uniform", game, [np.array([0.5, 0.5 + 9e-9, 0.15]), np.zeros(2)], tolerance=1e-8)
    first = rating.to_frame().iloc[:3]
    assert list(first["rank"]) == [1, 1, 3] and list(first.rating) == [0.50000001, 0.50000001, 0.15]


def test_a_bradley_terry_score_of_rounding_noise_prints_zero_and_counts_print_whole(tmp_path, capsys):
    """A cycle of wins: the middle model scores 0, which the fit leaves as -1.08e-15."""
    battles = [("model-x", "model-y", "model_a"), ("model-y", "model-z", "model_a"), ("model-z", "model-x", "tie")]
    cycle = pd.DataFrame(battles * 30, columns=["model_a", "model_b", "winner"])
    board = bradley_terry(cycle, bootstrap=100, seed=0)
    assert board.at["model-y", "score"] == 0.0 and board.battles.dtype == np.int64
    assert "e-1" not in str(board) and "60.0" not in str(board)
    path = tmp_path / "cycle.csv"
    cycle.to_csv(path, index=False)
    lines = _last_lines(capsys, ["battles", path, "--bootstrap", "0"])
    assert [line.split()[:2] + line.split()[-1:] for line in lines[2:]] == [
        ["model-x", "131.4", "60"], ["model-y", "0.0", "60"], ["model-z", "-131.4", "60"]]


def test_table_text_prints_whole_columns_as_integers_and_no_negative_zero():
    frame = pd.DataFrame({"count": [60.0, 7.0], "value": [-0.0, 0.25], "tiny": [-1e-20, 3.0]})
    assert [line.split() for line in table_text(frame).splitlines()] == [
        ["count", "value", "tiny"], ["60", "0", "-1e-20"], ["7", "0.25", "3"]]
    assert table_text(pd.DataFrame({"score": [-0.04, 12.34]}), decimals=1).split() == ["score", "0.0", "12.3"]


def test_battles_anchor_fixes_one_models_score_and_out_writes_the_leaderboard(tmp_path, capsys):
    path, out = tmp_path / "battles.csv", tmp_path / "board.csv"
    simulated_battles(np.array([0.0, 100.0, 200.0]), 300, 0).to_csv(path, index=False)
    lines = _last_lines(capsys, ["battles", path, "--bootstrap", "0", "--anchor", "m000=1000", "--out", out])
    assert lines[-1] == f"results in {out}"
    board = pd.read_csv(out, index_col="model")
    plain = bradley_terry(path)
    assert board.at["m000", "score"] == 1000.0
    np.testing.assert_allclose(board.score - plain.score, 1000 - plain.at["m000", "score"], atol=1e-5)
    assert [line.split()[:2] for line in lines[2:5]] == [[m, f"{board.at[m, 'score']:.1f}"] for m in board.index]
    for anchor, message in [("nobody=1000", "anchor model 'nobody' is not in the battles"),
                            ("m000", "an anchor is MODEL=SCORE"), ("m000=high", "must be a number")]:
        capsys.readouterr()
        assert main(["battles", str(path), "--bootstrap", "0", "--anchor", anchor]) == 2
        err = capsys.readouterr().err
        assert err.startswith("metaeval: error: ") and err.count("\n") == 1 and message in err
    assert main(["battles", str(path), "--out", str(tmp_path / "none" / "board.csv")]) == 2
    assert "no directory" in capsys.readouterr().err


def test_own_policies_saved_as_a_meta_game_are_rated_from_the_command_line(tmp_path, capsys):
    """The route the help's epilog shows: policies into an evaluator, its meta-game saved,
    then ``metaeval rate`` of the file rates as ``metaeval.rate`` does."""
    for command in (build_parser(), _commands()["rate"]):
        epilog = " ".join(command.format_help().split())
        assert "evaluator.metagame().save(\"mine.npz\")" in epilog and "metaeval rate mine.npz" in epilog
    evaluator = metaeval.Evaluator("kuhn_2p")
    rng = np.random.default_rng(0)
    for player in range(2):
        for name in ("cautious", "bold"):
            evaluator.add(player, spiel.random_policy(evaluator.game, player, rng), name=name)
    evaluator.metagame().save(tmp_path / "mine.npz")
    lines = _last_lines(capsys, ["rate", tmp_path / "mine.npz", "--rater", "deviation"])
    expected = metaeval.rate(evaluator.metagame(), "deviation").to_frame()
    assert lines[0].split() == ["player", "strategy", "rating", "rank"]
    assert [line.split()[-3:] for line in lines[1:5]] == [
        [row.strategy, f"{row.rating:.6g}", str(row.rank)] for row in expected.itertuples()]


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupt_raised_where_python_ignores_exceptions_still_stops_the_command(signum, code, capsys):
    # Raised inside a garbage-collector callback (as JAX registers one), the interrupt is printed
    # as "Exception ignored" and dropped by Python; the command must stop all the same.
    raised = []

    def callback(phase, info):
        if not raised:
            raised.append(phase)
            signal.raise_signal(signum)  # the handler's exception is raised here, in the callback

    def command():
        gc.callbacks.append(callback)
        try:
            gc.collect()
            stop = time.monotonic() + 30  # the interrupt is due within milliseconds
            while time.monotonic() < stop:
                sum(range(1000))
            return 0
        finally:
            gc.callbacks.remove(callback)

    hook = sys.unraisablehook
    assert guarded(command) == code and raised and sys.unraisablehook is hook
    assert "Exception ignored" not in capsys.readouterr().err


def test_warnings_are_one_line_each_and_repeats_are_counted(capsys):
    def command():
        for i in range(3):
            warnings.warn(f"policy {i} is a copy", UserWarning)
        warnings.warn("something else", RuntimeWarning)
        return 0

    shown = warnings.showwarning
    assert guarded(command) == 0 and warnings.showwarning is shown  # set for the command only
    assert capsys.readouterr().err.splitlines() == [
        "metaeval: warning: UserWarning x3, the first: policy 0 is a copy",
        "metaeval: warning: RuntimeWarning: something else"]
