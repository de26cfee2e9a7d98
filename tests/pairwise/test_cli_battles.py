import numpy as np

from metaeval.cli import main
from tests.pairwise.references import simulated_battles


def test_battles_command(tmp_path, capsys):
    path = tmp_path / "battles.csv"
    simulated_battles(np.array([0.0, 100.0, 200.0]), 300, 0).to_csv(path, index=False)
    assert main(["battles", str(path), "--bootstrap", "40", "--seed", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["score", "lower", "upper", "rank", "battles"]
    assert [line.split()[0] for line in lines[2:]] == ["m002", "m001", "m000"]


def test_battles_command_errors_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("model_a,model_b,winner\na,b,model_a\n")
    assert main(["battles", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("metaeval: error: Bradley-Terry scores would be infinite") and error.count("\n") == 1
    assert main(["battles", str(tmp_path / "none.csv")]) == 2
