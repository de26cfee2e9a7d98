"""The API reference as a reader sees it: built with --strict, cross-references rendered as
links (no Sphinx role left as raw text), every object documented once, the examples right."""

import doctest
import re
import subprocess
import sys
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW_ROLE = re.compile(r":(mod|class|func|meth|attr|data|exc|obj):(`|<code>)")
HEADING = re.compile(r'<h\d id="([^"]+)" class="doc doc-heading"')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_no_sphinx_role_is_left_as_raw_text(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) > 14
    raw = {str(p.relative_to(site)): RAW_ROLE.findall(p.read_text()) for p in pages}
    assert not {page: len(found) for page, found in raw.items() if found}
    ratings = (site / "api" / "ratings" / "index.html").read_text()
    assert 'href="#metaeval.ratings.bootstrap"' in ratings  # rate()'s reference to the bootstrap module is a link


def test_every_object_is_documented_once(site):
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)],
                                 extensions=griffe.load_extensions(f"{ROOT}/docs/hooks/reference.py:Reference"))
    loader.load("metaeval")
    loader.resolve_aliases(implicit=False)
    where = {}  # the object a heading documents (an alias's target) -> the headings that document it
    for page in sorted((site / "api").rglob("index.html")):
        for anchor in HEADING.findall(page.read_text()):
            documented = loader.modules_collection[anchor]
            target = documented.final_target if documented.is_alias else documented
            where.setdefault(target.path, []).append(f"{page.parent.name}#{anchor}")
    assert len(where) > 300
    assert {path: pages for path, pages in where.items() if len(pages) > 1} == {}


def test_internal_constants_are_kept_out(site):
    ratings = (site / "api" / "ratings" / "index.html").read_text()
    assert 'id="metaeval.ratings.deviation.MASS_FLOOR"' not in ratings
    assert 'id="metaeval.ratings.RATERS"' in ratings  # a registry its package exports stays


def test_the_games_example_runs_as_shown():
    import metaeval.games

    result = doctest.testmod(metaeval.games)
    assert result.attempted >= 3 and result.failed == 0


def test_the_site_loads_nothing_from_outside(site):
    """Maths renders offline: MathJax is served by the site itself, and no page loads a
    script, style sheet or font from elsewhere."""
    outside = re.compile(r'<(script|link)\b[^>]*\b(src|href)="(https?:)?//')
    for page in site.rglob("*.html"):
        assert not outside.search(page.read_text()), page.relative_to(site)
    maths = (site / "maths" / "index.html").read_text()
    assert 'src="../javascripts/mathjax/tex-mml-chtml.js"' in maths
    assert (site / "javascripts" / "mathjax" / "tex-mml-chtml.js").stat().st_size > 500_000
    assert list((site / "javascripts" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
