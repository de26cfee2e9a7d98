"""The API reference as a reader sees it: built with --strict, cross-references rendered as
links (no Sphinx role left as raw text) to objects it documents, every object documented
once, every function listed with its arguments and what it returns, the examples right."""

import ast
import doctest
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW_ROLE = re.compile(r":(mod|class|func|meth|attr|data|exc|obj):(`|<code>)")
HEADING = re.compile(r'<h\d id="([^"]+)" class="doc doc-heading"')
CROSS_REFERENCE = re.compile(r"\[`[^`]+`\]\[([\w.]+)\]")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


@pytest.fixture(scope="module")
def source():
    """The package as the reference reads it (with the same Griffe extension)."""
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)], docstring_parser=griffe.Parser.google,
                                 docstring_options={"warn_missing_types": False},
                                 extensions=griffe.load_extensions(f"{ROOT}/docs/hooks/reference.py:Reference"))
    loader.load("metaeval")
    loader.resolve_aliases(implicit=False)
    return loader.modules_collection


def documented(site, source):
    """(page, heading anchor, the object it documents) for every object in the reference."""
    for page in sorted((site / "api").rglob("index.html")):
        for anchor in HEADING.findall(page.read_text()):
            found = source[anchor]
            yield page.parent.name, anchor, found.final_target if found.is_alias else found


def gives_a_value(function: griffe.Function) -> bool:
    """Whether the function's own body returns a value or yields."""
    node = ast.parse(textwrap.dedent(function.source)).body[0]
    stack = list(node.body)
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.Yield, ast.YieldFrom)) or (isinstance(child, ast.Return) and child.value is not None):
            return True
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(child))
    return False


def test_no_sphinx_role_is_left_as_raw_text(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) > 14
    raw = {str(p.relative_to(site)): RAW_ROLE.findall(p.read_text()) for p in pages}
    assert not {page: len(found) for page, found in raw.items() if found}
    ratings = (site / "api" / "ratings" / "index.html").read_text()
    assert 'href="#metaeval.ratings.bootstrap"' in ratings  # rate()'s reference to the bootstrap module is a link


def test_every_object_is_documented_once(site, source):
    where = {}  # the object a heading documents (an alias's target) -> the headings that document it
    for page, anchor, target in documented(site, source):
        where.setdefault(target.path, []).append(f"{page}#{anchor}")
    assert len(where) > 300
    assert {path: pages for path, pages in where.items() if len(pages) > 1} == {}


def test_every_function_listed_has_its_arguments_and_returns(site, source):
    functions = [target for _, _, target in documented(site, source) if target.is_function]
    assert len(functions) > 200
    incomplete = {}
    for function in functions:
        sections = {section.kind.value: section for section in function.docstring.parsed}
        described = {p.name.lstrip("*") for kind in ("parameters", "other parameters")
                     for p in (sections[kind].value if kind in sections else [])}
        undescribed = [p.name for p in function.parameters if p.name not in ("self", "cls") and p.name not in described]
        no_returns = gives_a_value(function) and not {"returns", "yields"} & set(sections)
        if undescribed or no_returns:
            incomplete[function.path] = (undescribed, "no Returns" if no_returns else "")
    assert incomplete == {}


def test_every_cross_reference_in_the_docstrings_is_to_a_documented_object(site, source):
    """The strict build checks the docstrings it renders; this checks them all."""
    anchors = {anchor for _, anchor, _ in documented(site, source)}
    unknown = []
    for path in [*(ROOT / "metaeval").rglob("*.py"), *(ROOT / "loops").rglob("*.py"), *(ROOT / "games").rglob("*.py")]:
        for target in CROSS_REFERENCE.findall(path.read_text()):
            try:
                found = source[target]
                final = found.final_target if found.is_alias else found
                names = {found.path, final.path, *final.aliases}
            except (KeyError, griffe.AliasResolutionError):
                names = {target}
            if not names & anchors:
                unknown.append(f"{path.relative_to(ROOT)}: {target}")
    assert unknown == []


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
