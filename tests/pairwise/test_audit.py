"""The bias audit: shares and variants per owner, and the winner's curse of private variants."""

import numpy as np
import pandas as pd
import pytest

from metaeval import pairwise
from metaeval.cli import main
from metaeval.data.simulated import simulated_arena
from metaeval.errors import MetaEvalError
from metaeval.ratings.elo import SCALE


def test_audit_counts_shares_and_variants_per_owner():
    table, truth = simulated_arena(models=30, battles=20_000, owners=5, variants=(2, 6), seed=0)
    result = pairwise.audit(table, seed=1)
    assert result.models["share"].sum() == pytest.approx(1.0)
    appearances = pd.concat([table["model_a"], table["model_b"]]).astype(str).value_counts()
    pd.testing.assert_series_equal(result.models["battles"].sort_index(), appearances.sort_index(),
                                   check_names=False)
    assert result.owners["models"].to_dict() == truth["owner"].value_counts().to_dict()
    assert result.owners.loc["lab02", "models"] == 6 + 6
    # without declared rankings each owner ranks by the first half: its YRWR pick is its held-out pick
    assert (result.owners["yrwr_model"] == result.owners["heldout_model"]).all()
    declared = {o: list(g.index) for o, g in truth.groupby("owner")}
    assert (pairwise.audit(table, owner_rankings=declared).owners["yrwr_loss"] >= 0).all()  # YRWR never raises a score


def test_held_out_and_yrwr_remove_the_inflation_of_an_owner_testing_twenty_variants():
    inflation, held_out, ranked = [], [], []
    for seed in range(8):
        table, truth = simulated_arena(models=40, battles=30_000, owners=8, variants=(0, 20),
                                       effects=(0, 0, 0, 0), seed=seed)  # no style: plain scores are unbiased
        truthful = {o: list(g.sort_values("theta", ascending=False).index) for o, g in truth.groupby("owner")}
        result = pairwise.audit(table, owner_rankings=truthful, seed=seed)
        row = result.owners.loc["lab00"]
        true = SCALE * truth["theta"]  # mean 0, as the fitted scores
        inflation.append(row["score"] - true[row["best"]])
        held_out.append(row["score"] - row["heldout_loss"] - true[row["heldout_model"]])
        ranked.append(row["score"] - row["yrwr_loss"] - true[row["yrwr_model"]])
    assert np.mean(inflation) > 15  # the best of 21 noisy copies is lucky (27 Elo here)
    assert abs(np.mean(held_out)) < np.mean(inflation) / 2
    assert abs(np.mean(ranked)) < np.mean(inflation) / 2


def test_audit_needs_owners(tmp_path, capsys):
    table, _ = simulated_arena(models=5, battles=2000, seed=0)
    with pytest.raises(MetaEvalError, match="owner_a and owner_b"):
        pairwise.audit(table.drop(columns=["owner_a", "owner_b"]))
    path = tmp_path / "arena.csv"
    table.drop(columns=["owner_a"]).to_csv(path, index=False)
    assert main(["battles", str(path), "--bootstrap", "0", "--audit"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_battles_command_controls_style_and_audits(tmp_path, capsys):
    table, _ = simulated_arena(models=8, battles=8000, owners=3, variants=(1, 3), tie_rate=0.1, seed=2)
    path = tmp_path / "arena.csv"
    table.to_csv(path, index=False)
    assert main(["battles", str(path), "--bootstrap", "0", "--sandwich", "--control", "len,headers",
                 "--ties", "davidson", "--inverse-propensity", "--audit", "--anchor", "m000=1000"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header[:5] == ["score", "lower", "upper", "stderr", "uncontrolled"]
    assert "covariate coefficients" in out and "\nlen " in out and "tie parameter nu" in out
    assert "audit per owner" in out and "lab01" in out
    weighted = pairwise.bradley_terry(table.assign(weight=pairwise.inverse_propensity(table)), sandwich=True,
                                      control=["len", "headers"], ties="davidson", anchor=("m000", 1000.0))
    first = out.splitlines()[2].split()
    assert first[0] == weighted.index[0] and float(first[1]) == pytest.approx(weighted["score"].iloc[0], abs=0.06)
