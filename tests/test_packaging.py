"""A wheel built from the repository installs quietly and works outside the source tree."""

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_AT_ROOT = {".git", ".venv", "runs", "build", "docs", "site", ".pytest_cache", ".hypothesis"}


def _skip(directory, names):
    """What a fresh clone would not have (and the figures, which the wheel does not ship)."""
    at_root = Path(directory) == ROOT
    return [n for n in names if (at_root and n in SKIP_AT_ROOT) or n == "__pycache__" or n.endswith(".egg-info")]


def _dependency_dirs() -> list[str]:
    """The directories this interpreter imports metaeval's dependencies from."""
    names = [re.split(r"[<>=\[ ]", d)[0] for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    modules = {"open_spiel": "open_spiel", "pygambit": "pygambit"}
    dirs = set()
    for name in names:
        spec = importlib.util.find_spec(modules.get(name, name.replace("-", "_")))
        assert spec is not None and spec.origin, f"dependency {name} is not importable here"
        package = spec.submodule_search_locations is not None  # a package's origin is its __init__.py
        dirs.add(str(Path(spec.origin).parents[1 if package else 0]))
    return sorted(dirs)


def _run(args, **options):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **options)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_wheel_builds_without_warnings_installs_in_a_clean_venv_and_rates_a_shipped_table(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_skip)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                  "-w", tmp_path / "dist", source])
    assert "Package would be ignored" not in built.stdout + built.stderr
    assert "SetuptoolsDeprecationWarning" not in built.stdout + built.stderr
    wheel = next((tmp_path / "dist").glob("metaeval-*.whl"))

    # A clean virtualenv that sees the dependencies installed here (not metaeval itself:
    # a path in a .pth file is not a site directory, so the editable install's hook stays out).
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    target = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    (target / "dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel])

    where = _run([python, "-c", "import metaeval, importlib.resources as r; print(metaeval.__file__); "
                  "print(r.files('metaeval.data') / 'published' / 'atari_rainbow_table6.csv')"], cwd=tmp_path)
    module, table = where.stdout.split()
    assert module.startswith(str(env_dir)) and table.startswith(str(env_dir))  # the installed copy, not the source
    rated = _run([env_dir / "bin" / "metaeval", "rate", table, "--layout", "columns", "--rater", "uniform",
                  "--plot", tmp_path / "rainbow.png"], cwd=tmp_path)
    ranking = [line.split()[1] for line in rated.stdout.splitlines()[1:] if line.split()[0].isdigit()]
    assert ranking[0] == "rainbow" and len(ranking) == 8  # Rainbow leads its own Table 6
    assert (tmp_path / "rainbow.png").stat().st_size > 0
