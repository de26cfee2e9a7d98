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


def test_model_names_are_strings_not_numbers(tmp_path, capsys):
    # 1.1 and 1.10 are two models (the strongest and the weakest), 2 and 2.0 two more.
    path = tmp_path / "versions.csv"
    order = ["1.1", "2", "1.2", "2.0", "1.10"]  # best to worst
    rows = [f"{a},{b},model_a" for i, a in enumerate(order) for b in order[i + 1:] for _ in range(3)]
    rows += [f"{b},{a},model_a" for i, a in enumerate(order) for b in order[i + 1:]]
    path.write_text("model_a,model_b,winner\n" + "\n".join(rows) + "\n")
    assert main(["battles", str(path), "--bootstrap", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == order
