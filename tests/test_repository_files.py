"""The files a user or an indexer reads before the code: the citation, the license and the
changelog agree with the package's metadata."""

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_citation_is_cff_1_2_0_with_the_required_keys():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["message"].strip() and citation["title"].strip()
    assert citation["authors"] and all(a.get("name") or a.get("family-names") for a in citation["authors"])
    assert citation["version"] == PROJECT["version"]
    assert citation["license"] == PROJECT["license"] == "MIT"
    for reference in citation.get("references", []):  # each needs type, title and authors in CFF 1.2.0
        assert reference["type"] and reference["title"] and reference["authors"]


def test_license_is_mit_held_by_the_metaeval_authors():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 The metaeval authors" in text
    assert PROJECT["license-files"] == ["LICENSE"]


def test_changelog_has_an_entry_for_this_version():
    headings = [line for line in (ROOT / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    assert headings and headings[0].split()[1] == PROJECT["version"]
