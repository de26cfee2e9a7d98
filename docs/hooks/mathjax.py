"""Serves MathJax from the site itself (a mkdocs hook, loaded by mkdocs.yml), so that the
maths renders with no network: after each build, the parts of MathJax that a page with TeX
loads (the TeX input with its extensions, HTML output with its fonts, the menu and the
accessibility code) are copied from the installed package into the site."""

import importlib.resources
import shutil
from pathlib import Path

from mkdocs.exceptions import PluginError

TARGET = "javascripts/mathjax"  # extra_javascript in mkdocs.yml loads TARGET/tex-mml-chtml.js
PARTS = ["tex-mml-chtml.js", "input/tex/extensions", "output/chtml", "ui", "a11y"]


def on_post_build(config, **kwargs) -> None:
    try:
        es5 = Path(str(importlib.resources.files("mathjax"))) / "static" / "mathjax" / "es5"
    except ModuleNotFoundError:
        es5 = None
    if es5 is None or not (es5 / PARTS[0]).is_file():
        raise PluginError("MathJax's files are not installed: pip install -e '.[docs]'")
    target = Path(config["site_dir"]) / TARGET
    for part in PARTS:
        if (es5 / part).is_dir():
            shutil.copytree(es5 / part, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(es5 / part, target / part)
