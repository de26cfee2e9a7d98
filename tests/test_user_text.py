"""Text a user reads speaks of metaeval and its maths: no "SPEC", no issue numbers, no
history of how the code changed. Checked on the documentation pages, the README, the
changelog, the site's navigation, every command's --help, and every string in the
package's source (docstrings, which the API reference renders, error messages, warnings,
printed lines)."""

import ast
import re
from pathlib import Path

import pytest

from metaeval.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = [ROOT / "metaeval", ROOT / "games", ROOT / "loops"]  # games and loops install as metaeval.games, .loops
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / name for name in ("README.md", "CHANGELOG.md", "mkdocs.yml")]

URL = re.compile(r"https?://\S+")
FORBIDDEN = {
    "SPEC": re.compile(r"\bSPEC\b"),
    "an issue number": re.compile(r"\bissues?\s*#?\d+|(?<![\w&#/])#\d{1,4}\b", re.I),
    "development history": re.compile(
        r"\b(?:an earlier|the previous|this) (?:release|version|commit)\b|\bbefore this change\b"
        r"|\bit used to\b|\bused to be\b",
        re.I,
    ),
}


def offences(text: str) -> list[str]:
    """Each forbidden phrase in ``text`` (URLs left out), with the line it is on."""
    found = []
    for line in URL.sub("", text).splitlines():
        for what, pattern in FORBIDDEN.items():
            if pattern.search(line):
                found.append(f"{what}: {line.strip()[:160]}")
    return found


def package_strings(path: Path) -> str:
    """Every string literal of a module (docstrings, messages, help texts, f-string parts)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return "\n".join(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str))


def subcommand_helps() -> dict[str, str]:
    parser = build_parser()
    [commands] = [action for action in parser._actions if action.choices and action.dest == "command"]
    return {"metaeval": parser.format_help()} | {
        f"metaeval {name}": sub.format_help() for name, sub in commands.choices.items()}


def test_the_checks_catch_each_kind():
    for text in ["evolve populations by rating (SPEC 5)", "the figure quoted in issue 14",
                 "Fixed in #28.", "it used to be retried four times", "An earlier release took the lowest"]:
        assert offences(text), text
    for text in ["section 3.2 of the maths page", "https://github.com/org/repo/issues/14",
                 "#### 3 players", "&#8212;", "C#1 is a note", "is used to rate"]:
        assert not offences(text), text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages(page):
    assert page.exists(), page
    assert offences(page.read_text()) == []


def test_every_commands_help():
    helps = subcommand_helps()
    assert len(helps) > 5
    assert {name: offences(text) for name, text in helps.items() if offences(text)} == {}


def test_package_strings():
    modules = sorted(p for d in PACKAGE_DIRS for p in d.rglob("*.py"))
    assert len(modules) > 50
    found = {str(p.relative_to(ROOT)): offences(package_strings(p)) for p in modules}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_no_spec_even_in_code_comments():
    """Comments may say why, but not by pointing at a document no user has."""
    found = [f"{p.relative_to(ROOT)}:{n}" for d in PACKAGE_DIRS for p in sorted(d.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if FORBIDDEN["SPEC"].search(line)]
    assert found == []
