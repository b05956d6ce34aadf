"""The published pages render in a real headless Chromium, offline, with their tables."""

import pytest

from kit.batch import Job, run_jobs
from kit.browser import find_chromium, remote_references, render
from kit.site import write_index

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="no headless Chromium installed (Debian package 'chromium'; .ci/run installs it)")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("outputs")
    mp = pytest.MonkeyPatch()
    mp.setenv("KIT_OUTPUTS", str(out))
    params = {"model": "resnet50-torch-fp32", "small": True, "batch_sizes": [1], "warmup": 1,
              "min_duration_s": 0.05, "min_count": 3}
    records = run_jobs([Job("resnet50_small", "model_benchmark.ipynb", params, 300),
                        Job("summary", "summary.ipynb", {}, 300, after_all=True)], out=out)
    index = write_index([r.to_dict() for r in records], out, profile="test", hardware="cpu")
    yield out, index, records
    mp.undo()


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
