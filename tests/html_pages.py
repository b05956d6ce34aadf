"""Read a published page without a browser: its tables' cells, its links, its visible text."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

BLOCKS = {
    "br",
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "tr",
    "td",
    "th",
    "table",
    "h1",
    "h2",
    "h3",
    "h4",
    "details",
    "summary",
    "title",
    "body",
}


class Page(HTMLParser):
    """Tables (each a list of rows, each a list of cell texts), hrefs, and the text outside
    <style> and <script>."""

    def __init__(self, page: str):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self._open: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._skip = 0
        self.feed(page)

    def _break(self, tag: str) -> None:
        """Block elements and <br> separate words; inline ones (<b>, <a>) do not."""
        if tag in BLOCKS:
            self.handle_data(" ")

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._break(tag)
        if tag in ("style", "script"):
            self._skip += 1
        elif tag == "table":
            self._open.append([])
        elif tag == "tr" and self._open:
            self._open[-1].append([])
        elif tag in ("td", "th") and self._open and self._open[-1]:
            self._cell = []
        elif tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])

    def handle_endtag(self, tag):
        self._break(tag)
        if tag in ("style", "script"):
            self._skip -= 1
        elif tag in ("td", "th") and self._cell is not None and self._open and self._open[-1]:
            self._open[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table" and self._open:
            self.tables.append(self._open.pop())

    def handle_data(self, data):
        if self._skip:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    @property
    def plain(self) -> str:
        return " ".join("".join(self.text).split())

    def cells(self) -> list[str]:
        return [c for t in self.tables for row in t for c in row]


def read(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def broken_links(path: Path) -> list[str]:
    """The page's relative links that name no file (anchors and remote addresses left aside)."""
    out = []
    for href in read(path).hrefs:
        url = urlparse(href)
        if url.scheme or not url.path:
            continue
        if not (path.parent / unquote(url.path)).exists():
            out.append(href)
    return out
