"""The published pages render in a real headless Chromium, offline, with their tables; screenshots
of the index, the scorecard report and a model report at 1280 and 390 px wide go to
outputs/screenshots/ (look at them: issue 27 #4, a report read at a glance)."""

import struct

import pytest

from tests.browser import find_chromium, remote_references, render

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="no headless Chromium installed (Debian package 'chromium'; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def site(published_site):
    """The tiny batch of tests/conftest.py: (outputs, index.html, its job records in order)."""
    out, index, records = published_site
    return out, index, [records["resnet50_small"], records["summary"]]


def test_index_and_report_render_offline_with_tables(site, tmp_path):
    out, index, records = site
    for page in (index, out / records[0].html, out / records[1].html):
        html = page.read_text()
        assert remote_references(html) == [], page.name
        shot = tmp_path / f"{page.stem}.png"
        dom, requested = render(page, screenshot=shot)
        assert requested == [], f"{page.name} asked the network for {requested}"
        assert "<table" in dom
        assert shot.exists() and shot.stat().st_size > 10_000  # a real screenshot, not blank
    index_dom, _ = render(index)
    assert "resnet50_small" in index_dom and "summary" in index_dom


def test_remote_reference_detector():
    assert remote_references('<script src="https://cdn.example/x.js"></script>')
    assert remote_references("<style>@import url(https://fonts.example/f.css)</style>")
    assert not remote_references('<img src="data:image/png;base64,AAAA">')


def _scorecard_rows(dom: str) -> list[dict]:
    """Rows of the scorecard table as the browser left them: attributes and cells (attrs, text)."""
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.inside, self.cell = [], False, None

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "table" and attrs.get("id") == "scorecard":
                self.inside = True
            elif self.inside and tag == "tr" and "data-verdict" in attrs:
                self.rows.append({"attrs": attrs, "cells": []})
            elif self.inside and tag == "td" and self.rows:
                self.cell = [attrs, ""]
                self.rows[-1]["cells"].append(self.cell)

        def handle_data(self, data):
            if self.cell is not None:
                self.cell[1] += data

        def handle_endtag(self, tag):
            if tag == "td":
                self.cell = None
            elif tag == "table":
                self.inside = False

    parser = Rows()
    parser.feed(dom)
    return parser.rows


def _shots_dir():
    from kit.paths import project_root

    d = project_root() / "outputs" / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_index_headline_chart_and_sortable_filterable_scorecard(site):
    import re

    out, index, _ = site
    shots = _shots_dir()
    dom, requested = render(index, screenshot=shots / "index.png")
    assert requested == []
    chart = dom.split('id="headline-chart"', 1)[1].split("</svg>", 1)[0]
    assert chart.count('class="pub"') >= 14 + 6 + 1  # 14 C600 rows, 6 C2 rows and the legend
    assert (
        "resnet50-torch-fp32 FP16" in chart and "published: " in chart and 'class="meas"' in chart
    )
    rows = _scorecard_rows(dom)
    assert len(rows) > 50
    assert not any(
        text.strip() in ("None", "nan", "NaN", "") for r in rows for _, text in r["cells"]
    )
    # sorted by the published figure (column 2), descending, from the address as a click leaves it
    dom_sorted, _ = render(index, screenshot=shots / "index-sorted.png", fragment="sort=2:desc")
    published = [
        float(r["cells"][2][0]["data-v"])
        for r in _scorecard_rows(dom_sorted)
        if "data-v" in r["cells"][2][0]
    ]
    assert len(published) > 50 and published == sorted(published, reverse=True)
    assert "sorted-desc" in dom_sorted
    # filtered to one model and one verdict: every other row hidden, the count says how many are
    # shown
    dom_filtered, _ = render(
        index,
        screenshot=shots / "index-filtered.png",
        fragment="q=resnet50&verdict=not%20comparable",
    )
    filtered = _scorecard_rows(dom_filtered)
    visible = [r for r in filtered if "display: none" not in r["attrs"].get("style", "")]
    assert 0 < len(visible) < len(filtered)
    assert all(
        r["attrs"]["data-verdict"] == "not comparable" and "resnet50" in r["cells"][1][1]
        for r in visible
    )
    assert re.search(r'<span id="shown">(\d+) rows</span>', dom_filtered).group(1) == str(
        len(visible)
    )


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


@pytest.mark.parametrize("width,height", [(1280, 2000), (390, 2400)])
def test_screenshots_of_index_scorecard_and_model_report(site, width, height):
    """Each page at a desktop and a phone width: rendered offline, the glance (index), the scorecard
    sections (summary) and the verdict sentence (model report) in the DOM Chromium built."""
    out, index, records = site
    shots = _shots_dir()
    pages = {
        "index": (index, "At a glance"),
        "scorecard": (out / records[1].html, "ByteMLPerf C600 headline rows"),
        "model-report": (
            out / records[0].html,
            "published on the C600 at batch 32: <b>not comparable</b>",
        ),
    }
    for name, (page, words) in pages.items():
        shot = shots / f"{name}-{width}.png"
        shot.unlink(missing_ok=True)
        dom, requested = render(page, screenshot=shot, size=f"{width},{height}")
        assert requested == [], f"{name} asked the network for {requested}"
        assert words in dom, name
        # drawn, not blank
        assert png_size(shot) == (width, height) and shot.stat().st_size > 10_000, name
