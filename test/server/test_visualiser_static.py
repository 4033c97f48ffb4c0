"""The visualiser's files as shipped: no inline script, no markup built from strings, pinned libraries.

These run without a browser; test_visualiser_browser.py drives the page itself.
"""

from __future__ import annotations

import hashlib
import html.parser
import re
from pathlib import Path

import pytest

import luigi

ROOT = Path(luigi.__file__).parent / "static" / "visualiser"
OUR_JS = sorted(p for p in (ROOT / "js").rglob("*.js"))
IMPORT = re.compile(r"""^\s*import\s[^'"]*['"]([^'"]+)['"];?\s*$""", re.MULTILINE)


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data.strip()


def test_index_html_has_no_inline_script_style_or_event_handler():
    parser = _Tags()
    parser.feed((ROOT / "index.html").read_text())
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "js/main.js"}]
    assert parser.script_text == ""
    assert not [tag for tag, _ in parser.tags if tag == "style"]
    handlers = [(tag, name) for tag, attrs in parser.tags for name in attrs if name.startswith("on")]
    assert handlers == []
    assert not [tag for tag, attrs in parser.tags if "style" in attrs]


@pytest.mark.parametrize("path", OUR_JS, ids=lambda p: str(p.relative_to(ROOT)))
def test_our_scripts_never_turn_strings_into_markup_or_code(path):
    source = path.read_text()
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//"))
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in code, f"{path.name} uses {sink}"
    assert "setAttribute('style'" not in code  # the CSP forbids inline styles


@pytest.mark.parametrize("path", OUR_JS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_import_names_a_shipped_module(path):
    for target in IMPORT.findall(path.read_text()):
        assert target.startswith("./") or target.startswith("../"), (
            f"{path.name} imports {target} from outside"
        )
        assert (path.parent / target).resolve().is_file(), f"{path.name} imports missing {target}"


def test_the_layout_library_is_pinned_with_its_licence_and_checksum():
    versions = (ROOT / "lib" / "VERSIONS.txt").read_text()
    assert "@dagrejs/dagre 3.1.3" in versions
    digest = hashlib.sha256((ROOT / "lib" / "dagre.min.js").read_bytes()).hexdigest()
    assert f"sha256:    {digest}" in versions
    for licence in ("LICENSE.dagre.txt", "LICENSE.graphlib.txt"):
        assert "Permission is hereby granted" in (ROOT / "lib" / licence).read_text()
    referenced = re.findall(
        r"importScripts\('([^']+)'\)", (ROOT / "js" / "graph" / "layout-worker.js").read_text()
    )
    loaded = [(ROOT / "js" / "graph" / r).resolve() for r in referenced]
    assert loaded == [
        (ROOT / "lib" / "dagre.min.js").resolve(),
        (ROOT / "js" / "graph" / "fold.js").resolve(),
    ]
    assert all(path.is_file() for path in loaded)


def test_nothing_is_fetched_from_another_origin():
    for path in [ROOT / "index.html", *OUR_JS, *(ROOT / "css").glob("*.css")]:
        text = path.read_text()
        urls = re.findall(r"""(?:src|href|url\(|import\s[^'"]*)['"(]?(https?://[^'")\s]+)""", text)
        assert urls == [], f"{path.name} loads {urls}"
