"""The API reference (docs/api.md) builds clean, and shows every exported name with its docstring.

The build (``docs/build_api.py``, pdoc) runs once, in a subprocess of its own (it imports every
module, the optional ones too, and sets what ``merge.monitor`` imports lazily), with every warning
an error: a name of ``__all__`` without a docstring, a cross-reference that links nowhere, an
annotation pdoc cannot read all fail it. Then the pages themselves are read: each name of the
public packages' ``__all__`` has its entry (an element of that id) and, in it, a docstring.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The packages whose every exported name the reference must show, each on its own page.
PACKAGES = ["merge", "merge.store", "merge.testing", "merge.monitor"]
#: Elements that have no end tag.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Entries(HTMLParser):
    """The entries of a pdoc page (``<section id=NAME>``) → the text of each one's own docstring
    (its ``<div class="docstring">`` child, not a member's deeper down)."""

    def __init__(self) -> None:
        super().__init__()
        self.docstrings: dict[str, str] = {}
        self._depth = 0
        self._entry: tuple[str, int] | None = None  # the open entry: its id, its depth
        self._docstring_depth: int | None = None  # the depth of its docstring, while inside it

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        self._depth += 1
        found = dict(attrs)
        if tag == "section" and found.get("id"):
            self._entry = (str(found["id"]), self._depth)
            self.docstrings[self._entry[0]] = ""
        elif (
            tag == "div"
            and "docstring" in (found.get("class") or "").split()
            and self._entry is not None
            and self._depth == self._entry[1] + 1
        ):
            self._docstring_depth = self._depth

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self._docstring_depth == self._depth:
            self._docstring_depth = None
        if self._entry is not None and self._entry[1] == self._depth:
            self._entry = None
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._docstring_depth is not None and self._entry is not None:
            self.docstrings[self._entry[0]] += data


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("api")
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "build_api.py"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return out


def test_the_reference_builds_with_warnings_as_errors(reference: Path) -> None:
    assert (reference / "index.html").is_file()
    assert (reference / "search.js").is_file()
    front = (reference / "merge.html").read_text("utf-8")
    for package in PACKAGES:
        page = f"{package.replace('.', '/')}.html"
        assert (reference / page).is_file(), package
        # Reached from the API's page (pdoc alone lists only the submodules named in __all__).
        assert package == "merge" or f'href="{page}"' in front, package


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_has_an_entry_with_its_docstring(reference: Path, package: str) -> None:
    page = Entries()
    page.feed((reference / f"{package.replace('.', '/')}.html").read_text("utf-8"))
    exported = importlib.import_module(package).__all__
    missing = [name for name in exported if name not in page.docstrings]
    undocumented = [
        name for name in exported if name in page.docstrings and not page.docstrings[name].strip()
    ]
    assert not missing, f"{package}: no entry for {missing}"
    assert not undocumented, f"{package}: no docstring shown for {undocumented}"
