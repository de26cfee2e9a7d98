"""What the API reference reads from the source (a Griffe extension, loaded by mkdocs.yml).

- Packages installed from another folder (``[tool.setuptools.package-dir]`` of
  pyproject.toml: ``games/`` is ``metaeval.games``) are read under their installed names,
  so that their pages, headings and cross-references say ``metaeval.games``.
- A module constant (an UPPER_CASE name) is public only if its module's ``__all__`` lists
  it: the registries (``RATERS``, ``RESPONDERS``, ...) are; tolerances and file names are
  the module's own business.
- Special methods (``__deepcopy__``, ...) implement Python's protocols; they are not listed.
"""

import re
import tomllib
from pathlib import Path

import griffe

CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")


class Reference(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        pyproject = Path(pkg.filepath).parents[1] / "pyproject.toml"
        settings = tomllib.loads(pyproject.read_text()) if pyproject.is_file() else {}
        folders = settings.get("tool", {}).get("setuptools", {}).get("package-dir", {})
        for installed, folder in folders.items():
            parent, _, name = installed.rpartition(".")
            if parent == pkg.name and name == folder:
                sub = loader.load(folder, try_relative_path=False)
                del loader.modules_collection.members[folder]  # one name for it: the installed one
                pkg.set_member(name, sub)
        hide_internals(pkg)


def hide_internals(parent: griffe.Object) -> None:
    for name, member in parent.members.items():
        if member.is_alias:
            continue
        if member.is_module or member.is_class:
            hide_internals(member)
        if parent.is_module and member.is_attribute and CONSTANT.match(name) and name not in (parent.exports or ()):
            member.public = False
        if parent.is_class and member.is_function and name.startswith("__") and name.endswith("__"):
            member.public = False
