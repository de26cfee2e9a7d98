"""The documentation site builds with --strict, and every python block in it and in the
README runs as written (the blocks of one page in order, in one namespace, as a reader
would paste them)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
COMMANDS = re.compile(r"^```bash\n(.*?)^```", flags=re.S | re.M)


def python_blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text())


def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ["index.html", "maths/index.html", "guides/psro/index.html", "api/integrations/index.html"]:
        assert (tmp_path / "site" / page).stat().st_size > 0
    api = (tmp_path / "site" / "api" / "integrations" / "index.html").read_text()
    assert 'id="metaeval.integrations.openspiel.meta_strategy"' in api  # generated from the docstrings


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run_as_written(page, tmp_path):
    script = "\n\n".join(python_blocks(page))
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{page.name}:\n{done.stderr[-3000:]}"


def test_readme_commands_run_as_written(tmp_path):
    """The README's ``metaeval`` command lines (in ```bash blocks), each as written."""
    lines = [line for block in COMMANDS.findall((ROOT / "README.md").read_text()) for line in block.splitlines()]
    assert lines and all(line.startswith("metaeval ") for line in lines), lines
    for line in lines:
        done = subprocess.run([sys.executable, "-m", "metaeval.cli", *line.split()[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{line}:\n{done.stderr[-3000:]}"


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\((docs/[^)#]+)", text):  # every link into the site exists
        assert (ROOT / target).exists(), target
