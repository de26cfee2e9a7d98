"""The documentation site builds with --strict, and every python block in it and in the
README runs as written (the blocks of one page in order, in one namespace, as a reader
would paste them). A ```text block right after a python block is what that block prints,
and is checked to be."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
# A python block, and the text block right after it (blank lines between), if any: its output.
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\s*^```text\n(.*?)^```)?", flags=re.S | re.M)
COMMANDS = re.compile(r"^```bash\n(.*?)^```", flags=re.S | re.M)
BLOCK_END = "-- end of a documentation block --"


def python_blocks(page: Path) -> list[tuple[str, str]]:
    """The page's python blocks, each with the output shown under it ("" where none is)."""
    return BLOCK.findall(page.read_text())


def printed_per_block(stdout: str, blocks: int) -> list[str]:
    """Split the stdout of a page's script (each block followed by a BLOCK_END line) per block."""
    parts = stdout.split(BLOCK_END + "\n")
    assert len(parts) == blocks + 1, f"expected {blocks} block ends in the output:\n{stdout[-3000:]}"
    return parts[:-1]


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
    blocks = python_blocks(page)
    script = "\n\n".join(f"{code}\nprint({BLOCK_END!r}, flush=True)" for code, _ in blocks)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{page.name}:\n{done.stderr[-3000:]}"
    for (code, shown), printed in zip(blocks, printed_per_block(done.stdout, len(blocks))):
        if shown:
            assert printed == shown, f"{page.name}: the block\n{code}\nprints\n{printed}\nnot what is shown under it"


def test_shown_output_is_read_per_block():
    page = "```python\nprint(1)\n```\n\n```text\n1\n```\n\n```python\nx = 2\n```\nprose\n\n```text\nnot output\n```\n"
    assert BLOCK.findall(page) == [("print(1)\n", "1\n"), ("x = 2\n", "")]
    assert printed_per_block(f"1\n{BLOCK_END}\n{BLOCK_END}\n", 2) == ["1\n", ""]


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
    _, demo, test = [line.split("#")[0].split() for line in text.splitlines() if line.strip()][:3]
    assert (demo, test) == (["make", "demo"], ["make", "test"]), "the README opens with its two commands"
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == "make test"  # CI runs the README's test command
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [name for name in extras if f"| `{name}` |" not in text] == [], "an extra the Install table leaves out"
